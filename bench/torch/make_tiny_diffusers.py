#!/usr/bin/env python3
"""Writes tiny StableDiffusion3Pipeline folders with random weights.

usage: make_tiny_diffusers.py [--out DIR] [--big GIB]

Run in bench/torch's venv (bench/torch/setup.sh). Without --big it writes
the folders test/train/diffusers.test reads (committed, so that `make test`
needs no torch; under 2 MB):

  DIR/tiny-sd3/                 the transformer in f32, in shards with
                                their diffusion_pytorch_model.safetensors.
                                index.json; the VAE in f16, one
                                diffusion_pytorch_model.safetensors
  DIR/tiny-sd3-velocity.safetensors
                                diffusers' transformer output on tiny-sd3's
                                weights: inputs x, timestep, prompt, pooled
                                and the output velocity (f32)

The configs are omnigen's `tiny` presets (sd3 and autoencoder_kl; the same
as sd3_reference.TINY and vae_reference.TINY); the weights are PyTorch's
default initialization under torch.manual_seed(0). model_index.json and
scheduler/ are what StableDiffusion3Pipeline.save_pretrained writes; the
text encoders and tokenizers are left out (null in model_index.json):
tools/encode-prompts makes its own.

With --big GIB it writes DIR/big-sd3/ instead: an SD3 transformer of about
GIB GiB of f32 weights in 500 MB shards plus the tiny VAE, for measuring
the peak memory of `omnirun --init-diffusers` (docs/performance.md); not
committed.
"""
import argparse
import os
import sys

import torch
from diffusers import (AutoencoderKL, FlowMatchEulerDiscreteScheduler,
                       SD3Transformer2DModel, StableDiffusion3Pipeline)
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from sd3_reference import TINY as SD3_TINY  # noqa: E402
from vae_reference import TINY as VAE_TINY  # noqa: E402


def pipeline_files(out, transformer, vae, shard=None):
    """The pipeline folder `out` with these components (no text side)."""
    scheduler = FlowMatchEulerDiscreteScheduler(shift=3.0)
    pipe = StableDiffusion3Pipeline(
        transformer=transformer, scheduler=scheduler, vae=vae,
        text_encoder=None, tokenizer=None, text_encoder_2=None,
        tokenizer_2=None, text_encoder_3=None, tokenizer_3=None)
    pipe.save_pretrained(out, safe_serialization=True)
    if shard:
        # Again, the transformer in shards (save_pretrained of the pipeline
        # does not pass max_shard_size on).
        tdir = os.path.join(out, "transformer")
        for f in os.listdir(tdir):
            if f.endswith(".safetensors"):
                os.remove(os.path.join(tdir, f))
        transformer.save_pretrained(tdir, max_shard_size=shard,
                                    safe_serialization=True)


def tiny(out):
    torch.manual_seed(0)
    transformer = SD3Transformer2DModel(**SD3_TINY).eval()
    vae = AutoencoderKL(**VAE_TINY).eval()
    pipeline_files(os.path.join(out, "tiny-sd3"), transformer,
                   vae.to(torch.float16), shard="400KB")

    # The velocity of the f32 weights on fixed inputs (batch 2, the tiny
    # preset's 8 text tokens).
    g = torch.Generator().manual_seed(1)
    c, s = SD3_TINY["in_channels"], SD3_TINY["sample_size"]
    x = torch.randn(2, c, s, s, generator=g)
    t = torch.rand(2, generator=g) * 1000
    prompt = torch.randn(2, 8, SD3_TINY["joint_attention_dim"], generator=g)
    pooled = torch.randn(2, SD3_TINY["pooled_projection_dim"], generator=g)
    with torch.no_grad():
        v = transformer(hidden_states=x, encoder_hidden_states=prompt,
                        pooled_projections=pooled, timestep=t).sample
    save_file({"x": x.contiguous(), "timestep": t.contiguous(),
               "prompt": prompt.contiguous(), "pooled": pooled.contiguous(),
               "velocity": v.contiguous()},
              os.path.join(out, "tiny-sd3-velocity.safetensors"))
    print("wrote", os.path.join(out, "tiny-sd3"),
          "and tiny-sd3-velocity.safetensors; max |v| =",
          float(v.abs().max()))


def big(out, gib):
    # SD3.5-medium's block width (24 heads of 64), as many layers as fit
    # the size: one layer is about 36 * 1536^2 = 85 M parameters (340 MB of
    # f32).
    layers = max(2, round(gib * 2**30 / 4 / 85e6))
    config = dict(SD3_TINY, num_layers=layers, attention_head_dim=64,
                  num_attention_heads=24, caption_projection_dim=1536,
                  joint_attention_dim=4096, pooled_projection_dim=2048,
                  dual_attention_layers=())
    torch.manual_seed(0)
    with torch.no_grad():
        transformer = SD3Transformer2DModel(**config).eval()
    vae = AutoencoderKL(**VAE_TINY).eval()
    pipeline_files(os.path.join(out, "big-sd3"), transformer, vae,
                   shard="500MB")
    n = sum(p.numel() for p in transformer.parameters())
    print("wrote", os.path.join(out, "big-sd3"), "with", layers, "layers,",
          n, "transformer parameters,", f"{n * 4 / 2**30:.2f} GiB f32")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=os.path.join(
        HERE, "..", "..", "test", "train", "Inputs", "diffusers"))
    p.add_argument("--big", type=float, default=None,
                   help="write big-sd3 of about this many GiB instead")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.big:
        big(args.out, args.big)
    else:
        tiny(args.out)


if __name__ == "__main__":
    main()
