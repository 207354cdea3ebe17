// omni.hparam that is not {default, range} (hparams.mlir).
func.func @step(%lr: tensor<f64> {omni.name = "lr", omni.hparam = 1.0 : f64}) -> tensor<f64> {
  return %lr : tensor<f64>
}
