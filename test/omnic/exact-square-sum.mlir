// The sum of squares of f32 values widened to f64 (the grad norm's) is a
// sum of exact products (48 significant bits at most), so it takes the f32
// rule's vectorized f64 sum, not the compensated f64 sum of arbitrary f64
// values (docs/backend.md, "Reductions"). x = 0, 1, ..., 1023: the sum is
// 1023 * 1024 * 2047 / 6 = 357389824 exactly; an f64 input read from
// outside stays compensated (no reassoc adds in its kernel).
// RUN: omnic %s --emit=llvm | FileCheck %s --check-prefix=LLVM
// RUN: omnic %s -o %t.bin
// RUN: omnirun %t.bin --function main | FileCheck %s

// LLVM-LABEL: define void @omni_kernel_0(
// LLVM: fadd reassoc <{{[0-9]+}} x double>
// LLVM: {{^}}}
// LLVM-LABEL: define void @omni_kernel_1(
// LLVM-NOT: reassoc
// LLVM: {{^}}}

// CHECK: result[0]: tensor<f64>=357389824
// CHECK: result[1]: tensor<f64>=0

func.func @main() -> (tensor<f64>, tensor<f64>) {
  %x = omni.iota dim = 0 : tensor<1024xf32>
  %w = omni.cast %x : tensor<1024xf32> -> tensor<1024xf64>
  %sq = omni.mul %w, %w : tensor<1024xf64>
  %s = omni.reduce sum %sq dims = [0] : tensor<1024xf64> -> tensor<f64>
  %z = omni.constant dense<0.0> : tensor<1024xf64>
  %t = call @plain(%z) : (tensor<1024xf64>) -> tensor<f64>
  return %s, %t : tensor<f64>, tensor<f64>
}

func.func private @plain(%y: tensor<1024xf64>) -> tensor<f64> {
  %s = omni.reduce sum %y dims = [0] : tensor<1024xf64> -> tensor<f64>
  return %s : tensor<f64>
}
