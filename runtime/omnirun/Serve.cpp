//===- Serve.cpp - omnirun --serve: the sampling server mode ----*- C++ -*-===//
//
// The mode of Serve.h. Signals reach the serving thread through a pipe
// (the handler only writes the signal's number to it, which is
// async-signal-safe); the thread then shuts the server down as
// SampleServer::shutdown() describes (docs/serving.md, "Shutting down").
//
//===----------------------------------------------------------------------===//

#include "runtime/omnirun/Serve.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace omni::omnirun {
namespace {

/// The pipe the handler writes the signal to; -1 while no serve() runs.
volatile std::sig_atomic_t signalPipe = -1;
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
    writeStderr("omnirun: second signal: exiting at once\n");
    ::_exit(128 + signal);
  }
  received = signal;
  writeStderr(signal == SIGINT
                  ? "omnirun: SIGINT: answering the running batch, refusing "
                    "the queued requests, then exiting (Ctrl-C again exits "
                    "at once)\n"
                  : "omnirun: SIGTERM: answering the running batch, refusing "
                    "the queued requests, then exiting (a second signal "
                    "exits at once)\n");
  unsigned char byte = static_cast<unsigned char>(signal);
  if (signalPipe >= 0)
    (void)!::write(signalPipe, &byte, 1);
}

/// SIGINT and SIGTERM into a pipe while it lives.
class SignalPipe {
public:
  SignalPipe() {
    if (::pipe(fds_) != 0) {
      fds_[0] = fds_[1] = -1;
      return;
    }
    ::fcntl(fds_[1], F_SETFL, O_NONBLOCK);
    received = 0;
    signalPipe = fds_[1];
    struct sigaction action;
    std::memset(&action, 0, sizeof(action));
    action.sa_handler = onSignal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    ::sigaction(SIGINT, &action, &previousInt_);
    ::sigaction(SIGTERM, &action, &previousTerm_);
  }
  ~SignalPipe() {
    if (fds_[0] < 0)
      return;
    ::sigaction(SIGINT, &previousInt_, nullptr);
    ::sigaction(SIGTERM, &previousTerm_, nullptr);
    signalPipe = -1;
    ::close(fds_[0]);
    ::close(fds_[1]);
  }
  SignalPipe(const SignalPipe &) = delete;
  SignalPipe &operator=(const SignalPipe &) = delete;

  bool ok() const { return fds_[0] >= 0; }

  /// Blocks until a signal arrives; returns its number.
  int wait() {
    unsigned char byte = 0;
    while (true) {
      ssize_t n = ::read(fds_[0], &byte, 1);
      if (n == 1)
        return byte;
      if (n < 0 && errno == EINTR)
        continue;
      return received ? static_cast<int>(received) : SIGTERM;
    }
  }

private:
  int fds_[2] = {-1, -1};
  struct sigaction previousInt_, previousTerm_;
};

} // namespace

SampleBackendFactory builtinSampleBackend() {
  // The runner of `omnigen --program=sample` step.bins is wired here when
  // it lands (issue 16, item 5).
  return nullptr;
}

absl::Status parseServeAddress(const std::string &value, ServeArgs &args) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("--serve '", value, "': ", why,
                     ", expected HOST:PORT (e.g. "
                     "127.0.0.1:8000; port 0 picks one)"));
  };
  size_t colon = value.rfind(':');
  if (colon == std::string::npos)
    return bad("no port");
  std::string host = value.substr(0, colon);
  std::string port = value.substr(colon + 1);
  if (host.empty())
    return bad("no host");
  if (host.find_first_of("/@[]?# ") != std::string::npos ||
      host.find(':') != std::string::npos)
    return bad(
        absl::StrCat("host '", host, "' is not a name or an IPv4 address"));
  int number = 0;
  if (port.empty() ||
      port.find_first_not_of("0123456789") != std::string::npos ||
      !absl::SimpleAtoi(port, &number) || number > 65535)
    return bad(absl::StrCat("port '", port, "' is not from 0 to 65535"));
  args.host = host;
  args.port = number;
  return absl::OkStatus();
}

int serve(const std::shared_ptr<const loader::Program> &program,
          const ServeArgs &args, const SampleBackendFactory &factory,
          std::ostream &out, std::ostream &err) {
  auto fail = [&](absl::string_view message) {
    err << "omnirun: " << message << "\n";
    return 1;
  };
  if (!program->findFunction("sample"))
    return fail(absl::StrCat(args.file,
                             " has no @sample: --serve needs a program with "
                             "@sample (omnigen --program=sample)"));
  if (!factory)
    return fail("--serve needs a program with @sample, and this omnirun "
                "cannot run @sample yet (no sampling backend is built in)");
  absl::StatusOr<std::unique_ptr<serve::SampleBackend>> backend =
      factory(program, args);
  if (!backend.ok())
    return fail(backend.status().message());
  SignalPipe signals;
  if (!signals.ok())
    return fail(absl::StrCat("--serve: cannot make a pipe for signals: ",
                             std::strerror(errno)));
  serve::ServeOptions options;
  options.host = args.host;
  options.port = args.port;
  options.maxQueue = args.maxQueue;
  options.maxBatchWaitMs = args.maxBatchWaitMs;
  absl::StatusOr<std::unique_ptr<serve::SampleServer>> server =
      serve::SampleServer::start(**backend, options);
  if (!server.ok())
    return fail(server.status().message());
  const serve::SampleInfo &info = (*backend)->info();
  out << "omnirun: serving " << args.file << " on http://" << args.host << ":"
      << (*server)->port() << " (batch " << info.batch << ", " << info.steps
      << " steps, " << info.width << "x" << info.height << " images"
      << (info.hasLogprobs ? ", log-probs" : "")
      << "; POST /v1/sample, GET /v1/info, GET /v1/health)" << std::endl;
  if (args.onListening)
    args.onListening((*server)->port());
  int signal = signals.wait();
  (*server)->shutdown();
  serve::ServeStats stats = (*server)->stats();
  out << "omnirun: stopped serving: " << stats.requests << " requests in "
      << stats.batches << " batches, " << stats.rejected << " refused, "
      << stats.failed << " failed, " << stats.badRequests << " bad"
      << std::endl;
  return 128 + signal;
}

} // namespace omni::omnirun
