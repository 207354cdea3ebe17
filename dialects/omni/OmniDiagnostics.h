//===- OmniDiagnostics.h - helpers for omni verifier messages --*- C++ -*-===//
//
// Small helpers shared by the omni shape-inference functions and verifiers:
// emitting an op-prefixed error at an optional location (inference runs both
// while parsing and while verifying) and printing shapes as "4x8".
// Private to dialects/omni.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_DIALECTS_OMNI_OMNIDIAGNOSTICS_H
#define OMNI_DIALECTS_OMNI_OMNIDIAGNOSTICS_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include <optional>
#include <string>

namespace mlir::omni::diag {

/// Emits "'<op>' op <message>" at `loc` when there is a location (the
/// verifier passes one; speculative inference does not) and returns failure.
template <typename... Args>
LogicalResult inferError(std::optional<Location> loc, StringRef opName,
                         Args &&...args) {
  if (loc) {
    InFlightDiagnostic diag = mlir::emitError(*loc);
    diag << "'" << opName << "' op ";
    (diag << ... << std::forward<Args>(args));
  }
  return failure();
}

/// "4x8xf32"-style shape text without the element type: "4x8", or "scalar".
inline std::string shapeStr(ArrayRef<int64_t> shape) {
  if (shape.empty())
    return "scalar";
  std::string s;
  for (auto [i, d] : llvm::enumerate(shape)) {
    if (i)
      s += "x";
    s += std::to_string(d);
  }
  return s;
}

/// The type as a statically shaped ranked tensor, or null.
inline RankedTensorType asStaticTensor(Type type) {
  auto t = llvm::dyn_cast_if_present<RankedTensorType>(type);
  return t && t.hasStaticShape() ? t : RankedTensorType();
}

} // namespace mlir::omni::diag

#endif // OMNI_DIALECTS_OMNI_OMNIDIAGNOSTICS_H
