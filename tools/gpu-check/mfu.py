#!/usr/bin/env python3
"""Iteration time per phase and train-phase MFU of the SD3.5-Medium-shape
run (tools/gpu-check/run.sh, section 4), as Markdown.

  mfu.py LIST METRICS [--peak-tflops 989]

LIST is `omnirun sd35m.bin --list` (the state slots give the parameter
count), METRICS the run's metrics.jsonl (phase_time_s per iteration; the
first iteration, which loads and compiles, is left out of the median).

FLOPs of the train phase, a closed form for the SD3 MMDiT (stated so the
number can be checked): per sample and window step, forward
F = 2 * P2 * T + 4 * L * T^2 * D + 4 * Ld * Ti^2 * D, where P2 counts the
elements of the transformer's 2-D parameters (its linear layers, applied
as if to all T tokens: an upper bound for the few that see only text,
pooled or image tokens), T = Ti + Tt tokens (Ti = (64/2)^2 = 1024 image
patches, Tt = 333 text tokens), L = 24 joint-attention layers, Ld = 13
with the second (image-only) attention, D = 1536 (QK^T and AV, 2 FLOPs per
multiply-add). Backward is 2 F, so train = 3 F x B samples (2) x W window
steps (2). MFU = train FLOPs / train-phase seconds / peak (H200: 989
TFLOP/s dense bf16; an f32 program is still measured against it, as the
issue asks).
"""
import json
import re
import statistics
import sys

TI, TT, L, LD, D, B, W = 1024, 333, 24, 13, 1536, 2, 2


def main():
    args = sys.argv[1:]
    peak = 989.0
    if "--peak-tflops" in args:
        i = args.index("--peak-tflops")
        peak = float(args[i + 1])
        del args[i:i + 2]
    listing, metrics = args
    p2 = 0
    for line in open(listing):
        m = re.match(r"state '(transformer\.[^']*)': tensor<(\d+)x(\d+)x\w+> "
                     r"\(Parameter", line)
        if m:
            p2 += int(m.group(2)) * int(m.group(3))
    t = TI + TT
    fwd = 2 * p2 * t + 4 * L * t * t * D + 4 * LD * TI * TI * D
    train_flops = 3 * fwd * B * W
    rows = [json.loads(line) for line in open(metrics) if line.strip()]
    timed = rows[1:] or rows
    phases = {}
    for r in timed:
        for k, v in r.get("phase_time_s", {}).items():
            phases.setdefault(k, []).append(v)
    med = {k: statistics.median(v) for k, v in phases.items()}
    total = statistics.median(r.get("time_s", sum(r.get("phase_time_s", {}).values()))
                              for r in timed)
    print(f"- median iteration {total:.4g} s over {len(timed)} "
          f"(first {rows[0].get('time_s', float('nan')):.4g} s)")
    print("- phases (median s): " + ", ".join(f"{k} {v:.4g}" for k, v in med.items()))
    train = [k for k in med if "train" in k or "loss" in k or "update" in k]
    if train:
        secs = sum(med[k] for k in train)
        print(f"- train phase ({'+'.join(train)}): {secs:.4g} s, "
              f"{train_flops / 1e12:.1f} TFLOP (2-D transformer parameters "
              f"{p2 / 1e9:.3f} G), {train_flops / secs / 1e12:.1f} TFLOP/s, "
              f"MFU {100 * train_flops / secs / (peak * 1e12):.1f}% of "
              f"{peak:g} TFLOP/s (target >= 50%)")
    else:
        print(f"- no train phase among {sorted(med)}: MFU not computed")
    if "bytes_in_use" in timed[-1] or "device_bytes" in timed[-1]:
        print(f"- memory: {timed[-1].get('bytes_in_use', timed[-1].get('device_bytes'))}")


if __name__ == "__main__":
    main()
