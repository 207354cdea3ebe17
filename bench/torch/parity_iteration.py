#!/usr/bin/env python3
"""One full FlowGRPO iteration, omni vs PyTorch + diffusers (issue 7).

omni: the recipe's training program (omnigen, tiny sd3 + tiny
autoencoder_kl, P prompts x G samples), compiled by omnic; omnirun writes
the initial state (`--steps 0 --out DIR`: @init_state(seed) as
step-0.safetensors) and runs @rollout_noise(seed, 0) and
@train_step(state, seed, 0, prompts). PyTorch: flowgrpo_torch.FlowGrpo loaded with the same initial
weights (state `transformer.X` / `vae.X`), replaying the same prompts,
initial noise, step noise and SDE window start. Compared:

  images          the rollout's decoded images
  rewards         jpeg_compressibility of both image sets, encoded with
                  Pillow as flow_grpo does; omni's reward_mean/std must
                  equal those of Pillow's bytes of omni's images, and the
                  system libturbojpeg called through ctypes exactly as
                  omnirun calls it (TJFLAG_ACCURATEDCT) must give Pillow's
                  byte counts; if torch's images encode to other byte
                  counts than omni's, the torch side uses omni's (said so)
  metrics         loss, reward_mean/std, advantage_mean, grad_norm (and
                  approx_kl, clipfrac, kl, skipped: 0 on policy)
  gradient        adamw.m / (1 - beta1): the clipped gradient, per tensor
                  (with several optimizer steps: adamw.m itself)
  parameters      new parameters, per tensor; and the update (new - old) in
                  units of lr: AdamW's first step moves a parameter by about
                  lr * g / (|g| + eps), so where |g| is near eps (1e-8) a
                  tiny gradient difference changes the update by up to 2 lr
                  (reported, and only counted when the gradient there is
                  not tiny)
  adamw.v         per tensor

Error = max |omni - torch| / max |torch| per tensor (or |diff| / |torch| per
scalar metric). Prints a table (the worst tensors) and exits 1 when one is
above --tolerance (default 1e-4).

Mini-batches (docs/recipes.md section 3): --mini-batch-size,
--micro-batch-size and --inner-epochs go to omnigen and to the PyTorch
schedule (flowgrpo_torch: contiguous mini-batches in order, gradient
accumulation over micro-batches); then the iteration takes several
optimizer steps, from the second on off-policy: approx_kl, clipfrac and
the loss (means over the optimizer steps, as grad_norm) are compared with
torch's, and adamw.step must be the number of steps. --clip-range sets
clip_range in both.

  bench/torch/.venv/bin/python bench/torch/parity_iteration.py \\
      [--build build] [--prompts 2] [--group-size 2] [--seed 7] [--work DIR]
      [--mini-batch-size M] [--micro-batch-size U] [--inner-epochs E]
      [--clip-range C]
"""

import argparse
import ctypes
import ctypes.util
import io
import os
import shutil
import re
import subprocess
import sys
import tempfile

import numpy as np
from safetensors.numpy import load_file
import torch
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import flowgrpo_torch  # noqa: E402
from parity import arg_names, run  # noqa: E402

METRICS = ("loss", "approx_kl", "clipfrac", "kl", "reward_mean",
           "reward_std", "advantage_mean", "grad_norm", "skipped")


def result_names(mlir_path, function):
    """omni.name of each result of `function`, in order."""
    for line in open(mlir_path):
        if f"func.func @{function}(" in line:
            return re.findall(r'omni\.name = "([^"]+)"',
                              line[line.rindex(") -> ") + 5:])
    sys.exit(f"{mlir_path}: no @{function}")


def to_u8_hwc(images):
    """u8 = clamp(round-half-even(255 x)) in HWC order, as the reward."""
    u8 = np.clip(np.round(np.asarray(images, np.float32) * 255), 0, 255)
    return np.ascontiguousarray(u8.astype(np.uint8).transpose(0, 2, 3, 1))


def jpeg_bytes_pil(images):
    """JPEG byte counts (quality 95, 4:2:0) with Pillow, as
    flowgrpo_torch.jpeg_compressibility encodes."""
    counts = []
    for img in to_u8_hwc(images):
        buf = io.BytesIO()
        Image.fromarray(img).save(buf, format="JPEG", quality=95)
        counts.append(buf.tell())
    return np.array(counts)


def jpeg_bytes_turbo(images):
    """JPEG byte counts with the system TurboJPEG, exactly as omnirun's
    jpeg rewards call it (runtime/train/rewards/Rewards.cpp: tjCompress2,
    TJPF_RGB, TJSAMP_420, quality 95, TJFLAG_ACCURATEDCT); None without the
    library."""
    try:
        tj = ctypes.CDLL(ctypes.util.find_library("turbojpeg")
                         or "libturbojpeg.so.0")
    except OSError:
        return None
    tj.tjInitCompress.restype = ctypes.c_void_p
    tj.tjCompress2.argtypes = [
        ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int,
        ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_void_p),
        ctypes.POINTER(ctypes.c_ulong), ctypes.c_int, ctypes.c_int,
        ctypes.c_int]
    tj.tjFree.argtypes = [ctypes.c_void_p]
    tj.tjDestroy.argtypes = [ctypes.c_void_p]
    handle = tj.tjInitCompress()
    counts = []
    try:
        for img in to_u8_hwc(images):
            buf, size = ctypes.c_void_p(), ctypes.c_ulong(0)
            h, w = img.shape[:2]
            rc = tj.tjCompress2(handle, img.ctypes.data, w, 0, h,
                                0,  # TJPF_RGB
                                ctypes.byref(buf), ctypes.byref(size),
                                2,  # TJSAMP_420
                                95,
                                4096)  # TJFLAG_ACCURATEDCT
            if buf:
                tj.tjFree(buf)
            if rc != 0:
                sys.exit("tjCompress2 failed")
            counts.append(size.value)
    finally:
        tj.tjDestroy(handle)
    return np.array(counts)


def rel(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.max(np.abs(got - want)) /
                 max(float(np.max(np.abs(want))), 1e-30))


def run_omni(args, work, state_names):
    """Runs omni's iteration; returns (state0, state1, metrics, images,
    x0, noise, window_start), arrays keyed by state name."""
    bin_ = os.path.join(args.build, "bin")
    omnirun = os.path.join(bin_, "omnirun")
    step = os.path.join(work, "step.bin")
    files = lambda tag: [os.path.join(work, f"{tag}.{i}.npy")  # noqa: E731
                         for i in range(len(state_names))]
    s0, s1 = files("s0"), files("s1")
    # The initial weights as omnirun writes them: `--steps 0 --out DIR`
    # saves the state after @init_state as DIR/step-0.safetensors.
    init_dir = os.path.join(work, "init")
    shutil.rmtree(init_dir, ignore_errors=True)  # a kept --work's last run
    run([omnirun, step, "--steps=0", f"--seed={args.seed}",
         f"--out={init_dir}"])
    initial = load_file(os.path.join(init_dir, "step-0.safetensors"))
    for n, f in zip(state_names, s0):
        np.save(f, initial[n])
    x0, noise, ws = (os.path.join(work, n + ".npy")
                     for n in ("x0", "noise", "window_start"))
    run([omnirun, step, "--function=rollout_noise", f"--input=i64={args.seed}",
         "--input=i64=0", f"--output=@{x0}", f"--output=@{noise}",
         f"--output=@{ws}"])
    prompt, pooled = (os.path.join(work, n + ".npy")
                      for n in ("prompt", "pooled"))
    rng = np.random.default_rng(args.seed)
    tc = flowgrpo_torch.CONFIGS["tiny"]["transformer"]
    np.save(prompt, rng.standard_normal(
        (args.prompts, 8, tc["joint_attention_dim"])).astype(np.float32))
    np.save(pooled, rng.standard_normal(
        (args.prompts, tc["pooled_projection_dim"])).astype(np.float32))
    metric_files = [os.path.join(work, f"m.{m}.npy") for m in METRICS]
    images = os.path.join(work, "images.npy")
    # The state stays in the program's state slots (omni-resident-state):
    # @train_step takes seed, iteration and the prompts; the state goes in
    # and out as safetensors files.
    state1 = os.path.join(work, "state-1.safetensors")
    # Then the runtime hyper-parameters (docs/recipes.md section 11), in the
    # recipe's order, at the defaults step.bin records (omnirun --list).
    listed = subprocess.run([omnirun, step, "--list"], capture_output=True,
                            text=True, check=True).stdout
    defaults = dict(re.findall(r"^hparam '(\w+)': default (\S+),", listed,
                               re.M))
    hparams = [f"--input=f64={defaults[n]}" for n in
               ("lr", "weight_decay", "beta1", "beta2", "adam_eps",
                "max_grad_norm", "beta", "clip_range", "adv_clip_max",
                "noise_level", "guidance_scale")]
    run([omnirun, step, "--function=train_step",
         f"--state-in={os.path.join(init_dir, 'step-0.safetensors')}",
         f"--state-out={state1}",
         f"--input=i64={args.seed}", "--input=i64=0", f"--input=@{prompt}",
         f"--input=@{pooled}"] + hparams
        + [f"--output=@{f}" for f in metric_files + [images]])
    after = load_file(state1)
    for n, f in zip(state_names, s1):
        np.save(f, after[n])
    load = lambda fs: {n: np.load(f)  # noqa: E731
                       for n, f in zip(state_names, fs)}
    return dict(s0=load(s0), s1=load(s1),
                metrics={m: float(np.load(f))
                         for m, f in zip(METRICS, metric_files)},
                images=np.load(images), x0=np.load(x0),
                noise=np.load(noise), window_start=int(np.load(ws)),
                prompt=np.load(prompt), pooled=np.load(pooled))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--build", default=os.path.join(HERE, "..", "..", "build"))
    p.add_argument("--prompts", type=int, default=2)
    p.add_argument("--group-size", type=int, default=2)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--mini-batch-size", type=int, default=0,
                   help="samples per optimizer step (0: the batch)")
    p.add_argument("--micro-batch-size", type=int, default=0,
                   help="samples per gradient pass (0: the mini-batch)")
    p.add_argument("--inner-epochs", type=int, default=1)
    p.add_argument("--clip-range", type=float,
                   default=flowgrpo_torch.OPTS["clip_range"])
    p.add_argument("--tolerance", type=float, default=1e-4)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--work", help="keep the files here (default: a "
                   "temporary folder)")
    p.add_argument("--show", type=int, default=8,
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


def compare(args, work):
    tol = args.tolerance
    bin_ = os.path.join(args.build, "bin")
    mlir = os.path.join(work, "train.mlir")
    step_bin = os.path.join(work, "step.bin")
    # A kept --work folder whose step.bin was compiled from the same
    # train.mlir is reused (omnic takes minutes on a loaded machine).
    old_mlir = open(mlir).read() if os.path.exists(step_bin) else None
    run([os.path.join(bin_, "omnigen"), "--model=sd3", "--config=tiny",
         "--decoder=autoencoder_kl", "--decoder-config=tiny",
         f"--opt=prompts_per_iteration={args.prompts}",
         f"--opt=group_size={args.group_size}",
         f"--opt=mini_batch_size={args.mini_batch_size}",
         f"--opt=micro_batch_size={args.micro_batch_size}",
         f"--opt=inner_epochs={args.inner_epochs}",
         f"--opt=clip_range={args.clip_range!r}", "-o", mlir])
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

    # PyTorch, on omni's initial weights and random numbers.
    weights = {pre: {n[len(pre) + 1:]: v for n, v in s0.items()
                     if n.startswith(pre + ".")}
               for pre in ("transformer", "vae")}
    o = flowgrpo_torch.OPTS
    tr = flowgrpo_torch.FlowGrpo(
        "tiny", False, args.seed, weights=weights,
        opts=dict(prompts=args.prompts, group_size=args.group_size,
                  mini_batch_size=args.mini_batch_size,
                  micro_batch_size=args.micro_batch_size,
                  inner_epochs=args.inner_epochs,
                  clip_range=args.clip_range))
    # flow_grpo encodes with Pillow; omnirun calls the system TurboJPEG with
    # the accurate DCT, which must give Pillow's byte counts.
    notes = []
    encode = jpeg_bytes_pil
    omni_bytes = encode(om["images"])
    turbo_bytes = jpeg_bytes_turbo(om["images"])
    if turbo_bytes is None:
        notes.append("no libturbojpeg here: omnirun's encoder not cross-checked")
    torch_bytes = []

    def reward_fn(images):
        got = encode(images.numpy())
        torch_bytes.append(got)
        if not np.array_equal(got, omni_bytes):
            notes.append(f"JPEG bytes of torch's images {got.tolist()} != "
                         f"omni's images' {omni_bytes.tolist()}: the torch "
                         "side uses omni's images' rewards")
            got = omni_bytes
        return torch.tensor(-got / 500000, dtype=torch.float32)

    replay = dict(prompt=torch.from_numpy(om["prompt"]),
                  pooled=torch.from_numpy(om["pooled"]),
                  x0=torch.from_numpy(om["x0"]),
                  noise=torch.from_numpy(om["noise"]),
                  window_start=om["window_start"])
    old = {n: p.detach().clone() for n, p in
           tr.transformer.named_parameters()}
    res = tr.iteration(replay=replay, reward_fn=reward_fn)
    det = res["details"]
    n_steps = res["optimizer_steps"]
    print(f"omni vs torch {torch.__version__}: sd3 tiny + autoencoder_kl "
          f"tiny, {args.prompts} prompts x {args.group_size}, seed "
          f"{args.seed}, window start {om['window_start']}, "
          f"{len(state_names)} state tensors; mini-batch "
          f"{args.mini_batch_size or 'batch'}, micro-batch "
          f"{args.micro_batch_size or 'mini-batch'}, {args.inner_epochs} "
          f"inner epoch(s): {n_steps} optimizer step(s), clip_range "
          f"{args.clip_range:g}")
    ok = True

    def row(what, err, limit=tol, extra=""):
        nonlocal ok
        good = err <= limit
        ok &= good
        print(f"  {what:52s} {err:9.2e}  {'ok' if good else 'FAIL'}{extra}")

    print("rollout, reward, metrics (relative error):")
    row("images", rel(om["images"], det["images"].numpy()))
    # omni's reward_mean/std vs the bytes of omni's images here
    r_o = (-omni_bytes / 500000).astype(np.float32)
    enc = max(abs(m["reward_mean"] - r_o.mean()) / abs(r_o.mean()),
              abs(m["reward_std"] - r_o.std()) / max(r_o.std(), 1e-30))
    row(f"reward mean/std: omni vs {encode.__name__}, omni images", enc,
        extra=f"  (bytes {omni_bytes.tolist()})")
    if turbo_bytes is not None:
        row("JPEG bytes: system TurboJPEG vs Pillow, omni images",
            float(np.max(np.abs(turbo_bytes - omni_bytes))), limit=0,
            extra=f"  (TurboJPEG {turbo_bytes.tolist()})")
    for n in notes:
        print(f"  note: {n}")
    row("rewards (torch images, same encoder)",
        rel(det["rewards"].numpy(), r_o))
    want = dict(loss=res["loss"], reward_mean=res["reward_mean"],
                reward_std=res["reward_std"],
                advantage_mean=res["advantage_mean"],
                grad_norm=res["grad_norm"])
    if n_steps > 1:
        want["approx_kl"] = res["approx_kl"]
    adv = det["advantages"].clamp(-o["adv_clip_max"], o["adv_clip_max"])
    # Off-policy the loss is a mean of terms -A r of size |A| that nearly
    # cancel (mean A = 0): its error is taken relative to mean |clamp(A)|,
    # the size of the terms.
    term = adv.abs().mean().item()
    for k, v in want.items():
        # advantage_mean is about 0: absolute error
        if k == "advantage_mean":
            err, how = abs(m[k] - v), " (absolute)"
        elif k == "loss" and n_steps > 1:
            err, how = abs(m[k] - v) / max(term, 1e-30), " (/ mean |clamp(A)|)"
        else:
            err, how = abs(m[k] - v) / max(abs(v), 1e-30), ""
        print(f"    {k}: omni {m[k]:.8g}  torch {v:.8g}")
        row(f"{k}{how}", err)
    if n_steps == 1:
        want_loss = -adv.mean().item()
        print(f"    on-policy loss -mean(clamp(A)) = {want_loss:.8g}; "
              f"advantages "
              f"{[round(a, 6) for a in det['advantages'].tolist()]}")
        for k in ("approx_kl", "clipfrac", "kl", "skipped"):
            row(f"{k} (omni, absolute; 0 on policy)", abs(m[k]),
                limit=1e-8 if k == "approx_kl" else 0)
    else:
        # clipfrac counts samples: a ratio at the clip boundary could
        # flip, so it is compared absolutely (one flip moves it by
        # 1 / (steps x W x mini-batch))
        print(f"    clipfrac: omni {m['clipfrac']:.8g}  torch "
              f"{res['clipfrac']:.8g}; per optimizer step (torch): "
              + ", ".join(f"approx_kl {st['approx_kl']:.3g} clipfrac "
                          f"{st['clipfrac']:.3g}" for st in res["per_step"]))
        row("clipfrac (absolute)", abs(m["clipfrac"] - res["clipfrac"]))
        row("approx_kl > 0 and clipfrac > 0 (omni)",
            0.0 if m["approx_kl"] > 0 and m["clipfrac"] > 0 else 1.0,
            limit=0)
        for k in ("kl", "skipped"):
            row(f"{k} (omni, absolute; 0)", abs(m[k]), limit=0)
    row(f"adamw.step (omni - {n_steps})",
        abs(int(s1["adamw.step"]) - n_steps), limit=0)

    # Per tensor: gradient (adamw.m / (1 - beta1)), adamw.v, parameters,
    # update in units of lr.
    b1, lr = o["betas"][0], o["lr"]
    opt_state = tr.optimizer.state
    tables = {k: [] for k in ("gradient", "adamw.v", "parameter", "update")}
    untouched = []
    for n, prm in tr.transformer.named_parameters():
        key = "transformer." + n
        st = opt_state[prm]
        # one step: m = (1 - beta1) g; several: m itself
        unit = (1 - b1) if n_steps == 1 else 1.0
        g_t = st["exp_avg"].numpy() / unit
        g_o = s1["adamw.m." + key] / unit
        tables["gradient"].append((rel(g_o, g_t), key))
        tables["adamw.v"].append((rel(s1["adamw.v." + key],
                                      st["exp_avg_sq"].numpy()), key))
        p_t, p_o = prm.detach().numpy(), s1[key]
        tables["parameter"].append((rel(p_o, p_t), key))
        d_t = p_t - old[n].numpy()
        d_o = p_o - s0[key]
        du = np.abs(d_o - d_t) / lr
        # elements whose gradient is not tiny (|g| > 100 adam_eps): there
        # the update is about -lr sign(g), insensitive to rounding
        big = np.abs(g_t) > 100 * o["adam_eps"]
        tables["update"].append(
            (float(du[big].max()) if big.any() else 0.0, key,
             float(du.max()), int((~big).sum())))
        if np.array_equal(p_o, s0[key]):
            untouched.append(key)
    for key in state_names:
        if key.startswith("vae.") and not np.array_equal(s0[key], s1[key]):
            row(f"{key} changed (frozen)", 1.0, limit=0)
    if untouched:
        print(f"  note: omni left {len(untouched)} parameters unchanged: "
              f"{untouched[:3]}")
    titles = dict(
        gradient=("gradient = adamw.m / (1 - beta1), max|diff| / max|torch|"
                  if n_steps == 1 else
                  "adamw.m (after several steps), max|diff| / max|torch|"),
        **{"adamw.v": "adamw.v, max|diff| / max|torch|"},
        parameter="new parameters, max|diff| / max|torch|",
        update="update (new - old) / lr, max |diff| where |g| is not tiny "
        "(all elements; elements with tiny g)")
    for k, rows in tables.items():
        rows.sort(key=lambda r: -r[0])
        print(f"{titles[k]}: {len(rows)} tensors, worst {args.show}:")
        for r in rows[:args.show]:
            extra = (f"  ({r[2]:.2e}; {r[3]})" if k == "update" else "")
            row(r[1], r[0], extra=extra)
        bad = sum(r[0] > tol for r in rows[args.show:])
        if bad:
            ok = False
            print(f"  ... and {bad} more above {tol:g}")
    print("PASS" if ok else "FAIL", f"(tolerance {tol:g})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
