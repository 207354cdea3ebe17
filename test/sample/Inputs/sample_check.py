#!/usr/bin/env python3
"""@sample of a sampling program (omnigen --program=sample) on omnirun and
on the reference evaluator (test/sample/sample.test; docs/sampling.md).

    sample_check.py WORKDIR SAMPLE.mlir SAMPLE.bin STATE.safetensors OMNIRUN OMNI_EVAL

STATE holds the program's weights (its state slots, e.g. `omnirun
--function=init_state --state-out`). Two rows of identical prompt
embeddings (a fixed linear congruential generator) with seeds [5, 6] and
[6, 5]; printed (for FileCheck), then checked:

  - `swap`: the image of seed s is the same bits whatever its position in
    the batch (max |a[0] - b[1]|, |a[1] - b[0]| == 0; docs/sampling.md
    section 2);
  - `seeds differ`: the two seeds give different images (> 1e-3);
  - `reference vs omnirun`: max |omnirun - omni-eval| over the images
    <= SAMPLE_BOUND (the bound the test derives);
  - with `log_probs` (sampler sde): the same for the log-probabilities,
    relative to their largest magnitude.

No NumPy: .npy and safetensors are read and written with struct.
"""

import json
import math
import os
import re
import struct
import subprocess
import sys


def write_npy(path, shape, values, descr="<f4"):
    fmt = {"<f4": "f", "<i8": "q", "<f8": "d"}[descr]
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        descr, "".join("%d, " % d for d in shape) if len(shape) != 1 else
        "%d," % shape[0])
    header += " " * (63 - (len(header) + 10) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)))
        f.write(header.encode("latin1"))
        f.write(struct.pack("<%d%s" % (len(values), fmt), *values))


def read_npy(path):
    with open(path, "rb") as f:
        data = f.read()
    (hlen,) = struct.unpack("<H", data[8:10])
    header = data[10:10 + hlen].decode("latin1")
    if "'<f4'" not in header:
        sys.exit("sample_check.py: %s is not float32: %s" % (path, header))
    shape = [int(d) for d in re.search(r"\((.*?)\)", header).group(1).split(",")
             if d.strip()]
    body = data[10 + hlen:]
    return shape, list(struct.unpack("<%df" % (len(body) // 4), body))


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "F32":
            sys.exit("sample_check.py: %s: %s is %s" % (path, name, info["dtype"]))
        a, b = info["data_offsets"]
        body = data[8 + n + a:8 + n + b]
        out[name] = list(struct.unpack("<%df" % (len(body) // 4), body))
    return out


class Lcg:
    """Numerical Recipes' 32-bit LCG: uniform values in [-1, 1)."""

    def __init__(self, seed):
        self.state = seed & 0xFFFFFFFF

    def next(self):
        self.state = (1664525 * self.state + 1013904223) & 0xFFFFFFFF
        return self.state / 2.0**31 - 1.0


def arguments(mlir_path):
    """(name, shape, element type, is state) of every argument of @sample."""
    text = open(mlir_path).read()
    m = re.search(r"func\.func @sample\((.*?)\)\s*->", text, re.S)
    if not m:
        sys.exit("sample_check.py: no @sample in %s" % mlir_path)
    args = []
    for shape, elt, attrs in re.findall(
            r"tensor<([0-9x]*?)x?(f32|i64|f64)> \{((?:[^{}]|\{[^{}]*\})*)\}", m.group(1)):
        name = re.search(r"omni\.name = \"([^\"]+)\"", attrs).group(1)
        dims = [int(d) for d in shape.split("x")] if shape else []
        args.append((name, dims, elt, "omni.state" in attrs))
    return args


def run(cmd):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit("sample_check.py: %s failed:\n%s" % (" ".join(cmd[:3]),
                                                       proc.stderr))


def rows(shape, values):
    n = len(values) // shape[0]
    return [values[i * n:(i + 1) * n] for i in range(shape[0])]


def max_diff(a, b):
    return max(abs(x - y) for x, y in zip(a, b))


def main():
    if len(sys.argv) != 7:
        sys.exit(__doc__)
    work, mlir, binary, state, omnirun, omni_eval = sys.argv[1:]
    os.makedirs(work, exist_ok=True)
    weights = read_safetensors(state)
    rng = Lcg(11)
    state_inputs, data = [], {}
    for i, (name, shape, elt, is_state) in enumerate(arguments(mlir)):
        path = os.path.join(work, "in%d.npy" % i)
        if is_state:
            write_npy(path, shape, weights[name])
            state_inputs.append("--input=@" + path)
        elif name in ("prompt_embeds", "pooled_prompt_embeds"):
            row = [rng.next() for _ in range(math.prod(shape[1:]))]
            write_npy(path, shape, row * shape[0])  # the same prompt twice
            data[name] = "--input=@" + path
        elif name == "guidance_scale":
            data[name] = "--input=f64=4.5"
        elif name != "seeds":
            sys.exit("sample_check.py: unexpected argument %s" % name)
    names = [a[0] for a in arguments(mlir) if not a[3]]
    if names[0] != "seeds" or len([a for a in arguments(mlir) if a[0] == "seeds"]) != 1:
        sys.exit("sample_check.py: @sample's first data input is not seeds")

    def inputs(order):
        path = os.path.join(work, "seeds-%s.npy" % "-".join(map(str, order)))
        write_npy(path, [len(order)], order, "<i8")
        return ["--input=@" + path] + [data[n] for n in names[1:]]

    text = open(mlir).read()
    sde = re.search(r"func\.func @sample\(.*?\)\s*->\s*\(([^)]*)\)", text, re.S)
    has_lps = sde is not None and "log_probs" in sde.group(1)
    outs = lambda tag: ["--output=@" + os.path.join(work, tag + ".npy")] + (
        ["--output=@" + os.path.join(work, tag + ".lp.npy")] if has_lps else [])
    run([omnirun, binary, "--function=sample", "--state-in", state] +
        inputs([5, 6]) + outs("a"))
    run([omnirun, binary, "--function=sample", "--state-in", state] +
        inputs([6, 5]) + outs("b"))
    run([omni_eval, mlir, "--function=sample"] + state_inputs + inputs([5, 6]) +
        outs("ref"))
    results = {}
    for tag in ("a", "b", "ref"):
        shape, values = read_npy(os.path.join(work, tag + ".npy"))
        results[tag] = rows(shape, values)
        if has_lps:
            shape, values = read_npy(os.path.join(work, tag + ".lp.npy"))
            results[tag + ".lp"] = rows(shape, values)
    a, b, ref = results["a"], results["b"], results["ref"]
    if not all(math.isfinite(v) for r in a + ref for v in r):
        sys.exit("sample_check.py: an image is not finite")
    bound = float(os.environ["SAMPLE_BOUND"])
    swap = max(max_diff(a[0], b[1]), max_diff(a[1], b[0]))
    if has_lps:
        swap = max(swap, max_diff(results["a.lp"][0], results["b.lp"][1]),
                   max_diff(results["a.lp"][1], results["b.lp"][0]))
    differ = max_diff(a[0], a[1])
    err = max(max_diff(x, y) for x, y in zip(a, ref))
    print("images: %d x %d values in [%.3f, %.3f]" %
          (len(a), len(a[0]), min(min(r) for r in a), max(max(r) for r in a)))
    checks = [("swap", swap, 0, 0), ("seeds differ", differ, 1e-3, 1.0),
              ("reference vs omnirun", err, 0, bound)]
    if has_lps:
        lps, rlps = results["a.lp"], results["ref.lp"]
        scale = max(abs(v) for r in rlps for v in r)
        checks.append(("log_probs reference vs omnirun",
                       max(max_diff(x, y) for x, y in zip(lps, rlps)) / scale,
                       0, bound))
    ok = True
    for what, value, lo, hi in checks:
        good = lo <= value <= hi
        print("%s: %.3e (expected %.3e .. %.3e)%s" %
              (what, value, lo, hi, "" if good else " FAIL"))
        ok = ok and good
    print("PASS" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
