//===- DetMath.cpp - Deterministic log and cos ------------------*- C++ -*-===//
//
// Implements detLog and detCos with nothing but IEEE-754 double arithmetic in
// a fixed order, so that the CPU runtime, the reference evaluator and the
// CUDA kernels draw bit-identical normals. Every constant is written as a
// hexadecimal literal (the exact double, no decimal-to-binary conversion left
// to the compiler) and docs/rng.md repeats them. This file must be compiled
// with -ffp-contract=off: a contracted a*b+c rounds once instead of twice and
// changes the bits.
//
//===----------------------------------------------------------------------===//

#include "runtime/flowgrpo/DetMath.h"

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

// x87 arithmetic keeps extra precision in registers and -ffast-math reorders
// and contracts freely; either breaks the bit-for-bit contract.
#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD != 0
#error "DetMath.cpp needs FLT_EVAL_METHOD == 0 (SSE2 or equivalent)"
#endif
#ifdef __FAST_MATH__
#error "DetMath.cpp must not be compiled with -ffast-math"
#endif

namespace omni::flowgrpo {
namespace {

uint64_t bitsOf(double x) {
  uint64_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return bits;
}

double fromBits(uint64_t bits) {
  double x;
  std::memcpy(&x, &bits, sizeof(x));
  return x;
}

// ln 2 split so that k * kLn2Hi is exact for every binary exponent k of a
// double (|k| <= 1075 needs 11 bits; kLn2Hi has 42 significant bits).
constexpr double kLn2Hi = 0x1.62e42fefa38p-1;
constexpr double kLn2Lo = 0x1.ef35793c7673p-45;
constexpr double kSqrt2 = 0x1.6a09e667f3bcdp+0;

// 1 / (2n + 1) for n = 0..10, each the double nearest the rational. The
// series 2 f sum s^n / (2n + 1) is atanh; with |f| <= 3 - 2 sqrt 2 the first
// omitted term is below 2^-60 relative.
constexpr double kLogCoeffs[] = {
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
constexpr double kCosCoeffs[] = {
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
constexpr double kSinCoeffs[] = {
    -0x1.5555555555555p-3,  0x1.1111111111111p-7,   -0x1.a01a01a01a01ap-13,
    0x1.71de3a556c734p-19,  -0x1.ae64567f544e4p-26, 0x1.6124613a86d09p-33,
    -0x1.ae7f3e733b81fp-41, 0x1.952c77030ad4ap-49,
};

/// Horner evaluation from the highest coefficient down; the order is part of
/// the bit-level specification.
template <int N> double horner(const double (&coeffs)[N], double z) {
  double acc = coeffs[N - 1];
  for (int k = N - 2; k >= 0; --k)
    acc = coeffs[k] + z * acc;
  return acc;
}

/// cos(r) for |r| <= pi/4 (plus rounding slack).
double cosKernel(double r) {
  double z = r * r;
  return 1.0 + z * horner(kCosCoeffs, z);
}

/// sin(r) for |r| <= pi/4 (plus rounding slack).
double sinKernel(double r) {
  double z = r * r;
  return r + (r * z) * horner(kSinCoeffs, z);
}

} // namespace

double detLog(double x) {
  if (std::isnan(x) || x < 0.0)
    return std::numeric_limits<double>::quiet_NaN();
  if (x == 0.0)
    return -std::numeric_limits<double>::infinity();
  if (std::isinf(x))
    return x;

  // Split x = m * 2^k with m in [1, 2) by reading the exponent field; this is
  // exact, unlike any arithmetic reduction.
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
  // carries only two roundings and log m is accurate relative to itself even
  // for m next to 1.
  double f = (m - 1.0) / (m + 1.0);
  double s = f * f;
  double logM = (f + f) * horner(kLogCoeffs, s);
  double kd = static_cast<double>(k);
  return kd * kLn2Hi + (logM + kd * kLn2Lo);
}

double detCos(double x) {
  // Also rejects NaN: every comparison with NaN is false.
  if (!(std::fabs(x) <= kMaxCosArgument))
    return std::numeric_limits<double>::quiet_NaN();

  // n = nearest integer to x / (pi/2). An n off by one (t within an ulp of
  // k + 0.5) only moves r slightly past pi/4, where the kernels stay accurate.
  double nd = std::floor(x * kTwoOverPi + 0.5);
  // r = x - n pi/2 in extended precision: hi is exact (Sterbenz), w is exact,
  // and Knuth's TwoSum keeps the rounding error of hi - w in lo.
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

} // namespace omni::flowgrpo
