#!/usr/bin/env python3
"""A reward server for `omnirun --reward http://127.0.0.1:PORT`.

Speaks the protocol of docs/rewards.md: POST /score with a JSON batch of
images (base64 PNG or raw RGB bytes), answers {"scores": [...],
"sub_scores": {...}}. Standard library plus Pillow (Debian python3-pil)
only. The modes:

  jpeg_compressibility    -bytes / 500000, bytes = the size of
                          Image.save(buf, "JPEG", quality=95) (Pillow's
                          defaults: 4:2:0, the accurate DCT), exactly as
                          flow_grpo and omni's built-in reward of the same
                          name; Pillow uses the system libjpeg-turbo, so
                          the byte counts, and the scores, are the built-in's
                          (test/train/reward-server.test checks it).
  jpeg_incompressibility  bytes / 1000.
  brightness              the mean of the quantized pixels / 255. Close to
                          the built-in brightness, which averages the
                          decoder's float pixels before quantization, but
                          not equal to it.

Every answer also carries the sub-score "jpeg_kib" (the JPEG's size in KiB)
in the jpeg modes, which omnirun logs as reward/jpeg_kib.

For tests, --misbehave makes it answer wrongly (status-500, nonsense,
wrong-count, nan) and --die-after N exits right after its N-th answer.
--delay SECONDS and --delay-per-image SECONDS make each answer wait
SECONDS, plus SECONDS per image of the batch (a stand-in for a scoring
model's time, which grows with the batch; bench/async-reward uses them).
--port 0 lets the kernel choose a free port; --port-file writes it (after
the socket listens, via a temporary file and a rename, so a reader never
sees half a number). --unix SOCKET listens on a Unix domain socket instead
(`omnirun --reward unix:SOCKET`).

The float32 of each score: the score is -bytes / 500000 in double, which
the client reads back exactly (JSON numbers are written with repr) and
rounds to float32. Rounding twice (to double, then float32) gives the
float32 division -float(bytes) / 500000.0f of the built-in: the quotient
b / (2**5 * 5**6) is never closer to a float32 rounding midpoint than a
relative 2**-38, far above double's 2**-53.
"""

import argparse
import base64
import io
import json
import os
import socketserver
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from PIL import Image


def decode_images(batch):
    """The batch's images as PIL RGB images."""
    count, height, width = batch["count"], batch["height"], batch["width"]
    fmt = batch["format"]
    images = []
    for encoded in batch["images"]:
        data = base64.b64decode(encoded, validate=True)
        if fmt == "png":
            img = Image.open(io.BytesIO(data))
            img.load()
            img = img.convert("RGB")
        elif fmt == "raw":
            if len(data) != height * width * 3:
                raise ValueError(
                    f"raw image of {len(data)} bytes, expected "
                    f"{height}*{width}*3")
            img = Image.frombytes("RGB", (width, height), data)
        else:
            raise ValueError(f"unknown format {fmt!r}")
        if img.size != (width, height):
            raise ValueError(f"image of {img.size}, expected {(width, height)}")
        images.append(img)
    if len(images) != count:
        raise ValueError(f"{len(images)} images, expected count {count}")
    return images


def jpeg_bytes(img):
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=95)
    return buf.tell()


def score(mode, images):
    """(scores, sub_scores) for the images."""
    if mode == "brightness":
        scores = []
        for img in images:
            data = img.tobytes()
            scores.append(sum(data) / (255.0 * len(data)))
        return scores, {}
    sizes = [jpeg_bytes(img) for img in images]
    subs = {"jpeg_kib": [s / 1024 for s in sizes]}
    if mode == "jpeg_compressibility":
        return [-s / 500000 for s in sizes], subs
    if mode == "jpeg_incompressibility":
        return [s / 1000 for s in sizes], subs
    raise ValueError(mode)


class Handler(BaseHTTPRequestHandler):
    server_version = "omni-reward-server/1"

    def address_string(self):  # a Unix socket's peer has no address
        return str(self.client_address[0]) if self.client_address else "unix"

    def log_message(self, fmt, *args):  # quiet unless --verbose
        if self.server.options.verbose:
            super().log_message(fmt, *args)

    def answer(self, status, body, content_type="application/json"):
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def do_POST(self):
        options = self.server.options
        if self.path != options.path:
            self.answer(404, f"no such path {self.path}, try {options.path}\n",
                        "text/plain")
            return
        length = int(self.headers.get("Content-Length", 0))
        try:
            batch = json.loads(self.rfile.read(length))
            images = decode_images(batch)
            scores, subs = score(options.mode, images)
        except Exception as e:  # the client shows the first line
            self.answer(400, f"bad request: {e}\n", "text/plain")
            return
        wait = options.delay + options.delay_per_image * len(images)
        if wait > 0:
            time.sleep(wait)
        bad = options.misbehave
        if bad == "status-500":
            self.answer(500, "Traceback (most recent call last):\n"
                        "  File \"server.py\", in score\n"
                        "RuntimeError: the scorer crashed\n", "text/plain")
        elif bad == "nonsense":
            self.answer(200, "<html>it works!</html>", "text/html")
        elif bad == "wrong-count":
            self.answer(200, json.dumps({"scores": scores[:-1]}))
        elif bad == "nan":
            self.answer(200, json.dumps({"scores": [float("nan")] + scores[1:]}))
        else:
            self.answer(200, json.dumps({"scores": scores, "sub_scores": subs}))
        with self.server.lock:
            self.server.answered += 1
            done = options.die_after and self.server.answered >= options.die_after
        if done:
            # Like a crash: no clean shutdown, the socket closes with the
            # process.
            sys.stdout.flush()
            os._exit(3)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000,
                        help="0: a free port (see --port-file)")
    parser.add_argument("--port-file", help="write the port here")
    parser.add_argument("--unix", metavar="SOCKET",
                        help="listen on this Unix domain socket instead "
                        "(omnirun --reward unix:SOCKET; --port-file gets "
                        "the socket's path)")
    parser.add_argument("--path", default="/score")
    parser.add_argument("--mode", default="jpeg_compressibility",
                        choices=["jpeg_compressibility",
                                 "jpeg_incompressibility", "brightness"])
    parser.add_argument("--misbehave", default="",
                        choices=["", "status-500", "nonsense", "wrong-count",
                                 "nan"])
    parser.add_argument("--die-after", type=int, default=0, metavar="N",
                        help="exit right after the N-th answer")
    parser.add_argument("--delay", type=float, default=0, metavar="SECONDS",
                        help="wait this long before each answer")
    parser.add_argument("--delay-per-image", type=float, default=0,
                        metavar="SECONDS",
                        help="and this long per image of the batch")
    parser.add_argument("--verbose", action="store_true")
    options = parser.parse_args()
    if options.delay < 0 or options.delay_per_image < 0:
        parser.error("--delay and --delay-per-image must be >= 0 seconds")

    if options.unix:
        if os.path.exists(options.unix):
            os.unlink(options.unix)

        class UnixServer(socketserver.ThreadingMixIn,
                         socketserver.UnixStreamServer):
            pass

        server = UnixServer(options.unix, Handler)
        port, where = options.unix, f"unix:{options.unix}"
    else:
        server = ThreadingHTTPServer((options.host, options.port), Handler)
        port = server.server_address[1]
        where = f"http://{options.host}:{port}{options.path}"
    server.daemon_threads = True
    server.options = options
    server.lock = threading.Lock()
    server.answered = 0
    if options.port_file:
        tmp = options.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{port}\n")
        os.replace(tmp, options.port_file)
    print(f"reward server: {options.mode} on {where}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
