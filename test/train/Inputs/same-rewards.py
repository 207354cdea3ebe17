#!/usr/bin/env python3
"""usage: same-rewards.py A/metrics.jsonl B/metrics.jsonl KEY...

Prints "same KEY... in N iterations" when every line of A and B has the
same iterations and bit-identical values under each KEY (as written, which
is 9 significant digits for float32: a round trip), else the first
difference."""
import json
import sys

a, b, keys = sys.argv[1], sys.argv[2], sys.argv[3:]
la = [json.loads(line) for line in open(a)]
lb = [json.loads(line) for line in open(b)]
if [x["iteration"] for x in la] != [x["iteration"] for x in lb]:
    sys.exit(f"iterations differ: {[x['iteration'] for x in la]} vs "
             f"{[x['iteration'] for x in lb]}")
for x, y in zip(la, lb):
    for k in keys:
        if k not in x or k not in y or x[k] != y[k]:
            sys.exit(f"iteration {x['iteration']}: {k} is {x.get(k)} vs "
                     f"{y.get(k)}")
print(f"same {' '.join(keys)} in {len(la)} iterations")
