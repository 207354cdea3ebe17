//===- Driver.h - A backend that creates devices ----------------*- C++ -*-===//
//
// A Driver is one backend (cpu, cuda): it knows how to find and create its
// devices. Drivers are registered by name in a DriverRegistry; tools pick
// one by name ("--device cpu").
//
// Ownership: owned by the registry. Thread safety: createDevice may be
// called concurrently.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_HAL_DRIVER_H
#define OMNI_RUNTIME_HAL_DRIVER_H

#include "runtime/hal/Device.h"

#include "absl/status/statusor.h"

#include <cstdint>
#include <memory>
#include <string>

namespace omni::hal {

/// Options of Driver::createDevice; a driver ignores what it does not use.
struct DeviceOptions {
  /// Worker threads (cpu); 0 means std::thread::hardware_concurrency().
  int threads = 0;
  /// Fail allocations beyond this many bytes in total; 0 means no limit.
  int64_t memoryLimitBytes = 0;
  /// Which device of the driver (cuda: the ordinal).
  int ordinal = 0;
};

class Driver {
public:
  virtual ~Driver() = default;

  /// "cpu", "cuda".
  virtual const std::string &name() const = 0;

  virtual absl::StatusOr<std::unique_ptr<Device>>
  createDevice(const DeviceOptions &options) = 0;

  /// How many devices createDevice can make (ordinals 0..n-1), or why it
  /// can make none (createDevice's error). Unimplemented by default.
  virtual absl::StatusOr<int> deviceCount() {
    return absl::UnimplementedError(name() + " does not count its devices");
  }
};

} // namespace omni::hal

#endif // OMNI_RUNTIME_HAL_DRIVER_H
