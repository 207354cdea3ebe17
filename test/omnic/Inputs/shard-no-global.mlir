// A state argument to be split by omni-shard (sharding-errors.mlir).
omni.mesh @mesh axes = ["dp", "fsdp"] shape = [2, 2]
func.func @step(%w: tensor<2x4xf32> {omni.state = "w", omni.sharding = #omni.sharding<@mesh, [["fsdp"], []]>}, %x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
