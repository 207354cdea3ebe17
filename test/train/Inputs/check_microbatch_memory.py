#!/usr/bin/env python3
"""Checks that micro-batches shrink the loss part of @train_step's arena peak.

Usage: check_microbatch_memory.py WHOLE.txt MICRO.txt MICRO.mlir BATCH MICRO

WHOLE.txt and MICRO.txt are `omnic --report-arena` outputs (stderr) of the
program at micro_batch_size = batch and at MICRO. The loss phase's live bytes
at the peak (the line `phase loss: N bytes` under `arena peak
(@train_step)`) hold one micro-batch's forward and backward intermediates,
which scale with the micro-batch, plus what does not: the gradient sums the
loop over micro-batches carries (one per trainable parameter), the
micro-batch-major copy of the rollout's xs stack it slices, and the slices
of @loss's other inputs (prompt and pooled embeddings, old
log-probabilities, advantages), which are the step's inputs (outside the
arena) in the whole-batch program but copies in the arena with
micro-batches. So

  loss(MICRO) <= loss(BATCH) * MICRO / BATCH + trainable bytes + xs bytes
                 + slices bytes + 63 * (values live at MICRO's peak)

with the trainable parameters (@velocity's `transformer.*` arguments, the
recipes train them all), xs ([steps + 1, BATCH, ...], @loss's `xs`
argument at the micro-batch times BATCH / MICRO) and the slices (@loss's
other f32 arguments, at the micro-batch) read from MICRO.mlir, each
rounded up to 64 bytes as omni-plan-memory allocates (docs/fusion.md).
(The slices term was found missing on the small recipe, 2026-12-06: its
[8, 32, 256] prompt slice is 256 KiB, beyond the rounding term.) The
last term is that rounding for the part that scales: a buffer of MICRO / BATCH
of the elements takes at most 63 bytes more than MICRO / BATCH of the rounded
bytes (it mattered once the attention backward stopped materializing its
[B, H, Sq, Sk] matrices, which had dominated the peak).
"""
import re
import sys


def peak_loss(path):
    """(bytes, values) of the loss phase at @train_step's arena peak."""
    text = open(path).read()
    block = text[text.index("arena peak (@train_step)"):]
    m = re.search(r"^  phase loss: (\d+) bytes .* in (\d+) values", block, re.M)
    return int(m.group(1)), int(m.group(2))


def tensor_bytes(dims, elt_bytes=4):
    n = 1
    for d in dims:
        n *= d
    return (max(n * elt_bytes, 1) + 63) // 64 * 64


def dims_of(s):
    return [int(x) for x in s.split("x")]


def main():
    whole_txt, micro_txt, micro_mlir, batch, micro = sys.argv[1:6]
    batch, micro = int(batch), int(micro)
    mlir = open(micro_mlir).read()
    velocity = next(l for l in mlir.splitlines()
                    if "func.func private @velocity(" in l)
    trainable = sum(
        tensor_bytes(dims_of(m.group(1))) for m in re.finditer(
            r'tensor<([0-9x]+)xf32> \{omni.name = "transformer\.',
            velocity.split(") -> ")[0]))
    loss = next(l for l in mlir.splitlines() if "func.func private @loss(" in l)
    xs = dims_of(
        re.search(r'tensor<([0-9x]+)xf32> \{omni.name = "xs"\}', loss).group(1))
    xs[1] = xs[1] * batch // micro
    xs_bytes = tensor_bytes(xs)
    slices = sum(
        tensor_bytes(dims_of(m.group(1))) for m in re.finditer(
            r'tensor<([0-9x]+)xf32> \{omni.name = "(?!transformer\.|xs")',
            loss.split(") -> ")[0]))
    whole, _ = peak_loss(whole_txt)
    part, values = peak_loss(micro_txt)
    bound = (whole * micro // batch + trainable + xs_bytes + slices +
             63 * values)
    print(f"loss at the peak: {whole} bytes at micro-batch {batch}, {part} "
          f"at {micro}; bound {bound} ({whole} * {micro} / {batch} + "
          f"{trainable} trainable + {xs_bytes} xs + {slices} slices + 63 * "
          f"{values} values)")
    if part > bound:
        print(f"FAIL: {part} > {bound}")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
