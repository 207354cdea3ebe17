#!/usr/bin/env python3
"""Summarizes the GPU kernels of `omnic --target=cuda --emit=json` output.

Prints "kernels K launches L ok" when every executable is GPU code with one
launch list per kernel and every launch is well formed: 3 grid and 3 block
dimensions >= 1, at most 1024 threads a block, every argument an index into
the kernel's operands, results and scratch buffers. Otherwise prints what is
wrong and exits 1.
"""
import json
import sys


def main(path):
    step = json.load(open(path))
    kernels = launches = 0
    for e, exe in enumerate(step["executables"]):
        if exe["format"] not in ("Cubin", "Ptx"):
            sys.exit(f"executables[{e}]: format {exe['format']} is not GPU code")
        gpu = exe.get("gpu_kernels", [])
        if len(gpu) != len(exe["kernels"]):
            sys.exit(f"executables[{e}]: {len(gpu)} gpu_kernels for "
                     f"{len(exe['kernels'])} kernels")
        for k, (sig, kernel) in enumerate(zip(exe["signatures"], gpu)):
            buffers = (len(sig["operands"]) + len(sig["results"]) +
                       len(kernel["scratch"]))
            if not kernel["launches"]:
                sys.exit(f"kernel {k}: no launches")
            for l, launch in enumerate(kernel["launches"]):
                grid, block = launch["grid"], launch["block"]
                if len(grid) != 3 or len(block) != 3 or min(grid + block) < 1:
                    sys.exit(f"kernel {k} launch {l}: grid {grid} block {block}")
                if block[0] * block[1] * block[2] > 1024:
                    sys.exit(f"kernel {k} launch {l}: block {block} > 1024")
                if not launch["args"] or max(launch["args"]) >= buffers:
                    sys.exit(f"kernel {k} launch {l}: args {launch['args']} "
                             f"with {buffers} buffers")
            kernels += 1
            launches += len(kernel["launches"])
    print(f"kernels {kernels} launches {launches} ok")


if __name__ == "__main__":
    main(sys.argv[1])
