#!/usr/bin/env python3
"""The velocity of the bf16 recipe against the f32 one and the reference
evaluator (test/train/precision-bf16.test; docs/precision.md section 3).

    bf16_velocity.py WORKDIR F32.mlir F32.bin BF16.mlir BF16.bin OMNIRUN OMNI_EVAL

Both .mlir files are `omnigen --program=velocity` outputs of the same model
(the velocity model's parameters are arguments, named `transformer.*`).
Deterministic inputs and parameters (a fixed linear congruential generator,
PyTorch's default init bounds) go to .npy files; omnirun runs both programs,
omni-eval the bf16 one. Printed (for FileCheck), then checked:

  - `bf16 vs f32`: max |v_bf16 - v_f32| / max |v_f32| <= the bound of
    docs/precision.md section 3 (3 * 2^-8 per contraction on the longest
    path, plus 2^-24 per element of each contraction length), and >= 2^-12,
    so the bf16 program really rounds (an f32 program differs by ~1e-6);
  - `reference vs omnirun (bf16)`: omni-eval rounds where the program does,
    so it is at least 8x closer to omnirun's bf16 result than the f32
    velocity is (the only differences left are accumulation order and the
    bf16 roundings that it tips over).

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
                     ("ref", [omni_eval, bf16_mlir, "--function=velocity"])]:
        path = os.path.join(work, tag + ".npy")
        run(cmd + inputs + ["--output=@" + path])
        outs[tag] = read_npy(path)
    f32, bf16, ref = outs["f32"], outs["bf16"], outs["ref"]
    if not all(math.isfinite(v) for v in f32 + bf16 + ref):
        sys.exit("bf16_velocity.py: a velocity is not finite")
    scale = max_abs(f32)
    rel = max_abs([a - b for a, b in zip(bf16, f32)]) / scale
    ref_rel = max_abs([a - b for a, b in zip(bf16, ref)]) / scale
    bound = float(os.environ.get("BF16_BOUND", "nan"))
    print("velocity: %d values, max |v_f32| %.4g" % (len(f32), scale))
    print("bf16 vs f32: relative error %.3e (bound %.3e)" % (rel, bound))
    print("reference vs omnirun (bf16): relative error %.3e" % ref_rel)
    ok = True
    if not rel <= bound:
        print("FAIL: bf16 vs f32 above the bound")
        ok = False
    if not rel >= 2.0**-12:
        print("FAIL: bf16 vs f32 below 2^-12: is the program rounding to bf16?")
        ok = False
    if not ref_rel * 8 <= rel:
        print("FAIL: the reference evaluator does not follow omnirun's bf16 "
              "rounding (error not 8x below bf16 vs f32)")
        ok = False
    print("PASS" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
