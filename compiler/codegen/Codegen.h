//===- Codegen.h - native kernels for every omni.fusion ---------*- C++ -*-===//
//
// omnic's code generation, target-neutral at its interface: every
// omni.fusion of a program becomes a kernel of an executable for the chosen
// target, and the result (CodegenResult.h) is what the step.bin writer
// consumes. The shared half (KernelSet.h: fusion bodies -> linalg on
// tensors, kernel deduplication, signatures) is the same for every target;
// each target lowers the kernel set in its own folder (cpu/: linalg -> LLVM
// -> x86-64 object -> ELF shared object; cuda/: linalg -> gpu launches ->
// NVVM -> PTX -> cubin).
//
// Thread safety: compileFusions may run concurrently on different
// MLIRContexts.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_COMPILER_CODEGEN_CODEGEN_H
#define OMNI_COMPILER_CODEGEN_CODEGEN_H

#include "compiler/codegen/CodegenResult.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringRef.h"

#include <string>
#include <vector>

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace mlir::omni {

/// The options of the cpu target (omnic --target-cpu).
struct CpuTargetOptions {
  /// "host" (the CPU omnic runs on: its name and detected features),
  /// "x86-64" (portable, SSE2 only) or any LLVM x86 CPU name ("haswell",
  /// "x86-64-v3", "skylake-avx512", "znver4"), whose features the code may
  /// then use and the runtime checks.
  std::string cpu = "host";
  /// Split kernels that are not flat elementwise over their rows
  /// (KernelBuilder.h RowSplit); off only to compare with whole kernels.
  bool splitRows = true;
};

/// The options of the cuda target (omnic --cuda-arch).
struct CudaTargetOptions {
  /// The SM architecture the cubin is assembled for: sm_80, sm_86, sm_89,
  /// sm_90 or sm_90a (the H200's). The PTX beside it runs on newer GPUs.
  std::string arch = "sm_90a";
  /// Compile the kernels, as the cuda lowering launches them, for this CPU
  /// instead of PTX (omnic --cuda-emulate, cuda/CudaEmulation.h): a cpu
  /// step.bin that checks the lowering without a GPU.
  bool emulate = false;
  /// Compile each launch for this CPU as a host function in place of the
  /// cubin (omnic --cuda-host-kernels): a cuda step.bin whose kernels the
  /// cuda driver's host model of libcuda runs (drivers/cuda/host), so the
  /// driver runs whole programs without a GPU.
  bool hostKernels = false;
  /// Norms and softmaxes as one launch of a few rows a block (omnic
  /// --cuda-row-launches, cuda/CudaRowLaunches.cpp); off only to compare.
  bool rowLaunches = true;
  /// Adjacent launches that touch nothing the other writes as one (omnic
  /// --cuda-merge-launches); off only to compare.
  bool mergeLaunches = true;
};

struct CodegenOptions {
  /// The target kind (omnic --target): "cpu" (the default) or "cuda".
  std::string target = "cpu";
  /// Optimization level of the kernels (0-3).
  int optLevel = 2;
  CpuTargetOptions cpu;
  CudaTargetOptions cuda;
};

/// Optional text dumps of intermediate forms (omnic --emit=kernels/llvm).
struct CodegenDumps {
  /// The kernels on tensors, after lowering to linalg (target-neutral).
  std::string *kernels = nullptr;
  /// The target's own IR after optimization (cpu: LLVM IR; cuda: PTX).
  std::string *targetIR = nullptr;
};

/// The target kinds omnic can compile for, in --help order.
std::vector<llvm::StringRef> codegenTargets();

/// Checks `options` (the target kind and that target's options): "" when
/// omnic can compile for them, otherwise a one-line message naming the value
/// and what is expected ("--target=x: unknown target; expected cpu").
std::string checkCodegenOptions(const CodegenOptions &options);

/// Registers, in `registry`, everything kernel compilation needs (linalg,
/// bufferization, the LLVM dialect and its translation, ...) for every
/// target.
void registerCodegenDialects(DialectRegistry &registry);

/// Compiles each omni.fusion of `program` into a kernel for
/// `options.target`. Identical fusions share one kernel. Leaves `program`
/// unchanged. Emits errors (at the fusion, or the module for toolchain
/// failures) and fails on ops it cannot compile, invalid options or a
/// toolchain failure.
FailureOr<CodegenResult> compileFusions(ModuleOp program,
                                        const CodegenOptions &options = {},
                                        const CodegenDumps &dumps = {});

} // namespace mlir::omni

#endif // OMNI_COMPILER_CODEGEN_CODEGEN_H
