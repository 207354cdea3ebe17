#!/usr/bin/env python3
"""A client of `omnirun sample.bin --serve HOST:PORT` (docs/serving.md).

Standard library only. Asks /v1/info, then sends one POST /v1/sample per
seed, all at once from threads (the server batches them), and writes each
image as OUT/seed<seed>.png, printing the log-probs when --logprobs is
given. Embeddings come from a prompt of the server's --prompts set
(--prompt-index) or from a JSON file holding {"prompt_embeds": [[...]],
"pooled_prompt_embeds": [...]} (--embeds).

    python3 client.py --url http://127.0.0.1:8000 --prompt-index 0 \
        --seeds 1 2 3 4 --out samples/
"""

import argparse
import base64
import concurrent.futures
import json
import os
import sys
import urllib.error
import urllib.request


def call(url, body=None, timeout=600):
    """GET (body None) or POST JSON; returns (status, parsed answer)."""
    data = None if body is None else json.dumps(body, allow_nan=False).encode()
    request = urllib.request.Request(
        url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.status, json.load(answer)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--prompt-index", type=int)
    which.add_argument("--embeds", help="a JSON file with the embeddings")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--guidance", type=float)
    parser.add_argument("--logprobs", action="store_true")
    parser.add_argument("--out", default=".")
    args = parser.parse_args()

    status, info = call(args.url + "/v1/info")
    if status != 200:
        sys.exit(f"client.py: /v1/info: {status} {info.get('error')}")
    print(f"server: batch {info['batch']}, {info['steps']} steps, "
          f"{info['width']}x{info['height']}, {info['prompts']} prompts")

    base = {}
    if args.prompt_index is not None:
        base["prompt_index"] = args.prompt_index
    elif args.embeds:
        with open(args.embeds) as f:
            base.update(json.load(f))
    if args.guidance is not None:
        base["guidance"] = args.guidance
    if args.logprobs:
        base["logprobs"] = True

    os.makedirs(args.out, exist_ok=True)
    with concurrent.futures.ThreadPoolExecutor(len(args.seeds)) as pool:
        answers = pool.map(
            lambda seed: (seed, *call(args.url + "/v1/sample",
                                      dict(base, seed=seed))),
            args.seeds)
        failed = False
        for seed, status, answer in answers:
            if status != 200:
                print(f"seed {seed}: {status} {answer.get('error')}",
                      file=sys.stderr)
                failed = True
                continue
            path = os.path.join(args.out, f"seed{seed}.png")
            with open(path, "wb") as f:
                f.write(base64.b64decode(answer["images"][0]))
            line = f"seed {seed}: {path}"
            if "logprobs" in answer:
                line += " logprobs " + " ".join(
                    f"{v:.6g}" for v in answer["logprobs"][0])
            print(line)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
