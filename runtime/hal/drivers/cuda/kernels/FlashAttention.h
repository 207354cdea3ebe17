//===- FlashAttention.h - Attention without materialized scores -*- C++ -*-===//
//
// The flash-style attention forward of the cuda driver (docs/backend-cuda.md,
// "Library routines"): for f16 / bf16 q, k, v of head dimension 64 or 128, one
// block of 128 threads (4 warps) computes 64 query rows of one (batch,
// head) pair, walking the keys in tiles of 64 with an online softmax, so
// the scores never leave shared memory:
//
//   per key tile:  K, V tiles -> shared memory (zeros past seqK)
//                  S = Q K^T          tensor cores (WMMA 16x16x16, f32 sums)
//                  s = S * scale + mask; m' = max(m, max s) (NaN wins)
//                  p = exp(s - m'), rounded to T; l = l e^(m - m') + sum p
//                  O = O e^(m - m') + P V   (WMMA, O kept in f32)
//   at the end:    out = O / l, rounded to T once.
//
// Each warp owns 16 query rows: its S, P and O rows are its own, so within
// a tile only __syncwarp orders its steps; __syncthreads guards the shared
// K and V tiles. A row whose keys are all masked (-inf) has l = 0 and gives
// NaN, as the unfused path (softmax of all -inf) does.
//
// The code is written once for two hosts: HelperKernels.cu includes it for
// the GPU (nvcuda::wmma, __syncthreads, __syncwarp), and
// FlashAttentionHostTest.cpp includes it with a host model of those (each
// CUDA thread a std::thread, WMMA fragments holding the whole tile), which
// runs every block exactly as written and checks the result against
// attention in double; the driver includes it for the sizes only. The
// kernel's includer defines, before including:
//   OMNI_FA_FN              function qualifiers (__device__ inline / inline)
//   faSyncThreads()         a barrier of the block's 128 threads
//   faSyncWarp()            a barrier of the calling warp's 32 threads
//   namespace faWmma        fragment, load_matrix_sync, mma_sync,
//                           store_matrix_sync, fill_fragment, matrix_a,
//                           matrix_b, accumulator, row_major, col_major,
//                           mem_row_major (nvcuda::wmma's names)
//   faToFloat(T), faFromFloat<T>(float)   round to nearest even
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_HAL_DRIVERS_CUDA_KERNELS_FLASHATTENTION_H
#define OMNI_RUNTIME_HAL_DRIVERS_CUDA_KERNELS_FLASHATTENTION_H

#include "runtime/hal/drivers/cuda/kernels/Indexing.h"

#include <cmath>
#include <cstddef>
#include <cstdint>

namespace omni::hal::cuda::flash {

/// Query rows per block, keys per tile, threads per block.
constexpr int kRows = 64;
constexpr int kKeys = 64;
constexpr int kThreads = 128;
/// Query rows per warp (kRows / 4 warps), the WMMA tile edge.
constexpr int kWarpRows = 16;
constexpr int kTile = 16;

/// Dynamic shared memory of a block, in bytes, for head dimension `d` and
/// elements of `elementBytes` (2). Every region is a multiple of 32 bytes,
/// as WMMA's loads and stores need 256-bit aligned pointers.
constexpr size_t sharedBytes(int d, int elementBytes) {
  return sizeof(float) * (size_t(kRows) * d                  // O
                          + size_t(kRows) * kKeys            // S
                          + 3 * size_t(kRows))               // m, l, alpha
         + size_t(elementBytes) * (size_t(kRows) * d         // Q
                                   + 2 * size_t(kKeys) * d   // K, V
                                   + size_t(kRows) * kKeys); // P
}

/// The blocks of one call: ceil(seqQ / kRows) per (batch, head) pair.
constexpr int64_t blocksFor(int64_t pairs, int64_t seqQ) {
  return pairs * ((seqQ + kRows - 1) / kRows);
}

// The kernel itself, for an includer that defines what it needs (the file
// comment); the sizes above are plain C++ for the driver.
#ifdef OMNI_FA_FN

/// max that propagates NaN (as the unfused softmax does).
OMNI_FA_FN float maxPropagatingNan(float a, float b) {
  if (a != a || b != b)
    return a + b;
  return a > b ? a : b;
}

/// acc += A B over `Steps` 16-wide steps of the inner dimension: A is
/// row-major at `a` (leading dimension `lda`, step k at a + 16 k), B is
/// `LayoutB` at `b` (leading dimension `ldb`, step k at b + k bStep).
template <typename T, typename LayoutB, int Steps, typename Acc>
OMNI_FA_FN void multiplyAccumulate(Acc &acc, const T *a, unsigned lda,
                                   const T *b, unsigned ldb, int bStep) {
  using namespace faWmma;
  for (int k = 0; k < Steps; ++k) {
    fragment<matrix_a, kTile, kTile, kTile, T, row_major> fa;
    fragment<matrix_b, kTile, kTile, kTile, T, LayoutB> fb;
    load_matrix_sync(fa, a + k * kTile, lda);
    load_matrix_sync(fb, b + k * bStep, ldb);
    mma_sync(acc, fa, fb, acc);
  }
}

static_assert(kRows == kKeys, "query and key tiles load alike (loadTile)");

/// Rows [row0, row0 + 64) of a [rows, D] matrix at `src` into `dst`
/// (64 x D), zeros past `rows`; the whole block calls it.
template <typename T, int D>
OMNI_FA_FN void loadTile(T *dst, const T *src, int64_t row0, int64_t rows,
                         int thread) {
  const T zero = faFromFloat<T>(0.0f);
  for (int i = thread; i < kRows * D; i += kThreads)
    dst[i] = row0 + i / D < rows ? src[row0 * D + i] : zero;
}

/// out (16 x 64, row stride 64) = a b^T for a warp: `a` its 16 rows
/// (row-major, D wide), `b` a 64 x D tile (row-major), so column block n
/// of out reads rows 16 n.. of b as a column-major 16 x 16 (b(k', c) =
/// b[16 n + c][16 kk + k']). Tensor cores, f32 sums.
/// With `a2`, also out2 = a2 b2^T, interleaved column block by column
/// block (the backward's S and dP: two independent chains of tensor-core
/// products, and fewer live registers than one product after the other).
template <typename T, int D>
OMNI_FA_FN void scoreRows(float *out, const T *a, const T *b,
                          float *out2 = nullptr, const T *a2 = nullptr,
                          const T *b2 = nullptr) {
  using namespace faWmma;
  for (int n = 0; n < kKeys / kTile; ++n) {
    fragment<accumulator, kTile, kTile, kTile, float> acc, acc2;
    fill_fragment(acc, 0.0f);
    multiplyAccumulate<T, col_major, D / kTile>(acc, a, D, b + n * kTile * D, D,
                                                kTile);
    if (a2) {
      fill_fragment(acc2, 0.0f);
      multiplyAccumulate<T, col_major, D / kTile>(acc2, a2, D,
                                                  b2 + n * kTile * D, D, kTile);
      store_matrix_sync(out2 + n * kTile, acc2, kKeys, mem_row_major);
    }
    store_matrix_sync(out + n * kTile, acc, kKeys, mem_row_major);
  }
}

/// Block `block` (of blocksFor(pairs, seqQ)) of attention over q [pairs,
/// seqQ, D], k, v [pairs, seqK, D] into out [pairs, seqQ, D], run by thread
/// `thread` of kThreads with `shared` the block's sharedBytes(D, 2) bytes.
/// The mask (when hasMask) is [.., .., seqQ, seqK] with the given strides
/// for the batch and head dimensions (0: broadcast). seqK >= 1.
template <typename T, int D>
OMNI_FA_FN void
attentionBlock(const T *q, const T *k, const T *v, const T *mask, T *out,
               int64_t block, int64_t seqQ, int64_t seqK, int64_t heads,
               int64_t maskBatchStride, int64_t maskHeadStride, int64_t hasMask,
               float scale, unsigned char *shared, int thread) {
  static_assert(D % kTile == 0 && kKeys % kTile == 0, "WMMA tiles");
  using namespace faWmma;
  const int64_t tilesQ = (seqQ + kRows - 1) / kRows;
  const int64_t pair = block / tilesQ;
  const int64_t row0 = (block % tilesQ) * kRows;
  const int warp = thread / 32, lane = thread % 32;

  float *O = reinterpret_cast<float *>(shared);
  float *S = O + kRows * D;
  float *M = S + kRows * kKeys;
  float *L = M + kRows;
  float *A = L + kRows;
  T *Qs = reinterpret_cast<T *>(A + kRows);
  T *Ks = Qs + kRows * D;
  T *Vs = Ks + kKeys * D;
  T *P = Vs + kKeys * D;

  const T *kp = k + pair * seqK * D;
  const T *vp = v + pair * seqK * D;
  loadTile<T, D>(Qs, q + pair * seqQ * D, row0, seqQ, thread);
  for (int i = thread; i < kRows * D; i += kThreads)
    O[i] = 0.0f;
  for (int r = thread; r < kRows; r += kThreads) {
    M[r] = -INFINITY;
    L[r] = 0.0f;
  }
  faSyncThreads();

  // This warp's rows.
  const T *Qw = Qs + warp * kWarpRows * D;
  float *Sw = S + warp * kWarpRows * kKeys;
  T *Pw = P + warp * kWarpRows * kKeys;
  float *Ow = O + warp * kWarpRows * D;
  for (int64_t key0 = 0; key0 < seqK; key0 += kKeys) {
    loadTile<T, D>(Ks, kp, key0, seqK, thread);
    loadTile<T, D>(Vs, vp, key0, seqK, thread);
    faSyncThreads();

    // S = Q K^T.
    scoreRows<T, D>(Sw, Qw, Ks);
    faSyncWarp();

    // The online softmax: lane r < 16 owns row r of the warp.
    if (lane < kWarpRows) {
      const int r = warp * kWarpRows + lane;
      const int64_t row = row0 + r;
      float *s = Sw + lane * kKeys;
      const T *m = nullptr;
      if (hasMask && row < seqQ)
        m = mask +
            maskRowOffset(pair * seqQ + row, 0, seqQ, seqK, heads,
                          maskBatchStride, maskHeadStride) +
            key0;
      const float mOld = M[r];
      float mNew = mOld;
      for (int j = 0; j < kKeys; ++j) {
        float x = -INFINITY;
        if (key0 + j < seqK) {
          x = s[j] * scale;
          if (m)
            x += faToFloat(m[j]);
        }
        s[j] = x;
        mNew = maxPropagatingNan(mNew, x);
      }
      // All -inf so far: exponentials of -inf - 0 are 0, not NaN.
      const float base = mNew == -INFINITY ? 0.0f : mNew;
      const float alpha = expf(mOld - base);
      float sum = 0.0f;
      for (int j = 0; j < kKeys; ++j) {
        const float p = expf(s[j] - base);
        Pw[lane * kKeys + j] = faFromFloat<T>(p);
        sum += p;
      }
      L[r] = L[r] * alpha + sum;
      M[r] = mNew;
      A[r] = alpha;
    }
    faSyncWarp();
    for (int i = lane; i < kWarpRows * D; i += 32)
      Ow[i] *= A[warp * kWarpRows + i / D];
    faSyncWarp();

    // O += P V, one 16-column block of O at a time.
    for (int c = 0; c < D / kTile; ++c) {
      fragment<accumulator, kTile, kTile, kTile, float> acc;
      load_matrix_sync(acc, Ow + c * kTile, D, mem_row_major);
      multiplyAccumulate<T, row_major, kKeys / kTile>(
          acc, Pw, kKeys, Vs + c * kTile, D, kTile * D);
      store_matrix_sync(Ow + c * kTile, acc, D, mem_row_major);
    }
    // The next tile overwrites K and V.
    faSyncThreads();
  }

  T *op = out + (pair * seqQ + row0) * D;
  for (int i = thread; i < kRows * D; i += kThreads)
    if (row0 + i / D < seqQ)
      op[i] = faFromFloat<T>(O[i] / L[i / D]);
  // The caller's next block rewrites the shared memory.
  faSyncThreads();
}

#endif // OMNI_FA_FN

} // namespace omni::hal::cuda::flash

#endif // OMNI_RUNTIME_HAL_DRIVERS_CUDA_KERNELS_FLASHATTENTION_H
