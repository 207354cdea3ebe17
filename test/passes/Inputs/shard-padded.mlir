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

