#!/usr/bin/env python3
"""One full FlowGRPO iteration of Qwen-Image, omni vs PyTorch + diffusers.

The Qwen-Image counterpart of parity_iteration.py (issue 18). omni: the
recipe's training program for `omnigen --model=qwen_image --config=tiny`
with its default decoder, Qwen-Image's VAE (`autoencoder_kl_qwenimage`
tiny), P prompts x G samples, compiled by
omnic; omnirun writes the initial state (`--steps 0`), runs
@rollout_noise(seed, 0) and @train_step(state, seed, 0, prompts).
PyTorch: flowgrpo_torch.FlowGrpo's iteration with diffusers'
QwenImageTransformer2DModel in place of SD3's (the pipeline's
_pack_latents / _unpack_latents around it, timestep = sigma),
AutoencoderKLQwenImage decoding one frame after the pipeline's
`latents / (1 / std) + mean`, and the
schedule QwenImagePipeline sets: sigmas linspace(1, 1/N, N), mu =
calculate_shift(image_seq_len, 256, 8192, 0.5, 0.9) with Qwen/Qwen-Image's
scheduler config (exponential time shift, shift_terminal 0.02), loaded with
omni's initial weights and replaying omni's prompts, initial noise, step
noise and SDE window start. The reward is `brightness` (the mean pixel,
continuous, so the advantages follow the images; parity_iteration.py covers
the JPEG reward's encoders).

Compared, as parity_iteration.py: the sigmas, images, rewards, the metrics
(loss, reward_mean/std, advantage_mean (absolute), grad_norm), and per
tensor the gradient (adamw.m / (1 - beta1)), adamw.v and the new
parameters. Error = max |omni - torch| / max |torch|; exits 1 above
--tolerance (1e-4).

  bench/torch/.venv/bin/python bench/torch/qwen_parity_iteration.py \\
      [--build build] [--prompts 2] [--group-size 2] [--seed 7] [--work DIR]
"""

import argparse
import os
import shutil
import re
import subprocess
import sys
import tempfile

import numpy as np
from safetensors.numpy import load_file
import torch
from diffusers import (AutoencoderKLQwenImage,
                       FlowMatchEulerDiscreteScheduler, QwenImagePipeline,
                       QwenImageTransformer2DModel)
from diffusers.pipelines.qwenimage.pipeline_qwenimage import calculate_shift

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import flowgrpo_torch  # noqa: E402
import qwen_image_reference  # noqa: E402
import qwen_vae_reference  # noqa: E402
from parity import arg_names, run  # noqa: E402
from parity_iteration import rel, result_names  # noqa: E402

METRICS = ("loss", "approx_kl", "clipfrac", "kl", "reward_mean",
           "reward_std", "advantage_mean", "grad_norm", "skipped")
TEXT_TOKENS, LATENT_SIZE = 8, 16  # omni's qwen_image tiny preset

# Qwen/Qwen-Image scheduler/scheduler_config.json.
QWEN_SCHEDULER = dict(base_image_seq_len=256, base_shift=0.5,
                      invert_sigmas=False, max_image_seq_len=8192,
                      max_shift=0.9, num_train_timesteps=1000, shift=1.0,
                      shift_terminal=0.02, stochastic_sampling=False,
                      time_shift_type="exponential", use_beta_sigmas=False,
                      use_dynamic_shifting=True, use_exponential_sigmas=False,
                      use_karras_sigmas=False)


def qwen_sigmas(steps, image_seq_len):
    """QwenImagePipeline's sigmas and timesteps (its __call__, step 4)."""
    sched = FlowMatchEulerDiscreteScheduler(**QWEN_SCHEDULER)
    c = sched.config
    mu = calculate_shift(image_seq_len, c.base_image_seq_len,
                         c.max_image_seq_len, c.base_shift, c.max_shift)
    sched.set_timesteps(sigmas=np.linspace(1.0, 1 / steps, steps), mu=mu)
    return [float(s) for s in sched.sigmas], sched.timesteps.float()


class QwenFlowGrpo(flowgrpo_torch.FlowGrpo):
    """flowgrpo_torch.FlowGrpo with Qwen-Image's transformer and schedule;
    `pooled` is unused (the model takes no pooled text)."""

    def __init__(self, seed, opts, weights):
        torch.manual_seed(seed)
        self.o = dict(flowgrpo_torch.OPTS, **opts)
        tc = dict(qwen_image_reference.TINY, in_channels=16)  # NCHW latents
        self.cfg = dict(transformer=tc, text_tokens=TEXT_TOKENS,
                        latent_size=LATENT_SIZE, vae=qwen_vae_reference.TINY)
        self.transformer = QwenImageTransformer2DModel(
            **qwen_image_reference.TINY).train()
        self.vae = AutoencoderKLQwenImage(**qwen_vae_reference.TINY).eval()
        self.vae.requires_grad_(False)
        flowgrpo_torch.load_weights(self.transformer, weights["transformer"],
                                    "transformer")
        # A single frame reads neither the encoder nor the upsample3d
        # blocks' time_conv (qwen_vae_reference.py checks it).
        time_conv = tuple(k for k in self.vae.state_dict()
                          if ".time_conv." in k)
        flowgrpo_torch.load_weights(
            self.vae, weights["vae"], "vae",
            unused=("encoder.", "quant_conv.") + time_conv)
        self.params = list(self.transformer.parameters())
        o = self.o
        self.optimizer = torch.optim.AdamW(
            self.params, lr=o["lr"], betas=o["betas"], eps=o["adam_eps"],
            weight_decay=o["weight_decay"])
        self.sigmas, self.timesteps = qwen_sigmas(
            o["steps"], (LATENT_SIZE // 2) ** 2)
        self.model, self.compiled = self.transformer, False

    def decode_latents(self, x):
        """QwenImagePipeline: latents / (1 / std) + mean per channel, one
        frame through vae.decode, frame 0 of the result."""
        vc = self.vae.config
        mean = torch.tensor(vc.latents_mean).view(1, vc.z_dim, 1, 1, 1)
        inv_std = 1.0 / torch.tensor(vc.latents_std).view(1, vc.z_dim, 1, 1,
                                                          1)
        z = x[:, :, None] / inv_std + mean
        return self.vae.decode(z, return_dict=False)[0][:, :, 0]

    def velocity(self, x, i, prompt, pooled):
        b, c, hh, ww = x.shape
        packed = QwenImagePipeline._pack_latents(x, b, c, hh, ww)
        t = self.timesteps[i].expand(b) / 1000
        out = self.model(hidden_states=packed, encoder_hidden_states=prompt,
                         encoder_hidden_states_mask=None, timestep=t,
                         img_shapes=[(1, hh // 2, ww // 2)] * b,
                         return_dict=False)[0]
        scale = qwen_image_reference.VAE_SCALE
        return QwenImagePipeline._unpack_latents(
            out, hh * scale, ww * scale, scale)[:, :, 0]


def brightness(images):
    """omnirun's `brightness` reward: the mean of each image's values."""
    return images.double().mean(dim=(1, 2, 3)).float()


def run_omni(args, work, state_names):
    omnirun = os.path.join(args.build, "bin", "omnirun")
    step = os.path.join(work, "step.bin")
    init_dir = os.path.join(work, "init")
    shutil.rmtree(init_dir, ignore_errors=True)  # a kept --work's last run
    run([omnirun, step, "--steps=0", f"--seed={args.seed}",
         f"--out={init_dir}"])
    init = os.path.join(init_dir, "step-0.safetensors")
    x0, noise, ws, prompt, mask, images = (
        os.path.join(work, n + ".npy") for n in
        ("x0", "noise", "window_start", "prompt", "mask", "images"))
    run([omnirun, step, "--function=rollout_noise", f"--input=i64={args.seed}",
         "--input=i64=0", f"--output=@{x0}", f"--output=@{noise}",
         f"--output=@{ws}"])
    rng = np.random.default_rng(args.seed)
    np.save(prompt, rng.standard_normal(
        (args.prompts, TEXT_TOKENS,
         qwen_image_reference.TINY["joint_attention_dim"])).astype(np.float32))
    # prompt_embeds_mask: every token valid (the reference takes no mask).
    np.save(mask, np.ones((args.prompts, TEXT_TOKENS), dtype=np.float32))
    # The runtime hyper-parameters at the defaults step.bin records
    # (omnirun --list prints them by name), in the recipe's input order
    # (docs/recipes.md section 11).
    listed = subprocess.run([omnirun, step, "--list"], capture_output=True,
                            text=True, check=True).stdout
    defaults = dict(re.findall(r"^hparam '(\w+)': default (\S+),", listed,
                               re.M))
    hparams = [f"--input=f64={defaults[n]}" for n in
               ("lr", "weight_decay", "beta1", "beta2", "adam_eps",
                "max_grad_norm", "beta", "clip_range", "adv_clip_max",
                "noise_level", "guidance_scale")]
    metric_files = [os.path.join(work, f"m.{m}.npy") for m in METRICS]
    state1 = os.path.join(work, "state-1.safetensors")
    run([omnirun, step, "--function=train_step", f"--state-in={init}",
         f"--state-out={state1}", f"--input=i64={args.seed}", "--input=i64=0",
         f"--input=@{prompt}", f"--input=@{mask}"] + hparams
        + [f"--output=@{f}" for f in metric_files + [images]])
    s0, s1 = load_file(init), load_file(state1)
    return dict(s0={n: s0[n] for n in state_names},
                s1={n: s1[n] for n in state_names},
                metrics={m: float(np.load(f))
                         for m, f in zip(METRICS, metric_files)},
                images=np.load(images), x0=np.load(x0), noise=np.load(noise),
                window_start=int(np.load(ws)), prompt=np.load(prompt))


def compare(args, work):
    tol = args.tolerance
    bin_ = os.path.join(args.build, "bin")
    mlir, step_bin = (os.path.join(work, n) for n in ("train.mlir",
                                                      "step.bin"))
    old_mlir = open(mlir).read() if os.path.exists(step_bin) else None
    run([os.path.join(bin_, "omnigen"), "--model=qwen_image", "--config=tiny",
         f"--opt=prompts_per_iteration={args.prompts}",
         f"--opt=group_size={args.group_size}", "--opt=reward=brightness",
         "-o", mlir])
    if old_mlir is not None and open(mlir).read() == old_mlir:
        print(f"reusing {step_bin} (compiled from the same train.mlir)")
    else:
        run([os.path.join(bin_, "omnic"), mlir, "-o", step_bin])
    names = arg_names(mlir, "train_step")
    state_names = names[:names.index("seed")]
    if result_names(mlir, "init_state") != state_names:
        sys.exit("@init_state's results and @train_step's state differ")
    om = run_omni(args, work, state_names)
    s0, s1, m = om["s0"], om["s1"], om["metrics"]

    weights = {pre: {n[len(pre) + 1:]: v for n, v in s0.items()
                     if n.startswith(pre + ".")}
               for pre in ("transformer", "vae")}
    tr = QwenFlowGrpo(args.seed, dict(prompts=args.prompts,
                                      group_size=args.group_size), weights)
    o = tr.o
    replay = dict(prompt=torch.from_numpy(om["prompt"]),
                  pooled=torch.zeros(args.prompts, 1),
                  x0=torch.from_numpy(om["x0"]),
                  noise=torch.from_numpy(om["noise"]),
                  window_start=om["window_start"])
    old = {n: p.detach().clone() for n, p in
           tr.transformer.named_parameters()}
    res = tr.iteration(replay=replay, reward_fn=brightness)
    det = res["details"]
    print(f"omni vs torch {torch.__version__}: qwen_image tiny + "
          f"autoencoder_kl_qwenimage tiny, {args.prompts} prompts x {args.group_size}, "
          f"seed {args.seed}, window start {om['window_start']}, "
          f"{len(state_names)} state tensors; sigmas "
          f"{[round(s, 4) for s in tr.sigmas]}")
    ok = True

    def row(what, err, limit=tol, extra=""):
        nonlocal ok
        good = err <= limit
        ok &= good
        print(f"  {what:52s} {err:9.2e}  {'ok' if good else 'FAIL'}{extra}")

    # The schedule: omni's folded flow_schedule vs the pipeline's.
    got = re.search(r"omni\.flow_schedule dynamic_shift steps = \d+ "
                    r"\{([^}]*)\}", open(mlir).read())
    row("flow_schedule is dynamic_shift (image_seq_len 64)",
        0.0 if got and "image_seq_len = 64" in got.group(1) else 1.0, 0)
    print("rollout, reward, metrics (relative error):")
    row("images", rel(om["images"], det["images"].numpy()))
    row("rewards", rel(brightness(torch.from_numpy(om["images"])).numpy(),
                       det["rewards"].numpy()))
    for k in ("loss", "reward_mean", "reward_std", "grad_norm",
              "advantage_mean"):
        v = res[k]
        if k == "advantage_mean":
            err, how = abs(m[k] - v), " (absolute)"
        else:
            err, how = abs(m[k] - v) / max(abs(v), 1e-30), ""
        print(f"    {k}: omni {m[k]:.8g}  torch {v:.8g}")
        row(f"{k}{how}", err)
    for k in ("approx_kl", "clipfrac", "kl", "skipped"):
        row(f"{k} (omni, absolute; 0 on policy)", abs(m[k]),
            limit=1e-8 if k == "approx_kl" else 0)
    row("adamw.step (omni - 1)", abs(int(s1["adamw.step"]) - 1), limit=0)

    b1 = o["betas"][0]
    tables = {k: [] for k in ("gradient", "adamw.v", "parameter", "update")}
    for n, prm in tr.transformer.named_parameters():
        key = "transformer." + n
        st = tr.optimizer.state.get(prm)
        if not st:
            # no gradient in torch: the parameter takes no part in the loss
            g_o = float(np.abs(s1["adamw.m." + key]).max())
            row(f"{key}: no torch gradient, max |omni adamw.m|", g_o, 0)
            continue
        tables["gradient"].append(
            (rel(s1["adamw.m." + key] / (1 - b1),
                 st["exp_avg"].numpy() / (1 - b1)), key))
        tables["adamw.v"].append((rel(s1["adamw.v." + key],
                                      st["exp_avg_sq"].numpy()), key))
        # AdamW's first step moves a parameter by about lr g / (|g| + eps):
        # where |g| is near eps (1e-8) a tiny gradient difference changes
        # the update by up to 2 lr, so the parameters are compared where
        # |g| > 100 eps (all elements and the tiny-g count shown), and the
        # update (new - old) / lr as parity_iteration.py does.
        g_t = st["exp_avg"].numpy() / (1 - b1)
        big = np.abs(g_t) > 100 * o["adam_eps"]
        p_t, p_o = prm.detach().numpy(), s1[key]
        scale = max(float(np.abs(p_t).max()), 1e-30)
        diff = np.abs(p_o - p_t)
        tables["parameter"].append(
            (float(diff[big].max()) / scale if big.any() else 0.0, key,
             f"  (all {float(diff.max()) / scale:.2e}; "
             f"{int((~big).sum())} tiny g)"))
        du = np.abs((p_o - s0[key]) - (p_t - old[n].numpy())) / o["lr"]
        # new - old is rounded to the float32 parameter: one ulp of the
        # largest parameter, in units of lr, is added to the limit (1.2e-4
        # for a norm weight near 1 at lr 1e-3)
        ulp = float(np.spacing(np.float32(scale))) / o["lr"]
        tables["update"].append(
            (float(du[big].max()) if big.any() else 0.0, key,
             f"  (all {float(du.max()):.2e}; limit {tol + ulp:.2e})",
             tol + ulp))
        if np.array_equal(s1[key], s0[key]) and not np.array_equal(
                prm.detach().numpy(), old[n].numpy()):
            row(f"{key} moved in torch only", 1.0, limit=0)
    for k, rows in tables.items():
        rows.sort(key=lambda r: -r[0])
        what = ("(new - old) / lr, max |diff| where |g| > 100 eps"
                if k == "update" else "max|diff| / max|torch|"
                + (" where |g| > 100 eps" if k == "parameter" else ""))
        print(f"{k}, {what}: {len(rows)} tensors, worst {args.show}:")
        lim = lambda r: r[3] if len(r) > 3 else tol  # noqa: E731
        rows.sort(key=lambda r: -r[0] / lim(r))
        for r in rows[:args.show]:
            row(r[1], r[0], limit=lim(r), extra=r[2] if len(r) > 2 else "")
        bad = sum(r[0] > lim(r) for r in rows[args.show:])
        if bad:
            ok = False
            print(f"  ... and {bad} more above {tol:g}")
    print("PASS" if ok else "FAIL", f"(tolerance {tol:g})")
    return 0 if ok else 1


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=os.path.join(HERE, "..", "..", "build"))
    p.add_argument("--prompts", type=int, default=2)
    p.add_argument("--group-size", type=int, default=2)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--tolerance", type=float, default=1e-4)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--work", help="keep the files here (default: a "
                   "temporary folder)")
    p.add_argument("--show", type=int, default=6,
                   help="tensors listed per table (the worst first)")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    import diffusers
    diffusers.utils.logging.set_verbosity_error()
    if args.work:
        os.makedirs(args.work, exist_ok=True)
        return compare(args, args.work)
    with tempfile.TemporaryDirectory() as work:
        return compare(args, work)


if __name__ == "__main__":
    sys.exit(main())
