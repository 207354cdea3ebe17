//===- Channel.h - Collectives over a group of ranks ------------*- C++ -*-===//
//
// A Channel connects the ranks of one SPMD program (a NCCL communicator, an
// MPI communicator) and runs the collectives the omni dialect has:
// all_reduce, all_gather, reduce_scatter, broadcast. Every collective is
// submitted on a Stream and ordered with that stream's other commands; all
// ranks must submit the same collectives in the same order. Buffers are
// dense tensors of `dtype`; counts are the per-rank element counts stated
// on each method. A Channel of size 1 copies.
//
// Ownership: created by Device::createChannel (optional); the Device must
// outlive it. Thread safety: used by one thread at a time.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_HAL_CHANNEL_H
#define OMNI_RUNTIME_HAL_CHANNEL_H

#include "runtime/hal/Buffer.h"
#include "runtime/hal/Stream.h"

#include "absl/status/status.h"

namespace omni::hal {

enum class ReduceOp { Sum, Prod, Min, Max };

class Channel {
public:
  virtual ~Channel() = default;

  /// This process's rank in [0, size()).
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
};

} // namespace omni::hal

#endif // OMNI_RUNTIME_HAL_CHANNEL_H
