//===- SdeStepTest.cpp - Tests for sde_step ---------------------*- C++ -*-===//
//
// The per-step and one-step numbers of docs/flowgrpo-math.md section 8 (SD3.5
// schedule, shift 3, N = 10) in both instantiations, the Euler special cases
// (no NaN, no inf), rollout/training consistency, and every user error.
//
//===----------------------------------------------------------------------===//

#include "runtime/flowgrpo/SdeStep.h"

#include "math/flowgrpo/Schedule.h"
#include "math/flowgrpo/testing/TestHelpers.h"

#include "gtest/gtest.h"

#include <cmath>
#include <random>

namespace omni::flowgrpo {
namespace {

using testing::docNear;
using testing::isUserError;
using testing::relNear;

std::vector<float> sd35Sigmas() {
  absl::StatusOr<std::vector<float>> sigmas = staticShiftSigmas(10, 3.0);
  EXPECT_TRUE(sigmas.ok()) << sigmas.status();
  return sigmas.ok() ? *sigmas : std::vector<float>();
}

SdeStepOptions sdeOptions(double a) { return {SdeType::Sde, a}; }
SdeStepOptions cpsOptions(double a) { return {SdeType::Cps, a}; }

template <typename T> class SdeStepTypedTest : public ::testing::Test {};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(SdeStepTypedTest, Precisions);

TYPED_TEST(SdeStepTypedTest, SdeStdDevAndTransitionStd) {
  using T = TypeParam;
  std::vector<float> sigmas = sd35Sigmas();
  const double stdDev[] = {3.5056713, 3.4350739, 2.2726343, 1.7185003};
  const double q[] = {0.7000000, 0.7429641, 0.5361523};
  for (int i = 0; i < 4; ++i) {
    auto c = sdeCoefficients<T>(sigmas, i, sdeOptions(0.7));
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_TRUE(relNear(c->std, stdDev[i], 1e-6)) << "i = " << i;
    EXPECT_FALSE(c->deterministic);
    if (i < 3) {
      EXPECT_TRUE(relNear(c->transitionStd, q[i], 1e-6)) << "i = " << i;
    }
  }
}

TYPED_TEST(SdeStepTypedTest, CpsStd) {
  using T = TypeParam;
  std::vector<float> sigmas = sd35Sigmas();
  auto c0 = sdeCoefficients<T>(sigmas, 0, cpsOptions(0.8));
  auto c1 = sdeCoefficients<T>(sigmas, 1, cpsOptions(0.8));
  auto last = sdeCoefficients<T>(sigmas, 9, cpsOptions(0.8));
  ASSERT_TRUE(c0.ok() && c1.ok() && last.ok());
  EXPECT_TRUE(relNear(c0->std, 0.9131373, 1e-6));
  EXPECT_TRUE(relNear(c1->std, 0.8686465, 1e-6));
  EXPECT_EQ(c0->transitionStd, c0->std);
  EXPECT_EQ(last->std, T(0));
}

const std::vector<double> kX = {0.5, -1, 2, 0};
const std::vector<double> kV = {-0.3, 0.8, -1.5, 0.25};
const std::vector<double> kE = {1, -0.5, 0.25, 2};

template <typename T> std::vector<T> as(const std::vector<double> &values) {
  return std::vector<T>(values.begin(), values.end());
}

TYPED_TEST(SdeStepTypedTest, OneStepSde) {
  using T = TypeParam;
  std::vector<float> sigmas = sd35Sigmas();
  std::vector<T> x = as<T>(kX), v = as<T>(kV), e = as<T>(kE);
  auto result = sdeStepWithNoise<T>(sigmas, 0, sdeOptions(0.7), 1, x, v, e);
  ASSERT_TRUE(result.ok()) << result.status();
  const double mu[] = {0.3894612, -0.7868966, 1.5698061, -0.0099677};
  const double next[] = {1.0894611, -1.1368966, 1.7448061, 1.3900322};
  for (int k = 0; k < 4; ++k) {
    EXPECT_TRUE(docNear(result->mean[k], mu[k])) << "k = " << k;
    EXPECT_TRUE(docNear(result->next[k], next[k])) << "k = " << k;
  }
  ASSERT_EQ(result->logProb.size(), 1u);
  EXPECT_TRUE(relNear(result->logProb[0], -1.2263260, 1e-6));
  EXPECT_TRUE(relNear(result->std, 3.5056713, 1e-6));
  EXPECT_TRUE(result->logProbDefined);

  // Training recomputes the same mean and log-prob from the stored sample.
  auto training =
      sdeStepWithNext<T>(sigmas, 0, sdeOptions(0.7), 1, x, v, result->next);
  ASSERT_TRUE(training.ok()) << training.status();
  EXPECT_EQ(training->mean, result->mean);
  EXPECT_EQ(training->next, result->next);
  EXPECT_TRUE(relNear(training->logProb[0], result->logProb[0], 1e-6));
}

TYPED_TEST(SdeStepTypedTest, OneStepCps) {
  using T = TypeParam;
  std::vector<float> sigmas = sd35Sigmas();
  std::vector<T> x = as<T>(kX), v = as<T>(kV), e = as<T>(kE);
  auto result = sdeStepWithNoise<T>(sigmas, 0, cpsOptions(0.8), 1, x, v, e);
  ASSERT_TRUE(result.ok()) << result.status();
  const double mu[] = {0.1802447, -0.3684634, 0.7329398, -0.0099677};
  for (int k = 0; k < 4; ++k) {
    EXPECT_TRUE(docNear(result->mean[k], mu[k])) << "k = " << k;
    EXPECT_TRUE(relNear(result->next[k],
                        mu[k] + 0.9131373 * kE[static_cast<size_t>(k)], 1e-6))
        << "k = " << k;
  }
  EXPECT_TRUE(relNear(result->logProb[0], -1.1074166, 1e-6));

  auto training =
      sdeStepWithNext<T>(sigmas, 0, cpsOptions(0.8), 1, x, v, result->next);
  ASSERT_TRUE(training.ok()) << training.status();
  EXPECT_TRUE(relNear(training->logProb[0], -1.1074166, 1e-6));
}

/// Every Euler variant: mean == x + v dt exactly, log-prob all zeros and
/// flagged undefined, nothing NaN or inf.
template <typename T>
void expectEuler(const absl::StatusOr<SdeStepResult<T>> &result,
                 const std::vector<T> &x, const std::vector<T> &v, T dt,
                 const std::vector<T> *givenNext) {
  ASSERT_TRUE(result.ok()) << result.status();
  for (size_t k = 0; k < x.size(); ++k) {
    T euler = x[k] + v[k] * dt;
    EXPECT_EQ(result->mean[k], euler) << "k = " << k;
    EXPECT_EQ(result->next[k], givenNext ? (*givenNext)[k] : euler);
  }
  for (T lp : result->logProb) {
    EXPECT_TRUE(std::isfinite(lp));
    EXPECT_EQ(lp, T(0));
  }
  EXPECT_FALSE(result->logProbDefined);
  EXPECT_EQ(result->std, T(0));
}

TYPED_TEST(SdeStepTypedTest, NoiseLevelZeroIsEuler) {
  using T = TypeParam;
  std::vector<float> sigmas = sd35Sigmas();
  std::vector<T> x = as<T>(kX), v = as<T>(kV), e = as<T>(kE);
  for (int64_t step : {0, 2, 9}) {
    T dt = static_cast<T>(sigmas[step + 1]) - static_cast<T>(sigmas[step]);
    for (SdeStepOptions options : {cpsOptions(0.0), sdeOptions(0.0),
                                   SdeStepOptions{SdeType::Ode, 0.7}}) {
      SCOPED_TRACE(::testing::Message()
                   << "step " << step << " type "
                   << std::string(sdeTypeName(options.type)) << " a "
                   << options.noiseLevel);
      expectEuler<T>(sdeStepWithNoise<T>(sigmas, step, options, 1, x, v, e), x,
                     v, dt, nullptr);
      expectEuler<T>(sdeStepWithNext<T>(sigmas, step, options, 1, x, v, e), x,
                     v, dt, &e);
    }
  }
}

TYPED_TEST(SdeStepTypedTest, CpsStepTwoNoiseZeroEqualsEuler) {
  // docs/flowgrpo-math.md section 8: "step 2, cps, a = 0: mu equals the Euler
  // step".
  using T = TypeParam;
  std::vector<float> sigmas = sd35Sigmas();
  std::vector<T> x = as<T>(kX), v = as<T>(kV), e = as<T>(kE);
  auto result = sdeStepWithNoise<T>(sigmas, 2, cpsOptions(0.0), 1, x, v, e);
  ASSERT_TRUE(result.ok());
  T dt = static_cast<T>(sigmas[3]) - static_cast<T>(sigmas[2]);
  for (size_t k = 0; k < 4; ++k)
    EXPECT_TRUE(relNear(result->mean[k], x[k] + v[k] * dt, 1e-6));
}

TYPED_TEST(SdeStepTypedTest, LastStepsStayFinite) {
  using T = TypeParam;
  std::vector<float> sigmas = sd35Sigmas();
  std::vector<T> x = as<T>(kX), v = as<T>(kV), e = as<T>(kE);
  for (SdeStepOptions options : {cpsOptions(0.8), sdeOptions(0.7)}) {
    auto result = sdeStepWithNoise<T>(sigmas, 9, options, 1, x, v, e);
    ASSERT_TRUE(result.ok()) << result.status();
    for (size_t k = 0; k < 4; ++k) {
      EXPECT_TRUE(std::isfinite(result->next[k]));
      EXPECT_TRUE(std::isfinite(result->mean[k]));
    }
    EXPECT_TRUE(std::isfinite(result->logProb[0]));
    EXPECT_TRUE(std::isfinite(result->std));
  }
  // cps at the last step: std 0, x' = mu, log-prob exactly 0.
  auto cps = sdeStepWithNoise<T>(sigmas, 9, cpsOptions(0.8), 1, x, v, e);
  ASSERT_TRUE(cps.ok());
  EXPECT_EQ(cps->std, T(0));
  EXPECT_EQ(cps->next, cps->mean);
  EXPECT_EQ(cps->logProb[0], T(0));
}

TYPED_TEST(SdeStepTypedTest, LogProbIsTheRowMean) {
  // Batch rows are independent, and each row's log-prob is the mean (not the
  // sum) of its elementwise terms: a batch of two rows equals two batches of
  // one, and duplicating a row's elements keeps its log-prob.
  using T = TypeParam;
  std::vector<float> sigmas = sd35Sigmas();
  std::vector<T> x = as<T>(kX), v = as<T>(kV), e = as<T>(kE);
  std::vector<T> x2(x), v2(v), e2(e);
  x2.insert(x2.end(), x.rbegin(), x.rend());
  v2.insert(v2.end(), v.rbegin(), v.rend());
  e2.insert(e2.end(), e.begin(), e.end());
  for (SdeStepOptions options : {sdeOptions(0.7), cpsOptions(0.8)}) {
    auto both = sdeStepWithNoise<T>(sigmas, 3, options, 2, x2, v2, e2);
    auto first = sdeStepWithNoise<T>(sigmas, 3, options, 1, x, v, e);
    auto asOneRow = sdeStepWithNoise<T>(sigmas, 3, options, 1, x2, v2, e2);
    ASSERT_TRUE(both.ok() && first.ok() && asOneRow.ok());
    ASSERT_EQ(both->logProb.size(), 2u);
    EXPECT_EQ(both->logProb[0], first->logProb[0]);
    EXPECT_TRUE(relNear(asOneRow->logProb[0],
                        (both->logProb[0] + both->logProb[1]) / 2, 1e-6));
  }
}

TEST(SdeStepTest, FloatAndDoubleAgree) {
  std::vector<float> sigmas = sd35Sigmas();
  std::mt19937 rng(1234);
  std::normal_distribution<double> normal;
  const int64_t batch = 3, row = 17;
  std::vector<double> xd, vd, ed;
  for (int64_t k = 0; k < batch * row; ++k) {
    // Round through float so both instantiations see identical inputs.
    xd.push_back(static_cast<float>(normal(rng)));
    vd.push_back(static_cast<float>(normal(rng)));
    ed.push_back(static_cast<float>(normal(rng)));
  }
  std::vector<float> xf(xd.begin(), xd.end()), vf(vd.begin(), vd.end()),
      ef(ed.begin(), ed.end());
  for (SdeStepOptions options :
       {sdeOptions(0.7), cpsOptions(0.8), sdeOptions(0.0)}) {
    for (int64_t step = 0; step < 10; ++step) {
      auto f =
          sdeStepWithNoise<float>(sigmas, step, options, batch, xf, vf, ef);
      auto d =
          sdeStepWithNoise<double>(sigmas, step, options, batch, xd, vd, ed);
      ASSERT_TRUE(f.ok() && d.ok());
      for (size_t k = 0; k < xd.size(); ++k) {
        EXPECT_NEAR(f->mean[k], d->mean[k], 1e-5 * (1 + std::fabs(d->mean[k])));
        EXPECT_NEAR(f->next[k], d->next[k], 1e-5 * (1 + std::fabs(d->next[k])));
      }
      for (int64_t b = 0; b < batch; ++b)
        EXPECT_NEAR(f->logProb[b], d->logProb[b],
                    1e-5 * (1 + std::fabs(d->logProb[b])))
            << "step " << step;
      EXPECT_NEAR(f->std, d->std, 1e-6 * (1 + d->std));
    }
  }
}

TEST(SdeStepTest, ParseType) {
  EXPECT_EQ(*parseSdeType("sde"), SdeType::Sde);
  EXPECT_EQ(*parseSdeType("cps"), SdeType::Cps);
  EXPECT_EQ(*parseSdeType("ode"), SdeType::Ode);
  EXPECT_TRUE(isUserError(parseSdeType("SDE").status(), "'SDE'"));
  for (SdeType type : {SdeType::Sde, SdeType::Cps, SdeType::Ode})
    EXPECT_EQ(*parseSdeType(sdeTypeName(type)), type);
}

TEST(SdeStepTest, CoefficientErrors) {
  std::vector<float> sigmas = sd35Sigmas();
  auto coeffs = [](std::vector<float> table, int64_t step,
                   SdeStepOptions options) {
    return sdeCoefficients<float>(table, step, options).status();
  };
  EXPECT_TRUE(isUserError(coeffs(sigmas, -1, sdeOptions(0.7)),
                          "step must be in [0, 10) for 11 sigmas but is -1"));
  EXPECT_TRUE(isUserError(coeffs(sigmas, 10, sdeOptions(0.7)), "is 10"));
  EXPECT_TRUE(isUserError(coeffs({1.0f}, 0, sdeOptions(0.7)),
                          "at least 2 entries but has 1"));
  EXPECT_TRUE(isUserError(coeffs(sigmas, 0, sdeOptions(-0.1)), "noise_level"));
  EXPECT_TRUE(isUserError(coeffs(sigmas, 0, sdeOptions(NAN)), "noise_level"));
  EXPECT_TRUE(isUserError(coeffs({1.5f, 0.5f, 0.0f}, 0, sdeOptions(0.7)),
                          "s[0] must be in (0, 1]"));
  EXPECT_TRUE(isUserError(coeffs({1.0f, 0.0f, 0.0f}, 1, sdeOptions(0.7)),
                          "s[1] must be in (0, 1]"));
  EXPECT_TRUE(isUserError(coeffs({1.0f, 1.0f, 0.0f}, 0, cpsOptions(0.8)),
                          "s[1] must be in [0, s[0] = 1)"));
  EXPECT_TRUE(isUserError(coeffs({0.5f, 0.7f, 0.0f}, 0, sdeOptions(0.0)),
                          "s[1] must be in [0, s[0]"));
  // An sde step at sigma 1 past step 0 needs s[1] < 1 for its denominator.
  EXPECT_TRUE(isUserError(coeffs({0.9f, 1.0f, 0.5f, 0.0f}, 1, sdeOptions(0.7)),
                          "sde step at sigma 1 needs s[1] < 1"));
}

TEST(SdeStepTest, ShapeErrors) {
  std::vector<float> sigmas = sd35Sigmas();
  std::vector<float> x(8, 0.5f), v(8, 0.1f), e(8, 1.0f), shortV(7, 0.1f),
      odd(7, 0.5f);
  auto withNoise = [&](int64_t batch, const std::vector<float> &xs,
                       const std::vector<float> &vs,
                       const std::vector<float> &es) {
    return sdeStepWithNoise<float>(sigmas, 0, sdeOptions(0.7), batch, xs, vs,
                                   es)
        .status();
  };
  EXPECT_TRUE(isUserError(withNoise(0, x, v, e), "batch must be >= 1"));
  EXPECT_TRUE(
      isUserError(withNoise(3, x, v, e), "x has 8 elements but a batch of 3"));
  EXPECT_TRUE(isUserError(withNoise(1, {}, {}, {}), "x has 0 elements"));
  EXPECT_TRUE(isUserError(withNoise(2, odd, odd, odd),
                          "x has 7 elements but a batch of 2"));
  EXPECT_TRUE(
      isUserError(withNoise(2, x, shortV, e), "v has 7 elements but x has 8"));
  EXPECT_TRUE(isUserError(withNoise(2, x, v, shortV),
                          "noise has 7 elements but x has 8"));
  EXPECT_TRUE(isUserError(
      sdeStepWithNext<float>(sigmas, 0, sdeOptions(0.7), 2, x, v, shortV)
          .status(),
      "next has 7 elements but x has 8"));
  // Shape errors do not depend on the noise level.
  EXPECT_TRUE(isUserError(
      sdeStepWithNoise<float>(sigmas, 0, sdeOptions(0.0), 2, x, v, shortV)
          .status(),
      "noise has 7 elements"));
  // Step errors are reported by the step entry points too.
  EXPECT_TRUE(isUserError(sdeStepWithNext<double>(sigmas, 12, sdeOptions(0.7),
                                                  1, std::vector<double>(4),
                                                  std::vector<double>(4),
                                                  std::vector<double>(4))
                              .status(),
                          "but is 12"));
}

} // namespace
} // namespace omni::flowgrpo
