#!/usr/bin/env python3
"""Copies a safetensors file without one tensor (test/sample/sample.test).

    drop_tensor.py IN.safetensors NAME OUT.safetensors
"""

import json
import struct
import sys


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    src, name, dst = sys.argv[1:]
    data = open(src, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    if name not in header:
        sys.exit("drop_tensor.py: %s has no tensor %s" % (src, name))
    body, out = b"", {}
    for key, info in header.items():
        if key == "__metadata__":
            out[key] = info
            continue
        if key == name:
            continue
        a, b = info["data_offsets"]
        out[key] = dict(info, data_offsets=[len(body), len(body) + b - a])
        body += data[8 + n + a:8 + n + b]
    text = json.dumps(out).encode()
    text += b" " * (-len(text) % 8)
    with open(dst, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + body)


if __name__ == "__main__":
    main()
