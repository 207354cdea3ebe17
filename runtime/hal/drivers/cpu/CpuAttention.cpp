//===- CpuAttention.cpp - Fused flash-style attention on the CPU ----------===//
//
// The kernels of CpuAttention.h. From head size kAttentionGemmMinHeadDim on
// (runTileGemm, runBackwardGemm) the products are sgemms on a materialized
// tile of scores and the rest is below: expRow. Below it, in registers:
// one work item = one (batch, head, tile of
// query rows); the tiles are as large as the thread count allows (one per
// (batch, head) when there are enough of those), so each key block is
// transposed once per tile. Per key block (attentionKeyBlock) it transposes
// the keys (head dim major, so a vector holds W keys) and pads keys and
// values with zeros to whole vectors, then per group of 4 query rows
// computes the 4 x block scores with 8 accumulators in registers; per row
// the mask and the block max; one exp for the 4 rows' rescale factors; per
// row the exp of the scores and the block's probability sum in W f32
// lanes, added to the row's W/2 f64 lanes; and the f32 block partial of
// p v, added to the f64 output accumulator. Padding keys get a -inf score,
// so they add 0. The f64 lanes of a row sum are added pairwise once, at the
// end of the row.
//
// Written once, for a vector width W, with GCC/Clang vector extensions, and
// instantiated three times: W = 16 in a copy marked target("avx512f,...")
// (zmm registers), W = 8 in a copy marked target("avx2,fma"), and W = 4 on
// the baseline ISA (SSE2 on x86-64). Every helper is always_inline so that
// it is compiled for the ISA of the function it lands in. The copies sum
// the probabilities in differently shaped lanes, so their results may
// differ in the last bits (each is tested against the float64 bound).
//
//===----------------------------------------------------------------------===//

#include "runtime/hal/drivers/cpu/CpuAttention.h"
#include "runtime/hal/drivers/cpu/Gemm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

// Vector values never cross a non-inlined call, so the ABI notes GCC gives
// for 32- and 64-byte vectors on narrower ISAs do not apply.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace omni::hal::cpu {
namespace {

#define OMNI_ALWAYS_INLINE inline __attribute__((always_inline))

constexpr int64_t kGroup = 4; // query rows whose scores share key loads
static_assert(kAttentionMaxKeyBlock % 16 == 0, "whole 16-key score blocks");

constexpr float kInf = std::numeric_limits<float>::infinity();

OMNI_ALWAYS_INLINE int64_t roundUp(int64_t x, int64_t m) {
  return (x + m - 1) / m * m;
}

// The vector types of width 8 and 16 floats. (GCC 12 drops the vector
// attribute of a typedef whose size depends on a template parameter, so
// they are spelled out and picked by SimdTypes.)
typedef float F8 __attribute__((vector_size(32)));
typedef int32_t I8 __attribute__((vector_size(32)));
typedef float F4 __attribute__((vector_size(16)));
typedef double D4 __attribute__((vector_size(32)));
typedef int32_t I4 __attribute__((vector_size(16)));
typedef float F2 __attribute__((vector_size(8)));
typedef double D2 __attribute__((vector_size(16)));
typedef float F16 __attribute__((vector_size(64)));
typedef int32_t I16 __attribute__((vector_size(64)));
typedef double D8 __attribute__((vector_size(64)));

/// F: W floats, I: W int32, H: W/2 floats, D: W/2 doubles.
template <int W> struct SimdTypes;
template <> struct SimdTypes<4> {
  using F = F4;
  using I = I4;
  using H = F2;
  using D = D2;
};
template <> struct SimdTypes<8> {
  using F = F8;
  using I = I8;
  using H = F4;
  using D = D4;
};
template <> struct SimdTypes<16> {
  using F = F16;
  using I = I16;
  using H = F8;
  using D = D8;
};

/// The vector operations of width W (8 or 16 floats).
template <int W> struct Simd : SimdTypes<W> {
  using F = typename SimdTypes<W>::F;
  using I = typename SimdTypes<W>::I;
  using H = typename SimdTypes<W>::H;
  using D = typename SimdTypes<W>::D;

  static OMNI_ALWAYS_INLINE F load(const float *p) {
    F v;
    std::memcpy(&v, p, sizeof v);
    return v;
  }
  static OMNI_ALWAYS_INLINE void store(float *p, F v) {
    std::memcpy(p, &v, sizeof v);
  }
  static OMNI_ALWAYS_INLINE F splat(float x) { return F{} + x; }
  /// Lanes [W/2 * half, W/2 * (half + 1)) of v, widened to f64.
  static OMNI_ALWAYS_INLINE D widen(F v, int half) {
    H h;
    std::memcpy(&h, reinterpret_cast<const char *>(&v) + half * sizeof h,
                sizeof h);
    return __builtin_convertvector(h, D);
  }

  /// exp on W lanes (Cephes expf): x = n ln2 + r with |r| <= ln2 / 2 (n
  /// rounded to nearest by adding 1.5 * 2^23; ln2 split in two for an
  /// exact n ln2), a degree-6 polynomial for e^r, and 2^n built from its
  /// exponent bits. Below ln(2^-126) the result is 0; above 88 it is +inf;
  /// NaN stays NaN (every comparison with it is false, and NaN times
  /// anything is NaN).
  static OMNI_ALWAYS_INLINE F exp(F x) {
    const I under = x<kExpLo, over = x> kExpHi;
    x = under ? splat(kExpLo) : x;
    x = over ? splat(kExpHi) : x;
    const F y = expInRange(x);
    return over ? splat(kInf) : under ? splat(0.0f) : y;
  }

  /// exp(x) for x <= 0 (a score minus its row's max), bit for bit what
  /// exp() gives there, with fewer operations: nothing is above 88, and
  /// below ln(2^-126) the result is set to 0 after the polynomial instead
  /// of clamping x before it (-inf makes the polynomial NaN, which the
  /// same select replaces by 0). NaN stays NaN.
  static OMNI_ALWAYS_INLINE F expNonPositive(F x) {
    const I under = x < kExpLo;
    const F y = expInRange(x);
    return under ? splat(0.0f) : y;
  }

  static constexpr float kExpLo = -87.3365447505531f; // ln(2^-126)
  static constexpr float kExpHi = 88.0f;

  /// exp's reduction and polynomial, right for x in [kExpLo, kExpHi].
  static OMNI_ALWAYS_INLINE F expInRange(F x) {
    const float magic = 12582912.0f; // 1.5 * 2^23
    F t = x * 1.44269504088896341f + magic;
    F n = t - magic;
    I ni = reinterpret_cast<I>(t) - reinterpret_cast<I>(splat(magic));
    F r = x - n * 0.693359375f;
    r = r - n * -2.12194440e-4f;
    F p = splat(1.9875691500e-4f);
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    F y = p * (r * r) + r + 1.0f;
    return y * reinterpret_cast<F>((ni + 127) << 23);
  }
};

/// Pairwise sum of n (a power of two) doubles: (x0 + x1) + (x2 + x3), ...
OMNI_ALWAYS_INLINE double pairwise(double *x, int n) {
  for (; n > 1; n /= 2)
    for (int i = 0; i < n / 2; ++i)
      x[i] = x[2 * i] + x[2 * i + 1];
  return x[0];
}

/// c = alpha op(a) op(b), one single-threaded oneDNN sgemm (Gemm.h).
OMNI_ALWAYS_INLINE void sgemm(bool transA, bool transB, int64_t m, int64_t n,
                              int64_t k, float alpha, const float *a,
                              int64_t lda, const float *b, int64_t ldb,
                              float *c, int64_t ldc) {
  GemmArgs<float> g;
  g.transA = transA, g.transB = transB, g.m = m, g.n = n, g.k = k;
  g.alpha = alpha, g.a = a, g.lda = lda, g.b = b, g.ldb = ldb;
  g.c = c, g.ldc = ldc;
  serialGemm(g);
}

struct Job {
  const float *q, *k, *v, *mask;
  float *out;
  // The backward (fusedAttentionBackward): the forward's output and its
  // cotangent in, the three cotangents out.
  const float *o = nullptr, *dO = nullptr;
  float *dq = nullptr, *dk = nullptr, *dvOut = nullptr;
  int64_t dPad = 0; // head size rounded up to the vector width
  int64_t heads, seqQ, seqK, d, dv, dvPad;
  int64_t block; // keys per block, a multiple of 16 (attentionKeyBlock)
  int64_t tile;  // query rows per work item, a multiple of kGroup
  int64_t tiles; // work items per (batch, head)
  int64_t maskBatchStride, maskHeadStride; // elements; 0 when broadcast
  int64_t ldS = 0; // a score tile's row stride: seqK rounded up to 16
  float scale;
};

/// One thread's buffers, sized for the job.
struct Scratch {
  std::vector<float> kT, vb, qt, s, m;
  std::vector<double> o, l;
  explicit Scratch(const Job &j)
      : kT(j.d * j.block), vb(j.block * j.dvPad), qt(j.tile * j.d),
        s(kGroup * j.block), m(j.tile), o(j.tile * j.dvPad), l(j.tile * 8) {
  } // 8 >= W / 2 lanes per row
};

/// One thread's buffers for the forward on materialized score tiles.
struct GemmScratch {
  std::vector<float> s, part;
  std::vector<double> o, l;
  explicit GemmScratch(const Job &j)
      : s(j.tile * j.ldS), part(j.tile * j.dv), o(j.tile * j.dv), l(j.tile) {}
};

/// One thread's buffers for the backward on materialized tiles.
struct BackwardGemmScratch {
  std::vector<float> s, dp, part;
  std::vector<double> dK, dV, dq;
  explicit BackwardGemmScratch(const Job &j)
      : s(j.tile * j.ldS), dp(j.tile * j.ldS),
        part(std::max({j.seqK * j.d, j.seqK * j.dv, j.tile * j.d})),
        dK(j.seqK * j.d), dV(j.seqK * j.dv), dq(j.tile * j.d) {}
};

/// One thread's buffers for the backward of one (batch, head).
/// Query rows per rank update of the backward's dk and dv (a multiple of
/// kGroup).
constexpr int kRows = 16;

struct BackwardScratch {
  std::vector<float> q, dO, m, invL, dsum, s, dp, kT, vT, kb, dK, dV;
  std::vector<double> dq, l;
  explicit BackwardScratch(const Job &j) {
    const int64_t rows = (j.seqQ + kRows - 1) / kRows * kRows;
    q.resize(rows * j.dPad), dO.resize(rows * j.dvPad);
    m.resize(rows), invL.resize(rows), dsum.resize(rows);
    s.resize(kRows * j.block), dp.resize(kRows * j.block);
    kT.resize(j.d * j.block), vT.resize(j.dv * j.block);
    kb.resize(j.block * j.dPad), dK.resize(j.block * j.dPad);
    dV.resize(j.block * j.dvPad);
    dq.resize(rows * j.dPad), l.resize(rows * 8);
  }
};

template <int W> struct Kernel {
  using S = Simd<W>;
  using F = typename S::F;
  using D = typename S::D;

  /// s[r][0, nbPad) = scale * (q row r) . (key columns), r < kGroup; qt
  /// holds kGroup rows of d, kT is d x block, s is kGroup x block. nbPad
  /// is a multiple of 16, so of W or 2W.
  static OMNI_ALWAYS_INLINE void scoreGroup(const float *qt, const float *kT,
                                            int64_t d, int64_t block,
                                            int64_t nbPad, float scale,
                                            float *s) {
    scoreGroup(qt, d, kT, d, block, nbPad, scale, s);
  }
  /// The same with the rows of qt ldq apart.
  static OMNI_ALWAYS_INLINE void scoreGroup(const float *qt, int64_t ldq,
                                            const float *kT, int64_t d,
                                            int64_t block, int64_t nbPad,
                                            float scale, float *s) {
    int64_t jj = 0;
    for (; jj + 2 * W <= nbPad; jj += 2 * W) {
      F a00{}, a01{}, a10{}, a11{}, a20{}, a21{}, a30{}, a31{};
      for (int64_t e = 0; e < d; ++e) {
        const F k0 = S::load(kT + e * block + jj);
        const F k1 = S::load(kT + e * block + jj + W);
        const float q0 = qt[e], q1 = qt[ldq + e], q2 = qt[2 * ldq + e],
                    q3 = qt[3 * ldq + e];
        a00 += q0 * k0, a01 += q0 * k1;
        a10 += q1 * k0, a11 += q1 * k1;
        a20 += q2 * k0, a21 += q2 * k1;
        a30 += q3 * k0, a31 += q3 * k1;
      }
      S::store(s + jj, a00 * scale), S::store(s + jj + W, a01 * scale);
      S::store(s + block + jj, a10 * scale);
      S::store(s + block + jj + W, a11 * scale);
      S::store(s + 2 * block + jj, a20 * scale);
      S::store(s + 2 * block + jj + W, a21 * scale);
      S::store(s + 3 * block + jj, a30 * scale);
      S::store(s + 3 * block + jj + W, a31 * scale);
    }
    if (jj < nbPad) { // one vector of keys left (W = 16, nbPad = 16 mod 32)
      F a0{}, a1{}, a2{}, a3{};
      for (int64_t e = 0; e < d; ++e) {
        const F k0 = S::load(kT + e * block + jj);
        a0 += qt[e] * k0, a1 += qt[ldq + e] * k0;
        a2 += qt[2 * ldq + e] * k0, a3 += qt[3 * ldq + e] * k0;
      }
      S::store(s + jj, a0 * scale), S::store(s + block + jj, a1 * scale);
      S::store(s + 2 * block + jj, a2 * scale);
      S::store(s + 3 * block + jj, a3 * scale);
    }
  }

  /// x[0, W) = x * alpha + acc, in f64.
  static OMNI_ALWAYS_INLINE void addScaled(double *x, double alpha, F acc) {
    D lo, hi;
    std::memcpy(&lo, x, sizeof lo);
    std::memcpy(&hi, x + W / 2, sizeof hi);
    lo = lo * alpha + S::widen(acc, 0);
    hi = hi * alpha + S::widen(acc, 1);
    std::memcpy(x, &lo, sizeof lo);
    std::memcpy(x + W / 2, &hi, sizeof hi);
  }

  /// For the kGroup rows r of p (stride block): o[r] = o[r] * alpha[r] +
  /// sum_j p[r][j] vb[j] over [0, dvPad), the sum over the block in f32 (8
  /// independent accumulators for two vectors of 4 rows), added in f64.
  static OMNI_ALWAYS_INLINE void accumulatePV(const float *p, int64_t block,
                                              const float *vb, int64_t nbPad,
                                              int64_t dvPad, const float *alpha,
                                              double *o) {
    const float *p0 = p, *p1 = p + block, *p2 = p + 2 * block,
                *p3 = p + 3 * block;
    int64_t c = 0;
    for (; c + 2 * W <= dvPad; c += 2 * W) {
      F a00{}, a01{}, a10{}, a11{}, a20{}, a21{}, a30{}, a31{};
      for (int64_t j = 0; j < nbPad; ++j) {
        const float *row = vb + j * dvPad + c;
        const F v0 = S::load(row), v1 = S::load(row + W);
        a00 += p0[j] * v0, a01 += p0[j] * v1;
        a10 += p1[j] * v0, a11 += p1[j] * v1;
        a20 += p2[j] * v0, a21 += p2[j] * v1;
        a30 += p3[j] * v0, a31 += p3[j] * v1;
      }
      addScaled(o + c, alpha[0], a00), addScaled(o + c + W, alpha[0], a01);
      addScaled(o + dvPad + c, alpha[1], a10);
      addScaled(o + dvPad + c + W, alpha[1], a11);
      addScaled(o + 2 * dvPad + c, alpha[2], a20);
      addScaled(o + 2 * dvPad + c + W, alpha[2], a21);
      addScaled(o + 3 * dvPad + c, alpha[3], a30);
      addScaled(o + 3 * dvPad + c + W, alpha[3], a31);
    }
    if (c < dvPad) { // one vector left
      F a0{}, a1{}, a2{}, a3{};
      for (int64_t j = 0; j < nbPad; ++j) {
        const F v0 = S::load(vb + j * dvPad + c);
        a0 += p0[j] * v0, a1 += p1[j] * v0;
        a2 += p2[j] * v0, a3 += p3[j] * v0;
      }
      addScaled(o + c, alpha[0], a0);
      addScaled(o + dvPad + c, alpha[1], a1);
      addScaled(o + 2 * dvPad + c, alpha[2], a2);
      addScaled(o + 3 * dvPad + c, alpha[3], a3);
    }
  }

  /// The largest lane of x (NaN lanes skipped, as `>` does).
  static OMNI_ALWAYS_INLINE float maxLane(F x) {
    float t[W];
    S::store(t, x);
    for (int n = W / 2; n >= 1; n /= 2)
      for (int i = 0; i < n; ++i)
        t[i] = t[i + n] > t[i] ? t[i + n] : t[i];
    return t[0];
  }

  /// Row r's scores of one key block (nb real keys, padded to nbPad): adds
  /// the mask, sets the padding to -inf; returns the new running max (the
  /// larger of the block's and mOld). A row that is still all -inf gets
  /// its probabilities zeroed here (and l NaN if a score is NaN).
  static OMNI_ALWAYS_INLINE float maskAndMax(float *row, const float *maskRow,
                                             int64_t nb, int64_t nbPad,
                                             float mOld, double *l) {
    if (maskRow)
      for (int64_t jj = 0; jj < nb; ++jj)
        row[jj] += maskRow[jj];
    for (int64_t jj = nb; jj < nbPad; ++jj)
      row[jj] = -kInf;
    F mx = S::splat(-kInf);
    for (int64_t jj = 0; jj < nbPad; jj += W) {
      const F x = S::load(row + jj);
      mx = x > mx ? x : mx;
    }
    const float blockMax = maxLane(mx);
    const float mNew = blockMax > mOld ? blockMax : mOld;
    if (mNew == -kInf) {
      // Nothing but -inf (and NaN, which max skips) so far: the block adds
      // nothing, except that a NaN score makes the row NaN.
      for (int64_t jj = 0; jj < nb; ++jj)
        if (std::isnan(row[jj]))
          l[0] = std::numeric_limits<double>::quiet_NaN();
      std::fill(row, row + nbPad, 0.0f);
    }
    return mNew;
  }

  /// The group's rows of one key block: masks, running max, rescale
  /// factors alpha (one exp for the kGroup rows), probabilities left in s,
  /// and the row sums. Lane k of a block's f32 partial sum adds the
  /// probabilities of keys k, k + W, ... (at most block / W of them, each
  /// <= 1); l[r] holds W/2 f64 lanes per row (lanes k and k + W/2 of the
  /// partials), rescaled by alpha each block and combined by `pairwise`
  /// only at the end of the row.
  static OMNI_ALWAYS_INLINE void
  softmaxGroup(float *s, int64_t block, const float *mask, int64_t maskStride,
               int64_t rows, int64_t nb, int64_t nbPad, float *m, double *l,
               float *alpha) {
    float mNew[W] = {}, mOld[W] = {}; // lanes past kGroup: alpha 1
    bool adds[kGroup] = {};
    for (int64_t r = 0; r < kGroup; ++r) {
      float *row = s + r * block;
      if (r >= rows) {
        std::fill(row, row + nbPad, 0.0f);
        continue;
      }
      mOld[r] = m[r];
      mNew[r] = maskAndMax(row, mask ? mask + r * maskStride : nullptr, nb,
                           nbPad, m[r], l + r * (W / 2));
      adds[r] = mNew[r] != -kInf;
      if (!adds[r])
        mOld[r] = mNew[r] = 0.0f; // alpha = 1, p = 0 (zeroed above)
    }
    const F a = S::expNonPositive(S::load(mOld) - S::load(mNew));
    for (int64_t r = 0; r < kGroup; ++r)
      alpha[r] = a[r];
    for (int64_t r = 0; r < kGroup; ++r) {
      if (!adds[r])
        continue; // padding, or still all -inf: p is 0 already
      float *row = s + r * block;
      F sum{};
      for (int64_t jj = 0; jj < nbPad; jj += W) {
        const F p = S::expNonPositive(S::load(row + jj) - mNew[r]);
        S::store(row + jj, p);
        sum += p;
      }
      D lr;
      std::memcpy(&lr, l + r * (W / 2), sizeof lr);
      lr = lr * double(alpha[r]) + (S::widen(sum, 0) + S::widen(sum, 1));
      std::memcpy(l + r * (W / 2), &lr, sizeof lr);
      m[r] = mNew[r];
    }
  }

  /// Row `row` of a score tile (sk scores, stride ldS, a multiple of 16):
  /// adds the mask row (if any), replaces each score s by exp(s - the row's
  /// max) and the padding past sk by 0, and returns the sum of those
  /// numerators (each key block's in W f32 lanes, at most block / W terms
  /// each, added in f64). A row whose every score is -inf gets 0
  /// everywhere and the sum 0, or NaN through a NaN score.
  static OMNI_ALWAYS_INLINE double expRow(float *row, const float *maskRow,
                                          int64_t sk, int64_t ldS,
                                          int64_t block) {
    if (maskRow)
      for (int64_t jj = 0; jj < sk; ++jj)
        row[jj] += maskRow[jj];
    std::fill(row + sk, row + ldS, -kInf);
    F mx = S::splat(-kInf);
    for (int64_t jj = 0; jj < ldS; jj += W) {
      const F x = S::load(row + jj);
      mx = x > mx ? x : mx;
    }
    const float rowMax = maxLane(mx);
    if (rowMax == -kInf) { // nothing but -inf, and NaN, which max skips
      double l = 0.0;
      for (int64_t jj = 0; jj < sk; ++jj)
        if (std::isnan(row[jj]))
          l = std::numeric_limits<double>::quiet_NaN();
      std::fill(row, row + ldS, 0.0f);
      return l;
    }
    const F m = S::splat(rowMax);
    D acc{};
    for (int64_t j0 = 0; j0 < ldS; j0 += block) {
      const int64_t end = std::min(ldS, j0 + block);
      F sum{};
      for (int64_t jj = j0; jj < end; jj += W) {
        const F p = S::expNonPositive(S::load(row + jj) - m);
        S::store(row + jj, p);
        sum += p;
      }
      acc += S::widen(sum, 0) + S::widen(sum, 1);
    }
    double lanes[W / 2];
    std::memcpy(lanes, &acc, sizeof lanes);
    return pairwise(lanes, W / 2);
  }

  /// o[0, n) (+)= x[0, n) in f64: `first` stores instead of adding.
  static OMNI_ALWAYS_INLINE void accumulate(double *o, const float *x,
                                            int64_t n, bool first) {
    if (first)
      for (int64_t i = 0; i < n; ++i)
        o[i] = x[i];
    else
      for (int64_t i = 0; i < n; ++i)
        o[i] += x[i];
  }

  /// One work item on a materialized tile of scores: S = scale q k^T for
  /// the tile's rows (one sgemm), each row's softmax numerators in place
  /// (expRow), then per key block the f32 product P v (one sgemm of at
  /// most kAttentionMaxKeyBlock keys) added to the f64 output; one
  /// division per row at the end.
  static OMNI_ALWAYS_INLINE void runTileGemm(const Job &j, GemmScratch &sc,
                                             int64_t item) {
    const int64_t bh = item / j.tiles, r0 = (item % j.tiles) * j.tile;
    const int64_t rows = std::min(j.tile, j.seqQ - r0);
    const int64_t b = bh / j.heads, h = bh % j.heads;
    const int64_t d = j.d, dv = j.dv, sk = j.seqK, ldS = j.ldS;
    const float *q = j.q + (bh * j.seqQ + r0) * d;
    const float *k = j.k + bh * sk * d;
    const float *v = j.v + bh * sk * dv;
    const float *mask =
        j.mask ? j.mask + b * j.maskBatchStride + h * j.maskHeadStride + r0 * sk
               : nullptr;
    float *out = j.out + (bh * j.seqQ + r0) * dv;
    float *s = sc.s.data(), *part = sc.part.data();
    double *o = sc.o.data(), *l = sc.l.data();

    sgemm(false, true, rows, sk, d, j.scale, q, d, k, d, s, ldS);
    for (int64_t r = 0; r < rows; ++r)
      l[r] =
          expRow(s + r * ldS, mask ? mask + r * sk : nullptr, sk, ldS, j.block);
    for (int64_t j0 = 0; j0 < sk; j0 += j.block) {
      sgemm(false, false, rows, dv, std::min(j.block, sk - j0), 1.0f, s + j0,
            ldS, v + j0 * dv, dv, part, dv);
      accumulate(o, part, rows * dv, j0 == 0);
    }
    for (int64_t i = 0; i < rows; ++i) {
      const double inv = 1.0 / l[i];
      for (int64_t c = 0; c < dv; ++c)
        out[i * dv + c] = static_cast<float>(o[i * dv + c] * inv);
    }
  }

  /// One (batch, head) of the backward on materialized tiles (the head
  /// size is at least kAttentionGemmMinHeadDim): per tile of query rows,
  /// S = scale q k^T and P = exp(S - max) / sum as the forward computes
  /// them, dP = dO v^T, dS = P (dP - D) with D = rowsum(dO o) in f64;
  /// dv += P^T dO and dk += dS^T q (f32 over the tile's rows, f64 across
  /// tiles); dq = dS k per key block (f32 over at most
  /// kAttentionMaxKeyBlock keys, f64 across blocks), each product one
  /// sgemm.
  static OMNI_ALWAYS_INLINE void
  runBackwardGemm(const Job &j, BackwardGemmScratch &sc, int64_t bh) {
    const int64_t d = j.d, dv = j.dv, sq = j.seqQ, sk = j.seqK, ldS = j.ldS;
    const float *q = j.q + bh * sq * d, *k = j.k + bh * sk * d;
    const float *v = j.v + bh * sk * dv, *o = j.o + bh * sq * dv;
    const float *dO = j.dO + bh * sq * dv;
    const float *mask = j.mask ? j.mask + (bh / j.heads) * j.maskBatchStride +
                                     (bh % j.heads) * j.maskHeadStride
                               : nullptr;
    float *s = sc.s.data(), *dp = sc.dp.data(), *part = sc.part.data();
    double *dK = sc.dK.data(), *dV = sc.dV.data(), *dq = sc.dq.data();

    for (int64_t r0 = 0; r0 < sq; r0 += j.tile) {
      const int64_t rows = std::min(j.tile, sq - r0);
      const float *qt = q + r0 * d, *dOt = dO + r0 * dv;
      sgemm(false, true, rows, sk, d, j.scale, qt, d, k, d, s, ldS);
      sgemm(false, true, rows, sk, dv, 1.0f, dOt, dv, v, dv, dp, ldS);
      for (int64_t r = 0; r < rows; ++r) {
        float *pr = s + r * ldS, *dpr = dp + r * ldS;
        const float invL = static_cast<float>(
            1.0 / expRow(pr, mask ? mask + (r0 + r) * sk : nullptr, sk, ldS,
                         j.block));
        double acc = 0;
        for (int64_t c = 0; c < dv; ++c)
          acc += double(dOt[r * dv + c]) * o[(r0 + r) * dv + c];
        const F lr = S::splat(invL), dr = S::splat(static_cast<float>(acc));
        for (int64_t jj = 0; jj < ldS; jj += W) {
          const F p = S::load(pr + jj) * lr;
          S::store(pr + jj, p);
          S::store(dpr + jj, p * (S::load(dpr + jj) - dr));
        }
      }
      sgemm(true, false, sk, dv, rows, 1.0f, s, ldS, dOt, dv, part, dv);
      accumulate(dV, part, sk * dv, r0 == 0);
      sgemm(true, false, sk, d, rows, 1.0f, dp, ldS, qt, d, part, d);
      accumulate(dK, part, sk * d, r0 == 0);
      for (int64_t j0 = 0; j0 < sk; j0 += j.block) {
        sgemm(false, false, rows, d, std::min(j.block, sk - j0), 1.0f, dp + j0,
              ldS, k + j0 * d, d, part, d);
        accumulate(dq, part, rows * d, j0 == 0);
      }
      for (int64_t i = 0; i < rows * d; ++i)
        j.dq[(bh * sq + r0) * d + i] = static_cast<float>(dq[i] * j.scale);
    }
    for (int64_t i = 0; i < sk * d; ++i)
      j.dk[bh * sk * d + i] = static_cast<float>(dK[i] * j.scale);
    for (int64_t i = 0; i < sk * dv; ++i)
      j.dvOut[bh * sk * dv + i] = static_cast<float>(dV[i]);
  }

  static OMNI_ALWAYS_INLINE void runTile(const Job &j, Scratch &sc,
                                         int64_t item) {
    const int64_t bh = item / j.tiles, r0 = (item % j.tiles) * j.tile;
    const int64_t rows = std::min(j.tile, j.seqQ - r0);
    const int64_t kBlock = j.block;
    const int64_t b = bh / j.heads, h = bh % j.heads;
    const int64_t d = j.d, dv = j.dv, dvPad = j.dvPad;
    const float *q = j.q + (bh * j.seqQ + r0) * d;
    const float *k = j.k + bh * j.seqK * d;
    const float *v = j.v + bh * j.seqK * dv;
    const float *mask = j.mask ? j.mask + b * j.maskBatchStride +
                                     h * j.maskHeadStride + r0 * j.seqK
                               : nullptr;
    float *out = j.out + (bh * j.seqQ + r0) * dv;
    float *kT = sc.kT.data(), *vb = sc.vb.data(), *qt = sc.qt.data();
    float *s = sc.s.data(), *m = sc.m.data();
    double *o = sc.o.data(), *l = sc.l.data();

    const int64_t rowsPad = roundUp(rows, kGroup);
    std::memcpy(qt, q, rows * d * sizeof(float));
    std::fill(qt + rows * d, qt + rowsPad * d, 0.0f);
    std::fill(m, m + rows, -kInf);
    std::fill(l, l + rows * (W / 2), 0.0);
    std::fill(o, o + rowsPad * dvPad, 0.0);

    for (int64_t j0 = 0; j0 < j.seqK; j0 += kBlock) {
      const int64_t nb = std::min(kBlock, j.seqK - j0);
      const int64_t nbPad = roundUp(nb, 16);
      const float *kb = k + j0 * d;
      for (int64_t jj = 0; jj < nb; ++jj)
        for (int64_t e = 0; e < d; ++e)
          kT[e * kBlock + jj] = kb[jj * d + e];
      for (int64_t e = 0; e < d; ++e)
        std::fill(kT + e * kBlock + nb, kT + e * kBlock + nbPad, 0.0f);
      if (dv == dvPad) {
        std::memcpy(vb, v + j0 * dv, nb * dv * sizeof(float));
      } else {
        for (int64_t jj = 0; jj < nb; ++jj) {
          std::memcpy(vb + jj * dvPad, v + (j0 + jj) * dv, dv * sizeof(float));
          std::fill(vb + jj * dvPad + dv, vb + (jj + 1) * dvPad, 0.0f);
        }
      }
      std::fill(vb + nb * dvPad, vb + nbPad * dvPad, 0.0f);

      for (int64_t g = 0; g < rows; g += kGroup) {
        scoreGroup(qt + g * d, kT, d, kBlock, nbPad, j.scale, s);
        float alpha[kGroup];
        softmaxGroup(s, kBlock, mask ? mask + g * j.seqK + j0 : nullptr, j.seqK,
                     rows - g, nb, nbPad, m + g, l + g * (W / 2), alpha);
        accumulatePV(s, kBlock, vb, nbPad, dvPad, alpha, o + g * dvPad);
      }
    }
    for (int64_t i = 0; i < rows; ++i) {
      const double inv = 1.0 / pairwise(l + i * (W / 2), W / 2);
      for (int64_t c = 0; c < dv; ++c)
        out[i * dv + c] = static_cast<float>(o[i * dvPad + c] * inv);
    }
  }

  //===--- The backward ---------------------------------------------===//

  /// acc[j][0, cols) += sum_r p[r][j] x[r] for j < nb, r < kRows: a
  /// rank-kRows update of a block x cols matrix (stride cols, a multiple
  /// of W) by p^T (p has stride block) and the rows of x (stride ldx,
  /// zero-padded to cols). The rows' vectors stay in registers; each
  /// element adds its kRows products in four interleaved chains.
  static OMNI_ALWAYS_INLINE void rankUpdate(const float *p, int64_t block,
                                            const float *x, int64_t ldx,
                                            int64_t nb, int64_t cols,
                                            float *acc) {
    for (int64_t c = 0; c < cols; c += W) {
      F xr[kRows];
      for (int r = 0; r < kRows; ++r)
        xr[r] = S::load(x + r * ldx + c);
      for (int64_t j = 0; j < nb; ++j) {
        F part[4] = {S::load(acc + j * cols + c), F{}, F{}, F{}};
        for (int r = 0; r < kRows; ++r)
          part[r % 4] += p[r * block + j] * xr[r];
        S::store(acc + j * cols + c, (part[0] + part[1]) + (part[2] + part[3]));
      }
    }
  }

  /// One (batch, head) of the backward (CpuAttention.h).
  static OMNI_ALWAYS_INLINE void runBackward(const Job &j, BackwardScratch &sc,
                                             int64_t bh) {
    const int64_t d = j.d, dv = j.dv, dPad = j.dPad, dvPad = j.dvPad;
    const int64_t sq = j.seqQ, sk = j.seqK, block = j.block;
    const int64_t rowsPad = roundUp(sq, kRows);
    float *qt = sc.q.data(), *dOt = sc.dO.data(), *m = sc.m.data();
    float *invL = sc.invL.data(), *dsum = sc.dsum.data();
    float *s = sc.s.data(), *dp = sc.dp.data(), *kT = sc.kT.data();
    float *vT = sc.vT.data(), *kb = sc.kb.data(), *dK = sc.dK.data();
    float *dV = sc.dV.data();
    double *dq = sc.dq.data(), *l = sc.l.data();
    const float *q = j.q + bh * sq * d, *k = j.k + bh * sk * d;
    const float *v = j.v + bh * sk * dv, *o = j.o + bh * sq * dv;
    const float *dO = j.dO + bh * sq * dv;
    const float *mask = j.mask ? j.mask + (bh / j.heads) * j.maskBatchStride +
                                     (bh % j.heads) * j.maskHeadStride
                               : nullptr;

    // Rows padded with zeros to whole groups, dO also to whole vectors.
    std::fill(qt, qt + rowsPad * dPad, 0.0f);
    std::fill(dOt, dOt + rowsPad * dvPad, 0.0f);
    for (int64_t i = 0; i < sq; ++i) {
      std::memcpy(qt + i * dPad, q + i * d, d * sizeof(float));
      std::memcpy(dOt + i * dvPad, dO + i * dv, dv * sizeof(float));
    }
    // D_i = dO_i . o_i (the row sum of dP P), in f64.
    for (int64_t i = 0; i < sq; ++i) {
      double acc = 0;
      for (int64_t c = 0; c < dv; ++c)
        acc += double(dO[i * dv + c]) * o[i * dv + c];
      dsum[i] = static_cast<float>(acc);
    }
    std::fill(dsum + sq, dsum + rowsPad, 0.0f);
    std::fill(dq, dq + rowsPad * dPad, 0.0);

    auto loadKeys = [&](int64_t j0, int64_t nb, int64_t nbPad) {
      for (int64_t jj = 0; jj < nb; ++jj)
        for (int64_t e = 0; e < d; ++e)
          kT[e * block + jj] = k[(j0 + jj) * d + e];
      for (int64_t e = 0; e < d; ++e)
        std::fill(kT + e * block + nb, kT + e * block + nbPad, 0.0f);
    };

    // Pass 1: every row's max m and 1 / sum l of its probabilities, as the
    // forward computes them (padding rows: m = +inf, so p = 0).
    std::fill(m, m + sq, -kInf);
    std::fill(m + sq, m + rowsPad, kInf);
    std::fill(l, l + rowsPad * (W / 2), 0.0);
    for (int64_t j0 = 0; j0 < sk; j0 += block) {
      const int64_t nb = std::min(block, sk - j0), nbPad = roundUp(nb, 16);
      loadKeys(j0, nb, nbPad);
      for (int64_t g = 0; g < sq; g += kGroup) {
        scoreGroup(qt + g * dPad, dPad, kT, d, block, nbPad, j.scale, s);
        float alpha[kGroup];
        softmaxGroup(s, block, mask ? mask + g * sk + j0 : nullptr, sk, sq - g,
                     nb, nbPad, m + g, l + g * (W / 2), alpha);
      }
    }
    for (int64_t i = 0; i < rowsPad; ++i)
      invL[i] = i < sq ? float(1.0 / pairwise(l + i * (W / 2), W / 2)) : 0.0f;

    // Pass 2, per key block: P, dP = dO v^T, dS = P (dP - D); dq += dS k,
    // dk = dS^T q, dv = P^T dO (the last two summed over all rows here).
    for (int64_t j0 = 0; j0 < sk; j0 += block) {
      const int64_t nb = std::min(block, sk - j0), nbPad = roundUp(nb, 16);
      loadKeys(j0, nb, nbPad);
      for (int64_t jj = 0; jj < nb; ++jj)
        for (int64_t c = 0; c < dv; ++c)
          vT[c * block + jj] = v[(j0 + jj) * dv + c];
      for (int64_t c = 0; c < dv; ++c)
        std::fill(vT + c * block + nb, vT + c * block + nbPad, 0.0f);
      std::fill(kb, kb + nbPad * dPad, 0.0f);
      for (int64_t jj = 0; jj < nb; ++jj)
        std::memcpy(kb + jj * dPad, k + (j0 + jj) * d, d * sizeof(float));
      std::fill(dK, dK + nbPad * dPad, 0.0f);
      std::fill(dV, dV + nbPad * dvPad, 0.0f);
      for (int64_t g = 0; g < rowsPad; g += kRows) {
        for (int64_t h = 0; h < kRows; h += kGroup) {
          scoreGroup(qt + (g + h) * dPad, dPad, kT, d, block, nbPad, j.scale,
                     s + h * block);
          scoreGroup(dOt + (g + h) * dvPad, dvPad, vT, dv, block, nbPad, 1.0f,
                     dp + h * block);
        }
        for (int64_t r = 0; r < kRows; ++r) {
          float *pr = s + r * block, *dpr = dp + r * block;
          if (mask && g + r < sq) // as maskAndMax adds it in pass 1
            for (int64_t jj = 0; jj < nb; ++jj)
              pr[jj] += mask[(g + r) * sk + j0 + jj];
          const F mr = S::splat(m[g + r]), lr = S::splat(invL[g + r]);
          const F dr = S::splat(dsum[g + r]);
          for (int64_t jj = 0; jj < nbPad; jj += W) {
            const F p = S::expNonPositive(S::load(pr + jj) - mr) * lr;
            S::store(pr + jj, p);
            S::store(dpr + jj, p * (S::load(dpr + jj) - dr));
          }
          for (int64_t jj = nb; jj < nbPad; ++jj)
            pr[jj] = dpr[jj] = 0.0f; // padding keys
        }
        const float one[kGroup] = {1.0f, 1.0f, 1.0f, 1.0f};
        for (int64_t h = 0; h < kRows; h += kGroup)
          accumulatePV(dp + h * block, block, kb, nbPad, dPad, one,
                       dq + (g + h) * dPad);
        rankUpdate(s, block, dOt + g * dvPad, dvPad, nb, dvPad, dV);
        rankUpdate(dp, block, qt + g * dPad, dPad, nb, dPad, dK);
      }
      for (int64_t jj = 0; jj < nb; ++jj) {
        float *dkRow = j.dk + (bh * sk + j0 + jj) * d;
        for (int64_t e = 0; e < d; ++e)
          dkRow[e] = dK[jj * dPad + e] * j.scale;
        std::memcpy(j.dvOut + (bh * sk + j0 + jj) * dv, dV + jj * dvPad,
                    dv * sizeof(float));
      }
    }
    for (int64_t i = 0; i < sq; ++i)
      for (int64_t e = 0; e < d; ++e)
        j.dq[(bh * sq + i) * d + e] =
            static_cast<float>(dq[i * dPad + e] * j.scale);
  }

  static OMNI_ALWAYS_INLINE void runBackwardRange(const Job &j, int64_t i0,
                                                  int64_t i1) {
    if (j.ldS) {
      BackwardGemmScratch sc(j);
      for (int64_t bh = i0; bh < i1; ++bh)
        runBackwardGemm(j, sc, bh);
      return;
    }
    BackwardScratch sc(j);
    for (int64_t bh = i0; bh < i1; ++bh)
      runBackward(j, sc, bh);
  }

  static OMNI_ALWAYS_INLINE void runRange(const Job &j, int64_t i0,
                                          int64_t i1) {
    if (j.ldS) {
      GemmScratch sc(j);
      for (int64_t item = i0; item < i1; ++item)
        runTileGemm(j, sc, item);
      return;
    }
    Scratch sc(j);
    for (int64_t item = i0; item < i1; ++item)
      runTile(j, sc, item);
  }

  static OMNI_ALWAYS_INLINE void expRange(const float *x, float *y, int64_t n) {
    int64_t i = 0;
    for (; i + W <= n; i += W)
      S::store(y + i, S::exp(S::load(x + i)));
    if (i < n) {
      float in[W] = {}, res[W];
      std::memcpy(in, x + i, (n - i) * sizeof(float));
      S::store(res, S::exp(S::load(in)));
      std::memcpy(y + i, res, (n - i) * sizeof(float));
    }
  }
};

/// One ISA copy: its vector width and its two entry points.
struct IsaCopy {
  const char *name;
  int width;
  void (*run)(const Job &, int64_t, int64_t);
  void (*exp)(const float *, float *, int64_t);
  void (*backward)(const Job &, int64_t, int64_t);
};

void runBaseline(const Job &j, int64_t i0, int64_t i1) {
  Kernel<4>::runRange(j, i0, i1);
}
void expBaseline(const float *x, float *y, int64_t n) {
  Kernel<4>::expRange(x, y, n);
}
void backwardBaseline(const Job &j, int64_t i0, int64_t i1) {
  Kernel<4>::runBackwardRange(j, i0, i1);
}
constexpr IsaCopy kBaseline = {"baseline", 4, runBaseline, expBaseline,
                               backwardBaseline};

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define OMNI_ATTENTION_X86 1
#define OMNI_AVX2 __attribute__((target("avx2,fma")))
#define OMNI_AVX512                                                            \
  __attribute__((target("avx512f,avx512vl,avx512dq,avx2,fma")))
OMNI_AVX2 void runAvx2(const Job &j, int64_t i0, int64_t i1) {
  Kernel<8>::runRange(j, i0, i1);
}
OMNI_AVX2 void expAvx2(const float *x, float *y, int64_t n) {
  Kernel<8>::expRange(x, y, n);
}
OMNI_AVX512 void runAvx512(const Job &j, int64_t i0, int64_t i1) {
  Kernel<16>::runRange(j, i0, i1);
}
OMNI_AVX512 void expAvx512(const float *x, float *y, int64_t n) {
  Kernel<16>::expRange(x, y, n);
}
OMNI_AVX2 void backwardAvx2(const Job &j, int64_t i0, int64_t i1) {
  Kernel<8>::runBackwardRange(j, i0, i1);
}
OMNI_AVX512 void backwardAvx512(const Job &j, int64_t i0, int64_t i1) {
  Kernel<16>::runBackwardRange(j, i0, i1);
}
constexpr IsaCopy kAvx2 = {"avx2", 8, runAvx2, expAvx2, backwardAvx2};
constexpr IsaCopy kAvx512 = {"avx512", 16, runAvx512, expAvx512,
                             backwardAvx512};

bool cpuHas(AttentionIsa isa) {
  static const bool avx2 =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  static const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") &&
                             __builtin_cpu_supports("avx512vl") &&
                             __builtin_cpu_supports("avx512dq");
  return isa == AttentionIsa::Avx512 ? avx512 : avx2;
}
#endif

/// The copy `isa` asks for; Best is the widest this CPU runs. Null when the
/// CPU lacks the ISA.
const IsaCopy *copyFor(AttentionIsa isa) {
  switch (isa) {
  case AttentionIsa::Baseline:
    return &kBaseline;
#ifdef OMNI_ATTENTION_X86
  case AttentionIsa::Avx2:
    return cpuHas(isa) ? &kAvx2 : nullptr;
  case AttentionIsa::Avx512:
    return cpuHas(isa) ? &kAvx512 : nullptr;
  case AttentionIsa::Best:
    return cpuHas(AttentionIsa::Avx512) ? &kAvx512
           : cpuHas(AttentionIsa::Avx2) ? &kAvx2
                                        : &kBaseline;
#else
  case AttentionIsa::Avx2:
  case AttentionIsa::Avx512:
    return nullptr;
  case AttentionIsa::Best:
    return &kBaseline;
#endif
  }
  return nullptr;
}

/// The copy to run: `isa`'s, or the baseline when the CPU lacks it.
const IsaCopy &runnable(AttentionIsa isa) {
  const IsaCopy *c = copyFor(isa);
  return c ? *c : kBaseline;
}

/// The sgemm path's query tiles: at most kAttentionScoreTileFloats scores
/// and kAttentionGemmMaxQueryTile rows per tile, as equal as whole groups
/// allow. A function of the shape alone: the sgemm's bits may depend on
/// its row count, so the thread count must not choose it. Sets j.ldS and
/// j.tile.
void gemmTiles(const AttentionParams &p, Job &j) {
  j.ldS = roundUp(p.seqK, 16);
  const int64_t cap =
      std::clamp<int64_t>(kAttentionScoreTileFloats / j.ldS / 16 * 16, 16,
                          kAttentionGemmMaxQueryTile);
  const int64_t tiles = (p.seqQ + cap - 1) / cap;
  j.tile = roundUp((p.seqQ + tiles - 1) / tiles, kGroup);
}

} // namespace

int64_t attentionKeyBlock(int64_t seqK) {
  const int64_t blocks = std::max<int64_t>(
      1, (seqK + kAttentionMaxKeyBlock - 1) / kAttentionMaxKeyBlock);
  return std::min(kAttentionMaxKeyBlock,
                  roundUp((seqK + blocks - 1) / blocks, 16));
}

bool attentionIsaAvailable(AttentionIsa isa) { return copyFor(isa); }

const char *attentionIsa(AttentionIsa isa) { return runnable(isa).name; }

void attentionExp(const float *x, float *y, int64_t n, AttentionIsa isa) {
  runnable(isa).exp(x, y, n);
}

void fusedAttention(const AttentionParams &p, const float *q, const float *k,
                    const float *v, const float *mask, float *out,
                    ThreadPool &pool, AttentionIsa isa) {
  if (p.seqQ == 0 || p.valueDim == 0 || p.batch == 0 || p.heads == 0)
    return;
  if (p.seqK == 0) {
    std::fill(out, out + p.batch * p.heads * p.seqQ * p.valueDim, 0.0f);
    return;
  }
  const IsaCopy &copy = runnable(isa);
  Job j;
  j.q = q, j.k = k, j.v = v, j.mask = p.hasMask ? mask : nullptr, j.out = out;
  j.heads = p.heads, j.seqQ = p.seqQ, j.seqK = p.seqK, j.d = p.headDim;
  j.dv = p.valueDim, j.dvPad = roundUp(p.valueDim, copy.width);
  j.block = attentionKeyBlock(p.seqK);
  const int64_t bhCount = p.batch * p.heads;
  if (p.headDim >= kAttentionGemmMinHeadDim) {
    gemmTiles(p, j);
  } else {
    // Query tiles in registers: as few per (batch, head) as still give
    // every thread about four work items (each tile transposes every key
    // block once), at most kAttentionMaxQueryTile rows, as equal as whole
    // groups allow. A row's bits do not depend on its tile, so the thread
    // count may choose them.
    const int64_t wanted = (4 * pool.size() + bhCount - 1) / bhCount;
    const int64_t tiles = std::max(
        {wanted, (p.seqQ + kAttentionMaxQueryTile - 1) / kAttentionMaxQueryTile,
         int64_t(1)});
    j.tile = roundUp((p.seqQ + tiles - 1) / tiles, kGroup);
  }
  j.tiles = (p.seqQ + j.tile - 1) / j.tile;
  const AttentionMaskStrides strides = attentionMaskStrides(p);
  j.maskBatchStride = strides.batch, j.maskHeadStride = strides.head;
  j.scale = static_cast<float>(p.scale);
  pool.parallelFor(bhCount * j.tiles,
                   [&](int64_t i0, int64_t i1) { copy.run(j, i0, i1); });
}

void fusedAttentionBackward(const AttentionParams &p, const float *q,
                            const float *k, const float *v, const float *mask,
                            const float *o, const float *dO, float *dq,
                            float *dk, float *dv, ThreadPool &pool,
                            AttentionIsa isa) {
  const int64_t bh = p.batch * p.heads;
  if (bh == 0)
    return;
  if (p.seqK == 0 || p.seqQ == 0) { // no scores: every cotangent is 0
    std::fill(dq, dq + bh * p.seqQ * p.headDim, 0.0f);
    std::fill(dk, dk + bh * p.seqK * p.headDim, 0.0f);
    std::fill(dv, dv + bh * p.seqK * p.valueDim, 0.0f);
    return;
  }
  const IsaCopy &copy = runnable(isa);
  Job j;
  j.q = q, j.k = k, j.v = v, j.mask = p.hasMask ? mask : nullptr;
  j.out = nullptr;
  j.o = o, j.dO = dO, j.dq = dq, j.dk = dk, j.dvOut = dv;
  j.heads = p.heads, j.seqQ = p.seqQ, j.seqK = p.seqK, j.d = p.headDim;
  j.dv = p.valueDim, j.dvPad = roundUp(p.valueDim, copy.width);
  j.dPad = roundUp(p.headDim, copy.width);
  j.block = attentionKeyBlock(p.seqK);
  j.tile = j.tiles = 1;
  if (p.headDim >= kAttentionGemmMinHeadDim)
    gemmTiles(p, j); // the tiles run in turn within a (batch, head)
  const AttentionMaskStrides strides = attentionMaskStrides(p);
  j.maskBatchStride = strides.batch, j.maskHeadStride = strides.head;
  j.scale = static_cast<float>(p.scale);
  pool.parallelFor(bh,
                   [&](int64_t i0, int64_t i1) { copy.backward(j, i0, i1); });
}

} // namespace omni::hal::cpu
