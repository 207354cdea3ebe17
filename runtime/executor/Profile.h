//===- Profile.h - Where a run's time goes, per command kind ----*- C++ -*-===//
//
// omnirun --profile (docs/performance.md, "CPU speed (issue 15): where the
// time goes"). An Executor given a Profile (Executor::setProfile) times
// every leaf command it runs (the stream is synchronized after each, so a
// command's time is its own) and adds it to the row of its (phase, kind,
// symbol):
//   - phase: the command's step.fbs Command.phase, else the phase of the
//     enclosing command (a Loop's or Call's body inherits it); "" for none;
//   - kind: "fused kernel" (Dispatch), "matmul", "conv2d", "attention"
//     (LibraryCall), "copy", "fill", "random", "host call", "host call
//     wait" (the time a command waited for an asynchronous host call),
//     "collective", "scalar" (ScalarOp, AxisIndex);
//   - symbol: the kernel symbol of a Dispatch, the shapes of a library call
//     ("matmul 2x64x128x32 nt": batch x M x N x K, transposes), the host
//     function's name; "function outputs" for the copies of a called
//     function's outputs into its Call's results; the kind again for the
//     others.
// Each row counts the commands, their seconds, the bytes they touch (every
// operand and result tensor once, a Copy's range read and written, a
// Fill's destination) and, for library calls, their FLOPs (matmul 2 B M N K;
// attention 4 B H Sq Sk D plus 5 per score for the softmax and scaling;
// conv2d 2 N O OH OW C KH KW), the convention of omnic --report-flops.
// Besides the rows, the profile sums each phase's top-level time, the same
// seconds Executor::takePhaseTimes reports, so the rows of a phase add up
// to its time less the executor's own overhead between commands.
//
// Without a profile the executor pays one branch per command. Thread
// safety: none; one executor adds to a profile at a time.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_EXECUTOR_PROFILE_H
#define OMNI_RUNTIME_EXECUTOR_PROFILE_H

#include "absl/strings/string_view.h"

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace omni::executor {

struct ProfileRow {
  std::string phase, kind, symbol;
  /// The location of the first command of the row (step.fbs
  /// Command.location, at most 160 characters): what a fused kernel holds.
  std::string where;
  int64_t count = 0;
  double seconds = 0;
  int64_t bytes = 0;
  int64_t flops = 0;
};

struct ProfilePhase {
  std::string phase;
  /// The top-level commands' seconds (Executor::takePhaseTimes).
  double seconds = 0;
};

class Profile {
public:
  /// Adds one command's run to its row.
  void add(absl::string_view phase, absl::string_view kind,
           absl::string_view symbol, absl::string_view where, double seconds,
           int64_t bytes, int64_t flops);
  /// Adds a top-level command's seconds to its phase.
  void addPhase(absl::string_view phase, double seconds);
  /// Counts one profiled run of the step (an iteration).
  void addIteration() { ++iterations_; }

  int64_t iterations() const { return iterations_; }
  /// The phases in order of first appearance.
  const std::vector<ProfilePhase> &phases() const { return phases_; }
  /// The rows, by phase (in phases()' order; rows of a phase that has no
  /// top-level time last), then by seconds, longest first.
  std::vector<ProfileRow> rows() const;

  /// The file --profile writes (schema: docs/performance.md): {"iterations",
  /// "phases": [{"phase", "seconds", "profiled_seconds", "kinds": [{"kind",
  /// "count", "seconds", "share", "bytes", "flops"}], "symbols": [{"kind",
  /// "symbol", "where", "count", "seconds", "share", "bytes", "flops"}]}]};
  /// share is seconds / the phase's seconds.
  std::string json() const;
  /// The short table for stderr: per phase, its seconds, then each kind's
  /// seconds and share.
  std::string table() const;

private:
  using Key = std::tuple<std::string, std::string, std::string>;
  std::map<Key, ProfileRow> rows_;
  std::vector<ProfilePhase> phases_;
  int64_t iterations_ = 0;
};

} // namespace omni::executor

#endif // OMNI_RUNTIME_EXECUTOR_PROFILE_H
