#!/usr/bin/env python3
"""Writes the inputs of the per-op checks (tools/gpu-check/ops.mlir).

  gen_inputs.py LISTING OUTDIR

LISTING is `omnirun ops.bin --list`. For every function @f with inputs
t0, t1, ... writes OUTDIR/f.in<i>.npy and prints one line
"f <inputs> <results> <tolerance>" (the manifest prepare.sh stores).
Values are deterministic (a 64-bit LCG seeded by the function and
argument) and drawn from a range that keeps each op's math well
conditioned: positive where log, sqrt, rsqrt and pow need it, a mean away
from zero where long sums would otherwise cancel (the 1e-5 relative check
is per tensor, against its largest magnitude). Tolerances: 1e-5 relative
for f32 results; 0 (bit-identical) for random numbers (docs/rng.md) and
for casts (correctly rounded on both drivers); for the bf16 library calls
the bounds in BF16_TOLERANCES, derived there.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import npyio  # noqa: E402

# (function, argument) -> (low, high) of a uniform draw; integers: a value.
RANGES = {
    ("math", 1): (0.1, 3.0),
    ("reductions", 0): (-1.0, 3.0),
    ("big_sum", 0): (0.0, 1.0),
    ("attention", 3): (-2.0, 0.0),
    ("attention_bf16", 2): (0.5, 1.5),
    ("random", 0): 42,
    ("random", 1): 7,
}
EXACT = {"random", "cast"}

# The bf16 library calls (ops.mlir's *_bf16). Both drivers multiply the
# same bf16 operands exactly in f32 and accumulate in f32 (in different
# orders: differences near 1e-6 of the result), then round to bf16, whose
# ulp is at most 2^-7 of the value, so a rounding that tips the other way
# moves an element by at most 2^-7 of the tensor's largest magnitude.
# - matmul, conv2d: one rounding: 2^-7, with room for the f32 orders: 2^-6.
# - linear: the product is rounded, then the bias added and rounded again
#   (docs/precision.md): two roundings: 2^-6, with room: 2^-5.
# - attention: scores and softmax in f32 on both; the cuda driver rounds
#   the probabilities P to bf16 before P v (docs/precision.md's table), the
#   cpu driver does not: each P moves by at most 2^-8 of itself, so each
#   output by at most 2^-8 sum P |v| <= 2^-8 max |v|. With v drawn from
#   (0.5, 1.5) (RANGES) every output is a weighted mean of such values,
#   at least 0.5, so max |v| <= 3 max |out|: 3 x 2^-8, plus the output's
#   own rounding 2^-7: 5 x 2^-8, about 0.0195; with room: 2^-5.
BF16_TOLERANCES = {
    "matmul_bf16": 2**-6,
    "conv2d_bf16": 2**-6,
    "linear_bf16": 2**-5,
    "attention_bf16": 2**-5,
}
DTYPES = {"f32": "f32", "f64": "f64", "i64": "i64", "i32": "i32",
          "i1": "bool"}


def parse_type(text):
    m = re.fullmatch(r"tensor<(?:([0-9x]+)x)?([a-z0-9]+)>", text.strip())
    if not m:
        raise ValueError(f"cannot read type {text!r}")
    dims = tuple(int(d) for d in m.group(1).split("x")) if m.group(1) else ()
    return dims, m.group(2)


def split_types(text):
    text = text.strip()
    if text.startswith("(") and text.endswith(")"):
        text = text[1:-1]
    return [t for t in re.findall(r"tensor<[^>]*>", text)]


def lcg_values(seed, count, low, high):
    state = (seed * 6364136223846793005 + 1442695040888963407) % 2**64
    out = []
    for _ in range(count):
        state = (state * 6364136223846793005 + 1442695040888963407) % 2**64
        u = (state >> 11) / float(2**53)
        out.append(low + (high - low) * u)
    return out


def main():
    listing, outdir = sys.argv[1], sys.argv[2]
    os.makedirs(outdir, exist_ok=True)
    for line in open(listing):
        m = re.match(r"@(\w+)\((.*?)\) -> (.*)$", line.strip())
        if not m:
            continue
        name, ins, outs = m.group(1), split_types(m.group(2)), \
            split_types(m.group(3))
        for i, t in enumerate(ins):
            dims, elem = parse_type(t)
            count = 1
            for d in dims:
                count *= d
            spec = RANGES.get((name, i), (-2.0, 2.0))
            if elem in ("i64", "i32"):
                values = [spec if isinstance(spec, int) else 1] * count
            elif elem == "f32":
                seed = sum(ord(c) for c in name) * 1000 + i
                values = lcg_values(seed, count, *spec)
            else:
                raise ValueError(f"@{name} input {i}: {elem} inputs are not "
                                 "generated")
            npyio.write_npy(os.path.join(outdir, f"{name}.in{i}.npy"),
                            DTYPES[elem], dims, values)
        tol = 0 if name in EXACT else BF16_TOLERANCES.get(name, 1e-5)
        print(f"{name} {len(ins)} {len(outs)} {tol:g}")


if __name__ == "__main__":
    main()
