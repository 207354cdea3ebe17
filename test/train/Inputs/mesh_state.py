#!/usr/bin/env python3
"""Summarizes the omni.sharding attributes of a train.mlir's state.

Usage: mesh_state.py TRAIN.mlir

For @init_state's results and @train_step's arguments and results, prints
how many are sharded over fsdp on dimension 0 (`#omni.sharding<@mesh,
[["fsdp"], [], ...]>` with one entry per dimension) and the names of the
others, and flags any other sharding as malformed. Also says whether
@train_step's first arguments and results carry exactly @init_state's
shardings (the state layout is shared, FlowGrpo.h).
"""
import re
import sys

# A runtime hyper-parameter's omni.hparam comes first (attributes print
# sorted).
ENTRY = re.compile(r'tensor<([0-9x]*)[a-z]+[0-9]*> \{'
                   r'(?:omni\.hparam = \{[^}]*\}, )?omni\.name = "([^"]*)"'
                   r'(?:, omni\.sharding = (#omni\.sharding<[^>]*>))?\}')


def entries(text):
    """[(name, rank, sharding or None)] of an argument or result list."""
    return [(name, dims.count("x"), sharding or None)
            for dims, name, sharding in ENTRY.findall(text)]


def signature(mlir, function):
    m = re.search(r"func\.func @" + function + r"\((.*?)\) -> \((.*)\) \{$",
                  mlir, re.M)
    if not m:
        sys.exit(f"no public @{function}")
    return entries(m.group(1)), entries(m.group(2))


def summarize(label, items):
    sharded, others = 0, []
    for name, rank, sharding in items:
        if sharding is None:
            others.append(name)
            continue
        want = '#omni.sharding<@mesh, [["fsdp"]' + ", []" * (rank - 1) + "]>"
        if sharding != want:
            print(f"{label}: {name}: malformed {sharding} (expected {want})")
        sharded += 1
    print(f"{label}: {sharded} sharded; replicated: {' '.join(others)}")


def main():
    mlir = open(sys.argv[1]).read()
    _, init = signature(mlir, "init_state")
    args, results = signature(mlir, "train_step")
    summarize("@init_state results", init)
    summarize("@train_step arguments", args)
    summarize("@train_step results", results)
    n = len(init)
    same = [x for x, _, _ in init] == [x for x, _, _ in args[:n]] == \
        [x for x, _, _ in results[:n]] and \
        [s for _, _, s in init] == [s for _, _, s in args[:n]] == \
        [s for _, _, s in results[:n]]
    print(f"state layout shared: {'yes' if same else 'NO'} ({n} tensors)")


if __name__ == "__main__":
    main()
