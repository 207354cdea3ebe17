//===- FlashAttentionHostModel.h - CUDA's threads and WMMA on the host -*- C++
//-*-===//
//
// What FlashAttention.h and FlashAttentionBackward.h use from CUDA, modelled
// on the host, so that the same kernel code runs without a GPU
// (FlashAttentionHostTest.cpp, and the host model of libcuda in host/):
// - each of a block's threads is a std::thread; __syncthreads and
//   __syncwarp are barriers of the block's and the warp's 32 threads, so a
//   missing barrier shows up as a race (and under TSan as one);
// - a WMMA fragment holds its whole 16x16 tile in every thread (WMMA leaves
//   the element-to-thread mapping unspecified and the kernels never rely
//   on it); loads read the tile, mma_sync multiplies exactly in float, and
//   a store writes from lane 0 only, so a kernel must __syncwarp before
//   another lane reads what a store wrote, as on the GPU;
// - bf16 / f16 round to nearest even (runtime/io/ElementCodec.h).
// runBlocks runs a call's blocks one after another, each with the shared
// memory it asks for, filled with garbage as on a GPU. Include it in one
// translation unit of a binary: it defines the kernels' hooks globally.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_HAL_DRIVERS_CUDA_KERNELS_FLASHATTENTIONHOSTMODEL_H
#define OMNI_RUNTIME_HAL_DRIVERS_CUDA_KERNELS_FLASHATTENTIONHOSTMODEL_H

#include "runtime/io/ElementCodec.h"

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace flash_host {

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

inline thread_local Barrier *blockBarrier = nullptr;
inline thread_local Barrier *warpBarrier = nullptr;
inline thread_local int laneId = 0;

struct Bf16 {
  uint16_t bits;
};
struct F16 {
  uint16_t bits;
};

} // namespace flash_host

using flash_host::Bf16;
using flash_host::F16;

#define OMNI_FA_FN inline
inline void faSyncThreads() { flash_host::blockBarrier->wait(); }
inline void faSyncWarp() { flash_host::warpBarrier->wait(); }
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
  if (flash_host::laneId != 0)
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

#include "runtime/hal/drivers/cuda/kernels/FlashAttentionBackward.h"

namespace flash_host {

using omni::hal::cuda::flash::kThreads;

/// Runs blocks [0, blocks) one after another, each with kThreads host
/// threads and `sharedBytes` of shared memory filled with garbage (as on a
/// GPU): body(block, shared, thread).
template <typename Body>
void runBlocks(int64_t blocks, size_t sharedBytes, const Body &body) {
  std::vector<unsigned char> shared(sharedBytes);
  for (int64_t block = 0; block < blocks; ++block) {
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
        body(block, shared.data(), t);
      });
    for (std::thread &t : threads)
      t.join();
  }
}

} // namespace flash_host

#endif // OMNI_RUNTIME_HAL_DRIVERS_CUDA_KERNELS_FLASHATTENTIONHOSTMODEL_H
