//===- CpuCodegen.h - the cpu target: kernels to an x86-64 .so --*- C++ -*-===//
//
// The cpu target's half of code generation: lowers a KernelSet (linalg on
// tensors) into one ELF shared object whose exported kernels follow the ABI
// of docs/backend.md:
//   void k(int64_t begin, int64_t end, void **buffers, const int64_t *scalars)
// Kernel bodies go through bufferization, loops and LLVM, and are compiled
// in-process by LLVM's TargetMachine; ld.lld links the object. Only
// compiler/codegen/Codegen.cpp and the cuda target's emulation
// (cuda/CudaEmulation.cpp, compileCpuKernels) call this; everything else
// goes through Codegen.h.
//
// Thread safety: may run concurrently on different MLIRContexts.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_COMPILER_CODEGEN_CPU_CPUCODEGEN_H
#define OMNI_COMPILER_CODEGEN_CPU_CPUCODEGEN_H

#include "compiler/codegen/Codegen.h"
#include "compiler/codegen/KernelSet.h"

#include <string>

namespace mlir::omni {

/// Lowers `set` (its module is rewritten to the LLVM dialect) into the
/// executable "kernels": format ElfSharedObject, target {cpu, the CPU name,
/// its feature string}, one kernel per KernelDef with a CpuLaunch grid.
/// `llvmIR`, if given, receives the optimized LLVM IR (`--emit=llvm`).
FailureOr<CompiledExecutable>
lowerKernelSetForCpu(KernelSet &set, const CodegenOptions &options,
                     std::string *llvmIR);

/// One exported kernel of a cpu executable: the ABI wrapper `symbol`
/// around the module's `<symbol>_impl` (docs/backend.md, "Kernel ABI").
/// `buffers` are its operands then its results; `flat`, `rows` and
/// `overwrites` as in KernelDef (a default RowSplit: whole buffers, grid 1).
struct CpuKernelAbi {
  std::string symbol;
  llvm::SmallVector<RankedTensorType> buffers;
  size_t numOperands = 0;
  bool flat = false;
  RowSplit rows;
  std::vector<std::vector<int64_t>> overwrites;
};

/// The back half of lowerKernelSetForCpu, for kernels that are already
/// functions `<symbol>_impl` on tensors or on memrefs (the cuda target's
/// emulation uses it): lowers `kernels` to LLVM, adds each ABI wrapper,
/// compiles and links the shared object into `exe.code` and sets
/// `exe.target`'s CPU name and features.
LogicalResult compileCpuKernels(ModuleOp kernels, ArrayRef<CpuKernelAbi> abis,
                                const CodegenOptions &options,
                                CompiledExecutable &exe, std::string *llvmIR);

/// Checks a CpuTargetOptions::cpu value: "" when omnic can compile for it,
/// otherwise a one-line message naming the value and what is expected.
std::string checkTargetCpu(llvm::StringRef cpu);

} // namespace mlir::omni

#endif // OMNI_COMPILER_CODEGEN_CPU_CPUCODEGEN_H
