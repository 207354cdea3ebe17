//===- CollectiveTest.cpp - Collective commands on 2-4 ranks ----*- C++ -*-===//
//
// Hand-built step.bin programs with Collective commands, run by one
// executor per rank; the ranks are threads with their own cpu devices and
// in-process channels. Expected values follow from the mesh's row-major
// rank numbering (docs/backend.md, "Channels and the mesh"), computed here
// from each rank's coordinates; AxisIndex gives each rank its group rank.
// Then the errors: no channel, a channel of
// the wrong size, and a rank whose run fails, which must fail the others'
// collectives instead of hanging them.
//
//===----------------------------------------------------------------------===//

#include "runtime/executor/Executor.h"
#include "runtime/hal/drivers/Drivers.h"
#include "runtime/loader/testing/StepBuilder.h"

#include "gtest/gtest.h"

#include <functional>
#include <thread>

namespace omni::executor {
namespace {

using omni::testing::CommandRef;
using omni::testing::StepBuilder;
using step::CollectiveKind;
using step::ReduceOp;
using Collective = StepBuilder::CollectiveSpec;

constexpr std::chrono::milliseconds kTestTimeout = std::chrono::seconds(60);

std::shared_ptr<const loader::Program> load(const std::string &bytes) {
  auto program = loader::Program::loadBytes(bytes);
  EXPECT_TRUE(program.ok()) << program.status();
  return program.ok() ? *program : nullptr;
}

Collective collective(CollectiveKind kind, std::vector<uint32_t> axes,
                      uint32_t operand, uint32_t result, int64_t dim = 0,
                      ReduceOp op = ReduceOp::Sum, int64_t root = 0) {
  Collective c;
  c.kind = kind;
  c.axes = std::move(axes);
  c.operand = operand;
  c.result = result;
  c.dim = dim;
  c.op = op;
  c.root = root;
  return c;
}

/// One rank: its own device and channel of an in-process group.
struct Rank {
  std::unique_ptr<hal::Device> device;
  std::unique_ptr<hal::Channel> channel;
};

std::vector<Rank> makeRanks(int n) {
  hal::InProcessChannelProvider provider(n, kTestTimeout);
  std::vector<Rank> ranks(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    hal::DeviceOptions options;
    options.threads = 1;
    ranks[r].device = *hal::builtinDrivers().createDevice("cpu", options);
    auto channel = ranks[r].device->createChannel(*provider.spec(r));
    EXPECT_TRUE(channel.ok()) << channel.status();
    ranks[r].channel = std::move(*channel);
  }
  return ranks;
}

/// Runs fn(rank) on one thread per rank.
void onEveryRank(std::vector<Rank> &ranks,
                 const std::function<void(int, Rank &)> &fn) {
  std::vector<std::thread> threads;
  for (size_t r = 0; r < ranks.size(); ++r)
    threads.emplace_back([&, r] { fn(static_cast<int>(r), ranks[r]); });
  for (std::thread &t : threads)
    t.join();
}

/// Element (i, j) of rank r's input: distinct small integers.
double x(int r, int64_t i, int64_t j) { return r * 10 + i * 4 + j; }

TEST(Collective, FourRanksOnATwoByTwoMesh) {
  // Mesh dp=2 x tp=2: rank r has dp = r / 2, tp = r % 2.
  StepBuilder b;
  b.mesh({"m", {"dp", "tp"}, {2, 2}});
  uint32_t in = b.argument(step::DType::F32, {2, 4}, 0, "x");
  uint32_t sum = b.arena(step::DType::F32, {2, 4}, "sum");
  uint32_t gathered = b.arena(step::DType::F32, {2, 8}, "gathered");
  uint32_t scattered = b.arena(step::DType::F32, {2, 2}, "scattered");
  uint32_t maxed = b.arena(step::DType::F32, {2, 1}, "maxed");
  uint32_t bcast = b.arena(step::DType::F32, {2, 4}, "bcast");
  uint32_t stacked = b.arena(step::DType::F32, {4, 4}, "stacked");
  std::vector<CommandRef> commands = {
      // Over every rank, in rank order.
      b.collective(collective(CollectiveKind::AllReduce, {0, 1}, in, sum)),
      // Along dim 1 over tp: the two ranks of a dp row, interleaved.
      b.collective(collective(CollectiveKind::AllGather, {1}, in, gathered, 1)),
      // Sum over dp of column slices: group rank = dp.
      b.collective(
          collective(CollectiveKind::ReduceScatter, {0}, in, scattered, 1)),
      // Max over tp-major order (group rank = tp * 2 + dp), one column
      // each.
      b.collective(collective(CollectiveKind::ReduceScatter, {1, 0}, in, maxed,
                              1, ReduceOp::Max)),
      // Root 1 of the dp column: the rank with dp = 1.
      b.collective(collective(CollectiveKind::Broadcast, {0}, in, bcast, 0,
                              ReduceOp::Sum, 1)),
      // Along the outer dim over dp: contiguous.
      b.collective(collective(CollectiveKind::AllGather, {0}, in, stacked, 0)),
  };
  b.function("f", {in}, {sum, gathered, scattered, maxed, bcast, stacked},
             commands);
  auto program = load(b.finish());
  ASSERT_TRUE(program);

  std::vector<Rank> ranks = makeRanks(4);
  onEveryRank(ranks, [&](int r, Rank &rank) {
    ExecutorOptions options;
    options.channel = rank.channel.get();
    auto executor = Executor::create(program, *rank.device, options);
    ASSERT_TRUE(executor.ok()) << executor.status();
    std::vector<double> input;
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 4; ++j)
        input.push_back(x(r, i, j));
    auto outputs = runHostTensors(
        **executor, "f", {HostTensor::fromDoubles(DType::F32, {2, 4}, input)});
    ASSERT_TRUE(outputs.ok()) << outputs.status();
    const int dp = r / 2, tp = r % 2;
    auto at = [&](int k) { return (*outputs)[k].floats(); };
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 4; ++j) {
        double total = 0;
        for (int q = 0; q < 4; ++q)
          total += x(q, i, j);
        EXPECT_EQ(at(0)[i * 4 + j], total) << "sum, rank " << r;
        for (int k = 0; k < 2; ++k)
          EXPECT_EQ(at(1)[i * 8 + k * 4 + j], x(dp * 2 + k, i, j))
              << "gather, rank " << r;
        EXPECT_EQ(at(4)[i * 4 + j], x(1 * 2 + tp, i, j))
            << "broadcast, rank " << r;
        for (int k = 0; k < 2; ++k)
          EXPECT_EQ(at(5)[(k * 2 + i) * 4 + j], x(k * 2 + tp, i, j))
              << "stacked, rank " << r;
      }
      for (int j = 0; j < 2; ++j)
        EXPECT_EQ(at(2)[i * 2 + j],
                  x(0 * 2 + tp, i, dp * 2 + j) + x(1 * 2 + tp, i, dp * 2 + j))
            << "scatter, rank " << r;
      const int column = tp * 2 + dp;
      EXPECT_EQ(at(3)[i], x(3, i, column)) << "max, rank " << r;
    }
  });
}

TEST(Collective, TwoThreeAndFourRanksOnALine) {
  for (int n = 2; n <= 4; ++n) {
    StepBuilder b;
    b.mesh({"line", {"dp"}, {n}});
    uint32_t f = b.argument(step::DType::F32, {2 * n}, 0, "f");
    uint32_t i = b.argument(step::DType::I64, {3}, 1, "i");
    uint32_t p = b.argument(step::DType::I1, {3}, 2, "p");
    uint32_t mean = b.arena(step::DType::F32, {2 * n});
    uint32_t part = b.arena(step::DType::F32, {2});
    uint32_t all = b.arena(step::DType::I64, {3 * n});
    uint32_t root = b.arena(step::DType::I1, {3});
    b.function(
        "f", {f, i, p}, {mean, part, all, root},
        {b.collective(collective(CollectiveKind::AllReduce, {0}, f, mean, 0,
                                 ReduceOp::Mean)),
         b.collective(collective(CollectiveKind::ReduceScatter, {0}, f, part)),
         b.collective(collective(CollectiveKind::AllGather, {0}, i, all)),
         // In place: the operand is the result.
         b.collective(collective(CollectiveKind::Broadcast, {0}, p, p, 0,
                                 ReduceOp::Sum, n - 1)),
         b.copy(p, root)});
    auto program = load(b.finish());
    ASSERT_TRUE(program);
    std::vector<Rank> ranks = makeRanks(n);
    onEveryRank(ranks, [&](int r, Rank &rank) {
      ExecutorOptions options;
      options.channel = rank.channel.get();
      auto executor = Executor::create(program, *rank.device, options);
      ASSERT_TRUE(executor.ok()) << executor.status();
      std::vector<double> fv;
      for (int k = 0; k < 2 * n; ++k)
        fv.push_back(r * 0.5 + k);
      auto outputs =
          runHostTensors(**executor, "f",
                         {HostTensor::fromDoubles(DType::F32, {2 * n}, fv),
                          HostTensor::fromInts(DType::I64, {3},
                                               {r, -r, int64_t(1) << (40 + r)}),
                          HostTensor::fromInts(DType::I1, {3}, {r % 2, 1, 0})});
      ASSERT_TRUE(outputs.ok()) << outputs.status();
      // Mean of r * 0.5 + k over r: 0.25 (n - 1) + k, exact in f32.
      for (int k = 0; k < 2 * n; ++k)
        EXPECT_EQ((*outputs)[0].floats()[k], 0.25 * (n - 1) + k) << n;
      for (int k = 0; k < 2; ++k) {
        double want = 0;
        for (int q = 0; q < n; ++q)
          want += q * 0.5 + (2 * r + k);
        EXPECT_EQ((*outputs)[1].floats()[k], want) << n;
      }
      for (int q = 0; q < n; ++q) {
        EXPECT_EQ((*outputs)[2].ints()[3 * q], q);
        EXPECT_EQ((*outputs)[2].ints()[3 * q + 1], -q);
        EXPECT_EQ((*outputs)[2].ints()[3 * q + 2], int64_t(1) << (40 + q));
      }
      EXPECT_EQ((*outputs)[3],
                HostTensor::fromInts(DType::I1, {3}, {(n - 1) % 2, 1, 0}));
    });
  }
}

/// f(x: f32[4]) -> all_reduce sum over mesh 'm' (dp=2) of x.
std::string allReduceProgram(int64_t ranks = 2) {
  StepBuilder b;
  b.mesh({"m", {"dp"}, {ranks}});
  uint32_t in = b.argument(step::DType::F32, {4}, 0, "x");
  uint32_t out = b.arena(step::DType::F32, {4});
  b.function(
      "f", {in}, {out},
      {b.fill(out, {0, 0, 0, 0}),
       b.collective(collective(CollectiveKind::AllReduce, {0}, in, out))});
  return b.finish();
}

TEST(Collective, NeedsAChannelOfTheMeshSize) {
  auto program = load(allReduceProgram());
  auto device = *hal::builtinDrivers().createDevice("cpu", {});
  auto none = Executor::create(program, *device);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(none.status().message(),
            "step.bin: functions[0].commands[1] (Collective AllReduce): the "
            "program runs on mesh 'm' (dp=2) of 2 ranks but the executor has "
            "no channel");
  auto loopback = device->createChannel(hal::ChannelSpec{});
  ASSERT_TRUE(loopback.ok());
  ExecutorOptions options;
  options.channel = loopback->get();
  auto wrong = Executor::create(program, *device, options);
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(wrong.status().message(),
            "step.bin: functions[0].commands[1] (Collective AllReduce): mesh "
            "'m' (dp=2) has 2 ranks but the channel has 1");

  // The failed create() aborted the channel; a one-rank mesh runs on a
  // fresh loopback channel.
  loopback = device->createChannel(hal::ChannelSpec{});
  ASSERT_TRUE(loopback.ok());
  options.channel = loopback->get();
  auto single = load(allReduceProgram(1));
  auto executor = Executor::create(single, *device, options);
  ASSERT_TRUE(executor.ok()) << executor.status();
  auto outputs =
      runHostTensors(**executor, "f",
                     {HostTensor::fromDoubles(DType::F32, {4}, {1, 2, 3, 4})});
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  EXPECT_EQ((*outputs)[0],
            HostTensor::fromDoubles(DType::F32, {4}, {1, 2, 3, 4}));
}

/// A program whose `f` writes this rank's AxisIndex over the last mesh
/// axis, over all axes, and over all axes in reverse order, then gathers
/// its 1x3 input along dim 0 over the last axis.
std::string axisIndexProgram(StepBuilder::MeshSpec mesh) {
  StepBuilder b;
  const uint32_t numAxes = static_cast<uint32_t>(mesh.axes.size());
  const int64_t last = mesh.shape.back();
  b.mesh(std::move(mesh));
  std::vector<uint32_t> all(numAxes), reversed(numAxes);
  for (uint32_t a = 0; a < numAxes; ++a) {
    all[a] = a;
    reversed[a] = numAxes - 1 - a;
  }
  uint32_t in = b.argument(step::DType::F32, {1, 3}, 0, "x");
  uint32_t inner = b.arena(step::DType::I64, {}, "inner");
  uint32_t whole = b.arena(step::DType::I64, {}, "whole");
  uint32_t backwards = b.arena(step::DType::I64, {}, "backwards");
  uint32_t gathered = b.arena(step::DType::F32, {last, 3}, "gathered");
  b.function("f", {in}, {inner, whole, backwards, gathered},
             {b.axisIndex(0, {numAxes - 1}, inner), b.axisIndex(0, all, whole),
              b.axisIndex(0, reversed, backwards),
              b.collective(collective(CollectiveKind::AllGather, {numAxes - 1},
                                      in, gathered, 0))});
  return b.finish();
}

TEST(Collective, AxisIndexIsTheGroupRank) {
  // fsdp=2 (2 ranks), then dp=2 x fsdp=2 (4 ranks): rank r has
  // fsdp = r % 2 and dp = r / 2 (0 on the line); over (fsdp, dp) the group
  // rank is fsdp * dp_size + dp.
  for (int n : {2, 4}) {
    auto program =
        load(n == 2 ? axisIndexProgram({"m", {"fsdp"}, {2}})
                    : axisIndexProgram({"m", {"dp", "fsdp"}, {2, 2}}));
    ASSERT_TRUE(program);
    const int dpSize = n / 2;
    std::vector<Rank> ranks = makeRanks(n);
    onEveryRank(ranks, [&](int r, Rank &rank) {
      ExecutorOptions options;
      options.channel = rank.channel.get();
      auto executor = Executor::create(program, *rank.device, options);
      ASSERT_TRUE(executor.ok()) << executor.status();
      auto outputs = runHostTensors(
          **executor, "f",
          {HostTensor::fromDoubles(DType::F32, {1, 3},
                                   {x(r, 0, 0), x(r, 0, 1), x(r, 0, 2)})});
      ASSERT_TRUE(outputs.ok()) << outputs.status();
      const int fsdp = r % 2, dp = r / 2;
      EXPECT_EQ((*outputs)[0], HostTensor::fromInts(DType::I64, {}, {fsdp}))
          << n << " ranks, rank " << r;
      EXPECT_EQ((*outputs)[1], HostTensor::fromInts(DType::I64, {}, {r}))
          << n << " ranks, rank " << r;
      EXPECT_EQ((*outputs)[2],
                HostTensor::fromInts(DType::I64, {}, {fsdp * dpSize + dp}))
          << n << " ranks, rank " << r;
      // The gather over fsdp stacks the rows of this dp row's two ranks,
      // in the order their AxisIndex over fsdp gives.
      std::vector<double> want;
      for (int k = 0; k < 2; ++k)
        for (int j = 0; j < 3; ++j)
          want.push_back(x(dp * 2 + k, 0, j));
      EXPECT_EQ((*outputs)[3],
                HostTensor::fromDoubles(DType::F32, {2, 3}, want))
          << n << " ranks, rank " << r;
    });
  }
}

TEST(Collective, AxisIndexNeedsAChannelOfTheMeshSize) {
  auto device = *hal::builtinDrivers().createDevice("cpu", {});
  auto indexOnly = [](StepBuilder::MeshSpec mesh) {
    StepBuilder b;
    b.mesh(std::move(mesh));
    uint32_t k = b.arena(step::DType::I64, {}, "k");
    b.function("f", {}, {k}, {b.axisIndex(0, {0}, k)});
    return b.finish();
  };
  auto program = load(indexOnly({"m", {"dp"}, {2}}));
  auto none = Executor::create(program, *device);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(none.status().message(),
            "step.bin: functions[0].commands[0] (AxisIndex): the program runs "
            "on mesh 'm' (dp=2) of 2 ranks but the executor has no channel");
  auto loopback = device->createChannel(hal::ChannelSpec{});
  ASSERT_TRUE(loopback.ok());
  ExecutorOptions options;
  options.channel = loopback->get();
  auto wrong = Executor::create(program, *device, options);
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(wrong.status().message(),
            "step.bin: functions[0].commands[0] (AxisIndex): mesh 'm' (dp=2) "
            "has 2 ranks but the channel has 1");
  // A one-rank mesh needs no channel: the index is 0.
  auto single = Executor::create(load(indexOnly({"m", {"dp"}, {1}})), *device);
  ASSERT_TRUE(single.ok()) << single.status();
  auto outputs = runHostTensors(**single, "f", {});
  ASSERT_TRUE(outputs.ok()) << outputs.status();
  EXPECT_EQ((*outputs)[0], HostTensor::fromInts(DType::I64, {}, {0}));
}

TEST(Collective, AFailedRunOnOneRankFailsTheOthers) {
  // Rank 1's run stops at its budget before the all_reduce; rank 0, waiting
  // in the all_reduce, fails with rank 1's reason instead of hanging.
  auto program = load(allReduceProgram());
  std::vector<Rank> ranks = makeRanks(2);
  std::vector<absl::Status> results(2);
  onEveryRank(ranks, [&](int r, Rank &rank) {
    ExecutorOptions options;
    options.channel = rank.channel.get();
    options.commandBudget = r == 1 ? 1 : 0;
    auto executor = Executor::create(program, *rank.device, options);
    ASSERT_TRUE(executor.ok()) << executor.status();
    results[r] =
        (*executor)
            ->run("f", {HostTensor::fromDoubles(DType::F32, {4}, {1, 2, 3, 4})})
            .status();
  });
  EXPECT_EQ(results[1].code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(results[0].code(), absl::StatusCode::kAborted);
  EXPECT_EQ(results[0].message(),
            "step.bin: functions[0].commands[1] (Collective AllReduce): the "
            "channel group was aborted by rank 1: step.bin: "
            "functions[0].commands[1] (Collective): the run exceeded its "
            "budget of 1 commands");
}

TEST(Collective, AFailedCreateOnOneRankFailsTheOthers) {
  // Rank 1 runs another program on the same mesh: its create() fails (a
  // target the device does not have) and aborts the group, so rank 0's
  // create - which splits the channel for the tp axis - fails too.
  StepBuilder b;
  b.mesh({"m", {"dp", "tp"}, {1, 2}});
  uint32_t in = b.argument(step::DType::F32, {4}, 0, "x");
  b.function(
      "f", {in}, {},
      {b.collective(collective(CollectiveKind::AllReduce, {1}, in, in))});
  auto good = load(b.finish());
  StepBuilder c;
  c.targetKind = "cuda";
  c.mesh({"m", {"dp", "tp"}, {1, 2}});
  in = c.argument(step::DType::F32, {4}, 0, "x");
  c.function(
      "f", {in}, {},
      {c.collective(collective(CollectiveKind::AllReduce, {1}, in, in))});
  auto bad = load(c.finish());
  std::vector<Rank> ranks = makeRanks(2);
  std::vector<absl::Status> results(2);
  onEveryRank(ranks, [&](int r, Rank &rank) {
    ExecutorOptions options;
    options.channel = rank.channel.get();
    results[r] =
        Executor::create(r == 0 ? good : bad, *rank.device, options).status();
  });
  EXPECT_EQ(results[1].message(),
            "step.bin: target.kind = 'cuda' but the device is cpu (1 threads)");
  EXPECT_EQ(results[0].code(), absl::StatusCode::kAborted);
  EXPECT_EQ(results[0].message(),
            "step.bin: functions[0].commands[0] (Collective AllReduce): the "
            "group over 'tp': the channel group was aborted by rank 1: "
            "step.bin: target.kind = 'cuda' but the device is cpu (1 threads)");
}

} // namespace
} // namespace omni::executor
