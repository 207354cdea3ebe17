// A splat constant is stored once with a repeat count (step.fbs
// Constant.repeat) and materialized whole at load time.
// RUN: omnic %s -o %t.bin
// RUN: omnic %s --emit=json | FileCheck %s --check-prefix=JSON
// RUN: omnirun %t.bin --function=f --output=- --output=- | FileCheck %s

// JSON: "constants": [
// JSON: "data": "<4 bytes>",
// JSON-NEXT: "repeat": 6
// JSON: "data": "<12 bytes>",
// JSON-NEXT: "repeat": 1
// CHECK: result[0]: tensor<2x3xf32>={{\[\[}}2.5 2.5 2.5][2.5 2.5 2.5]]
// CHECK: result[1]: tensor<3xf32>=[1 2 3]
func.func @f() -> (tensor<2x3xf32>, tensor<3xf32>) {
  %s = omni.constant dense<2.5> : tensor<2x3xf32>
  %d = omni.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  return %s, %d : tensor<2x3xf32>, tensor<3xf32>
}
