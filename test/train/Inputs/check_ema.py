#!/usr/bin/env python3
"""Checks the EMA of the weights in omnirun checkpoints (docs/recipes.md
section 2, docs/flowgrpo-math.md section 7), independently of omni.

usage:
  check_ema.py formula DECAY EVERY START CKPT...
      START is the checkpoint of the initial state (omnirun --steps 0), the
      CKPTs those of consecutive iterations. At START every ema.X equals X
      bit for bit. Then for each CKPT, with n its adamw.step and P the one
      before: when n advanced and (n + 1) % EVERY == 0 (flow_grpo's
      EMAModuleWrapper.step(params, global_step)),
          d = min(DECAY, (1 + n) / (10 + n)),
          ema.X = P's ema.X + (1 - d) (X - P's ema.X)
      within the rounding of that computation in float32 (below); otherwise
      ema.X is P's bit for bit. Prints one line per CKPT and then "EMA
      follows the formula" or "WRONG"; exits 1 on WRONG.
  check_ema.py from-ema CKPT START
      START (omnirun --init-from-ema CKPT --steps 0) holds CKPT's EMA
      weights: each transformer.X of START is CKPT's ema.transformer.X bit
      for bit, or CKPT's transformer.X where CKPT has no EMA of X (LoRA's
      frozen base), and START's ema.transformer.X (if any) is its
      transformer.X. Prints the counts, then "from the EMA" or "WRONG".
  check_ema.py same A PREFIX_A B PREFIX_B
      Every tensor PREFIX_A + X of A equals B's PREFIX_B + X bit for bit (and
      B has no other PREFIX_B tensor); prints "same N tensors" or
      "DIFFERENT".
  check_ema.py extract CKPT PREFIX OUT
      Writes CKPT's tensors PREFIX + X to OUT as X (an --init file).

The tolerance of one updated element: the program rounds c = 1 - d to
float32 (relative error u = 2^-24), then p - e, the product and the sum each
once, so |got - exact| <= 3u |c (p - e)| + u |got| to first order; the check
allows 3.01u |c (p - e)| + 1.01u |got| (an FMA rounds less, never more).
Pure Python (struct + json), as the test machines have no numpy.
"""
import json
import struct
import sys

# compare_checkpoints.py (this folder) reads the safetensors files.
from compare_checkpoints import FORMATS, read

U = 2.0 ** -24


def write(path, tensors):
    header, body = {}, b""
    for name in sorted(tensors):
        dtype, shape, values = tensors[name]
        blob = struct.pack("<%d%s" % (len(values), FORMATS[dtype]), *values)
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(body), len(body) + len(blob)]}
        body += blob
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + body)


def formula(decay, every, start, ckpts):
    prev = read(start)
    emas = sorted(k for k in prev if k.startswith("ema."))
    ok = bool(emas)
    if not emas:
        print("%s has no ema.* tensors" % start)
    for name in emas:
        if prev[name] != prev[name[len("ema."):]]:
            print("%s: %s is not %s at the start" % (start, name,
                                                     name[len("ema."):]))
            ok = False
    moved = False
    for path in ckpts:
        cur = read(path)
        n, n0 = cur["adamw.step"][2][0], prev["adamw.step"][2][0]
        due = n != n0 and (n + 1) % every == 0
        if sorted(k for k in cur if k.startswith("ema.")) != emas:
            print("%s: other ema.* tensors than %s" % (path, start))
            return False
        if not due:
            same = all(cur[k] == prev[k] for k in emas)
            print("adamw.step %d: not due, %s" % (
                n, "unchanged" if same else "CHANGED"))
            ok = ok and same
            prev = cur
            continue
        d = min(decay, (1.0 + n) / (10.0 + n))
        c = 1.0 - d
        worst = 0.0  # max |got - exact| / tolerance
        changed = False
        for k in emas:
            e0, p, got = prev[k][2], cur[k[len("ema."):]][2], cur[k][2]
            for x, y, g in zip(e0, p, got):
                step = c * (y - x)
                tol = 3.01 * U * abs(step) + 1.01 * U * abs(g)
                err = abs(g - (x + step))
                if err > tol:
                    worst = max(worst, float("inf") if tol == 0 else err / tol)
                elif tol > 0:
                    worst = max(worst, err / tol)
                changed = changed or g != x
        print("adamw.step %d: updated with d = %.6f, max error / tolerance "
              "%.3f%s" % (n, d, worst, "" if changed else ", but NOT MOVED"))
        ok = ok and worst <= 1.0 and changed
        moved = moved or changed
        prev = cur
    ok = ok and moved
    print("EMA follows the formula" if ok else "WRONG")
    return ok


def from_ema(ckpt, start):
    src, dst = read(ckpt), read(start)
    ok, averaged, plain = True, 0, 0
    for name in sorted(dst):
        if not name.startswith("transformer."):
            continue
        if "ema." + name in src:
            want = src["ema." + name]
            averaged += 1
        else:
            want = src.get(name)
            plain += 1
        if dst[name] != want:
            print("%s is not the checkpoint's" % name)
            ok = False
        if "ema." + name in dst and dst["ema." + name] != dst[name]:
            print("ema.%s is not %s" % (name, name))
            ok = False
    print("%d tensors from the EMA, %d from the weights" % (averaged, plain))
    ok = ok and averaged > 0
    print("from the EMA" if ok else "WRONG")
    return ok


def same(a, prefix_a, b, prefix_b):
    ta, tb = read(a), read(b)
    xs = sorted(k[len(prefix_a):] for k in ta if k.startswith(prefix_a))
    ys = sorted(k[len(prefix_b):] for k in tb if k.startswith(prefix_b))
    ok = bool(xs) and xs == ys
    if xs != ys:
        print("the names differ: %d vs %d tensors" % (len(xs), len(ys)))
    for x in xs:
        if x in ys and ta[prefix_a + x] != tb[prefix_b + x]:
            print("%s%s differs from %s%s" % (prefix_a, x, prefix_b, x))
            ok = False
    print("same %d tensors" % len(xs) if ok else "DIFFERENT")
    return ok


def main():
    args = sys.argv[1:]
    if args and args[0] == "formula" and len(args) >= 5:
        return 0 if formula(float(args[1]), int(args[2]), args[3],
                            args[4:]) else 1
    if args and args[0] == "from-ema" and len(args) == 3:
        return 0 if from_ema(*args[1:]) else 1
    if args and args[0] == "same" and len(args) == 5:
        return 0 if same(*args[1:]) else 1
    if args and args[0] == "extract" and len(args) == 4:
        tensors = read(args[1])
        write(args[3], {k[len(args[2]):]: v for k, v in tensors.items()
                        if k.startswith(args[2])})
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main())
