#!/usr/bin/env python3
"""The README's "from a diffusers model" walk-through, end to end (issue 16).

On a complete tiny StableDiffusion3Pipeline folder with random weights
(transformer and VAE from make_tiny_diffusers.py, text encoders and
tokenizers from tools/encode-prompts/make_tiny_text_encoders.py):

  1. tools/encode-prompts: four text prompts and the negative prompt
     "blurry" through diffusers' own encode_prompt;
  2. omnigen --from-diffusers (CFG 4.5) + omnic;
  3. omnirun --init-diffusers trains 3 iterations on the encoded prompts;
  4. omnigen --program=sample + omnirun sample.bin --checkpoint writes the
     trained model's images and a captioned grid;
  5. omnirun --export --base-diffusers writes a diffusers folder;
  6. diffusers loads it (StableDiffusion3Pipeline.from_pretrained: every
     component), and its transformer's output on fixed inputs equals omni's
     @velocity on the trained checkpoint within --tolerance (1e-5, f32,
     max |omni - diffusers| / max |diffusers|).

Prints each step and exits 1 on the first failure.

  bench/torch/setup.sh && bench/torch/.venv/bin/python \\
      bench/torch/diffusers_walkthrough.py [--build build] [--keep DIR]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch
from diffusers import StableDiffusion3Pipeline
from safetensors.numpy import load_file

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import export_parity  # noqa: E402  (run, arg_names, Omni.velocity, report)

# Small enough for a 2-core machine: 2 prompts x 2 images per iteration,
# 2 sampler steps, CFG with the runtime guidance_scale.
RECIPE = ["--opt=prompts_per_iteration=2", "--opt=group_size=2",
          "--opt=steps=2", "--opt=window=1", "--opt=window_hi=1",
          "--opt=guidance_scale=4.5"]
# encode-prompts --max-sequence-length 4 with the tiny CLIP's 4 tokens.
TEXT_TOKENS = "--set=text_tokens=8"
PROMPTS = ["a photo of a cat", "the red dog", "a blue cat on the dog",
           "a green bird"]


def step(text):
    print(f"== {text}", flush=True)


def full_folder(work):
    """The tiny pipeline folder with every component."""
    run = export_parity.run
    py = sys.executable
    run([py, os.path.join(HERE, "make_tiny_diffusers.py"), "--out",
         os.path.join(work, "vision")])
    folder = os.path.join(work, "vision", "tiny-sd3")
    text = os.path.join(work, "text")
    run([py, os.path.join(ROOT, "tools", "encode-prompts",
                          "make_tiny_text_encoders.py"), text])
    with open(os.path.join(folder, "model_index.json")) as f:
        index = json.load(f)
    with open(os.path.join(text, "model_index.json")) as f:
        index.update({k: v for k, v in json.load(f).items()
                      if not k.startswith("_")})
    for name in os.listdir(text):
        if name.startswith(("text_encoder", "tokenizer")):
            shutil.copytree(os.path.join(text, name),
                            os.path.join(folder, name), dirs_exist_ok=True)
    with open(os.path.join(folder, "model_index.json"), "w") as f:
        json.dump(index, f, indent=2)
    return folder


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--keep", help="work in this folder and keep it")
    p.add_argument("--tolerance", type=float, default=1e-5)
    args = p.parse_args()
    work = args.keep or tempfile.mkdtemp(prefix="omni-walkthrough-")
    os.makedirs(work, exist_ok=True)
    omni = export_parity.Omni(os.path.abspath(args.build), work)
    run = export_parity.run

    step("a tiny diffusers folder (random weights)")
    folder = full_folder(work)
    print(folder)

    step("tools/encode-prompts")
    prompts_txt = os.path.join(work, "prompts.txt")
    with open(prompts_txt, "w") as f:
        f.write("\n".join(PROMPTS) + "\n")
    prompts = os.path.join(work, "prompts.safetensors")
    print(run([sys.executable, os.path.join(ROOT, "tools", "encode-prompts",
                                            "encode-prompts"),
               "--diffusers", folder, "--prompts", prompts_txt,
               "--negative-prompt", "blurry", "--max-sequence-length", "4",
               "--out", prompts]).strip())

    step("omnigen --from-diffusers + omnic")
    train_mlir = os.path.join(work, "train.mlir")
    train_bin = os.path.join(work, "train.bin")
    omni.tool("omnigen", "--from-diffusers", folder, TEXT_TOKENS, *RECIPE,
              "-o", train_mlir)
    omni.tool("omnic", train_mlir, "-o", train_bin)

    step("omnirun --init-diffusers: 3 iterations")
    run_dir = os.path.join(work, "run")
    shutil.rmtree(run_dir, ignore_errors=True)
    log = omni.tool("omnirun", train_bin, "--init-diffusers", folder,
                    "--prompts", prompts, "--steps", "3", "--out", run_dir)
    print(log.strip())
    for want in ("init: ", "negative prompt 'blurry'"):
        if want not in log:
            sys.exit(f"FAIL: the training log has no '{want}'")

    step("omnigen --program=sample + omnirun sample.bin --checkpoint")
    sample_mlir = os.path.join(work, "sample.mlir")
    sample_bin = os.path.join(work, "sample.bin")
    omni.tool("omnigen", "--from-diffusers", folder, TEXT_TOKENS, *RECIPE,
              "--program=sample", "-o", sample_mlir)
    omni.tool("omnic", sample_mlir, "-o", sample_bin)
    samples = os.path.join(work, "samples")
    shutil.rmtree(samples, ignore_errors=True)
    print(omni.tool("omnirun", sample_bin, "--checkpoint", run_dir,
                    "--prompts", prompts, "--out", samples).strip())
    if not os.path.exists(os.path.join(samples, "grid.png")):
        sys.exit("FAIL: no samples/grid.png")

    step("omnirun --export --base-diffusers")
    exported = os.path.join(work, "exported")
    shutil.rmtree(exported, ignore_errors=True)
    print(omni.tool("omnirun", train_bin, "--export", exported,
                    "--checkpoint", run_dir, "--base-diffusers",
                    folder).strip())

    step("diffusers loads the export; its transformer vs omni's @velocity")
    pipe = StableDiffusion3Pipeline.from_pretrained(
        exported, dtype=torch.float32)
    model = pipe.transformer.eval()
    with open(os.path.join(run_dir, "latest")) as f:
        latest = f.read().strip()
    ckpt = load_file(os.path.join(run_dir, f"step-{latest}.safetensors"))
    velocity_mlir = os.path.join(work, "velocity.mlir")
    velocity_bin = os.path.join(work, "velocity.bin")
    # The transformer alone: without guidance_scale (a public @velocity
    # with CFG would return the guided combination).
    omni.tool("omnigen", "--from-diffusers", folder, TEXT_TOKENS,
              *[o for o in RECIPE if "guidance" not in o],
              "--program=velocity", "-o", velocity_mlir)
    omni.tool("omnic", velocity_mlir, "-o", velocity_bin)
    cfg = model.config
    rng = np.random.default_rng(5)
    size = cfg.sample_size
    batch = 4  # @velocity's: prompts_per_iteration x group_size
    inputs = [
        rng.standard_normal(
            (batch, cfg.in_channels, size, size)).astype(np.float32),
        np.array([100.0, 250.0, 500.0, 750.0], np.float32),
        rng.standard_normal(
            (batch, 8, cfg.joint_attention_dim)).astype(np.float32),
        rng.standard_normal(
            (batch, cfg.pooled_projection_dim)).astype(np.float32),
    ]
    got = omni.velocity(velocity_mlir, velocity_bin, inputs, ckpt, "trained")
    want = export_parity.diffusers_velocity(model, inputs)
    if not export_parity.report("exported", got, want, args.tolerance):
        return 1
    # The check can fail: the folder's untrained weights are not the
    # checkpoint's.
    base = export_parity.diffusers_velocity(
        StableDiffusion3Pipeline.from_pretrained(
            folder, dtype=torch.float32).transformer.eval(), inputs)
    moved = float(np.max(np.abs(base - want)) / np.max(np.abs(want)))
    print(f"training moved the transformer's output by {moved:.2e} "
          f"(relative), above the tolerance: "
          f"{'ok' if moved > args.tolerance else 'FAIL'}")
    if moved <= args.tolerance:
        return 1
    print("PASS", work if args.keep else "")
    if not args.keep:
        shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
