// RUN: omni-opt %s -omni-fuse -split-input-file | FileCheck %s

// Tests that a chain of elementwise ops becomes one region reading each
// outside value once.
// CHECK-LABEL: func.func @elementwise_chain
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>, %[[Y:.*]]: tensor<4x8xf32>)
// CHECK: %[[F:.*]] = omni.fusion(%[[X]], %[[Y]]) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> {
// CHECK-NEXT: ^bb0(%[[A:.*]]: tensor<4x8xf32>, %[[B:.*]]: tensor<4x8xf32>):
// CHECK-NEXT: %[[E:.*]] = omni.exp %[[A]]
// CHECK-NEXT: %[[M:.*]] = omni.mul %[[E]], %[[B]]
// CHECK-NEXT: %[[N:.*]] = omni.neg %[[M]]
// CHECK-NEXT: %[[T:.*]] = omni.tanh %[[N]]
// CHECK-NEXT: %[[S:.*]] = omni.add %[[T]], %[[A]]
// CHECK-NEXT: omni.yield %[[S]]
// CHECK-NEXT: }
// CHECK-NEXT: return %[[F]]
func.func @elementwise_chain(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %a = omni.exp %x : tensor<4x8xf32>
  %b = omni.mul %a, %y : tensor<4x8xf32>
  %c = omni.neg %b : tensor<4x8xf32>
  %d = omni.tanh %c : tensor<4x8xf32>
  %e = omni.add %d, %x : tensor<4x8xf32>
  return %e : tensor<4x8xf32>
}

// -----

// Tests that a broadcast, the elementwise ops reading it and the reduction
// they feed form one region.
// CHECK-LABEL: func.func @broadcast_elementwise_reduce
// CHECK: %[[F:.*]] = omni.fusion(%{{.*}}, %{{.*}}) : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<4xf32>
// CHECK: omni.broadcast_in_dim
// CHECK-NEXT: omni.add
// CHECK-NEXT: omni.exp
// CHECK-NEXT: %[[R:.*]] = omni.reduce sum
// CHECK-NEXT: omni.yield %[[R]]
// CHECK-NEXT: }
// CHECK-NEXT: return %[[F]]
func.func @broadcast_elementwise_reduce(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4xf32> {
  %bb = omni.broadcast_in_dim %b, dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %s = omni.add %x, %bb : tensor<4x8xf32>
  %e = omni.exp %s : tensor<4x8xf32>
  %r = omni.reduce sum %e dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  return %r : tensor<4xf32>
}

// -----

// Tests that a reduction, elementwise ops on its result, a broadcast back to
// the reduction's operand shape and the elementwise ops and reductions
// after it stay in one region (log-softmax, one kernel).
// CHECK-LABEL: func.func @reduce_broadcast_back
// CHECK: omni.fusion
// CHECK: omni.reduce max
// CHECK-NEXT: omni.broadcast_in_dim
// CHECK-NEXT: omni.sub
// CHECK-NEXT: omni.exp
// CHECK-NEXT: omni.reduce sum
// CHECK-NEXT: omni.log
// CHECK-NEXT: omni.broadcast_in_dim
// CHECK-NEXT: omni.sub
// CHECK-NEXT: omni.yield
// CHECK-NOT: omni.fusion
func.func @reduce_broadcast_back(%x: tensor<2x8xf32>) -> tensor<2x8xf32> {
  %m = omni.reduce max %x dims = [1] : tensor<2x8xf32> -> tensor<2xf32>
  %mb = omni.broadcast_in_dim %m, dims = [0] : tensor<2xf32> -> tensor<2x8xf32>
  %d = omni.sub %x, %mb : tensor<2x8xf32>
  %e = omni.exp %d : tensor<2x8xf32>
  %s = omni.reduce sum %e dims = [1] : tensor<2x8xf32> -> tensor<2xf32>
  %si = omni.log %s : tensor<2xf32>
  %sb = omni.broadcast_in_dim %si, dims = [0] : tensor<2xf32> -> tensor<2x8xf32>
  %y = omni.sub %d, %sb : tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// Tests that a reduction ends its region for a consumer that is neither
// elementwise on the reduced shape nor a broadcast back.
// CHECK-LABEL: func.func @negative_reduce_then_movement
// CHECK: %[[R:.*]] = omni.fusion
// CHECK: omni.reduce sum
// CHECK-NEXT: omni.yield
// CHECK: omni.fusion(%[[R]])
// CHECK-NEXT: ^bb0
// CHECK-NEXT: omni.slice
func.func @negative_reduce_then_movement(%x: tensor<4x8xf32>) -> tensor<2xf32> {
  %r = omni.reduce sum %x dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %s = omni.slice %r [0:2:1] : tensor<4xf32> -> tensor<2xf32>
  return %s : tensor<2xf32>
}

// -----

// Tests that a reduction of a reduced value starts a new region.
// CHECK-LABEL: func.func @negative_reduce_of_reduced
// CHECK: %[[R:.*]] = omni.fusion
// CHECK: omni.reduce sum %{{.*}} dims = [1]
// CHECK-NEXT: omni.exp
// CHECK-NEXT: omni.yield
// CHECK: omni.fusion(%[[R]])
// CHECK-NEXT: ^bb0
// CHECK-NEXT: omni.reduce sum %{{.*}} dims = [0]
func.func @negative_reduce_of_reduced(%x: tensor<4x8xf32>) -> tensor<f32> {
  %r = omni.reduce sum %x dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  %e = omni.exp %r : tensor<4xf32>
  %s = omni.reduce sum %e dims = [0] : tensor<4xf32> -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// Tests that ops reading the same input whole are siblings in one region
// with one result each.
// CHECK-LABEL: func.func @siblings
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
// CHECK: %[[F:.*]]:3 = omni.fusion(%[[X]]) : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xf32>)
// CHECK: %[[A:.*]] = omni.exp
// CHECK-NEXT: %[[B:.*]] = omni.neg
// CHECK-NEXT: %[[C:.*]] = omni.reduce max
// CHECK-NEXT: omni.yield %[[A]], %[[B]], %[[C]]
// CHECK: return %[[F]]#0, %[[F]]#1, %[[F]]#2
func.func @siblings(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xf32>) {
  %a = omni.exp %x : tensor<4x8xf32>
  %b = omni.neg %x : tensor<4x8xf32>
  %c = omni.reduce max %x dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
  return %a, %b, %c : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xf32>
}

// -----

// Tests that a matmul between two elementwise ops splits them.
// CHECK-LABEL: func.func @negative_library_op_splits
// CHECK: %[[A:.*]] = omni.fusion
// CHECK: omni.exp
// CHECK: %[[M:.*]] = omni.matmul %[[A]]
// CHECK: omni.fusion(%[[M]])
// CHECK-NEXT: ^bb0
// CHECK-NEXT: omni.neg
func.func @negative_library_op_splits(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %a = omni.exp %x : tensor<4x4xf32>
  %m = omni.matmul %a, %w : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %b = omni.neg %m : tensor<4x4xf32>
  return %b : tensor<4x4xf32>
}

// -----

// Tests that an op reading both a value and a matmul of it does not join
// the value's region, which would then depend on itself.
// CHECK-LABEL: func.func @negative_no_cycle_through_matmul
// CHECK: %[[A:.*]] = omni.fusion
// CHECK: omni.exp
// CHECK: %[[M:.*]] = omni.matmul %[[A]]
// CHECK: omni.fusion(%[[A]], %[[M]])
// CHECK-NEXT: ^bb0
// CHECK-NEXT: omni.add
func.func @negative_no_cycle_through_matmul(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %a = omni.exp %x : tensor<4x4xf32>
  %m = omni.matmul %a, %w : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %b = omni.add %a, %m : tensor<4x4xf32>
  return %b : tensor<4x4xf32>
}

// -----

// Tests that a value a later matmul needs is also a result of the region
// computing it, and that the region moves above the matmul.
// CHECK-LABEL: func.func @escaping_value
// CHECK: %[[F:.*]]:2 = omni.fusion
// CHECK: %[[E:.*]] = omni.exp
// CHECK-NEXT: %[[N:.*]] = omni.neg %[[E]]
// CHECK-NEXT: omni.yield %[[E]], %[[N]]
// CHECK: %[[M:.*]] = omni.matmul %[[F]]#0
// CHECK: return %[[M]], %[[F]]#1
func.func @escaping_value(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %a = omni.exp %x : tensor<4x4xf32>
  %m = omni.matmul %a, %w : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %b = omni.neg %a : tensor<4x4xf32>
  return %m, %b : tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// Tests that nothing fuses across a host call: not the producer into the
// consumer, nor two siblings reading the same input.
// CHECK-LABEL: func.func @negative_host_call_splits
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32>)
// CHECK: %[[A:.*]] = omni.fusion(%[[X]])
// CHECK: omni.exp
// CHECK: %[[H:.*]] = omni.host_call "brightness"(%[[A]])
// CHECK: omni.fusion(%[[X]], %[[H]])
// CHECK-NEXT: ^bb0
// CHECK-NEXT: omni.add
func.func @negative_host_call_splits(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = omni.exp %x : tensor<4xf32>
  %h = omni.host_call "brightness"(%a) : (tensor<4xf32>) -> tensor<4xf32>
  %b = omni.add %x, %h : tensor<4xf32>
  return %b : tensor<4xf32>
}

// -----

// Tests that random numbers stay outside regions: the region reads them as
// an input.
// CHECK-LABEL: func.func @negative_random_outside
// CHECK: %[[E:.*]] = omni.random_normal
// CHECK: omni.fusion(%{{.*}}, %[[E]])
// CHECK-NOT: omni.random_normal
// CHECK: omni.yield
func.func @negative_random_outside(%x: tensor<4xf32>, %k: tensor<i64>) -> tensor<4xf32> {
  %a = omni.exp %x : tensor<4xf32>
  %e = omni.random_normal %k, %k, %k : tensor<4xf32>
  %b = omni.add %a, %e : tensor<4xf32>
  return %b : tensor<4xf32>
}

// -----

// Tests that splat constants (of any dialect) are rebuilt inside the region
// and other constants are inputs.
// CHECK-LABEL: func.func @constants
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32>)
// CHECK-NOT: dense<1.0
// CHECK-NOT: arith.constant
// CHECK: %[[V:.*]] = omni.constant dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00]>
// CHECK: omni.fusion(%[[X]], %[[V]]) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK: omni.constant dense<1.000000e+00> : tensor<4xf32>
// CHECK: omni.constant dense<2.000000e+00> : tensor<4xf32>
func.func @constants(%x: tensor<4xf32>) -> tensor<4xf32> {
  %one = omni.constant dense<1.0> : tensor<4xf32>
  %two = arith.constant dense<2.0> : tensor<4xf32>
  %v = omni.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %a = omni.add %x, %one : tensor<4xf32>
  %b = omni.mul %a, %two : tensor<4xf32>
  %c = omni.mul %b, %v : tensor<4xf32>
  return %c : tensor<4xf32>
}

// -----

// Tests that loop bodies are fused, with the carried value and values from
// outside the loop as inputs.
// CHECK-LABEL: func.func @loop_body
// CHECK-SAME: (%[[X:.*]]: tensor<4xf32>, %[[INIT:.*]]: tensor<4xf32>)
// CHECK: %[[R:.*]] = scf.for %{{.*}} iter_args(%[[ACC:.*]] = %[[INIT]])
// CHECK-NEXT: %[[F:.*]] = omni.fusion(%[[ACC]], %[[X]])
// CHECK: omni.mul
// CHECK-NEXT: omni.tanh
// CHECK: scf.yield %[[F]]
// CHECK: omni.fusion(%[[R]])
// CHECK-NEXT: ^bb0
// CHECK-NEXT: omni.exp
func.func @loop_body(%x: tensor<4xf32>, %init: tensor<4xf32>) -> tensor<4xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %init) -> (tensor<4xf32>) {
    %a = omni.mul %acc, %x : tensor<4xf32>
    %b = omni.tanh %a : tensor<4xf32>
    scf.yield %b : tensor<4xf32>
  }
  %y = omni.exp %r : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// Tests that a broadcast read by two regions is copied into each, neither
// tying them together nor being stored.
// CHECK-LABEL: func.func @broadcast_copied
// CHECK-SAME: (%{{.*}}: tensor<4x4xf32>, %[[B:.*]]: tensor<4xf32>, %{{.*}}: tensor<4x4xf32>)
// CHECK: %[[A:.*]] = omni.fusion(%[[B]], %{{.*}})
// CHECK: omni.broadcast_in_dim
// CHECK: %[[M:.*]] = omni.matmul %[[A]]
// CHECK: omni.fusion(%[[B]], %[[M]])
// CHECK: omni.broadcast_in_dim
func.func @broadcast_copied(%x: tensor<4x4xf32>, %b: tensor<4xf32>, %w: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %bb = omni.broadcast_in_dim %b, dims = [1] : tensor<4xf32> -> tensor<4x4xf32>
  %a = omni.add %x, %bb : tensor<4x4xf32>
  %m = omni.matmul %a, %w : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %c = omni.add %m, %bb : tensor<4x4xf32>
  return %c : tensor<4x4xf32>
}

// -----

// Tests that a library op and a reshape stay outside regions, and that an
// op alone becomes a region of its own.
// CHECK-LABEL: func.func @single_op_region
// CHECK: %[[M:.*]] = omni.matmul
// CHECK: %[[T:.*]] = omni.fusion(%[[M]])
// CHECK-NEXT: ^bb0
// CHECK-NEXT: omni.transpose
// CHECK-NEXT: omni.yield
// CHECK-NEXT: }
// CHECK-NEXT: omni.reshape %[[T]]
func.func @single_op_region(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> tensor<16xf32> {
  %m = omni.matmul %x, %w : tensor<4x4xf32>, tensor<4x4xf32> -> tensor<4x4xf32>
  %t = omni.transpose %m, permutation = [1, 0] : tensor<4x4xf32> -> tensor<4x4xf32>
  %r = omni.reshape %t : tensor<4x4xf32> -> tensor<16xf32>
  return %r : tensor<16xf32>
}

// -----

// Tests that an existing region is left alone: nothing joins it and nothing
// inside it is fused again.
// CHECK-LABEL: func.func @negative_existing_fusion
// CHECK: %[[F:.*]] = omni.fusion
// CHECK-NEXT: ^bb0
// CHECK-NEXT: omni.exp
// CHECK-NEXT: omni.yield
// CHECK: omni.fusion(%[[F]])
// CHECK-NEXT: ^bb0
// CHECK-NEXT: omni.neg
func.func @negative_existing_fusion(%x: tensor<4xf32>) -> tensor<4xf32> {
  %f = omni.fusion (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %e = omni.exp %a : tensor<4xf32>
    omni.yield %e : tensor<4xf32>
  }
  %n = omni.neg %f : tensor<4xf32>
  return %n : tensor<4xf32>
}

// -----

// Tests that a scalar (an optimizer's bias correction) feeding
// tensors of different shapes is not merged into them: each tensor update
// is its own region reading the scalar, instead of one region of unrelated
// tensors.
// CHECK-LABEL: func.func @scalar_group_feeds_many
// CHECK: %[[S:.*]] = omni.fusion(%{{.*}}) : (tensor<f32>) -> tensor<f32>
// CHECK: omni.fusion(%[[S]], %{{.*}}) : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK: omni.fusion(%[[S]], %{{.*}}) : (tensor<f32>, tensor<2x3xf32>) -> tensor<2x3xf32>
func.func @scalar_group_feeds_many(%t: tensor<f32>, %a: tensor<4xf32>, %b: tensor<2x3xf32>) -> (tensor<4xf32>, tensor<2x3xf32>) {
  %e = omni.exp %t : tensor<f32>
  %s = omni.neg %e : tensor<f32>
  %sa = omni.broadcast_in_dim %s, dims = [] : tensor<f32> -> tensor<4xf32>
  %ra = omni.mul %a, %sa : tensor<4xf32>
  %sb = omni.broadcast_in_dim %s, dims = [] : tensor<f32> -> tensor<2x3xf32>
  %rb = omni.mul %b, %sb : tensor<2x3xf32>
  return %ra, %rb : tensor<4xf32>, tensor<2x3xf32>
}

// -----

// Tests rule 6: a global norm over three tensors keeps one kernel per
// tensor. The scalar adds join the first sum of squares, and the other two
// stay kernels of their own (merging them would make one single-threaded
// kernel that reads every gradient).
// CHECK-LABEL: func.func @global_norm_one_reduction_per_kernel
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>, %[[Y:.*]]: tensor<16xf32>, %[[Z:.*]]: tensor<2x3xf32>)
// CHECK: %[[SY:.*]] = omni.fusion(%[[Y]]) : (tensor<16xf32>) -> tensor<f32>
// CHECK-COUNT-1: omni.reduce sum
// CHECK: omni.yield
// CHECK: %[[SZ:.*]] = omni.fusion(%[[Z]]) : (tensor<2x3xf32>) -> tensor<f32>
// CHECK-COUNT-1: omni.reduce sum
// CHECK: omni.yield
// CHECK: %[[N:.*]] = omni.fusion(%[[X]], %[[SY]], %[[SZ]]) : (tensor<4x8xf32>, tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK: omni.mul
// CHECK-NEXT: omni.reduce sum
// CHECK-NEXT: omni.add
// CHECK-NEXT: omni.add
// CHECK-NEXT: omni.sqrt
// CHECK-NEXT: omni.yield
// CHECK: return %[[N]]
func.func @global_norm_one_reduction_per_kernel(%x: tensor<4x8xf32>, %y: tensor<16xf32>, %z: tensor<2x3xf32>) -> tensor<f32> {
  %x2 = omni.mul %x, %x : tensor<4x8xf32>
  %sx = omni.reduce sum %x2 dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  %y2 = omni.mul %y, %y : tensor<16xf32>
  %sy = omni.reduce sum %y2 dims = [0] : tensor<16xf32> -> tensor<f32>
  %z2 = omni.mul %z, %z : tensor<2x3xf32>
  %sz = omni.reduce sum %z2 dims = [0, 1] : tensor<2x3xf32> -> tensor<f32>
  %s1 = omni.add %sx, %sy : tensor<f32>
  %s2 = omni.add %s1, %sz : tensor<f32>
  %n = omni.sqrt %s2 : tensor<f32>
  return %n : tensor<f32>
}

// -----

// Tests that a full reduction and the scalar ops after it (a loss mean)
// are still one kernel.
// CHECK-LABEL: func.func @mean_then_scalar_ops
// CHECK: omni.fusion
// CHECK: omni.reduce sum
// CHECK-NEXT: omni.mul
// CHECK-NEXT: omni.neg
// CHECK-NEXT: omni.yield
// CHECK-NOT: omni.fusion
func.func @mean_then_scalar_ops(%x: tensor<4x8xf32>) -> tensor<f32> {
  %s = omni.reduce sum %x dims = [0, 1] : tensor<4x8xf32> -> tensor<f32>
  %c = omni.constant dense<0.03125> : tensor<f32>
  %m = omni.mul %s, %c : tensor<f32>
  %n = omni.neg %m : tensor<f32>
  return %n : tensor<f32>
}

// -----

// Tests that a broadcast read only after a matmul moves into its reader's
// region (with the `+ 1` of it), so the reader reads the [4, 8]
// modulation's source, not a [4, 16, 8] broadcast of it; and that the
// modulation itself, computed from that many bytes of input, is computed
// again in the reader rather than exported by the first region
// (recomputeCheapValues).
// CHECK-LABEL: func.func @broadcast_to_reader
// CHECK: %[[G:.*]] = omni.fusion(%arg0, %arg1) : (tensor<4x8xf32>, tensor<4x16x8xf32>) -> tensor<4x16x8xf32>
// CHECK: %[[Z:.*]] = omni.matmul %[[G]]
// CHECK: omni.fusion(%arg0, %[[Z]]) : (tensor<4x8xf32>, tensor<4x16x8xf32>) -> tensor<4x16x8xf32>
// CHECK-NEXT: ^bb0
// CHECK-NEXT: omni.constant dense<1.000000e+00>
// CHECK-NEXT: omni.add
// CHECK-NEXT: omni.broadcast_in_dim
// CHECK-NEXT: omni.add
// CHECK-NEXT: omni.mul
func.func @broadcast_to_reader(%m: tensor<4x8xf32>, %x: tensor<4x16x8xf32>, %w: tensor<4x8x8xf32>) -> tensor<4x16x8xf32> {
  %mod = omni.add %m, %m : tensor<4x8xf32>
  %b1 = omni.broadcast_in_dim %mod, dims = [0, 2] : tensor<4x8xf32> -> tensor<4x16x8xf32>
  %y = omni.mul %x, %b1 : tensor<4x16x8xf32>
  %z = omni.matmul %y, %w : tensor<4x16x8xf32>, tensor<4x8x8xf32> -> tensor<4x16x8xf32>
  %b2 = omni.broadcast_in_dim %mod, dims = [0, 2] : tensor<4x8xf32> -> tensor<4x16x8xf32>
  %one = omni.constant dense<1.0> : tensor<4x16x8xf32>
  %p = omni.add %b2, %one : tensor<4x16x8xf32>
  %r = omni.mul %z, %p : tensor<4x16x8xf32>
  return %r : tensor<4x16x8xf32>
}

// -----

// Tests that a value computed by elementwise ops and broadcasts from inputs
// no larger than it, read by a region after a matmul (an MLP's widened,
// bias-added pre-activation, read by the backward's GELU derivative), is
// computed again in that region from the bf16 input and the bias rather
// than exported by the first region (docs/fusion.md, "Cheap values go to
// their readers").
// CHECK-LABEL: func.func @cheap_value_to_reader
// CHECK: %[[F:.*]] = omni.fusion(%arg1, %arg0) : (tensor<8xf32>, tensor<4x8xbf16>) -> tensor<4x8xf32>
// CHECK: omni.exp
// CHECK: %[[M:.*]] = omni.matmul %[[F]], %arg2
// CHECK: omni.fusion(%arg1, %arg0, %[[M]]) : (tensor<8xf32>, tensor<4x8xbf16>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: ^bb0
// CHECK-NEXT: omni.broadcast_in_dim
// CHECK-NEXT: omni.cast
// CHECK-NEXT: omni.add
// CHECK-NEXT: omni.mul
func.func @cheap_value_to_reader(%h: tensor<4x8xbf16>, %b: tensor<8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  %f = omni.cast %h : tensor<4x8xbf16> -> tensor<4x8xf32>
  %bb = omni.broadcast_in_dim %b, dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
  %a = omni.add %f, %bb : tensor<4x8xf32>
  %g = omni.exp %a : tensor<4x8xf32>
  %m = omni.matmul %g, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %d = omni.mul %m, %a : tensor<4x8xf32>
  return %d : tensor<4x8xf32>
}

// -----

// Tests the values that stay stored: %a reads two tensors of its own size
// (recomputed, the reader would read twice the bytes), and %e is also read
// by a matmul, which needs it stored anyway.
// CHECK-LABEL: func.func @stored_values
// CHECK: %[[A:.*]]:2 = omni.fusion(%arg0, %arg1) : (tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
// CHECK: %[[M:.*]] = omni.matmul %[[A]]#1
// CHECK: omni.fusion(%[[M]], %[[A]]#0)
// CHECK: %[[E:.*]]:2 = omni.fusion(%arg0) : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
// CHECK: omni.fusion(%{{.*}}, %[[E]]#0, %{{.*}})
func.func @stored_values(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %a = omni.add %x, %y : tensor<4x8xf32>
  %g = omni.exp %a : tensor<4x8xf32>
  %m = omni.matmul %g, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %d = omni.mul %m, %a : tensor<4x8xf32>
  %e = omni.exp %x : tensor<4x8xf32>
  %n = omni.neg %e : tensor<4x8xf32>
  %k = omni.matmul %n, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %z = omni.mul %k, %e : tensor<4x8xf32>
  %q = omni.matmul %e, %w : tensor<4x8xf32>, tensor<8x8xf32> -> tensor<4x8xf32>
  %r = omni.add %z, %q : tensor<4x8xf32>
  return %d, %r : tensor<4x8xf32>, tensor<4x8xf32>
}
