// One name with two defaults (hparams.mlir).
func.func @a(%lr: tensor<f64> {omni.name = "lr", omni.hparam = {default = 1.0e-3 : f64, range = "[0, inf)"}}) -> tensor<f64> {
  return %lr : tensor<f64>
}
func.func @b(%lr: tensor<f64> {omni.name = "lr", omni.hparam = {default = 2.0e-3 : f64, range = "[0, inf)"}}) -> tensor<f64> {
  return %lr : tensor<f64>
}
