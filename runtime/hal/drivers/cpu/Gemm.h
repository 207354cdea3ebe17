//===- Gemm.h - Gemm on the cpu driver's thread pool ------------*- C++ -*-===//
//
// Every gemm of the cpu driver (matmul, and the gemms inside conv2d and
// attention) runs here: C is cut into blocks of rows or of columns whose
// size depends on the shape alone, never on the number of threads, and the
// pool's threads run a single-threaded library gemm on contiguous runs of
// those blocks: OpenBLAS (cblas_sgemm / cblas_dgemm, single-threaded).
// One thread pool therefore serves the compiled kernels and the library
// calls (OpenBLAS's threads are switched off in CpuDevice), and a gemm
// gives the same bits for any thread count and a row of C the same bits in
// any block (docs/backend.md, "The cpu driver's libraries"; the
// measurement behind the choice is
// docs/performance.md, "CPU speed (issue 15): matmul library and one thread
// pool", and bench/MatmulBench.cpp).
//
// Thread safety: gemm() may be called from any thread (the pool runs one
// loop at a time; a call from inside a pool chunk runs inline).
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_HAL_DRIVERS_CPU_GEMM_H
#define OMNI_RUNTIME_HAL_DRIVERS_CPU_GEMM_H

#include "runtime/hal/drivers/cpu/ThreadPool.h"

#include <cstdint>

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

/// How C is cut: `count` blocks of `size` rows (splitRows) or columns (the
/// last may be smaller; none for an empty C). A function of (m, n, k) and
/// the batch alone, never of the thread count; since OpenBLAS's k blocking
/// does not depend on m or n, a row (column) of C has the same bits in any
/// block, so the blocking changes the speed, not the numbers.
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

/// One single-threaded OpenBLAS gemm on the calling thread; handles the sizes
/// BLAS rejects (nothing for an empty C, zeros for k = 0).
void serialGemm(const GemmArgs<float> &args);
void serialGemm(const GemmArgs<double> &args);

/// `batch` gemms: the i-th uses a + i * strideA, b + i * strideB (0: one B
/// shared by all) and writes c + i * strideC. The batch x blocks items run
/// on `pool`.
template <typename T>
void gemm(ThreadPool &pool, const GemmArgs<T> &args, int64_t batch = 1,
          int64_t strideA = 0, int64_t strideB = 0, int64_t strideC = 0);

} // namespace omni::hal::cpu

#endif // OMNI_RUNTIME_HAL_DRIVERS_CPU_GEMM_H
