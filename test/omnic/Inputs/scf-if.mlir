func.func @f(%a: tensor<8xf32>, %p: tensor<i1>) -> tensor<8xf32> {
  %c = tensor.extract %p[] : tensor<i1>
  %r = scf.if %c -> tensor<8xf32> {
    %e = omni.exp %a : tensor<8xf32>
    scf.yield %e : tensor<8xf32>
  } else {
    scf.yield %a : tensor<8xf32>
  }
  return %r : tensor<8xf32>
}
