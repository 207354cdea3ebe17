#!/usr/bin/env python3
"""Writes a function in which each of N groups merges with a consumer about
N ops below it, past ops that do not depend on it (test/passes/fuse-scale.mlir).

  %m_i = matmul(w, w); %p_i = exp(%m_i); %t_i = matmul(%p_i, w)   i = 1..N
  %c_i = matmul(%c_{i-1}, w); %q_i = add(%p_i, %c_i)             i = 1..N

%q_i joins %p_i's group across about 2N ops; of those only %t_i reads %p_i
(it moves below the merged group). A legality check that walks the ops
between two groups visits about 3N^2/2 ops; one that walks the users of
the first group visits 2 per merge.
"""
import sys

n = int(sys.argv[1])
t = "tensor<4x4xf32>"
print(f"func.func @far_chain(%w: {t}) -> {t} {{")
for i in range(1, n + 1):
    print(f"  %m{i} = omni.matmul %w, %w : {t}, {t} -> {t}")
    print(f"  %p{i} = omni.exp %m{i} : {t}")
    print(f"  %t{i} = omni.matmul %p{i}, %w : {t}, {t} -> {t}")
prev = "%w"
for i in range(1, n + 1):
    print(f"  %c{i} = omni.matmul {prev}, %w : {t}, {t} -> {t}")
    print(f"  %q{i} = omni.add %p{i}, %c{i} : {t}")
    prev = f"%c{i}"
print(f"  return {prev} : {t}")
print("}")
