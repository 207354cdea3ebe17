// RUN: omni-eval %s --function=clipped_loss | FileCheck %s --check-prefix=LOSS
// RUN: omni-eval %s --function=on_policy --input=4xf32=-1.5,0.25,-3,0.7 \
// RUN:   --input=4xf32=1,-1,6,0.5 | FileCheck %s --check-prefix=ONPOLICY

// grpo_loss against docs/flowgrpo-math.md section 8: A = [1, -1, 6, 0.5] (6 clamps to
// 5), lp - old_lp = [1e-3, 1e-3, -1e-3, 0], eps_c = 1e-4.

// The loss of a batch of one sample is that sample's policy term.
func.func @term(%lp: tensor<1xf32>, %old: tensor<1xf32>, %adv: tensor<1xf32>) -> tensor<f32> {
  %loss, %akl, %cf, %kl = omni.grpo_loss %lp, %old, %adv : (tensor<1xf32>, tensor<1xf32>, tensor<1xf32>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>)
  return %loss : tensor<f32>
}

// Tests the per-sample terms [-1.0001000, 1.0010005, -4.9950023, -0.5] and
// their mean -1.3735254; approx_kl = mean(d^2) / 2 = 3.75e-7, clipfrac = 3/4
// (three ratios leave [1 - eps_c, 1 + eps_c]) and kl = 0 without KL
// operands. The loop calls @term on one sample at a time.
// LOSS: result[0]: tensor<4xf32>=[-1.00010002 1.00100052 -4.99500227 -0.5]
// LOSS: result[1]: tensor<f32>=-1.37352538
// LOSS: result[2]: tensor<f32>=3.750000{{[0-9]+}}e-07
// LOSS: result[3]: tensor<f32>=0.75
// LOSS: result[4]: tensor<f32>=0
func.func @clipped_loss() -> (tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>) {
  %lp = omni.constant dense<[1.0e-3, 1.0e-3, -1.0e-3, 0.0]> : tensor<4xf32>
  %old = omni.constant dense<0.0> : tensor<4xf32>
  %adv = omni.constant dense<[1.0, -1.0, 6.0, 0.5]> : tensor<4xf32>
  %init = tensor.empty() : tensor<4xf32>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %terms = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %init) -> (tensor<4xf32>) {
    %a = tensor.extract %lp[%i] : tensor<4xf32>
    %b = tensor.extract %old[%i] : tensor<4xf32>
    %c = tensor.extract %adv[%i] : tensor<4xf32>
    %ta = tensor.from_elements %a : tensor<1xf32>
    %tb = tensor.from_elements %b : tensor<1xf32>
    %tc = tensor.from_elements %c : tensor<1xf32>
    %t = func.call @term(%ta, %tb, %tc) : (tensor<1xf32>, tensor<1xf32>, tensor<1xf32>) -> tensor<f32>
    %tv = tensor.extract %t[] : tensor<f32>
    %next = tensor.insert %tv into %acc[%i] : tensor<4xf32>
    scf.yield %next : tensor<4xf32>
  }
  %loss, %akl, %cf, %kl = omni.grpo_loss %lp, %old, %adv {clip_range = 1.0e-4} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>)
  return %terms, %loss, %akl, %cf, %kl : tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>
}

// Tests the on-policy identity: with old_lp = lp the ratio exp(lp - old_lp)
// is exactly 1, nothing is clipped, and the loss is -mean(clamp(A, -5, 5))
// (computed here with primitives): -(1 - 1 + 5 + 0.5) / 4 = -1.375.
// ONPOLICY: result[0]: tensor<4xf32>=[1 1 1 1]
// ONPOLICY: result[1]: tensor<f32>=-1.375
// ONPOLICY: result[2]: tensor<f32>=-1.375
// ONPOLICY: result[3]: tensor<f32>=0
func.func @on_policy(%lp: tensor<4xf32>, %adv: tensor<4xf32>)
    -> (tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>) {
  %d = omni.sub %lp, %lp : tensor<4xf32>
  %ratio = omni.exp %d : tensor<4xf32>
  %loss, %akl, %cf, %kl = omni.grpo_loss %lp, %lp, %adv : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>)
  %hi = omni.constant dense<5.0> : tensor<4xf32>
  %lo = omni.constant dense<-5.0> : tensor<4xf32>
  %upper = omni.min %adv, %hi : tensor<4xf32>
  %clamped = omni.max %upper, %lo : tensor<4xf32>
  %mean = omni.reduce mean %clamped dims = [0] : tensor<4xf32> -> tensor<f32>
  %expected = omni.neg %mean : tensor<f32>
  return %ratio, %loss, %expected, %cf : tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>
}
