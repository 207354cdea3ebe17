//===- CpuDriver.h - The cpu driver -----------------------------*- C++ -*-===//
//
// Creates CpuDevices. Registered under "cpu" by hal/drivers/Drivers.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_HAL_DRIVERS_CPU_CPUDRIVER_H
#define OMNI_RUNTIME_HAL_DRIVERS_CPU_CPUDRIVER_H

#include "runtime/hal/Driver.h"

namespace omni::hal::cpu {

class CpuDriver final : public Driver {
public:
  const std::string &name() const override;
  absl::StatusOr<std::unique_ptr<Device>>
  createDevice(const DeviceOptions &options) override;
};

} // namespace omni::hal::cpu

#endif // OMNI_RUNTIME_HAL_DRIVERS_CPU_CPUDRIVER_H
