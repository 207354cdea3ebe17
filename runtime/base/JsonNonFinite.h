//===- JsonNonFinite.h - Python's NaN/Infinity in JSON bodies ---*- C++ -*-===//
//
// Python's json module writes float('nan') and float('inf') as the bare
// words NaN, Infinity and -Infinity, which are not JSON, so a strict parser
// (nlohmann-json) rejects the whole body at a byte offset. The HTTP reward
// client (runtime/train/rewards/HttpReward.cpp) and the sampling server
// (runtime/serve/SampleServer.cpp) rewrite them outside strings as strings
// starting with kNonFinite, parse again, and name the element that holds
// one in their error. MLIR-free; pure functions.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_BASE_JSONNONFINITE_H
#define OMNI_RUNTIME_BASE_JSONNONFINITE_H

#include "absl/strings/string_view.h"

#include <optional>
#include <string>

namespace omni {

/// The prefix of a quoted non-finite word ("\x01non-finite:NaN").
inline constexpr absl::string_view kNonFinite = "\x01non-finite:";

/// `body` with every NaN, Infinity and -Infinity outside strings written as
/// the string kNonFinite + word; nullopt when there is none.
std::optional<std::string> quoteNonFinite(absl::string_view body);

} // namespace omni

#endif // OMNI_RUNTIME_BASE_JSONNONFINITE_H
