//===- ThreadPoolTest.cpp - Tests of the cpu driver's pool ------*- C++ -*-===//

#include "runtime/hal/drivers/cpu/ThreadPool.h"

#include "runtime/hal/drivers/cpu/CpuDriver.h"

#include "gtest/gtest.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include <sys/resource.h>
#include <unistd.h>

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

// Workers poll for the next loop before they sleep: loops of alternating
// chunk counts (some workers idle in one loop and busy in the next), back
// to back and after pauses longer than the poll, each run every item once.
TEST(ThreadPool, LoopsOfChangingWidthBackToBackAndAfterSleeps) {
  ThreadPool pool(4);
  for (int round = 0; round < 2000; ++round) {
    const int64_t n = 1 + round % 5; // 1..5 items: 1..4 chunks
    std::vector<std::atomic<int>> hits(n);
    pool.parallelFor(n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        hits[i]++;
    });
    for (auto &h : hits)
      ASSERT_EQ(h.load(), 1) << "round " << round;
    if (round % 500 == 499)
      usleep(2000); // past the poll: the workers sleep, then wake
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

/// The address space this process has mapped, in bytes.
size_t mappedBytes() {
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0;
  statm >> pages;
  return pages * static_cast<size_t>(::sysconf(_SC_PAGESIZE));
}

/// In a child of the death test: an address-space limit that leaves room
/// for the pool's bookkeeping but not for 64 thread stacks (8 MiB each), so
/// thread creation fails as it does for --threads 4096 on a loaded machine.
/// Exits 0 when the pool reports it and still runs loops.
void startPoolWithoutMemoryForStacks() {
  struct rlimit limit;
  limit.rlim_cur = mappedBytes() + (16u << 20);
  limit.rlim_max = RLIM_INFINITY;
  ::setrlimit(RLIMIT_AS, &limit);
  ThreadPool pool(64);
  std::atomic<int64_t> sum{0};
  pool.parallelFor(1000, [&](int64_t b, int64_t e) { sum += e - b; });
  std::fprintf(stderr, "size %d: %s\n", pool.size(), pool.startError().c_str());
  bool ok = pool.size() >= 1 && pool.size() < 64 &&
            pool.startError().rfind("thread ", 0) == 0 && sum == 1000;
  std::_Exit(ok ? 0 : 1);
}

TEST(ThreadPoolDeathTest, ThreadsTheSystemRefusesAreReportedNotThrown) {
  EXPECT_EXIT(startPoolWithoutMemoryForStacks(), ::testing::ExitedWithCode(0),
              "size [0-9]+: thread [0-9]+ of 64: ");
}

TEST(CpuDriver, BoundsTheThreadCount) {
  CpuDriver driver;
  DeviceOptions options;
  options.threads = kMaxThreads + 1;
  auto device = driver.createDevice(options);
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.status().message(),
            "the cpu device takes 0 (one per core) to 1024 threads, found "
            "1025");
  options.threads = -1;
  EXPECT_FALSE(driver.createDevice(options).ok());
  options.threads = 2;
  device = driver.createDevice(options);
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_EQ((*device)->description(), "cpu (2 threads)");
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
