//===- ThreadPoolTest.cpp - Tests of the cpu driver's pool ------*- C++ -*-===//

#include "runtime/hal/drivers/cpu/ThreadPool.h"

#include "gtest/gtest.h"

#include <atomic>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

namespace omni::hal::cpu {
namespace {

std::vector<std::pair<int64_t, int64_t>> chunksOf(ThreadPool &pool, int64_t n,
                                                  int64_t grain = 1) {
  std::mutex mutex;
  std::vector<std::pair<int64_t, int64_t>> chunks;
  pool.parallelFor(n, grain, [&](int64_t b, int64_t e) {
    std::lock_guard<std::mutex> lock(mutex);
    chunks.push_back({b, e});
  });
  std::sort(chunks.begin(), chunks.end());
  return chunks;
}

TEST(ThreadPool, SplitsIntoContiguousChunksOnePerThread) {
  ThreadPool pool(4);
  auto chunks = chunksOf(pool, 10);
  ASSERT_EQ(chunks.size(), 4u);
  int64_t next = 0;
  for (auto [b, e] : chunks) {
    EXPECT_EQ(b, next);
    EXPECT_LT(b, e);
    next = e;
  }
  EXPECT_EQ(next, 10);
  EXPECT_EQ(chunksOf(pool, 2).size(), 2u);
  EXPECT_EQ(chunksOf(pool, 0).size(), 0u);
  EXPECT_EQ(chunksOf(pool, 100, 60).size(), 2u);
}

TEST(ThreadPool, RunsEveryItemExactlyOnceRepeatedly) {
  ThreadPool pool(3);
  for (int round = 0; round < 200; ++round) {
    std::vector<std::atomic<int>> hits(97);
    pool.parallelFor(97, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        hits[i]++;
    });
    for (auto &h : hits)
      ASSERT_EQ(h.load(), 1);
  }
}

TEST(ThreadPool, NestedLoopsRunInline) {
  ThreadPool pool(4);
  std::atomic<int64_t> sum{0};
  pool.parallelFor(8, [&](int64_t b, int64_t e) {
    pool.parallelFor(e - b, [&](int64_t ib, int64_t ie) { sum += ie - ib; });
  });
  EXPECT_EQ(sum.load(), 8);
}

TEST(ThreadPool, OneThreadRunsOnTheCaller) {
  ThreadPool pool(1);
  EXPECT_EQ(pool.size(), 1);
  auto chunks = chunksOf(pool, 5);
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0], std::make_pair(int64_t(0), int64_t(5)));
}

} // namespace
} // namespace omni::hal::cpu
