//===- CpuLibraries.cpp - Matmul, conv2d and attention on the CPU ---------===//
//
// Matmul and conv2d are thin layers over gemm (Gemm.h: single-threaded
// oneDNN sgemm / OpenBLAS dgemm on fixed blocks of the result, run by the
// device's thread pool), so their speed is those libraries', except the
// stride-1 f32 convolutions, which run CpuConv.h's direct loop; attention
// is the fused kernel of CpuAttention.h where it wins and two gemms around
// a row softmax otherwise (chooseAttentionPath). The 32-bit BLAS
// interface bounds each gemm dimension; larger problems fail with
// Unimplemented instead of overflowing an int.
//
// bf16 operands (docs/precision.md) are widened to f32, which is exact, the
// f32 routine runs (sgemm: every product of two bf16 values is exact in f32,
// so only the f32 accumulation order differs from any other f32-accumulating
// bf16 gemm), and the f32 result is rounded once to bf16, to nearest even.
// OpenBLAS's cblas_sbgemm would skip the widening copies, but its kernels
// differ by CPU and release (0.3.21's are not all exact-product), so the
// results would too; attention keeps its softmax in f32 this way, as flash
// attention does.
//
//===----------------------------------------------------------------------===//

#include "runtime/hal/drivers/cpu/CpuLibraries.h"

#include "runtime/hal/drivers/cpu/CpuAttention.h"
#include "runtime/hal/drivers/cpu/CpuConv.h"
#include "runtime/hal/drivers/cpu/Gemm.h"

#include "runtime/io/ElementCodec.h"

#include "absl/strings/str_cat.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <type_traits>
#include <vector>

namespace omni::hal::cpu {
namespace {

absl::Status
fitsBlas(const char *routine,
         std::initializer_list<std::pair<const char *, int64_t>> dims) {
  for (auto [name, value] : dims)
    if (value > INT_MAX)
      return absl::UnimplementedError(
          absl::StrCat(routine, ": ", name, " = ", value,
                       " exceeds the 32-bit BLAS interface"));
  return absl::OkStatus();
}

/// The pool that safeGemm runs on: set by runConv2d and runAttention for
/// the gemms inside conv2d() and attention(); without one a gemm runs on
/// the calling thread alone.
thread_local ThreadPool *gemmPool = nullptr;
struct GemmPoolScope {
  explicit GemmPoolScope(ThreadPool &pool) : saved(gemmPool) {
    gemmPool = &pool;
  }
  ~GemmPoolScope() { gemmPool = saved; }
  ThreadPool *saved;
};

/// Row-major C = alpha op(A) op(B), C m x n, on gemmPool (Gemm.h).
template <typename T>
void safeGemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha,
              const T *a, int64_t lda, const T *b, int64_t ldb, T *c,
              int64_t ldc) {
  GemmArgs<T> g;
  g.transA = ta;
  g.transB = tb;
  g.m = m;
  g.n = n;
  g.k = k;
  g.alpha = alpha;
  g.a = a;
  g.lda = lda;
  g.b = b;
  g.ldb = ldb;
  g.c = c;
  g.ldc = ldc;
  if (gemmPool)
    gemm(*gemmPool, g);
  else
    serialGemm(g);
}

/// The batched matmul as one pool loop over (batch entry, block of C),
/// with the epilogue's items after the blocks that compute their rows when
/// `epilogue` is set (epilogueRunsPerBlock holds).
template <typename T>
void matmul(const MatmulParams &p, const T *lhs, const T *rhs, T *out,
            ThreadPool &pool, const MatmulEpilogue *epilogue = nullptr) {
  GemmArgs<T> g;
  g.transA = p.transposeLhs;
  g.transB = p.transposeRhs;
  g.m = p.m;
  g.n = p.n;
  g.k = p.k;
  g.a = lhs;
  g.lda = p.transposeLhs ? p.m : p.k;
  g.b = rhs;
  g.ldb = p.transposeRhs ? p.k : p.n;
  g.c = out;
  g.ldc = p.n;
  // One gemm per batch entry, never the batch folded into the rows: a
  // folded entry's rows would fall at other places of OpenBLAS's row tiles
  // depending on the entry's index, and its bits with them (an image must
  // not depend on its place in the batch: test/sample/sample.test's swap,
  // GemmTest's EveryIndexOfABatchGivesTheSameBits). Folding when entries
  // start on multiples of 16 rows kept the bits with the SKYLAKEX kernels
  // but not with OpenBLAS's Haswell and Zen ones (OPENBLAS_CORETYPE).
  const int64_t strideB = p.rhsShared ? 0 : p.k * p.n;
  if (!epilogue) {
    gemm(pool, g, p.batch, p.m * p.k, strideB, p.m * p.n);
    return;
  }
  // Rows [begin, end) of C are bytes [begin, end) * rowBytes: the items
  // whose slices they cover (epilogueRunsPerBlock checked that the bounds
  // fall on item bounds; the end of C is the end of the last item).
  const int64_t rowBytes = p.n * static_cast<int64_t>(sizeof(T));
  const int64_t total = p.batch * p.m * rowBytes;
  auto item = [&](int64_t row) {
    const int64_t bytes = row * rowBytes;
    return bytes >= total ? epilogue->grid : bytes / epilogue->resultItemBytes;
  };
  gemmThen(pool, g, p.batch, p.m * p.k, strideB, p.m * p.n,
           [&](int64_t begin, int64_t end) {
             epilogue->run(item(begin), item(end));
           });
}

/// The im2col path: every stride and dilation, f32 and f64; an unpadded 1x1
/// is one gemm per image on the input itself. The f32 convolutions that
/// conv2dDirectApplies accepts go to conv2dDirect (CpuConv.h).
template <typename T>
void conv2d(const Conv2dParams &p, const T *input, const T *filter, T *out,
            ThreadPool &pool) {
  if constexpr (std::is_same_v<T, float>) {
    if (conv2dDirectApplies(p)) {
      conv2dDirect(p, input, filter, out, pool);
      return;
    }
  }
  const int64_t taps = p.kh * p.kw;
  const int64_t rows = p.c * taps; // the im2col matrix is rows x pixels
  const int64_t pixels = p.outH * p.outW;
  if (p.o == 0 || pixels == 0 || p.n == 0)
    return;
  if (p.kh == 1 && p.kw == 1 && p.strideH == 1 && p.strideW == 1 &&
      p.padH == 0 && p.padW == 0 && p.outH == p.h && p.outW == p.w) {
    // An unpadded 1x1 convolution: the input is its own im2col matrix.
    for (int64_t n = 0; n < p.n; ++n)
      safeGemm<T>(false, false, p.o, pixels, p.c, T(1), filter, p.c,
                  input + n * p.c * pixels, pixels, out + n * p.o * pixels,
                  pixels);
    return;
  }
  // The im2col matrix of image `x`, rows [r0, r1) of the output pixels
  // [p0, p0 + width), into col (rows x width).
  auto fillColumns = [&](const T *x, T *col, int64_t p0, int64_t width,
                         int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t ci = r / taps, ky = (r / p.kw) % p.kh, kx = r % p.kw;
      const T *plane = x + ci * p.h * p.w;
      T *dst = col + r * width;
      // One segment of an output row at a time: ix = ox * strideW + base.
      const int64_t base = kx * p.dilationW - p.padW;
      for (int64_t j = 0; j < width;) {
        const int64_t pix = p0 + j, oy = pix / p.outW, ox0 = pix % p.outW;
        const int64_t len = std::min(width - j, p.outW - ox0);
        const int64_t iy = oy * p.strideH - p.padH + ky * p.dilationH;
        T *d = dst + j; // d[i] is output column ox0 + i
        if (iy < 0 || iy >= p.h) {
          std::fill(d, d + len, T(0));
          j += len;
          continue;
        }
        const T *src = plane + iy * p.w;
        if (p.strideW == 1) {
          // 0 <= ox0 + i + base < w for i in [lo, hi)
          const int64_t lo = std::clamp<int64_t>(-base - ox0, 0, len);
          const int64_t hi = std::clamp<int64_t>(p.w - base - ox0, lo, len);
          std::fill(d, d + lo, T(0));
          std::copy(src + ox0 + base + lo, src + ox0 + base + hi, d + lo);
          std::fill(d + hi, d + len, T(0));
        } else {
          for (int64_t i = 0; i < len; ++i) {
            const int64_t ix = (ox0 + i) * p.strideW + base;
            d[i] = (ix >= 0 && ix < p.w) ? src[ix] : T(0);
          }
        }
        j += len;
      }
    }
  };
  // Column buffers are kept near 4M elements.
  constexpr int64_t kColumnElements = int64_t(1) << 22;
  if (p.n > 1 && rows * pixels <= kColumnElements / pool.size()) {
    // Small images (the patchify convolution of a DiT's pos_embed): one
    // image per work item, its whole im2col matrix and its gemm on one
    // thread. Splitting each small image's rows and gemm over the pool
    // instead paid two pool wake-ups per image for microseconds of work.
    // The gemm runs inline with the blocking of its shape (Gemm.h), so
    // every image has the bits of the path below.
    pool.parallelFor(p.n, [&](int64_t n0, int64_t n1) {
      std::vector<T> col(static_cast<size_t>(rows * pixels));
      for (int64_t n = n0; n < n1; ++n) {
        fillColumns(input + n * p.c * p.h * p.w, col.data(), 0, pixels, 0,
                    rows);
        safeGemm<T>(false, false, p.o, pixels, rows, T(1), filter, rows,
                    col.data(), pixels, out + n * p.o * pixels, pixels);
      }
    });
    return;
  }
  // Tiles of output pixels keep the column buffer near 4M elements.
  const int64_t tile = std::max<int64_t>(
      1,
      std::min<int64_t>(pixels, kColumnElements / std::max<int64_t>(rows, 1)));
  std::vector<T> col(static_cast<size_t>(rows * tile));
  for (int64_t n = 0; n < p.n; ++n) {
    const T *x = input + n * p.c * p.h * p.w;
    T *y = out + n * p.o * pixels;
    for (int64_t p0 = 0; p0 < pixels; p0 += tile) {
      const int64_t width = std::min(tile, pixels - p0);
      pool.parallelFor(rows, [&](int64_t r0, int64_t r1) {
        fillColumns(x, col.data(), p0, width, r0, r1);
      });
      // y[:, p0:p0+width] = filter[o, rows] x col[rows, width]
      safeGemm<T>(false, false, p.o, width, rows, T(1), filter, rows,
                  col.data(), width, y + p0, pixels);
    }
  }
}

template <typename T>
void materializedAttention(const AttentionParams &p, const T *q, const T *k,
                           const T *v, const T *mask, T *out,
                           ThreadPool &pool) {
  if (p.seqQ == 0 || p.valueDim == 0)
    return;
  // Blocks of query rows keep the score matrix near 1M elements.
  const int64_t block = std::max<int64_t>(
      1, std::min<int64_t>(p.seqQ,
                           (int64_t(1) << 20) / std::max<int64_t>(p.seqK, 1)));
  std::vector<T> scores(static_cast<size_t>(block * p.seqK));
  const int64_t maskHeads = p.maskHeadShared ? 1 : p.heads;
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t h = 0; h < p.heads; ++h) {
      const int64_t bh = b * p.heads + h;
      const T *ks = k + bh * p.seqK * p.headDim;
      const T *vs = v + bh * p.seqK * p.valueDim;
      const T *ms = nullptr;
      if (mask)
        ms = mask + ((p.maskBatchShared ? 0 : b) * maskHeads +
                     (p.maskHeadShared ? 0 : h)) *
                        p.seqQ * p.seqK;
      for (int64_t r0 = 0; r0 < p.seqQ; r0 += block) {
        const int64_t rows = std::min(block, p.seqQ - r0);
        const T *qs = q + (bh * p.seqQ + r0) * p.headDim;
        T *os = out + (bh * p.seqQ + r0) * p.valueDim;
        // scores = scale * q k^T
        safeGemm<T>(false, true, rows, p.seqK, p.headDim, T(p.scale), qs,
                    p.headDim, ks, p.headDim, scores.data(), p.seqK);
        pool.parallelFor(rows, 16, [&](int64_t i0, int64_t i1) {
          for (int64_t i = i0; i < i1; ++i) {
            T *row = scores.data() + i * p.seqK;
            if (ms)
              for (int64_t j = 0; j < p.seqK; ++j)
                row[j] += ms[(r0 + i) * p.seqK + j];
            T max = -std::numeric_limits<T>::infinity();
            for (int64_t j = 0; j < p.seqK; ++j)
              max = std::max(max, row[j]);
            double sum = 0;
            for (int64_t j = 0; j < p.seqK; ++j) {
              row[j] = std::exp(row[j] - max);
              sum += row[j];
            }
            const T inv = static_cast<T>(1.0 / sum);
            for (int64_t j = 0; j < p.seqK; ++j)
              row[j] *= inv;
          }
        });
        // out = softmax(scores) v
        safeGemm<T>(false, false, rows, p.valueDim, p.seqK, T(1), scores.data(),
                    p.seqK, vs, p.valueDim, os, p.valueDim);
      }
    }
  }
}

void attention(const AttentionParams &p, const float *q, const float *k,
               const float *v, const float *mask, float *out, ThreadPool &pool,
               AttentionPath path) {
  if (path == AttentionPath::Auto)
    path = chooseAttentionPath(p);
  if (path == AttentionPath::Fused)
    fusedAttention(p, q, k, v, mask, out, pool);
  else
    materializedAttention(p, q, k, v, mask, out, pool);
}
void attention(const AttentionParams &p, const double *q, const double *k,
               const double *v, const double *mask, double *out,
               ThreadPool &pool, AttentionPath) {
  materializedAttention(p, q, k, v, mask, out, pool);
}

/// `n` bf16 elements widened (exactly) to f32; null stays empty.
std::vector<float> widenBf16(const void *data, int64_t n) {
  std::vector<float> out;
  if (!data)
    return out;
  out.resize(static_cast<size_t>(n));
  const auto *bits = static_cast<const uint16_t *>(data);
  for (int64_t i = 0; i < n; ++i) {
    uint32_t word = static_cast<uint32_t>(bits[i]) << 16;
    std::memcpy(&out[i], &word, sizeof(float));
  }
  return out;
}

/// `values` rounded to bf16 (to nearest even, NaN kept) into `out`.
void narrowToBf16(const std::vector<float> &values, void *out) {
  auto *bits = static_cast<uint16_t *>(out);
  for (size_t i = 0; i < values.size(); ++i)
    bits[i] = bf16BitsFromDouble(static_cast<double>(values[i]));
}

} // namespace

namespace {

/// runMatmul without an epilogue.
absl::Status plainMatmul(const MatmulParams &p, const void *lhs,
                         const void *rhs, void *result, ThreadPool &pool) {
  absl::Status fits = fitsBlas("Matmul", {{"m", p.m}, {"n", p.n}, {"k", p.k}});
  if (!fits.ok())
    return fits;
  if (p.dtype == DType::BF16) {
    std::vector<float> a = widenBf16(lhs, p.batch * p.m * p.k);
    std::vector<float> b =
        widenBf16(rhs, (p.rhsShared ? 1 : p.batch) * p.k * p.n);
    std::vector<float> c(static_cast<size_t>(p.batch * p.m * p.n));
    matmul(p, a.data(), b.data(), c.data(), pool);
    narrowToBf16(c, result);
  } else if (p.dtype == DType::F32)
    matmul(p, static_cast<const float *>(lhs), static_cast<const float *>(rhs),
           static_cast<float *>(result), pool);
  else
    matmul(p, static_cast<const double *>(lhs),
           static_cast<const double *>(rhs), static_cast<double *>(result),
           pool);
  return absl::OkStatus();
}

} // namespace

bool epilogueMayRunPerBlock(ByteRange lhs, ByteRange rhs, ByteRange result,
                            absl::Span<const ByteRange> buffers,
                            size_t numOperands,
                            absl::Span<const int64_t> itemBytes,
                            int64_t resultItemBytes) {
  auto overlaps = [](ByteRange x, ByteRange y) {
    const auto *p = static_cast<const uint8_t *>(x.data);
    const auto *q = static_cast<const uint8_t *>(y.data);
    return x.length > 0 && y.length > 0 && p < q + y.length && q < p + x.length;
  };
  for (size_t i = 0; i < buffers.size(); ++i) {
    if (i >= numOperands &&
        (overlaps(buffers[i], lhs) || overlaps(buffers[i], rhs)))
      return false;
    if (overlaps(buffers[i], result) &&
        (buffers[i].data != result.data || buffers[i].length != result.length ||
         i >= itemBytes.size() || itemBytes[i] != resultItemBytes))
      return false;
  }
  return true;
}

bool epilogueRunsPerBlock(const MatmulParams &p,
                          const MatmulEpilogue &epilogue) {
  if (!epilogue.perBlock || epilogue.resultItemBytes <= 0 ||
      (p.dtype != DType::F32 && p.dtype != DType::F64))
    return false;
  const GemmBlocking blocking = gemmBlocking(p.m, p.n, p.k, p.batch);
  // Blocks of whole rows: a split of rows, or one block per entry.
  if (blocking.count == 0 || (!blocking.splitRows && blocking.count != 1))
    return false;
  // Block bounds are i * m + j * size rows: the bytes of an entry and of a
  // block of rows must be whole items where there is more than one.
  const int64_t rowBytes = p.n * (p.dtype == DType::F32 ? 4 : 8);
  const int64_t item = epilogue.resultItemBytes;
  return (p.batch == 1 || p.m * rowBytes % item == 0) &&
         (blocking.count == 1 || blocking.size * rowBytes % item == 0);
}

absl::Status runMatmul(const MatmulParams &p, const void *lhs, const void *rhs,
                       void *result, ThreadPool &pool,
                       const MatmulEpilogue *epilogue) {
  if (!epilogue || !epilogueRunsPerBlock(p, *epilogue)) {
    absl::Status done = plainMatmul(p, lhs, rhs, result, pool);
    if (done.ok() && epilogue)
      pool.parallelFor(epilogue->grid, [&](int64_t begin, int64_t end) {
        epilogue->run(begin, end);
      });
    return done;
  }
  absl::Status fits = fitsBlas("Matmul", {{"m", p.m}, {"n", p.n}, {"k", p.k}});
  if (!fits.ok())
    return fits;
  if (p.dtype == DType::F32)
    matmul(p, static_cast<const float *>(lhs), static_cast<const float *>(rhs),
           static_cast<float *>(result), pool, epilogue);
  else
    matmul(p, static_cast<const double *>(lhs),
           static_cast<const double *>(rhs), static_cast<double *>(result),
           pool, epilogue);
  return absl::OkStatus();
}

absl::Status runConv2d(const Conv2dParams &p, const void *input,
                       const void *filter, void *result, ThreadPool &pool) {
  absl::Status fits =
      fitsBlas("Conv2d", {{"output channels", p.o},
                          {"output pixels", p.outH * p.outW},
                          {"input channels x kernel taps", p.c * p.kh * p.kw}});
  if (!fits.ok())
    return fits;
  GemmPoolScope gemms(pool);
  if (p.dtype == DType::BF16) {
    std::vector<float> x = widenBf16(input, p.n * p.c * p.h * p.w);
    std::vector<float> w = widenBf16(filter, p.o * p.c * p.kh * p.kw);
    std::vector<float> y(static_cast<size_t>(p.n * p.o * p.outH * p.outW));
    conv2d(p, x.data(), w.data(), y.data(), pool);
    narrowToBf16(y, result);
  } else if (p.dtype == DType::F32)
    conv2d(p, static_cast<const float *>(input),
           static_cast<const float *>(filter), static_cast<float *>(result),
           pool);
  else
    conv2d(p, static_cast<const double *>(input),
           static_cast<const double *>(filter), static_cast<double *>(result),
           pool);
  return absl::OkStatus();
}

AttentionPath chooseAttentionPath(const AttentionParams &p) {
  // Measured (bench/AttentionBench.cpp, docs/performance.md "CPU speed
  // (issue 15): fused attention"): fused 1.8-2.6x faster on every recipe
  // shape, even with sgemm at head size 128; past that its register
  // blocking (the head dimension untiled) has not been measured, so sgemm
  // keeps it.
  constexpr int64_t kMaxFusedHead = 128;
  if (p.dtype == DType::F64 || p.headDim > kMaxFusedHead ||
      p.valueDim > kMaxFusedHead)
    return AttentionPath::Materialized;
  return AttentionPath::Fused;
}

absl::Status runAttention(const AttentionParams &p, const void *q,
                          const void *k, const void *v, const void *mask,
                          void *result, ThreadPool &pool, AttentionPath path) {
  absl::Status fits = fitsBlas("Attention", {{"query length", p.seqQ},
                                             {"key length", p.seqK},
                                             {"head size", p.headDim},
                                             {"value size", p.valueDim}});
  if (!fits.ok())
    return fits;
  GemmPoolScope gemms(pool);
  if (p.dtype == DType::BF16) {
    const int64_t bh = p.batch * p.heads;
    std::vector<float> qf = widenBf16(q, bh * p.seqQ * p.headDim);
    std::vector<float> kf = widenBf16(k, bh * p.seqK * p.headDim);
    std::vector<float> vf = widenBf16(v, bh * p.seqK * p.valueDim);
    const int64_t maskElems = (p.maskBatchShared ? 1 : p.batch) *
                              (p.maskHeadShared ? 1 : p.heads) * p.seqQ *
                              p.seqK;
    std::vector<float> mf = widenBf16(mask, maskElems);
    std::vector<float> of(static_cast<size_t>(bh * p.seqQ * p.valueDim));
    attention(p, qf.data(), kf.data(), vf.data(), mask ? mf.data() : nullptr,
              of.data(), pool, path);
    narrowToBf16(of, result);
  } else if (p.dtype == DType::F32)
    attention(p, static_cast<const float *>(q), static_cast<const float *>(k),
              static_cast<const float *>(v), static_cast<const float *>(mask),
              static_cast<float *>(result), pool, path);
  else
    attention(p, static_cast<const double *>(q), static_cast<const double *>(k),
              static_cast<const double *>(v), static_cast<const double *>(mask),
              static_cast<double *>(result), pool, path);
  return absl::OkStatus();
}

absl::Status runAttentionBackward(const AttentionParams &p, const void *q,
                                  const void *k, const void *v,
                                  const void *mask, const void *o,
                                  const void *dO, void *dq, void *dk, void *dv,
                                  ThreadPool &pool) {
  const int64_t bh = p.batch * p.heads;
  const int64_t qn = bh * p.seqQ * p.headDim, kn = bh * p.seqK * p.headDim,
                vn = bh * p.seqK * p.valueDim, on = bh * p.seqQ * p.valueDim;
  if (p.dtype == DType::F32) {
    auto f = [](const void *x) { return static_cast<const float *>(x); };
    fusedAttentionBackward(p, f(q), f(k), f(v), f(mask), f(o), f(dO),
                           static_cast<float *>(dq), static_cast<float *>(dk),
                           static_cast<float *>(dv), pool);
    return absl::OkStatus();
  }
  if (p.dtype != DType::BF16)
    return absl::UnimplementedError(
        absl::StrCat("the cpu AttentionBackward supports f32 and bf16, not ",
                     dtypeName(p.dtype)));
  const int64_t maskElems = (p.maskBatchShared ? 1 : p.batch) *
                            (p.maskHeadShared ? 1 : p.heads) * p.seqQ * p.seqK;
  std::vector<float> qf = widenBf16(q, qn), kf = widenBf16(k, kn),
                     vf = widenBf16(v, vn), of = widenBf16(o, on),
                     dOf = widenBf16(dO, on), mf = widenBf16(mask, maskElems);
  std::vector<float> dqf(static_cast<size_t>(qn)), dkf(static_cast<size_t>(kn)),
      dvf(static_cast<size_t>(vn));
  fusedAttentionBackward(p, qf.data(), kf.data(), vf.data(),
                         mask ? mf.data() : nullptr, of.data(), dOf.data(),
                         dqf.data(), dkf.data(), dvf.data(), pool);
  narrowToBf16(dqf, dq);
  narrowToBf16(dkf, dk);
  narrowToBf16(dvf, dv);
  return absl::OkStatus();
}

} // namespace omni::hal::cpu
