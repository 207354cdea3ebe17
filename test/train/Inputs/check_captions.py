#!/usr/bin/env python3
"""check_captions.py GRID METRICS --iteration N --images B --size W H
   --prompts-per-iteration P --prompt-count NP

Reads a sample grid (samples/iter-N.png of omnirun; docs/backend.md,
"Training") back and checks its captions: the PNG is decoded with zlib
(no imaging library), the layout is recomputed (ceil(sqrt(B)) columns
6 pixels apart, rows 2 apart, cells as wide as the grid says, one padding row and two
8-row caption lines under each W x H image, the image centered), and the
text is read back glyph by glyph against the 5x7 shapes below. Image b
must say "prompt k" with k = ((N-1)*P + b // (B/P)) mod NP (prompt-major
batch, docs/recipes.md) and "reward v"; the mean of the B values must be
the iteration's reward_mean in METRICS (plus --reward-offset) to their 4
significant digits.
Prints each caption and "ok".
"""

import argparse
import json
import math
import struct
import sys
import zlib

# The glyphs the captions use, 5 columns x 7 rows (runtime/train/image/
# Caption.cpp draws them; these were checked by eye against the letters).
ART = {
    "+": [".....", "..#..", "..#..", "#####", "..#..", "..#..", "....."],
    "-": [".....", ".....", ".....", "#####", ".....", ".....", "....."],
    ".": [".....", ".....", ".....", ".....", ".....", ".##..", ".##.."],
    "0": [".###.", "#...#", "#..##", "#.#.#", "##..#", "#...#", ".###."],
    "1": ["..#..", ".##..", "..#..", "..#..", "..#..", "..#..", ".###."],
    "2": [".###.", "#...#", "....#", "...#.", "..#..", ".#...", "#####"],
    "3": ["#####", "...#.", "..#..", "...#.", "....#", "#...#", ".###."],
    "4": ["...#.", "..##.", ".#.#.", "#..#.", "#####", "...#.", "...#."],
    "5": ["#####", "#....", "####.", "....#", "....#", "#...#", ".###."],
    "6": ["..##.", ".#...", "#....", "####.", "#...#", "#...#", ".###."],
    "7": ["#####", "....#", "...#.", "..#..", ".#...", ".#...", ".#..."],
    "8": [".###.", "#...#", "#...#", ".###.", "#...#", "#...#", ".###."],
    "9": [".###.", "#...#", "#...#", ".####", "....#", "...#.", ".##.."],
    "a": [".....", ".....", ".###.", "....#", ".####", "#...#", ".####"],
    "d": ["....#", "....#", ".##.#", "#..##", "#...#", "#...#", ".####"],
    "e": [".....", ".....", ".###.", "#...#", "#####", "#....", ".###."],
    "m": [".....", ".....", "##.#.", "#.#.#", "#.#.#", "#...#", "#...#"],
    "o": [".....", ".....", ".###.", "#...#", "#...#", "#...#", ".###."],
    "p": [".....", ".....", "####.", "#...#", "####.", "#....", "#...."],
    "r": [".....", ".....", "#.##.", "##..#", "#....", "#....", "#...."],
    "t": [".#...", ".#...", "###..", ".#...", ".#...", ".#..#", "..##."],
    "w": [".....", ".....", "#...#", "#...#", "#.#.#", "#.#.#", ".#.#."],
    " ": ["....."] * 7,
}


def fail(what):
    sys.exit("FAIL: " + what)


def decode_png(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail(f"{path}: not a PNG")
    pos, idat, width = 8, b"", None
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            if depth != 8 or color != 2:
                fail(f"{path}: expected 8-bit RGB, found depth {depth} "
                     f"color type {color}")
        elif kind == b"IDAT":
            idat += body
    raw, stride = zlib.decompress(idat), width * 3
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - 3] if i >= 3 else 0
            b, c = prev[i], prev[i - 3] if i >= 3 else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else b if pb <= pc else c
                line[i] = (line[i] + pred) & 255
            elif f != 0:
                fail(f"{path}: filter type {f}")
        rows.append(line)
        prev = line
    return width, height, rows


def main():
    p = argparse.ArgumentParser()
    p.add_argument("grid")
    p.add_argument("metrics")
    p.add_argument("--iteration", type=int, required=True)
    p.add_argument("--images", type=int, required=True)
    p.add_argument("--size", type=int, nargs=2, required=True)
    p.add_argument("--prompts-per-iteration", type=int, required=True)
    p.add_argument("--prompt-count", type=int, required=True)
    p.add_argument("--reward-offset", type=float, default=0.0,
                   help="the captions' rewards are reward_mean's plus this")
    a = p.parse_args()
    width, height, px = decode_png(a.grid)
    w, h = a.size
    # 2-pixel gaps between rows, a glyph's 6 between captioned columns.
    b, gap, gap_x = a.images, 2, 6
    cols = math.ceil(math.sqrt(b))
    rows = (b + cols - 1) // cols
    cell_w = (width - (cols - 1) * gap_x) / cols
    cell_h = h + 1 + 2 * 8
    if cell_w != int(cell_w) or cell_w < w:
        fail(f"grid width {width} is not {cols} cells of at least {w}")
    cell_w = int(cell_w)
    if height != rows * cell_h + (rows - 1) * gap:
        fail(f"grid height {height}, expected {rows} rows of {cell_h}")

    def white(x, y):
        return px[y][3 * x:3 * x + 3] == b"\xff\xff\xff"

    shapes = {"".join(v): k for k, v in ART.items()}
    texts = []
    for n in range(b):
        x0, y0 = (n % cols) * (cell_w + gap_x), (n // cols) * (cell_h + gap)
        ix = x0 + (cell_w - w) // 2
        if any(white(ix - 1, y0 + y) for y in range(h)) and ix > x0:
            fail(f"image {n}: white left of the centered image")
        if any(white(x0 + x, y0 + h) for x in range(cell_w)):
            fail(f"image {n}: the padding row under the image is not black")
        lines = []
        for l in range(2):
            y = y0 + h + 1 + 8 * l
            text = ""
            for k in range((cell_w + 1) // 6):
                block = "".join("#" if white(x0 + 6 * k + i, y + j) else "."
                                for j in range(7) for i in range(5))
                if block not in shapes:
                    fail(f"image {n} line {l}: glyph {k} is not one of the "
                         f"caption's characters")
                text += shapes[block]
            lines.append(text.rstrip())
        texts.append(lines)
    group = b // a.prompts_per_iteration
    it = a.iteration - 1
    values = []
    for n, (prompt, reward) in enumerate(texts):
        k = (it * a.prompts_per_iteration + n // group) % a.prompt_count
        if prompt != f"prompt {k}":
            fail(f"image {n}: '{prompt}', expected 'prompt {k}'")
        if not reward.startswith("reward "):
            fail(f"image {n}: '{reward}', expected 'reward <value>'")
        values.append(float(reward[len("reward "):]))
        print(f"image {n}: {prompt}, {reward}")
    # Cells widen to the longest line (up to 24 glyphs).
    longest = max(len(t) for lines in texts for t in lines)
    if cell_w != max(w, 6 * min(longest, 24) - 1):
        fail(f"cells are {cell_w} pixels wide, expected the longest line's "
             f"{6 * min(longest, 24) - 1} (or the image's {w})")
    metrics = [json.loads(line) for line in open(a.metrics)]
    m = [x for x in metrics if x["iteration"] == it]
    if len(m) != 1:
        fail(f"no metrics line of iteration {it}")
    mean = sum(values) / b
    tol = 5e-4 * max(abs(v) for v in values) + 1e-12
    want = m[0]["reward_mean"] + a.reward_offset
    if abs(mean - want) > tol:
        fail(f"the captions' mean reward {mean} is not reward_mean + "
             f"{a.reward_offset} = {want} (within {tol})")
    print(f"ok: {b} captions, mean reward {mean:.6g}")


if __name__ == "__main__":
    main()
