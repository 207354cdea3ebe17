// Tests that an elementwise kernel over one shape is dispatched in chunks of
// 16384 elements (the runtime spreads them over its threads) while a kernel
// with a reduction runs as one work item.
// RUN: omnic %s --emit=json | FileCheck %s

func.func @f(%a: tensor<40000xf32>, %b: tensor<40000xf32>, %c: tensor<40000xf32>) -> (tensor<40000xf32>, tensor<f32>) {
  %s = omni.add %a, %b : tensor<40000xf32>
  %e = omni.exp %s : tensor<40000xf32>
  %r = omni.reduce sum %c dims = [0] : tensor<40000xf32> -> tensor<f32>
  return %e, %r : tensor<40000xf32>, tensor<f32>
}
// CHECK-DAG: "grid": 3,
// CHECK-DAG: "grid": 1,
