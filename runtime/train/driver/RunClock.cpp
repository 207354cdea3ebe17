//===- RunClock.cpp - elapsed time and ETA of a training run --------------===//

#include "runtime/train/driver/RunClock.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace omni::train {

std::string formatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0)
    return "?";
  char buf[48];
  // Seconds below an hour, minutes below a day, hours beyond; each rounded
  // first, so 59.6 s is "1m00s", not "60s".
  if (seconds < 3600 - 0.5) {
    long long s = std::llround(seconds);
    if (s < 60)
      std::snprintf(buf, sizeof(buf), "%llds", s);
    else
      std::snprintf(buf, sizeof(buf), "%lldm%02llds", s / 60, s % 60);
    return buf;
  }
  if (seconds < 86400 - 30) {
    long long m = std::llround(seconds / 60);
    std::snprintf(buf, sizeof(buf), "%lldh%02lldm", m / 60, m % 60);
    return buf;
  }
  double hours = std::min(seconds / 3600, 1e15);
  long long h = std::llround(hours);
  std::snprintf(buf, sizeof(buf), "%lldd%02lldh", h / 24, h % 24);
  return buf;
}

void RunClock::iterationDone(int64_t iteration, double start, double end) {
  if (done_ == 0) {
    firstSeconds_ = end - start;
    firstEnd_ = end;
  }
  ++done_;
  last_ = iteration;
  lastEnd_ = end;
}

double RunClock::elapsedSeconds() const {
  return done_ ? lastEnd_ - begin_ : 0.0;
}

std::optional<double> RunClock::meanIterationSeconds() const {
  if (done_ == 0)
    return std::nullopt;
  if (done_ == 1)
    return firstSeconds_;
  return (lastEnd_ - firstEnd_) / static_cast<double>(done_ - 1);
}

std::optional<double> RunClock::etaSeconds() const {
  std::optional<double> mean = meanIterationSeconds();
  if (!mean)
    return std::nullopt;
  int64_t left = std::max<int64_t>(0, steps_ - (last_ + 1));
  return *mean * static_cast<double>(left);
}

std::string RunClock::text() const {
  std::optional<double> eta = etaSeconds();
  if (!eta)
    return "";
  return "elapsed " + formatDuration(elapsedSeconds()) + "  eta " +
         formatDuration(*eta);
}

} // namespace omni::train
