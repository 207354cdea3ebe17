//===- ExecutorTest.cpp - Every command kind, checked numerically ---------===//
//
// Programs are built with StepBuilder (omnic does not write step.bin yet),
// loaded through the real loader and run on the cpu device. Each command
// kind is checked against an independent computation: naive loops for the
// library calls, runtime/flowgrpo's Philox bit for bit for Random,
// computeReward for HostCall, the kernel's formula for Dispatch. Graphs
// are ExecutorGraphsTest.cpp's; the fixture and shared helpers are in
// testing/ExecutorTesting.h.
//
//===----------------------------------------------------------------------===//

#include "runtime/executor/Executor.h"
#include "runtime/executor/Profile.h"
#include "runtime/executor/testing/ExecutorTesting.h"

#include "runtime/flowgrpo/Philox.h"
#include "runtime/hal/drivers/Drivers.h"
#include "runtime/loader/testing/StepBuilder.h"
#include "runtime/train/rewards/RewardFunctions.h"
#include "runtime/train/rewards/Rewards.h"

#include "gtest/gtest.h"

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <random>

namespace omni::executor {
namespace {

using namespace test;

//===----------------------------------------------------------------------===//
// Dispatch
//===----------------------------------------------------------------------===//

std::string addProgram(int64_t n) {
  StepBuilder b;
  uint32_t exe = b.executable(testKernels());
  uint32_t x = b.argument(sd::DType::F32, {n}, 0, "x");
  uint32_t y = b.argument(sd::DType::F32, {n}, 1, "y");
  uint32_t z = b.arena(sd::DType::F32, {n}, "z");
  b.function("add", {x, y}, {z}, {b.dispatch(exe, 0, n, {x, y}, {z})});
  return b.finish();
}

TEST_F(ExecutorTest, DispatchRunsTheEmbeddedKernel) {
  const int64_t n = 1000;
  HostTensor x = f32({n}, 1), y = f32({n}, 2);
  for (int threads : {1, 3, 8}) {
    auto device = makeDevice(threads);
    auto executor = load(addProgram(n), {}, device.get());
    ASSERT_TRUE(executor.ok()) << executor.status();
    auto out = (*executor)->run("add", {x, y});
    ASSERT_TRUE(out.ok()) << out.status();
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(out->at(0).span<float>()[i],
                double(float(x.floats()[i]) + float(y.floats()[i])));
  }
}

//===----------------------------------------------------------------------===//
// Library calls
//===----------------------------------------------------------------------===//

TEST_F(ExecutorTest, MatmulMatchesANaiveLoop) {
  // [3, 4, 5] x [5, 6] (shared rhs, transposed in the file as [6, 5]).
  StepBuilder b;
  uint32_t lhs = b.argument(sd::DType::F32, {3, 4, 5}, 0);
  uint32_t rhs = b.argument(sd::DType::F32, {6, 5}, 1);
  uint32_t out = b.arena(sd::DType::F32, {3, 4, 6});
  b.function("mm", {lhs, rhs}, {out},
             {b.library(Library::Matmul, {lhs, rhs}, {out}, {0, 1})});
  HostTensor l = f32({3, 4, 5}, 3), r = f32({6, 5}, 4);
  std::vector<double> want;
  for (int64_t bt = 0; bt < 3; ++bt)
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t j = 0; j < 6; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < 5; ++k)
          acc += l.floats()[(bt * 4 + i) * 5 + k] * r.floats()[j * 5 + k];
        want.push_back(acc);
      }
  auto results = run(b.finish(), "mm", {l, r});
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].shape(), (std::vector<int64_t>{3, 4, 6}));
  expectNear(results[0], want, 1e-5);
}

TEST_F(ExecutorTest, Conv2dMatchesANaiveLoop) {
  // stride (2, 1), padding (1, 0), dilation (1, 2).
  StepBuilder b;
  uint32_t x = b.argument(sd::DType::F64, {2, 3, 7, 9}, 0);
  uint32_t w = b.argument(sd::DType::F64, {4, 3, 3, 2}, 1);
  const int64_t outH = (7 + 2 - 2 - 1) / 2 + 1, outW = (9 - 2 - 1) / 1 + 1;
  uint32_t y = b.arena(sd::DType::F64, {2, 4, outH, outW});
  b.function("conv", {x, w}, {y},
             {b.library(Library::Conv2d, {x, w}, {y}, {2, 1, 1, 0, 1, 2})});
  HostTensor xs = HostTensor::fromDoubles(DType::F64, {2, 3, 7, 9},
                                          randomValues(2 * 3 * 7 * 9, 5));
  HostTensor ws = HostTensor::fromDoubles(DType::F64, {4, 3, 3, 2},
                                          randomValues(4 * 3 * 3 * 2, 6));
  std::vector<double> want;
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t o = 0; o < 4; ++o)
      for (int64_t oy = 0; oy < outH; ++oy)
        for (int64_t ox = 0; ox < outW; ++ox) {
          double acc = 0;
          for (int64_t c = 0; c < 3; ++c)
            for (int64_t ky = 0; ky < 3; ++ky)
              for (int64_t kx = 0; kx < 2; ++kx) {
                int64_t iy = oy * 2 - 1 + ky, ix = ox - 0 + kx * 2;
                if (iy >= 0 && iy < 7 && ix >= 0 && ix < 9)
                  acc += xs.floats()[((n * 3 + c) * 7 + iy) * 9 + ix] *
                         ws.floats()[((o * 3 + c) * 3 + ky) * 2 + kx];
              }
          want.push_back(acc);
        }
  auto results = run(b.finish(), "conv", {xs, ws});
  ASSERT_EQ(results.size(), 1u);
  expectNear(results[0], want, 1e-12);
}

TEST_F(ExecutorTest, AttentionMatchesANaiveSoftmax) {
  const int64_t B = 2, H = 2, Sq = 3, Sk = 5, D = 4, Dv = 3;
  StepBuilder b;
  uint32_t q = b.argument(sd::DType::F32, {B, H, Sq, D}, 0);
  uint32_t k = b.argument(sd::DType::F32, {B, H, Sk, D}, 1);
  uint32_t v = b.argument(sd::DType::F32, {B, H, Sk, Dv}, 2);
  uint32_t m = b.argument(sd::DType::F32, {1, H, Sq, Sk}, 3);
  uint32_t o = b.arena(sd::DType::F32, {B, H, Sq, Dv});
  uint32_t o2 = b.arena(sd::DType::F32, {B, H, Sq, Dv});
  // Default scale (1/sqrt(D)) with a mask broadcast over the batch, and an
  // explicit scale without a mask.
  b.function("attn", {q, k, v, m}, {o, o2},
             {b.library(Library::Attention, {q, k, v, m}, {o}, {1}),
              b.library(Library::Attention, {q, k, v}, {o2}, {0}, {0.25})});
  HostTensor qs = f32({B, H, Sq, D}, 7), ks = f32({B, H, Sk, D}, 8),
             vs = f32({B, H, Sk, Dv}, 9), ms = f32({1, H, Sq, Sk}, 10);
  auto naive = [&](double scale, bool masked) {
    std::vector<double> out;
    for (int64_t bb = 0; bb < B; ++bb)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < Sq; ++i) {
          std::vector<double> s(Sk);
          double max = -1e300, sum = 0;
          for (int64_t j = 0; j < Sk; ++j) {
            double dot = 0;
            for (int64_t d = 0; d < D; ++d)
              dot += qs.floats()[((bb * H + h) * Sq + i) * D + d] *
                     ks.floats()[((bb * H + h) * Sk + j) * D + d];
            s[j] =
                dot * scale + (masked ? ms.floats()[(h * Sq + i) * Sk + j] : 0);
            max = std::max(max, s[j]);
          }
          for (double &x : s)
            sum += (x = std::exp(x - max));
          for (int64_t e = 0; e < Dv; ++e) {
            double acc = 0;
            for (int64_t j = 0; j < Sk; ++j)
              acc += s[j] / sum * vs.floats()[((bb * H + h) * Sk + j) * Dv + e];
            out.push_back(acc);
          }
        }
    return out;
  };
  auto results = run(b.finish(), "attn", {qs, ks, vs, ms});
  ASSERT_EQ(results.size(), 2u);
  expectNear(results[0], naive(0.5, true), 1e-5);
  expectNear(results[1], naive(0.25, false), 1e-5);
}

TEST_F(ExecutorTest, UnsupportedLibraryDTypeFailsAtCreate) {
  StepBuilder b;
  uint32_t x = b.arena(sd::DType::F16, {2, 2});
  b.function("mm", {}, {}, {b.library(Library::Matmul, {x, x}, {x}, {0, 0})});
  auto executor = load(b.finish());
  ASSERT_FALSE(executor.ok());
  EXPECT_EQ(executor.status().message(),
            "step.bin: functions[0].commands[0] (LibraryCall Matmul): the cpu "
            "device has no Matmul for f16");
}

// The cpu AttentionBackward is f32 and bf16 (widened), not f64 (the VJP
// never emits it for f64: the op is f32, bf16 or f16).
TEST_F(ExecutorTest, AttentionBackwardIsNotF64) {
  StepBuilder b;
  uint32_t x = b.arena(sd::DType::F64, {1, 1, 2, 2});
  b.function(
      "g", {}, {},
      {b.library(Library::AttentionBackward, {x, x, x, x, x}, {x, x, x}, {})});
  auto executor = load(b.finish());
  ASSERT_FALSE(executor.ok());
  EXPECT_EQ(executor.status().message(),
            "step.bin: functions[0].commands[0] (LibraryCall "
            "AttentionBackward): the cpu device has no AttentionBackward for "
            "f64");
}

//===----------------------------------------------------------------------===//
// Random, Fill, HostCall
//===----------------------------------------------------------------------===//

TEST_F(ExecutorTest, RandomIsPhiloxBitForBit) {
  StepBuilder b;
  uint32_t key = b.argument(sd::DType::I64, {}, 0, "key");
  uint32_t ctr = b.argument(sd::DType::I64, {}, 1, "counter");
  uint32_t off = b.argument(sd::DType::I64, {}, 2, "offset");
  uint32_t normal = b.arena(sd::DType::F32, {3, 5});
  uint32_t uniform = b.arena(sd::DType::F64, {7});
  b.function("rng", {key, ctr, off}, {normal, uniform},
             {b.random(sd::Distribution::Normal, key, ctr, off, normal),
              b.random(sd::Distribution::Uniform, key, ctr, off, uniform)});
  const int64_t seed = 42, counter = -4, offset = 100;
  auto results = run(b.finish(), "rng",
                     {HostTensor::scalarInt(DType::I64, seed),
                      HostTensor::scalarInt(DType::I64, counter),
                      HostTensor::scalarInt(DType::I64, offset)});
  ASSERT_EQ(results.size(), 2u);
  float n[15], u[7];
  flowgrpo::philoxNormal(seed, counter, offset, n, 15);
  flowgrpo::philoxUniform(seed, counter, offset, u, 7);
  for (int i = 0; i < 15; ++i) {
    float got = static_cast<float>(results[0].floats()[i]);
    EXPECT_EQ(std::memcmp(&got, &n[i], 4), 0) << i;
  }
  for (int i = 0; i < 7; ++i)
    EXPECT_EQ(results[1].floats()[i], static_cast<double>(u[i])) << i;
}

TEST_F(ExecutorTest, FillRepeatsThePattern) {
  StepBuilder b;
  uint32_t t = b.arena(sd::DType::F32, {5});
  uint32_t i = b.arena(sd::DType::I32, {2, 2});
  float value = 1.5f;
  std::vector<uint8_t> pattern(4);
  std::memcpy(pattern.data(), &value, 4);
  b.function(
      "fill", {}, {t, i},
      {b.fill(t, pattern), b.fill(i, {7, 0, 0, 0, 0xff, 0xff, 0xff, 0xff})});
  auto results = run(b.finish(), "fill", {});
  ASSERT_EQ(results.size(), 2u);
  for (double v : results[0].floats())
    EXPECT_EQ(v, 1.5);
  EXPECT_EQ(
      std::vector<int64_t>(results[1].ints().begin(), results[1].ints().end()),
      (std::vector<int64_t>{7, -1, 7, -1}));
}

TEST_F(ExecutorTest, HostCallsComputeRewards) {
  const int64_t N = 2, H = 8, W = 8;
  StepBuilder b;
  uint32_t images = b.argument(sd::DType::F32, {N, 3, H, W}, 0);
  uint32_t bright = b.arena(sd::DType::F32, {N});
  uint32_t jpeg = b.arena(sd::DType::F64, {N});
  b.function("reward", {images}, {bright, jpeg},
             {b.hostCall("brightness", {images}, {bright}),
              b.hostCall("jpeg_compressibility", {images}, {jpeg})});
  HostTensor x = f32({N, 3, H, W}, 11);
  for (double &v : x.floats())
    v = float(0.5 + 0.5 * v);
  ExecutorOptions options;
  rewards::registerRewards(options.hostFunctions);
  auto executor = load(b.finish(), std::move(options));
  ASSERT_TRUE(executor.ok()) << executor.status();
  auto run = runHostTensors(**executor, "reward", {x});
  ASSERT_TRUE(run.ok()) << run.status();
  std::vector<HostTensor> results = std::move(*run);
  ASSERT_EQ(results.size(), 2u);
  std::vector<float> pixels(x.floats().begin(), x.floats().end());
  rewards::ImageBatch batch{pixels.data(), {N, 3, H, W}};
  auto wantBright = rewards::computeReward("brightness", batch);
  auto wantJpeg = rewards::computeReward("jpeg_compressibility", batch);
  ASSERT_TRUE(wantBright.ok() && wantJpeg.ok());
  for (int64_t i = 0; i < N; ++i) {
    EXPECT_EQ(results[0].floats()[i], double((*wantBright)[i]));
    EXPECT_EQ(results[1].floats()[i], double((*wantJpeg)[i]));
  }
}

TEST_F(ExecutorTest, UnknownHostFunctionFailsAtCreate) {
  StepBuilder b;
  b.function("f", {}, {}, {b.hostCall("aesthetic", {}, {})});
  ExecutorOptions options;
  rewards::registerRewards(options.hostFunctions);
  auto executor = load(b.finish(), std::move(options));
  ASSERT_FALSE(executor.ok());
  EXPECT_EQ(executor.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(executor.status().message(),
            "step.bin: functions[0].commands[0] (HostCall): unknown host "
            "function 'aesthetic' (registered: brightness, "
            "jpeg_compressibility, jpeg_incompressibility)");
}

TEST_F(ExecutorTest, KnowsNoHostFunctionUnlessTheCallerRegistersIt) {
  // The executor does not depend on runtime/train: not even the rewards are
  // there by default.
  StepBuilder b;
  uint32_t images = b.argument(sd::DType::F32, {1, 3, 2, 2}, 0);
  uint32_t bright = b.arena(sd::DType::F32, {1});
  b.function("f", {images}, {bright},
             {b.hostCall("brightness", {images}, {bright})});
  auto executor = load(b.finish());
  ASSERT_FALSE(executor.ok());
  EXPECT_EQ(executor.status().message(),
            "step.bin: functions[0].commands[0] (HostCall): unknown host "
            "function 'brightness' (registered: none)");
}

TEST_F(ExecutorTest, HostFunctionResultsAreChecked) {
  StepBuilder b;
  uint32_t out = b.arena(sd::DType::F32, {3});
  b.function("f", {}, {out}, {b.hostCall("two", {}, {out})});
  ExecutorOptions options;
  options.hostFunctions.add("two", [](absl::Span<const HostTensor>) {
    return absl::StatusOr<std::vector<HostTensor>>(
        std::vector<HostTensor>{HostTensor(DType::F32, {2})});
  });
  auto executor = load(b.finish(), options);
  ASSERT_TRUE(executor.ok()) << executor.status();
  auto results = (*executor)->run("f", {});
  ASSERT_FALSE(results.ok());
  EXPECT_EQ(results.status().message(),
            "step.bin: functions[0].commands[0] (HostCall): host function "
            "'two' returned tensor<2xf32> for results[0], which is "
            "tensor<3xf32>");
}

//===----------------------------------------------------------------------===//
// Asynchronous host calls (docs/backend.md, "Asynchronous host calls")
//===----------------------------------------------------------------------===//

TEST_F(ExecutorTest, ConcurrentHostCallOverlapsTheCommandsAfterIt) {
  // f(x, y) = r + z with r = slow(x) = 2x and z = x + y: `slow` waits until
  // the synchronous `release` has seen the dispatch of z, which comes after
  // it, so the run completes only if slow runs while the executor goes on.
  const int64_t n = 64;
  StepBuilder b;
  uint32_t exe = b.executable(testKernels());
  uint32_t x = b.argument(sd::DType::F32, {n}, 0, "x");
  uint32_t y = b.argument(sd::DType::F32, {n}, 1, "y");
  uint32_t r = b.arena(sd::DType::F32, {n}, "r");
  uint32_t z = b.arena(sd::DType::F32, {n}, "z");
  uint32_t out = b.arena(sd::DType::F32, {n}, "out");
  b.function("f", {x, y}, {out},
             {b.hostCall("slow", {x}, {r}), b.dispatch(exe, 0, n, {x, y}, {z}),
              b.hostCall("release", {z}, {}),
              b.dispatch(exe, 0, n, {r, z}, {out})});
  HostTensor hx = f32({n}, 1), hy = f32({n}, 2);
  Gate gate;
  bool sawZ = false;
  ExecutorOptions options;
  options.hostFunctions.add("slow", doubling(&gate), /*concurrent=*/true);
  options.hostFunctions.add("release",
                            [&](absl::Span<const HostTensor> args)
                                -> absl::StatusOr<std::vector<HostTensor>> {
                              sawZ = true;
                              for (int64_t i = 0; i < n; ++i)
                                sawZ &= args[0].floats()[i] ==
                                        double(float(hx.floats()[i]) +
                                               float(hy.floats()[i]));
                              gate.release();
                              return std::vector<HostTensor>{};
                            });
  auto executor = load(b.finish(), std::move(options));
  ASSERT_TRUE(executor.ok()) << executor.status();
  auto results = runHostTensors(**executor, "f", {hx, hy});
  ASSERT_TRUE(results.ok()) << results.status();
  EXPECT_TRUE(sawZ);
  for (int64_t i = 0; i < n; ++i) {
    float want = float(hx.floats()[i]) + float(hy.floats()[i]);
    ASSERT_EQ(results->at(0).floats()[i],
              double(float(2 * hx.floats()[i]) + want))
        << i;
  }
}

TEST_F(ExecutorTest, SynchronousHostCallsRunWhereTheyStand) {
  // With asyncHostCalls off, a concurrent function runs where it stands:
  // `second` runs after `first` has returned (it sees one call before it).
  StepBuilder b;
  uint32_t x = b.argument(sd::DType::F32, {4}, 0, "x");
  uint32_t r = b.arena(sd::DType::F32, {4}, "r");
  uint32_t order = b.arena(sd::DType::F32, {1}, "order");
  b.function(
      "f", {x}, {r, order},
      {b.hostCall("first", {x}, {r}), b.hostCall("second", {}, {order})});
  std::vector<std::string> calls;
  std::mutex mutex;
  auto record = [&](std::string name) {
    return [&, name](absl::Span<const HostTensor> args)
               -> absl::StatusOr<std::vector<HostTensor>> {
      std::lock_guard<std::mutex> lock(mutex);
      calls.push_back(name);
      if (name == "first")
        return std::vector<HostTensor>{args[0]};
      return std::vector<HostTensor>{
          HostTensor::fromDoubles(DType::F32, {1}, {double(calls.size())})};
    };
  };
  ExecutorOptions options;
  options.asyncHostCalls = false;
  options.hostFunctions.add("first", record("first"), /*concurrent=*/true);
  options.hostFunctions.add("second", record("second"));
  auto executor = load(b.finish(), std::move(options));
  ASSERT_TRUE(executor.ok()) << executor.status();
  auto results = runHostTensors(**executor, "f", {f32({4}, 3)});
  ASSERT_TRUE(results.ok()) << results.status();
  EXPECT_EQ(calls, (std::vector<std::string>{"first", "second"}));
  EXPECT_EQ(results->at(1).floats()[0], 2.0);
}

TEST_F(ExecutorTest, ConcurrentHostCallErrorsSurfaceWithTheCallsPlace) {
  // The call fails on its worker; the error is reported where the executor
  // waits for it (the dispatch reading r) but names the HostCall.
  const int64_t n = 8;
  StepBuilder b;
  uint32_t exe = b.executable(testKernels());
  uint32_t x = b.argument(sd::DType::F32, {n}, 0, "x");
  uint32_t r = b.arena(sd::DType::F32, {n}, "r");
  uint32_t z = b.arena(sd::DType::F32, {n}, "z");
  uint32_t out = b.arena(sd::DType::F32, {n}, "out");
  b.function("f", {x}, {out},
             {b.dispatch(exe, 0, n, {x, x}, {z}), b.hostCall("score", {x}, {r}),
              b.dispatch(exe, 0, n, {z, z}, {out}),
              b.dispatch(exe, 0, n, {r, z}, {out})});
  for (bool badShape : {false, true}) {
    ExecutorOptions options;
    options.hostFunctions.add(
        "score",
        [badShape](absl::Span<const HostTensor>)
            -> absl::StatusOr<std::vector<HostTensor>> {
          if (badShape)
            return std::vector<HostTensor>{HostTensor(DType::F32, {2})};
          return absl::UnavailableError(
              "reward server http://127.0.0.1:9/score: cannot connect");
        },
        /*concurrent=*/true);
    auto executor = load(b.finish(), std::move(options));
    ASSERT_TRUE(executor.ok()) << executor.status();
    auto results = runHostTensors(**executor, "f", {f32({n}, 4)});
    ASSERT_FALSE(results.ok());
    EXPECT_EQ(results.status().code(), badShape
                                           ? absl::StatusCode::kInvalidArgument
                                           : absl::StatusCode::kUnavailable);
    EXPECT_EQ(results.status().message(),
              badShape ? "step.bin: functions[0].commands[1] (HostCall): host "
                         "function 'score' returned tensor<2xf32> for "
                         "results[0], which is tensor<8xf32>"
                       : "step.bin: functions[0].commands[1] (HostCall): "
                         "reward server http://127.0.0.1:9/score: cannot "
                         "connect");
    // The executor is usable again: the failed call is not pending.
    auto again = runHostTensors(**executor, "f", {f32({n}, 4)});
    EXPECT_FALSE(again.ok());
  }
}

TEST_F(ExecutorTest, CommandsWritingAPendingResultWaitForIt) {
  // r = 2x (concurrent), then a Fill of bytes [8, 16) of r's arena range
  // through another tensor that aliases them: the fill must land after the
  // call's results (write after write), so r = [2x0, 2x1, 7, 7]. The second
  // output s is a result nothing touches: the end of the run waits for it.
  StepBuilder b;
  uint32_t x = b.argument(sd::DType::F32, {4}, 0, "x");
  uint32_t r = b.arena(sd::DType::F32, {4}, "r");
  const int64_t rOffset = b.tensors[r].index;
  uint32_t alias = b.tensor({"alias",
                             sd::DType::F32,
                             {2},
                             step::Storage::Arena,
                             rOffset + 8,
                             step::Role::Transient});
  uint32_t s = b.arena(sd::DType::F32, {4}, "s");
  float seven = 7.0f;
  std::vector<uint8_t> pattern(4);
  std::memcpy(pattern.data(), &seven, 4);
  b.function("f", {x}, {r, s},
             {b.hostCall("twice", {x}, {r}), b.fill(alias, pattern),
              b.hostCall("twice", {x}, {s})});
  ExecutorOptions options;
  options.hostFunctions.add("twice", doubling(nullptr), /*concurrent=*/true);
  auto executor = load(b.finish(), std::move(options));
  ASSERT_TRUE(executor.ok()) << executor.status();
  HostTensor hx = HostTensor::fromDoubles(DType::F32, {4}, {1, 2, 3, 4});
  for (int repeat = 0; repeat < 2; ++repeat) {
    auto results = runHostTensors(**executor, "f", {hx});
    ASSERT_TRUE(results.ok()) << results.status();
    EXPECT_EQ(std::vector<double>(results->at(0).floats().begin(),
                                  results->at(0).floats().end()),
              (std::vector<double>{2, 4, 7, 7}));
    EXPECT_EQ(std::vector<double>(results->at(1).floats().begin(),
                                  results->at(1).floats().end()),
              (std::vector<double>{2, 4, 6, 8}));
  }
}

//===----------------------------------------------------------------------===//
// Index registers, loops, copies, calls
//===----------------------------------------------------------------------===//

TEST_F(ExecutorTest, LoopStoresEveryStep) {
  const int64_t seed = 1234;
  auto results = run(trajectoryProgram(), "steps",
                     {HostTensor::scalarInt(DType::I64, seed)});
  ASSERT_EQ(results.size(), 2u);
  for (int64_t step = 0; step < 4; ++step) {
    float x[6];
    flowgrpo::philoxNormal(seed, step, 0, x, 6);
    for (int64_t j = 0; j < 6; ++j) {
      EXPECT_EQ(results[1].floats()[step * 6 + j], double(x[j]));
      EXPECT_EQ(results[0].floats()[step * 6 + j],
                double(x[j] * float(step + 2)));
    }
  }
}

/// A profile (Profile.h) counts each command of the loop once per trip,
/// with the bytes of its tensors, and changes no result.
TEST_F(ExecutorTest, ProfileCountsEveryCommandAndChangesNothing) {
  const std::vector<HostTensor> inputs = {
      HostTensor::scalarInt(DType::I64, 99)};
  auto plain = run(trajectoryProgram(), "steps", inputs);
  auto executor = load(trajectoryProgram());
  ASSERT_TRUE(executor.ok()) << executor.status();
  Profile profile;
  (*executor)->setPhaseTiming(true);
  (*executor)->setProfile(&profile);
  auto results = (*executor)->run("steps", toTyped(inputs));
  ASSERT_TRUE(results.ok()) << results.status();
  auto profiled = toHost(*results);
  ASSERT_EQ(profiled.size(), plain.size());
  for (size_t k = 0; k < plain.size(); ++k)
    EXPECT_EQ(profiled[k].floats(), plain[k].floats());

  std::map<std::string, ProfileRow> rows;
  for (const ProfileRow &row : profile.rows()) {
    EXPECT_EQ(row.phase, "");
    rows[row.symbol] = row;
  }
  // 2 ScalarOps before the loop and 2 per trip; x is 24 bytes, a row of
  // the 4x6 stacks 24 of 96.
  EXPECT_EQ(rows["scalar"].count, 2 + 4 * 2);
  EXPECT_EQ(rows["random"].count, 4);
  EXPECT_EQ(rows["random"].bytes, 4 * 24);
  EXPECT_EQ(rows["omni_test_scale_row_f32"].kind, "fused kernel");
  EXPECT_EQ(rows["omni_test_scale_row_f32"].count, 4);
  EXPECT_EQ(rows["omni_test_scale_row_f32"].bytes, 4 * (24 + 96));
  EXPECT_EQ(rows["copy"].count, 4);
  EXPECT_EQ(rows["copy"].bytes, 4 * 2 * 24);
  // The top-level run's output copies are outside every phase: no row.
  EXPECT_EQ(rows.count("function outputs"), 0u);
  EXPECT_EQ(rows.size(), 4u);
  ASSERT_EQ(profile.phases().size(), 1u);
  double profiled_seconds = 0;
  for (const auto &[symbol, row] : rows)
    profiled_seconds += row.seconds;
  EXPECT_LE(profiled_seconds, profile.phases()[0].seconds);

  // Unset, nothing more is added.
  (*executor)->setProfile(nullptr);
  ASSERT_TRUE((*executor)->run("steps", toTyped(inputs)).ok());
  EXPECT_EQ(profile.rows().size(), rows.size());
  int64_t count = 0;
  for (const ProfileRow &row : profile.rows())
    count += row.count;
  EXPECT_EQ(count, 10 + 4 + 4 + 4);
}

//===----------------------------------------------------------------------===//
// Synchronization: what a GPU's queue would see
//===----------------------------------------------------------------------===//

/// A stream that counts its synchronize() calls, everything forwarded.
/// With `faultAt` = n > 0, its n-th dispatch fails as a GPU kernel does:
/// the call that enqueued it succeeds, and every synchronize() after it
/// fails.
class SyncCountingStream final : public hal::Stream {
public:
  SyncCountingStream(std::unique_ptr<hal::Stream> inner, int &syncs,
                     int faultAt)
      : inner_(std::move(inner)), syncs_(syncs), faultAt_(faultAt) {}
  absl::Status writeBuffer(const void *host, hal::BufferRef dst) override {
    return inner_->writeBuffer(host, dst);
  }
  absl::Status readBuffer(hal::BufferRef src, void *host) override {
    return inner_->readBuffer(src, host);
  }
  absl::Status copy(hal::BufferRef src, hal::BufferRef dst) override {
    return inner_->copy(src, dst);
  }
  absl::Status fill(hal::BufferRef dst,
                    absl::Span<const uint8_t> pattern) override {
    return inner_->fill(dst, pattern);
  }
  absl::Status dispatch(const hal::Executable &executable, int64_t kernel,
                        int64_t grid, absl::Span<const hal::BufferRef> buffers,
                        absl::Span<const int64_t> scalars) override {
    if (++dispatches_ == faultAt_)
      failure_ = absl::InternalError(
          "a command on the stream failed: an illegal address");
    return inner_->dispatch(executable, kernel, grid, buffers, scalars);
  }
  absl::Status random(hal::Distribution distribution, DType dtype,
                      int64_t count, hal::BufferRef key, hal::BufferRef counter,
                      hal::BufferRef offset, hal::BufferRef result) override {
    return inner_->random(distribution, dtype, count, key, counter, offset,
                          result);
  }
  absl::StatusOr<std::shared_ptr<hal::Event>> recordEvent() override {
    return inner_->recordEvent();
  }
  absl::Status waitEvent(const std::shared_ptr<hal::Event> &event) override {
    return inner_->waitEvent(event);
  }
  absl::Status synchronize() override {
    ++syncs_;
    if (!failure_.ok())
      return failure_;
    return inner_->synchronize();
  }

private:
  std::unique_ptr<hal::Stream> inner_;
  int &syncs_;
  const int faultAt_;
  int dispatches_ = 0;
  absl::Status failure_;
};

/// The cpu device, its streams counting synchronize() calls.
class SyncCountingDevice final : public hal::Device {
public:
  explicit SyncCountingDevice(hal::Device &inner) : inner_(inner) {}
  const std::string &driverName() const override { return inner_.driverName(); }
  std::string description() const override { return inner_.description(); }
  absl::StatusOr<std::unique_ptr<hal::Buffer>>
  allocate(int64_t bytes) override {
    return inner_.allocate(bytes);
  }
  bool supportsFormat(hal::ExecutableFormat format) const override {
    return inner_.supportsFormat(format);
  }
  absl::StatusOr<std::unique_ptr<hal::Executable>>
  loadExecutable(const hal::ExecutableSpec &spec) override {
    return inner_.loadExecutable(spec);
  }
  absl::StatusOr<std::unique_ptr<hal::Stream>> createStream() override {
    absl::StatusOr<std::unique_ptr<hal::Stream>> stream = inner_.createStream();
    if (!stream.ok())
      return stream.status();
    return std::unique_ptr<hal::Stream>(std::make_unique<SyncCountingStream>(
        std::move(*stream), syncs, faultAt));
  }
  int syncs = 0;
  /// The dispatch of each new stream that fails (0: none).
  int faultAt = 0;

private:
  hal::Device &inner_;
};

/// Phase timing synchronizes where the phase changes and at the end, not
/// after each command: two phases of two dispatches each are two
/// synchronizations (and the run's own, reading its output), with both
/// phases timed.
TEST_F(ExecutorTest, PhaseTimingSynchronizesWhereThePhaseChanges) {
  StepBuilder b;
  uint32_t exe = b.executable(testKernels());
  uint32_t x = b.argument(sd::DType::F32, {8}, 0, "x");
  uint32_t y = b.arena(sd::DType::F32, {8});
  uint32_t z = b.arena(sd::DType::F32, {8});
  std::vector<CommandRef> commands;
  b.phase = "first";
  commands.push_back(b.dispatch(exe, 0, 8, {x, x}, {y}));
  commands.push_back(b.dispatch(exe, 0, 8, {y, x}, {y}));
  b.phase = "second";
  commands.push_back(b.dispatch(exe, 0, 8, {y, y}, {z}));
  commands.push_back(b.dispatch(exe, 0, 8, {z, x}, {z}));
  b.function("f", {x}, {z}, commands);
  SyncCountingDevice device(*device_);
  auto executor = load(b.finish(), {}, &device);
  ASSERT_TRUE(executor.ok()) << executor.status();
  (*executor)->setPhaseTiming(true);
  device.syncs = 0; // create()'s own
  HostTensor hx =
      HostTensor::fromDoubles(DType::F32, {8}, {1, 2, 3, 4, 5, 6, 7, 8});
  auto results = runHostTensors(**executor, "f", {hx});
  ASSERT_TRUE(results.ok()) << results.status();
  // z = 2 (2x + x) + x = 7x
  EXPECT_EQ(results->at(0).floats()[7], 56);
  EXPECT_EQ(device.syncs, 3);
  auto phases = (*executor)->takePhaseTimes();
  ASSERT_EQ(phases.size(), 2u);
  EXPECT_EQ(phases[0].first, "first");
  EXPECT_EQ(phases[1].first, "second");
}

/// A failure that a synchronization finds (a GPU kernel's bad address) is
/// named by its command under a profile, which synchronizes after each
/// command; otherwise it is the stream's, unnamed.
TEST_F(ExecutorTest, AnAsynchronousFailureIsNamedByItsCommandUnderAProfile) {
  StepBuilder b;
  uint32_t exe = b.executable(testKernels());
  uint32_t x = b.argument(sd::DType::F32, {8}, 0, "x");
  uint32_t y = b.arena(sd::DType::F32, {8});
  b.phase = "rollout";
  b.function("f", {x}, {y},
             {b.dispatch(exe, 0, 8, {x, x}, {y}),
              b.dispatch(exe, 0, 8, {y, x}, {y}),
              b.dispatch(exe, 0, 8, {y, x}, {y})});
  HostTensor hx =
      HostTensor::fromDoubles(DType::F32, {8}, {1, 2, 3, 4, 5, 6, 7, 8});
  for (bool profiled : {false, true}) {
    SCOPED_TRACE(profiled ? "profiled" : "plain");
    SyncCountingDevice device(*device_);
    device.faultAt = 2;
    auto executor = load(b.finish(), {}, &device);
    ASSERT_TRUE(executor.ok()) << executor.status();
    Profile profile;
    if (profiled)
      (*executor)->setProfile(&profile);
    auto results = runHostTensors(**executor, "f", {hx});
    ASSERT_FALSE(results.ok());
    EXPECT_EQ(results.status().code(), absl::StatusCode::kInternal);
    EXPECT_EQ(results.status().message(),
              absl::StrCat(profiled ? "step.bin: functions[0].commands[1] "
                                      "(Dispatch omni_test_add_f32): "
                                    : "",
                           "a command on the stream failed: an illegal "
                           "address"));
  }
}

/// A concurrent host call does not synchronize the stream: its operands'
/// copies are waited for by its worker (here the only synchronization is
/// the run's, reading its output).
TEST_F(ExecutorTest, ConcurrentHostCallsDoNotSynchronize) {
  StepBuilder b;
  uint32_t x = b.argument(sd::DType::F32, {4}, 0, "x");
  uint32_t r = b.arena(sd::DType::F32, {4}, "r");
  b.function("f", {x}, {r}, {b.hostCall("twice", {x}, {r})});
  SyncCountingDevice device(*device_);
  ExecutorOptions options;
  options.hostFunctions.add("twice", doubling(nullptr), /*concurrent=*/true);
  auto executor = load(b.finish(), std::move(options), &device);
  ASSERT_TRUE(executor.ok()) << executor.status();
  device.syncs = 0; // create()'s own
  HostTensor hx = HostTensor::fromDoubles(DType::F32, {4}, {1, 2, 3, 4});
  auto results = runHostTensors(**executor, "f", {hx});
  ASSERT_TRUE(results.ok()) << results.status();
  EXPECT_EQ(std::vector<double>(results->at(0).floats().begin(),
                                results->at(0).floats().end()),
            (std::vector<double>{2, 4, 6, 8}));
  EXPECT_EQ(device.syncs, 1);
}

TEST_F(ExecutorTest, CopyOffsetsAreCheckedAtRunTime) {
  // The offset register comes from a tensor, so only the executor can check.
  StepBuilder b;
  uint32_t n = b.argument(sd::DType::I64, {}, 0, "n");
  uint32_t x = b.arena(sd::DType::F32, {2});
  uint32_t stack = b.arena(sd::DType::F32, {3, 2});
  uint32_t row = b.scalar("row");
  StepBuilder::CopySpec store;
  store.source = x;
  store.dest = stack;
  store.destScalar = static_cast<int32_t>(row);
  store.destStride = 8;
  b.function("store", {n}, {stack},
             {b.scalarOp(ScalarOpKind::FromTensor, row, n), b.copy(store)}, 1);
  auto executor = load(b.finish());
  ASSERT_TRUE(executor.ok()) << executor.status();
  EXPECT_TRUE(
      (*executor)->run("store", {HostTensor::scalarInt(DType::I64, 2)}).ok());
  auto bad = (*executor)->run("store", {HostTensor::scalarInt(DType::I64, 3)});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(bad.status().message(),
            "step.bin: functions[0].commands[1] (Copy): dest range [24, 32) is "
            "outside tensors[2] (tensor<3x2xf32>, 24 bytes) (scalar 0 = 3)");
}

TEST_F(ExecutorTest, ScalarOpsRoundTripThroughTensors) {
  StepBuilder b;
  uint32_t a = b.argument(sd::DType::I32, {1}, 0);
  uint32_t out = b.arena(sd::DType::I64, {});
  uint32_t r = b.scalar(), s = b.scalar(), t = b.scalar();
  b.function("arith", {a}, {out},
             {b.scalarOp(ScalarOpKind::FromTensor, r, a),
              b.scalarOp(ScalarOpKind::Const, s, 0, 0, 10),
              b.scalarOp(ScalarOpKind::Mul, t, r, s),
              b.scalarOp(ScalarOpKind::Sub, t, t, r),
              b.scalarOp(ScalarOpKind::ToTensor, out, t)},
             3);
  auto results =
      run(b.finish(), "arith", {HostTensor::fromInts(DType::I32, {1}, {-7})});
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].ints()[0], -63);
}

TEST_F(ExecutorTest, CallsBindArgumentsAndCopyResults) {
  StepBuilder b;
  uint32_t exe = b.executable(testKernels());
  // double(x) = x + x, written straight into its result buffer.
  uint32_t dx = b.argument(sd::DType::F32, {4}, 0);
  uint32_t dy = b.argument(sd::DType::F32, {4}, 1);
  b.function("double", {dx}, {dy}, {b.dispatch(exe, 0, 4, {dx, dx}, {dy})});
  // quad(x) = double(double(x)), its output in the arena.
  uint32_t qx = b.argument(sd::DType::F32, {4}, 0);
  uint32_t t = b.arena(sd::DType::F32, {4});
  uint32_t u = b.arena(sd::DType::F32, {4});
  b.function("quad", {qx}, {u}, {b.call(0, {qx}, {t}), b.call(0, {t}, {u})});
  // identity(x) = x: an output that is an input.
  uint32_t ix = b.argument(sd::DType::F32, {4}, 0);
  b.function("identity", {ix}, {ix}, {});
  std::string bytes = b.finish();
  HostTensor x = HostTensor::fromDoubles(DType::F32, {4}, {1, -2, 3.5, 0});
  auto quad = run(bytes, "quad", {x});
  ASSERT_EQ(quad.size(), 1u);
  EXPECT_EQ(
      std::vector<double>(quad[0].floats().begin(), quad[0].floats().end()),
      (std::vector<double>{4, -8, 14, 0}));
  auto same = run(bytes, "identity", {x});
  ASSERT_EQ(same.size(), 1u);
  EXPECT_EQ(same[0], x);
}

TEST_F(ExecutorTest, CommandBudgetBoundsARun) {
  StepBuilder b;
  uint32_t i = b.scalar();
  b.function("spin", {}, {},
             {b.loop(i, 0, std::numeric_limits<int64_t>::max(), 1, {})}, 1);
  ExecutorOptions options;
  options.commandBudget = 1000;
  auto executor = load(b.finish(), options);
  ASSERT_TRUE(executor.ok()) << executor.status();
  auto results = (*executor)->run("spin", {});
  EXPECT_EQ(results.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(results.status().message(),
            "step.bin: functions[0].commands[0] (Loop): the run exceeded its "
            "budget of 1000 commands");
}

//===----------------------------------------------------------------------===//
// State and the host-facing checks
//===----------------------------------------------------------------------===//

TEST_F(ExecutorTest, StatePersistsAcrossRuns) {
  StepBuilder b;
  uint32_t exe = b.executable(testKernels());
  uint32_t w = b.stateTensor("w", sd::DType::F32, {3});
  uint32_t one =
      b.constant(sd::DType::F32, {3}, omni::testing::bytesOf<float>({1, 1, 1}));
  // A reshaped view of the same slot, read as the output.
  uint32_t view = b.tensor({"w_view",
                            sd::DType::F32,
                            {1, 3},
                            sd::Storage::State,
                            0,
                            sd::Role::Parameter});
  b.function("step", {}, {view}, {b.dispatch(exe, 0, 3, {w, one}, {w})});
  auto executor = load(b.finish());
  ASSERT_TRUE(executor.ok()) << executor.status();
  Executor &e = **executor;
  EXPECT_EQ(e.stateNames(), std::vector<std::string>{"w"});
  ASSERT_TRUE(
      e.setState("w", HostTensor::fromDoubles(DType::F32, {3}, {1, 2, 3}))
          .ok());
  ASSERT_TRUE(e.run("step", {}).ok());
  auto second = e.run("step", {});
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->at(0),
            HostTensor::fromDoubles(DType::F32, {1, 3}, {3, 4, 5}));
  auto w1 = e.getState("w");
  ASSERT_TRUE(w1.ok());
  EXPECT_EQ(*w1, HostTensor::fromDoubles(DType::F32, {3}, {3, 4, 5}));
  EXPECT_EQ(e.setState("w", HostTensor(DType::F32, {4})).message(),
            "state slot 'w' is tensor<3xf32> but the value is tensor<4xf32>");
  EXPECT_EQ(e.getState("v").status().message(),
            "step.bin has no state slot 'v' (slots: w)");
  EXPECT_TRUE(e.stateBuffer("w").ok());
}

TEST_F(ExecutorTest, RejectsWrongInputs) {
  auto executor = load(addProgram(4));
  ASSERT_TRUE(executor.ok());
  Executor &e = **executor;
  HostTensor x(DType::F32, {4});
  EXPECT_EQ(e.run("add", {x}).status().message(),
            "@add takes 2 inputs but 1 were given");
  EXPECT_EQ(e.run("add", {x, HostTensor(DType::F64, {4})}).status().message(),
            "input 1 of @add is tensor<4xf32> but the argument is "
            "tensor<4xf64>");
  EXPECT_EQ(
      e.run("add", {x, HostTensor(DType::F32, {2, 2})}).status().message(),
      "input 1 of @add is tensor<4xf32> but the argument is "
      "tensor<2x2xf32>");
  EXPECT_EQ(e.run("sub", {}).status().message(),
            "step.bin has no function 'sub' (functions: add)");
}

// Every host<->device copy is counted once, with its exact size; state
// read and written on the device is not a transfer.
TEST_F(ExecutorTest, TransfersCountEveryHostDeviceCopy) {
  auto executor = load(addProgram(4));
  ASSERT_TRUE(executor.ok());
  Executor &e = **executor;
  EXPECT_EQ(e.transfers().hostToDevice, 0);
  EXPECT_EQ(e.transfers().deviceToHost, 0);
  TypedTensor x(DType::F32, {4});
  ASSERT_TRUE(e.run("add", {x, x}).ok());
  EXPECT_EQ(e.transfers().hostToDevice, 2 * 16);
  EXPECT_EQ(e.transfers().deviceToHost, 16);
  // The arena (z: 16 bytes) and the run's three buffers of 16 bytes.
  EXPECT_EQ(e.takePeakDeviceBytes(), 16 + 3 * 16);
  EXPECT_EQ(e.takePeakDeviceBytes(), 16); // the run's buffers are freed

  StepBuilder b;
  uint32_t exe = b.executable(testKernels());
  uint32_t w = b.stateTensor("w", sd::DType::F32, {3});
  uint32_t one =
      b.constant(sd::DType::F32, {3}, omni::testing::bytesOf<float>({1, 1, 1}));
  b.function("step", {}, {}, {b.dispatch(exe, 0, 3, {w, one}, {w})});
  auto stateful = load(b.finish());
  ASSERT_TRUE(stateful.ok()) << stateful.status();
  Executor &s = **stateful;
  // Preparation uploads the constant (12 bytes).
  EXPECT_EQ(s.transfers().hostToDevice, 12);
  ASSERT_TRUE(s.setState("w", TypedTensor(DType::F32, {3})).ok());
  EXPECT_EQ(s.transfers().hostToDevice, 24);
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(s.run("step", {}).ok());
  EXPECT_EQ(s.transfers().hostToDevice, 24);
  EXPECT_EQ(s.transfers().deviceToHost, 0);
  auto value = s.getState("w");
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(*value, TypedTensor::of<float>(DType::F32, {3},
                                           std::vector<float>{3, 3, 3}));
  EXPECT_EQ(s.transfers().deviceToHost, 12);
}

TEST_F(ExecutorTest, RunsOnDeviceBuffers) {
  auto executor = load(addProgram(2));
  ASSERT_TRUE(executor.ok());
  Executor &e = **executor;
  auto x = device_->allocate(8), y = device_->allocate(8),
       z = device_->allocate(8);
  ASSERT_TRUE(x.ok() && y.ok() && z.ok());
  float xs[] = {1, 2}, ys[] = {10, 20}, zs[2];
  ASSERT_TRUE(e.stream().writeBuffer(xs, hal::BufferRef::all(**x)).ok());
  ASSERT_TRUE(e.stream().writeBuffer(ys, hal::BufferRef::all(**y)).ok());
  hal::BufferRef in[] = {hal::BufferRef::all(**x), hal::BufferRef::all(**y)};
  hal::BufferRef out[] = {hal::BufferRef::all(**z)};
  ASSERT_TRUE(e.runOnDevice(0, in, out).ok());
  ASSERT_TRUE(e.stream().readBuffer(out[0], zs).ok());
  ASSERT_TRUE(e.stream().synchronize().ok());
  EXPECT_EQ(zs[0], 11);
  EXPECT_EQ(zs[1], 22);
  hal::BufferRef shortOut[] = {{z->get(), 0, 4}};
  EXPECT_EQ(e.runOnDevice(0, in, shortOut).message(),
            "result 0 of @add is tensor<2xf32> (8 bytes) but the buffer has 4 "
            "bytes");
}

TEST_F(ExecutorTest, RejectsProgramsForOtherTargets) {
  StepBuilder b;
  b.targetKind = "cuda";
  b.function("f", {}, {}, {});
  auto executor = load(b.finish());
  ASSERT_FALSE(executor.ok());
  EXPECT_EQ(executor.status().message(),
            "step.bin: target.kind = 'cuda' but the device is cpu (3 threads)");
}

} // namespace
} // namespace omni::executor
