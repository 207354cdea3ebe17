#!/usr/bin/env python3
"""Writes a prompts file of N prompts (test/sample/sample.test):
prompt_embeds [N, L, D] and pooled_prompt_embeds [N, Dp], f32 values of a
fixed linear congruential generator in [-1, 1).

    write_prompts.py OUT.safetensors N L D DP
"""

import json
import struct
import sys


def main():
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    out = sys.argv[1]
    n, length, dim, pooled = (int(v) for v in sys.argv[2:])
    state = 3
    def values(count):
        nonlocal state
        for _ in range(count):
            state = (1664525 * state + 1013904223) & 0xFFFFFFFF
            yield state / 2.0**31 - 1.0
    embeds = struct.pack("<%df" % (n * length * dim), *values(n * length * dim))
    pool = struct.pack("<%df" % (n * pooled), *values(n * pooled))
    header = {
        "prompt_embeds": {"dtype": "F32", "shape": [n, length, dim],
                          "data_offsets": [0, len(embeds)]},
        "pooled_prompt_embeds": {"dtype": "F32", "shape": [n, pooled],
                                 "data_offsets": [len(embeds),
                                                  len(embeds) + len(pool)]},
    }
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(out, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + embeds + pool)


if __name__ == "__main__":
    main()
