// Tests that a program compiled by omnic and run by omnirun prints exactly
// what the reference evaluator prints, for a program whose arithmetic is
// exact in float32 (small integers) and random numbers (bit for bit).
// RUN: omnic %s -o %t.bin
// RUN: omnirun %t.bin --function=f --input=2x3xf32=1,2,3,4,5,6 --input=3x2xf32=1,0,2,1,-1,3 --input=i64=11 > %t.run
// RUN: omni-eval %s --function=f --input=2x3xf32=1,2,3,4,5,6 --input=3x2xf32=1,0,2,1,-1,3 --input=i64=11 > %t.eval
// RUN: diff %t.run %t.eval
// RUN: FileCheck %s < %t.run

func.func @f(%a: tensor<2x3xf32>, %b: tensor<3x2xf32>, %seed: tensor<i64>) -> (tensor<2x2xf32>, tensor<2x2xf32>, tensor<5xf32>) {
  %m = omni.matmul %a, %b : tensor<2x3xf32>, tensor<3x2xf32> -> tensor<2x2xf32>
  %two = omni.constant dense<2.0> : tensor<2x2xf32>
  %d = omni.mul %m, %two : tensor<2x2xf32>
  %r = omni.sub %d, %m : tensor<2x2xf32>
  %zero = omni.constant dense<0> : tensor<i64>
  %n = omni.random_normal %seed, %zero, %zero : tensor<5xf32>
  return %m, %r, %n : tensor<2x2xf32>, tensor<2x2xf32>, tensor<5xf32>
}
// CHECK: result[0]: tensor<2x2xf32>={{\[\[}}2 11][8 23]]
// CHECK: result[1]: tensor<2x2xf32>={{\[\[}}2 11][8 23]]
// CHECK: result[2]: tensor<5xf32>=[
