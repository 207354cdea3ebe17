#!/usr/bin/env python3
"""Checks the lr of every metrics.jsonl line against the schedule formula.

usage: check_lr.py METRICS KIND LR WARMUP STEPS LR_MIN

The formula of docs/recipes.md section 11, computed here independently
with Python's math: iteration i < W gets L * i / W; after it, with
p = (i - W) / (S - W), constant L, linear L - (L - m) p, cosine
m + (L - m) (1 + cos(pi p)) / 2. Prints one line per iteration and "ok",
or exits 1 naming the first iteration whose lr differs by more than
1e-15 relative.
"""
import json
import math
import sys


def expected(kind, lr, warmup, steps, lr_min, i):
    if i < warmup:
        return lr * i / warmup
    if kind == "constant" or steps <= warmup:
        return lr
    p = (i - warmup) / (steps - warmup)
    if kind == "linear":
        return lr - (lr - lr_min) * p
    return lr_min + (lr - lr_min) * (1 + math.cos(math.pi * p)) / 2


def main():
    path, kind = sys.argv[1], sys.argv[2]
    lr, warmup, steps, lr_min = (float(sys.argv[3]), int(sys.argv[4]),
                                 int(sys.argv[5]), float(sys.argv[6]))
    lines = [json.loads(l) for l in open(path) if l.strip()]
    if len(lines) != steps:
        print("%d lines, expected %d" % (len(lines), steps))
        return 1
    for line in lines:
        i = line["iteration"]
        want = expected(kind, lr, warmup, steps, lr_min, i)
        got = line["lr"]
        print("iteration %d: lr %.17g, expected %.17g" % (i, got, want))
        if abs(got - want) > 1e-15 * max(abs(want), 1e-300):
            print("iteration %d: lr differs" % i)
            return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
