// omnic --target=cuda recomputes an elementwise producer in each of its k
// readers (instead of storing it in a scratch buffer) when k times its
// inputs' bytes are at most k + 1 times its value's
// (compiler/codegen/cuda/CudaLinalgFusion.cpp, fuseProducer): an attention head's RMS norm reading the bf16 projection,
// widened to f32 with its bias added and transposed, reads the bf16 input
// in its sum of squares and again in its normalization. And a value read
// only by slices is computed per slice (sliceProducers).
// REQUIRES: ptxas
// RUN: omnic %s --target=cuda --emit=json | FileCheck %s

// @norm: two launches, the sum of squares (one thread per row: 512 rows)
// and the normalization (8192 elements), both reading the bf16 operand
// (buffer 0); the only scratch is the rows' f64 accumulators (512 x 8
// bytes), not the f32 value (32768 bytes).
// CHECK-LABEL: "gpu_kernels": [
// CHECK: "entry": "omni_kernel_0_0",
// CHECK-NEXT: "grid": [
// CHECK-NEXT: 2,
// CHECK: "args": [
// CHECK-NEXT: 3,
// CHECK-NEXT: 1,
// CHECK-NEXT: 0
// CHECK-NEXT: ]
// CHECK: "entry": "omni_kernel_0_1",
// CHECK-NEXT: "grid": [
// CHECK-NEXT: 32,
// CHECK: "args": [
// CHECK-NEXT: 1,
// CHECK-NEXT: 0,
// CHECK-NEXT: 3,
// CHECK-NEXT: 2
// CHECK-NEXT: ]
// CHECK-NEXT: }
// CHECK-NEXT: ],
// CHECK-NEXT: "scratch": [
// CHECK-NEXT: 4096
// CHECK-NEXT: ]
func.func @norm(%x: tensor<2x64x4x16xbf16>, %bias: tensor<4x16xf32>) -> tensor<2x4x64x16xbf16> {
  %f = omni.cast %x : tensor<2x64x4x16xbf16> -> tensor<2x64x4x16xf32>
  %b = omni.broadcast_in_dim %bias, dims = [2, 3] : tensor<4x16xf32> -> tensor<2x64x4x16xf32>
  %a = omni.add %f, %b : tensor<2x64x4x16xf32>
  %t = omni.transpose %a, permutation = [0, 2, 1, 3] : tensor<2x64x4x16xf32> -> tensor<2x4x64x16xf32>
  %sq = omni.mul %t, %t : tensor<2x4x64x16xf32>
  %ms = omni.reduce mean %sq dims = [3] : tensor<2x4x64x16xf32> -> tensor<2x4x64xf32>
  %eps = omni.constant dense<1.0e-6> : tensor<2x4x64xf32>
  %v = omni.add %ms, %eps : tensor<2x4x64xf32>
  %r = omni.rsqrt %v : tensor<2x4x64xf32>
  %rb = omni.broadcast_in_dim %r, dims = [0, 1, 2] : tensor<2x4x64xf32> -> tensor<2x4x64x16xf32>
  %n = omni.mul %t, %rb : tensor<2x4x64x16xf32>
  %q = omni.cast %n : tensor<2x4x64x16xf32> -> tensor<2x4x64x16xbf16>
  return %q : tensor<2x4x64x16xbf16>
}

// @sum_norm: the producer adds two f32 tensors into one; recomputed, each
// reader would read 64 KiB instead of 32 KiB, so it is stored: three
// launches, the f32 value (32768 bytes) in scratch.
// CHECK: "entry": "omni_kernel_1_0",
// CHECK: "entry": "omni_kernel_1_1",
// CHECK: "entry": "omni_kernel_1_2",
// CHECK: "scratch": [
// CHECK-NEXT: 32768,
// CHECK-NEXT: 4096
// CHECK-NEXT: ]
func.func @sum_norm(%x: tensor<2x4x64x16xf32>, %y: tensor<2x4x64x16xf32>) -> tensor<2x4x64x16xf32> {
  %t = omni.add %x, %y : tensor<2x4x64x16xf32>
  %sq = omni.mul %t, %t : tensor<2x4x64x16xf32>
  %ms = omni.reduce mean %sq dims = [3] : tensor<2x4x64x16xf32> -> tensor<2x4x64xf32>
  %eps = omni.constant dense<1.0e-6> : tensor<2x4x64xf32>
  %v = omni.add %ms, %eps : tensor<2x4x64xf32>
  %r = omni.rsqrt %v : tensor<2x4x64xf32>
  %rb = omni.broadcast_in_dim %r, dims = [0, 1, 2] : tensor<2x4x64xf32> -> tensor<2x4x64x16xf32>
  %n = omni.mul %t, %rb : tensor<2x4x64x16xf32>
  return %n : tensor<2x4x64x16xf32>
}

// @sliced: the attention's output widened and transposed, cut into its
// image and text tokens, each rounded: each part reads its part of the
// bf16 input (buffer 0) and writes its result (1, 2); no scratch (before:
// the whole f32 value, 6144 bytes, and a third launch). The two parts
// touch nothing the other writes, so they share a launch: 4 blocks for
// the image part, then 2 for the text (CudaLaunches.cpp).
// CHECK: "entry": "omni_kernel_2_0",
// CHECK-NEXT: "grid": [
// CHECK-NEXT: 6,
// CHECK: "args": [
// CHECK-NEXT: 0,
// CHECK-NEXT: 1,
// CHECK-NEXT: 2
// CHECK-NEXT: ]
// CHECK-NEXT: }
// CHECK-NEXT: ],
// CHECK-NEXT: "scratch": [
// CHECK-EMPTY:
// CHECK-NEXT: ],
func.func @sliced(%o: tensor<2x4x12x16xbf16>) -> (tensor<2x8x4x16xbf16>, tensor<2x4x4x16xbf16>) {
  %f = omni.cast %o : tensor<2x4x12x16xbf16> -> tensor<2x4x12x16xf32>
  %t = omni.transpose %f, permutation = [0, 2, 1, 3] : tensor<2x4x12x16xf32> -> tensor<2x12x4x16xf32>
  %a = omni.slice %t [0:2:1, 0:8:1, 0:4:1, 0:16:1] : tensor<2x12x4x16xf32> -> tensor<2x8x4x16xf32>
  %ab = omni.cast %a : tensor<2x8x4x16xf32> -> tensor<2x8x4x16xbf16>
  %b = omni.slice %t [0:2:1, 8:12:1, 0:4:1, 0:16:1] : tensor<2x12x4x16xf32> -> tensor<2x4x4x16xf32>
  %bb = omni.cast %b : tensor<2x4x4x16xf32> -> tensor<2x4x4x16xbf16>
  return %ab, %bb : tensor<2x8x4x16xbf16>, tensor<2x4x4x16xbf16>
}

// @layer_norm: the centered rows x - mean, read by the variance and by the
// normalization, read [2, 64, 64] f32 and a [2, 64] mean: 2 readers x
// 32.5 KiB <= 3 x 32 KiB, so each reader recomputes them and no scratch
// buffer holds them (before: a 32768-byte scratch buffer and one launch
// more). It is one row launch (CudaRowLaunches.cpp): 16 threads a row,
// 16 rows a block. The scratch left: the rows' f64 accumulators and f32
// means.
// CHECK: "entry": "omni_kernel_3_0",
// CHECK-NEXT: "grid": [
// CHECK-NEXT: 8,
// CHECK: "block": [
// CHECK-NEXT: 256,
// CHECK-NOT: "entry": "omni_kernel_3_1",
// CHECK: "scratch": [
// CHECK-NOT: 32768
// CHECK: ],
func.func @layer_norm(%x: tensor<2x64x64xf32>) -> tensor<2x64x64xf32> {
  %m = omni.reduce mean %x dims = [2] : tensor<2x64x64xf32> -> tensor<2x64xf32>
  %mb = omni.broadcast_in_dim %m, dims = [0, 1] : tensor<2x64xf32> -> tensor<2x64x64xf32>
  %c = omni.sub %x, %mb : tensor<2x64x64xf32>
  %sq = omni.mul %c, %c : tensor<2x64x64xf32>
  %v = omni.reduce mean %sq dims = [2] : tensor<2x64x64xf32> -> tensor<2x64xf32>
  %eps = omni.constant dense<1.0e-6> : tensor<2x64xf32>
  %ve = omni.add %v, %eps : tensor<2x64xf32>
  %r = omni.rsqrt %ve : tensor<2x64xf32>
  %rb = omni.broadcast_in_dim %r, dims = [0, 1] : tensor<2x64xf32> -> tensor<2x64x64xf32>
  %n = omni.mul %c, %rb : tensor<2x64x64xf32>
  return %n : tensor<2x64x64xf32>
}
