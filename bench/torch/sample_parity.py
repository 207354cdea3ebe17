#!/usr/bin/env python3
"""Sampling parity: omni's sampling program against diffusers'
StableDiffusion3Pipeline (issue 16 item 3, docs/sampling.md).

On the same random tiny SD3 transformer and VAE (diffusers' default
initialization, the configs of sd3_reference.py / vae_reference.py), the
same prompt embeddings and the same initial noise:

  omni      omnigen --program=sample (ODE, N steps, shift 3.0), omnic, then
            omnirun: the weights as a checkpoint (named transformer.* and
            vae.* as a training checkpoint), @sample_noise for the initial
            latents of each seed, @sample for the images (f32, [B, 3, H, W]
            in [0, 1]); and the sampling mode (`omnirun sample.bin
            --checkpoint ... --save-latents`), whose latents must be
            @sample_noise's
  diffusers StableDiffusion3Pipeline(transformer, vae,
            FlowMatchEulerDiscreteScheduler(shift=3.0)) with
            prompt_embeds / pooled_prompt_embeds, latents = omni's initial
            noise, output_type="pt"; with CFG, negative_prompt_embeds and
            negative_pooled_prompt_embeds are one random negative prompt,
            the same one @sample takes (docs/prompts.md)

Prints max |omni - diffusers| per case and exits 1 when one is above
--tolerance (default 1e-5; images are in [0, 1], so the error is absolute
and relative at once).

  bench/torch/setup.sh && bench/torch/.venv/bin/python \\
      bench/torch/sample_parity.py [--build build] [--steps 10] [--batch 2]
"""

import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import torch
from diffusers import (AutoencoderKL, FlowMatchEulerDiscreteScheduler,
                       SD3Transformer2DModel, StableDiffusion3Pipeline)
from safetensors.numpy import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from sd3_reference import TINY as SD3_TINY  # noqa: E402
from vae_reference import TINY as VAE_TINY  # noqa: E402

SHIFT = 3.0  # the recipe's default shift (docs/flowgrpo-math.md)


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd[:3])} ...: {r.stderr.strip()}")
    return r.stdout


def state_names(listing):
    return re.findall(r"^state '([^']+)'", listing, re.M)


def pipeline(transformer, vae):
    scheduler = FlowMatchEulerDiscreteScheduler(shift=SHIFT)
    pipe = StableDiffusion3Pipeline(
        transformer=transformer, vae=vae, scheduler=scheduler,
        text_encoder=None, tokenizer=None, text_encoder_2=None,
        tokenizer_2=None, text_encoder_3=None, tokenizer_3=None)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=os.path.join(HERE, "..", "..", "build"))
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--guidance", type=float, default=4.5)
    p.add_argument("--tolerance", type=float, default=1e-5)
    args = p.parse_args()
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    bin_ = os.path.join(args.build, "bin")
    b = args.batch
    transformer = SD3Transformer2DModel(**SD3_TINY).eval()
    vae = AutoencoderKL(**VAE_TINY).eval()
    pipe = pipeline(transformer, vae)
    tokens, dim = 8, SD3_TINY["joint_attention_dim"]
    prompt = rng.standard_normal((b, tokens, dim)).astype(np.float32)
    pooled = rng.standard_normal(
        (b, SD3_TINY["pooled_projection_dim"])).astype(np.float32)
    # CFG's negative prompt: one row, broadcast over the batch by @sample.
    negative = rng.standard_normal((1, tokens, dim)).astype(np.float32)
    negative_pooled = rng.standard_normal(
        (1, SD3_TINY["pooled_projection_dim"])).astype(np.float32)
    seeds = np.arange(5, 5 + b, dtype=np.int64)
    ok = True
    with tempfile.TemporaryDirectory() as work:
        for guidance in (1.0, args.guidance):
            tag = "cfg" if guidance != 1.0 else "nocfg"
            mlir = os.path.join(work, tag + ".mlir")
            step = os.path.join(work, tag + ".bin")
            run([os.path.join(bin_, "omnigen"), "--program=sample",
                 f"--opt=sample_batch={b}", f"--opt=steps={args.steps}",
                 f"--opt=shift={SHIFT}", f"--opt=guidance_scale={guidance}",
                 "--opt=sampler=ode", "-o", mlir])
            run([os.path.join(bin_, "omnic"), mlir, "-o", step])
            # The weights as a checkpoint of exactly the program's state.
            names = state_names(run([os.path.join(bin_, "omnirun"), step,
                                     "--list"]))
            torch_state = {"transformer." + k: v for k, v in
                           transformer.named_parameters()}
            torch_state.update({"vae." + k: v for k, v in
                                vae.state_dict().items()})
            missing = [n for n in names if n not in torch_state]
            if missing:
                sys.exit(f"diffusers has no {missing[0]}")
            ckpt = os.path.join(work, tag + ".safetensors")
            save_file({n: np.ascontiguousarray(
                torch_state[n].detach().numpy(), dtype=np.float32)
                for n in names}, ckpt)
            paths = {}
            for name, value in (("seeds", seeds), ("prompt", prompt),
                                ("pooled", pooled),
                                ("negative", negative),
                                ("negative_pooled", negative_pooled)):
                paths[name] = os.path.join(work, f"{tag}.{name}.npy")
                np.save(paths[name], value)
            noise = os.path.join(work, tag + ".noise.npy")
            run([os.path.join(bin_, "omnirun"), step,
                 "--function=sample_noise", f"--input=@{paths['seeds']}",
                 f"--output=@{noise}"])
            images = os.path.join(work, tag + ".images.npy")
            cmd = [os.path.join(bin_, "omnirun"), step, "--function=sample",
                   "--state-in", ckpt, f"--input=@{paths['seeds']}",
                   f"--input=@{paths['prompt']}",
                   f"--input=@{paths['pooled']}"]
            if guidance != 1.0:
                cmd += [f"--input=@{paths['negative']}",
                        f"--input=@{paths['negative_pooled']}",
                        f"--input=f64={guidance!r}"]
            run(cmd + [f"--output=@{images}"])
            got = np.load(images)
            latents = np.load(noise)
            # The sampling mode's --save-latents are @sample_noise's.
            prompts_file = os.path.join(work, tag + ".prompts.safetensors")
            save_file({"prompt_embeds": prompt[:1].copy(),
                       "pooled_prompt_embeds": pooled[:1].copy()},
                      prompts_file)
            out_dir = os.path.join(work, tag + ".out")
            run([os.path.join(bin_, "omnirun"), step, "--checkpoint", ckpt,
                 "--prompts", prompts_file, "--out", out_dir,
                 "--seed", str(int(seeds[0])), "--images-per-prompt", str(b),
                 "--save-latents"])
            saved = [np.load(os.path.join(out_dir, json.loads(line)["latents"]))
                     for line in open(os.path.join(out_dir, "manifest.jsonl"))]
            if not np.array_equal(np.concatenate(saved), latents):
                print(f"{tag}: --save-latents differ from @sample_noise FAIL")
                ok = False
            with torch.no_grad():
                kwargs = {}
                if guidance != 1.0:
                    kwargs = dict(
                        negative_prompt_embeds=torch.from_numpy(
                            np.repeat(negative, b, axis=0)),
                        negative_pooled_prompt_embeds=torch.from_numpy(
                            np.repeat(negative_pooled, b, axis=0)))
                want = pipe(prompt_embeds=torch.from_numpy(prompt),
                            pooled_prompt_embeds=torch.from_numpy(pooled),
                            latents=torch.from_numpy(latents),
                            num_inference_steps=args.steps,
                            guidance_scale=guidance, output_type="pt",
                            **kwargs).images.numpy()
            err = float(np.max(np.abs(got - want)))
            good = err <= args.tolerance and got.shape == want.shape
            # Pixels the final clamp to [0, 1] leaves alone: where the
            # comparison sees the whole computation.
            inside = float(np.mean((want > 0) & (want < 1)))
            print(f"{tag:6s} guidance {guidance:g}, {args.steps} steps, "
                  f"images {tuple(want.shape)}, {100 * inside:.0f}% of the "
                  f"values inside (0, 1): max|omni - diffusers| = {err:.2e}  "
                  f"{'ok' if good else 'FAIL'} (tolerance {args.tolerance:g})")
            ok &= good
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
