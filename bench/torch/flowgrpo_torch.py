#!/usr/bin/env python3
"""One FlowGRPO training iteration in PyTorch + diffusers (issue 7 baseline).

The same work as omni's FlowGRPO recipe (docs/recipes.md, defaults of
`omnigen --list`), written the way flow_grpo users write it:

  rollout   P prompts x G samples, N Euler/SDE steps of SD3Transformer2DModel
            under torch.no_grad, SDE (flow_grpo's sde_step_with_logprob) only
            in a window of W steps whose start is drawn in [lo, hi - W];
            stores the latents and the window's log-probabilities
  decode    AutoencoderKL.decode(latents / scaling + shift), /2 + 0.5, clamp
  reward    jpeg_compressibility (PIL JPEG quality 95 as flow_grpo calls it:
            4:2:0, accurate DCT; -bytes / 5e5)
            and group advantages (global std, ddof 0, eps 1e-4)
  loss      for each window step: the velocity again (with grad), the
            log-probability of the stored next latent, the clipped GRPO loss
            (clip 1e-4, advantages clamped to 5), backward of loss / W
  update    clip_grad_norm_(1.0), AdamW (lr 1e-3, betas .9/.999, eps 1e-8,
            weight decay 1e-4)
  schedule  loss and update per mini-batch (opts mini_batch_size,
            micro_batch_size, inner_epochs; 0: the batch, the mini-batch):
            inner_epochs passes over contiguous mini-batches of the batch,
            in order, one optimizer step each; a mini-batch's gradient is
            accumulated over its micro-batches, backward of
            loss / (W * micro-batches) (docs/recipes.md section 3)

Models: omni's `sd3` presets `tiny` and `small` (random init) with the
`autoencoder_kl` `tiny` decoder (frozen); conditioning is synthetic text
embeddings [P, text_tokens, joint_attention_dim] and pooled [P, Dp].
--compile wraps the transformer in torch.compile (falls back to eager, with
a message, if that fails). Each iteration prints its time per phase; the
median over the iterations after --warmup is written to --json.

  bench/torch/.venv/bin/python bench/torch/flowgrpo_torch.py \
      --config tiny --iterations 7 [--compile] [--threads N] [--json FILE]
"""

import argparse
import io
import json
import math
import os
import random
import resource
import statistics
import sys
import time

import numpy as np
import torch
from diffusers import (AutoencoderKL, FlowMatchEulerDiscreteScheduler,
                       SD3Transformer2DModel)
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sd3_reference  # noqa: E402
import vae_reference  # noqa: E402

# omni's presets (`omnigen --list`): transformer config, text_tokens,
# latent_size, decoder config. `small` is `tiny` with the keys that differ.
SD3_SMALL = dict(sd3_reference.TINY, sample_size=32, attention_head_dim=32,
                 num_attention_heads=8, num_layers=6, joint_attention_dim=256,
                 caption_projection_dim=256, pooled_projection_dim=128,
                 pos_embed_max_size=32, dual_attention_layers=(0, 1, 2))
CONFIGS = {
    "tiny": dict(transformer=sd3_reference.TINY, text_tokens=8,
                 latent_size=16, vae=vae_reference.TINY),
    # the tiny decoder on 32x32 latents (omnigen --decoder-set=latent_size=32)
    "small": dict(transformer=SD3_SMALL, text_tokens=32, latent_size=32,
                  vae=dict(vae_reference.TINY, sample_size=64)),
}

# The recipe's options (omnigen --list defaults).
OPTS = dict(prompts=4, group_size=8, steps=10, shift=3.0, noise_level=0.7,
            window=2, window_lo=0, window_hi=5, adv_eps=1e-4, clip_range=1e-4,
            adv_clip_max=5.0, lr=1e-3, betas=(0.9, 0.999), adam_eps=1e-8,
            weight_decay=1e-4, max_grad_norm=1.0, mini_batch_size=0,
            micro_batch_size=0, inner_epochs=1)

PHASES = ("rollout", "decode", "reward", "loss", "update")


def sde_step_with_logprob(sigmas, v, x, i, noise_level, prev_sample=None,
                          noise=None):
    """flow_grpo's sde_step_with_logprob (docs/flowgrpo-math.md section 2, "sde"),
    with the integer step index i. Returns x', log_prob [B], mean, std_dev.
    `noise` replaces the randn_like draw (to replay another run's noise)."""
    v, x = v.float(), x.float()
    sigma, sigma_next = sigmas[i], sigmas[i + 1]
    dt = sigma_next - sigma
    denom = 1 - (sigmas[1] if sigma == 1 else sigma)
    std_dev = math.sqrt(sigma / denom) * noise_level
    mean = (x * (1 + std_dev**2 / (2 * sigma) * dt)
            + v * (1 + std_dev**2 * (1 - sigma) / (2 * sigma)) * dt)
    q = std_dev * math.sqrt(-dt)
    if prev_sample is None:
        e = torch.randn_like(mean) if noise is None else noise.float()
        prev_sample = mean + q * e
    lp = (-((prev_sample.detach() - mean) ** 2) / (2 * q * q)
          - math.log(q) - math.log(math.sqrt(2 * math.pi)))
    return prev_sample, lp.mean(dim=tuple(range(1, lp.ndim))), mean, std_dev


def jpeg_compressibility(images):
    """images [B, 3, H, W] in [0, 1] -> rewards [B] (-bytes / 500000)."""
    u8 = (images * 255).round().clamp(0, 255).to(torch.uint8)
    u8 = u8.permute(0, 2, 3, 1).numpy()
    rewards = []
    for img in u8:
        buf = io.BytesIO()
        Image.fromarray(img).save(buf, format="JPEG", quality=95)
        rewards.append(-buf.tell() / 500000)
    return torch.tensor(rewards, dtype=torch.float32)


def load_weights(module, state, what, unused=()):
    """Loads `state` (name -> array or tensor) into `module`; every
    parameter must be in it, except those starting with a prefix in
    `unused`, and nothing else."""
    state = {k: torch.as_tensor(v) for k, v in state.items()}
    missing, unexpected = module.load_state_dict(state, strict=False)
    params = dict(module.named_parameters())
    missing = [k for k in missing
               if k in params and not k.startswith(tuple(unused))]
    if missing or unexpected:
        raise ValueError(f"{what}: missing parameters {missing[:3]}, "
                         f"unknown names {unexpected[:3]}")


def group_advantages(rewards, group_size, eps):
    grouped = rewards.view(-1, group_size)
    mean = grouped.mean(dim=1, keepdim=True)
    std = rewards.std(unbiased=False)  # global std, ddof 0
    return ((grouped - mean) / (std + eps)).view(-1)


class FlowGrpo:
    """`opts` overrides keys of OPTS; `weights` = {"transformer": state dict,
    "vae": state dict} replaces the random initial weights (buffers the
    state dicts lack, e.g. pos_embed.pos_embed, keep their values)."""

    def __init__(self, config, compile_transformer, seed, opts=None,
                 weights=None):
        cfg = CONFIGS[config]
        torch.manual_seed(seed)
        random.seed(seed)
        self.cfg, self.o = cfg, dict(OPTS, **(opts or {}))
        o = self.o
        self.transformer = SD3Transformer2DModel(**cfg["transformer"]).train()
        self.vae = AutoencoderKL(**cfg["vae"]).eval().requires_grad_(False)
        for name, module in (("transformer", self.transformer),
                             ("vae", self.vae)):
            if weights and name in weights:
                # decoding uses neither the VAE's encoder nor quant_conv
                load_weights(module, weights[name], name,
                             unused=("encoder.", "quant_conv."))
        self.params = [p for p in self.transformer.parameters()]
        self.optimizer = torch.optim.AdamW(
            self.params, lr=o["lr"], betas=o["betas"],
            eps=o["adam_eps"], weight_decay=o["weight_decay"])
        sched = FlowMatchEulerDiscreteScheduler(shift=o["shift"])
        sched.set_timesteps(o["steps"])
        self.sigmas = [float(s) for s in sched.sigmas]
        self.timesteps = sched.timesteps.float()
        self.model = self.transformer
        self.compiled = False
        if compile_transformer:
            try:
                self.model = torch.compile(self.transformer)
                self.compiled = True
            except Exception as e:  # noqa: BLE001
                print(f"torch.compile failed ({type(e).__name__}: {e}); "
                      "running eager", file=sys.stderr)

    def decode_latents(self, x):
        """The pipeline's unscaling and vae.decode: images in [-1, 1]."""
        vc = self.vae.config
        return self.vae.decode(x / vc.scaling_factor + vc.shift_factor,
                               return_dict=False)[0]

    def velocity(self, x, i, prompt, pooled):
        t = self.timesteps[i].expand(x.shape[0])
        return self.model(hidden_states=x, timestep=t,
                          encoder_hidden_states=prompt,
                          pooled_projections=pooled,
                          return_dict=False)[0]

    def _velocity_or_eager(self, *args):
        try:
            return self.velocity(*args)
        except Exception as e:  # noqa: BLE001
            if not self.compiled:
                raise
            print(f"torch.compile failed at run time ({type(e).__name__}: "
                  f"{str(e).splitlines()[0] if str(e) else ''}); "
                  "running eager", file=sys.stderr)
            self.model, self.compiled = self.transformer, False
            return self.velocity(*args)

    def iteration(self, replay=None, reward_fn=jpeg_compressibility):
        """One iteration. `replay` (another run's random numbers, e.g. omni's
        @rollout_noise) holds prompt [P, L, D], pooled [P, Dp], x0 [B, C, H,
        W], noise [N, B, C, H, W] and window_start; with it the result also
        has `details` (images, rewards, advantages, log_probs). `reward_fn`
        maps images [B, 3, H, W] to rewards [B]."""
        o, cfg = self.o, self.cfg
        tc = cfg["transformer"]
        P, G, N, W = o["prompts"], o["group_size"], o["steps"], o["window"]
        B, S = P * G, cfg["latent_size"]
        times = {}
        clock = time.perf_counter()

        def lap(phase):
            nonlocal clock
            now = time.perf_counter()
            times[phase] = times.get(phase, 0.0) + now - clock
            clock = now

        if replay is None:
            prompt = torch.randn(P, cfg["text_tokens"],
                                 tc["joint_attention_dim"])
            pooled = torch.randn(P, tc["pooled_projection_dim"])
        else:
            prompt, pooled = replay["prompt"], replay["pooled"]
        prompt = prompt.repeat_interleave(G, dim=0)
        pooled = pooled.repeat_interleave(G, dim=0)
        if replay is None:
            start = random.randint(o["window_lo"], o["window_hi"] - W)
        else:
            start = int(replay["window_start"])
        window = range(start, start + W)

        # rollout
        self.transformer.eval()
        with torch.no_grad():
            if replay is None:
                x = torch.randn(B, tc["in_channels"], S, S)
            else:
                x = replay["x0"].float()
            latents, log_probs = [x], {}
            for i in range(N):
                v = self._velocity_or_eager(x, i, prompt, pooled)
                if i in window:
                    x, lp, _, _ = sde_step_with_logprob(
                        self.sigmas, v, x, i, o["noise_level"],
                        noise=None if replay is None else replay["noise"][i])
                    log_probs[i] = lp
                else:
                    x = x + v.float() * (self.sigmas[i + 1] - self.sigmas[i])
                latents.append(x)
        lap("rollout")

        # decode
        with torch.no_grad():
            images = (self.decode_latents(x) / 2 + 0.5).clamp(0, 1)
        lap("decode")

        # reward and advantages
        rewards = reward_fn(images)
        adv_raw = group_advantages(rewards, G, o["adv_eps"])
        adv = adv_raw.clamp(-o["adv_clip_max"], o["adv_clip_max"])
        lap("reward")

        # inner_epochs x (B / mini) optimizer steps over contiguous
        # mini-batches; each the loss over the window steps (flow_grpo:
        # backward per timestep) accumulated over micro-batches, then the
        # update. The ratio uses the rollout's log-probabilities.
        mini = o["mini_batch_size"] or B
        micro = o["micro_batch_size"] or mini
        parts = W * (mini // micro)
        steps = []
        for _ in range(o["inner_epochs"]):
            for first in range(0, B, mini):
                self.transformer.train()
                info = dict(loss=0.0, approx_kl=0.0, clipfrac=0.0)
                for m0 in range(first, first + mini, micro):
                    s = slice(m0, m0 + micro)
                    for i in window:
                        v = self._velocity_or_eager(latents[i][s], i,
                                                    prompt[s], pooled[s])
                        _, lp, _, _ = sde_step_with_logprob(
                            self.sigmas, v, latents[i][s], i,
                            o["noise_level"], prev_sample=latents[i + 1][s])
                        ratio = torch.exp(lp - log_probs[i][s])
                        eps = o["clip_range"]
                        unclipped = -adv[s] * ratio
                        clipped = -adv[s] * torch.clamp(ratio, 1 - eps,
                                                        1 + eps)
                        loss = torch.mean(torch.maximum(unclipped,
                                                        clipped)) / parts
                        loss.backward()
                        info["loss"] += loss.item()
                        d = (lp - log_probs[i][s]).detach()
                        info["approx_kl"] += (0.5 * torch.mean(d * d)
                                              ).item() / parts
                        info["clipfrac"] += torch.mean(
                            (torch.abs(ratio.detach() - 1) > eps).float()
                        ).item() / parts
                lap("loss")

                # update
                grad_norm = torch.nn.utils.clip_grad_norm_(
                    self.params, o["max_grad_norm"])
                self.optimizer.step()
                self.optimizer.zero_grad(set_to_none=True)
                info["grad_norm"] = grad_norm.item()
                steps.append(info)
                lap("update")
        # the metrics: means over the optimizer steps
        mean = {k: sum(st[k] for st in steps) / len(steps)
                for k in ("loss", "approx_kl", "clipfrac", "grad_norm")}
        result = dict(reward_mean=rewards.mean().item(),
                      reward_std=rewards.std(unbiased=False).item(),
                      advantage_mean=adv_raw.mean().item(),
                      window_start=start, optimizer_steps=len(steps),
                      per_step=steps, time_s=sum(times.values()),
                      phase_time_s=times, **mean)
        if replay is not None:
            result["details"] = dict(images=images, rewards=rewards,
                                     advantages=adv_raw, log_probs=log_probs)
        return result


def peak_rss_kib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", choices=sorted(CONFIGS), default="tiny")
    parser.add_argument("--iterations", type=int, default=7)
    parser.add_argument("--compile", action="store_true",
                        help="torch.compile the transformer")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--warmup", type=int, default=2,
                        help="iterations left out of the median (compile "
                        "and allocator warm-up; torch.compile recompiles "
                        "once in the second iteration)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", help="write the summary here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    import diffusers
    diffusers.utils.logging.set_verbosity_error()
    variant = "compile" if args.compile else "eager"
    print(f"torch {torch.__version__}, diffusers {diffusers.__version__}, "
          f"{args.threads} threads, config {args.config}, {variant}")

    rss_import = peak_rss_kib()
    run = FlowGrpo(args.config, args.compile, args.seed)
    n_params = sum(p.numel() for p in run.params)
    print(f"transformer: {n_params} parameters")
    results = []
    for k in range(args.iterations):
        r = run.iteration()
        results.append(r)
        ph = ", ".join(f"{p} {r['phase_time_s'][p]:.3g} s" for p in PHASES)
        print(f"iter {k + 1}/{args.iterations}  reward "
              f"{r['reward_mean']:.6g} ± {r['reward_std']:.3g}  loss "
              f"{r['loss']:.4g}  grad_norm {r['grad_norm']:.4g}  time "
              f"{r['time_s']:.3g} s ({ph})", flush=True)
    if run.compiled is False and args.compile:
        variant = "compile-fallback-eager"
    timed = results[args.warmup:] or results
    summary = dict(
        config=args.config, variant=variant, threads=args.threads,
        torch=torch.__version__, diffusers=diffusers.__version__,
        parameters=n_params, iterations=args.iterations,
        warmup=args.warmup, first_s=results[0]["time_s"],
        median_s=statistics.median(r["time_s"] for r in timed),
        phase_median_s={p: statistics.median(r["phase_time_s"][p]
                                             for r in timed) for p in PHASES},
        peak_rss_kib=peak_rss_kib(), rss_after_import_kib=rss_import)
    print(f"median {summary['median_s']:.4g} s/iteration over {len(timed)} "
          f"(first {summary['first_s']:.4g} s), peak RSS "
          f"{summary['peak_rss_kib'] / 1024:.0f} MiB")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f)


if __name__ == "__main__":
    main()
