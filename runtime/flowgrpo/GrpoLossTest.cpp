//===- GrpoLossTest.cpp - Tests for grpo_loss -------------------*- C++ -*-===//
//
// docs/flowgrpo-math.md section 8's clipped-loss example, the on-policy
// identity, the metrics, both KL forms on hand-computed inputs, NaN
// propagation, and every user error.
//
//===----------------------------------------------------------------------===//

#include "runtime/flowgrpo/GrpoLoss.h"

#include "math/flowgrpo/Schedule.h"
#include "math/flowgrpo/testing/TestHelpers.h"
#include "runtime/flowgrpo/SdeStep.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>

namespace omni::flowgrpo {
namespace {

using testing::isUserError;
using testing::relNear;

template <typename T> class GrpoLossTypedTest : public ::testing::Test {};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(GrpoLossTypedTest, Precisions);

TYPED_TEST(GrpoLossTypedTest, DocClippedLossExample) {
  using T = TypeParam;
  std::vector<T> lp = {T(1e-3), T(1e-3), T(-1e-3), T(0)};
  std::vector<T> oldLp(4, T(0));
  std::vector<T> adv = {1, -1, 6, 0.5};
  GrpoLossInputs<T> inputs;
  inputs.logProb = lp;
  inputs.oldLogProb = oldLp;
  inputs.advantages = adv;
  auto result = grpoLoss<T>(inputs, GrpoLossOptions());
  ASSERT_TRUE(result.ok()) << result.status();
  const double terms[] = {-1.0001000, 1.0010005, -4.9950023, -0.5};
  for (int b = 0; b < 4; ++b)
    EXPECT_TRUE(relNear(result->policyTerms[b], terms[b], 1e-6)) << "b = " << b;
  EXPECT_TRUE(relNear(result->policyLoss, -1.3735254, 1e-6));
  EXPECT_EQ(result->loss, result->policyLoss);
  EXPECT_EQ(result->kl, T(0));
  EXPECT_TRUE(relNear(result->clipFrac, 0.75, 1e-12));
  EXPECT_TRUE(relNear(result->approxKl, 0.5 * 3e-6 / 4, 1e-5));
  EXPECT_TRUE(relNear(result->ratio[0], std::exp(1e-3), 1e-6));
}

TYPED_TEST(GrpoLossTypedTest, OnPolicyRatioIsOne) {
  using T = TypeParam;
  std::vector<T> lp = {T(-1.2), T(-0.3), T(-7.5), T(2.25), T(0.0)};
  std::vector<T> adv = {T(0.4), T(-9), T(5.5), T(-0.7), T(1.3)};
  GrpoLossInputs<T> inputs;
  inputs.logProb = lp;
  inputs.oldLogProb = lp;
  inputs.advantages = adv;
  auto result = grpoLoss<T>(inputs, GrpoLossOptions());
  ASSERT_TRUE(result.ok()) << result.status();
  double expected = 0.0;
  for (T a : adv)
    expected -= std::clamp(static_cast<double>(a), -5.0, 5.0);
  expected /= 5.0;
  for (T r : result->ratio)
    EXPECT_EQ(r, T(1));
  EXPECT_TRUE(relNear(result->policyLoss, expected, 1e-6));
  EXPECT_EQ(result->clipFrac, T(0));
  EXPECT_EQ(result->approxKl, T(0));
}

/// batch 2, rowSize 2: every row has mean squared difference 0.5.
template <typename T> struct KlFixture {
  std::vector<T> lp = {0, 0};
  std::vector<T> adv = {1, -1};
  std::vector<T> mean = {1, 2, 3, 4};
  std::vector<T> refMean = {1, 1, 3, 5};
  GrpoLossInputs<T> inputs() const {
    GrpoLossInputs<T> in;
    in.logProb = lp;
    in.oldLogProb = lp;
    in.advantages = adv;
    in.mean = mean;
    in.refMean = refMean;
    in.std = T(0.5);
    return in;
  }
};

TYPED_TEST(GrpoLossTypedTest, ReferenceKl) {
  using T = TypeParam;
  KlFixture<T> fixture;
  GrpoLossOptions options;
  options.beta = 0.04;
  auto result = grpoLoss<T>(fixture.inputs(), options);
  ASSERT_TRUE(result.ok()) << result.status();
  // 0.5 / (2 * 0.5^2) = 1 per row.
  EXPECT_TRUE(relNear(result->kl, 1.0, 1e-7));
  EXPECT_TRUE(relNear(result->loss, result->policyLoss + 0.04, 1e-6));
  // With beta 0 the KL is still reported but does not enter the loss.
  options.beta = 0.0;
  result = grpoLoss<T>(fixture.inputs(), options);
  ASSERT_TRUE(result.ok());
  EXPECT_TRUE(relNear(result->kl, 1.0, 1e-7));
  EXPECT_EQ(result->loss, result->policyLoss);
}

TYPED_TEST(GrpoLossTypedTest, ExactKl) {
  using T = TypeParam;
  KlFixture<T> fixture;
  GrpoLossInputs<T> inputs = fixture.inputs();
  inputs.dt = T(-0.25);
  GrpoLossOptions options;
  options.beta = 0.5;
  options.klForm = KlForm::Exact;
  auto result = grpoLoss<T>(inputs, options);
  ASSERT_TRUE(result.ok()) << result.status();
  // q = 0.5 * sqrt(0.25) = 0.25; 0.5 / (2 * 0.0625) = 4.
  EXPECT_TRUE(relNear(result->kl, 4.0, 1e-7));
  EXPECT_TRUE(relNear(result->loss, result->policyLoss + 2.0, 1e-6));
}

/// KL(N(m1, s1^2) || N(m2, s2^2)) in closed form.
double gaussianKl(double m1, double s1, double m2, double s2) {
  return std::log(s2 / s1) + (s1 * s1 + (m1 - m2) * (m1 - m2)) / (2 * s2 * s2) -
         0.5;
}

TYPED_TEST(GrpoLossTypedTest, ExactKlIsTheKlOfTheTransitionsForBothStepTypes) {
  // For each step type: the policy and the reference step from the same x
  // with different velocities. The transition std q is measured from the
  // rollout step itself (x' = mu + q e, so q = (x' - mu) / e), and the KL of
  // the two Gaussian transitions N(mu, q^2) and N(mu_ref, q^2), averaged
  // over elements and rows, must be what the exact form reports. For cps
  // the std sde_step returns already is q (no sqrt(-dt)).
  using T = TypeParam;
  std::vector<float> sigmas = *staticShiftSigmas(10, 3.0);
  const int64_t batch = 2, step = 2;
  std::vector<T> x = {0.5, -1, 2, 0, 0.25, 1.5, -0.75, 1};
  std::vector<T> v = {-0.3, 0.8, -1.5, 0.25, 0.1, -0.6, 0.9, -1.2};
  std::vector<T> vRef = {-0.2, 0.7, -1.6, 0.35, 0.3, -0.5, 0.8, -1.0};
  std::vector<T> e = {1, -0.5, 0.25, 2, -1.5, 0.75, 0.5, -0.25};
  for (SdeType type : {SdeType::Sde, SdeType::Cps}) {
    SdeStepOptions so;
    so.type = type;
    so.noiseLevel = type == SdeType::Sde ? 0.7 : 0.8;
    auto rollout = sdeStepWithNoise<T>(sigmas, step, so, batch, x, v, e);
    ASSERT_TRUE(rollout.ok()) << rollout.status();
    auto policy =
        sdeStepWithNext<T>(sigmas, step, so, batch, x, v, rollout->next);
    auto ref =
        sdeStepWithNext<T>(sigmas, step, so, batch, x, vRef, rollout->next);
    ASSERT_TRUE(policy.ok() && ref.ok());
    double q = (double(rollout->next[0]) - double(rollout->mean[0])) / e[0];
    double want = 0.0;
    for (int64_t b = 0; b < batch; ++b) {
      double row = 0.0;
      for (int64_t j = 0; j < 4; ++j)
        row += gaussianKl(policy->mean[b * 4 + j], q, ref->mean[b * 4 + j], q);
      want += row / 4.0;
    }
    want /= double(batch);

    std::vector<T> lp = policy->logProb, adv(batch, T(0));
    GrpoLossInputs<T> inputs;
    inputs.logProb = lp;
    inputs.oldLogProb = lp;
    inputs.advantages = adv;
    inputs.mean = policy->mean;
    inputs.refMean = ref->mean;
    inputs.std = policy->std;
    GrpoLossOptions options;
    options.klForm = KlForm::Exact;
    options.sdeType = type;
    if (type == SdeType::Sde)
      inputs.dt =
          static_cast<T>(sigmas[step + 1]) - static_cast<T>(sigmas[step]);
    auto result = grpoLoss<T>(inputs, options);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_TRUE(relNear(result->kl, want, 1e-5))
        << sdeTypeName(type) << ": kl " << result->kl << " want " << want;
    if (type == SdeType::Cps) {
      // There the exact form is the reference form.
      options.klForm = KlForm::Reference;
      auto reference = grpoLoss<T>(inputs, options);
      ASSERT_TRUE(reference.ok());
      EXPECT_EQ(reference->kl, result->kl);
    }
  }
}

TYPED_TEST(GrpoLossTypedTest, NaNPropagates) {
  using T = TypeParam;
  std::vector<T> lp = {std::numeric_limits<T>::quiet_NaN(), 0};
  std::vector<T> oldLp = {0, 0};
  std::vector<T> adv = {1, 1};
  GrpoLossInputs<T> inputs;
  inputs.logProb = lp;
  inputs.oldLogProb = oldLp;
  inputs.advantages = adv;
  auto result = grpoLoss<T>(inputs, GrpoLossOptions());
  ASSERT_TRUE(result.ok());
  EXPECT_TRUE(std::isnan(result->policyTerms[0]));
  EXPECT_TRUE(std::isnan(result->loss));
}

TEST(GrpoLossTest, ParseKlForm) {
  EXPECT_EQ(*parseKlForm("reference"), KlForm::Reference);
  EXPECT_EQ(*parseKlForm("exact"), KlForm::Exact);
  EXPECT_TRUE(isUserError(parseKlForm("kl3").status(), "'kl3'"));
}

TEST(GrpoLossTest, Errors) {
  KlFixture<float> fixture;
  std::vector<float> three = {0, 0, 0};
  auto run = [](GrpoLossInputs<float> in, GrpoLossOptions options) {
    return grpoLoss<float>(in, options).status();
  };
  GrpoLossOptions defaults;

  GrpoLossInputs<float> in;
  EXPECT_TRUE(isUserError(run(in, defaults), "log_prob must have at least"));

  in = fixture.inputs();
  in.oldLogProb = three;
  EXPECT_TRUE(isUserError(run(in, defaults),
                          "old_log_prob has 3 samples but log_prob has 2"));
  in = fixture.inputs();
  in.advantages = three;
  EXPECT_TRUE(isUserError(run(in, defaults),
                          "advantages has 3 samples but log_prob has 2"));

  GrpoLossOptions options;
  options.clipRange = -1e-4;
  EXPECT_TRUE(isUserError(run(fixture.inputs(), options), "clip_range"));
  options = defaults;
  options.advClipMax = NAN;
  EXPECT_TRUE(isUserError(run(fixture.inputs(), options), "adv_clip_max"));
  options = defaults;
  options.beta = -0.1;
  EXPECT_TRUE(isUserError(run(fixture.inputs(), options), "beta"));

  in = fixture.inputs();
  in.refMean = {};
  EXPECT_TRUE(isUserError(run(in, defaults), "but ref_mean is missing"));
  in = fixture.inputs();
  in.std.reset();
  in.mean = {};
  EXPECT_TRUE(isUserError(run(in, defaults), "but mean, std are missing"));

  in = fixture.inputs();
  in.mean = {};
  in.refMean = {};
  in.std.reset();
  options = defaults;
  options.beta = 0.04;
  EXPECT_TRUE(isUserError(run(in, options), "beta is 0.04 but the kl"));

  in = fixture.inputs();
  in.mean = three;
  in.refMean = three;
  EXPECT_TRUE(isUserError(run(in, defaults), "mean has 3 elements"));
  in = fixture.inputs();
  in.refMean = three;
  EXPECT_TRUE(
      isUserError(run(in, defaults), "ref_mean has 3 elements but mean has 4"));
  in = fixture.inputs();
  in.std = 0.0f;
  EXPECT_TRUE(isUserError(run(in, defaults), "std must be positive"));

  options = defaults;
  options.klForm = KlForm::Exact;
  EXPECT_TRUE(isUserError(run(fixture.inputs(), options), "needs dt"));
  in = fixture.inputs();
  in.dt = 0.1f;
  EXPECT_TRUE(isUserError(run(in, options), "dt must be negative"));
  in.dt = -0.1f;
  options.sdeType = SdeType::Cps;
  EXPECT_TRUE(isUserError(run(in, options), "of a cps step takes no dt"));
  options.sdeType = SdeType::Ode;
  EXPECT_TRUE(isUserError(run(fixture.inputs(), options),
                          "needs sde_type sde or cps but is ode"));
}

} // namespace
} // namespace omni::flowgrpo
