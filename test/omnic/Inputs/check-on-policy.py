"""Checks a FlowGRPO run's metrics.jsonl for an exact on-policy ratio.

The program makes one update per rollout, with the weights that sampled it,
so the log-probabilities the loss recomputes must equal, bit for bit, the
ones the rollout stored: every ratio is exactly 1. approx_kl is
mean(mean_b((lp - old_lp)^2) / 2) in float32; a difference of one ulp of
a log-probability near 1 squares to ~1e-14, far above float32's underflow,
so approx_kl is exactly 0 if and only if every pair is bit-identical, and
then clipfrac is 0 too. With --exact-loss (beta = 0) the clipped
policy-gradient term is then exactly -mean(A) (docs/flowgrpo-math.md section 6,
"on-policy check"): loss must be the exact negation of advantage_mean.
metrics.jsonl prints floats with 9 significant digits, which round-trips
float32, so comparing the printed values compares the bits.
"""
import json
import sys

exact_loss = "--exact-loss" in sys.argv[2:]
n = 0
for line in open(sys.argv[1]):
    m = json.loads(line)
    it = m["iteration"]
    for key in ("approx_kl", "clipfrac"):
        if m[key] != 0:
            sys.exit(f"iteration {it}: {key} is {m[key]!r}, expected exactly 0")
    if exact_loss and m["loss"] != -m["advantage_mean"]:
        sys.exit(f"iteration {it}: loss {m['loss']!r} is not exactly "
                 f"-advantage_mean ({-m['advantage_mean']!r})")
    n += 1
print(f"on-policy: {n} iterations, every ratio exactly 1")
