// The program the install-consumer test compiles with the installed omnic:
// a matmul (an OpenBLAS library call on the cpu device) and an elementwise
// multiply-add (a generated kernel), in small integers so the result is
// exact in float32: [[1,2,3],[4,5,6]] x [[1,0],[2,1],[-1,3]] = [[2,11],[8,23]],
// then 2m + 1 = [[5,23],[17,47]]. lit checks that value on the reference
// evaluator:
// RUN: omni-eval %s --function=f --input=2x3xf32=1,2,3,4,5,6 --input=3x2xf32=1,0,2,1,-1,3 | FileCheck %s
// CHECK: result[0]: tensor<2x2xf32>={{\[\[}}5 23][17 47]]
func.func @f(%a: tensor<2x3xf32>, %b: tensor<3x2xf32>) -> tensor<2x2xf32> {
  %m = omni.matmul %a, %b : tensor<2x3xf32>, tensor<3x2xf32> -> tensor<2x2xf32>
  %two = omni.constant dense<2.0> : tensor<2x2xf32>
  %one = omni.constant dense<1.0> : tensor<2x2xf32>
  %d = omni.mul %m, %two : tensor<2x2xf32>
  %r = omni.add %d, %one : tensor<2x2xf32>
  return %r : tensor<2x2xf32>
}
