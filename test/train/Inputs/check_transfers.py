#!/usr/bin/env python3
"""Checks omnirun --stats transfers against the program's shapes.

Usage: check_transfers.py LIST PROGRAM.mlir METRICS.jsonl [STEP]

LIST is `omnirun step.bin --list` (the step.bin signatures and the state
slots), PROGRAM.mlir the source (for the reward host calls' types). Every
iteration of METRICS.jsonl must have moved exactly
  to the device:   the step's inputs (seed, iteration, prompts) and the
                   host calls' results (rewards),
  from the device: the step's results (metrics, images, ...) and the host
                   calls' operands (images),
and so none of the state. Prints one summary line; exits 1 on a mismatch.
"""
import json
import re
import sys

SIZES = {"f32": 4, "f64": 8, "f16": 2, "bf16": 2, "i1": 1, "i32": 4, "i64": 8}


def tensor_bytes(text):
    """Bytes of every tensor<...> type in `text`."""
    total = 0
    for dims, dtype in re.findall(r"tensor<((?:\d+x)*)([a-z]+\d+)>", text):
        n = 1
        for d in dims.split("x")[:-1]:
            n *= int(d)
        total += n * SIZES[dtype]
    return total


def main():
    list_path, mlir_path, metrics_path = sys.argv[1:4]
    step = sys.argv[4] if len(sys.argv) > 4 else "train_step"
    inputs = outputs = None
    state = 0
    for line in open(list_path):
        m = re.match(r"@(\w+)\((.*)\) -> \((.*)\)$", line.strip())
        if m and m.group(1) == step:
            inputs, outputs = tensor_bytes(m.group(2)), tensor_bytes(m.group(3))
        m = re.match(r"state '.*': (tensor<[^>]*>)", line.strip())
        if m:
            state += tensor_bytes(m.group(1))
    if inputs is None:
        sys.exit(f"{list_path}: no @{step}")
    operands = results = 0
    for m in re.finditer(r'omni\.host_call "\w+"\(.*?\) : \((.*?)\) -> \(?(.*?)\)?(?: loc|$)',
                         open(mlir_path).read(), re.M):
        operands += tensor_bytes(m.group(1))
        results += tensor_bytes(m.group(2))
    want_to, want_from = inputs + results, outputs + operands
    lines = [json.loads(l) for l in open(metrics_path)]
    if not lines:
        sys.exit(f"{metrics_path}: no iterations")
    for line in lines:
        got = (line["host_to_device_bytes"], line["device_to_host_bytes"])
        if got != (want_to, want_from):
            sys.exit(f"iteration {line['iteration']}: moved {got[0]} bytes to "
                     f"and {got[1]} from the device, expected {want_to} and "
                     f"{want_from} (state: {state} bytes)")
        if line["device_bytes"] <= state:
            sys.exit(f"iteration {line['iteration']}: device_bytes "
                     f"{line['device_bytes']}, expected more than the "
                     f"{state} bytes of state")
    print(f"{len(lines)} iterations: {want_to} bytes to the device "
          f"({inputs} inputs + {results} host-call results), {want_from} from "
          f"it ({outputs} results + {operands} host-call operands); "
          f"{state} bytes of state stay on the device")


if __name__ == "__main__":
    main()
