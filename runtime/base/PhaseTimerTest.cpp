//===- PhaseTimerTest.cpp - the start-up messages of slow phases ---------===//
//
// PhaseTimer's lines with the threshold forced (always, afterMs = 0) and
// out of reach (an hour: nothing prints); the watchdog's line for a phase
// still running at its deadline, waited for as an event (no clock is
// compared); OMNI_PROGRESS_AFTER_MS's parsing.
//
//===----------------------------------------------------------------------===//

#include "runtime/base/PhaseTimer.h"

#include "gtest/gtest.h"

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <regex>
#include <vector>

namespace omni {
namespace {

/// Collects the lines a timer prints.
struct Lines {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<std::string> lines;

  PhaseTimerOptions options(int64_t afterMs, bool always = false) {
    PhaseTimerOptions o;
    o.tool = "tool";
    o.afterMs = afterMs;
    o.always = always;
    o.write = [this](absl::string_view line) {
      std::lock_guard<std::mutex> lock(mutex);
      lines.emplace_back(line);
      changed.notify_all();
    };
    return o;
  }
  std::vector<std::string> get() {
    std::lock_guard<std::mutex> lock(mutex);
    return lines;
  }
};

bool isEndLine(const std::string &line, const std::string &what) {
  return std::regex_match(line,
                          std::regex("tool: " + what + ": [0-9.e+-]+ s\n"));
}

TEST(PhaseTimer, ForcedLinesForEveryPhase) {
  for (bool always : {true, false}) {
    Lines out;
    {
      // always, or a threshold of 0.
      PhaseTimer timer(out.options(always ? 100000 : 0, always));
      timer.begin("parsing a.mlir");
      timer.begin("running passes"); // ends the first
      timer.end();
      timer.end(); // nothing to end
      PhaseTimer::Scope scope(&timer, "writing step.bin");
    }
    std::vector<std::string> l = out.get();
    ASSERT_EQ(l.size(), 6u);
    EXPECT_EQ(l[0], "tool: parsing a.mlir ...\n");
    EXPECT_TRUE(isEndLine(l[1], "parsing a.mlir")) << l[1];
    EXPECT_EQ(l[2], "tool: running passes ...\n");
    EXPECT_TRUE(isEndLine(l[3], "running passes")) << l[3];
    EXPECT_EQ(l[4], "tool: writing step.bin ...\n");
    EXPECT_TRUE(isEndLine(l[5], "writing step.bin")) << l[5];
  }
}

TEST(PhaseTimer, QuickPhasesPrintNothing) {
  Lines out;
  {
    PhaseTimer timer(out.options(3600 * 1000));
    for (int i = 0; i < 3; ++i) {
      PhaseTimer::Scope scope(&timer, "loading");
    }
    timer.begin("left running"); // the destructor ends it
  }
  EXPECT_TRUE(out.get().empty());
  // A null timer is no timer.
  PhaseTimer::Scope none(nullptr, "nothing");
}

TEST(PhaseTimer, ASlowPhaseIsNamedWhileItRuns) {
  Lines out;
  PhaseTimer timer(out.options(1));
  timer.begin("building kernels");
  {
    // The watchdog's line arrives while the phase is still running (the
    // wait is for the event; the minute only keeps a broken build from
    // hanging).
    std::unique_lock<std::mutex> lock(out.mutex);
    ASSERT_TRUE(out.changed.wait_for(lock, std::chrono::minutes(1),
                                     [&] { return !out.lines.empty(); }));
    EXPECT_EQ(out.lines[0], "tool: building kernels ...\n");
  }
  timer.end();
  std::vector<std::string> l = out.get();
  ASSERT_EQ(l.size(), 2u);
  EXPECT_TRUE(isEndLine(l[1], "building kernels")) << l[1];
}

TEST(PhaseTimer, TheEnvironmentVariable) {
  ::unsetenv("OMNI_PROGRESS_AFTER_MS");
  absl::StatusOr<std::optional<int64_t>> v = progressAfterMsFromEnvironment();
  ASSERT_TRUE(v.ok());
  EXPECT_FALSE(v->has_value());
  ::setenv("OMNI_PROGRESS_AFTER_MS", "0", 1);
  v = progressAfterMsFromEnvironment();
  ASSERT_TRUE(v.ok() && v->has_value());
  EXPECT_EQ(**v, 0);
  ::setenv("OMNI_PROGRESS_AFTER_MS", "2500", 1);
  EXPECT_EQ(**progressAfterMsFromEnvironment(), 2500);
  for (const char *bad : {"-1", "2s", "", "1e3"}) {
    ::setenv("OMNI_PROGRESS_AFTER_MS", bad, 1);
    v = progressAfterMsFromEnvironment();
    EXPECT_EQ(v.status().message(),
              std::string("OMNI_PROGRESS_AFTER_MS: expected a non-negative "
                          "integer number of milliseconds, found '") +
                  bad + "'");
  }
  ::unsetenv("OMNI_PROGRESS_AFTER_MS");
}

} // namespace
} // namespace omni
