#!/usr/bin/env python3
"""Compares GPU results with the cpu driver's (tools/gpu-check/README.md).

  compare.py [--tolerance T] [--json] EXPECTED ACTUAL

EXPECTED and ACTUAL are two .npy files or two safetensors checkpoints (all
their tensors, matched by name). Per tensor the error is relative to the
tensor's largest magnitude: max |a - b| / max(max |a|, max |b|), zero when
both are all zeros, infinite when a NaN or Inf sits where the other has
another value; integer and bool tensors must be equal. Prints one line per
tensor and a last line "PASS max-rel <e> (tolerance <t>; largest: <the 3
tensors of largest error>)" or "FAIL ..."; exits 0 on PASS,
1 on FAIL, 2 on unreadable input. Pure Python (npyio.py), no numpy.
"""
import argparse
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import npyio  # noqa: E402

FLOATS = ("f32", "f64", "f16", "bf16")


def rel_error(a, b):
    scale = 0.0
    worst = 0.0
    for x, y in zip(a, b):
        fx, fy = math.isfinite(x), math.isfinite(y)
        if not (fx and fy):
            if not (x == y or (math.isnan(x) and math.isnan(y))):
                return math.inf
            continue
        scale = max(scale, abs(x), abs(y))
        worst = max(worst, abs(x - y))
    if worst == 0.0:
        return 0.0
    return worst / scale


def compare(name, expected, actual, tolerance):
    (edt, esh, ev), (adt, ash, av) = expected, actual
    if tuple(esh) != tuple(ash):
        return f"{name}: shape {list(ash)} but expected {list(esh)}", math.inf
    if (edt in FLOATS) != (adt in FLOATS):
        return f"{name}: dtype {adt} but expected {edt}", math.inf
    if edt in FLOATS:
        e = rel_error(ev, av)
        ok = e <= tolerance
        return (f"{name} {edt} {list(esh)}: max-rel {e:.3g} "
                f"{'ok' if ok else 'OVER ' + format(tolerance, 'g')}"), e
    bad = sum(1 for x, y in zip(ev, av) if x != y)
    return (f"{name} {edt} {list(esh)}: {bad} of {len(ev)} differ",
            0.0 if bad == 0 else math.inf)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tolerance", type=float, default=1e-5)
    p.add_argument("expected")
    p.add_argument("actual")
    a = p.parse_args()
    try:
        if a.expected.endswith(".npy"):
            exp = {"result": npyio.read_npy(a.expected)}
            act = {"result": npyio.read_npy(a.actual)}
        else:
            exp = npyio.read_safetensors(a.expected)
            act = npyio.read_safetensors(a.actual)
    except (OSError, ValueError, KeyError) as e:
        print(f"FAIL cannot read: {e}")
        return 2
    worst, failed, errors = 0.0, False, []
    for name in sorted(exp):
        if name not in act:
            print(f"{name}: missing")
            failed = True
            continue
        line, e = compare(name, exp[name], act[name], a.tolerance)
        print(line)
        errors.append((e, name))
        worst = max(worst, e)
        failed |= e > a.tolerance
    for name in sorted(set(act) - set(exp)):
        print(f"{name}: not expected")
        failed = True
    largest = ", ".join(f"{n} {e:.3g}" for e, n in sorted(errors)[-3:][::-1])
    print(f"{'FAIL' if failed else 'PASS'} max-rel {worst:.3g} "
          f"(tolerance {a.tolerance:g}; largest: {largest})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
