// Tests that omni.linear with a zero-size dimension differentiates and
// compiles (its VJP divided the element count by the input size: SIGFPE in
// omni-opt and omnic), and that the gradients are what the math says.
// With in = 0, y = b in every row, so d sum(y) / db = rows = 2 per entry
// and dW is empty; with rows = 0, dW and db are sums over no rows: zeros.
// RUN: omni-opt %s --omni-autodiff | FileCheck %s --check-prefix=AD
// RUN: omni-opt %s --omni-autodiff -o %t.mlir
// RUN: omni-eval %t.mlir --function=no_inputs --input=3x0xf32= --input=2x0xf32= --input=3xf32=1,2,3 | FileCheck %s --check-prefix=IN0
// RUN: omni-eval %t.mlir --function=no_rows --input=3x4xf32=1,2,3,4,5,6,7,8,9,10,11,12 --input=0x4xf32= --input=3xf32=1,2,3 | FileCheck %s --check-prefix=ROWS0
// RUN: omnic %s -o %t.bin
// RUN: omnirun %t.bin --function=no_inputs --input=3x0xf32= --input=2x0xf32= --input=3xf32=1,2,3 | FileCheck %s --check-prefix=IN0
// RUN: omnirun %t.bin --function=no_rows --input=3x4xf32=1,2,3,4,5,6,7,8,9,10,11,12 --input=0x4xf32= --input=3xf32=1,2,3 | FileCheck %s --check-prefix=ROWS0
// The forward pass with in = 0 is the bias in every row (the evaluator
// indexed an empty input there):
// RUN: omni-eval %s --function=forward_in0 --input=2x0xf32= --input=3x0xf32= --input=3xf32=1,2,3 | FileCheck %s --check-prefix=FWD
// RUN: omnirun %t.bin --function=forward_in0 --input=2x0xf32= --input=3x0xf32= --input=3xf32=1,2,3 | FileCheck %s --check-prefix=FWD

// AD-LABEL: func.func @no_inputs
// AD-NOT: omni.grad
// AD-LABEL: func.func @no_rows
// AD-NOT: omni.grad

// IN0: result[0]: tensor<3x0xf32>=
// IN0: result[1]: tensor<3xf32>=[2 2 2]
// ROWS0: result[0]: tensor<3x4xf32>={{\[\[}}0 0 0 0][0 0 0 0][0 0 0 0]]
// ROWS0: result[1]: tensor<3xf32>=[0 0 0]
// FWD: result[0]: tensor<2x3xf32>={{\[\[}}1 2 3][1 2 3]]

func.func @forward_in0(%x: tensor<2x0xf32>, %w: tensor<3x0xf32>, %b: tensor<3xf32>) -> tensor<2x3xf32> {
  %y = omni.linear %x, %w bias %b : (tensor<2x0xf32>, tensor<3x0xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

func.func private @loss_in0(%w: tensor<3x0xf32>, %x: tensor<2x0xf32>, %b: tensor<3xf32>) -> tensor<f32> {
  %y = omni.linear %x, %w bias %b : (tensor<2x0xf32>, tensor<3x0xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %s = omni.reduce sum %y dims = [0, 1] : tensor<2x3xf32> -> tensor<f32>
  return %s : tensor<f32>
}
func.func @no_inputs(%w: tensor<3x0xf32>, %x: tensor<2x0xf32>, %b: tensor<3xf32>) -> (tensor<3x0xf32>, tensor<3xf32>) {
  %gw, %gb = omni.grad @loss_in0(%w, %x, %b) wrt = [0, 2] : (tensor<3x0xf32>, tensor<2x0xf32>, tensor<3xf32>) -> (tensor<3x0xf32>, tensor<3xf32>)
  return %gw, %gb : tensor<3x0xf32>, tensor<3xf32>
}

func.func private @loss_rows0(%w: tensor<3x4xf32>, %x: tensor<0x4xf32>, %b: tensor<3xf32>) -> tensor<f32> {
  %y = omni.linear %x, %w bias %b : (tensor<0x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<0x3xf32>
  %s = omni.reduce sum %y dims = [0, 1] : tensor<0x3xf32> -> tensor<f32>
  return %s : tensor<f32>
}
func.func @no_rows(%w: tensor<3x4xf32>, %x: tensor<0x4xf32>, %b: tensor<3xf32>) -> (tensor<3x4xf32>, tensor<3xf32>) {
  %gw, %gb = omni.grad @loss_rows0(%w, %x, %b) wrt = [0, 2] : (tensor<3x4xf32>, tensor<0x4xf32>, tensor<3xf32>) -> (tensor<3x4xf32>, tensor<3xf32>)
  return %gw, %gb : tensor<3x4xf32>, tensor<3xf32>
}
