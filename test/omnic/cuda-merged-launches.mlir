// omnic --target=cuda merges adjacent launches that touch nothing the other
// writes (compiler/codegen/cuda/CudaLaunches.cpp, mergeIndependentLaunches):
// the blocks of the first, then those of the second, each running its own
// part. Launches that depend on each other, or wait at barriers, stay
// apart.
// REQUIRES: ptxas
// RUN: omnic %s --target=cuda --emit=json | FileCheck %s
// RUN: omnic %s --target=cuda --cuda-merge-launches=false --emit=json | FileCheck %s --check-prefix=OFF
// RUN: not omnic %s --cuda-merge-launches=false -o %t.bin 2>&1 | FileCheck %s --check-prefix=CPU
// RUN: rm -rf %t && bash %S/Inputs/emulated-ops.sh omnic omnirun %s %omni_src_root/tools/gpu-check %t | FileCheck %s --check-prefix=SAME

// @concat: the two parts write disjoint column ranges of the result (two
// subviews of it): 25 blocks for the first part's 6400 elements, 7 for the
// second's 1792, in one launch.
// CHECK-LABEL: "gpu_kernels": [
// CHECK: "entry": "omni_kernel_0_0",
// CHECK-NEXT: "grid": [
// CHECK-NEXT: 32,
// CHECK: "block": [
// CHECK-NEXT: 256,
// CHECK-NOT: "entry": "omni_kernel_0_1",
// With --cuda-merge-launches=false (to compare), two launches.
// OFF: "entry": "omni_kernel_0_1",
// CPU: omnic: --cuda-merge-launches=false: needs --target=cuda (the cpu target has no launches)
func.func @concat(%a: tensor<64x100xf32>, %b: tensor<64x28xf32>) -> tensor<64x128xf32> {
  %ea = omni.exp %a : tensor<64x100xf32>
  %c = omni.concat %ea, %b dim = 1 : (tensor<64x100xf32>, tensor<64x28xf32>) -> tensor<64x128xf32>
  return %c : tensor<64x128xf32>
}

// @chain: a column sum (chunks, then a thread per column) whose result the
// elementwise loop reads: three launches, each reading what the one
// before wrote.
// CHECK: "entry": "omni_kernel_1_0",
// CHECK: "entry": "omni_kernel_1_1",
// CHECK: "entry": "omni_kernel_1_2",
func.func @chain(%x: tensor<64x300xf32>, %y: tensor<300xf32>) -> (tensor<64x300xf32>, tensor<300xf32>) {
  %s = omni.reduce sum %x dims = [0] : tensor<64x300xf32> -> tensor<300xf32>
  %t = omni.add %s, %y : tensor<300xf32>
  %tb = omni.broadcast_in_dim %t, dims = [1] : tensor<300xf32> -> tensor<64x300xf32>
  %z = omni.mul %x, %tb : tensor<64x300xf32>
  return %z, %t : tensor<64x300xf32>, tensor<300xf32>
}

// SAME: concat result 0: PASS
// SAME: chain result 0: PASS
// SAME: chain result 1: PASS
// SAME: 3 results, 0 failed
