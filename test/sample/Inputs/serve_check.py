#!/usr/bin/env python3
"""Drives `omnirun sample.bin --serve 127.0.0.1:0` for test/sample/serve.test.

    serve_check.py OMNIRUN SAMPLE_BIN SAMPLES_DIR [--logprobs] -- SERVE_ARGS...

Starts the server on a free port (read from the line it prints), then:
- /v1/info: prints batch, steps, size, prompts, guidance;
- one request per (prompt_index, seed) of SAMPLES_DIR/manifest.jsonl (the
  sampling mode's output for the same program, weights and prompts), all
  at once from threads: each answer's PNG must equal the sampling mode's
  file byte for byte (and with --logprobs, its log-probs the manifest's,
  as f32); a request with n = 2 gets seeds s and s + 1;
- a malformed body gets 400 and the server still answers;
- SIGTERM ends it with exit code 143.
The server is killed whatever happens (finally). Prints one line per check
and PASS; any failure exits 1 with the reason. Generous timeouts, no timing
asserts. Standard library only.
"""

import base64
import concurrent.futures
import json
import os
import signal
import struct
import subprocess
import sys
import threading
import urllib.error
import urllib.request

TIMEOUT = 600


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def call(url, body=None, raw=None):
    data = raw if raw is not None else (
        None if body is None else json.dumps(body).encode())
    request = urllib.request.Request(
        url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as answer:
            return answer.status, json.load(answer)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


def f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def main():
    argv = sys.argv[1:]
    split = argv.index("--")
    omnirun, program, samples = argv[0], argv[1], argv[2]
    want_logprobs = "--logprobs" in argv[3:split]
    serve_args = argv[split + 1:]
    with open(os.path.join(samples, "manifest.jsonl")) as f:
        manifest = [json.loads(line) for line in f]

    server = subprocess.Popen(
        [omnirun, program, "--serve", "127.0.0.1:0"] + serve_args,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output = []
    try:
        # The line "omnirun: serving FILE on http://127.0.0.1:PORT (...)".
        url = None
        ready = threading.Event()

        def read():
            nonlocal url
            for line in server.stdout:
                output.append(line)
                if url is None and " on http://" in line:
                    url = line.split(" on ", 1)[1].split(" ")[0]
                    ready.set()
            ready.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        ready.wait(TIMEOUT)
        if url is None:
            fail("the server printed no address: " + "".join(output).strip())
        for line in output:
            if line.startswith(("weights:", "prompts:")):
                print(line.rstrip())

        status, info = call(url + "/v1/info")
        if status != 200:
            fail(f"/v1/info: {status} {info}")
        print(f"info: batch {info['batch']}, {info['steps']} steps, "
              f"{info['width']}x{info['height']}, {info['prompts']} prompts, "
              f"guidance {info['guidance']}, logprobs {info['logprobs']}")

        def png(entry):
            with open(os.path.join(samples, entry["file"]), "rb") as f:
                return f.read()

        def ask(entry):
            body = {"seed": entry["seed"], "prompt_index": entry["prompt"]}
            if want_logprobs:
                body["logprobs"] = True
            return entry, call(url + "/v1/sample", body)

        # All the manifest's images at once: the server batches them in
        # whatever way the threads arrive; each gets its own seed's image.
        with concurrent.futures.ThreadPoolExecutor(len(manifest)) as pool:
            answers = list(pool.map(ask, manifest))
        for entry, (status, answer) in answers:
            if status != 200:
                fail(f"{entry['file']}: {status} {answer}")
            if answer["seeds"] != [entry["seed"]]:
                fail(f"{entry['file']}: seeds {answer['seeds']}")
            if base64.b64decode(answer["images"][0]) != png(entry):
                fail(f"{entry['file']}: the served PNG differs from the "
                     "sampling mode's")
            if want_logprobs:
                got = [f32(x) for x in answer["logprobs"][0]]
                expected = [f32(x) for x in entry["log_probs"]]
                if got != expected:
                    fail(f"{entry['file']}: log-probs {got}, expected "
                         f"{expected}")
        print(f"concurrent: {len(answers)} requests, each image equals the "
              "sampling mode's PNG" + (" and log-probs" if want_logprobs
                                       else ""))
        # The prompt texts, when the prompts file carries them.
        texts = sorted({a["prompt"] for _, (_, a) in answers if "prompt" in a})
        if texts:
            print("texts: " + " | ".join(texts))

        # n = 2: seeds s and s + 1 in one request.
        first = manifest[0]
        pair = [e for e in manifest if e["prompt"] == first["prompt"] and
                e["seed"] == first["seed"] + 1]
        if pair:
            status, answer = call(url + "/v1/sample", {
                "seed": first["seed"], "prompt_index": first["prompt"],
                "n": 2})
            if status != 200 or answer["seeds"] != [first["seed"],
                                                     first["seed"] + 1]:
                fail(f"n = 2: {status} {answer}")
            if [base64.b64decode(i) for i in answer["images"]] != [
                    png(first), png(pair[0])]:
                fail("n = 2: the images differ from the sampling mode's")
            print("n = 2: seeds s, s + 1 equal the sampling mode's PNGs")

        status, answer = call(url + "/v1/sample", raw=b"{\"seed\": ")
        print(f"malformed: {status} {answer.get('error')}")
        status, answer = call(url + "/v1/sample",
                              {"seed": 1, "prompt_index": 10 ** 6})
        print(f"bad prompt_index: {status} {answer.get('error')}")
        status, answer = call(url + "/v1/sample", {
            "seed": first["seed"], "prompt_index": first["prompt"]})
        if status != 200 or base64.b64decode(answer["images"][0]) != png(first):
            fail(f"after the bad requests: {status}")
        print("after the bad requests: 200, the same image")

        server.send_signal(signal.SIGTERM)
        code = server.wait(TIMEOUT)
        reader.join(TIMEOUT)
        print(f"SIGTERM: exit {code}")
        for line in output:
            if line.startswith("omnirun: stopped serving"):
                print(line.rstrip())
        print("PASS")
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


if __name__ == "__main__":
    main()
