//===- RuntimeChecks.h - omnic refuses what omnirun refuses ---*- C++ -*-===//
//
// omnic must not write a step.bin that the runtime's loader then rejects.
// Two gates:
//   - checkProgramForRuntime, on the input module before the pipeline, with
//     source locations: a module with no public function (step.bin would
//     hold nothing to run), tensor types whose byte size overflows int64
//     (MLIR's element count would overflow first in the passes), scf.for
//     with a constant step < 1. The messages are the loader's.
//   - checkStepBinLoads, on the bytes about to be written: the runtime
//     loader's own verification (runtime/loader), so every rule it has
//     (loop nesting, call depth, ranges, ...) holds for what omnic writes,
//     with the message omnirun would print.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_COMPILER_DRIVER_RUNTIMECHECKS_H
#define OMNI_COMPILER_DRIVER_RUNTIMECHECKS_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <vector>

namespace mlir::omni {

/// Emits one error at the offending op (or the module) and fails.
/// `needsEntry`: the module must have a public function (a step.bin is
/// being made, not a stage printed).
LogicalResult checkProgramForRuntime(ModuleOp module, bool needsEntry);

/// Runs the runtime loader on `bytes`; on rejection prints
/// "omnic: <name>: <field path>: <expected and found>" to `errs`.
LogicalResult checkStepBinLoads(const std::vector<uint8_t> &bytes,
                                llvm::StringRef name, llvm::raw_ostream &errs);

} // namespace mlir::omni

#endif // OMNI_COMPILER_DRIVER_RUNTIMECHECKS_H
