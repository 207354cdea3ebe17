#!/usr/bin/env python3
"""Prints the matmul shapes of a program as a C++ table for MatmulBench.cpp.

Usage: omnic PROGRAM.mlir --emit=json > p.json; matmul_shapes.py NAME p.json
Walks every function's commands (loops multiply their bodies by the trip
count), keeps the Matmul library calls of the rollout and loss phases, and
prints one row per distinct (phase, batch, m, n, k, transposes, dtype) with
how many times one iteration runs it. The shapes follow the executor's
decoding (runtime/executor/ExecutorCommands.cpp, case Matmul).
"""
import collections
import json
import sys


def main():
    name, path = sys.argv[1], sys.argv[2]
    d = json.load(open(path))
    tensors = d["tensors"]
    counts = collections.Counter()

    def walk(commands, times):
        for c in commands:
            kind = c["kind"]
            if c["kind_type"] == "Loop":
                trips = max(0, (kind["upper"] - kind["lower"] + kind["step"] - 1)
                            // kind["step"])
                walk(kind["body"], times * trips)
            elif c["kind_type"] == "LibraryCall" and kind["library"] == "Matmul":
                phase = c.get("phase", "")
                if phase not in ("rollout", "loss"):
                    continue
                lhs = tensors[kind["operands"][0]]["shape"]
                rhs = tensors[kind["operands"][1]]["shape"]
                res = tensors[kind["results"][0]]
                ta, tb = kind["int_attrs"][0] != 0, kind["int_attrs"][1] != 0
                rank = len(lhs)
                m, n = res["shape"][rank - 2], res["shape"][rank - 1]
                k = lhs[rank - 2] if ta else lhs[rank - 1]
                batch = 1
                for s in lhs[:rank - 2]:
                    batch *= s
                shared = len(rhs) == 2
                counts[(phase, batch, m, n, k, ta, tb, shared,
                        res["dtype"])] += times

    for f in d["functions"]:
        if f["name"] == "train_step":
            walk(f["commands"], 1)
    flops = 0
    for key, times in sorted(counts.items()):
        phase, batch, m, n, k, ta, tb, shared, dtype = key
        flops += 2 * batch * m * n * k * times
        print('    {"%s", "%s", %d, %d, %d, %d, %s, %s, %s, %d}, // %s' %
              (name, phase, batch, m, n, k, str(ta).lower(), str(tb).lower(),
               str(shared).lower(), times, dtype))
    print("    // %s: %.3g GFLOP of matmul per iteration" % (name, flops / 1e9))


if __name__ == "__main__":
    main()
