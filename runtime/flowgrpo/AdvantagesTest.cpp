//===- AdvantagesTest.cpp - Tests for group_advantages ----------*- C++ -*-===//
//
// docs/flowgrpo-math.md section 8's three option sets, the ddof = 1 variant,
// the degenerate groups (size 1, zero spread, eps 0) that must give 0 rather
// than NaN, and every user error.
//
//===----------------------------------------------------------------------===//

#include "runtime/flowgrpo/Advantages.h"

#include "math/flowgrpo/testing/TestHelpers.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace omni::flowgrpo {
namespace {

using testing::isUserError;
using testing::relNear;

template <typename T> class AdvantagesTypedTest : public ::testing::Test {};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(AdvantagesTypedTest, Precisions);

AdvantageOptions groupsOf(int64_t size) {
  AdvantageOptions options;
  options.groupSize = size;
  return options;
}

template <typename T>
std::vector<T> advantagesOf(const std::vector<T> &rewards,
                            const AdvantageOptions &options) {
  absl::StatusOr<std::vector<T>> result = groupAdvantages<T>(rewards, options);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *result : std::vector<T>();
}

TYPED_TEST(AdvantagesTypedTest, DocExampleGlobalStd) {
  using T = TypeParam;
  std::vector<T> a = advantagesOf<T>({1, 3, 0, 2}, groupsOf(2));
  ASSERT_EQ(a.size(), 4u);
  const double expected[] = {-0.8943472, 0.8943472, -0.8943472, 0.8943472};
  for (int i = 0; i < 4; ++i)
    EXPECT_TRUE(relNear(a[i], expected[i], 1e-6)) << "i = " << i;
}

TYPED_TEST(AdvantagesTypedTest, DocExamplePerGroupStd) {
  using T = TypeParam;
  AdvantageOptions options = groupsOf(2);
  options.globalStd = false;
  std::vector<T> a = advantagesOf<T>({1, 3, 0, 2}, options);
  const double expected[] = {-0.9999000, 0.9999000, -0.9999000, 0.9999000};
  for (int i = 0; i < 4; ++i)
    EXPECT_TRUE(relNear(a[i], expected[i], 1e-6)) << "i = " << i;
}

TYPED_TEST(AdvantagesTypedTest, DocExampleNoNormalization) {
  using T = TypeParam;
  AdvantageOptions options = groupsOf(2);
  options.normByStd = false;
  EXPECT_EQ(advantagesOf<T>({1, 3, 0, 2}, options),
            (std::vector<T>{-1, 1, -1, 1}));
}

TYPED_TEST(AdvantagesTypedTest, UnbiasedStd) {
  using T = TypeParam;
  AdvantageOptions options = groupsOf(2);
  options.ddof = 1;
  // Global: sum of squared deviations 5 over 3 degrees of freedom.
  double globalStd = std::sqrt(5.0 / 3.0);
  std::vector<T> a = advantagesOf<T>({1, 3, 0, 2}, options);
  EXPECT_TRUE(relNear(a[0], -1.0 / (globalStd + 1e-4), 1e-6));
  EXPECT_TRUE(relNear(a[3], 1.0 / (globalStd + 1e-4), 1e-6));
  // Per group: each group {r, r + 2} has unbiased std sqrt(2).
  options.globalStd = false;
  a = advantagesOf<T>({1, 3, 0, 2}, options);
  EXPECT_TRUE(relNear(a[1], 1.0 / (std::sqrt(2.0) + 1e-4), 1e-6));
}

TYPED_TEST(AdvantagesTypedTest, GroupOfOneGetsZero) {
  using T = TypeParam;
  for (bool global : {true, false}) {
    for (int64_t ddof : {0, 1}) {
      AdvantageOptions options = groupsOf(1);
      options.globalStd = global;
      options.ddof = ddof;
      EXPECT_EQ(advantagesOf<T>({1, 3, 0, 2}, options),
                (std::vector<T>{0, 0, 0, 0}))
          << "global " << global << " ddof " << ddof;
      // A single sample: ddof 1 leaves no degree of freedom, std is 0.
      EXPECT_EQ(advantagesOf<T>({5}, options), (std::vector<T>{0}));
    }
  }
}

TYPED_TEST(AdvantagesTypedTest, ZeroSpreadWithZeroEpsIsZeroNotNaN) {
  using T = TypeParam;
  AdvantageOptions options = groupsOf(2);
  options.eps = 0.0;
  EXPECT_EQ(advantagesOf<T>({2, 2, 2, 2}, options),
            (std::vector<T>{0, 0, 0, 0}));
  options.globalStd = false;
  std::vector<T> a = advantagesOf<T>({2, 2, 1, 3}, options);
  EXPECT_EQ(a[0], T(0));
  EXPECT_EQ(a[1], T(0));
  EXPECT_TRUE(relNear(a[2], -1.0, 1e-6));
}

TYPED_TEST(AdvantagesTypedTest, GroupsAreConsecutiveRuns) {
  using T = TypeParam;
  // Two prompts x group 3; a shift of one group's rewards moves only that
  // group's mean.
  AdvantageOptions options = groupsOf(3);
  options.normByStd = false;
  EXPECT_EQ(advantagesOf<T>({1, 2, 3, 10, 10, 13}, options),
            (std::vector<T>{-1, 0, 1, -1, -1, 2}));
}

TYPED_TEST(AdvantagesTypedTest, EmptyBatch) {
  using T = TypeParam;
  EXPECT_TRUE(advantagesOf<T>({}, groupsOf(4)).empty());
}

TEST(AdvantagesTest, LargeOffsetKeepsPrecision) {
  // JPEG rewards are -bytes / 500000: small spreads on a large offset. The
  // two-pass std keeps them; E[r^2] - E[r]^2 in float would not.
  std::vector<float> rewards = {-1000.0f, -1000.5f, -999.5f, -1000.0f};
  AdvantageOptions options = groupsOf(4);
  absl::StatusOr<std::vector<float>> a =
      groupAdvantages<float>(rewards, options);
  ASSERT_TRUE(a.ok());
  double std = std::sqrt(0.5 / 4.0);
  EXPECT_TRUE(relNear((*a)[1], -0.5 / (std + 1e-4), 1e-6));
}

/// The advantages of float rewards by the f64 formula: two-pass mean and
/// std over the float values promoted to double.
std::vector<double> f64Advantages(const std::vector<float> &r, size_t group,
                                  bool global) {
  auto stats = [&](size_t begin, size_t count) {
    double mean = 0.0, ss = 0.0;
    for (size_t i = begin; i < begin + count; ++i)
      mean += r[i];
    mean /= static_cast<double>(count);
    for (size_t i = begin; i < begin + count; ++i)
      ss += (r[i] - mean) * (r[i] - mean);
    return std::pair<double, double>(
        mean, std::sqrt(ss / static_cast<double>(count)));
  };
  double globalStd = stats(0, r.size()).second;
  std::vector<double> a(r.size());
  for (size_t g = 0; g < r.size(); g += group) {
    auto [mean, std] = stats(g, group);
    for (size_t i = g; i < g + group; ++i)
      a[i] = (r[i] - mean) / ((global ? globalStd : std) + 1e-4);
  }
  return a;
}

TEST(AdvantagesTest, OffsetRewardsMatchF64Formula) {
  // Rewards sharing a large offset: 1000 + 0.01 i (the group mean rounded to
  // float before the subtraction was 40% off here) and JPEG-sized rewards,
  // -bytes / 500000 for byte counts around 1600.
  std::vector<float> offset, jpeg;
  for (int i = 0; i < 16; ++i) {
    offset.push_back(1000.0f + 0.01f * static_cast<float>(i));
    jpeg.push_back(-static_cast<float>(1600 + (i * 37) % 23) / 500000.0f);
  }
  for (const std::vector<float> *rewards : {&offset, &jpeg}) {
    for (bool global : {true, false}) {
      AdvantageOptions options = groupsOf(8);
      options.globalStd = global;
      std::vector<float> a = advantagesOf<float>(*rewards, options);
      std::vector<double> want = f64Advantages(*rewards, 8, global);
      ASSERT_EQ(a.size(), want.size());
      for (size_t i = 0; i < a.size(); ++i)
        EXPECT_NEAR(a[i], want[i], 1e-6 * std::max(1.0, std::fabs(want[i])))
            << (rewards == &offset ? "offset" : "jpeg") << " global " << global
            << " i = " << i;
    }
  }
}

TEST(AdvantagesTest, FloatAndDoubleAgree) {
  std::vector<double> rd;
  for (int i = 0; i < 24; ++i)
    rd.push_back(static_cast<float>(std::sin(0.7 * i) * 3.0 + 0.1 * i));
  std::vector<float> rf(rd.begin(), rd.end());
  for (bool global : {true, false}) {
    AdvantageOptions options = groupsOf(6);
    options.globalStd = global;
    std::vector<double> d = advantagesOf<double>(rd, options);
    std::vector<float> f = advantagesOf<float>(rf, options);
    for (size_t i = 0; i < rd.size(); ++i)
      EXPECT_NEAR(f[i], d[i], 1e-6 * (1 + std::fabs(d[i])));
  }
}

TEST(AdvantagesTest, Errors) {
  std::vector<float> rewards = {1, 2, 3, 4, 5};
  auto status = [&](const AdvantageOptions &options) {
    return groupAdvantages<float>(rewards, options).status();
  };
  EXPECT_TRUE(
      isUserError(status(groupsOf(0)), "group_size must be >= 1 but is 0"));
  EXPECT_TRUE(isUserError(status(groupsOf(-2)), "is -2"));
  EXPECT_TRUE(isUserError(status(groupsOf(2)),
                          "batch size 5 is not divisible by group_size 2"));
  AdvantageOptions options = groupsOf(5);
  options.ddof = 2;
  EXPECT_TRUE(isUserError(status(options), "ddof must be 0 or 1 but is 2"));
  options.ddof = -1;
  EXPECT_TRUE(isUserError(status(options), "ddof"));
  options = groupsOf(5);
  options.eps = -1e-4;
  EXPECT_TRUE(isUserError(status(options), "eps must be a finite number >= 0"));
  options.eps = NAN;
  EXPECT_TRUE(isUserError(status(options), "eps"));
  options.eps = INFINITY;
  EXPECT_TRUE(isUserError(status(options), "eps"));
}

} // namespace
} // namespace omni::flowgrpo
