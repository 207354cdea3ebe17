// A file that ends in the middle of an op (used by ../malformed.mlir).
func.func @truncated(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) -> tensor<2x4xf32> {
  %0 = omni.matmul %a, %b : tensor<2x3xf32>, tensor<3x4
