//===- RanksTest.cpp - runRanks on in-process ranks
//------------------------===//
//
// The multi-rank driver (Ranks.h) on the hand-built programs of
// testing/RankPrograms.h: two ranks train like one (the same checkpoint,
// exactly: w is 1 plus the first N prompts), only rank 0 prints and writes;
// checkpoints move between 2 and 1 ranks in both directions; a world that
// does not match the mesh is refused; a failing rank ends every rank with
// its name; a stop request seen by one rank only stops both at the same
// iteration. The hang of a rank (the collective timeout) is tested
// through omnirun (OmniRunTest).
//
//===----------------------------------------------------------------------===//

#include "runtime/train/driver/Ranks.h"

#include "runtime/hal/drivers/Drivers.h"

#include "runtime/train/checkpoint/Checkpoint.h"
#include "runtime/train/driver/testing/RankPrograms.h"
#include "runtime/train/prompts/Prompts.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

#include <atomic>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <unistd.h>

namespace omni::train {
namespace {

namespace fs = std::filesystem;

std::shared_ptr<const loader::Program> load(int64_t meshSize) {
  auto program = loader::Program::loadBytes(
      testing::rankProgramBytes(OMNI_TEST_KERNELS_SO, meshSize));
  EXPECT_TRUE(program.ok()) << program.status();
  return program.ok() ? *program : nullptr;
}

/// w after `n` iterations: 1 + the first n built-in prompts, in float32.
std::vector<float> expectedW(int64_t n) {
  PromptRequest request;
  request.function = "train_step";
  request.perIteration = 1;
  request.embeds = true;
  request.tokens = 1;
  request.dim = 4;
  PromptSet prompts = PromptSet::synthetic(request);
  std::vector<float> w(4, 1.0f);
  for (int64_t it = 0; it < n; ++it)
    for (int i = 0; i < 4; ++i)
      w[i] = w[i] + static_cast<float>(prompts.embeds(it).floats()[i]);
  return w;
}

class RanksTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir = fs::temp_directory_path() /
          ("omni-ranks-" + std::to_string(::getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }

  absl::Status run(int64_t meshSize, int ranks, const TrainOptions &training,
                   std::string &log, RanksOptions options = {}) {
    return runProgram(load(meshSize), ranks, training, log, options);
  }

  /// testing::shardedProgramBytes(ranks) on `ranks` ranks.
  absl::Status runSharded(int ranks, const TrainOptions &training,
                          std::string &log) {
    auto program = loader::Program::loadBytes(
        testing::shardedProgramBytes(OMNI_TEST_KERNELS_SO, ranks));
    EXPECT_TRUE(program.ok()) << program.status();
    return runProgram(program.ok() ? *program : nullptr, ranks, training, log,
                      {});
  }

  absl::Status runProgram(std::shared_ptr<const loader::Program> program,
                          int ranks, const TrainOptions &training,
                          std::string &log, RanksOptions options) {
    if (!program)
      return absl::InternalError("no program");
    hal::InProcessChannelProvider provider(ranks, std::chrono::seconds(60));
    std::vector<int> local;
    for (int r = 0; r < ranks; ++r)
      local.push_back(r);
    options.threads = ranks;
    std::ostringstream os;
    absl::Status s = runRanks(program, provider, local, options, training, os);
    log = os.str();
    return s;
  }

  std::vector<float> savedW(const std::string &out, int64_t step) {
    auto ckpt = checkpoint::loadLatestCheckpointTyped(out);
    EXPECT_TRUE(ckpt.ok()) << ckpt.status();
    if (!ckpt.ok() || ckpt->tensors.size() != 1)
      return {};
    EXPECT_EQ(ckpt->tensors[0].tensor.dtype(), DType::F32);
    EXPECT_EQ(ckpt->step, step);
    EXPECT_EQ(ckpt->tensors[0].name, "transformer.w");
    auto w = ckpt->tensors[0].tensor.span<float>();
    return std::vector<float>(w.begin(), w.end());
  }

  static int count(const std::string &text, const std::string &what) {
    int n = 0;
    for (size_t at = text.find(what); at != std::string::npos;
         at = text.find(what, at + 1))
      ++n;
    return n;
  }

  fs::path dir;
};

TEST_F(RanksTest, TwoRanksTrainLikeOneAndOnlyRankZeroWrites) {
  TrainOptions options;
  options.steps = 3;
  options.outDir = (dir / "two").string();
  std::string log;
  absl::Status s = run(2, 2, options, log);
  ASSERT_TRUE(s.ok()) << s << "\n" << log;
  EXPECT_EQ(savedW(options.outDir, 3), expectedW(3));
  // One progress line per iteration: rank 1 prints nothing.
  EXPECT_EQ(count(log, "iter "), 3) << log;
  // The metric is the all_reduce over both ranks: 2 * w[0]; one line per
  // iteration (rank 1 writes none).
  std::ifstream metrics(dir / "two" / "metrics.jsonl");
  std::string line;
  for (int64_t it = 0; it < 3; ++it) {
    ASSERT_TRUE(std::getline(metrics, line));
    char want[64];
    std::snprintf(want, sizeof(want), "\"loss\": %.9g",
                  2.0f * expectedW(it + 1)[0]);
    EXPECT_NE(line.find(want), std::string::npos) << line << " vs " << want;
  }
  EXPECT_FALSE(std::getline(metrics, line)) << line;
}

TEST_F(RanksTest, CheckpointsMoveBetweenTwoRanksAndOne) {
  // 2 ranks for 2 iterations, then 1 rank (the program without a mesh) to
  // 4, then 2 ranks again to 6: w is what 6 iterations on one rank give.
  TrainOptions options;
  options.outDir = (dir / "run").string();
  options.steps = 2;
  std::string log;
  ASSERT_TRUE(run(2, 2, options, log).ok()) << log;
  options.resume = true;
  options.steps = 4;
  absl::Status s = run(0, 1, options, log);
  ASSERT_TRUE(s.ok()) << s << "\n" << log;
  EXPECT_NE(log.find("resumed from"), std::string::npos) << log;
  EXPECT_EQ(savedW(options.outDir, 4), expectedW(4));
  options.steps = 6;
  s = run(2, 2, options, log);
  ASSERT_TRUE(s.ok()) << s << "\n" << log;
  EXPECT_EQ(savedW(options.outDir, 6), expectedW(6));
}

TEST_F(RanksTest, TheWorldMustBeTheMesh) {
  TrainOptions options;
  std::string log;
  absl::Status s = run(2, 3, options, log);
  EXPECT_EQ(s.message(), "step.bin's mesh 'mesh' (fsdp=2) has 2 ranks but "
                         "omnirun runs 3 (--ranks 3)");
  s = run(0, 2, options, log);
  EXPECT_EQ(s.message(), "step.bin has no mesh, so it runs on 1 rank, but "
                         "omnirun runs 2 (--ranks 2)");
}

TEST_F(RanksTest, TheDeviceFactoryMakesEachLocalRanksDevice) {
  // omnirun --gpus: local rank i gets the device the factory makes for i
  // (a cuda device of ordinal i; cpu devices here). Ranks 2 and 3 of a
  // world of 4, as on the second process of an MPI job, are local 0 and 1.
  auto program = load(2);
  ASSERT_TRUE(program);
  hal::InProcessChannelProvider provider(2, std::chrono::seconds(60));
  std::vector<std::pair<int, int>> made;
  std::mutex mutex;
  RanksOptions ranks;
  ranks.createDevice =
      [&](int rank,
          int localIndex) -> absl::StatusOr<std::unique_ptr<hal::Device>> {
    std::lock_guard<std::mutex> lock(mutex);
    made.emplace_back(rank, localIndex);
    hal::DeviceOptions device;
    device.threads = 1;
    return hal::builtinDrivers().createDevice("cpu", device);
  };
  TrainOptions options;
  options.steps = 2;
  options.outDir = (dir / "factory").string();
  std::ostringstream log;
  absl::Status s = runRanks(program, provider, {0, 1}, ranks, options, log);
  ASSERT_TRUE(s.ok()) << s << "\n" << log.str();
  EXPECT_EQ(made, (std::vector<std::pair<int, int>>{{0, 0}, {1, 1}}));
  EXPECT_EQ(savedW(options.outDir, 2), expectedW(2));

  // A device that cannot be made ends the run before any rank trains,
  // with the factory's line; `how` names where the world size came from.
  ranks.createDevice =
      [](int rank,
         int localIndex) -> absl::StatusOr<std::unique_ptr<hal::Device>> {
    return absl::FailedPreconditionError(absl::StrCat(
        "cuda: no device of ordinal ", localIndex, " for rank ", rank));
  };
  s = runRanks(program, provider, {0, 1}, ranks, options, log);
  EXPECT_EQ(s.message(), "cuda: no device of ordinal 0 for rank 0");
  ranks.how = "--gpus 3";
  hal::InProcessChannelProvider three(3, std::chrono::seconds(60));
  s = runRanks(program, three, {0, 1, 2}, ranks, options, log);
  EXPECT_EQ(s.message(), "step.bin's mesh 'mesh' (fsdp=2) has 2 ranks but "
                         "omnirun runs 3 (--gpus 3)");
}

TEST_F(RanksTest, AFailingRankEndsEveryRankWithItsName) {
  TrainOptions options;
  options.steps = 4;
  options.outDir = (dir / "fail").string();
  options.saveEvery = 1;
  RanksOptions ranks;
  ranks.fault = TestFault{1, 2, TestFault::Mode::Fail};
  std::string log;
  absl::Status s = run(2, 2, options, log, ranks);
  EXPECT_EQ(s.message(),
            "rank 1: iteration 2: failed on purpose (OMNI_TEST_FAULT, "
            "mode=fail) (the state during iteration 2 is not saved: the "
            "failed step may have updated part of it; resume from iteration 2 "
            "in " +
                options.outDir + "/step-2.safetensors)");
  // Rank 0 saved iterations 1 and 2 before rank 1 failed.
  EXPECT_EQ(savedW(options.outDir, 2), expectedW(2));
}

// mode=die kills the process: with both ranks in it, nothing would be left
// to report, so it is refused before anything runs (mpi-ranks.test runs it
// under mpirun).
TEST_F(RanksTest, DyingNeedsOneRankPerProcess) {
  TrainOptions options;
  options.steps = 2;
  options.outDir = (dir / "die").string();
  RanksOptions ranks;
  ranks.fault = TestFault{1, 1, TestFault::Mode::Die};
  std::string log;
  absl::Status s = run(2, 2, options, log, ranks);
  EXPECT_EQ(s.message(),
            "OMNI_TEST_FAULT mode=die kills rank 1's process, which holds all "
            "2 ranks here: it needs one rank per process (mpirun -np N)");
  EXPECT_FALSE(std::filesystem::exists(options.outDir + "/step-1.safetensors"));
}

TEST_F(RanksTest, AStopSeenByOneRankStopsBothAtTheSameIteration) {
  // The third poll is the first of iteration 1, on whichever rank gets
  // there first; the other rank never sees a signal.
  auto polls = std::make_shared<std::atomic<int>>(0);
  TrainOptions options;
  options.steps = 5;
  options.outDir = (dir / "stop").string();
  options.stopRequested = [polls] { return (*polls)++ == 2 ? SIGTERM : 0; };
  std::string log;
  absl::Status s = run(2, 2, options, log);
  EXPECT_TRUE(absl::IsCancelled(s)) << s;
  EXPECT_EQ(s.message(), "interrupted by SIGTERM after iteration 1 of 5: "
                         "saved " +
                             options.outDir +
                             "/step-1.safetensors; continue with --resume " +
                             options.outDir);
  EXPECT_EQ(savedW(options.outDir, 1), expectedW(1));
}

/// The first 3 elements of expectedW(n): w of the sharded programs.
std::vector<float> expectedW3(int64_t n) {
  std::vector<float> w = expectedW(n);
  return {w[0], w[1], w[2]};
}

void expectNear(const std::vector<float> &got, const std::vector<float> &want,
                const std::string &what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-6) << what << " [" << i << "]";
}

TEST_F(RanksTest, ShardedStateCheckpointsLikeOneRank) {
  // The same training unsharded on 1 rank and sharded on 2 (w [3] split 2 +
  // 1 and a padding row): the same whole, unpadded checkpoint.
  TrainOptions one;
  one.steps = 3;
  one.outDir = (dir / "one").string();
  std::string log;
  absl::Status s = runSharded(1, one, log);
  ASSERT_TRUE(s.ok()) << s << "\n" << log;
  TrainOptions two = one;
  two.outDir = (dir / "two").string();
  s = runSharded(2, two, log);
  ASSERT_TRUE(s.ok()) << s << "\n" << log;
  std::vector<float> w1 = savedW(one.outDir, 3), w2 = savedW(two.outDir, 3);
  expectNear(w2, w1, "2 ranks vs 1");
  expectNear(w1, expectedW3(3), "1 rank vs the prompts");
  // The metric (w[0] after the update, all_gathered on 2 ranks) agrees.
  std::ifstream metrics(dir / "two" / "metrics.jsonl");
  std::string line;
  for (int64_t it = 0; it < 3; ++it) {
    ASSERT_TRUE(std::getline(metrics, line));
    char want[64];
    std::snprintf(want, sizeof(want), "\"loss\": %.9g", expectedW(it + 1)[0]);
    EXPECT_NE(line.find(want), std::string::npos) << line << " vs " << want;
  }
}

TEST_F(RanksTest, ShardedStateResumesOnAnotherNumberOfRanks) {
  // 2 ranks to 2, 1 rank to 4, 2 ranks to 6: what 6 iterations give.
  TrainOptions options;
  options.outDir = (dir / "run").string();
  options.steps = 2;
  std::string log;
  absl::Status s = runSharded(2, options, log);
  ASSERT_TRUE(s.ok()) << s << "\n" << log;
  expectNear(savedW(options.outDir, 2), expectedW3(2), "2 ranks, step 2");
  options.resume = true;
  options.steps = 4;
  s = runSharded(1, options, log);
  ASSERT_TRUE(s.ok()) << s << "\n" << log;
  expectNear(savedW(options.outDir, 4), expectedW3(4), "1 rank, step 4");
  options.steps = 6;
  s = runSharded(2, options, log);
  ASSERT_TRUE(s.ok()) << s << "\n" << log;
  EXPECT_NE(log.find("resumed from " + options.outDir + " at iteration 4"),
            std::string::npos)
      << log;
  expectNear(savedW(options.outDir, 6), expectedW3(6), "2 ranks, step 6");
}

TEST_F(RanksTest, InitGivesEachRankItsBlock) {
  std::string path = (dir / "init.safetensors").string();
  ASSERT_TRUE(
      checkpoint::writeSafetensorsTyped(
          path, {{"w", TypedTensor::of<float>(DType::F32, {3},
                                              std::vector<float>{10, 20, 30})}})
          .ok());
  TrainOptions options;
  options.steps = 0;
  options.outDir = (dir / "zero").string();
  options.inits.push_back({"transformer", path});
  std::string log;
  absl::Status s = runSharded(2, options, log);
  ASSERT_TRUE(s.ok()) << s << "\n" << log;
  EXPECT_EQ(savedW(options.outDir, 0), (std::vector<float>{10, 20, 30}));
  // A file of the block's shape is not the parameter.
  ASSERT_TRUE(
      checkpoint::writeSafetensorsTyped(
          path, {{"w", TypedTensor::of<float>(DType::F32, {2},
                                              std::vector<float>{10, 20})}})
          .ok());
  options.outDir = (dir / "bad").string();
  s = runSharded(2, options, log);
  EXPECT_EQ(s.message(), "rank 0: " + path +
                             ": tensor 'w' is tensor<2xf32>, expected "
                             "tensor<3xf32> as state 'transformer.w' is");
}

TEST(TestFault, Parses) {
  auto f = parseTestFault("rank=1,iteration=2,mode=hang");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->rank, 1);
  EXPECT_EQ(f->iteration, 2);
  EXPECT_EQ(f->mode, TestFault::Mode::Hang);
  auto die = parseTestFault("rank=0,iteration=1,mode=die");
  ASSERT_TRUE(die.ok()) << die.status();
  EXPECT_EQ(die->mode, TestFault::Mode::Die);
  auto bad = parseTestFault("rank=1,mode=sleep");
  EXPECT_EQ(bad.status().message(),
            "OMNI_TEST_FAULT='rank=1,mode=sleep': cannot use 'mode=sleep', "
            "expected rank=R,iteration=I,mode=fail|hang|die");
}

} // namespace
} // namespace omni::train
