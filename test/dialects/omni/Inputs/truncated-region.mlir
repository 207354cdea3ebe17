// A file that ends inside a function body (used by ../malformed.mlir).
func.func @truncated(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = omni.exp %x : tensor<4xf32>
