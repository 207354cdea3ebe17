// Kernels bound by their arithmetic get the target's widest vectors
// (docs/backend.md, "Vector width"): LLVM keeps 256-bit vectors on AVX-512
// CPUs unless a function asks for 512, which omnic does for a kernel with an
// expanded exp (its llvm.floor) or a division. The exp kernel below is
// vectorized 16 floats wide, the add after the matmul (a light kernel,
// bound by memory) stays at 8; on an AVX2 target both are 8 wide.
// RUN: omnic %s --emit=llvm --target-cpu=sapphirerapids | FileCheck %s --check-prefix=AVX512
// RUN: omnic %s --emit=llvm --target-cpu=haswell | FileCheck %s --check-prefix=AVX2

// AVX512-LABEL: define void @omni_kernel_0(
// AVX512-SAME: #[[WIDE:[0-9]+]]
// AVX512: @llvm.floor.v16f32
// AVX512-LABEL: define void @omni_kernel_1(
// AVX512-SAME: #[[NARROW:[0-9]+]]
// AVX512-NOT: <16 x float>
// AVX512: fadd <8 x float>
// AVX512-NOT: <16 x float>
// AVX512: {{^}}}
// AVX512: attributes #[[WIDE]] = {{.*}}"prefer-vector-width"="512"
// AVX512-NOT: attributes #[[NARROW]] = {{.*}}prefer-vector-width

// AVX2-NOT: <16 x float>
// AVX2: @llvm.floor.v8f32
// AVX2-NOT: <16 x float>

func.func @main(%x: tensor<64x256xf32>, %w: tensor<256x256xf32>) -> tensor<64x256xf32> {
  %e = omni.exp %x : tensor<64x256xf32>
  %m = omni.matmul %e, %w : tensor<64x256xf32>, tensor<256x256xf32> -> tensor<64x256xf32>
  %r = omni.add %m, %x : tensor<64x256xf32>
  return %r : tensor<64x256xf32>
}
