// omni.attention_grad per target: both the cpu and the cuda target keep it
// as the AttentionBackward library call (the cuda driver's flash backward
// or its unfused fallback: docs/backend-cuda.md, "Library routines"), in
// f32 and in bf16, with and without a mask.
// RUN: omnic %s --emit=decompose | FileCheck %s
// RUN: omnic %s --target=cuda --emit=decompose | FileCheck %s
// RUN: omnic %s --emit=json | FileCheck %s --check-prefix=JSON
// RUN: omnic %s --target=cuda --emit=json | FileCheck %s --check-prefix=JSON

// CHECK-LABEL: func.func @g
// CHECK: omni.attention_grad
// CHECK-NOT: omni.matmul
// CHECK-LABEL: func.func @g16
// CHECK: omni.attention_grad {{.*}}bf16
// CHECK-NOT: omni.matmul
// CHECK-LABEL: func.func @masked
// CHECK: omni.attention_grad {{.*}} mask
// CHECK-NOT: omni.matmul
// JSON: "library": "AttentionBackward"
// JSON: "library": "AttentionBackward"
// JSON: "library": "AttentionBackward"

func.func @g(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x6x8xf32>, %o: tensor<1x2x4x8xf32>, %do: tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>) {
  %dq, %dk, %dv = omni.attention_grad %q, %k, %k, %o, %do : (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>)
  return %dq, %dk, %dv : tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>
}

func.func @g16(%q: tensor<1x2x4x64xbf16>, %k: tensor<1x2x6x64xbf16>, %o: tensor<1x2x4x64xbf16>, %do: tensor<1x2x4x64xbf16>) -> (tensor<1x2x4x64xbf16>, tensor<1x2x6x64xbf16>, tensor<1x2x6x64xbf16>) {
  %dq, %dk, %dv = omni.attention_grad %q, %k, %k, %o, %do : (tensor<1x2x4x64xbf16>, tensor<1x2x6x64xbf16>, tensor<1x2x6x64xbf16>, tensor<1x2x4x64xbf16>, tensor<1x2x4x64xbf16>) -> (tensor<1x2x4x64xbf16>, tensor<1x2x6x64xbf16>, tensor<1x2x6x64xbf16>)
  return %dq, %dk, %dv : tensor<1x2x4x64xbf16>, tensor<1x2x6x64xbf16>, tensor<1x2x6x64xbf16>
}

func.func @masked(%q: tensor<1x2x4x64xbf16>, %k: tensor<1x2x6x64xbf16>, %o: tensor<1x2x4x64xbf16>, %do: tensor<1x2x4x64xbf16>, %m: tensor<1x1x4x6xbf16>) -> (tensor<1x2x4x64xbf16>, tensor<1x2x6x64xbf16>, tensor<1x2x6x64xbf16>) {
  %dq, %dk, %dv = omni.attention_grad %q, %k, %k, %o, %do mask %m : (tensor<1x2x4x64xbf16>, tensor<1x2x6x64xbf16>, tensor<1x2x6x64xbf16>, tensor<1x2x4x64xbf16>, tensor<1x2x4x64xbf16>, tensor<1x1x4x6xbf16>) -> (tensor<1x2x4x64xbf16>, tensor<1x2x6x64xbf16>, tensor<1x2x6x64xbf16>)
  return %dq, %dk, %dv : tensor<1x2x4x64xbf16>, tensor<1x2x6x64xbf16>, tensor<1x2x6x64xbf16>
}
