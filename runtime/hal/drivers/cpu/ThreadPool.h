//===- ThreadPool.h - The cpu driver's worker threads -----------*- C++ -*-===//
//
// A fixed set of std::threads that run one parallel loop at a time. A loop
// over [0, n) is split into contiguous chunks, at most one per thread, the
// calling thread taking the first; the call returns when every chunk has
// run. Kernels therefore see contiguous ranges and never need threading of
// their own, and since a chunk boundary never splits a work item, results
// do not depend on the number of threads (docs/backend.md, kernel ABI).
//
// Ownership: owned by the CpuDevice. Thread safety: parallelFor may be
// called from any thread; concurrent calls run one after the other, and a
// call made from inside a chunk runs inline on the calling thread (no
// deadlock, no nested parallelism).
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_HAL_DRIVERS_CPU_THREADPOOL_H
#define OMNI_RUNTIME_HAL_DRIVERS_CPU_THREADPOOL_H

#include "absl/functional/function_ref.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace omni::hal::cpu {

class ThreadPool {
public:
  /// `threads` >= 1 threads in total (threads - 1 workers plus the caller).
  /// When the system refuses a worker thread, the pool keeps the ones it
  /// started (size() says how many) and startError() says why.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  int size() const { return threads_; }
  /// Empty, or "thread <i> of <n>: <system error>" for the first worker
  /// that could not be started.
  const std::string &startError() const { return startError_; }

  /// Runs fn(begin, end) over contiguous chunks covering [0, n), chunks of
  /// at least `grain` items (the last may be smaller), at most size() of
  /// them. Does nothing for n <= 0.
  void parallelFor(int64_t n, int64_t grain,
                   absl::FunctionRef<void(int64_t, int64_t)> fn);
  void parallelFor(int64_t n, absl::FunctionRef<void(int64_t, int64_t)> fn) {
    parallelFor(n, 1, fn);
  }

private:
  void workerLoop(int index);
  void runChunk(int chunk);

  int threads_;
  std::string startError_;
  std::vector<std::thread> workers_;
  std::mutex submitMutex_; // one loop at a time
  // Written under mutex_; generation_ and stop_ are also polled without it
  // (workers spin briefly before they sleep on start_), pending_ is counted
  // down by the workers without it (the caller spins, then sleeps on done_).
  std::mutex mutex_;
  std::condition_variable start_, done_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<bool> stop_{false};
  const absl::FunctionRef<void(int64_t, int64_t)> *job_ = nullptr;
  int64_t n_ = 0;
  int chunks_ = 0;
  std::atomic<int> pending_{0};
};

} // namespace omni::hal::cpu

#endif // OMNI_RUNTIME_HAL_DRIVERS_CPU_THREADPOOL_H
