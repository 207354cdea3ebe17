#!/usr/bin/env bash
# The main job: FlowGRPO training of a tiny SD3 MMDiT with a tiny VAE
# decoder on the CPU, end to end through omni's three tools:
#   omnigen  writes the training program (frontends/recipes/flowgrpo) for
#            the model and decoder configs (examples/flowgrpo/train.mlir is
#            this program, kept in sync by a test);
#   omnic    compiles it ahead of time (autodiff, fusion, memory plan,
#            native kernels) into step.bin;
#   omnirun  trains: rollout, jpeg_compressibility reward, advantages,
#            clipped policy-gradient loss, AdamW, with checkpoints, a
#            metrics log and PNG sample grids.
# One config file drives both ends: examples/flowgrpo/omni.toml holds the
# model, decoder and recipe (omnigen) and the run (omnirun: iterations,
# seed, checkpoint and sample intervals); docs/config.md. ITERATIONS, when
# set, overrides the file's steps with a flag.
# It ends with the reward of the first vs the last 10 iterations.
set -euo pipefail
BUILD_DIR=${1:-build}
cd "$(dirname "$0")/.."
BIN="$BUILD_DIR/bin"
WORK="$BUILD_DIR/demo"
CONFIG=examples/flowgrpo/omni.toml
rm -rf "$WORK" && mkdir -p "$WORK"
STEPS=()
if [ -n "${ITERATIONS:-}" ]; then STEPS=(--steps "$ITERATIONS"); fi
ITERATIONS=${ITERATIONS:-$(sed -n 's/^steps = \([0-9]*\).*/\1/p' "$CONFIG")}

echo "== omni demo: FlowGRPO on a tiny SD3 MMDiT + VAE decoder (4 prompts x 8 samples, 10 SDE steps, window 2, 32x32 images, jpeg_compressibility) =="
echo "config:  $CONFIG"
"$BIN/omnigen" --config "$CONFIG" -o "$WORK/train.mlir"
echo "omnigen: wrote $WORK/train.mlir ($(wc -l < "$WORK/train.mlir") lines)"
start=$(date +%s%N)
"$BIN/omnic" "$WORK/train.mlir" -o "$WORK/step.bin"
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
echo "omnic:   compiled it to $WORK/step.bin ($(stat -c %s "$WORK/step.bin") bytes) in ${elapsed_ms} ms"
echo
"$BIN/omnirun" "$WORK/step.bin" --config "$CONFIG" --out "$WORK/run" \
  ${STEPS[@]+"${STEPS[@]}"}
echo
python3 examples/flowgrpo/summarize.py "$WORK/run/metrics.jsonl"
echo "samples:     $WORK/run/samples/ ($(ls "$WORK/run/samples" | tr '\n' ' '))"
echo "metrics:     $WORK/run/metrics.jsonl"
echo "checkpoints: $WORK/run/ ($(cd "$WORK/run" && ls *.safetensors | tr '\n' ' '))"
echo "resume with: $BIN/omnirun $WORK/step.bin --config $CONFIG --steps $((ITERATIONS + 40)) --resume $WORK/run"
