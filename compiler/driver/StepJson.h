//===- StepJson.h - step.bin as readable JSON -------------------*- C++ -*-===//
//
// The JSON view of step.bin that `omnic --emit=json` prints and lit tests
// FileCheck (IREE's flatbuffer-text approach): FlatBuffers' own text
// generator over the embedded step.fbs, with executable and constant bytes
// summarized as their sizes.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_COMPILER_DRIVER_STEPJSON_H
#define OMNI_COMPILER_DRIVER_STEPJSON_H

#include "mlir/Support/LLVM.h"

#include <cstdint>
#include <string>
#include <vector>

namespace mlir::omni {

/// Returns the JSON text of `bytes`, or fails with `error` set.
FailureOr<std::string> stepBinToJson(const std::vector<uint8_t> &bytes,
                                     std::string &error);

} // namespace mlir::omni

#endif // OMNI_COMPILER_DRIVER_STEPJSON_H
