//===- HostFunctions.h - Functions omni.host_call can name ------*- C++ -*-===//
//
// omni.host_call (and step.bin's HostCall) runs a host function by name on
// host copies of its operand tensors. A HostFunctionRegistry is the table of
// those names; the executor and the reference evaluator look names up in
// the registry their caller gives them and know nothing of what is in it.
// The training side fills it: rewards::registerRewards
// (runtime/train/rewards/RewardFunctions.h) adds the image rewards, and the
// training driver wraps or adds its own. So the same names resolve to the
// same code in both the executor and the evaluator. MLIR-free.
//
// Each name says whether its function may run concurrently with the device
// work: the executor then runs its HostCalls on a worker thread while it goes
// on with the commands that do not touch the call's results, and waits for
// it at the first one that does (docs/backend.md, "Asynchronous host calls").
// The image rewards may (registerRewards).
//
// Thread safety: build the registry, then share it read-only. A function
// must be safe to call from the thread that runs the program; a concurrent
// one also from a worker thread, while synchronous host functions run on the
// program's thread (the executor never runs two concurrent calls at once).
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_HOSTFN_HOSTFUNCTIONS_H
#define OMNI_RUNTIME_HOSTFN_HOSTFUNCTIONS_H

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

/// Named host functions. Empty when constructed.
class HostFunctionRegistry {
public:
  /// Adds or replaces `name`. `concurrent`: the function may run on a
  /// worker thread, concurrently with the device work and with synchronous
  /// host functions (see the file comment).
  void add(std::string name, HostFunction fn, bool concurrent = false);
  /// The function named `name`, or null.
  const HostFunction *lookup(const std::string &name) const;
  /// Whether `name` was added as concurrent (false when unknown).
  bool isConcurrent(const std::string &name) const;
  /// Sorted.
  std::vector<std::string> names() const;

private:
  struct Entry {
    HostFunction fn;
    bool concurrent = false;
  };
  std::map<std::string, Entry> functions_;
};

} // namespace omni

#endif // OMNI_RUNTIME_HOSTFN_HOSTFUNCTIONS_H
