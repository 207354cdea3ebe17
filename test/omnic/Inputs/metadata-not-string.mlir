// omni.metadata with a value that is not a string (metadata.mlir).
module attributes {omni.metadata = {model = "sd3", rank = 4}} {
  func.func @f(%x: tensor<4xf32> {omni.name = "x"}) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}
