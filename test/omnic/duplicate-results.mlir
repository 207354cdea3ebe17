// A fusion that yields one value twice (CSE merges identical ops inside a
// fusion body) still gives every result its own buffer: omnic compiles it
// and both results hold the value.
// RUN: omnic %s -o %t.bin
// RUN: omnirun %t.bin --function=f --input=4xf32=0,1,2,3 --output=- --output=- | FileCheck %s

// CHECK: result[0]: tensor<4xf32>=[1 2.71828175 7.38905621 20.085537]
// CHECK: result[1]: tensor<4xf32>=[1 2.71828175 7.38905621 20.085537]
func.func @f(%a: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %r:2 = omni.fusion(%a) : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  ^bb0(%x: tensor<4xf32>):
    %e = omni.exp %x : tensor<4xf32>
    omni.yield %e, %e : tensor<4xf32>, tensor<4xf32>
  }
  return %r#0, %r#1 : tensor<4xf32>, tensor<4xf32>
}
