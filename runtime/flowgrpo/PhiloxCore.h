//===- PhiloxCore.h - Philox and its normal transform, host and device ---===//
//
// The arithmetic of docs/rng.md in one place, usable from C++ (Philox.cpp,
// DetMath.cpp) and from CUDA C++ (runtime/hal/drivers/cuda/kernels): the
// Philox4x32-10 block, the uniform and Box-Muller transforms, and omni's
// deterministic log and cos. Every function is OMNI_PHILOX_HD (__host__
// __device__ under nvcc) and uses only integer arithmetic and IEEE-754
// double +, -, *, / and sqrt in a fixed order, so a translation unit that
// includes it must be compiled without floating-point contraction (host:
// -ffp-contract=off, CUDA: --fmad=false), as the files above are.
// Philox.h and DetMath.h are the documented interfaces; this header is an
// implementation detail shared by the two sides.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_FLOWGRPO_PHILOXCORE_H
#define OMNI_RUNTIME_FLOWGRPO_PHILOXCORE_H

#include <stdint.h>

#ifdef __CUDACC__
#define OMNI_PHILOX_HD __host__ __device__ inline
#else
#include <cmath>
#include <cstring>
#define OMNI_PHILOX_HD inline
#endif

namespace omni::flowgrpo::core {

/// Four 32-bit words (a Philox counter or output block).
struct Words4 {
  uint32_t w[4];
};

constexpr uint32_t kPhiloxM0 = 0xD2511F53u;
constexpr uint32_t kPhiloxM1 = 0xCD9E8D57u;
constexpr uint32_t kPhiloxW0 = 0x9E3779B9u;
constexpr uint32_t kPhiloxW1 = 0xBB67AE85u;

OMNI_PHILOX_HD Words4 philoxRound(const Words4 &ctr, uint32_t k0, uint32_t k1) {
  uint64_t p0 = static_cast<uint64_t>(kPhiloxM0) * ctr.w[0];
  uint64_t p1 = static_cast<uint64_t>(kPhiloxM1) * ctr.w[2];
  uint32_t hi0 = static_cast<uint32_t>(p0 >> 32);
  uint32_t lo0 = static_cast<uint32_t>(p0);
  uint32_t hi1 = static_cast<uint32_t>(p1 >> 32);
  uint32_t lo1 = static_cast<uint32_t>(p1);
  return Words4{{hi1 ^ ctr.w[1] ^ k0, lo1, hi0 ^ ctr.w[3] ^ k1, lo0}};
}

/// Random123's philox4x32_R(10, ctr, key): the first round with the user
/// key, the key bumped before each of the nine others.
OMNI_PHILOX_HD Words4 philox4x32_10(Words4 ctr, uint32_t k0, uint32_t k1) {
  ctr = philoxRound(ctr, k0, k1);
  for (int round = 1; round < 10; ++round) {
    k0 += kPhiloxW0;
    k1 += kPhiloxW1;
    ctr = philoxRound(ctr, k0, k1);
  }
  return ctr;
}

/// The block of one element (Philox.h philoxBlockAt), on 64-bit words.
OMNI_PHILOX_HD Words4 blockAt(uint64_t seed, uint64_t counter,
                              uint64_t position) {
  return philox4x32_10(Words4{{static_cast<uint32_t>(position),
                               static_cast<uint32_t>(position >> 32),
                               static_cast<uint32_t>(counter),
                               static_cast<uint32_t>(counter >> 32)}},
                       static_cast<uint32_t>(seed),
                       static_cast<uint32_t>(seed >> 32));
}

//===--- Deterministic log and cos (DetMath.h) ----------------------------===//

OMNI_PHILOX_HD uint64_t bitsOf(double x) {
#ifdef __CUDA_ARCH__
  return static_cast<uint64_t>(__double_as_longlong(x));
#else
  uint64_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return bits;
#endif
}

OMNI_PHILOX_HD double fromBits(uint64_t bits) {
#ifdef __CUDA_ARCH__
  return __longlong_as_double(static_cast<long long>(bits));
#else
  double x;
  std::memcpy(&x, &bits, sizeof(x));
  return x;
#endif
}

OMNI_PHILOX_HD double quietNaN() { return fromBits(0x7ff8000000000000ULL); }
OMNI_PHILOX_HD double infinity() { return fromBits(0x7ff0000000000000ULL); }

// ln 2 split so that k * kLn2Hi is exact for every binary exponent k of a
// double (|k| <= 1075 needs 11 bits; kLn2Hi has 42 significant bits).
constexpr double kLn2Hi = 0x1.62e42fefa38p-1;
constexpr double kLn2Lo = 0x1.ef35793c7673p-45;
constexpr double kSqrt2 = 0x1.6a09e667f3bcdp+0;

// 1 / (2n + 1) for n = 0..10, each the double nearest the rational. The
// series 2 f sum s^n / (2n + 1) is atanh; with |f| <= 3 - 2 sqrt 2 the first
// omitted term is below 2^-60 relative.
constexpr int kLogTerms = 11;
OMNI_PHILOX_HD double logCoeff(int i) {
  constexpr double c[kLogTerms] = {
      0x1p+0,
      0x1.5555555555555p-2,
      0x1.999999999999ap-3,
      0x1.2492492492492p-3,
      0x1.c71c71c71c71cp-4,
      0x1.745d1745d1746p-4,
      0x1.3b13b13b13b14p-4,
      0x1.1111111111111p-4,
      0x1.e1e1e1e1e1e1ep-5,
      0x1.af286bca1af28p-5,
      0x1.8618618618618p-5,
  };
  return c[i];
}

// pi/2 as p1 + p2 + p3 + p3t: p1, p2, p3 carry 33 significant bits each, so
// n * p1, n * p2 and n * p3 are exact for |n| < 2^20; p3t is the remaining
// 53 bits. This is the classic fdlibm split (same values).
constexpr double kPio2Part1 = 0x1.921fb544p+0;
constexpr double kPio2Part2 = 0x1.0b4611a6p-34;
constexpr double kPio2Part3 = 0x1.3198a2ep-69;
constexpr double kPio2Part3Tail = 0x1.b839a252049c1p-104;
constexpr double kTwoOverPi = 0x1.45f306dc9c883p-1;
constexpr double kMaxCosArgument = 0x1p+20;

// (-1)^k / (2k)! for k = 1..9 and (-1)^k / (2k+1)! for k = 1..8 (nearest
// doubles). Taylor rather than minimax coefficients: anyone can regenerate
// them, and on |r| <= pi/4 the truncation error is below 2^-60.
constexpr int kCosTerms = 9;
OMNI_PHILOX_HD double cosCoeff(int i) {
  constexpr double c[kCosTerms] = {
      -0x1p-1,
      0x1.5555555555555p-5,
      -0x1.6c16c16c16c17p-10,
      0x1.a01a01a01a01ap-16,
      -0x1.27e4fb7789f5cp-22,
      0x1.1eed8eff8d898p-29,
      -0x1.93974a8c07c9dp-37,
      0x1.ae7f3e733b81fp-45,
      -0x1.6827863b97d97p-53,
  };
  return c[i];
}
constexpr int kSinTerms = 8;
OMNI_PHILOX_HD double sinCoeff(int i) {
  constexpr double c[kSinTerms] = {
      -0x1.5555555555555p-3,  0x1.1111111111111p-7,   -0x1.a01a01a01a01ap-13,
      0x1.71de3a556c734p-19,  -0x1.ae64567f544e4p-26, 0x1.6124613a86d09p-33,
      -0x1.ae7f3e733b81fp-41, 0x1.952c77030ad4ap-49,
  };
  return c[i];
}

/// Horner evaluation from the highest coefficient down; the order is part
/// of the bit-level specification.
OMNI_PHILOX_HD double hornerLog(double z) {
  double acc = logCoeff(kLogTerms - 1);
  for (int k = kLogTerms - 2; k >= 0; --k)
    acc = logCoeff(k) + z * acc;
  return acc;
}
OMNI_PHILOX_HD double hornerCos(double z) {
  double acc = cosCoeff(kCosTerms - 1);
  for (int k = kCosTerms - 2; k >= 0; --k)
    acc = cosCoeff(k) + z * acc;
  return acc;
}
OMNI_PHILOX_HD double hornerSin(double z) {
  double acc = sinCoeff(kSinTerms - 1);
  for (int k = kSinTerms - 2; k >= 0; --k)
    acc = sinCoeff(k) + z * acc;
  return acc;
}

/// cos(r) for |r| <= pi/4 (plus rounding slack).
OMNI_PHILOX_HD double cosKernel(double r) {
  double z = r * r;
  return 1.0 + z * hornerCos(z);
}

/// sin(r) for |r| <= pi/4 (plus rounding slack).
OMNI_PHILOX_HD double sinKernel(double r) {
  double z = r * r;
  return r + (r * z) * hornerSin(z);
}

/// DetMath.h detLog.
OMNI_PHILOX_HD double detLog(double x) {
  if (x != x || x < 0.0)
    return quietNaN();
  if (x == 0.0)
    return -infinity();
  if (x == infinity())
    return x;

  // Split x = m * 2^k with m in [1, 2) by reading the exponent field; this
  // is exact, unlike any arithmetic reduction.
  int k = 0;
  uint64_t bits = bitsOf(x);
  if ((bits >> 52) == 0) {
    // Subnormal: scale into the normal range first (exact).
    bits = bitsOf(x * 0x1p+54);
    k = -54;
  }
  k += static_cast<int>(bits >> 52) - 1023;
  double m = fromBits((bits & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL);
  // Centre m on 1 so that |f| stays small: m in [sqrt(1/2), sqrt(2)).
  if (m >= kSqrt2) {
    m = m * 0.5;
    k += 1;
  }

  // log m = 2 atanh(f) with f = (m - 1) / (m + 1); m - 1 is exact, so f
  // carries only two roundings and log m is accurate relative to itself
  // even for m next to 1.
  double f = (m - 1.0) / (m + 1.0);
  double s = f * f;
  double logM = (f + f) * hornerLog(s);
  double kd = static_cast<double>(k);
  return kd * kLn2Hi + (logM + kd * kLn2Lo);
}

/// DetMath.h detCos.
OMNI_PHILOX_HD double detCos(double x) {
  // Also rejects NaN: every comparison with NaN is false.
  double ax = x < 0.0 ? -x : x;
  if (!(ax <= kMaxCosArgument))
    return quietNaN();

  // n = nearest integer to x / (pi/2). An n off by one (t within an ulp of
  // k + 0.5) only moves r slightly past pi/4, where the kernels stay
  // accurate. floor is exact on every IEEE-754 platform.
  double nd = floor(x * kTwoOverPi + 0.5);
  // r = x - n pi/2 in extended precision: hi is exact (Sterbenz), w is
  // exact, and Knuth's TwoSum keeps the rounding error of hi - w in lo.
  double y = x - nd * kPio2Part1;
  double w = nd * kPio2Part2;
  double hi = y - w;
  double yv = hi + w;
  double wv = hi - yv;
  double lo = (y - yv) - (w + wv);
  lo = lo - nd * kPio2Part3;
  lo = lo - nd * kPio2Part3Tail;
  double r = hi + lo;

  // cos(r + n pi/2) by quadrant; n fits in int64 and & 3 is the
  // non-negative residue for negative n too (two's complement).
  switch (static_cast<int64_t>(nd) & 3) {
  case 0:
    return cosKernel(r);
  case 1:
    return -sinKernel(r);
  case 2:
    return -cosKernel(r);
  default:
    return sinKernel(r);
  }
}

//===--- The transforms of docs/rng.md ------------------------------------===//

// 2*pi rounded to the nearest double.
constexpr double kTwoPi = 0x1.921fb54442d18p+2;
constexpr double kTwoPow24Inv = 0x1p-24;

/// float((out[0] >> 8) * 2^-24): 24 bits fill a float32 significand, so
/// the product is exact.
OMNI_PHILOX_HD float uniformFromBlock(const Words4 &block) {
  return static_cast<float>(block.w[0] >> 8) * 0x1p-24f;
}

/// Box-Muller in double, rounded to float32 once.
OMNI_PHILOX_HD float normalFromBlock(const Words4 &block) {
  // u1 excludes 0 so the log is finite; both values are exact in double.
  double u1 = static_cast<double>((block.w[0] >> 8) + 1u) * kTwoPow24Inv;
  double u2 = static_cast<double>(block.w[1] >> 8) * kTwoPow24Inv;
  double radius = sqrt(-2.0 * detLog(u1));
  double z = radius * detCos(kTwoPi * u2);
  return static_cast<float>(z);
}

} // namespace omni::flowgrpo::core

#endif // OMNI_RUNTIME_FLOWGRPO_PHILOXCORE_H
