//===- HelperKernels.cu - Device code the cuda driver itself needs --------===//
//
// Kernels behind Stream commands that are not compiled programs: Philox
// random numbers (the same PhiloxCore.h the cpu driver runs, so the bits
// agree; docs/rng.md), byte-pattern fills, im2col for conv2d, the
// row softmax of attention and the dS of its backward, and the flash
// attention forward and backward (FlashAttention.h,
// FlashAttentionBackward.h, written once for the GPU and a host model).
// Compiled at build time by nvcc to PTX for
// compute_80 with --fmad=false (no contraction: docs/rng.md), IEEE division
// and square root, and embedded in the runtime as a string
// (EmbedPtx.cmake); CudaDevice JIT-loads it once per device. Entry names
// are extern "C" so the driver finds them with cuModuleGetFunction.
// Every kernel is a grid-stride loop over a 64-bit element count.
//
//===----------------------------------------------------------------------===//

#include "runtime/flowgrpo/PhiloxCore.h"
#include "runtime/hal/drivers/cuda/kernels/Indexing.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

namespace {

using omni::flowgrpo::core::blockAt;
using omni::flowgrpo::core::normalFromBlock;
using omni::flowgrpo::core::uniformFromBlock;

__device__ inline int64_t firstIndex() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ inline int64_t gridStride() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

// Rounding a float once to the element type (round to nearest even, as the
// cpu driver's halfBitsFromDouble / bf16BitsFromDouble of the same float).
template <typename T> __device__ inline T fromFloat(float v);
template <> __device__ inline float fromFloat<float>(float v) { return v; }
template <> __device__ inline double fromFloat<double>(float v) { return v; }
template <> __device__ inline __half fromFloat<__half>(float v) {
  return __float2half_rn(v);
}
template <> __device__ inline __nv_bfloat16 fromFloat<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

template <typename T, bool Normal>
__device__ void randomKernel(const int64_t *key, const int64_t *counter,
                             const int64_t *offset, T *out, int64_t n) {
  const uint64_t seed = static_cast<uint64_t>(*key);
  const uint64_t stream = static_cast<uint64_t>(*counter);
  const uint64_t first = static_cast<uint64_t>(*offset);
  for (int64_t j = firstIndex(); j < n; j += gridStride()) {
    // Positions wrap modulo 2^64 (docs/rng.md).
    auto block = blockAt(seed, stream, first + static_cast<uint64_t>(j));
    float v = Normal ? normalFromBlock(block) : uniformFromBlock(block);
    out[j] = fromFloat<T>(v);
  }
}

// row-major input [images, c, h, w] -> col [images, c*kh*kw, oh*ow]
// (zero outside the padded input; Indexing.h); T is only moved, never
// computed with.
template <typename T>
__device__ void im2colKernel(const T *in, T *col, int64_t images, int64_t c,
                             int64_t h, int64_t w, int64_t kh, int64_t kw,
                             int64_t sh, int64_t sw, int64_t ph, int64_t pw,
                             int64_t dh, int64_t dw, int64_t oh, int64_t ow) {
  const omni::hal::cuda::Im2colShape shape{c,  h,  w,  kh, kw, sh, sw,
                                           ph, pw, dh, dw, oh, ow};
  const int64_t total = images * c * kh * kw * oh * ow;
  for (int64_t i = firstIndex(); i < total; i += gridStride()) {
    int64_t source = omni::hal::cuda::im2colSource(shape, i);
    col[i] = source < 0 ? T{} : in[source];
  }
}

// A mask element in the score type's precision (exact widening).
__device__ inline float widen(float v) { return v; }
__device__ inline double widen(double v) { return v; }
__device__ inline float widen(__half v) { return __half2float(v); }
__device__ inline float widen(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename S> __device__ inline S expOf(S x);
template <> __device__ inline float expOf<float>(float x) { return expf(x); }
template <> __device__ inline double expOf<double>(double x) { return exp(x); }

/// max that propagates NaN (as the cpu driver's softmax does).
template <typename S> __device__ inline S maxOf(S a, S b) {
  if (a != a || b != b)
    return a + b;
  return a > b ? a : b;
}

// One block (power-of-two blockDim.x <= 1024, blockDim.x doubles of shared
// memory) per row of scores (S: f32, f64 for f64 attention):
// p = softmax(scores + mask), written as T. Rows
// [0, rows) of this call are (batch * heads + bh0) * seqQ + row of the
// whole attention; the mask broadcasts by its strides (0 for a shared dim).
template <typename S, typename T>
__device__ void softmaxKernel(const S *scores, const T *mask, T *out,
                              int64_t rows, int64_t seqQ, int64_t seqK,
                              int64_t heads, int64_t bh0,
                              int64_t maskBatchStride, int64_t maskHeadStride,
                              int64_t hasMask) {
  // One double per thread: the max (exact in double) and then the sum of
  // the exponentials, accumulated in double as the cpu driver does.
  extern __shared__ unsigned char sharedBytes[];
  double *partial = reinterpret_cast<double *>(sharedBytes);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const S *in = scores + row * seqK;
    T *dst = out + row * seqK;
    const T *m = nullptr;
    if (hasMask)
      m = mask + omni::hal::cuda::maskRowOffset(row, bh0, seqQ, seqK, heads,
                                                maskBatchStride,
                                                maskHeadStride);
    auto value = [&](int64_t j) -> S {
      S x = in[j];
      if (m)
        x = x + static_cast<S>(widen(m[j]));
      return x;
    };
    S localMax = -static_cast<S>(INFINITY);
    for (int64_t j = threadIdx.x; j < seqK; j += blockDim.x)
      localMax = maxOf(localMax, value(j));
    partial[threadIdx.x] = localMax;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {
      if (threadIdx.x < s)
        partial[threadIdx.x] =
            maxOf(partial[threadIdx.x], partial[threadIdx.x + s]);
      __syncthreads();
    }
    const S rowMax = static_cast<S>(partial[0]);
    __syncthreads();
    double localSum = 0;
    for (int64_t j = threadIdx.x; j < seqK; j += blockDim.x)
      localSum += static_cast<double>(expOf(value(j) - rowMax));
    partial[threadIdx.x] = localSum;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {
      if (threadIdx.x < s)
        partial[threadIdx.x] += partial[threadIdx.x + s];
      __syncthreads();
    }
    const S inverse = static_cast<S>(1.0 / partial[0]);
    __syncthreads();
    for (int64_t j = threadIdx.x; j < seqK; j += blockDim.x)
      dst[j] = static_cast<T>(expOf(value(j) - rowMax) * inverse);
  }
}

// One block (power-of-two blockDim.x <= 1024, blockDim.x doubles of shared
// memory) per row of the unfused attention backward: Delta = rowsum(dO o)
// (accumulated in double), then ds = p (dP - Delta) written as T over p
// (each element read before it is written, by the same thread).
template <typename S, typename T>
__device__ void attentionGradScoresKernel(const S *dP, T *p, const T *dO,
                                          const T *o, int64_t rows,
                                          int64_t seqK, int64_t dv) {
  extern __shared__ unsigned char sharedBytes[];
  double *partial = reinterpret_cast<double *>(sharedBytes);
  for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    double local = 0;
    for (int64_t e = threadIdx.x; e < dv; e += blockDim.x)
      local += static_cast<double>(widen(dO[row * dv + e])) *
               static_cast<double>(widen(o[row * dv + e]));
    partial[threadIdx.x] = local;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s /= 2) {
      if (threadIdx.x < s)
        partial[threadIdx.x] += partial[threadIdx.x + s];
      __syncthreads();
    }
    const S delta = static_cast<S>(partial[0]);
    __syncthreads();
    for (int64_t j = threadIdx.x; j < seqK; j += blockDim.x) {
      const S pj = static_cast<S>(widen(p[row * seqK + j]));
      p[row * seqK + j] = static_cast<T>(pj * (dP[row * seqK + j] - delta));
    }
  }
}

} // namespace

// What FlashAttention.h needs from the GPU (its file comment).
#define OMNI_FA_FN __device__ inline
__device__ inline void faSyncThreads() { __syncthreads(); }
__device__ inline void faSyncWarp() { __syncwarp(); }
__device__ inline float faToFloat(__half x) { return __half2float(x); }
__device__ inline float faToFloat(__nv_bfloat16 x) {
  return __bfloat162float(x);
}
template <typename T> __device__ inline T faFromFloat(float v) {
  return fromFloat<T>(v);
}
namespace faWmma = nvcuda::wmma;
#include "runtime/hal/drivers/cuda/kernels/FlashAttentionBackward.h"

namespace {
/// body(block, shared, thread) for the call's blocks of a flash kernel
/// (FlashAttention.h, FlashAttentionBackward.h), a grid-stride loop: the
/// grid may be smaller than the call.
template <typename Body>
__device__ void overFlashBlocks(int64_t blocks, const Body &body) {
  extern __shared__ __align__(128) unsigned char flashShared[];
  for (int64_t b = blockIdx.x; b < blocks; b += gridDim.x)
    body(b, flashShared, static_cast<int>(threadIdx.x));
}
} // namespace

extern "C" {

#define OMNI_RANDOM(name, T, normal)                                           \
  __global__ void omni_random_##name(                                          \
      const int64_t *key, const int64_t *counter, const int64_t *offset,       \
      T *out, int64_t n) {                                                     \
    randomKernel<T, normal>(key, counter, offset, out, n);                     \
  }
OMNI_RANDOM(normal_f32, float, true)
OMNI_RANDOM(normal_f64, double, true)
OMNI_RANDOM(normal_f16, __half, true)
OMNI_RANDOM(normal_bf16, __nv_bfloat16, true)
OMNI_RANDOM(uniform_f32, float, false)
OMNI_RANDOM(uniform_f64, double, false)
OMNI_RANDOM(uniform_f16, __half, false)
OMNI_RANDOM(uniform_bf16, __nv_bfloat16, false)
#undef OMNI_RANDOM

/// dst[i] = pattern[i % size] for i in [0, n); the pattern (1..16 bytes) is
/// passed as two little-endian words.
__global__ void omni_fill_bytes(uint8_t *dst, int64_t n, uint64_t p0,
                                uint64_t p1, int64_t size) {
  for (int64_t i = firstIndex(); i < n; i += gridStride()) {
    int64_t b = i % size;
    uint64_t word = b < 8 ? p0 : p1;
    dst[i] = static_cast<uint8_t>(word >> (8 * (b % 8)));
  }
}

#define OMNI_IM2COL(name, T)                                                   \
  __global__ void omni_im2col_##name(                                          \
      const T *in, T *col, int64_t images, int64_t c, int64_t h, int64_t w,    \
      int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t ph, int64_t pw,  \
      int64_t dh, int64_t dw, int64_t oh, int64_t ow) {                        \
    im2colKernel<T>(in, col, images, c, h, w, kh, kw, sh, sw, ph, pw, dh, dw,  \
                    oh, ow);                                                   \
  }
OMNI_IM2COL(b2, uint16_t)
OMNI_IM2COL(b4, uint32_t)
OMNI_IM2COL(b8, uint64_t)
#undef OMNI_IM2COL

#define OMNI_SOFTMAX(name, S, T)                                               \
  __global__ void omni_softmax_##name(                                         \
      const S *scores, const T *mask, T *out, int64_t rows, int64_t seqQ,      \
      int64_t seqK, int64_t heads, int64_t bh0, int64_t maskBatchStride,       \
      int64_t maskHeadStride, int64_t hasMask) {                               \
    softmaxKernel<S, T>(scores, mask, out, rows, seqQ, seqK, heads, bh0,       \
                        maskBatchStride, maskHeadStride, hasMask);             \
  }
OMNI_SOFTMAX(f32, float, float)
OMNI_SOFTMAX(f64, double, double)
OMNI_SOFTMAX(f16, float, __half)
OMNI_SOFTMAX(bf16, float, __nv_bfloat16)
#undef OMNI_SOFTMAX

#define OMNI_FLASH(name, T, D)                                                 \
  __global__ void __launch_bounds__(128) omni_flash_attention_##name(         \
      const T *q, const T *k, const T *v, const T *mask, T *out,               \
      int64_t blocks, int64_t seqQ, int64_t seqK, int64_t heads,               \
      int64_t maskBatchStride, int64_t maskHeadStride, int64_t hasMask,        \
      float scale) {                                                           \
    overFlashBlocks(blocks, [&](int64_t b, unsigned char *shared, int t) {     \
      omni::hal::cuda::flash::attentionBlock<T, D>(                            \
          q, k, v, mask, out, b, seqQ, seqK, heads, maskBatchStride,           \
          maskHeadStride, hasMask, scale, shared, t);                          \
    });                                                                        \
  }
OMNI_FLASH(f16_d64, __half, 64)
OMNI_FLASH(f16_d128, __half, 128)
OMNI_FLASH(bf16_d64, __nv_bfloat16, 64)
OMNI_FLASH(bf16_d128, __nv_bfloat16, 128)
#undef OMNI_FLASH

#define OMNI_GRAD_SCORES(name, S, T)                                           \
  __global__ void omni_attention_grad_scores_##name(                           \
      const S *dP, T *p, const T *dO, const T *o, int64_t rows, int64_t seqK,  \
      int64_t dv) {                                                            \
    attentionGradScoresKernel<S, T>(dP, p, dO, o, rows, seqK, dv);             \
  }
OMNI_GRAD_SCORES(f32, float, float)
OMNI_GRAD_SCORES(f64, double, double)
OMNI_GRAD_SCORES(f16, float, __half)
OMNI_GRAD_SCORES(bf16, float, __nv_bfloat16)
#undef OMNI_GRAD_SCORES

// The mask (null without one) broadcasts by its strides (0: shared).
#define OMNI_FLASH_BACKWARD(name, T, D)                                        \
  __global__ void __launch_bounds__(128) omni_flash_attention_rows_##name(    \
      const T *q, const T *k, const T *v, const T *o, const T *dO,             \
      const T *mask, int64_t heads, int64_t maskBatchStride,                   \
      int64_t maskHeadStride, T *dq, float *lse, float *delta,                 \
      int64_t blocks, int64_t seqQ, int64_t seqK, float scale) {               \
    overFlashBlocks(blocks, [&](int64_t b, unsigned char *shared, int t) {     \
      omni::hal::cuda::flash::attentionRowsBlock<T, D>(                        \
          q, k, v, o, dO, {mask, heads, maskBatchStride, maskHeadStride}, dq,  \
          lse, delta, b, seqQ, seqK, scale, shared, t);                        \
    });                                                                        \
  }                                                                            \
  __global__ void __launch_bounds__(128) omni_flash_attention_keys_##name(    \
      const T *q, const T *k, const T *v, const T *dO, const T *mask,          \
      int64_t heads, int64_t maskBatchStride, int64_t maskHeadStride,          \
      const float *lse, const float *delta, T *dk, T *dv, int64_t blocks,      \
      int64_t seqQ, int64_t seqK, float scale) {                               \
    overFlashBlocks(blocks, [&](int64_t b, unsigned char *shared, int t) {     \
      omni::hal::cuda::flash::attentionKeysBlock<T, D>(                        \
          q, k, v, dO, {mask, heads, maskBatchStride, maskHeadStride}, lse,    \
          delta, dk, dv, b, seqQ, seqK, scale, shared, t);                     \
    });                                                                        \
  }
OMNI_FLASH_BACKWARD(f16_d64, __half, 64)
OMNI_FLASH_BACKWARD(f16_d128, __half, 128)
OMNI_FLASH_BACKWARD(bf16_d64, __nv_bfloat16, 64)
OMNI_FLASH_BACKWARD(bf16_d128, __nv_bfloat16, 128)
#undef OMNI_FLASH_BACKWARD

} // extern "C"
