// Tests that the hand-written toy FlowGRPO program (examples/flowgrpo-toy)
// evaluates end to end from the file: on-policy, the ratio is exactly 1, so
// approx_kl and clipfrac print as exact zeros.
// RUN: omni-eval %omni_src_root/examples/flowgrpo-toy/toy.mlir --function=main --input=i64=7 --input=i64=0 | FileCheck %s

// CHECK: result[0]: tensor<f32>=
// CHECK-NEXT: result[1]: tensor<f32>=0{{$}}
// CHECK-NEXT: result[2]: tensor<f32>=0{{$}}
// CHECK-NEXT: result[3]: tensor<f32>=-0.00{{[0-9]+}}
// CHECK-NEXT: result[4]: tensor<8xf32>=[{{.*}}]
// CHECK-NEXT: result[5]: tensor<8xf32>=[-0.00{{[0-9]+}} -0.00{{[0-9]+}} -0.00{{[0-9]+}} -0.00{{[0-9]+}} -0.00{{[0-9]+}} -0.00{{[0-9]+}} -0.00{{[0-9]+}} -0.00{{[0-9]+}}]
