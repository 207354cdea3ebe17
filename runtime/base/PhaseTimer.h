//===- PhaseTimer.h - Say what a slow phase of a tool is doing --*- C++ -*-===//
//
// omnic and omnirun name what they are doing when a phase takes more than
// a few seconds (docs/backend.md, "Start-up messages"): a phase that has
// run `afterMs` milliseconds prints "<tool>: <what> ..." while it runs, and
// when it ends "<tool>: <what>: 12.3 s". Phases that end sooner print
// nothing, so a quick tool's stderr stays as it was. With `always`
// (omnic --verbose) or afterMs = 0 both lines print for every phase at
// once. OMNI_PROGRESS_AFTER_MS in the environment sets afterMs (the tests
// use 0 to force the lines); the default is 2000.
//
// A watchdog thread (started with the first phase, joined by the
// destructor) prints the line of a phase still running at its deadline;
// lines go to `write` (default: stderr, one fputs per line). One phase at a
// time: begin() ends the phase before it. Thread-safe (a mutex orders the
// watchdog's line before the phase's end line).
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_BASE_PHASETIMER_H
#define OMNI_RUNTIME_BASE_PHASETIMER_H

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace omni {

struct PhaseTimerOptions {
  /// The prefix of every line ("omnic", "omnirun").
  std::string tool;
  /// A phase prints once it has run this long (0: at once).
  int64_t afterMs = 2000;
  /// Every phase prints, at once (--verbose).
  bool always = false;
  /// Where the lines go, each with its newline; empty: stderr.
  std::function<void(absl::string_view)> write;
};

/// OMNI_PROGRESS_AFTER_MS as milliseconds, if set: a non-negative integer,
/// else InvalidArgument ("OMNI_PROGRESS_AFTER_MS: expected a non-negative
/// integer number of milliseconds, found 'x'").
absl::StatusOr<std::optional<int64_t>> progressAfterMsFromEnvironment();

class PhaseTimer {
public:
  explicit PhaseTimer(PhaseTimerOptions options);
  ~PhaseTimer();
  PhaseTimer(const PhaseTimer &) = delete;
  PhaseTimer &operator=(const PhaseTimer &) = delete;

  /// Starts the phase `what` ("parsing train.mlir"), ending the one before.
  void begin(std::string what);
  /// Ends the current phase (nothing when there is none).
  void end();

  /// A phase of `timer` while it is in scope: start() begins one (ending
  /// the scope's phase before), stop() and the destructor end it; a null
  /// timer does nothing.
  class Scope {
  public:
    Scope() = default;
    Scope(PhaseTimer *timer, std::string what) {
      start(timer, std::move(what));
    }
    ~Scope() { stop(); }
    Scope(const Scope &) = delete;
    Scope &operator=(const Scope &) = delete;

    void start(PhaseTimer *timer, std::string what) {
      stop();
      timer_ = timer;
      if (timer_)
        timer_->begin(std::move(what));
    }
    void stop() {
      if (timer_)
        timer_->end();
      timer_ = nullptr;
    }

  private:
    PhaseTimer *timer_ = nullptr;
  };

private:
  using Clock = std::chrono::steady_clock;
  void endLocked(std::unique_lock<std::mutex> &lock);
  void print(const std::string &line);
  void watch();

  PhaseTimerOptions options_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::thread watchdog_;
  bool stopping_ = false;
  // The current phase.
  bool active_ = false;
  bool announced_ = false;
  uint64_t generation_ = 0;
  std::string what_;
  Clock::time_point start_, deadline_;
};

} // namespace omni

#endif // OMNI_RUNTIME_BASE_PHASETIMER_H
