// The global gradient norm is accumulated in f64: a norm whose square
// overflows f32 (here 4.2e19) is still finite and clips, as the reference
// evaluator computes it, instead of skipping the update.
// RUN: omnic %s -o %t.bin
// RUN: omnirun %t.bin --function=f --input=2xf32=3e19,3e19 --output=- --output=- | FileCheck %s
// RUN: omni-eval %s --function=f --input=2xf32=3e19,3e19 --output=- --output=- | FileCheck %s

// CHECK: result[0]: tensor<2xf32>=[0.707106{{[0-9]*}} 0.707106{{[0-9]*}}]
// CHECK: result[1]: tensor<f32>=4.24264{{[0-9]*}}e+19
func.func @f(%g: tensor<2xf32>) -> (tensor<2xf32>, tensor<f32>) {
  %c, %n = omni.clip_grad_norm %g {max_norm = 1.0} : tensor<2xf32>
  return %c, %n : tensor<2xf32>, tensor<f32>
}
