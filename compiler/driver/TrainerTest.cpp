//===- TrainerTest.cpp - omnirun --train on the compiled toy program ------===//
//
// Trains the toy FlowGRPO program compiled as omnic does and checks what a
// user relies on: a run resumed from a checkpoint ends bit for bit where
// an uninterrupted run ends, the state really changes, checkpoints carry
// the program's parameter names, and bad resumes are refused clearly.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/CpuCodegen.h"
#include "compiler/stepbin/StepWriter.h"
#include "dialects/omni/OmniOps.h"
#include "passes/Passes.h"
#include "runtime/hal/drivers/Drivers.h"
#include "runtime/loader/Program.h"
#include "runtime/train/checkpoint/Checkpoint.h"
#include "runtime/train/driver/Trainer.h"

#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <sstream>

using namespace mlir;
namespace fs = std::filesystem;

namespace {

class TrainerTest : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    DialectRegistry registry;
    mlir::omni::registerOmniDialects(registry);
    mlir::omni::registerCpuCodegenDialects(registry);
    MLIRContext context(registry);
    context.loadAllAvailableDialects();
    OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(
        OMNI_SOURCE_DIR "/examples/flowgrpo-toy/toy.mlir",
        ParserConfig(&context));
    ASSERT_TRUE(module);
    PassManager pm(&context, ModuleOp::getOperationName());
    mlir::omni::buildOmniPipeline(pm);
    ASSERT_TRUE(succeeded(pm.run(*module)));
    auto exe = mlir::omni::compileFusionsForCpu(*module, {});
    ASSERT_TRUE(succeeded(exe));
    auto bytes = mlir::omni::writeStepBin(*module, *exe, "test");
    ASSERT_TRUE(succeeded(bytes));
    auto program = ::omni::loader::Program::loadBytes(absl::string_view(
        reinterpret_cast<const char *>(bytes->data()), bytes->size()));
    ASSERT_TRUE(program.ok()) << program.status();
    programPtr = new std::shared_ptr<const ::omni::loader::Program>(*program);
  }
  static void TearDownTestSuite() { delete programPtr; }

  void SetUp() override {
    ASSERT_TRUE(programPtr);
    auto created = ::omni::hal::builtinDrivers().createDevice("cpu", {});
    ASSERT_TRUE(created.ok());
    device = std::move(*created);
    dir = fs::temp_directory_path() /
          ("omni-trainer-" + std::to_string(::getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }

  absl::Status train(::omni::train::TrainOptions options, std::string &log) {
    auto executor = ::omni::executor::Executor::create(*programPtr, *device);
    if (!executor.ok())
      return executor.status();
    std::ostringstream os;
    absl::Status s = ::omni::train::train(**executor, options, os);
    log = os.str();
    return s;
  }

  static std::shared_ptr<const ::omni::loader::Program> *programPtr;
  std::unique_ptr<::omni::hal::Device> device;
  fs::path dir;
};

std::shared_ptr<const ::omni::loader::Program> *TrainerTest::programPtr =
    nullptr;

TEST_F(TrainerTest, ResumedRunEqualsUninterruptedRunBitForBit) {
  std::string log;
  ::omni::train::TrainOptions straight;
  straight.steps = 6;
  straight.seed = 7;
  straight.checkpointDir = (dir / "straight").string();
  straight.metricsPath = (dir / "metrics.jsonl").string();
  ASSERT_TRUE(train(straight, log).ok()) << log;
  EXPECT_NE(log.find("iteration 5  loss "), std::string::npos) << log;
  EXPECT_NE(log.find("reward_mean"), std::string::npos) << log;

  ::omni::train::TrainOptions first = straight;
  first.steps = 3;
  first.checkpointDir = (dir / "resumed").string();
  first.metricsPath.clear();
  ASSERT_TRUE(train(first, log).ok()) << log;
  ::omni::train::TrainOptions second = first;
  second.steps = 6;
  second.resume = true;
  ASSERT_TRUE(train(second, log).ok()) << log;
  EXPECT_NE(log.find("resumed from"), std::string::npos) << log;
  EXPECT_EQ(log.find("iteration 2 "), std::string::npos) << log;

  auto a = ::omni::checkpoint::loadLatestCheckpoint(straight.checkpointDir);
  auto b = ::omni::checkpoint::loadLatestCheckpoint(second.checkpointDir);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->step, 6);
  EXPECT_EQ(b->step, 6);
  ASSERT_EQ(a->tensors.size(), b->tensors.size());
  ASSERT_EQ(a->tensors.size(), 13u);
  bool sawWeight = false;
  for (size_t i = 0; i < a->tensors.size(); ++i) {
    EXPECT_EQ(a->tensors[i].name, b->tensors[i].name);
    sawWeight |= a->tensors[i].name == "mlp.0.weight";
    const auto &x = a->tensors[i].tensor, &y = b->tensors[i].tensor;
    ASSERT_EQ(x.shape(), y.shape());
    for (size_t j = 0; j < x.floats().size(); ++j)
      ASSERT_EQ(x.floats()[j], y.floats()[j]) << a->tensors[i].name << " " << j;
    for (size_t j = 0; j < x.ints().size(); ++j)
      ASSERT_EQ(x.ints()[j], y.ints()[j]) << a->tensors[i].name;
  }
  EXPECT_TRUE(sawWeight) << "checkpoint tensors carry the program's names";

  // The metrics file has one line per iteration.
  std::ifstream metrics(straight.metricsPath);
  int lines = 0;
  for (std::string line; std::getline(metrics, line);)
    lines += line.rfind("{\"iteration\": ", 0) == 0;
  EXPECT_EQ(lines, 6);
}

TEST_F(TrainerTest, TrainingChangesTheParametersAndCountsSteps) {
  std::string log;
  ::omni::train::TrainOptions options;
  options.steps = 2;
  options.seed = 3;
  options.checkpointDir = (dir / "c").string();
  ASSERT_TRUE(train(options, log).ok()) << log;
  auto ckpt = ::omni::checkpoint::loadLatestCheckpoint(options.checkpointDir);
  ASSERT_TRUE(ckpt.ok());
  for (const auto &t : ckpt->tensors) {
    if (t.name == "adamw.step") {
      EXPECT_EQ(t.tensor.ints()[0], 2);
    }
  }
  // AdamW moved the first layer's weights: the moments are non-zero.
  bool moved = false;
  for (const auto &t : ckpt->tensors)
    if (t.name == "adamw.m.mlp.0.weight")
      for (double v : t.tensor.floats())
        moved |= v != 0.0;
  EXPECT_TRUE(moved);
}

TEST_F(TrainerTest, ResumingWithAnotherSeedIsRefused) {
  std::string log;
  ::omni::train::TrainOptions options;
  options.steps = 1;
  options.seed = 3;
  options.checkpointDir = (dir / "c").string();
  ASSERT_TRUE(train(options, log).ok()) << log;
  options.seed = 4;
  options.steps = 2;
  options.resume = true;
  absl::Status s = train(options, log);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(std::string(s.message()).find("trained with seed 3 but --seed is 4"),
            std::string::npos)
      << s;
}

TEST_F(TrainerTest, MissingStepFunctionIsReported) {
  std::string log;
  ::omni::train::TrainOptions options;
  options.stepFunction = "no_such_step";
  absl::Status s = train(options, log);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(std::string(s.message()).find("no function @no_such_step"),
            std::string::npos)
      << s;
}

} // namespace
