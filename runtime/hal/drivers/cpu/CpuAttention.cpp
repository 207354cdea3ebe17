//===- CpuAttention.cpp - Fused flash-style attention on the CPU ----------===//
//
// The kernel of CpuAttention.h. One work item = one (batch, head, tile of
// at most kAttentionMaxQueryTile query rows). Per key block (attentionKeyBlock)
// it transposes the keys (head dim major, so a vector holds 8 keys) and pads
// keys and values with zeros to whole vectors, then per group of 4 query
// rows computes the 4 x block scores with 8 accumulators in registers, and
// per row: mask, block max, running max, rescale factor, exp, the block's
// probability sum (f64 lanes) and the f32 block partial of p v added to the
// f64 output accumulator. Padding keys get a -inf score, so they add 0.
//
// Written with GCC/Clang vector extensions (8 x f32, the width of AVX2):
// the compiler emits AVX2/FMA for the copy marked target("avx2,fma") and
// pairs of SSE2 operations for the baseline copy; both copies are the same
// template, instantiated twice. Every helper is always_inline so that it
// is compiled for the ISA of the function it lands in.
//
//===----------------------------------------------------------------------===//

#include "runtime/hal/drivers/cpu/CpuAttention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

// Vector values never cross a non-inlined call, so the ABI note GCC gives
// for 32-byte vectors on the baseline ISA does not apply.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

namespace omni::hal::cpu {
namespace {

#define OMNI_ALWAYS_INLINE inline __attribute__((always_inline))

typedef float V8 __attribute__((vector_size(32)));
typedef int32_t V8I __attribute__((vector_size(32)));
typedef double V4D __attribute__((vector_size(32)));

constexpr int64_t kGroup = 4; // query rows whose scores share key loads
static_assert(kAttentionMaxKeyBlock % 16 == 0, "whole 16-key score blocks");

constexpr float kInf = std::numeric_limits<float>::infinity();

OMNI_ALWAYS_INLINE int64_t roundUp(int64_t x, int64_t m) {
  return (x + m - 1) / m * m;
}
OMNI_ALWAYS_INLINE V8 load(const float *p) {
  V8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
OMNI_ALWAYS_INLINE void store(float *p, V8 v) { std::memcpy(p, &v, sizeof v); }
OMNI_ALWAYS_INLINE V8 splat(float x) { return V8{} + x; }

/// exp on 8 lanes (Cephes expf): x = n ln2 + r with |r| <= ln2 / 2 (n
/// rounded to nearest by adding 1.5 * 2^23; ln2 split in two for an exact
/// n ln2), a degree-6 polynomial for e^r, and 2^n built from its exponent
/// bits. Below ln(2^-126) the result is 0; above 88 it is +inf; NaN stays
/// NaN (every comparison with it is false, and NaN times anything is NaN).
OMNI_ALWAYS_INLINE V8 expV(V8 x) {
  const float lo = -87.3365447505531f; // ln(2^-126)
  const float hi = 88.0f;
  const V8I under = x<lo, over = x> hi;
  x = under ? splat(lo) : x;
  x = over ? splat(hi) : x;
  const float magic = 12582912.0f; // 1.5 * 2^23
  V8 t = x * 1.44269504088896341f + magic;
  V8 n = t - magic;
  V8I ni = reinterpret_cast<V8I>(t) - reinterpret_cast<V8I>(splat(magic));
  V8 r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  V8 p = splat(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  V8 y = p * (r * r) + r + 1.0f;
  y = y * reinterpret_cast<V8>((ni + 127) << 23);
  y = under ? splat(0.0f) : y;
  return over ? splat(kInf) : y;
}

struct Job {
  const float *q, *k, *v, *mask;
  float *out;
  int64_t heads, seqQ, seqK, d, dv, dvPad;
  int64_t block; // keys per block, a multiple of 16 (attentionKeyBlock)
  int64_t tile;  // query rows per work item, a multiple of kGroup
  int64_t tiles; // work items per (batch, head)
  int64_t maskBatchStride, maskHeadStride; // elements; 0 when broadcast
  float scale;
};

/// One thread's buffers, sized for the job.
struct Scratch {
  std::vector<float> kT, vb, qt, s, m;
  std::vector<double> o, l;
  explicit Scratch(const Job &j)
      : kT(j.d * j.block), vb(j.block * j.dvPad), qt(j.tile * j.d),
        s(kGroup * j.block), m(j.tile), o(j.tile * j.dvPad), l(j.tile) {}
};

/// s[r][0, nbPad) = scale * (q row r) . (key columns), r < kGroup; qt holds
/// kGroup rows of d, kT is d x block, s is kGroup x block.
OMNI_ALWAYS_INLINE void scoreGroup(const float *qt, const float *kT, int64_t d,
                                   int64_t block, int64_t nbPad, float scale,
                                   float *s) {
  const int64_t kBlock = block;
  for (int64_t jj = 0; jj < nbPad; jj += 16) {
    V8 a00{}, a01{}, a10{}, a11{}, a20{}, a21{}, a30{}, a31{};
    for (int64_t e = 0; e < d; ++e) {
      const V8 k0 = load(kT + e * kBlock + jj);
      const V8 k1 = load(kT + e * kBlock + jj + 8);
      const float q0 = qt[e], q1 = qt[d + e], q2 = qt[2 * d + e],
                  q3 = qt[3 * d + e];
      a00 += q0 * k0, a01 += q0 * k1;
      a10 += q1 * k0, a11 += q1 * k1;
      a20 += q2 * k0, a21 += q2 * k1;
      a30 += q3 * k0, a31 += q3 * k1;
    }
    store(s + jj, a00 * scale), store(s + jj + 8, a01 * scale);
    store(s + kBlock + jj, a10 * scale);
    store(s + kBlock + jj + 8, a11 * scale);
    store(s + 2 * kBlock + jj, a20 * scale);
    store(s + 2 * kBlock + jj + 8, a21 * scale);
    store(s + 3 * kBlock + jj, a30 * scale);
    store(s + 3 * kBlock + jj + 8, a31 * scale);
  }
}

/// x[0, 8) = x * alpha + acc, in f64.
OMNI_ALWAYS_INLINE void addScaled(double *x, double alpha, V8 acc) {
  V4D lo, hi;
  std::memcpy(&lo, x, sizeof lo);
  std::memcpy(&hi, x + 4, sizeof hi);
  lo = lo * alpha + __builtin_convertvector(
                        __builtin_shufflevector(acc, acc, 0, 1, 2, 3), V4D);
  hi = hi * alpha + __builtin_convertvector(
                        __builtin_shufflevector(acc, acc, 4, 5, 6, 7), V4D);
  std::memcpy(x, &lo, sizeof lo);
  std::memcpy(x + 4, &hi, sizeof hi);
}

/// For the kGroup rows r of p (stride block): o[r] = o[r] * alpha[r] +
/// sum_j p[r][j] vb[j] over [0, dvPad), the sum over the block in f32 (8
/// independent accumulators for two vectors of 4 rows), added in f64.
OMNI_ALWAYS_INLINE void accumulatePV(const float *p, int64_t block,
                                     const float *vb, int64_t nbPad,
                                     int64_t dvPad, const float *alpha,
                                     double *o) {
  const float *p0 = p, *p1 = p + block, *p2 = p + 2 * block,
              *p3 = p + 3 * block;
  int64_t c = 0;
  for (; c + 16 <= dvPad; c += 16) {
    V8 a00{}, a01{}, a10{}, a11{}, a20{}, a21{}, a30{}, a31{};
    for (int64_t j = 0; j < nbPad; ++j) {
      const float *row = vb + j * dvPad + c;
      const V8 v0 = load(row), v1 = load(row + 8);
      a00 += p0[j] * v0, a01 += p0[j] * v1;
      a10 += p1[j] * v0, a11 += p1[j] * v1;
      a20 += p2[j] * v0, a21 += p2[j] * v1;
      a30 += p3[j] * v0, a31 += p3[j] * v1;
    }
    addScaled(o + c, alpha[0], a00), addScaled(o + c + 8, alpha[0], a01);
    addScaled(o + dvPad + c, alpha[1], a10);
    addScaled(o + dvPad + c + 8, alpha[1], a11);
    addScaled(o + 2 * dvPad + c, alpha[2], a20);
    addScaled(o + 2 * dvPad + c + 8, alpha[2], a21);
    addScaled(o + 3 * dvPad + c, alpha[3], a30);
    addScaled(o + 3 * dvPad + c + 8, alpha[3], a31);
  }
  if (c < dvPad) { // one vector left
    V8 a0{}, a1{}, a2{}, a3{};
    for (int64_t j = 0; j < nbPad; ++j) {
      const V8 v0 = load(vb + j * dvPad + c);
      a0 += p0[j] * v0, a1 += p1[j] * v0;
      a2 += p2[j] * v0, a3 += p3[j] * v0;
    }
    addScaled(o + c, alpha[0], a0);
    addScaled(o + dvPad + c, alpha[1], a1);
    addScaled(o + 2 * dvPad + c, alpha[2], a2);
    addScaled(o + 3 * dvPad + c, alpha[3], a3);
  }
}

template <int Isa>
OMNI_ALWAYS_INLINE void runTile(const Job &j, Scratch &sc, int64_t item) {
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
  for (int64_t i = 0; i < rowsPad; ++i)
    for (int64_t e = 0; e < d; ++e)
      qt[i * d + e] = i < rows ? q[i * d + e] : 0.0f;
  std::fill(m, m + rows, -kInf);
  std::fill(l, l + rows, 0.0);
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
      // Rows that add nothing (padding, or nothing but -inf so far) keep
      // their accumulator: p = 0, alpha = 1.
      float alpha[kGroup] = {1.0f, 1.0f, 1.0f, 1.0f};
      for (int64_t r = 0; r < kGroup; ++r) {
        if (r >= rows - g) {
          std::fill(s + r * kBlock, s + r * kBlock + nbPad, 0.0f);
          continue;
        }
        const int64_t i = g + r;
        float *row = s + r * kBlock;
        if (mask)
          for (int64_t jj = 0; jj < nb; ++jj)
            row[jj] += mask[i * j.seqK + j0 + jj];
        for (int64_t jj = nb; jj < nbPad; ++jj)
          row[jj] = -kInf;
        V8 mx = splat(-kInf);
        for (int64_t jj = 0; jj < nbPad; jj += 8) {
          const V8 x = load(row + jj);
          mx = x > mx ? x : mx;
        }
        float blockMax = -kInf;
        for (int lane = 0; lane < 8; ++lane)
          blockMax = mx[lane] > blockMax ? mx[lane] : blockMax;
        const float mOld = m[i];
        const float mNew = blockMax > mOld ? blockMax : mOld;
        if (mNew == -kInf) {
          // Nothing but -inf (and NaN, which max skips) so far: the block
          // adds nothing, except that a NaN score makes the row NaN.
          for (int64_t jj = 0; jj < nb; ++jj)
            if (std::isnan(row[jj]))
              l[i] = std::numeric_limits<double>::quiet_NaN();
          std::fill(row, row + nbPad, 0.0f);
          continue;
        }
        alpha[r] = expV(splat(mOld - mNew))[0];
        V4D sum0{}, sum1{};
        for (int64_t jj = 0; jj < nbPad; jj += 8) {
          const V8 p = expV(load(row + jj) - mNew);
          store(row + jj, p);
          sum0 += __builtin_convertvector(
              __builtin_shufflevector(p, p, 0, 1, 2, 3), V4D);
          sum1 += __builtin_convertvector(
              __builtin_shufflevector(p, p, 4, 5, 6, 7), V4D);
        }
        const V4D sum = sum0 + sum1;
        l[i] = l[i] * alpha[r] + ((sum[0] + sum[1]) + (sum[2] + sum[3]));
        m[i] = mNew;
      }
      accumulatePV(s, kBlock, vb, nbPad, dvPad, alpha, o + g * dvPad);
    }
  }
  for (int64_t i = 0; i < rows; ++i) {
    const double inv = 1.0 / l[i];
    for (int64_t c = 0; c < dv; ++c)
      out[i * dv + c] = static_cast<float>(o[i * dvPad + c] * inv);
  }
}

template <int Isa>
OMNI_ALWAYS_INLINE void runRange(const Job &j, Scratch &sc, int64_t i0,
                                 int64_t i1) {
  for (int64_t item = i0; item < i1; ++item)
    runTile<Isa>(j, sc, item);
}

template <int Isa>
OMNI_ALWAYS_INLINE void expRange(const float *x, float *y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    store(y + i, expV(load(x + i)));
  if (i < n) {
    float in[8] = {}, res[8];
    std::memcpy(in, x + i, (n - i) * sizeof(float));
    store(res, expV(load(in)));
    std::memcpy(y + i, res, (n - i) * sizeof(float));
  }
}

void runRangeBaseline(const Job &j, Scratch &sc, int64_t i0, int64_t i1) {
  runRange<0>(j, sc, i0, i1);
}
void expRangeBaseline(const float *x, float *y, int64_t n) {
  expRange<0>(x, y, n);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define OMNI_ATTENTION_AVX2 1
__attribute__((target("avx2,fma"))) void runRangeAvx2(const Job &j, Scratch &sc,
                                                      int64_t i0, int64_t i1) {
  runRange<1>(j, sc, i0, i1);
}
__attribute__((target("avx2,fma"))) void expRangeAvx2(const float *x, float *y,
                                                      int64_t n) {
  expRange<1>(x, y, n);
}
bool cpuHasAvx2() {
  static const bool has =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}
#endif

bool useAvx2(AttentionIsa isa) {
#ifdef OMNI_ATTENTION_AVX2
  return isa == AttentionIsa::Best && cpuHasAvx2();
#else
  (void)isa;
  return false;
#endif
}

} // namespace

int64_t attentionKeyBlock(int64_t seqK) {
  const int64_t blocks = std::max<int64_t>(
      1, (seqK + kAttentionMaxKeyBlock - 1) / kAttentionMaxKeyBlock);
  return std::min(kAttentionMaxKeyBlock,
                  roundUp((seqK + blocks - 1) / blocks, 16));
}

const char *attentionIsa() {
  return useAvx2(AttentionIsa::Best) ? "avx2" : "baseline";
}

void attentionExp(const float *x, float *y, int64_t n, AttentionIsa isa) {
#ifdef OMNI_ATTENTION_AVX2
  if (useAvx2(isa))
    return expRangeAvx2(x, y, n);
#endif
  expRangeBaseline(x, y, n);
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
  Job j;
  j.q = q, j.k = k, j.v = v, j.mask = p.hasMask ? mask : nullptr, j.out = out;
  j.heads = p.heads, j.seqQ = p.seqQ, j.seqK = p.seqK, j.d = p.headDim;
  j.dv = p.valueDim, j.dvPad = roundUp(p.valueDim, 8);
  j.block = attentionKeyBlock(p.seqK);
  // Query tiles of at most kAttentionMaxQueryTile rows, as equal as whole
  // groups allow (72 rows: 2 x 36, not 64 + 8).
  const int64_t tiles =
      (p.seqQ + kAttentionMaxQueryTile - 1) / kAttentionMaxQueryTile;
  j.tile = roundUp((p.seqQ + tiles - 1) / tiles, kGroup);
  j.tiles = (p.seqQ + j.tile - 1) / j.tile;
  const int64_t plane = p.seqQ * p.seqK;
  j.maskHeadStride = p.maskHeadShared ? 0 : plane;
  j.maskBatchStride =
      p.maskBatchShared ? 0 : (p.maskHeadShared ? 1 : p.heads) * plane;
  j.scale = static_cast<float>(p.scale);
  const bool avx2 = useAvx2(isa);
  pool.parallelFor(p.batch * p.heads * j.tiles, [&](int64_t i0, int64_t i1) {
    Scratch sc(j);
#ifdef OMNI_ATTENTION_AVX2
    if (avx2)
      return runRangeAvx2(j, sc, i0, i1);
#endif
    (void)avx2;
    runRangeBaseline(j, sc, i0, i1);
  });
}

} // namespace omni::hal::cpu
