//===- Compiler.h - omnic: .mlir to step.bin --------------------*- C++ -*-===//
//
// The library behind the omnic tool: parse and verify an omni program, run
// the omni pipeline (optionally stopping at a stage and printing it),
// generate CPU kernels and write step.bin.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_COMPILER_DRIVER_COMPILER_H
#define OMNI_COMPILER_DRIVER_COMPILER_H

#include "llvm/Support/raw_ostream.h"

#include <string>

namespace mlir::omni {

struct CompileOptions {
  std::string input;
  std::string output;
  /// "" (write step.bin), a pipeline stage (input, cleanup, autodiff,
  /// decompose, fuse, plan-memory), "kernels" (the linalg form of the
  /// kernels) or "json" (step.bin as JSON).
  std::string emit;
  /// 0: no optimization of the kernels beyond what correctness needs.
  int optLevel = 2;
  /// The CPU the kernels are compiled for: host (default), x86-64
  /// (portable) or an LLVM x86 CPU name (CpuTarget::cpu).
  std::string targetCpu = "host";
  /// Print the memory plan's arena size.
  bool reportArena = false;
};

/// Runs omnic. Returns the process exit code: 0 on success, 1 on any
/// user-facing error (diagnostics go to `errs` with file:line:col).
int runCompiler(const CompileOptions &options, llvm::raw_ostream &outs,
                llvm::raw_ostream &errs);

} // namespace mlir::omni

#endif // OMNI_COMPILER_DRIVER_COMPILER_H
