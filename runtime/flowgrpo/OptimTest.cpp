//===- OptimTest.cpp - Tests for AdamW and clip_grad_norm -------*- C++ -*-===//
//
// AdamW against a two-step update computed by hand (textbook formulas in
// float64, which torch's rearranged arithmetic equals to rounding), the
// decoupled decay, clip_grad_norm including torch's 1e-6 and the non-finite
// case, and every user error (which must leave the arrays untouched).
//
//===----------------------------------------------------------------------===//

#include "runtime/flowgrpo/Optim.h"

#include "math/flowgrpo/testing/TestHelpers.h"

#include "gtest/gtest.h"

#include <cmath>
#include <limits>

namespace omni::flowgrpo {
namespace {

using testing::isUserError;
using testing::relNear;

template <typename T> class OptimTypedTest : public ::testing::Test {};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(OptimTypedTest, Precisions);

TYPED_TEST(OptimTypedTest, AdamWTwoStepsByHand) {
  using T = TypeParam;
  // lr 0.1 and weight decay 0.01 make both effects visible in two steps.
  AdamWOptions options;
  options.lr = 0.1;
  options.weightDecay = 0.01;
  std::vector<T> param = {1.0, -2.0}, m(2, T(0)), v(2, T(0));
  // By hand, per step t: p *= 1 - lr wd; m = 0.9 m + 0.1 g;
  // v = 0.999 v + 0.001 g^2; p -= lr (m / (1 - 0.9^t)) /
  // (sqrt(v / (1 - 0.999^t)) + 1e-8).
  ASSERT_TRUE(adamwStep<T>(absl::MakeSpan(param), std::vector<T>{0.5, -0.1},
                           absl::MakeSpan(m), absl::MakeSpan(v), 1, options)
                  .ok());
  EXPECT_TRUE(relNear(param[0], 0.899000002, 1e-7));
  EXPECT_TRUE(relNear(param[1], -1.898000009999999, 1e-7));
  EXPECT_TRUE(relNear(m[0], 0.05, 1e-7));
  EXPECT_TRUE(relNear(v[1], 1e-5, 1e-6));
  ASSERT_TRUE(adamwStep<T>(absl::MakeSpan(param), std::vector<T>{0.2, 0.3},
                           absl::MakeSpan(m), absl::MakeSpan(v), 2, options)
                  .ok());
  EXPECT_TRUE(relNear(param[0], 0.8082434839009282, 1e-6));
  EXPECT_TRUE(relNear(param[1], -1.9455209911100655, 1e-6));
  EXPECT_TRUE(relNear(m[0], 0.065, 1e-6));
  EXPECT_TRUE(relNear(m[1], 0.021, 1e-6));
  EXPECT_TRUE(relNear(v[0], 0.00028975, 1e-6));
  EXPECT_TRUE(relNear(v[1], 9.999e-05, 1e-6));
}

TYPED_TEST(OptimTypedTest, AdamWFirstStepMovesByLr) {
  // Bias correction makes the first update lr * g / |g| (up to eps), with the
  // recipe defaults of docs/flowgrpo-math.md section 7.
  using T = TypeParam;
  AdamWOptions options;
  std::vector<T> param = {0.5, 0.5, 0.5}, m(3, T(0)), v(3, T(0));
  ASSERT_TRUE(adamwStep<T>(absl::MakeSpan(param),
                           std::vector<T>{3.0, -1e-3, 0.0}, absl::MakeSpan(m),
                           absl::MakeSpan(v), 1, options)
                  .ok());
  double decayed = 0.5 * (1.0 - 3e-4 * 1e-4);
  EXPECT_TRUE(relNear(param[0], decayed - 3e-4, 1e-6));
  EXPECT_TRUE(relNear(param[1], decayed + 3e-4 * (1e-3 / (1e-3 + 1e-8)), 1e-6));
  // Zero gradient: only the decoupled decay acts.
  EXPECT_TRUE(relNear(param[2], decayed, 1e-7));
}

TYPED_TEST(OptimTypedTest, ClipScalesByMaxOverNormPlusEps) {
  using T = TypeParam;
  std::vector<T> a = {3, 4}, b = {12};
  std::vector<absl::Span<T>> grads = {absl::MakeSpan(a), absl::MakeSpan(b)};
  auto result = clipGradNorm<T>(grads, 1.0);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(relNear(result->totalNorm, 13.0, 1e-7));
  EXPECT_TRUE(result->finite);
  EXPECT_TRUE(result->clipped);
  double scale = 1.0 / (13.0 + 1e-6);
  EXPECT_TRUE(relNear(result->scale, scale, 1e-7));
  EXPECT_TRUE(relNear(a[0], 3 * scale, 1e-6));
  EXPECT_TRUE(relNear(a[1], 4 * scale, 1e-6));
  EXPECT_TRUE(relNear(b[0], 12 * scale, 1e-6));
}

TYPED_TEST(OptimTypedTest, ClipLeavesSmallGradientsAlone) {
  using T = TypeParam;
  std::vector<T> a = {T(0.3)}, b = {T(0.4)};
  std::vector<absl::Span<T>> grads = {absl::MakeSpan(a), absl::MakeSpan(b)};
  auto result = clipGradNorm<T>(grads, 1.0);
  ASSERT_TRUE(result.ok());
  EXPECT_TRUE(relNear(result->totalNorm, 0.5, 1e-7));
  EXPECT_FALSE(result->clipped);
  EXPECT_EQ(result->scale, T(1));
  EXPECT_EQ(a[0], T(0.3));
  EXPECT_EQ(b[0], T(0.4));
}

TYPED_TEST(OptimTypedTest, ClipAtExactlyMaxNormFollowsTorch) {
  // torch clamps max_norm / (norm + 1e-6) at 1, so a norm equal to max_norm
  // is still scaled by 1 / (1 + 1e-6).
  using T = TypeParam;
  std::vector<T> a = {1};
  std::vector<absl::Span<T>> grads = {absl::MakeSpan(a)};
  auto result = clipGradNorm<T>(grads, 1.0);
  ASSERT_TRUE(result.ok());
  EXPECT_TRUE(result->clipped);
  EXPECT_TRUE(relNear(a[0], 1.0 / (1.0 + 1e-6), 1e-7));
}

TYPED_TEST(OptimTypedTest, ClipZeroesNonFiniteGradients) {
  using T = TypeParam;
  for (T bad : {std::numeric_limits<T>::infinity(),
                std::numeric_limits<T>::quiet_NaN()}) {
    std::vector<T> a = {1, bad}, b = {2};
    std::vector<absl::Span<T>> grads = {absl::MakeSpan(a), absl::MakeSpan(b)};
    auto result = clipGradNorm<T>(grads, 1.0);
    ASSERT_TRUE(result.ok());
    EXPECT_FALSE(result->finite);
    EXPECT_FALSE(std::isfinite(result->totalNorm));
    EXPECT_EQ(result->scale, T(0));
    EXPECT_EQ(a, (std::vector<T>{0, 0}));
    EXPECT_EQ(b, (std::vector<T>{0}));
  }
}

TEST(OptimTest, FloatAndDoubleAgree) {
  AdamWOptions options;
  options.lr = 1e-2;
  std::vector<float> pf = {0.25f, -1.5f, 3.0f}, mf(3, 0.0f), vf(3, 0.0f);
  std::vector<double> pd(pf.begin(), pf.end()), md(3, 0.0), vd(3, 0.0);
  for (int64_t t = 1; t <= 20; ++t) {
    std::vector<double> gd = {std::sin(0.3 * t), std::cos(0.7 * t) * 0.01,
                              -1.0 / t};
    std::vector<float> gf(gd.begin(), gd.end());
    ASSERT_TRUE(adamwStep<float>(absl::MakeSpan(pf), gf, absl::MakeSpan(mf),
                                 absl::MakeSpan(vf), t, options)
                    .ok());
    ASSERT_TRUE(adamwStep<double>(absl::MakeSpan(pd), gd, absl::MakeSpan(md),
                                  absl::MakeSpan(vd), t, options)
                    .ok());
  }
  for (size_t k = 0; k < 3; ++k)
    EXPECT_NEAR(pf[k], pd[k], 1e-5);
}

TEST(OptimTest, AdamWErrorsChangeNothing) {
  std::vector<float> param = {1, 2}, grad = {0.1f, 0.2f}, m = {0, 0},
                     v = {0, 0}, three = {0, 0, 0};
  AdamWOptions defaults;
  auto step = [&](absl::Span<const float> g, absl::Span<float> mm,
                  absl::Span<float> vv, int64_t t,
                  const AdamWOptions &options) {
    return adamwStep<float>(absl::MakeSpan(param), g, mm, vv, t, options);
  };
  EXPECT_TRUE(isUserError(
      step(three, absl::MakeSpan(m), absl::MakeSpan(v), 1, defaults),
      "grad has 3 elements but param has 2"));
  EXPECT_TRUE(isUserError(
      step(grad, absl::MakeSpan(three), absl::MakeSpan(v), 1, defaults),
      "exp_avg has 3 elements"));
  EXPECT_TRUE(isUserError(
      step(grad, absl::MakeSpan(m), absl::MakeSpan(three), 1, defaults),
      "exp_avg_sq has 3 elements"));
  EXPECT_TRUE(
      isUserError(step(grad, absl::MakeSpan(m), absl::MakeSpan(v), 0, defaults),
                  "step must be >= 1 (1-based) but is 0"));
  struct BadOption {
    void (*set)(AdamWOptions &);
    const char *name;
  };
  const BadOption bad[] = {
      {[](AdamWOptions &o) { o.lr = -1e-3; }, "lr"},
      {[](AdamWOptions &o) { o.eps = NAN; }, "eps"},
      {[](AdamWOptions &o) { o.weightDecay = -1; }, "weight_decay"},
      {[](AdamWOptions &o) { o.beta1 = 1.0; }, "beta1 must be in [0, 1)"},
      {[](AdamWOptions &o) { o.beta2 = -0.1; }, "beta2"},
  };
  for (const BadOption &b : bad) {
    AdamWOptions options;
    b.set(options);
    EXPECT_TRUE(isUserError(
        step(grad, absl::MakeSpan(m), absl::MakeSpan(v), 1, options), b.name));
  }
  EXPECT_EQ(param, (std::vector<float>{1, 2}));
  EXPECT_EQ(m, (std::vector<float>{0, 0}));
  EXPECT_EQ(v, (std::vector<float>{0, 0}));
}

TEST(OptimTest, ClipErrors) {
  std::vector<float> a = {3, 4};
  std::vector<absl::Span<float>> grads = {absl::MakeSpan(a)};
  for (double maxNorm :
       {0.0, -1.0, static_cast<double>(INFINITY), static_cast<double>(NAN)})
    EXPECT_TRUE(
        isUserError(clipGradNorm<float>(grads, maxNorm).status(), "max_norm"))
        << maxNorm;
  EXPECT_EQ(a, (std::vector<float>{3, 4}));
}

} // namespace
} // namespace omni::flowgrpo
