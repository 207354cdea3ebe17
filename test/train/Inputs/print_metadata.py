#!/usr/bin/env python3
"""Prints a safetensors file's hyper-parameter metadata on one line.

usage: print_metadata.py FILE

The `__metadata__` entries whose keys start with `hparam.` or `lr_`
(what omnirun records, docs/recipes.md section 11), sorted by key, as
`key=value` separated by spaces.
"""
import json
import struct
import sys

with open(sys.argv[1], "rb") as f:
    (n,) = struct.unpack("<Q", f.read(8))
    metadata = json.loads(f.read(n)).get("__metadata__", {})
print(" ".join("%s=%s" % (k, metadata[k]) for k in sorted(metadata)
               if k.startswith(("hparam.", "lr_"))))
