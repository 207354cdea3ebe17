//===- ExecutorImpl.h - The executor's internals ----------------*- C++ -*-===//
//
// What Executor.cpp (preparation, entry points, state) and
// ExecutorCommands.cpp (the commands) share. Internal to the executor.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_EXECUTOR_EXECUTORIMPL_H
#define OMNI_RUNTIME_EXECUTOR_EXECUTORIMPL_H

#include "runtime/base/CheckedMath.h"
#include "runtime/executor/Executor.h"

#include "absl/strings/str_cat.h"

#include <string>
#include <thread>
#include <vector>

namespace omni::executor {
namespace detail {

using flatbuffers::Offset;
using flatbuffers::Vector;

template <typename T> uint32_t sizeOf(const Vector<T> *v) {
  return v ? v->size() : 0;
}

using ::omni::int128String;

} // namespace detail

/// A command's position, for messages: functions[0].commands[2].body[1].
struct Executor::Path {
  const Path *parent;
  const char *field;
  uint32_t index;

  std::string render() const {
    std::string s = parent ? parent->render() + "." : std::string();
    return absl::StrCat(s, field, "[", index, "]");
  }
};

/// One function invocation.
struct Executor::Frame {
  uint32_t function;
  /// The function's inputs, then its outputs' result buffers.
  absl::Span<const hal::BufferRef> args;
  std::vector<int64_t> scalars;
  /// The Call command that made this frame; null for a top-level run.
  const Path *caller;
};

/// A HostCall running on a worker thread (Executor.h, "asynchronously").
struct Executor::PendingHostCall {
  const step::HostCall *call;
  /// The HostCall's place, the prefix of its errors.
  std::string where;
  /// Where its results go, resolved at the call.
  std::vector<hal::BufferRef> results;
  /// Set by the worker before it ends; read after join().
  absl::StatusOr<std::vector<HostTensor>> values;
  std::thread worker;
};

/// One capture of a loop (ExecutorGraphs.cpp): what it was captured for,
/// and what it leaves.
struct Executor::LoopGraph {
  std::vector<hal::BufferRef> args;
  /// The values of LoopGraphs::reads at the loop's entry, and of
  /// LoopGraphs::writes when it ended.
  std::vector<int64_t> readValues, writeValues;
  /// Commands (and iterations) it counts against the command budget.
  int64_t commands = 0;
  std::unique_ptr<hal::Graph> graph;
};

struct Executor::LoopGraphs {
  /// Non-empty: the loop is never captured, for this reason.
  std::string refused;
  /// The registers whose values at the entry the body reads, and those it
  /// may write (its own and nested loops' induction variables included).
  std::vector<uint32_t> reads, writes;
  std::vector<LoopGraph> graphs;
};

} // namespace omni::executor

#endif // OMNI_RUNTIME_EXECUTOR_EXECUTORIMPL_H
