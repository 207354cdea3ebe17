//===- FlowGrpoToyTest.cpp - the toy FlowGRPO program end to end ----------===//
//
// Evaluates examples/flowgrpo-toy/toy.mlir (MLP velocity model, SDE rollout
// loop, JPEG reward by host call, group advantages, clipped loss) and checks
// what the math says must hold: with the rollout's own log-probs as old
// log-probs the ratio is exactly 1, so approx_kl and clipfrac are 0 and the
// loss is -mean(clamp(A)); the advantages are those of the returned
// rewards; the noise depends on the iteration counter.
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/Evaluator.h"
#include "dialects/omni/OmniOps.h"
#include "runtime/flowgrpo/Advantages.h"
#include "runtime/train/rewards/RewardFunctions.h"

#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using ::omni::DType;
using ::omni::HostTensor;
namespace reference = ::omni::reference;

namespace {

class FlowGrpoToyTest : public ::testing::Test {
protected:
  FlowGrpoToyTest() {
    DialectRegistry registry;
    mlir::omni::registerOmniDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
    module = parseSourceFile<ModuleOp>(OMNI_SOURCE_DIR
                                       "/examples/flowgrpo-toy/toy.mlir",
                                       ParserConfig(&context));
  }

  std::vector<HostTensor>
  run(int64_t seed, int64_t iteration,
      reference::Precision precision = reference::Precision::F32) {
    reference::EvalOptions options;
    options.precision = precision;
    options.hostFunctions = &rewardFns;
    auto results = reference::evaluateFunction(
        *module, "main",
        {HostTensor::scalarInt(DType::I64, seed),
         HostTensor::scalarInt(DType::I64, iteration)},
        options);
    EXPECT_TRUE(results.ok()) << results.status();
    return results.ok() ? *results : std::vector<HostTensor>{};
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
  ::omni::HostFunctionRegistry rewardFns =
      ::omni::rewards::rewardHostFunctions();
};

TEST_F(FlowGrpoToyTest, OnPolicyIterationSatisfiesTheIdentities) {
  ASSERT_TRUE(module);
  std::vector<HostTensor> r = run(7, 0);
  ASSERT_EQ(r.size(), 6u);
  double loss = r[0].floats()[0], approxKl = r[1].floats()[0],
         clipfrac = r[2].floats()[0], rewardMean = r[3].floats()[0];
  auto adv = r[4].floats(), rewards = r[5].floats();
  ASSERT_EQ(adv.size(), 8u);

  // Ratio exactly 1: no KL estimate, nothing clipped.
  EXPECT_EQ(approxKl, 0.0);
  EXPECT_EQ(clipfrac, 0.0);
  // L_pg = -mean(clamp(A, -5, 5)), averaged over 3 identical steps.
  double expected = 0;
  for (double a : adv)
    expected -= std::clamp(a, -5.0, 5.0) / 8.0;
  EXPECT_NEAR(loss, expected, 1e-6);

  // The advantages are the group-normalized rewards (docs/flowgrpo-math.md 5).
  std::vector<float> rewards32(rewards.begin(), rewards.end());
  ::omni::flowgrpo::AdvantageOptions options;
  options.groupSize = 4;
  auto want = ::omni::flowgrpo::groupAdvantages<float>(rewards32, options);
  ASSERT_TRUE(want.ok()) << want.status();
  for (int i = 0; i < 8; ++i)
    EXPECT_NEAR(adv[i], (*want)[i], 1e-5) << i;
  double sum = 0;
  for (double x : rewards) {
    // jpeg_compressibility of a non-empty image is negative and small.
    EXPECT_LT(x, 0.0);
    EXPECT_GT(x, -0.01);
    sum += x;
  }
  EXPECT_NEAR(rewardMean, sum / 8.0, 1e-9);
}

TEST_F(FlowGrpoToyTest, NoiseFollowsTheIterationCounterOnly) {
  ASSERT_TRUE(module);
  std::vector<HostTensor> a = run(7, 0), again = run(7, 0), next = run(7, 1);
  ASSERT_EQ(a.size(), 6u);
  ASSERT_EQ(next.size(), 6u);
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t j = 0; j < a[i].floats().size(); ++j)
      EXPECT_EQ(a[i].floats()[j], again[i].floats()[j]) << i << "," << j;
  bool differs = false;
  for (size_t j = 0; j < 8; ++j)
    differs |= a[4].floats()[j] != next[4].floats()[j];
  EXPECT_TRUE(differs) << "iteration 1 drew the same noise as iteration 0";
}

TEST_F(FlowGrpoToyTest, Float64ModeAgreesWithFloat32) {
  ASSERT_TRUE(module);
  std::vector<HostTensor> f32 = run(3, 2),
                          f64 = run(3, 2, reference::Precision::F64);
  ASSERT_EQ(f64.size(), 6u);
  // Rewards are JPEG sizes of the decoded latents: equal unless a pixel
  // lands on a different side of a rounding boundary; advantages close.
  for (int i = 0; i < 8; ++i)
    EXPECT_NEAR(f32[4].floats()[i], f64[4].floats()[i], 2e-3) << i;
  EXPECT_EQ(f64[1].floats()[0], 0.0);
}

} // namespace
