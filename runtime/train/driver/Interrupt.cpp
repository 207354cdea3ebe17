//===- Interrupt.cpp - Ctrl-C and SIGTERM for the training loop -----------===//

#include "runtime/train/driver/Interrupt.h"

#include <cstring>
#include <unistd.h>

namespace omni::train {
namespace {

volatile std::sig_atomic_t received = 0;

void writeStderr(const char *text) {
  size_t left = std::strlen(text);
  while (left > 0) {
    ssize_t n = ::write(STDERR_FILENO, text, left);
    if (n <= 0)
      return;
    text += n;
    left -= static_cast<size_t>(n);
  }
}

void onSignal(int signal) {
  if (received != 0) {
    writeStderr("omnirun: second signal: exiting at once (the last "
                "checkpoint stays valid)\n");
    ::_exit(128 + signal);
  }
  received = signal;
  writeStderr(signal == SIGINT
                  ? "omnirun: SIGINT: finishing this iteration, then saving "
                    "a checkpoint (Ctrl-C again exits at once)\n"
                  : "omnirun: SIGTERM: finishing this iteration, then saving "
                    "a checkpoint (a second signal exits at once)\n");
}

} // namespace

InterruptHandler::InterruptHandler() {
  received = 0;
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_handler = onSignal;
  sigemptyset(&action.sa_mask);
  // Restart interrupted system calls: the loop notices the signal by
  // polling, file writes must not fail with EINTR because of it.
  action.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &action, &previousInt_);
  ::sigaction(SIGTERM, &action, &previousTerm_);
}

InterruptHandler::~InterruptHandler() {
  ::sigaction(SIGINT, &previousInt_, nullptr);
  ::sigaction(SIGTERM, &previousTerm_, nullptr);
}

int InterruptHandler::pending() { return received; }

const char *signalName(int signal) {
  switch (signal) {
  case SIGINT:
    return "SIGINT";
  case SIGTERM:
    return "SIGTERM";
  default:
    return "a signal";
  }
}

} // namespace omni::train
