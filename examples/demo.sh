#!/usr/bin/env bash
# The main job: FlowGRPO training of the toy policy of examples/flowgrpo-toy
# on the CPU. omnic compiles the whole program (autodiff, fusion, memory
# plan, native kernels) into step.bin; `omnirun --train` runs the training
# iterations with safetensors checkpoints and a JSONL metrics log. The
# first iteration is cross-checked against the reference evaluator.
set -euo pipefail
BUILD_DIR=${1:-build}
ITERATIONS=${ITERATIONS:-10}
cd "$(dirname "$0")/.."
BIN="$BUILD_DIR/bin"
WORK="$BUILD_DIR/demo"
rm -rf "$WORK" && mkdir -p "$WORK/state"

echo "== omni demo: FlowGRPO on a toy MLP policy (2 prompts x 4 samples, 4 SDE steps, jpeg_compressibility) =="
start=$(date +%s%N)
"$BIN/omnic" examples/flowgrpo-toy/toy.mlir -o "$WORK/toy.bin"
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
echo "omnic: compiled examples/flowgrpo-toy/toy.mlir to $WORK/toy.bin" \
  "($(stat -c %s "$WORK/toy.bin") bytes) in ${elapsed_ms} ms"
echo
"$BIN/omnirun" "$WORK/toy.bin" --train --steps="$ITERATIONS" --seed=7 \
  --checkpoint-dir="$WORK/checkpoints" --checkpoint-every=5 \
  --metrics="$WORK/metrics.jsonl"
echo "checkpoints: $(ls "$WORK/checkpoints" | tr '\n' ' ')"
echo "metrics:     $WORK/metrics.jsonl"

# Cross-check iteration 0 on the reference evaluator (the oracle).
outs=()
for i in $(seq 0 12); do outs+=(--output=@"$WORK/state/$i.npy"); done
"$BIN/omnirun" "$WORK/toy.bin" --function=init_state --input=i64=7 "${outs[@]}"
ins=() skip=()
for i in $(seq 0 12); do
  ins+=(--input=@"$WORK/state/$i.npy")
  skip+=(--output=@/dev/null)
done
"$BIN/omni-opt" examples/flowgrpo-toy/toy.mlir --omni-autodiff -o "$WORK/toy-ad.mlir"
ref=$("$BIN/omni-eval" "$WORK/toy-ad.mlir" --function=train_step "${ins[@]}" \
  --input=i64=7 --input=i64=0 "${skip[@]}" --output=- --output=- --output=- |
  sed -e 's/.*=//' | tr '\n' ' ')
echo
echo "reference evaluator, iteration 0: loss reward_mean grad_norm = $ref"
echo
echo "Coming next: SD3 MMDiT and VAE frontends and the full recipe (issue 6),"
echo "parity and speed against PyTorch (issue 7)."
