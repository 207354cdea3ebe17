#!/usr/bin/env bash
# The main job: FlowGRPO training of the toy policy of examples/flowgrpo-toy
# on the CPU. Until omnic/omnirun run compiled programs (issue 5), the
# program runs on the reference evaluator: omni-opt expands the gradient
# (omni-autodiff), omni-eval runs each training iteration and keeps the
# parameters and AdamW state in .npy files between iterations.
set -euo pipefail
BUILD_DIR=${1:-build}
ITERATIONS=${ITERATIONS:-10}
cd "$(dirname "$0")/.."
BIN="$BUILD_DIR/bin"
WORK="$BUILD_DIR/demo"
rm -rf "$WORK" && mkdir -p "$WORK/a" "$WORK/b"

echo "== omni demo: FlowGRPO on a toy MLP policy (2 prompts x 4 samples, 4 SDE steps, jpeg_compressibility) =="
"$BIN/omni-opt" examples/flowgrpo-toy/toy.mlir --omni-autodiff -o "$WORK/toy.mlir"

names=(w1 b1 w2 b2 mw1 mb1 mw2 mb2 vw1 vb1 vw2 vb2 t)
"$BIN/omni-eval" "$WORK/toy.mlir" --function=init --input=i64=7 \
  --output=@"$WORK/a/w1.npy" --output=@"$WORK/a/b1.npy" \
  --output=@"$WORK/a/w2.npy" --output=@"$WORK/a/b2.npy"
outs=()
for n in mw1 mb1 mw2 mb2 vw1 vb1 vw2 vb2 t; do outs+=(--output=@"$WORK/a/$n.npy"); done
"$BIN/omni-eval" "$WORK/toy.mlir" --function=init_optimizer "${outs[@]}"

src=a dst=b
printf '%-10s %-14s %-14s %-10s\n' iteration loss reward_mean grad_norm
for ((it = 0; it < ITERATIONS; it++)); do
  ins=() outs=()
  for n in "${names[@]}"; do
    ins+=(--input=@"$WORK/$src/$n.npy")
    outs+=(--output=@"$WORK/$dst/$n.npy")
  done
  line=$("$BIN/omni-eval" "$WORK/toy.mlir" --function=train_step "${ins[@]}" \
    --input=i64=7 --input=i64="$it" "${outs[@]}" --output=- --output=- --output=- |
    sed -e 's/.*=//' | tr '\n' ' ')
  read -r loss reward norm <<<"$line"
  printf '%-10s %-14s %-14s %-10s\n' "$it" "$loss" "$reward" "$norm"
  tmp=$src src=$dst dst=$tmp
done
echo
echo "Ran on the reference evaluator (the oracle). Coming next: omnic compiles"
echo "this program to native code and omnirun trains it (issue 5), then SD3"
echo "MMDiT frontends and the full recipe with checkpoints (issue 6)."
