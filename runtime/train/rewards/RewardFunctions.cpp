//===- RewardFunctions.cpp - Rewards as host functions ----------*- C++ -*-===//

#include "runtime/train/rewards/RewardFunctions.h"

#include "runtime/train/rewards/Rewards.h"

#include "absl/strings/str_cat.h"

namespace omni::rewards {
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
    ImageBatch batch;
    batch.data = pixels.data();
    batch.shape = images.shape();
    absl::StatusOr<std::vector<float>> values = computeReward(name, batch);
    if (!values.ok())
      return values.status();
    HostTensor result(DType::F32, {static_cast<int64_t>(values->size())});
    for (size_t i = 0; i < values->size(); ++i)
      result.floats()[i] = (*values)[i];
    return std::vector<HostTensor>{std::move(result)};
  };
}

} // namespace

void registerRewards(HostFunctionRegistry &registry) {
  // computeReward is thread-safe (Rewards.h): each call has its own
  // encoder and buffers, the registry is locked.
  for (const std::string &name : registeredRewards())
    registry.add(name, rewardFunction(name), /*concurrent=*/true);
}

HostFunctionRegistry rewardHostFunctions() {
  HostFunctionRegistry registry;
  registerRewards(registry);
  return registry;
}

} // namespace omni::rewards
