// RUN: omni-opt %s -omni-hoist-loop-scalars -split-input-file | FileCheck %s

// Tests that the read of a 0-D tensor defined outside the loop and the index
// arithmetic on it leave the loop (the FlowGRPO train loop's window start),
// while the arithmetic on the induction variable and the slice stay.
// CHECK-LABEL: func.func @window_start
// CHECK: %[[S:.*]] = tensor.extract %arg1[] : tensor<i64>
// CHECK-NEXT: %[[I:.*]] = arith.index_cast %[[S]] : i64 to index
// CHECK-NEXT: scf.for %[[K:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args
// CHECK-NEXT: %[[J:.*]] = arith.addi %[[I]], %[[K]] : index
// CHECK-NEXT: tensor.extract_slice %arg0[%[[J]], 0] [1, 8] [1, 1]
func.func @window_start(%stack: tensor<6x8xf32>, %start: tensor<i64>,
                        %init: tensor<1x8xf32>) -> tensor<1x8xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %r = scf.for %k = %c0 to %c4 step %c1 iter_args(%acc = %init) -> tensor<1x8xf32> {
    %s = tensor.extract %start[] : tensor<i64>
    %i = arith.index_cast %s : i64 to index
    %j = arith.addi %i, %k : index
    %x = tensor.extract_slice %stack[%j, 0] [1, 8] [1, 1] : tensor<6x8xf32> to tensor<1x8xf32>
    %y = omni.add %acc, %x : tensor<1x8xf32>
    scf.yield %y : tensor<1x8xf32>
  }
  return %r : tensor<1x8xf32>
}

// -----

// Tests that reads of a tensor the loop carries, reads of a 1-D tensor (an
// index may be out of bounds, so they are not speculatable), division (by
// zero is not speculatable) and tensor-valued ops stay in the loop.
// CHECK-LABEL: func.func @stays
// CHECK: scf.for
// CHECK: tensor.extract %{{.*}}[] : tensor<i64>
// CHECK: tensor.extract %arg1[%{{.*}}] : tensor<4xi64>
// CHECK: arith.divsi
// CHECK: tensor.from_elements
// CHECK: scf.yield
func.func @stays(%init: tensor<i64>, %table: tensor<4xi64>, %d: i64,
                 %e: i64) -> tensor<i64> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c2 = arith.constant 2 : index
  %r = scf.for %k = %c0 to %c4 step %c1 iter_args(%acc = %init) -> tensor<i64> {
    %a = tensor.extract %acc[] : tensor<i64>
    %t = tensor.extract %table[%c2] : tensor<4xi64>
    %q = arith.divsi %d, %e : i64
    %u = arith.addi %a, %t : i64
    %s = arith.addi %u, %q : i64
    %n = tensor.from_elements %s : tensor<i64>
    scf.yield %n : tensor<i64>
  }
  return %r : tensor<i64>
}

// -----

// Tests that a scalar leaves nested loops as far as its operands allow: the
// read of %start leaves both loops, the sum with the outer induction
// variable only the inner one.
// CHECK-LABEL: func.func @nested
// CHECK: tensor.extract %arg0[] : tensor<i64>
// CHECK-NEXT: arith.index_cast
// CHECK-NEXT: scf.for %[[O:[^ ]*]] =
// CHECK-NEXT: arith.addi %{{.*}}, %[[O]] : index
// CHECK-NEXT: scf.for
// CHECK-NEXT: tensor.extract_slice
func.func @nested(%start: tensor<i64>, %stack: tensor<16x8xf32>,
                  %init: tensor<1x8xf32>) -> tensor<1x8xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %r = scf.for %o = %c0 to %c2 step %c1 iter_args(%a = %init) -> tensor<1x8xf32> {
    %r2 = scf.for %k = %c0 to %c2 step %c1 iter_args(%b = %a) -> tensor<1x8xf32> {
      %s = tensor.extract %start[] : tensor<i64>
      %i = arith.index_cast %s : i64 to index
      %j = arith.addi %i, %o : index
      %x = tensor.extract_slice %stack[%j, 0] [1, 8] [1, 1] : tensor<16x8xf32> to tensor<1x8xf32>
      %y = omni.add %b, %x : tensor<1x8xf32>
      scf.yield %y : tensor<1x8xf32>
    }
    scf.yield %r2 : tensor<1x8xf32>
  }
  return %r : tensor<1x8xf32>
}

// -----

// Tests that a cast of a float tensor defined outside the loop to a 16-bit
// float (a weight's bf16 copy, which a denoise loop would otherwise make at
// every step) leaves the loop and replaces the same cast after the loop
// (the train phase's), while a widening cast of the same tensor, a cast to
// f32 (schedule arithmetic) and a cast of the carried value stay.
// CHECK-LABEL: func.func @narrowing_casts
// CHECK: %[[W:.*]] = omni.cast %arg0 : tensor<4x4xf32> -> tensor<4x4xbf16>
// CHECK-NEXT: scf.for
// CHECK-NOT: omni.cast %arg0 : tensor<4x4xf32> -> tensor<4x4xbf16>
// CHECK: omni.cast %arg0 : tensor<4x4xf32> -> tensor<4x4xf64>
// CHECK: omni.cast %arg2 : tensor<4x4xf64> -> tensor<4x4xf32>
// CHECK: omni.cast %{{.*}} : tensor<4x4xf32> -> tensor<4x4xbf16>
// CHECK: scf.yield
// CHECK-NOT: omni.cast %arg0
// CHECK: return %{{.*}}, %{{.*}}, %[[W]]
func.func @narrowing_casts(%w: tensor<4x4xf32>, %init: tensor<4x4xf32>,
                           %sigma: tensor<4x4xf64>)
    -> (tensor<4x4xf32>, tensor<4x4xf64>, tensor<4x4xbf16>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %z = omni.constant dense<0.0> : tensor<4x4xf64>
  %r:2 = scf.for %k = %c0 to %c4 step %c1 iter_args(%x = %init, %s = %z)
      -> (tensor<4x4xf32>, tensor<4x4xf64>) {
    %wb = omni.cast %w : tensor<4x4xf32> -> tensor<4x4xbf16>
    %wd = omni.cast %w : tensor<4x4xf32> -> tensor<4x4xf64>
    %sf = omni.cast %sigma : tensor<4x4xf64> -> tensor<4x4xf32>
    %xs = omni.mul %x, %sf : tensor<4x4xf32>
    %xb = omni.cast %xs : tensor<4x4xf32> -> tensor<4x4xbf16>
    %p = omni.matmul %xb, %wb : tensor<4x4xbf16>, tensor<4x4xbf16> -> tensor<4x4xbf16>
    %y = omni.cast %p : tensor<4x4xbf16> -> tensor<4x4xf32>
    %t = omni.add %s, %wd : tensor<4x4xf64>
    scf.yield %y, %t : tensor<4x4xf32>, tensor<4x4xf64>
  }
  %after = omni.cast %w : tensor<4x4xf32> -> tensor<4x4xbf16>
  return %r#0, %r#1, %after : tensor<4x4xf32>, tensor<4x4xf64>, tensor<4x4xbf16>
}

// -----

// Tests that the same weight cast in two loops (a rollout in chunks) leaves
// both and is made once: the second loop's hoisted cast merges into the
// first's.
// CHECK-LABEL: func.func @two_loops
// CHECK: %[[W:.*]] = omni.cast %arg0 : tensor<4x4xf32> -> tensor<4x4xbf16>
// CHECK-NOT: omni.cast %arg0
// CHECK: scf.for
// CHECK: omni.matmul %{{.*}}, %[[W]]
// CHECK: scf.for
// CHECK: omni.matmul %{{.*}}, %[[W]]
func.func @two_loops(%w: tensor<4x4xf32>, %init: tensor<4x4xbf16>)
    -> tensor<4x4xbf16> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %r = scf.for %k = %c0 to %c4 step %c1 iter_args(%x = %init) -> tensor<4x4xbf16> {
    %wb = omni.cast %w : tensor<4x4xf32> -> tensor<4x4xbf16>
    %y = omni.matmul %x, %wb : tensor<4x4xbf16>, tensor<4x4xbf16> -> tensor<4x4xbf16>
    scf.yield %y : tensor<4x4xbf16>
  }
  %s = scf.for %k = %c0 to %c4 step %c1 iter_args(%x = %r) -> tensor<4x4xbf16> {
    %wb = omni.cast %w : tensor<4x4xf32> -> tensor<4x4xbf16>
    %y = omni.matmul %x, %wb : tensor<4x4xbf16>, tensor<4x4xbf16> -> tensor<4x4xbf16>
    scf.yield %y : tensor<4x4xbf16>
  }
  return %s : tensor<4x4xbf16>
}
