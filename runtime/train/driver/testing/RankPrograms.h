//===- RankPrograms.h - Hand-built training programs for --ranks -*- C++
//-*-===//
//
// Test-only step.bin programs (StepBuilder, no compiler) in the resident
// state form of Trainer.h, for the multi-rank driver (Ranks.h) and omnirun
// --ranks: state slot `transformer.w` (f32[4]) filled with 1 by
// @init_state; @train_step(seed, iteration, prompt_embeds [1, 1, 4]) adds
// the iteration's prompt to w and returns the metric `loss`.
// - oneRankProgram: no mesh; loss = w[0].
// - meshProgram(n): mesh 'mesh' (fsdp=n); w is replicated, and loss =
//   (all_reduce sum of w over fsdp)[0] = n * w[0], so every rank must take
//   part in every iteration.
// Both leave w at 1 plus the sum of the first N prompts after N iterations
// and name their state alike, so their checkpoints are interchangeable.
// shardedProgramBytes(k) is the same training with w of 3 elements (the
// first 3 of each prompt), k = 1: unsharded, no mesh; k = 2: mesh 'mesh'
// (fsdp=2) with w sharded on dim 0 (global [3], 2 rows per rank, the last
// row of rank 1 padding): the gradient (the prompt's first 3 elements,
// zero-extended to 4) is reduce_scattered (mean over the identical ranks,
// exact), each rank updates its block, and w is all_gathered for the
// metric loss = w[0]. Padding starts at 1 (init fills the block) and must
// never reach a checkpoint.
// Header-only; links OmniStepTesting's StepBuilder.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_TRAIN_DRIVER_TESTING_RANKPROGRAMS_H
#define OMNI_RUNTIME_TRAIN_DRIVER_TESTING_RANKPROGRAMS_H

#include "runtime/loader/testing/StepBuilder.h"

#include <string>

namespace omni::train::testing {

/// The bytes of the program; `meshSize` 0: oneRankProgram, else
/// meshProgram(meshSize). `kernelsSo` is OMNI_TEST_KERNELS_SO.
inline std::string rankProgramBytes(const std::string &kernelsSo,
                                    int64_t meshSize) {
  namespace sd = omni::step;
  using omni::testing::StepBuilder;
  StepBuilder b;
  if (meshSize > 0)
    b.mesh({"mesh", {"fsdp"}, {meshSize}});
  StepBuilder::ExecutableSpec e;
  e.name = "test_kernels";
  e.data = omni::testing::readBinaryFile(kernelsSo);
  e.kernels = {"omni_test_add_f32"};
  uint32_t exe = b.executable(std::move(e));
  uint32_t w = b.stateTensor("transformer.w", sd::DType::F32, {4});
  uint32_t seedIn = b.argument(sd::DType::I64, {}, 0, "seed");
  b.function("init_state", {seedIn}, {},
             {b.fill(w, omni::testing::bytesOf<float>({1.0f}))});
  uint32_t seed = b.argument(sd::DType::I64, {}, 0, "seed");
  uint32_t iteration = b.argument(sd::DType::I64, {}, 1, "iteration");
  uint32_t embeds = b.argument(sd::DType::F32, {1, 1, 4}, 2, "prompt_embeds");
  uint32_t flat = b.tensor({"prompt_flat",
                            sd::DType::F32,
                            {4},
                            sd::Storage::Argument,
                            2,
                            sd::Role::Input});
  uint32_t loss = b.arena(sd::DType::F32, {}, "loss");
  std::vector<omni::testing::CommandRef> commands = {
      b.dispatch(exe, 0, 4, {w, flat}, {w})};
  uint32_t source = w;
  if (meshSize > 0) {
    uint32_t sum = b.arena(sd::DType::F32, {4}, "sum");
    StepBuilder::CollectiveSpec c;
    c.kind = sd::CollectiveKind::AllReduce;
    c.op = sd::ReduceOp::Sum;
    c.axes = {0};
    c.operand = w;
    c.result = sum;
    commands.push_back(b.collective(c));
    source = sum;
  }
  StepBuilder::CopySpec first;
  first.source = source;
  first.dest = loss;
  first.bytes = 4;
  commands.push_back(b.copy(first));
  (void)iteration;
  b.function("train_step", {seed, iteration, embeds}, {loss}, commands);
  return b.finish();
}

inline std::string shardedProgramBytes(const std::string &kernelsSo,
                                       int64_t ranks) {
  namespace sd = omni::step;
  using omni::testing::StepBuilder;
  StepBuilder b;
  const bool sharded = ranks > 1;
  const int64_t rows = sharded ? (3 + ranks - 1) / ranks : 3;
  if (sharded)
    b.mesh({"mesh", {"fsdp"}, {ranks}});
  StepBuilder::ExecutableSpec e;
  e.name = "test_kernels";
  e.data = omni::testing::readBinaryFile(kernelsSo);
  e.kernels = {"omni_test_add_f32"};
  uint32_t exe = b.executable(std::move(e));
  uint32_t w = b.stateTensor("transformer.w", sd::DType::F32, {rows});
  if (sharded) {
    StepBuilder::ShardingSpec sharding;
    sharding.axes = {0};
    sharding.dim = 0;
    sharding.globalShape = {3};
    b.state.back().sharding = sharding;
  }
  uint32_t seedIn = b.argument(sd::DType::I64, {}, 0, "seed");
  b.function("init_state", {seedIn}, {},
             {b.fill(w, omni::testing::bytesOf<float>({1.0f}))});
  uint32_t seed = b.argument(sd::DType::I64, {}, 0, "seed");
  uint32_t iteration = b.argument(sd::DType::I64, {}, 1, "iteration");
  uint32_t embeds = b.argument(sd::DType::F32, {1, 1, 4}, 2, "prompt_embeds");
  uint32_t loss = b.arena(sd::DType::F32, {}, "loss");
  std::vector<omni::testing::CommandRef> commands;
  uint32_t full = w;
  if (!sharded) {
    uint32_t grad = b.arena(sd::DType::F32, {3}, "grad");
    StepBuilder::CopySpec first3;
    first3.source = embeds;
    first3.dest = grad;
    first3.bytes = 12;
    commands.push_back(b.copy(first3));
    commands.push_back(b.dispatch(exe, 0, 3, {w, grad}, {w}));
  } else {
    // The gradient: the prompt's first 3 elements and zero padding.
    uint32_t grad = b.arena(sd::DType::F32, {rows * ranks}, "grad");
    uint32_t mine = b.arena(sd::DType::F32, {rows}, "grad_block");
    full = b.arena(sd::DType::F32, {rows * ranks}, "w_full");
    commands.push_back(b.fill(grad, omni::testing::bytesOf<float>({0.0f})));
    StepBuilder::CopySpec first3;
    first3.source = embeds;
    first3.dest = grad;
    first3.bytes = 12;
    commands.push_back(b.copy(first3));
    StepBuilder::CollectiveSpec scatter;
    scatter.kind = sd::CollectiveKind::ReduceScatter;
    scatter.op = sd::ReduceOp::Mean;
    scatter.axes = {0};
    scatter.operand = grad;
    scatter.result = mine;
    commands.push_back(b.collective(scatter));
    commands.push_back(b.dispatch(exe, 0, rows, {w, mine}, {w}));
    StepBuilder::CollectiveSpec gather;
    gather.kind = sd::CollectiveKind::AllGather;
    gather.axes = {0};
    gather.operand = w;
    gather.result = full;
    commands.push_back(b.collective(gather));
  }
  StepBuilder::CopySpec first;
  first.source = full;
  first.dest = loss;
  first.bytes = 4;
  commands.push_back(b.copy(first));
  b.function("train_step", {seed, iteration, embeds}, {loss}, commands);
  return b.finish();
}

} // namespace omni::train::testing

#endif // OMNI_RUNTIME_TRAIN_DRIVER_TESTING_RANKPROGRAMS_H
