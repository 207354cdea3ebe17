//===- CudaDriver.cpp - The cuda driver -------------------------*- C++ -*-===//

#include "runtime/hal/drivers/cuda/CudaDriver.h"

#include "runtime/base/Status.h"
#include "runtime/hal/drivers/cuda/CudaApi.h"
#include "runtime/hal/drivers/cuda/CudaDevice.h"

namespace omni::hal::cuda {

CudaDriver::CudaDriver(std::string library)
    : library_(std::move(library)),
      api_(absl::UnknownError("cuda: the driver is not loaded")) {}

CudaDriver::~CudaDriver() = default;

const std::string &CudaDriver::name() const {
  static const std::string *name = new std::string("cuda");
  return *name;
}

absl::StatusOr<std::shared_ptr<const CudaApi>> CudaDriver::api() {
  std::call_once(once_, [this] {
    absl::StatusOr<std::unique_ptr<CudaApi>> loaded = CudaApi::load(library_);
    if (loaded.ok())
      api_ = std::shared_ptr<const CudaApi>(std::move(*loaded));
    else
      api_ = loaded.status();
  });
  return api_;
}

absl::StatusOr<std::unique_ptr<Device>>
CudaDriver::createDevice(const DeviceOptions &options) {
  // The environment's choices first, like flags: before the driver.
  OMNI_ASSIGN_OR_RETURN(AttentionKernel attention,
                        attentionKernelFromEnvironment());
  OMNI_ASSIGN_OR_RETURN(std::shared_ptr<const CudaApi> api, api());
  OMNI_RETURN_IF_ERROR(api->checkOrdinal(options.ordinal));
  OMNI_ASSIGN_OR_RETURN(std::unique_ptr<CudaDevice> device,
                        CudaDevice::create(std::move(api), options, attention));
  return std::unique_ptr<Device>(std::move(device));
}

absl::StatusOr<int> CudaDriver::deviceCount() {
  OMNI_ASSIGN_OR_RETURN(std::shared_ptr<const CudaApi> api, api());
  return api->deviceCount();
}

} // namespace omni::hal::cuda
