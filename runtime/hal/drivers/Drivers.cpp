//===- Drivers.cpp - The built-in drivers -----------------------*- C++ -*-===//

#include "runtime/hal/drivers/Drivers.h"

#include "runtime/hal/drivers/cpu/CpuDriver.h"

#ifdef OMNI_HAL_HAS_CUDA
#include "runtime/hal/drivers/cuda/CudaDriver.h"
#endif

namespace omni::hal {

void registerBuiltinDrivers(DriverRegistry &registry) {
  // A registry that already has a "cpu" driver keeps it.
  (void)registry.add(std::make_unique<cpu::CpuDriver>());
#ifdef OMNI_HAL_HAS_CUDA
  // Built with the CUDA toolkit's headers; libcuda is opened at the first
  // createDevice, so registering it costs nothing on a machine without a
  // GPU (createDevice then says why in one line).
  (void)registry.add(std::make_unique<cuda::CudaDriver>());
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
