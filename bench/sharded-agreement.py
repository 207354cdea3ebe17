#!/usr/bin/env python3
"""How far sharded training parts from 1-rank training, against how far
1-rank training parts from itself after one rounding (docs/sharding.md
section 7).

A sharded run sums in another order than a 1-rank run, so their states
differ by rounding after the first iteration and then by whatever the
recipe makes of that difference in the iterations after. This script
measures both halves on this machine:

- the meshes: the tiny recipe trained ITERATIONS iterations from one seed on
  1 rank and on each mesh (in-process ranks); for each, the worst
  tensor-wise relative difference max |a - b| / max |a| over the parameters
  and AdamW moments, after iteration 1 and after the last;
- the floor: the 1-rank state after iteration 1 with every float moved to a
  neighbouring float (up or down at random: one rounding, the smallest
  change any other order of summation can make), trained on to the last
  iteration on 1 rank, compared with the unperturbed run the same way; the
  worst over SEEDS draws.

It prints one line per mesh with its ratio to the floor. A ratio near 1 or
below says that the sharded run is as close to the 1-rank run as the 1-rank
run is to itself: the rest of the difference is the recipe's conditioning,
not the sharding, and no order of summation can do better.

  bench/sharded-agreement.py [--build build] [--iterations 3] [--seeds 4]
                             [--meshes fsdp=2,fsdp=4,dp=2,dp=2:fsdp=2]
                             [--opt KEY=VALUE ...] [--keep DIR]

The default --opt is the one test/train/sharded-training.test uses
(reward=brightness, adam_eps=1e-6); add --opt lora_rank=4 for LoRA. Pure
Python (struct), as the test machines have no numpy. Not a test: nothing is
asserted here.
"""

import argparse
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "test", "train", "Inputs"))
import compare_checkpoints  # noqa: E402  (read: the safetensors reader)


def run(cmd):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def worst(a_path, b_path):
    """(worst tensor-wise relative difference, the tensor's name)."""
    a, b = compare_checkpoints.read(a_path), compare_checkpoints.read(b_path)
    out = (0.0, "")
    for name, (dtype, _, va) in a.items():
        if dtype != "F32":
            continue
        vb = b[name][2]
        scale = max((max(abs(x), abs(y)) for x, y in zip(va, vb)), default=0)
        if scale == 0:
            continue
        d = max(abs(x - y) for x, y in zip(va, vb)) / scale
        out = max(out, (d, name))
    return out


def perturb(src_dir, step, dst_dir, seed):
    """Copies checkpoint `step` of src_dir into dst_dir with every nonzero
    f32 moved one float up or down in magnitude (random, from `seed`)."""
    path = os.path.join(src_dir, f"step-{step}.safetensors")
    with open(path, "rb") as f:
        data = bytearray(f.read())
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    rng = random.Random(seed)
    body = 8 + n
    for name, info in header.items():
        if name == "__metadata__" or info["dtype"] != "F32":
            continue
        begin, end = info["data_offsets"]
        count = (end - begin) // 4
        words = list(struct.unpack_from(f"<{count}I", data, body + begin))
        for i, w in enumerate(words):
            if w & 0x7FFFFFFF and (w & 0x7F800000) != 0x7F800000:
                w2 = w + rng.choice((-1, 1))
                # Never across zero or into inf/nan: one float in magnitude.
                if (w2 & 0x7FFFFFFF) and (w2 & 0x7F800000) != 0x7F800000 \
                        and (w2 >> 31) == (w >> 31):
                    words[i] = w2
        struct.pack_into(f"<{count}I", data, body + begin, *words)
    os.makedirs(dst_dir, exist_ok=True)
    with open(os.path.join(dst_dir, f"step-{step}.safetensors"), "wb") as f:
        f.write(data)
    with open(os.path.join(dst_dir, "latest"), "w") as f:
        f.write(f"{step}\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--seeds", type=int, default=4,
                    help="perturbation draws for the floor")
    ap.add_argument("--meshes", default="fsdp=2,fsdp=4,dp=2,dp=2:fsdp=2",
                    help="comma-separated omnigen --mesh values (':' for ',')")
    ap.add_argument("--opt", action="append", default=None,
                    help="omnigen --opt=KEY=VALUE (default: reward=brightness "
                    "and adam_eps=1e-6, as sharded-training.test)")
    ap.add_argument("--keep", help="work in this folder and keep it")
    args = ap.parse_args()
    opts = args.opt or ["reward=brightness", "adam_eps=1e-6"]
    bindir = os.path.join(args.build, "bin")
    tool = lambda name: os.path.join(bindir, name)  # noqa: E731
    if args.keep:
        work = args.keep
        os.makedirs(work, exist_ok=True)
    else:
        tmp = tempfile.TemporaryDirectory(prefix="omni-agreement-")
        work = tmp.name
    last = args.iterations

    def train(name, mesh, extra):
        mlir, step = (os.path.join(work, f"{name}.{x}") for x in ("mlir", "bin"))
        if not os.path.exists(step):
            cmd = [tool("omnigen")] + [f"--opt={o}" for o in opts]
            if mesh:
                cmd.append("--mesh=" + mesh.replace(":", ","))
            run(cmd + ["-o", mlir])
            run([tool("omnic"), mlir, "-o", step])
        out = os.path.join(work, f"{name}.run")
        shutil.rmtree(out, ignore_errors=True)
        run([tool("omnirun"), step, "--steps", str(last), "--seed", "1",
             "--save-every", "1", "--out", out] + extra)
        return step, out

    print(f"tiny recipe, --opt {' '.join(opts)}, {last} iterations; worst "
          "tensor-wise relative difference to the 1-rank run", flush=True)
    one, base = train("one", None, [])
    ckpt = lambda d, s: os.path.join(d, f"step-{s}.safetensors")  # noqa: E731

    floor = (0.0, "")
    for seed in range(args.seeds):
        out = os.path.join(work, f"perturbed-{seed}")
        shutil.rmtree(out, ignore_errors=True)
        perturb(base, 1, out, seed)
        run([tool("omnirun"), one, "--steps", str(last), "--resume", out])
        d = worst(ckpt(base, last), ckpt(out, last))
        print(f"  floor draw {seed}: {d[0]:.3g} ({d[1]})", flush=True)
        floor = max(floor, d)
    print(f"floor (1 rank, one rounding after iteration 1, worst of "
          f"{args.seeds}): {floor[0]:.3g} after iteration {last}", flush=True)

    for mesh in args.meshes.split(","):
        axes = mesh.replace(":", ",").split(",")
        ranks = 1
        for axis in axes:
            ranks *= int(axis.split("=")[1])
        _, out = train(mesh.replace("=", "").replace(":", "-"), mesh,
                       ["--ranks", str(ranks)])
        first = worst(ckpt(base, 1), ckpt(out, 1))
        end = worst(ckpt(base, last), ckpt(out, last))
        ratio = end[0] / floor[0] if floor[0] else float("inf")
        print(f"{mesh.replace(':', ','):>12}: iteration 1 {first[0]:.3g}, "
              f"iteration {last} {end[0]:.3g} ({end[1]}), {ratio:.2f} x "
              "the floor", flush=True)


if __name__ == "__main__":
    main()
