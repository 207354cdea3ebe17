// The parts of a concatenation are computed straight into their slices of
// the result (docs/backend.md, "Copies read through, not materialized"):
// the kernel allocates nothing, where each transposed part used to be
// written into a malloc'ed temporary and copied. x[i][j] = 3 i + j for the
// first part ([2, 3] transposed), y = 100 + the same for the second.
// RUN: omnic %s --emit=llvm | FileCheck %s --check-prefix=LLVM
// RUN: omnic %s -o %t.bin
// RUN: omnirun %t.bin --function main --input="2x3xf32=0 1 2 3 4 5" --input="2x3xf32=100 101 102 103 104 105" | FileCheck %s

// LLVM-LABEL: define void @omni_kernel_0(
// LLVM-NOT: @malloc
// LLVM: {{^}}}

// CHECK: result[0]: tensor<3x4xf32>={{\[\[}}0 3 100 103{{\]\[}}1 4 101 104{{\]\[}}2 5 102 105{{\]\]}}

func.func @main(%x: tensor<2x3xf32>, %y: tensor<2x3xf32>) -> tensor<3x4xf32> {
  %tx = omni.transpose %x, permutation = [1, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
  %ty = omni.transpose %y, permutation = [1, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
  %c = omni.concat %tx, %ty dim = 1 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x4xf32>
  return %c : tensor<3x4xf32>
}
