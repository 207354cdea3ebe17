//===- NcclChannel.cpp - Collectives between GPUs through NCCL --*- C++ -*-===//
//
// A stub until the NCCL channel lands (helper "gpus" replaces this file).
//
//===----------------------------------------------------------------------===//

#include "runtime/hal/drivers/cuda/NcclChannel.h"

#include "absl/status/status.h"

namespace omni::hal::cuda {

absl::StatusOr<std::unique_ptr<Channel>>
createNcclChannel(const NcclDeviceContext &, const ChannelSpec &) {
  return absl::UnimplementedError("cuda: NCCL channels are not built yet");
}

} // namespace omni::hal::cuda
