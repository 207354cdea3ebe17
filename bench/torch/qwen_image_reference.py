#!/usr/bin/env python3
"""Reference fixture and parity check for omni's `qwen_image` velocity model.

Builds diffusers' QwenImageTransformer2DModel with the weights of
`fixture_weights` (vae_reference.py: generated from the parameter names, so
the C++ tests regenerate them) and writes, under frontends/models/testdata/
(or --out):

  qwen_image_tiny.params.txt   parameter names and shapes of the `tiny`
                               preset (named_parameters)
  qwen_image_tiny.{x,timestep,prompt}.npy
                               a batch of 2 float32 inputs as omni's
                               VelocityModel takes them: latents
                               [2, 16, 16, 16] (NCHW, unpacked), timesteps
                               in [0, 1000] (1000 sigma), text tokens
                               [2, 8, 32]
  qwen_image_tiny.velocity.npy      the pipeline's
                               _unpack_latents(transformer(_pack_latents(x),
                               prompt, timestep=t / 1000, img_shapes).sample)
                               in float32
  qwen_image_tiny.velocity_f64.npy  the same with model and inputs in float64
  qwen_image_tiny.mask.npy     a text mask [2, 8] (encoder_hidden_states_mask,
                               1 = token, 0 = padding): sample 0 all
                               tokens, sample 1 its first 5 (the last 3
                               padded)
  qwen_image_tiny_masked.velocity{,_f64}.npy
                               the velocity of the same inputs with that
                               mask, in float32 and float64
  qwen_image_tiny_10.{x,velocity_f64}.npy
                               [1, 16, 10, 10] latents: a 5x5 patch grid, odd,
                               so scale_rope's uneven split (positions -3..1)
                               and the text offset max(h/2, w/2) = 2 differ
                               from the 8x8 grid (timestep/prompt: the first
                               sample's)
  qwen-image.params.txt        the real Qwen/Qwen-Image transformer's
                               parameters (its transformer/config.json, on
                               the meta device; the header holds the count)

With --parity BUILD it also checks the compiled model end to end instead:
diffusers' default (PyTorch) initialization, its state dict written as
safetensors with diffusers' (= omni's) names, `omnigen --model=qwen_image
--config=tiny --program=velocity`, omnic, and `omnirun --function=velocity`
on the same inputs, with a text mask that pads the last 3 tokens of the
second prompt (@velocity's prompt_mask); prints max |omni - diffusers| /
max |diffusers| and exits 1 above --tolerance (1e-5).

Needs torch, diffusers, safetensors and numpy (bench/torch/setup.sh).
Written with diffusers 0.42.1 and torch 2.15.0.

  bench/torch/.venv/bin/python bench/torch/qwen_image_reference.py [--out DIR]
  bench/torch/.venv/bin/python bench/torch/qwen_image_reference.py \\
      --parity build
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import torch
from diffusers import QwenImagePipeline, QwenImageTransformer2DModel

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from vae_reference import fixture_weights, write_params  # noqa: E402

# omni's `qwen_image` preset `tiny` (latent_size 16, text_tokens 8).
TINY = dict(
    patch_size=2,
    in_channels=64,
    out_channels=16,
    num_layers=2,
    attention_head_dim=32,
    num_attention_heads=2,
    joint_attention_dim=32,
    axes_dims_rope=(8, 12, 12),
)

# Qwen/Qwen-Image transformer/config.json (= the class's __init__ defaults;
# its guidance_embeds=false changes nothing in diffusers' class).
QWEN_IMAGE = dict(
    patch_size=2,
    in_channels=64,
    out_channels=16,
    num_layers=60,
    attention_head_dim=128,
    num_attention_heads=24,
    joint_attention_dim=3584,
    axes_dims_rope=(16, 56, 56),
)

VAE_SCALE = 8  # the pipeline's vae_scale_factor; only sizes depend on it


def parameters(model):
    return [(k, tuple(v.shape)) for k, v in model.named_parameters()]


# The text mask of the masked cases: the second prompt's last 3 of 8
# tokens are padding.
MASK = np.array([[1] * 8, [1] * 5 + [0] * 3], dtype=np.float32)


def velocity_of(model, x, t, prompt, mask=None):
    """The pipeline's transformer call on NCHW latents `x` (torch), with
    timestep t = 1000 sigma: pack, transformer(timestep=t / 1000), unpack.
    `mask` [B, L] (torch, 0/1) is encoder_hidden_states_mask, as the
    pipeline passes prompt_embeds_mask (None: every token valid)."""
    b, c, hh, ww = x.shape
    packed = QwenImagePipeline._pack_latents(x, b, c, hh, ww)
    with torch.no_grad():
        out = model(hidden_states=packed, encoder_hidden_states=prompt,
                    encoder_hidden_states_mask=mask, timestep=t / 1000,
                    img_shapes=[(1, hh // 2, ww // 2)] * b).sample
    out = QwenImagePipeline._unpack_latents(out, hh * VAE_SCALE,
                                            ww * VAE_SCALE, VAE_SCALE)
    return out[:, :, 0]


def fixture_velocity(x, t, prompt, dtype, mask=None):
    model = QwenImageTransformer2DModel(**TINY).eval()
    state = {k: torch.from_numpy(fixture_weights(k, s))
             for k, s in parameters(model)}
    result = model.load_state_dict(state, strict=True)
    assert not result.unexpected_keys and not result.missing_keys, result
    model = model.to(dtype)
    as_t = lambda a: torch.from_numpy(a).to(dtype)
    m = None if mask is None else torch.from_numpy(mask) > 0.5
    return model, velocity_of(model, as_t(x), as_t(t), as_t(prompt),
                              m).numpy()


def write_fixture(out):
    torch.manual_seed(0)
    f32 = lambda a: a.numpy().astype(np.float32)
    x = f32(torch.randn(2, 16, 16, 16))
    t = np.array([250.0, 750.0], dtype=np.float32)
    prompt = f32(torch.randn(2, 8, 32))
    x10 = f32(torch.randn(1, 16, 10, 10))
    for name, a in [("x", x), ("timestep", t), ("prompt", prompt)]:
        np.save(out(f"qwen_image_tiny.{name}.npy"), a)
    np.save(out("qwen_image_tiny_10.x.npy"), x10)

    model, v32 = fixture_velocity(x, t, prompt, torch.float32)
    total = write_params(out("qwen_image_tiny.params.txt"), parameters(model),
                         "qwen_image tiny")
    np.save(out("qwen_image_tiny.velocity.npy"), v32.astype(np.float32))
    d = lambda a: a.astype(np.float64)
    _, v64 = fixture_velocity(d(x), d(t), d(prompt), torch.float64)
    np.save(out("qwen_image_tiny.velocity_f64.npy"), v64)
    print(f"tiny: {total} parameters, output {v32.shape}, max |f32 - f64| "
          f"{float(np.abs(v32 - v64).max()):.3g}, max |v| "
          f"{float(np.abs(v64).max()):.3g}")
    _, v10 = fixture_velocity(d(x10), d(t[:1]), d(prompt[:1]), torch.float64)
    np.save(out("qwen_image_tiny_10.velocity_f64.npy"), v10)

    np.save(out("qwen_image_tiny.mask.npy"), MASK)
    _, m32 = fixture_velocity(x, t, prompt, torch.float32, MASK)
    np.save(out("qwen_image_tiny_masked.velocity.npy"), m32.astype(np.float32))
    _, m64 = fixture_velocity(d(x), d(t), d(prompt), torch.float64, MASK)
    np.save(out("qwen_image_tiny_masked.velocity_f64.npy"), m64)
    print(f"masked: max |v_masked - v| {float(np.abs(m64 - v64).max()):.3g} "
          f"(sample 0, all valid: {float(np.abs(m64 - v64)[0].max()):.3g})")

    with torch.device("meta"):
        full = QwenImageTransformer2DModel(**QWEN_IMAGE)
    total = write_params(out("qwen-image.params.txt"), parameters(full),
                         "qwen_image qwen-image")
    print("qwen-image parameters:", total)


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


def parity(build, tolerance, seed):
    from safetensors.numpy import load_file, save_file
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    b = 2
    model = QwenImageTransformer2DModel(**TINY).eval()  # PyTorch init
    x = rng.standard_normal((b, 16, 16, 16)).astype(np.float32)
    t = rng.uniform(0, 1000, b).astype(np.float32)
    prompt = rng.standard_normal((b, 8, 32)).astype(np.float32)
    want = velocity_of(model, torch.from_numpy(x), torch.from_numpy(t),
                       torch.from_numpy(prompt),
                       torch.from_numpy(MASK) > 0.5).numpy()
    binary = lambda n: os.path.join(build, "bin", n)
    with tempfile.TemporaryDirectory() as work:
        weights = os.path.join(work, "transformer.safetensors")
        save_file({k: v.detach().numpy().copy()
                   for k, v in model.state_dict().items()}, weights)
        state = load_file(weights)
        mlir = os.path.join(work, "velocity.mlir")
        step = os.path.join(work, "velocity.bin")
        run([binary("omnigen"), "--model=qwen_image", "--config=tiny",
             "--decoder=none", "--program=velocity",
             "--opt=prompts_per_iteration=1", f"--opt=group_size={b}",
             "-o", mlir])
        run([binary("omnic"), mlir, "-o", step])
        cmd = [binary("omnirun"), step, "--function=velocity"]
        data = {"x": x, "timestep": t, "prompt": prompt, "prompt_mask": MASK}
        for i, name in enumerate(arg_names(mlir, "velocity")):
            if name in data:
                value = data[name]
            else:
                key = name[len("transformer."):]
                if key not in state:
                    sys.exit(f"@velocity argument {name}: the diffusers "
                             f"state dict has no {key}")
                value = state[key]
            path = os.path.join(work, f"in{i}.npy")
            np.save(path, np.ascontiguousarray(value, dtype=np.float32))
            cmd.append(f"--input=@{path}")
        out = os.path.join(work, "v.npy")
        run(cmd + [f"--output=@{out}"])
        got = np.load(out)
    err = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
    ok = got.shape == want.shape and err <= tolerance
    print(f"velocity shape {tuple(want.shape)}  max|omni - diffusers| / "
          f"max|diffusers| = {err:.2e}  {'ok' if ok else 'FAIL'} "
          f"(tolerance {tolerance:g})")
    return 0 if ok else 1


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=os.path.join(
        HERE, "..", "..", "frontends", "models", "testdata"))
    p.add_argument("--parity", metavar="BUILD", help="check the compiled "
                   "model of this build folder against diffusers instead")
    p.add_argument("--tolerance", type=float, default=1e-5)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    import diffusers
    diffusers.utils.logging.set_verbosity_error()
    print(f"diffusers {diffusers.__version__}, torch {torch.__version__}")
    if args.parity:
        return parity(args.parity, args.tolerance, args.seed)
    os.makedirs(args.out, exist_ok=True)
    write_fixture(lambda name: os.path.join(args.out, name))
    return 0


if __name__ == "__main__":
    sys.exit(main())
