//===- Interrupt.h - Ctrl-C and SIGTERM for the training loop ---*- C++ -*-===//
//
// While an InterruptHandler lives, the first SIGINT or SIGTERM only records
// its number (and says on stderr that the run finishes the current
// iteration, saves and exits); the training loop polls
// InterruptHandler::pending() between iterations (TrainOptions::
// stopRequested). A second signal exits at once with 128 + its number, as
// the shell reports a process killed by it (130 for SIGINT, 143 for
// SIGTERM). The destructor restores the previous handlers. One handler at a
// time per process; the handler itself is async-signal-safe (write, _exit,
// kill, open, read).
//
// Under mpirun a SIGTERM usually means that another rank's process died:
// mpirun then ends the job, and this rank could not finish its iteration
// (the collectives wait for the dead rank) nor save. watchPeers() gives the
// handler the job's other processes on this host; a SIGTERM that finds one
// of them gone exits at once (143) with "omnirun: rank 0: SIGTERM from
// mpirun after rank 1 (pid 4242) died: exiting without a checkpoint (the
// last one stays valid)" instead of promising one.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_TRAIN_DRIVER_INTERRUPT_H
#define OMNI_RUNTIME_TRAIN_DRIVER_INTERRUPT_H

#include <csignal>
#include <vector>

namespace omni::train {

class InterruptHandler {
public:
  InterruptHandler();
  ~InterruptHandler();
  InterruptHandler(const InterruptHandler &) = delete;
  InterruptHandler &operator=(const InterruptHandler &) = delete;

  /// The first signal received since construction (SIGINT or SIGTERM), or 0.
  static int pending();

  /// The job's processes on this host other than this one, by rank, and
  /// this process's rank (the first 256 are kept). Replaces earlier calls.
  struct Peer {
    int rank = 0;
    int pid = 0;
  };
  static void watchPeers(int ownRank, const std::vector<Peer> &peers);

private:
  struct sigaction previousInt_, previousTerm_;
};

/// "SIGINT", "SIGTERM", or "a signal".
const char *signalName(int signal);

} // namespace omni::train

#endif // OMNI_RUNTIME_TRAIN_DRIVER_INTERRUPT_H
