#!/usr/bin/env bash
# Builds the bundle that tools/gpu-check/run.sh runs on a machine with an
# NVIDIA GPU (README.md): omnirun and the shared libraries a bare GPU
# machine may lack, the per-op programs (ops.mlir) and the tiny FlowGRPO
# recipe compiled for cpu and for cuda from the same .mlir, their inputs
# and the cpu driver's outputs, the SD3.5-Medium-shape recipe compiled for
# cuda (xz), and the PyTorch baseline with the pure-python wheels it
# needs. Fails when the bundle would exceed 60 MiB.
#
#   tools/gpu-check/prepare.sh [options]
#     --build DIR     the build folder (default build/; built first unless
#                     --no-build)
#     --out DIR       the bundle (default tools/gpu-check/bundle, ignored)
#     --targets LIST  "cpu cuda" (default) or "cpu": without cuda (no
#                     omnic --target=cuda yet) run.sh still runs and says so
#     --no-sd35m      leave out the SD3.5-Medium-shape recipe (its compile
#                     takes minutes and GBs of memory)
#     --no-torch      leave out the PyTorch baseline (no wheel downloads)
#     --no-build      use the build folder as it is
#     --max-mib N     the size limit (default 60)
#     --sd35m-flag F  one more omnigen flag for the SD3.5-Medium recipe,
#                     which is bf16 (--opt=precision=bf16: the precision
#                     of the MFU target), e.g. --opt=precision=f32
#                     (repeatable, the last one wins; run.sh runs the torch
#                     baseline in the same precision)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
BUILD="$ROOT/build"
OUTDIR="$HERE/bundle"
TARGETS="cpu cuda"
SD35M=1 TORCH=1 BUILDING=1 MAX_MIB=60
SD_EXTRA=()
while [ $# -gt 0 ]; do
  case "$1" in
    --build) BUILD="$(cd "$2" && pwd)"; shift 2 ;;
    --out) OUTDIR="$2"; shift 2 ;;
    --targets) TARGETS="$2"; shift 2 ;;
    --no-sd35m) SD35M=0; shift ;;
    --no-torch) TORCH=0; shift ;;
    --no-build) BUILDING=0; shift ;;
    --max-mib) MAX_MIB="$2"; shift 2 ;;
    --sd35m-flag) SD_EXTRA+=("$2"); shift 2 ;;
    *) echo "prepare.sh: unknown option '$1' (see the header of $0)" >&2
       exit 1 ;;
  esac
done
BIN="$BUILD/bin"
say() { echo "prepare.sh: $*" >&2; }
if [ "$BUILDING" = 1 ]; then
  say "building omnirun, omnic, omnigen and the driver tests in $BUILD"
  ninja -C "$BUILD" omnirun omnic omnigen >&2
  # The driver tests exist only in a build with the CUDA toolkit.
  ninja -C "$BUILD" OmniHalCudaTest OmniHalConformanceTest \
    omni-bench-cuda-attention omni-bench-kernels >&2 || true
fi
for tool in omnirun omnic omnigen; do
  [ -x "$BIN/$tool" ] || { say "no $BIN/$tool (build it, or drop --no-build)"; exit 1; }
done

rm -rf "$OUTDIR"
mkdir -p "$OUTDIR"/{bin,ops/in,ops/expected,tiny/expected,sd35m,torch}
OUTDIR="$(cd "$OUTDIR" && pwd)"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
trap 'exit 143' TERM INT
MANIFEST="$OUTDIR/manifest.txt"
{
  echo "commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "made $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n)"
} > "$MANIFEST"

# --- omnirun and the libraries a GPU machine may lack -------------------
# omnirun and everything ldd names except glibc's own libraries (the GPU
# machine has glibc >= 2.34, which omnirun needs), packed with xz
# (libopenblas alone is 36 MB; omnirun carries the cuda driver's helper
# PTX, text that packs tenfold); run.sh unpacks it and runs bin/omnirun
# with LD_LIBRARY_PATH.
mkdir -p "$WORK/bin" "$WORK/lib"
cp "$BIN/omnirun" "$WORK/bin/omnirun"
strip "$WORK/bin/omnirun" 2>/dev/null || true
ldd "$BIN/omnirun" | awk '/=>/ && $3 ~ /^\// {print $3}' | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*|libresolv.so.*) ;;
    *) cp -L "$lib" "$WORK/lib/" ;;
  esac
done
tar -C "$WORK" -cf - bin/omnirun lib | xz -T2 -6 > "$OUTDIR/lib.tar.xz"
echo "omnirun $(ldd "$BIN/omnirun" | awk '/=>/' | wc -l) libraries" >> "$MANIFEST"

# --- the driver tests (gtest, static) ----------------------------------
# The cuda driver's own tests (CudaGpuTest.*) and the hal conformance
# suite's cuda instances are the most direct check of each driver feature
# on a GPU, the attention benchmark times the driver's two attention
# forwards and backwards, and the kernel benchmark the fused kernels'
# bandwidth; they need no library omnirun does not (checked: a subset).
TESTS=(OmniHalCudaTest OmniHalConformanceTest omni-bench-cuda-attention
       omni-bench-kernels)
# (A plain `exit 1` in the loop of the condition would end the script
# without a word when one is missing, as it did with --no-build.)
missing=()
for t in "${TESTS[@]}"; do [ -x "$BIN/$t" ] || missing+=("$t"); done
if [ ${#missing[@]} = 0 ]; then
  mkdir -p "$WORK/tests"
  for t in "${TESTS[@]}"; do
    cp "$BIN/$t" "$WORK/tests/$t"
    strip "$WORK/tests/$t" 2>/dev/null || true
  done
  tar -C "$WORK" -cf - tests | xz -T2 -6 > "$OUTDIR/bin/tests.tar.xz"
  echo "driver tests ${TESTS[*]}" >> "$MANIFEST"
else
  echo "no-tests: the build has no ${missing[*]} (no CUDA toolkit, or --no-build before building them?)" >> "$MANIFEST"
  say "leaving out the driver tests: $BIN has no ${missing[*]}"
fi

# One omnic call per target; a target omnic refuses is left out and the
# manifest says why (run.sh reports it).
compile() { # target in.mlir out.bin
  local log="$WORK/omnic.$1.log"
  if "$BIN/omnic" "--target=$1" "$2" -o "$3" 2> "$log"; then
    return 0
  fi
  say "omnic --target=$1 $(basename "$2") failed: $(head -1 "$log")"
  echo "no-$1 $(basename "$3"): $(head -1 "$log")" >> "$MANIFEST"
  rm -f "$3"
  return 1
}
has_target() { case " $TARGETS " in *" $1 "*) return 0 ;; esac; return 1; }

# --- per-op programs ---------------------------------------------------
cp "$HERE/ops.mlir" "$OUTDIR/ops/ops.mlir"
compile cpu "$HERE/ops.mlir" "$OUTDIR/ops/ops-cpu.bin"
if has_target cuda; then
  compile cuda "$HERE/ops.mlir" "$OUTDIR/ops/ops-cuda.bin" || true
fi
"$BIN/omnirun" "$OUTDIR/ops/ops-cpu.bin" --list > "$OUTDIR/ops/list.txt"
python3 "$HERE/gen_inputs.py" "$OUTDIR/ops/list.txt" "$OUTDIR/ops/in" \
  > "$OUTDIR/ops/manifest.txt"
while read -r fn ins outs tol; do
  args=()
  for ((i = 0; i < ins; i++)); do args+=("--input=@$OUTDIR/ops/in/$fn.in$i.npy"); done
  for ((j = 0; j < outs; j++)); do args+=("--output=@$OUTDIR/ops/expected/$fn.out$j.npy"); done
  "$BIN/omnirun" "$OUTDIR/ops/ops-cpu.bin" --function "$fn" "${args[@]}"
done < "$OUTDIR/ops/manifest.txt"
echo "ops $(wc -l < "$OUTDIR/ops/manifest.txt") functions" >> "$MANIFEST"

# --- the tiny FlowGRPO recipe: 3 iterations on the cpu driver -----------
# Without its VAE decoder (the latent is the image): the tiny decoder is so
# ill-conditioned that gemms rounded another way (a GPU's, or the host
# model's of test/omnic/cuda-host-kernels.test) move the first step's
# moments by up to 17%, so its path is checked per op (ops.mlir's conv2d,
# attention, norms) and the recipe without it at 1e-5 (measured 2.1e-6 to
# 4.1e-6 on the host model).
"$BIN/omnigen" --decoder=none -o "$WORK/tiny.mlir"
compile cpu "$WORK/tiny.mlir" "$OUTDIR/tiny/tiny-cpu.bin"
if has_target cuda; then
  compile cuda "$WORK/tiny.mlir" "$OUTDIR/tiny/tiny-cuda.bin" || true
fi
"$BIN/omnirun" "$OUTDIR/tiny/tiny-cpu.bin" --steps 3 --seed 7 --save-every 1 \
  --sample-every 1000 --out "$WORK/tiny-run" > "$WORK/tiny.log"
for s in 1 3; do
  cp "$WORK/tiny-run/step-$s.safetensors" "$OUTDIR/tiny/expected/"
done
cp "$WORK/tiny-run/metrics.jsonl" "$OUTDIR/tiny/expected/metrics.jsonl"

# --- the SD3.5-Medium shape (bench/compile-scale.sh's flags) -------------
if [ "$SD35M" = 1 ] && has_target cuda; then
  SD_FLAGS=(--model=sd3 --config=sd3.5-medium --set=latent_size=64
            --decoder=autoencoder_kl --decoder-config=sd3
            --opt=prompts_per_iteration=1 --opt=group_size=2
            --opt=precision=bf16 ${SD_EXTRA[@]+"${SD_EXTRA[@]}"})
  echo "sd35m omnigen ${SD_FLAGS[*]}" >> "$MANIFEST"
  "$BIN/omnigen" "${SD_FLAGS[@]}" -o "$WORK/sd35m.mlir"
  if compile cuda "$WORK/sd35m.mlir" "$WORK/sd35m-cuda.bin"; then
    "$BIN/omnirun" "$WORK/sd35m-cuda.bin" --list > "$OUTDIR/sd35m/list.txt"
    xz -T2 -6 -c "$WORK/sd35m-cuda.bin" > "$OUTDIR/sd35m/sd35m-cuda.bin.xz"
    echo "sd35m step.bin $(stat -c %s "$WORK/sd35m-cuda.bin") bytes, xz $(stat -c %s "$OUTDIR/sd35m/sd35m-cuda.bin.xz")" >> "$MANIFEST"
    # The floor of each phase's time from the step.bin alone
    # (tools/step-traffic, an H200's peaks), with the default attention and
    # with the flash kernels, for run.sh to print beside the measured
    # phases.
    # The same program with the launches of before the sixth session
    # (norms' reductions split, no merged launches), for run.sh to time
    # its fused kernels against the default's (docs/backend-cuda.md).
    if "$BIN/omnic" --target=cuda --cuda-row-launches=false --cuda-merge-launches=false \
      "$WORK/sd35m.mlir" -o "$WORK/sd35m-split.bin" 2> "$WORK/omnic.split.log"; then
      xz -T2 -6 -c "$WORK/sd35m-split.bin" > "$OUTDIR/sd35m/sd35m-cuda-split.bin.xz"
      echo "sd35m split launches: xz $(stat -c %s "$OUTDIR/sd35m/sd35m-cuda-split.bin.xz")" >> "$MANIFEST"
      rm -f "$WORK/sd35m-split.bin"
    else
      say "omnic --cuda-row-launches=false on sd35m failed: $(head -1 "$WORK/omnic.split.log")"
    fi
    traffic="$ROOT/tools/step-traffic/step-traffic.py"
    if "$BIN/omnic" --target=cuda "$WORK/sd35m.mlir" --emit=json > "$WORK/sd35m.json" 2> /dev/null &&
      { python3 "$traffic" "$WORK/sd35m.json" --function=train_step --top=10 &&
        echo "with OMNI_CUDA_ATTENTION=flash:" &&
        python3 "$traffic" "$WORK/sd35m.json" --function=train_step --attention=flash --epilogues; } \
        > "$OUTDIR/sd35m/traffic.txt"; then
      rm -f "$WORK/sd35m.json"
    else
      say "step-traffic on sd35m failed"
      rm -f "$OUTDIR/sd35m/traffic.txt" "$WORK/sd35m.json"
    fi
  fi
else
  echo "no-sd35m: left out (--no-sd35m or no cuda target)" >> "$MANIFEST"
fi

# --- the PyTorch baseline ------------------------------------------------
# The GPU machine has torch but no diffusers and no registry: the scripts
# and the wheels diffusers needs beyond torch (pure python, and
# safetensors' abi3 wheel, which fits any CPython >= 3.8).
if [ "$TORCH" = 1 ]; then
  cp "$ROOT/bench/torch/flowgrpo_torch.py" "$ROOT/bench/torch/sd3_reference.py" \
    "$ROOT/bench/torch/vae_reference.py" "$HERE/gpu_torch.py" "$OUTDIR/torch/"
  # diffusers 0.42.1 (what bench/torch was written with) and its wheel
  # closure for CPython 3.11 and 3.12 (it needs >= 3.11), less what a
  # PyTorch machine has (numpy, pillow, filelock, fsspec, typing
  # extensions: run.sh installs into a venv over the system's packages
  # and names what is still missing).
  mkdir -p "$OUTDIR/torch/wheels" "$WORK/wheels"
  for py in 3.11 3.12; do
    python3 -m pip download --quiet --only-binary=:all: \
      --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 \
      --python-version "$py" --implementation cp --dest "$WORK/wheels" \
      diffusers==0.42.1 >&2 || { say "pip download for $py failed"; echo "no-torch-wheels-$py" >> "$MANIFEST"; }
  done
  for w in "$WORK"/wheels/*.whl; do
    [ -e "$w" ] || continue
    case "$(basename "$w")" in
      numpy-*|pillow-*|filelock-*|fsspec-*|typing_extensions-*) ;;
      *) cp "$w" "$OUTDIR/torch/wheels/" ;;
    esac
  done
  echo "torch wheels: $(ls "$OUTDIR/torch/wheels" | tr '\n' ' ')" >> "$MANIFEST"
fi

# --- the limit ---------------------------------------------------------
BYTES=$(du -sb "$OUTDIR" | cut -f1)
LIMIT=$((MAX_MIB * 1024 * 1024))
echo "bundle $BYTES bytes (limit $LIMIT)" >> "$MANIFEST"
if [ "$BYTES" -gt "$LIMIT" ]; then
  say "the bundle is $BYTES bytes, more than $MAX_MIB MiB ($LIMIT): leave something out (--no-sd35m, --no-torch)"
  exit 1
fi
say "bundle ready: $OUTDIR ($((BYTES / 1024)) KiB); run: bash tools/gpu-check/run.sh $OUTDIR"
