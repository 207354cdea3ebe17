// A hyper-parameter that is not a tensor<f64> (hparams.mlir).
func.func @step(%lr: tensor<f32> {omni.name = "lr", omni.hparam = {default = 1.0e-3 : f64, range = "[0, inf)"}}) -> tensor<f32> {
  return %lr : tensor<f32>
}
