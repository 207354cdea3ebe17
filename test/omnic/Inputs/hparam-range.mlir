// A range the loader cannot read (hparams.mlir).
func.func @step(%lr: tensor<f64> {omni.name = "lr", omni.hparam = {default = 1.0e-3 : f64, range = "0 to inf"}}) -> tensor<f64> {
  return %lr : tensor<f64>
}
