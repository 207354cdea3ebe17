//===- HyperParamsTest.cpp - --set, the lr schedule, the resume record ---===//
//
// HyperParams::resolve over a hand-built step.bin with a hyper-parameter
// table: the --set errors (unknown name, no number, out of range) name the
// name and the accepted set or range; the schedules' values equal their
// formulas (docs/recipes.md section 11) at chosen points computed by hand;
// the checkpoint record round-trips and names the first difference.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/driver/HyperParams.h"

#include "runtime/loader/testing/StepBuilder.h"

#include "gtest/gtest.h"

#include <cmath>
#include <map>

namespace omni::train {
namespace {

using omni::testing::StepBuilder;

/// f(lr, weight_decay) with lr default 1e-3 in [0, inf) and weight_decay
/// 1e-4 in [0, inf); or no table at all.
std::shared_ptr<const loader::Program> program(bool withTable = true) {
  StepBuilder b;
  uint32_t lr = b.argument(step::DType::F64, {}, 0, "lr");
  uint32_t wd = b.argument(step::DType::F64, {}, 1, "weight_decay");
  b.function("f", {lr, wd}, {}, {});
  if (withTable)
    b.hparams = {{"lr", 1e-3, "[0, inf)"}, {"weight_decay", 1e-4, "[0, inf)"}};
  absl::StatusOr<std::shared_ptr<const loader::Program>> p =
      loader::Program::loadBytes(b.finish(), {"p.bin"});
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : nullptr;
}

std::string errorOf(const HyperParamRequest &request, bool withTable = true) {
  absl::StatusOr<HyperParams> hp =
      HyperParams::resolve(*program(withTable), request);
  EXPECT_FALSE(hp.ok());
  return hp.ok() ? "" : std::string(hp.status().message());
}

HyperParamRequest sets(std::vector<std::string> s) {
  HyperParamRequest r;
  r.sets = std::move(s);
  return r;
}

TEST(HyperParams, DefaultsAndOverrides) {
  absl::StatusOr<HyperParams> hp = HyperParams::resolve(*program(), {});
  ASSERT_TRUE(hp.ok()) << hp.status();
  EXPECT_EQ(hp->valueAt("lr", 0), 1e-3);
  EXPECT_EQ(hp->valueAt("lr", 7), 1e-3);
  EXPECT_EQ(hp->valueAt("weight_decay", 3), 1e-4);
  // A later --set wins; 0 is inside [0, inf).
  hp = HyperParams::resolve(*program(),
                            sets({"lr=3e-4", "weight_decay=0", "lr=0"}));
  ASSERT_TRUE(hp.ok()) << hp.status();
  EXPECT_EQ(hp->valueAt("lr", 0), 0.0);
  EXPECT_EQ(hp->valueAt("weight_decay", 0), 0.0);
}

/// A program whose beta was compiled as 0: the table pins it to [0, 0]
/// (docs/recipes.md section 11, "Fixed at compile time").
std::shared_ptr<const loader::Program> fixedBetaProgram() {
  StepBuilder b;
  uint32_t beta = b.argument(step::DType::F64, {}, 0, "beta");
  b.function("f", {beta}, {}, {});
  b.hparams = {{"beta", 0.0, "[0, 0]"}};
  absl::StatusOr<std::shared_ptr<const loader::Program>> p =
      loader::Program::loadBytes(b.finish(), {"p.bin"});
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *p : nullptr;
}

TEST(HyperParams, FixedValueSaysToRecompile) {
  absl::StatusOr<HyperParams> hp =
      HyperParams::resolve(*fixedBetaProgram(), sets({"beta=0.04"}));
  ASSERT_FALSE(hp.ok());
  EXPECT_EQ(hp.status().message(),
            "--set beta=0.04: p.bin was compiled with beta = 0, which fixes "
            "it (it decides the program's structure); recompile with "
            "omnigen --opt beta=0.04 to train with it");
  // The compiled value itself is accepted.
  hp = HyperParams::resolve(*fixedBetaProgram(), sets({"beta=0"}));
  ASSERT_TRUE(hp.ok()) << hp.status();
  EXPECT_EQ(hp->valueAt("beta", 0), 0.0);
}

TEST(HyperParams, SetErrorsAreOneLine) {
  EXPECT_EQ(errorOf(sets({"lrx=1"})),
            "--set lrx: p.bin has no runtime hyper-parameter 'lrx' (runtime: "
            "lr, weight_decay; other recipe options are compile-time: "
            "omnigen --opt)");
  EXPECT_EQ(errorOf(sets({"beta=0.04"}), /*withTable=*/false),
            "--set beta: p.bin has no runtime hyper-parameter 'beta' (it has "
            "none; every option is compiled in; other recipe options are "
            "compile-time: omnigen --opt)");
  EXPECT_EQ(errorOf(sets({"lr"})), "--set expects <name>=<value>, found 'lr'");
  EXPECT_EQ(errorOf(sets({"=1"})), "--set expects <name>=<value>, found '=1'");
  EXPECT_EQ(errorOf(sets({"lr=fast"})),
            "--set lr: expected a finite number in [0, inf), found 'fast'");
  EXPECT_EQ(errorOf(sets({"lr=inf"})),
            "--set lr: expected a finite number in [0, inf), found 'inf'");
  EXPECT_EQ(errorOf(sets({"lr=-1e-3"})),
            "--set lr=-1e-3: out of range, expected lr in [0, inf)");
  HyperParamRequest r;
  r.lrSchedule = "step";
  EXPECT_EQ(errorOf(r),
            "--lr-schedule: expected constant, linear or cosine, found 'step'");
  r.lrSchedule = "cosine";
  EXPECT_EQ(errorOf(r, /*withTable=*/false),
            "--lr-schedule/--warmup/--lr-min: p.bin has no runtime "
            "hyper-parameter 'lr' (runtime: none)");
  r.lrMin = 0.5;
  EXPECT_EQ(errorOf(r),
            "--lr-min: expected a number in [0, lr] = [0, 0.001], found 0.5");
}

TEST(HyperParams, Schedules) {
  // lr 0.4 (a round number so the formulas' values are exact to check),
  // warmup 2, 10 steps, lr_min 0.1: the decay runs over p = (i - 2) / 8.
  HyperParamRequest r = sets({"lr=0.4"});
  r.warmup = 2;
  r.steps = 10;
  r.lrMin = 0.1;
  for (const char *kind : {"constant", "linear", "cosine"}) {
    r.lrSchedule = kind;
    absl::StatusOr<HyperParams> hp = HyperParams::resolve(*program(), r);
    ASSERT_TRUE(hp.ok()) << hp.status();
    // Warmup: 0, then 0.2.
    EXPECT_EQ(hp->valueAt("lr", 0), 0.0) << kind;
    EXPECT_DOUBLE_EQ(hp->valueAt("lr", 1), 0.2) << kind;
    // The other hyper-parameters do not follow the schedule.
    EXPECT_EQ(hp->valueAt("weight_decay", 0), 1e-4) << kind;
    // i = 2: p = 0, the full lr; i = 6: p = 1/2; i = 10: p = 1.
    EXPECT_DOUBLE_EQ(hp->valueAt("lr", 2), 0.4) << kind;
    double half = std::string(kind) == "constant" ? 0.4 : 0.25;
    EXPECT_DOUBLE_EQ(hp->valueAt("lr", 6), half) << kind;
    double end = std::string(kind) == "constant" ? 0.4 : 0.1;
    EXPECT_NEAR(hp->valueAt("lr", 10), end, 1e-15) << kind;
  }
  // Cosine at p = 1/4: 0.1 + 0.3 (1 + cos(pi/4)) / 2
  // = 0.1 + 0.15 (1 + sqrt(2)/2) = 0.35606601717798213.
  r.lrSchedule = "cosine";
  absl::StatusOr<HyperParams> hp = HyperParams::resolve(*program(), r);
  ASSERT_TRUE(hp.ok());
  EXPECT_NEAR(hp->valueAt("lr", 4), 0.35606601717798213, 1e-15);
  // Linear at p = 1/4: 0.4 - 0.3 / 4 = 0.325.
  r.lrSchedule = "linear";
  hp = HyperParams::resolve(*program(), r);
  ASSERT_TRUE(hp.ok());
  EXPECT_DOUBLE_EQ(hp->valueAt("lr", 4), 0.325);
}

TEST(HyperParams, RecordAndResumeCheck) {
  HyperParamRequest r = sets({"lr=3e-4"});
  r.lrSchedule = "cosine";
  r.warmup = 1;
  r.steps = 5;
  absl::StatusOr<HyperParams> hp = HyperParams::resolve(*program(), r);
  ASSERT_TRUE(hp.ok());
  std::vector<std::pair<std::string, std::string>> want = {
      {"hparam.lr", "0.0003"},   {"hparam.weight_decay", "0.0001"},
      {"lr_schedule", "cosine"}, {"lr_warmup", "1"},
      {"lr_min", "0"},           {"lr_steps", "5"}};
  EXPECT_EQ(hp->record(), want);
  std::map<std::string, std::string> metadata(want.begin(), want.end());
  metadata["seed"] = "1";
  EXPECT_EQ(hp->firstDifference(metadata), std::nullopt);
  // A checkpoint from before hyper-parameters were recorded agrees.
  EXPECT_EQ(hp->firstDifference({{"seed", "1"}}), std::nullopt);
  // The first differing entry, in record() order.
  metadata["hparam.lr"] = "0.001";
  metadata["lr_steps"] = "9";
  EXPECT_EQ(hp->firstDifference(metadata),
            "lr is 0.0003 here but 0.001 in the checkpoint");
  metadata["hparam.lr"] = "0.0003";
  EXPECT_EQ(hp->firstDifference(metadata),
            "lr_steps is 5 here but 9 in the checkpoint");
  // run.json names the override, the default and the schedule.
  std::string json = hp->runJson("abc", 1, 5);
  EXPECT_NE(json.find("\"lr\": {\"value\": 0.0003, \"default\": 0.001, "
                      "\"range\": \"[0, inf)\", \"set\": true}"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"lr_schedule\": {\"kind\": \"cosine\", \"warmup\": 1, "
                      "\"lr_min\": 0, \"steps\": 5}"),
            std::string::npos)
      << json;
}

TEST(HyperParams, FormatExactReadsBack) {
  for (double v : {1e-3, 3e-4, 0.1, 1.0 / 3.0, 0.999, 1e-8})
    EXPECT_EQ(std::strtod(formatExact(v).c_str(), nullptr), v) << v;
  EXPECT_EQ(formatExact(3e-4), "0.0003");
}

} // namespace
} // namespace omni::train
