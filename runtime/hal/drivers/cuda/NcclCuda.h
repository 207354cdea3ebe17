//===- NcclCuda.h - What the NCCL channel needs from the cuda driver -*- C++
//-*-===//
//
// The few driver calls the NCCL channel (NcclChannel.cpp) makes, on top of
// the cuda driver's CudaApi, CudaBuffer and CudaStream: keeping the
// channel's code free of the driver's classes keeps the two apart
// (helper-owned files, docs/backend-cuda.md). Every function returns a
// one-line error; events are CUevents created without timing.
//
// Thread safety: as the driver API (the functions make `context` current
// on the calling thread where they need it).
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_HAL_DRIVERS_CUDA_NCCLCUDA_H
#define OMNI_RUNTIME_HAL_DRIVERS_CUDA_NCCLCUDA_H

#include "runtime/hal/Buffer.h"
#include "runtime/hal/Stream.h"
#include "runtime/hal/drivers/cuda/NcclChannel.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace omni::hal::cuda {

/// cuCtxSetCurrent(context.context) on this thread.
absl::Status setCurrentContext(const NcclDeviceContext &context);

/// The CUstream of a CudaStream (InvalidArgument for another driver's;
/// FailedPrecondition, failing the capture, while it captures a graph).
absl::StatusOr<void *> streamHandle(Stream &stream);

/// The device address of `ref`'s first byte after checking that it is a
/// cuda buffer and inside it; `what` ("send") names it in the error.
absl::StatusOr<void *> devicePointer(BufferRef ref, const char *what);

/// A CUevent recorded on `stream` now.
absl::StatusOr<void *> recordEvent(const NcclDeviceContext &context,
                                   void *stream);
/// Whether `event` completed (cuEventQuery); an error for a failed one.
absl::StatusOr<bool> queryEvent(const NcclDeviceContext &context, void *event);
void destroyEvent(const NcclDeviceContext &context, void *event);

} // namespace omni::hal::cuda

#endif // OMNI_RUNTIME_HAL_DRIVERS_CUDA_NCCLCUDA_H
