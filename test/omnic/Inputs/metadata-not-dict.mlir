// omni.metadata that is not a dictionary (metadata.mlir).
module attributes {omni.metadata = "sd3"} {
  func.func @f(%x: tensor<4xf32> {omni.name = "x"}) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}
