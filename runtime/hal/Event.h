//===- Event.h - A point in a stream's command sequence ---------*- C++ -*-===//
//
// Stream::recordEvent marks the commands submitted so far; the Event
// completes when they have all finished. The host waits on it with wait(),
// another stream with Stream::waitEvent (cross-stream ordering, like
// cudaStreamWaitEvent or an IREE semaphore). A driver that executes eagerly
// (cpu) returns events that are already complete.
//
// Ownership: shared (std::shared_ptr), so that the recording stream, the
// host and other streams can hold it. Thread safety: all methods are safe
// to call concurrently.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_HAL_EVENT_H
#define OMNI_RUNTIME_HAL_EVENT_H

#include "absl/status/status.h"

namespace omni::hal {

class Event {
public:
  virtual ~Event() = default;

  /// Blocks until the marked commands finished; returns the first error
  /// any of them reported (OK if none).
  virtual absl::Status wait() = 0;

  /// True when the marked commands finished (never blocks).
  virtual bool isComplete() const = 0;
};

} // namespace omni::hal

#endif // OMNI_RUNTIME_HAL_EVENT_H
