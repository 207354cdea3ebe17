#!/bin/sh
# Regenerates the committed prompts fixtures of the lit tests
# (test/train/Inputs/tiny-prompts*.safetensors, docs/prompts.md) with the
# tiny random text encoders of make_tiny_text_encoders.py: 3 prompts
# encoded for omnigen's sd3 tiny preset (L = 8, D = 32, Dp = 32), with the
# empty negative prompt, with the negative prompt "blurry", and without
# negatives (the unconditional branch then uses zeros).
# Usage: tools/encode-prompts/make_fixtures.sh  (from the repository root)
set -eu
PY=${PY:-bench/torch/.venv/bin/python}
OUT=test/train/Inputs
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
"$PY" tools/encode-prompts/make_tiny_text_encoders.py "$TMP/sd3" >/dev/null 2>&1
cat >"$TMP/prompts.jsonl" <<'JSONL'
{"prompt": "a photo of a cat", "id": 0}
{"prompt": "the red dog", "id": 1}
{"prompt": "a blue cat on the dog", "id": 2}
JSONL
enc() {
  "$PY" tools/encode-prompts/encode-prompts --diffusers "$TMP/sd3" \
    --prompts "$TMP/prompts.jsonl" --max-sequence-length 4 "$@" 2>/dev/null
}
enc --out "$OUT/tiny-prompts.safetensors"
enc --out "$OUT/tiny-prompts-blurry.safetensors" --negative-prompt blurry
"$PY" - "$OUT/tiny-prompts.safetensors" "$OUT/tiny-prompts-nonegative.safetensors" <<'PYEOF'
import sys
from safetensors import safe_open
from safetensors.torch import save_file
with safe_open(sys.argv[1], "pt") as f:
    meta = dict(f.metadata())
    tensors = {k: f.get_tensor(k) for k in f.keys() if not k.startswith("negative_")}
meta.pop("negative_prompt", None)
save_file(tensors, sys.argv[2], metadata=meta)
PYEOF
