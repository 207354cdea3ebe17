//===- Drivers.cpp - The built-in drivers -----------------------*- C++ -*-===//

#include "runtime/hal/drivers/Drivers.h"

#include "runtime/hal/drivers/cpu/CpuDriver.h"

namespace omni::hal {

void registerBuiltinDrivers(DriverRegistry &registry) {
  // A registry that already has a "cpu" driver keeps it.
  (void)registry.add(std::make_unique<cpu::CpuDriver>());
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
