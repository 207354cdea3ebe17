//===- ExecutorGraphsTest.cpp - loops and runs captured into graphs -------===//
//
// ExecutorGraphs.cpp on the cpu driver, which captures by recording calls:
// captured loops and runs of commands replay with the same results as
// command by command, one graph per entry register set (at most four), no
// capture where the host is needed in the middle, a failed capture runs
// the commands one by one with the real error, host calls in flight go on
// beside a graph that does not touch their results, and a run's graph
// replaces the graph of a loop inside it (docs/backend.md, "Graphs").
//
//===----------------------------------------------------------------------===//

#include "runtime/executor/Executor.h"
#include "runtime/executor/Profile.h"
#include "runtime/executor/testing/ExecutorTesting.h"

#include "gtest/gtest.h"

namespace omni::executor {
namespace {

using namespace test;

/// A captured loop replays with the arguments' contents at each run: three
/// runs with two keys give what runs without graphs give, from one capture.
TEST_F(ExecutorTest, LoopsReplayAsGraphsWithTheSameResults) {
  auto executor =
      load(trajectoryProgram(), withGraphs(ExecutorOptions::Graphs::On));
  ASSERT_TRUE(executor.ok()) << executor.status();
  ASSERT_TRUE((*executor)->graphsEnabled());
  for (int64_t seed : {1234, 99, 1234}) {
    const std::vector<HostTensor> inputs = {
        HostTensor::scalarInt(DType::I64, seed)};
    auto plain = run(trajectoryProgram(), "steps", inputs);
    auto results = (*executor)->run("steps", toTyped(inputs));
    ASSERT_TRUE(results.ok()) << results.status();
    auto replayed = toHost(*results);
    ASSERT_EQ(replayed.size(), plain.size());
    for (size_t k = 0; k < plain.size(); ++k)
      EXPECT_EQ(replayed[k].floats(), plain[k].floats()) << "seed " << seed;
  }
  const GraphStats &stats = (*executor)->graphStats();
  EXPECT_EQ(stats.captures, 1);
  EXPECT_EQ(stats.launches, 3);
  EXPECT_EQ(stats.uncaptured, 0);
  EXPECT_TRUE(stats.refused.empty());
  EXPECT_EQ(describeGraphs(stats), "graphs: 1 captured, 3 launches");
}

/// The cpu driver does not prefer graphs: auto leaves them off there, and
/// a profile times the commands one by one.
TEST_F(ExecutorTest, GraphsAreOffOnTheCpuByDefaultAndWhileProfiling) {
  auto automatic = load(trajectoryProgram());
  ASSERT_TRUE(automatic.ok()) << automatic.status();
  EXPECT_FALSE((*automatic)->graphsEnabled());

  auto executor =
      load(trajectoryProgram(), withGraphs(ExecutorOptions::Graphs::On));
  ASSERT_TRUE(executor.ok()) << executor.status();
  Profile profile;
  (*executor)->setProfile(&profile);
  ASSERT_TRUE((*executor)->run("steps", {TypedTensor::scalarI64(5)}).ok());
  EXPECT_EQ((*executor)->graphStats().captures, 0);
  EXPECT_EQ((*executor)->graphStats().launches, 0);
}

/// The registers a body reads at the loop's entry fix its copies' offsets,
/// so each set of their values has its own graph.
TEST_F(ExecutorTest, EachEntryRegisterSetHasItsOwnGraph) {
  StepBuilder b;
  uint32_t n = b.argument(sd::DType::I64, {}, 0, "n");
  uint32_t x = b.constant(sd::DType::F32, {2},
                          omni::testing::bytesOf<float>({1.5f, -2}));
  uint32_t stack = b.arena(sd::DType::F32, {2, 2});
  uint32_t row = b.scalar("row"), i = b.scalar("i");
  b.function("store", {n}, {stack},
             {b.scalarOp(ScalarOpKind::FromTensor, row, n),
              b.fill(stack, omni::testing::bytesOf<float>({0})),
              b.loop(i, 0, 2, 1, {copyIntoRow(b, x, stack, row)})},
             2);
  const std::string bytes = b.finish();
  auto executor = load(bytes, withGraphs(ExecutorOptions::Graphs::On));
  ASSERT_TRUE(executor.ok()) << executor.status();
  for (int64_t r : {0, 1, 0, 1}) {
    auto results = (*executor)->run("store", {TypedTensor::scalarI64(r)});
    ASSERT_TRUE(results.ok()) << results.status();
    std::vector<double> want = {0, 0, 0, 0};
    want[2 * r] = 1.5;
    want[2 * r + 1] = -2;
    std::vector<HostTensor> host = toHost(*results);
    EXPECT_EQ(
        std::vector<double>(host[0].floats().begin(), host[0].floats().end()),
        want)
        << "row " << r;
  }
  EXPECT_EQ((*executor)->graphStats().captures, 2);
  EXPECT_EQ((*executor)->graphStats().launches, 4);
}

/// A loop keeps at most 4 graphs: a fifth set of entry registers runs
/// command by command, with the same results.
TEST_F(ExecutorTest, ALoopKeepsAtMostFourGraphs) {
  StepBuilder b;
  uint32_t n = b.argument(sd::DType::I64, {}, 0, "n");
  uint32_t x = b.constant(sd::DType::F32, {2},
                          omni::testing::bytesOf<float>({1.5f, -2}));
  uint32_t stack = b.arena(sd::DType::F32, {5, 2});
  uint32_t row = b.scalar("row"), i = b.scalar("i");
  b.function("store", {n}, {stack},
             {b.scalarOp(ScalarOpKind::FromTensor, row, n),
              b.fill(stack, omni::testing::bytesOf<float>({0})),
              b.loop(i, 0, 1, 1, {copyIntoRow(b, x, stack, row)})},
             2);
  auto executor = load(b.finish(), withGraphs(ExecutorOptions::Graphs::On));
  ASSERT_TRUE(executor.ok()) << executor.status();
  for (int64_t r : {0, 1, 2, 3, 4, 4, 0}) {
    auto results = (*executor)->run("store", {TypedTensor::scalarI64(r)});
    ASSERT_TRUE(results.ok()) << results.status();
    std::vector<HostTensor> host = toHost(*results);
    EXPECT_EQ(host[0].floats()[2 * r], 1.5) << "row " << r;
    EXPECT_EQ(host[0].floats()[2 * r + 1], -2) << "row " << r;
  }
  const GraphStats &stats = (*executor)->graphStats();
  EXPECT_EQ(stats.captures, 4);
  EXPECT_EQ(stats.launches, 5);   // rows 0-3, then row 0 again
  EXPECT_EQ(stats.uncaptured, 2); // row 4, twice
}

/// Only the registers the body reads before writing them key its graphs:
/// `other` differs in every run, `row` is written before it is read, and
/// the loop's registers after it are those of the capture.
TEST_F(ExecutorTest, RegistersTheBodyDoesNotReadShareAGraph) {
  StepBuilder b;
  uint32_t n = b.argument(sd::DType::I64, {}, 0, "n");
  uint32_t x = b.constant(sd::DType::F32, {2},
                          omni::testing::bytesOf<float>({1.5f, -2}));
  uint32_t stack = b.arena(sd::DType::F32, {3, 2});
  uint32_t last = b.arena(sd::DType::I64, {});
  uint32_t other = b.scalar("other"), row = b.scalar("row"),
           one = b.scalar("one"), i = b.scalar("i");
  b.function("store", {n}, {stack, last},
             {b.scalarOp(ScalarOpKind::FromTensor, other, n),
              b.scalarOp(ScalarOpKind::Const, one, 0, 0, 1),
              b.fill(stack, omni::testing::bytesOf<float>({0})),
              b.loop(i, 0, 2, 1,
                     {b.scalarOp(ScalarOpKind::Add, row, i, one),
                      copyIntoRow(b, x, stack, row)}),
              b.scalarOp(ScalarOpKind::ToTensor, last, row)},
             4);
  auto executor = load(b.finish(), withGraphs(ExecutorOptions::Graphs::On));
  ASSERT_TRUE(executor.ok()) << executor.status();
  for (int64_t v : {5, 6, 7}) {
    auto results = (*executor)->run("store", {TypedTensor::scalarI64(v)});
    ASSERT_TRUE(results.ok()) << results.status();
    std::vector<HostTensor> host = toHost(*results);
    EXPECT_EQ(
        std::vector<double>(host[0].floats().begin(), host[0].floats().end()),
        (std::vector<double>{0, 0, 1.5, -2, 1.5, -2}));
    // row after the loop: the last trip's, restored from the capture.
    EXPECT_EQ(host[1].ints()[0], 2);
  }
  EXPECT_EQ((*executor)->graphStats().captures, 1);
  EXPECT_EQ((*executor)->graphStats().launches, 3);
}

/// A loop that needs the host in its body runs command by command, and
/// says why once.
TEST_F(ExecutorTest, LoopsThatNeedTheHostAreNotCaptured) {
  StepBuilder b;
  uint32_t n = b.argument(sd::DType::I64, {}, 0, "n");
  uint32_t out = b.arena(sd::DType::I64, {});
  uint32_t r = b.scalar("r"), i = b.scalar("i");
  b.function("f", {n}, {out},
             {b.loop(i, 0, 3, 1,
                     {b.scalarOp(ScalarOpKind::FromTensor, r, n),
                      b.scalarOp(ScalarOpKind::Add, r, r, i),
                      b.scalarOp(ScalarOpKind::ToTensor, out, r)})},
             2);
  auto executor = load(b.finish(), withGraphs(ExecutorOptions::Graphs::On));
  ASSERT_TRUE(executor.ok()) << executor.status();
  for (int run = 0; run < 2; ++run) {
    auto results = (*executor)->run("f", {TypedTensor::scalarI64(40)});
    ASSERT_TRUE(results.ok()) << results.status();
    EXPECT_EQ(toHost(*results)[0].ints()[0], 42);
  }
  const GraphStats &stats = (*executor)->graphStats();
  EXPECT_EQ(stats.captures, 0);
  EXPECT_EQ(stats.uncaptured, 2);
  ASSERT_EQ(stats.refused.size(), 1u);
  EXPECT_EQ(stats.refused[0],
            "functions[0].commands[0] (Loop): body[0] is a ScalarOp "
            "FromTensor (it reads the device)");
}

/// A loop whose capture fails (here a copy out of range in its last trip)
/// runs again command by command, from the same registers, and reports the
/// error as a run without graphs does.
TEST_F(ExecutorTest, AFailedCaptureRunsTheLoopCommandByCommand) {
  // row = n + i: only the executor can check it (the loader checks offsets
  // of a loop's own induction variable).
  StepBuilder b;
  uint32_t n = b.argument(sd::DType::I64, {}, 0, "n");
  uint32_t x =
      b.constant(sd::DType::F32, {2}, omni::testing::bytesOf<float>({1, 2}));
  uint32_t stack = b.arena(sd::DType::F32, {3, 2});
  uint32_t base = b.scalar("base"), row = b.scalar("row"), i = b.scalar("i");
  b.function("store", {n}, {stack},
             {b.scalarOp(ScalarOpKind::FromTensor, base, n),
              b.loop(i, 0, 3, 1,
                     {b.scalarOp(ScalarOpKind::Add, row, base, i),
                      copyIntoRow(b, x, stack, row)})},
             3);
  const std::string bytes = b.finish();
  auto plain = load(bytes);
  auto graphed = load(bytes, withGraphs(ExecutorOptions::Graphs::On));
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_TRUE(graphed.ok()) << graphed.status();
  const std::vector<TypedTensor> one = {TypedTensor::scalarI64(1)};
  auto want = (*plain)->run("store", one);
  auto got = (*graphed)->run("store", one);
  ASSERT_FALSE(want.ok());
  EXPECT_EQ(got.status(), want.status());
  EXPECT_EQ(want.status().message(),
            "step.bin: functions[0].commands[1].body[1] (Copy): dest range "
            "[24, 32) is outside tensors[2] (tensor<3x2xf32>, 24 bytes) "
            "(scalar 1 = 3)");
  const GraphStats &stats = (*graphed)->graphStats();
  EXPECT_EQ(stats.captures, 0);
  ASSERT_EQ(stats.refused.size(), 1u);
  EXPECT_EQ(stats.refused[0],
            "functions[0].commands[1] (Loop): the capture failed: step.bin: "
            "functions[0].commands[1].body[1] (Copy): dest range [24, 32) is "
            "outside tensors[2] (tensor<3x2xf32>, 24 bytes) (scalar 1 = 3)");
  // Refused for good: a run that fits runs command by command.
  auto zero = (*graphed)->run("store", {TypedTensor::scalarI64(0)});
  ASSERT_TRUE(zero.ok()) << zero.status();
  EXPECT_EQ(stats.captures, 0);
  EXPECT_EQ(stats.uncaptured, 2);
}

/// A captured loop runs beside a host call in flight when its body does
/// not touch the call's results (the `slow` call waits for the `release`
/// that comes after the first loop), and after the call when it does (the
/// second loop reads r).
TEST_F(ExecutorTest, GraphsRunBesideAHostCallUnlessTheyTouchItsResults) {
  const int64_t n = 16;
  StepBuilder b;
  uint32_t exe = b.executable(testKernels());
  uint32_t x = b.argument(sd::DType::F32, {n}, 0, "x");
  uint32_t y = b.argument(sd::DType::F32, {n}, 1, "y");
  uint32_t r = b.arena(sd::DType::F32, {n}, "r");
  uint32_t z = b.arena(sd::DType::F32, {n}, "z");
  uint32_t out = b.arena(sd::DType::F32, {n}, "out");
  uint32_t i = b.scalar("i"), j = b.scalar("j");
  b.function("f", {x, y}, {out},
             {b.hostCall("slow", {x}, {r}),
              b.loop(i, 0, 1, 1, {b.dispatch(exe, 0, n, {x, y}, {z})}),
              b.hostCall("release", {z}, {}),
              b.loop(j, 0, 1, 1, {b.dispatch(exe, 0, n, {r, z}, {out})})},
             2);
  HostTensor hx = f32({n}, 3), hy = f32({n}, 4);
  Gate gate;
  ExecutorOptions options = withGraphs(ExecutorOptions::Graphs::On);
  options.hostFunctions.add("slow", doubling(&gate), /*concurrent=*/true);
  options.hostFunctions.add("release",
                            [&](absl::Span<const HostTensor>)
                                -> absl::StatusOr<std::vector<HostTensor>> {
                              gate.release();
                              return std::vector<HostTensor>{};
                            });
  auto executor = load(b.finish(), std::move(options));
  ASSERT_TRUE(executor.ok()) << executor.status();
  for (int repeat = 0; repeat < 2; ++repeat) {
    {
      std::lock_guard<std::mutex> lock(gate.mutex);
      gate.open = false;
    }
    auto results = runHostTensors(**executor, "f", {hx, hy});
    ASSERT_TRUE(results.ok()) << results.status();
    for (int64_t k = 0; k < n; ++k)
      ASSERT_EQ(results->at(0).floats()[k],
                double(float(2 * hx.floats()[k]) +
                       (float(hx.floats()[k]) + float(hy.floats()[k]))))
          << k;
  }
  EXPECT_EQ((*executor)->graphStats().captures, 2);
  EXPECT_EQ((*executor)->graphStats().launches, 4);
}

/// A function whose commands after a read of the device are 8 that only
/// enqueue device work: a fill, a copy into row `n` of a stack, and six
/// doublings (kernel 0 adds its operands) of `v`; with `splitPhases`, the
/// last four are in another phase.
std::string commandRunProgram(bool splitPhases) {
  const int64_t n = 4;
  StepBuilder b;
  uint32_t exe = b.executable(testKernels());
  uint32_t row = b.scalar("row");
  uint32_t which = b.argument(sd::DType::I64, {}, 0, "n");
  uint32_t v = b.argument(sd::DType::F32, {n}, 1, "v");
  uint32_t x = b.constant(sd::DType::F32, {2},
                          omni::testing::bytesOf<float>({1.5f, -2}));
  uint32_t stack = b.arena(sd::DType::F32, {3, 2}, "stack");
  std::vector<uint32_t> t;
  for (int k = 0; k < 6; ++k)
    t.push_back(b.arena(sd::DType::F32, {n}));
  std::vector<CommandRef> commands = {
      b.scalarOp(ScalarOpKind::FromTensor, row, which),
      b.fill(stack, omni::testing::bytesOf<float>({0})),
      copyIntoRow(b, x, stack, row)};
  for (int k = 0; k < 6; ++k) {
    if (splitPhases && k == 2)
      b.phase = "second";
    uint32_t in = k == 0 ? v : t[k - 1];
    commands.push_back(b.dispatch(exe, 0, n, {in, in}, {t[k]}));
  }
  b.function("f", {which, v}, {stack, t.back()}, commands, 1);
  return b.finish();
}

/// A run of at least 8 commands of a function body that only enqueue device
/// work is captured like a loop from its second entry on, keyed by the
/// registers it reads (the row its copy writes); shorter runs, such as
/// those a phase change cuts, are not.
TEST_F(ExecutorTest, RunsOfCommandsReplayAsGraphs) {
  for (bool split : {false, true}) {
    const std::string bytes = commandRunProgram(split);
    auto executor = load(bytes, withGraphs(ExecutorOptions::Graphs::On));
    ASSERT_TRUE(executor.ok()) << executor.status();
    for (int64_t r : {0, 2, 0, 2}) {
      HostTensor v = f32({4}, 1 + r);
      std::vector<HostTensor> inputs = {HostTensor::scalarInt(DType::I64, r),
                                        v};
      auto plain = run(bytes, "f", inputs);
      auto results = runHostTensors(**executor, "f", inputs);
      ASSERT_TRUE(results.ok()) << results.status();
      ASSERT_EQ(results->size(), 2u);
      std::vector<double> stack(6, 0);
      stack[2 * r] = 1.5;
      stack[2 * r + 1] = -2;
      EXPECT_EQ(std::vector<double>(results->at(0).floats().begin(),
                                    results->at(0).floats().end()),
                stack)
          << "row " << r;
      for (int64_t k = 0; k < 4; ++k)
        EXPECT_EQ(results->at(1).floats()[k], 64 * v.floats()[k]) << k;
      EXPECT_EQ(results->at(1).floats(), plain[1].floats());
    }
    // The first run goes command by command (a run of commands is captured
    // from its second entry on), the second and third capture, the fourth
    // launches the second's graph.
    const GraphStats &stats = (*executor)->graphStats();
    EXPECT_EQ(stats.captures, split ? 0 : 2) << "split " << split;
    EXPECT_EQ(stats.launches, split ? 0 : 3) << "split " << split;
    EXPECT_EQ(stats.uncaptured, split ? 0 : 1) << "split " << split;
    EXPECT_TRUE(stats.refused.empty());
  }
}

/// A loop inside a run of commands has its own graph until the run is
/// captured; the run's graph replays the loop from then on, so the loop's
/// graph (and its memory on a GPU) is dropped.
TEST_F(ExecutorTest, ARunsGraphReplacesTheGraphOfALoopInIt) {
  const int64_t n = 4;
  StepBuilder b;
  uint32_t exe = b.executable(testKernels());
  uint32_t i = b.scalar("i");
  uint32_t v = b.argument(sd::DType::F32, {n}, 0, "v");
  std::vector<uint32_t> t;
  for (int k = 0; k < 7; ++k)
    t.push_back(b.arena(sd::DType::F32, {n}));
  std::vector<CommandRef> commands = {
      b.dispatch(exe, 0, n, {v, v}, {t[0]}),
      b.loop(i, 0, 3, 1, {b.dispatch(exe, 0, n, {t[0], t[0]}, {t[0]})})};
  for (int k = 1; k < 7; ++k)
    commands.push_back(b.dispatch(exe, 0, n, {t[k - 1], t[k - 1]}, {t[k]}));
  b.function("f", {v}, {t.back()}, commands, 1);
  auto executor = load(b.finish(), withGraphs(ExecutorOptions::Graphs::On));
  ASSERT_TRUE(executor.ok()) << executor.status();
  const GraphStats &stats = (*executor)->graphStats();
  // Held after each run: the loop's graph; the run's and, for the moment
  // of its capture, the loop's; the run's.
  const int64_t held[] = {1, 1, 1};
  const int64_t released[] = {0, 1, 1};
  for (int r = 0; r < 3; ++r) {
    HostTensor x = f32({n}, 1 + r);
    auto results = runHostTensors(**executor, "f", {x});
    ASSERT_TRUE(results.ok()) << results.status();
    for (int64_t k = 0; k < n; ++k)
      EXPECT_EQ(results->at(0).floats()[k], 1024 * x.floats()[k]) << r;
    EXPECT_EQ(stats.held, held[r]) << "run " << r;
    EXPECT_EQ(stats.released, released[r]) << "run " << r;
  }
  EXPECT_EQ(stats.captures, 2);
  EXPECT_EQ(stats.launches, 3);
  EXPECT_TRUE(stats.refused.empty());
}

/// A run whose capture fails is refused for good: it runs command by
/// command and reports the error with its path.
TEST_F(ExecutorTest, AFailedCaptureRunsTheCommandsOneByOne) {
  const std::string bytes = commandRunProgram(/*splitPhases=*/false);
  auto plain = load(bytes);
  auto graphed = load(bytes, withGraphs(ExecutorOptions::Graphs::On));
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_TRUE(graphed.ok()) << graphed.status();
  const std::vector<HostTensor> one = {HostTensor::scalarInt(DType::I64, 1),
                                       f32({4}, 1)};
  const std::vector<HostTensor> three = {HostTensor::scalarInt(DType::I64, 3),
                                         f32({4}, 1)};
  // The first entry runs command by command; the second captures.
  ASSERT_TRUE(runHostTensors(**graphed, "f", one).ok());
  auto want = runHostTensors(**plain, "f", three);
  auto got = runHostTensors(**graphed, "f", three);
  ASSERT_FALSE(want.ok());
  EXPECT_EQ(got.status(), want.status());
  EXPECT_EQ(want.status().message(),
            "step.bin: functions[0].commands[2] (Copy): dest range [24, 32) "
            "is outside tensors[3] (tensor<3x2xf32>, 24 bytes) (scalar 0 = "
            "3)");
  const GraphStats &stats = (*graphed)->graphStats();
  EXPECT_EQ(stats.captures, 0);
  ASSERT_EQ(stats.refused.size(), 1u);
  EXPECT_EQ(stats.refused[0],
            "functions[0].commands[1..8]: the capture failed: " +
                std::string(want.status().message()));
  auto fits = runHostTensors(**graphed, "f", one);
  ASSERT_TRUE(fits.ok()) << fits.status();
  EXPECT_EQ(stats.captures, 0);
  EXPECT_EQ(stats.uncaptured, 3);
}

} // namespace
} // namespace omni::executor
