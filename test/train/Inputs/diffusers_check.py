#!/usr/bin/env python3
"""Checks and edits for test/train/diffusers.test (diffusers folders).

usage:
  diffusers_check.py state CKPT DIR
      every tensor of DIR/transformer and DIR/vae (but the buffers and the
      VAE encoder omnirun skips) equals the checkpoint's transformer.X /
      vae.X bit for bit, f16 and bf16 widened to f32, and the checkpoint
      has no other transformer.* or vae.* parameter; so do its ref.* and
      ema.* copies where it has them
  diffusers_check.py velocity MLIR STEP CKPT FIXTURE OMNIRUN WORK TOL
      runs @velocity of STEP (omnigen --program=velocity) on FIXTURE's x,
      timestep, prompt and pooled with the checkpoint's weights and
      compares with FIXTURE's velocity (diffusers' output):
      max |omni - diffusers| / max |diffusers| <= TOL
  diffusers_check.py drop FILE NAME          remove tensor NAME
  diffusers_check.py reshape FILE NAME D,D   give tensor NAME another shape
                                             of as many elements
  diffusers_check.py nan FILE NAME           element 0 of NAME becomes NaN
  diffusers_check.py json-del FILE KEY [SUBKEY]   delete a key
  diffusers_check.py json-set FILE KEY VALUE      set a key to a JSON value

Pure Python (struct + json): the test machines have no numpy or torch.
"""
import json
import math
import os
import re
import struct
import subprocess
import sys

SIZES = {"F32": 4, "F16": 2, "BF16": 2, "F64": 8, "I64": 8, "I32": 4}
SKIP = {"transformer": ["pos_embed.pos_embed"],
        "vae": ["encoder.", "quant_conv."]}


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    meta = header.pop("__metadata__", None)
    tensors = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        tensors[name] = (e["dtype"], e["shape"], body[b:end])
    return tensors, meta


def write(path, tensors, meta=None):
    header, body, offset = {}, b"", 0
    if meta:
        header["__metadata__"] = meta
    for name in sorted(tensors):
        dtype, shape, data = tensors[name]
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        body += data
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + body)


def as_f32_bytes(dtype, data):
    if dtype == "F32":
        return data
    if dtype == "F16":
        n = len(data) // 2
        return struct.pack(f"<{n}f", *struct.unpack(f"<{n}e", data))
    if dtype == "BF16":
        n = len(data) // 2
        return b"".join(b"\0\0" + data[2 * i:2 * i + 2] for i in range(n))
    sys.exit(f"dtype {dtype} not handled")


def folder_tensors(sub):
    index = os.path.join(sub, "diffusion_pytorch_model.safetensors.index.json")
    files = ([os.path.join(sub, s) for s in
              sorted(set(json.load(open(index))["weight_map"].values()))]
             if os.path.exists(index) else
             [os.path.join(sub, "diffusion_pytorch_model.safetensors")])
    out = {}
    for f in files:
        out.update(read(f)[0])
    return out, len(files)


def state(ckpt, folder):
    have, _ = read(ckpt)
    ok = True
    for part in ("transformer", "vae"):
        tensors, nfiles = folder_tensors(os.path.join(folder, part))
        compared = copies = 0
        for name, (dtype, shape, data) in sorted(tensors.items()):
            if any(name == s or (s.endswith(".") and name.startswith(s))
                   for s in SKIP[part]):
                continue
            key = f"{part}.{name}"
            if key not in have:
                print(f"{key}: not in the checkpoint")
                ok = False
                continue
            for k in (key, "ref." + key, "ema." + key):
                if k not in have:
                    continue
                cdtype, cshape, cdata = have[k]
                if cdtype != "F32" or cshape != shape or \
                        cdata != as_f32_bytes(dtype, data):
                    print(f"{k}: differs ({cdtype}{cshape} vs {dtype}{shape})")
                    ok = False
                copies += k != key
            compared += 1
        extra = [k for k in have if k.startswith(part + ".")
                 and k[len(part) + 1:] not in tensors]
        for k in extra:
            print(f"{k}: in the checkpoint, not in the folder")
            ok = False
        dtypes = sorted({t[0] for t in tensors.values()})
        print(f"{part}: {compared} tensors ({'/'.join(dtypes)}, {nfiles} "
              f"file{'s' if nfiles > 1 else ''}) equal the checkpoint's"
              f" (and {copies} copies, ref./ema.)")
    print("same as the folder" if ok else "DIFFERENT")
    return 0 if ok else 1


def save_npy(path, shape, f32):
    header = ("{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }"
              % "".join(f"{d}, " for d in shape))
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)))
        f.write(header.encode() + f32)


def load_npy(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<H", data[8:10])
    header = data[10:10 + n].decode()
    assert "'<f4'" in header, header
    body = data[10 + n:]
    return struct.unpack(f"<{len(body) // 4}f", body)


def velocity(mlir, step, ckpt, fixture, omnirun, work, tol):
    text = open(mlir).read()
    m = re.search(r"func\.func @velocity\((.*?)\)\s*->", text, re.S)
    names = re.findall(r'omni\.name = "([^"]+)"', m.group(1))
    fix, _ = read(fixture)
    have, _ = read(ckpt)
    cmd = [omnirun, step, "--function=velocity"]
    for i, name in enumerate(names):
        dtype, shape, data = fix[name] if name in fix else have[name]
        path = os.path.join(work, f"in{i}.npy")
        save_npy(path, shape, as_f32_bytes(dtype, data))
        cmd.append(f"--input=@{path}")
    out = os.path.join(work, "velocity.npy")
    cmd.append(f"--output=@{out}")
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        sys.exit(f"omnirun: {r.stderr.strip()}")
    got = load_npy(out)
    want = struct.unpack(f"<{len(fix['velocity'][2]) // 4}f",
                         fix["velocity"][2])
    assert len(got) == len(want), (len(got), len(want))
    err = max(abs(a - b) for a, b in zip(got, want)) / max(abs(b) for b in want)
    print(f"velocity {len(names) - 4} weights from the checkpoint, "
          f"{len(want)} values: max|omni - diffusers| / max|diffusers| "
          f"{'<=' if err <= tol else '>'} {tol} ({err:.1e})")
    return 0 if err <= tol else 1


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "state":
        return state(*args)
    if cmd == "velocity":
        return velocity(*args[:6], float(args[6]))
    if cmd in ("drop", "reshape", "nan"):
        tensors, meta = read(args[0])
        name = args[1]
        dtype, shape, data = tensors[name]
        if cmd == "drop":
            del tensors[name]
        elif cmd == "reshape":
            new = [int(d) for d in args[2].split(",")]
            assert math.prod(new) == math.prod(shape), (new, shape)
            tensors[name] = (dtype, new, data)
        else:
            nan = {"F32": struct.pack("<f", math.nan),
                   "F16": b"\x00\x7e", "BF16": b"\xc0\x7f"}[dtype]
            tensors[name] = (dtype, shape, nan + data[len(nan):])
        write(args[0], tensors, meta)
        return 0
    if cmd in ("json-del", "json-set"):
        doc = json.load(open(args[0]))
        if cmd == "json-del":
            target = doc[args[1]] if len(args) > 2 else doc
            del target[args[-1]]
        else:
            doc[args[1]] = json.loads(args[2])
        with open(args[0], "w") as f:
            json.dump(doc, f, indent=2)
        return 0
    sys.exit(f"unknown command {cmd}")


if __name__ == "__main__":
    sys.exit(main())
