#!/usr/bin/env python3
"""Compares two safetensors checkpoints tensor by tensor.

usage: compare_checkpoints.py [--relative] [--only=PREFIX] A B [TOLERANCE]

Prints one line per tensor ("<name> <dtype> <shape>: max |a - b| = <d>")
and then "same within <tol>" or "DIFFERENT"; exits 1 when a tensor is
missing, has another dtype or shape, or differs by more than TOLERANCE
(default 1e-6). With --relative the difference of a tensor is taken
relative to its largest magnitude: max |a - b| / max(|a|, |b|) (a tensor
that is zero in both counts as equal), the tensor-wise relative error a
change of summation order leaves (docs/sharding.md, "Testing"). Only f32 and i64 tensors (what the test programs hold).
With --only=PREFIX only the tensors whose names start with PREFIX are
compared (the parameters, not the optimizer moments).
Pure Python (struct + json), as the test machines have no numpy.
"""
import json
import struct
import sys

FORMATS = {"F32": "f", "I64": "q"}


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        fmt = FORMATS[info["dtype"]]
        begin, end = info["data_offsets"]
        count = (end - begin) // struct.calcsize(fmt)
        values = struct.unpack("<%d%s" % (count, fmt), body[begin:end])
        tensors[name] = (info["dtype"], info["shape"], values)
    return tensors


def main():
    args = sys.argv[1:]
    relative = "--relative" in args
    only = [x[len("--only="):] for x in args if x.startswith("--only=")]
    args = [x for x in args if x != "--relative" and not x.startswith("--only=")]
    a, b = read(args[0]), read(args[1])
    if only:
        a = {k: v for k, v in a.items() if k.startswith(only[0])}
        b = {k: v for k, v in b.items() if k.startswith(only[0])}
    tol = float(args[2]) if len(args) > 2 else 1e-6
    ok = sorted(a) == sorted(b)
    if not ok:
        print("tensor names differ: %s vs %s" % (sorted(a), sorted(b)))
    for name in sorted(set(a) & set(b)):
        (da, sa, va), (db, sb, vb) = a[name], b[name]
        if (da, sa) != (db, sb):
            print("%s: %s %s vs %s %s" % (name, da, sa, db, sb))
            ok = False
            continue
        diff = max((abs(x - y) for x, y in zip(va, vb)), default=0.0)
        if relative:
            scale = max((max(abs(x), abs(y)) for x, y in zip(va, vb)),
                        default=0.0)
            diff = diff / scale if scale > 0 else 0.0
            print("%s %s %s: max |a - b| / max |a| = %g" % (name, da, sa, diff))
        else:
            print("%s %s %s: max |a - b| = %g" % (name, da, sa, diff))
        ok = ok and diff <= tol
    print("same within %g" % tol if ok else "DIFFERENT")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
