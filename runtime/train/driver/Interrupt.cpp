//===- Interrupt.cpp - Ctrl-C and SIGTERM for the training loop -----------===//

#include "runtime/train/driver/Interrupt.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace omni::train {
namespace {

volatile std::sig_atomic_t received = 0;

// watchPeers' table, read by the handler (written before it can run on
// them: the count is stored last).
constexpr int kMaxPeers = 256;
int ownRank = 0;
int peerRank[kMaxPeers];
pid_t peerPid[kMaxPeers];
volatile std::sig_atomic_t peerCount = 0;

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

/// Appends the decimal digits of `value` (>= 0) at `out`; returns the end.
char *appendNumber(char *out, long value) {
  char digits[24];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value > 0 && n < 24);
  while (n > 0)
    *out++ = digits[--n];
  return out;
}

char *appendText(char *out, const char *text) {
  while (*text)
    *out++ = *text++;
  return out;
}

/// Whether process `pid` has ended: gone (ESRCH), or a zombie its parent
/// has not reaped yet (state 'Z' in /proc/<pid>/stat, after the ')' that
/// ends the command name).
bool processEnded(pid_t pid) {
  if (::kill(pid, 0) != 0)
    return errno == ESRCH;
  char path[48];
  *appendText(appendNumber(appendText(path, "/proc/"), pid), "/stat") = '\0';
  int fd = ::open(path, O_RDONLY);
  if (fd < 0)
    return false;
  char stat[512];
  ssize_t n = ::read(fd, stat, sizeof(stat) - 1);
  ::close(fd);
  if (n <= 0)
    return false;
  for (ssize_t i = n - 1; i >= 0; --i)
    if (stat[i] == ')')
      return i + 2 < n && stat[i + 2] == 'Z';
  return false;
}

/// Under mpirun: a SIGTERM after a peer died ends this process now.
void exitIfPeerDied(int signal) {
  for (int i = 0; i < peerCount; ++i) {
    if (!processEnded(peerPid[i]))
      continue;
    char line[256];
    char *p = appendText(line, "omnirun: rank ");
    p = appendNumber(p, ownRank);
    p = appendText(p, ": SIGTERM from mpirun after rank ");
    p = appendNumber(p, peerRank[i]);
    p = appendText(p, " (pid ");
    p = appendNumber(p, peerPid[i]);
    p = appendText(p, ") died: exiting without a checkpoint (the last one "
                      "stays valid)\n");
    *p = '\0';
    writeStderr(line);
    ::_exit(128 + signal);
  }
}

void onSignal(int signal) {
  if (received != 0) {
    writeStderr("omnirun: second signal: exiting at once (the last "
                "checkpoint stays valid)\n");
    ::_exit(128 + signal);
  }
  if (signal == SIGTERM)
    exitIfPeerDied(signal);
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
  peerCount = 0;
  ::sigaction(SIGINT, &previousInt_, nullptr);
  ::sigaction(SIGTERM, &previousTerm_, nullptr);
}

int InterruptHandler::pending() { return received; }

void InterruptHandler::watchPeers(int rank, const std::vector<Peer> &peers) {
  peerCount = 0;
  ownRank = rank;
  int n = 0;
  for (const Peer &peer : peers) {
    if (n == kMaxPeers)
      break;
    peerRank[n] = peer.rank;
    peerPid[n] = static_cast<pid_t>(peer.pid);
    ++n;
  }
  peerCount = n;
}

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
