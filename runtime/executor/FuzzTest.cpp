//===- FuzzTest.cpp - Mutated step.bin files never crash --------*- C++ -*-===//
//
// Takes one valid step.bin that uses every command kind, Dispatch of a real
// kernel included, and mutates it thousands of times: random byte flips,
// truncation at every length, random splices of the file into itself,
// edge-value words. Each mutant is checked twice:
//   - as it is: the loader must reject it (the checksums of step.fbs
//     `Integrity` cover every byte), with a non-empty message;
//   - with its checksums recomputed, as a tool that rewrites files would:
//     it must be rejected (by the loader, by Executor::create or by a run)
//     with a non-empty message, or run to completion.
// A crash fails the whole binary.
//
// Dispatch is covered because the loader checks every Dispatch against its
// kernel's signature (operand count, dtypes, byte sizes, grid, index
// registers): the kernel, omni_test_add_f32, stays inside buffers of its
// signature's sizes for work items in [0, grid), and no single mutation can
// change a Dispatch and the signature consistently. Resealed mutants whose
// native code changed are not run: code whose checksum matches is trusted
// (docs/backend.md, "Integrity and trust"). (The test kernel that
// indexes with index registers is left out: its native code trusts their
// values, which metadata cannot bound.) The runs are bounded like a tool
// would bound an untrusted file: a 64 MiB device memory limit, a command
// budget, and inputs of at most 1 MiB.
//
//===----------------------------------------------------------------------===//

#include "runtime/executor/Executor.h"

#include "runtime/hal/drivers/Drivers.h"
#include "runtime/loader/testing/StepBuilder.h"
#include "runtime/schema/Integrity.h"
#include "runtime/train/rewards/RewardFunctions.h"

#include "gtest/gtest.h"

#include <chrono>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>

namespace omni::executor {
namespace {

using omni::testing::StepBuilder;
using step::Library;
using step::ScalarOpKind;
namespace sd = step;

std::string fuzzBase() {
  StepBuilder b;
  uint32_t x = b.argument(sd::DType::F32, {2, 3}, 0, "x");
  uint32_t key = b.argument(sd::DType::I64, {}, 1, "key");
  uint32_t w = b.stateTensor("w", sd::DType::F32, {3, 4});
  uint32_t filter = b.constant(
      sd::DType::F32, {2, 3, 3, 3},
      omni::testing::bytesOf(std::vector<float>(2 * 3 * 3 * 3, 0.25f)));
  uint32_t zero =
      b.constant(sd::DType::I64, {}, omni::testing::bytesOf<int64_t>({0}));
  uint32_t m = b.arena(sd::DType::F32, {2, 4}, "m");
  uint32_t img = b.arena(sd::DType::F32, {1, 3, 4, 4}, "img");
  uint32_t conv = b.arena(sd::DType::F32, {1, 2, 4, 4}, "conv");
  uint32_t q = b.arena(sd::DType::F32, {1, 2, 3, 4}, "q");
  uint32_t attn = b.arena(sd::DType::F32, {1, 2, 3, 4}, "attn");
  uint32_t mask = b.arena(sd::DType::F32, {1, 1, 3, 3}, "mask");
  uint32_t pixels = b.arena(sd::DType::F32, {1, 3, 2, 2}, "pixels");
  uint32_t reward = b.arena(sd::DType::F32, {1}, "reward");
  uint32_t counter = b.arena(sd::DType::I64, {}, "counter");
  uint32_t row = b.arena(sd::DType::F32, {4}, "row");
  uint32_t stack = b.arena(sd::DType::F32, {3, 4}, "stack");
  uint32_t y = b.arena(sd::DType::F32, {2, 3}, "y");
  uint32_t sum = b.arena(sd::DType::F32, {2, 3}, "sum");
  uint32_t i = b.scalar("i"), j = b.scalar("j"), k = b.scalar("k");
  StepBuilder::ExecutableSpec kernels;
  kernels.name = "test_kernels";
  kernels.target = "+sse2";
  kernels.data = omni::testing::readBinaryFile(OMNI_TEST_KERNELS_SO);
  kernels.kernels = {"omni_test_add_f32"};
  uint32_t exe = b.executable(kernels);

  // helper(a) -> a + fill: copies its input into its result buffer.
  uint32_t ha = b.argument(sd::DType::F32, {2, 3}, 0, "a");
  uint32_t hr = b.argument(sd::DType::F32, {2, 3}, 1, "r");
  b.function("helper", {ha}, {hr}, {b.copy(ha, hr)});

  StepBuilder::CopySpec store;
  store.source = row;
  store.dest = stack;
  store.destScalar = static_cast<int32_t>(i);
  store.destStride = 16;
  float half = 0.5f;
  std::vector<uint8_t> halfBytes(4);
  std::memcpy(halfBytes.data(), &half, 4);
  b.function(
      "main", {x, key}, {m, conv, attn, reward, stack, y, sum},
      {b.library(Library::Matmul, {x, w}, {m}, {0, 0}),
       b.random(sd::Distribution::Normal, key, zero, zero, img),
       b.library(Library::Conv2d, {img, filter}, {conv}, {1, 1, 1, 1, 1, 1}),
       b.random(sd::Distribution::Uniform, key, key, zero, q),
       b.fill(mask, {0, 0, 0, 0}),
       b.library(Library::Attention, {q, q, q, mask}, {attn}, {1}, {0.5}),
       b.fill(pixels, halfBytes), b.hostCall("brightness", {pixels}, {reward}),
       b.scalarOp(ScalarOpKind::Const, j, 0, 0, 3),
       b.loop(i, 0, 3, 1,
              {b.scalarOp(ScalarOpKind::Add, k, i, j),
               b.scalarOp(ScalarOpKind::ToTensor, counter, k),
               b.random(sd::Distribution::Normal, key, counter, zero, row),
               b.copy(store)}),
       b.scalarOp(ScalarOpKind::FromTensor, k, key), b.call(0, {x}, {y}),
       b.dispatch(exe, 0, 6, {x, y}, {sum})},
      3);
  return b.finish();
}

class Fuzzer {
public:
  Fuzzer() {
    hal::DeviceOptions options;
    options.threads = 2;
    options.memoryLimitBytes = 64 << 20;
    auto device = hal::builtinDrivers().createDevice("cpu", options);
    EXPECT_TRUE(device.ok());
    device_ = std::move(*device);
  }

  /// Checks a mutant of `base`: as it is, the loader must reject it; with
  /// its checksums recomputed (when its structure still allows that), it
  /// goes through check().
  void mutant(const std::string &bytes, const std::string &base) {
    if (bytes == base)
      return;
    auto program = loader::Program::loadBytes(bytes);
    ASSERT_FALSE(program.ok()) << "a mutant with stale checksums loaded";
    ASSERT_FALSE(program.status().message().empty());
    ++rejectedUnsealed;
    std::string sealed = bytes;
    auto *data = reinterpret_cast<uint8_t *>(sealed.data());
    flatbuffers::Verifier verifier(data, sealed.size());
    if (sealed.size() < 8 || !step::StepBufferHasIdentifier(data) ||
        !step::VerifyStepBuffer(verifier) ||
        !step::sealStepBin(data, sealed.size()))
      return;
    // Changed native code is another program, not a corrupted one: the
    // loader trusts code whose checksum matches, so such mutants are not
    // run (most flips land in the code, which is most of the file).
    if (changesCode(data, base))
      return (void)++codeChanged;
    ++resealed;
    check(sealed);
  }

  /// Whether the (verified) file at `data` has an executable whose bytes
  /// differ from the same executable of `base`.
  static bool changesCode(const uint8_t *data, const std::string &base) {
    const step::Step *mine = step::GetStep(data);
    const step::Step *theirs = step::GetStep(base.data());
    auto count = [](const auto *v) -> uint32_t { return v ? v->size() : 0; };
    for (uint32_t e = 0; e < count(mine->executables()); ++e) {
      const auto *code = mine->executables()->Get(e)->data();
      if (e >= count(theirs->executables()))
        return count(code) > 0;
      const auto *old = theirs->executables()->Get(e)->data();
      if (count(code) != count(old) ||
          (count(code) &&
           std::memcmp(code->data(), old->data(), count(code)) != 0))
        return true;
    }
    return false;
  }

  /// Loads and, when that works, runs every function of `bytes`.
  void check(const std::string &bytes) {
    auto program = loader::Program::loadBytes(bytes);
    if (!program.ok()) {
      ASSERT_FALSE(program.status().message().empty());
      ++rejectedByLoader;
      if (program.status().message().find("(Dispatch) in '") !=
          std::string::npos)
        ++rejectedBySignature;
      return;
    }
    ExecutorOptions options;
    options.commandBudget = 10000;
    rewards::registerRewards(options.hostFunctions); // the seed calls one
    auto executor = Executor::create(*program, *device_, options);
    if (!executor.ok()) {
      ASSERT_FALSE(executor.status().message().empty());
      ++rejectedByExecutor;
      return;
    }
    const loader::Program &p = **program;
    for (uint32_t f = 0; f < p.numFunctions(); ++f) {
      const step::Function *fn = p.step().functions()->Get(f);
      std::vector<HostTensor> inputs;
      int64_t bytesIn = 0;
      for (uint32_t a = 0; fn->inputs() && a < fn->inputs()->size(); ++a) {
        const loader::TensorInfo &info = p.tensor(fn->inputs()->Get(a));
        bytesIn += info.bytes;
        if (bytesIn > (1 << 20))
          break;
        inputs.emplace_back(info.dtype, info.shape);
      }
      if (bytesIn > (1 << 20)) {
        ++skippedRuns;
        continue;
      }
      auto results = (*executor)->run(f, toTyped(inputs));
      if (results.ok()) {
        ++ran;
      } else {
        ASSERT_FALSE(results.status().message().empty());
        ++failedRuns;
      }
    }
  }

  int rejectedUnsealed = 0, codeChanged = 0, resealed = 0, rejectedByLoader = 0,
      rejectedBySignature = 0, rejectedByExecutor = 0, ran = 0, failedRuns = 0,
      skippedRuns = 0;

private:
  std::unique_ptr<hal::Device> device_;
};

TEST(Fuzz, BaseProgramRuns) {
  Fuzzer fuzzer;
  fuzzer.check(fuzzBase());
  EXPECT_EQ(fuzzer.ran, 2);
}

TEST(Fuzz, MutantsAreRejectedOrRun) {
  const std::string base = fuzzBase();
  // The kernels' code is most of the file but mutants that change it are
  // only checked as they are (see Fuzzer::mutant): seven in eight positions
  // avoid it, so that most resealed mutants exercise the metadata checks.
  const auto *code = step::GetStep(base.data())->executables()->Get(0)->data();
  const size_t codeBegin =
      reinterpret_cast<const char *>(code->data()) - base.data();
  const size_t codeEnd = codeBegin + code->size();
  std::mt19937_64 rng(20240601);
  auto position = [&](size_t size) {
    size_t at = rng() % size;
    size_t after = size > codeEnd ? size - codeEnd : 0;
    if (at < codeBegin || at >= codeEnd || rng() % 8 == 0 ||
        codeBegin + after == 0)
      return at;
    size_t other = rng() % (codeBegin + after); // a position outside the code
    return other < codeBegin ? other : codeEnd + (other - codeBegin);
  };
  Fuzzer fuzzer;
  auto start = std::chrono::steady_clock::now();
  int mutants = 0;

  // Truncation at every length.
  for (size_t length = 0; length < base.size(); ++length, ++mutants)
    fuzzer.mutant(base.substr(0, length), base);

  // Random byte flips: 1 to 4 bytes, anywhere.
  for (int n = 0; n < 60000; ++n, ++mutants) {
    std::string bytes = base;
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f)
      bytes[position(bytes.size())] ^= static_cast<char>(1 + rng() % 255);
    fuzzer.mutant(bytes, base);
    if (::testing::Test::HasFatalFailure())
      return;
  }

  // Random splices: a chunk of the file copied over, or into, another place.
  for (int n = 0; n < 20000; ++n, ++mutants) {
    std::string bytes = base;
    size_t from = position(bytes.size());
    size_t length = 1 + rng() % std::min<size_t>(64, bytes.size() - from);
    std::string chunk = bytes.substr(from, length);
    size_t to = position(bytes.size());
    if (rng() % 2)
      bytes.replace(to, std::min(length, bytes.size() - to), chunk);
    else
      bytes.insert(to, chunk);
    fuzzer.mutant(bytes, base);
    if (::testing::Test::HasFatalFailure())
      return;
  }

  // Aligned words overwritten with values that sit on the edges of the
  // checks (indices, sizes, offsets, enum values).
  const int64_t interesting[] = {0,
                                 1,
                                 -1,
                                 2,
                                 3,
                                 7,
                                 8,
                                 64,
                                 255,
                                 256,
                                 4096,
                                 0x7fffffff,
                                 -0x7fffffffLL - 1,
                                 0xffffffffLL,
                                 int64_t(1) << 32,
                                 int64_t(1) << 40,
                                 std::numeric_limits<int64_t>::max(),
                                 std::numeric_limits<int64_t>::min()};
  for (int n = 0; n < 20000; ++n, ++mutants) {
    std::string bytes = base;
    size_t width = rng() % 2 ? 4 : 8;
    size_t at = position(bytes.size()) / width * width;
    int64_t value = interesting[rng() % std::size(interesting)];
    std::memcpy(&bytes[at], &value, std::min(width, bytes.size() - at));
    fuzzer.mutant(bytes, base);
    if (::testing::Test::HasFatalFailure())
      return;
  }

  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  std::cout << mutants << " mutants in " << seconds
            << " s: " << fuzzer.rejectedUnsealed
            << " rejected as they were; resealed, " << fuzzer.codeChanged
            << " changed the code (not run), " << fuzzer.resealed
            << " did not, of which " << fuzzer.rejectedByLoader
            << " rejected by the loader (" << fuzzer.rejectedBySignature
            << " by a kernel signature), " << fuzzer.rejectedByExecutor
            << " by Executor::create, " << fuzzer.failedRuns << " runs failed, "
            << fuzzer.ran << " runs completed, " << fuzzer.skippedRuns
            << " skipped\n";
  // The mutants reach every stage.
  EXPECT_GT(fuzzer.resealed, 0);
  EXPECT_GT(fuzzer.rejectedByLoader, 0);
  EXPECT_GT(fuzzer.rejectedBySignature, 0);
  EXPECT_GT(fuzzer.ran, 0);
}

} // namespace
} // namespace omni::executor
