//===- Gemm.h - Gemm on the cpu driver's thread pool ------------*- C++ -*-===//
//
// Every gemm of the cpu driver (matmul, and the gemms inside conv2d and
// attention) runs here: C is cut into blocks of rows or of columns whose
// size depends on the shape alone, never on the number of threads, and the
// pool's threads run a single-threaded library gemm on contiguous runs of
// those blocks: oneDNN's dnnl_sgemm for f32, OpenBLAS's cblas_dgemm for
// f64. One thread pool therefore serves the compiled kernels and the
// library calls (OpenBLAS's threads are switched off in CpuDevice, oneDNN's
// OpenMP team is one thread on every thread that calls it), and a gemm
// gives the same bits for any thread count, and a batch entry the same bits
// at any index of its batch. Not across blockings: both libraries pick their
// kernels for a row by the call's shape (docs/backend.md, "The cpu driver's
// libraries", which says what was measured; the choice of library:
// docs/performance.md, "CPU speed (issue 15): third pass", and
// bench/MatmulBench.cpp).
//
// Thread safety: gemm() may be called from any thread (the pool runs one
// loop at a time; a call from inside a pool chunk runs inline).
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_HAL_DRIVERS_CPU_GEMM_H
#define OMNI_RUNTIME_HAL_DRIVERS_CPU_GEMM_H

#include "runtime/hal/drivers/cpu/ThreadPool.h"

#include <cstdint>
#include <functional>

namespace omni::hal::cpu {

/// Row-major C = alpha op(A) op(B) (C is m x n; beta is 0). Leading
/// dimensions are in elements; every dimension fits the 32-bit BLAS
/// interface (the caller checks).
template <typename T> struct GemmArgs {
  bool transA = false, transB = false;
  int64_t m = 0, n = 0, k = 0;
  T alpha = T(1);
  const T *a = nullptr;
  int64_t lda = 0;
  const T *b = nullptr;
  int64_t ldb = 0;
  T *c = nullptr;
  int64_t ldc = 0;
};

/// How serialGemm cuts every f32 call to oneDNN's sgemm so that a row of C
/// gets the same bits in a call of any size. oneDNN picks other kernels for
/// what is left beside whole tiles of its main kernel (a small-m path for
/// `nt` calls under 16 rows and a gemv for one row or column with AVX-512;
/// with AVX2, 6-row tiles that compute a remainder of 1 to 3 rows
/// differently, an `nn` path whose bits change unless the rows are a
/// multiple of 48, and half-width column tails), and their last bits differ
/// from the main kernel's. So a row's bits depended on how many rows its
/// call had: a sample's per-sample linears (the timestep and pooled-text
/// embedders, adaLN) came out other on a rank that holds 8 samples than on
/// one that holds 32 (docs/sharding.md, section 7). A call is therefore a
/// main part of whole multiples of `rows` rows and kGemmColTile columns,
/// the columns right of it padded to kGemmColTile, and the rows below it
/// padded to a multiple of `tailStep`, at least `tailMin`. With AVX-512:
/// 16, 16, 16; otherwise 48, 6, 18 (measured: GemmTest
/// ARowGetsTheSameBitsInCallsOfAnySize; padding the tail to 48 rows too
/// cost 23% of the tiny recipe's iteration with AVX2, docs/performance.md).
struct GemmRowTiles {
  int64_t rows, tailStep, tailMin;
};
const GemmRowTiles &gemmRowTiles();
constexpr int64_t kGemmColTile = 16;

/// How C is cut: `count` blocks of `size` rows (splitRows) or columns (the
/// last may be smaller; none for an empty C), whole tiles but the last. A
/// function of (m, n, k) and the batch alone, never of the thread count, so
/// the thread count never changes the bits. With whole tiles the blocking
/// does not change them either, as long as the library does not block the
/// operands by the call's size; for some layouts of larger operands
/// (docs/backend.md, "Matmul") oneDNN does, and then a row's bits depend
/// on the block it falls in.
struct GemmBlocking {
  bool splitRows = true;
  int64_t size = 0;
  int64_t count = 0;
};
GemmBlocking gemmBlocking(int64_t m, int64_t n, int64_t k, int64_t batch = 1);

/// The part of `args` that computes the rows (or columns) [begin, end) of C.
template <typename T>
GemmArgs<T> gemmBlock(const GemmArgs<T> &args, bool splitRows, int64_t begin,
                      int64_t end) {
  GemmArgs<T> block = args;
  if (splitRows) {
    block.m = end - begin;
    block.a = args.a + (args.transA ? begin : begin * args.lda);
    block.c = args.c + begin * args.ldc;
  } else {
    block.n = end - begin;
    block.b = args.b + (args.transB ? begin * args.ldb : begin);
    block.c = args.c + begin;
  }
  return block;
}

/// One single-threaded library gemm on the calling thread (oneDNN for f32,
/// OpenBLAS for f64); handles the sizes BLAS rejects (nothing for an empty
/// C, zeros for k = 0).
void serialGemm(const GemmArgs<float> &args);
void serialGemm(const GemmArgs<double> &args);

/// `batch` gemms: the i-th uses a + i * strideA, b + i * strideB (0: one B
/// shared by all) and writes c + i * strideC. The batch x blocks items run
/// on `pool`.
template <typename T>
void gemm(ThreadPool &pool, const GemmArgs<T> &args, int64_t batch = 1,
          int64_t strideA = 0, int64_t strideB = 0, int64_t strideC = 0);

/// As gemm(), and right after each block of rows of C is computed, on the
/// same thread, `rowsDone(begin, end)` with the block's rows counted over
/// the batch (row r of entry i is i * args.m + r): the matmul epilogue
/// (CpuLibraries.h). Only for blocks of whole rows (gemmBlocking(m, n, k,
/// batch): splitRows, or a single block per entry): a block of some
/// columns leaves its rows unfinished.
template <typename T>
void gemmThen(ThreadPool &pool, const GemmArgs<T> &args, int64_t batch,
              int64_t strideA, int64_t strideB, int64_t strideC,
              const std::function<void(int64_t, int64_t)> &rowsDone);

} // namespace omni::hal::cpu

#endif // OMNI_RUNTIME_HAL_DRIVERS_CPU_GEMM_H
