//===- Interrupt.h - Ctrl-C and SIGTERM for the training loop ---*- C++ -*-===//
//
// While an InterruptHandler lives, the first SIGINT or SIGTERM only records
// its number (and says on stderr that the run finishes the current
// iteration, saves and exits); the training loop polls
// InterruptHandler::pending() between iterations (TrainOptions::
// stopRequested). A second signal exits at once with 128 + its number, as
// the shell reports a process killed by it (130 for SIGINT, 143 for
// SIGTERM). The destructor restores the previous handlers. One handler at a
// time per process; the handler itself is async-signal-safe (write, _exit).
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_TRAIN_DRIVER_INTERRUPT_H
#define OMNI_RUNTIME_TRAIN_DRIVER_INTERRUPT_H

#include <csignal>

namespace omni::train {

class InterruptHandler {
public:
  InterruptHandler();
  ~InterruptHandler();
  InterruptHandler(const InterruptHandler &) = delete;
  InterruptHandler &operator=(const InterruptHandler &) = delete;

  /// The first signal received since construction (SIGINT or SIGTERM), or 0.
  static int pending();

private:
  struct sigaction previousInt_, previousTerm_;
};

/// "SIGINT", "SIGTERM", or "a signal".
const char *signalName(int signal);

} // namespace omni::train

#endif // OMNI_RUNTIME_TRAIN_DRIVER_INTERRUPT_H
