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

/// The epilogue of command `i` of `commands`: the next command (a Dispatch;
/// the loader checked) when command `i` is a LibraryCall with one, else
/// null. It runs with the LibraryCall.
inline const step::Command *
epilogueOf(const Vector<Offset<step::Command>> *commands, uint32_t i) {
  const step::LibraryCall *call = commands->Get(i)->kind_as_LibraryCall();
  return call && call->epilogue() ? commands->Get(i + 1) : nullptr;
}

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

/// What a graph captures (ExecutorGraphs.cpp): commands [begin, end) of a
/// command list, the whole body of `loop` run for all its iterations when
/// `loop` is set.
struct Executor::Region {
  const flatbuffers::Vector<flatbuffers::Offset<step::Command>> *commands;
  uint32_t begin, end;
  const step::Loop *loop;
};

/// One capture of a region: what it was captured for, and what it leaves.
struct Executor::CapturedGraph {
  std::vector<hal::BufferRef> args;
  /// The values of RegionGraphs::reads at the region's entry, and of
  /// RegionGraphs::writes when it ended.
  std::vector<int64_t> readValues, writeValues;
  /// Commands (and iterations) it counts against the command budget.
  int64_t commands = 0;
  std::unique_ptr<hal::Graph> graph;
};

struct Executor::RegionGraphs {
  /// Non-empty: the region is never captured, for this reason.
  std::string refused;
  /// The registers whose values at the entry the region reads, and those it
  /// may write (a loop's own and nested loops' induction variables
  /// included).
  std::vector<uint32_t> reads, writes;
  std::vector<CapturedGraph> graphs;
  /// How often the region was entered (a run of commands is captured from
  /// its second entry on).
  int64_t entries = 0;
};

} // namespace omni::executor

#endif // OMNI_RUNTIME_EXECUTOR_EXECUTORIMPL_H
