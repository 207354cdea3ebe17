// omnic --target=cuda's one-line errors; none of them needs the toolkit.
// RUN: not omnic %s --target=cuda --cuda-arch=sm_75 --emit=json 2>&1 | FileCheck %s --check-prefix=ARCH
// RUN: not omnic %s --target=cuda --cuda-arch=compute_90 -o %t.bin 2>&1 | FileCheck %s --check-prefix=ARCH2
// RUN: env OMNI_PTXAS=%t.nonexistent/ptxas not omnic %s --target=cuda -o %t.bin 2>&1 | FileCheck %s --check-prefix=PTXAS -DPATH=%t.nonexistent/ptxas
// RUN: not omnic %s --emit=ptx 2>&1 | FileCheck %s --check-prefix=PTXCPU
// RUN: not omnic %s --target=cuda --emit=llvm 2>&1 | FileCheck %s --check-prefix=LLVMCUDA

// ARCH: omnic: --cuda-arch=sm_75: unknown SM architecture; expected sm_80, sm_86, sm_89, sm_90 or sm_90a{{$}}
// ARCH2: omnic: --cuda-arch=compute_90: unknown SM architecture; expected
// PTXAS: error: cannot assemble the cuda kernels: no ptxas at '[[PATH]]' (install the CUDA toolkit or set OMNI_PTXAS to its ptxas){{$}}
// PTXAS-NOT: error
// PTXCPU: omnic: --emit=ptx: needs --target=cuda (the cpu target's IR is --emit=llvm){{$}}
// LLVMCUDA: omnic: --emit=llvm: the cuda target's kernels are PTX; use --emit=ptx{{$}}

func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = omni.exp %x : tensor<4xf32>
  return %y : tensor<4xf32>
}
