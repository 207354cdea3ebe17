//===- NcclChannel.h - Collectives between GPUs through NCCL ----*- C++ -*-===//
//
// The cuda driver's channel: the ranks' GPUs joined by an NCCL communicator
// (libnccl is dlopen'ed, never linked). CudaDevice::createChannel hands the
// spec and its own context to createNcclChannel; collectives run on the
// CudaStream they are submitted on (CudaStream::handle(), reached with a
// dynamic_cast from hal::Stream), so they are ordered with its other
// commands. The channel's semantics are hal::Channel's (hal/Channel.h).
//
// Ownership: the returned channel borrows `context.api` and the device's
// CUcontext; the CudaDevice must outlive it. Thread safety: as hal::Channel.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_HAL_DRIVERS_CUDA_NCCLCHANNEL_H
#define OMNI_RUNTIME_HAL_DRIVERS_CUDA_NCCLCHANNEL_H

#include "runtime/hal/Channel.h"

#include "absl/status/statusor.h"

#include <memory>

namespace omni::hal::cuda {

class CudaApi;

/// What a channel needs from the device that creates it.
struct NcclDeviceContext {
  /// The driver API table of the device (CudaApi.h); never null.
  const CudaApi *api = nullptr;
  /// The CUDA device ordinal.
  int ordinal = 0;
  /// The device's primary context (a CUcontext).
  void *context = nullptr;
};

/// Creates this rank's NCCL channel for `spec` (validated by the caller
/// with validateChannelSpec). One-line errors.
absl::StatusOr<std::unique_ptr<Channel>>
createNcclChannel(const NcclDeviceContext &context, const ChannelSpec &spec);

} // namespace omni::hal::cuda

#endif // OMNI_RUNTIME_HAL_DRIVERS_CUDA_NCCLCHANNEL_H
