//===- DetMathTest.cpp - Tests for detLog and detCos ------------*- C++ -*-===//
//
// Accuracy against the C library on the whole Box-Muller domain (every u1
// and every 2 pi u2 the sampler can produce, exhaustively) and on wide random
// and adversarial sets, plus the special values. The C library is only the
// yardstick here; it is never used to generate random numbers.
//
//===----------------------------------------------------------------------===//

#include "runtime/flowgrpo/DetMath.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

namespace omni::flowgrpo {
namespace {

constexpr double kTolerance = 1e-12;
constexpr double kTwoPi = 0x1.921fb54442d18p+2;

double relError(double actual, double expected) {
  if (actual == expected)
    return 0.0;
  return std::fabs(actual - expected) / std::fabs(expected);
}

TEST(DetMathTest, LogOnEveryBoxMullerRadiusInput) {
  // u1 = k * 2^-24 for k = 1..2^24: all values philoxNormal can pass.
  double worst = 0.0;
  for (uint32_t k = 1; k <= (1u << 24); ++k) {
    double u = static_cast<double>(k) * 0x1p-24;
    double expected = std::log(u);
    if (expected == 0.0) {
      EXPECT_EQ(detLog(u), 0.0);
      continue;
    }
    worst = std::max(worst, relError(detLog(u), expected));
  }
  EXPECT_LT(worst, kTolerance);
  RecordProperty("worst_relative_error", std::to_string(worst));
}

TEST(DetMathTest, LogOnRandomDoubles) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> exponent(-1070.0, 1023.0);
  std::uniform_real_distribution<double> near1(-1e-3, 1e-3);
  double worst = 0.0;
  for (int i = 0; i < 200000; ++i) {
    double x = std::exp2(exponent(rng));
    worst = std::max(worst, relError(detLog(x), std::log(x)));
    double y = 1.0 + near1(rng);
    if (y != 1.0)
      worst = std::max(worst, relError(detLog(y), std::log(y)));
  }
  // Subnormals and the extremes.
  for (double x :
       {std::numeric_limits<double>::denorm_min(), 0x1p-1050,
        std::numeric_limits<double>::min(), std::numeric_limits<double>::max(),
        0.5, 2.0, 1e-300, std::nextafter(1.0, 2.0), std::nextafter(1.0, 0.0)})
    worst = std::max(worst, relError(detLog(x), std::log(x)));
  EXPECT_LT(worst, kTolerance);
}

TEST(DetMathTest, LogSpecialValues) {
  EXPECT_EQ(detLog(1.0), 0.0);
  EXPECT_EQ(detLog(0.0), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(detLog(-0.0), -std::numeric_limits<double>::infinity());
  EXPECT_EQ(detLog(std::numeric_limits<double>::infinity()),
            std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(detLog(-1.0)));
  EXPECT_TRUE(std::isnan(detLog(std::numeric_limits<double>::quiet_NaN())));
}

TEST(DetMathTest, CosOnEveryBoxMullerAngle) {
  // 2 pi u2 for u2 = k * 2^-24, k = 0..2^24 - 1, as philoxNormal forms it.
  double worst = 0.0;
  for (uint32_t k = 0; k < (1u << 24); ++k) {
    double theta = kTwoPi * (static_cast<double>(k) * 0x1p-24);
    worst = std::max(worst, relError(detCos(theta), std::cos(theta)));
  }
  EXPECT_LT(worst, kTolerance);
  RecordProperty("worst_relative_error", std::to_string(worst));
}

TEST(DetMathTest, CosOnRandomArguments) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> wide(-0x1p20, 0x1p20);
  std::uniform_real_distribution<double> narrow(-10.0, 10.0);
  double worst = 0.0;
  for (int i = 0; i < 200000; ++i) {
    double x = wide(rng);
    worst = std::max(worst, relError(detCos(x), std::cos(x)));
    double y = narrow(rng);
    worst = std::max(worst, relError(detCos(y), std::cos(y)));
  }
  EXPECT_LT(worst, kTolerance);
}

TEST(DetMathTest, CosNextToItsZeros) {
  // The doubles nearest to odd multiples of pi/2, where cos is tiny and a
  // naive reduction would lose every correct digit.
  double worst = 0.0;
  for (int64_t n = -600000; n <= 600000; n += 37) {
    double x = static_cast<double>(2 * n + 1) * (kTwoPi / 4.0);
    if (std::fabs(x) > 0x1p20)
      continue;
    for (double y : {x, std::nextafter(x, 0.0), std::nextafter(x, 1e300)})
      worst = std::max(worst, relError(detCos(y), std::cos(y)));
  }
  EXPECT_LT(worst, kTolerance);
}

TEST(DetMathTest, CosSpecialValuesAndDomain) {
  EXPECT_EQ(detCos(0.0), 1.0);
  EXPECT_EQ(detCos(-0.0), 1.0);
  EXPECT_LT(relError(detCos(0x1p20), std::cos(0x1p20)), kTolerance);
  EXPECT_TRUE(std::isnan(detCos(std::nextafter(0x1p20, 1e300))));
  EXPECT_TRUE(std::isnan(detCos(-0x1p21)));
  EXPECT_TRUE(std::isnan(detCos(std::numeric_limits<double>::infinity())));
  EXPECT_TRUE(std::isnan(detCos(std::numeric_limits<double>::quiet_NaN())));
}

} // namespace
} // namespace omni::flowgrpo
