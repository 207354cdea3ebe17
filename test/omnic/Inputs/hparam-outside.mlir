// A default outside its range (hparams.mlir).
func.func @step(%lr: tensor<f64> {omni.name = "lr", omni.hparam = {default = 0.0 : f64, range = "(0, inf)"}}) -> tensor<f64> {
  return %lr : tensor<f64>
}
