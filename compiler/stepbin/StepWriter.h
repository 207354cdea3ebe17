//===- StepWriter.h - lower a compiled module to step.bin -------*- C++ -*-===//
//
// The last step of omnic: a module after the omni pipeline (fused, memory
// planned) and CPU code generation becomes step.bin (runtime/schema/
// step.fbs): the tensor table from the memory plan, one executable with the
// kernels, embedded constants, and each public function as a command list.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_COMPILER_STEPBIN_STEPWRITER_H
#define OMNI_COMPILER_STEPBIN_STEPWRITER_H

#include "compiler/codegen/CpuCodegen.h"

#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <vector>

namespace mlir::omni {

/// Serializes `module` with `executable` as step.bin. Emits an error at the
/// offending op and fails for IR the runtime cannot execute.
FailureOr<std::vector<uint8_t>> writeStepBin(ModuleOp module,
                                             const CpuExecutable &executable,
                                             StringRef producer);

} // namespace mlir::omni

#endif // OMNI_COMPILER_STEPBIN_STEPWRITER_H
