// Two training steps whose state 'w' has different types (resident-state.mlir).
func.func @step_a(%w: tensor<3x4xf32> {omni.name = "w"}, %seed: tensor<i64>,
                  %iteration: tensor<i64>) -> tensor<3x4xf32> {
  return %w : tensor<3x4xf32>
}
func.func @step_b(%w: tensor<4x3xf32> {omni.name = "w"}, %seed: tensor<i64>,
                  %iteration: tensor<i64>) -> tensor<4x3xf32> {
  return %w : tensor<4x3xf32>
}
