// omnic --target=cuda: every kernel is a sequence of GPU launches over its
// buffers (operands, results, then scratch), 256-thread blocks on a 1-D grid
// over the output elements, assembled by ptxas into a cubin that step.bin
// carries with its PTX (docs/backend-cuda.md).
// REQUIRES: ptxas
// RUN: omnic %s --target=cuda --emit=json | FileCheck %s
// RUN: omnic %s --target=cuda --emit=ptx | FileCheck %s --check-prefix=PTX
// RUN: omnic %s --target=cuda --emit=ptx | FileCheck %s --check-prefix=ROOTS --implicit-check-not=sqrt.approx --implicit-check-not=rsqrt.approx
// RUN: omnic %s --target=cuda --cuda-arch=sm_80 --emit=json | FileCheck %s --check-prefix=SM80
// RUN: omnic %s --target=cuda --cuda-arch=sm_80 --emit=ptx | FileCheck %s --check-prefix=PTX80
// The same program gives the same bytes.
// RUN: omnic %s --target=cuda -o %t.1.bin
// RUN: omnic %s --target=cuda -o %t.2.bin
// RUN: cmp %t.1.bin %t.2.bin
// The cpu device refuses it in one line.
// RUN: not omnirun %t.1.bin --function negate --input="2xf32=1 2" 2>&1 | FileCheck %s --check-prefix=CPU

// CHECK: "target": {
// CHECK-NEXT: "kind": "cuda",
// CHECK-NEXT: "cpu": "sm_90a",
// CHECK-NEXT: "features": "+ptx81"
// CHECK: "format": "Cubin",
// CHECK-NEXT: "target": "sm_90a",
// CHECK-NEXT: "data": "<{{[0-9]+}} bytes>",
// CHECK: "grid": 1,

// Elementwise over 1000 elements: ceil(1000 / 256) = 4 blocks, x, y -> z.
// CHECK-LABEL: "gpu_kernels": [
// CHECK: "entry": "omni_kernel_0_0",
// CHECK-NEXT: "grid": [
// CHECK-NEXT: 4,
// CHECK-NEXT: 1,
// CHECK-NEXT: 1
// CHECK-NEXT: ],
// CHECK-NEXT: "block": [
// CHECK-NEXT: 256,
// CHECK-NEXT: 1,
// CHECK-NEXT: 1
// CHECK-NEXT: ],
// CHECK-NEXT: "shared_bytes": 0,
// CHECK-NEXT: "args": [
// CHECK-NEXT: 0,
// CHECK-NEXT: 1,
// CHECK-NEXT: 2
// CHECK-NEXT: ]
// CHECK: "scratch": [
// CHECK-NOT: {{[0-9]}}
// CHECK: ]

// The row sum (2 rows of 40000, longer than a row launch takes,
// CudaRowLaunches.cpp): 2 x 2500 threads (20 blocks) each sum every
// 2500th element of a row (at least 16 elements per thread) into partials
// (scratch buffer 2: 2 x 2500 f64); then one launch of a thread per row
// folds the row's 2500 partials in order and rounds the sum into the
// result (buffer 1): the fill, fold and rounding loops are fused
// (CudaLoopFusion.cpp), so the accumulator is the thread's register and
// needs no scratch buffer (scratchToRegisters).
// CHECK: "entry": "omni_kernel_1_0",
// CHECK-NEXT: "grid": [
// CHECK-NEXT: 20,
// CHECK: "args": [
// CHECK-NEXT: 0,
// CHECK-NEXT: 2
// CHECK-NEXT: ]
// CHECK: "entry": "omni_kernel_1_1",
// CHECK: "block": [
// CHECK-NEXT: 32,
// CHECK: "args": [
// CHECK-NEXT: 2,
// CHECK-NEXT: 1
// CHECK-NEXT: ]
// CHECK-NEXT: }
// CHECK-NEXT: ],
// CHECK-NEXT: "scratch": [
// CHECK-NEXT: 40000
// CHECK-NEXT: ]

// The broadcast add: 64 x 300 = 19200 elements = 75 blocks of 256.
// CHECK: "entry": "omni_kernel_2_0",
// CHECK-NEXT: "grid": [
// CHECK-NEXT: 75,
// CHECK: "block": [
// CHECK-NEXT: 256,

// A full reduction to one element runs in one thread.
// CHECK: "entry": "omni_kernel_3_0",
// CHECK-NEXT: "grid": [
// CHECK-NEXT: 1,
// CHECK-NEXT: 1,
// CHECK-NEXT: 1
// CHECK-NEXT: ],
// CHECK-NEXT: "block": [
// CHECK-NEXT: 1,
// CHECK-NEXT: 1,
// CHECK-NEXT: 1
// CHECK-NEXT: ],
// CHECK: "scratch": [
// CHECK-NEXT: 8
// CHECK-NEXT: ]
// A full reduction of 512 x 64 = 32768 elements runs on ceil(32768 / 1024)
// = 32 blocks: thread t of 8192 sums elements t, t + 8192, ... in a
// register, and each block folds its 256 sums in shared memory into
// blockPartials[block] (scratch buffer 3: 32 f64); then one thread fills
// the accumulator (scratch 2), adds those to it in order and rounds it
// into the result (buffer 1): the fill waits for that launch, since the
// first does not read what it writes.
// CHECK: "entry": "omni_kernel_4_0",
// CHECK-NEXT: "grid": [
// CHECK-NEXT: 32,
// CHECK: "block": [
// CHECK-NEXT: 256,
// CHECK: "args": [
// CHECK-NEXT: 0,
// CHECK-NEXT: 3
// CHECK-NEXT: ]
// CHECK: "entry": "omni_kernel_4_1",
// CHECK-NEXT: "grid": [
// CHECK-NEXT: 1,
// CHECK: "block": [
// CHECK-NEXT: 1,
// CHECK: "args": [
// CHECK-NEXT: 2,
// CHECK-NEXT: 3,
// CHECK-NEXT: 1
// CHECK-NEXT: ]
// CHECK-NEXT: }
// CHECK-NEXT: ],
// CHECK-NEXT: "scratch": [
// CHECK-NEXT: 8,
// CHECK-NEXT: 256
// CHECK-NEXT: ]

// Two results of one shape: one launch.
// CHECK: "entry": "omni_kernel_8_0",
// CHECK-NOT: "entry"
// CHECK: "scratch": [

// 1024 x 1028 elements, a multiple of 4 and at least 2^20: 4 per thread,
// 263168 threads (1028 blocks).
// CHECK: "entry": "omni_kernel_9_0",
// CHECK-NEXT: "grid": [
// CHECK-NEXT: 1028,
// CHECK: "block": [
// CHECK-NEXT: 256,
// 1023 x 1027 is not a multiple of 4: one element per thread.
// CHECK: "entry": "omni_kernel_10_0",
// CHECK-NEXT: "grid": [
// CHECK-NEXT: 4104,
// CHECK: "ptx": "<{{[0-9]+}} bytes>"

// PTX: .version 8.1
// PTX-NEXT: .target sm_90a
// PTX: .entry omni_kernel_0_0(
// PTX: .maxntid 256, 1, 1
// exp goes through libdevice's __nv_expf, inlined (no call is left).
// PTX-NOT: call{{.*}}__nv_
// PTX: ex2.approx
// The sum accumulates in f64 (the row chunks' launch).
// PTX: .entry omni_kernel_1_0(
// PTX: .maxntid 256, 1, 1
// PTX: cvt.f64.f32
// PTX: add.rn.f64
// PTX: .entry omni_kernel_1_1(
// PTX: .maxntid 32, 1, 1
// PTX: .entry omni_kernel_3_0(
// PTX: .maxntid 1, 1, 1
// The cooperative sum: a register accumulates the thread's f64 sum, stored
// once to shared memory; the block's tree ends in thread 0's one global
// store.
// PTX: .entry omni_kernel_4_0(
// PTX: .maxntid 256, 1, 1
// PTX: add.rn.f64
// PTX: st.shared.b64
// PTX-NEXT: bar.sync 0;
// PTX: st.global.b64
// PTX-NOT: st.global
// PTX: ret;
// No result in place: the parameters are noalias, and read-only ones are
// read through the non-coherent cache.
// PTX: .entry omni_kernel_8_0(
// PTX: ld.global.nc.b32
// The coarsened kernel issues the loads of its 4 elements (2 each) before
// its first store.
// PTX: .entry omni_kernel_9_0(
// PTX-COUNT-8: ld.global.nc.b32
// PTX-NOT: ld.global
// PTX: st.global.b8
// PTX-COUNT-3: st.global.b8
// PTX-NOT: ld.global
// PTX: ret;

// Square roots are correctly rounded as on the cpu (not libdevice's
// approximate __nv_sqrtf); rsqrt is 1 / sqrt.
// ROOTS: .entry omni_kernel_6_0(
// ROOTS: sqrt.rn.f32
// ROOTS: rcp.rn.f32
// ROOTS: sqrt.rn.f64

// SM80: "cpu": "sm_80",
// SM80: "target": "sm_80",
// PTX80: .target sm_80

// CPU: was compiled for cuda, which the cpu device cannot run (run it with --gpus N, or compile it with omnic --target=cpu)

func.func @elementwise(%x: tensor<1000xf32>, %y: tensor<1000xf32>) -> tensor<1000xf32> {
  %e = omni.exp %x : tensor<1000xf32>
  %z = omni.mul %e, %y : tensor<1000xf32>
  return %z : tensor<1000xf32>
}

func.func @row_sum(%x: tensor<2x40000xf32>) -> tensor<2xf32> {
  %s = omni.reduce sum %x dims = [1] : tensor<2x40000xf32> -> tensor<2xf32>
  return %s : tensor<2xf32>
}

func.func @broadcast(%x: tensor<64x300xf32>, %b: tensor<300xf32>) -> tensor<64x300xf32> {
  %bb = omni.broadcast_in_dim %b, dims = [1] : tensor<300xf32> -> tensor<64x300xf32>
  %y = omni.add %x, %bb : tensor<64x300xf32>
  return %y : tensor<64x300xf32>
}

func.func @total(%x: tensor<16x8xf32>) -> tensor<f32> {
  %s = omni.reduce sum %x dims = [0, 1] : tensor<16x8xf32> -> tensor<f32>
  return %s : tensor<f32>
}

func.func @big_sum(%x: tensor<512x64xf32>) -> tensor<f32> {
  %s = omni.reduce sum %x dims = [0, 1] : tensor<512x64xf32> -> tensor<f32>
  return %s : tensor<f32>
}

func.func @negate(%x: tensor<2xf32>) -> tensor<2xf32> {
  %y = omni.neg %x : tensor<2xf32>
  return %y : tensor<2xf32>
}

func.func @roots(%x: tensor<1000xf32>, %d: tensor<1000xf64>) -> (tensor<1000xf32>, tensor<1000xf32>, tensor<1000xf64>) {
  %a = omni.sqrt %x : tensor<1000xf32>
  %b = omni.rsqrt %x : tensor<1000xf32>
  %c = omni.sqrt %d : tensor<1000xf64>
  return %a, %b, %c : tensor<1000xf32>, tensor<1000xf32>, tensor<1000xf64>
}

func.func @two_results(%x: tensor<64x300xf32>, %y: tensor<64x300xf32>) -> (tensor<64x300xf32>, tensor<64x300xf32>) {
  %s = omni.add %x, %y : tensor<64x300xf32>
  %d = omni.sub %x, %y : tensor<64x300xf32>
  return %s, %d : tensor<64x300xf32>, tensor<64x300xf32>
}

func.func @big(%x: tensor<1024xf32>, %y: tensor<1028xf32>) -> tensor<1024x1028xi1> {
  %bx = omni.broadcast_in_dim %x, dims = [0] : tensor<1024xf32> -> tensor<1024x1028xf32>
  %by = omni.broadcast_in_dim %y, dims = [1] : tensor<1028xf32> -> tensor<1024x1028xf32>
  %s = omni.add %bx, %by : tensor<1024x1028xf32>
  %z = omni.constant dense<0.0> : tensor<1024x1028xf32>
  %p = omni.compare lt, %s, %z : tensor<1024x1028xf32>
  return %p : tensor<1024x1028xi1>
}

func.func @big_odd(%x: tensor<1023xf32>, %y: tensor<1027xf32>) -> tensor<1023x1027xi1> {
  %bx = omni.broadcast_in_dim %x, dims = [0] : tensor<1023xf32> -> tensor<1023x1027xf32>
  %by = omni.broadcast_in_dim %y, dims = [1] : tensor<1027xf32> -> tensor<1023x1027xf32>
  %s = omni.add %bx, %by : tensor<1023x1027xf32>
  %z = omni.constant dense<0.0> : tensor<1023x1027xf32>
  %p = omni.compare lt, %s, %z : tensor<1023x1027xf32>
  return %p : tensor<1023x1027xi1>
}
