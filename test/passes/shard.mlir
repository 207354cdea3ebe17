// RUN: omni-opt %s -omni-shard -split-input-file | FileCheck %s

// Tests the collectives omni-shard inserts for a two-layer model trained
// with FSDP over 2 ranks (docs/sharding.md section 3): both weights are
// split on dimension 0 and gathered before use (once, at the top), the
// batch is split by slicing the replicated input at the rank's block, the
// activations stay split, the weight gradients (contractions over the
// split batch: partial sums) are reduce-scattered straight into the
// weights' layout after the linear scaling by the learning rate, the loss
// (a sum over the split batch) is all-reduced for the replicated result,
// and a splat constant is made at the local shape instead of sliced.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[W1:[a-z0-9]+]]: tensor<4x4xf32> {omni.global_type = tensor<8x4xf32>, omni.sharding = #omni.sharding<@mesh, {{\[\["fsdp"\], \[\]\]}}>, omni.state = "w1"}
// CHECK-SAME: %[[W2:[a-z0-9]+]]: tensor<2x8xf32> {omni.global_type = tensor<4x8xf32>
// CHECK-SAME: %[[X:[a-z0-9]+]]: tensor<6x4xf32>)
// CHECK-SAME: -> (tensor<4x4xf32> {{.*}}, tensor<2x8xf32> {{.*}}, tensor<f32>)
// CHECK-DAG: %[[G2:.*]] = omni.all_gather %[[W2]] over @mesh ["fsdp"] dim = 0 : tensor<2x8xf32> -> tensor<4x8xf32>
// CHECK-DAG: %[[G1:.*]] = omni.all_gather %[[W1]] over @mesh ["fsdp"] dim = 0 : tensor<4x4xf32> -> tensor<8x4xf32>
// CHECK: %[[K:.*]] = omni.axis_index over @mesh ["fsdp"] : tensor<i64>
// CHECK: %[[OFF:.*]] = omni.mul %[[K]], %{{.*}} : tensor<i64>
// CHECK: %[[XS:.*]] = tensor.extract_slice %[[X]][%{{.*}}, 0] [3, 4] [1, 1] : tensor<6x4xf32> to tensor<3x4xf32>
// CHECK: %[[H:.*]] = omni.matmul %[[XS]], %[[G1]] transpose_rhs : tensor<3x4xf32>, tensor<8x4xf32> -> tensor<3x8xf32>
// CHECK: %[[Y:.*]] = omni.matmul %[[H]], %[[G2]] transpose_rhs : tensor<3x8xf32>, tensor<4x8xf32> -> tensor<3x4xf32>
// CHECK: %[[PART:.*]] = omni.reduce sum %{{.*}} dims = [0, 1] : tensor<3x4xf32> -> tensor<f32>
// CHECK: %[[LOSS:.*]] = omni.all_reduce sum %[[PART]] over @mesh ["fsdp"] : tensor<f32>
// CHECK: %[[TWO:.*]] = omni.constant dense<2.000000e+00> : tensor<3x4xf32>
// CHECK: %[[DY:.*]] = omni.mul %[[Y]], %[[TWO]] : tensor<3x4xf32>
// CHECK: %[[DW2:.*]] = omni.matmul %[[DY]], %[[H]] transpose_lhs : tensor<3x4xf32>, tensor<3x8xf32> -> tensor<4x8xf32>
// CHECK: %[[DW1:.*]] = omni.matmul %{{.*}}, %[[XS]] transpose_lhs : tensor<3x8xf32>, tensor<3x4xf32> -> tensor<8x4xf32>
// CHECK: %[[U1:.*]] = omni.mul %[[DW1]], %{{.*}} : tensor<8x4xf32>
// CHECK: %[[S1:.*]] = omni.reduce_scatter sum %[[U1]] over @mesh ["fsdp"] dim = 0 : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK: %[[N1:.*]] = omni.sub %[[W1]], %[[S1]] : tensor<4x4xf32>
// CHECK: %[[U2:.*]] = omni.mul %[[DW2]], %{{.*}} : tensor<4x8xf32>
// CHECK: %[[S2:.*]] = omni.reduce_scatter sum %[[U2]] over @mesh ["fsdp"] dim = 0 : tensor<4x8xf32> -> tensor<2x8xf32>
// CHECK: %[[N2:.*]] = omni.sub %[[W2]], %[[S2]] : tensor<2x8xf32>
// CHECK: return %[[N1]], %[[N2]], %[[LOSS]] : tensor<4x4xf32>, tensor<2x8xf32>, tensor<f32>
omni.mesh @mesh axes = ["fsdp"] shape = [2]
func.func @train_step(
    %w1: tensor<8x4xf32> {omni.state = "w1", omni.sharding = #omni.sharding<@mesh, [["fsdp"], []]>},
    %w2: tensor<4x8xf32> {omni.state = "w2", omni.sharding = #omni.sharding<@mesh, [["fsdp"], []]>},
    %x: tensor<6x4xf32>)
    -> (tensor<8x4xf32> {omni.state = "w1", omni.sharding = #omni.sharding<@mesh, [["fsdp"], []]>},
        tensor<4x8xf32> {omni.state = "w2", omni.sharding = #omni.sharding<@mesh, [["fsdp"], []]>},
        tensor<f32>) {
  %xs = omni.shard %x : tensor<6x4xf32> to #omni.sharding<@mesh, [["fsdp"], []]>
  %h = omni.matmul %xs, %w1 transpose_rhs : tensor<6x4xf32>, tensor<8x4xf32> -> tensor<6x8xf32>
  %y = omni.matmul %h, %w2 transpose_rhs : tensor<6x8xf32>, tensor<4x8xf32> -> tensor<6x4xf32>
  %sq = omni.mul %y, %y : tensor<6x4xf32>
  %loss = omni.reduce sum %sq dims = [0, 1] : tensor<6x4xf32> -> tensor<f32>
  %two = omni.constant dense<2.0> : tensor<6x4xf32>
  %dy = omni.mul %y, %two : tensor<6x4xf32>
  %dw2 = omni.matmul %dy, %h transpose_lhs : tensor<6x4xf32>, tensor<6x8xf32> -> tensor<4x8xf32>
  %dh = omni.matmul %dy, %w2 : tensor<6x4xf32>, tensor<4x8xf32> -> tensor<6x8xf32>
  %dw1 = omni.matmul %dh, %xs transpose_lhs : tensor<6x8xf32>, tensor<6x4xf32> -> tensor<8x4xf32>
  %lr1 = omni.constant dense<0.1> : tensor<8x4xf32>
  %u1 = omni.mul %dw1, %lr1 : tensor<8x4xf32>
  %nw1 = omni.sub %w1, %u1 : tensor<8x4xf32>
  %lr2 = omni.constant dense<0.1> : tensor<4x8xf32>
  %u2 = omni.mul %dw2, %lr2 : tensor<4x8xf32>
  %nw2 = omni.sub %w2, %u2 : tensor<4x8xf32>
  return %nw1, %nw2, %loss : tensor<8x4xf32>, tensor<4x8xf32>, tensor<f32>
}

// -----

// CHECK-LABEL: func.func @dp_step
// CHECK: %[[XS:.*]] = tensor.extract_slice %arg1[%{{.*}}, 0] [3, 4] [1, 1] : tensor<6x4xf32> to tensor<3x4xf32>
// CHECK: %[[Y:.*]] = omni.matmul %[[XS]], %arg0 : tensor<3x4xf32>, tensor<4x4xf32> -> tensor<3x4xf32>
// CHECK: %[[P:.*]] = omni.matmul %[[XS]], %[[Y]] transpose_lhs
// CHECK: %[[G:.*]] = omni.all_reduce sum %[[P]] over @mesh ["dp"] : tensor<4x4xf32>
// CHECK-NOT: omni.all_reduce
// CHECK: %[[SQ:.*]] = omni.mul %[[G]], %[[G]]
// CHECK: omni.sub %arg0, %[[G]]
// Tests data parallelism: the weight stays whole, its gradient (a partial
// sum over the split batch) is all-reduced once although two ops use it.
omni.mesh @mesh axes = ["dp"] shape = [2]
func.func @dp_step(%w: tensor<4x4xf32> {omni.state = "w"}, %x: tensor<6x4xf32>)
    -> (tensor<4x4xf32> {omni.state = "w"}, tensor<f32>) {
  %xs = omni.shard %x : tensor<6x4xf32> to #omni.sharding<@mesh, [["dp"], []]>
  %y = omni.matmul %xs, %w : tensor<6x4xf32>, tensor<4x4xf32> -> tensor<6x4xf32>
  %g = omni.matmul %xs, %y transpose_lhs : tensor<6x4xf32>, tensor<6x4xf32> -> tensor<4x4xf32>
  %sq = omni.mul %g, %g : tensor<4x4xf32>
  %norm = omni.reduce sum %sq dims = [0, 1] : tensor<4x4xf32> -> tensor<f32>
  %nw = omni.sub %w, %g : tensor<4x4xf32>
  return %nw, %norm : tensor<4x4xf32>, tensor<f32>
}

// -----

// CHECK-LABEL: func.func @padded
// CHECK-SAME: (%arg0: tensor<2x4xf32> {omni.global_type = tensor<3x4xf32>
// CHECK: %[[G:.*]] = omni.all_gather %arg0 over @mesh ["fsdp"] dim = 0 : tensor<2x4xf32> -> tensor<4x4xf32>
// CHECK: %[[W:.*]] = omni.slice %[[G]] [0:3:1, 0:4:1] : tensor<4x4xf32> -> tensor<3x4xf32>
// CHECK: %[[DW:.*]] = omni.matmul %{{.*}}, %{{.*}} transpose_lhs : tensor<1x3xf32>, tensor<1x4xf32> -> tensor<3x4xf32>
// CHECK: %[[PAD:.*]] = omni.pad %[[DW]] low = [0, 0] high = [1, 0] value = 0.000000e+00 : tensor<3x4xf32> -> tensor<4x4xf32>
// CHECK: %[[S:.*]] = omni.reduce_scatter sum %[[PAD]] over @mesh ["fsdp"] dim = 0 : tensor<4x4xf32> -> tensor<2x4xf32>
// CHECK: omni.sub %arg0, %[[S]] : tensor<2x4xf32>
// Tests padding: 3 rows over 2 ranks are blocks of 2, the last padded;
// the gathered weight is cut back to 3 rows and the gradient is padded
// with zeros before it is reduce-scattered.
omni.mesh @mesh axes = ["fsdp"] shape = [2]
func.func @padded(%w: tensor<3x4xf32> {omni.state = "w", omni.sharding = #omni.sharding<@mesh, [["fsdp"], []]>}, %x: tensor<2x4xf32>)
    -> (tensor<3x4xf32> {omni.state = "w", omni.sharding = #omni.sharding<@mesh, [["fsdp"], []]>}) {
  %xs = omni.shard %x : tensor<2x4xf32> to #omni.sharding<@mesh, [["fsdp"], []]>
  %y = omni.matmul %xs, %w transpose_rhs : tensor<2x4xf32>, tensor<3x4xf32> -> tensor<2x3xf32>
  %g = omni.matmul %y, %xs transpose_lhs : tensor<2x3xf32>, tensor<2x4xf32> -> tensor<3x4xf32>
  %nw = omni.sub %w, %g : tensor<3x4xf32>
  return %nw : tensor<3x4xf32>
}

// -----

// CHECK-LABEL: func.func @loop
// CHECK: %[[XS:.*]] = tensor.extract_slice %arg2[%{{.*}}, 0] [3, 4] [1, 1]
// CHECK: scf.for %{{.*}} iter_args(%[[A:.*]] = %[[XS]]) -> (tensor<3x4xf32>) {
// CHECK: %[[Z:.*]] = omni.constant dense<0> : tensor<i64>
// CHECK: %[[ROW:.*]] = omni.constant dense<12> : tensor<i64>
// CHECK: %[[K:.*]] = omni.axis_index over @mesh ["fsdp"]
// CHECK: %[[SHIFT:.*]] = omni.mul %[[K]], %[[ROW]]
// CHECK: %[[OFF:.*]] = omni.add %[[Z]], %[[SHIFT]]
// CHECK: %[[N:.*]] = omni.random_normal %arg1, %[[Z]], %[[OFF]] : tensor<3x4xf32>
// CHECK: %[[W:.*]] = omni.all_gather %arg0 over @mesh ["fsdp"] dim = 0 : tensor<2x4xf32> -> tensor<4x4xf32>
// CHECK: %[[V:.*]] = omni.matmul %[[A]], %[[W]] : tensor<3x4xf32>, tensor<4x4xf32> -> tensor<3x4xf32>
// CHECK: omni.add %[[V]], %[[N]] : tensor<3x4xf32>
// CHECK: omni.all_gather %{{.*}} over @mesh ["fsdp"] dim = 0 : tensor<3x4xf32> -> tensor<6x4xf32>
// Tests a denoise-like loop with per-step gathers: the loop carries the
// split batch, the weight is gathered inside the body before its use, and
// the noise drawn for the whole batch is drawn for the rank's rows only
// (offset moved by the block's first element).
module attributes {omni.shard_gather = "per-step"} {
omni.mesh @mesh axes = ["fsdp"] shape = [2]
func.func @loop(%w: tensor<4x4xf32> {omni.state = "w", omni.sharding = #omni.sharding<@mesh, [["fsdp"], []]>},
                %seed: tensor<i64>, %x: tensor<6x4xf32>)
    -> (tensor<4x4xf32> {omni.state = "w", omni.sharding = #omni.sharding<@mesh, [["fsdp"], []]>}, tensor<6x4xf32>)
{
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %xs = omni.shard %x : tensor<6x4xf32> to #omni.sharding<@mesh, [["fsdp"], []]>
  %r = scf.for %i = %c0 to %c3 step %c1 iter_args(%a = %xs) -> (tensor<6x4xf32>) {
    %zero = omni.constant dense<0> : tensor<i64>
    %n = omni.random_normal %seed, %zero, %zero : tensor<6x4xf32>
    %v = omni.matmul %a, %w : tensor<6x4xf32>, tensor<4x4xf32> -> tensor<6x4xf32>
    %next = omni.add %v, %n : tensor<6x4xf32>
    scf.yield %next : tensor<6x4xf32>
  }
  return %w, %r : tensor<4x4xf32>, tensor<6x4xf32>
}
}
