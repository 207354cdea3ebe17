#!/usr/bin/env python3
"""What one call of each function of a step.bin moves and computes, per
phase, and the time that takes at a device's peaks: a floor.

  omnic --target=cuda train.mlir --emit=json > step.json
  step-traffic.py step.json [--function=train_step] [--peak-tflops=989]
                  [--peak-gbs=4800] [--launch-us=2] [--top=N]
                  [--attention=unfused|flash]

Counted from the step.bin alone (docs/performance.md, "A traffic model of
the iteration"), every loop body times its trip count:

- tensor FLOPs of the library calls: Matmul 2 M N K per batch entry,
  Attention 2 Sq Sk (D + Dv) per (batch, head), AttentionBackward 2.5
  times that (its five products of the unfused path), Conv2d 2 x output
  elements x the filter's C KH KW;
- bytes: a Dispatch reads its operands and writes its results once (the
  kernel's own scratch buffers, cuda only, once written and once read); a
  Copy reads and writes its bytes; a library call reads its operands and
  writes its result once;
- launches (cuda): each Dispatch's GPU launches, each Copy and each
  library call one;
- the cuda driver's attention (cuda only, `--attention`): its default,
  unfused path writes and reads the scores of each (batch, head) in
  global memory, 12 bytes per score forward (S in f32 written and read by
  the softmax, P in bf16 written and read by the second product) and 28
  backward (runtime/hal/drivers/cuda/CudaLibraries.cpp; f32 inputs 16 and
  40), in 3 and 7 launches per chunk of pairs; these bytes count as
  memory time. With `--attention=flash` (OMNI_CUDA_ATTENTION=flash, f16
  and bf16 with head dimension 64 or 128) the scores stay on chip, in 1
  and 2 launches.
- matmul epilogues (`--epilogues`): what fusing each Matmul with the
  Dispatch right after it that reads its product (a bias add, an
  activation, a residual add, a norm) into one cuBLASLt call could save
  at most: the product written by the matmul and read back by the
  kernel, and the kernel's launches. An upper bound: cuBLASLt's
  epilogues take only some such kernels (a column bias, an activation,
  an auxiliary output), and bf16 ones round differently (docs/precision.md).

The ideal time of a phase is L + M + K: L the library calls', each the
larger of its FLOPs / peak-tflops and its bytes / peak-gbs; M the other
commands' bytes / peak-gbs; K launches x launch-us. The commands of a
stream run one after another, and a kernel that rereads an operand (a row
kernel over a broadcast, a matmul reading its inputs several times) moves
more than this counts, so L + M is a floor for the measured time; K is an
estimate (what a launch costs inside a graph is for a GPU to say). The
model says where an iteration's time must go before a GPU measures where
it does go.
"""
import argparse
import collections
import json
import sys

DTYPE_BYTES = {"F32": 4, "F64": 8, "F16": 2, "BF16": 2, "I1": 1, "I32": 4,
               "I64": 8}


def product(xs):
    n = 1
    for x in xs:
        n *= x
    return n


# The cuda driver's unfused attention: its temporaries per chunk of
# (batch, head) pairs (kAttentionTempBytes in CudaLibraries.cpp).
ATTENTION_TEMP_BYTES = 1 << 30


class Model:
    def __init__(self, step, peak_flops, peak_bytes, attention="unfused"):
        self.peak_flops, self.peak_bytes = peak_flops, peak_bytes
        self.cuda = step.get("target", {}).get("kind") == "cuda"
        self.attention = attention
        self.tensors = step["tensors"]
        self.executables = step["executables"]
        self.phases = collections.OrderedDict()
        self.kernels = collections.Counter()

    def shape(self, t):
        return self.tensors[t]["shape"]

    def nbytes(self, t):
        tensor = self.tensors[t]
        return product(tensor["shape"]) * DTYPE_BYTES[tensor["dtype"]]

    def library_flops(self, call):
        lib, ops, result = call["library"], call["operands"], call["results"][0]
        if lib == "Matmul":
            lhs, out = self.shape(ops[0]), self.shape(result)
            k = lhs[-2] if call["int_attrs"][0] else lhs[-1]
            return 2 * product(out) * k
        if lib in ("Attention", "AttentionBackward"):
            q, k, v = (self.shape(t) for t in ops[:3])
            forward = 2 * product(q[:-1]) * k[-2] * (q[-1] + v[-1])
            return forward if lib == "Attention" else 2.5 * forward
        if lib == "Conv2d":
            return 2 * product(self.shape(result)) * product(self.shape(ops[1])[1:])
        return 0

    def attention_scores(self, call):
        """(bytes, launches) of the cuda driver's attention call beyond
        its operands and results, and beyond one launch."""
        lib, ops = call["library"], call["operands"]
        if not self.cuda or lib not in ("Attention", "AttentionBackward"):
            return 0, 0
        q, k = self.tensors[ops[0]], self.tensors[ops[1]]
        es = DTYPE_BYTES[q["dtype"]]
        forward = lib == "Attention"
        if (self.attention == "flash" and q["dtype"] in ("F16", "BF16")
                and q["shape"][-1] in (64, 128)):
            return 0, 0 if forward else 1
        pairs = product(q["shape"][:-2])
        square = q["shape"][-2] * k["shape"][-2]
        score_es = 8 if es == 8 else 4
        chunk = max(1, min(pairs, ATTENTION_TEMP_BYTES //
                           max(1, square * (score_es + es))))
        chunks = -(-pairs // chunk)
        if forward:
            per_score = 2 * score_es + 2 * es
            return pairs * square * per_score, 3 * chunks - 1
        per_score = 4 * score_es + 6 * es
        return pairs * square * per_score, 7 * chunks - 1

    def reads(self, dispatch, t):
        """Whether `dispatch` reads tensor t's bytes (t or a view of them:
        a reshape is a second tensor at the same place)."""
        where = lambda u: (self.tensors[u]["storage"], self.tensors[u]["index"])
        return any(where(u) == where(t) and self.nbytes(u) == self.nbytes(t)
                   for u in dispatch["operands"])

    def walk(self, commands, trips):
        for i, command in enumerate(commands):
            kind, a = command["kind_type"], command["kind"]
            if kind == "Loop":
                n = max(0, -(-(a["upper"] - a["lower"]) // a["step"]))
                self.walk(a["body"], trips * n)
                continue
            if kind not in ("Dispatch", "Copy", "LibraryCall", "Random"):
                continue
            p = self.phases.setdefault(command.get("phase", "-"),
                                       collections.Counter())
            if kind == "Dispatch":
                e = self.executables[a["executable"]]
                moved = sum(self.nbytes(t) for t in a["operands"] + a["results"])
                launches = 1
                gpu = e.get("gpu_kernels")
                if gpu:
                    k = gpu[a["kernel"]]
                    launches = len(k["launches"])
                    moved += 2 * sum(k["scratch"])
                p["bytes"] += trips * moved
                p["other_bytes"] += trips * moved
                p["launches"] += trips * launches
                p["dispatches"] += trips
                self.kernels[(e["kernels"][a["kernel"]], moved, launches,
                              command.get("phase", "-"))] += trips
            elif kind == "Copy":
                moved = a["bytes"] or self.nbytes(a["dest"])
                p["bytes"] += trips * 2 * moved
                p["other_bytes"] += trips * 2 * moved
                p["launches"] += trips
                p["copies"] += trips
            elif kind == "LibraryCall":
                flops = self.library_flops(a)
                moved = (sum(self.nbytes(t) for t in a["operands"])
                         + sum(self.nbytes(t) for t in a["results"]))
                p["flops"] += trips * flops
                p["bytes"] += trips * moved
                p["library_s"] += trips * max(flops / self.peak_flops,
                                              moved / self.peak_bytes)
                p["launches"] += trips
                p["library_calls"] += trips
                following = commands[i + 1] if i + 1 < len(commands) else {}
                if (a["library"] == "Matmul"
                        and following.get("kind_type") == "Dispatch"
                        and following.get("phase") == command.get("phase")
                        and self.reads(following["kind"], a["results"][0])):
                    d = following["kind"]
                    gpu = self.executables[d["executable"]].get("gpu_kernels")
                    p["epilogues"] += trips
                    p["epilogue_bytes"] += trips * 2 * self.nbytes(a["results"][0])
                    p["epilogue_launches"] += trips * (
                        len(gpu[d["kernel"]]["launches"]) if gpu else 1)
                scores, launches = self.attention_scores(a)
                p["bytes"] += trips * scores
                p["other_bytes"] += trips * scores
                p["scores_bytes"] += trips * scores
                p["launches"] += trips * launches
            else:  # Random
                moved = self.nbytes(a["result"])
                p["bytes"] += trips * moved
                p["other_bytes"] += trips * moved
                p["launches"] += trips


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step_json", help="omnic --emit=json output ('-': stdin)")
    parser.add_argument("--function", default=None,
                        help="one function (default: every function)")
    parser.add_argument("--peak-tflops", type=float, default=989.0)
    parser.add_argument("--peak-gbs", type=float, default=4800.0)
    parser.add_argument("--launch-us", type=float, default=2.0)
    parser.add_argument("--top", type=int, default=0,
                        help="also list the N fused kernels moving the most bytes")
    parser.add_argument("--attention", choices=("unfused", "flash"),
                        default="unfused",
                        help="the cuda driver's attention path "
                             "(OMNI_CUDA_ATTENTION; default unfused, as omnirun's)")
    parser.add_argument("--epilogues", action="store_true",
                        help="also say what fusing the marked matmul "
                             "epilogues into the matmuls could save at most")
    args = parser.parse_args()
    try:
        source = sys.stdin if args.step_json == "-" else open(args.step_json)
        with source:
            step = json.load(source)
        functions = step["functions"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        sys.exit(f"step-traffic.py: {args.step_json}: not omnic --emit=json "
                 f"output ({e})")
    names = [f["name"] for f in functions]
    if args.function is not None and args.function not in names:
        sys.exit(f"step-traffic.py: no function '{args.function}' in "
                 f"{args.step_json} (it has: {', '.join(names)})")
    print(f"peaks: {args.peak_tflops:g} TFLOP/s, {args.peak_gbs:g} GB/s, "
          f"{args.launch_us:g} us per launch")
    for function in functions:
        if args.function is not None and function["name"] != args.function:
            continue
        model = Model(step, args.peak_tflops * 1e12, args.peak_gbs * 1e9,
                      args.attention)
        model.walk(function["commands"], 1)
        print(f"@{function['name']}")
        total = collections.Counter()
        for phase, p in model.phases.items():
            total.update(p)
            report(phase, p, args)
        if len(model.phases) > 1:
            report("total", total, args)
        if total["scores_bytes"]:
            print(f"  the unfused attention's scores (in the bytes above): "
                  f"{si(total['scores_bytes'], 'B')}, "
                  f"{1e3 * total['scores_bytes'] / (args.peak_gbs * 1e9):.4g}"
                  f" ms")
        if args.top:
            print("  fused kernels moving the most bytes:")
            ranked = sorted(model.kernels.items(),
                            key=lambda kv: -kv[0][1] * kv[1])[:args.top]
            for (name, moved, launches, phase), n in ranked:
                print(f"    {name} ({phase}): {n} x {si(moved, 'B')}, "
                      f"{launches} launch(es) each")


def si(value, unit):
    """`value` with an SI prefix and 4 significant digits: 48.77 TFLOP."""
    for prefix in ("", "k", "M", "G", "T"):
        if abs(value) < 1000 or prefix == "T":
            return f"{value:.4g} {prefix}{unit}"
        value /= 1000


def report(phase, p, args):
    ms_bytes = lambda b: 1e3 * b / (args.peak_gbs * 1e9)
    ms_launches = lambda n: 1e3 * n * args.launch_us * 1e-6
    t_library = 1e3 * p["library_s"]
    t_bytes, t_launch = ms_bytes(p["other_bytes"]), ms_launches(p["launches"])
    print(f"  {phase}: {si(p['flops'], 'FLOP')}, {si(p['bytes'], 'B')}, "
          f"{p['launches']} launches ({p['dispatches']} dispatches, "
          f"{p['library_calls']} library calls, {p['copies']} copies); "
          f"ideal {t_library:.4g} + {t_bytes:.4g} + {t_launch:.4g} = "
          f"{t_library + t_bytes + t_launch:.4g} ms")
    if args.epilogues and p["epilogues"]:
        saved_bytes = ms_bytes(p["epilogue_bytes"])
        saved_launches = ms_launches(p["epilogue_launches"])
        print(f"    matmul epilogues: {p['epilogues']}; fused into the "
              f"matmuls they would save at most "
              f"{si(p['epilogue_bytes'], 'B')} and "
              f"{p['epilogue_launches']} launches: {saved_bytes:.4g} + "
              f"{saved_launches:.4g} = {saved_bytes + saved_launches:.4g} ms")


if __name__ == "__main__":
    main()
