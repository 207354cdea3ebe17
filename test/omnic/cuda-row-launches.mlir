// omnic --target=cuda runs a norm or a softmax as one row launch
// (compiler/codegen/cuda/CudaRowLaunches.cpp): the loops over its rows and
// over their elements run row by row, T threads a row (about 4 elements
// each, a power of two from 8 to 256) and 256 / T rows a block, each
// reduction folded by its row's threads through shared memory, barriers
// between the loops. Before, a layer
// norm was 4 launches (each reduction split in two) and read its rows from
// memory in each.
// REQUIRES: ptxas
// RUN: omnic %s --target=cuda --emit=json | FileCheck %s
// RUN: omnic %s --target=cuda --emit=ptx | FileCheck %s --check-prefix=PTX
// --cuda-row-launches=false, to compare: the layer norm as before, its
// reductions split (5 launches: chunks and fold for each, then the
// normalization).
// RUN: omnic %s --target=cuda --cuda-row-launches=false --emit=json | FileCheck %s --check-prefix=OFF
// OFF-LABEL: "gpu_kernels": [
// OFF: "entry": "omni_kernel_0_4",
// OFF-NOT: "entry": "omni_kernel_0_5",
// The flag is the cuda target's.
// RUN: not omnic %s --cuda-row-launches=false -o %t.bin 2>&1 | FileCheck %s --check-prefix=CPU
// CPU: omnic: --cuda-row-launches=false: needs --target=cuda (the cpu target has no launches)
// The same values as the cpu target's, through the emulation (which runs
// each segment between barriers for all threads of a block in turn).
// RUN: rm -rf %t && bash %S/Inputs/emulated-ops.sh omnic omnirun %s %omni_src_root/tools/gpu-check %t | FileCheck %s --check-prefix=SAME

// @layer_norm: 96 rows of 384: one launch, 128 threads a row (each walks
// 3 elements of a row per loop), 2 rows a block: 48 blocks; scratch: the
// rows' f64 sums, their f32 means and the f64 sums of squares.
// CHECK-LABEL: "gpu_kernels": [
// CHECK: "entry": "omni_kernel_0_0",
// CHECK-NEXT: "grid": [
// CHECK-NEXT: 48,
// CHECK: "block": [
// CHECK-NEXT: 256,
// CHECK-NOT: "entry": "omni_kernel_0_1",
// CHECK: "scratch": [
// CHECK-NEXT: 768,
// CHECK-NEXT: 384,
// CHECK-NEXT: 768
// CHECK-NEXT: ]
func.func @layer_norm(%x: tensor<96x384xf32>, %w: tensor<384xf32>, %b: tensor<384xf32>) -> tensor<96x384xf32> {
  %y = omni.layer_norm %x weight %w bias %b {eps = 1.0e-06} : (tensor<96x384xf32>, tensor<384xf32>, tensor<384xf32>) -> tensor<96x384xf32>
  return %y : tensor<96x384xf32>
}

// @softmax over 77 elements of 2 x 3 x 40 rows: one launch, 32 threads a
// row (the power of two at or above 77 / 4), 8 rows a block: 30 blocks of
// 256 threads, the max and the sum of exponentials each folded in shared
// memory.
// CHECK: "entry": "omni_kernel_1_0",
// CHECK-NEXT: "grid": [
// CHECK-NEXT: 30,
// CHECK: "block": [
// CHECK-NEXT: 256,
// CHECK-NOT: "entry": "omni_kernel_1_1",
func.func @softmax(%x: tensor<2x3x40x77xf32>) -> tensor<2x3x40x77xf32> {
  %y = omni.softmax %x, dim = 3 : tensor<2x3x40x77xf32>
  return %y : tensor<2x3x40x77xf32>
}

// @other_row: element (i, j) reads the sum of row j, so the elementwise
// loop cannot run row by row with the sum: the sum is a row launch (16
// threads a row, 16 rows a block: 4 blocks) and the elementwise loop its
// own launch.
// CHECK: "entry": "omni_kernel_2_0",
// CHECK-NEXT: "grid": [
// CHECK-NEXT: 4,
// CHECK: "block": [
// CHECK-NEXT: 256,
// CHECK: "entry": "omni_kernel_2_1",
// CHECK-NEXT: "grid": [
// CHECK-NEXT: 16,
// CHECK: "block": [
// CHECK-NEXT: 256,
func.func @other_row(%x: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %s = omni.reduce sum %x dims = [1] : tensor<64x64xf32> -> tensor<64xf32>
  %sb = omni.broadcast_in_dim %s, dims = [1] : tensor<64xf32> -> tensor<64x64xf32>
  %y = omni.sub %x, %sb : tensor<64x64xf32>
  return %y : tensor<64x64xf32>
}

// @column_sum: a block per column would read with a stride of 64 floats in
// every thread; it stays split in two launches (chunks of each column, then
// one thread per column), without shared memory.
// CHECK: "entry": "omni_kernel_3_0",
// CHECK-NEXT: "grid": [
// CHECK-NEXT: 5,
// CHECK: "entry": "omni_kernel_3_1",
func.func @column_sum(%x: tensor<300x64xf32>) -> tensor<64xf32> {
  %s = omni.reduce sum %x dims = [0] : tensor<300x64xf32> -> tensor<64xf32>
  return %s : tensor<64xf32>
}

// @short_rows: 16 elements a row are fewer than a row launch takes (32):
// one thread per row.
// CHECK: "entry": "omni_kernel_4_0",
// CHECK-NEXT: "grid": [
// CHECK-NEXT: 1,
// CHECK: "block": [
// CHECK-NEXT: 64,
// CHECK-NOT: "entry": "omni_kernel_4_1",
func.func @short_rows(%x: tensor<64x16xf32>) -> tensor<64xf32> {
  %s = omni.reduce max %x dims = [1] : tensor<64x16xf32> -> tensor<64xf32>
  return %s : tensor<64xf32>
}

// The layer norm's block holds 256 f64 partial sums (2048 bytes, 128 for
// each of its 2 rows) in shared memory, reused by its second reduction;
// the softmax one of f32 (for the max) and one of f64 (the sum).
// A row of the layer norm has 128 lanes (4 warps): the block waits at
// bar.sync where lanes of different warps exchange values (the partial
// sums stored, the first fold step, between the loops), and the last five
// fold steps, within the row's first warp, need only bar.warp.sync.
// PTX: .entry omni_kernel_0_0(
// PTX: .shared .align 8 .b8 __wg_omni_kernel_0_0_0[2048];
// PTX-NOT: .shared .align
// PTX: bar.sync
// PTX: bar.sync
// PTX-COUNT-5: bar.warp.sync -1;
// A softmax row has 32 lanes, one warp: warp barriers only.
// PTX: .entry omni_kernel_1_0(
// PTX: .shared .align 4 .b8 __wg_omni_kernel_1_0_0[1024];
// PTX: .shared .align 8 .b8 __wg_omni_kernel_1_0_1[2048];
// PTX-NOT: bar.sync
// PTX: bar.warp.sync -1;
// PTX-NOT: bar.sync
// PTX: .entry omni_kernel_3_0(
// PTX-NOT: .shared
// PTX: .entry omni_kernel_3_1(

// SAME: layer_norm result 0: PASS
// SAME: softmax result 0: PASS
// SAME: other_row result 0: PASS
// SAME: column_sum result 0: PASS
// SAME: short_rows result 0: PASS
// SAME: 5 results, 0 failed
