#!/usr/bin/env bash
# Creates the PyTorch baseline's virtual environment (issue 7) at
# bench/torch/.venv and installs torch, diffusers, transformers (the text
# encoders and tokenizers of a diffusers folder), peft (LoRA adapters),
# sentencepiece and protobuf (T5 tokenizers), safetensors, numpy and pillow
# from PyPI. Idempotent: an existing venv is reused and pip skips
# what is already installed. Not part of `make test`.
#   bench/torch/setup.sh            # then: bench/torch/.venv/bin/python ...
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
VENV="$HERE/.venv"
PYTHON=${PYTHON:-python3}
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet torch diffusers transformers peft sentencepiece protobuf safetensors numpy pillow
"$VENV/bin/python" - <<'PY'
import sys, torch, diffusers, safetensors, numpy, PIL
print(f"python {sys.version.split()[0]}, torch {torch.__version__}, "
      f"diffusers {diffusers.__version__}, safetensors {safetensors.__version__}, "
      f"numpy {numpy.__version__}, pillow {PIL.__version__}")
PY
echo "venv: $VENV"
