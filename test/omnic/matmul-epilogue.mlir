// A fusion that reads the matmul right before it by slices of rows is that
// matmul's epilogue (step.fbs LibraryCall.epilogue; docs/backend.md,
// "Matmul epilogues"): the cpu driver runs each of its work items right
// after the gemm block that computes its rows. Here bias + GELU after
// [4, 256, 32] x [64, 32]^T: 32 items of 32 rows (8192 bytes of the
// result), gemm blocks of 64 rows, so per block. A sum over the rows reads
// the second matmul whole: no epilogue. The results are the same bits with
// and without epilogues, on 1 and 2 threads. A third matmul's result is
// split into heads by a reshape (a view: no command) before the kernel
// that reads it: still an epilogue.
// RUN: omnic %s --emit=json | FileCheck %s
// RUN: omnic %s --emit=json --matmul-epilogues=false | FileCheck %s --check-prefix=OFF
// RUN: omnic %s -o %t.bin
// RUN: omnic %s --matmul-epilogues=false -o %t.off.bin
// RUN: omnirun %t.bin --function=f --input=i64=5 --threads=2 --output=@%t.a2.npy --output=@%t.b2.npy --output=@%t.c2.npy
// RUN: omnirun %t.bin --function=f --input=i64=5 --threads=1 --output=@%t.a1.npy --output=@%t.b1.npy --output=@%t.c1.npy
// RUN: omnirun %t.off.bin --function=f --input=i64=5 --threads=2 --output=@%t.a0.npy --output=@%t.b0.npy --output=@%t.c0.npy
// RUN: cmp %t.a2.npy %t.a0.npy
// RUN: cmp %t.b2.npy %t.b0.npy
// RUN: cmp %t.c2.npy %t.c0.npy
// RUN: cmp %t.a1.npy %t.a0.npy
// RUN: cmp %t.b1.npy %t.b0.npy
// RUN: cmp %t.c1.npy %t.c0.npy

// The kernels: bias + GELU over 32 items, the result (third buffer) and
// the matmul's (second) by 8192-byte slices, the bias whole; the sum whole.
// CHECK:      "kernels": [
// CHECK-NEXT:   "omni_kernel_0",
// CHECK-NEXT:   "omni_kernel_1"
// CHECK:      "grid": 32,
// CHECK:      "item_bytes": [
// CHECK-NEXT:   0,
// CHECK-NEXT:   8192,
// CHECK-NEXT:   8192
// CHECK-NEXT: ]
// CHECK:      "grid": 1,
// CHECK:      "item_bytes": [
// CHECK-NEXT:   0,
// CHECK-NEXT:   0
// CHECK-NEXT: ]

// The first matmul has its epilogue, kernel 0 right after it; the second
// has none.
// CHECK:      "library": "Matmul",
// CHECK:      "epilogue": true
// CHECK:      "kind_type": "Dispatch",
// CHECK-NEXT: "kind": {
// CHECK-NEXT:   "executable": 0,
// CHECK-NEXT:   "kernel": 0,
// CHECK-NEXT:   "grid": 32,
// CHECK:      "library": "Matmul",
// CHECK:      "epilogue": false
// CHECK:      "kernel": 1,
// CHECK:      "library": "Matmul",
// CHECK:      "epilogue": true
// CHECK:      "kind_type": "Dispatch",
// CHECK-NEXT: "kind": {
// CHECK-NEXT:   "executable": 0,
// CHECK-NEXT:   "kernel": 2,

// OFF-NOT: "epilogue": true

func.func @f(%seed: tensor<i64>) -> (tensor<4x256x64xf32>, tensor<64xf32>, tensor<4x256x4x16xf32>) {
  %zero = omni.constant dense<0> : tensor<i64>
  %one = omni.constant dense<1> : tensor<i64>
  %two = omni.constant dense<2> : tensor<i64>
  %three = omni.constant dense<3> : tensor<i64>
  %x = omni.random_normal %seed, %zero, %zero : tensor<4x256x32xf32>
  %w = omni.random_normal %seed, %one, %zero : tensor<64x32xf32>
  %b = omni.random_normal %seed, %two, %zero : tensor<64xf32>
  %u = omni.linear %x, %w bias %b : (tensor<4x256x32xf32>, tensor<64x32xf32>, tensor<64xf32>) -> tensor<4x256x64xf32>
  %g = omni.gelu tanh %u : tensor<4x256x64xf32>
  %w2 = omni.random_normal %seed, %three, %zero : tensor<64x32xf32>
  %m = omni.matmul %x, %w2 transpose_rhs : tensor<4x256x32xf32>, tensor<64x32xf32> -> tensor<4x256x64xf32>
  %s = omni.reduce sum %m dims = [0, 1] : tensor<4x256x64xf32> -> tensor<64xf32>
  %four = omni.constant dense<4> : tensor<i64>
  %w3 = omni.random_normal %seed, %four, %zero : tensor<64x32xf32>
  %q = omni.matmul %x, %w3 transpose_rhs : tensor<4x256x32xf32>, tensor<64x32xf32> -> tensor<4x256x64xf32>
  %h = omni.reshape %q : tensor<4x256x64xf32> -> tensor<4x256x4x16xf32>
  %e = omni.exp %h : tensor<4x256x4x16xf32>
  return %g, %s, %e : tensor<4x256x64xf32>, tensor<64xf32>, tensor<4x256x4x16xf32>
}
