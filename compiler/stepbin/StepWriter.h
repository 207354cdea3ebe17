//===- StepWriter.h - lower a compiled module to step.bin -------*- C++ -*-===//
//
// The last step of omnic: a module after the omni pipeline (fused, memory
// planned) and code generation becomes step.bin (runtime/schema/step.fbs):
// the tensor table from the memory plan, the executables of the codegen
// result with their kernels' signatures, embedded constants, and each
// public function as a command list (one Dispatch per omni.fusion, of the
// kernel the codegen result maps it to). Target-neutral: the format, target
// and launch of every executable come from the CodegenResult.
//
// Thread safety: writeStepBin may run concurrently on different modules.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_COMPILER_STEPBIN_STEPWRITER_H
#define OMNI_COMPILER_STEPBIN_STEPWRITER_H

#include "compiler/codegen/CodegenResult.h"

#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <vector>

namespace mlir::omni {

struct StepWriterOptions {
  /// Mark a fusion that reads the matmul right before it by slices as the
  /// matmul's epilogue (step.fbs LibraryCall.epilogue; docs/backend.md,
  /// "Matmul epilogues"). Off: the same commands, unmarked.
  bool matmulEpilogues = true;
};

/// Serializes `module` with the executables of `codegen` (compileFusions
/// on this module) as step.bin. Emits an error at the offending op and
/// fails for IR the runtime cannot execute.
FailureOr<std::vector<uint8_t>>
writeStepBin(ModuleOp module, const CodegenResult &codegen, StringRef producer,
             const StepWriterOptions &options = {});

} // namespace mlir::omni

#endif // OMNI_COMPILER_STEPBIN_STEPWRITER_H
