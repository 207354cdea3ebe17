#!/usr/bin/env python3
"""read_tfevents.py EVENTS METRICS - reads a TensorBoard events file back
and checks it against the metrics.jsonl it was made of.

Independent of tools/metrics-to-tensorboard: its own CRC-32C (bit by bit,
checked on the standard test vector) and a generic protobuf wire-format
decoder. Every record's length and data CRCs must match, the first event
must carry file_version "brain.Event:2", and every later event must hold,
at step `iteration`, every finite number of its metrics line (nested
objects as a/b) as a float32 simple_value, and nothing else. Prints one
line per event ("step 0: loss=... reward_mean=...") and "ok: N events".
"""

import json
import math
import struct
import sys


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF


def unmask(m):
    rot = (m - 0xA282EAD8) & 0xFFFFFFFF
    return ((rot >> 17) | (rot << 15)) & 0xFFFFFFFF


def fields(buf):
    """(field number, wire type, value) of a protobuf message."""
    i = 0

    def varint():
        nonlocal i
        shift = result = 0
        while True:
            b = buf[i]
            i += 1
            result |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return result
    while i < len(buf):
        key = varint()
        number, wire = key >> 3, key & 7
        if wire == 0:
            yield number, wire, varint()
        elif wire == 1:
            yield number, wire, buf[i:i + 8]
            i += 8
        elif wire == 2:
            n = varint()
            yield number, wire, buf[i:i + n]
            i += n
        elif wire == 5:
            yield number, wire, buf[i:i + 4]
            i += 4
        else:
            sys.exit(f"unexpected wire type {wire}")
    if i != len(buf):
        sys.exit("a field runs past its message")


def fail(what):
    sys.exit("FAIL: " + what)


def expected(obj, prefix=""):
    for k, v in obj.items():
        if isinstance(v, dict):
            yield from expected(v, prefix + k + "/")
        elif (isinstance(v, (int, float)) and not isinstance(v, bool)
              and math.isfinite(v) and (prefix or k != "iteration")):
            yield prefix + k, struct.unpack("<f", struct.pack("<f", v))[0]


def main():
    if crc32c(b"123456789") != 0xE3069283:
        fail("crc32c test vector")
    data = open(sys.argv[1], "rb").read()
    metrics = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
    events, pos = [], 0
    while pos < len(data):
        if len(data) - pos < 12:
            fail(f"a partial record header at byte {pos}")
        header = data[pos:pos + 8]
        (length,) = struct.unpack("<Q", header)
        (hcrc,) = struct.unpack("<I", data[pos + 8:pos + 12])
        if unmask(hcrc) != crc32c(header):
            fail(f"length CRC of the record at byte {pos}")
        body = data[pos + 12:pos + 12 + length]
        (dcrc,) = struct.unpack("<I",
                                data[pos + 12 + length:pos + 16 + length])
        if len(body) != length or unmask(dcrc) != crc32c(body):
            fail(f"data CRC of the record at byte {pos}")
        pos += 16 + length
        ev = {"scalars": {}}
        for number, wire, value in fields(body):
            if number == 1 and wire == 1:
                ev["wall_time"] = struct.unpack("<d", value)[0]
            elif number == 2 and wire == 0:
                ev["step"] = value
            elif number == 3 and wire == 2:
                ev["file_version"] = value.decode()
            elif number == 5 and wire == 2:
                for vn, vw, v in fields(value):
                    if vn != 1 or vw != 2:
                        fail(f"Summary field {vn}")
                    tag = simple = None
                    for fn, fw, f in fields(v):
                        if fn == 1 and fw == 2:
                            tag = f.decode()
                        elif fn == 2 and fw == 5:
                            simple = struct.unpack("<f", f)[0]
                    if tag is None or simple is None:
                        fail("a Summary.Value without tag or simple_value")
                    ev["scalars"][tag] = simple
            else:
                fail(f"Event field {number} (wire type {wire})")
        if "wall_time" not in ev:
            fail("an event without wall_time")
        events.append(ev)
    if not events or events[0].get("file_version") != "brain.Event:2":
        fail("the first event is not file_version brain.Event:2")
    body = events[1:]
    if len(body) != len(metrics):
        fail(f"{len(body)} events for {len(metrics)} metrics lines")
    for ev, m in zip(body, metrics):
        if ev.get("step") != m["iteration"]:
            fail(f"step {ev.get('step')} for iteration {m['iteration']}")
        want = dict(expected(m))
        if ev["scalars"] != want:
            fail(f"step {ev['step']}: {ev['scalars']} != {want}")
        print(f"step {ev['step']}: " + " ".join(
            f"{k}={v:.6g}" for k, v in ev["scalars"].items()))
    walls = [ev["wall_time"] for ev in body]
    if walls != sorted(walls):
        fail("wall times go backwards")
    print(f"ok: {len(body)} events")


if __name__ == "__main__":
    main()
