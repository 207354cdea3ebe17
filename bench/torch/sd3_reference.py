#!/usr/bin/env python3
"""Reference fixture for omni's `sd3` velocity model (frontends/models).

Builds diffusers' SD3Transformer2DModel and writes, under
frontends/models/testdata/ (or --out):

  sd3_tiny.params.txt         parameter names and shapes of the `tiny` preset
                              (named_parameters; the persistent buffer
                              pos_embed.pos_embed, which omni computes as a
                              constant, is named in a comment)
  sd3_tiny.{x,timestep,prompt,pooled}.npy
                              a batch of 2 float32 inputs: latents
                              [2, 16, 16, 16], timesteps in [0, 1000], text
                              tokens [2, 8, 32], pooled text [2, 32]
  sd3_tiny.velocity.npy       transformer(x, prompt, pooled, t).sample, f32
  sd3_tiny.velocity_f64.npy   the same with the model and inputs in float64
  sd3_tiny_12.x.npy           [1, 16, 12, 12] latents: a 6x6 patch grid, so
  sd3_tiny_12.velocity_f64.npy  an off-sample_size crop of the position table
                              (timestep/prompt/pooled: the first sample's)
  sd3.5-medium.params.txt     the real SD3.5-Medium transformer's parameters
                              (its transformer/config.json, on the meta
                              device; the header holds the element count)

The weights are generated from the parameter names by `fixture_weights` of
vae_reference.py (implemented identically in C++ by the tests), so only the
inputs and outputs are stored.

Needs torch, diffusers and numpy (a venv outside the repo); the C++ tests
read only the files written here. Written with diffusers 0.42.1 and torch
2.15.0.

  python bench/torch/sd3_reference.py [--out DIR]
"""

import os
import sys

import numpy as np
import torch
from diffusers import SD3Transformer2DModel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vae_reference import (fixture_output, fixture_weights,  # noqa: E402
                           write_params)

# omni's `sd3` preset `tiny` (latent_size 16, text_tokens 8).
TINY = dict(
    sample_size=16,
    patch_size=2,
    in_channels=16,
    num_layers=2,
    attention_head_dim=16,
    num_attention_heads=4,
    joint_attention_dim=32,
    caption_projection_dim=64,
    pooled_projection_dim=32,
    out_channels=16,
    pos_embed_max_size=16,
    dual_attention_layers=(0,),
    qk_norm="rms_norm",
)

# stabilityai/stable-diffusion-3.5-medium, transformer/config.json.
SD35_MEDIUM = dict(
    sample_size=128,
    patch_size=2,
    in_channels=16,
    num_layers=24,
    attention_head_dim=64,
    num_attention_heads=24,
    joint_attention_dim=4096,
    caption_projection_dim=1536,
    pooled_projection_dim=2048,
    out_channels=16,
    pos_embed_max_size=384,
    dual_attention_layers=tuple(range(13)),
    qk_norm="rms_norm",
)


def parameters(model):
    return [(k, tuple(v.shape)) for k, v in model.named_parameters()]


def buffers_note(model):
    params = {k for k, _ in model.named_parameters()}
    extra = [(k, tuple(v.shape)) for k, v in model.state_dict().items()
             if k not in params]
    return ", ".join(f"{k} {'x'.join(str(d) for d in s)}" for k, s in extra)


def velocity(x, t, prompt, pooled, dtype):
    model = SD3Transformer2DModel(**TINY).eval()
    state = {k: torch.from_numpy(fixture_weights(k, s))
             for k, s in parameters(model)}
    result = model.load_state_dict(state, strict=False)
    assert not result.unexpected_keys, result.unexpected_keys
    assert result.missing_keys == ["pos_embed.pos_embed"], result.missing_keys
    model = model.to(dtype)
    as_t = lambda a: torch.from_numpy(a).to(dtype)
    with torch.no_grad():
        out = model(hidden_states=as_t(x), encoder_hidden_states=as_t(prompt),
                    pooled_projections=as_t(pooled), timestep=as_t(t)).sample
    return model, out.numpy()


def main():
    out = fixture_output(__doc__)
    import diffusers
    diffusers.utils.logging.set_verbosity_error()  # float32-cast notices
    print(f"diffusers {diffusers.__version__}, torch {torch.__version__}")

    torch.manual_seed(0)
    f32 = lambda a: a.numpy().astype(np.float32)
    x = f32(torch.randn(2, 16, 16, 16))
    t = np.array([250.0, 731.5], dtype=np.float32)
    prompt = f32(torch.randn(2, 8, 32))
    pooled = f32(torch.randn(2, 32))
    x12 = f32(torch.randn(1, 16, 12, 12))
    for name, a in [("x", x), ("timestep", t), ("prompt", prompt),
                    ("pooled", pooled)]:
        np.save(out(f"sd3_tiny.{name}.npy"), a)
    np.save(out("sd3_tiny_12.x.npy"), x12)

    model, v32 = velocity(x, t, prompt, pooled, torch.float32)
    total = write_params(out("sd3_tiny.params.txt"), parameters(model),
                         "sd3 tiny")
    with open(out("sd3_tiny.params.txt"), "a") as f:
        f.write(f"# buffers (not parameters): {buffers_note(model)}\n")
    np.save(out("sd3_tiny.velocity.npy"), v32.astype(np.float32))
    d = lambda a: a.astype(np.float64)
    _, v64 = velocity(d(x), d(t), d(prompt), d(pooled), torch.float64)
    np.save(out("sd3_tiny.velocity_f64.npy"), v64)
    print(f"tiny: {total} parameters, output {v32.shape}, max |f32 - f64| "
          f"{float(np.abs(v32 - v64).max()):.3g}, max |v| "
          f"{float(np.abs(v64).max()):.3g}")
    _, v12 = velocity(d(x12), d(t[:1]), d(prompt[:1]), d(pooled[:1]),
                      torch.float64)
    np.save(out("sd3_tiny_12.velocity_f64.npy"), v12)

    with torch.device("meta"):
        medium = SD3Transformer2DModel(**SD35_MEDIUM)
    total = write_params(out("sd3.5-medium.params.txt"), parameters(medium),
                         "sd3 sd3.5-medium")
    with open(out("sd3.5-medium.params.txt"), "a") as f:
        f.write(f"# buffers (not parameters): {buffers_note(medium)}\n")
    print("sd3.5-medium parameters:", total)


if __name__ == "__main__":
    main()
