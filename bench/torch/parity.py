#!/usr/bin/env python3
"""Parity of omni's compiled models with diffusers, side by side (issue 7).

For each model, on the same random weights and inputs:
  velocity  omni's `sd3` (omnigen --program=velocity, compiled by omnic,
            run by omnirun) vs diffusers' SD3Transformer2DModel
  decode    omni's `autoencoder_kl` (--program=decode) vs diffusers'
            AutoencoderKL: vae.decode(z / scaling + shift) / 2 + 0.5,
            clamped to [0, 1], as the recipe decodes
Prints max |omni - diffusers| / max |diffusers| per check and exits 1 when
one is above --tolerance (default 1e-5, float32).

  bench/torch/setup.sh && bench/torch/.venv/bin/python bench/torch/parity.py \\
      [--build build] [--config tiny] [--batch 2] [--seed 0]
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import torch
from diffusers import AutoencoderKL, SD3Transformer2DModel

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from sd3_reference import TINY as SD3_TINY  # noqa: E402
from vae_reference import TINY as VAE_TINY  # noqa: E402


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd[:3])} ...: {r.stderr.strip()}")
    return r.stdout


def arg_names(mlir_path, function):
    """omni.name of each argument of `function`, in order."""
    text = open(mlir_path).read()
    m = re.search(r"func\.func @" + function + r"\((.*?)\)\s*->", text, re.S)
    if not m:
        sys.exit(f"{mlir_path}: no @{function}")
    return re.findall(r'omni\.name = "([^"]+)"', m.group(1))


def omni_run(args, work, program, inputs, state, prefix):
    """Compiles the omnigen `program` and runs it on `inputs` (leading
    arguments) and the torch `state` (parameters named prefix.X)."""
    mlir = os.path.join(work, program + ".mlir")
    step = os.path.join(work, program + ".bin")
    bin_ = os.path.join(args.build, "bin")
    run([os.path.join(bin_, "omnigen"), f"--config={args.config}",
         f"--decoder-config={args.config}", f"--program={program}",
         "--opt=prompts_per_iteration=1", f"--opt=group_size={args.batch}",
         "-o", mlir])
    run([os.path.join(bin_, "omnic"), mlir, "-o", step])
    names = arg_names(mlir, program)
    cmd = [os.path.join(bin_, "omnirun"), step, f"--function={program}"]
    for i, name in enumerate(names):
        if i < len(inputs):
            value = inputs[i]
        else:
            key = name[len(prefix) + 1:]
            if key not in state:
                sys.exit(f"@{program} argument {name}: diffusers has no {key}")
            value = state[key].detach().numpy()
        path = os.path.join(work, f"{program}.{i}.npy")
        np.save(path, np.ascontiguousarray(value, dtype=np.float32))
        cmd.append(f"--input=@{path}")
    out = os.path.join(work, program + ".out.npy")
    cmd.append(f"--output=@{out}")
    run(cmd)
    return np.load(out)


def report(what, got, want, tolerance):
    err = float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30))
    ok = err <= tolerance
    print(f"{what:10s} shape {tuple(want.shape)}  max|omni - diffusers| / "
          f"max|diffusers| = {err:.2e}  {'ok' if ok else 'FAIL'} "
          f"(tolerance {tolerance:g})")
    return ok


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=os.path.join(HERE, "..", "..", "build"))
    p.add_argument("--config", default="tiny", choices=["tiny"])
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tolerance", type=float, default=1e-5)
    args = p.parse_args()
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    b = args.batch
    ok = True
    with tempfile.TemporaryDirectory() as work:
        # Velocity: diffusers' default (PyTorch) initialization.
        model = SD3Transformer2DModel(**SD3_TINY).eval()
        c, s = SD3_TINY["in_channels"], SD3_TINY["sample_size"]
        x = rng.standard_normal((b, c, s, s)).astype(np.float32)
        t = rng.uniform(0, 1000, b).astype(np.float32)
        prompt = rng.standard_normal(
            (b, 8, SD3_TINY["joint_attention_dim"])).astype(np.float32)
        pooled = rng.standard_normal(
            (b, SD3_TINY["pooled_projection_dim"])).astype(np.float32)
        with torch.no_grad():
            want = model(hidden_states=torch.from_numpy(x),
                         encoder_hidden_states=torch.from_numpy(prompt),
                         pooled_projections=torch.from_numpy(pooled),
                         timestep=torch.from_numpy(t)).sample.numpy()
        got = omni_run(args, work, "velocity", [x, t, prompt, pooled],
                       dict(model.named_parameters()), "transformer")
        ok &= report("velocity", got, want, args.tolerance)

        # Decode, as the recipe decodes the rollout's final latents.
        vae = AutoencoderKL(**VAE_TINY).eval()
        z = rng.standard_normal((b, 16, 16, 16)).astype(np.float32)
        sf, sh = VAE_TINY["scaling_factor"], VAE_TINY["shift_factor"]
        with torch.no_grad():
            img = vae.decode(torch.from_numpy(z) / sf + sh).sample
            want = (img * 0.5 + 0.5).clamp(0, 1).numpy()
        state = {k: v for k, v in vae.state_dict().items()}
        got = omni_run(args, work, "decode", [z], state, "vae")
        ok &= report("decode", got, want, args.tolerance)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
