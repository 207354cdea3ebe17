//===- Philox.cpp - Counter-based random numbers ----------------*- C++ -*-===//
//
// Reference implementation of docs/rng.md. The arithmetic lives in
// PhiloxCore.h, which the CUDA kernels compile too (one copy of the
// algorithm). The block function is integer arithmetic and portable as is;
// the normal transform is double arithmetic with detLog/detCos and must be
// compiled with -ffp-contract=off so that sqrt(-2 log u1) * cos(2 pi u2)
// rounds exactly as the specification says.
//
//===----------------------------------------------------------------------===//

#include "runtime/flowgrpo/Philox.h"

#include "runtime/flowgrpo/PhiloxCore.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace omni::flowgrpo {
namespace {

using core::blockAt;
using core::normalFromBlock;
using core::uniformFromBlock;

std::array<uint32_t, 4> toArray(const core::Words4 &b) {
  return {b.w[0], b.w[1], b.w[2], b.w[3]};
}

} // namespace

std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> ctr,
                                      std::array<uint32_t, 2> key) {
  return toArray(core::philox4x32_10(
      core::Words4{{ctr[0], ctr[1], ctr[2], ctr[3]}}, key[0], key[1]));
}

std::array<uint32_t, 4> philoxBlockAt(int64_t seed, int64_t counter,
                                      int64_t position) {
  return toArray(blockAt(static_cast<uint64_t>(seed),
                         static_cast<uint64_t>(counter),
                         static_cast<uint64_t>(position)));
}

float philoxUniformAt(int64_t seed, int64_t counter, int64_t position) {
  return uniformFromBlock(blockAt(static_cast<uint64_t>(seed),
                                  static_cast<uint64_t>(counter),
                                  static_cast<uint64_t>(position)));
}

float philoxNormalAt(int64_t seed, int64_t counter, int64_t position) {
  return normalFromBlock(blockAt(static_cast<uint64_t>(seed),
                                 static_cast<uint64_t>(counter),
                                 static_cast<uint64_t>(position)));
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

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define OMNI_PHILOX_AVX2 1
namespace {

// Four normals at a time with AVX2: the operations of blockAt and
// normalFromBlock (PhiloxCore.h) lane by lane, in the same order and with
// no contraction (this file is compiled with -ffp-contract=off, and no FMA
// intrinsic is used), so every lane rounds exactly as the scalar code.
// Only the branches go: for the arguments Box-Muller passes (u1 in
// [2^-24, 1], normal; 2 pi u2 in [0, 2 pi)) detLog and detCos take no
// special case, the sqrt(2) test is a select, and the quadrant
// n = floor(2 pi u2 * 2/pi + 1/2) is 0..4 (4 is quadrant 0). PhiloxTest
// checks every lane against the scalar code bit for bit.
typedef uint64_t U4 __attribute__((vector_size(32)));
typedef int64_t I4 __attribute__((vector_size(32)));
typedef double D4 __attribute__((vector_size(32)));

__attribute__((target("avx2"), always_inline)) inline U4 mulLo32(U4 a, U4 b) {
  // (a & 0xffffffff) * (b & 0xffffffff) as 64-bit products.
  return (U4)_mm256_mul_epu32((__m256i)a, (__m256i)b);
}

__attribute__((target("avx2"))) void normals4(uint64_t seed, uint64_t counter,
                                              uint64_t position, float *out) {
  const U4 lane = {0, 1, 2, 3};
  const U4 pos = position + lane;
  const uint64_t lo32 = 0xffffffffULL;
  U4 w0 = pos & lo32, w1 = pos >> 32;
  U4 w2 = U4{} + (counter & lo32), w3 = U4{} + (counter >> 32);
  uint32_t k0 = static_cast<uint32_t>(seed),
           k1 = static_cast<uint32_t>(seed >> 32);
  const U4 m0 = U4{} + uint64_t(core::kPhiloxM0),
           m1 = U4{} + uint64_t(core::kPhiloxM1);
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += core::kPhiloxW0;
      k1 += core::kPhiloxW1;
    }
    const U4 p0 = mulLo32(w0, m0), p1 = mulLo32(w2, m1);
    const U4 n0 = ((p1 >> 32) ^ w1 ^ uint64_t(k0)) & lo32;
    const U4 n1 = p1 & lo32;
    const U4 n2 = ((p0 >> 32) ^ w3 ^ uint64_t(k1)) & lo32;
    const U4 n3 = p0 & lo32;
    w0 = n0, w1 = n1, w2 = n2, w3 = n3;
  }
  // u1, u2: integers below 2^24, exact in double.
  const D4 u1 =
      __builtin_convertvector((I4)((w0 >> 8) + 1), D4) * core::kTwoPow24Inv;
  const D4 u2 = __builtin_convertvector((I4)(w1 >> 8), D4) * core::kTwoPow24Inv;

  // detLog(u1).
  const U4 bits = (U4)u1;
  I4 k = (I4)(bits >> 52) - 1023;
  D4 m = (D4)((bits & 0x000fffffffffffffULL) | 0x3ff0000000000000ULL);
  const I4 big = (I4)(m >= core::kSqrt2); // all ones where m >= sqrt(2)
  m = big ? m * 0.5 : m;
  k = k - big; // k + 1 there
  const D4 f = (m - 1.0) / (m + 1.0);
  const D4 s = f * f;
  D4 acc = D4{} + core::logCoeff(core::kLogTerms - 1);
  for (int i = core::kLogTerms - 2; i >= 0; --i)
    acc = core::logCoeff(i) + s * acc;
  const D4 logM = (f + f) * acc;
  const D4 kd = __builtin_convertvector(k, D4);
  const D4 logU1 = kd * core::kLn2Hi + (logM + kd * core::kLn2Lo);
  const D4 radius = (D4)_mm256_sqrt_pd((__m256d)(-2.0 * logU1));

  // detCos(2 pi u2).
  const D4 x = core::kTwoPi * u2;
  const D4 nd = (D4)_mm256_floor_pd((__m256d)(x * core::kTwoOverPi + 0.5));
  const D4 y = x - nd * core::kPio2Part1;
  const D4 w = nd * core::kPio2Part2;
  const D4 hi = y - w;
  const D4 yv = hi + w;
  const D4 wv = hi - yv;
  D4 lo = (y - yv) - (w + wv);
  lo = lo - nd * core::kPio2Part3;
  lo = lo - nd * core::kPio2Part3Tail;
  const D4 r = hi + lo;
  const D4 z = r * r;
  D4 c = D4{} + core::cosCoeff(core::kCosTerms - 1);
  for (int i = core::kCosTerms - 2; i >= 0; --i)
    c = core::cosCoeff(i) + z * c;
  const D4 cosR = 1.0 + z * c;
  D4 sn = D4{} + core::sinCoeff(core::kSinTerms - 1);
  for (int i = core::kSinTerms - 2; i >= 0; --i)
    sn = core::sinCoeff(i) + z * sn;
  const D4 sinR = r + (r * z) * sn;
  const I4 q1 = (I4)(nd == 1.0), q2 = (I4)(nd == 2.0), q3 = (I4)(nd == 3.0);
  const D4 cosX = q1 ? -sinR : q2 ? -cosR : q3 ? sinR : cosR;

  const D4 normal = radius * cosX;
  _mm_storeu_ps(out, _mm256_cvtpd_ps((__m256d)normal));
}

bool cpuHasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}

} // namespace
#endif

void philoxNormal(int64_t seed, int64_t counter, int64_t offset, float *out,
                  int64_t n) {
  int64_t j = 0;
#ifdef OMNI_PHILOX_AVX2
  if (cpuHasAvx2())
    for (; j + 4 <= n; j += 4)
      normals4(static_cast<uint64_t>(seed), static_cast<uint64_t>(counter),
               static_cast<uint64_t>(offset) + static_cast<uint64_t>(j),
               out + j);
#endif
  for (; j < n; ++j)
    out[j] = normalFromBlock(
        blockAt(static_cast<uint64_t>(seed), static_cast<uint64_t>(counter),
                static_cast<uint64_t>(offset) + static_cast<uint64_t>(j)));
}

} // namespace omni::flowgrpo
