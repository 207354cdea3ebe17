//===- FlashAttentionHostTest.cpp - The flash kernel, run on the host -----===//
//
// FlashAttention.h is the cuda driver's attention kernel; no GPU runs in CI,
// so this test runs the same code on the host under a model of what it
// uses from CUDA (FlashAttentionHostModel.h: a std::thread per CUDA thread,
// barriers, WMMA fragments holding whole tiles).
// Every block of a call runs, one after another, with the shared memory
// sharedBytes() says, and the result is checked against attention computed
// in double from the same rounded inputs.
//
//===----------------------------------------------------------------------===//

#include "runtime/hal/drivers/cuda/kernels/FlashAttentionHostModel.h"
#include "runtime/io/ElementCodec.h"

#include "gtest/gtest.h"

#include <cmath>
#include <random>
#include <vector>

namespace {

using namespace omni::hal::cuda::flash;
using flash_host::runBlocks;

struct Problem {
  int64_t batch, heads, seqQ, seqK;
  bool mask, maskBatchShared, maskHeadShared;
  /// Rows of the mask set to -inf (all keys masked for that query row).
  int64_t blockedRow = -1;
};

template <typename T> struct Case {
  Problem p;
  std::vector<T> q, k, v, mask, out;
};

template <typename T>
std::vector<T> randomTensor(int64_t n, std::mt19937 &rng, float scale) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<T> t(static_cast<size_t>(n));
  for (T &x : t)
    x = faFromFloat<T>(normal(rng));
  return t;
}

/// Runs every block of the forward on the host.
template <typename T, int D> void runFlash(Case<T> &c, float scale) {
  const Problem &p = c.p;
  const int64_t pairs = p.batch * p.heads;
  c.out.assign(static_cast<size_t>(pairs * p.seqQ * D), faFromFloat<T>(-7.0f));
  const int64_t maskHeads = p.maskHeadShared ? 1 : p.heads;
  const int64_t square = p.seqQ * p.seqK;
  const int64_t maskBatchStride = p.maskBatchShared ? 0 : maskHeads * square;
  const int64_t maskHeadStride = p.maskHeadShared ? 0 : square;
  runBlocks(blocksFor(pairs, p.seqQ), sharedBytes(D, sizeof(T)),
            [&](int64_t block, unsigned char *shared, int t) {
              attentionBlock<T, D>(c.q.data(), c.k.data(), c.v.data(),
                                   p.mask ? c.mask.data() : nullptr,
                                   c.out.data(), block, p.seqQ, p.seqK, p.heads,
                                   maskBatchStride, maskHeadStride,
                                   p.mask ? 1 : 0, scale, shared, t);
            });
}

/// softmax(scale q k^T + mask) v in double, for (pair, row): D values.
template <typename T, int D>
std::vector<double> reference(const Case<T> &c, float scale, int64_t pair,
                              int64_t row) {
  const Problem &p = c.p;
  const int64_t b = pair / p.heads, h = pair % p.heads;
  std::vector<double> s(static_cast<size_t>(p.seqK));
  double maxS = -INFINITY;
  for (int64_t j = 0; j < p.seqK; ++j) {
    double dot = 0;
    for (int d = 0; d < D; ++d)
      dot += double(faToFloat(c.q[(pair * p.seqQ + row) * D + d])) *
             faToFloat(c.k[(pair * p.seqK + j) * D + d]);
    double x = dot * scale;
    if (p.mask) {
      int64_t mb = p.maskBatchShared ? 0 : b, mh = p.maskHeadShared ? 0 : h;
      int64_t heads = p.maskHeadShared ? 1 : p.heads;
      x += faToFloat(c.mask[((mb * heads + mh) * p.seqQ + row) * p.seqK + j]);
    }
    s[j] = x;
    maxS = std::max(maxS, x);
  }
  double sum = 0;
  for (double &x : s) {
    x = std::exp(x - maxS);
    sum += x;
  }
  std::vector<double> o(D, 0.0);
  for (int64_t j = 0; j < p.seqK; ++j)
    for (int d = 0; d < D; ++d)
      o[d] += s[j] / sum * faToFloat(c.v[(pair * p.seqK + j) * D + d]);
  return o;
}

/// The error bound of one output element: the output's rounding (half an
/// ulp of T: 2^-9 relative for bf16, 2^-12 for f16) plus the rounding of
/// each probability to T before P V (the same relative bound on each
/// term, so at most that times max |v|), plus f32 sums (negligible).
template <typename T> double unitRoundoff();
template <> double unitRoundoff<Bf16>() { return std::ldexp(1.0, -8); }
template <> double unitRoundoff<F16>() { return std::ldexp(1.0, -11); }

/// Checks one call against attention in double; returns the largest error.
template <typename T, int D>
double check(const Problem &problem, uint32_t seed) {
  std::mt19937 rng(seed);
  Case<T> c;
  c.p = problem;
  const int64_t pairs = problem.batch * problem.heads;
  c.q = randomTensor<T>(pairs * problem.seqQ * D, rng, 1.0f);
  c.k = randomTensor<T>(pairs * problem.seqK * D, rng, 1.0f);
  c.v = randomTensor<T>(pairs * problem.seqK * D, rng, 1.0f);
  if (problem.mask) {
    int64_t n = (problem.maskBatchShared ? 1 : problem.batch) *
                (problem.maskHeadShared ? 1 : problem.heads) * problem.seqQ *
                problem.seqK;
    c.mask = randomTensor<T>(n, rng, 2.0f);
    // Some keys masked out entirely, as a padding mask does.
    std::uniform_int_distribution<int> coin(0, 3);
    for (T &m : c.mask)
      if (coin(rng) == 0)
        m = faFromFloat<T>(-INFINITY);
    if (problem.blockedRow >= 0)
      for (int64_t j = 0; j < problem.seqK; ++j)
        c.mask[problem.blockedRow * problem.seqK + j] =
            faFromFloat<T>(-INFINITY);
  }
  const float scale = 1.0f / std::sqrt(float(D));
  runFlash<T, D>(c, scale);
  double maxV = 0;
  for (const T &x : c.v)
    maxV = std::max(maxV, std::fabs(double(faToFloat(x))));
  const double tolerance = 2 * unitRoundoff<T>() * maxV;
  double worst = 0;
  for (int64_t pair = 0; pair < pairs; ++pair)
    for (int64_t row = 0; row < problem.seqQ; ++row) {
      std::vector<double> want = reference<T, D>(c, scale, pair, row);
      for (int d = 0; d < D; ++d) {
        double got = faToFloat(c.out[(pair * problem.seqQ + row) * D + d]);
        bool blocked = row == problem.blockedRow &&
                       (problem.maskBatchShared || pair / problem.heads == 0) &&
                       (problem.maskHeadShared || pair % problem.heads == 0);
        if (blocked) {
          // Every key masked: NaN, as the unfused softmax gives.
          EXPECT_TRUE(std::isnan(got)) << "pair " << pair << " row " << row;
          continue;
        }
        EXPECT_TRUE(std::isfinite(got))
            << "pair " << pair << " row " << row << " d " << d;
        worst = std::max(worst, std::fabs(got - want[d]));
        EXPECT_LE(std::fabs(got - want[d]), tolerance)
            << "pair " << pair << " row " << row << " d " << d << ": got "
            << got << ", want " << want[d];
      }
    }
  return worst;
}

// seqQ and seqK off the tiles (partial query blocks and key tiles), several
// key tiles, and several pairs.
// (A positive error shows that the comparison is not vacuous: the
// roundings show.)
TEST(FlashAttentionHost, Bf16HeadDim64) {
  EXPECT_GT((check<Bf16, 64>({1, 2, 100, 150, false, false, false}, 1)), 0);
}

TEST(FlashAttentionHost, F16HeadDim128) {
  EXPECT_GT((check<F16, 128>({2, 1, 64, 77, false, false, false}, 2)), 0);
}

// A mask shared over the batch, per head, with masked keys and a query row
// whose keys are all masked.
TEST(FlashAttentionHost, MaskedBf16) {
  EXPECT_GT((check<Bf16, 64>({2, 2, 70, 130, true, true, false, 5}, 3)), 0);
}

TEST(FlashAttentionHost, MaskedF16HeadDim128) {
  EXPECT_GT((check<F16, 128>({1, 3, 30, 65, true, false, true}, 4)), 0);
}

// One key: p = exp(0) = 1 exactly and l = 1, so the result is the value row
// itself, bit for bit.
TEST(FlashAttentionHost, OneKeyGivesTheValueRow) {
  EXPECT_EQ((check<Bf16, 64>({1, 1, 3, 1, false, false, false}, 5)), 0);
}

TEST(FlashAttentionHost, SharedMemoryFitsAnSM) {
  // sm_80 and sm_90 give a block up to 163 KiB and 227 KiB: both sizes fit
  // sm_80, and a 227 KiB SM holds three 64-wide blocks.
  EXPECT_EQ(sharedBytes(64, 2), 66304u);
  EXPECT_EQ(sharedBytes(128, 2), 107264u);
  EXPECT_LE(sharedBytes(128, 2), 163u * 1024);
  EXPECT_EQ(blocksFor(48, 1357), 48 * 22);
}

//===----------------------------------------------------------------------===//
// The backward (FlashAttentionBackward.h)
//===----------------------------------------------------------------------===//

/// One backward call: q, k, v, the forward's result o (rounded to T) and
/// its cotangent dO; the kernels' dq, dk, dv. With a mask, the pairs are
/// (batch, 2 heads) and the mask [batch, 1, seqQ, seqK] (shared by the
/// heads).
template <typename T> struct GradCase {
  int64_t pairs, seqQ, seqK;
  std::vector<T> q, k, v, o, dO, dq, dk, dv, mask;
  MaskRef<T> maskRef() const {
    if (mask.empty())
      return {nullptr, 1, 0, 0};
    return {mask.data(), 2, seqQ * seqK, 0};
  }
  /// The mask's value at (pair, i, j), 0 without one.
  double maskAt(int64_t pair, int64_t i, int64_t j) const {
    return mask.empty() ? 0.0
                        : faToFloat(mask[((pair / 2) * seqQ + i) * seqK + j]);
  }
};

/// The rows kernel then the keys kernel, every block on the host.
template <typename T, int D>
void runFlashBackward(GradCase<T> &c, float scale) {
  const T poison = faFromFloat<T>(-7.0f);
  c.dq.assign(c.q.size(), poison);
  c.dk.assign(c.k.size(), poison);
  c.dv.assign(c.v.size(), poison);
  std::vector<float> lse(static_cast<size_t>(c.pairs * c.seqQ), NAN),
      delta(lse.size(), NAN);
  runBlocks(blocksFor(c.pairs, c.seqQ), rowsSharedBytes(D, sizeof(T)),
            [&](int64_t block, unsigned char *shared, int t) {
              attentionRowsBlock<T, D>(c.q.data(), c.k.data(), c.v.data(),
                                       c.o.data(), c.dO.data(), c.maskRef(),
                                       c.dq.data(), lse.data(), delta.data(),
                                       block, c.seqQ, c.seqK, scale, shared, t);
            });
  runBlocks(keyBlocksFor(c.pairs, c.seqK), keysSharedBytes(D, sizeof(T)),
            [&](int64_t block, unsigned char *shared, int t) {
              attentionKeysBlock<T, D>(c.q.data(), c.k.data(), c.v.data(),
                                       c.dO.data(), c.maskRef(), lse.data(),
                                       delta.data(), c.dk.data(), c.dv.data(),
                                       block, c.seqQ, c.seqK, scale, shared, t);
            });
}

/// The kernels' cotangents against the op's definition in double (from
/// the same rounded operands), element by element within a bound derived
/// from where the kernels round:
///  - the result's own rounding to T: u |exact|;
///  - P (for dv) and dS (for dq, dk) rounded to T before their products:
///    u times the sum of the products' magnitudes;
///  - f32 arithmetic (S, L, exp, Delta, dP, the sums) at most 2^-16 of the
///    same magnitudes (D <= 128 and |S scale| of a few units keep the f32
///    errors some 2^-20; 2^-16 is far below u = 2^-8 or 2^-11).
/// With `masked`, a mask shared by the 2 heads of each batch: -inf for a
/// quarter of the keys, and for keys [0, 70) of query row 1 (a whole
/// first key tile masked; the row's max comes later).
/// Returns the largest error.
template <typename T, int D>
double checkBackward(int64_t pairs, int64_t seqQ, int64_t seqK, uint32_t seed,
                     bool masked = false) {
  std::mt19937 rng(seed);
  GradCase<T> c{pairs, seqQ, seqK, {}, {}, {}, {}, {}, {}, {}, {}, {}};
  c.q = randomTensor<T>(pairs * seqQ * D, rng, 1.0f);
  c.k = randomTensor<T>(pairs * seqK * D, rng, 1.0f);
  c.v = randomTensor<T>(pairs * seqK * D, rng, 1.0f);
  c.dO = randomTensor<T>(pairs * seqQ * D, rng, 1.0f);
  c.o.assign(c.dO.size(), faFromFloat<T>(0.0f));
  if (masked) {
    c.mask = randomTensor<T>(pairs / 2 * seqQ * seqK, rng, 2.0f);
    std::uniform_int_distribution<int> coin(0, 3);
    for (int64_t i = 0; i < int64_t(c.mask.size()); ++i)
      if (coin(rng) == 0 ||
          (i / seqK % seqQ == 1 && i % seqK < 70 && i % seqK + 1 < seqK))
        c.mask[i] = faFromFloat<T>(-INFINITY);
  }
  const float scale = 1.0f / std::sqrt(float(D));
  auto at = [](const std::vector<T> &x, int64_t row, int e) {
    return double(faToFloat(x[static_cast<size_t>(row * D + e)]));
  };
  // P per pair in double, and o = P v rounded to T (the forward's result).
  std::vector<std::vector<double>> probs(static_cast<size_t>(pairs));
  for (int64_t b = 0; b < pairs; ++b) {
    std::vector<double> &p = probs[b];
    p.assign(static_cast<size_t>(seqQ * seqK), 0.0);
    for (int64_t i = 0; i < seqQ; ++i) {
      double maxS = -INFINITY, sum = 0;
      for (int64_t j = 0; j < seqK; ++j) {
        double dot = 0;
        for (int e = 0; e < D; ++e)
          dot += at(c.q, b * seqQ + i, e) * at(c.k, b * seqK + j, e);
        p[i * seqK + j] = dot * scale + c.maskAt(b, i, j);
        maxS = std::max(maxS, p[i * seqK + j]);
      }
      for (int64_t j = 0; j < seqK; ++j)
        sum += (p[i * seqK + j] = std::exp(p[i * seqK + j] - maxS));
      for (int64_t j = 0; j < seqK; ++j)
        p[i * seqK + j] /= sum;
      for (int e = 0; e < D; ++e) {
        double o = 0;
        for (int64_t j = 0; j < seqK; ++j)
          o += p[i * seqK + j] * at(c.v, b * seqK + j, e);
        c.o[static_cast<size_t>((b * seqQ + i) * D + e)] =
            faFromFloat<T>(static_cast<float>(o));
      }
    }
  }
  runFlashBackward<T, D>(c, scale);

  const double u = unitRoundoff<T>(), f32 = std::ldexp(1.0, -16);
  double worst = 0;
  auto expectNear = [&](double got, double want, double bound, const char *what,
                        int64_t row, int e) {
    EXPECT_TRUE(std::isfinite(got)) << what << " row " << row << " e " << e;
    const double err = std::fabs(got - want);
    worst = std::max(worst, err);
    EXPECT_LE(err, bound) << what << " row " << row << " e " << e << ": got "
                          << got << ", want " << want;
  };
  for (int64_t b = 0; b < pairs; ++b) {
    const std::vector<double> &p = probs[b];
    // dP = dO v^T, dS = P (dP - rowsum(dO o)), and |P| (|dP| + |Delta|),
    // the magnitude of dS's f32 terms.
    std::vector<double> ds(p.size()), dsMag(p.size());
    for (int64_t i = 0; i < seqQ; ++i) {
      double delta = 0;
      for (int e = 0; e < D; ++e)
        delta += at(c.dO, b * seqQ + i, e) * at(c.o, b * seqQ + i, e);
      for (int64_t j = 0; j < seqK; ++j) {
        double dp = 0;
        for (int e = 0; e < D; ++e)
          dp += at(c.dO, b * seqQ + i, e) * at(c.v, b * seqK + j, e);
        const double pij = p[i * seqK + j];
        ds[i * seqK + j] = pij * (dp - delta);
        dsMag[i * seqK + j] = pij * (std::fabs(dp) + std::fabs(delta));
      }
    }
    for (int64_t i = 0; i < seqQ; ++i)
      for (int e = 0; e < D; ++e) {
        double want = 0, mag = 0;
        for (int64_t j = 0; j < seqK; ++j) {
          const double kj = std::fabs(at(c.k, b * seqK + j, e));
          want += ds[i * seqK + j] * at(c.k, b * seqK + j, e);
          mag += (u * std::fabs(ds[i * seqK + j]) + f32 * dsMag[i * seqK + j]) *
                 kj;
        }
        want *= scale;
        expectNear(at(c.dq, b * seqQ + i, e), want,
                   u * std::fabs(want) + scale * mag, "dq", b * seqQ + i, e);
      }
    for (int64_t j = 0; j < seqK; ++j)
      for (int e = 0; e < D; ++e) {
        double wantK = 0, magK = 0, wantV = 0, magV = 0;
        for (int64_t i = 0; i < seqQ; ++i) {
          const double qi = at(c.q, b * seqQ + i, e);
          const double dOi = at(c.dO, b * seqQ + i, e);
          wantK += ds[i * seqK + j] * qi;
          magK +=
              (u * std::fabs(ds[i * seqK + j]) + f32 * dsMag[i * seqK + j]) *
              std::fabs(qi);
          wantV += p[i * seqK + j] * dOi;
          magV += (u + f32) * p[i * seqK + j] * std::fabs(dOi);
        }
        wantK *= scale;
        expectNear(at(c.dk, b * seqK + j, e), wantK,
                   u * std::fabs(wantK) + scale * magK, "dk", b * seqK + j, e);
        expectNear(at(c.dv, b * seqK + j, e), wantV,
                   u * std::fabs(wantV) + magV, "dv", b * seqK + j, e);
      }
  }
  return worst;
}

// Partial query and key tiles, several of each, several pairs; a positive
// error shows that the roundings are seen (the comparison is not vacuous).
TEST(FlashAttentionBackwardHost, Bf16HeadDim64) {
  EXPECT_GT((checkBackward<Bf16, 64>(2, 100, 150, 11)), 0);
}

TEST(FlashAttentionBackwardHost, F16HeadDim128) {
  EXPECT_GT((checkBackward<F16, 128>(1, 70, 65, 12)), 0);
}

// A mask shared over the heads, with masked keys and a query row whose
// first key tile is all masked.
TEST(FlashAttentionBackwardHost, MaskedBf16) {
  EXPECT_GT((checkBackward<Bf16, 64>(4, 70, 150, 16, true)), 0);
}

TEST(FlashAttentionBackwardHost, MaskedF16HeadDim128) {
  EXPECT_GT((checkBackward<F16, 128>(2, 40, 90, 17, true)), 0);
}

// Fewer queries than keys and the other way round, each under one tile.
TEST(FlashAttentionBackwardHost, ShortTiles) {
  EXPECT_GT((checkBackward<Bf16, 128>(3, 5, 33, 13)), 0);
  EXPECT_GT((checkBackward<F16, 64>(1, 40, 3, 14)), 0);
}

// One key: P = 1, so dS = dP - Delta is (dO v - dO o) with o = v rounded
// (exactly v: o = P v = v), hence 0, and dq = dk = 0 exactly; dv = dO.
TEST(FlashAttentionBackwardHost, OneKey) {
  GradCase<Bf16> c{2, 3, 1, {}, {}, {}, {}, {}, {}, {}, {}, {}};
  std::mt19937 rng(15);
  c.q = randomTensor<Bf16>(2 * 3 * 64, rng, 1.0f);
  c.k = randomTensor<Bf16>(2 * 1 * 64, rng, 1.0f);
  c.v = randomTensor<Bf16>(2 * 1 * 64, rng, 1.0f);
  c.dO = randomTensor<Bf16>(2 * 3 * 64, rng, 1.0f);
  c.o.clear();
  for (int64_t b = 0; b < 2; ++b)
    for (int i = 0; i < 3; ++i)
      c.o.insert(c.o.end(), c.v.begin() + b * 64, c.v.begin() + (b + 1) * 64);
  runFlashBackward<Bf16, 64>(c, 0.125f);
  for (const Bf16 &x : c.dq)
    EXPECT_EQ(faToFloat(x), 0.0f);
  for (const Bf16 &x : c.dk)
    EXPECT_EQ(faToFloat(x), 0.0f);
  // dv = the three rows of dO summed (in f32, then rounded once).
  for (int64_t b = 0; b < 2; ++b)
    for (int e = 0; e < 64; ++e) {
      float sum = 0;
      for (int i = 0; i < 3; ++i)
        sum += faToFloat(c.dO[(b * 3 + i) * 64 + e]);
      EXPECT_EQ(faToFloat(c.dv[b * 64 + e]), faToFloat(faFromFloat<Bf16>(sum)))
          << "pair " << b << " e " << e;
    }
}

TEST(FlashAttentionBackwardHost, SharedMemoryFitsAnSM) {
  // Both kernels' blocks fit sm_80's 163 KiB; the d = 64 ones fit sm_86's
  // 99 KiB (the d = 128 keys kernel does not: that shape runs unfused).
  EXPECT_EQ(rowsSharedBytes(64, 2), 74752u);
  EXPECT_EQ(keysSharedBytes(64, 2), 82432u);
  EXPECT_EQ(keysSharedBytes(128, 2), 115200u);
  EXPECT_LE(rowsSharedBytes(128, 2), 163u * 1024);
  EXPECT_LE(keysSharedBytes(128, 2), 163u * 1024);
  EXPECT_LE(keysSharedBytes(64, 2), 99u * 1024);
  EXPECT_EQ(keyBlocksFor(48, 1357), 48 * 22);
}

} // namespace
