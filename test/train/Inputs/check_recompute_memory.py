#!/usr/bin/env python3
"""Compares @train_step's arena with recompute=none and recompute=blocks.

usage: check_recompute_memory.py NONE.txt BLOCKS.txt

Reads the `omnic --report-arena` summaries (the "arena: N bytes, ...
(@train_step)" line and the "phase loss: N bytes" line after the train
step's peak line) and prints both, then "ok" when recomputing the blocks
lowers the arena and the loss phase's bytes at the peak, else "NOT LOWER".
Recomputing keeps one block's activations at a time instead of every
block's of every trained step (docs/autodiff.md "Rematerialization").
"""
import re
import sys


def read(path):
    arena = loss = None
    in_train = False
    for line in open(path):
        m = re.match(r"arena: (\d+) bytes, .*\(@(\w+)\)", line)
        if m:
            in_train = m.group(2) == "train_step"
            if in_train:
                arena = int(m.group(1))
            continue
        m = re.match(r"\s+phase loss: (\d+) bytes", line)
        if m and in_train and loss is None:
            loss = int(m.group(1))
    if arena is None or loss is None:
        sys.exit(f"{path}: no @train_step arena report")
    return arena, loss


none_arena, none_loss = read(sys.argv[1])
blocks_arena, blocks_loss = read(sys.argv[2])
print(f"@train_step arena: {none_arena} bytes saving everything, "
      f"{blocks_arena} recomputing blocks; loss at the peak {none_loss}, "
      f"{blocks_loss}")
print("ok" if blocks_arena < none_arena and blocks_loss < none_loss
      else "NOT LOWER")
