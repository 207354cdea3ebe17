//===- CpuAttentionTest.cpp - Tests of the fused attention kernel -*- C++
//-*-===//
//
// The polynomial exp against std::exp, and the fused kernel (both ISA
// copies) against a float64 computation on the same f32 inputs and
// against the materialized path, within bounds derived from f32 rounding
// and the exp's stated accuracy (see errorBound); bit-identical results
// for any thread count.
//
//===----------------------------------------------------------------------===//

#include "runtime/hal/drivers/cpu/CpuAttention.h"

#include "runtime/hal/drivers/cpu/CpuLibraries.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

namespace omni::hal::cpu {
namespace {

constexpr double kU = 0x1p-24;        // f32 unit roundoff
constexpr double kExpError = 0x1p-22; // attentionExp's stated bound
constexpr float kInf = std::numeric_limits<float>::infinity();

/// Every copy of the kernel this CPU runs (Best is one of them).
std::vector<AttentionIsa> isas() {
  std::vector<AttentionIsa> out = {AttentionIsa::Baseline};
  for (AttentionIsa isa : {AttentionIsa::Avx2, AttentionIsa::Avx512})
    if (attentionIsaAvailable(isa))
      out.push_back(isa);
  return out;
}

TEST(AttentionIsa, BestIsTheWidestCopyThisCpuRuns) {
  std::vector<AttentionIsa> all = isas();
  EXPECT_STREQ(attentionIsa(AttentionIsa::Best), attentionIsa(all.back()));
  EXPECT_STREQ(attentionIsa(AttentionIsa::Baseline), "baseline");
  if (attentionIsaAvailable(AttentionIsa::Avx512))
    EXPECT_TRUE(attentionIsaAvailable(AttentionIsa::Avx2));
  else // a copy the CPU lacks runs the baseline
    EXPECT_STREQ(attentionIsa(AttentionIsa::Avx512), "baseline");
}

TEST(AttentionExp, WithinItsStatedAccuracy) {
  std::vector<float> x;
  for (double t = -87.33; t <= 88.0; t += 1.0 / 4096)
    x.push_back(static_cast<float>(t));
  x.push_back(0.0f);
  x.push_back(-0.0f);
  x.push_back(-87.33f);
  x.push_back(88.0f);
  for (AttentionIsa isa : isas()) {
    std::vector<float> y(x.size());
    attentionExp(x.data(), y.data(), int64_t(x.size()), isa);
    double worst = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      double want = std::exp(double(x[i]));
      worst = std::max(worst, std::abs(y[i] - want) / want);
    }
    EXPECT_LE(worst, kExpError) << attentionIsa(isa);
    // The row max's probability is exactly 1.
    float zero = 0.0f, one = 0.0f;
    attentionExp(&zero, &one, 1, isa);
    EXPECT_EQ(one, 1.0f);
  }
}

TEST(AttentionExp, SpecialValues) {
  const float in[] = {-kInf,  -1000.0f,
                      -87.5f, 1000.0f,
                      kInf,   std::numeric_limits<float>::quiet_NaN(),
                      -1.0f};
  const int64_t n = sizeof(in) / sizeof(in[0]);
  for (AttentionIsa isa : isas()) {
    float out[n];
    attentionExp(in, out, n, isa);
    EXPECT_EQ(out[0], 0.0f);
    EXPECT_EQ(out[1], 0.0f);
    EXPECT_EQ(out[2], 0.0f); // subnormal exp flushed to 0
    EXPECT_EQ(out[3], kInf);
    EXPECT_EQ(out[4], kInf);
    EXPECT_TRUE(std::isnan(out[5]));
    EXPECT_NEAR(out[6], std::exp(-1.0), kExpError * std::exp(-1.0));
  }
}

/// Deterministic values in [-1, 1).
std::vector<float> randomFloats(int64_t n, uint64_t seed, float range = 1) {
  std::vector<float> out(static_cast<size_t>(n));
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (float &x : out) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = range * (static_cast<float>(s >> 40) / float(1 << 24) * 2 - 1);
  }
  return out;
}

struct Case {
  AttentionParams p;
  std::vector<float> q, k, v, mask;
  int64_t maskIndex(int64_t b, int64_t h, int64_t i, int64_t j) const {
    int64_t mh = p.maskHeadShared ? 1 : p.heads;
    return (((p.maskBatchShared ? 0 : b) * mh + (p.maskHeadShared ? 0 : h)) *
                p.seqQ +
            i) *
               p.seqK +
           j;
  }
};

Case makeCase(int64_t batch, int64_t heads, int64_t seqQ, int64_t seqK,
              int64_t d, int64_t dv, double scale, int maskKind,
              float range = 1, uint64_t seed = 1) {
  Case c;
  AttentionParams &p = c.p;
  p.batch = batch, p.heads = heads, p.seqQ = seqQ, p.seqK = seqK;
  p.headDim = d, p.valueDim = dv, p.scale = scale;
  p.hasMask = maskKind > 0;
  p.maskBatchShared = maskKind == 2 || maskKind == 4;
  p.maskHeadShared = maskKind == 3 || maskKind == 4;
  c.q = randomFloats(batch * heads * seqQ * d, seed, range);
  c.k = randomFloats(batch * heads * seqK * d, seed + 1, range);
  c.v = randomFloats(batch * heads * seqK * dv, seed + 2);
  if (p.hasMask) {
    int64_t mb = p.maskBatchShared ? 1 : batch,
            mh = p.maskHeadShared ? 1 : heads;
    c.mask = randomFloats(mb * mh * seqQ * seqK, seed + 3, 3);
    // -inf entries: every third key of odd rows, and for row 1 every key
    // of the first key block, so its max first appears in a later block.
    for (int64_t bh = 0; bh < mb * mh; ++bh)
      for (int64_t i = 0; i < seqQ; ++i)
        for (int64_t j = 0; j < seqK; ++j)
          if ((i % 2 == 1 && j % 3 == 0) ||
              (i == 1 && j < attentionKeyBlock(seqK) && j + 1 < seqK))
            c.mask[(bh * seqQ + i) * seqK + j] = -kInf;
  }
  return c;
}

/// The exact softmax(...) v of the f32 inputs, and per output row the bound
/// on the f32 result's error (times max |v|):
///   logits: |ds_j| <= (D + 1) u scale sum_d |q_d k_d| + 2 u |s_j| (the
///     dot, the scaling, the mask add); a logit error d moves each
///     normalized probability by a relative e^{2d} - 1;
///   s_j - max rounds with |s_j - max| u, so by u (max |s| + |max|) at most;
///   the exp's relative error on every probability and on each block's
///     rescale factor: 2 (blocks + 1) expError;
///   f32 partial sums of p v over `chunk` keys: chunk u; the f32 lanes
///   of a block's probability sum, at most chunk / 8 terms each: (chunk /
///   8 + 1) u; the final product and rounding 3 u.
struct Reference {
  std::vector<double> out, bound;
};
Reference reference(const Case &c, double expError, int64_t chunk) {
  const AttentionParams &p = c.p;
  Reference r;
  const int64_t block = attentionKeyBlock(p.seqK);
  const int64_t blocks = (p.seqK + block - 1) / block;
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t h = 0; h < p.heads; ++h) {
      const int64_t bh = b * p.heads + h;
      double maxV = 0;
      for (int64_t j = 0; j < p.seqK * p.valueDim; ++j)
        maxV =
            std::max(maxV, std::abs(double(c.v[bh * p.seqK * p.valueDim + j])));
      for (int64_t i = 0; i < p.seqQ; ++i) {
        std::vector<double> s(p.seqK);
        double max = -INFINITY, logitError = 0, maxAbs = 0;
        for (int64_t j = 0; j < p.seqK; ++j) {
          double dot = 0, absDot = 0;
          for (int64_t e = 0; e < p.headDim; ++e) {
            double x = double(c.q[(bh * p.seqQ + i) * p.headDim + e]) *
                       c.k[(bh * p.seqK + j) * p.headDim + e];
            dot += x, absDot += std::abs(x);
          }
          s[j] = dot * p.scale;
          if (p.hasMask)
            s[j] += c.mask[c.maskIndex(b, h, i, j)];
          max = std::max(max, s[j]);
          if (std::isfinite(s[j])) {
            logitError =
                std::max(logitError, (p.headDim + 1) * kU * p.scale * absDot +
                                         2 * kU * std::abs(s[j]));
            maxAbs = std::max(maxAbs, std::abs(s[j]));
          }
        }
        double sum = 0;
        for (double &x : s)
          sum += (x = std::exp(x - max));
        double rel = std::expm1(2 * logitError) +
                     kU * (maxAbs + std::abs(max)) +
                     2 * (blocks + 1) * expError + (chunk + chunk / 8 + 4) * kU;
        for (int64_t e = 0; e < p.valueDim; ++e) {
          double acc = 0;
          for (int64_t j = 0; j < p.seqK; ++j)
            acc += s[j] / sum * c.v[(bh * p.seqK + j) * p.valueDim + e];
          r.out.push_back(acc);
          r.bound.push_back(rel * maxV);
        }
      }
    }
  return r;
}

std::vector<float> runFused(const Case &c, int threads, AttentionIsa isa) {
  ThreadPool pool(threads);
  std::vector<float> out(c.p.batch * c.p.heads * c.p.seqQ * c.p.valueDim,
                         -7.0f);
  fusedAttention(c.p, c.q.data(), c.k.data(), c.v.data(),
                 c.p.hasMask ? c.mask.data() : nullptr, out.data(), pool, isa);
  return out;
}

std::vector<float> runMaterialized(const Case &c, int threads) {
  ThreadPool pool(threads);
  std::vector<float> out(c.p.batch * c.p.heads * c.p.seqQ * c.p.valueDim);
  EXPECT_TRUE(runAttention(c.p, c.q.data(), c.k.data(), c.v.data(),
                           c.p.hasMask ? c.mask.data() : nullptr, out.data(),
                           pool, AttentionPath::Materialized)
                  .ok());
  return out;
}

void expectWithin(const std::vector<float> &got, const Reference &want,
                  const char *what) {
  ASSERT_EQ(got.size(), want.out.size());
  int reported = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::abs(got[i] - want.out[i]) <= want.bound[i]) && reported++ < 5)
      ADD_FAILURE() << what << " [" << i << "]: " << got[i] << " vs "
                    << want.out[i] << " (bound " << want.bound[i] << ")";
}

std::vector<Case> shapes() {
  std::vector<Case> cases;
  // The recipes' shapes (batch cut to 2): tiny joint and image-only
  // attention, small's, the VAE's single-head attention.
  cases.push_back(makeCase(2, 4, 72, 72, 16, 16, 0.25, 0));
  cases.push_back(makeCase(2, 4, 64, 64, 16, 16, 0.25, 0));
  cases.push_back(makeCase(1, 2, 288, 288, 32, 32, 1 / std::sqrt(32.0), 0));
  cases.push_back(makeCase(1, 1, 256, 256, 32, 32, 1 / std::sqrt(32.0), 0));
  // Odd lengths, key counts around the block size, odd head/value sizes.
  for (int64_t seqK : {1, 5, 15, 63, 64, 65, 130, 200})
    cases.push_back(makeCase(2, 3, 37, seqK, 3, 7, 0.37, 0, 1, seqK));
  cases.push_back(makeCase(1, 2, 33, 97, 33, 40, 0.2, 0));
  cases.push_back(makeCase(1, 1, 5, 70, 1, 1, 1.0, 0));
  cases.push_back(makeCase(1, 1, 9, 300, 128, 128, 1 / std::sqrt(128.0), 0));
  // Masks: full, broadcast over the batch, the heads, both; with -inf.
  for (int kind = 1; kind <= 4; ++kind)
    cases.push_back(makeCase(2, 3, 41, 150, 8, 9, 0.4, kind, 1, 10 + kind));
  // Large logits (|s| up to ~1e3): the online max must keep exp in range.
  cases.push_back(makeCase(2, 2, 40, 200, 16, 16, 4.0, 0, 4));
  cases.push_back(makeCase(1, 2, 35, 129, 16, 8, 30.0, 1, 2));
  // The sgemm path (head size >= kAttentionGemmMinHeadDim): two query
  // tiles (more than kAttentionGemmMaxQueryTile rows), the masks, large
  // logits.
  static_assert(kAttentionGemmMaxQueryTile < 330, "two tiles below");
  cases.push_back(makeCase(1, 2, 340, 150, 32, 24, 0.3, 0));
  for (int kind = 1; kind <= 4; ++kind)
    cases.push_back(makeCase(2, 2, 330, 150, 32, 9, 0.4, kind, 1, 20 + kind));
  cases.push_back(makeCase(1, 2, 40, 200, 32, 16, 4.0, 0, 4));
  return cases;
}

TEST(FusedAttention, MatchesAFloat64SoftmaxWithinTheDerivedBound) {
  for (const Case &c : shapes())
    for (AttentionIsa isa : isas()) {
      SCOPED_TRACE(::testing::Message()
                   << "seqQ " << c.p.seqQ << " seqK " << c.p.seqK << " d "
                   << c.p.headDim << " dv " << c.p.valueDim << " mask "
                   << c.p.hasMask << " isa " << attentionIsa(isa));
      expectWithin(runFused(c, 2, isa),
                   reference(c, kExpError, attentionKeyBlock(c.p.seqK)),
                   "fused");
    }
}

TEST(FusedAttention, AgreesWithTheMaterializedPath) {
  // Both within their bounds of the float64 result (the materialized one
  // uses std::exp, ~1 ulp, and sums p v over all seqK keys in f32), so
  // within the sum of the two bounds of each other.
  for (const Case &c : shapes()) {
    SCOPED_TRACE(::testing::Message()
                 << "seqQ " << c.p.seqQ << " seqK " << c.p.seqK);
    Reference fused = reference(c, kExpError, attentionKeyBlock(c.p.seqK));
    Reference mat = reference(c, 2 * kU, c.p.seqK);
    std::vector<float> a = runFused(c, 2, AttentionIsa::Best);
    std::vector<float> b = runMaterialized(c, 2);
    expectWithin(b, mat, "materialized");
    Reference mutual;
    for (size_t i = 0; i < a.size(); ++i) {
      mutual.out.push_back(b[i]);
      mutual.bound.push_back(fused.bound[i] + mat.bound[i]);
    }
    expectWithin(a, mutual, "fused vs materialized");
  }
}

TEST(FusedAttention, SameBitsForAnyThreadCount) {
  for (const Case &c : shapes())
    for (AttentionIsa isa : isas()) {
      std::vector<float> one = runFused(c, 1, isa);
      for (int threads : {2, 3, 7, 16}) {
        std::vector<float> many = runFused(c, threads, isa);
        EXPECT_EQ(
            std::memcmp(one.data(), many.data(), one.size() * sizeof(float)), 0)
            << threads << " threads, seqQ " << c.p.seqQ << " seqK " << c.p.seqK;
      }
    }
}

TEST(FusedAttention, FullyMaskedRowsAreNaNAsInTheMaterializedPath) {
  // In registers (head size 4) and on the sgemm path (32).
  for (int64_t d : {int64_t(4), kAttentionGemmMinHeadDim}) {
    SCOPED_TRACE(::testing::Message() << "head size " << d);
    const int64_t n = 200, block = attentionKeyBlock(n);
    ASSERT_LT(block, n); // two key blocks
    Case c = makeCase(1, 1, 3, n, d, 5, 0.5, 1);
    for (int64_t j = 0; j < n; ++j)
      c.mask[1 * n + j] = -kInf; // row 1: nothing to attend to
    c.mask[2 * n + 10] = std::numeric_limits<float>::quiet_NaN();
    for (int64_t j = 0; j < block; ++j) // row 0: its first block fully masked
      c.mask[j] = -kInf;
    std::vector<float> fused = runFused(c, 2, AttentionIsa::Best);
    std::vector<float> mat = runMaterialized(c, 2);
    for (int64_t e = 0; e < 5; ++e) {
      EXPECT_TRUE(std::isfinite(fused[e])) << fused[e];
      EXPECT_NEAR(fused[e], mat[e], 1e-5);
      EXPECT_TRUE(std::isnan(fused[5 + e])) << fused[5 + e];
      EXPECT_TRUE(std::isnan(mat[5 + e])) << mat[5 + e];
      EXPECT_TRUE(std::isnan(fused[10 + e])) << fused[10 + e]; // NaN score
      EXPECT_TRUE(std::isnan(mat[10 + e])) << mat[10 + e];
    }
    // A NaN in a block whose other scores are all -inf still poisons the row.
    Case e = makeCase(1, 1, 1, n, d, 5, 0.5, 1);
    for (int64_t j = 0; j < block; ++j)
      e.mask[j] = -kInf;
    e.mask[3] = std::numeric_limits<float>::quiet_NaN();
    for (float x : runFused(e, 1, AttentionIsa::Best))
      EXPECT_TRUE(std::isnan(x)) << x;
  }
}

TEST(FusedAttention, KeyBlocksAreEqualAndAtMostTheMaximum) {
  EXPECT_EQ(attentionKeyBlock(1), 16);
  EXPECT_EQ(attentionKeyBlock(72), 80);
  EXPECT_EQ(attentionKeyBlock(128), 128);
  EXPECT_EQ(attentionKeyBlock(129), 80);
  EXPECT_EQ(attentionKeyBlock(288), 96);
  EXPECT_EQ(attentionKeyBlock(1024), 128);
}

TEST(FusedAttention, NoKeysGivesZerosAsTheMaterializedPath) {
  Case c = makeCase(2, 1, 3, 0, 4, 5, 0.5, 0);
  for (float x : runFused(c, 2, AttentionIsa::Best))
    EXPECT_EQ(x, 0.0f);
  for (float x : runMaterialized(c, 2))
    EXPECT_EQ(x, 0.0f);
}

TEST(FusedAttention, AutoPathIsFusedUpToHeadSize128AndNeverForF64) {
  AttentionParams p;
  p.batch = 32, p.heads = 4, p.seqQ = p.seqK = 72, p.headDim = p.valueDim = 16;
  EXPECT_EQ(chooseAttentionPath(p), AttentionPath::Fused);
  p.dtype = DType::BF16;
  EXPECT_EQ(chooseAttentionPath(p), AttentionPath::Fused);
  p.headDim = 128, p.valueDim = 128;
  EXPECT_EQ(chooseAttentionPath(p), AttentionPath::Fused);
  p.valueDim = 129;
  EXPECT_EQ(chooseAttentionPath(p), AttentionPath::Materialized);
  p.valueDim = 16, p.headDim = 256;
  EXPECT_EQ(chooseAttentionPath(p), AttentionPath::Materialized);
  p.headDim = 16, p.dtype = DType::F64;
  EXPECT_EQ(chooseAttentionPath(p), AttentionPath::Materialized);
}

//===--- The backward ---------------------------------------------------===//

/// The cotangents of softmax(q k^T scale) v in float64 from the same f32
/// inputs (o is the f32 forward output the program would pass), and per
/// element the bound on the f32 kernel's error (u = 2^-24):
///   p: relative e^{2 d} - 1 + u (max|s| + |max|) + 2 (blocks + 1) expError
///     + (seqK / 8 + 6) u (logits, s - max, the exps, the row sum, the
///     product with 1/l), d the logit bound of the forward's test, plus
///     2^-126 absolute (the exp flushes results below the smallest normal
///     float to 0);
///   ds = p (dp - D): eds = eps_p |ds| + p ((Dv + 2) u (sum|dO v| +
///     sum|dO o|) + 3 u (|dp| + |D|)) (the two dot products, the
///     subtraction and product);
///   dq = scale sum_j ds k: scale (sum eds |k| + (seqK + 4) u sum |ds k|),
///   dk likewise over the rows with q, dv = sum_i p dO: sum eps_p p |dO| +
///   (seqQ + 4) u sum p |dO|.
constexpr double kFlush = 0x1p-126;

struct BackwardReference {
  std::vector<double> dq, dk, dv, bq, bk, bv;
};
BackwardReference backwardReference(const Case &c, const std::vector<float> &o,
                                    const std::vector<float> &dO) {
  const AttentionParams &p = c.p;
  const int64_t D = p.headDim, Dv = p.valueDim, sq = p.seqQ, sk = p.seqK;
  const int64_t block = attentionKeyBlock(sk);
  const int64_t blocks = (sk + block - 1) / block;
  BackwardReference r;
  const int64_t bhs = p.batch * p.heads;
  r.dq.assign(bhs * sq * D, 0), r.bq.assign(bhs * sq * D, 0);
  r.dk.assign(bhs * sk * D, 0), r.bk.assign(bhs * sk * D, 0);
  r.dv.assign(bhs * sk * Dv, 0), r.bv.assign(bhs * sk * Dv, 0);
  for (int64_t bh = 0; bh < bhs; ++bh)
    for (int64_t i = 0; i < sq; ++i) {
      const float *qi = &c.q[(bh * sq + i) * D];
      const float *dOi = &dO[(bh * sq + i) * Dv];
      std::vector<double> s(sk), absDot(sk);
      double max = -INFINITY, logitError = 0, maxAbs = 0;
      for (int64_t j = 0; j < sk; ++j) {
        double dot = 0, a = 0;
        for (int64_t e = 0; e < D; ++e) {
          double x = double(qi[e]) * c.k[(bh * sk + j) * D + e];
          dot += x, a += std::abs(x);
        }
        s[j] = dot * p.scale;
        if (p.hasMask)
          s[j] += c.mask[c.maskIndex(bh / p.heads, bh % p.heads, i, j)];
        max = std::max(max, s[j]);
        if (std::isfinite(s[j])) {
          logitError = std::max(logitError, (D + 1) * kU * p.scale * a +
                                                2 * kU * std::abs(s[j]));
          maxAbs = std::max(maxAbs, std::abs(s[j]));
        }
      }
      double sum = 0;
      for (double &x : s)
        sum += (x = std::exp(x - max));
      const double epsP = std::expm1(2 * logitError) +
                          kU * (maxAbs + std::abs(max)) +
                          2 * (blocks + 1) * kExpError + (sk / 8 + 6) * kU;
      double Di = 0, absDo = 0;
      for (int64_t e = 0; e < Dv; ++e) {
        Di += double(dOi[e]) * o[(bh * sq + i) * Dv + e];
        absDo += std::abs(double(dOi[e]) * o[(bh * sq + i) * Dv + e]);
      }
      for (int64_t j = 0; j < sk; ++j) {
        const double pij = s[j] / sum;
        double dp = 0, absDv = 0;
        for (int64_t e = 0; e < Dv; ++e) {
          double x = double(dOi[e]) * c.v[(bh * sk + j) * Dv + e];
          dp += x, absDv += std::abs(x);
        }
        const double ds = pij * (dp - Di);
        const double eds = epsP * std::abs(ds) +
                           kFlush * (std::abs(dp) + std::abs(Di)) +
                           pij * ((Dv + 2) * kU * (absDv + absDo) +
                                  3 * kU * (std::abs(dp) + std::abs(Di)));
        for (int64_t e = 0; e < D; ++e) {
          const double kje = c.k[(bh * sk + j) * D + e], qie = qi[e];
          r.dq[(bh * sq + i) * D + e] += p.scale * ds * kje;
          r.bq[(bh * sq + i) * D + e] +=
              p.scale *
              (eds * std::abs(kje) + (sk + 4) * kU * std::abs(ds * kje));
          r.dk[(bh * sk + j) * D + e] += p.scale * ds * qie;
          r.bk[(bh * sk + j) * D + e] +=
              p.scale *
              (eds * std::abs(qie) + (sq + 4) * kU * std::abs(ds * qie));
        }
        for (int64_t e = 0; e < Dv; ++e) {
          const double x = pij * std::abs(double(dOi[e]));
          r.dv[(bh * sk + j) * Dv + e] += pij * dOi[e];
          r.bv[(bh * sk + j) * Dv + e] +=
              epsP * x + (sq + 4) * kU * x + kFlush * std::abs(double(dOi[e]));
        }
      }
    }
  return r;
}

struct BackwardRun {
  std::vector<float> o, dO, dq, dk, dv;
};
BackwardRun runBackward(const Case &c, int threads, AttentionIsa isa) {
  const AttentionParams &p = c.p;
  BackwardRun r;
  r.o = runFused(c, 1, AttentionIsa::Baseline);
  r.dO = randomFloats(p.batch * p.heads * p.seqQ * p.valueDim, 99);
  r.dq.assign(p.batch * p.heads * p.seqQ * p.headDim, -7.0f);
  r.dk.assign(p.batch * p.heads * p.seqK * p.headDim, -7.0f);
  r.dv.assign(p.batch * p.heads * p.seqK * p.valueDim, -7.0f);
  ThreadPool pool(threads);
  fusedAttentionBackward(p, c.q.data(), c.k.data(), c.v.data(),
                         p.hasMask ? c.mask.data() : nullptr, r.o.data(),
                         r.dO.data(), r.dq.data(), r.dk.data(), r.dv.data(),
                         pool, isa);
  return r;
}

std::vector<Case> backwardShapes() {
  std::vector<Case> cases;
  cases.push_back(makeCase(2, 4, 72, 72, 16, 16, 0.25, 0));
  cases.push_back(makeCase(1, 2, 288, 288, 32, 32, 1 / std::sqrt(32.0), 0));
  for (int64_t seqK : {1, 5, 15, 65, 130, 200})
    cases.push_back(makeCase(2, 3, 37, seqK, 3, 7, 0.37, 0, 1, seqK));
  cases.push_back(makeCase(1, 2, 1, 40, 8, 8, 0.5, 0));
  cases.push_back(makeCase(1, 2, 33, 97, 33, 40, 0.2, 0));
  cases.push_back(makeCase(1, 1, 5, 70, 1, 1, 1.0, 0));
  cases.push_back(makeCase(1, 1, 9, 300, 128, 128, 1 / std::sqrt(128.0), 0));
  cases.push_back(makeCase(2, 2, 40, 200, 16, 16, 4.0, 0, 4)); // large logits
  // The sgemm path: several query tiles, large logits.
  cases.push_back(makeCase(1, 2, 340, 150, 32, 24, 0.3, 0));
  cases.push_back(makeCase(1, 2, 40, 200, 32, 16, 4.0, 0, 4));
  // Masks, both paths: per (batch, head), shared over the batch, over the
  // heads, over both; -inf keys, a row whose first key block is all
  // masked (makeCase).
  cases.push_back(makeCase(2, 3, 37, 130, 8, 7, 0.37, 1));
  cases.push_back(makeCase(2, 2, 70, 65, 32, 16, 0.2, 2));
  cases.push_back(makeCase(2, 2, 40, 200, 16, 16, 1.0, 3, 2));
  cases.push_back(makeCase(3, 2, 340, 150, 32, 24, 0.3, 4));
  return cases;
}

void expectWithinBound(const std::vector<float> &got,
                       const std::vector<double> &want,
                       const std::vector<double> &bound, const char *what) {
  ASSERT_EQ(got.size(), want.size());
  int reported = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::abs(got[i] - want[i]) <= bound[i]) && reported++ < 5)
      ADD_FAILURE() << what << " [" << i << "]: " << got[i] << " vs " << want[i]
                    << " (bound " << bound[i] << ")";
}

TEST(FusedAttentionBackward, MatchesFloat64CotangentsWithinTheDerivedBound) {
  for (const Case &c : backwardShapes())
    for (AttentionIsa isa : isas()) {
      SCOPED_TRACE(::testing::Message()
                   << "seqQ " << c.p.seqQ << " seqK " << c.p.seqK << " d "
                   << c.p.headDim << " dv " << c.p.valueDim << " isa "
                   << attentionIsa(isa));
      BackwardRun run = runBackward(c, 2, isa);
      BackwardReference want = backwardReference(c, run.o, run.dO);
      expectWithinBound(run.dq, want.dq, want.bq, "dq");
      expectWithinBound(run.dk, want.dk, want.bk, "dk");
      expectWithinBound(run.dv, want.dv, want.bv, "dv");
    }
}

TEST(FusedAttentionBackward, SameBitsForAnyThreadCount) {
  for (const Case &c : backwardShapes())
    for (AttentionIsa isa : isas()) {
      BackwardRun one = runBackward(c, 1, isa);
      for (int threads : {2, 3, 7}) {
        BackwardRun many = runBackward(c, threads, isa);
        EXPECT_TRUE(one.dq == many.dq && one.dk == many.dk && one.dv == many.dv)
            << threads << " threads, seqQ " << c.p.seqQ << " seqK " << c.p.seqK
            << " isa " << attentionIsa(isa);
      }
    }
}

// An all-zero mask adds nothing: the bits of no mask, on both paths (the
// register path below head size 32, the sgemm path from it).
TEST(FusedAttentionBackward, AZeroMaskGivesTheBitsOfNone) {
  for (int64_t d : {8, 32}) {
    Case none = makeCase(2, 2, 37, 70, d, 7, 0.3, 0);
    Case zero = none;
    zero.p.hasMask = true;
    zero.p.maskBatchShared = zero.p.maskHeadShared = true;
    zero.mask.assign(37 * 70, 0.0f);
    BackwardRun a = runBackward(none, 2, AttentionIsa::Best);
    BackwardRun b = runBackward(zero, 2, AttentionIsa::Best);
    EXPECT_TRUE(a.dq == b.dq && a.dk == b.dk && a.dv == b.dv) << "d " << d;
  }
}

TEST(FusedAttentionBackward, NoKeysGivesZeroCotangents) {
  Case c = makeCase(2, 1, 3, 0, 4, 5, 0.5, 0);
  BackwardRun r = runBackward(c, 2, AttentionIsa::Best);
  for (float x : r.dq)
    EXPECT_EQ(x, 0.0f);
}

} // namespace
} // namespace omni::hal::cpu
