//===- FlashAttentionHostTest.cpp - The flash kernel, run on the host -----===//
//
// FlashAttention.h is the cuda driver's attention kernel; no GPU runs in CI,
// so this test runs the same code on the host under a model of what it
// uses from CUDA (FlashAttention.h lists it):
// - each of a block's 128 threads is a std::thread; __syncthreads and
//   __syncwarp are barriers of the block's 128 and the warp's 32 threads,
//   so a missing barrier shows up as a race (and under TSan as one);
// - a WMMA fragment holds its whole 16x16 tile in every thread (WMMA leaves
//   the element-to-thread mapping unspecified and the kernel never relies
//   on it); loads read the tile, mma_sync multiplies exactly in float, and
//   a store writes from lane 0 only, so the kernel must __syncwarp before
//   another lane reads what a store wrote, as on the GPU;
// - bf16 / f16 round to nearest even (runtime/io/ElementCodec.h).
// Every block of a call runs, one after another, with the shared memory
// sharedBytes() says, and the result is checked against attention computed
// in double from the same rounded inputs.
//
//===----------------------------------------------------------------------===//

#include "runtime/io/ElementCodec.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <type_traits>
#include <vector>

namespace {

/// A reusable barrier of `count` threads.
class Barrier {
public:
  explicit Barrier(int count) : count_(count) {}
  void wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    const uint64_t generation = generation_;
    if (++waiting_ == count_) {
      waiting_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return generation_ != generation; });
  }

private:
  std::mutex mutex_;
  std::condition_variable cv_;
  int count_, waiting_ = 0;
  uint64_t generation_ = 0;
};

thread_local Barrier *blockBarrier = nullptr;
thread_local Barrier *warpBarrier = nullptr;
thread_local int laneId = 0;

struct Bf16 {
  uint16_t bits;
};
struct F16 {
  uint16_t bits;
};

} // namespace

#define OMNI_FA_FN inline
inline void faSyncThreads() { blockBarrier->wait(); }
inline void faSyncWarp() { warpBarrier->wait(); }
inline float faToFloat(Bf16 x) {
  return static_cast<float>(omni::doubleFromBf16Bits(x.bits));
}
inline float faToFloat(F16 x) {
  return static_cast<float>(omni::doubleFromHalfBits(x.bits));
}
template <typename T> T faFromFloat(float v);
template <> inline Bf16 faFromFloat<Bf16>(float v) {
  return Bf16{omni::bf16BitsFromDouble(v)};
}
template <> inline F16 faFromFloat<F16>(float v) {
  return F16{omni::halfBitsFromDouble(v)};
}

/// nvcuda::wmma's names, each fragment holding its whole tile.
namespace faWmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
  static constexpr int num_elements = M * N;
  float x[M * N]; // element (r, c) at r * N + c, as a float
};

template <typename Use, typename T, typename Layout>
void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout> &f, const T *p,
                      unsigned ld) {
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c)
      f.x[r * 16 + c] =
          faToFloat(std::is_same<Layout, row_major>::value ? p[r * ld + c]
                                                           : p[c * ld + r]);
}
inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float> &f,
                             const float *p, unsigned ld, layout_t layout) {
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c)
      f.x[r * 16 + c] = layout == mem_row_major ? p[r * ld + c] : p[c * ld + r];
}
inline void store_matrix_sync(float *p,
                              const fragment<accumulator, 16, 16, 16, float> &f,
                              unsigned ld, layout_t layout) {
  if (laneId != 0)
    return;
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c)
      (layout == mem_row_major ? p[r * ld + c] : p[c * ld + r]) =
          f.x[r * 16 + c];
}
inline void fill_fragment(fragment<accumulator, 16, 16, 16, float> &f,
                          float v) {
  std::fill(f.x, f.x + 256, v);
}
template <typename T, typename LA, typename LB>
void mma_sync(fragment<accumulator, 16, 16, 16, float> &d,
              const fragment<matrix_a, 16, 16, 16, T, LA> &a,
              const fragment<matrix_b, 16, 16, 16, T, LB> &b,
              const fragment<accumulator, 16, 16, 16, float> &c) {
  fragment<accumulator, 16, 16, 16, float> out;
  for (int r = 0; r < 16; ++r)
    for (int n = 0; n < 16; ++n) {
      float s = c.x[r * 16 + n];
      for (int k = 0; k < 16; ++k)
        s += a.x[r * 16 + k] * b.x[k * 16 + n];
      out.x[r * 16 + n] = s;
    }
  d = out;
}
} // namespace faWmma

#include "runtime/hal/drivers/cuda/kernels/FlashAttention.h"

namespace {

using namespace omni::hal::cuda::flash;

struct Problem {
  int64_t batch, heads, seqQ, seqK;
  bool mask, maskBatchShared, maskHeadShared;
  /// Rows of the mask set to -inf (all keys masked for that query row).
  int64_t blockedRow = -1;
};

template <typename T> struct Case {
  Problem p;
  std::vector<T> q, k, v, mask, out;
};

template <typename T>
std::vector<T> randomTensor(int64_t n, std::mt19937 &rng, float scale) {
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<T> t(static_cast<size_t>(n));
  for (T &x : t)
    x = faFromFloat<T>(normal(rng));
  return t;
}

/// Runs every block of the call on the host, 128 threads each.
template <typename T, int D> void runFlash(Case<T> &c, float scale) {
  const Problem &p = c.p;
  const int64_t pairs = p.batch * p.heads;
  c.out.assign(static_cast<size_t>(pairs * p.seqQ * D), faFromFloat<T>(-7.0f));
  const int64_t maskHeads = p.maskHeadShared ? 1 : p.heads;
  const int64_t square = p.seqQ * p.seqK;
  const int64_t maskBatchStride = p.maskBatchShared ? 0 : maskHeads * square;
  const int64_t maskHeadStride = p.maskHeadShared ? 0 : square;
  std::vector<unsigned char> shared(sharedBytes(D, sizeof(T)));
  for (int64_t block = 0; block < blocksFor(pairs, p.seqQ); ++block) {
    // Garbage in shared memory, as on a GPU.
    std::fill(shared.begin(), shared.end(), 0xA5);
    Barrier all(kThreads);
    std::vector<std::unique_ptr<Barrier>> warps;
    for (int w = 0; w < kThreads / 32; ++w)
      warps.push_back(std::make_unique<Barrier>(32));
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t)
      threads.emplace_back([&, t] {
        blockBarrier = &all;
        warpBarrier = warps[t / 32].get();
        laneId = t % 32;
        attentionBlock<T, D>(c.q.data(), c.k.data(), c.v.data(),
                             p.mask ? c.mask.data() : nullptr, c.out.data(),
                             block, p.seqQ, p.seqK, p.heads, maskBatchStride,
                             maskHeadStride, p.mask ? 1 : 0, scale,
                             shared.data(), t);
      });
    for (std::thread &t : threads)
      t.join();
  }
}

/// softmax(scale q k^T + mask) v in double, for (pair, row): D values.
template <typename T, int D>
std::vector<double> reference(const Case<T> &c, float scale, int64_t pair,
                              int64_t row) {
  const Problem &p = c.p;
  const int64_t b = pair / p.heads, h = pair % p.heads;
  std::vector<double> s(static_cast<size_t>(p.seqK));
  double maxS = -INFINITY;
  for (int64_t j = 0; j < p.seqK; ++j) {
    double dot = 0;
    for (int d = 0; d < D; ++d)
      dot += double(faToFloat(c.q[(pair * p.seqQ + row) * D + d])) *
             faToFloat(c.k[(pair * p.seqK + j) * D + d]);
    double x = dot * scale;
    if (p.mask) {
      int64_t mb = p.maskBatchShared ? 0 : b, mh = p.maskHeadShared ? 0 : h;
      int64_t heads = p.maskHeadShared ? 1 : p.heads;
      x += faToFloat(c.mask[((mb * heads + mh) * p.seqQ + row) * p.seqK + j]);
    }
    s[j] = x;
    maxS = std::max(maxS, x);
  }
  double sum = 0;
  for (double &x : s) {
    x = std::exp(x - maxS);
    sum += x;
  }
  std::vector<double> o(D, 0.0);
  for (int64_t j = 0; j < p.seqK; ++j)
    for (int d = 0; d < D; ++d)
      o[d] += s[j] / sum * faToFloat(c.v[(pair * p.seqK + j) * D + d]);
  return o;
}

/// The error bound of one output element: the output's rounding (half an
/// ulp of T: 2^-9 relative for bf16, 2^-12 for f16) plus the rounding of
/// each probability to T before P V (the same relative bound on each
/// term, so at most that times max |v|), plus f32 sums (negligible).
template <typename T> double unitRoundoff();
template <> double unitRoundoff<Bf16>() { return std::ldexp(1.0, -8); }
template <> double unitRoundoff<F16>() { return std::ldexp(1.0, -11); }

/// Checks one call against attention in double; returns the largest error.
template <typename T, int D>
double check(const Problem &problem, uint32_t seed) {
  std::mt19937 rng(seed);
  Case<T> c;
  c.p = problem;
  const int64_t pairs = problem.batch * problem.heads;
  c.q = randomTensor<T>(pairs * problem.seqQ * D, rng, 1.0f);
  c.k = randomTensor<T>(pairs * problem.seqK * D, rng, 1.0f);
  c.v = randomTensor<T>(pairs * problem.seqK * D, rng, 1.0f);
  if (problem.mask) {
    int64_t n = (problem.maskBatchShared ? 1 : problem.batch) *
                (problem.maskHeadShared ? 1 : problem.heads) * problem.seqQ *
                problem.seqK;
    c.mask = randomTensor<T>(n, rng, 2.0f);
    // Some keys masked out entirely, as a padding mask does.
    std::uniform_int_distribution<int> coin(0, 3);
    for (T &m : c.mask)
      if (coin(rng) == 0)
        m = faFromFloat<T>(-INFINITY);
    if (problem.blockedRow >= 0)
      for (int64_t j = 0; j < problem.seqK; ++j)
        c.mask[problem.blockedRow * problem.seqK + j] =
            faFromFloat<T>(-INFINITY);
  }
  const float scale = 1.0f / std::sqrt(float(D));
  runFlash<T, D>(c, scale);
  double maxV = 0;
  for (const T &x : c.v)
    maxV = std::max(maxV, std::fabs(double(faToFloat(x))));
  const double tolerance = 2 * unitRoundoff<T>() * maxV;
  double worst = 0;
  for (int64_t pair = 0; pair < pairs; ++pair)
    for (int64_t row = 0; row < problem.seqQ; ++row) {
      std::vector<double> want = reference<T, D>(c, scale, pair, row);
      for (int d = 0; d < D; ++d) {
        double got = faToFloat(c.out[(pair * problem.seqQ + row) * D + d]);
        bool blocked = row == problem.blockedRow &&
                       (problem.maskBatchShared || pair / problem.heads == 0) &&
                       (problem.maskHeadShared || pair % problem.heads == 0);
        if (blocked) {
          // Every key masked: NaN, as the unfused softmax gives.
          EXPECT_TRUE(std::isnan(got)) << "pair " << pair << " row " << row;
          continue;
        }
        EXPECT_TRUE(std::isfinite(got))
            << "pair " << pair << " row " << row << " d " << d;
        worst = std::max(worst, std::fabs(got - want[d]));
        EXPECT_LE(std::fabs(got - want[d]), tolerance)
            << "pair " << pair << " row " << row << " d " << d << ": got "
            << got << ", want " << want[d];
      }
    }
  return worst;
}

// seqQ and seqK off the tiles (partial query blocks and key tiles), several
// key tiles, and several pairs.
// (A positive error shows that the comparison is not vacuous: the
// roundings show.)
TEST(FlashAttentionHost, Bf16HeadDim64) {
  EXPECT_GT((check<Bf16, 64>({1, 2, 100, 150, false, false, false}, 1)), 0);
}

TEST(FlashAttentionHost, F16HeadDim128) {
  EXPECT_GT((check<F16, 128>({2, 1, 64, 77, false, false, false}, 2)), 0);
}

// A mask shared over the batch, per head, with masked keys and a query row
// whose keys are all masked.
TEST(FlashAttentionHost, MaskedBf16) {
  EXPECT_GT((check<Bf16, 64>({2, 2, 70, 130, true, true, false, 5}, 3)), 0);
}

TEST(FlashAttentionHost, MaskedF16HeadDim128) {
  EXPECT_GT((check<F16, 128>({1, 3, 30, 65, true, false, true}, 4)), 0);
}

// One key: p = exp(0) = 1 exactly and l = 1, so the result is the value row
// itself, bit for bit.
TEST(FlashAttentionHost, OneKeyGivesTheValueRow) {
  EXPECT_EQ((check<Bf16, 64>({1, 1, 3, 1, false, false, false}, 5)), 0);
}

TEST(FlashAttentionHost, SharedMemoryFitsAnSM) {
  // sm_80 and sm_90 give a block up to 163 KiB and 227 KiB: both sizes fit
  // sm_80, and a 227 KiB SM holds three 64-wide blocks.
  EXPECT_EQ(sharedBytes(64, 2), 66304u);
  EXPECT_EQ(sharedBytes(128, 2), 107264u);
  EXPECT_LE(sharedBytes(128, 2), 163u * 1024);
  EXPECT_EQ(blocksFor(48, 1357), 48 * 22);
}

} // namespace
