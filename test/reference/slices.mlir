// Tests tensor.extract_slice / tensor.insert_slice with dynamic offsets
// (the rollout stores one sample per step this way), and a clear error for
// a slice outside the tensor.
// RUN: omni-eval %s --function=roundtrip --input=2x3xf32=1,2,3,4,5,6 --input=i64=1 | FileCheck %s
// RUN: not omni-eval %s --function=roundtrip --input=2x3xf32=1,2,3,4,5,6 --input=i64=2 2>&1 | FileCheck %s --check-prefix=ERR

func.func @roundtrip(%x: tensor<2x3xf32>, %i: index) -> (tensor<3xf32>, tensor<2x3xf32>, tensor<2xf32>) {
  %row = tensor.extract_slice %x[%i, 0] [1, 3] [1, 1] : tensor<2x3xf32> to tensor<3xf32>
  %zero = omni.constant dense<0.0> : tensor<2x3xf32>
  %put = tensor.insert_slice %row into %zero[0, 0] [1, 3] [1, 1] : tensor<3xf32> into tensor<2x3xf32>
  %col = tensor.extract_slice %x[0, 0] [2, 1] [1, 2] : tensor<2x3xf32> to tensor<2xf32>
  return %row, %put, %col : tensor<3xf32>, tensor<2x3xf32>, tensor<2xf32>
}
// CHECK: result[0]: tensor<3xf32>=[4 5 6]
// CHECK-NEXT: result[1]: tensor<2x3xf32>={{\[\[}}4 5 6][0 0 0]]
// CHECK-NEXT: result[2]: tensor<2xf32>=[1 4]
// ERR: slices.mlir:{{[0-9]+}}:{{[0-9]+}}: 'tensor.extract_slice' slice of dimension 0 (offset 2, size 1, stride 1) is outside the size 2
