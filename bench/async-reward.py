#!/usr/bin/env python3
"""The reward overlapping the rollout, measured (docs/rewards.md section 5).

Trains the tiny recipe against examples/reward-server/server.py, whose
answers wait a fixed time per image (--delay-per-image, a stand-in for a
scoring model whose time grows with the batch), once compiled with
rollout_chunks=1 and once with rollout_chunks=C. With C chunks the reward of
chunk k runs (on the executor's worker thread, docs/backend.md
"Asynchronous host calls") while chunk k+1 is sampled, so up to (C-1)/C of
the reward's time leaves the iteration, as far as the rollout is long
enough to hide it. Prints the median iteration time (metrics.jsonl time_s,
the first iteration left out) of each and the ratios chunked / unchunked,
run pair by pair (A B A B ...) so that a drifting machine affects both
alike; and checks that the first iteration's rewards agree (the compiled
chunked program equals the unchunked one up to float32 rounding,
FlowGrpoTest.cpp).

  bench/async-reward.py [--build build] [--chunks 2] [--steps 6]
                        [--pairs 3] [--delay-per-image 0.02] [--threads N]

Needs Pillow for the server (/usr/bin/python3's, python3-pil) and
omnigen, omnic, omnirun in BUILD/bin. Not a test: nothing here is asserted about time.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd, **kw):
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, **kw)


def iteration_times(metrics):
    rows = [json.loads(line) for line in open(metrics) if line.strip()]
    return rows, [r["time_s"] for r in rows[1:]]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--chunks", type=int, default=2)
    ap.add_argument("--steps", type=int, default=6,
                    help="training iterations per run (the first is left "
                    "out of the median)")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--delay-per-image", type=float, default=0.02)
    ap.add_argument("--threads", type=int, default=0,
                    help="omnirun --threads (0: its default)")
    ap.add_argument("--opt", action="append", default=[],
                    help="more omnigen --opt=KEY=VALUE for both programs")
    ap.add_argument("--programs", nargs=2, metavar=("ONE.bin", "C.bin"),
                    help="use these compiled programs (rollout_chunks=1 and "
                    "=C) instead of compiling them")
    a = ap.parse_args()
    bin_dir = os.path.join(a.build, "bin")
    work = tempfile.mkdtemp(prefix="async-reward.")
    programs = {}
    if a.programs:
        programs = {1: a.programs[0], a.chunks: a.programs[1]}
    for chunks in () if a.programs else (1, a.chunks):
        mlir = os.path.join(work, f"tiny-c{chunks}.mlir")
        opts = [f"--opt={o}" for o in a.opt + [f"rollout_chunks={chunks}"]]
        run([os.path.join(bin_dir, "omnigen"), *opts, "-o", mlir])
        programs[chunks] = os.path.join(work, f"tiny-c{chunks}.bin")
        run([os.path.join(bin_dir, "omnic"), mlir, "-o", programs[chunks]])

    port_file = os.path.join(work, "port")
    # Debian's python3 has Pillow (python3-pil); one earlier on PATH may not.
    python = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) \
        else sys.executable
    server = subprocess.Popen(
        [python, os.path.join(ROOT, "examples/reward-server/server.py"),
         "--port", "0", "--port-file", port_file,
         "--delay-per-image", str(a.delay_per_image)],
        stdout=subprocess.DEVNULL)
    try:
        for _ in range(200):
            if os.path.exists(port_file) or server.poll() is not None:
                break
            time.sleep(0.05)
        if not os.path.exists(port_file):
            sys.exit("async-reward: the reward server did not start "
                     "(does this python3 have Pillow?)")
        port = open(port_file).read().strip()
        medians = {1: [], a.chunks: []}
        rewards = {}
        for pair in range(a.pairs):
            for chunks in (1, a.chunks):
                out = os.path.join(work, f"run-c{chunks}-{pair}")
                cmd = [os.path.join(bin_dir, "omnirun"), programs[chunks],
                       "--steps", str(a.steps), "--seed", "3", "--out", out,
                       "--reward", f"http://127.0.0.1:{port}"]
                if a.threads:
                    cmd += ["--threads", str(a.threads)]
                run(cmd)
                rows, times = iteration_times(
                    os.path.join(out, "metrics.jsonl"))
                medians[chunks].append(statistics.median(times))
                rewards[chunks] = [(r["reward_mean"], r["reward_std"])
                                   for r in rows]
                reward_s = statistics.median(r["reward_time_s"]
                                             for r in rows[1:])
                print(f"pair {pair}: rollout_chunks={chunks}: median "
                      f"iteration {medians[chunks][-1]:.3f} s (reward calls "
                      f"{reward_s:.3f} s of it, overlapped or not)",
                      flush=True)
    finally:
        server.terminate()
        server.wait()
    ratios = [c / u for u, c in zip(medians[1], medians[a.chunks])]
    print(f"rollout_chunks={a.chunks} / rollout_chunks=1 iteration time: "
          f"median {statistics.median(ratios):.3f} "
          f"(min {min(ratios):.3f}, max {max(ratios):.3f}, {a.pairs} pairs, "
          f"{a.delay_per_image} s per image at the server)")
    # The compiled chunked program equals the unchunked one up to float32
    # rounding (FlowGrpoTest.cpp), which the JPEG rewards of later
    # iterations can amplify: the first iteration's must agree closely.
    (m1, _), (m2, _) = rewards[1][0], rewards[a.chunks][0]
    rel = abs(m1 - m2) / max(abs(m1), 1e-30)
    print(f"iteration 0 reward_mean: {m1} vs {m2} (relative {rel:.2g})")
    return 0 if rel < 1e-4 else 1


if __name__ == "__main__":
    sys.exit(main())
