#!/usr/bin/env python3
"""Summarizes an omnirun training run from its metrics.jsonl.

Prints the mean reward of the first and last K iterations (K = 10, or a
third of the run when shorter) and how far apart they are in units of
their standard error. With --require-improvement, exits 1 unless the last
K beat the first K by at least --min-sigma standard errors and
--min-relative of the first mean's magnitude.
"""
import argparse
import json
import math
import sys


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("metrics", help="metrics.jsonl written by omnirun --out")
    p.add_argument("--window", type=int, default=10)
    p.add_argument("--require-improvement", action="store_true")
    p.add_argument("--min-sigma", type=float, default=4.0)
    p.add_argument("--min-relative", type=float, default=0.003)
    a = p.parse_args()
    rewards = []
    with open(a.metrics) as f:
        for n, line in enumerate(f, 1):
            try:
                rewards.append(float(json.loads(line)["reward_mean"]))
            except (ValueError, KeyError) as e:
                sys.exit(f"{a.metrics}:{n}: expected a JSON object with "
                         f"reward_mean ({e})")
    k = min(a.window, len(rewards) // 3)
    if k < 2:
        sys.exit(f"{a.metrics}: {len(rewards)} iterations; need at least 6")
    first, last = rewards[:k], rewards[-k:]

    def mean_var(x):
        m = sum(x) / len(x)
        return m, sum((v - m) ** 2 for v in x) / (len(x) - 1)

    (m0, v0), (m1, v1) = mean_var(first), mean_var(last)
    se = math.sqrt(v0 / k + v1 / k) or 1e-30
    sigma = (m1 - m0) / se
    rel = (m1 - m0) / abs(m0) if m0 else float("inf")
    print(f"reward (mean over iterations): first {k}: {m0:.6g}   last {k}: "
          f"{m1:.6g}   change {rel:+.2%} ({sigma:+.1f} standard errors, "
          f"{len(rewards)} iterations)")
    if a.require_improvement and not (sigma >= a.min_sigma and
                                      rel >= a.min_relative):
        print(f"FAIL: expected the last {k} iterations to beat the first by "
              f">= {a.min_sigma} standard errors and >= {a.min_relative:.2%}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
