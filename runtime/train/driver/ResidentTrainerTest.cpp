//===- ResidentTrainerTest.cpp - the trainer on hand-built step.bins ------===//
//
// The training driver against a step.bin in the resident-state form,
// built with StepBuilder (no compiler): the state is slot `transformer.w`
// (f32[4]); @init_state fills it with 1; @train_step(seed, iteration,
// prompt_embeds [1, 1, 4]) adds the iteration's prompt to it on the device
// and returns w[0] as the metric `loss`. So after N iterations w is 1 plus
// the sum of the first N prompts, every checkpoint is exactly that, and
// every iteration moves exactly seed, iteration and the prompt (32 bytes)
// to the device and the metric (4 bytes) back: none of the state.
// compiler/driver/TrainerTest.cpp covers compiled programs.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/driver/Trainer.h"
#include "runtime/train/driver/TrainerSteps.h"

#include "runtime/hal/drivers/Drivers.h"
#include "runtime/loader/testing/StepBuilder.h"
#include "runtime/train/checkpoint/Checkpoint.h"
#include "runtime/train/prompts/Prompts.h"

#include "gtest/gtest.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace omni::train {
namespace {

namespace fs = std::filesystem;
namespace sd = step;
using omni::testing::StepBuilder;

/// With `failFromIteration2`, the step also stores w[0] into row
/// `iteration` of a 2-row transient after updating w: iterations 0 and 1
/// succeed, iteration 2 fails (out of range) with w already updated.
std::shared_ptr<const loader::Program>
residentProgram(bool failFromIteration2 = false) {
  StepBuilder b;
  StepBuilder::ExecutableSpec e;
  e.name = "test_kernels";
  e.data = omni::testing::readBinaryFile(OMNI_TEST_KERNELS_SO);
  e.kernels = {"omni_test_add_f32"};
  uint32_t exe = b.executable(std::move(e));
  uint32_t w = b.stateTensor("transformer.w", sd::DType::F32, {4});
  uint32_t seedIn = b.argument(sd::DType::I64, {}, 0, "seed");
  b.function("init_state", {seedIn}, {},
             {b.fill(w, omni::testing::bytesOf<float>({1.0f}))});
  uint32_t seed = b.argument(sd::DType::I64, {}, 0, "seed");
  uint32_t iteration = b.argument(sd::DType::I64, {}, 1, "iteration");
  uint32_t embeds = b.argument(sd::DType::F32, {1, 1, 4}, 2, "prompt_embeds");
  // The prompt as a flat [4] view of the same argument.
  uint32_t flat = b.tensor({"prompt_flat",
                            sd::DType::F32,
                            {4},
                            sd::Storage::Argument,
                            2,
                            sd::Role::Input});
  uint32_t loss = b.arena(sd::DType::F32, {}, "loss");
  StepBuilder::CopySpec first;
  first.source = w;
  first.dest = loss;
  first.bytes = 4;
  std::vector<omni::testing::CommandRef> commands = {
      b.dispatch(exe, 0, 4, {w, flat}, {w}), b.copy(first)};
  uint32_t numScalars = 0;
  if (failFromIteration2) {
    uint32_t row = b.scalar("row");
    uint32_t rows = b.arena(sd::DType::F32, {2}, "rows");
    StepBuilder::CopySpec store;
    store.source = w;
    store.dest = rows;
    store.bytes = 4;
    store.destScalar = static_cast<int32_t>(row);
    store.destStride = 4;
    commands.push_back(
        b.scalarOp(sd::ScalarOpKind::FromTensor, row, iteration));
    commands.push_back(b.copy(store));
    numScalars = 1;
  }
  b.function("train_step", {seed, iteration, embeds}, {loss}, commands,
             numScalars);
  std::string bytes = b.finish();
  auto program = loader::Program::loadBytes(bytes);
  EXPECT_TRUE(program.ok()) << program.status();
  return program.ok() ? *program : nullptr;
}

/// w after `n` iterations: 1 + the first n built-in prompts, summed in
/// iteration order in float32 as the kernel does.
std::vector<float> expectedW(int64_t n) {
  PromptRequest request;
  request.function = "train_step";
  request.perIteration = 1;
  request.embeds = true;
  request.tokens = 1;
  request.dim = 4;
  PromptSet prompts = PromptSet::synthetic(request);
  std::vector<float> w(4, 1.0f);
  for (int64_t it = 0; it < n; ++it) {
    HostTensor p = prompts.embeds(it);
    for (int i = 0; i < 4; ++i)
      w[i] = w[i] + static_cast<float>(p.floats()[i]);
  }
  return w;
}

class ResidentTrainerTest : public ::testing::Test {
protected:
  void SetUp() override {
    auto created = hal::builtinDrivers().createDevice("cpu", {});
    ASSERT_TRUE(created.ok());
    device = std::move(*created);
    program = residentProgram();
    ASSERT_TRUE(program);
    dir = fs::temp_directory_path() /
          ("omni-resident-" + std::to_string(::getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }

  absl::Status run(const TrainOptions &options, std::string &log) {
    std::ostringstream os;
    absl::Status s = train(program, *device, options, os);
    log = os.str();
    return s;
  }

  /// The checkpointed w of `out`.
  std::vector<float> savedW(const std::string &out) {
    auto ckpt = checkpoint::loadLatestCheckpointTyped(out);
    EXPECT_TRUE(ckpt.ok()) << ckpt.status();
    if (!ckpt.ok() || ckpt->tensors.size() != 1)
      return {};
    EXPECT_EQ(ckpt->tensors[0].name, "transformer.w");
    auto w = ckpt->tensors[0].tensor.span<float>();
    return std::vector<float>(w.begin(), w.end());
  }

  std::unique_ptr<hal::Device> device;
  std::shared_ptr<const loader::Program> program;
  fs::path dir;
};

TEST_F(ResidentTrainerTest, TheStateStaysInItsSlotAcrossIterations) {
  TrainOptions options;
  options.steps = 3;
  options.outDir = (dir / "out").string();
  std::string log;
  ASSERT_TRUE(run(options, log).ok()) << log;
  EXPECT_EQ(savedW(options.outDir), expectedW(3));
  // The metric is w[0] after each iteration.
  std::ifstream metrics(dir / "out" / "metrics.jsonl");
  std::string line;
  for (int64_t it = 0; it < 3; ++it) {
    ASSERT_TRUE(std::getline(metrics, line));
    char want[64];
    std::snprintf(want, sizeof(want), "\"loss\": %.9g", expectedW(it + 1)[0]);
    EXPECT_NE(line.find(want), std::string::npos) << line << " vs " << want;
  }
}

TEST_F(ResidentTrainerTest, ResumeWritesTheSlotsAndIsBitExact) {
  TrainOptions straight;
  straight.steps = 5;
  straight.outDir = (dir / "straight").string();
  std::string log;
  ASSERT_TRUE(run(straight, log).ok()) << log;
  TrainOptions first = straight;
  first.steps = 2;
  first.outDir = (dir / "resumed").string();
  ASSERT_TRUE(run(first, log).ok()) << log;
  TrainOptions second = first;
  second.steps = 5;
  second.resume = true;
  ASSERT_TRUE(run(second, log).ok()) << log;
  EXPECT_NE(log.find("resumed from"), std::string::npos) << log;
  EXPECT_EQ(savedW(second.outDir), savedW(straight.outDir));
  EXPECT_EQ(savedW(second.outDir), expectedW(5));
}

TEST_F(ResidentTrainerTest, InitWritesTheSlotAndTypesAreChecked) {
  std::string path = (dir / "init.safetensors").string();
  ASSERT_TRUE(
      checkpoint::writeSafetensorsTyped(
          path,
          {{"w", TypedTensor::of<float>(DType::F32, {4},
                                        std::vector<float>{10, 20, 30, 40})}})
          .ok());
  TrainOptions options;
  options.steps = 0;
  options.outDir = (dir / "zero").string();
  options.inits.push_back({"transformer", path});
  std::string log;
  ASSERT_TRUE(run(options, log).ok()) << log;
  EXPECT_EQ(savedW(options.outDir), (std::vector<float>{10, 20, 30, 40}));

  // A checkpoint whose tensor has another type than the slot is refused.
  std::string bad = (dir / "bad").string();
  ASSERT_TRUE(checkpoint::saveCheckpointTyped(
                  bad, 1, {{"transformer.w", TypedTensor(DType::F32, {2, 2})}},
                  {{"seed", "0"}})
                  .ok());
  TrainOptions resume;
  resume.steps = 2;
  resume.resume = true;
  resume.resumeDir = bad;
  EXPECT_EQ(run(resume, log).message(),
            bad + ": state 'transformer.w' is tensor<2x2xf32> but the step "
                  "takes tensor<4xf32>");
}

TEST_F(ResidentTrainerTest, StatsCountNoStateBytes) {
  TrainOptions options;
  options.steps = 2;
  options.stats = true;
  options.metricsPath = (dir / "m.jsonl").string();
  std::string log;
  ASSERT_TRUE(run(options, log).ok()) << log;
  // seed + iteration + one prompt to the device, the metric back.
  EXPECT_NE(log.find("iter 1/2  loss "), std::string::npos) << log;
  EXPECT_NE(log.find("to device 32 B, from device 4 B, device memory "),
            std::string::npos)
      << log;
  std::ifstream metrics(options.metricsPath);
  std::string line;
  int lines = 0;
  while (std::getline(metrics, line)) {
    ++lines;
    EXPECT_NE(line.find("\"host_to_device_bytes\": 32, "
                        "\"device_to_host_bytes\": 4, \"device_bytes\": "),
              std::string::npos)
        << line;
  }
  EXPECT_EQ(lines, 2);
}

TEST_F(ResidentTrainerTest, AFailedIterationNamesTheCheckpointToResumeFrom) {
  program = residentProgram(/*failFromIteration2=*/true);
  ASSERT_TRUE(program);
  TrainOptions options;
  options.steps = 4;
  options.saveEvery = 1;
  options.outDir = (dir / "out").string();
  std::string log;
  absl::Status s = run(options, log);
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange);
  std::string message(s.message());
  EXPECT_EQ(message.rfind("iteration 2: step.bin: functions[1].commands[3] "
                          "(Copy): dest range [8, 12) is ",
                          0),
            0u)
      << message;
  std::string tail = " (the state during iteration 2 is not saved: the "
                     "failed step may have updated part of it; resume from "
                     "iteration 2 in " +
                     checkpoint::checkpointPath(options.outDir, 2) + ")";
  ASSERT_GE(message.size(), tail.size());
  EXPECT_EQ(message.substr(message.size() - tail.size()), tail);
  // The checkpoint is iteration 2's, untouched by the failed update.
  EXPECT_EQ(savedW(options.outDir), expectedW(2));

  options.outDir.clear();
  EXPECT_NE(std::string(run(options, log).message())
                .find("(no --out: the training state is not saved)"),
            std::string::npos);
}

TEST(CapturedRewardsTest, ChunkCallsConcatenateInCallOrder) {
  // rollout_chunks makes one reward call per chunk, in order: the grid's
  // captions get the batch's rewards as the calls' values concatenated.
  detail::CapturedRewards captured;
  captured.record(HostTensor::fromDoubles(DType::F32, {2}, {0.5, 0.25}));
  captured.record(HostTensor::fromDoubles(DType::F32, {2}, {-1, 2}));
  EXPECT_EQ(captured.take(), (std::vector<double>{0.5, 0.25, -1, 2}));
  // take() starts over.
  EXPECT_TRUE(captured.take().empty());
  // A result that is not [N] floats makes the iteration's rewards unknown.
  captured.record(HostTensor::fromDoubles(DType::F32, {2}, {1, 2}));
  captured.record(HostTensor::fromDoubles(DType::F32, {1, 2}, {3, 4}));
  EXPECT_TRUE(captured.take().empty());
  captured.record(HostTensor::fromDoubles(DType::F32, {1}, {7}));
  EXPECT_EQ(captured.take(), (std::vector<double>{7}));
}

} // namespace
} // namespace omni::train
