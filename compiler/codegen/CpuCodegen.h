//===- CpuCodegen.h - native x86-64 kernels for omni.fusion ----*- C++ -*-===//
//
// Compiles every omni.fusion of a program into one ELF shared object whose
// exported kernels follow the ABI of docs/backend.md:
//   void k(int64_t begin, int64_t end, void **buffers, const int64_t *scalars)
// Fusion bodies go through linalg, bufferization, loops and LLVM, and are
// compiled in-process by LLVM's TargetMachine; ld.lld links the object.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_COMPILER_CODEGEN_CPUCODEGEN_H
#define OMNI_COMPILER_CODEGEN_CPUCODEGEN_H

#include "mlir/IR/BuiltinOps.h"

#include <string>
#include <vector>

namespace mlir::omni {

struct CpuTarget {
  /// "host" (the CPU omnic runs on: its name and detected features),
  /// "x86-64" (portable, SSE2 only) or any LLVM x86 CPU name ("haswell",
  /// "x86-64-v3", "skylake-avx512", "znver4"), whose features the code may
  /// then use and the runtime checks.
  std::string cpu = "host";
  /// LLVM optimization level of the kernels (0-3).
  int optLevel = 2;
};

struct CpuExecutable {
  std::string cpu;
  /// The LLVM feature string the code needs ("+avx2,+fma,..."); the runtime
  /// checks it against the CPU it runs on.
  std::string features;
  /// The shared object's bytes.
  std::vector<char> sharedObject;
  /// Kernel symbols, in the order of the `omni.kernel` indices.
  std::vector<std::string> kernels;
};

/// Registers, in `registry`, everything kernel compilation needs (linalg,
/// bufferization, the LLVM dialect and its translation, ...).
void registerCpuCodegenDialects(DialectRegistry &registry);

/// Compiles each omni.fusion of `program` into a kernel, tags the fusion
/// with `omni.kernel = <index>` and returns the linked shared object. If
/// `kernelIR` is given it receives the kernels' MLIR after lowering to
/// linalg (for `omnic --emit=kernels`) and `llvmIR`, if given, the
/// optimized LLVM IR (`--emit=llvm`). Emits errors and fails on ops it
/// cannot compile or on a toolchain failure.
FailureOr<CpuExecutable> compileFusionsForCpu(ModuleOp program,
                                              const CpuTarget &target,
                                              std::string *kernelIR = nullptr,
                                              std::string *llvmIR = nullptr);

/// Checks a CpuTarget::cpu value: "" when omnic can compile for it,
/// otherwise a one-line message naming the value and what is expected.
std::string checkTargetCpu(llvm::StringRef cpu);

} // namespace mlir::omni

#endif // OMNI_COMPILER_CODEGEN_CPUCODEGEN_H
