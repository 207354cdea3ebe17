//===- Gemm.cpp - Gemm on the cpu driver's thread pool ----------*- C++ -*-===//

#include "runtime/hal/drivers/cpu/Gemm.h"

#include <algorithm>
#include <cassert>
#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>
#include <vector>

// oneDNN runs its gemm on OpenMP threads unless the calling thread's OpenMP
// team size is 1; Debian's libdnnl is built for OpenMP and loads libgomp,
// which defines this (weak: no link dependency on one OpenMP runtime).
#if DNNL_CPU_RUNTIME == DNNL_RUNTIME_OMP
extern "C" void omp_set_num_threads(int) __attribute__((weak));
#elif DNNL_CPU_RUNTIME != DNNL_RUNTIME_SEQ
#error "the cpu driver needs oneDNN built for OpenMP or sequential"
#endif

namespace omni::hal::cpu {
namespace {

/// Once per thread: oneDNN calls made on this thread use this thread alone
/// (the pool's threads are the parallelism).
void oneDnnOnThisThread() {
#if DNNL_CPU_RUNTIME == DNNL_RUNTIME_OMP
  thread_local bool done = false;
  if (!done && omp_set_num_threads) {
    omp_set_num_threads(1);
    done = true;
  }
#endif
}

int64_t roundUp(int64_t value, int64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

CBLAS_TRANSPOSE trans(bool t) { return t ? CblasTrans : CblasNoTrans; }

int ld(int64_t value) { return static_cast<int>(std::max<int64_t>(value, 1)); }

template <typename T> bool degenerate(const GemmArgs<T> &g) {
  if (g.m == 0 || g.n == 0)
    return true;
  if (g.k == 0) {
    for (int64_t i = 0; i < g.m; ++i)
      std::fill(g.c + i * g.ldc, g.c + i * g.ldc + g.n, T(0));
    return true;
  }
  return false;
}

} // namespace

const GemmRowTiles &gemmRowTiles() {
  static const GemmRowTiles tiles =
      (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core) ==
              dnnl_cpu_isa_avx512_core
          ? GemmRowTiles{16, 16, 16}
          : GemmRowTiles{48, 6, 18};
  return tiles;
}

GemmBlocking gemmBlocking(int64_t m, int64_t n, int64_t k, int64_t batch) {
  // Below ~2^17 multiply-adds (tens of microseconds on one core) a second
  // thread costs more than it saves: one block.
  constexpr int64_t kMinBlockWork = int64_t(1) << 17;
  // Up to 16 blocks balance 2..16 threads within a block; a block of at
  // least 64 rows (columns) keeps the re-packing of the other operand, which
  // every block does once, a few percent of its multiply-adds. Blocks are
  // whole tiles of serialGemm's calls (Gemm.h), so only the last block has
  // a remainder to pad.
  constexpr int64_t kTargetBlocks = 16, kMinBlock = 64;
  // Every block packs the whole other operand (other x k) again and streams
  // it from beyond L2 once it is 1 MiB or more: then 4 blocks, not 16.
  // The weight gradients' 256 x 1024 x 2048 `tn` gemm: 16 blocks 4.8 ms, 4
  // blocks 3.4 ms on 2 threads (docs/performance.md, "CPU speed (issue
  // 15): third pass"); more than 4 threads share such a gemm less evenly.
  constexpr int64_t kLargeOther = int64_t(1) << 18, kLargeOtherBlocks = 4;
  GemmBlocking b;
  b.splitRows = m >= n;
  const int64_t kTile = b.splitRows ? gemmRowTiles().rows : kGemmColTile;
  const int64_t dim = b.splitRows ? m : n, other = b.splitRows ? n : m;
  const int64_t perLine = std::max<int64_t>(other * k, 1);
  const int64_t wanted =
      perLine >= kLargeOther ? kLargeOtherBlocks : kTargetBlocks;
  // The batch entries are items of the same pool loop: with a batch, each
  // entry is cut into fewer blocks (none when the batch alone gives 16
  // items), so the shared operand (a weight) is packed once per entry
  // rather than once per block.
  const int64_t targetBlocks =
      std::max<int64_t>(1, (wanted + std::max<int64_t>(batch, 1) - 1) /
                               std::max<int64_t>(batch, 1));
  int64_t size = roundUp((dim + targetBlocks - 1) / targetBlocks, kTile);
  size = std::max({size, roundUp(kMinBlock, kTile),
                   roundUp((kMinBlockWork + perLine - 1) / perLine, kTile)});
  b.size = std::max<int64_t>(std::min(size, dim), 1);
  b.count = m == 0 || n == 0 ? 0 : (dim + b.size - 1) / b.size;
  return b;
}

namespace {

/// One call to oneDNN's sgemm as `g` says, on this thread.
void callSgemm(const GemmArgs<float> &g) {
  const dnnl_status_t status = dnnl_sgemm(
      g.transA ? 'T' : 'N', g.transB ? 'T' : 'N', g.m, g.n, g.k, g.alpha, g.a,
      std::max<int64_t>(g.lda, 1), g.b, std::max<int64_t>(g.ldb, 1), 0.0f, g.c,
      std::max<int64_t>(g.ldc, 1));
  // Only invalid arguments fail, and the callers' shape checks exclude them.
  assert(status == dnnl_success && "dnnl_sgemm rejected checked arguments");
  (void)status;
}

/// op(A) x op(B) of `g` computed as a call of `m` x `n` (>= g.m x g.n):
/// A's rows and B's columns copied into zero-padded scratch where the call
/// is larger, C's rows copied out.
void paddedSgemm(const GemmArgs<float> &g, int64_t m, int64_t n) {
  thread_local std::vector<float> a, b, c;
  GemmArgs<float> padded = g;
  padded.m = m;
  padded.n = n;
  if (m != g.m) {
    // op(A) is m x k: stored m x k (lda >= k) or, transposed, k x m.
    const int64_t rows = g.transA ? g.k : m, cols = g.transA ? m : g.k;
    a.assign(static_cast<size_t>(rows * cols), 0.0f);
    for (int64_t r = 0; r < (g.transA ? g.k : g.m); ++r)
      std::copy_n(g.a + r * g.lda, g.transA ? g.m : g.k, a.data() + r * cols);
    padded.a = a.data();
    padded.lda = cols;
  }
  if (n != g.n) {
    // op(B) is k x n: stored k x n or, transposed, n x k (ldb >= k).
    const int64_t rows = g.transB ? n : g.k, cols = g.transB ? g.k : n;
    b.assign(static_cast<size_t>(rows * cols), 0.0f);
    for (int64_t r = 0; r < (g.transB ? g.n : g.k); ++r)
      std::copy_n(g.b + r * g.ldb, g.transB ? g.k : g.n, b.data() + r * cols);
    padded.b = b.data();
    padded.ldb = cols;
  }
  c.resize(static_cast<size_t>(m * n));
  padded.c = c.data();
  padded.ldc = n;
  callSgemm(padded);
  for (int64_t i = 0; i < g.m; ++i)
    std::copy_n(c.data() + i * n, g.n, g.c + i * g.ldc);
}

} // namespace

void serialGemm(const GemmArgs<float> &g) {
  if (degenerate(g))
    return;
  // oneDNN's sgemm on one thread: 10-20% faster than OpenBLAS's on the
  // recipes' shapes, with AVX-512 and with AVX2 (docs/performance.md, "CPU
  // speed (issue 15): third pass"). Cut as gemmRowTiles() says (Gemm.h),
  // so that a row gets the same bits in calls of any size.
  oneDnnOnThisThread();
  const GemmRowTiles &tiles = gemmRowTiles();
  const int64_t m = g.m - g.m % tiles.rows, n = g.n - g.n % kGemmColTile;
  const GemmArgs<float> mainRows = gemmBlock(g, true, 0, m);
  if (m > 0 && n > 0)
    callSgemm(gemmBlock(mainRows, false, 0, n));
  // The columns right of the main part, then the rows below it, padded.
  if (m > 0 && n < g.n)
    paddedSgemm(gemmBlock(mainRows, false, n, g.n), m, kGemmColTile);
  if (m < g.m)
    paddedSgemm(gemmBlock(g, true, m, g.m),
                std::max(tiles.tailMin, roundUp(g.m - m, tiles.tailStep)),
                roundUp(g.n, kGemmColTile));
}

void serialGemm(const GemmArgs<double> &g) {
  if (degenerate(g))
    return;
  cblas_dgemm(CblasRowMajor, trans(g.transA), trans(g.transB),
              static_cast<int>(g.m), static_cast<int>(g.n),
              static_cast<int>(g.k), g.alpha, g.a, ld(g.lda), g.b, ld(g.ldb),
              0.0, g.c, ld(g.ldc));
}

namespace {

/// gemm() and gemmThen(): `rowsDone` null for gemm().
template <typename T>
void blockedGemm(ThreadPool &pool, const GemmArgs<T> &args, int64_t batch,
                 int64_t strideA, int64_t strideB, int64_t strideC,
                 const std::function<void(int64_t, int64_t)> *rowsDone) {
  if (batch <= 0)
    return;
  const GemmBlocking blocking = gemmBlocking(args.m, args.n, args.k, batch);
  const int64_t dim = blocking.splitRows ? args.m : args.n;
  if (blocking.count == 0) // an empty C: nothing to write
    return;
  assert((!rowsDone || blocking.splitRows || blocking.count == 1) &&
         "gemmThen needs blocks of whole rows");
  pool.parallelFor(batch * blocking.count, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t i = item / blocking.count, block = item % blocking.count;
      GemmArgs<T> one = args;
      one.a += i * strideA;
      one.b += i * strideB;
      one.c += i * strideC;
      const int64_t lo = block * blocking.size;
      const int64_t hi = std::min(dim, lo + blocking.size);
      serialGemm(gemmBlock(one, blocking.splitRows, lo, hi));
      if (rowsDone && blocking.splitRows)
        (*rowsDone)(i *args.m + lo, i * args.m + hi);
      else if (rowsDone) // one block: the whole entry
        (*rowsDone)(i *args.m, (i + 1) * args.m);
    }
  });
}

} // namespace

template <typename T>
void gemm(ThreadPool &pool, const GemmArgs<T> &args, int64_t batch,
          int64_t strideA, int64_t strideB, int64_t strideC) {
  blockedGemm(pool, args, batch, strideA, strideB, strideC, nullptr);
}

template <typename T>
void gemmThen(ThreadPool &pool, const GemmArgs<T> &args, int64_t batch,
              int64_t strideA, int64_t strideB, int64_t strideC,
              const std::function<void(int64_t, int64_t)> &rowsDone) {
  blockedGemm(pool, args, batch, strideA, strideB, strideC, &rowsDone);
}

template void gemm<float>(ThreadPool &, const GemmArgs<float> &, int64_t,
                          int64_t, int64_t, int64_t);
template void gemm<double>(ThreadPool &, const GemmArgs<double> &, int64_t,
                           int64_t, int64_t, int64_t);
template void gemmThen<float>(ThreadPool &, const GemmArgs<float> &, int64_t,
                              int64_t, int64_t, int64_t,
                              const std::function<void(int64_t, int64_t)> &);
template void gemmThen<double>(ThreadPool &, const GemmArgs<double> &, int64_t,
                               int64_t, int64_t, int64_t,
                               const std::function<void(int64_t, int64_t)> &);

} // namespace omni::hal::cpu
