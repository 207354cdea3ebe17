//===- Channel.h - Collectives over a group of ranks ------------*- C++ -*-===//
//
// A Channel connects the ranks of one SPMD program (a NCCL communicator, an
// MPI communicator, threads of one process) and runs the collectives the
// omni dialect has: all_reduce, all_gather, reduce_scatter, broadcast.
// Every collective is submitted on a Stream and ordered with that stream's
// other commands; all ranks must submit the same collectives (kind, dtype,
// byte counts, root) in the same order, and a rank that submits another
// one fails the group. Buffers are dense tensors of `dtype`; counts are
// the per-rank lengths stated on each method.
//
// Results are deterministic: a reduction combines the ranks' values in rank
// order 0, 1, ..., size-1, so every rank receives identical bits, run after
// run. Accumulation (docs/backend.md, "Channels, meshes and the Collective
// command"): f32 and f64 accumulate in their own type, f16 and bf16 in
// f32, rounded to the dtype once at the end; i32 and i64 sums and products wrap
// (two's complement); Mean is the Sum divided by size() (float dtypes only);
// Min and Max return NaN when any rank's element is NaN; i1 supports only
// all_gather and broadcast (the dialect reduces numeric tensors only).
//
// Creating a channel: a ChannelProvider describes the group (one
// ChannelSpec per rank: rank, size and a Bootstrap that says how the ranks
// find each other), and each rank passes its spec to its
// Device::createChannel. Bootstraps today: none (size 1, a loopback) and
// InProcessGroup (N ranks that are threads of one process,
// hal/InProcessGroup.h); an MPI communicator or an NCCL unique id are
// further Bootstrap kinds.
//
// Failure: a collective that cannot complete on every rank (a mismatched
// collective, a rank whose run failed and called abort(), a rank that
// closed its channel, a wait longer than the group's timeout) aborts the
// group: every rank's pending and later collectives fail with the same
// one-line reason instead of hanging. An aborted group stays aborted.
//
// Ownership: created by Device::createChannel; the Device must outlive it.
// Destroying a rank's channel leaves the group (the others' later
// collectives fail). Thread safety: a Channel is used by one thread at a
// time; abort() may be called from any thread.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_HAL_CHANNEL_H
#define OMNI_RUNTIME_HAL_CHANNEL_H

#include "runtime/hal/Buffer.h"
#include "runtime/hal/Stream.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include <chrono>
#include <memory>
#include <vector>

namespace omni::hal {

/// How reductions combine the ranks' elements (step.fbs ReduceOp).
enum class ReduceOp { Sum, Prod, Min, Max, Mean };

/// "sum", "prod", "min", "max", "mean".
absl::string_view reduceOpName(ReduceOp op);

/// How the ranks of a group find each other: shared by the specs of one
/// group. Drivers recognize the kinds they support by kind() and refuse the
/// others (Unimplemented).
class Bootstrap {
public:
  virtual ~Bootstrap() = default;
  /// "in-process" (InProcessGroup); later "mpi", "nccl".
  virtual absl::string_view kind() const = 0;
  /// The number of ranks the group was made for.
  virtual int size() const = 0;
};

/// One rank's description of its channel.
struct ChannelSpec {
  /// This rank, in [0, size).
  int rank = 0;
  /// The number of ranks, >= 1.
  int size = 1;
  /// The group; null means a loopback channel (size 1 only).
  std::shared_ptr<Bootstrap> bootstrap;
};

/// Checks a spec the way every Device::createChannel must: size >= 1, rank
/// in range, a bootstrap when size > 1 whose size matches. One-line
/// InvalidArgument errors.
absl::Status validateChannelSpec(const ChannelSpec &spec);

/// Describes the ranks of one group.
class ChannelProvider {
public:
  virtual ~ChannelProvider() = default;
  /// The number of ranks.
  virtual int size() const = 0;
  /// The spec of `rank` (InvalidArgument for a rank out of range).
  virtual absl::StatusOr<ChannelSpec> spec(int rank) const = 0;
};

/// A group of one rank: spec(0) has no bootstrap.
class LoopbackChannelProvider final : public ChannelProvider {
public:
  int size() const override { return 1; }
  absl::StatusOr<ChannelSpec> spec(int rank) const override;
};

/// `size` ranks that run as threads of this process and share one
/// InProcessGroup (hal/InProcessGroup.h). A collective that waits longer
/// than `timeout` for the other ranks aborts the group (0: wait forever).
class InProcessChannelProvider final : public ChannelProvider {
public:
  explicit InProcessChannelProvider(
      int size, std::chrono::milliseconds timeout = kDefaultTimeout);
  /// Like PyTorch's process groups: ten minutes.
  static constexpr std::chrono::milliseconds kDefaultTimeout =
      std::chrono::minutes(10);

  int size() const override { return size_; }
  absl::StatusOr<ChannelSpec> spec(int rank) const override;

private:
  int size_;
  std::shared_ptr<Bootstrap> group_;
};

class Channel {
public:
  virtual ~Channel() = default;

  /// This rank in [0, size()).
  virtual int rank() const = 0;
  /// The number of ranks.
  virtual int size() const = 0;

  /// recv = reduce over ranks of send (equal lengths; may be the same
  /// range for an in-place reduction).
  virtual absl::Status allReduce(Stream &stream, BufferRef send, BufferRef recv,
                                 DType dtype, ReduceOp op) = 0;

  /// recv = the concatenation of every rank's send, in rank order
  /// (recv.length = size() * send.length).
  virtual absl::Status allGather(Stream &stream, BufferRef send,
                                 BufferRef recv) = 0;

  /// recv = chunk rank() of the reduction of every rank's send
  /// (send.length = size() * recv.length).
  virtual absl::Status reduceScatter(Stream &stream, BufferRef send,
                                     BufferRef recv, DType dtype,
                                     ReduceOp op) = 0;

  /// Every rank's `buffer` = root's `buffer`.
  virtual absl::Status broadcast(Stream &stream, BufferRef buffer,
                                 int root) = 0;

  /// Collective (every rank of this channel calls it, in the same order as
  /// the other collectives): a channel over the ranks that passed the same
  /// `color` (>= 0), ranked by (key, rank()), like MPI_Comm_split. The new
  /// channel belongs to the same device and has the same timeout.
  /// Default: Unimplemented.
  virtual absl::StatusOr<std::unique_ptr<Channel>> split(int color, int key);

  /// Fails the group with `reason` (one line, naming this rank): every
  /// rank's pending and later collectives return it. Idempotent; the first
  /// reason wins. Default: nothing (a group that cannot be aborted).
  virtual void abort(const absl::Status &reason);
};

} // namespace omni::hal

#endif // OMNI_RUNTIME_HAL_CHANNEL_H
