//===- HostFunctions.cpp - Functions omni.host_call can name ----*- C++ -*-===//

#include "runtime/train/hostfn/HostFunctions.h"

#include "runtime/train/rewards/Rewards.h"

#include "absl/strings/str_cat.h"

namespace omni {
namespace {

/// Adapts a reward to the host-function calling convention.
HostFunction rewardFunction(std::string name) {
  return [name](absl::Span<const HostTensor> args)
             -> absl::StatusOr<std::vector<HostTensor>> {
    if (args.size() != 1)
      return absl::InvalidArgumentError(
          absl::StrCat("reward '", name, "' takes 1 image batch, found ",
                       args.size(), " operands"));
    const HostTensor &images = args[0];
    if (!images.isFloat())
      return absl::InvalidArgumentError(
          absl::StrCat("reward '", name, "' takes float images, found ",
                       images.typeString()));
    std::vector<float> pixels(images.floats().begin(), images.floats().end());
    rewards::ImageBatch batch;
    batch.data = pixels.data();
    batch.shape = images.shape();
    absl::StatusOr<std::vector<float>> values =
        rewards::computeReward(name, batch);
    if (!values.ok())
      return values.status();
    HostTensor result(DType::F32, {static_cast<int64_t>(values->size())});
    for (size_t i = 0; i < values->size(); ++i)
      result.floats()[i] = (*values)[i];
    return std::vector<HostTensor>{std::move(result)};
  };
}

} // namespace

HostFunctionRegistry HostFunctionRegistry::withRewards() {
  HostFunctionRegistry registry;
  for (const std::string &name : rewards::registeredRewards())
    registry.add(name, rewardFunction(name));
  return registry;
}

void HostFunctionRegistry::add(std::string name, HostFunction fn) {
  functions_[std::move(name)] = std::move(fn);
}

const HostFunction *
HostFunctionRegistry::lookup(const std::string &name) const {
  auto it = functions_.find(name);
  return it == functions_.end() ? nullptr : &it->second;
}

std::vector<std::string> HostFunctionRegistry::names() const {
  std::vector<std::string> out;
  for (const auto &entry : functions_)
    out.push_back(entry.first);
  return out;
}

} // namespace omni
