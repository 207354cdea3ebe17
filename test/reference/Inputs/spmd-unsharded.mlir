// The unsharded program of ../spmd.mlir, as omni-shard{trace-only} stamps
// it: the same omni.trace ids on global shapes.

omni.mesh @mesh axes = ["dp"] shape = [2]

func.func @step(%x: tensor<4x2xf32>, %w: tensor<2x2xf32>) -> (tensor<4x2xf32>, tensor<2x2xf32>) {
  %y = omni.matmul %x, %w {omni.trace = 1 : i64} : tensor<4x2xf32>, tensor<2x2xf32> -> tensor<4x2xf32>
  %g = omni.matmul %x, %y transpose_lhs {omni.trace = 2 : i64} : tensor<4x2xf32>, tensor<4x2xf32> -> tensor<2x2xf32>
  return %y, %g : tensor<4x2xf32>, tensor<2x2xf32>
}

func.func @wrong(%x: tensor<4x2xf32>, %w: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %y = omni.matmul %x, %w {omni.trace = 1 : i64} : tensor<4x2xf32>, tensor<2x2xf32> -> tensor<4x2xf32>
  %g = omni.matmul %x, %y transpose_lhs {omni.trace = 2 : i64} : tensor<4x2xf32>, tensor<4x2xf32> -> tensor<2x2xf32>
  %r = omni.add %g, %g {omni.trace = 3 : i64} : tensor<2x2xf32>
  return %r : tensor<2x2xf32>
}
