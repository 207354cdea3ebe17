//===- InProcessGroup.h - A rendezvous for ranks that are threads -*- C++
//-*-===//
//
// The Bootstrap of ranks that run as threads of one process
// (InProcessChannelProvider): a driver-neutral meeting point that a
// driver's channel builds its collectives on. Its one primitive is
// exchange(): every rank posts a pointer and, once all ranks of the group
// have posted, every rank receives all of them in rank order (a barrier
// that carries one word per rank). The cpu driver posts descriptors of its
// buffers and reads the other ranks' bytes directly; a GPU driver would
// post an NCCL unique id.
//
// Failure: abort() fails the group; a rank that waits longer than the
// timeout aborts it with DeadlineExceeded naming the ranks that did not
// arrive; leave() (a channel destroyed) aborts it for the ranks still in
// it. Every rank's pending and later exchanges then return the same status.
//
// Ownership: shared (std::shared_ptr) by the specs and channels of the
// group. Thread safety: every method may be called concurrently; each rank
// calls exchange() from one thread at a time.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_HAL_INPROCESSGROUP_H
#define OMNI_RUNTIME_HAL_INPROCESSGROUP_H

#include "runtime/hal/Channel.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

namespace omni::hal {

class InProcessGroup final : public Bootstrap {
public:
  static constexpr absl::string_view kKind = "in-process";

  /// `size` >= 1 ranks; a timeout of 0 waits forever.
  InProcessGroup(int size, std::chrono::milliseconds timeout);

  absl::string_view kind() const override { return kKind; }
  int size() const override { return size_; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  /// Claims `rank` for one channel (InvalidArgument when it is out of range
  /// or already has one).
  absl::Status join(int rank);
  /// Releases `rank`; unless every rank has left, the group is aborted
  /// ("rank <r> closed its channel").
  void leave(int rank);

  /// Collective: posts `value` for `rank` and returns every rank's value
  /// in rank order once all have posted. `what` names the operation in a
  /// timeout's message ("all_reduce"). Fails with the abort status.
  absl::StatusOr<std::vector<const void *>>
  exchange(int rank, const void *value, absl::string_view what);
  /// exchange() without values.
  absl::Status barrier(int rank, absl::string_view what);

  /// Fails the group: the first call's message wins; the code is Aborted
  /// (DeadlineExceeded for timeouts).
  void abort(const absl::Status &reason);
  /// OK, or the abort status.
  absl::Status status() const;

private:
  const int size_;
  const std::chrono::milliseconds timeout_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  absl::Status aborted_;
  std::vector<bool> joined_, left_;
  /// The round being filled: which ranks posted what.
  std::vector<const void *> posted_;
  std::vector<bool> arrived_;
  int arrivedCount_ = 0;
  /// The last completed round's values; read by its ranks before they can
  /// post again, and only overwritten by the next round's completion,
  /// which needs every rank.
  std::vector<const void *> published_;
  uint64_t generation_ = 0;
};

} // namespace omni::hal

#endif // OMNI_RUNTIME_HAL_INPROCESSGROUP_H
