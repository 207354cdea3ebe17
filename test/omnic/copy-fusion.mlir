// A transpose read by several ops of one kernel (the RMS norm of attention
// heads: x^2 for the sum, x times the scale) is read through its index map
// by each of them, not copied into a temporary first (docs/backend.md,
// "Copies read through, not materialized"). The kernel's only allocation
// is the f64 accumulator of the sum (6 doubles: 48 bytes, 112 with the
// alignment slack); the transposed copy would be 24 floats (160 bytes).
// x[i][j][k] = 12 i + 4 j + k, t = x transposed to [j][i][k], r = t *
// sum_k t^2: t[0][0] = 0 1 2 3 (sum of squares 14), t[0][1] = 12 13 14 15
// (734), t[1][0] = 4 5 6 7 (126), ...
// RUN: omnic %s --emit=llvm | FileCheck %s --check-prefix=LLVM
// RUN: omnic %s -o %t.bin
// RUN: omnirun %t.bin --function main --input="2x3x4xf32=0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23" | FileCheck %s

// LLVM-LABEL: define void @omni_kernel_0(
// LLVM-NOT: @malloc(i64 160)
// LLVM: @malloc(i64 112)
// LLVM-NOT: @malloc(i64 160)
// LLVM: {{^}}}

// CHECK: result[0]: tensor<3x2x4xf32>={{\[\[\[}}0 14 28 42{{\]\[}}8808 9542 10276 11010{{\]\]\[\[}}504 630 756 882{{\]\[}}19680 20910 22140 23370{{\]\]\[\[}}2928 3294 3660 4026{{\]\[}}37080 38934 40788 42642{{\]\]\]}}

func.func @main(%x: tensor<2x3x4xf32>) -> tensor<3x2x4xf32> {
  %t = omni.transpose %x, permutation = [1, 0, 2] : tensor<2x3x4xf32> -> tensor<3x2x4xf32>
  %s = omni.mul %t, %t : tensor<3x2x4xf32>
  %m = omni.reduce sum %s dims = [2] : tensor<3x2x4xf32> -> tensor<3x2xf32>
  %b = omni.broadcast_in_dim %m, dims = [0, 1] : tensor<3x2xf32> -> tensor<3x2x4xf32>
  %r = omni.mul %t, %b : tensor<3x2x4xf32>
  return %r : tensor<3x2x4xf32>
}
