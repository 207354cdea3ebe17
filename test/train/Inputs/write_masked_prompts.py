#!/usr/bin/env python3
"""Writes a prompts file with text masks for qwen_image tiny (L = 8,
D = 32; test/train/qwen-image-mask.test, docs/prompts.md).

usage: write_masked_prompts.py OUT.safetensors VARIANT

Every variant holds 3 prompts: prompt_embeds [3, 8, 32] and
negative_prompt_embeds [1, 8, 32], f32 values of a fixed linear
congruential generator in [-1, 1), and (unless the variant says otherwise)
prompt_embeds_mask [3, 8] = the first 6, 5 and 8 tokens valid, and
negative_prompt_embeds_mask [1, 8] = the first 3 valid. VARIANT:

  masked        as above
  repadded      as `masked`, but every padded token (mask 0) of the
                prompts and of the negative has other embeddings: what the
                pipeline's padding holds must not matter
  nomask        the same embeddings without mask tensors (all ones)
  ones          the same embeddings with explicit all-ones masks
  bad-shape     prompt_embeds_mask [3, 7]
  bad-count     prompt_embeds_mask [2, 8]
  bad-value     prompt_embeds_mask[1, 2] = 0.5
  bad-empty     prompt_embeds_mask row 2 all 0
  bad-negative  negative_prompt_embeds_mask [2, 8]

Pure Python (struct + json), as the test machines have no numpy.
"""
import json
import struct
import sys

N, L, D = 3, 8, 32
VALID = [6, 5, 8]  # valid tokens per prompt
NEGATIVE_VALID = 3


def lcg(seed):
    state = seed
    while True:
        state = (1664525 * state + 1013904223) & 0xFFFFFFFF
        yield state / 2.0**31 - 1.0


def embeds(rows, valid, repad, seed):
    """[rows, L, D] values; with `repad`, the padded tokens' from another
    stream."""
    main, other = lcg(seed), lcg(seed + 1000)
    out = []
    for r in range(rows):
        for j in range(L):
            for _ in range(D):
                v, w = next(main), next(other)
                out.append(w if repad and j >= valid[r] else v)
    return out


def mask_rows(valid):
    return [1.0 if j < v else 0.0 for v in valid for j in range(L)]


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    out, variant = sys.argv[1], sys.argv[2]
    repad = variant == "repadded"
    tensors = {
        "prompt_embeds": ([N, L, D], embeds(N, VALID, repad, 3)),
        "negative_prompt_embeds": ([1, L, D],
                                   embeds(1, [NEGATIVE_VALID], repad, 7)),
        "prompt_embeds_mask": ([N, L], mask_rows(VALID)),
        "negative_prompt_embeds_mask": ([1, L], mask_rows([NEGATIVE_VALID])),
    }
    if variant == "nomask":
        del tensors["prompt_embeds_mask"]
        del tensors["negative_prompt_embeds_mask"]
    elif variant == "ones":
        tensors["prompt_embeds_mask"] = ([N, L], [1.0] * (N * L))
        tensors["negative_prompt_embeds_mask"] = ([1, L], [1.0] * L)
    elif variant == "bad-shape":
        tensors["prompt_embeds_mask"] = ([N, L - 1], [1.0] * (N * (L - 1)))
    elif variant == "bad-count":
        tensors["prompt_embeds_mask"] = ([N - 1, L], mask_rows(VALID[:-1]))
    elif variant == "bad-value":
        values = mask_rows(VALID)
        values[1 * L + 2] = 0.5
        tensors["prompt_embeds_mask"] = ([N, L], values)
    elif variant == "bad-empty":
        tensors["prompt_embeds_mask"] = ([N, L], mask_rows(VALID[:2] + [0]))
    elif variant == "bad-negative":
        tensors["negative_prompt_embeds_mask"] = ([2, L],
                                                  mask_rows([3, 3]))
    elif variant not in ("masked", "repadded"):
        sys.exit(f"unknown variant {variant}\n" + __doc__)
    header, blob = {}, b""
    for name in sorted(tensors):
        shape, values = tensors[name]
        raw = struct.pack("<%df" % len(values), *values)
        header[name] = {"dtype": "F32", "shape": shape,
                        "data_offsets": [len(blob), len(blob) + len(raw)]}
        blob += raw
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(out, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + blob)


if __name__ == "__main__":
    main()
