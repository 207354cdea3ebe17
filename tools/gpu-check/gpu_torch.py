#!/usr/bin/env python3
"""The PyTorch baseline of tools/gpu-check on the GPU (README.md).

Runs bench/torch/flowgrpo_torch.py's FlowGRPO iteration on CUDA, for the
SD3.5-Medium shape of prepare.sh's step.bin (the real SD3.5-Medium
transformer and SD3 VAE, random weights, 512 px = 64x64 latents, 333
text tokens, 1 prompt x 2 samples, 10 steps, window 2) or the tiny one,
eager or under torch.compile, and writes the summary as JSON:

  gpu_torch.py --config sd3.5-medium [--compile] [--dtype f32|bf16]
               [--iterations 3] --json FILE

Phase times are taken after torch.cuda.synchronize() (flowgrpo_torch
reads time.perf_counter, which is wrapped here), so asynchronous kernels
count in the phase that launched them. The reward (JPEG) runs on the CPU
as in flow_grpo. bf16 runs the transformer and the VAE under
torch.autocast(bfloat16), f32 (the default) disables TF32 so the
arithmetic matches omni's f32 programs.
"""
import argparse
import json
import os
import statistics
import sys
import time
import types

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flowgrpo_torch as fg  # noqa: E402
import sd3_reference  # noqa: E402
import vae_reference  # noqa: E402

fg.CONFIGS["sd3.5-medium"] = dict(transformer=sd3_reference.SD35_MEDIUM,
                                  text_tokens=333, latent_size=64,
                                  vae=vae_reference.SD3)
SHAPES = {"sd3.5-medium": dict(prompts=1, group_size=2),
          "tiny": dict(prompts=4, group_size=8)}


def synced_clock():
    torch.cuda.synchronize()
    return time.perf_counter()


def reward_on_cpu(images):
    return fg.jpeg_compressibility(images.float().cpu()).cuda()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", default="sd3.5-medium", choices=sorted(SHAPES))
    p.add_argument("--compile", action="store_true")
    p.add_argument("--dtype", choices=("f32", "bf16"), default="f32")
    p.add_argument("--iterations", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--json", required=True)
    a = p.parse_args()
    if not torch.cuda.is_available():
        sys.exit("gpu_torch.py: torch sees no CUDA device")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_default_device("cuda")
    fg.time = types.SimpleNamespace(perf_counter=synced_clock)
    run = fg.FlowGrpo(a.config, a.compile, a.seed, opts=SHAPES[a.config])
    if a.dtype == "bf16":
        for name in ("velocity",):
            plain = getattr(run, name)

            def wrapped(*args, _plain=plain):
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    return _plain(*args)
            setattr(run, name, wrapped)
    results = []
    for k in range(a.iterations):
        r = run.iteration(reward_fn=reward_on_cpu)
        results.append(r)
        print(f"iter {k + 1}: {r['time_s']:.3f} s "
              + ", ".join(f"{n} {t:.3f}" for n, t in r["phase_time_s"].items()),
              flush=True)
    timed = results[a.warmup:] or results
    summary = dict(
        config=a.config, compile=a.compile and run.compiled, dtype=a.dtype,
        torch=torch.__version__, device=torch.cuda.get_device_name(),
        iterations=a.iterations, warmup=a.warmup,
        first_s=results[0]["time_s"],
        median_s=statistics.median(r["time_s"] for r in timed),
        phase_median_s={ph: statistics.median(r["phase_time_s"][ph]
                                              for r in timed)
                        for ph in fg.PHASES},
        parameters=sum(q.numel() for q in run.params),
        peak_memory_bytes=torch.cuda.max_memory_allocated())
    with open(a.json, "w") as f:
        json.dump(summary, f, indent=1)
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
