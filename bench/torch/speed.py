#!/usr/bin/env python3
"""omni vs PyTorch on one FlowGRPO iteration, same CPU, same run (issue 7).

For each config (omni's `sd3` presets with the `autoencoder_kl` tiny
decoder; `small` on 32x32 latents):
  (a) omnigen + omnic: omnic's wall time and peak memory (GNU time);
  (b) omnirun --steps K: seconds per iteration (time_s of metrics.jsonl,
      median over the iterations after --warmup) and per phase, peak memory;
  (c) flowgrpo_torch.py eager and with torch.compile(transformer): the same
      medians and peak memory (GNU time around the subprocess);
  (d) a table with the ratios omnirun/eager and omnirun/compile (< 1: omni
      is faster), and the per-phase times side by side.
Also the omnic compile of the SD3.5-Medium program of
bench/compile-scale.sh (about a minute; --skip-sd35 leaves it out).

Run with the venv of setup.sh (the torch script runs with the same python):
  bench/torch/setup.sh
  bench/torch/.venv/bin/python bench/torch/speed.py \
      [--configs tiny,small] [--iterations 7] [--threads N] [--skip-sd35]
"""

import argparse
import json
import os
import shutil
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
PHASES = ("rollout", "decode", "reward", "loss", "update")

OMNIGEN_FLAGS = {
    "tiny": ["--model=sd3", "--config=tiny"],
    # small: every activation saved (no recomputed forward in the loss),
    # the loss accumulated over 4 micro-batches of 8 so that what is saved
    # is a quarter of the batch's (docs/recipes.md, `recompute`;
    # docs/performance.md "CPU speed (issue 15): third pass"). The same
    # loss and gradient as the whole batch's, summed in another order.
    "small": ["--model=sd3", "--config=small",
              "--decoder-set=latent_size=32", "--opt=recompute=none",
              "--opt=micro_batch_size=8"],
    # bench/compile-scale.sh's default program
    "sd3.5-medium": ["--model=sd3", "--config=sd3.5-medium",
                     "--set=latent_size=64", "--decoder=autoencoder_kl",
                     "--decoder-config=sd3", "--opt=prompts_per_iteration=1",
                     "--opt=group_size=2"],
}


def timed(cmd, log):
    """Runs cmd under GNU time; returns (wall s, peak KiB). Output -> log."""
    marker = "@@time"
    full = ["/usr/bin/time", "-f", f"{marker} %e %M"] + cmd
    with open(log, "w") as f:
        f.write(" ".join(cmd) + "\n")
        f.flush()
        proc = subprocess.run(full, stdout=f, stderr=subprocess.STDOUT,
                              cwd=ROOT)
    text = open(log).read()
    if proc.returncode != 0:
        sys.exit(f"speed.py: failed ({proc.returncode}): {' '.join(cmd)}\n"
                 f"{text[-3000:]}")
    m = re.findall(rf"^{marker} ([\d.]+) (\d+)$", text, re.M)
    return float(m[-1][0]), int(m[-1][1])


def check_configs(bindir):
    """The torch script's presets must equal `omnigen --list`'s."""
    import flowgrpo_torch
    out = subprocess.run([os.path.join(bindir, "omnigen"), "--list"],
                         capture_output=True, text=True, check=True).stdout
    section, listed = None, {}
    for line in out.splitlines():
        if not line.startswith(" "):
            section = line.split(" ")[0]
            continue
        m = re.match(r"\s+config (\S+): (.*)", line)
        if m:
            listed[(section, m.group(1))] = dict(
                kv.split("=", 1) for kv in m.group(2).split())
    for name, cfg in flowgrpo_torch.CONFIGS.items():
        want = listed[("sd3", name)]
        have = dict(cfg["transformer"], text_tokens=cfg["text_tokens"],
                    latent_size=cfg["latent_size"])
        for key, value in want.items():
            v = have.get(key)
            v = ",".join(map(str, v)) if isinstance(v, tuple) else str(v)
            if v != value:
                sys.exit(f"speed.py: torch config {name}: {key} = {v}, "
                         f"omnigen --list says {value}")
        vae = listed[("autoencoder_kl", "tiny")]
        got = ",".join(map(str, cfg["vae"]["block_out_channels"]))
        if got != vae["block_out_channels"]:
            sys.exit(f"speed.py: torch vae differs from autoencoder_kl tiny")


def omnic(bindir, name, work):
    mlir = os.path.join(work, f"{name}.mlir")
    step = os.path.join(work, f"{name}.bin")
    subprocess.run([os.path.join(bindir, "omnigen")] + OMNIGEN_FLAGS[name]
                   + ["-o", mlir], check=True, cwd=ROOT)
    wall, kib = timed([os.path.join(bindir, "omnic"), mlir, "-o", step],
                      os.path.join(work, f"{name}.omnic.log"))
    print(f"omnic {name}: {wall:.1f} s, peak {kib / 1024:.0f} MiB "
          f"(train.mlir {os.path.getsize(mlir) / 1e6:.2f} MB, step.bin "
          f"{os.path.getsize(step) / 1e6:.2f} MB)", flush=True)
    return step, dict(omnic_s=wall, omnic_kib=kib)


def omnirun(bindir, name, step, args, work):
    out = os.path.join(work, f"{name}.run")
    shutil.rmtree(out, ignore_errors=True)  # a kept --keep folder's last run
    wall, kib = timed([os.path.join(bindir, "omnirun"), step, "--steps",
                       str(args.iterations), "--seed", "7", "--out", out,
                       f"--threads={args.threads}"],
                      os.path.join(work, f"{name}.omnirun.log"))
    with open(os.path.join(out, "metrics.jsonl")) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    rows = rows[args.warmup:] or rows
    med = statistics.median(r["time_s"] for r in rows)
    phases = {p: statistics.median(r["phase_time_s"].get(p, 0.0)
                                   for r in rows) for p in PHASES}
    print(f"omnirun {name}: {med:.4g} s/iteration, peak {kib / 1024:.0f} "
          f"MiB", flush=True)
    return dict(s=med, kib=kib, phases=phases)


def torch_run(name, compiled, args, work):
    variant = "compile" if compiled else "eager"
    js = os.path.join(work, f"{name}.{variant}.json")
    cmd = [sys.executable, os.path.join(HERE, "flowgrpo_torch.py"),
           "--config", name, "--iterations", str(args.iterations),
           "--warmup", str(args.warmup), "--threads", str(args.threads),
           "--json", js] + (["--compile"] if compiled else [])
    log = os.path.join(work, f"{name}.{variant}.log")
    # a fresh inductor cache, so the first iteration is a cold compile
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(work, "inductor",
                                                         name)
    wall, kib = timed(cmd, log)
    with open(js) as f:
        r = json.load(f)
    if r["variant"] != variant:
        print(f"torch {name} {variant}: fell back to eager, see {log}")
    print(f"torch {name} {r['variant']}: {r['median_s']:.4g} s/iteration "
          f"(first {r['first_s']:.3g} s), peak {kib / 1024:.0f} MiB",
          flush=True)
    return dict(s=r["median_s"], kib=kib, phases=r["phase_median_s"],
                first=r["first_s"], variant=r["variant"],
                import_kib=r["rss_after_import_kib"],
                versions=f"torch {r['torch']}, diffusers {r['diffusers']}")


# "torch import MiB": the torch process's peak RSS right after importing
# torch and diffusers, before any model exists (part of every torch peak).
def mib(kib):
    return f"{kib / 1024:.0f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--configs", default="tiny,small")
    parser.add_argument("--iterations", type=int, default=7)
    parser.add_argument("--warmup", type=int, default=2,
                        help="iterations left out of each median")
    parser.add_argument("--threads", type=int, default=os.cpu_count())
    parser.add_argument("--bin", default=os.path.join(ROOT, "build", "bin"))
    parser.add_argument("--skip-sd35", action="store_true",
                        help="leave out the SD3.5-Medium compile")
    parser.add_argument("--skip-compile", action="store_true",
                        help="leave out the torch.compile variant")
    parser.add_argument("--keep", help="keep the work files in this folder")
    args = parser.parse_args()
    configs = [c for c in args.configs.split(",") if c]
    sys.path.insert(0, HERE)
    check_configs(args.bin)
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
        work = args.keep
    else:
        tmp = tempfile.TemporaryDirectory(prefix="omni-speed-")
        work = tmp.name
    cpu = next((line.split(":", 1)[1].strip()
                for line in open("/proc/cpuinfo")
                if line.startswith("model name")), "?")
    print(f"{os.cpu_count()} cores ({cpu}), {args.threads} threads, "
          f"{args.iterations} iterations, median after {args.warmup}",
          flush=True)

    res = {}
    for name in configs:
        step, r = omnic(args.bin, name, work)
        r["omnirun"] = omnirun(args.bin, name, step, args, work)
        r["eager"] = torch_run(name, False, args, work)
        if not args.skip_compile:
            r["compile"] = torch_run(name, True, args, work)
        res[name] = r
    sd35 = None
    if not args.skip_sd35:
        _, sd35 = omnic(args.bin, "sd3.5-medium", work)

    versions = next(iter(res.values()))["eager"]["versions"] if res else ""
    print(f"\n## FlowGRPO iteration, omnirun vs PyTorch ({versions}; "
          f"{args.threads} threads; s/iteration, median of "
          f"{args.iterations - args.warmup}; peak RSS MiB)\n")
    cols = ["config", "omnic s", "omnic MiB", "omnirun s", "omnirun MiB",
            "eager s", "eager MiB", "torch import MiB"]
    if not args.skip_compile:
        cols += ["compile s", "compile MiB", "compile 1st it s"]
    cols += ["omnirun/eager"] + ([] if args.skip_compile
                                 else ["omnirun/compile"])
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for name, r in res.items():
        o, e = r["omnirun"], r["eager"]
        row = [name, f"{r['omnic_s']:.1f}", mib(r["omnic_kib"]),
               f"{o['s']:.3f}", mib(o["kib"]), f"{e['s']:.3f}", mib(e["kib"]),
               mib(e["import_kib"])]
        if not args.skip_compile:
            c = r["compile"]
            row += [f"{c['s']:.3f}", mib(c["kib"]), f"{c['first']:.1f}"]
        row += [f"{o['s'] / e['s']:.2f}"]
        if not args.skip_compile:
            row += [f"{o['s'] / r['compile']['s']:.2f}"]
        print("| " + " | ".join(row) + " |")
    if sd35:
        print(f"| sd3.5-medium (compile only) | {sd35['omnic_s']:.1f} | "
              f"{mib(sd35['omnic_kib'])} |" + " |" * (len(cols) - 3))

    print("\n## Per phase (s/iteration, medians)\n")
    variants = ["omnirun", "eager"] + ([] if args.skip_compile
                                       else ["compile"])
    print("| config | phase | " + " | ".join(variants)
          + " | omnirun/eager |")
    print("|" + "---|" * (3 + len(variants)))
    for name, r in res.items():
        for p in PHASES:
            vals = [r[v]["phases"][p] for v in variants]
            ratio = vals[0] / vals[1] if vals[1] > 0 else float("nan")
            print(f"| {name} | {p} | "
                  + " | ".join(f"{x:.4f}" for x in vals)
                  + f" | {ratio:.2f} |")
    if args.keep:
        print(f"\nlogs and metrics: {work}")


if __name__ == "__main__":
    main()
