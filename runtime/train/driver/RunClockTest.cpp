//===- RunClockTest.cpp - elapsed time and ETA with injected times -------===//
//
// formatDuration at the boundaries of its units, and RunClock's arithmetic
// on times given to it (no clock is read): the first iteration is left out
// of the mean once there are more, a resumed run counts the iterations left
// from where it resumed, and the elapsed time includes the start-up.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/driver/RunClock.h"

#include "gtest/gtest.h"

#include <cmath>
#include <limits>

namespace omni::train {
namespace {

TEST(FormatDurationTest, UnitsAndRounding) {
  EXPECT_EQ(formatDuration(0), "0s");
  EXPECT_EQ(formatDuration(0.4), "0s");
  EXPECT_EQ(formatDuration(0.6), "1s");
  EXPECT_EQ(formatDuration(59.4), "59s");
  // Rounded before the unit is chosen: never "60s".
  EXPECT_EQ(formatDuration(59.6), "1m00s");
  EXPECT_EQ(formatDuration(62), "1m02s");
  EXPECT_EQ(formatDuration(16 * 60 + 20), "16m20s");
  EXPECT_EQ(formatDuration(3599.4), "59m59s");
  EXPECT_EQ(formatDuration(3599.6), "1h00m");
  EXPECT_EQ(formatDuration(2 * 3600 + 3 * 60 + 29), "2h03m");
  EXPECT_EQ(formatDuration(2 * 3600 + 3 * 60 + 31), "2h04m");
  EXPECT_EQ(formatDuration(86400 - 31), "23h59m");
  EXPECT_EQ(formatDuration(86400 - 29), "1d00h");
  EXPECT_EQ(formatDuration(12 * 86400 + 3 * 3600), "12d03h");
  EXPECT_EQ(formatDuration(-1), "?");
  EXPECT_EQ(formatDuration(std::numeric_limits<double>::quiet_NaN()), "?");
  EXPECT_EQ(formatDuration(std::numeric_limits<double>::infinity()), "?");
  // Huge but finite: still one line, no overflow.
  EXPECT_EQ(formatDuration(1e300).back(), 'h');
}

TEST(RunClockTest, NothingBeforeTheFirstIteration) {
  RunClock clock(10, 100.0);
  EXPECT_FALSE(clock.meanIterationSeconds());
  EXPECT_FALSE(clock.etaSeconds());
  EXPECT_EQ(clock.elapsedSeconds(), 0.0);
  EXPECT_EQ(clock.text(), "");
}

TEST(RunClockTest, TheFirstIterationAloneIsTheMean) {
  // Start-up 5 s, then iteration 0 takes 20 s (warm-up included).
  RunClock clock(10, 100.0);
  clock.iterationDone(0, 105.0, 125.0);
  EXPECT_EQ(*clock.meanIterationSeconds(), 20.0);
  EXPECT_EQ(*clock.etaSeconds(), 9 * 20.0);
  EXPECT_EQ(clock.elapsedSeconds(), 25.0);
  EXPECT_EQ(clock.text(), "elapsed 25s  eta 3m00s");
}

TEST(RunClockTest, TheMeanLeavesOutTheWarmUp) {
  // Iteration 0 takes 20 s; then 2 s and 4 s end to end (the time between
  // iterations, a checkpoint say, counts: iteration 2 starts 1 s after 1
  // ended).
  RunClock clock(200, 0.0);
  clock.iterationDone(0, 2.0, 22.0);
  clock.iterationDone(1, 22.0, 24.0);
  EXPECT_EQ(*clock.meanIterationSeconds(), 2.0);
  clock.iterationDone(2, 25.0, 28.0);
  EXPECT_EQ(*clock.meanIterationSeconds(), 3.0);
  EXPECT_EQ(*clock.etaSeconds(), 197 * 3.0);
  EXPECT_EQ(clock.text(), "elapsed 28s  eta 9m51s");
}

TEST(RunClockTest, AResumedRunCountsFromWhereItResumed) {
  // --steps 200 resumed at iteration 150: 50 to run; after iterations 150
  // and 151 (mean 4 s without the first), 48 are left.
  RunClock clock(200, 1000.0);
  clock.iterationDone(150, 1010.0, 1030.0);
  EXPECT_EQ(*clock.etaSeconds(), 49 * 20.0);
  clock.iterationDone(151, 1030.0, 1034.0);
  EXPECT_EQ(*clock.meanIterationSeconds(), 4.0);
  EXPECT_EQ(*clock.etaSeconds(), 48 * 4.0);
  EXPECT_EQ(clock.elapsedSeconds(), 34.0);
  EXPECT_EQ(clock.text(), "elapsed 34s  eta 3m12s");
}

TEST(RunClockTest, TheLastIterationLeavesNothing) {
  RunClock clock(3, 0.0);
  clock.iterationDone(0, 0.0, 10.0);
  clock.iterationDone(1, 10.0, 11.0);
  clock.iterationDone(2, 11.0, 12.0);
  EXPECT_EQ(*clock.etaSeconds(), 0.0);
  EXPECT_EQ(clock.text(), "elapsed 12s  eta 0s");
}

} // namespace
} // namespace omni::train
