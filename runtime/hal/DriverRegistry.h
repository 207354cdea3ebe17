//===- DriverRegistry.h - Drivers by name -----------------------*- C++ -*-===//
//
// Maps driver names to Drivers. The built-in drivers are added by
// hal/drivers/Drivers.cpp (registerBuiltinDrivers), the only file that names
// a concrete driver; everything else creates devices through a registry.
//
// Ownership: owns its drivers. Thread safety: all methods may be called
// concurrently.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_HAL_DRIVERREGISTRY_H
#define OMNI_RUNTIME_HAL_DRIVERREGISTRY_H

#include "runtime/hal/Driver.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace omni::hal {

class DriverRegistry {
public:
  /// Adds `driver`; fails with AlreadyExists for a name already present.
  absl::Status add(std::unique_ptr<Driver> driver);

  /// The registered names, sorted.
  std::vector<std::string> names() const;

  /// The driver `name`, or nullptr.
  Driver *find(absl::string_view name) const;

  /// find(name)->createDevice(options); NotFound (listing the registered
  /// drivers) for an unknown name.
  absl::StatusOr<std::unique_ptr<Device>>
  createDevice(absl::string_view name, const DeviceOptions &options) const;

private:
  mutable std::mutex mutex_;
  std::map<std::string, std::unique_ptr<Driver>, std::less<>> drivers_;
};

} // namespace omni::hal

#endif // OMNI_RUNTIME_HAL_DRIVERREGISTRY_H
