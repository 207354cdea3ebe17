#!/usr/bin/env python3
"""Parity of `omnirun --export` with diffusers (issue 16 item 4, f32).

For a full fine-tuning run and a LoRA run of the tiny recipe (2 iterations,
no decoder), on the same checkpoint and fixed inputs:
  full        omni's velocity (omnigen --program=velocity, the checkpoint's
              transformer.* as its weights) vs the exported folder loaded
              with SD3Transformer2DModel.from_pretrained(DIR/transformer)
  full-ema    the same with --ema (ema.transformer.*) against omni's
              velocity on the EMA weights
  lora        omni's velocity with the trained adapters vs the exported
              base transformer + pytorch_lora_weights.safetensors loaded the
              way StableDiffusion3Pipeline.load_lora_weights loads it
              (lora_state_dict + load_lora_into_transformer, i.e. peft with
              the LoraConfig of the file's metadata)
  lora-merged the --merge-lora export loaded with from_pretrained
Prints max |omni - diffusers| / max |diffusers| per check and exits 1 when
one is above --tolerance (default 1e-5).

  bench/torch/setup.sh && bench/torch/.venv/bin/python \\
      bench/torch/export_parity.py [--build build] [--keep DIR]
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import torch
from diffusers import SD3Transformer2DModel, StableDiffusion3Pipeline
from safetensors.numpy import load_file

HERE = os.path.dirname(os.path.abspath(__file__))

# The recipe's small CPU configuration (as test/train/ema.test trains it).
RECIPE = ["--decoder=none", "--opt=prompts_per_iteration=1",
          "--opt=group_size=2", "--opt=steps=2", "--opt=window=1",
          "--opt=window_hi=1", "--opt=reward=brightness"]


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


class Omni:
    def __init__(self, build, work):
        self.bin = os.path.join(build, "bin")
        self.work = work

    def tool(self, name, *args):
        return run([os.path.join(self.bin, name), *args])

    def compile(self, name, options):
        mlir = os.path.join(self.work, name + ".mlir")
        step = os.path.join(self.work, name + ".bin")
        self.tool("omnigen", *RECIPE, *options, "-o", mlir)
        self.tool("omnic", mlir, "-o", step)
        return mlir, step

    def velocity(self, mlir, step, inputs, weights, tag):
        """@velocity on `inputs` (x, t, prompt, pooled) with its
        transformer.* arguments from `weights` (name -> array)."""
        cmd = [step, "--function=velocity"]
        for i, name in enumerate(arg_names(mlir, "velocity")):
            if i < len(inputs):
                value = inputs[i]
            else:
                if name not in weights:
                    sys.exit(f"@velocity argument {name}: not in the "
                             f"checkpoint")
                value = weights[name]
            path = os.path.join(self.work, f"{tag}.{i}.npy")
            np.save(path, np.ascontiguousarray(value, dtype=np.float32))
            cmd.append(f"--input=@{path}")
        out = os.path.join(self.work, f"{tag}.out.npy")
        cmd.append(f"--output=@{out}")
        self.tool("omnirun", *cmd)
        return np.load(out)


def diffusers_velocity(model, inputs):
    x, t, prompt, pooled = (torch.from_numpy(a) for a in inputs)
    with torch.no_grad():
        return model(hidden_states=x, encoder_hidden_states=prompt,
                     pooled_projections=pooled, timestep=t).sample.numpy()


def report(what, got, want, tolerance):
    err = float(np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-30))
    ok = err <= tolerance
    print(f"{what:12s} shape {tuple(want.shape)}  max|omni - diffusers| / "
          f"max|diffusers| = {err:.2e}  {'ok' if ok else 'FAIL'} "
          f"(tolerance {tolerance:g})")
    return ok


def with_ema(weights):
    """transformer.X replaced by ema.transformer.X where there is one."""
    out = dict(weights)
    for k, v in weights.items():
        if k.startswith("ema."):
            out[k[len("ema."):]] = v
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=os.path.join(HERE, "..", "..", "build"))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tolerance", type=float, default=1e-5)
    p.add_argument("--keep", help="work in this folder and keep it")
    args = p.parse_args()
    rng = np.random.default_rng(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or tmp
        os.makedirs(work, exist_ok=True)
        omni = Omni(args.build, work)
        b, c, s = 2, 16, 16
        inputs = [rng.standard_normal((b, c, s, s)).astype(np.float32),
                  rng.uniform(0, 1000, b).astype(np.float32),
                  rng.standard_normal((b, 8, 32)).astype(np.float32),
                  rng.standard_normal((b, 32)).astype(np.float32)]
        ok = True
        for kind, options in [
                ("full", ["--opt=ema_decay=0.5", "--opt=ema_every=1"]),
                ("lora", ["--opt=lora_rank=2", "--opt=lora_alpha=3"])]:
            _, train = omni.compile(kind + "-train", options)
            vmlir, vbin = omni.compile(kind + "-velocity",
                                       options + ["--program=velocity"])
            rundir = os.path.join(work, kind + "-run")
            # A large learning rate, so that the trained weights (and the
            # adapters, zero-initialized B) are far from the initial ones.
            omni.tool("omnirun", train, "--steps", "2", "--seed", "1",
                      "--set", "lr=0.01", "--out", rundir)
            ckpt = os.path.join(rundir, "step-2.safetensors")
            weights = load_file(ckpt)
            exported = os.path.join(work, kind + "-export")
            print(omni.tool("omnirun", train, "--export", exported,
                            "--checkpoint", rundir, "--force").strip())
            want = omni.velocity(vmlir, vbin, inputs, weights, kind)
            if kind == "full":
                model = SD3Transformer2DModel.from_pretrained(
                    os.path.join(exported, "transformer")).eval()
                ok &= report("full", want, diffusers_velocity(model, inputs),
                             args.tolerance)
                ema = os.path.join(work, "full-export-ema")
                print(omni.tool("omnirun", train, "--export", ema,
                                "--checkpoint", ckpt, "--ema",
                                "--force").strip())
                want_ema = omni.velocity(vmlir, vbin, inputs,
                                         with_ema(weights), "full-ema")
                model = SD3Transformer2DModel.from_pretrained(
                    os.path.join(ema, "transformer")).eval()
                ok &= report("full-ema", want_ema,
                             diffusers_velocity(model, inputs),
                             args.tolerance)
                print(f"(EMA and trained weights differ by "
                      f"{np.max(np.abs(want - want_ema)):.2e} in velocity)")
            else:
                lora_b = [v for k, v in weights.items()
                          if k.startswith("transformer.") and "lora_B" in k]
                print(f"(trained lora_B max |b| = "
                      f"{max(np.max(np.abs(v)) for v in lora_b):.2e})")
                model = SD3Transformer2DModel.from_pretrained(
                    os.path.join(exported, "transformer")).eval()
                base = diffusers_velocity(model, inputs)
                state_dict, metadata = StableDiffusion3Pipeline.lora_state_dict(
                    exported, return_lora_metadata=True)
                print(f"(adapter metadata: {metadata})")
                StableDiffusion3Pipeline.load_lora_into_transformer(
                    state_dict, transformer=model, metadata=metadata)
                model.eval()
                got = diffusers_velocity(model, inputs)
                ok &= report("lora", want, got, args.tolerance)
                print(f"(the adapters move the velocity by "
                      f"{np.max(np.abs(got - base)):.2e})")
                merged = os.path.join(work, "lora-export-merged")
                print(omni.tool("omnirun", train, "--export", merged,
                                "--checkpoint", rundir, "--merge-lora",
                                "--force").strip())
                model = SD3Transformer2DModel.from_pretrained(
                    os.path.join(merged, "transformer")).eval()
                ok &= report("lora-merged", want,
                             diffusers_velocity(model, inputs),
                             args.tolerance)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
