//===- CpuChannel.h - Collectives between host threads ----------*- C++ -*-===//
//
// The cpu driver's channel: ranks that are threads of one process, meeting
// in an InProcessGroup (a loopback channel is a private group of one). A
// collective runs when it is submitted (the cpu stream is eager, so it is
// ordered with the stream's other commands): the ranks exchange
// descriptors of their buffers (a mismatch fails the group), each rank
// reads every rank's bytes directly and computes its own result into a
// private staging copy, in rank order 0..size-1 (identical bits on every
// rank), and after a second rendezvous - nobody reads a send buffer any
// more - writes its result. In-place calls are therefore safe. Any error
// (a bad buffer, a mismatch) aborts the group so that no rank waits for
// a collective that will not come.
//
// A HostBootstrap (hal/HostCollectives.h: the MPI bootstrap, one rank per
// process) makes its own channel instead; create() lends it this device's
// buffers and thread pool. Both reduce with reduceHostElements.
//
// Each rank normally has its own CpuDevice (as each GPU rank has its own
// device); ranks may also share one device, each with its own stream and
// channel. A rank's buffers must belong to the device that created its
// channel.
//
// Ownership: created by CpuDevice::createChannel; the device must outlive
// it; the destructor leaves the group. Thread safety: as hal::Channel.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_HAL_DRIVERS_CPU_CPUCHANNEL_H
#define OMNI_RUNTIME_HAL_DRIVERS_CPU_CPUCHANNEL_H

#include "runtime/hal/Channel.h"
#include "runtime/hal/InProcessGroup.h"

#include <memory>

namespace omni::hal::cpu {

class CpuDevice;

class CpuChannel final : public Channel {
public:
  /// Validates `spec` (a null bootstrap makes a loopback) and joins its
  /// group.
  static absl::StatusOr<std::unique_ptr<Channel>>
  create(CpuDevice &device, const ChannelSpec &spec);
  ~CpuChannel() override;

  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }
  absl::Status allReduce(Stream &stream, BufferRef send, BufferRef recv,
                         DType dtype, ReduceOp op) override;
  absl::Status allGather(Stream &stream, BufferRef send,
                         BufferRef recv) override;
  absl::Status reduceScatter(Stream &stream, BufferRef send, BufferRef recv,
                             DType dtype, ReduceOp op) override;
  absl::Status broadcast(Stream &stream, BufferRef buffer, int root) override;
  absl::StatusOr<std::unique_ptr<Channel>> split(int color, int key) override;
  void abort(const absl::Status &reason) override;

  struct Post;

private:
  CpuChannel(CpuDevice &device, std::shared_ptr<InProcessGroup> group, int rank)
      : device_(device), group_(std::move(group)), rank_(rank) {}

  absl::StatusOr<uint8_t *> resolve(BufferRef ref, const char *what) const;
  /// Aborts the group with "rank <r>: <what>: <message>" and returns it.
  absl::Status failGroup(absl::string_view what, const absl::Status &status);
  /// Exchanges `post` and checks that every rank posted the same
  /// collective; the posts of all ranks.
  absl::StatusOr<std::vector<const Post *>> meet(const Post &post);
  absl::Status reduce(const char *what, BufferRef send, BufferRef recv,
                      DType dtype, ReduceOp op, bool scatter);

  CpuDevice &device_;
  std::shared_ptr<InProcessGroup> group_;
  int rank_;
};

} // namespace omni::hal::cpu

#endif // OMNI_RUNTIME_HAL_DRIVERS_CPU_CPUCHANNEL_H
