// A sharded input that is not state (sharding-errors.mlir).
omni.mesh @mesh axes = ["dp", "fsdp"] shape = [2, 2]
func.func @step(%x: tensor<2xf32> {omni.sharding = #omni.sharding<@mesh, [["dp"]]>}) -> tensor<2xf32> {
  return %x : tensor<2xf32>
}
