"""Summarizes the state of a step.bin from `omnic --emit=json` (stdin).

Prints the state table, one line per slot (`state NAME ROLE DTYPE SHAPE`),
then one line per function: the number of inputs and outputs and, in
order, the destination of every top-level Copy (`state:NAME`, `arena` for
scratch space, `result:K` for a result buffer), so a test can see which
stores into state slots cost a Copy.
"""

import json
import sys

step = json.load(sys.stdin)
tensors = step["tensors"]
for slot in step.get("state", []):
    shape = "x".join(str(d) for d in slot.get("shape", [])) or "scalar"
    print("state", slot["name"], slot.get("role", "Transient"),
          slot.get("dtype", "F32"), shape)
for fn in step["functions"]:
    inputs = fn.get("inputs", [])
    copies = []
    for command in fn.get("commands", []):
        if command.get("kind_type") != "Copy":
            continue
        dest = tensors[command["kind"].get("dest", 0)]
        storage = dest.get("storage", "Arena")
        if storage == "State":
            copies.append("state:" + step["state"][dest.get("index", 0)]["name"])
        elif storage == "Argument":
            copies.append("result:%d" % (dest.get("index", 0) - len(inputs)))
        else:
            copies.append(storage.lower())
    print("@%s inputs=%d outputs=%d copies=[%s]" % (
        fn["name"], len(inputs), len(fn.get("outputs", [])), " ".join(copies)))
