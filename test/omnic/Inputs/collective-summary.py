"""Summarizes the SPMD parts of a step.bin from `omnic --emit=json` (stdin).

Prints the meshes (`mesh NAME AXIS=SIZE ...`), the state slots with their
sharding (`state NAME SHAPE` and, for a sharded slot, `sharded mesh=M
axes=[..] dim=D global=SHAPE`), then, per function, every Collective and
AxisIndex command in program order, Loop bodies included (indented by
depth), with the types and storage of its tensors, so a test sees which
commands omnic wrote and what they read and write.
"""

import json
import sys

step = json.load(sys.stdin)
tensors = step["tensors"]


def shape(s):
    return "x".join(str(d) for d in s) or "scalar"


def describe(t):
    e = tensors[t]
    return "%s:%s:%s" % (shape(e.get("shape", [])), e.get("dtype", "F32"),
                         e.get("storage", "Arena"))


for mesh in step.get("meshes", []):
    print("mesh", mesh["name"], " ".join(
        "%s=%d" % (a, n) for a, n in zip(mesh["axes"], mesh["shape"])))
for slot in step.get("state", []):
    line = "state %s %s" % (slot["name"], shape(slot.get("shape", [])))
    s = slot.get("sharding")
    if s:
        line += " sharded mesh=%d axes=%s dim=%d global=%s" % (
            s.get("mesh", 0), s.get("axes", []), s.get("dim", 0),
            shape(s.get("global_shape", [])))
    print(line)


def walk(commands, depth):
    for c in commands:
        kind, body = c.get("kind_type"), c.get("kind", {})
        pad = "  " * depth
        if kind == "Collective":
            extra = ""
            if body.get("kind") in ("AllReduce", "ReduceScatter"):
                extra += " op=" + body.get("reduce_op", "Sum")
            if body.get("kind") in ("AllGather", "ReduceScatter"):
                extra += " dim=%d" % body.get("dim", 0)
            if body.get("kind") == "Broadcast":
                extra += " root=%d" % body.get("root", 0)
            print("%s%s mesh=%d axes=%s%s %s -> %s" % (
                pad, body.get("kind", "AllReduce"), body.get("mesh", 0),
                body.get("axes", []), extra, describe(body.get("operand", 0)),
                describe(body.get("result", 0))))
        elif kind == "AxisIndex":
            print("%sAxisIndex mesh=%d axes=%s -> %s" % (
                pad, body.get("mesh", 0), body.get("axes", []),
                describe(body.get("result", 0))))
        elif kind == "Loop":
            print("%sLoop" % pad)
            walk(body.get("body", []), depth + 1)


for fn in step["functions"]:
    print("@" + fn["name"])
    walk(fn.get("commands", []), 1)
