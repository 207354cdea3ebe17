#!/usr/bin/env bash
# emulated-ops.sh OMNIC OMNIRUN OPS.mlir GPU_CHECK_DIR WORK [host-model]:
# every function of OPS.mlir
# (tools/gpu-check/ops.mlir: one small function per op kind the recipes
# use) compiled for the cpu target and for the cuda target's kernels
# emulated on this CPU (omnic --cuda-emulate), run on the same inputs
# (gen_inputs.py) and compared per result tensor at the manifest's
# tolerance (compare.py: 1e-5 relative for f32, 0 for random numbers and
# casts, gen_inputs.py's bounds for the bf16 library calls), as
# tools/gpu-check/run.sh compares a GPU with the cpu driver.
# With host-model, the cuda side is instead omnic --cuda-host-kernels run
# by the cuda driver (omnirun --device cuda) against the host model of
# libcuda and cuBLASLt that the environment names (OMNI_CUDA_DRIVER_LIBRARY,
# OMNI_CUBLASLT_LIBRARY; runtime/hal/drivers/cuda/host).
# Prints one line per result, then "N results, M failed".
set -euo pipefail
omnic=$1 omnirun=$2 ops=$3 tools=$4 work=$5 mode=${6:-emulate}
mkdir -p "$work/in" "$work/cpu" "$work/emu"
"$omnic" "$ops" -o "$work/cpu.bin"
case "$mode" in
  emulate | host-model) ;;
  *) echo "emulated-ops.sh: mode '$mode' (expected emulate or host-model)" >&2; exit 2 ;;
esac
device=()
if [ "$mode" = host-model ]; then
  "$omnic" --target=cuda --cuda-host-kernels "$ops" -o "$work/emu.bin"
  device=(--device=cuda)
else
  "$omnic" --target=cuda --cuda-emulate "$ops" -o "$work/emu.bin"
fi
"$omnirun" "$work/cpu.bin" --list > "$work/list.txt"
python3 "$tools/gen_inputs.py" "$work/list.txt" "$work/in" > "$work/manifest.txt"
results=0 failed=0
while read -r fn ins outs tol; do
  for side in cpu emu; do
    args=()
    for ((i = 0; i < ins; i++)); do args+=("--input=@$work/in/$fn.in$i.npy"); done
    for ((j = 0; j < outs; j++)); do args+=("--output=@$work/$side/$fn.out$j.npy"); done
    run=("$omnirun" "$work/$side.bin")
    [ "$side" = emu ] && run+=("${device[@]}")
    "${run[@]}" --function "$fn" "${args[@]}" > /dev/null
  done
  for ((j = 0; j < outs; j++)); do
    line=$(python3 "$tools/compare.py" --tolerance "$tol" "$work/cpu/$fn.out$j.npy" "$work/emu/$fn.out$j.npy" | tail -1 || true)
    echo "$fn result $j: $line"
    results=$((results + 1))
    [ "${line%% *}" = PASS ] || failed=$((failed + 1))
  done
done < "$work/manifest.txt"
echo "$results results, $failed failed"
