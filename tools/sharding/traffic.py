#!/usr/bin/env python3
"""traffic.py - the bytes each rank sends in a sharded step.bin's collectives.

Reads `omnic step.bin --emit=json` (or `omnic train.mlir --emit=json`): the
step.bin schema (runtime/schema/step.fbs) as JSON. Prints, per function and
per collective kind and group, the bytes one rank sends per call of the
function, next to the closed forms for FSDP and DP (docs/sharding.md
section 5). Standard library only; no state is read or run.

Counting rule (a ring over the group; G = the product of the sizes of the
collective's mesh axes, S = the bytes of the named tensor, its dtype size
times its element count):
  AllReduce      2 (G-1)/G * S   S = the operand (= the result)
  AllGather        (G-1)/G * S   S = the result (G local blocks)
  ReduceScatter    (G-1)/G * S   S = the operand (G result blocks)
  Broadcast        (G-1)/G * S   S = the operand (a chain: every rank but
                                 the last forwards S once; averaged)
  a group of G = 1 sends nothing.
A Loop's body counts (upper - lower + step - 1) // step times (0 when
upper <= lower); a Call counts the callee's commands once per execution,
so a function's total includes what it calls. Bytes are exact fractions;
they are printed rounded to whole bytes.

Closed forms, with P = the bytes of the trainable parameters (the
parameter state slots that have an AdamW moment `adamw.m.<name>`, global
shapes) and A = the bytes of every parameter state slot (trained and
frozen), F and D the sizes of the fsdp and dp axes:
  DP   all_reduce of the gradients    2 (D-1)/D * P          (per update)
  FSDP all_gather of the parameters     (F-1)/F * A          (per gather)
       reduce_scatter of the gradients  (F-1)/F * P          (per update)
  DP x FSDP: the gradients' shards are all_reduced over dp:
                                      2 (D-1)/D * P / F      (per update)
Each measured row says how many of its closed form it is ("= 3.00 x").

Exit status 1 with a one-line error for a file that is not step.bin JSON.
"""
import argparse
import json
import sys
from fractions import Fraction

DTYPE_BYTES = {"F32": 4, "F64": 8, "F16": 2, "BF16": 2, "I1": 1, "I32": 4,
               "I64": 8}
KINDS = ["AllReduce", "AllGather", "ReduceScatter", "Broadcast"]


class Error(Exception):
    pass


def nbytes(shape, dtype):
    n = DTYPE_BYTES.get(dtype)
    if n is None:
        raise Error(f"unknown dtype {dtype!r}")
    for d in shape or []:
        n *= int(d)
    return n


def trip_count(loop):
    lower, upper, step = (int(loop.get(k, 0)) for k in ("lower", "upper",
                                                        "step"))
    if step < 1:
        raise Error(f"loop step {step}: expected >= 1")
    return max(0, (upper - lower + step - 1) // step)


class Program:
    def __init__(self, step):
        if not isinstance(step, dict) or "functions" not in step:
            raise Error("expected the JSON of a step.bin (a 'functions' list)")
        self.tensors = step.get("tensors", [])
        self.functions = step["functions"]
        self.meshes = step.get("meshes", [])
        self.state = step.get("state", [])
        self.memo = {}

    def tensor_bytes(self, index):
        if not 0 <= index < len(self.tensors):
            raise Error(f"tensor {index}: expected < {len(self.tensors)}")
        t = self.tensors[index]
        return nbytes(t.get("shape", []), t.get("dtype", "F32"))

    def group(self, c):
        """(axis names, G) of a Collective."""
        m = int(c.get("mesh", 0))
        if not 0 <= m < len(self.meshes):
            raise Error(f"collective on mesh {m}: the file has "
                        f"{len(self.meshes)} meshes")
        mesh = self.meshes[m]
        names, g = [], 1
        for a in c.get("axes", []):
            names.append(mesh["axes"][a])
            g *= int(mesh["shape"][a])
        return ",".join(names), g

    def sent(self, c):
        kind = c.get("kind", "AllReduce")
        if kind not in KINDS:
            raise Error(f"unknown collective kind {kind!r}")
        axes, g = self.group(c)
        size = self.tensor_bytes(int(c["result" if kind == "AllGather"
                                       else "operand"]))
        share = Fraction(g - 1, g) * size
        return (kind, axes, g), share * 2 if kind == "AllReduce" else share

    def walk(self, commands, times, out, stack):
        for cmd in commands:
            kind, body = cmd.get("kind_type"), cmd.get("kind", {})
            if kind == "Collective":
                key, n = self.sent(body)
                calls, total = out.get(key, (0, Fraction(0)))
                out[key] = (calls + times, total + times * n)
            elif kind == "Loop":
                self.walk(body.get("body", []), times * trip_count(body), out,
                          stack)
            elif kind == "Call":
                for key, (calls, total) in self.totals(int(body["function"]),
                                                       stack).items():
                    c0, t0 = out.get(key, (0, Fraction(0)))
                    out[key] = (c0 + times * calls, t0 + times * total)

    def totals(self, f, stack=()):
        """{(kind, axes, G): (calls, bytes)} of one call of function f."""
        if not 0 <= f < len(self.functions):
            raise Error(f"call of function {f}: the file has "
                        f"{len(self.functions)}")
        if f in stack:
            raise Error(f"function {self.functions[f].get('name')} calls "
                        "itself")
        if f not in self.memo:
            out = {}
            self.walk(self.functions[f].get("commands", []), 1, out,
                      stack + (f,))
            self.memo[f] = out
        return self.memo[f]

    def axis_size(self, name):
        for mesh in self.meshes:
            if name in mesh.get("axes", []):
                return int(mesh["shape"][mesh["axes"].index(name)])
        return 1

    def parameter_bytes(self):
        """(P, A): trainable and all parameter bytes, global shapes."""
        slots = {s.get("name", ""): s for s in self.state}
        def size(s):
            shape = (s.get("sharding") or {}).get("global_shape") or \
                s.get("shape", [])
            return nbytes(shape, s.get("dtype", "F32"))
        params = [s for s in self.state if s.get("role") == "Parameter"]
        trained = [s for s in params
                   if "adamw.m." + s.get("name", "") in slots]
        return sum(map(size, trained)), sum(map(size, params))


def closed_forms(p, a, d, f):
    """[(kind, axes, name, bytes)]: the expectation of each collective."""
    forms = []
    if f > 1:
        forms.append(("AllGather", "fsdp", "(F-1)/F * A",
                      Fraction(f - 1, f) * a))
        forms.append(("ReduceScatter", "fsdp", "(F-1)/F * P",
                      Fraction(f - 1, f) * p))
    if d > 1:
        forms.append(("AllReduce", "dp", "2(D-1)/D * P" +
                      (" / F" if f > 1 else ""),
                      2 * Fraction(d - 1, d) * p / f))
    return forms


def report(program, out):
    p, a = program.parameter_bytes()
    d, f = program.axis_size("dp"), program.axis_size("fsdp")
    for mesh in program.meshes:
        dims = ", ".join(f"{x}={n}" for x, n in zip(mesh["axes"],
                                                      mesh["shape"]))
        out.write(f"mesh @{mesh.get('name', '')}: {dims}\n")
    out.write(f"parameters: P = {p} bytes trained, A = {a} bytes in all "
              f"(D = {d}, F = {f})\n")
    forms = closed_forms(p, a, d, f)
    for form in forms:
        out.write(f"expected {form[0]} over {form[1]}: {form[2]} = "
                  f"{round(form[3])} bytes per rank\n")
    for index, fn in enumerate(program.functions):
        rows = program.totals(index)
        if not rows:
            continue
        out.write(f"@{fn.get('name', index)}:\n")
        for (kind, axes, g) in sorted(rows, key=lambda k: (KINDS.index(k[0]),
                                                          k[1])):
            calls, total = rows[(kind, axes, g)]
            line = (f"  {kind} over {axes} (G = {g}): calls {calls}, "
                    f"{round(total)} bytes per rank")
            for fk, fa, name, value in forms:
                if fk == kind and fa == axes and value:
                    line += f" = {float(total / value):.2f} x {name}"
            out.write(line + "\n")


def main():
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("json", help="omnic --emit=json output (- : stdin)")
    args = parser.parse_args()
    try:
        text = sys.stdin.read() if args.json == "-" else open(args.json).read()
    except OSError as e:
        sys.exit(f"traffic.py: cannot read {args.json}: {e.strerror}")
    try:
        report(Program(json.loads(text)), sys.stdout)
    except json.JSONDecodeError as e:
        sys.exit(f"traffic.py: {args.json}: not JSON: {e.msg} at line "
                 f"{e.lineno}")
    except (Error, KeyError, TypeError, ValueError, IndexError) as e:
        sys.exit(f"traffic.py: {args.json}: {e}")


if __name__ == "__main__":
    main()
