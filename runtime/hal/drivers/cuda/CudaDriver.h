//===- CudaDriver.h - The cuda driver ---------------------------*- C++ -*-===//
//
// Creates CudaDevices: one per CUDA device ordinal (DeviceOptions::ordinal),
// each on that device's primary context. The driver library is loaded on
// the first createDevice (CudaApi::load) and the result, success or the
// one-line reason there is no usable GPU, is kept for the driver's
// lifetime. Only hal/drivers/Drivers.cpp names this class.
//
// Ownership: owned by a DriverRegistry; devices share its CudaApi.
// Thread safety: createDevice may be called concurrently.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_HAL_DRIVERS_CUDA_CUDADRIVER_H
#define OMNI_RUNTIME_HAL_DRIVERS_CUDA_CUDADRIVER_H

#include "runtime/hal/Driver.h"

#include <memory>
#include <mutex>
#include <string>

namespace omni::hal::cuda {

class CudaApi;

class CudaDriver final : public Driver {
public:
  /// `library`: the driver library to open (empty: CudaApi::load's default,
  /// $OMNI_CUDA_DRIVER_LIBRARY or libcuda.so.1).
  explicit CudaDriver(std::string library = "");
  ~CudaDriver() override;

  const std::string &name() const override;
  absl::StatusOr<std::unique_ptr<Device>>
  createDevice(const DeviceOptions &options) override;

  /// The devices this process sees (cuDeviceGetCount: CUDA_VISIBLE_DEVICES
  /// applies).
  absl::StatusOr<int> deviceCount() override;

  /// The loaded driver API, or why there is none (Unavailable, one line).
  absl::StatusOr<std::shared_ptr<const CudaApi>> api();

private:
  std::string library_;
  std::once_flag once_;
  absl::StatusOr<std::shared_ptr<const CudaApi>> api_;
};

} // namespace omni::hal::cuda

#endif // OMNI_RUNTIME_HAL_DRIVERS_CUDA_CUDADRIVER_H
