// RUN: omni-opt %s -omni-fuse -split-input-file | FileCheck %s

// Tests that a forward group does not take in a recomputed op (omni-autodiff
// marks its copies omni.recomputed; docs/fusion.md rule 6): the copy stays
// after the backward matmul between them, in a region of its own. Without
// the mark the two merge and the matmul moves above them.
// CHECK-LABEL: func.func @recomputed_consumer
// CHECK: omni.fusion
// CHECK: omni.exp
// CHECK: omni.yield
// CHECK: omni.matmul
// CHECK: omni.fusion
// CHECK: omni.mul {{.*}} {omni.recomputed}
// CHECK-LABEL: func.func @plain_consumer
// CHECK: omni.matmul
// CHECK: omni.fusion
// CHECK: omni.exp
// CHECK-NEXT: omni.mul
func.func @recomputed_consumer(%x: tensor<4x4xf32>, %y: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
  %a = omni.exp %x : tensor<4x4xf32>
  %m = omni.matmul %y, %w : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %b = omni.mul %a, %m {omni.recomputed} : tensor<4x4xf32>
  return %a, %m, %b : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}
func.func @plain_consumer(%x: tensor<4x4xf32>, %y: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
  %a = omni.exp %x : tensor<4x4xf32>
  %m = omni.matmul %y, %w : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %b = omni.mul %a, %m : tensor<4x4xf32>
  return %a, %m, %b : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// Tests that a forward group does not move a recomputed op above itself
// (rule 3's reordering): the recomputed matmul copy between the exp and its
// consumer stays where omni-autodiff put it.
// CHECK-LABEL: func.func @recomputed_between
// CHECK: omni.fusion
// CHECK: omni.exp
// CHECK: omni.yield
// CHECK: omni.matmul {{.*}} {omni.recomputed}
// CHECK: omni.fusion
// CHECK: omni.neg
func.func @recomputed_between(%x: tensor<4x4xf32>, %y: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
  %a = omni.exp %x : tensor<4x4xf32>
  %m = omni.matmul %y, %w {omni.recomputed} : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %b = omni.neg %a : tensor<4x4xf32>
  return %a, %m, %b : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}
