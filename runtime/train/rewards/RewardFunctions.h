//===- RewardFunctions.h - Rewards as host functions ------------*- C++ -*-===//
//
// The training side's half of the host-function interface
// (runtime/hostfn/HostFunctions.h): every reward of Rewards.h becomes a host
// function of the same name that omni.host_call / HostCall can call, adapted
// from the reward's image-batch API (one NCHW float operand, one [N] f32
// result). Whoever runs a program that scores images registers them: the
// training driver, omnirun, omni-eval and the tests; the executor and the
// reference evaluator start with an empty registry. MLIR-free.
//
// Thread safety: like Rewards.h (the functions are safe to call
// concurrently; fill a registry before sharing it). They are registered as
// concurrent host functions: the executor may run them on a worker thread
// while the device goes on (docs/backend.md, "Asynchronous host calls").
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_TRAIN_REWARDS_REWARDFUNCTIONS_H
#define OMNI_RUNTIME_TRAIN_REWARDS_REWARDFUNCTIONS_H

#include "runtime/hostfn/HostFunctions.h"

namespace omni::rewards {

/// Adds every reward registered now (registeredRewards()) to `registry`
/// under its name, replacing functions of the same name.
void registerRewards(HostFunctionRegistry &registry);

/// A registry holding just the rewards (registerRewards on an empty one).
HostFunctionRegistry rewardHostFunctions();

} // namespace omni::rewards

#endif // OMNI_RUNTIME_TRAIN_REWARDS_REWARDFUNCTIONS_H
