// Tests that the registered omni-pipeline runs what omnic runs, in order:
// inlining, autodiff (the grad marker disappears), decomposition (no
// composite is left), fusion and memory planning (every allocating op has
// offsets, the function an arena size).
// RUN: omni-opt %s --omni-pipeline | FileCheck %s
// RUN: omnic %s --emit=plan-memory | FileCheck %s

func.func private @model(%w: tensor<4x8xf32>, %x: tensor<2x8xf32>) -> tensor<2x4xf32> {
  %y = omni.linear %x, %w : (tensor<2x8xf32>, tensor<4x8xf32>) -> tensor<2x4xf32>
  %a = omni.silu %y : tensor<2x4xf32>
  return %a : tensor<2x4xf32>
}
func.func @loss(%w: tensor<4x8xf32>, %x: tensor<2x8xf32>) -> tensor<f32> {
  %y = func.call @model(%w, %x) : (tensor<4x8xf32>, tensor<2x8xf32>) -> tensor<2x4xf32>
  %s = omni.reduce mean %y dims = [0, 1] : tensor<2x4xf32> -> tensor<f32>
  return %s : tensor<f32>
}
func.func @step(%w: tensor<4x8xf32>, %x: tensor<2x8xf32>) -> (tensor<f32>, tensor<4x8xf32>) {
  %l, %g = omni.value_and_grad @loss(%w, %x) wrt = [0] : (tensor<4x8xf32>, tensor<2x8xf32>) -> (tensor<f32>, tensor<4x8xf32>)
  return %l, %g : tensor<f32>, tensor<4x8xf32>
}

// CHECK-NOT: func.call
// CHECK-LABEL: func.func @loss
// CHECK-SAME: omni.arena_size
// CHECK-LABEL: func.func @step
// CHECK-SAME: omni.arena_size
// CHECK-NOT: omni.value_and_grad
// CHECK-NOT: omni.linear
// CHECK-NOT: omni.silu
// CHECK: omni.matmul {{.*}}omni.offsets
// CHECK: omni.fusion
// CHECK: omni.matmul {{.*}}omni.offsets
// CHECK: return
