//===- Logging.h - Leveled logging and tracing hooks ------------*- C++ -*-===//
//
// The runtime's diagnostics channel: one line per message to stderr, gated
// by a level (OMNI_LOG=error|warning|info|debug in the environment, default
// warning, or setLogLevel). Errors that callers handle travel as
// absl::Status, never as log lines; logging is for what a user may want to
// see while a run succeeds (threads used, executables loaded).
//
// Tracing hooks: a process-wide sink receives the name and duration of each
// traced scope (the executor traces every command). With no sink installed
// a TraceScope costs one relaxed atomic load. Thread-safe.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_BASE_LOGGING_H
#define OMNI_RUNTIME_BASE_LOGGING_H

#include "absl/strings/string_view.h"

#include <chrono>
#include <cstdint>
#include <string>

namespace omni {

enum class LogLevel { Error = 0, Warning = 1, Info = 2, Debug = 3 };

/// The current level (messages above it are dropped).
LogLevel logLevel();
void setLogLevel(LogLevel level);

/// True when a message at `level` would be printed.
inline bool logEnabled(LogLevel level) { return level <= logLevel(); }

/// Prints "omni: <level>: <message>" to stderr when enabled.
void logMessage(LogLevel level, absl::string_view message);

/// Receives one traced scope: its name and its start and end times in
/// nanoseconds of std::chrono::steady_clock. Called on the thread that ran
/// the scope; must be thread-safe.
using TraceSink = void (*)(absl::string_view name, int64_t beginNs,
                           int64_t endNs);

/// Installs `sink` (nullptr removes it).
void setTraceSink(TraceSink sink);
TraceSink traceSink();

/// Reports its lifetime to the trace sink, if one is installed when the
/// scope begins. `name` must outlive the scope.
class TraceScope {
public:
  explicit TraceScope(absl::string_view name) : sink_(traceSink()) {
    if (sink_) {
      name_ = name;
      begin_ = now();
    }
  }
  ~TraceScope() {
    if (sink_)
      sink_(name_, begin_, now());
  }
  TraceScope(const TraceScope &) = delete;
  TraceScope &operator=(const TraceScope &) = delete;

private:
  static int64_t now() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  TraceSink sink_;
  absl::string_view name_;
  int64_t begin_ = 0;
};

} // namespace omni

#endif // OMNI_RUNTIME_BASE_LOGGING_H
