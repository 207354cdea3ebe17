// A sharded state argument omnic must refuse (sharding-errors.mlir).
omni.mesh @mesh axes = ["dp", "fsdp"] shape = [2, 2]
func.func @step(%w: tensor<3x4xf32> {omni.state = "w", omni.sharding = #omni.sharding<@mesh, [["fsdp"], []]>, omni.global_type = tensor<4x4xf32>}, %x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
