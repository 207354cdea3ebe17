"""Reading and writing .npy and safetensors files without numpy (the GPU
machine's Python may lack it; tools/gpu-check/README.md). Tensors are
(dtype, shape, values) with dtype one of f32 f64 f16 i32 i64 bool bf16 and
values a flat tuple of Python numbers."""
import ast
import json
import struct

NPY = {"<f4": ("f32", "f"), "<f8": ("f64", "d"), "<f2": ("f16", "e"),
       "<i4": ("i32", "i"), "<i8": ("i64", "q"), "|b1": ("bool", "?")}
NPY_OF = {v[0]: k for k, v in NPY.items()}
FMT = {v[0]: v[1] for v in NPY.values()}
SAFE = {"F32": "f32", "F64": "f64", "F16": "f16", "I32": "i32", "I64": "i64",
        "BOOL": "bool", "BF16": "bf16"}


def read_npy(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:6] != b"\x93NUMPY":
        raise ValueError(f"{path}: not a .npy file")
    major = data[6]
    if major == 1:
        (n,) = struct.unpack("<H", data[8:10])
        start = 10
    else:
        (n,) = struct.unpack("<I", data[8:12])
        start = 12
    header = ast.literal_eval(data[start:start + n].decode("latin1"))
    if header.get("fortran_order"):
        raise ValueError(f"{path}: Fortran order is not supported")
    descr = header["descr"]
    if descr not in NPY:
        raise ValueError(f"{path}: dtype {descr} is not supported")
    dtype, fmt = NPY[descr]
    shape = tuple(header["shape"])
    count = 1
    for d in shape:
        count *= d
    body = data[start + n:]
    values = struct.unpack("<%d%s" % (count, fmt),
                           body[:count * struct.calcsize(fmt)])
    return dtype, shape, values


def write_npy(path, dtype, shape, values):
    descr = NPY_OF[dtype]
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        descr, "".join("%d, " % d for d in shape) if len(shape) != 1
        else "%d," % shape[0])
    if len(shape) > 1:
        header = header.replace(", ), }", "), }")
    pad = 64 - (10 + len(header) + 1) % 64
    header = header + " " * (pad % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00")
        f.write(struct.pack("<H", len(header)))
        f.write(header.encode("latin1"))
        f.write(struct.pack("<%d%s" % (len(values), FMT[dtype]), *values))


def _bf16(raw):
    words = struct.unpack("<%dH" % (len(raw) // 2), raw)
    return struct.unpack("<%df" % len(words),
                         struct.pack("<%dI" % len(words),
                                     *[w << 16 for w in words]))


def read_safetensors(path):
    """name -> (dtype, shape, values)."""
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = SAFE.get(info["dtype"])
        if dtype is None:
            raise ValueError(f"{path}: {name} has dtype {info['dtype']}")
        begin, end = info["data_offsets"]
        raw = body[begin:end]
        if dtype == "bf16":
            values = _bf16(raw)
        else:
            fmt = FMT[dtype]
            values = struct.unpack("<%d%s" % (len(raw) // struct.calcsize(fmt),
                                              fmt), raw)
        tensors[name] = (dtype, tuple(info["shape"]), values)
    return tensors
