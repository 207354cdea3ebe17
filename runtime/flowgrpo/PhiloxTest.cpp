//===- PhiloxTest.cpp - Tests for the counter-based RNG ---------*- C++ -*-===//
//
// The Random123 known-answer vectors, the counter/key layout of docs/rng.md,
// golden values that any port (CPU kernel, CUDA kernel) must reproduce bit
// for bit, the split-batch property, and the distributions' moments.
//
//===----------------------------------------------------------------------===//

#include "runtime/flowgrpo/Philox.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace omni::flowgrpo {
namespace {

using Block = std::array<uint32_t, 4>;

TEST(PhiloxTest, Random123KnownAnswers) {
  // Random123 kat_vectors, philox4x32 with 10 rounds.
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}),
            (Block{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
                          {0xffffffff, 0xffffffff}),
            (Block{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
                          {0xa4093822, 0x299f31d0}),
            (Block{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(PhiloxTest, CounterAndKeyLayout) {
  const int64_t seed = 0x0123456789abcdefLL;
  const int64_t counter = -2; // 0xfffffffffffffffe
  const int64_t position = 0x00000007deadbeefLL;
  EXPECT_EQ(philoxBlockAt(seed, counter, position),
            philox4x32_10({0xdeadbeef, 0x00000007, 0xfffffffe, 0xffffffff},
                          {0x89abcdef, 0x01234567}));
}

TEST(PhiloxTest, ValuesFollowTheBlock) {
  for (int64_t p = 0; p < 64; ++p) {
    Block block = philoxBlockAt(5, 9, p);
    EXPECT_EQ(philoxUniformAt(5, 9, p),
              static_cast<float>(block[0] >> 8) / 16777216.0f);
    // Box-Muller with the C library's log/cos: equal up to float32 rounding
    // (GoldenValues pins the bits).
    double u1 = ((block[0] >> 8) + 1) / 16777216.0;
    double u2 = (block[1] >> 8) / 16777216.0;
    float z = static_cast<float>(std::sqrt(-2.0 * std::log(u1)) *
                                 std::cos(2.0 * 3.14159265358979323846 * u2));
    EXPECT_FLOAT_EQ(philoxNormalAt(5, 9, p), z) << "p = " << p;
  }
}

TEST(PhiloxTest, GoldenValues) {
  // From an independent Python implementation of docs/rng.md (Python ints
  // for Philox, math.log/math.cos in float64, rounded to float32). Ports
  // must match these bits exactly.
  struct Golden {
    int64_t seed, counter, offset;
    float normal[8];
    float uniform[8];
  };
  const Golden cases[] = {
      {42,
       7,
       0,
       {1.0651506185531616f, -0.32862553000450134f, 1.8181285858154297f,
        -1.043601632118225f, 0.3009631633758545f, 2.1134824752807617f,
        -3.8072595596313477f, -0.6426623463630676f},
       {0.40598195791244507f, 0.8979173302650452f, 0.1442410945892334f,
        0.5795255899429321f, 0.8315308094024658f, 0.05093181133270264f,
        0.00029528141021728516f, 0.8013323545455933f}},
      {-1,
       123456789012LL,
       1LL << 40,
       {-0.6068760752677917f, 1.143263578414917f, -0.4000917375087738f,
        1.3775297403335571f, -0.39323049783706665f, 0.11824573576450348f,
        0.4348905086517334f, -0.25618165731430054f},
       {0.6739250421524048f, 0.22523242235183716f, 0.3627837300300598f,
        0.2611238956451416f, 0.42076146602630615f, 0.41556447744369507f,
        0.6992906928062439f, 0.7316547632217407f}},
  };
  for (const Golden &g : cases) {
    float normal[8], uniform[8];
    philoxNormal(g.seed, g.counter, g.offset, normal, 8);
    philoxUniform(g.seed, g.counter, g.offset, uniform, 8);
    for (int j = 0; j < 8; ++j) {
      EXPECT_EQ(normal[j], g.normal[j]) << "seed " << g.seed << " j " << j;
      EXPECT_EQ(uniform[j], g.uniform[j]) << "seed " << g.seed << " j " << j;
    }
  }
}

TEST(PhiloxTest, SplitBatchMatchesWhole) {
  // A [6, 50] tensor generated whole equals its two halves generated with
  // offset = rows_in_first_half * row_size, bit for bit.
  const int64_t rows = 6, rowSize = 50, firstRows = 2;
  std::vector<float> whole(rows * rowSize), split(rows * rowSize);
  for (bool normal : {false, true}) {
    auto fill = normal ? philoxNormal : philoxUniform;
    fill(1234, 3, 0, whole.data(), rows * rowSize);
    fill(1234, 3, 0, split.data(), firstRows * rowSize);
    fill(1234, 3, firstRows * rowSize, split.data() + firstRows * rowSize,
         (rows - firstRows) * rowSize);
    EXPECT_EQ(
        std::memcmp(whole.data(), split.data(), whole.size() * sizeof(float)),
        0)
        << (normal ? "normal" : "uniform");
  }
}

// philoxNormal fills four values at a time with AVX2 where the CPU has it
// (Philox.cpp): every value must be philoxNormalAt's, bit for bit, for
// every lane, quadrant and binade of u1 that a few million positions reach,
// for counts that leave a scalar tail, and across the 2^32 boundary of the
// position's low word and the 2^64 wrap.
TEST(PhiloxTest, BatchedNormalsEqualTheScalarOnesBitForBit) {
  struct Case {
    int64_t seed, counter, offset, n;
  };
  const Case cases[] = {{7, 0, 0, 1 << 22},
                        {-3, 123456789, 4294967290LL, 4099},
                        {0x0123456789abcdefLL, -1, -5, 11},
                        {42, 2, 1, 3}};
  for (const Case &c : cases) {
    std::vector<float> got(c.n);
    philoxNormal(c.seed, c.counter, c.offset, got.data(), c.n);
    int64_t mismatches = 0;
    for (int64_t j = 0; j < c.n; ++j) {
      const int64_t position = static_cast<int64_t>(
          static_cast<uint64_t>(c.offset) + static_cast<uint64_t>(j));
      const float want = philoxNormalAt(c.seed, c.counter, position);
      if (std::memcmp(&got[j], &want, sizeof(float)) != 0 && ++mismatches <= 5)
        ADD_FAILURE() << "seed " << c.seed << " position " << position << ": "
                      << got[j] << " vs " << want;
    }
    EXPECT_EQ(mismatches, 0);
  }
}

TEST(PhiloxTest, StreamsDiffer) {
  float a[16], b[16], c[16];
  philoxNormal(1, 0, 0, a, 16);
  philoxNormal(2, 0, 0, b, 16);
  philoxNormal(1, 1, 0, c, 16);
  int sameSeed = 0, sameCounter = 0;
  for (int j = 0; j < 16; ++j) {
    sameSeed += a[j] == b[j];
    sameCounter += a[j] == c[j];
  }
  EXPECT_EQ(sameSeed, 0);
  EXPECT_EQ(sameCounter, 0);
}

TEST(PhiloxTest, PositionsWrapModulo2To64) {
  const int64_t max = std::numeric_limits<int64_t>::max();
  float out[2];
  philoxNormal(8, 8, max, out, 2);
  EXPECT_EQ(out[0], philoxNormalAt(8, 8, max));
  EXPECT_EQ(out[1], philoxNormalAt(8, 8, std::numeric_limits<int64_t>::min()));
}

TEST(PhiloxTest, NonPositiveCountWritesNothing) {
  float out[1] = {42.0f};
  philoxNormal(1, 1, 0, out, 0);
  philoxUniform(1, 1, 0, out, -5);
  EXPECT_EQ(out[0], 42.0f);
}

TEST(PhiloxTest, UniformMoments) {
  const int64_t n = 1000000;
  std::vector<float> u(n);
  philoxUniform(2024, 1, 0, u.data(), n);
  double sum = 0.0, sumSquares = 0.0;
  for (float value : u) {
    ASSERT_GE(value, 0.0f);
    ASSERT_LT(value, 1.0f);
    sum += value;
    sumSquares += static_cast<double>(value) * value;
  }
  double mean = sum / n;
  double var = sumSquares / n - mean * mean;
  // Standard errors: 0.29 / 1000 for the mean; about 0.09 / 1000 for var.
  EXPECT_NEAR(mean, 0.5, 0.0015);
  EXPECT_NEAR(var, 1.0 / 12.0, 0.0005);
}

TEST(PhiloxTest, NormalMoments) {
  const int64_t n = 1000000;
  std::vector<float> z(n);
  philoxNormal(2024, 2, 0, z.data(), n);
  double sum = 0.0, sumSquares = 0.0, sumFourth = 0.0;
  int64_t beyond3 = 0;
  for (float value : z) {
    ASSERT_TRUE(std::isfinite(value));
    ASSERT_LE(std::fabs(value), 5.77f);
    double v = value;
    sum += v;
    sumSquares += v * v;
    sumFourth += v * v * v * v;
    beyond3 += std::fabs(v) > 3.0;
  }
  double mean = sum / n;
  double var = sumSquares / n - mean * mean;
  // Five standard errors: 0.005 for the mean, 0.007 for the variance.
  EXPECT_NEAR(mean, 0.0, 0.005);
  EXPECT_NEAR(var, 1.0, 0.007);
  EXPECT_NEAR(sumFourth / n, 3.0, 0.05);
  // P(|z| > 3) = 0.0027.
  EXPECT_NEAR(static_cast<double>(beyond3) / n, 0.0027, 0.0003);
}

} // namespace
} // namespace omni::flowgrpo
