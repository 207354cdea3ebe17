//===- Drivers.cpp - The built-in drivers -----------------------*- C++ -*-===//

#include "runtime/hal/drivers/Drivers.h"

#include "runtime/hal/drivers/cpu/CpuDriver.h"

#ifdef OMNI_HAL_HAS_CUDA
#include "runtime/hal/drivers/cuda/CudaDriver.h"
#endif

namespace omni::hal {
namespace {

#ifndef OMNI_HAL_HAS_CUDA
/// "cuda" in a build without the CUDA toolkit: every createDevice says so
/// in one line (Unavailable, like a machine without a GPU).
class UnbuiltCudaDriver final : public Driver {
public:
  const std::string &name() const override {
    static const std::string *name = new std::string("cuda");
    return *name;
  }
  absl::StatusOr<std::unique_ptr<Device>>
  createDevice(const DeviceOptions &) override {
    return unbuilt();
  }
  absl::StatusOr<int> deviceCount() override { return unbuilt(); }

private:
  static absl::Status unbuilt() {
    return absl::UnavailableError(
        "cuda: this omni was built without the CUDA toolkit (install it, "
        "e.g. at /usr/local/cuda, and rebuild)");
  }
};
#endif

} // namespace

void registerBuiltinDrivers(DriverRegistry &registry) {
  // A registry that already has a "cpu" driver keeps it.
  (void)registry.add(std::make_unique<cpu::CpuDriver>());
#ifdef OMNI_HAL_HAS_CUDA
  // Built with the CUDA toolkit's headers; libcuda is opened at the first
  // createDevice, so registering it costs nothing on a machine without a
  // GPU (createDevice then says why in one line).
  (void)registry.add(std::make_unique<cuda::CudaDriver>());
#else
  (void)registry.add(std::make_unique<UnbuiltCudaDriver>());
#endif
}

DriverRegistry &builtinDrivers() {
  static DriverRegistry *registry = [] {
    auto *r = new DriverRegistry();
    registerBuiltinDrivers(*r);
    return r;
  }();
  return *registry;
}

} // namespace omni::hal
