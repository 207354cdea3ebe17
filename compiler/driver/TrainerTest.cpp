//===- TrainerTest.cpp - omnirun's training driver on compiled programs ---===//
//
// Compiles programs as omnic does and trains them, checking what a user
// relies on:
// - the toy FlowGRPO program (examples/flowgrpo-toy/toy.mlir): a resumed
//   run ends bit for bit where an uninterrupted run ends, the state really
//   changes, checkpoints carry the program's names, bad resumes are refused;
// - test/train/data-program.mlir, whose metrics expose what the driver fed
//   it: the prompts chosen per iteration (file and built-in set), --init
//   overrides (with the KL reference copy), --reward rebinding, the PNG
//   sample grids, resume with data inputs, interrupted saves, and every
//   error message of the convention, --init and the checkpoint metadata.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/driver/Trainer.h"
#include "compiler/codegen/Codegen.h"
#include "compiler/stepbin/StepWriter.h"
#include "dialects/omni/OmniOps.h"
#include "passes/Passes.h"
#include "runtime/executor/Executor.h"
#include "runtime/flowgrpo/Philox.h"
#include "runtime/hal/drivers/Drivers.h"
#include "runtime/loader/Program.h"
#include "runtime/omnirun/OmniRun.h"
#include "runtime/train/checkpoint/Checkpoint.h"
#include "runtime/train/image/Png.h"
#include "runtime/train/prompts/Prompts.h"
#include "runtime/train/rewards/RewardFunctions.h"
#include "runtime/train/rewards/Rewards.h"

#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <gtest/gtest.h>
#include <map>
#include <sstream>

using namespace mlir;
namespace fs = std::filesystem;
using ::omni::DType;
using ::omni::HostTensor;
using ::omni::TypedTensor;
using ::omni::checkpoint::NamedTensor;
using ::omni::train::TrainOptions;

namespace {

using ProgramPtr = std::shared_ptr<const ::omni::loader::Program>;

/// Compiles `path` with omnic's pipeline; the step.bin bytes go to `bytes`.
ProgramPtr compile(const std::string &path, std::string *bytesOut = nullptr) {
  DialectRegistry registry;
  mlir::omni::registerOmniDialects(registry);
  mlir::omni::registerCodegenDialects(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  OwningOpRef<ModuleOp> module =
      parseSourceFile<ModuleOp>(path, ParserConfig(&context));
  if (!module)
    return nullptr;
  PassManager pm(&context, ModuleOp::getOperationName());
  mlir::omni::buildOmniPipeline(pm);
  if (failed(pm.run(*module)))
    return nullptr;
  auto exe = mlir::omni::compileFusions(*module);
  if (failed(exe))
    return nullptr;
  auto bytes = mlir::omni::writeStepBin(*module, *exe, "test");
  if (failed(bytes))
    return nullptr;
  absl::string_view view(reinterpret_cast<const char *>(bytes->data()),
                         bytes->size());
  if (bytesOut)
    *bytesOut = std::string(view);
  auto program = ::omni::loader::Program::loadBytes(view);
  return program.ok() ? *program : nullptr;
}

/// One metrics.jsonl line: every "key": number pair (NaN/Infinity too).
std::map<std::string, double> parseJsonLine(const std::string &line) {
  std::map<std::string, double> out;
  size_t pos = 0;
  while ((pos = line.find('"', pos)) != std::string::npos) {
    size_t end = line.find('"', pos + 1);
    std::string key = line.substr(pos + 1, end - pos - 1);
    size_t value = line.find_first_not_of(": ", end + 1);
    out[key] = std::strtod(line.c_str() + value, nullptr);
    pos = line.find_first_of(",}", value);
  }
  return out;
}

std::vector<std::map<std::string, double>> readMetrics(const fs::path &path) {
  std::vector<std::map<std::string, double>> lines;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);)
    lines.push_back(parseJsonLine(line));
  return lines;
}

std::string readText(const fs::path &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// Compares two checkpoints' tensors bit for bit.
void expectSameCheckpoint(const std::string &a, const std::string &b,
                          size_t tensors) {
  auto x = ::omni::checkpoint::loadLatestCheckpoint(a);
  auto y = ::omni::checkpoint::loadLatestCheckpoint(b);
  ASSERT_TRUE(x.ok()) << x.status();
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_EQ(x->step, y->step);
  ASSERT_EQ(x->tensors.size(), tensors);
  ASSERT_EQ(y->tensors.size(), tensors);
  for (size_t i = 0; i < tensors; ++i) {
    EXPECT_EQ(x->tensors[i].name, y->tensors[i].name);
    const HostTensor &p = x->tensors[i].tensor, &q = y->tensors[i].tensor;
    ASSERT_EQ(p.shape(), q.shape());
    for (size_t j = 0; j < p.floats().size(); ++j)
      ASSERT_EQ(p.floats()[j], q.floats()[j]) << x->tensors[i].name << " " << j;
    for (size_t j = 0; j < p.ints().size(); ++j)
      ASSERT_EQ(p.ints()[j], q.ints()[j]) << x->tensors[i].name;
  }
}

class TrainerTestBase : public ::testing::Test {
protected:
  void SetUp() override {
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

  absl::Status train(const ProgramPtr &program, const TrainOptions &options,
                     std::string &log) {
    std::ostringstream os;
    absl::Status s = ::omni::train::train(program, *device, options, os);
    log = os.str();
    return s;
  }

  /// Writes a safetensors file in the test folder.
  std::string writeTensors(const std::string &name,
                           const std::vector<NamedTensor> &tensors) {
    std::string path = (dir / name).string();
    EXPECT_TRUE(::omni::checkpoint::writeSafetensors(path, tensors).ok());
    return path;
  }

  std::unique_ptr<::omni::hal::Device> device;
  fs::path dir;
};

//===----------------------------------------------------------------------===//
// The toy FlowGRPO program
//===----------------------------------------------------------------------===//

class TrainerTest : public TrainerTestBase {
protected:
  static void SetUpTestSuite() {
    program = new ProgramPtr(
        compile(OMNI_SOURCE_DIR "/examples/flowgrpo-toy/toy.mlir"));
  }
  static void TearDownTestSuite() { delete program; }
  void SetUp() override {
    ASSERT_TRUE(program && *program);
    TrainerTestBase::SetUp();
  }
  absl::Status train(const TrainOptions &options, std::string &log) {
    return TrainerTestBase::train(*program, options, log);
  }
  static ProgramPtr *program;
};
ProgramPtr *TrainerTest::program = nullptr;

TEST_F(TrainerTest, ResumedRunEqualsUninterruptedRunBitForBit) {
  std::string log;
  TrainOptions straight;
  straight.steps = 6;
  straight.seed = 7;
  straight.outDir = (dir / "straight").string();
  straight.metricsPath = (dir / "metrics.jsonl").string();
  ASSERT_TRUE(train(straight, log).ok()) << log;
  EXPECT_NE(log.find("iter 6/6  reward -0.00"), std::string::npos) << log;
  EXPECT_NE(log.find("  loss "), std::string::npos) << log;
  EXPECT_NE(log.find("  grad_norm "), std::string::npos) << log;

  TrainOptions first = straight;
  first.steps = 3;
  first.outDir = (dir / "resumed").string();
  first.metricsPath.clear();
  ASSERT_TRUE(train(first, log).ok()) << log;
  TrainOptions second = first;
  second.steps = 6;
  second.resume = true;
  ASSERT_TRUE(train(second, log).ok()) << log;
  EXPECT_NE(log.find("resumed from"), std::string::npos) << log;
  EXPECT_EQ(log.find("iter 3/"), std::string::npos) << log;
  EXPECT_NE(log.find("iter 4/6"), std::string::npos) << log;

  expectSameCheckpoint(straight.outDir, second.outDir, 13);
  auto a = ::omni::checkpoint::loadLatestCheckpoint(straight.outDir);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->step, 6);
  bool sawWeight = false;
  for (const NamedTensor &t : a->tensors)
    sawWeight |= t.name == "mlp.0.weight";
  EXPECT_TRUE(sawWeight) << "checkpoint tensors carry the program's names";

  // The metrics file has one line per iteration, with the metrics and the
  // times.
  auto metrics = readMetrics(straight.metricsPath);
  ASSERT_EQ(metrics.size(), 6u);
  for (size_t i = 0; i < metrics.size(); ++i) {
    EXPECT_EQ(metrics[i]["iteration"], double(i));
    EXPECT_TRUE(metrics[i].count("loss") && metrics[i].count("reward_mean") &&
                metrics[i].count("grad_norm"));
    EXPECT_LT(metrics[i]["reward_mean"], 0.0);
    EXPECT_GT(metrics[i]["reward_time_s"], 0.0);
    EXPECT_NEAR(metrics[i]["time_s"],
                metrics[i]["reward_time_s"] + metrics[i]["compute_time_s"],
                1e-5);
  }
  // The resumed run's out folder has its own log: 3 + 3 lines.
  EXPECT_EQ(readMetrics(fs::path(second.outDir) / "metrics.jsonl").size(), 6u);
}

TEST_F(TrainerTest, TrainingChangesTheParametersAndCountsSteps) {
  std::string log;
  TrainOptions options;
  options.steps = 2;
  options.seed = 3;
  options.outDir = (dir / "c").string();
  ASSERT_TRUE(train(options, log).ok()) << log;
  auto ckpt = ::omni::checkpoint::loadLatestCheckpoint(options.outDir);
  ASSERT_TRUE(ckpt.ok());
  bool sawStep = false, moved = false;
  for (const NamedTensor &t : ckpt->tensors) {
    if (t.name == "adamw.step") {
      EXPECT_EQ(t.tensor.ints()[0], 2);
      sawStep = true;
    }
    // AdamW moved the first layer's weights: the moments are non-zero.
    if (t.name == "adamw.m.mlp.0.weight")
      for (double v : t.tensor.floats())
        moved |= v != 0.0;
  }
  EXPECT_TRUE(sawStep);
  EXPECT_TRUE(moved);
  // The checkpoint records the seed and the RNG counter base (iteration).
  EXPECT_EQ(ckpt->metadata.at("seed"), "3");
  EXPECT_EQ(ckpt->metadata.at("iteration"), "2");
}

TEST_F(TrainerTest, ResumingWithAnotherSeedIsRefused) {
  std::string log;
  TrainOptions options;
  options.steps = 1;
  options.seed = 3;
  options.outDir = (dir / "c").string();
  ASSERT_TRUE(train(options, log).ok()) << log;
  options.seed = 4;
  options.steps = 2;
  options.resume = true;
  absl::Status s = train(options, log);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), options.outDir +
                             ": the checkpoint was trained with seed 3 but "
                             "--seed is 4");
}

TEST_F(TrainerTest, MissingStepFunctionIsReported) {
  std::string log;
  TrainOptions options;
  options.stepFunction = "no_such_step";
  absl::Status s = train(options, log);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(), "step.bin: no function @no_such_step (the training "
                         "step; see omnirun --list)");
}

TEST_F(TrainerTest, ResumeNeedsAFolderAndPromptsNeedDataInputs) {
  std::string log;
  TrainOptions options;
  options.resume = true;
  absl::Status s = train(options, log);
  EXPECT_EQ(s.message(), "--resume needs a folder: --resume DIR, --out DIR "
                         "or --checkpoint-dir DIR");
  options = TrainOptions();
  options.promptsPath = "p.safetensors";
  s = train(options, log);
  EXPECT_EQ(s.message(),
            "--prompts p.safetensors: @train_step takes no prompt_embeds or "
            "pooled_prompt_embeds input, so it uses no prompts");
}

//===----------------------------------------------------------------------===//
// test/train/data-program.mlir
//===----------------------------------------------------------------------===//

class DataTrainerTest : public TrainerTestBase {
protected:
  static void SetUpTestSuite() {
    bytes = new std::string;
    program = new ProgramPtr(
        compile(OMNI_SOURCE_DIR "/test/train/data-program.mlir", bytes));
  }
  static void TearDownTestSuite() {
    delete program;
    delete bytes;
  }
  void SetUp() override {
    ASSERT_TRUE(program && *program);
    TrainerTestBase::SetUp();
  }
  absl::Status train(const TrainOptions &options, std::string &log) {
    return TrainerTestBase::train(*program, options, log);
  }
  /// Trains and returns the metrics lines (written to dir/<name>.jsonl).
  std::vector<std::map<std::string, double>>
  trainMetrics(TrainOptions options, const std::string &name) {
    options.metricsPath = (dir / (name + ".jsonl")).string();
    std::string log;
    absl::Status s = train(options, log);
    EXPECT_TRUE(s.ok()) << s << "\n" << log;
    return readMetrics(options.metricsPath);
  }

  /// Prompt k has every element k (embeds) and k + 0.5 (pooled).
  std::string countingPrompts(int64_t n, bool pooled = true) {
    std::vector<double> e, p;
    for (int64_t k = 0; k < n; ++k) {
      e.insert(e.end(), 12, double(k));
      p.insert(p.end(), 2, k + 0.5);
    }
    std::vector<NamedTensor> t = {
        {"prompt_embeds", HostTensor::fromDoubles(DType::F32, {n, 3, 4}, e)}};
    if (pooled)
      t.push_back({"pooled_prompt_embeds",
                   HostTensor::fromDoubles(DType::F32, {n, 2}, p)});
    return writeTensors("prompts" + std::to_string(n) + ".safetensors", t);
  }

  static ProgramPtr *program;
  static std::string *bytes;
};
ProgramPtr *DataTrainerTest::program = nullptr;
std::string *DataTrainerTest::bytes = nullptr;

TEST_F(DataTrainerTest, PromptsFromAFileFollowTheIteration) {
  TrainOptions options;
  options.steps = 6;
  options.promptsPath = countingPrompts(5);
  auto metrics = trainMetrics(options, "m");
  ASSERT_EQ(metrics.size(), 6u);
  for (int64_t i = 0; i < 6; ++i) {
    int64_t k0 = (2 * i) % 5, k1 = (2 * i + 1) % 5;
    EXPECT_EQ(metrics[i]["prompt_sum_0"], 12.0 * k0) << i;
    EXPECT_EQ(metrics[i]["prompt_sum_1"], 12.0 * k1) << i;
    EXPECT_EQ(metrics[i]["pooled_sum_0"], 2.0 * k0 + 1) << i;
    EXPECT_EQ(metrics[i]["pooled_sum_1"], 2.0 * k1 + 1) << i;
  }
}

TEST_F(DataTrainerTest, WithoutAFileTheBuiltInSetIsUsed) {
  TrainOptions options;
  options.steps = 9;
  std::string log;
  options.metricsPath = (dir / "m.jsonl").string();
  ASSERT_TRUE(train(options, log).ok()) << log;
  // Without --out the run says first what it does not save.
  EXPECT_EQ(log.substr(0, log.find("\niter 1/") + 1),
            "no --out: this run saves no checkpoints or samples (metrics go "
            "to " +
                options.metricsPath +
                ")\nprompts: 16 from synthetic, 2 per iteration\n");
  auto metrics = readMetrics(options.metricsPath);
  ASSERT_EQ(metrics.size(), 9u);
  using ::omni::flowgrpo::philoxNormalAt;
  using ::omni::train::kSyntheticPromptKey;
  for (int64_t i = 0; i < 9; ++i)
    for (int64_t j = 0; j < 2; ++j) {
      int64_t k = (2 * i + j) % 16;
      double e = 0, p = 0;
      for (int64_t x = 0; x < 12; ++x)
        e += philoxNormalAt(kSyntheticPromptKey, 0, k * 12 + x);
      for (int64_t x = 0; x < 2; ++x)
        p += philoxNormalAt(kSyntheticPromptKey, 1, k * 2 + x);
      std::string s = std::to_string(j);
      EXPECT_NEAR(metrics[i]["prompt_sum_" + s], e, 1e-5) << i << " " << j;
      EXPECT_NEAR(metrics[i]["pooled_sum_" + s], p, 1e-6) << i << " " << j;
    }
  // Iteration 8 wraps around to iteration 0's prompts.
  EXPECT_EQ(metrics[8]["prompt_sum_0"], metrics[0]["prompt_sum_0"]);
  EXPECT_NE(metrics[1]["prompt_sum_0"], metrics[0]["prompt_sum_0"]);
}

TEST_F(DataTrainerTest, AStepMayTakePromptEmbedsOnly) {
  TrainOptions options;
  options.steps = 3;
  options.stepFunction = "step_embeds_only";
  std::vector<double> e;
  for (int64_t k = 0; k < 4; ++k)
    e.insert(e.end(), 12, k * 0.5);
  options.promptsPath = writeTensors(
      "embeds.safetensors",
      {{"prompt_embeds", HostTensor::fromDoubles(DType::F32, {4, 3, 4}, e)}});
  auto metrics = trainMetrics(options, "m");
  ASSERT_EQ(metrics.size(), 3u);
  EXPECT_EQ(metrics[0]["prompt_sum_0"], 0.0);
  EXPECT_EQ(metrics[1]["prompt_sum_0"], 12.0); // prompt 2
  EXPECT_EQ(metrics[2]["prompt_sum_0"], 0.0);  // prompt 4 mod 4
}

TEST_F(DataTrainerTest, PromptFileErrorsNameFileTensorExpectedAndFound) {
  TrainOptions options;
  std::string path =
      writeTensors("bad.safetensors",
                   {{"prompt_embeds", HostTensor(DType::F32, {4, 3, 5})},
                    {"pooled_prompt_embeds", HostTensor(DType::F32, {4, 2})}});
  options.promptsPath = path;
  std::string log;
  absl::Status s = train(options, log);
  EXPECT_EQ(s.message(), path + ": tensor 'prompt_embeds' is "
                                "tensor<4x3x5xf32>, expected tensor<Nx3x4xf32> "
                                "(L = 3, D = 4 from @train_step's "
                                "prompt_embeds)");
  options.promptsPath = countingPrompts(3, /*pooled=*/false);
  s = train(options, log);
  EXPECT_EQ(s.message(),
            options.promptsPath +
                ": no tensor 'pooled_prompt_embeds', expected tensor<Nx2xf32> "
                "(Dp = 2 from @train_step's pooled_prompt_embeds); found "
                "tensors: prompt_embeds");
}

TEST_F(DataTrainerTest, InitOverridesParametersAndTheReferenceCopy) {
  std::vector<NamedTensor> weights = {
      {"proj.weight", HostTensor::fromDoubles(DType::F32, {12, 4},
                                              std::vector<double>(48, 0.125))},
      {"proj.bias", HostTensor(DType::F32, {12})}};
  std::string path = writeTensors("init.safetensors", weights);
  TrainOptions plain;
  plain.steps = 2;
  auto before = trainMetrics(plain, "plain");
  ASSERT_EQ(before.size(), 2u);
  EXPECT_NE(before[0]["weight_sum"], 6.0);
  EXPECT_EQ(before[0]["weight_sum"], before[0]["ref_sum"]);

  TrainOptions init = plain;
  init.inits.push_back({"transformer", path});
  std::string log;
  init.metricsPath = (dir / "init.jsonl").string();
  ASSERT_TRUE(train(init, log).ok()) << log;
  EXPECT_NE(log.find("init: 2 tensors of " + path +
                     " into transformer.* (and 1 into ref.transformer.*)\n"),
            std::string::npos)
      << log;
  auto after = readMetrics(init.metricsPath);
  ASSERT_EQ(after.size(), 2u);
  EXPECT_EQ(after[0]["weight_sum"], 6.0);
  EXPECT_EQ(after[0]["ref_sum"], 6.0);
  // The update moves the weights, not the frozen reference.
  EXPECT_NE(after[1]["weight_sum"], 6.0);
  EXPECT_EQ(after[1]["ref_sum"], 6.0);
}

TEST_F(DataTrainerTest, InitWidensHalfPrecisionAndSkipsNamedBuffers) {
  // A diffusers-style file: bf16/f16 weights and a buffer the program
  // computes itself.
  std::vector<NamedTensor> weights = {
      {"proj.weight", HostTensor::fromDoubles(DType::BF16, {12, 4},
                                              std::vector<double>(48, 0.125))},
      {"proj.bias", HostTensor(DType::F16, {12})},
      {"pos_embed.pos_embed", HostTensor(DType::F32, {1, 3})},
      {"encoder.conv_in.weight", HostTensor(DType::F32, {2})},
      {"encoder.conv_in.bias", HostTensor(DType::F32, {2})}};
  std::string path = writeTensors("half.safetensors", weights);
  TrainOptions options;
  options.steps = 1;
  options.inits.push_back({"transformer", path});
  std::string log;
  absl::Status unknown = train(options, log);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.message().find(
                "which @train_step does not have (--init-skip=encoder."),
            std::string::npos)
      << unknown.message();
  options.initSkip.push_back("pos_embed.pos_embed");
  options.initSkip.push_back("encoder.*");
  options.metricsPath = (dir / "half.jsonl").string();
  log.clear();
  ASSERT_TRUE(train(options, log).ok()) << log;
  EXPECT_NE(log.find("init: 2 tensors of " + path +
                     " into transformer.* (and 1 into ref.transformer.*), 3 "
                     "skipped\n"),
            std::string::npos)
      << log;
  auto metrics = readMetrics(options.metricsPath);
  ASSERT_EQ(metrics.size(), 1u);
  EXPECT_EQ(metrics[0]["weight_sum"], 6.0); // 48 x 0.125, widened exactly
}

TEST_F(DataTrainerTest, InitErrors) {
  HostTensor w = HostTensor::fromDoubles(DType::F32, {12, 4},
                                         std::vector<double>(48, 0.5));
  HostTensor b(DType::F32, {12});
  HostTensor nanAt5 = w, minusInf = b;
  nanAt5.floats()[5] = std::nan("");
  minusInf.floats()[11] = -INFINITY;
  struct Case {
    std::vector<NamedTensor> tensors;
    std::string prefix;
    std::string message; // after "<path>: " unless it starts with "--"
  };
  const Case cases[] = {
      {{{"proj.weight", w}, {"proj.bias", b}, {"proj.nope", b}},
       "transformer",
       "tensor 'proj.nope' would set state 'transformer.proj.nope', which "
       "@train_step does not have (--init-skip=proj.nope ignores a buffer "
       "the program computes)"},
      {{{"proj.weight", HostTensor(DType::F32, {4, 12})}, {"proj.bias", b}},
       "transformer",
       "tensor 'proj.weight' is tensor<4x12xf32>, expected tensor<12x4xf32> "
       "as state 'transformer.proj.weight' is"},
      {{{"proj.weight", w}, {"proj.bias", HostTensor(DType::F64, {12})}},
       "transformer",
       "tensor 'proj.bias' is tensor<12xf64>, expected tensor<12xf32> as "
       "state 'transformer.proj.bias' is"},
      // Non-finite weights are refused with the tensor's name.
      {{{"proj.weight", nanAt5}, {"proj.bias", b}},
       "transformer",
       "tensor 'proj.weight' has NaN at element 5 of 48, expected finite "
       "initial weights"},
      {{{"proj.weight", w}, {"proj.bias", minusInf}},
       "transformer",
       "tensor 'proj.bias' has -inf at element 11 of 12, expected finite "
       "initial weights"},
      {{{"proj.weight", w}},
       "transformer",
       "no tensor 'proj.bias' for state 'transformer.proj.bias', expected "
       "every parameter under 'transformer.' except LoRA adapters"},
      {{{"proj.weight", w}, {"proj.bias", b}},
       "vae",
       "--init vae=PATH: @train_step has no state named 'vae.*' (state: "
       "transformer.proj.weight, transformer.proj.bias, "
       "ref.transformer.proj.weight, transformer.proj.lora_A.weight, step)"},
  };
  int n = 0;
  for (const Case &c : cases) {
    std::string path =
        writeTensors("init" + std::to_string(n++) + ".safetensors", c.tensors);
    TrainOptions options;
    options.inits.push_back({c.prefix, path});
    std::string log;
    absl::Status s = train(options, log);
    ASSERT_FALSE(s.ok()) << c.message;
    std::string expected = c.message;
    if (expected.rfind("--", 0) == 0)
      expected.replace(expected.find("PATH"), 4, path);
    else
      expected = path + ": " + expected;
    EXPECT_EQ(s.message(), expected);
  }
  // A corrupt file: the safetensors reader's one-line error.
  std::string garbage = (dir / "garbage.safetensors").string();
  std::ofstream(garbage) << "garbage!";
  TrainOptions options;
  options.inits.push_back({"transformer", garbage});
  std::string log;
  absl::Status s = train(options, log);
  std::string want = garbage + ": header length";
  EXPECT_EQ(s.message().substr(0, want.size()), want);
}

TEST_F(DataTrainerTest, RewardRebindingChangesTheReward) {
  TrainOptions options;
  options.steps = 1;
  options.outDir = (dir / "brightness").string();
  auto own = trainMetrics(options, "own");
  ASSERT_EQ(own.size(), 1u);
  // brightness is the mean pixel value.
  EXPECT_NEAR(own[0]["reward_mean"], own[0]["image_mean"], 1e-6);

  options.rewards = {"jpeg_incompressibility"};
  options.outDir = (dir / "jpeg").string();
  std::string log;
  options.metricsPath = (dir / "jpeg.jsonl").string();
  ASSERT_TRUE(train(options, log).ok()) << log;
  EXPECT_EQ(log.substr(0, 44), "reward: brightness -> jpeg_incompressibility");
  auto jpeg = readMetrics(options.metricsPath);
  ASSERT_EQ(jpeg.size(), 1u);
  // The same images (the reward does not feed back into iteration 0)...
  EXPECT_EQ(jpeg[0]["image_mean"], own[0]["image_mean"]);
  // ...scored by JPEG size: recompute it from the saved grid (4 images of
  // 2x2 pixels in 2 columns, 2-pixel gaps).
  std::string png = readText(fs::path(options.outDir) / "samples/iter-1.png");
  auto grid = ::omni::image::decodePng(png);
  ASSERT_TRUE(grid.ok()) << grid.status();
  ASSERT_EQ(grid->width, 6);
  ASSERT_EQ(grid->height, 6);
  double sum = 0;
  for (int n = 0; n < 4; ++n) {
    std::vector<uint8_t> hwc;
    for (int y = 0; y < 2; ++y)
      for (int x = 0; x < 2; ++x)
        for (int c = 0; c < 3; ++c)
          hwc.push_back(
              grid->pixels[(((n / 2) * 4 + y) * 6 + (n % 2) * 4 + x) * 3 + c]);
    auto size = ::omni::rewards::jpegEncodedSize(hwc.data(), 2, 2);
    ASSERT_TRUE(size.ok());
    sum += static_cast<float>(*size) / 1000.0f;
  }
  EXPECT_NEAR(jpeg[0]["reward_mean"], sum / 4, 1e-6 * sum);
  EXPECT_GT(jpeg[0]["reward_mean"], 0.1);
  EXPECT_GT(jpeg[0]["reward_time_s"], 0.0);

  // Unknown rewards and steps without a reward are refused.
  options.outDir = (dir / "refused").string();
  options.rewards = {"nope"};
  absl::Status s = train(options, log);
  EXPECT_EQ(s.message(),
            "--reward: unknown reward 'nope' (known rewards: brightness, "
            "jpeg_compressibility, jpeg_incompressibility; or a server: "
            "http://HOST:PORT[/PATH] or unix:SOCKET)");
  options.rewards = {"brightness"};
  options.stepFunction = "step_embeds_only";
  s = train(options, log);
  EXPECT_EQ(s.message(),
            "--reward brightness: @step_embeds_only calls no reward to rebind "
            "(its host calls: none; known rewards: brightness, "
            "jpeg_compressibility, jpeg_incompressibility)");
}

TEST_F(DataTrainerTest, SamplesArePngGridsOfTheImages) {
  TrainOptions options;
  options.steps = 5;
  options.seed = 9;
  options.sampleEvery = 2;
  options.outDir = (dir / "out").string();
  std::string log;
  ASSERT_TRUE(train(options, log).ok()) << log;
  fs::path samples = fs::path(options.outDir) / "samples";
  EXPECT_FALSE(fs::exists(samples / "iter-1.png"));
  EXPECT_TRUE(fs::exists(samples / "iter-2.png"));
  EXPECT_FALSE(fs::exists(samples / "iter-3.png"));
  EXPECT_TRUE(fs::exists(samples / "iter-4.png"));
  EXPECT_TRUE(fs::exists(samples / "iter-5.png")); // the last iteration
  // No temporaries left behind.
  for (const auto &entry : fs::directory_iterator(samples))
    EXPECT_EQ(entry.path().extension(), ".png") << entry.path();

  // Iteration 1's images, computed directly: @init_state, one @train_step
  // (iteration 0), then @train_step on iteration 1 with the built-in
  // prompts.
  ::omni::executor::ExecutorOptions executorOptions;
  ::omni::rewards::registerRewards(executorOptions.hostFunctions);
  auto executor =
      ::omni::executor::Executor::create(*program, *device, executorOptions);
  ASSERT_TRUE(executor.ok());
  // The state stays in the executor's slots between the runs.
  auto init = (*executor)->run("init_state", {TypedTensor::scalarI64(9)});
  ASSERT_TRUE(init.ok()) << init.status();
  ::omni::train::PromptRequest request;
  request.perIteration = 2;
  request.embeds = request.pooled = true;
  request.tokens = 3;
  request.dim = 4;
  request.pooledDim = 2;
  auto prompts = ::omni::train::PromptSet::synthetic(request);
  std::vector<TypedTensor> outs;
  for (int64_t it = 0; it < 2; ++it) {
    std::vector<TypedTensor> in = {TypedTensor::scalarI64(9),
                                   TypedTensor::scalarI64(it),
                                   prompts.embeds(it), prompts.pooled(it)};
    auto r = (*executor)->run("train_step", in);
    ASSERT_TRUE(r.ok()) << r.status();
    outs = *r;
  }
  const TypedTensor &images = outs.back();
  ASSERT_EQ(images.shape(), (std::vector<int64_t>{4, 3, 2, 2}));
  auto grid = ::omni::image::decodePng(readText(samples / "iter-2.png"));
  ASSERT_TRUE(grid.ok()) << grid.status();
  ASSERT_EQ(grid->width, 6);
  ASSERT_EQ(grid->height, 6);
  for (int n = 0; n < 4; ++n)
    for (int c = 0; c < 3; ++c)
      for (int y = 0; y < 2; ++y)
        for (int x = 0; x < 2; ++x) {
          double v = images.doubleAt(((n * 3 + c) * 2 + y) * 2 + x);
          ASSERT_GT(v, 0.0);
          ASSERT_LT(v, 1.0);
          int px = (n % 2) * 4 + x, py = (n / 2) * 4 + y;
          EXPECT_EQ(grid->pixels[(py * 6 + px) * 3 + c],
                    static_cast<int>(std::nearbyint(255.0f * float(v))))
              << n << " " << c << " " << y << " " << x;
        }
  // Gap pixels are black.
  for (int y = 0; y < 6; ++y)
    for (int c = 0; c < 3; ++c) {
      EXPECT_EQ(grid->pixels[(y * 6 + 2) * 3 + c], 0);
      EXPECT_EQ(grid->pixels[(y * 6 + 3) * 3 + c], 0);
    }
}

TEST_F(DataTrainerTest, ResumeIsBitExactWithDataInputs) {
  std::string prompts = countingPrompts(3);
  TrainOptions straight;
  straight.steps = 5;
  straight.seed = 11;
  straight.promptsPath = prompts;
  straight.outDir = (dir / "straight").string();
  std::string log;
  ASSERT_TRUE(train(straight, log).ok()) << log;

  TrainOptions first = straight;
  first.steps = 2;
  first.outDir = (dir / "first").string();
  ASSERT_TRUE(train(first, log).ok()) << log;
  // Continue elsewhere: --resume DIR with another --out.
  TrainOptions second = straight;
  second.resume = true;
  second.resumeDir = first.outDir;
  second.outDir = (dir / "second").string();
  ASSERT_TRUE(train(second, log).ok()) << log;
  EXPECT_NE(log.find("resumed from " + first.outDir + " at iteration 2"),
            std::string::npos)
      << log;
  expectSameCheckpoint(straight.outDir, second.outDir, 5);
  auto a = readMetrics(fs::path(straight.outDir) / "metrics.jsonl");
  auto b = readMetrics(fs::path(second.outDir) / "metrics.jsonl");
  ASSERT_EQ(a.size(), 5u);
  ASSERT_EQ(b.size(), 3u);
  for (const char *m : {"loss", "reward_mean", "weight_sum", "prompt_sum_0"})
    EXPECT_EQ(a[4][m], b[2][m]) << m;

  // --resume DIR alone continues in DIR.
  TrainOptions third = straight;
  third.outDir.clear();
  third.resume = true;
  third.resumeDir = first.outDir;
  ASSERT_TRUE(train(third, log).ok()) << log;
  expectSameCheckpoint(straight.outDir, first.outDir, 5);
}

TEST_F(DataTrainerTest, StepsZeroWritesTheInitialState) {
  // --steps 0 --out DIR: the state after @init_state as step-0, which
  // other implementations load (bench/torch) and a run can resume from.
  TrainOptions initial;
  initial.steps = 0;
  initial.seed = 5;
  initial.outDir = (dir / "initial").string();
  std::string log;
  ASSERT_TRUE(train(initial, log).ok()) << log;
  auto ckpt = ::omni::checkpoint::loadLatestCheckpoint(initial.outDir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_EQ(ckpt->step, 0);
  EXPECT_EQ(ckpt->metadata.at("seed"), "5");
  EXPECT_EQ(ckpt->metadata.at("iteration"), "0");

  TrainOptions straight = initial;
  straight.steps = 2;
  straight.outDir = (dir / "straight").string();
  ASSERT_TRUE(train(straight, log).ok()) << log;
  TrainOptions resumed = initial;
  resumed.steps = 2;
  resumed.outDir.clear();
  resumed.resume = true;
  resumed.resumeDir = initial.outDir;
  ASSERT_TRUE(train(resumed, log).ok()) << log;
  expectSameCheckpoint(straight.outDir, initial.outDir, ckpt->tensors.size());
}

TEST_F(DataTrainerTest, CheckpointMetadataIsChecked) {
  std::string out = (dir / "c").string();
  TrainOptions options;
  options.steps = 1;
  options.seed = 2;
  options.outDir = out;
  std::string log;
  ASSERT_TRUE(train(options, log).ok()) << log;
  auto ckpt = ::omni::checkpoint::loadLatestCheckpoint(out);
  ASSERT_TRUE(ckpt.ok());
  EXPECT_EQ(ckpt->metadata.at("seed"), "2");
  EXPECT_EQ(ckpt->metadata.at("iteration"), "1");

  options.steps = 2;
  options.resume = true;
  std::string path = ::omni::checkpoint::checkpointPath(out, 1);
  ASSERT_TRUE(::omni::checkpoint::saveCheckpoint(out, 1, ckpt->tensors,
                                                 {{"iteration", "1"}})
                  .ok());
  absl::Status s = train(options, log);
  EXPECT_EQ(s.message(), path + ": the checkpoint records no seed (metadata "
                                "'seed'), expected the seed it was trained "
                                "with");
  ASSERT_TRUE(::omni::checkpoint::saveCheckpoint(
                  out, 1, ckpt->tensors, {{"seed", "2"}, {"iteration", "7"}})
                  .ok());
  s = train(options, log);
  EXPECT_EQ(s.message(), path + ": metadata 'iteration' is '7', expected 1 "
                                "as the file's step");
  std::vector<NamedTensor> missing(ckpt->tensors.begin() + 1,
                                   ckpt->tensors.end());
  ASSERT_TRUE(
      ::omni::checkpoint::saveCheckpoint(out, 1, missing, {{"seed", "2"}})
          .ok());
  s = train(options, log);
  EXPECT_EQ(s.message(), out + ": the checkpoint of step 1 has no tensor '" +
                             ckpt->tensors[0].name + "'");
}

TEST_F(DataTrainerTest, AnInterruptedSaveKeepsThePreviousCheckpoint) {
  std::string out = (dir / "c").string();
  TrainOptions options;
  options.steps = 2;
  options.seed = 4;
  options.outDir = out;
  std::string log;
  ASSERT_TRUE(train(options, log).ok()) << log;
  std::string latest = readText(fs::path(out) / "latest");
  ASSERT_EQ(latest, "2\n");

  // A crash in the middle of writing step 3: a partial temporary is left.
  std::string step2 = readText(::omni::checkpoint::checkpointPath(out, 2));
  std::ofstream(::omni::checkpoint::checkpointPath(out, 3) + ".tmp.12345")
      << step2.substr(0, step2.size() / 2);
  // A save that fails: step 4's file cannot be renamed into place.
  fs::create_directories(::omni::checkpoint::checkpointPath(out, 4));
  options.steps = 4;
  options.saveEvery = 1;
  options.resume = true;
  absl::Status s = train(options, log);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("step-4.safetensors: rename failed"),
            absl::string_view::npos)
      << s;
  // `latest` names the last complete checkpoint (step 3 was saved before
  // the failure), which loads.
  EXPECT_EQ(readText(fs::path(out) / "latest"), "3\n");
  auto ckpt = ::omni::checkpoint::loadLatestCheckpoint(out);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_EQ(ckpt->step, 3);

  // Once the obstacle is gone, resuming reaches the same state as a run
  // that was never interrupted.
  fs::remove(::omni::checkpoint::checkpointPath(out, 4));
  ASSERT_TRUE(train(options, log).ok()) << log;
  TrainOptions straight;
  straight.steps = 4;
  straight.seed = 4;
  straight.outDir = (dir / "straight").string();
  ASSERT_TRUE(train(straight, log).ok()) << log;
  expectSameCheckpoint(out, straight.outDir, 5);
}

TEST_F(DataTrainerTest, ConventionErrors) {
  struct Case {
    const char *function;
    std::string message;
  };
  const Case cases[] = {
      {"step_unnamed_data",
       // Outside the convention (the unnamed input), so its state stays
       // inputs #0-#4 and seed and iteration are #5 and #6.
       "@step_unnamed_data: input #7 (tensor<2x2xf32>) follows seed and "
       "iteration but is not a data input: expected omni.name "
       "\"prompt_embeds\" or \"pooled_prompt_embeds\""},
      {"step_bad_embeds",
       "@step_bad_embeds: input #2 'prompt_embeds' (tensor<2x12xf32>): "
       "expected f32 [P, L, D] with every dimension >= 1"},
      {"step_prompt_counts",
       "@step_prompt_counts: input #3 'pooled_prompt_embeds' "
       "(tensor<3x2xf32>) takes 3 prompts, expected 2 as the other data input "
       "takes"},
      {"step_bad_images",
       "@step_bad_images: result #0 'images' is tensor<2x4x3x2xf32>, "
       "expected a float tensor [B, 3, H, W]"},
      {"step_twice",
       "@step_twice: input #3 'prompt_embeds' (tensor<2x3x4xf32>): data "
       "input 'prompt_embeds' is taken twice, expected once"},
      {"step_negative_batch",
       "@step_negative_batch: input #4 'negative_pooled_prompt_embeds' "
       "(tensor<2x2xf32>): expected f32 [1, Dp] (one negative prompt for "
       "the batch)"},
      {"step_negative_dims",
       "@step_negative_dims: input #3 'negative_prompt_embeds' "
       "(tensor<1x3x5xf32>): expected f32 [1, 3, 4] as prompt_embeds takes"},
      {"step_no_iteration",
       "@step_no_iteration(tensor<12x4xf32>, tensor<i64>) -> "
       "(tensor<12x4xf32>): expected seed and iteration as tensor<i64>, then "
       "the data inputs (prompt_embeds, pooled_prompt_embeds), with the "
       "training state in state slots (omni.state)"},
  };
  for (const Case &c : cases) {
    TrainOptions options;
    options.stepFunction = c.function;
    std::string log;
    absl::Status s = train(options, log);
    EXPECT_EQ(s.message(), c.message);
  }
}

// The state stays on the device: an iteration moves exactly its inputs
// (seed, iteration, the prompts), its results (10 f32 metrics, the images)
// and the reward host call's operand (the images) and result (4 rewards).
TEST_F(DataTrainerTest, StatsCountOnlyTheIterationsOwnTransfers) {
  TrainOptions options;
  options.steps = 3;
  options.seed = 2;
  options.stats = true;
  options.outDir = (dir / "out").string();
  options.saveEvery = 1; // checkpoints between iterations are not counted
  auto metrics = trainMetrics(options, "stats");
  ASSERT_EQ(metrics.size(), 3u);
  const double f32 = 4, scalarI64 = 8;
  const double embeds = 2 * 3 * 4 * f32, pooled = 2 * 2 * f32;
  const double images = 4 * 3 * 2 * 2 * f32, rewards = 4 * f32;
  const double metricsBytes = 10 * f32;
  for (const auto &m : metrics) {
    EXPECT_EQ(m.at("host_to_device_bytes"),
              2 * scalarI64 + embeds + pooled + rewards);
    EXPECT_EQ(m.at("device_to_host_bytes"), metricsBytes + images + images);
    // Arena, constants, the five slots and the run's buffers.
    EXPECT_GT(m.at("device_bytes"),
              2 * 48 * f32 + 12 * f32 + 8 * f32 + scalarI64);
    EXPECT_EQ(m.at("device_bytes"), metrics[0].at("device_bytes"));
  }
  // The same run without --stats writes no such fields.
  options.stats = false;
  options.outDir = (dir / "plain").string();
  auto plain = trainMetrics(options, "plain");
  ASSERT_EQ(plain.size(), 3u);
  EXPECT_EQ(plain[0].count("host_to_device_bytes"), 0u);
  EXPECT_EQ(plain[0].count("device_bytes"), 0u);
}

TEST_F(DataTrainerTest, AProgramWithoutStateIsRefused) {
  fs::path source = dir / "stateless.mlir";
  std::ofstream(source) << "func.func @train_step(%seed: tensor<i64>, %it: "
                           "tensor<i64>) -> tensor<f32> {\n"
                           "  %c = omni.constant dense<1.0> : tensor<f32>\n"
                           "  return %c : tensor<f32>\n}\n";
  ProgramPtr stateless = compile(source.string());
  ASSERT_TRUE(stateless);
  std::string log;
  absl::Status s = TrainerTestBase::train(stateless, TrainOptions(), log);
  EXPECT_EQ(s.message(),
            "@train_step(tensor<i64>, tensor<i64>) -> (tensor<f32>): step.bin "
            "has no state slots, expected the training state (parameters, "
            "optimizer state) as omni.state slots");
}

TEST_F(DataTrainerTest, InitChecksTheReferenceCopyToo) {
  ProgramPtr badRef =
      compile(OMNI_SOURCE_DIR "/test/train/Inputs/bad-ref-program.mlir");
  ASSERT_TRUE(badRef);
  std::string path = writeTensors(
      "init.safetensors", {{"proj.weight", HostTensor(DType::F32, {12, 4})},
                           {"proj.bias", HostTensor(DType::F32, {12})}});
  TrainOptions options;
  options.initFunction = "init_bad_ref";
  options.stepFunction = "step_bad_ref";
  options.inits.push_back({"transformer", path});
  std::string log;
  absl::Status s = TrainerTestBase::train(badRef, options, log);
  EXPECT_EQ(s.message(), path + ": tensor 'proj.weight' is "
                                "tensor<12x4xf32>, expected tensor<4x12xf32> "
                                "as state 'ref.transformer.proj.weight' is");
}

TEST_F(DataTrainerTest, OptionErrors) {
  TrainOptions options;
  std::string log;
  options.steps = -1;
  EXPECT_EQ(train(options, log).message(), "--steps must be >= 0, found -1");
  options.steps = 1;
  options.saveEvery = -2;
  EXPECT_EQ(train(options, log).message(),
            "--save-every and --sample-every must be >= 0, found -2 and 0");
  options.saveEvery = 0;
  std::string file = (dir / "a-file").string();
  std::ofstream(file) << "x";
  options.outDir = file;
  EXPECT_EQ(train(options, log).message(), file + ": expected a folder");
  options.outDir = (dir / "out").string();
  options.metricsPath = (dir / "no/such/folder/m.jsonl").string();
  EXPECT_EQ(train(options, log).message(),
            "cannot open " + options.metricsPath +
                " for appending: No such file or directory");
}

TEST_F(DataTrainerTest, ANewRunRefusesAFolderWithCheckpoints) {
  TrainOptions options;
  options.steps = 2;
  options.seed = 3;
  options.outDir = (dir / "run").string();
  std::string log;
  ASSERT_TRUE(train(options, log).ok()) << log;
  std::string before =
      readText(fs::path(options.outDir) / "step-2.safetensors");
  // Started again without --resume, the run would write over step-2 and
  // append to metrics.jsonl: refused, with nothing touched.
  options.seed = 4;
  absl::Status s = train(options, log);
  EXPECT_TRUE(absl::IsAlreadyExists(s)) << s;
  EXPECT_EQ(s.message(), "--out " + options.outDir +
                             ": the folder already holds a run (checkpoints "
                             "up to step-2.safetensors), expected a new or "
                             "empty folder; --resume " +
                             options.outDir + " continues that run");
  EXPECT_EQ(readText(fs::path(options.outDir) / "step-2.safetensors"), before);
  EXPECT_EQ(readMetrics(fs::path(options.outDir) / "metrics.jsonl").size(), 2u);
  // The same folder spelled otherwise continues it.
  TrainOptions same = options;
  same.steps = 3;
  same.seed.reset();
  same.resume = true;
  same.resumeDir = options.outDir + "/";
  ASSERT_TRUE(train(same, log).ok()) << log;
  EXPECT_EQ(readText(fs::path(options.outDir) / "latest"), "3\n");
  // Resuming from another folder into this one is refused the same way.
  options.seed.reset();
  options.resume = true;
  options.resumeDir = options.outDir;
  options.outDir = (dir / "other").string();
  options.steps = 4;
  s = train(options, log);
  ASSERT_TRUE(s.ok()) << s << log;
  options.steps = 5;
  options.resumeDir = options.outDir;
  options.outDir = (dir / "run").string();
  EXPECT_TRUE(absl::IsAlreadyExists(train(options, log)));

  // A folder with metrics but no checkpoint (a run killed before its
  // first save) starts over: its lines are not mixed with the new run's.
  TrainOptions fresh;
  fresh.steps = 1;
  fresh.outDir = (dir / "killed").string();
  fs::create_directories(fresh.outDir);
  std::ofstream(fs::path(fresh.outDir) / "metrics.jsonl")
      << "{\"iteration\": 0, \"loss\": 1}\n{\"iteration\": 1, \"loss\": 2}\n";
  ASSERT_TRUE(train(fresh, log).ok()) << log;
  auto metrics = readMetrics(fs::path(fresh.outDir) / "metrics.jsonl");
  ASSERT_EQ(metrics.size(), 1u);
  EXPECT_NE(metrics[0]["loss"], 1.0);
}

TEST_F(DataTrainerTest, ProgressLineOrderAndContents) {
  TrainOptions options;
  options.steps = 2;
  std::string log;
  ASSERT_TRUE(train(options, log).ok()) << log;
  std::istringstream lines(log);
  std::string line;
  std::getline(lines, line);
  EXPECT_EQ(line, "no --out: this run saves nothing (no checkpoints, metrics "
                  "or samples)");
  std::getline(lines, line); // prompts:
  for (int i = 1; i <= 2; ++i) {
    ASSERT_TRUE(std::getline(lines, line));
    std::string head = "iter " + std::to_string(i) + "/2  reward 0.";
    EXPECT_EQ(line.substr(0, head.size()), head) << line;
    size_t pm = line.find(" \u00b1 "), loss = line.find("  loss "),
           p0 = line.find("  prompt_sum_0 "), im = line.find("  image_mean "),
           time = line.find("  time "), rt = line.find(" s (reward "),
           ct = line.find(" s, compute ");
    size_t elapsed = line.find(" s)  elapsed "), eta = line.find("s  eta ");
    EXPECT_TRUE(pm < loss && loss < p0 && p0 < im && im < time && time < rt &&
                rt < ct && ct < elapsed && elapsed < eta &&
                eta != std::string::npos)
        << line;
    // The last iteration leaves nothing to wait for.
    if (i == 2) {
      EXPECT_EQ(line.substr(line.size() - 8), "  eta 0s") << line;
    }
    EXPECT_EQ(line.find("images"), std::string::npos) << line;
  }
  EXPECT_FALSE(std::getline(lines, line));
}

//===----------------------------------------------------------------------===//
// Work that must not be lost (issue 11, section 4)
//===----------------------------------------------------------------------===//

TEST_F(DataTrainerTest, AStopRequestSavesTheLastIterationAndSaysWhere) {
  // The signal handler's flag, as omnirun polls it: set while iteration 2
  // (the third) would start.
  int polls = 0;
  TrainOptions options;
  options.steps = 10;
  options.seed = 6;
  options.outDir = (dir / "run").string();
  options.stopRequested = [&] { return ++polls > 2 ? SIGTERM : 0; };
  std::string log;
  absl::Status s = train(options, log);
  ASSERT_TRUE(absl::IsCancelled(s)) << s;
  std::string step2 = ::omni::checkpoint::checkpointPath(options.outDir, 2);
  EXPECT_EQ(s.message(), "interrupted by SIGTERM after iteration 2 of 10: "
                         "saved " +
                             step2 + "; continue with --resume " +
                             options.outDir);
  EXPECT_EQ(readText(fs::path(options.outDir) / "latest"), "2\n");
  EXPECT_EQ(readMetrics(fs::path(options.outDir) / "metrics.jsonl").size(), 2u);
  // Resuming ends where an uninterrupted run ends.
  TrainOptions resumed = options;
  resumed.steps = 4;
  resumed.resume = true;
  resumed.stopRequested = nullptr;
  ASSERT_TRUE(train(resumed, log).ok()) << log;
  TrainOptions straight = resumed;
  straight.resume = false;
  straight.outDir = (dir / "straight").string();
  ASSERT_TRUE(train(straight, log).ok()) << log;
  expectSameCheckpoint(straight.outDir, options.outDir, 5);

  // Without --out there is nothing to save, and the message says so.
  polls = 0;
  options.outDir.clear();
  s = train(options, log);
  EXPECT_EQ(s.message(), "interrupted by SIGTERM after iteration 2 of 10; "
                         "nothing saved (no --out)");
}

TEST_F(DataTrainerTest, AFailedSideOutputSavesTheStateFirst) {
  // A full disk under the metrics file: the first line cannot be written.
  TrainOptions options;
  options.steps = 5;
  options.seed = 2;
  options.outDir = (dir / "full").string();
  options.metricsPath = "/dev/full";
  std::string log;
  absl::Status s = train(options, log);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "/dev/full: write failed: No space left on device (training "
            "state of iteration 1 saved in " +
                ::omni::checkpoint::checkpointPath(options.outDir, 1) + ")");
  EXPECT_EQ(readText(fs::path(options.outDir) / "latest"), "1\n");

  // A sample grid that cannot be written (samples is a file).
  TrainOptions samples;
  samples.steps = 5;
  samples.sampleEvery = 2;
  samples.outDir = (dir / "samples").string();
  fs::create_directories(samples.outDir);
  std::ofstream(fs::path(samples.outDir) / "samples") << "in the way";
  s = train(samples, log);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            samples.outDir +
                "/samples: expected a folder (training state of "
                "iteration 2 saved in " +
                ::omni::checkpoint::checkpointPath(samples.outDir, 2) + ")");
  // The metrics line of iteration 2 was written before the grid failed;
  // a resume continues after it.
  EXPECT_EQ(readMetrics(fs::path(samples.outDir) / "metrics.jsonl").size(), 2u);
}

TEST_F(DataTrainerTest, ResumeCutsTheMetricsAndRemovesStaleTemporaries) {
  TrainOptions options;
  options.steps = 4;
  options.seed = 8;
  options.saveEvery = 2;
  options.outDir = (dir / "run").string();
  std::string log;
  ASSERT_TRUE(train(options, log).ok()) << log;
  // What kill -9 during iteration 5 leaves when the last save was step 2
  // (iterations 2 and 3 logged, not saved): `latest` at 2, half a line,
  // temporaries of the dead process.
  fs::path run = options.outDir;
  std::ofstream(run / "latest") << "2\n";
  std::ofstream(run / "metrics.jsonl", std::ios::app)
      << "{\"iteration\": 4, \"lo";
  const std::string dead = ".tmp.999999999"; // beyond any pid_max
  std::ofstream(run / ("step-5.safetensors" + dead)) << "partial";
  std::ofstream(run / "samples" / ("iter-5.png" + dead)) << "partial";
  std::string live = "step-9.safetensors.tmp.1"; // init's: alive
  std::ofstream(run / live) << "a live process's";

  options.steps = 5;
  options.resume = true;
  ASSERT_TRUE(train(options, log).ok()) << log;
  EXPECT_NE(log.find("removed 2 temporary files of writes an earlier run did "
                     "not finish in " +
                     options.outDir + "\n"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("metrics: cut " + (run / "metrics.jsonl").string() +
                     " back to iteration 2 (2 lines of iterations the "
                     "checkpoint does not have and a partial last line)\n"),
            std::string::npos)
      << log;
  EXPECT_FALSE(fs::exists(run / ("step-5.safetensors" + dead)));
  EXPECT_FALSE(fs::exists(run / "samples" / ("iter-5.png" + dead)));
  EXPECT_TRUE(fs::exists(run / live));
  // Every iteration once, in order, and each line whole.
  auto metrics = readMetrics(run / "metrics.jsonl");
  ASSERT_EQ(metrics.size(), 5u);
  for (size_t i = 0; i < metrics.size(); ++i)
    EXPECT_EQ(metrics[i]["iteration"], double(i));
  std::string text = readText(run / "metrics.jsonl");
  EXPECT_EQ(text.back(), '\n');
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 5);
}

TEST_F(DataTrainerTest, KeepLastBoundsTheCheckpoints) {
  TrainOptions options;
  options.steps = 5;
  options.saveEvery = 1;
  options.keepLast = 2;
  options.outDir = (dir / "run").string();
  std::string log;
  ASSERT_TRUE(train(options, log).ok()) << log;
  auto steps = ::omni::checkpoint::listCheckpoints(options.outDir);
  ASSERT_TRUE(steps.ok());
  EXPECT_EQ(*steps, (std::vector<int64_t>{4, 5}));
  options.keepLast = -1;
  EXPECT_EQ(train(options, log).message(),
            "--keep-last must be >= 0, found -1");
}

TEST_F(DataTrainerTest, ResumingNothingIsAnErrorUnlessAskedToStartFresh) {
  TrainOptions options;
  options.steps = 2;
  options.resume = true;
  options.resumeDir = (dir / "missing").string();
  std::string log;
  absl::Status s = train(options, log);
  EXPECT_EQ(s.message(), "--resume " + options.resumeDir +
                             ": no such folder, expected a run folder with a "
                             "checkpoint (--resume-if-present starts from "
                             "@init_state when there is none)");
  fs::create_directories(options.resumeDir);
  s = train(options, log);
  EXPECT_EQ(s.message(), "--resume " + options.resumeDir +
                             ": no checkpoint there (no 'latest' file), "
                             "expected a run folder with a checkpoint "
                             "(--resume-if-present starts from @init_state "
                             "when there is none)");
  EXPECT_FALSE(fs::exists(fs::path(options.resumeDir) / "metrics.jsonl"));
  // --resume-if-present starts from @init_state, and a metrics file of a
  // run that saved nothing starts over.
  std::ofstream(fs::path(options.resumeDir) / "metrics.jsonl")
      << "{\"iteration\": 0, \"loss\": 1}\n";
  options.resume = false;
  options.resumeIfPresent = true;
  ASSERT_TRUE(train(options, log).ok()) << log;
  EXPECT_NE(log.find("no checkpoint in " + options.resumeDir +
                     "; starting from @init_state\n"),
            std::string::npos)
      << log;
  EXPECT_EQ(readMetrics(fs::path(options.resumeDir) / "metrics.jsonl").size(),
            2u);
  // ... and resumes once there is one.
  options.steps = 3;
  ASSERT_TRUE(train(options, log).ok()) << log;
  EXPECT_NE(log.find("resumed from " + options.resumeDir + " at iteration 2"),
            std::string::npos)
      << log;
}

TEST_F(DataTrainerTest, ResumeTakesTheSeedFromTheCheckpoint) {
  TrainOptions first;
  first.steps = 2;
  first.seed = 9;
  first.outDir = (dir / "run").string();
  std::string log;
  ASSERT_TRUE(train(first, log).ok()) << log;
  TrainOptions resumed;
  resumed.steps = 4;
  resumed.resume = true;
  resumed.outDir = first.outDir;
  ASSERT_TRUE(train(resumed, log).ok()) << log;
  EXPECT_NE(log.find("resumed from " + first.outDir +
                     " at iteration 2, seed 9 from the checkpoint\n"),
            std::string::npos)
      << log;
  TrainOptions straight = first;
  straight.steps = 4;
  straight.outDir = (dir / "straight").string();
  ASSERT_TRUE(train(straight, log).ok()) << log;
  expectSameCheckpoint(straight.outDir, first.outDir, 5);
  // The same seed given again is fine; another one is refused.
  resumed.steps = 5;
  resumed.seed = 9;
  ASSERT_TRUE(train(resumed, log).ok()) << log;
  resumed.steps = 6;
  resumed.seed = 0;
  EXPECT_EQ(train(resumed, log).message(),
            first.outDir +
                ": the checkpoint was trained with seed 9 but --seed is 0");
}

TEST_F(DataTrainerTest, ResumingWithAnotherProgramIsRefusedUnlessAllowed) {
  TrainOptions options;
  options.steps = 1;
  options.outDir = (dir / "run").string();
  options.programHash = "fnv1a64:00000000000000aa";
  std::string log;
  ASSERT_TRUE(train(options, log).ok()) << log;
  auto ckpt = ::omni::checkpoint::loadLatestCheckpoint(options.outDir);
  ASSERT_TRUE(ckpt.ok());
  EXPECT_EQ(ckpt->metadata.at("program_hash"), "fnv1a64:00000000000000aa");

  options.steps = 2;
  options.resume = true;
  options.programHash = "fnv1a64:00000000000000bb";
  absl::Status s = train(options, log);
  EXPECT_EQ(s.message(),
            ::omni::checkpoint::checkpointPath(options.outDir, 1) +
                ": written by another step.bin (program_hash "
                "fnv1a64:00000000000000aa, this one is "
                "fnv1a64:00000000000000bb); resume with the step.bin that "
                "wrote it, or pass --allow-program-change");
  options.allowProgramChange = true;
  ASSERT_TRUE(train(options, log).ok()) << log;
  EXPECT_NE(log.find("note: " +
                     ::omni::checkpoint::checkpointPath(options.outDir, 1) +
                     " was written by another step.bin"),
            std::string::npos)
      << log;
  ckpt = ::omni::checkpoint::loadLatestCheckpoint(options.outDir);
  ASSERT_TRUE(ckpt.ok());
  EXPECT_EQ(ckpt->metadata.at("program_hash"), "fnv1a64:00000000000000bb");
}

TEST_F(DataTrainerTest, NonFiniteImagesAreCountedAndReported) {
  TrainOptions options;
  options.steps = 2;
  options.stepFunction = "step_nan_images";
  options.metricsPath = (dir / "m.jsonl").string();
  std::string log;
  ASSERT_TRUE(train(options, log).ok()) << log;
  EXPECT_NE(log.find("warning: iteration 0: 2 of 4 images are not finite, so "
                     "their rewards mean nothing (nonfinite_images counts "
                     "them)\n"),
            std::string::npos)
      << log;
  EXPECT_EQ(log.find("warning: iteration 1"), std::string::npos) << log;
  EXPECT_NE(log.find("iter 2/2  nonfinite_images 2/4  time "),
            std::string::npos)
      << log;
  auto metrics = readMetrics(options.metricsPath);
  ASSERT_EQ(metrics.size(), 2u);
  EXPECT_EQ(metrics[1]["nonfinite_images"], 2.0);
  // Finite images: 0 in the metrics, nothing on the console.
  options.stepFunction = "train_step";
  options.metricsPath = (dir / "finite.jsonl").string();
  ASSERT_TRUE(train(options, log).ok()) << log;
  EXPECT_EQ(log.find("nonfinite"), std::string::npos) << log;
  metrics = readMetrics(options.metricsPath);
  ASSERT_EQ(metrics.size(), 2u);
  EXPECT_EQ(metrics[0].count("nonfinite_images"), 1u);
  EXPECT_EQ(metrics[0]["nonfinite_images"], 0.0);
}

//===----------------------------------------------------------------------===//
// omnirun's command line
//===----------------------------------------------------------------------===//

struct CommandResult {
  int code;
  std::string out, err;
};

CommandResult omnirun(std::vector<std::string> args) {
  std::ostringstream out, err;
  int code = ::omni::omnirun::run(args, out, err);
  return {code, out.str(), err.str()};
}

TEST_F(DataTrainerTest, CommandLine) {
  std::string bin = (dir / "p.bin").string();
  std::ofstream(bin, std::ios::binary) << *bytes;
  std::string out = (dir / "run").string();
  std::string init = writeTensors(
      "init.safetensors",
      {{"proj.weight", HostTensor::fromDoubles(DType::F32, {12, 4},
                                               std::vector<double>(48, 0.25))},
       {"proj.bias", HostTensor(DType::F32, {12})}});
  std::string prompts = countingPrompts(4);
  CommandResult r = omnirun({bin, "--steps", "2", "--seed=3", "--out", out,
                             "--prompts=" + prompts, "--init",
                             "transformer=" + init, "--reward", "brightness",
                             "--save-every=1", "--sample-every", "1"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_NE(r.out.find("weight_sum 12  ref_sum 12"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("iter 2/2"), std::string::npos) << r.out;
  for (const char *f :
       {"step-1.safetensors", "step-2.safetensors", "latest", "metrics.jsonl",
        "samples/iter-1.png", "samples/iter-2.png"})
    EXPECT_TRUE(fs::exists(fs::path(out) / f)) << f;
  auto metrics = readMetrics(fs::path(out) / "metrics.jsonl");
  ASSERT_EQ(metrics.size(), 2u);
  EXPECT_EQ(metrics[1]["prompt_sum_0"], 12.0 * 2);

  // `--resume DIR` continues there (out defaults to DIR); --init without a
  // prefix means transformer (applied only to fresh runs).
  r = omnirun({bin, "--resume", out, "--steps", "3", "--seed", "3", "--prompts",
               prompts, "--init=" + init});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("resumed from " + out +
                       " at iteration 2 (--init not "
                       "applied: the checkpoint has the weights)"),
            std::string::npos)
      << r.out;
  EXPECT_TRUE(fs::exists(fs::path(out) / "step-3.safetensors"));
  EXPECT_EQ(readMetrics(fs::path(out) / "metrics.jsonl").size(), 3u);

  // Old flag names still work.
  std::string old = (dir / "old").string();
  r = omnirun({bin, "--train", "--steps=2", "--checkpoint-dir=" + old,
               "--checkpoint-every=1",
               "--metrics=" + (dir / "old.jsonl").string()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(fs::path(old) / "step-1.safetensors"));
  EXPECT_EQ(readMetrics(dir / "old.jsonl").size(), 2u);
  r = omnirun(
      {bin, "--train", "--steps=3", "--checkpoint-dir=" + old, "--resume"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("resumed from " + old + " at iteration 2"),
            std::string::npos);

  // Errors are one line.
  r = omnirun({bin, "--steps=1", "--reward=nope"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "omnirun: --reward: unknown reward 'nope' (known rewards: "
                   "brightness, jpeg_compressibility, "
                   "jpeg_incompressibility; or a server: "
                   "http://HOST:PORT[/PATH] or unix:SOCKET)\n");
  r = omnirun({bin, "--steps=1", "--init=vae=" + init});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err.rfind("omnirun: --init vae=" + init +
                            ": @train_step has no state named 'vae.*'",
                        0),
            0u)
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1);
}

} // namespace
