#!/usr/bin/env python3
"""make_tiny_text_encoders.py - tiny random SD3 text encoders for tests.

    bench/torch/.venv/bin/python tools/encode-prompts/make_tiny_text_encoders.py DIR

Writes into DIR the text half of a StableDiffusion3Pipeline folder:
model_index.json, text_encoder and text_encoder_2 (CLIPTextModelWithProjection),
text_encoder_3 (T5EncoderModel), tokenizer, tokenizer_2 (CLIPTokenizer) and
tokenizer_3 (T5TokenizerFast), with random weights under a fixed seed and
tokenizers built here from hand-made vocabularies (no Hub access).

The sizes match omnigen's sd3 `tiny` preset (docs/prompts.md): diffusers'
encode_prompt concatenates CLIP-L and CLIP-G hidden states (16 + 16, padded
to the T5 width) with the T5 hidden states along the tokens, so

    prompt_embeds        [N, 4 CLIP + 4 T5 = 8, 32]  (text_tokens 8,
                                                     joint_attention_dim 32)
    pooled_prompt_embeds [N, 16 + 16 = 32]           (pooled_projection_dim 32)

with CLIP model_max_length 4 and encode-prompts --max-sequence-length 4.
"""

import json
import os
import string
import sys

CLIP_TOKENS = 4  # tokenizer.model_max_length: the CLIP half of L
CLIP_WIDTH = 16  # hidden and projection size of each CLIP encoder
T5_WIDTH = 32  # d_model: D
SEED = 1234


def clip_tokenizer(transformers):
    # Byte-level BPE over single characters: every lowercase letter and
    # digit, alone (inside a word) and word-final ("</w>"), and a few
    # merges; anything else is the unknown token.
    vocab = {"<|startoftext|>": 0, "<|endoftext|>": 1}
    for c in string.ascii_lowercase + string.digits:
        vocab[c] = len(vocab)
        vocab[c + "</w>"] = len(vocab)
    merges = []
    for a, b in [("t", "h"), ("a", "n"), ("o", "n"), ("i", "n"), ("e", "r")]:
        merges.append((a, b))
        vocab[a + b] = len(vocab)
        vocab[a + b + "</w>"] = len(vocab)
        merges.append((a, b + "</w>"))
    return transformers.CLIPTokenizer(
        vocab=vocab, merges=merges, model_max_length=CLIP_TOKENS
    ), len(vocab)


def t5_tokenizer(transformers):
    # A unigram model over "▁"-prefixed letters and a few words.
    pieces = [("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0), ("▁", -2.0)]
    for c in string.ascii_lowercase + string.digits:
        pieces.append((c, -3.0))
        pieces.append(("▁" + c, -3.0))
    for w in ["a", "the", "cat", "dog", "red", "blue", "photo", "of", "on"]:
        pieces.append(("▁" + w, -1.0))
    tok = transformers.T5TokenizerFast(vocab=pieces, extra_ids=0)
    return tok, len(pieces)


def main(argv):
    if len(argv) != 2:
        print("usage: make_tiny_text_encoders.py DIR", file=sys.stderr)
        return 2
    import torch
    import transformers

    out = argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(SEED)

    clip_tok, clip_vocab = clip_tokenizer(transformers)
    for k, name in enumerate(["text_encoder", "text_encoder_2"]):
        config = transformers.CLIPTextConfig(
            vocab_size=clip_vocab,
            hidden_size=CLIP_WIDTH,
            intermediate_size=2 * CLIP_WIDTH,
            num_hidden_layers=2,
            num_attention_heads=2,
            max_position_embeddings=CLIP_TOKENS,
            projection_dim=CLIP_WIDTH,
            hidden_act="gelu",
            bos_token_id=0,
            eos_token_id=1,
            pad_token_id=1,
        )
        model = transformers.CLIPTextModelWithProjection(config).eval()
        model.save_pretrained(os.path.join(out, name))
        tok_dir = os.path.join(out, "tokenizer" if k == 0 else "tokenizer_2")
        clip_tok.save_pretrained(tok_dir)

    t5_tok, t5_vocab = t5_tokenizer(transformers)
    config = transformers.T5Config(
        vocab_size=t5_vocab,
        d_model=T5_WIDTH,
        d_kv=8,
        d_ff=2 * T5_WIDTH,
        num_layers=2,
        num_heads=4,
        relative_attention_num_buckets=8,
        relative_attention_max_distance=16,
        feed_forward_proj="gated-gelu",
        pad_token_id=0,
        eos_token_id=1,
        decoder_start_token_id=0,
    )
    model = transformers.T5EncoderModel(config).eval()
    model.save_pretrained(os.path.join(out, "text_encoder_3"))
    t5_tok.save_pretrained(os.path.join(out, "tokenizer_3"))

    index = {
        "_class_name": "StableDiffusion3Pipeline",
        "_diffusers_version": "0.42.1",
        "text_encoder": ["transformers", "CLIPTextModelWithProjection"],
        "text_encoder_2": ["transformers", "CLIPTextModelWithProjection"],
        "text_encoder_3": ["transformers", "T5EncoderModel"],
        "tokenizer": ["transformers", "CLIPTokenizer"],
        "tokenizer_2": ["transformers", "CLIPTokenizer"],
        "tokenizer_3": ["transformers", "T5TokenizerFast"],
    }
    with open(os.path.join(out, "model_index.json"), "w") as f:
        json.dump(index, f, indent=2)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
