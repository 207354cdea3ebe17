//===- Drivers.h - The built-in drivers -------------------------*- C++ -*-===//
//
// Registration of the drivers compiled into this runtime. Drivers.cpp is the
// only file that names a concrete driver class.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_HAL_DRIVERS_DRIVERS_H
#define OMNI_RUNTIME_HAL_DRIVERS_DRIVERS_H

#include "runtime/hal/DriverRegistry.h"

namespace omni::hal {

/// Adds every built-in driver ("cpu") to `registry`.
void registerBuiltinDrivers(DriverRegistry &registry);

/// A process-wide registry holding the built-in drivers. Thread-safe.
DriverRegistry &builtinDrivers();

} // namespace omni::hal

#endif // OMNI_RUNTIME_HAL_DRIVERS_DRIVERS_H
