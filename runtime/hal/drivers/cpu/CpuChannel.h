//===- CpuChannel.h - A single-rank channel ---------------------*- C++ -*-===//
//
// The cpu driver's collectives for a group of one rank (one process; CPU
// ranks over MPI come later): every collective is a copy of send into recv
// on the stream. Ownership and thread safety as hal::Channel.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_HAL_DRIVERS_CPU_CPUCHANNEL_H
#define OMNI_RUNTIME_HAL_DRIVERS_CPU_CPUCHANNEL_H

#include "runtime/hal/Channel.h"

namespace omni::hal::cpu {

class CpuChannel final : public Channel {
public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  absl::Status allReduce(Stream &stream, BufferRef send, BufferRef recv,
                         DType dtype, ReduceOp op) override;
  absl::Status allGather(Stream &stream, BufferRef send,
                         BufferRef recv) override;
  absl::Status reduceScatter(Stream &stream, BufferRef send, BufferRef recv,
                             DType dtype, ReduceOp op) override;
  absl::Status broadcast(Stream &stream, BufferRef buffer, int root) override;
};

} // namespace omni::hal::cpu

#endif // OMNI_RUNTIME_HAL_DRIVERS_CPU_CPUCHANNEL_H
