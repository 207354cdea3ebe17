// Input of errors.mlir: a dynamic slice cut short in an inner dimension
// under an outer dimension of size 2 is two ranges, not one.
func.func @step(%x: tensor<2x8xf32>, %i: tensor<i64>) -> tensor<2x2xf32> {
  %e = tensor.extract %i[] : tensor<i64>
  %k = arith.index_cast %e : i64 to index
  %s = tensor.extract_slice %x[0, %k] [2, 2] [1, 1] : tensor<2x8xf32> to tensor<2x2xf32>
  return %s : tensor<2x2xf32>
}
