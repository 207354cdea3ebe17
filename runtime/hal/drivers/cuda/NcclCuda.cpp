//===- NcclCuda.cpp - What the NCCL channel needs from the cuda driver ----===//

#include "runtime/hal/drivers/cuda/NcclCuda.h"

#include "runtime/hal/drivers/cuda/CudaApi.h"
#include "runtime/hal/drivers/cuda/CudaDevice.h"
#include "runtime/hal/drivers/cuda/CudaStream.h"

#include "absl/strings/str_cat.h"

namespace omni::hal::cuda {

absl::Status setCurrentContext(const NcclDeviceContext &context) {
  return context.api->check(
      context.api->cuCtxSetCurrent(static_cast<CUcontext>(context.context)),
      "cuda: cuCtxSetCurrent");
}

absl::StatusOr<void *> streamHandle(Stream &stream) {
  auto *cuda = dynamic_cast<CudaStream *>(&stream);
  if (!cuda)
    return absl::InvalidArgumentError(
        "nccl: a collective on a stream of another driver (expected a cuda "
        "stream)");
  // The channel's watchdog queries an event it records after each
  // collective, which an event recorded in a capture does not allow.
  if (cuda->capturing())
    return cuda->refuseWhileCapturing("nccl: a collective");
  return static_cast<void *>(cuda->handle());
}

absl::StatusOr<void *> devicePointer(BufferRef ref, const char *what) {
  auto *buffer = dynamic_cast<CudaBuffer *>(ref.buffer);
  if (!buffer)
    return absl::InvalidArgumentError(
        absl::StrCat("nccl: the ", what, " buffer is not a cuda buffer"));
  if (ref.offset < 0 || ref.length < 0 ||
      ref.offset > buffer->size() - ref.length)
    return absl::InvalidArgumentError(
        absl::StrCat("nccl: the ", what, " range [", ref.offset, ", ",
                     ref.offset + ref.length, ") is outside its buffer of ",
                     buffer->size(), " bytes"));
  return reinterpret_cast<void *>(
      static_cast<uintptr_t>(buffer->pointer() + ref.offset));
}

absl::StatusOr<void *> recordEvent(const NcclDeviceContext &context,
                                   void *stream) {
  const CudaApi &api = *context.api;
  CUevent event = nullptr;
  if (absl::Status s = api.check(
          api.cuEventCreate(&event, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
      !s.ok())
    return s;
  if (absl::Status s =
          api.check(api.cuEventRecord(event, static_cast<CUstream>(stream)),
                    "cuEventRecord");
      !s.ok()) {
    api.cuEventDestroy(event);
    return s;
  }
  return static_cast<void *>(event);
}

absl::StatusOr<bool> queryEvent(const NcclDeviceContext &context, void *event) {
  CUresult result = context.api->cuEventQuery(static_cast<CUevent>(event));
  if (result == CUDA_ERROR_NOT_READY)
    return false;
  if (absl::Status s = context.api->check(result, "cuEventQuery"); !s.ok())
    return s;
  return true;
}

void destroyEvent(const NcclDeviceContext &context, void *event) {
  if (event)
    context.api->cuEventDestroy(static_cast<CUevent>(event));
}

} // namespace omni::hal::cuda
