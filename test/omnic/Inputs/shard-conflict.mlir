// State 'w' sharded over fsdp in one function, dp in another (sharding-errors.mlir).
omni.mesh @mesh axes = ["dp", "fsdp"] shape = [2, 2]
func.func @a(%w: tensor<2x4xf32> {omni.state = "w", omni.sharding = #omni.sharding<@mesh, [["fsdp"], []]>, omni.global_type = tensor<4x4xf32>}) -> tensor<i64> {
  %c = omni.constant dense<0> : tensor<i64>
  return %c : tensor<i64>
}
func.func @b(%w: tensor<2x4xf32> {omni.state = "w", omni.sharding = #omni.sharding<@mesh, [["dp"], []]>, omni.global_type = tensor<4x4xf32>}) -> tensor<i64> {
  %c = omni.constant dense<0> : tensor<i64>
  return %c : tensor<i64>
}
