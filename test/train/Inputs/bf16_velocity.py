#!/usr/bin/env python3
"""The velocity of the bf16 recipe against the f32 one and the reference
evaluator (test/train/precision-bf16.test; docs/precision.md section 3).

    bf16_velocity.py WORKDIR F32.mlir F32.bin BF16.mlir BF16.bin OMNIRUN OMNI_EVAL

Both .mlir files are `omnigen --program=velocity` outputs of the same model
(the velocity model's parameters are arguments, named `transformer.*`).
Deterministic inputs and parameters (a fixed linear congruential generator,
PyTorch's default init bounds) go to .npy files; omnirun runs both programs,
omni-eval the bf16 one. Printed (for FileCheck), then checked:

  - `bf16 vs f32`: max |v_bf16 - v_f32| / max |v_f32| <= BF16_BOUND (the
    bound of docs/precision.md section 3: 3 * 2^-8 per contraction on the
    longest path, plus 2^-24 per element of the longest contraction), and
    >= 2^-12, so the bf16 program really rounds (two f32 evaluations differ
    by ~1e-6);
  - `reference vs omnirun (bf16)` <= BF16_BOUND, and `reference (bf16) vs
    f32` in the same window as bf16 vs f32: omni-eval rounds the bf16
    program too (one that ignored the casts would be ~1e-6 from f32). Not
    closer than that: where the two evaluations differ in the last f32 bit
    before a bf16 rounding, one rounds up and the other down, and such
    1-ulp flips cascade through the layers to the size of the bf16 error
    itself (docs/precision.md section 3);
  - `reference vs omnirun (f32)` <= F32_BOUND, the same bound with
    u = 2^-24: the differences above come from bf16, not the evaluators.

No NumPy: .npy is written and read with struct (f32, little-endian, C order).
"""

import math
import os
import re
import struct
import subprocess
import sys


def write_npy(path, shape, values):
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }" % (
        "".join("%d, " % d for d in shape) if len(shape) != 1 else "%d," % shape[0])
    header += " " * (63 - (len(header) + 10) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)))
        f.write(header.encode("latin1"))
        f.write(struct.pack("<%df" % len(values), *values))


def read_npy(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:6] != b"\x93NUMPY":
        sys.exit("bf16_velocity.py: %s is not a .npy file" % path)
    (hlen,) = struct.unpack("<H", data[8:10])
    header = data[10:10 + hlen].decode("latin1")
    if "'<f4'" not in header:
        sys.exit("bf16_velocity.py: %s is not float32: %s" % (path, header))
    body = data[10 + hlen:]
    return list(struct.unpack("<%df" % (len(body) // 4), body))


class Lcg:
    """Numerical Recipes' 32-bit LCG: uniform values in [-1, 1)."""

    def __init__(self, seed):
        self.state = seed & 0xFFFFFFFF

    def next(self):
        self.state = (1664525 * self.state + 1013904223) & 0xFFFFFFFF
        return self.state / 2.0**31 - 1.0


def arguments(mlir_path):
    """(name, shape) of every argument of @velocity."""
    text = open(mlir_path).read()
    m = re.search(r"func\.func @velocity\((.*?)\)\s*->", text, re.S)
    if not m:
        sys.exit("bf16_velocity.py: no @velocity in %s" % mlir_path)
    args = []
    for shape, name in re.findall(
            r"tensor<([0-9x]*)xf32> \{omni\.name = \"([^\"]+)\"", m.group(1)):
        args.append((name, [int(d) for d in shape.split("x")]))
    return args


def value_of(name, shape, rng):
    n = math.prod(shape)
    if name.startswith("transformer."):
        if name.endswith("norm.weight") or ".norm_" in name and name.endswith(
                ".weight") and len(shape) == 1:
            return [1.0 + 0.1 * rng.next() for _ in range(n)]
        fan_in = math.prod(shape[1:]) if len(shape) > 1 else 64
        bound = 1.0 / math.sqrt(fan_in)
        return [bound * rng.next() for _ in range(n)]
    if name == "timestep":
        return [250.0 + 500.0 * i for i in range(n)]
    return [rng.next() for _ in range(n)]  # x, prompt, pooled


def run(cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit("bf16_velocity.py: %s failed:\n%s" % (cmd[0], proc.stderr))


def max_abs(values):
    return max(abs(v) for v in values)


def main():
    if len(sys.argv) != 8:
        sys.exit(__doc__)
    work, f32_mlir, f32_bin, bf16_mlir, bf16_bin, omnirun, omni_eval = sys.argv[1:]
    os.makedirs(work, exist_ok=True)
    args = arguments(f32_mlir)
    if args != arguments(bf16_mlir):
        sys.exit("bf16_velocity.py: the two programs take different arguments")
    rng = Lcg(7)
    inputs = []
    for i, (name, shape) in enumerate(args):
        path = os.path.join(work, "in%d.npy" % i)
        write_npy(path, shape, value_of(name, shape, rng))
        inputs.append("--input=@" + path)
    outs = {}
    for tag, cmd in [("f32", [omnirun, f32_bin, "--function=velocity"]),
                     ("bf16", [omnirun, bf16_bin, "--function=velocity"]),
                     ("ref_f32", [omni_eval, f32_mlir, "--function=velocity"]),
                     ("ref_bf16", [omni_eval, bf16_mlir, "--function=velocity"])]:
        path = os.path.join(work, tag + ".npy")
        run(cmd + inputs + ["--output=@" + path])
        outs[tag] = read_npy(path)
    if not all(math.isfinite(v) for o in outs.values() for v in o):
        sys.exit("bf16_velocity.py: a velocity is not finite")
    scale = max_abs(outs["f32"])

    def rel(a, b):
        return max_abs([x - y for x, y in zip(outs[a], outs[b])]) / scale

    bound = float(os.environ["BF16_BOUND"])
    f32_bound = float(os.environ["F32_BOUND"])
    print("velocity: %d values, max |v_f32| %.4g" % (len(outs["f32"]), scale))
    checks = [
        ("bf16 vs f32", rel("bf16", "f32"), 2.0**-12, bound),
        ("reference vs omnirun (bf16)", rel("ref_bf16", "bf16"), 0, bound),
        ("reference (bf16) vs f32", rel("ref_bf16", "f32"), 2.0**-12, bound),
        ("reference vs omnirun (f32)", rel("ref_f32", "f32"), 0, f32_bound),
    ]
    ok = True
    for what, err, lo, hi in checks:
        good = lo <= err <= hi
        print("%s: relative error %.3e (expected %.3e .. %.3e)%s" %
              (what, err, lo, hi, "" if good else " FAIL"))
        ok = ok and good
    print("PASS" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
