#!/usr/bin/env bash
# Runs a bundle made by prepare.sh on a machine with an NVIDIA GPU and
# writes ONE results file (README.md says what each section means):
#   1. the machine (nvidia-smi); without a GPU: says so and exits 2
#   1b. the cuda driver's and the hal conformance suite's GPU tests, and
#      the two attention forwards and backwards timed
#      (omni-bench-cuda-attention)
#   2. every per-op program on the GPU against the cpu driver's outputs
#   3. 3 tiny FlowGRPO iterations (without the VAE decoder: prepare.sh
#      says why) on the GPU against the cpu checkpoints, and again without
#      graphs (the same bits, the phases' times)
#   4. the SD3.5-Medium-shape iteration (bf16 unless the bundle says f32):
#      time per phase, train-phase MFU
#   4b. its large fused kernels' bandwidth against a copy, its matmul
#      shapes against a square gemm (omni-bench-kernels)
#   5. the same iteration in PyTorch eager and torch.compile, the ratio
#   5b. the SD3.5-Medium iteration with OMNI_CUDA_ATTENTION=flash
#   5c. its fused kernels as launched before row launches (a step.bin
#      compiled with --cuda-row-launches=false --cuda-merge-launches=false)
#   6. with what is left: the SD3.5-Medium iteration under --profile
# Each stage has its share of an overall budget (default 470 s, under the
# device tool's 8 minutes); a stage that runs out is cut and reported.
#
#   bash tools/gpu-check/run.sh [BUNDLE] [RESULTS]
# BUNDLE defaults to tools/gpu-check/bundle, RESULTS to $OUT/results.md
# when $OUT is set (the device tool), else BUNDLE/../results.md.
# Exit: 0 when every check passed, 1 when one failed, 2 without a GPU or
# with an unusable bundle. GPU_CHECK_DRY_RUN=1 runs the cpu programs on
# the cpu driver instead (no GPU needed): a test of this script's
# plumbing, whose checks then compare the cpu driver with itself.
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
BUNDLE="$(cd "${1:-$HERE/bundle}" 2>/dev/null && pwd)" || {
  echo "run.sh: no bundle at ${1:-$HERE/bundle} (run tools/gpu-check/prepare.sh first)" >&2
  exit 2
}
if [ -n "${2:-}" ]; then RESULTS="$2"
elif [ -n "${OUT:-}" ]; then RESULTS="$OUT/results.md"
else RESULTS="$(dirname "$BUNDLE")/results.md"; fi
BUDGET=${GPU_CHECK_BUDGET_S:-470}
START=$(date +%s)
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
trap 'exit 143' TERM INT
FAILED=0
OPS_FAILED=()
: > "$RESULTS"
out() { printf '%s\n' "$*" >> "$RESULTS"; }
left() { echo $((BUDGET - ($(date +%s) - START))); }
# within SECONDS cmd...: runs cmd with at most min(SECONDS, what is left).
within() {
  local want=$1 have
  shift
  have=$(left)
  [ "$have" -lt "$want" ] && want=$have
  if [ "$want" -le 5 ]; then
    echo "run.sh: out of time" >&2
    return 124
  fi
  timeout --kill-after=5 "$want" "$@"
}
PY=$(command -v python3 || command -v python || true)
# locate WHAT SECONDS omnirun-args...: after omnirun failed, the same run
# with every launch synchronous (CUDA_LAUNCH_BLOCKING=1, graphs off), whose
# error names the command and kernel that failed (an asynchronous GPU error
# otherwise surfaces at the next synchronization, unnamed); then, where
# compute-sanitizer is installed, its memcheck of the same run.
locate() {
  local what=$1 secs=$2 line
  shift 2
  [ "$DRY" = 1 ] && return 0
  line=$(within "$secs" env CUDA_LAUNCH_BLOCKING=1 "${OMNIRUN[@]}" "$@" --graphs off 2>&1 >/dev/null | tail -1)
  out "  - $what again with CUDA_LAUNCH_BLOCKING=1 and --graphs off: ${line:-no error this time}"
  if command -v compute-sanitizer > /dev/null 2>&1; then
    within "$secs" compute-sanitizer --tool memcheck --print-limit 3 "${OMNIRUN[@]}" "$@" --graphs off > "$TMP/memcheck.log" 2>&1
    out "  - compute-sanitizer memcheck of it (the first lines):"
    grep -m 12 '^=========' "$TMP/memcheck.log" | sed 's/^/        /' >> "$RESULTS"
  fi
}

out "# gpu-check results"
out ""
out "- bundle: $(grep -v "^torch wheels" "$BUNDLE/manifest.txt" 2>/dev/null | tr "\n" ";")"
out "- host: $(uname -n), $(uname -sr), $(nproc) cores, run $(date -u +%Y-%m-%dT%H:%M:%SZ)"

# --- omnirun from the bundle (lib.tar.xz: bin/omnirun and lib/) ----------
if [ ! -f "$BUNDLE/lib.tar.xz" ]; then
  out "- ERROR: the bundle has no lib.tar.xz"
  echo "run.sh: $BUNDLE is not a prepare.sh bundle" >&2
  exit 2
fi
if ! xz -dc "$BUNDLE/lib.tar.xz" | tar -C "$TMP" -xf - || [ ! -x "$TMP/bin/omnirun" ]; then
  out "- ERROR: cannot unpack bin/omnirun and lib/ from lib.tar.xz"
  exit 2
fi
DRY=${GPU_CHECK_DRY_RUN:-0}
if [ "$DRY" = 1 ]; then
  RUNFLAGS=(--device cpu) OPS=ops-cpu.bin TINY=tiny-cpu.bin
else
  RUNFLAGS=(--gpus 1) OPS=ops-cuda.bin TINY=tiny-cuda.bin
fi
OMNIRUN=("env" "LD_LIBRARY_PATH=$TMP/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$TMP/bin/omnirun")

# --- 1. the machine -------------------------------------------------------
out ""
out "## Machine"
SMI=$(command -v nvidia-smi || true)
GPU_LINE=""
if [ -n "$SMI" ]; then
  GPU_LINE=$(timeout 30 "$SMI" --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit,compute_cap --format=csv,noheader 2>&1 | head -8)
fi
if [ "$DRY" = 1 ]; then
  out "- DRY RUN (GPU_CHECK_DRY_RUN=1): the cpu programs on the cpu driver"
elif [ -z "$SMI" ] || ! timeout 30 "$SMI" -L 2>/dev/null | grep -q "^GPU "; then
  # Ask omnirun too: its cuda driver names what is missing in one line.
  # (A cuda program's first step makes the device; --list would not.)
  WHY=""
  for bin in "$BUNDLE/ops/ops-cuda.bin" "$BUNDLE/tiny/tiny-cuda.bin"; do
    [ -f "$bin" ] || continue
    WHY=$(timeout 60 "${OMNIRUN[@]}" "$bin" --gpus 1 --steps 0 --out "$TMP/probe" 2>&1 >/dev/null | head -1)
    break
  done
  MSG="no GPU: ${SMI:+nvidia-smi lists none}${SMI:-nvidia-smi not found}${WHY:+; $WHY}"
  out "- $MSG"
  echo "run.sh: $MSG" >&2
  exit 2
fi
if [ "$DRY" != 1 ]; then
  out "- nvidia-smi: $GPU_LINE"
  out "- CUDA driver: $(timeout 30 "$SMI" | grep -o 'CUDA Version: [0-9.]*' | head -1)"
fi

# --- 1b. the driver tests on the GPU ---------------------------------------
# gtest binaries of the cuda driver (CudaGpuTest.*: PTX dispatch, fills,
# copies, events, memory, cuBLASLt, graphs) and the hal conformance suite's
# cuda instances; their whole output goes beside the results file.
out ""
out "## Driver tests (gtest, on the GPU)"
out ""
TESTLOG="$(dirname "$RESULTS")/driver-tests.log"
: > "$TESTLOG"
if [ ! -f "$BUNDLE/bin/tests.tar.xz" ]; then
  out "SKIPPED: the bundle has no driver tests ($(grep '^no-tests' "$BUNDLE/manifest.txt" | head -1))"
elif ! xz -dc "$BUNDLE/bin/tests.tar.xz" | tar -C "$TMP" -xf -; then
  out "FAIL: cannot unpack tests.tar.xz"
  FAILED=1
else
  INSTANCE=cuda; [ "$DRY" = 1 ] && INSTANCE=cpu
  for spec in "OmniHalCudaTest:CudaGpuTest.*" "OmniHalConformanceTest:*/$INSTANCE"; do
    t=${spec%%:*} filter=${spec#*:}
    within 90 env "LD_LIBRARY_PATH=$TMP/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$TMP/tests/$t" "--gtest_filter=$filter" > "$TMP/$t.log" 2>&1
    rc=$?
    { echo "=== $t --gtest_filter=$filter (exit $rc)"; cat "$TMP/$t.log"; } >> "$TESTLOG"
    passed=$(grep -c '^\[       OK \]' "$TMP/$t.log")
    failed=$(grep -c '^\[  FAILED  \] [A-Za-z].*(' "$TMP/$t.log")
    skipped=$(grep -c '^\[  SKIPPED \] [A-Za-z].*(' "$TMP/$t.log")
    out "- $t ($filter): $passed passed, $failed failed, $skipped skipped, exit $rc"
    grep '^\[  FAILED  \] [A-Za-z].*(' "$TMP/$t.log" | head -20 | sed 's/^/  - /' >> "$RESULTS"
    grep -m1 -A3 'Failure$' "$TMP/$t.log" | sed 's/^/    /' >> "$RESULTS"
    [ $rc = 0 ] || FAILED=1
  done
  out "- the whole output: $TESTLOG"
  # Flash vs unfused attention (bench/CudaAttentionBench.cpp): the numbers
  # OMNI_CUDA_ATTENTION's default is chosen by.
  if [ "$DRY" != 1 ] && [ -x "$TMP/tests/omni-bench-cuda-attention" ]; then
    out ""
    out "### Attention forward and backward: unfused vs flash (omni-bench-cuda-attention)"
    out ""
    within 60 env "LD_LIBRARY_PATH=$TMP/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$TMP/tests/omni-bench-cuda-attention" 5 >> "$RESULTS" 2>&1 || out "FAIL or out of time (exit $?)"
  fi
fi

# --- 2. per-op checks -----------------------------------------------------
out ""
out "## Per-op differential checks (GPU vs the cpu driver)"
out ""
if [ ! -f "$BUNDLE/ops/$OPS" ]; then
  out "SKIPPED: the bundle has no ops-cuda.bin ($(grep '^no-cuda ops' "$BUNDLE/manifest.txt" | head -1))"
  FAILED=1
else
  out "| function | result | max rel. error | tolerance | status |"
  out "|---|---|---|---|---|"
  mkdir -p "$TMP/ops"
  while read -r fn ins outs tol; do
    args=()
    for ((i = 0; i < ins; i++)); do args+=("--input=@$BUNDLE/ops/in/$fn.in$i.npy"); done
    for ((j = 0; j < outs; j++)); do args+=("--output=@$TMP/ops/$fn.out$j.npy"); done
    if ! err=$(within 60 "${OMNIRUN[@]}" "$BUNDLE/ops/$OPS" "${RUNFLAGS[@]}" --function "$fn" "${args[@]}" 2>&1 >/dev/null); then
      out "| $fn | all | - | $tol | FAIL: $(echo "$err" | tail -1 | tr '|' '/') |"
      OPS_FAILED+=("$fn")
      FAILED=1
      continue
    fi
    for ((j = 0; j < outs; j++)); do
      line=$("$PY" "$HERE/compare.py" --tolerance "$tol" "$BUNDLE/ops/expected/$fn.out$j.npy" "$TMP/ops/$fn.out$j.npy" | tail -1)
      status=${line%% *}
      rel=$(echo "$line" | awk '{print $3}')
      out "| $fn | $j | $rel | $tol | $status |"
      [ "$status" = PASS ] || FAILED=1
    done
  done < "$BUNDLE/ops/manifest.txt"
  # The first program that failed to run, located (below the table).
  if [ ${#OPS_FAILED[@]} -gt 0 ]; then
    fn=${OPS_FAILED[0]}
    args=()
    for ((i = 0; i < $(awk -v f="$fn" '$1 == f {print $2}' "$BUNDLE/ops/manifest.txt"); i++)); do args+=("--input=@$BUNDLE/ops/in/$fn.in$i.npy"); done
    out ""
    out "- $fn failed to run:"
    locate "$fn" 60 "$BUNDLE/ops/$OPS" "${RUNFLAGS[@]}" --function "$fn" "${args[@]}"
  fi
fi

# --- 3. tiny FlowGRPO: 3 iterations ----------------------------------------
out ""
out "## Tiny FlowGRPO, 3 iterations (GPU vs the cpu driver's checkpoints)"
out ""
if [ ! -f "$BUNDLE/tiny/$TINY" ]; then
  out "SKIPPED: the bundle has no tiny-cuda.bin"
  FAILED=1
elif within 120 "${OMNIRUN[@]}" "$BUNDLE/tiny/$TINY" "${RUNFLAGS[@]}" --graphs on --steps 3 --seed 7 --save-every 1 --sample-every 1000 --out "$TMP/tiny" > "$TMP/tiny.log" 2>&1; then
  for s in 1 3; do
    "$PY" "$HERE/compare.py" --tolerance 1e-5 "$BUNDLE/tiny/expected/step-$s.safetensors" "$TMP/tiny/step-$s.safetensors" > "$TMP/cmp$s.txt"
    rc=$?
    if [ "$s" = 1 ]; then
      out "- after 1 iteration (must be within 1e-5 relative per tensor): $(tail -1 "$TMP/cmp$s.txt")"
      [ $rc = 0 ] || FAILED=1
    else
      out "- after 3 iterations (reported, not checked): $(tail -1 "$TMP/cmp$s.txt")"
    fi
  done
  out "- GPU metrics: $(tail -1 "$TMP/tiny/metrics.jsonl" | cut -c1-300)"
  out "- cpu metrics: $(tail -1 "$BUNDLE/tiny/expected/metrics.jsonl" | cut -c1-300)"
else
  out "FAIL: $(tail -2 "$TMP/tiny.log" | tr '\n' ' ')"
  locate "1 iteration" 90 "$BUNDLE/tiny/$TINY" "${RUNFLAGS[@]}" --steps 1 --seed 7 --sample-every 1000 --out "$TMP/tiny-locate"
  FAILED=1
fi

# --- 3b. Graphs: the same 3 iterations without them ------------------------
# The run above captured the rollout loop and the runs of commands between
# reads of the device into graphs (--graphs on, the default on a GPU);
# without graphs the training must be the same bit for bit, and the phases'
# times show what the graphs save.
out ""
out "## Graphs (tiny, --graphs on vs off)"
out ""
# phase_s METRICS PHASE: the phase's median time over iterations 2-3.
phase_s() {
  "$PY" -c "import json,sys,statistics
rows=[json.loads(l) for l in open(sys.argv[1]) if l.strip()][1:]
print('%.4f' % statistics.median(r['phase_time_s'].get(sys.argv[2], 0) for r in rows))" "$1" "$2" 2>/dev/null
}
if [ ! -f "$TMP/tiny/step-3.safetensors" ]; then
  out "SKIPPED: the run with graphs did not finish"
elif within 120 "${OMNIRUN[@]}" "$BUNDLE/tiny/$TINY" "${RUNFLAGS[@]}" --graphs off --steps 3 --seed 7 --sample-every 1000 --out "$TMP/tiny-off" > "$TMP/tiny-off.log" 2>&1; then
  out "- $(grep -h '^graphs:' "$TMP/tiny.log" | head -1)"
  "$PY" "$HERE/compare.py" --tolerance 0 "$TMP/tiny-off/step-3.safetensors" "$TMP/tiny/step-3.safetensors" > "$TMP/cmp-graphs.txt"
  rc=$?
  out "- after 3 iterations, graphs on vs off (must be identical): $(tail -1 "$TMP/cmp-graphs.txt")"
  [ $rc = 0 ] || FAILED=1
  for phase in rollout loss update; do
    out "- $phase phase, median of iterations 2-3: $(phase_s "$TMP/tiny/metrics.jsonl" $phase) s with graphs, $(phase_s "$TMP/tiny-off/metrics.jsonl" $phase) s without"
  done
else
  out "FAIL: $(tail -2 "$TMP/tiny-off.log" | tr '\n' ' ')"
  FAILED=1
fi

# --- 4. SD3.5-Medium shape: time per phase, MFU -----------------------------
out ""
SD_DT=$(grep -q "precision=f32" "$BUNDLE/manifest.txt" && echo f32 || { grep -q "precision=bf16" "$BUNDLE/manifest.txt" && echo bf16 || echo f32; })
out "## SD3.5-Medium shape (512 px, 1 prompt x 2 samples, 10 steps, window 2, $SD_DT)"
out ""
OMNI_TIME=""
if [ "$DRY" = 1 ]; then
  out "SKIPPED: dry run"
elif [ ! -f "$BUNDLE/sd35m/sd35m-cuda.bin.xz" ]; then
  out "SKIPPED: the bundle has no sd35m-cuda.bin.xz"
else
  xz -dc "$BUNDLE/sd35m/sd35m-cuda.bin.xz" > "$TMP/sd35m.bin"
  if within 180 "${OMNIRUN[@]}" "$TMP/sd35m.bin" --gpus 1 --steps 3 --seed 7 --sample-every 1000 --stats --out "$TMP/sd" > "$TMP/sd.log" 2>&1; then
    "$PY" "$HERE/mfu.py" "$BUNDLE/sd35m/list.txt" "$TMP/sd/metrics.jsonl" > "$TMP/mfu.md" 2>&1
    cat "$TMP/mfu.md" >> "$RESULTS"
    out "- $(grep -h '^graphs:' "$TMP/sd.log" | tail -1 | cut -c1-600)"
    if [ -f "$BUNDLE/sd35m/traffic.txt" ]; then
      out ""
      out "The floor per phase from the step.bin (tools/step-traffic at an H200's peaks: ideal L + M + K, L the library calls at the larger of FLOP and byte time, M the other commands' bytes, both a floor; K the launches at 2 us, an estimate):"
      out '```'
      cat "$BUNDLE/sd35m/traffic.txt" >> "$RESULTS"
      out '```'
    fi
    OMNI_TIME=$(grep -o 'median iteration [0-9.e+-]* s' "$TMP/mfu.md" | awk '{print $3}')
  else
    out "FAIL: $(tail -2 "$TMP/sd.log" | tr '\n' ' ')"
    locate "1 iteration" 120 "$TMP/sd35m.bin" --gpus 1 --steps 1 --seed 7 --sample-every 1000 --out "$TMP/sd-locate"
    FAILED=1
  fi
fi

# --- 4b. Bandwidth of the large fused kernels, speed of the matmuls --------
# bench/KernelBench.cpp: the SD3.5-Medium train_step's fused kernels of at
# least 16 MB, each alone against a copy of the same bytes (the issue's
# target: >= 70% of HBM bandwidth on large tensors), then its 20 matmul
# shapes with the most flops against a 4096^3 gemm (what bounds the MFU).
# The dry run runs it on tiny's cpu program (plumbing only).
out ""
out "## Fused kernels' bandwidth and matmul shapes (omni-bench-kernels, train_step)"
out ""
case "$GPU_LINE" in
  *H200*) PEAK=4800 ;; *H100*) PEAK=3350 ;; *A100*) PEAK=2039 ;; *) PEAK="" ;;
esac
if [ ! -x "$TMP/tests/omni-bench-kernels" ]; then
  out "SKIPPED: the bundle has no omni-bench-kernels"
elif [ "$DRY" = 1 ]; then
  within 30 "$TMP/tests/omni-bench-kernels" "$BUNDLE/tiny/$TINY" --device=cpu --min-mb=0 --top=3 --reps=2 --baseline-gemm=128 >> "$RESULTS" 2>&1 || out "FAIL or out of time (exit $?)"
elif [ ! -f "$TMP/sd35m.bin" ]; then
  out "SKIPPED: no sd35m program"
else
  within 45 env "LD_LIBRARY_PATH=$TMP/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$TMP/tests/omni-bench-kernels" "$TMP/sd35m.bin" --device=cuda --min-mb=16 --top=20 --reps=20 ${PEAK:+--peak-gbs=$PEAK} >> "$RESULTS" 2>&1 || out "FAIL or out of time (exit $?)"
fi

# --- 5. PyTorch eager and torch.compile ------------------------------------
out ""
out "## PyTorch on the same GPU"
out ""
if [ "$DRY" = 1 ]; then
  out "SKIPPED: dry run"
elif [ ! -d "$BUNDLE/torch/wheels" ]; then
  out "SKIPPED: the bundle has no torch baseline"
elif ! "$PY" -c "import torch" 2>/dev/null; then
  out "SKIPPED: no torch in $PY"
else
  "$PY" -m venv --system-site-packages "$TMP/venv" > "$TMP/venv.log" 2>&1 &&
    "$TMP/venv/bin/python" -m pip install --quiet --no-index --find-links "$BUNDLE/torch/wheels" diffusers >> "$TMP/venv.log" 2>&1
  if ! "$TMP/venv/bin/python" -c "import diffusers, numpy, PIL" >> "$TMP/venv.log" 2>&1; then
    out "SKIPPED: diffusers would not install: $(tail -1 "$TMP/venv.log")"
  else
    DT=$SD_DT
    for variant in eager compile; do
      flag=""; [ $variant = compile ] && flag=--compile
      if within 150 "$TMP/venv/bin/python" "$BUNDLE/torch/gpu_torch.py" --config sd3.5-medium $flag --dtype "$DT" --iterations 3 --json "$TMP/torch-$variant.json" > "$TMP/torch-$variant.log" 2>&1; then
        out "- torch $variant ($DT): $("$PY" -c "import json,sys; s=json.load(open(sys.argv[1])); print('median %.3f s, first %.3f s, phases %s, torch %s' % (s['median_s'], s['first_s'], {k: round(v, 3) for k, v in s['phase_median_s'].items()}, s['torch']))" "$TMP/torch-$variant.json")"
      else
        out "- torch $variant: FAIL or out of time: $(tail -1 "$TMP/torch-$variant.log")"
      fi
    done
    if [ -n "$OMNI_TIME" ] && [ -f "$TMP/torch-compile.json" ]; then
      out "- omni / torch.compile iteration time: $("$PY" -c "import json,sys; print('%.3f (target <= 0.75)' % (float(sys.argv[1]) / json.load(open(sys.argv[2]))['median_s']))" "$OMNI_TIME" "$TMP/torch-compile.json")"
    fi
  fi
fi

# --- 5b. The SD3.5-Medium iteration with the flash attention kernel --------
# OMNI_CUDA_ATTENTION=flash (f16/bf16 only): the same 3 iterations, for the
# choice of the default (docs/backend-cuda.md, "Library routines").
out ""
out "## SD3.5-Medium shape with OMNI_CUDA_ATTENTION=flash"
out ""
if [ "$DRY" = 1 ] || [ ! -f "$TMP/sd35m.bin" ] || [ "$SD_DT" = f32 ]; then
  out "SKIPPED: $([ "$DRY" = 1 ] && echo "dry run" || { [ "$SD_DT" = f32 ] && echo "an f32 program (flash is f16/bf16)" || echo "no sd35m program"; })"
elif within 150 env OMNI_CUDA_ATTENTION=flash "${OMNIRUN[@]}" "$TMP/sd35m.bin" --gpus 1 --steps 3 --seed 7 --sample-every 1000 --stats --out "$TMP/sdf" > "$TMP/sdf.log" 2>&1; then
  "$PY" "$HERE/mfu.py" "$BUNDLE/sd35m/list.txt" "$TMP/sdf/metrics.jsonl" >> "$RESULTS" 2>&1
  out "- last metrics, unfused: $(tail -1 "$TMP/sd/metrics.jsonl" 2>/dev/null | cut -c1-300)"
  out "- last metrics, flash: $(tail -1 "$TMP/sdf/metrics.jsonl" | cut -c1-300)"
else
  out "FAIL (the opt-in flash path): $(tail -2 "$TMP/sdf.log" | tr '\n' ' ')"
  FAILED=1
fi

# --- 5c. The fused kernels with the launches of before ----------------------
# The same program compiled with --cuda-row-launches=false
# --cuda-merge-launches=false (norms' reductions split in launches of
# their own, independent launches apart): omni-bench-kernels again, to set
# beside 4b's table (docs/backend-cuda.md, "Row launches").
out ""
out "## Fused kernels with the launches of before (--cuda-row-launches=false --cuda-merge-launches=false)"
out ""
if [ "$DRY" = 1 ] || [ ! -x "$TMP/tests/omni-bench-kernels" ] || [ ! -f "$BUNDLE/sd35m/sd35m-cuda-split.bin.xz" ]; then
  out "SKIPPED: $([ "$DRY" = 1 ] && echo "dry run" || echo "no omni-bench-kernels or no sd35m-cuda-split.bin.xz")"
else
  xz -dc "$BUNDLE/sd35m/sd35m-cuda-split.bin.xz" > "$TMP/sd35m-split.bin"
  within 45 env "LD_LIBRARY_PATH=$TMP/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$TMP/tests/omni-bench-kernels" "$TMP/sd35m-split.bin" --device=cuda --min-mb=16 --top=20 --reps=20 ${PEAK:+--peak-gbs=$PEAK} >> "$RESULTS" 2>&1 || out "FAIL or out of time (exit $?)"
fi

# --- 6. Where the SD3.5-Medium iteration's time goes -----------------------
# Last, with what is left of the budget: 2 iterations under --profile (the
# stream synchronized after each command, so launch latency is in each
# row; graphs are off while profiling). The JSON comes back beside the
# results (docs/performance.md has its schema), the kind table goes here.
out ""
out "## SD3.5-Medium shape, profiled (--profile, 2 iterations)"
out ""
PROFILE="$(dirname "$RESULTS")/sd35m-profile.json"
if [ "$DRY" = 1 ] || [ ! -f "$TMP/sd35m.bin" ]; then
  out "SKIPPED: $([ "$DRY" = 1 ] && echo "dry run" || echo "no sd35m program")"
elif within 120 "${OMNIRUN[@]}" "$TMP/sd35m.bin" --gpus 1 --steps 2 --seed 7 --sample-every 1000 --profile "$PROFILE" --out "$TMP/sdp" > "$TMP/sdp.log" 2> "$TMP/sdp.err"; then
  out '```'
  sed -n '/^profile of/,$p' "$TMP/sdp.err" >> "$RESULTS"
  out '```'
  "$PY" -c "import json,sys
p=json.load(open(sys.argv[1]))
rows=sorted(((r['seconds'],ph['phase'],r['kind'],r['symbol'],r['count']) for ph in p['phases'] for r in ph['symbols']), reverse=True)
print('- the 15 slowest symbols (phase, kind, symbol, count, seconds):')
for s,ph,k,sym,c in rows[:15]: print('  - %s, %s, %s, %d x, %.4f s' % (ph, k, sym, c, s))" "$PROFILE" >> "$RESULTS" 2>/dev/null || true
  out "- the whole profile: $PROFILE"
else
  out "not run (out of time or failed): $(tail -1 "$TMP/sdp.err")"
fi

out ""
out "Finished in $(( $(date +%s) - START )) s; overall: $([ $FAILED = 0 ] && echo PASS || echo FAIL)"
echo "run.sh: results in $RESULTS" >&2
exit $FAILED
