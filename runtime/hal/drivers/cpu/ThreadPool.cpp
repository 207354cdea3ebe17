//===- ThreadPool.cpp - The cpu driver's worker threads ---------*- C++ -*-===//

#include "runtime/hal/drivers/cpu/ThreadPool.h"

#include <algorithm>
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
    stop_ = true;
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

void ThreadPool::workerLoop(int index) {
  uint64_t seen = 0;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      start_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_)
        return;
      seen = generation_;
      if (index >= chunks_)
        continue;
    }
    runChunk(index);
    std::lock_guard<std::mutex> lock(mutex_);
    if (--pending_ == 0)
      done_.notify_one();
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
    pending_ = chunks - 1;
    ++generation_;
  }
  start_.notify_all();
  runChunk(0);
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [&] { return pending_ == 0; });
  job_ = nullptr;
}

} // namespace omni::hal::cpu
