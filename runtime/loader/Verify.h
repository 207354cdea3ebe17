//===- Verify.h - Semantic checks of a step.bin -----------------*- C++ -*-===//
//
// The third gate of the loader (Program.cpp runs the first two). Internal to
// the loader: callers get a Program, which has passed these checks.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_LOADER_VERIFY_H
#define OMNI_RUNTIME_LOADER_VERIFY_H

#include "runtime/loader/Program.h"

#include "absl/status/status.h"

namespace omni::loader {

/// Checks the FlatBuffers-verified root of `program` and fills its decoded
/// tensor and state tables and name maps. Fails with InvalidArgument and a
/// one-line message "<name>: <field path>: <expected and found>".
absl::Status verifyProgram(Program &program, const LoadOptions &options);

} // namespace omni::loader

#endif // OMNI_RUNTIME_LOADER_VERIFY_H
