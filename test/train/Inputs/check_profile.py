#!/usr/bin/env python3
"""Checks an omnirun --profile file (runtime/executor/Profile.h).

usage: check_profile.py PROFILE.json ITERATIONS [FLOPS.txt FUNCTION]

Checks, independently of the executor's arithmetic:
  - the structure (iterations, phases with kinds and symbols, every field);
  - the trainer phases rollout, decode, reward, loss and update are there;
  - each kind's count, seconds, bytes and FLOPs are the sums of its
    symbols' rows, and profiled_seconds the sum of the phase's rows;
  - every row's count is a multiple of ITERATIONS (each iteration runs the
    same commands);
  - the rows add up to the phase's top-level time: profiled <= phase (the
    commands are timed inside the phase's window) and phase - profiled <=
    5% of the phase + 20 us per command + 5 ms (the executor's own work
    between commands, and a loaded machine's preemptions in those gaps);
  - matmul rows: FLOPs = count x 2 B M N K and bytes = count x 4 (B M K +
    K N [x B] + B M N) for the shapes in the symbol (f32; the rhs is shared
    when its bytes say so); a matmul with an epilogue ("matmul ... +
    omni_kernel_N", docs/backend.md "Matmul epilogues") has the same FLOPs
    and more bytes (the kernel's buffers, its read of the result at least);
  - share = seconds / the phase's seconds;
  - with FLOPS.txt (omnic --report-flops of the program) and the step
    FUNCTION: each phase's matmul, attention and conv2d FLOPs in the
    profile are ITERATIONS x omnic's static count for that phase (two
    independent counts: the executor's from the library calls it ran,
    omnic's from the ops and the loops' trip counts).
Prints one line per phase; exits 1 with one line on the first failure.
"""
import json
import re
import sys


def fail(msg):
    sys.exit("check_profile.py: " + msg)


path, iterations = sys.argv[1], int(sys.argv[2])
static = {}
if len(sys.argv) > 3:
    function, current = "@" + sys.argv[4] + ":", None
    for line in open(sys.argv[3]):
        if not line.startswith(" "):
            current = line.startswith(function)
        m = re.match(r"  phase (\S+): \d+ FLOPs \(matmul (\d+), attention "
                     r"(\d+), conv2d (\d+),", line)
        if current and m:
            static[m.group(1)] = dict(zip(("matmul", "attention", "conv2d"),
                                          map(int, m.groups()[1:])))
    if not static:
        fail(f"{sys.argv[3]}: no phases of {function}")
with open(path) as f:
    d = json.load(f)
if d.get("iterations") != iterations:
    fail(f"iterations {d.get('iterations')}, expected {iterations}")
phases = {p["phase"]: p for p in d["phases"]}
for name in ("rollout", "decode", "reward", "loss", "update"):
    if name not in phases:
        fail(f"no phase {name!r} in {sorted(phases)}")
ROW = ("kind", "symbol", "where", "count", "seconds", "share", "bytes",
       "flops")
KIND = ("kind", "count", "seconds", "share", "bytes", "flops")
close = lambda a, b: abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))
for p in d["phases"]:
    name, total = p["phase"], p["seconds"]
    sums = {}
    for r in p["symbols"]:
        if tuple(r) != ROW:
            fail(f"{name}: row fields {list(r)}, expected {list(ROW)}")
        if r["count"] <= 0 or r["count"] % iterations:
            fail(f"{name}: {r['symbol']}: count {r['count']} is not a "
                 f"positive multiple of {iterations}")
        if r["seconds"] < 0 or not close(r["share"], r["seconds"] / total
                                         if total > 0 else 0):
            fail(f"{name}: {r['symbol']}: share {r['share']}")
        s = sums.setdefault(r["kind"], [0, 0.0, 0, 0])
        for i, k in enumerate(("count", "seconds", "bytes", "flops")):
            s[i] += r[k]
        m = re.fullmatch(r"matmul (\d+)x(\d+)x(\d+)x(\d+) [nt][nt]"
                         r"( \+ omni_kernel_\d+)?", r["symbol"])
        if r["kind"] == "matmul":
            if not m:
                fail(f"{name}: matmul symbol {r['symbol']!r}")
            b, mm, n, k = map(int, m.groups()[:4])
            if r["flops"] != r["count"] * 2 * b * mm * n * k:
                fail(f"{name}: {r['symbol']}: flops {r['flops']}, expected "
                     f"{r['count']} x 2 x {b} x {mm} x {n} x {k}")
            each = r["bytes"] // r["count"]
            plain = (4 * (b * mm * k + k * n + b * mm * n),
                     4 * (b * mm * k + b * k * n + b * mm * n))
            if (each <= min(plain) + 4 * b * mm * n - 1 if m.group(5)
                    else each not in plain):
                fail(f"{name}: {r['symbol']}: {each} bytes per call")
    for kind in p["kinds"]:
        if tuple(kind) != KIND:
            fail(f"{name}: kind fields {list(kind)}, expected {list(KIND)}")
        s = sums.pop(kind["kind"], None)
        if (s is None or s[0] != kind["count"] or not close(
                s[1], kind["seconds"]) or s[2] != kind["bytes"]
                or s[3] != kind["flops"]):
            fail(f"{name}: kind {kind['kind']} is not the sum of its rows")
    if sums:
        fail(f"{name}: rows of kinds {sorted(sums)} without a kind total")
    profiled = sum(r["seconds"] for r in p["symbols"])
    if not close(profiled, p["profiled_seconds"]):
        fail(f"{name}: profiled_seconds {p['profiled_seconds']}, rows "
             f"{profiled}")
    commands = sum(r["count"] for r in p["symbols"])
    slack = 0.05 * total + 20e-6 * commands + 5e-3
    if profiled > total * (1 + 1e-9) or total - profiled > slack:
        fail(f"{name}: rows {profiled:.6f} s, phase {total:.6f} s "
             f"(slack {slack:.6f} s)")
    if static:
        want = static.get(name or "(none)", {})
        for kind in ("matmul", "attention", "conv2d"):
            got = sum(r["flops"] for r in p["symbols"] if r["kind"] == kind)
            if got != iterations * want.get(kind, 0):
                fail(f"{name}: {kind} FLOPs {got}, omnic counts "
                     f"{want.get(kind, 0)} per iteration")
    print(f"{name or '(none)'}: ok, kinds " +
          ",".join(sorted(k["kind"] for k in p["kinds"])))
