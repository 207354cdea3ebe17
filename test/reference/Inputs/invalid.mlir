// Parses but does not verify: the reshape changes the element count.
func.func @f(%a: tensor<2x3xf32>) -> tensor<4xf32> {
  %r = omni.reshape %a : tensor<2x3xf32> -> tensor<4xf32>
  return %r : tensor<4xf32>
}
