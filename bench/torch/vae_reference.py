#!/usr/bin/env python3
"""Reference fixture for omni's `autoencoder_kl` decoder (frontends/models).

Builds diffusers' AutoencoderKL and writes, under
frontends/models/testdata/ (or --out):

  autoencoder_kl_tiny.params.txt      decoder parameter names and shapes of
                                      the `tiny` preset (state_dict order)
  autoencoder_kl_tiny_pqc.params.txt  the same with use_post_quant_conv
  autoencoder_kl_sd3.params.txt       the real SD3/SD3.5 VAE's decoder
                                      (config of stable-diffusion-3.5-medium)
  autoencoder_kl_tiny.latents.npy     a [2, 16, 16, 16] float32 input
  autoencoder_kl_tiny.decoded.npy     vae.decode(latents).sample, float32
  autoencoder_kl_tiny.decoded_f64.npy the same with the model in float64
  autoencoder_kl_tiny_pqc.decoded_f64.npy  use_post_quant_conv, float64

The decoder's weights (about 130k values) are too large to commit, so they
are generated from the parameter names by `fixture_weights`, which
frontends/models/VaeDecoderTest.cpp implements identically in C++:

  h0 = FNV-1a 64 of the name; for element i (row-major):
  z = splitmix64(h0 + (i + 1) * 0x9E3779B97F4A7C15);
  u = (z >> 40) * 2^-23 - 1                      (exact, in [-1, 1))
  value = float32(u / sqrt(prod(shape[1:])))     rank >= 2 (conv, linear)
        = float32(1 + 0.25 u)                    rank 1, name ends .weight
        = float32(0.1 u)                         rank 1, name ends .bias

Needs torch, diffusers and numpy (a venv outside the repo); the
C++ tests read only the files written here.

  python bench/torch/vae_reference.py [--out DIR]
"""

import argparse
import os

import numpy as np
import torch
from diffusers import AutoencoderKL

MASK = (1 << 64) - 1

TINY = dict(
    in_channels=3,
    out_channels=3,
    down_block_types=("DownEncoderBlock2D",) * 2,
    up_block_types=("UpDecoderBlock2D",) * 2,
    block_out_channels=(32, 32),
    layers_per_block=1,
    act_fn="silu",
    latent_channels=16,
    norm_num_groups=8,
    sample_size=32,
    scaling_factor=1.5305,
    shift_factor=0.0609,
    use_quant_conv=False,
    use_post_quant_conv=False,
    mid_block_add_attention=True,
)

# stabilityai/stable-diffusion-3.5-medium, vae/config.json.
SD3 = dict(
    in_channels=3,
    out_channels=3,
    down_block_types=("DownEncoderBlock2D",) * 4,
    up_block_types=("UpDecoderBlock2D",) * 4,
    block_out_channels=(128, 256, 512, 512),
    layers_per_block=2,
    act_fn="silu",
    latent_channels=16,
    norm_num_groups=32,
    sample_size=1024,
    scaling_factor=1.5305,
    shift_factor=0.0609,
    use_quant_conv=False,
    use_post_quant_conv=False,
    force_upcast=True,
    mid_block_add_attention=True,
)


def fnv1a64(name):
    h = 0xCBF29CE484222325
    for b in name.encode():
        h = ((h ^ b) * 0x100000001B3) & MASK
    return h


def fixture_weights(name, shape):
    n = int(np.prod(shape)) if shape else 1
    with np.errstate(over="ignore"):
        i = np.arange(1, n + 1, dtype=np.uint64)
        z = np.uint64(fnv1a64(name)) + i * np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    u = (z >> np.uint64(40)).astype(np.float64) * 2.0**-23 - 1.0
    if len(shape) >= 2:
        v = u / np.sqrt(float(np.prod(shape[1:])))
    elif name.endswith(".weight"):
        v = 1.0 + 0.25 * u
    else:
        v = 0.1 * u
    return v.astype(np.float32).reshape(shape)


def decoder_state(vae):
    """(name, shape) of the parameters AutoencoderKL.decode uses."""
    return [(k, tuple(v.shape)) for k, v in vae.state_dict().items()
            if k.startswith("decoder.") or k.startswith("post_quant_conv.")]


def write_params(path, params, title):
    total = sum(int(np.prod(s)) for _, s in params)
    with open(path, "w") as f:
        f.write(f"# {title}: {len(params)} tensors, {total} elements\n")
        for name, shape in params:
            f.write(f"{name} {'x'.join(str(d) for d in shape)}\n")
    return total


def decode(config, latents, dtype):
    vae = AutoencoderKL(**config).eval()
    state = {k: torch.from_numpy(fixture_weights(k, s))
             for k, s in decoder_state(vae)}
    missing = vae.load_state_dict(state, strict=False)
    assert not missing.unexpected_keys, missing.unexpected_keys
    vae = vae.to(dtype)
    with torch.no_grad():
        out = vae.decode(torch.from_numpy(latents).to(dtype)).sample
    return vae, out.numpy()


def fixture_output(doc):
    """Parses --out (default: frontends/models/testdata) and returns a
    function mapping a file name to its path there."""
    here = os.path.dirname(os.path.abspath(__file__))
    default_out = os.path.join(here, "..", "..", "frontends", "models",
                               "testdata")
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--out", default=default_out)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    return lambda name: os.path.join(args.out, name)


def main():
    out = fixture_output(__doc__)
    import diffusers
    print(f"diffusers {diffusers.__version__}, torch {torch.__version__}")

    torch.manual_seed(0)
    latents = torch.randn(2, 16, 16, 16).numpy().astype(np.float32)
    np.save(out("autoencoder_kl_tiny.latents.npy"), latents)

    vae, y32 = decode(TINY, latents, torch.float32)
    write_params(out("autoencoder_kl_tiny.params.txt"), decoder_state(vae),
                 "autoencoder_kl tiny decoder")
    np.save(out("autoencoder_kl_tiny.decoded.npy"), y32.astype(np.float32))
    _, y64 = decode(TINY, latents.astype(np.float64), torch.float64)
    np.save(out("autoencoder_kl_tiny.decoded_f64.npy"), y64)
    print("tiny: output", y32.shape, "max |f32 - f64|",
          float(np.abs(y32 - y64).max()), "max |y|", float(np.abs(y64).max()))

    pqc = dict(TINY, use_post_quant_conv=True)
    vae, y64 = decode(pqc, latents.astype(np.float64), torch.float64)
    write_params(out("autoencoder_kl_tiny_pqc.params.txt"),
                 decoder_state(vae), "autoencoder_kl tiny decoder with "
                 "use_post_quant_conv")
    np.save(out("autoencoder_kl_tiny_pqc.decoded_f64.npy"), y64)

    sd3 = AutoencoderKL(**SD3)
    total = write_params(out("autoencoder_kl_sd3.params.txt"),
                         decoder_state(sd3), "autoencoder_kl sd3 decoder")
    print("sd3 decoder parameters:", total)


if __name__ == "__main__":
    main()
