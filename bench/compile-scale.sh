#!/usr/bin/env bash
# Compile-scale benchmark (issue 6): omnigen writes the FlowGRPO training
# program of a model preset, omnic compiles it; prints omnic's wall time
# and peak resident memory (GNU time). The default is the SD3.5-Medium
# transformer at 512x512 (64x64 latents, 333 text tokens) with the real
# SD3 VAE decoder, 1 prompt x 2 samples, 10 steps, window 2.
#   bench/compile-scale.sh [build-dir] [extra omnigen flags...]
set -euo pipefail
BUILD_DIR=${1:-build}
shift || true
cd "$(dirname "$0")/.."
BIN="$BUILD_DIR/bin"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
if [ $# -eq 0 ]; then
  set -- --model=sd3 --config=sd3.5-medium --set=latent_size=64 \
    --decoder=autoencoder_kl --decoder-config=sd3 \
    --opt=prompts_per_iteration=1 --opt=group_size=2
fi
/usr/bin/time -f "omnigen: %e s, peak %M KiB" "$BIN/omnigen" "$@" -o "$WORK/train.mlir"
echo "train.mlir: $(stat -c %s "$WORK/train.mlir") bytes"
/usr/bin/time -f "omnic: %e s, peak %M KiB" "$BIN/omnic" "$WORK/train.mlir" -o "$WORK/step.bin"
echo "step.bin: $(stat -c %s "$WORK/step.bin") bytes"
