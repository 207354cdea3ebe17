//===- PhaseTimer.cpp - Say what a slow phase of a tool is doing ----------===//

#include "runtime/base/PhaseTimer.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

#include <cstdio>
#include <cstdlib>

namespace omni {

absl::StatusOr<std::optional<int64_t>> progressAfterMsFromEnvironment() {
  const char *env = std::getenv("OMNI_PROGRESS_AFTER_MS");
  if (!env)
    return std::optional<int64_t>();
  int64_t ms = 0;
  if (!absl::SimpleAtoi(env, &ms) || ms < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("OMNI_PROGRESS_AFTER_MS: expected a non-negative integer "
                     "number of milliseconds, found '",
                     env, "'"));
  return std::optional<int64_t>(ms);
}

PhaseTimer::PhaseTimer(PhaseTimerOptions options)
    : options_(std::move(options)) {
  if (options_.afterMs <= 0)
    options_.always = true;
}

PhaseTimer::~PhaseTimer() {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    endLocked(lock);
    stopping_ = true;
  }
  wake_.notify_all();
  if (watchdog_.joinable())
    watchdog_.join();
}

void PhaseTimer::print(const std::string &line) {
  if (options_.write) {
    options_.write(line);
    return;
  }
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
}

void PhaseTimer::begin(std::string what) {
  std::unique_lock<std::mutex> lock(mutex_);
  endLocked(lock);
  active_ = true;
  announced_ = false;
  ++generation_;
  what_ = std::move(what);
  start_ = Clock::now();
  if (options_.always) {
    announced_ = true;
    print(absl::StrCat(options_.tool, ": ", what_, " ...\n"));
    return;
  }
  deadline_ = start_ + std::chrono::milliseconds(options_.afterMs);
  if (!watchdog_.joinable())
    watchdog_ = std::thread([this] { watch(); });
  lock.unlock();
  wake_.notify_all();
}

void PhaseTimer::end() {
  std::unique_lock<std::mutex> lock(mutex_);
  endLocked(lock);
}

void PhaseTimer::endLocked(std::unique_lock<std::mutex> &) {
  if (!active_)
    return;
  active_ = false;
  if (!announced_)
    return;
  double seconds = std::chrono::duration<double>(Clock::now() - start_).count();
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3g s", seconds);
  print(absl::StrCat(options_.tool, ": ", what_, ": ", buf, "\n"));
}

void PhaseTimer::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    if (!active_ || announced_) {
      wake_.wait(lock);
      continue;
    }
    uint64_t generation = generation_;
    Clock::time_point deadline = deadline_;
    if (Clock::now() < deadline) {
      wake_.wait_until(lock, deadline);
      continue; // re-check: the phase may have ended or changed
    }
    if (active_ && !announced_ && generation == generation_) {
      announced_ = true;
      print(absl::StrCat(options_.tool, ": ", what_, " ...\n"));
    }
  }
}

} // namespace omni
