// fsdp-one-rank.mlir sharded by hand over 2 ranks, as omni-shard would
// (per-rank types; docs/backend.md "Channels and the mesh"): the weight
// [5, 4] is split on dim 0 over mesh axis fsdp, 3 rows per rank (rank 1
// holds rows 3, 4 and a zero padding row). The step all_gathers the whole
// weight before its use (the loss), reduce_scatters the gradient (mean over
// the ranks, which hold the same one: exact) and updates its own block. So
// --ranks 2 must checkpoint what the 1-rank twin does
// (test/train/fsdp-ranks.test).

omni.mesh @mesh axes = ["fsdp"] shape = [2]

!w = tensor<5x4xf32>
!b = tensor<3x4xf32>

func.func @init_state(%seed: tensor<i64>)
    -> (!b {omni.sharding = #omni.sharding<@mesh, [["fsdp"], []]>,
            omni.global_type = !w}) {
  %c = omni.constant dense<7> : tensor<i64>
  %z = omni.constant dense<0> : tensor<i64>
  %w = omni.random_uniform %seed, %c, %z : !w
  %b = func.call @block(%w) : (!w) -> !b
  return %b : !b
}

/// This rank's block of a whole weight: rows [3k, 3k + 3) of it padded
/// with a zero row, k = the rank's fsdp index (a one-hot select, so no
/// dynamic slice is needed).
func.func private @block(%w: !w) -> !b {
  %p = omni.pad %w low = [0, 0] high = [1, 0] value = 0.0 : !w -> tensor<6x4xf32>
  %r = omni.reshape %p : tensor<6x4xf32> -> tensor<2x3x4xf32>
  %k = omni.axis_index over @mesh ["fsdp"] : tensor<i64>
  %i = omni.iota dim = 0 : tensor<2x3x4xi64>
  %kb = omni.broadcast_in_dim %k, dims = [] : tensor<i64> -> tensor<2x3x4xi64>
  %m = omni.compare eq, %i, %kb : tensor<2x3x4xi64>
  %zero = omni.constant dense<0.0> : tensor<2x3x4xf32>
  %s = omni.select %m, %r, %zero : tensor<2x3x4xi1>, tensor<2x3x4xf32>
  %b = omni.reduce sum %s dims = [0] : tensor<2x3x4xf32> -> !b
  return %b : !b
}

/// As in fsdp-one-rank.mlir.
func.func private @grad(%pe: tensor<2x3x4xf32>) -> !w {
  %feat = omni.reduce mean %pe dims = [0, 1] : tensor<2x3x4xf32> -> tensor<4xf32>
  %fb = omni.broadcast_in_dim %feat, dims = [1] : tensor<4xf32> -> !w
  %rows = omni.constant dense<[[1.0, 1.0, 1.0, 1.0], [2.0, 2.0, 2.0, 2.0],
                               [3.0, 3.0, 3.0, 3.0], [4.0, 4.0, 4.0, 4.0],
                               [5.0, 5.0, 5.0, 5.0]]> : !w
  %g = omni.mul %fb, %rows : !w
  return %g : !w
}

func.func @train_step(%wb: !b {omni.name = "transformer.proj.weight",
                               omni.sharding = #omni.sharding<@mesh, [["fsdp"], []]>,
                               omni.global_type = !w},
                      %seed: tensor<i64>, %iteration: tensor<i64>,
                      %pe: tensor<2x3x4xf32> {omni.name = "prompt_embeds"})
    -> (!b {omni.sharding = #omni.sharding<@mesh, [["fsdp"], []]>,
            omni.global_type = !w},
        tensor<f32> {omni.name = "loss"}) {
  // The use: the whole weight.
  %wp = omni.all_gather %wb over @mesh ["fsdp"] dim = 0 : !b -> tensor<6x4xf32>
  %w = omni.slice %wp [0:5:1, 0:4:1] : tensor<6x4xf32> -> !w
  %g = func.call @grad(%pe) : (tensor<2x3x4xf32>) -> !w
  // The update of this rank's block from its part of the gradient.
  %gp = omni.pad %g low = [0, 0] high = [1, 0] value = 0.0 : !w -> tensor<6x4xf32>
  %gb = omni.reduce_scatter mean %gp over @mesh ["fsdp"] dim = 0 : tensor<6x4xf32> -> !b
  %lrb = omni.constant dense<0.125> : !b
  %sb = omni.mul %gb, %lrb : !b
  %wb2 = omni.sub %wb, %sb : !b
  // The loss on the whole updated weight, as the 1-rank twin computes it.
  %lr = omni.constant dense<0.125> : !w
  %s = omni.mul %g, %lr : !w
  %w2 = omni.sub %w, %s : !w
  %sq = omni.mul %w2, %w2 : !w
  %loss = omni.reduce mean %sq dims = [0, 1] : !w -> tensor<f32>
  return %wb2, %loss : !b, tensor<f32>
}
