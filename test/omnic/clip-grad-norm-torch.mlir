// clip_grad_norm follows torch.nn.utils.clip_grad_norm_ (what flow_grpo
// calls): every gradient is multiplied by min(max_norm / (norm + 1e-6), 1),
// computed in the gradient's dtype, compiled and on the reference evaluator.
// RUN: omnic %s -o %t.bin
// RUN: omnirun %t.bin --function=f64 --input=2xf64=3,4 --output=- --output=- | FileCheck %s --check-prefix=F64
// RUN: omni-eval %s --function=f64 --input=2xf64=3,4 --output=- --output=- | FileCheck %s --check-prefix=F64
// RUN: omnirun %t.bin --function=below --input=1xf32=1 --output=- --output=- | FileCheck %s --check-prefix=BELOW
// RUN: omni-eval %s --function=below --input=1xf32=1 --output=- --output=- | FileCheck %s --check-prefix=BELOW

// f64 gradients get an f64 coefficient: norm 5, 1 / (5 + 1e-6) =
// 0.199999960000008, so [3, 4] -> [0.599999880000024, 0.799999840000032].
// The coefficient rounded to f32 (as it was) gives 0.5999998748...
// F64: result[0]: tensor<2xf64>=[0.59999988000002{{[0-9]*}} 0.79999984000003{{[0-9]*}}]
// F64: result[1]: tensor<f32>=5
func.func @f64(%g: tensor<2xf64>) -> (tensor<2xf64>, tensor<f32>) {
  %c, %n = omni.clip_grad_norm %g {max_norm = 1.0} : tensor<2xf64>
  return %c, %n : tensor<2xf64>, tensor<f32>
}

// A norm a hair below max_norm still scales (torch semantics, not "only
// when norm > max_norm"): f32(1.0000005) / (1 + f32(1e-6)) = 0.9999995 in
// f32, so the gradient 1 becomes 0.9999995, not 1.
// BELOW: result[0]: tensor<1xf32>=[0.999999523]
// BELOW: result[1]: tensor<f32>=1
func.func @below(%g: tensor<1xf32>) -> (tensor<1xf32>, tensor<f32>) {
  %c, %n = omni.clip_grad_norm %g {max_norm = 1.0000005} : tensor<1xf32>
  return %c, %n : tensor<1xf32>, tensor<f32>
}
