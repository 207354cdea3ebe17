// RUN: omni-opt %s -omni-move-reshapes -split-input-file | FileCheck %s
// RUN: omni-opt %s -omni-move-reshapes -omni-fuse -split-input-file | FileCheck %s --check-prefix=FUSE

// Tests an attention's query path: the projection's bias add and widening
// (bf16 -> f32), the reshape to heads and the per-head RMS norm, transposed.
// The reshape moves up to the matmul's result and the bias (the broadcast of
// [64] to [2, 8, 64], reshaped to [2, 8, 4, 16], is [4, 16] broadcast), so
// omni-fuse makes the whole path one kernel that reads the bf16 product.
// CHECK-LABEL: func.func @query_path
// CHECK: %[[Y:.*]] = omni.matmul
// CHECK-DAG: %[[YH:.*]] = omni.reshape %[[Y]] : tensor<2x8x64xbf16> -> tensor<2x8x4x16xbf16>
// CHECK-DAG: %[[BH:.*]] = omni.reshape %arg2 : tensor<64xf32> -> tensor<4x16xf32>
// CHECK-DAG: %[[F:.*]] = omni.cast %[[YH]] : tensor<2x8x4x16xbf16> -> tensor<2x8x4x16xf32>
// CHECK-DAG: %[[B:.*]] = omni.broadcast_in_dim %[[BH]], dims = [2, 3] : tensor<4x16xf32> -> tensor<2x8x4x16xf32>
// CHECK: %[[A:.*]] = omni.add %[[F]], %[[B]] : tensor<2x8x4x16xf32>
// CHECK: omni.transpose %[[A]]
// CHECK-NOT: omni.reshape
// CHECK: return
// FUSE-LABEL: func.func @query_path
// FUSE: omni.matmul
// FUSE: omni.fusion
// FUSE-NOT: omni.fusion
// FUSE: omni.cast {{.*}} -> tensor<2x4x8x16xbf16>
// FUSE-NEXT: omni.yield
// FUSE-NEXT: }
// FUSE-NEXT: return
func.func @query_path(%x: tensor<2x8x64xbf16>, %w: tensor<64x64xbf16>,
                      %bias: tensor<64xf32>, %g: tensor<16xf32>)
    -> tensor<2x4x8x16xbf16> {
  %y = omni.matmul %x, %w transpose_rhs : tensor<2x8x64xbf16>, tensor<64x64xbf16> -> tensor<2x8x64xbf16>
  %f = omni.cast %y : tensor<2x8x64xbf16> -> tensor<2x8x64xf32>
  %b = omni.broadcast_in_dim %bias, dims = [2] : tensor<64xf32> -> tensor<2x8x64xf32>
  %a = omni.add %f, %b : tensor<2x8x64xf32>
  %h = omni.reshape %a : tensor<2x8x64xf32> -> tensor<2x8x4x16xf32>
  %t = omni.transpose %h, permutation = [0, 2, 1, 3] : tensor<2x8x4x16xf32> -> tensor<2x4x8x16xf32>
  %sq = omni.mul %t, %t : tensor<2x4x8x16xf32>
  %ms = omni.reduce mean %sq dims = [3] : tensor<2x4x8x16xf32> -> tensor<2x4x8xf32>
  %eps = omni.constant dense<1.0e-6> : tensor<2x4x8xf32>
  %v = omni.add %ms, %eps : tensor<2x4x8xf32>
  %r = omni.rsqrt %v : tensor<2x4x8xf32>
  %rb = omni.broadcast_in_dim %r, dims = [0, 1, 2] : tensor<2x4x8xf32> -> tensor<2x4x8x16xf32>
  %n = omni.mul %t, %rb : tensor<2x4x8x16xf32>
  %gb = omni.broadcast_in_dim %g, dims = [3] : tensor<16xf32> -> tensor<2x4x8x16xf32>
  %o = omni.mul %n, %gb : tensor<2x4x8x16xf32>
  %q = omni.cast %o : tensor<2x4x8x16xf32> -> tensor<2x4x8x16xbf16>
  return %q : tensor<2x4x8x16xbf16>
}

// -----

// Tests the attention's output path: back to [B, S, H, D], the reshape to
// tokens, the image tokens sliced off and rounded for the out projection.
// The reshape moves down through the slice (of the token dimension, which
// the reshape keeps) and the cast to the matmul, so the path is one kernel.
// CHECK-LABEL: func.func @output_path
// CHECK: %[[T:.*]] = omni.transpose
// CHECK: %[[S:.*]] = omni.slice %[[T]] [0:2:1, 0:6:1, 0:4:1, 0:16:1] : tensor<2x8x4x16xf32> -> tensor<2x6x4x16xf32>
// CHECK: %[[C:.*]] = omni.cast %[[S]] : tensor<2x6x4x16xf32> -> tensor<2x6x4x16xbf16>
// CHECK: %[[R:.*]] = omni.reshape %[[C]] : tensor<2x6x4x16xbf16> -> tensor<2x6x64xbf16>
// CHECK: omni.matmul %[[R]], %arg1
// FUSE-LABEL: func.func @output_path
// FUSE: omni.fusion
// FUSE-NOT: omni.fusion
// FUSE: omni.reshape
// FUSE-NEXT: omni.matmul
func.func @output_path(%o: tensor<2x4x8x16xbf16>, %w: tensor<64x64xbf16>)
    -> tensor<2x6x64xbf16> {
  %f = omni.cast %o : tensor<2x4x8x16xbf16> -> tensor<2x4x8x16xf32>
  %t = omni.transpose %f, permutation = [0, 2, 1, 3] : tensor<2x4x8x16xf32> -> tensor<2x8x4x16xf32>
  %r = omni.reshape %t : tensor<2x8x4x16xf32> -> tensor<2x8x64xf32>
  %s = omni.slice %r [0:2:1, 0:6:1, 0:64:1] : tensor<2x8x64xf32> -> tensor<2x6x64xf32>
  %c = omni.cast %s : tensor<2x6x64xf32> -> tensor<2x6x64xbf16>
  %y = omni.matmul %c, %w transpose_rhs : tensor<2x6x64xbf16>, tensor<64x64xbf16> -> tensor<2x6x64xbf16>
  return %y : tensor<2x6x64xbf16>
}

// -----

// Tests that a narrowing cast of a concatenation becomes the concatenation
// of the casts (the image and text heads, each normed in its own kernel:
// each kernel now rounds its heads to bf16), and that a widening one stays.
// CHECK-LABEL: func.func @cast_of_concat
// CHECK-DAG: %[[A:.*]] = omni.cast %arg0 : tensor<2x4x6x16xf32> -> tensor<2x4x6x16xbf16>
// CHECK-DAG: %[[B:.*]] = omni.cast %arg1 : tensor<2x4x2x16xf32> -> tensor<2x4x2x16xbf16>
// CHECK: %[[J:.*]] = omni.concat %[[A]], %[[B]] dim = 2 : (tensor<2x4x6x16xbf16>, tensor<2x4x2x16xbf16>) -> tensor<2x4x8x16xbf16>
// CHECK: %[[W:.*]] = omni.concat %arg2, %arg3 dim = 0
// CHECK: omni.cast %[[W]] : tensor<4xbf16> -> tensor<4xf32>
// CHECK: return %[[J]]
func.func @cast_of_concat(%a: tensor<2x4x6x16xf32>, %b: tensor<2x4x2x16xf32>,
                          %c: tensor<2xbf16>, %d: tensor<2xbf16>)
    -> (tensor<2x4x8x16xbf16>, tensor<4xf32>) {
  %j = omni.concat %a, %b dim = 2 : (tensor<2x4x6x16xf32>, tensor<2x4x2x16xf32>) -> tensor<2x4x8x16xf32>
  %n = omni.cast %j : tensor<2x4x8x16xf32> -> tensor<2x4x8x16xbf16>
  %w = omni.concat %c, %d dim = 0 : (tensor<2xbf16>, tensor<2xbf16>) -> tensor<4xbf16>
  %f = omni.cast %w : tensor<4xbf16> -> tensor<4xf32>
  return %n, %f : tensor<2x4x8x16xbf16>, tensor<4xf32>
}

// -----

// Tests the reshapes that stay:
// - %e is read twice (moving the reshape up would compute it twice), and
//   a transpose is not an op a reshape moves down through;
// - the broadcast of %v along dim 1 of [2, 8, 4] is no broadcast of a
//   source once dims 1 and 2 merge (that would be a partial broadcast);
// - %m is read twice, and the slice cuts dim 1 of [2, 32], which the
//   reshape made of [8, 4];
// - a reshape of an argument is already at an edge;
// - a reshape inside a fusion region is the region's business.
// CHECK-LABEL: func.func @stays
// CHECK: %[[E:.*]] = omni.exp %arg0
// CHECK: omni.reshape %[[E]] : tensor<2x8x4xf32> -> tensor<2x32xf32>
// CHECK: %[[BV:.*]] = omni.broadcast_in_dim %arg1
// CHECK: omni.reshape %[[BV]] : tensor<2x8x4xf32> -> tensor<2x32xf32>
// CHECK: %[[M:.*]] = omni.neg %arg0
// CHECK: %[[R3:.*]] = omni.reshape %[[M]] : tensor<2x8x4xf32> -> tensor<2x32xf32>
// CHECK: omni.slice %[[R3]] [0:2:1, 0:16:1]
// CHECK: %[[R4:.*]] = omni.reshape %arg0 : tensor<2x8x4xf32> -> tensor<2x32xf32>
// CHECK: omni.neg %[[R4]]
// CHECK: omni.fusion
// CHECK: omni.reshape
// CHECK: omni.yield
func.func @stays(%x: tensor<2x8x4xf32>, %v: tensor<8xf32>)
    -> (tensor<32x2xf32>, tensor<2x8x4xf32>, tensor<32x2xf32>,
        tensor<2x16xf32>, tensor<2x8x4xf32>, tensor<2x32xf32>,
        tensor<2x32xf32>) {
  %e = omni.exp %x : tensor<2x8x4xf32>
  %r = omni.reshape %e : tensor<2x8x4xf32> -> tensor<2x32xf32>
  %t = omni.transpose %r, permutation = [1, 0] : tensor<2x32xf32> -> tensor<32x2xf32>
  %bv = omni.broadcast_in_dim %v, dims = [1] : tensor<8xf32> -> tensor<2x8x4xf32>
  %r2 = omni.reshape %bv : tensor<2x8x4xf32> -> tensor<2x32xf32>
  %t2 = omni.transpose %r2, permutation = [1, 0] : tensor<2x32xf32> -> tensor<32x2xf32>
  %m = omni.neg %x : tensor<2x8x4xf32>
  %r3 = omni.reshape %m : tensor<2x8x4xf32> -> tensor<2x32xf32>
  %s = omni.slice %r3 [0:2:1, 0:16:1] : tensor<2x32xf32> -> tensor<2x16xf32>
  %r4 = omni.reshape %x : tensor<2x8x4xf32> -> tensor<2x32xf32>
  %k = omni.neg %r4 : tensor<2x32xf32>
  %z = omni.fusion(%x) : (tensor<2x8x4xf32>) -> tensor<2x32xf32> {
  ^bb0(%in: tensor<2x8x4xf32>):
    %i = omni.exp %in : tensor<2x8x4xf32>
    %j = omni.reshape %i : tensor<2x8x4xf32> -> tensor<2x32xf32>
    omni.yield %j : tensor<2x32xf32>
  }
  return %t, %e, %t2, %s, %m, %k, %z : tensor<32x2xf32>, tensor<2x8x4xf32>, tensor<32x2xf32>, tensor<2x16xf32>, tensor<2x8x4xf32>, tensor<2x32xf32>, tensor<2x32xf32>
}

// -----

// Tests that a reshape moves down through an elementwise chain to the
// function's result when it cannot move up (a broadcast that merges a
// mapped and a broadcast dimension), so the chain is one kernel.
// CHECK-LABEL: func.func @sinks_to_result
// CHECK: %[[BV:.*]] = omni.broadcast_in_dim %arg0
// CHECK: %[[N:.*]] = omni.neg %[[BV]] : tensor<2x8x4xf32>
// CHECK: %[[R:.*]] = omni.reshape %[[N]] : tensor<2x8x4xf32> -> tensor<2x32xf32>
// CHECK: return %[[R]]
func.func @sinks_to_result(%v: tensor<8xf32>) -> tensor<2x32xf32> {
  %bv = omni.broadcast_in_dim %v, dims = [1] : tensor<8xf32> -> tensor<2x8x4xf32>
  %r = omni.reshape %bv : tensor<2x8x4xf32> -> tensor<2x32xf32>
  %n = omni.neg %r : tensor<2x32xf32>
  return %n : tensor<2x32xf32>
}

// -----

// Tests a reshape in a loop body (the rollout's denoise loop): it moves up
// to the loop-invariant matmul operand's product like any other, and a
// splat constant in the chain is rebuilt in the new shape.
// CHECK-LABEL: func.func @in_loop
// CHECK: scf.for
// CHECK: %[[Y:.*]] = omni.matmul
// CHECK: %[[YR:.*]] = omni.reshape %[[Y]] : tensor<4x8xf32> -> tensor<4x2x4xf32>
// CHECK: %[[K:.*]] = omni.constant dense<2.000000e+00> : tensor<4x2x4xf32>
// CHECK: omni.mul %[[YR]], %[[K]] : tensor<4x2x4xf32>
// CHECK-NOT: omni.reshape
// CHECK: scf.yield
func.func @in_loop(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x2x4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %init = omni.constant dense<0.0> : tensor<4x2x4xf32>
  %r = scf.for %k = %c0 to %c3 step %c1 iter_args(%acc = %init) -> tensor<4x2x4xf32> {
    %y = omni.matmul %x, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
    %two = omni.constant dense<2.0> : tensor<4x8xf32>
    %m = omni.mul %y, %two : tensor<4x8xf32>
    %h = omni.reshape %m : tensor<4x8xf32> -> tensor<4x2x4xf32>
    %s = omni.add %acc, %h : tensor<4x2x4xf32>
    scf.yield %s : tensor<4x2x4xf32>
  }
  return %r : tensor<4x2x4xf32>
}

// -----

// Tests a reshape sunk through a reader that reads it twice (mul %r, %r):
// the reader is rewritten once (the pass used to rewrite it per operand
// and crash on the second).
// CHECK-LABEL: func.func @read_twice
// CHECK: %[[E:.*]] = omni.exp %arg0 : tensor<2x8x4xf32>
// CHECK: %[[M:.*]] = omni.mul %[[E]], %[[E]] : tensor<2x8x4xf32>
// CHECK: %[[R:.*]] = omni.reshape %[[M]] : tensor<2x8x4xf32> -> tensor<2x32xf32>
// CHECK: return %[[E]], %[[R]]
func.func @read_twice(%x: tensor<2x8x4xf32>) -> (tensor<2x8x4xf32>, tensor<2x32xf32>) {
  %e = omni.exp %x : tensor<2x8x4xf32>
  %r = omni.reshape %e : tensor<2x8x4xf32> -> tensor<2x32xf32>
  %m = omni.mul %r, %r : tensor<2x32xf32>
  return %e, %m : tensor<2x8x4xf32>, tensor<2x32xf32>
}
