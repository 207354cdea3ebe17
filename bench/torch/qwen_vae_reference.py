#!/usr/bin/env python3
"""Reference fixture for omni's `autoencoder_kl_qwenimage` decoder
(frontends/models/QwenImageVae.cpp).

Builds diffusers' AutoencoderKLQwenImage and writes, under
frontends/models/testdata/ (or --out):

  autoencoder_kl_qwenimage_tiny.params.txt   parameters a single-frame
                                             decode reads, `tiny` preset
  autoencoder_kl_qwenimage.params.txt        the same for Qwen/Qwen-Image's
                                             VAE config
  autoencoder_kl_qwenimage_tiny.latents.npy  a [2, 16, 8, 8] float32 input
  autoencoder_kl_qwenimage_tiny.decoded.npy  vae.decode(latents[:, :, None])
                                             .sample[:, :, 0], float32
  autoencoder_kl_qwenimage_tiny.decoded_f64.npy  the same in float64
  autoencoder_kl_qwenimage_tiny.unscaled.npy     the pipeline's
                                             `latents / (1 / std) + mean`

"Parameters a single-frame decode reads" are post_quant_conv.* and
decoder.* without the upsample3d blocks' time_conv.*: diffusers skips the
time convolution on a video's first chunk. The script checks that claim:
decoding with every time_conv weight set to NaN gives the same images.

Weights come from `fixture_weights` (bench/torch/vae_reference.py, mirrored
in frontends/models/testing/Fixture.h). Needs torch, diffusers and numpy
(bench/torch/setup.sh); the C++ tests read only the files written here.

  python bench/torch/qwen_vae_reference.py [--out DIR]
"""

import numpy as np
import torch
from diffusers import AutoencoderKLQwenImage

from vae_reference import fixture_output, fixture_weights, write_params

# The `tiny` preset of QwenImageVae.cpp: three blocks of 8 to 16 channels,
# one upsample3d and one upsample2d, 16x16 latents -> 64x64 images.
TINY = dict(base_dim=8, z_dim=16, dim_mult=[1, 2, 2], num_res_blocks=1,
            temperal_downsample=[False, True])
# Qwen/Qwen-Image vae/config.json (diffusers' defaults).
FULL = dict(base_dim=96, z_dim=16, dim_mult=[1, 2, 4, 4], num_res_blocks=2,
            temperal_downsample=[False, True, True])


def frame_state(vae):
    """(name, shape) of the parameters a single-frame decode reads."""
    return [(k, tuple(v.shape)) for k, v in vae.state_dict().items()
            if (k.startswith("decoder.") or k.startswith("post_quant_conv."))
            and ".time_conv." not in k]


def build(config, dtype, time_conv=None):
    vae = AutoencoderKLQwenImage(**config).eval()
    state = {k: torch.from_numpy(fixture_weights(k, s))
             for k, s in frame_state(vae)}
    for k, v in vae.state_dict().items():
        if ".time_conv." in k:
            state[k] = torch.full(v.shape, time_conv if time_conv is not None
                                  else 0.0)
    missing = vae.load_state_dict(state, strict=False)
    assert not missing.unexpected_keys, missing.unexpected_keys
    return vae.to(dtype)


def decode(vae, latents, dtype):
    with torch.no_grad():
        z = torch.from_numpy(latents).to(dtype)[:, :, None]
        return vae.decode(z).sample[:, :, 0].numpy()


def main():
    out = fixture_output(__doc__)
    import diffusers
    print(f"diffusers {diffusers.__version__}, torch {torch.__version__}")

    torch.manual_seed(0)
    latents = torch.randn(2, 16, 8, 8).numpy().astype(np.float32)
    np.save(out("autoencoder_kl_qwenimage_tiny.latents.npy"), latents)

    vae = build(TINY, torch.float32)
    write_params(out("autoencoder_kl_qwenimage_tiny.params.txt"),
                 frame_state(vae), "autoencoder_kl_qwenimage tiny decoder, "
                 "one frame")
    y32 = decode(vae, latents, torch.float32)
    np.save(out("autoencoder_kl_qwenimage_tiny.decoded.npy"), y32)
    nan = decode(build(TINY, torch.float32, time_conv=float("nan")), latents,
                 torch.float32)
    assert np.array_equal(nan, y32), "a single frame read time_conv"

    y64 = decode(build(TINY, torch.float64), latents.astype(np.float64),
                 torch.float64)
    np.save(out("autoencoder_kl_qwenimage_tiny.decoded_f64.npy"), y64)
    print("tiny: output", y32.shape, "max |f32 - f64|",
          float(np.abs(y32 - y64).max()), "max |y|", float(np.abs(y64).max()),
          "clamped", int((np.abs(y64) >= 1.0).sum()), "of", y64.size)

    # QwenImagePipeline._decode_latents: latents / (1 / std) + mean.
    cfg = vae.config
    mean = torch.tensor(cfg.latents_mean).view(1, cfg.z_dim, 1, 1)
    inv_std = 1.0 / torch.tensor(cfg.latents_std).view(1, cfg.z_dim, 1, 1)
    unscaled = (torch.from_numpy(latents) / inv_std + mean).numpy()
    np.save(out("autoencoder_kl_qwenimage_tiny.unscaled.npy"), unscaled)

    full = AutoencoderKLQwenImage(**FULL)
    total = write_params(out("autoencoder_kl_qwenimage.params.txt"),
                         frame_state(full), "autoencoder_kl_qwenimage "
                         "qwen-image decoder, one frame")
    print("qwen-image single-frame decoder parameters:", total)


if __name__ == "__main__":
    main()
