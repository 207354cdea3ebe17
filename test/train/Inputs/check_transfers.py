#!/usr/bin/env python3
"""Checks omnirun --stats transfers against the program's shapes.

Usage: check_transfers.py LIST PROGRAM.mlir STEP.json METRICS.jsonl [STEP]

LIST is `omnirun step.bin --list` (the step.bin signatures and the state
slots), PROGRAM.mlir the source (for the reward host calls' types),
STEP.json `omnic --emit=json` (for the index-register traffic). Every
iteration of METRICS.jsonl must have moved exactly
  to the device:   the step's inputs (seed, iteration, prompts), the host
                   calls' results (rewards) and each executed ScalarOp
                   ToTensor (an index register written to a tensor),
  from the device: the step's results (metrics, images, ...), the host
                   calls' operands (images) and each executed ScalarOp
                   FromTensor (a tensor read into an index register),
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
    list_path, mlir_path, json_path, metrics_path = sys.argv[1:5]
    step = sys.argv[5] if len(sys.argv) > 5 else "train_step"
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
    program = json.load(open(json_path))
    functions = program["functions"]
    tensors = program["tensors"]
    scalar = {"ToTensor": 0, "FromTensor": 0}

    def walk(commands, times):
        for c in commands:
            kind, k = c["kind_type"], c["kind"]
            if kind == "ScalarOp" and k["kind"] in scalar:
                t = tensors[k["dest"] if k["kind"] == "ToTensor" else k["a"]]
                scalar[k["kind"]] += times * SIZES[t["dtype"].lower()]
            elif kind == "Loop":
                trips = max(0, -(-(k["upper"] - k["lower"]) // k["step"]))
                walk(k.get("body", []), times * trips)
            elif kind == "Call":
                walk(functions[k["function"]]["commands"], times)

    walk(next(f for f in functions if f["name"] == step)["commands"], 1)
    want_to = inputs + results + scalar["ToTensor"]
    want_from = outputs + operands + scalar["FromTensor"]
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
          f"({inputs} inputs + {results} host-call results + "
          f"{scalar['ToTensor']} index registers), {want_from} from it "
          f"({outputs} results + {operands} host-call operands + "
          f"{scalar['FromTensor']} index registers); {state} bytes of state "
          f"stay on the device")


if __name__ == "__main__":
    main()
