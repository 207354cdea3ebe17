#!/usr/bin/env python3
"""encode_prompts_test.py - encode-prompts against diffusers' encode_prompt.

    bench/torch/.venv/bin/python tools/encode-prompts/encode_prompts_test.py

Makes tiny random text encoders (make_tiny_text_encoders.py) in a temporary
folder, runs encode-prompts on a text and a JSONL file, and checks:
- its tensors equal StableDiffusion3Pipeline.encode_prompt called directly
  on a pipeline loaded independently (from_pretrained of the folder), bit
  for bit, for the prompts and for the empty and a given negative prompt;
- the shapes fit omnigen's sd3 tiny preset (L 8, D 32, Dp 32);
- the metadata (texts, negative prompt, JSONL fields);
- the one-line errors (missing folder, missing component, empty file, a
  bad JSONL line by number).
ctest runs it as `encode-prompts` when bench/torch/.venv exists
(docs/prompts.md). Exit status 0 when every check passes.
"""

import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOOL = os.path.join(HERE, "encode-prompts")
MAKE = os.path.join(HERE, "make_tiny_text_encoders.py")

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run_tool(*args):
    return subprocess.run(
        [sys.executable, TOOL, *args], capture_output=True, text=True
    )


def main():
    import torch
    from diffusers import StableDiffusion3Pipeline
    from safetensors import safe_open

    with tempfile.TemporaryDirectory() as tmp:
        folder = os.path.join(tmp, "sd3")
        subprocess.run(
            [sys.executable, MAKE, folder], check=True, capture_output=True
        )
        texts = ["a photo of a cat", "the red dog", "ünïcode 42", ""]
        txt = os.path.join(tmp, "p.txt")
        with open(txt, "w") as f:
            f.write("\n".join(texts[:3]) + "\n\n")
        jsonl = os.path.join(tmp, "p.jsonl")
        with open(jsonl, "w") as f:
            for k, t in enumerate(texts):
                f.write(json.dumps({"prompt": t, "id": k}) + "\n")

        pipe = StableDiffusion3Pipeline.from_pretrained(
            folder, transformer=None, vae=None, scheduler=None,
            torch_dtype=torch.float32,
        )

        def expected(prompts, negative):
            with torch.no_grad():
                return pipe.encode_prompt(
                    prompt=prompts, prompt_2=None, prompt_3=None,
                    device=torch.device("cpu"),
                    do_classifier_free_guidance=True,
                    negative_prompt=negative, max_sequence_length=4,
                )

        for source, prompts, negative in [
            (txt, texts[:3], None),
            (jsonl, texts, "blurry"),
        ]:
            out = os.path.join(tmp, "out.safetensors")
            args = ["--diffusers", folder, "--prompts", source, "--out", out,
                    "--max-sequence-length", "4"]
            if negative is not None:
                args += ["--negative-prompt", negative]
            r = run_tool(*args)
            check(r.returncode == 0, f"{source}: exit {r.returncode}: {r.stderr}")
            if r.returncode:
                continue
            pe, npe, ppe, nppe = expected(prompts, negative or "")
            with safe_open(out, "pt") as f:
                got = {k: f.get_tensor(k) for k in f.keys()}
                meta = f.metadata()
            check(list(got["prompt_embeds"].shape) == [len(prompts), 8, 32],
                  f"{source}: prompt_embeds {list(got['prompt_embeds'].shape)}")
            check(list(got["pooled_prompt_embeds"].shape) == [len(prompts), 32],
                  f"{source}: pooled {list(got['pooled_prompt_embeds'].shape)}")
            for name, want in [
                ("prompt_embeds", pe),
                ("pooled_prompt_embeds", ppe),
                ("negative_prompt_embeds", npe[:1]),
                ("negative_pooled_prompt_embeds", nppe[:1]),
            ]:
                check(got[name].dtype == torch.float32, f"{name} dtype")
                check(torch.equal(got[name], want.float()),
                      f"{source}: {name} differs from encode_prompt "
                      f"(max |d| {(got[name] - want).abs().max().item()})")
            # Every prompt's negative is the same row.
            check(torch.equal(npe[0], npe[-1]), "negative rows differ")
            # The negative is not zeros (the old unconditional branch).
            check(got["negative_prompt_embeds"].abs().max() > 0,
                  "negative embeds are zeros")
            check(json.loads(meta["prompts"]) == prompts,
                  f"{source}: metadata prompts {meta['prompts']}")
            check(meta["negative_prompt"] == (negative or ""),
                  f"{source}: metadata negative_prompt")
            fields = json.loads(meta["prompt_fields"])
            want_fields = ([{"id": k} for k in range(len(prompts))]
                           if source == jsonl else [{}] * len(prompts))
            check(fields == want_fields, f"{source}: prompt_fields {fields}")

        # Errors: one line on stderr, exit status 1.
        empty = os.path.join(tmp, "empty.txt")
        open(empty, "w").write("\n  \n")
        bad = os.path.join(tmp, "bad.jsonl")
        open(bad, "w").write('{"prompt": "ok"}\n\n{"prompt": 3}\n')
        broken = os.path.join(tmp, "broken.jsonl")
        open(broken, "w").write('{"prompt": "ok"}\n{"prompt": \n')
        partial = os.path.join(tmp, "partial")
        os.makedirs(partial)
        os.symlink(os.path.join(folder, "tokenizer"),
                   os.path.join(partial, "tokenizer"))
        out = os.path.join(tmp, "e.safetensors")
        cases = [
            ([ "--diffusers", os.path.join(tmp, "none"), "--prompts", txt],
             f"encode-prompts: --diffusers {tmp}/none: no such folder"),
            (["--diffusers", partial, "--prompts", txt],
             f"encode-prompts: --diffusers {partial}: no tokenizer_2/ folder"),
            (["--diffusers", folder, "--prompts", empty],
             f"encode-prompts: --prompts {empty}: no prompts (the file is empty)"),
            (["--diffusers", folder, "--prompts", bad],
             f'encode-prompts: --prompts {bad}:3: expected a string "prompt", found int'),
            (["--diffusers", folder, "--prompts", broken],
             f"encode-prompts: --prompts {broken}:2: not a JSON object"),
            (["--diffusers", folder, "--prompts", os.path.join(tmp, "x.txt")],
             f"encode-prompts: --prompts {tmp}/x.txt: no such file"),
        ]
        for args, prefix in cases:
            r = run_tool(*args, "--out", out)
            lines = r.stderr.strip().splitlines()
            check(r.returncode == 1, f"{args}: exit {r.returncode}")
            check(len(lines) == 1 and lines[0].startswith(prefix),
                  f"{args}: stderr {r.stderr!r}, expected {prefix!r}")
            check(not os.path.exists(out), f"{args}: wrote {out}")

    if failures:
        print(f"encode_prompts_test: {len(failures)} failures")
        return 1
    print("encode_prompts_test: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
