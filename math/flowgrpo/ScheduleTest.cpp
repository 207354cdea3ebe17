//===- ScheduleTest.cpp - Tests for the sigma schedules ---------*- C++ -*-===//
//
// Checks the static schedule against docs/flowgrpo-math.md section 8 and
// bit-exactly against numpy, and the dynamic schedule against (a) values
// computed independently with numpy 2.4 following diffusers' code and (b) a
// plain float64 evaluation of the formula in docs/flowgrpo-math.md section 1.
//
//===----------------------------------------------------------------------===//

#include "math/flowgrpo/Schedule.h"

#include "math/flowgrpo/testing/TestHelpers.h"

#include "gtest/gtest.h"

#include <cmath>

namespace omni::flowgrpo {
namespace {

using testing::isUserError;
using testing::relNear;

std::vector<float> staticSigmas(int64_t n) {
  absl::StatusOr<std::vector<float>> sigmas = staticShiftSigmas(n);
  EXPECT_TRUE(sigmas.ok()) << sigmas.status();
  return sigmas.ok() ? *sigmas : std::vector<float>();
}

TEST(ScheduleTest, StaticTimestepsN10MatchFlowGrpoDoc) {
  const double expected[] = {1000.0,      960.1293335, 913.3489990, 857.6923218,
                             790.3682861, 707.2785034, 602.1505737, 464.8760376,
                             278.0487976, 8.9285717};
  std::vector<float> sigmas = staticSigmas(10);
  ASSERT_EQ(sigmas.size(), 11u);
  std::vector<float> timesteps = timestepsFromSigmas(sigmas);
  ASSERT_EQ(timesteps.size(), 10u);
  for (int i = 0; i < 10; ++i)
    EXPECT_TRUE(relNear(timesteps[i], expected[i], 1e-6)) << "i = " << i;
  EXPECT_EQ(sigmas.front(), 1.0f);
  EXPECT_EQ(sigmas.back(), 0.0f);
}

TEST(ScheduleTest, StaticSigmasN10AreBitExact) {
  // diffusers' FlowMatchEulerDiscreteScheduler(shift=3).set_timesteps(10),
  // evaluated with numpy float32/float64 exactly as torch does.
  const float expected[] = {1.0f,           0.960129321f, 0.913348973f,
                            0.857692301f,   0.790368259f, 0.70727849f,
                            0.602150559f,   0.464876026f, 0.278048784f,
                            0.00892857183f, 0.0f};
  std::vector<float> sigmas = staticSigmas(10);
  ASSERT_EQ(sigmas.size(), 11u);
  for (int i = 0; i < 11; ++i)
    EXPECT_EQ(sigmas[i], expected[i]) << "i = " << i;
}

TEST(ScheduleTest, StaticTimestepsN40Start) {
  std::vector<float> timesteps = timestepsFromSigmas(staticSigmas(40));
  ASSERT_EQ(timesteps.size(), 40u);
  EXPECT_TRUE(relNear(timesteps[0], 1000.0, 1e-6));
  EXPECT_TRUE(relNear(timesteps[1], 991.33087, 1e-6));
  EXPECT_TRUE(relNear(timesteps[2], 982.35577, 1e-6));
}

TEST(ScheduleTest, LastTimestepIsIndependentOfN) {
  for (int64_t n : {2, 3, 7, 10, 25, 40, 50, 100, 1000}) {
    std::vector<float> timesteps = timestepsFromSigmas(staticSigmas(n));
    ASSERT_EQ(timesteps.size(), static_cast<size_t>(n));
    EXPECT_TRUE(relNear(timesteps.back(), 8.928572, 1e-6)) << "N = " << n;
  }
}

TEST(ScheduleTest, OneStepScheduleIsOneThenZero) {
  std::vector<float> sigmas = staticSigmas(1);
  EXPECT_EQ(sigmas, (std::vector<float>{1.0f, 0.0f}));
}

TEST(ScheduleTest, StaticSigmasStrictlyDecrease) {
  for (int64_t n : {2, 10, 40, 250}) {
    std::vector<float> sigmas = staticSigmas(n);
    for (size_t i = 0; i + 1 < sigmas.size(); ++i)
      EXPECT_LT(sigmas[i + 1], sigmas[i]) << "N = " << n << ", i = " << i;
  }
}

TEST(ScheduleTest, StaticShiftOneIsLinear) {
  // shift 1 is the identity map: sigma_i = 1 - i * (1 - 0.001) / (N - 1).
  absl::StatusOr<std::vector<float>> sigmas = staticShiftSigmas(4, 1.0);
  ASSERT_TRUE(sigmas.ok()) << sigmas.status();
  const double expected[] = {1.0, 0.667, 0.334, 0.001, 0.0};
  for (int i = 0; i < 5; ++i)
    EXPECT_NEAR((*sigmas)[i], expected[i], 1e-7) << "i = " << i;
}

TEST(ScheduleTest, TimestepsFromShortTables) {
  EXPECT_TRUE(timestepsFromSigmas({}).empty());
  EXPECT_TRUE(timestepsFromSigmas({1.0f}).empty());
  EXPECT_EQ(timestepsFromSigmas({1.0f, 0.5f, 0.0f}),
            (std::vector<float>{1000.0f, 500.0f}));
}

TEST(ScheduleTest, StaticErrors) {
  EXPECT_TRUE(isUserError(staticShiftSigmas(0).status(), "num_steps"));
  EXPECT_TRUE(isUserError(staticShiftSigmas(-3).status(), "-3"));
  EXPECT_TRUE(isUserError(staticShiftSigmas(10, 0.0).status(), "shift"));
  EXPECT_TRUE(isUserError(staticShiftSigmas(10, -1.0).status(), "shift"));
  EXPECT_TRUE(isUserError(staticShiftSigmas(10, NAN).status(), "shift"));
  EXPECT_TRUE(isUserError(staticShiftSigmas(10, INFINITY).status(), "shift"));
}

//===----------------------------------------------------------------------===//
// Dynamic shift
//===----------------------------------------------------------------------===//

/// docs/flowgrpo-math.md section 1 evaluated in float64 from scratch, without
/// the library's float32 steps: the independent reference for the formula.
std::vector<double> dynamicFormula64(int64_t n, int64_t seqLen,
                                     std::optional<double> terminal) {
  double m = (0.9 - 0.5) / (8192.0 - 256.0);
  double mu = m * static_cast<double>(seqLen) + (0.5 - m * 256.0);
  std::vector<double> sigmas;
  for (int64_t i = 0; i < n; ++i) {
    double s = n == 1 ? 1.0
                      : 1.0 + static_cast<double>(i) * (1.0 / n - 1.0) /
                                  static_cast<double>(n - 1);
    sigmas.push_back(std::exp(mu) / (std::exp(mu) + (1.0 / s - 1.0)));
  }
  if (terminal) {
    double uLast = 1.0 - sigmas.back();
    for (double &s : sigmas)
      s = 1.0 - (1.0 - s) / (uLast / (1.0 - *terminal));
  }
  return sigmas;
}

struct DynamicCase {
  int64_t numSteps;
  int64_t seqLen;
  std::optional<double> terminal;
  std::vector<float> expected; // N + 1 values, numpy (see file comment)
};

// Generated with numpy 2.4.6:
//   sig = np.linspace(1.0, 1 / N, N).astype(np.float32)
//   sig = math.exp(mu) / (math.exp(mu) + (1 / sig - 1) ** 1.0)
//   if z: omz = 1 - sig; sig = 1 - omz / (omz[-1] / (1 - z))
// with mu = calculate_shift(L, 256, 8192, 0.5, 0.9), then append 0.
const DynamicCase kDynamicCases[] = {
    {10,
     1024,
     std::nullopt,
     {1.0f, 0.939114034f, 0.872695386f, 0.799954116f, 0.719942212f,
      0.631512165f, 0.533261955f, 0.423459411f, 0.299939781f, 0.159961462f,
      0.0f}},
    {10,
     1024,
     0.02,
     {1.0f, 0.928969622f, 0.851484776f, 0.766623855f, 0.673280895f,
      0.570117235f, 0.455497265f, 0.327400148f, 0.183300495f, 0.0199999809f,
      0.0f}},
    {4,
     256,
     std::nullopt,
     {1.0f, 0.831824303f, 0.622459352f, 0.354661226f, 0.0f}},
    {20, 4096, 0.02, {1.0f,         0.972236514f, 0.943011165f, 0.912205458f,
                      0.879687488f, 0.84531039f,  0.80891037f,  0.770303011f,
                      0.729281723f, 0.685612321f, 0.639030099f, 0.589233637f,
                      0.535878181f, 0.478568017f, 0.416846812f, 0.350184739f,
                      0.277963698f, 0.199458241f, 0.113810658f, 0.0199999809f,
                      0.0f}},
};

TEST(ScheduleTest, DynamicMatchesNumpyReference) {
  for (const DynamicCase &c : kDynamicCases) {
    DynamicShiftOptions options;
    options.shiftTerminal = c.terminal;
    absl::StatusOr<std::vector<float>> sigmas =
        dynamicShiftSigmas(c.numSteps, c.seqLen, options);
    ASSERT_TRUE(sigmas.ok()) << sigmas.status();
    ASSERT_EQ(sigmas->size(), c.expected.size());
    for (size_t i = 0; i < c.expected.size(); ++i)
      EXPECT_FLOAT_EQ((*sigmas)[i], c.expected[i])
          << "N = " << c.numSteps << ", L = " << c.seqLen << ", i = " << i;
  }
}

TEST(ScheduleTest, DynamicMatchesFloat64Formula) {
  for (int64_t n : {1, 2, 5, 10, 28, 50}) {
    for (int64_t seqLen : {64, 256, 1024, 4096, 8192, 16384}) {
      for (std::optional<double> terminal :
           {std::optional<double>(), std::optional<double>(0.02),
            std::optional<double>(0.3)}) {
        if (terminal && n < 2)
          continue;
        DynamicShiftOptions options;
        options.shiftTerminal = terminal;
        absl::StatusOr<std::vector<float>> sigmas =
            dynamicShiftSigmas(n, seqLen, options);
        ASSERT_TRUE(sigmas.ok()) << sigmas.status();
        std::vector<double> reference = dynamicFormula64(n, seqLen, terminal);
        ASSERT_EQ(sigmas->size(), reference.size() + 1);
        // Absolute, not relative: 1 - u / scale cancels in float32 for the
        // terminal sigma, as it does in diffusers.
        for (size_t i = 0; i < reference.size(); ++i)
          EXPECT_NEAR((*sigmas)[i], reference[i], 2e-6)
              << "N = " << n << ", L = " << seqLen << ", i = " << i;
        EXPECT_EQ(sigmas->back(), 0.0f);
        EXPECT_EQ(sigmas->front(), 1.0f);
        if (terminal) {
          EXPECT_NEAR((*sigmas)[n - 1], *terminal, 1e-6);
        }
      }
    }
  }
}

TEST(ScheduleTest, DynamicShiftMuInterpolatesTheShifts) {
  DynamicShiftOptions options;
  EXPECT_DOUBLE_EQ(dynamicShiftMu(256, options), 0.5);
  EXPECT_DOUBLE_EQ(dynamicShiftMu(8192, options), 0.9);
  EXPECT_DOUBLE_EQ(dynamicShiftMu(4224, options), 0.7);
}

TEST(ScheduleTest, DynamicErrors) {
  EXPECT_TRUE(isUserError(dynamicShiftSigmas(0, 1024).status(), "num_steps"));
  EXPECT_TRUE(isUserError(dynamicShiftSigmas(10, 0).status(), "image_seq_len"));

  DynamicShiftOptions sameLen;
  sameLen.maxSeqLen = sameLen.baseSeqLen;
  EXPECT_TRUE(isUserError(dynamicShiftSigmas(10, 1024, sameLen).status(),
                          "base_seq_len"));

  DynamicShiftOptions nanShift;
  nanShift.maxShift = NAN;
  EXPECT_TRUE(isUserError(dynamicShiftSigmas(10, 1024, nanShift).status(),
                          "max_shift"));

  for (double z : {0.0, 1.0, -0.1, 1.5, static_cast<double>(NAN)}) {
    DynamicShiftOptions badTerminal;
    badTerminal.shiftTerminal = z;
    EXPECT_TRUE(isUserError(dynamicShiftSigmas(10, 1024, badTerminal).status(),
                            "shift_terminal"))
        << "z = " << z;
  }

  DynamicShiftOptions terminal;
  terminal.shiftTerminal = 0.02;
  EXPECT_TRUE(isUserError(dynamicShiftSigmas(1, 1024, terminal).status(),
                          "shift_terminal needs num_steps >= 2"));

  DynamicShiftOptions overflow;
  overflow.maxShift = 200.0;
  EXPECT_TRUE(
      isUserError(dynamicShiftSigmas(10, 8192, overflow).status(), "mu"));

  // e^20 / (e^20 + 1) rounds to 1 in float32: nothing left to stretch.
  DynamicShiftOptions saturated;
  saturated.maxShift = 20.0;
  saturated.shiftTerminal = 0.02;
  EXPECT_TRUE(
      isUserError(dynamicShiftSigmas(2, 8192, saturated).status(), "mu"));
}

} // namespace
} // namespace omni::flowgrpo
