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
