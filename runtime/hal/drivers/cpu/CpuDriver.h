//===- CpuDriver.h - The cpu driver -----------------------------*- C++ -*-===//
//
// Creates CpuDevices. Registered under "cpu" by hal/drivers/Drivers.cpp.
// threads must be 0 (one per core) to kMaxThreads; a device whose worker
// threads cannot all be started is an error, not an abort.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_HAL_DRIVERS_CPU_CPUDRIVER_H
#define OMNI_RUNTIME_HAL_DRIVERS_CPU_CPUDRIVER_H

#include "runtime/hal/Driver.h"

namespace omni::hal::cpu {

/// The most threads a cpu device takes (DeviceOptions::threads): beyond,
/// the workers would only contend, and their stacks alone need gigabytes.
constexpr int kMaxThreads = 1024;

class CpuDriver final : public Driver {
public:
  const std::string &name() const override;
  absl::StatusOr<std::unique_ptr<Device>>
  createDevice(const DeviceOptions &options) override;
};

} // namespace omni::hal::cpu

#endif // OMNI_RUNTIME_HAL_DRIVERS_CPU_CPUDRIVER_H
