//===- GemmTest.cpp - Tests of the cpu driver's pool gemm -------*- C++ -*-===//
//
// The cpu matmul (runMatmul over Gemm.h) must give the same bits for any
// thread count (docs/backend.md, kernel ABI) and agree with an f64 sum of
// the same products within the f32 error bound of a length-k dot product.
//
//===----------------------------------------------------------------------===//

#include "runtime/hal/drivers/cpu/Gemm.h"

#include "runtime/hal/drivers/cpu/CpuLibraries.h"

#include "gtest/gtest.h"

#include <atomic>
#include <cblas.h>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <oneapi/dnnl/dnnl.h>
#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace omni::hal::cpu {
namespace {

template <typename T> struct Operands {
  std::vector<T> lhs, rhs;
};

template <typename T> Operands<T> operandsFor(const MatmulParams &p) {
  std::mt19937 rng(static_cast<unsigned>(p.m * 131 + p.n * 7 + p.k));
  std::uniform_real_distribution<double> dist(-1, 1);
  Operands<T> o;
  o.lhs.resize(p.batch * p.m * p.k);
  o.rhs.resize((p.rhsShared ? 1 : p.batch) * p.k * p.n);
  for (T &x : o.lhs)
    x = static_cast<T>(dist(rng));
  for (T &x : o.rhs)
    x = static_cast<T>(dist(rng));
  return o;
}

template <typename T>
std::vector<T> run(const MatmulParams &p, const Operands<T> &o, int threads) {
  ThreadPool pool(threads);
  std::vector<T> out(p.batch * p.m * p.n, T(-7)); // every element written
  EXPECT_TRUE(runMatmul(p, o.lhs.data(), o.rhs.data(), out.data(), pool).ok());
  return out;
}

/// op(lhs) x op(rhs) in f64 for batch b, element (i, j), and the sum of the
/// products' magnitudes (the error bound's scale).
template <typename T>
std::pair<double, double> exact(const MatmulParams &p, const Operands<T> &o,
                                int64_t b, int64_t i, int64_t j) {
  const T *a = o.lhs.data() + b * p.m * p.k;
  const T *r = o.rhs.data() + (p.rhsShared ? 0 : b * p.k * p.n);
  double sum = 0, mag = 0;
  for (int64_t q = 0; q < p.k; ++q) {
    double x = p.transposeLhs ? a[q * p.m + i] : a[i * p.k + q];
    double y = p.transposeRhs ? r[j * p.k + q] : r[q * p.n + j];
    sum += x * y;
    mag += std::fabs(x * y);
  }
  return {sum, mag};
}

MatmulParams shape(int64_t batch, int64_t m, int64_t n, int64_t k, bool ta,
                   bool tb, bool shared, DType dtype = DType::F32) {
  MatmulParams p;
  p.dtype = dtype;
  p.batch = batch;
  p.m = m;
  p.n = n;
  p.k = k;
  p.transposeLhs = ta;
  p.transposeRhs = tb;
  p.rhsShared = shared;
  return p;
}

// Shapes of the recipes (bench/MatmulShapes.inc) and ones that cut C into
// row blocks, column blocks and uneven last blocks.
std::vector<MatmulParams> shapes(DType dtype) {
  return {
      shape(1, 1000, 72, 200, false, false, true, dtype), // row blocks
      shape(1, 40, 1500, 130, false, true, true, dtype),  // column blocks
      shape(1, 600, 96, 300, true, false, true, dtype),   // lhs transposed
      shape(32, 64, 64, 64, false, true, true, dtype),    // folded batch
      shape(8, 72, 16, 72, true, false, false, dtype), // batched, per-entry rhs
      shape(6, 130, 140, 70, true, true, true, dtype), // transposed, shared rhs
      shape(1, 3, 5, 7, false, false, true, dtype),    // one block
  };
}

template <typename T> void checkShapes(DType dtype) {
  const double eps = std::numeric_limits<T>::epsilon() / 2; // unit roundoff
  for (const MatmulParams &p : shapes(dtype)) {
    SCOPED_TRACE(testing::Message()
                 << "batch " << p.batch << " m " << p.m << " n " << p.n << " k "
                 << p.k << " ta " << p.transposeLhs << " tb "
                 << p.transposeRhs);
    Operands<T> o = operandsFor<T>(p);
    std::vector<T> one = run(p, o, 1);
    for (int threads : {2, 3, 5}) {
      std::vector<T> many = run(p, o, threads);
      EXPECT_EQ(std::memcmp(one.data(), many.data(), one.size() * sizeof(T)), 0)
          << threads << " threads differ from 1";
    }
    // Any summation order of k products (each rounded once, or fused) is
    // within k u sum|x y| / (1 - k u) of the exact sum (Higham, Accuracy
    // and Stability of Numerical Algorithms, 3.1); the f64 reference adds
    // its own, far smaller, error.
    for (int64_t b = 0; b < p.batch; ++b)
      for (int64_t i = 0; i < p.m; ++i)
        for (int64_t j = 0; j < p.n; ++j) {
          auto [sum, mag] = exact(p, o, b, i, j);
          const double ku = p.k * eps;
          const double bound = ku / (1 - ku) * mag + 1e-300;
          const double got = one[(b * p.m + i) * p.n + j];
          ASSERT_LE(std::fabs(got - sum), bound)
              << "element (" << b << ", " << i << ", " << j << ")";
        }
  }
}

TEST(Gemm, F32MatmulIsTheSameForAnyThreadCountAndWithinTheErrorBound) {
  checkShapes<float>(DType::F32);
}

TEST(Gemm, F64MatmulIsTheSameForAnyThreadCountAndWithinTheErrorBound) {
  checkShapes<double>(DType::F64);
}

TEST(Gemm, BlockingDependsOnTheShapeAlone) {
  // Large C: many blocks along its longer side, whole tiles of rows.
  GemmBlocking rows = gemmBlocking(8192, 256, 256);
  EXPECT_TRUE(rows.splitRows);
  EXPECT_EQ(rows.size % gemmRowTiles().rows, 0);
  EXPECT_EQ(rows.count, (8192 + rows.size - 1) / rows.size);
  EXPECT_GE(rows.count, 8);
  GemmBlocking cols = gemmBlocking(32, 2304, 256);
  EXPECT_FALSE(cols.splitRows);
  EXPECT_GE(cols.count, 2);
  EXPECT_EQ(cols.size % kGemmColTile, 0);
  // Too little work to share: one block.
  EXPECT_EQ(gemmBlocking(32, 64, 32).count, 1);
  EXPECT_EQ(gemmBlocking(0, 64, 32).count, 0);
}

TEST(Gemm, ALargeRepackedOperandMeansFewerLargerBlocks) {
  // 256 x 1024 x 2048 (a weight gradient): column blocks, each packing the
  // 256 x 2048 lhs (512 Ki elements): 4 blocks of 256, not 16 of 64.
  GemmBlocking g = gemmBlocking(256, 1024, 2048);
  EXPECT_FALSE(g.splitRows);
  EXPECT_EQ(g.count, 4);
  EXPECT_EQ(g.size, 256);
  // Just below 1 MiB of other operand: still 16 wanted (16 blocks of 256
  // rows, or 15 of 288 with 48-row tiles).
  EXPECT_EQ(gemmBlocking(4096, 255, 1024).count,
            gemmRowTiles().rows == 16 ? 16 : 15);
  EXPECT_EQ(gemmBlocking(4096, 256, 1024).count, 4);
}

TEST(Gemm, ABatchCutsEachEntryIntoFewerBlocks) {
  // 256 x 256 x 256: 4 blocks of 64 rows alone (3 of 96 with 48-row
  // tiles), whole in a batch of 16+.
  const int64_t alone = gemmRowTiles().rows == 16 ? 4 : 3;
  EXPECT_EQ(gemmBlocking(256, 256, 256).count, alone);
  EXPECT_EQ(gemmBlocking(256, 256, 256, 2).count, alone);
  EXPECT_EQ(gemmBlocking(256, 256, 256, 16).count, 1);
  EXPECT_EQ(gemmBlocking(256, 256, 256, 32).count, 1);
  EXPECT_EQ(gemmBlocking(8192, 256, 256, 4).size % gemmRowTiles().rows, 0);
  EXPECT_EQ(gemmBlocking(8192, 256, 256, 4).count, 4);
}

// The invariant the blocking must keep with every library kernel: an
// entry's bits do not depend on its index in the batch (the same lhs at
// every index gives the same C at every index; test/sample/sample.test's
// swap relies on it). Entries of 256, 96 and 72 rows, and 7 x 13 ones whose
// starts fall at every 4-byte offset of a cache line. Not checked, because
// it does not hold: an entry's bits alone and in a batch (the blocking
// differs, and both libraries pick kernels by the call's shape; Gemm.h).
TEST(Gemm, EveryIndexOfABatchGivesTheSameBits) {
  for (bool tb : {false, true})
    for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{256, 96, 200},
                           {96, 256, 200},
                           {72, 96, 200},
                           {7, 300, 13}}) {
      MatmulParams p = shape(32, m, n, k, false, tb, true);
      Operands<float> o = operandsFor<float>(p);
      for (int64_t b = 1; b < p.batch; ++b)
        std::copy(o.lhs.begin(), o.lhs.begin() + m * k,
                  o.lhs.begin() + b * m * k);
      std::vector<float> all = run(p, o, 2);
      for (int64_t b : {1, 2, 3, 17, 31})
        EXPECT_EQ(std::memcmp(all.data(), all.data() + b * m * n,
                              m * n * sizeof(float)),
                  0)
            << "entry " << b << " of " << m << "x" << n << "x" << k
            << (tb ? " nt" : " nn");
    }
}

/// A row (column) of C gets the same bits in a call of any number of rows
/// (columns), wherever it lies in the call: a sample's per-sample linears
/// come out the same whether its rank holds 8 samples or 32 (Gemm.h,
/// gemmRowTiles(); docs/sharding.md, section 7). Checked against one call of
/// 200 x 200 for calls of 1 to 60 rows (columns) at several offsets, both
/// operand layouts, contractions the library does not block by the call's
/// size.
TEST(Gemm, ARowGetsTheSameBitsInCallsOfAnySize) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-1, 1);
  constexpr int64_t kBig = 200;
  for (int64_t k : {16, 64, 256})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        // op(A) is kBig x k, op(B) is k x kBig, both dense.
        std::vector<float> a(kBig * k), b(k * kBig), want(kBig * kBig);
        for (float &x : a)
          x = dist(rng);
        for (float &x : b)
          x = dist(rng);
        GemmArgs<float> big;
        big.transA = ta;
        big.transB = tb;
        big.m = big.n = kBig;
        big.k = k;
        big.a = a.data();
        big.lda = ta ? kBig : k;
        big.b = b.data();
        big.ldb = tb ? k : kBig;
        big.c = want.data();
        big.ldc = kBig;
        serialGemm(big);
        const std::string what = " of k " + std::to_string(k) +
                                 (ta ? " t" : " n") + (tb ? "t" : "n");
        for (int64_t size = 1; size <= 60; ++size)
          for (int64_t at :
               {int64_t(0), int64_t(5), int64_t(48), kBig - size}) {
            std::vector<float> c(kBig * kBig, -7.0f);
            GemmArgs<float> rows = gemmBlock(big, true, at, at + size);
            rows.c = c.data();
            serialGemm(rows);
            for (int64_t i = 0; i < size; ++i)
              ASSERT_EQ(std::memcmp(c.data() + i * kBig,
                                    want.data() + (at + i) * kBig,
                                    kBig * sizeof(float)),
                        0)
                  << "row " << at + i << " in a call of rows [" << at << ", "
                  << at + size << ")" << what;
            GemmArgs<float> cols = gemmBlock(big, false, at, at + size);
            cols.c = c.data();
            serialGemm(cols);
            for (int64_t i = 0; i < kBig; ++i)
              ASSERT_EQ(std::memcmp(c.data() + i * kBig,
                                    want.data() + i * kBig + at,
                                    size * sizeof(float)),
                        0)
                  << "row " << i << " in a call of columns [" << at << ", "
                  << at + size << ")" << what;
          }
      }
}

// CMakeLists.txt (beside this file) registers the Gemm and CpuConv tests again
// with the libraries held to their AVX2 kernels (DNNL_MAX_CPU_ISA=AVX2,
// OPENBLAS_CORETYPE=Haswell: what an AVX2-only or AMD Zen host runs), so
// that the properties above are checked for those kernels on any machine.
// This test fails when such a setting did not take effect.
TEST(Gemm, TheLibrariesRunTheKernelsTheEnvironmentAsks) {
  const char *isa = std::getenv("DNNL_MAX_CPU_ISA");
  const char *core = std::getenv("OPENBLAS_CORETYPE");
  if (!isa && !core)
    GTEST_SKIP() << "neither DNNL_MAX_CPU_ISA nor OPENBLAS_CORETYPE is set";
  if (isa) {
    ASSERT_EQ(std::string(isa), "AVX2") << "only AVX2 is checked here";
    EXPECT_EQ(dnnl_get_effective_cpu_isa(), dnnl_cpu_isa_avx2);
  }
  if (core) {
    EXPECT_STRCASEEQ(openblas_get_corename(), core);
  }
}

TEST(Gemm, EmptyContractionWritesZeros) {
  MatmulParams p = shape(2, 3, 4, 0, false, false, false);
  std::vector<float> out(24, 5.0f);
  ThreadPool pool(2);
  ASSERT_TRUE(runMatmul(p, nullptr, nullptr, out.data(), pool).ok());
  for (float x : out)
    EXPECT_EQ(x, 0.0f);
}

/// A matmul with an epilogue whose item w reads `itemRows` rows of C: every
/// item runs once, and sees its rows final (the bits of the plain matmul).
/// Returns whether some item ran while other rows of C were not computed
/// yet (C starts as NaN), i.e. per block rather than after the matmul.
bool checkEpilogue(const MatmulParams &p, int64_t itemRows, int threads) {
  Operands<float> o = operandsFor<float>(p);
  const std::vector<float> want = run(p, o, 1);
  const int64_t rows = p.batch * p.m;
  const int64_t grid = (rows + itemRows - 1) / itemRows;
  std::vector<float> c(want.size(), std::numeric_limits<float>::quiet_NaN());
  std::vector<std::atomic<int>> runs(static_cast<size_t>(grid));
  std::atomic<bool> early{false}, stale{false};
  MatmulEpilogue e;
  e.grid = grid;
  e.resultItemBytes = itemRows * p.n * 4;
  e.perBlock = true;
  e.run = [&](int64_t begin, int64_t end) {
    for (int64_t w = begin; w < end; ++w) {
      ++runs[static_cast<size_t>(w)];
      const int64_t lo = w * itemRows * p.n,
                    hi = std::min(rows, (w + 1) * itemRows) * p.n;
      if (std::memcmp(c.data() + lo, want.data() + lo, (hi - lo) * 4) != 0)
        stale = true;
      if (std::isnan(c.back()) || std::isnan(c.front()))
        early = true;
    }
  };
  ThreadPool pool(threads);
  EXPECT_TRUE(
      runMatmul(p, o.lhs.data(), o.rhs.data(), c.data(), pool, &e).ok());
  EXPECT_FALSE(stale) << "an item read rows that were not final";
  for (int64_t w = 0; w < grid; ++w)
    EXPECT_EQ(runs[static_cast<size_t>(w)].load(), 1) << "item " << w;
  EXPECT_EQ(std::memcmp(c.data(), want.data(), want.size() * 4), 0);
  return early;
}

TEST(Gemm, AnEpilogueRunsEachItemOnceOnFinalRows) {
  // Blocks of rows (2048 x 256 splits rows into whole row tiles), one
  // block per entry of a batch (a split of columns that is whole), and
  // items of 1, 16, 64 (48 with 48-row tiles) and 64 rows: per block, on 1
  // and 2 threads.
  for (auto [p, itemRows] :
       {std::pair{shape(1, 2048, 256, 256, false, true, true), int64_t(16)},
        std::pair{shape(1, 2048, 256, 256, false, true, true),
                  int64_t(gemmRowTiles().rows == 16 ? 64 : 48)},
        std::pair{shape(32, 64, 512, 64, false, true, true), int64_t(1)},
        std::pair{shape(32, 64, 512, 64, false, true, true), int64_t(64)}}) {
    MatmulEpilogue e;
    e.perBlock = true;
    e.resultItemBytes = itemRows * p.n * 4;
    ASSERT_TRUE(epilogueRunsPerBlock(p, e)) << p.m << " " << itemRows;
    for (int threads : {1, 2})
      EXPECT_TRUE(checkEpilogue(p, itemRows, threads))
          << p.batch << "x" << p.m << " items of " << itemRows;
  }
}

TEST(Gemm, AnEpilogueRunsAfterTheMatmulWhereBlocksDoNotFitItems) {
  // 5 rows per item: the blocks of 2048 x 256, whole row tiles, do not
  // fall on item bounds, nor do 3-row items on entries of 64 rows; a split
  // of columns in several blocks leaves rows unfinished; bf16 narrows after
  // the whole matmul. Each still runs every item once, after the matmul.
  const MatmulParams rowsSplit = shape(1, 2048, 256, 256, false, true, true);
  const MatmulParams batched = shape(32, 64, 512, 64, false, true, true);
  const MatmulParams columns = shape(1, 64, 4096, 256, false, true, true);
  ASSERT_FALSE(gemmBlocking(columns.m, columns.n, columns.k).splitRows);
  ASSERT_GT(gemmBlocking(columns.m, columns.n, columns.k).count, 1);
  for (auto [p, itemRows] :
       {std::pair{rowsSplit, int64_t(5)}, std::pair{batched, int64_t(3)},
        std::pair{columns, int64_t(1)}}) {
    MatmulEpilogue e;
    e.perBlock = true;
    e.resultItemBytes = itemRows * p.n * 4;
    EXPECT_FALSE(epilogueRunsPerBlock(p, e)) << p.m << " " << itemRows;
    EXPECT_FALSE(checkEpilogue(p, itemRows, 2))
        << p.batch << "x" << p.m << " items of " << itemRows;
  }
  MatmulEpilogue e;
  e.perBlock = false; // the buffers forbid it (epilogueMayRunPerBlock)
  e.resultItemBytes = 16 * rowsSplit.n * 4;
  EXPECT_FALSE(epilogueRunsPerBlock(rowsSplit, e));
  MatmulParams bf16 = rowsSplit;
  bf16.dtype = DType::BF16;
  e.perBlock = true;
  EXPECT_FALSE(epilogueRunsPerBlock(bf16, e));
}

TEST(Gemm, AnEpilogueThatWritesWhatABlockReadsRunsAfterTheMatmul) {
  std::vector<uint8_t> memory(1000);
  auto at = [&](int64_t offset, int64_t length) {
    return ByteRange{memory.data() + offset, length};
  };
  const ByteRange lhs = at(0, 100), rhs = at(100, 100), c = at(200, 100);
  // Reads C by 20-byte slices, a bias whole, writes elsewhere: per block.
  EXPECT_TRUE(epilogueMayRunPerBlock(
      lhs, rhs, c, {c, at(300, 10), at(400, 100)}, 2, {20, 0, 20}, 20));
  // In place over C by the same slices: per block.
  EXPECT_TRUE(epilogueMayRunPerBlock(lhs, rhs, c, {c, at(300, 10), c}, 2,
                                     {20, 0, 20}, 20));
  // Reading lhs is fine; writing over it or over rhs is not.
  EXPECT_TRUE(epilogueMayRunPerBlock(lhs, rhs, c, {c, lhs, at(400, 100)}, 2,
                                     {20, 0, 20}, 20));
  EXPECT_FALSE(
      epilogueMayRunPerBlock(lhs, rhs, c, {c, at(0, 100)}, 1, {20, 20}, 20));
  EXPECT_FALSE(
      epilogueMayRunPerBlock(lhs, rhs, c, {c, at(150, 20)}, 1, {20, 20}, 20));
  // C read whole, written by other slices, or partly overlapped.
  EXPECT_FALSE(epilogueMayRunPerBlock(lhs, rhs, c, {c, c, at(400, 100)}, 2,
                                      {20, 0, 20}, 20));
  EXPECT_FALSE(epilogueMayRunPerBlock(lhs, rhs, c, {c, c}, 1, {20, 40}, 20));
  EXPECT_FALSE(
      epilogueMayRunPerBlock(lhs, rhs, c, {c, at(250, 100)}, 1, {20, 20}, 20));
}

} // namespace
} // namespace omni::hal::cpu
