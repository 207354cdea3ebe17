//===- Compiler.h - omnic: .mlir to step.bin --------------------*- C++ -*-===//
//
// The library behind the omnic tool: parse and verify an omni program, run
// the omni pipeline (optionally stopping at a stage and printing it),
// generate kernels for the target (compiler/codegen) and write step.bin
// (compiler/stepbin).
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_COMPILER_DRIVER_COMPILER_H
#define OMNI_COMPILER_DRIVER_COMPILER_H

#include "llvm/Support/raw_ostream.h"

#include <string>

namespace omni {
class PhaseTimer;
} // namespace omni

namespace mlir::omni {

struct CompileOptions {
  std::string input;
  std::string output;
  /// "" (write step.bin), "input", a pipeline stage (pipelineStageNames()),
  /// "kernels" (the linalg form of the kernels), "llvm" (the cpu target's
  /// LLVM IR), "ptx" (the cuda target's PTX) or "json" (step.bin as JSON);
  /// emitChoices() lists them.
  std::string emit;
  /// The target kind the kernels are compiled for (codegenTargets()).
  std::string target = "cpu";
  /// 0: no optimization of the kernels beyond what correctness needs.
  int optLevel = 2;
  /// The cpu target's CPU: host (default), x86-64 (portable) or an LLVM x86
  /// CPU name (CpuTargetOptions::cpu).
  std::string targetCpu = "host";
  /// The cuda target's SM architecture (CudaTargetOptions::arch).
  std::string cudaArch = "sm_90a";
  /// --cuda-emulate (CudaTargetOptions::emulate).
  bool cudaEmulate = false;
  /// --cuda-host-kernels (CudaTargetOptions::hostKernels).
  bool cudaHostKernels = false;
  /// --cuda-row-launches, --cuda-merge-launches (CudaTargetOptions).
  bool cudaRowLaunches = true;
  bool cudaMergeLaunches = true;
  /// Print the memory plan's arena size.
  bool reportArena = false;
  /// Mark matmul epilogues in step.bin (StepWriterOptions).
  bool matmulEpilogues = true;
  /// Print each public function's FLOPs, per phase and outermost loop,
  /// after the pipeline (passes/FlopCount.h).
  bool reportFlops = false;
  /// Names the phases (parsing, the pipeline, kernels, step.bin) that take
  /// long (runtime/base/PhaseTimer.h); null: silent.
  ::omni::PhaseTimer *phases = nullptr;
};

/// The values of --emit, in order, separated by ", " ("input, cleanup, ...,
/// json").
std::string emitChoices();

/// Runs omnic. Returns the process exit code: 0 on success, 1 on any
/// user-facing error (diagnostics go to `errs` with file:line:col).
int runCompiler(const CompileOptions &options, llvm::raw_ostream &outs,
                llvm::raw_ostream &errs);

} // namespace mlir::omni

#endif // OMNI_COMPILER_DRIVER_COMPILER_H
