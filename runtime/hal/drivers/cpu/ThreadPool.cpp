//===- ThreadPool.cpp - The cpu driver's worker threads ---------*- C++ -*-===//

#include "runtime/hal/drivers/cpu/ThreadPool.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <system_error>

namespace omni::hal::cpu {
namespace {
/// Set while a thread runs a chunk, so nested loops run inline.
thread_local bool insideChunk = false;
} // namespace

ThreadPool::ThreadPool(int threads) : threads_(std::max(1, threads)) {
  int wanted = threads_;
  for (int i = 1; i < wanted; ++i) {
    try {
      workers_.emplace_back([this, i] { workerLoop(i); });
    } catch (const std::system_error &e) {
      // Out of threads or memory for their stacks: run with what started
      // (results do not depend on the number of threads).
      startError_ = "thread " + std::to_string(i + 1) + " of " +
                    std::to_string(wanted) + ": " + e.what();
      threads_ = i;
      break;
    }
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_.store(true, std::memory_order_release);
  }
  start_.notify_all();
  for (std::thread &t : workers_)
    t.join();
}

void ThreadPool::runChunk(int chunk) {
  int64_t begin = n_ * chunk / chunks_;
  int64_t end = n_ * (chunk + 1) / chunks_;
  insideChunk = true;
  (*job_)(begin, end);
  insideChunk = false;
}

namespace {
/// How long a worker waiting for the next loop, and the caller waiting for
/// the workers' chunks, poll before they sleep on a condition variable.
/// The executor issues its commands a few microseconds apart, so a short
/// spin catches the next loop without the futex wake-up and context switch
/// a sleeping thread costs on every loop (about 10-20 us each; the tiny
/// recipe runs about 2000 loops per iteration). Bounded, so idle workers
/// sleep soon, and the poll yields the core to any other runnable thread
/// every 64 pauses.
constexpr auto kSpin = std::chrono::microseconds(50);

void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/// Polls `ready` until it holds or kSpin has passed; returns whether it
/// held.
template <typename Ready> bool spinUntil(Ready ready) {
  auto deadline = std::chrono::steady_clock::now() + kSpin;
  for (int i = 0;; ++i) {
    if (ready())
      return true;
    cpuRelax();
    if ((i & 63) == 63) {
      if (std::chrono::steady_clock::now() >= deadline)
        return false;
      // On a machine with other work (a parallel test run, other ranks'
      // pools) the core goes to a runnable thread instead of the poll; on
      // an idle one this returns at once.
      std::this_thread::yield();
    }
  }
}
} // namespace

void ThreadPool::workerLoop(int index) {
  uint64_t seen = 0;
  while (true) {
    int chunks;
    spinUntil([&] {
      return stop_.load(std::memory_order_acquire) ||
             generation_.load(std::memory_order_acquire) != seen;
    });
    {
      // The generation and its loop's fields are read together under the
      // mutex: a worker outside the loop (index >= chunks) must not pair
      // one loop's generation with the next loop's chunk count.
      std::unique_lock<std::mutex> lock(mutex_);
      start_.wait(lock, [&] {
        return stop_.load(std::memory_order_relaxed) ||
               generation_.load(std::memory_order_relaxed) != seen;
      });
      if (stop_.load(std::memory_order_relaxed))
        return;
      seen = generation_.load(std::memory_order_relaxed);
      chunks = chunks_;
    }
    if (index >= chunks)
      continue;
    runChunk(index);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      // Taking the mutex orders this notify after the caller's check of
      // pending_ (made under the mutex), so it cannot be lost.
      std::lock_guard<std::mutex> lock(mutex_);
      done_.notify_one();
    }
  }
}

void ThreadPool::parallelFor(int64_t n, int64_t grain,
                             absl::FunctionRef<void(int64_t, int64_t)> fn) {
  if (n <= 0)
    return;
  grain = std::max<int64_t>(grain, 1);
  int64_t maxChunks = (n + grain - 1) / grain;
  int chunks = static_cast<int>(std::min<int64_t>(threads_, maxChunks));
  if (chunks <= 1 || insideChunk) {
    fn(0, n);
    return;
  }
  std::lock_guard<std::mutex> submit(submitMutex_);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &fn;
    n_ = n;
    chunks_ = chunks;
    pending_.store(chunks - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  start_.notify_all();
  runChunk(0);
  auto finished = [&] { return pending_.load(std::memory_order_acquire) == 0; };
  if (!spinUntil(finished)) {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, finished);
  }
  job_ = nullptr;
}

} // namespace omni::hal::cpu
