//===- HostFunctions.h - Functions omni.host_call can name ------*- C++ -*-===//
//
// omni.host_call (and step.bin's HostCall) runs a host function by name on
// host copies of its operand tensors. The registry starts with the rewards
// of runtime/train/rewards, adapted from their image-batch API (one NCHW
// float operand, one [N] f32 result), and the training driver may add its
// own. The reference evaluator and the executor share this one registry, so
// the same names resolve to the same code in both. MLIR-free.
//
// Thread safety: build the registry, then share it read-only.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_TRAIN_HOSTFN_HOSTFUNCTIONS_H
#define OMNI_RUNTIME_TRAIN_HOSTFN_HOSTFUNCTIONS_H

#include "runtime/io/HostTensor.h"

#include "absl/status/statusor.h"
#include "absl/types/span.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace omni {

/// Takes the operands, returns the results (their dtypes may be any float
/// type for float results: the caller rounds them to the result tensors').
using HostFunction = std::function<absl::StatusOr<std::vector<HostTensor>>(
    absl::Span<const HostTensor>)>;

class HostFunctionRegistry {
public:
  /// Every registered reward (rewards::registeredRewards()) under its name.
  static HostFunctionRegistry withRewards();

  /// Adds or replaces `name`.
  void add(std::string name, HostFunction fn);
  const HostFunction *lookup(const std::string &name) const;
  /// Sorted.
  std::vector<std::string> names() const;

private:
  std::map<std::string, HostFunction> functions_;
};

} // namespace omni

#endif // OMNI_RUNTIME_TRAIN_HOSTFN_HOSTFUNCTIONS_H
