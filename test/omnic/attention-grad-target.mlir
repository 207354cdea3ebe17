// omni.attention_grad per target: the cpu target keeps it (the
// AttentionBackward library call); omnic --target=cuda decomposes it into
// matmuls and a softmax, since the cuda driver has no AttentionBackward
// (docs/backend-cuda.md, "Library routines").
// RUN: omnic %s --emit=decompose | FileCheck %s --check-prefix=CPU
// RUN: omnic %s --target=cuda --emit=decompose | FileCheck %s --check-prefix=CUDA
// RUN: omnic %s --emit=json | FileCheck %s --check-prefix=JSON

// CPU: omni.attention_grad
// CUDA-NOT: omni.attention_grad
// CUDA: omni.matmul
// CUDA-NOT: omni.attention_grad
// JSON: "library": "AttentionBackward"

func.func @g(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x6x8xf32>, %o: tensor<1x2x4x8xf32>, %do: tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>) {
  %dq, %dk, %dv = omni.attention_grad %q, %k, %k, %o, %do : (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>)
  return %dq, %dk, %dv : tensor<1x2x4x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>
}
