#!/usr/bin/env python3
"""Checks a run with several optimizer steps per iteration.

usage: check_minibatch.py RUN_DIR ITERATIONS STEPS_PER_ITERATION

docs/recipes.md section 3: every iteration of RUN_DIR/metrics.jsonl must
have approx_kl > 0 and 0 < clipfrac < 1 (after the first, on-policy
optimizer step the ratio moves off 1; the clip range of the test clips
some samples, not all) and skipped = 0; and the checkpoint
RUN_DIR/step-<i+1>.safetensors of iteration i must hold adamw.step =
(i + 1) * STEPS_PER_ITERATION. Prints one line per iteration and "ok", or
exits 1 naming the first failure. Pure Python (the test machines have no
numpy).
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_checkpoints import read  # noqa: E402


def main():
    run, iterations, per = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    lines = [json.loads(l) for l in open(os.path.join(run, "metrics.jsonl"))
             if l.strip()]
    if len(lines) != iterations:
        print("%d metrics lines, expected %d" % (len(lines), iterations))
        return 1
    for line in lines:
        i = line["iteration"]
        path = os.path.join(run, "step-%d.safetensors" % (i + 1))
        step = read(path)["adamw.step"][2][0]
        kl, clip = line["approx_kl"], line["clipfrac"]
        print("iteration %d: adamw.step %d, approx_kl %.3g, clipfrac %.3g, "
              "skipped %g" % (i, step, kl, clip, line["skipped"]))
        if step != (i + 1) * per:
            print("FAIL: adamw.step %d, expected %d" % (step, (i + 1) * per))
            return 1
        if not kl > 0 or not 0 < clip < 1 or line["skipped"] != 0:
            print("FAIL: expected approx_kl > 0, 0 < clipfrac < 1 and no "
                  "skipped step")
            return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
