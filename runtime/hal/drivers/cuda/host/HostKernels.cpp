//===- HostKernels.cpp - The cuda driver's helper kernels on the host -----===//
//
// HostModel.h's kernels, by entry name, with the parameter lists of
// kernels/HelperKernels.cu (the driver passes them as cuLaunchKernel's
// kernelParams; a parameter out of order reads the wrong value here as it
// would on a GPU). Philox, im2col addressing and the flash kernels are the
// very code the PTX is compiled from (PhiloxCore.h, Indexing.h,
// FlashAttention*.h under FlashAttentionHostModel.h); the fill, softmax
// and dS kernels are written again here, in the order HelperKernels.cu
// computes them, with its rounding. Every kernel checks that what it reads
// and writes lies inside device allocations (CUDA_ERROR_ILLEGAL_ADDRESS
// otherwise, as a GPU faults) and that the launch has the block shape and
// shared memory the kernel needs.
//
//===----------------------------------------------------------------------===//

#include "runtime/hal/drivers/cuda/host/HostModel.h"

#include "runtime/flowgrpo/PhiloxCore.h"
#include "runtime/hal/drivers/cuda/kernels/FlashAttentionHostModel.h"
#include "runtime/hal/drivers/cuda/kernels/Indexing.h"
#include "runtime/io/ElementCodec.h"

#include <cmath>
#include <cstring>
#include <initializer_list>
#include <map>

namespace omni::hal::cuda::host {
namespace {

/// The T at `p` (any alignment), and `value` stored there.
template <typename T> T load(const void *p) {
  T value;
  std::memcpy(&value, p, sizeof(T));
  return value;
}
template <typename T> void save(void *p, T value) {
  std::memcpy(p, &value, sizeof(T));
}

/// Parameter `i` of a launch as a T.
template <typename T> T arg(void **params, int i) { return load<T>(params[i]); }

bool inside(const void *p, int64_t bytes) {
  return bytes <= 0 || isDeviceRange(reinterpret_cast<uintptr_t>(p),
                                     static_cast<size_t>(bytes));
}

/// A range a kernel reads or writes.
struct Range {
  const void *pointer;
  int64_t bytes;
};

/// Whether every range lies inside device memory.
bool insideAll(std::initializer_list<Range> ranges) {
  for (const Range &r : ranges)
    if (!inside(r.pointer, r.bytes))
      return false;
  return true;
}

/// The element types of the helper kernels, as bits, with their rounding.
struct F32 {
  using Bits = float;
  static float load(float v) { return v; }
  static float store(double v) { return static_cast<float>(v); }
};
struct F64 {
  using Bits = double;
  static double load(double v) { return v; }
  static double store(double v) { return v; }
};
struct F16 {
  using Bits = uint16_t;
  static float load(uint16_t v) {
    return static_cast<float>(doubleFromHalfBits(v));
  }
  static uint16_t store(double v) { return halfBitsFromDouble(v); }
};
struct BF16 {
  using Bits = uint16_t;
  static float load(uint16_t v) {
    return static_cast<float>(doubleFromBf16Bits(v));
  }
  static uint16_t store(double v) { return bf16BitsFromDouble(v); }
};

template <typename T, bool Normal> HostKernel random() {
  return {{8, 8, 8, 8, 8}, [](const LaunchDims &, void **params) {
            const auto *key = arg<const int64_t *>(params, 0);
            const auto *counter = arg<const int64_t *>(params, 1);
            const auto *offset = arg<const int64_t *>(params, 2);
            auto *out = arg<typename T::Bits *>(params, 3);
            const int64_t n = arg<int64_t>(params, 4);
            if (!insideAll({{key, 8},
                            {counter, 8},
                            {offset, 8},
                            {out, n * int64_t(sizeof(typename T::Bits))}}))
              return CUDA_ERROR_ILLEGAL_ADDRESS;
            const auto seed = static_cast<uint64_t>(*key);
            const auto stream = static_cast<uint64_t>(*counter);
            const auto first = static_cast<uint64_t>(*offset);
            for (int64_t j = 0; j < n; ++j) {
              auto block = flowgrpo::core::blockAt(
                  seed, stream, first + static_cast<uint64_t>(j));
              float v = Normal ? flowgrpo::core::normalFromBlock(block)
                               : flowgrpo::core::uniformFromBlock(block);
              out[j] = T::store(v);
            }
            return CUDA_SUCCESS;
          }};
}

HostKernel fillBytes() {
  return {{8, 8, 8, 8, 8}, [](const LaunchDims &, void **params) {
            auto *dst = arg<uint8_t *>(params, 0);
            const int64_t n = arg<int64_t>(params, 1);
            const uint64_t words[2] = {arg<uint64_t>(params, 2),
                                       arg<uint64_t>(params, 3)};
            const int64_t size = arg<int64_t>(params, 4);
            if (size < 1 || size > 16)
              return CUDA_ERROR_INVALID_VALUE;
            if (!inside(dst, n))
              return CUDA_ERROR_ILLEGAL_ADDRESS;
            for (int64_t i = 0; i < n; ++i) {
              int64_t b = i % size;
              dst[i] = static_cast<uint8_t>(words[b / 8] >> (8 * (b % 8)));
            }
            return CUDA_SUCCESS;
          }};
}

template <typename Word> HostKernel im2col() {
  return {std::vector<size_t>(16, 8), [](const LaunchDims &, void **params) {
            const auto *in = arg<const Word *>(params, 0);
            auto *col = arg<Word *>(params, 1);
            int64_t v[14];
            for (int i = 0; i < 14; ++i)
              v[i] = arg<int64_t>(params, 2 + i);
            const int64_t images = v[0];
            const Im2colShape s{v[1], v[2], v[3],  v[4],  v[5],  v[6], v[7],
                                v[8], v[9], v[10], v[11], v[12], v[13]};
            const int64_t total = images * s.c * s.kh * s.kw * s.oh * s.ow;
            const int64_t es = sizeof(Word);
            if (!inside(in, images * s.c * s.h * s.w * es) ||
                !inside(col, total * es))
              return CUDA_ERROR_ILLEGAL_ADDRESS;
            for (int64_t i = 0; i < total; ++i) {
              int64_t source = im2colSource(s, i);
              col[i] = source < 0 ? Word{} : in[source];
            }
            return CUDA_SUCCESS;
          }};
}

/// The row kernels' launch contract (HelperKernels.cu): a power-of-two
/// block of at most 1024 threads with one double each of shared memory.
bool rowLaunch(const LaunchDims &d) {
  const unsigned t = d.block[0];
  return t && (t & (t - 1)) == 0 && t <= 1024 && d.block[1] == 1 &&
         d.block[2] == 1 && d.sharedBytes >= t * sizeof(double);
}

template <typename S> S expOf(S x) { return std::exp(x); }

/// max that propagates NaN (HelperKernels.cu's maxOf).
template <typename S> S maxOf(S a, S b) {
  if (a != a || b != b)
    return a + b;
  return a > b ? a : b;
}

template <typename S, typename T> HostKernel softmax() {
  return {std::vector<size_t>(11, 8), [](const LaunchDims &d, void **params) {
            if (!rowLaunch(d))
              return CUDA_ERROR_INVALID_VALUE;
            const auto *scores = arg<const S *>(params, 0);
            const auto *mask = arg<const typename T::Bits *>(params, 1);
            auto *out = arg<typename T::Bits *>(params, 2);
            const int64_t rows = arg<int64_t>(params, 3),
                          seqQ = arg<int64_t>(params, 4),
                          seqK = arg<int64_t>(params, 5),
                          heads = arg<int64_t>(params, 6),
                          bh0 = arg<int64_t>(params, 7),
                          batchStride = arg<int64_t>(params, 8),
                          headStride = arg<int64_t>(params, 9),
                          hasMask = arg<int64_t>(params, 10);
            const int64_t es = sizeof(typename T::Bits);
            if (!inside(scores, rows * seqK * int64_t(sizeof(S))) ||
                !inside(out, rows * seqK * es))
              return CUDA_ERROR_ILLEGAL_ADDRESS;
            for (int64_t row = 0; row < rows; ++row) {
              const S *in = scores + row * seqK;
              const typename T::Bits *m = nullptr;
              if (hasMask) {
                m = mask + maskRowOffset(row, bh0, seqQ, seqK, heads,
                                         batchStride, headStride);
                if (!inside(m, seqK * es))
                  return CUDA_ERROR_ILLEGAL_ADDRESS;
              }
              auto value = [&](int64_t j) -> S {
                S x = in[j];
                if (m)
                  x = x + static_cast<S>(T::load(m[j]));
                return x;
              };
              S rowMax = -static_cast<S>(INFINITY);
              for (int64_t j = 0; j < seqK; ++j)
                rowMax = maxOf(rowMax, value(j));
              double sum = 0;
              for (int64_t j = 0; j < seqK; ++j)
                sum += static_cast<double>(expOf(value(j) - rowMax));
              const S inverse = static_cast<S>(1.0 / sum);
              for (int64_t j = 0; j < seqK; ++j)
                out[row * seqK + j] =
                    T::store(expOf(value(j) - rowMax) * inverse);
            }
            return CUDA_SUCCESS;
          }};
}

template <typename S, typename T> HostKernel gradScores() {
  return {std::vector<size_t>(7, 8), [](const LaunchDims &d, void **params) {
            if (!rowLaunch(d))
              return CUDA_ERROR_INVALID_VALUE;
            const auto *dP = arg<const S *>(params, 0);
            auto *p = arg<typename T::Bits *>(params, 1);
            const auto *dO = arg<const typename T::Bits *>(params, 2);
            const auto *o = arg<const typename T::Bits *>(params, 3);
            const int64_t rows = arg<int64_t>(params, 4),
                          seqK = arg<int64_t>(params, 5),
                          dv = arg<int64_t>(params, 6);
            const int64_t es = sizeof(typename T::Bits);
            if (!insideAll({{dP, rows * seqK * int64_t(sizeof(S))},
                            {p, rows * seqK * es},
                            {dO, rows * dv * es},
                            {o, rows * dv * es}}))
              return CUDA_ERROR_ILLEGAL_ADDRESS;
            for (int64_t row = 0; row < rows; ++row) {
              double delta = 0;
              for (int64_t e = 0; e < dv; ++e)
                delta += static_cast<double>(T::load(dO[row * dv + e])) *
                         static_cast<double>(T::load(o[row * dv + e]));
              const S d = static_cast<S>(delta);
              for (int64_t j = 0; j < seqK; ++j) {
                const S pj = static_cast<S>(T::load(p[row * seqK + j]));
                p[row * seqK + j] = T::store(pj * (dP[row * seqK + j] - d));
              }
            }
            return CUDA_SUCCESS;
          }};
}

/// The flash kernels' launch contract: kThreads threads, the shared memory
/// of their shape. Blocks run one after another (a grid-stride loop over
/// `blocks`, whatever the grid).
bool flashLaunch(const LaunchDims &d, size_t shared) {
  return d.block[0] == flash::kThreads && d.block[1] == 1 && d.block[2] == 1 &&
         d.sharedBytes >= shared;
}

template <typename T, int D> HostKernel flashForward() {
  std::vector<size_t> sizes(12, 8);
  sizes.push_back(4);
  return {sizes, [](const LaunchDims &d, void **params) {
            if (!flashLaunch(d, flash::sharedBytes(D, 2)))
              return CUDA_ERROR_INVALID_VALUE;
            const auto *q = arg<const T *>(params, 0);
            const auto *k = arg<const T *>(params, 1);
            const auto *v = arg<const T *>(params, 2);
            const auto *mask = arg<const T *>(params, 3);
            auto *out = arg<T *>(params, 4);
            const int64_t blocks = arg<int64_t>(params, 5),
                          seqQ = arg<int64_t>(params, 6),
                          seqK = arg<int64_t>(params, 7),
                          heads = arg<int64_t>(params, 8),
                          batchStride = arg<int64_t>(params, 9),
                          headStride = arg<int64_t>(params, 10),
                          hasMask = arg<int64_t>(params, 11);
            const float scale = arg<float>(params, 12);
            const int64_t pairs =
                blocks / ((seqQ + flash::kRows - 1) / flash::kRows);
            const int64_t rows = pairs * seqQ * D * 2,
                          keys = pairs * seqK * D * 2;
            if (!insideAll({{q, rows}, {k, keys}, {v, keys}, {out, rows}}))
              return CUDA_ERROR_ILLEGAL_ADDRESS;
            flash_host::runBlocks(blocks, d.sharedBytes,
                                  [&](int64_t b, unsigned char *shared, int t) {
                                    flash::attentionBlock<T, D>(
                                        q, k, v, mask, out, b, seqQ, seqK,
                                        heads, batchStride, headStride, hasMask,
                                        scale, shared, t);
                                  });
            return CUDA_SUCCESS;
          }};
}

/// Parameters shared by the two backward kernels' lists (HelperKernels.cu).
std::vector<size_t> flashBackwardSizes() {
  std::vector<size_t> sizes(15, 8);
  sizes.push_back(4);
  return sizes;
}

template <typename T, int D> HostKernel flashRows() {
  return {flashBackwardSizes(), [](const LaunchDims &d, void **params) {
            if (!flashLaunch(d, flash::rowsSharedBytes(D, 2)))
              return CUDA_ERROR_INVALID_VALUE;
            const auto *q = arg<const T *>(params, 0);
            const auto *k = arg<const T *>(params, 1);
            const auto *v = arg<const T *>(params, 2);
            const auto *o = arg<const T *>(params, 3);
            const auto *dO = arg<const T *>(params, 4);
            const flash::MaskRef<T> mask{
                arg<const T *>(params, 5), arg<int64_t>(params, 6),
                arg<int64_t>(params, 7), arg<int64_t>(params, 8)};
            auto *dq = arg<T *>(params, 9);
            auto *lse = arg<float *>(params, 10);
            auto *delta = arg<float *>(params, 11);
            const int64_t blocks = arg<int64_t>(params, 12),
                          seqQ = arg<int64_t>(params, 13),
                          seqK = arg<int64_t>(params, 14);
            const float scale = arg<float>(params, 15);
            const int64_t pairs =
                blocks / ((seqQ + flash::kRows - 1) / flash::kRows);
            const int64_t rows = pairs * seqQ * D * 2,
                          keys = pairs * seqK * D * 2, stats = pairs * seqQ * 4;
            if (!insideAll({{q, rows},
                            {o, rows},
                            {dO, rows},
                            {dq, rows},
                            {k, keys},
                            {v, keys},
                            {lse, stats},
                            {delta, stats}}))
              return CUDA_ERROR_ILLEGAL_ADDRESS;
            flash_host::runBlocks(blocks, d.sharedBytes,
                                  [&](int64_t b, unsigned char *shared, int t) {
                                    flash::attentionRowsBlock<T, D>(
                                        q, k, v, o, dO, mask, dq, lse, delta, b,
                                        seqQ, seqK, scale, shared, t);
                                  });
            return CUDA_SUCCESS;
          }};
}

template <typename T, int D> HostKernel flashKeys() {
  return {flashBackwardSizes(), [](const LaunchDims &d, void **params) {
            if (!flashLaunch(d, flash::keysSharedBytes(D, 2)))
              return CUDA_ERROR_INVALID_VALUE;
            const auto *q = arg<const T *>(params, 0);
            const auto *k = arg<const T *>(params, 1);
            const auto *v = arg<const T *>(params, 2);
            const auto *dO = arg<const T *>(params, 3);
            const flash::MaskRef<T> mask{
                arg<const T *>(params, 4), arg<int64_t>(params, 5),
                arg<int64_t>(params, 6), arg<int64_t>(params, 7)};
            const auto *lse = arg<const float *>(params, 8);
            const auto *delta = arg<const float *>(params, 9);
            auto *dk = arg<T *>(params, 10);
            auto *dv = arg<T *>(params, 11);
            const int64_t blocks = arg<int64_t>(params, 12),
                          seqQ = arg<int64_t>(params, 13),
                          seqK = arg<int64_t>(params, 14);
            const float scale = arg<float>(params, 15);
            const int64_t pairs =
                blocks / ((seqK + flash::kKeys - 1) / flash::kKeys);
            const int64_t rows = pairs * seqQ * D * 2,
                          keys = pairs * seqK * D * 2, stats = pairs * seqQ * 4;
            if (!insideAll({{q, rows},
                            {dO, rows},
                            {k, keys},
                            {v, keys},
                            {dk, keys},
                            {dv, keys},
                            {lse, stats},
                            {delta, stats}}))
              return CUDA_ERROR_ILLEGAL_ADDRESS;
            flash_host::runBlocks(blocks, d.sharedBytes,
                                  [&](int64_t b, unsigned char *shared, int t) {
                                    flash::attentionKeysBlock<T, D>(
                                        q, k, v, dO, mask, lse, delta, dk, dv,
                                        b, seqQ, seqK, scale, shared, t);
                                  });
            return CUDA_SUCCESS;
          }};
}

/// CudaDriverTest's PTX kernel add_scalar (kAddPtx): out[t] = a[t] + b[t]
/// + float(s) for each thread t of the block.
HostKernel addScalar() {
  return {{8, 8, 8, 8}, [](const LaunchDims &d, void **params) {
            const auto *a = arg<const float *>(params, 0);
            const auto *b = arg<const float *>(params, 1);
            auto *out = arg<float *>(params, 2);
            const int64_t s = arg<int64_t>(params, 3);
            const int64_t n = d.block[0];
            if (!insideAll({{a, 4 * n}, {b, 4 * n}, {out, 4 * n}}))
              return CUDA_ERROR_ILLEGAL_ADDRESS;
            for (int64_t t = 0; t < n; ++t)
              out[t] = (a[t] + b[t]) + static_cast<float>(s);
            return CUDA_SUCCESS;
          }};
}

const std::map<std::string, HostKernel> &kernels() {
  static const auto *table = new std::map<std::string, HostKernel>{
      {"omni_random_normal_f32", random<F32, true>()},
      {"omni_random_normal_f64", random<F64, true>()},
      {"omni_random_normal_f16", random<F16, true>()},
      {"omni_random_normal_bf16", random<BF16, true>()},
      {"omni_random_uniform_f32", random<F32, false>()},
      {"omni_random_uniform_f64", random<F64, false>()},
      {"omni_random_uniform_f16", random<F16, false>()},
      {"omni_random_uniform_bf16", random<BF16, false>()},
      {"omni_fill_bytes", fillBytes()},
      {"omni_im2col_b2", im2col<uint16_t>()},
      {"omni_im2col_b4", im2col<uint32_t>()},
      {"omni_im2col_b8", im2col<uint64_t>()},
      {"omni_softmax_f32", softmax<float, F32>()},
      {"omni_softmax_f64", softmax<double, F64>()},
      {"omni_softmax_f16", softmax<float, F16>()},
      {"omni_softmax_bf16", softmax<float, BF16>()},
      {"omni_attention_grad_scores_f32", gradScores<float, F32>()},
      {"omni_attention_grad_scores_f64", gradScores<double, F64>()},
      {"omni_attention_grad_scores_f16", gradScores<float, F16>()},
      {"omni_attention_grad_scores_bf16", gradScores<float, BF16>()},
      {"omni_flash_attention_f16_d64", flashForward<flash_host::F16, 64>()},
      {"omni_flash_attention_f16_d128", flashForward<flash_host::F16, 128>()},
      {"omni_flash_attention_bf16_d64", flashForward<flash_host::Bf16, 64>()},
      {"omni_flash_attention_bf16_d128", flashForward<flash_host::Bf16, 128>()},
      {"omni_flash_attention_rows_f16_d64", flashRows<flash_host::F16, 64>()},
      {"omni_flash_attention_rows_f16_d128", flashRows<flash_host::F16, 128>()},
      {"omni_flash_attention_rows_bf16_d64", flashRows<flash_host::Bf16, 64>()},
      {"omni_flash_attention_rows_bf16_d128",
       flashRows<flash_host::Bf16, 128>()},
      {"omni_flash_attention_keys_f16_d64", flashKeys<flash_host::F16, 64>()},
      {"omni_flash_attention_keys_f16_d128", flashKeys<flash_host::F16, 128>()},
      {"omni_flash_attention_keys_bf16_d64", flashKeys<flash_host::Bf16, 64>()},
      {"omni_flash_attention_keys_bf16_d128",
       flashKeys<flash_host::Bf16, 128>()},
      {"add_scalar", addScalar()},
  };
  return *table;
}

} // namespace

double loadElement(DType dtype, const void *p) {
  switch (dtype) {
  case DType::F64:
    return load<double>(p);
  case DType::F32:
    return load<float>(p);
  case DType::F16:
    return doubleFromHalfBits(load<uint16_t>(p));
  case DType::BF16:
    return doubleFromBf16Bits(load<uint16_t>(p));
  case DType::I32:
    return load<int32_t>(p);
  case DType::I1:
    return load<uint8_t>(p);
  default:
    return static_cast<double>(load<int64_t>(p));
  }
}

void storeElement(DType dtype, void *p, double value) {
  switch (dtype) {
  case DType::F64:
    return save(p, value);
  case DType::F32:
    return save(p, static_cast<float>(value));
  case DType::F16:
    return save(p, halfBitsFromDouble(value));
  case DType::BF16:
    return save(p, bf16BitsFromDouble(value));
  case DType::I32:
    return save(p, static_cast<int32_t>(value));
  case DType::I1:
    return save(p, static_cast<uint8_t>(value));
  default:
    return save(p, static_cast<int64_t>(value));
  }
}

const HostKernel *findKernel(const std::string &entry) {
  auto it = kernels().find(entry);
  return it == kernels().end() ? nullptr : &it->second;
}

} // namespace omni::hal::cuda::host
