#!/usr/bin/env python3
"""Checks a folder `omnirun --export` wrote against its checkpoint.

usage: check_export.py [--ema] DIR CHECKPOINT

The rules (docs/export.md), stated independently of omnirun:
- DIR/transformer/diffusion_pytorch_model.safetensors holds exactly the
  checkpoint's transformer.X that are not LoRA adapters, named X, f32,
  equal bit for bit to transformer.X (with --ema: to ema.transformer.X
  where the checkpoint has one);
- DIR/pytorch_lora_weights.safetensors (when the checkpoint has adapters
  transformer.M.lora_A.weight / lora_B.weight) holds exactly those, under
  the same names, bit for bit (with --ema: their EMA);
- DIR/vae/diffusion_pytorch_model.safetensors (when present) holds exactly
  the checkpoint's vae.X, named X, bit for bit;
- every config.json and model_index.json is JSON.
Prints the files, the configs (one sorted key=value line each), the
adapter metadata and one line per weight file; exits 1 on any violation.
Pure Python (struct + json), as the test machines have no numpy.
"""
import json
import os
import struct
import sys


def read(path):
    """name -> (dtype, shape, bytes), and the __metadata__ map."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    metadata = header.pop("__metadata__", {})
    tensors = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        tensors[name] = (info["dtype"], info["shape"], body[begin:end])
    return tensors, metadata


def config_line(path):
    with open(path) as f:
        config = json.load(f)
    return " ".join("%s=%s" % (k, json.dumps(config[k], sort_keys=True))
                    for k in sorted(config))


def check(what, got, want):
    """`got` must be exactly `want` (name -> (dtype, shape, bytes))."""
    ok = True
    if sorted(got) != sorted(want):
        print("%s: names differ: extra %s, missing %s" % (
            what, sorted(set(got) - set(want)), sorted(set(want) - set(got))))
        ok = False
    for name in sorted(set(got) & set(want)):
        if got[name][0] != "F32":
            print("%s: %s is %s, expected F32" % (what, name, got[name][0]))
            ok = False
        elif got[name] != want[name]:
            print("%s: %s differs from the checkpoint's" % (what, name))
            ok = False
    print("%s: %d tensors, %s" % (what, len(got), "equal to the checkpoint's "
                                  "bit for bit" if ok else "WRONG"))
    return ok


def is_adapter(name):
    return ".lora_A." in name or ".lora_B." in name


def main():
    args = sys.argv[1:]
    ema = "--ema" in args
    args = [a for a in args if a != "--ema"]
    folder, ckpt_path = args
    ckpt, _ = read(ckpt_path)
    files = []
    for root, _, names in os.walk(folder):
        for name in names:
            files.append(os.path.relpath(os.path.join(root, name), folder))
    print("files: " + " ".join(sorted(files)))
    for name in sorted(files):
        if name.endswith(".json"):
            print("%s: %s" % (name, config_line(os.path.join(folder, name))))

    def source(key):
        if ema and "ema.transformer." + key in ckpt:
            return ckpt["ema.transformer." + key]
        return ckpt["transformer." + key]

    keys = [k[len("transformer."):] for k in ckpt
            if k.startswith("transformer.")]
    ok = True
    got, _ = read(os.path.join(folder, "transformer",
                               "diffusion_pytorch_model.safetensors"))
    ok &= check("transformer", got,
                {k: source(k) for k in keys if not is_adapter(k)})
    adapters = {"transformer." + k: source(k) for k in keys if is_adapter(k)}
    lora_file = os.path.join(folder, "pytorch_lora_weights.safetensors")
    if os.path.exists(lora_file):
        got, metadata = read(lora_file)
        config = json.loads(metadata["lora_adapter_metadata"])
        print("lora metadata: format=%s r=%s lora_alpha=%s target_modules=%d" %
              (metadata.get("format"), config["transformer.r"],
               config["transformer.lora_alpha"],
               len(config["transformer.target_modules"])))
        ok &= check("lora", got, adapters)
    vae_file = os.path.join(folder, "vae", "diffusion_pytorch_model.safetensors")
    if os.path.exists(vae_file):
        got, _ = read(vae_file)
        ok &= check("vae", got, {k[len("vae."):]: v for k, v in ckpt.items()
                                 if k.startswith("vae.")})
    print("export ok" if ok else "export WRONG")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
