//===- CudaEmulation.h - the cuda target's launches run on the cpu -*- C++ -*-//
//
// omnic --target=cuda --cuda-emulate: the kernels of the cuda target, as
// its lowering launches them (the same parallel loops mapped to grids and
// blocks, the same guards, reductions, scratch buffers and argument lists),
// compiled for this CPU instead of PTX: each launch is a loop over its
// blocks and threads, run one thread after another. The step.bin is a cpu
// one (the cpu driver runs it, library calls included), so the cuda
// lowering's logic can be checked against the cpu target without a GPU
// (test/codegen/cuda-emulate.test). What it does not check: the NVVM and
// PTX lowering, libdevice, ptxas, and anything a GPU does concurrently
// (the kernels have no shared memory, barriers or atomics, so running
// their threads in order computes what the GPU computes).
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_COMPILER_CODEGEN_CUDA_CUDAEMULATION_H
#define OMNI_COMPILER_CODEGEN_CUDA_CUDAEMULATION_H

#include "compiler/codegen/Codegen.h"
#include "compiler/codegen/KernelSet.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

#include <string>
#include <vector>

namespace mlir::omni {

/// Replaces the outlined kernels of `merged` (in `kernels`, whose host
/// functions are gone) by one function `<symbol>_impl` per kernel of
/// `defs`, taking its buffers (`argTypes[k]`, the kernel function's
/// argument types: operands, results, then scratch) and running its
/// `launches` in order, and compiles them with the cpu target's back half:
/// the executable "kernels", format ElfSharedObject, target cpu, each
/// kernel run whole (grid 1). `llvmIR` as for the cpu target.
FailureOr<CompiledExecutable>
emulateCudaLaunches(ModuleOp kernels, gpu::GPUModuleOp merged,
                    ArrayRef<KernelDef> defs, ArrayRef<GpuLaunches> launches,
                    ArrayRef<SmallVector<Type>> argTypes,
                    const CodegenOptions &options, std::string *llvmIR);

/// omnic --cuda-host-kernels: each launch of `launches` (kernel k's
/// `argTypes[k]` indexed by the launch's args) as a host function named
/// after its entry, with the cpu kernel ABI, run whole (begin 0, end 1,
/// the launch's buffers, no scalars), its grid and block as the cuda
/// lowering chose them. The shared object also exports
/// `omni_host_kernels`, a string with one line per entry: its name, grid,
/// block and the bytes of each buffer ("omni_kernel_3_0 12 256 4096 4096"),
/// which
/// the cuda driver's host model of libcuda (drivers/cuda/host) reads to
/// run a launch from cuLaunchKernel's parameters. Returns the shared
/// object's bytes.
FailureOr<std::vector<char>>
compileHostKernels(ModuleOp kernels, gpu::GPUModuleOp merged,
                   ArrayRef<GpuLaunches> launches,
                   ArrayRef<SmallVector<Type>> argTypes,
                   const CodegenOptions &options, std::string *llvmIR);

} // namespace mlir::omni

#endif // OMNI_COMPILER_CODEGEN_CUDA_CUDAEMULATION_H
