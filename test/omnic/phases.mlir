// Each command records its phase: the outermost name of its location (a
// call site's caller first, so inlined code belongs to the phase that
// called it). omnirun's training loop reports time per phase.
// RUN: omnic %s --emit=json | FileCheck %s

// CHECK: "functions": [
// CHECK: "name": "f"
// CHECK: "kind_type": "Random"
// CHECK: "location": "loc(\"rollout\")",
// CHECK-NEXT: "phase": "rollout"
// CHECK: "kind_type": "Dispatch"
// CHECK: "location": "loc(callsite(\"transformer_blocks.0\" at \"loss\"))",
// CHECK-NEXT: "phase": "loss"
// CHECK: "kind_type": "Dispatch"
// CHECK: "location": "loc(\"<input>\":{{[0-9]+}}:{{[0-9]+}})"
// CHECK-NEXT: }
func.func private @model(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = omni.exp %x : tensor<4xf32> loc("transformer_blocks.0")
  return %y : tensor<4xf32>
}
func.func @f(%key: tensor<i64>, %c: tensor<i64>, %z: tensor<8xf32>) -> (tensor<4xf32>, tensor<8xf32>) {
  %x = omni.random_normal %key, %c, %c : tensor<4xf32> loc("rollout")
  %v = func.call @model(%x) : (tensor<4xf32>) -> tensor<4xf32> loc("loss")
  %w = omni.sqrt %z : tensor<8xf32>
  return %v, %w : tensor<4xf32>, tensor<8xf32>
}
