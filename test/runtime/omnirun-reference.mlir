// RUN: omnirun-testgen rng %t.rng.bin
// RUN: omni-eval %s --function=noise --input=i64=42 --input=i64=7 > %t.ref
// RUN: omnirun %t.rng.bin --function=noise --input=i64=42 --input=i64=7 > %t.run
// RUN: diff %t.ref %t.run
// RUN: omnirun-testgen matmul %t.mm.bin
// RUN: omni-eval %s --function=matmul --input=2x3xf32=1,2,3,4,5,6 \
// RUN:   --input=3x2xf32=1,-1,0,2,3,0.5 > %t.mm.ref
// RUN: omnirun %t.mm.bin --function=matmul --input=2x3xf32=1,2,3,4,5,6 \
// RUN:   --input=3x2xf32=1,-1,0,2,3,0.5 > %t.mm.run
// RUN: diff %t.mm.ref %t.mm.run
// RUN: FileCheck %s < %t.mm.run

// Differential tests of omnirun against the reference evaluator on the same
// functions (omnirun's step.bin files come from omnirun-testgen and mirror
// these): Random must be bit-identical (docs/rng.md), and a matmul of
// exactly representable values exact.

// CHECK: result[0]: tensor<2x2xf32>={{\[\[}}10 4.5][22 9]]

func.func @noise(%key: tensor<i64>, %counter: tensor<i64>) -> tensor<4x4xf32> {
  %zero = omni.constant dense<0> : tensor<i64>
  %n = omni.random_normal %key, %counter, %zero : tensor<4x4xf32>
  return %n : tensor<4x4xf32>
}

func.func @matmul(%a: tensor<2x3xf32>, %b: tensor<3x2xf32>) -> tensor<2x2xf32> {
  %c = omni.matmul %a, %b : tensor<2x3xf32>, tensor<3x2xf32> -> tensor<2x2xf32>
  return %c : tensor<2x2xf32>
}
