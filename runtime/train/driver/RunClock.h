//===- RunClock.h - elapsed time and ETA of a training run ------*- C++ -*-===//
//
// The progress line's "elapsed 1m02s  eta 16m20s" (docs/backend.md,
// "Training"). The clock is told when the run began and when each
// iteration run in this process began and ended, as seconds on any one
// clock (the trainer uses std::chrono::steady_clock; tests inject times).
// - elapsed: from the start of the run in this process (start-up included)
//   to the end of the last iteration.
// - ETA: the mean iteration time times the iterations left until `steps`
//   (a resumed run counts from where it resumed). The mean is over the
//   iterations run in this process, end to end (so checkpoints and sample
//   grids between them count), leaving out the first when there are more:
//   it carries the warm-up (first-touch allocations, caches, kernel
//   loading). With one iteration done, that iteration's time is the mean.
// MLIR-free. Not thread-safe (the training loop's thread owns it).
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_TRAIN_DRIVER_RUNCLOCK_H
#define OMNI_RUNTIME_TRAIN_DRIVER_RUNCLOCK_H

#include <cstdint>
#include <optional>
#include <string>

namespace omni::train {

/// A duration for people: "0s", "59s", "1m02s", "59m59s", "1h00m",
/// "23h59m", "1d00h", "12d03h" (rounded to the nearest unit shown); "?"
/// for a negative or non-finite one.
std::string formatDuration(double seconds);

class RunClock {
public:
  /// A run up to `steps` iterations that began at `begin`.
  RunClock(int64_t steps, double begin) : steps_(steps), begin_(begin) {}

  /// Iteration `iteration` (0-based) ran from `start` to `end`.
  void iterationDone(int64_t iteration, double start, double end);

  /// From the run's begin to the end of the last iteration done (0 before
  /// the first).
  double elapsedSeconds() const;
  /// The mean iteration time (above); none before the first iteration.
  std::optional<double> meanIterationSeconds() const;
  /// The mean times the iterations left after the last one done.
  std::optional<double> etaSeconds() const;
  /// "elapsed 1m02s  eta 16m20s" (after the first iteration), else "".
  std::string text() const;

private:
  int64_t steps_;
  double begin_;
  int64_t done_ = 0;  // iterations done in this process
  int64_t last_ = -1; // the last one's index
  double firstSeconds_ = 0, firstEnd_ = 0, lastEnd_ = 0;
};

} // namespace omni::train

#endif // OMNI_RUNTIME_TRAIN_DRIVER_RUNCLOCK_H
