//===- FlashAttentionBackward.h - Attention's cotangents, fused -*- C++ -*-===//
//
// The flash-style attention backward of the cuda driver (docs/backend-cuda.md,
// "Library routines"): dq, dk, dv of attention (with or without an additive
// mask), for f16 / bf16 operands of head dimension 64 or 128, without
// [Sq, Sk] matrices in global memory. It is flash-attention-2's backward in its
// deterministic form: two kernels, neither with atomics, so every bit of the
// result is the same from run to run.
//
//   rows kernel (a block per 64 query rows, as the forward):
//     pass 1 over the key tiles: S = Q K^T scale + mask (tensor cores),
//       the online row max m and sum l of exp(S - m); L = m + log l;
//       Delta = rowsum(dO o) in f32; L and Delta go to `stats`;
//     pass 2 over the key tiles: S again, P = exp(S - L),
//       dP = dO V^T, dS = P (dP - Delta) rounded to T,
//       dq += dS K (tensor cores; held in WMMA accumulators);
//     dq = dq scale, rounded to T once.
//   keys kernel (a block per 64 keys of a (batch, head) pair):
//     for every query tile: S^T = K Q^T, dP^T = V dO^T (tensor cores),
//       P^T = exp(S^T scale + mask^T - L), dS^T = P^T (dP^T - Delta) (both
//       rounded to T), dv += P^T dO, dk += dS^T Q (WMMA accumulators);
//     dk = dk scale, dv, rounded to T once.
//
// A row whose keys are all masked has L = -inf and gives NaN, as the
// forward and the unfused path do.
//
// Each warp owns 16 rows (query rows in the first kernel, keys in the
// second), so within a tile only __syncwarp orders its steps;
// __syncthreads guards the tiles all warps read. P and dS are rounded to T
// before the products that read them (tensor cores take T), which is the
// only rounding beyond f32 sums; docs/precision.md gives the bound the
// host test checks.
//
// Like FlashAttention.h (whose file comment lists what an includer defines:
// OMNI_FA_FN, faSyncThreads, faSyncWarp, faWmma, faToFloat, faFromFloat),
// it is written once for the GPU (HelperKernels.cu) and for the host model
// of FlashAttentionHostTest.cpp; the driver includes it for the sizes only.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_HAL_DRIVERS_CUDA_KERNELS_FLASHATTENTIONBACKWARD_H
#define OMNI_RUNTIME_HAL_DRIVERS_CUDA_KERNELS_FLASHATTENTIONBACKWARD_H

#include "runtime/hal/drivers/cuda/kernels/FlashAttention.h"

namespace omni::hal::cuda::flash {

/// Dynamic shared memory of a block of the rows kernel: Q, dO, K, V tiles
/// (T), per warp S and dP (f32) and dS (T), and m, l, L, Delta per row.
constexpr size_t rowsSharedBytes(int d, int elementBytes) {
  return sizeof(float) * (2 * size_t(kRows) * kKeys + 4 * size_t(kRows)) +
         size_t(elementBytes) * (2 * size_t(kRows) * d + 2 * size_t(kKeys) * d +
                                 size_t(kRows) * kKeys);
}

/// Dynamic shared memory of a block of the keys kernel: K, V (its keys),
/// Q, dO (a query tile) (T), per warp S^T and dP^T (f32), P^T and dS^T
/// (T), and L, Delta of the query tile.
constexpr size_t keysSharedBytes(int d, int elementBytes) {
  return sizeof(float) * (2 * size_t(kKeys) * kRows + 2 * size_t(kRows)) +
         size_t(elementBytes) * (2 * size_t(kKeys) * d + 2 * size_t(kRows) * d +
                                 2 * size_t(kKeys) * kRows);
}

/// The blocks of the keys kernel: ceil(seqK / kKeys) per pair.
constexpr int64_t keyBlocksFor(int64_t pairs, int64_t seqK) {
  return pairs * ((seqK + kKeys - 1) / kKeys);
}

#ifdef OMNI_FA_FN

/// An additive mask [B|1, H|1, seqQ, seqK] of a call (FlashAttention.h's
/// convention: strides 0 where a dimension broadcasts); `mask` null: none.
template <typename T> struct MaskRef {
  const T *mask;
  int64_t heads, batchStride, headStride;
  /// The mask's row for query `row` of pair `pair`, or null.
  OMNI_FA_FN const T *row(int64_t pair, int64_t row, int64_t seqQ,
                          int64_t seqK) const {
    return mask ? mask + maskRowOffset(pair * seqQ + row, 0, seqQ, seqK, heads,
                                       batchStride, headStride)
                : nullptr;
  }
};

/// Writes a warp's accumulators (16 rows x D, `acc[c]` the 16 columns
/// from 16 c) times `factor`, rounded to T, to rows [row0, row0 + 16) of
/// the [rows, D] matrix `dst`, through `scratch` (16 x kKeys floats).
template <typename T, int D, typename Acc>
OMNI_FA_FN void storeRows(const Acc *acc, float factor, T *dst, int64_t row0,
                          int64_t rows, float *scratch, int lane) {
  using namespace faWmma;
  for (int c0 = 0; c0 < D; c0 += kKeys) {
    for (int c = 0; c < kKeys / kTile; ++c)
      store_matrix_sync(scratch + c * kTile, acc[c0 / kTile + c], kKeys,
                        mem_row_major);
    faSyncWarp();
    for (int i = lane; i < kWarpRows * kKeys; i += 32)
      if (row0 + i / kKeys < rows)
        dst[(row0 + i / kKeys) * D + c0 + i % kKeys] =
            faFromFloat<T>(scratch[i] * factor);
    faSyncWarp();
  }
}

/// Block `block` (of blocksFor(pairs, seqQ)) of the rows kernel: dq for 64
/// query rows of one pair, and their L and Delta into `lse` and `delta`
/// ([pairs, seqQ] f32). q, o, dO, dq are [pairs, seqQ, D], k, v [pairs,
/// seqK, D]; seqK >= 1.
template <typename T, int D>
OMNI_FA_FN void
attentionRowsBlock(const T *q, const T *k, const T *v, const T *o, const T *dO,
                   MaskRef<T> mask, T *dq, float *lse, float *delta,
                   int64_t block, int64_t seqQ, int64_t seqK, float scale,
                   unsigned char *shared, int thread) {
  static_assert(D % kKeys == 0 && kKeys % kTile == 0, "WMMA tiles");
  using namespace faWmma;
  const int64_t tilesQ = (seqQ + kRows - 1) / kRows;
  const int64_t pair = block / tilesQ;
  const int64_t row0 = (block % tilesQ) * kRows;
  const int warp = thread / 32, lane = thread % 32;

  float *S = reinterpret_cast<float *>(shared);
  float *dP = S + kRows * kKeys;
  float *M = dP + kRows * kKeys;
  float *Lsum = M + kRows;
  float *L = Lsum + kRows;
  float *Delta = L + kRows;
  T *Qs = reinterpret_cast<T *>(Delta + kRows);
  T *dOs = Qs + kRows * D;
  T *Ks = dOs + kRows * D;
  T *Vs = Ks + kKeys * D;
  T *dS = Vs + kKeys * D;

  const int64_t first = pair * seqQ;
  loadTile<T, D>(Qs, q + first * D, row0, seqQ, thread);
  loadTile<T, D>(dOs, dO + first * D, row0, seqQ, thread);
  const T *kp = k + pair * seqK * D;
  const T *vp = v + pair * seqK * D;
  faSyncThreads();

  // This warp's rows.
  const T *Qw = Qs + warp * kWarpRows * D;
  const T *dOw = dOs + warp * kWarpRows * D;
  float *Sw = S + warp * kWarpRows * kKeys;
  float *dPw = dP + warp * kWarpRows * kKeys;
  T *dSw = dS + warp * kWarpRows * kKeys;
  const int r = warp * kWarpRows + lane; // the row of lanes < 16
  const int64_t row = row0 + r;
  // The mask's row of lanes < 16 (null past seqQ or without a mask).
  const T *maskRow = lane < kWarpRows && row < seqQ
                         ? mask.row(pair, row, seqQ, seqK)
                         : nullptr;

  // Delta = rowsum(dO o), in f32 from the rounded operands.
  if (lane < kWarpRows) {
    float sum = 0.0f;
    if (row < seqQ)
      for (int e = 0; e < D; ++e)
        sum += faToFloat(dO[(first + row) * D + e]) *
               faToFloat(o[(first + row) * D + e]);
    Delta[r] = sum;
    M[r] = -INFINITY;
    Lsum[r] = 0.0f;
  }

  // Pass 1: the row max and sum, as the forward computes them.
  for (int64_t key0 = 0; key0 < seqK; key0 += kKeys) {
    loadTile<T, D>(Ks, kp, key0, seqK, thread);
    faSyncThreads();
    scoreRows<T, D>(Sw, Qw, Ks);
    faSyncWarp();
    if (lane < kWarpRows) {
      float *s = Sw + lane * kKeys;
      const float mOld = M[r];
      float mNew = mOld;
      for (int j = 0; j < kKeys && key0 + j < seqK; ++j) {
        s[j] = s[j] * scale + (maskRow ? faToFloat(maskRow[key0 + j]) : 0.0f);
        mNew = maxPropagatingNan(mNew, s[j]);
      }
      // All -inf so far: exponentials of -inf - 0 are 0, not NaN.
      const float base = mNew == -INFINITY ? 0.0f : mNew;
      float sum = 0.0f;
      for (int j = 0; j < kKeys && key0 + j < seqK; ++j)
        sum += expf(s[j] - base);
      Lsum[r] = Lsum[r] * expf(mOld - base) + sum;
      M[r] = mNew;
    }
    // The next tile overwrites K.
    faSyncThreads();
  }
  if (lane < kWarpRows) {
    L[r] = M[r] + logf(Lsum[r]);
    if (row < seqQ) {
      lse[first + row] = L[r];
      delta[first + row] = Delta[r];
    }
  }
  faSyncWarp();

  // Pass 2: dq += dS K per key tile.
  fragment<accumulator, kTile, kTile, kTile, float> dqAcc[D / kTile];
  for (int c = 0; c < D / kTile; ++c)
    fill_fragment(dqAcc[c], 0.0f);
  for (int64_t key0 = 0; key0 < seqK; key0 += kKeys) {
    loadTile<T, D>(Ks, kp, key0, seqK, thread);
    loadTile<T, D>(Vs, vp, key0, seqK, thread);
    faSyncThreads();
    scoreRows<T, D>(Sw, Qw, Ks, dPw, dOw, Vs);
    faSyncWarp();
    // All 32 lanes over the warp's 16 x 64 scores.
    for (int i = lane; i < kWarpRows * kKeys; i += 32) {
      const int rr = warp * kWarpRows + i / kKeys;
      const int64_t key = key0 + i % kKeys;
      float ds = 0.0f;
      if (row0 + rr < seqQ && key < seqK) {
        const T *m = mask.row(pair, row0 + rr, seqQ, seqK);
        const float x = Sw[i] * scale + (m ? faToFloat(m[key]) : 0.0f);
        ds = expf(x - L[rr]) * (dPw[i] - Delta[rr]);
      }
      dSw[i] = faFromFloat<T>(ds);
    }
    faSyncWarp();
    for (int c = 0; c < D / kTile; ++c)
      multiplyAccumulate<T, row_major, kKeys / kTile>(
          dqAcc[c], dSw, kKeys, Ks + c * kTile, D, kTile * D);
    // The next tile overwrites K and V.
    faSyncThreads();
  }
  storeRows<T, D>(dqAcc, scale, dq + first * D, row0 + warp * kWarpRows, seqQ,
                  Sw, lane);
  // The caller's next block rewrites the shared memory.
  faSyncThreads();
}

/// Block `block` (of keyBlocksFor(pairs, seqK)) of the keys kernel: dk and
/// dv for 64 keys of one pair, from the rows kernel's `lse` and `delta`.
/// Shapes as attentionRowsBlock; seqQ >= 1.
template <typename T, int D>
OMNI_FA_FN void
attentionKeysBlock(const T *q, const T *k, const T *v, const T *dO,
                   MaskRef<T> mask, const float *lse, const float *delta, T *dk,
                   T *dv, int64_t block, int64_t seqQ, int64_t seqK,
                   float scale, unsigned char *shared, int thread) {
  static_assert(D % kKeys == 0 && kKeys % kTile == 0, "WMMA tiles");
  using namespace faWmma;
  const int64_t tilesK = (seqK + kKeys - 1) / kKeys;
  const int64_t pair = block / tilesK;
  const int64_t key0 = (block % tilesK) * kKeys;
  const int warp = thread / 32, lane = thread % 32;

  float *St = reinterpret_cast<float *>(shared);
  float *dPt = St + kKeys * kRows;
  float *L = dPt + kKeys * kRows;
  float *Delta = L + kRows;
  T *Ks = reinterpret_cast<T *>(Delta + kRows);
  T *Vs = Ks + kKeys * D;
  T *Qs = Vs + kKeys * D;
  T *dOs = Qs + kRows * D;
  T *Pt = dOs + kRows * D;
  T *dSt = Pt + kKeys * kRows;

  const int64_t firstKey = pair * seqK, firstRow = pair * seqQ;
  loadTile<T, D>(Ks, k + firstKey * D, key0, seqK, thread);
  loadTile<T, D>(Vs, v + firstKey * D, key0, seqK, thread);

  // This warp's keys.
  const T *Kw = Ks + warp * kWarpRows * D;
  const T *Vw = Vs + warp * kWarpRows * D;
  float *Sw = St + warp * kWarpRows * kRows;
  float *dPw = dPt + warp * kWarpRows * kRows;
  T *Pw = Pt + warp * kWarpRows * kRows;
  T *dSw = dSt + warp * kWarpRows * kRows;

  fragment<accumulator, kTile, kTile, kTile, float> dkAcc[D / kTile],
      dvAcc[D / kTile];
  for (int c = 0; c < D / kTile; ++c) {
    fill_fragment(dkAcc[c], 0.0f);
    fill_fragment(dvAcc[c], 0.0f);
  }
  for (int64_t row0 = 0; row0 < seqQ; row0 += kRows) {
    loadTile<T, D>(Qs, q + firstRow * D, row0, seqQ, thread);
    loadTile<T, D>(dOs, dO + firstRow * D, row0, seqQ, thread);
    for (int i = thread; i < kRows; i += kThreads) {
      const bool in = row0 + i < seqQ;
      L[i] = in ? lse[firstRow + row0 + i] : 0.0f;
      Delta[i] = in ? delta[firstRow + row0 + i] : 0.0f;
    }
    faSyncThreads();
    // S^T = K Q^T and dP^T = V dO^T for the warp's 16 keys.
    scoreRows<T, D>(Sw, Kw, Qs, dPw, Vw, dOs);
    faSyncWarp();
    for (int i = lane; i < kWarpRows * kRows; i += 32) {
      const int c = i % kRows;
      const int64_t key = key0 + warp * kWarpRows + i / kRows;
      float p = 0.0f, ds = 0.0f;
      if (key < seqK && row0 + c < seqQ) {
        const T *m = mask.row(pair, row0 + c, seqQ, seqK);
        p = expf(Sw[i] * scale + (m ? faToFloat(m[key]) : 0.0f) - L[c]);
        ds = p * (dPw[i] - Delta[c]);
      }
      Pw[i] = faFromFloat<T>(p);
      dSw[i] = faFromFloat<T>(ds);
    }
    faSyncWarp();
    for (int c = 0; c < D / kTile; ++c) {
      multiplyAccumulate<T, row_major, kRows / kTile>(
          dvAcc[c], Pw, kRows, dOs + c * kTile, D, kTile * D);
      multiplyAccumulate<T, row_major, kRows / kTile>(
          dkAcc[c], dSw, kRows, Qs + c * kTile, D, kTile * D);
    }
    // The next tile overwrites Q, dO, L and Delta.
    faSyncThreads();
  }
  const int64_t warpKey0 = key0 + warp * kWarpRows;
  storeRows<T, D>(dkAcc, scale, dk + firstKey * D, warpKey0, seqK, Sw, lane);
  storeRows<T, D>(dvAcc, 1.0f, dv + firstKey * D, warpKey0, seqK, Sw, lane);
  // The caller's next block rewrites the shared memory.
  faSyncThreads();
}

#endif // OMNI_FA_FN

} // namespace omni::hal::cuda::flash

#endif // OMNI_RUNTIME_HAL_DRIVERS_CUDA_KERNELS_FLASHATTENTIONBACKWARD_H
