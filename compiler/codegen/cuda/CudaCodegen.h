//===- CudaCodegen.h - the cuda target: kernels to PTX and a cubin -*- C++ -*-//
//
// The cuda target's half of code generation: lowers a KernelSet (linalg on
// tensors) into one Cubin executable whose kernels are sequences of GPU
// launches over the dispatch's buffers and scratch temporaries (step.fbs
// GpuKernel, docs/backend-cuda.md). The kernel bodies go through
// bufferization, parallel loops mapped to a 1-D grid of 256-thread blocks,
// the gpu and NVVM dialects and LLVM's NVPTX backend to PTX; the toolkit's
// ptxas assembles the PTX into a cubin at compile time. Only
// compiler/codegen/Codegen.cpp calls this; everything else goes through
// Codegen.h.
//
// Thread safety: may run concurrently on different MLIRContexts (ptxas runs
// in its own temporary files).
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_COMPILER_CODEGEN_CUDA_CUDACODEGEN_H
#define OMNI_COMPILER_CODEGEN_CUDA_CUDACODEGEN_H

#include "compiler/codegen/Codegen.h"
#include "compiler/codegen/KernelSet.h"

#include <string>

namespace mlir::omni {

/// Lowers `set` (its module is rewritten) into the executable "kernels":
/// format Cubin, target {cuda, the SM architecture, "+ptx81"}, code = the
/// cubin, ptx = the PTX text, one kernel per KernelDef with GpuLaunches.
/// `ptx`, if given, receives the PTX text (`--emit=ptx`).
FailureOr<CompiledExecutable>
lowerKernelSetForCuda(KernelSet &set, const CodegenOptions &options,
                      std::string *ptx);

/// Checks a CudaTargetOptions::arch value: "" when omnic can compile for it,
/// otherwise a one-line message naming the value and what is expected.
std::string checkCudaArch(llvm::StringRef arch);

/// The ptxas omnic runs: $OMNI_PTXAS when set, else the one CMake found.
std::string ptxasPath();

} // namespace mlir::omni

#endif // OMNI_COMPILER_CODEGEN_CUDA_CUDACODEGEN_H
