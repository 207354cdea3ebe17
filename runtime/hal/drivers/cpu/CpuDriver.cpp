//===- CpuDriver.cpp - The cpu driver ---------------------------*- C++ -*-===//

#include "runtime/hal/drivers/cpu/CpuDriver.h"

#include "runtime/hal/drivers/cpu/CpuDevice.h"

#include "absl/strings/str_cat.h"

namespace omni::hal::cpu {

const std::string &CpuDriver::name() const {
  static const std::string *name = new std::string("cpu");
  return *name;
}

absl::StatusOr<std::unique_ptr<Device>>
CpuDriver::createDevice(const DeviceOptions &options) {
  if (options.threads < 0 || options.threads > kMaxThreads)
    return absl::InvalidArgumentError(
        absl::StrCat("the cpu device takes 0 (one per core) to ", kMaxThreads,
                     " threads, found ", options.threads));
  if (options.ordinal != 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "the cpu driver has one device (ordinal 0), found ordinal ",
        options.ordinal));
  auto device = std::make_unique<CpuDevice>(options);
  if (!device->pool().startError().empty())
    return absl::ResourceExhaustedError(
        absl::StrCat("the cpu device could not start its threads: ",
                     device->pool().startError(), "; ask for fewer threads"));
  return std::unique_ptr<Device>(std::move(device));
}

} // namespace omni::hal::cpu
