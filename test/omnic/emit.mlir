// Tests omnic's --emit stages and the readable view of step.bin.
// RUN: omnic %s --emit=fuse | FileCheck %s --check-prefix=FUSE
// RUN: omnic %s --emit=plan-memory | FileCheck %s --check-prefix=PLAN
// RUN: omnic %s --emit=kernels | FileCheck %s --check-prefix=KERNELS
// RUN: omnic %s --emit=json | FileCheck %s --check-prefix=JSON
// RUN: omnic %s -o %t.bin && omnirun %t.bin --list | FileCheck %s --check-prefix=LIST

func.func @layer(%x: tensor<4x8xf32>, %w: tensor<3x8xf32>, %b: tensor<3xf32>) -> tensor<4xf32> {
  %y = omni.linear %x, %w bias %b : (tensor<4x8xf32>, tensor<3x8xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %a = omni.silu %y : tensor<4x3xf32>
  %s = omni.reduce sum %a dims = [1] : tensor<4x3xf32> -> tensor<4xf32>
  return %s : tensor<4xf32>
}

// The matmul stays a library op; bias, silu and the sum become one kernel.
// FUSE-LABEL: func.func @layer
// FUSE: omni.matmul
// FUSE: omni.fusion
// FUSE: omni.logistic
// FUSE: omni.reduce sum
// FUSE: omni.yield
// FUSE-NOT: omni.fusion

// PLAN: func.func @layer{{.*}}omni.arena_size = [[SIZE:[0-9]+]]
// PLAN: omni.matmul {{.*}}omni.offsets = array<i64: 0>
// PLAN: omni.fusion{{.*}}omni.offsets = array<i64: {{[0-9]+}}>

// KERNELS: func.func @omni_kernel_0_impl(%{{.*}}: tensor<3xf32>, %{{.*}}: tensor<4x3xf32>) -> tensor<4xf32>
// KERNELS: linalg.generic
// KERNELS: math.exp

// JSON: "version": 1
// JSON: "kind": "cpu"
// JSON: "format": "ElfSharedObject"
// JSON: "data": "<{{[0-9]+}} bytes>"
// JSON: "kernels": [
// JSON-NEXT: "omni_kernel_0"
// JSON: "functions": [
// JSON: "name": "layer"
// JSON: "kind_type": "LibraryCall"
// JSON: "library": "Matmul"
// JSON: "kind_type": "Dispatch"

// LIST: @layer(tensor<4x8xf32>, tensor<3x8xf32>, tensor<3xf32>) -> (tensor<4xf32>)
