#!/usr/bin/env python3
"""Copies a prompts file and adds all-zero negative prompt embeddings.

usage: add_zero_negatives.py IN.safetensors OUT.safetensors

OUT holds IN's tensors and metadata plus negative_prompt_embeds [1, L, D]
and negative_pooled_prompt_embeds [1, Dp] of zeros (L, D, Dp from IN's
prompt_embeds / pooled_prompt_embeds): what a file without negatives means
for CFG's unconditional branch (docs/prompts.md), given explicitly.
Pure Python (struct + json).
"""
import json
import struct
import sys


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    data = open(sys.argv[1], "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    meta = header.pop("__metadata__", None)
    tensors = {k: (v["dtype"], v["shape"],
                   body[v["data_offsets"][0]:v["data_offsets"][1]])
               for k, v in header.items()}
    for name, src in (("negative_prompt_embeds", "prompt_embeds"),
                      ("negative_pooled_prompt_embeds",
                       "pooled_prompt_embeds")):
        dtype, shape, _ = tensors[src]
        shape = [1] + shape[1:]
        count = 1
        for d in shape:
            count *= d
        tensors[name] = (dtype, shape, bytes(4 * count))
    out_header, blob = {}, b""
    for name in sorted(tensors):
        dtype, shape, raw = tensors[name]
        out_header[name] = {"dtype": dtype, "shape": shape,
                            "data_offsets": [len(blob), len(blob) + len(raw)]}
        blob += raw
    if meta is not None:
        out_header["__metadata__"] = meta
    text = json.dumps(out_header).encode()
    text += b" " * (-len(text) % 8)
    with open(sys.argv[2], "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + blob)


if __name__ == "__main__":
    main()
