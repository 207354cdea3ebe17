// Identical fusions share one kernel (the key includes the static types,
// since flat kernels take 1-D buffers whose sizes the wrapper bakes in):
// exp over a and b (4 elements) is one kernel, exp over c (8) another, and
// every result is right.
// RUN: omnic %s --emit=kernels | FileCheck %s --check-prefix=KERNELS
// RUN: omnic %s -o %t.bin
// RUN: omnirun %t.bin --function=f --input=4xf32=0,1,2,3 --input=4xf32=1,1,1,1 --input=8xf32=0,0,0,0,0,0,0,1 --output=- --output=- --output=- | FileCheck %s

// KERNELS-COUNT-2: func.func @omni_kernel_{{[0-9]+}}_impl
// KERNELS-NOT: func.func @omni_kernel_

// CHECK: result[0]: tensor<4xf32>=[1 2.71828175 7.38905621 20.085537]
// CHECK: result[1]: tensor<4xf32>=[2.71828175 2.71828175 2.71828175 2.71828175]
// CHECK: result[2]: tensor<8xf32>=[1 1 1 1 1 1 1 2.71828175]
func.func @f(%a: tensor<4xf32>, %b: tensor<4xf32>, %c: tensor<8xf32>)
    -> (tensor<4xf32>, tensor<4xf32>, tensor<8xf32>) {
  %x = omni.exp %a : tensor<4xf32>
  %y = omni.exp %b : tensor<4xf32>
  %z = omni.exp %c : tensor<8xf32>
  return %x, %y, %z : tensor<4xf32>, tensor<4xf32>, tensor<8xf32>
}
