// RUN: omni-opt %s -omni-autodiff -split-input-file | FileCheck %s

// Tests that a parameter used twice gets the summed adjoint (fan-out), a
// frozen argument gets no adjoint code, and an unused one a zero gradient.
// CHECK-LABEL: func.func private @loss_grad_0_3
// CHECK-SAME: (%[[W:.*]]: tensor<4xf32>, %[[X:.*]]: tensor<4xf32>, %[[F:.*]]: tensor<4xf32>, %{{.*}}: tensor<3xf32>)
// CHECK: %[[Y:.*]] = omni.mul %[[W]], %[[X]]
// CHECK: %[[ONE:.*]] = omni.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[G:.*]] = omni.broadcast_in_dim %[[ONE]], dims = []
// CHECK: %[[GZ:.*]] = omni.mul %[[G]], %[[F]]
// CHECK-DAG: %[[A1:.*]] = omni.mul %[[GZ]], %[[Y]]
// CHECK-DAG: %[[GY:.*]] = omni.mul %[[GZ]], %[[W]]
// CHECK: %[[A2:.*]] = omni.mul %[[GY]], %[[X]]
// CHECK: %[[SUM:.*]] = omni.add %[[A1]], %[[A2]]
// CHECK-NOT: %[[F]]
// CHECK: %[[Z:.*]] = omni.constant dense<0.000000e+00> : tensor<3xf32>
// CHECK: return %[[SUM]], %[[Z]]
// CHECK-LABEL: func.func @main
// CHECK: call @loss_grad_0_3
// CHECK-NOT: omni.grad
func.func @loss(%w: tensor<4xf32>, %x: tensor<4xf32>, %frozen: tensor<4xf32>, %unused: tensor<3xf32>) -> tensor<f32> {
  %y = omni.mul %w, %x : tensor<4xf32>
  %z = omni.mul %y, %w : tensor<4xf32>
  %f = omni.mul %z, %frozen : tensor<4xf32>
  %s = omni.reduce sum %f dims = [0] : tensor<4xf32> -> tensor<f32>
  return %s : tensor<f32>
}
func.func @main(%w: tensor<4xf32>, %x: tensor<4xf32>, %fr: tensor<4xf32>, %u: tensor<3xf32>) -> (tensor<4xf32>, tensor<3xf32>) {
  %gw, %gu = omni.grad @loss(%w, %x, %fr, %u) wrt = [0, 3] : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<3xf32>) -> (tensor<4xf32>, tensor<3xf32>)
  return %gw, %gu : tensor<4xf32>, tensor<3xf32>
}

// -----

// Tests that value_and_grad returns the callee's results (loss and metrics)
// before the gradient, that model calls are inlined, and that a loop with a
// static trip count is unrolled.
// CHECK-LABEL: func.func private @loss_value_and_grad_0
// CHECK-NOT: call
// CHECK-NOT: scf.for
// CHECK: omni.matmul
// CHECK: omni.matmul
// CHECK: omni.matmul
// CHECK: return %{{.*}}, %{{.*}}, %{{.*}} : tensor<f32>, tensor<2x4xf32>, tensor<4x4xf32>
// CHECK-LABEL: func.func @step
// CHECK: %{{.*}}:3 = call @loss_value_and_grad_0
func.func @model(%w: tensor<4x4xf32>, %x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %y = omni.matmul %x, %w : tensor<2x4xf32>, tensor<4x4xf32> -> tensor<2x4xf32>
  %t = omni.tanh %y : tensor<2x4xf32>
  return %t : tensor<2x4xf32>
}
func.func @loss(%w: tensor<4x4xf32>, %x0: tensor<2x4xf32>) -> (tensor<f32>, tensor<2x4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %x = scf.for %i = %c0 to %c3 step %c1 iter_args(%h = %x0) -> tensor<2x4xf32> {
    %n = func.call @model(%w, %h) : (tensor<4x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    scf.yield %n : tensor<2x4xf32>
  }
  %s = omni.reduce sum %x dims = [0, 1] : tensor<2x4xf32> -> tensor<f32>
  return %s, %x : tensor<f32>, tensor<2x4xf32>
}
func.func @step(%w: tensor<4x4xf32>, %x: tensor<2x4xf32>) -> (tensor<f32>, tensor<4x4xf32>) {
  %l, %out, %g = omni.value_and_grad @loss(%w, %x) wrt = [0] : (tensor<4x4xf32>, tensor<2x4xf32>) -> (tensor<f32>, tensor<2x4xf32>, tensor<4x4xf32>)
  return %l, %g : tensor<f32>, tensor<4x4xf32>
}

// -----

// Tests that with recompute=block the ops of @block are recomputed in the
// backward program (after the loss seed, marked omni.recomputed so that CSE
// does not merge them back) instead of being kept alive from the forward
// program; the op that computes the block's result is not recomputed (the
// result is the checkpoint), and the forward's tanh, which only the
// backward read, is gone. By default the forward value is saved.
// RUN: omni-opt %s -omni-autodiff=recompute=block -split-input-file | FileCheck %s --check-prefix=REMAT
// CHECK-LABEL: func.func private @remat_loss_grad_0
// CHECK: omni.tanh
// CHECK: omni.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NOT: omni.tanh
// CHECK: return
// REMAT-LABEL: func.func private @remat_loss_grad_0
// REMAT-NOT: omni.tanh
// REMAT: omni.constant dense<1.000000e+00> : tensor<f32>
// REMAT: %[[Y:.*]] = omni.mul %arg0, %arg1 {omni.recomputed} : tensor<4xf32>
// REMAT: omni.tanh %[[Y]] {omni.recomputed} : tensor<4xf32>
// REMAT: return
func.func @block(%w: tensor<4xf32>, %x: tensor<4xf32>) -> tensor<4xf32> {
  %y = omni.mul %w, %x : tensor<4xf32>
  %t = omni.tanh %y : tensor<4xf32>
  %o = omni.mul %t, %x : tensor<4xf32>
  return %o : tensor<4xf32>
}
func.func @remat_loss(%w: tensor<4xf32>, %x: tensor<4xf32>) -> tensor<f32> {
  %t = func.call @block(%w, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %s = omni.reduce sum %t dims = [0] : tensor<4xf32> -> tensor<f32>
  return %s : tensor<f32>
}
func.func @use_remat(%w: tensor<4xf32>, %x: tensor<4xf32>) -> tensor<4xf32> {
  %g = omni.grad @remat_loss(%w, %x) wrt = [0] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %g : tensor<4xf32>
}

// -----

// Tests that a recomputed block's cast of an argument to a narrower type (a
// weight's bf16 copy) is not recomputed: the backward program reads the
// forward's copy, which costs no more memory than the argument it is made
// from, while the op on the activations is recomputed.
// REMAT-LABEL: func.func private @cast_loss_grad_0
// REMAT: %[[WB:.*]] = omni.cast %arg0 : tensor<4xf32> -> tensor<4xbf16>
// REMAT: omni.constant dense<1.000000e+00> : tensor<f32>
// REMAT-NOT: omni.cast %arg0
// REMAT: %[[XT:.*]] = omni.tanh %arg1 {omni.recomputed} : tensor<4xf32>
// REMAT: %[[XB:.*]] = omni.cast %[[XT]] {omni.recomputed} : tensor<4xf32> -> tensor<4xbf16>
// REMAT: omni.mul %[[WB]], %[[XB]] {omni.recomputed} : tensor<4xbf16>
// REMAT: return
func.func @block(%w: tensor<4xf32>, %x: tensor<4xf32>) -> tensor<4xf32> {
  %wb = omni.cast %w : tensor<4xf32> -> tensor<4xbf16>
  %xt = omni.tanh %x : tensor<4xf32>
  %xb = omni.cast %xt : tensor<4xf32> -> tensor<4xbf16>
  %y = omni.mul %wb, %xb : tensor<4xbf16>
  %t = omni.tanh %y : tensor<4xbf16>
  %o = omni.cast %t : tensor<4xbf16> -> tensor<4xf32>
  return %o : tensor<4xf32>
}
func.func @cast_loss(%w: tensor<4xf32>, %x: tensor<4xf32>) -> tensor<f32> {
  %t = func.call @block(%w, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %s = omni.reduce sum %t dims = [0] : tensor<4xf32> -> tensor<f32>
  return %s : tensor<f32>
}
func.func @use_cast(%w: tensor<4xf32>, %x: tensor<4xf32>) -> tensor<4xf32> {
  %g = omni.grad @cast_loss(%w, %x) wrt = [0] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %g : tensor<4xf32>
}

// -----

// Tests that a function the frontend marked omni.recompute (with no_inline,
// layers::RecomputedBlock) is recomputed without the option, and that its
// calls outside gradients are inlined and the function erased.
// CHECK-NOT: @marked_block
// CHECK-LABEL: func.func private @marked_loss_grad_0
// CHECK: omni.constant dense<1.000000e+00> : tensor<f32>
// CHECK: omni.tanh {{.*}} {omni.recomputed}
// CHECK-LABEL: func.func @plain
// CHECK-NOT: func.call
// CHECK: omni.tanh
func.func private @marked_block(%w: tensor<4xf32>, %x: tensor<4xf32>) -> tensor<4xf32> attributes {no_inline, omni.recompute} {
  %y = omni.mul %w, %x : tensor<4xf32>
  %t = omni.tanh %y : tensor<4xf32>
  %o = omni.mul %t, %x : tensor<4xf32>
  return %o : tensor<4xf32>
}
func.func @marked_loss(%w: tensor<4xf32>, %x: tensor<4xf32>) -> tensor<f32> {
  %t = func.call @marked_block(%w, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %s = omni.reduce sum %t dims = [0] : tensor<4xf32> -> tensor<f32>
  return %s : tensor<f32>
}
func.func @use_marked(%w: tensor<4xf32>, %x: tensor<4xf32>) -> tensor<4xf32> {
  %g = omni.grad @marked_loss(%w, %x) wrt = [0] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %g : tensor<4xf32>
}
func.func @plain(%w: tensor<4xf32>, %x: tensor<4xf32>) -> tensor<4xf32> {
  %t = func.call @marked_block(%w, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %t : tensor<4xf32>
}
