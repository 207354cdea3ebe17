// A program without omni.metadata (export.test): omnirun --export refuses it.
func.func @f(%x: tensor<4xf32> {omni.name = "x"}) -> tensor<4xf32> {
  %y = omni.add %x, %x : tensor<4xf32>
  return %y : tensor<4xf32>
}
