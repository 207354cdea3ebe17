//===- Philox.cpp - Counter-based random numbers ----------------*- C++ -*-===//
//
// Reference implementation of docs/rng.md. The block function is integer
// arithmetic and portable as is; the normal transform is double arithmetic
// with detLog/detCos and must be compiled with -ffp-contract=off so that
// sqrt(-2 log u1) * cos(2 pi u2) rounds exactly as the specification says.
//
//===----------------------------------------------------------------------===//

#include "runtime/flowgrpo/Philox.h"

#include "runtime/flowgrpo/DetMath.h"

#include <cmath>

namespace omni::flowgrpo {
namespace {

constexpr uint32_t kPhiloxM0 = 0xD2511F53u;
constexpr uint32_t kPhiloxM1 = 0xCD9E8D57u;
constexpr uint32_t kPhiloxW0 = 0x9E3779B9u;
constexpr uint32_t kPhiloxW1 = 0xBB67AE85u;

// 2*pi rounded to the nearest double.
constexpr double kTwoPi = 0x1.921fb54442d18p+2;
constexpr double kTwoPow24Inv = 0x1p-24;

std::array<uint32_t, 4> philoxRound(const std::array<uint32_t, 4> &ctr,
                                    const std::array<uint32_t, 2> &key) {
  uint64_t p0 = static_cast<uint64_t>(kPhiloxM0) * ctr[0];
  uint64_t p1 = static_cast<uint64_t>(kPhiloxM1) * ctr[2];
  uint32_t hi0 = static_cast<uint32_t>(p0 >> 32);
  uint32_t lo0 = static_cast<uint32_t>(p0);
  uint32_t hi1 = static_cast<uint32_t>(p1 >> 32);
  uint32_t lo1 = static_cast<uint32_t>(p1);
  return {hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0};
}

std::array<uint32_t, 4> blockAt(uint64_t seed, uint64_t counter,
                                uint64_t position) {
  return philox4x32_10(
      {static_cast<uint32_t>(position), static_cast<uint32_t>(position >> 32),
       static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32)},
      {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
}

float uniformFromBlock(const std::array<uint32_t, 4> &block) {
  // 24 bits fill a float32 significand, so the product is exact.
  return static_cast<float>(block[0] >> 8) * 0x1p-24f;
}

float normalFromBlock(const std::array<uint32_t, 4> &block) {
  // u1 excludes 0 so the log is finite; both values are exact in double.
  double u1 = static_cast<double>((block[0] >> 8) + 1u) * kTwoPow24Inv;
  double u2 = static_cast<double>(block[1] >> 8) * kTwoPow24Inv;
  double radius = std::sqrt(-2.0 * detLog(u1));
  double z = radius * detCos(kTwoPi * u2);
  return static_cast<float>(z);
}

} // namespace

std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> ctr,
                                      std::array<uint32_t, 2> key) {
  // Random123 applies the first round with the user key and bumps the key
  // before each of the nine remaining rounds.
  ctr = philoxRound(ctr, key);
  for (int round = 1; round < 10; ++round) {
    key[0] += kPhiloxW0;
    key[1] += kPhiloxW1;
    ctr = philoxRound(ctr, key);
  }
  return ctr;
}

std::array<uint32_t, 4> philoxBlockAt(int64_t seed, int64_t counter,
                                      int64_t position) {
  return blockAt(static_cast<uint64_t>(seed), static_cast<uint64_t>(counter),
                 static_cast<uint64_t>(position));
}

float philoxUniformAt(int64_t seed, int64_t counter, int64_t position) {
  return uniformFromBlock(philoxBlockAt(seed, counter, position));
}

float philoxNormalAt(int64_t seed, int64_t counter, int64_t position) {
  return normalFromBlock(philoxBlockAt(seed, counter, position));
}

// Positions are computed in uint64 so that offset + j wraps modulo 2^64 as
// the specification says, without signed overflow.
void philoxUniform(int64_t seed, int64_t counter, int64_t offset, float *out,
                   int64_t n) {
  for (int64_t j = 0; j < n; ++j)
    out[j] = uniformFromBlock(
        blockAt(static_cast<uint64_t>(seed), static_cast<uint64_t>(counter),
                static_cast<uint64_t>(offset) + static_cast<uint64_t>(j)));
}

void philoxNormal(int64_t seed, int64_t counter, int64_t offset, float *out,
                  int64_t n) {
  for (int64_t j = 0; j < n; ++j)
    out[j] = normalFromBlock(
        blockAt(static_cast<uint64_t>(seed), static_cast<uint64_t>(counter),
                static_cast<uint64_t>(offset) + static_cast<uint64_t>(j)));
}

} // namespace omni::flowgrpo
