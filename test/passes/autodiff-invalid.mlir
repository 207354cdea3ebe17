// RUN: omni-opt %s -omni-autodiff -split-input-file -verify-diagnostics

// Tests that a host call on the path from a differentiated argument to the
// loss is reported with the op and the argument.
func.func @reward_loss(%w: tensor<2x3x4x4xf32>) -> tensor<f32> {
  // expected-error@+1 {{'omni.host_call' op is not differentiable but lies on the path from argument #0 of reward_loss to its loss}}
  %r = omni.host_call "brightness"(%w) : (tensor<2x3x4x4xf32>) -> tensor<2xf32>
  %s = omni.reduce sum %r dims = [0] : tensor<2xf32> -> tensor<f32>
  return %s : tensor<f32>
}
func.func @main(%w: tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32> {
  %g = omni.grad @reward_loss(%w) wrt = [0] : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  return %g : tensor<2x3x4x4xf32>
}

// -----

// Tests that integer math on the active path is reported.
func.func @int_loss(%w: tensor<4xf32>) -> tensor<f32> {
  // expected-error@+1 {{'omni.cast' op converts a value that depends on argument #0 of int_loss to integers on the path to its loss}}
  %i = omni.cast %w : tensor<4xf32> -> tensor<4xi32>
  %f = omni.cast %i : tensor<4xi32> -> tensor<4xf32>
  %s = omni.reduce sum %f dims = [0] : tensor<4xf32> -> tensor<f32>
  return %s : tensor<f32>
}
func.func @main(%w: tensor<4xf32>) -> tensor<4xf32> {
  %g = omni.grad @int_loss(%w) wrt = [0] : (tensor<4xf32>) -> tensor<4xf32>
  return %g : tensor<4xf32>
}

// -----

// Tests that a loop whose trip count is not a constant is reported.
func.func @dyn_loss(%w: tensor<4xf32>, %n: index) -> tensor<f32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  // expected-error@+1 {{'scf.for' op cannot be differentiated: the trip count is not a compile-time constant}}
  %x = scf.for %i = %c0 to %n step %c1 iter_args(%h = %w) -> tensor<4xf32> {
    %y = omni.mul %h, %w : tensor<4xf32>
    scf.yield %y : tensor<4xf32>
  }
  %s = omni.reduce sum %x dims = [0] : tensor<4xf32> -> tensor<f32>
  return %s : tensor<f32>
}
func.func @main(%w: tensor<4xf32>, %n: index) -> tensor<4xf32> {
  %g = omni.grad @dyn_loss(%w, %n) wrt = [0] : (tensor<4xf32>, index) -> tensor<4xf32>
  return %g : tensor<4xf32>
}

// -----

// Tests that a call to a function without a body is reported.
func.func private @external(tensor<4xf32>) -> tensor<4xf32>
func.func @ext_loss(%w: tensor<4xf32>) -> tensor<f32> {
  // expected-error@+1 {{'func.call' op cannot be differentiated through: @external must be a func.func with a one-block body}}
  %y = func.call @external(%w) : (tensor<4xf32>) -> tensor<4xf32>
  %s = omni.reduce sum %y dims = [0] : tensor<4xf32> -> tensor<f32>
  return %s : tensor<f32>
}
func.func @main(%w: tensor<4xf32>) -> tensor<4xf32> {
  %g = omni.grad @ext_loss(%w) wrt = [0] : (tensor<4xf32>) -> tensor<4xf32>
  return %g : tensor<4xf32>
}

// -----

// Tests that sde_step in rollout form cannot hide a random draw: the noise
// is an input, and only x and v are differentiated (no diagnostic needed),
// whereas a random draw scaled by the parameter is fine (its adjoint stops
// at the random op, which has no float operands).
func.func @noise_loss(%w: tensor<4xf32>, %k: tensor<i64>) -> tensor<f32> {
  %e = omni.random_normal %k, %k, %k : tensor<4xf32>
  %y = omni.mul %w, %e : tensor<4xf32>
  %s = omni.reduce sum %y dims = [0] : tensor<4xf32> -> tensor<f32>
  return %s : tensor<f32>
}
func.func @main(%w: tensor<4xf32>, %k: tensor<i64>) -> tensor<4xf32> {
  %g = omni.grad @noise_loss(%w, %k) wrt = [0] : (tensor<4xf32>, tensor<i64>) -> tensor<4xf32>
  return %g : tensor<4xf32>
}

// -----

// Tests that a dependence through a float scalar (tensor.extract and
// tensor.from_elements) is reported instead of giving a zero gradient.
func.func @scalar_loss(%w: tensor<4xf32>) -> tensor<f32> {
  %c0 = arith.constant 0 : index
  %s = tensor.extract %w[%c0] : tensor<4xf32>
  // expected-error@+1 {{'tensor.from_elements' op is not differentiable but lies on the path from argument #0 of scalar_loss to its loss}}
  %t = tensor.from_elements %s : tensor<f32>
  return %t : tensor<f32>
}
func.func @main(%w: tensor<4xf32>) -> tensor<4xf32> {
  %g = omni.grad @scalar_loss(%w) wrt = [0] : (tensor<4xf32>) -> tensor<4xf32>
  return %g : tensor<4xf32>
}
