//===- ExecutorTesting.h - what the executor's tests share ------*- C++ -*-===//
//
// Test-only: the fixture (a cpu device, programs loaded from StepBuilder
// bytes) and the helpers and programs ExecutorTest.cpp and
// ExecutorGraphsTest.cpp both use.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_EXECUTOR_TESTING_EXECUTORTESTING_H
#define OMNI_RUNTIME_EXECUTOR_TESTING_EXECUTORTESTING_H

#include "runtime/executor/Executor.h"

#include "runtime/hal/drivers/Drivers.h"
#include "runtime/loader/testing/StepBuilder.h"

#include "gtest/gtest.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <random>

namespace omni::executor::test {

using omni::testing::CommandRef;
using omni::testing::StepBuilder;
using step::Library;
using step::ScalarOpKind;
namespace sd = step;

inline std::vector<double> randomValues(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(-1, 1);
  std::vector<double> v(n);
  for (double &x : v)
    x = static_cast<float>(dist(gen));
  return v;
}

inline HostTensor f32(std::vector<int64_t> shape, uint32_t seed) {
  size_t n = 1;
  for (int64_t d : shape)
    n *= static_cast<size_t>(d);
  return HostTensor::fromDoubles(DType::F32, shape, randomValues(n, seed));
}

class ExecutorTest : public ::testing::Test {
protected:
  void SetUp() override { device_ = makeDevice(3); }

  static std::unique_ptr<hal::Device> makeDevice(int threads) {
    hal::DeviceOptions options;
    options.threads = threads;
    auto device = hal::builtinDrivers().createDevice("cpu", options);
    EXPECT_TRUE(device.ok()) << device.status();
    return std::move(*device);
  }

  absl::StatusOr<std::unique_ptr<Executor>>
  load(const std::string &bytes, ExecutorOptions options = {},
       hal::Device *device = nullptr) {
    auto program = loader::Program::loadBytes(bytes);
    if (!program.ok())
      return program.status();
    return Executor::create(*program, device ? *device : *device_,
                            std::move(options));
  }

  /// Runs `function` of `bytes` on `inputs`; fails the test on errors.
  std::vector<HostTensor> run(const std::string &bytes,
                              const std::string &function,
                              std::vector<HostTensor> inputs) {
    auto executor = load(bytes);
    EXPECT_TRUE(executor.ok()) << executor.status();
    if (!executor.ok())
      return {};
    auto results = (*executor)->run(function, toTyped(inputs));
    EXPECT_TRUE(results.ok()) << results.status();
    return results.ok() ? toHost(*results) : std::vector<HostTensor>{};
  }

  std::unique_ptr<hal::Device> device_;
};

inline void expectNear(const HostTensor &got, const std::vector<double> &want,
                       double tolerance) {
  ASSERT_EQ(got.numElements(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got.floats()[i], want[i], tolerance) << "element " << i;
}

inline StepBuilder::ExecutableSpec testKernels() {
  StepBuilder::ExecutableSpec e;
  e.name = "test_kernels";
  e.target = "+sse2";
  e.data = omni::testing::readBinaryFile(OMNI_TEST_KERNELS_SO);
  e.kernels = {"omni_test_add_f32", "omni_test_scale_row_f32"};
  return e;
}

/// A gate a host function waits on until another command opens it. The wait
/// is bounded only so that a broken executor fails the test instead of
/// hanging it; nothing is timed.
struct Gate {
  std::mutex mutex;
  std::condition_variable cv;
  bool open = false;
  void release() {
    std::lock_guard<std::mutex> lock(mutex);
    open = true;
    cv.notify_all();
  }
  bool wait() {
    std::unique_lock<std::mutex> lock(mutex);
    return cv.wait_for(lock, std::chrono::seconds(60), [&] { return open; });
  }
};

/// A concurrent host function: waits for `gate` (when given), then returns
/// `2 * x` of its one operand.
inline HostFunction doubling(Gate *gate) {
  return [gate](absl::Span<const HostTensor> args)
             -> absl::StatusOr<std::vector<HostTensor>> {
    if (gate && !gate->wait())
      return absl::DeadlineExceededError(
          "the gate stayed closed: the call did not overlap the commands "
          "after it");
    HostTensor out = args[0];
    for (double &v : out.floats())
      v *= 2;
    return std::vector<HostTensor>{std::move(out)};
  };
}

/// steps(key) -> (trajectory: 4x6xf32, x: 6xf32): for i in [0, 4): x =
/// normal(key, counter = i); then dispatch y = x * (i + 2) into row i of
/// the trajectory via the scale_row kernel, and copy x into row i of a
/// second stack, which is the second output... (kept small): the loop
/// exercises Loop, ScalarOp (Const, Add, ToTensor), Random, Dispatch with
/// scalars and Copy with an iv-scaled offset.
inline std::string trajectoryProgram() {
  StepBuilder b;
  uint32_t exe = b.executable(testKernels());
  uint32_t key = b.argument(sd::DType::I64, {}, 0, "key");
  uint32_t counter = b.arena(sd::DType::I64, {}, "counter");
  uint32_t zero =
      b.constant(sd::DType::I64, {}, omni::testing::bytesOf<int64_t>({0}));
  uint32_t x = b.arena(sd::DType::F32, {6}, "x");
  uint32_t scaled = b.arena(sd::DType::F32, {4, 6}, "scaled");
  uint32_t stack = b.arena(sd::DType::F32, {4, 6}, "stack");
  uint32_t i = b.scalar("i"), two = b.scalar("two"),
           factor = b.scalar("factor"), rowSize = b.scalar("rowSize");
  StepBuilder::CopySpec store;
  store.source = x;
  store.dest = stack;
  store.destScalar = static_cast<int32_t>(i);
  store.destStride = 24;
  b.function(
      "steps", {key}, {scaled, stack},
      {b.scalarOp(ScalarOpKind::Const, two, 0, 0, 2),
       b.scalarOp(ScalarOpKind::Const, rowSize, 0, 0, 6),
       b.loop(i, 0, 4, 1,
              {b.scalarOp(ScalarOpKind::ToTensor, counter, i),
               b.random(sd::Distribution::Normal, key, counter, zero, x),
               b.scalarOp(ScalarOpKind::Add, factor, i, two),
               b.dispatch(exe, 1, 6, {x}, {scaled}, {factor, rowSize, i}),
               b.copy(store)})},
      4);
  return b.finish();
}

/// A Copy of the 2-float `source` into row `row` (an index register) of
/// `stack`.
inline CommandRef copyIntoRow(StepBuilder &b, uint32_t source, uint32_t stack,
                              uint32_t row) {
  StepBuilder::CopySpec store;
  store.source = source;
  store.dest = stack;
  store.destScalar = static_cast<int32_t>(row);
  store.destStride = 8;
  return b.copy(store);
}

inline ExecutorOptions withGraphs(ExecutorOptions::Graphs graphs) {
  ExecutorOptions options;
  options.graphs = graphs;
  return options;
}

} // namespace omni::executor::test

#endif // OMNI_RUNTIME_EXECUTOR_TESTING_EXECUTORTESTING_H
