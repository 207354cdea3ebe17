#!/usr/bin/env python3
"""Copies a file with one byte changed (xor 0x20), for the corruption tests.

usage: flip-byte.py IN OUT WHERE
WHERE is a byte offset, `-N` (N bytes before the end), `elf+N` (N bytes
after the first ELF magic, i.e. inside the kernels' code) or `hex:BYTES+N`
(N bytes after the last occurrence of the hex string BYTES: FlatBuffers
writes back to front, so constants and names come after the code).
"""
import sys

src, dst, where = sys.argv[1:4]
data = bytearray(open(src, "rb").read())
if where.startswith("elf+"):
    at = data.index(b"\x7fELF") + int(where[4:])
elif where.startswith("hex:"):
    pattern, offset = where[4:].split("+")
    at = data.rindex(bytes.fromhex(pattern)) + int(offset)
else:
    at = int(where) % len(data)
data[at] ^= 0x20
open(dst, "wb").write(bytes(data))
