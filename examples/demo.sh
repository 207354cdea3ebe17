#!/usr/bin/env bash
# The main job: FlowGRPO training of the toy policy of examples/flowgrpo-toy
# on the CPU. omnic compiles the whole program (autodiff, fusion, memory
# plan, native kernels) into step.bin; omnirun runs one training iteration
# per call, keeping parameters and AdamW state in .npy files between
# iterations. The last iteration is checked against the reference evaluator.
set -euo pipefail
BUILD_DIR=${1:-build}
ITERATIONS=${ITERATIONS:-10}
cd "$(dirname "$0")/.."
BIN="$BUILD_DIR/bin"
WORK="$BUILD_DIR/demo"
rm -rf "$WORK" && mkdir -p "$WORK/a" "$WORK/b"

echo "== omni demo: FlowGRPO on a toy MLP policy (2 prompts x 4 samples, 4 SDE steps, jpeg_compressibility) =="
start=$(date +%s%N)
"$BIN/omnic" examples/flowgrpo-toy/toy.mlir -o "$WORK/toy.bin"
elapsed_ms=$((($(date +%s%N) - start) / 1000000))
echo "omnic: compiled examples/flowgrpo-toy/toy.mlir to $WORK/toy.bin" \
  "($(stat -c %s "$WORK/toy.bin") bytes) in ${elapsed_ms} ms"

names=(w1 b1 w2 b2 mw1 mb1 mw2 mb2 vw1 vb1 vw2 vb2 t)
"$BIN/omnirun" "$WORK/toy.bin" --function=init --input=i64=7 \
  --output=@"$WORK/a/w1.npy" --output=@"$WORK/a/b1.npy" \
  --output=@"$WORK/a/w2.npy" --output=@"$WORK/a/b2.npy"
outs=()
for n in mw1 mb1 mw2 mb2 vw1 vb1 vw2 vb2 t; do outs+=(--output=@"$WORK/a/$n.npy"); done
"$BIN/omnirun" "$WORK/toy.bin" --function=init_optimizer "${outs[@]}"

src=a dst=b
printf '%-10s %-15s %-15s %-12s\n' iteration loss reward_mean grad_norm
for ((it = 0; it < ITERATIONS; it++)); do
  ins=() outs=()
  for n in "${names[@]}"; do
    ins+=(--input=@"$WORK/$src/$n.npy")
    outs+=(--output=@"$WORK/$dst/$n.npy")
  done
  line=$("$BIN/omnirun" "$WORK/toy.bin" --function=train_step "${ins[@]}" \
    --input=i64=7 --input=i64="$it" "${outs[@]}" --output=- --output=- --output=- |
    sed -e 's/.*=//' | tr '\n' ' ')
  read -r loss reward norm <<<"$line"
  printf '%-10s %-15s %-15s %-12s\n' "$it" "$loss" "$reward" "$norm"
  last_in=("${ins[@]}") last_it=$it
  tmp=$src src=$dst dst=$tmp
done

# Cross-check the last iteration on the reference evaluator (the oracle).
"$BIN/omni-opt" examples/flowgrpo-toy/toy.mlir --omni-autodiff -o "$WORK/toy-ad.mlir"
skip=(); for n in "${names[@]}"; do skip+=(--output=@/dev/null); done
ref=$("$BIN/omni-eval" "$WORK/toy-ad.mlir" --function=train_step "${last_in[@]}" \
  --input=i64=7 --input=i64="$last_it" "${skip[@]}" --output=- --output=- --output=- |
  sed -e 's/.*=//' | tr '\n' ' ')
echo
echo "reference evaluator, iteration $last_it: loss reward_mean grad_norm = $ref"
echo
echo "Coming next: omnirun's own training loop with checkpoints, SD3 MMDiT and"
echo "VAE frontends and the full recipe (issue 6), parity and speed against"
echo "PyTorch (issue 7)."
