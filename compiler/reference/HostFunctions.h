//===- HostFunctions.h - Functions omni.host_call can name ------*- C++ -*-===//
//
// omni.host_call runs a function that lives outside the program (a reward,
// or anything a runtime registers) on host copies of its operands. The
// reference evaluator resolves the callee's name in a HostFunctionRegistry;
// the default one wraps every reward of runtime/train/rewards, which takes
// one NCHW float image batch and returns one value per image. MLIR-free.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_COMPILER_REFERENCE_HOSTFUNCTIONS_H
#define OMNI_COMPILER_REFERENCE_HOSTFUNCTIONS_H

#include "runtime/io/HostTensor.h"

#include "absl/status/statusor.h"
#include "absl/types/span.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace omni::reference {

/// A host function: the host_call's operands in, its results out. The
/// evaluator checks the results against the op's result types (count,
/// shape, float vs integer) and converts between float widths.
using HostFunction = std::function<absl::StatusOr<std::vector<HostTensor>>(
    absl::Span<const HostTensor> args)>;

/// Named host functions. Not thread-safe to modify; lookups on a registry
/// nobody modifies are safe from any thread.
class HostFunctionRegistry {
public:
  /// An empty registry.
  HostFunctionRegistry() = default;

  /// A registry holding every reward of omni::rewards::registeredRewards()
  /// at the time of the call: each takes one [N, 3, H, W] float tensor with
  /// values in [0, 1] and returns an [N] f32 tensor.
  static HostFunctionRegistry withRewards();

  /// Adds `fn` under `name`, replacing an earlier function of that name.
  void add(std::string name, HostFunction fn);

  /// The function registered under `name`, or null.
  const HostFunction *lookup(const std::string &name) const;

  /// The registered names, sorted.
  std::vector<std::string> names() const;

private:
  std::map<std::string, HostFunction> functions;
};

} // namespace omni::reference

#endif // OMNI_COMPILER_REFERENCE_HOSTFUNCTIONS_H
