//===- LoaderTest.cpp - The loader's checks, message by message -*- C++ -*-===//
//
// Every semantic check of Verify.cpp (and the gates of Program.cpp) has a
// test that builds an otherwise valid step.bin violating exactly that check
// and compares the whole one-line message.
//
//===----------------------------------------------------------------------===//

#include "runtime/loader/Program.h"
#include "runtime/loader/testing/StepBuilder.h"
#include "runtime/schema/Integrity.h"

#include "gtest/gtest.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fcntl.h>
#include <functional>
#include <future>
#include <limits>
#include <random>
#include <sys/stat.h>
#include <unistd.h>

namespace omni::loader {
namespace {

using omni::testing::StepBuilder;
using step::CommandKind;
using step::DType;
using step::Library;
using step::ScalarOpKind;
using step::Storage;

/// The message loading `bytes` fails with ("" when it loads).
std::string errorOf(const std::string &bytes, const LoadOptions &options = {}) {
  auto program = Program::loadBytes(bytes, options);
  if (program.ok())
    return "";
  EXPECT_EQ(program.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(program.status().message());
}

/// A valid program `f(x: 2x3xf32) -> 2x3xf32` that copies x through the
/// arena; `edit` may change anything before it is finished.
std::string build(const std::function<void(StepBuilder &)> &edit = nullptr) {
  StepBuilder b;
  uint32_t x = b.argument(DType::F32, {2, 3}, 0, "x");
  uint32_t t = b.arena(DType::F32, {2, 3}, "t");
  std::vector<omni::testing::CommandRef> commands = {b.copy(x, t)};
  b.function("f", {x}, {t}, commands);
  if (edit)
    edit(b);
  return b.finish();
}

/// A program whose function `f` has the given commands over tensors the
/// callback creates.
std::string withCommands(
    const std::function<std::vector<omni::testing::CommandRef>(StepBuilder &)>
        &make,
    std::vector<uint32_t> inputs = {}, std::vector<uint32_t> outputs = {}) {
  StepBuilder b;
  std::vector<omni::testing::CommandRef> commands = make(b);
  b.function("f", inputs, outputs, commands);
  return b.finish();
}

/// `f(x, lr: f64)` with the hyper-parameter table `hparams` (lr's input
/// of type `lrType`).
std::string withHyperParams(std::vector<StepBuilder::HyperParamSpec> hparams,
                            DType lrType = DType::F64,
                            std::vector<int64_t> lrShape = {}) {
  StepBuilder b;
  uint32_t x = b.argument(DType::F32, {2, 3}, 0, "x");
  uint32_t lr = b.argument(lrType, lrShape, 1, "lr");
  uint32_t t = b.arena(DType::F32, {2, 3}, "t");
  b.function("f", {x, lr}, {t}, {b.copy(x, t)});
  b.hparams = std::move(hparams);
  return b.finish();
}

TEST(Loader, HyperParamTable) {
  auto program = Program::loadBytes(
      withHyperParams({{"beta1", 0.9, "[0, 1)"}, {"lr", 1e-3, "(0, inf)"}}));
  ASSERT_TRUE(program.ok()) << program.status();
  ASSERT_EQ((*program)->hyperParams().size(), 2u);
  const omni::loader::HyperParamInfo *lr = (*program)->findHyperParam("lr");
  ASSERT_NE(lr, nullptr);
  EXPECT_EQ(lr->defaultValue, 1e-3);
  EXPECT_EQ(lr->range, "(0, inf)");
  EXPECT_TRUE(lr->loOpen);
  EXPECT_FALSE(lr->contains(0.0));
  EXPECT_TRUE(lr->contains(1e-300));
  EXPECT_FALSE(lr->contains(HUGE_VAL));
  const omni::loader::HyperParamInfo *b1 = (*program)->findHyperParam("beta1");
  ASSERT_NE(b1, nullptr);
  EXPECT_TRUE(b1->contains(0.0));
  EXPECT_FALSE(b1->contains(1.0));
  EXPECT_FALSE(b1->contains(NAN));
  EXPECT_EQ((*program)->findHyperParam("x"), nullptr);
}

TEST(Loader, MetadataTable) {
  auto program = Program::loadBytes(build([](StepBuilder &b) {
    b.metadata = {{"model", "sd3"}, {"model_config", "num_layers=2 x=\"y\""}};
  }));
  ASSERT_TRUE(program.ok()) << program.status();
  ASSERT_EQ((*program)->metadata().size(), 2u);
  ASSERT_NE((*program)->findMetadata("model"), nullptr);
  EXPECT_EQ(*(*program)->findMetadata("model"), "sd3");
  EXPECT_EQ(*(*program)->findMetadata("model_config"), "num_layers=2 x=\"y\"");
  EXPECT_EQ((*program)->findMetadata("decoder"), nullptr);
  // A program without the table has empty metadata.
  auto bare = Program::loadBytes(build());
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_TRUE((*bare)->metadata().empty());
}

TEST(Loader, MetadataTableErrors) {
  auto with = [](std::vector<std::pair<std::string, std::string>> entries) {
    return build([&](StepBuilder &b) { b.metadata = entries; });
  };
  EXPECT_EQ(errorOf(with({{"model", "a"}, {"decoder", "b"}})),
            "step.bin: metadata[1].key: 'decoder' follows 'model'; expected "
            "unique keys in sorted order");
  EXPECT_EQ(errorOf(with({{"model", "a"}, {"model", "b"}})),
            "step.bin: metadata[1].key: 'model' follows 'model'; expected "
            "unique keys in sorted order");
  EXPECT_EQ(errorOf(with({{"", "a"}})),
            "step.bin: metadata[0].key: is empty; expected a non-empty key");
}

TEST(Loader, HyperParamTableErrors) {
  EXPECT_EQ(errorOf(withHyperParams({{"lr", 1e-3, "0..inf"}})),
            "step.bin: hparams[0].range: is '0..inf'; expected an interval "
            "such as [0, inf)");
  EXPECT_EQ(errorOf(withHyperParams({{"lr", 1e-3, "[1, 0]"}})),
            "step.bin: hparams[0].range: is '[1, 0]'; expected an interval "
            "such as [0, inf)");
  EXPECT_EQ(errorOf(withHyperParams({{"lr", 0, "(0, inf)"}})),
            "step.bin: hparams[0].default_value: = 0 is outside its range "
            "(0, inf)");
  EXPECT_EQ(errorOf(withHyperParams({{"lr", 1, "[0, 1]"}, {"beta1", 0.9}})),
            "step.bin: hparams[1].name: 'beta1' follows 'lr'; expected unique "
            "names in sorted order");
  EXPECT_EQ(errorOf(withHyperParams({{"", 1}})),
            "step.bin: hparams[0].name: is empty but hyper-parameters are set "
            "by name");
  EXPECT_EQ(errorOf(withHyperParams({{"lr", 1e-3}}, DType::F32)),
            "step.bin: functions[0].inputs[1]: is hyper-parameter 'lr' of type "
            "tensor<f32>; expected tensor<f64>");
  EXPECT_EQ(errorOf(withHyperParams({{"lr", 1e-3}}, DType::F64, {2})),
            "step.bin: functions[0].inputs[1]: is hyper-parameter 'lr' of type "
            "tensor<2xf64>; expected tensor<f64>");
}

TEST(Loader, LoadsAValidProgram) {
  auto program = Program::loadBytes(build());
  ASSERT_TRUE(program.ok()) << program.status();
  const Program &p = **program;
  EXPECT_EQ(p.name(), "step.bin");
  EXPECT_EQ(p.findFunction("f"), 0u);
  EXPECT_FALSE(p.findFunction("g"));
  EXPECT_EQ(p.functionSignature(0), "(tensor<2x3xf32>) -> (tensor<2x3xf32>)");
  ASSERT_EQ(p.tensors().size(), 2u);
  EXPECT_EQ(p.tensor(1).bytes, 24);
  EXPECT_EQ(p.tensor(1).name, "t");
  EXPECT_EQ(p.arenaSize(), 24);
}

TEST(Loader, LoadsFromAFile) {
  std::string path = ::testing::TempDir() + "/loader_test." +
                     std::to_string(::getpid()) + ".bin";
  std::string bytes = build();
  FILE *f = std::fopen(path.c_str(), "wb");
  ASSERT_TRUE(f);
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
  auto program = Program::loadFile(path);
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ((*program)->name(), path);

  auto missing = Program::loadFile("/nonexistent/x.bin");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(),
            "/nonexistent/x.bin: cannot open: No such file or directory");
  EXPECT_EQ(Program::loadFile("/").status().message(),
            "/: is a directory but a step.bin must be a regular file");
  EXPECT_EQ(Program::loadFile("/dev/null").status().message(),
            "/dev/null: is a character device but a step.bin must be a "
            "regular file");
}

// Opening a FIFO for reading waits for a writer; the loader must refuse it
// at once instead of hanging (issue 11).
TEST(Loader, RefusesAFifoWithoutBlocking) {
  std::string path = ::testing::TempDir() + "/loader_test." +
                     std::to_string(::getpid()) + ".fifo";
  ::unlink(path.c_str());
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  auto load = std::async(std::launch::async,
                         [&] { return Program::loadFile(path).status(); });
  if (load.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    // Unblock the open so that the test can end, then fail.
    int fd = ::open(path.c_str(), O_WRONLY);
    ::close(fd);
    load.wait();
    ::unlink(path.c_str());
    FAIL() << "Program::loadFile blocked on a FIFO";
  }
  EXPECT_EQ(load.get().message(),
            path + ": is a FIFO but a step.bin must be a regular file");
  ::unlink(path.c_str());
}

//===----------------------------------------------------------------------===//
// The gates before the semantic checks
//===----------------------------------------------------------------------===//

TEST(Loader, RejectsTinyAndForeignFiles) {
  EXPECT_EQ(errorOf("abc"),
            "step.bin: file is 3 bytes, too small for a step.bin (at least 8)");
  std::string bytes = build();
  bytes.replace(4, 4, "NPY\x01");
  EXPECT_EQ(
      errorOf(bytes),
      "step.bin: file identifier is 'NPY\\x01' but a step.bin has 'OMN1'");
  LoadOptions named;
  named.name = "model.bin";
  EXPECT_EQ(
      errorOf("abc", named),
      "model.bin: file is 3 bytes, too small for a step.bin (at least 8)");
}

TEST(Loader, RejectsWhatTheFlatBuffersVerifierRejects) {
  std::string bytes = build();
  EXPECT_EQ(errorOf(bytes.substr(0, bytes.size() / 2)),
            "step.bin: the FlatBuffers verifier rejected the file (an offset, "
            "length or nesting depth is out of range): the file is corrupt "
            "(copy it again or recompile it)");
}

TEST(Loader, RejectsOtherVersions) {
  EXPECT_EQ(errorOf(build([](StepBuilder &b) { b.version = 2; })),
            "step.bin: version = 2 but this omnirun reads version 1");
}

//===----------------------------------------------------------------------===//
// Integrity: the checksums (runtime/schema/Integrity.h)
//===----------------------------------------------------------------------===//

TEST(Integrity, Crc32cMatchesTheStandardAndItsPortableForm) {
  const std::string check = "123456789";
  const auto *digits = reinterpret_cast<const uint8_t *>(check.data());
  // The CRC-32C check value (RFC 3720 B.4 / the catalogue of CRCs).
  EXPECT_EQ(step::crc32c(digits, 9), 0xe3069283u);
  EXPECT_EQ(step::crc32cPortable(digits, 9), 0xe3069283u);
  EXPECT_EQ(step::crc32c(digits + 4, 5, step::crc32c(digits, 4)), 0xe3069283u);
  EXPECT_EQ(step::crc32c(nullptr, 0), 0u);
  // 32 zero bytes (RFC 3720 B.4).
  std::vector<uint8_t> zeros(32, 0);
  EXPECT_EQ(step::crc32c(zeros.data(), 32), 0x8a9136aau);
  std::mt19937 rng(7);
  std::vector<uint8_t> bytes(4099);
  for (uint8_t &b : bytes)
    b = static_cast<uint8_t>(rng());
  for (size_t begin : {0, 1, 3, 7})
    for (size_t size : {0, 1, 7, 8, 9, 63, 64, 4092})
      EXPECT_EQ(step::crc32c(bytes.data() + begin, size),
                step::crc32cPortable(bytes.data() + begin, size))
          << begin << " " << size;
}

/// A program with an executable and a constant, so that every section
/// has a checksum.
std::string
sectioned(const std::function<void(StepBuilder &)> &edit = nullptr) {
  return build([&](StepBuilder &b) {
    StepBuilder::ExecutableSpec e;
    e.name = "kernels";
    e.data = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0};
    e.kernels = {"k"};
    b.executable(e);
    b.constant(DType::F32, {2}, {1, 2, 3, 4, 5, 6, 7, 8});
    if (edit)
      edit(b);
  });
}

/// The byte offset of `p` (a pointer into `bytes`).
size_t offsetIn(const std::string &bytes, const void *p) {
  return static_cast<const char *>(p) - bytes.data();
}

/// The file after `edit` changes its bytes in place, with the checksums
/// recomputed when `reseal` (as a tool that rewrites files would).
std::string changed(std::string bytes,
                    const std::function<void(std::string &)> &edit,
                    bool reseal) {
  edit(bytes);
  if (reseal) {
    EXPECT_TRUE(step::sealStepBin(reinterpret_cast<uint8_t *>(bytes.data()),
                                  bytes.size()));
  }
  return bytes;
}

TEST(Integrity, NamesTheCorruptSection) {
  std::string good = sectioned();
  ASSERT_EQ(errorOf(good), "");
  // Views into the loaded copy locate the sections' bytes in `good`.
  const step::Step *root = step::GetStep(good.data());
  size_t code = offsetIn(good, root->executables()->Get(0)->data()->data());
  size_t constant = offsetIn(good, root->constants()->Get(0)->data()->data());
  size_t sum = *step::fileChecksumOffset(
      reinterpret_cast<const uint8_t *>(good.data()), good.size());
  size_t arena = offsetIn(good, root->tensors()->Get(1)->shape()->Data());
  auto flip = [&](size_t at) {
    return changed(good, [at](std::string &b) { b[at] ^= 0x10; }, false);
  };
  const uint32_t exeSum = root->integrity()->executables()->Get(0);
  const uint32_t constSum = root->integrity()->constants()->Get(0);
  auto hex = [](uint32_t v) {
    char s[16];
    std::snprintf(s, sizeof s, "0x%08x", v);
    return std::string(s);
  };
  std::string code2 = flip(code + 5);
  EXPECT_EQ(
      errorOf(code2),
      "step.bin: executables[0].data (8 bytes): CRC-32C is " +
          hex(step::crc32c(
              reinterpret_cast<const uint8_t *>(code2.data()) + code, 8)) +
          " but integrity.executables[0] records " + hex(exeSum) +
          ": the file is corrupt (copy it again or recompile it)");
  std::string constant2 = flip(constant);
  EXPECT_EQ(
      errorOf(constant2),
      "step.bin: constants[0].data (8 bytes): CRC-32C is " +
          hex(step::crc32c(reinterpret_cast<const uint8_t *>(constant2.data()) +
                               constant,
                           8)) +
          " but integrity.constants[0] records " + hex(constSum) +
          ": the file is corrupt (copy it again or recompile it)");
  // A tensor's dimension (metadata) and the checksum itself.
  for (size_t at : {arena, sum}) {
    std::string bad = flip(at);
    std::string message = errorOf(bad);
    EXPECT_EQ(message.rfind("step.bin: CRC-32C of the file's " +
                                std::to_string(good.size()) + " bytes is ",
                            0),
              0u)
        << message;
    EXPECT_NE(message.find("but integrity.file records"), std::string::npos)
        << message;
    EXPECT_NE(message.find(": the file is corrupt (copy it again or "
                           "recompile it)"),
              std::string::npos);
  }
  // Bytes appended or cut off.
  EXPECT_NE(errorOf(good + std::string(8, '\0')).find("CRC-32C of the file"),
            std::string::npos);
}

TEST(Integrity, EveryChangedByteIsRejected) {
  std::string good = sectioned();
  for (size_t at = 0; at < good.size(); ++at)
    for (uint8_t bit : {0x01, 0x80}) {
      std::string bad = good;
      bad[at] ^= bit;
      EXPECT_NE(errorOf(bad), "") << "byte " << at << " ^ " << int(bit);
    }
}

TEST(Integrity, IsRequired) {
  EXPECT_EQ(
      errorOf(sectioned([](StepBuilder &b) { b.writeIntegrity = false; })),
      "step.bin: integrity is missing but this omnirun needs the "
      "checksums omnic writes (written by an older omnic or another "
      "tool? recompile it)");
  // A file of another version is named as such, checksums or not.
  EXPECT_EQ(errorOf(sectioned([](StepBuilder &b) {
              b.writeIntegrity = false;
              b.version = 2;
            })),
            "step.bin: version = 2 but this omnirun reads version 1");
  // Unsealed (all checksums zero) and checksum lists that do not cover the
  // sections.
  EXPECT_EQ(
      errorOf(sectioned([](StepBuilder &b) {
        b.seal = false;
      })).rfind("step.bin: executables[0].data (8 bytes): CRC-32C is ", 0),
      0u);
  EXPECT_EQ(
      errorOf(sectioned([](StepBuilder &b) { b.integrityConstantCount = 0; })),
      "step.bin: integrity.constants has 0 checksums but there are 1 "
      "constants: the file is corrupt (copy it again or recompile it)");
  EXPECT_EQ(errorOf(sectioned(
                [](StepBuilder &b) { b.integrityExecutableCount = 2; })),
            "step.bin: integrity.executables has 2 checksums but there are 1 "
            "executables: the file is corrupt (copy it again or recompile "
            "it)");
}

//===----------------------------------------------------------------------===//
// Root, tensors, state, constants, executables
//===----------------------------------------------------------------------===//

TEST(Loader, ChecksTheRoot) {
  EXPECT_EQ(
      errorOf(build([](StepBuilder &b) { b.targetKind = "tpu"; })),
      "step.bin: target.kind: = 'tpu' but omnirun knows 'cpu' and 'cuda'");
  EXPECT_EQ(errorOf(build([](StepBuilder &b) { b.arenaSize = -8; })),
            "step.bin: arena_size: = -8 but it must be >= 0");
}

TEST(Loader, ChecksTensorTypes) {
  EXPECT_EQ(errorOf(build([](StepBuilder &b) {
              b.tensors[1].dtype = static_cast<DType>(9);
            })),
            "step.bin: tensors[1].dtype: = 9 but valid dtypes are 0..6 (f32, "
            "f64, f16, bf16, i1, i32, i64)");
  EXPECT_EQ(errorOf(build([](StepBuilder &b) { b.tensors[1].shape[1] = -3; })),
            "step.bin: tensors[1].shape[1]: = -3 but dimensions must be >= 0");
  EXPECT_EQ(errorOf(build([](StepBuilder &b) {
              b.tensors[1].shape = {int64_t(1) << 40, int64_t(1) << 30};
            })),
            "step.bin: tensors[1].shape: tensor<1099511627776x1073741824xf32> "
            "has more bytes than int64 can count");
  EXPECT_EQ(errorOf(build([](StepBuilder &b) {
              b.tensors[1].storage = static_cast<Storage>(7);
            })),
            "step.bin: tensors[1].storage: = 7 but valid storages are 0..3 "
            "(Arena, Argument, Constant, State)");
  EXPECT_EQ(errorOf(build([](StepBuilder &b) {
              b.tensors[0].role = static_cast<step::Role>(6);
            })),
            "step.bin: tensors[0].role: = 6 but valid roles are 0..5");
}

TEST(Loader, ChecksArenaRanges) {
  EXPECT_EQ(errorOf(build([](StepBuilder &b) { b.tensors[1].index = 8; })),
            "step.bin: tensors[1]: arena range [8, 32) of tensor<2x3xf32> is "
            "outside arena_size = 24");
  EXPECT_EQ(errorOf(build([](StepBuilder &b) {
              b.tensors[1].index = std::numeric_limits<int64_t>::max() - 4;
              b.arenaSize = std::numeric_limits<int64_t>::max();
            })),
            "step.bin: tensors[1]: arena range [9223372036854775803, "
            "9223372036854775827) of tensor<2x3xf32> is outside arena_size = "
            "9223372036854775807");
  EXPECT_EQ(errorOf(build([](StepBuilder &b) { b.tensors[1].index = -4; })),
            "step.bin: tensors[1].index: (arena offset) = -4 but it must be "
            ">= 0");
  EXPECT_EQ(errorOf(build([](StepBuilder &b) {
              b.tensors[1].index = 2;
              b.arenaSize = 64;
            })),
            "step.bin: tensors[1].index: (arena offset) = 2 is not a multiple "
            "of 4, the size of f32");
}

TEST(Loader, ChecksConstants) {
  EXPECT_EQ(errorOf(build([](StepBuilder &b) {
              b.constant(DType::F32, {2}, std::vector<uint8_t>(8));
              b.tensors.back().index = 3;
            })),
            "step.bin: tensors[2].index: (constant) = 3 but there are 1 "
            "constants");
  EXPECT_EQ(errorOf(build([](StepBuilder &b) {
              b.constant(DType::F32, {2, 3}, std::vector<uint8_t>(12));
            })),
            "step.bin: constants[0]: has 12 bytes x repeat 1 but tensors[2] "
            "(tensor<2x3xf32>) needs 24");
  // A splat: 4 bytes repeated 6 times is a 2x3 f32 tensor.
  EXPECT_EQ(errorOf(build([](StepBuilder &b) {
              b.constant(DType::F32, {2, 3}, std::vector<uint8_t>(4), "", 6);
            })),
            "");
  EXPECT_EQ(errorOf(build([](StepBuilder &b) {
              b.constant(DType::F32, {2, 3}, std::vector<uint8_t>(4), "", 5);
            })),
            "step.bin: constants[0]: has 4 bytes x repeat 5 but tensors[2] "
            "(tensor<2x3xf32>) needs 24");
  EXPECT_EQ(errorOf(build([](StepBuilder &b) {
              b.constant(DType::F32, {2, 3}, std::vector<uint8_t>(4), "", 0);
            })),
            "step.bin: constants[0].repeat: = 0 with 4 bytes of data, but it "
            "must be >= 1 (and the data non-empty when > 1)");
  EXPECT_EQ(errorOf(build([](StepBuilder &b) {
              b.constant(DType::F32, {2, 3}, std::vector<uint8_t>(4), "",
                         int64_t(1) << 62);
            })),
            "step.bin: constants[0].repeat: = 4611686018427387904 with 4 "
            "bytes of data, but it must be >= 1 (and the data non-empty when "
            "> 1)");
}

TEST(Loader, ChecksState) {
  EXPECT_EQ(errorOf(build([](StepBuilder &b) {
              b.stateTensor("w", DType::F32, {4});
              b.tensors.back().index = 1;
            })),
            "step.bin: tensors[2].index: (state) = 1 but there are 1 state "
            "slots");
  EXPECT_EQ(errorOf(build([](StepBuilder &b) {
              b.stateTensor("w", DType::F32, {4});
              b.tensors.back().shape = {5};
            })),
            "step.bin: tensors[2]: tensor<5xf32> aliases state[0] 'w' of type "
            "tensor<4xf32> (dtype and element count must match)");
  EXPECT_EQ(errorOf(build([](StepBuilder &b) {
              b.stateTensor("w", DType::F32, {4});
              b.stateTensor("w", DType::F32, {2});
            })),
            "step.bin: state[1].name: 'w' duplicates state[0].name");
  EXPECT_EQ(errorOf(build(
                [](StepBuilder &b) { b.stateTensor("", DType::F32, {4}); })),
            "step.bin: state[0].name: is empty but state slots are looked up "
            "by name");
  // A reshape of a state slot keeps its element count.
  EXPECT_EQ(errorOf(build([](StepBuilder &b) {
              b.stateTensor("w", DType::F32, {4});
              b.tensors.back().shape = {2, 2};
            })),
            "");
}

TEST(Loader, ChecksExecutables) {
  auto withExe = [](std::function<void(StepBuilder::ExecutableSpec &)> edit) {
    return build([&](StepBuilder &b) {
      StepBuilder::ExecutableSpec e;
      e.name = "kernels";
      e.target = "+avx2,+fma";
      e.data = {0x7f, 'E', 'L', 'F', 2, 1, 1};
      e.kernels = {"k"};
      edit(e);
      b.executable(e);
    });
  };
  LoadOptions options;
  EXPECT_EQ(errorOf(withExe([](auto &) {}), options), "");
  // The target (CPU features, SM architecture) is the driver's to check when
  // it loads the executable (CpuExecutableTest); the loader accepts code for
  // a CPU this machine is not.
  EXPECT_EQ(errorOf(withExe([](auto &e) {
                      e.target = "+avx512f,+avx512vnni,+amx-tile,+amx-int8";
                    }),
                    options),
            "");
  EXPECT_EQ(
      errorOf(withExe([](auto &e) { e.data = {'M', 'Z', 0, 0, 0}; }), options),
      "step.bin: executables[0].data: has 5 bytes that do not start "
      "with the ELF magic (7f 45 4c 46)");
  EXPECT_EQ(errorOf(withExe([](auto &e) {
                      e.format = static_cast<step::ExecutableFormat>(5);
                    }),
                    options),
            "step.bin: executables[0].format: = 5 but valid formats are 0..2 "
            "(ElfSharedObject, Ptx, Cubin)");
  EXPECT_EQ(errorOf(withExe([](auto &e) { e.kernels = {"k", ""}; }), options),
            "step.bin: executables[0].kernels[1]: is empty but kernels are "
            "looked up by symbol name");
}

//===----------------------------------------------------------------------===//
// Functions
//===----------------------------------------------------------------------===//

TEST(Loader, ChecksFunctions) {
  EXPECT_EQ(errorOf(build([](StepBuilder &b) { b.function("f", {}, {}, {}); })),
            "step.bin: functions[1].name: 'f' duplicates functions[0].name");
  EXPECT_EQ(errorOf(build([](StepBuilder &b) { b.function("", {}, {}, {}); })),
            "step.bin: functions[1].name: is empty but functions are called "
            "by name");
  EXPECT_EQ(
      errorOf(build([](StepBuilder &b) { b.function("g", {0, 9}, {}, {}); })),
      "step.bin: functions[1]: inputs[1] = 9 but there are 2 tensors");
  EXPECT_EQ(
      errorOf(build([](StepBuilder &b) { b.function("g", {1}, {}, {}); })),
      "step.bin: functions[1]: inputs[0] is tensors[1] with storage "
      "Arena 0 but input 0 must be Argument 0");
  EXPECT_EQ(
      errorOf(build([](StepBuilder &b) { b.function("g", {}, {}, {}, 3); })),
      "step.bin: functions[1].num_scalars: = 3 but there are 0 scalars");
  // Output 0 written into the result buffer of output 1.
  EXPECT_EQ(errorOf(build([](StepBuilder &b) {
              uint32_t r1 = b.argument(DType::F32, {2}, 1);
              uint32_t r0 = b.argument(DType::F32, {2}, 0);
              b.function("g", {}, {r1, r0}, {});
            })),
            "step.bin: functions[1]: outputs[0] is tensors[2], argument 1, the "
            "result buffer of output 1; expected argument 0 or a tensor that "
            "is not a result buffer");
}

TEST(Loader, ChecksArgumentAliases) {
  EXPECT_EQ(errorOf(withCommands(
                [](StepBuilder &b) {
                  uint32_t x = b.argument(DType::F32, {4}, 0);
                  uint32_t y = b.argument(DType::F32, {4}, 3);
                  return std::vector{b.copy(x, y)};
                },
                {0})),
            "step.bin: functions[0].commands[0] (Copy): dest is tensors[1], "
            "argument 3, but functions[0] has 1 inputs and 0 outputs");
  EXPECT_EQ(errorOf(withCommands(
                [](StepBuilder &b) {
                  uint32_t x = b.argument(DType::F32, {4}, 0);
                  uint32_t y = b.argument(DType::F32, {5}, 0);
                  uint32_t t = b.arena(DType::F32, {5});
                  (void)x;
                  return std::vector{b.copy(y, t)};
                },
                {0})),
            "step.bin: functions[0].commands[0] (Copy): source is tensors[1] "
            "(tensor<5xf32>, 20 bytes), an alias of argument 0 of "
            "functions[0] which is tensors[0] (tensor<4xf32>, 16 bytes)");
}

//===----------------------------------------------------------------------===//
// Commands
//===----------------------------------------------------------------------===//

TEST(Loader, ChecksCommandKinds) {
  EXPECT_EQ(errorOf(withCommands([](StepBuilder &b) {
              return std::vector{b.command(CommandKind::NONE, 0)};
            })),
            "step.bin: functions[0].commands[0]: kind is NONE but every "
            "command needs a kind");
  EXPECT_EQ(errorOf(withCommands([](StepBuilder &b) {
              auto fill = step::CreateFill(b.fbb, 0);
              return std::vector{
                  b.command(static_cast<CommandKind>(42), fill.Union())};
            })),
            "step.bin: functions[0].commands[0]: kind = 42 but valid kinds are "
            "1..11 (Dispatch, LibraryCall, Copy, Fill, Random, HostCall, "
            "ScalarOp, Loop, Call, Collective, AxisIndex)");
  EXPECT_EQ(errorOf(withCommands([](StepBuilder &b) {
              return std::vector{b.command(CommandKind::Fill, 0)};
            })),
            "step.bin: functions[0].commands[0] (Fill): the command's table "
            "is missing");
}

TEST(Loader, ChecksDispatch) {
  // The example of the design: 12 tensors, a bad operand in command 3.
  auto program = [](uint32_t exeIndex, uint32_t kernel, int64_t grid,
                    uint32_t operand, uint32_t scalar) {
    return withCommands([=](StepBuilder &b) {
      StepBuilder::ExecutableSpec e;
      e.name = "kernels";
      e.data = {0x7f, 'E', 'L', 'F'};
      e.kernels = {"add", "mul"};
      b.executable(e);
      for (int i = 0; i < 12; ++i)
        b.arena(DType::F32, {4});
      b.scalar("i");
      std::vector<omni::testing::CommandRef> commands;
      for (int i = 0; i < 3; ++i)
        commands.push_back(b.fill(0, {0}));
      commands.push_back(
          b.dispatch(exeIndex, kernel, grid, {0, operand}, {2}, {scalar}));
      return commands;
    });
  };
  EXPECT_EQ(errorOf(program(0, 1, 4, 1, 0)), "");
  EXPECT_EQ(errorOf(program(0, 1, 4, 57, 0)),
            "step.bin: functions[0].commands[3] (Dispatch): operands[1] = 57 "
            "but there are 12 tensors");
  EXPECT_EQ(errorOf(program(1, 0, 4, 1, 0)),
            "step.bin: functions[0].commands[3] (Dispatch): executable = 1 but "
            "there are 1 executables");
  EXPECT_EQ(errorOf(program(0, 2, 4, 1, 0)),
            "step.bin: functions[0].commands[3] (Dispatch): kernel = 2 but "
            "executables[0] ('kernels') exports 2 kernels");
  EXPECT_EQ(errorOf(program(0, 0, -1, 1, 0)),
            "step.bin: functions[0].commands[3] (Dispatch): grid = -1 but it "
            "must be >= 0");
  EXPECT_EQ(errorOf(program(0, 0, 4, 1, 1)),
            "step.bin: functions[0].commands[3] (Dispatch): scalars[0] = 1 but "
            "there are 1 scalars");
}

/// c = a + b with kernel 'add' (compiled for three f32[4] buffers, grid 4)
/// of an executable that also has a kernel no Dispatch may run; tensors
/// 0..2 are f32[4], 3 is f64[4], 4 is f32[8].
std::string signed_(
    const std::function<std::vector<omni::testing::CommandRef>(StepBuilder &)>
        &commands,
    const std::function<void(StepBuilder::ExecutableSpec &)> &edit = nullptr) {
  return withCommands([&](StepBuilder &b) {
    StepBuilder::ExecutableSpec e;
    e.name = "kernels";
    e.data = {0x7f, 'E', 'L', 'F'};
    e.kernels = {"add", "unused"};
    StepBuilder::SignatureSpec add;
    add.operands = {{DType::F32, 16}, {DType::F32, 16}};
    add.results = {{DType::F32, 16}};
    add.grid = 4;
    e.signatures = {add, StepBuilder::SignatureSpec()};
    if (edit)
      edit(e);
    b.executable(e);
    for (int i = 0; i < 3; ++i)
      b.arena(DType::F32, {4});
    b.arena(DType::F64, {4});
    b.arena(DType::F32, {8});
    b.scalar("i");
    return commands(b);
  });
}

TEST(Loader, ChecksDispatchesAgainstKernelSignatures) {
  using Commands = std::vector<omni::testing::CommandRef>;
  auto one = [](uint32_t kernel, int64_t grid, std::vector<uint32_t> operands,
                std::vector<uint32_t> results,
                std::vector<uint32_t> scalars = {}) {
    return [=](StepBuilder &b) {
      return Commands{b.dispatch(0, kernel, grid, operands, results, scalars)};
    };
  };
  const std::string at =
      "step.bin: functions[0].commands[0] (Dispatch) in 'f': ";
  EXPECT_EQ(errorOf(signed_(one(0, 4, {0, 1}, {2}))), "");
  EXPECT_EQ(errorOf(signed_(one(0, 4, {0}, {2}))),
            at + "operands has 1 entries but kernel 'add' reads 2 buffers");
  EXPECT_EQ(errorOf(signed_(one(0, 4, {0, 3}, {2}))),
            at + "operands[1] is tensors[3] (tensor<4xf64>, 32 bytes) but "
                 "kernel 'add' reads f32 x 16 bytes there");
  EXPECT_EQ(errorOf(signed_(one(0, 4, {0, 1}, {4}))),
            at + "results[0] is tensors[4] (tensor<8xf32>, 32 bytes) but "
                 "kernel 'add' writes f32 x 16 bytes there");
  EXPECT_EQ(errorOf(signed_(one(0, 4, {0, 1}, {2, 1}))),
            at + "results has 2 entries but kernel 'add' writes 1 buffers");
  EXPECT_EQ(errorOf(signed_(one(0, 5, {0, 1}, {2}))),
            at + "grid = 5 but kernel 'add' was compiled for grid 4");
  EXPECT_EQ(errorOf(signed_(one(0, 4, {0, 1}, {2}, {0}))),
            at + "scalars has 1 entries but kernel 'add' reads 0 index "
                 "registers");
  EXPECT_EQ(errorOf(signed_(one(1, 0, {}, {}))),
            at + "dispatches kernel 'unused', which its signature marks as "
                 "never run (grid -1)");
  // Inside a Loop the path names the body.
  EXPECT_EQ(errorOf(signed_([](StepBuilder &b) {
              return Commands{
                  b.loop(0, 0, 2, 1, {b.dispatch(0, 0, 4, {0, 4}, {2})})};
            })),
            "step.bin: functions[0].commands[0].body[0] (Dispatch) in 'f': "
            "operands[1] is tensors[4] (tensor<8xf32>, 32 bytes) but kernel "
            "'add' reads f32 x 16 bytes there");

  // The signatures themselves.
  auto exe = [&](std::function<void(StepBuilder::ExecutableSpec &)> edit) {
    return errorOf(signed_(one(0, 4, {0, 1}, {2}), edit));
  };
  EXPECT_EQ(exe([](auto &e) { e.signatures.pop_back(); }),
            "step.bin: executables[0].signatures: has 1 entries but expected "
            "2 (one per kernel)");
  EXPECT_EQ(exe([](auto &e) {
              e.signatures.clear();
              e.deriveSignatures = false;
            }),
            "step.bin: executables[0].signatures: has 0 entries but expected "
            "2 (one per kernel)");
  EXPECT_EQ(exe([](auto &e) {
              e.signatures[0].operands[1].first = static_cast<DType>(9);
            }),
            "step.bin: executables[0].signatures[0].operands[1].dtype: = 9 "
            "but valid dtypes are 0..6 (f32, f64, f16, bf16, i1, i32, i64)");
  EXPECT_EQ(exe([](auto &e) { e.signatures[0].results[0].second = -16; }),
            "step.bin: executables[0].signatures[0].results[0].bytes: = -16 "
            "but it must be >= 0");
  EXPECT_EQ(exe([](auto &e) { e.signatures[1].grid = -2; }),
            "step.bin: executables[0].signatures[1].grid: = -2 but it must be "
            ">= 0 (or -1: never run)");
}

/// A Matmul of tensors 0 x 1 -> 2 (f32[2, 2]) marked `epilogue`, then
/// `commands`; kernel 'add' reads two 16-byte buffers and writes one over
/// grid 2, item w touching 8 bytes (a row) of its first operand and result
/// and all of its second. Tensors 3 and 4 are f32[2, 2], 5..7 the input,
/// filter and result of a 1x1 conv2d.
std::string withEpilogue(
    const std::function<std::vector<omni::testing::CommandRef>(StepBuilder &)>
        &commands,
    const std::function<void(StepBuilder::SignatureSpec &)> &edit = nullptr) {
  return withCommands([&](StepBuilder &b) {
    StepBuilder::ExecutableSpec e;
    e.name = "kernels";
    e.data = {0x7f, 'E', 'L', 'F'};
    e.kernels = {"add"};
    StepBuilder::SignatureSpec add;
    add.operands = {{DType::F32, 16}, {DType::F32, 16}};
    add.results = {{DType::F32, 16}};
    add.grid = 2;
    add.itemBytes = std::vector<int64_t>{8, 0, 8};
    if (edit)
      edit(add);
    e.signatures = {add};
    b.executable(e);
    for (int i = 0; i < 5; ++i)
      b.arena(DType::F32, {2, 2});
    b.arena(DType::F32, {1, 1, 2, 2});
    b.arena(DType::F32, {1, 1, 1, 1});
    b.arena(DType::F32, {1, 1, 2, 2});
    return commands(b);
  });
}

TEST(Loader, ChecksMatmulEpilogues) {
  using Commands = std::vector<omni::testing::CommandRef>;
  auto matmul = [](StepBuilder &b) {
    return b.library(Library::Matmul, {0, 1}, {2}, {0, 0}, {},
                     /*epilogue=*/true);
  };
  auto pair = [&](std::vector<uint32_t> operands) {
    return [=](StepBuilder &b) {
      return Commands{matmul(b), b.dispatch(0, 0, 2, operands, {4})};
    };
  };
  EXPECT_EQ(errorOf(withEpilogue(pair({2, 3}))), "");
  // In place over the result is the same slices.
  EXPECT_EQ(errorOf(withEpilogue([&](StepBuilder &b) {
              return Commands{matmul(b), b.dispatch(0, 0, 2, {2, 3}, {2})};
            })),
            "");
  EXPECT_EQ(errorOf(withEpilogue([&](StepBuilder &b) {
              return Commands{b.library(Library::Conv2d, {5, 6}, {7},
                                        {1, 1, 0, 0, 1, 1}, {}, true),
                              b.dispatch(0, 0, 2, {2, 3}, {4})};
            })),
            "step.bin: functions[0].commands[0] (LibraryCall): has an "
            "epilogue but is Conv2d; only a Matmul takes one");
  EXPECT_EQ(errorOf(withEpilogue(
                [&](StepBuilder &b) { return Commands{matmul(b)}; })),
            "step.bin: functions[0].commands[0] (LibraryCall): has an "
            "epilogue but the next command of its list is not a Dispatch");
  EXPECT_EQ(errorOf(withEpilogue([&](StepBuilder &b) {
              return Commands{matmul(b), b.fill(4, {0}),
                              b.dispatch(0, 0, 2, {2, 3}, {4})};
            })),
            "step.bin: functions[0].commands[0] (LibraryCall): has an "
            "epilogue but the next command of its list is not a Dispatch");
  const std::string at =
      "step.bin: functions[0].commands[1] (Dispatch) in 'f': is the epilogue "
      "of the Matmul before it but ";
  EXPECT_EQ(errorOf(withEpilogue(pair({3, 3}))),
            at + "does not read its result (tensors[2] (tensor<2x2xf32>, 16 "
                 "bytes))");
  EXPECT_EQ(errorOf(withEpilogue(pair({3, 2}))),
            at + "reads its result (tensors[2] (tensor<2x2xf32>, 16 bytes)) "
                 "as operands[1] with item_bytes 0 over grid 2, which are not "
                 "slices that tile it");
  EXPECT_EQ(errorOf(withEpilogue(pair({2, 3}),
                                 [](auto &sig) { sig.itemBytes->at(0) = 4; })),
            at + "reads its result (tensors[2] (tensor<2x2xf32>, 16 bytes)) "
                 "as operands[0] with item_bytes 4 over grid 2, which are not "
                 "slices that tile it");
  EXPECT_EQ(errorOf(withEpilogue(pair({2, 3}),
                                 [](auto &sig) { sig.itemBytes.reset(); })),
            at + "kernel 'add' has no item_bytes");
  // The signature's own item_bytes.
  EXPECT_EQ(errorOf(withEpilogue(pair({2, 3}),
                                 [](auto &sig) { sig.itemBytes->pop_back(); })),
            "step.bin: executables[0].signatures[0].item_bytes: has 2 entries "
            "but expected 3 (one per operand and result)");
  EXPECT_EQ(errorOf(withEpilogue(pair({2, 3}),
                                 [](auto &sig) { sig.itemBytes->at(1) = -8; })),
            "step.bin: executables[0].signatures[0].item_bytes[1]: = -8 but it "
            "must be >= 0");
}

// GPU code (step.fbs GpuKernel): one launch list per kernel, present
// exactly for Ptx/Cubin executables, every launch well formed.
TEST(Loader, ChecksGpuKernels) {
  using Commands = std::vector<omni::testing::CommandRef>;
  auto run = [](StepBuilder &b) {
    return Commands{b.dispatch(0, 0, 4, {0, 1}, {2})};
  };
  // 'add' reads buffers 0, 1 and writes 2, with one scratch buffer (3).
  auto cubin = [&](std::function<void(StepBuilder::ExecutableSpec &)> edit) {
    return errorOf(signed_(run, [&](StepBuilder::ExecutableSpec &e) {
      e.format = step::ExecutableFormat::Cubin;
      e.target = "sm_90a";
      StepBuilder::GpuLaunchSpec init{"add_0", {1, 1, 1}, {4, 1, 1}, 0, {3}};
      StepBuilder::GpuLaunchSpec add{
          "add_1", {4, 1, 1}, {256, 1, 1}, 0, {0, 1, 3, 2}};
      e.gpuKernels = std::vector<StepBuilder::GpuKernelSpec>{
          {{init, add}, {16}}, {{}, {}}};
      e.ptx = std::vector<uint8_t>{'.', 'v', 0};
      if (edit)
        edit(e);
    }));
  };
  const std::string at = "step.bin: executables[0].gpu_kernels";
  EXPECT_EQ(cubin(nullptr), "");
  EXPECT_EQ(cubin([](auto &e) { e.format = step::ExecutableFormat::Ptx; }),
            "step.bin: executables[0].ptx: is present but the executable is "
            "not a cubin");
  EXPECT_EQ(cubin([](auto &e) {
              e.format = step::ExecutableFormat::Ptx;
              e.ptx.reset();
            }),
            "");
  EXPECT_EQ(cubin([](auto &e) { e.gpuKernels->pop_back(); }),
            at + ": has 1 entries but expected 2 (one per kernel of GPU "
                 "code)");
  EXPECT_EQ(cubin([](auto &e) { e.gpuKernels.reset(); }),
            at + ": has 0 entries but expected 2 (one per kernel of GPU "
                 "code)");
  EXPECT_EQ(cubin([](auto &e) {
              e.format = step::ExecutableFormat::ElfSharedObject;
            }),
            at + ": is present but the executable is not GPU code (format "
                 "ElfSharedObject)");
  EXPECT_EQ(cubin([](auto &e) {
              e.format = step::ExecutableFormat::ElfSharedObject;
              e.gpuKernels.reset();
            }),
            "step.bin: executables[0].ptx: is present but the executable is "
            "not a cubin (format ElfSharedObject)");
  auto launch = [&](std::function<void(StepBuilder::GpuLaunchSpec &)> edit) {
    return cubin([&](auto &e) { edit((*e.gpuKernels)[0].launches[1]); });
  };
  const std::string l = at + "[0].launches[1]";
  EXPECT_EQ(launch([](auto &g) { g.entry = ""; }),
            l + ".entry: is empty but launches look up their entry by name");
  EXPECT_EQ(launch([](auto &g) { g.grid = {4, 1}; }),
            l + ".grid: has 2 dimensions but expected 3");
  EXPECT_EQ(launch([](auto &g) { g.block = {256, 1, 1, 1}; }),
            l + ".block: has 4 dimensions but expected 3");
  EXPECT_EQ(launch([](auto &g) { g.grid[2] = 0; }),
            l + ".grid[2]: = 0 but every dimension must be >= 1");
  EXPECT_EQ(launch([](auto &g) { g.block = {32, 32, 2}; }),
            l + ".block: has 2048 threads but a block has at most 1024");
  EXPECT_EQ(launch([](auto &g) { g.block = {32, 32, 1}; }), "");
  EXPECT_EQ(launch([](auto &g) { g.args[3] = 4; }),
            l + ".args[3]: = 4 but the kernel has 4 buffers (operands, "
                "results, scratch)");
  EXPECT_EQ(cubin([](auto &e) { (*e.gpuKernels)[0].scratch = {16, -8}; }),
            at + "[0].scratch[1]: = -8 but it must be >= 0");
  // Without its scratch buffer, index 3 is out of range.
  EXPECT_EQ(cubin([](auto &e) { (*e.gpuKernels)[0].scratch.clear(); }),
            at + "[0].launches[0].args[0]: = 3 but the kernel has 3 buffers "
                 "(operands, results, scratch)");
  EXPECT_EQ(cubin([](auto &e) { (*e.gpuKernels)[0].inPlace = {{1, 0}}; }), "");
  EXPECT_EQ(cubin([](auto &e) { (*e.gpuKernels)[0].inPlace = {{1}}; }),
            at + "[0].in_place: has 1 entries but it holds (operand, "
                 "result) pairs");
  EXPECT_EQ(cubin([](auto &e) { (*e.gpuKernels)[0].inPlace = {{2, 0}}; }),
            at + "[0].in_place[0]: pairs operand 2 with result 0 but the "
                 "kernel has 2 operands and 1 results, and a pair is one "
                 "size");
}

// A kernel writes each result apart from its other buffers or over one
// operand whole (the memory plan's in-place rule), and GPU code, whose other
// parameters are noalias, only over the operands its in_place pairs name:
// anything else would compute wrong values without a word.
TEST(Loader, ChecksTheBytesADispatchsBuffersShare) {
  using Commands = std::vector<omni::testing::CommandRef>;
  const std::string at =
      "step.bin: functions[0].commands[0] (Dispatch) in 'f': ";
  // 'add' (operands 0 and 1 at arena offsets 0 and 64, 16 bytes each)
  // writing a tensor at `offset`.
  auto add = [](int64_t offset) {
    return [=](StepBuilder &b) {
      uint32_t r = b.tensor({"r",
                             DType::F32,
                             {4},
                             step::Storage::Arena,
                             offset,
                             step::Role::Transient});
      return Commands{b.dispatch(0, 0, 4, {0, 1}, {r})};
    };
  };
  EXPECT_EQ(errorOf(signed_(add(256))), "");
  EXPECT_EQ(errorOf(signed_(add(64))), ""); // over operand 1 whole
  EXPECT_EQ(
      errorOf(signed_(add(72))),
      at + "results[0] (" + "tensors[5] (tensor<4xf32>, 16 bytes)" +
          ") and operands[1] (tensors[1] (tensor<4xf32>, 16 bytes)) share some "
          "bytes, but a kernel writes a result apart from its other "
          "buffers or over one operand whole");
  // Two results in one buffer.
  auto twoResults = [](StepBuilder::ExecutableSpec &e) {
    e.signatures[1].operands = {{DType::F32, 16}};
    e.signatures[1].results = {{DType::F32, 16}, {DType::F32, 16}};
    e.signatures[1].grid = 4;
  };
  EXPECT_EQ(
      errorOf(signed_(
          [](StepBuilder &b) {
            return Commands{b.dispatch(0, 1, 4, {0}, {1, 1})};
          },
          twoResults)),
      at +
          "results[1] (tensors[1] (tensor<4xf32>, 16 bytes)) and results[0] "
          "(tensors[1] (tensor<4xf32>, 16 bytes)) share all their bytes, but a "
          "kernel writes a result apart from its other buffers or "
          "over one operand whole");
  // GPU code: the pair must be listed, unless the file lists none (older
  // files).
  auto cubin = [&](std::optional<std::vector<uint32_t>> inPlace) {
    return errorOf(signed_(add(64), [&](StepBuilder::ExecutableSpec &e) {
      e.format = step::ExecutableFormat::Ptx;
      e.target = "sm_90a";
      StepBuilder::GpuLaunchSpec launch{
          "add_0", {1, 1, 1}, {4, 1, 1}, 0, {0, 1, 2}};
      e.gpuKernels = std::vector<StepBuilder::GpuKernelSpec>{
          {{launch}, {}, inPlace}, {{}, {}, std::nullopt}};
    }));
  };
  EXPECT_EQ(cubin(std::vector<uint32_t>{1, 0}), "");
  EXPECT_EQ(cubin(std::nullopt), "");
  EXPECT_EQ(
      cubin(std::vector<uint32_t>{0, 0}),
      at + "results[0] is written over operands[1] (tensors[1] "
           "(tensor<4xf32>, 16 bytes)) but kernel 'add' was compiled with them "
           "apart (in_place does not pair them)");
  EXPECT_EQ(
      cubin(std::vector<uint32_t>{}),
      at + "results[0] is written over operands[1] (tensors[1] "
           "(tensor<4xf32>, 16 bytes)) but kernel 'add' was compiled with them "
           "apart (in_place does not pair them)");
}

// Issue 11: one changed byte in a Dispatch's operand list or in a tensor's
// dimension used to run the kernel against buffers it was not compiled for.
// Now the checksum refuses it, and a file whose checksums were recomputed
// after the change is refused by the kernel's signature.
TEST(Loader, OneChangedByteNeverReachesAKernel) {
  const std::string good = signed_([](StepBuilder &b) {
    return std::vector{b.dispatch(0, 0, 4, {0, 1}, {2})};
  });
  ASSERT_EQ(errorOf(good), "");
  const step::Step *root = step::GetStep(good.data());
  const step::Dispatch *d =
      root->functions()->Get(0)->commands()->Get(0)->kind_as_Dispatch();
  // operands[1]: 1 -> 4 (tensor<8xf32>); tensors[1].shape[0]: 4 -> 8.
  size_t operand = offsetIn(good, d->operands()->Data() + 4);
  size_t dim = offsetIn(good, root->tensors()->Get(1)->shape()->Data());
  auto operandTo4 = [&](std::string &b) { b[operand] = 4; };
  auto dimTo8 = [&](std::string &b) { b[dim] = 8; };
  for (auto edit : {std::function<void(std::string &)>(operandTo4),
                    std::function<void(std::string &)>(dimTo8)})
    EXPECT_EQ(errorOf(changed(good, edit, false))
                  .rfind("step.bin: CRC-32C of the file's ", 0),
              0u);
  const std::string at =
      "step.bin: functions[0].commands[0] (Dispatch) in 'f': ";
  EXPECT_EQ(errorOf(changed(good, operandTo4, true)),
            at + "operands[1] is tensors[4] (tensor<8xf32>, 32 bytes) but "
                 "kernel 'add' reads f32 x 16 bytes there");
  EXPECT_EQ(errorOf(changed(good, dimTo8, true)),
            at + "operands[1] is tensors[1] (tensor<8xf32>, 32 bytes) but "
                 "kernel 'add' reads f32 x 16 bytes there");
}

TEST(Loader, RejectsWritesToConstants) {
  EXPECT_EQ(errorOf(withCommands([](StepBuilder &b) {
              uint32_t c = b.constant(DType::F32, {1}, {0, 0, 0, 0});
              return std::vector{b.fill(c, {1})};
            })),
            "step.bin: functions[0].commands[0] (Fill): dest is tensors[0], a "
            "Constant (read-only)");
}

/// A Matmul of lhs `l` and rhs `r` into `o` with the given attributes.
std::string matmul(std::vector<int64_t> l, std::vector<int64_t> r,
                   std::vector<int64_t> o, std::vector<int64_t> ints = {0, 0},
                   DType rhsType = DType::F32) {
  return withCommands([&](StepBuilder &b) {
    uint32_t lhs = b.arena(DType::F32, l), rhs = b.arena(rhsType, r);
    uint32_t out = b.arena(DType::F32, o);
    return std::vector{b.library(Library::Matmul, {lhs, rhs}, {out}, ints)};
  });
}

TEST(Loader, ChecksMatmul) {
  EXPECT_EQ(errorOf(matmul({2, 3}, {3, 4}, {2, 4})), "");
  EXPECT_EQ(errorOf(matmul({3, 2}, {4, 3}, {2, 4}, {1, 1})), "");
  EXPECT_EQ(errorOf(matmul({5, 2, 3}, {3, 4}, {5, 2, 4})), "");
  EXPECT_EQ(errorOf(matmul({5, 2, 3}, {5, 3, 4}, {5, 2, 4})), "");
  EXPECT_EQ(errorOf(matmul({2, 3}, {4, 5}, {2, 5})),
            "step.bin: functions[0].commands[0] (LibraryCall Matmul): lhs is "
            "tensor<2x3xf32> and rhs is tensor<4x5xf32>: contraction sizes 3 "
            "and 4 differ");
  EXPECT_EQ(errorOf(matmul({2, 3}, {3, 4}, {2, 5})),
            "step.bin: functions[0].commands[0] (LibraryCall Matmul): result "
            "is tensor<2x5xf32> but lhs x rhs gives tensor<2x4xf32>");
  EXPECT_EQ(errorOf(matmul({5, 2, 3}, {6, 3, 4}, {5, 2, 4})),
            "step.bin: functions[0].commands[0] (LibraryCall Matmul): rhs is "
            "tensor<6x3x4xf32> and lhs is tensor<5x2x3xf32>: batch dimension "
            "0 differs");
  EXPECT_EQ(errorOf(matmul({5, 2, 3}, {1, 5, 3, 4}, {5, 2, 4})),
            "step.bin: functions[0].commands[0] (LibraryCall Matmul): rhs is "
            "tensor<1x5x3x4xf32> but expected rank 2 (shared by every batch) "
            "or rank 3 (the rank of lhs)");
  EXPECT_EQ(errorOf(matmul({3}, {3, 4}, {4})),
            "step.bin: functions[0].commands[0] (LibraryCall Matmul): lhs is "
            "tensor<3xf32> but expected rank >= 2");
  EXPECT_EQ(errorOf(matmul({2, 3}, {3, 4}, {2, 4}, {0})),
            "step.bin: functions[0].commands[0] (LibraryCall Matmul): "
            "int_attrs has 1 entries but expected 2 (transpose_lhs, "
            "transpose_rhs)");
  EXPECT_EQ(errorOf(matmul({2, 3}, {3, 4}, {2, 4}, {0, 2})),
            "step.bin: functions[0].commands[0] (LibraryCall Matmul): "
            "int_attrs[1] (transpose_rhs) = 2 but expected 0 or 1");
  EXPECT_EQ(errorOf(matmul({2, 3}, {3, 4}, {2, 4}, {0, 0}, DType::F64)),
            "step.bin: functions[0].commands[0] (LibraryCall Matmul): rhs is "
            "tensor<3x4xf64> but lhs is tensor<2x3xf32>: element types must "
            "match");
  EXPECT_EQ(errorOf(withCommands([](StepBuilder &b) {
              uint32_t a = b.arena(DType::F32, {2, 2});
              return std::vector{b.library(Library::Matmul, {a}, {a}, {0, 0})};
            })),
            "step.bin: functions[0].commands[0] (LibraryCall Matmul): "
            "operands has 1 entries but expected 2 (lhs, rhs)");
  EXPECT_EQ(errorOf(withCommands([](StepBuilder &b) {
              uint32_t a = b.arena(DType::F32, {2, 2});
              return std::vector{
                  b.library(static_cast<Library>(9), {a}, {a}, {})};
            })),
            "step.bin: functions[0].commands[0] (LibraryCall): library = 9 "
            "but valid libraries are 0..3 (Matmul, Conv2d, Attention, "
            "AttentionBackward)");
}

std::string conv(std::vector<int64_t> x, std::vector<int64_t> w,
                 std::vector<int64_t> y, std::vector<int64_t> ints) {
  return withCommands([&](StepBuilder &b) {
    uint32_t in = b.arena(DType::F32, x), filter = b.arena(DType::F32, w);
    uint32_t out = b.arena(DType::F32, y);
    return std::vector{b.library(Library::Conv2d, {in, filter}, {out}, ints)};
  });
}

TEST(Loader, ChecksConv2d) {
  const std::vector<int64_t> attrs = {1, 1, 1, 1, 1, 1};
  EXPECT_EQ(errorOf(conv({1, 4, 8, 8}, {8, 4, 3, 3}, {1, 8, 8, 8}, attrs)), "");
  EXPECT_EQ(errorOf(conv({1, 4, 9, 8}, {8, 4, 3, 3}, {1, 8, 4, 3},
                         {2, 3, 0, 1, 1, 1})),
            "");
  EXPECT_EQ(errorOf(conv({1, 4, 8, 8}, {8, 3, 3, 3}, {1, 8, 8, 8}, attrs)),
            "step.bin: functions[0].commands[0] (LibraryCall Conv2d): filter "
            "is tensor<8x3x3x3xf32> but the input tensor<1x4x8x8xf32> has 4 "
            "channels");
  EXPECT_EQ(errorOf(conv({1, 4, 8, 8}, {8, 4, 3, 3}, {1, 8, 6, 6}, attrs)),
            "step.bin: functions[0].commands[0] (LibraryCall Conv2d): result "
            "is tensor<1x8x6x6xf32> but the convolution gives "
            "tensor<1x8x8x8xf32>");
  EXPECT_EQ(errorOf(conv({1, 4, 8, 8}, {8, 4, 3, 3}, {1, 8, 8, 8},
                         {1, 0, 1, 1, 1, 1})),
            "step.bin: functions[0].commands[0] (LibraryCall Conv2d): "
            "int_attrs[1] (stride_w) = 0 but expected >= 1");
  EXPECT_EQ(errorOf(conv({1, 4, 2, 2}, {8, 4, 3, 3}, {1, 8, 1, 1},
                         {1, 1, 0, 0, 1, 1})),
            "step.bin: functions[0].commands[0] (LibraryCall Conv2d): the "
            "output would be empty along H: input tensor<1x4x2x2xf32>, filter "
            "tensor<8x4x3x3xf32>, padding 0, dilation 1");
  EXPECT_EQ(errorOf(conv({1, 4, 8}, {8, 4, 3, 3}, {1, 8, 8, 8}, attrs)),
            "step.bin: functions[0].commands[0] (LibraryCall Conv2d): input is "
            "tensor<1x4x8xf32> but expected rank 4");
}

std::string attention(std::vector<std::vector<int64_t>> shapes,
                      std::vector<int64_t> ints, std::vector<double> floats) {
  return withCommands([&](StepBuilder &b) {
    std::vector<uint32_t> operands;
    for (size_t i = 0; i + 1 < shapes.size(); ++i)
      operands.push_back(b.arena(DType::F32, shapes[i]));
    uint32_t out = b.arena(DType::F32, shapes.back());
    return std::vector{
        b.library(Library::Attention, operands, {out}, ints, floats)};
  });
}

TEST(Loader, ChecksAttention) {
  std::vector<int64_t> q = {2, 3, 4, 8}, k = {2, 3, 6, 8}, v = {2, 3, 6, 5},
                       o = {2, 3, 4, 5};
  EXPECT_EQ(errorOf(attention({q, k, v, o}, {0}, {})), "");
  EXPECT_EQ(errorOf(attention({q, k, v, {1, 3, 4, 6}, o}, {1}, {0.5})), "");
  EXPECT_EQ(errorOf(attention({q, k, v, o}, {1}, {})),
            "step.bin: functions[0].commands[0] (LibraryCall Attention): "
            "int_attrs[0] (has_mask) = 1 but there are 3 operands");
  EXPECT_EQ(errorOf(attention({q, k, v, o}, {0}, {-1})),
            "step.bin: functions[0].commands[0] (LibraryCall Attention): "
            "float_attrs[0] (scale) = -1 but expected a finite value > 0");
  EXPECT_EQ(errorOf(attention({q, k, v, {2, 2, 4, 6}, o}, {1}, {})),
            "step.bin: functions[0].commands[0] (LibraryCall Attention): mask "
            "is tensor<2x2x4x6xf32> but expected [2|1, 3|1, 4, 6]");
  EXPECT_EQ(errorOf(attention({q, {2, 3, 6, 7}, v, o}, {0}, {})),
            "step.bin: functions[0].commands[0] (LibraryCall Attention): key "
            "is tensor<2x3x6x7xf32> but query is tensor<2x3x4x8xf32>: batch, "
            "heads and head size must match");
  EXPECT_EQ(errorOf(attention({q, k, {2, 3, 7, 5}, o}, {0}, {})),
            "step.bin: functions[0].commands[0] (LibraryCall Attention): value "
            "is tensor<2x3x7x5xf32> but key is tensor<2x3x6x8xf32>: batch, "
            "heads and sequence length must match");
  EXPECT_EQ(errorOf(attention({q, k, v, {2, 3, 4, 8}}, {0}, {})),
            "step.bin: functions[0].commands[0] (LibraryCall Attention): "
            "result is tensor<2x3x4x8xf32> but attention gives "
            "tensor<2x3x4x5xf32>");
}

std::string attentionBackward(std::vector<std::vector<int64_t>> operands,
                              std::vector<std::vector<int64_t>> results,
                              std::vector<double> floats) {
  return withCommands([&](StepBuilder &b) {
    std::vector<uint32_t> in, out;
    for (const auto &shape : operands)
      in.push_back(b.arena(DType::F32, shape));
    for (const auto &shape : results)
      out.push_back(b.arena(DType::F32, shape));
    return std::vector{
        b.library(Library::AttentionBackward, in, out, {}, floats)};
  });
}

TEST(Loader, ChecksAttentionBackward) {
  std::vector<int64_t> q = {2, 3, 4, 8}, k = {2, 3, 6, 8}, v = {2, 3, 6, 5},
                       o = {2, 3, 4, 5};
  const std::string at =
      "step.bin: functions[0].commands[0] (LibraryCall AttentionBackward): ";
  EXPECT_EQ(errorOf(attentionBackward({q, k, v, o, o}, {q, k, v}, {})), "");
  EXPECT_EQ(errorOf(attentionBackward({q, k, v, o, o}, {q, k, v}, {0.5})), "");
  // A mask: a sixth operand, [B|1, H|1, Sq, Sk].
  EXPECT_EQ(
      errorOf(attentionBackward({q, k, v, o, o, {1, 3, 4, 6}}, {q, k, v}, {})),
      "");
  EXPECT_EQ(
      errorOf(attentionBackward({q, k, v, o, o, {2, 3, 4, 5}}, {q, k, v}, {})),
      at + "mask is tensor<2x3x4x5xf32> but expected [2|1, 3|1, 4, 6]");
  EXPECT_EQ(errorOf(attentionBackward({q, k, v, o}, {q, k, v}, {})),
            at + "operands has 4 entries but expected 5 (query, key, value, "
                 "output, d_output) or 6 (and mask)");
  EXPECT_EQ(errorOf(attentionBackward({q, k, v, o, o}, {q, k}, {})),
            at + "results has 2 entries but expected 3 (d_query, d_key, "
                 "d_value)");
  EXPECT_EQ(errorOf(attentionBackward({q, k, v, o, o}, {q, k, v}, {0})),
            at + "float_attrs[0] (scale) = 0 but expected a finite value > 0");
  EXPECT_EQ(
      errorOf(attentionBackward({q, {2, 3, 6, 7}, v, o, o}, {q, k, v}, {})),
      at + "query tensor<2x3x4x8xf32>, key tensor<2x3x6x7xf32> and "
           "value tensor<2x3x6x5xf32> do not agree");
  EXPECT_EQ(errorOf(attentionBackward({q, k, v, o, q}, {q, k, v}, {})),
            at + "d_output is tensor<2x3x4x8xf32> but expected "
                 "tensor<2x3x4x5xf32>");
  EXPECT_EQ(errorOf(attentionBackward({q, k, v, o, o}, {q, v, v}, {})),
            at + "d_key is tensor<2x3x6x5xf32> but expected "
                 "tensor<2x3x6x8xf32>");
}

TEST(Loader, ChecksStaticCopyRanges) {
  auto copy = [](StepBuilder::CopySpec spec) {
    return withCommands([=](StepBuilder &b) mutable {
      spec.source = b.arena(DType::F32, {8});
      spec.dest = b.arena(DType::F32, {4, 8});
      return std::vector{b.copy(spec)};
    });
  };
  StepBuilder::CopySpec ok;
  ok.destOffset = 96;
  EXPECT_EQ(errorOf(copy(ok)), "");
  StepBuilder::CopySpec past = ok;
  past.destOffset = 100;
  EXPECT_EQ(errorOf(copy(past)),
            "step.bin: functions[0].commands[0] (Copy): dest range [100, 132) "
            "is outside tensors[1] (tensor<4x8xf32>, 128 bytes)");
  StepBuilder::CopySpec big;
  big.bytes = 40;
  EXPECT_EQ(errorOf(copy(big)),
            "step.bin: functions[0].commands[0] (Copy): source range [0, 40) "
            "is outside tensors[0] (tensor<8xf32>, 32 bytes)");
  StepBuilder::CopySpec negative;
  negative.bytes = -1;
  EXPECT_EQ(errorOf(copy(negative)),
            "step.bin: functions[0].commands[0] (Copy): bytes = -1 but it must "
            "be >= 0");
  StepBuilder::CopySpec badScalar;
  badScalar.sourceScalar = 3;
  EXPECT_EQ(errorOf(copy(badScalar)),
            "step.bin: functions[0].commands[0] (Copy): source_offset_scalar "
            "= 3 but expected -1 (none) or one of the 0 scalars");
}

/// A loop over [0, upper) step 1 that stores an 8xf32 into row iv of a
/// rows x 8 tensor.
std::string storeLoop(int64_t rows, int64_t upper, int64_t stepSize = 1) {
  return withCommands([=](StepBuilder &b) {
    uint32_t x = b.arena(DType::F32, {8});
    uint32_t stack = b.arena(DType::F32, {rows, 8});
    uint32_t iv = b.scalar("i");
    StepBuilder::CopySpec store;
    store.source = x;
    store.dest = stack;
    store.destScalar = static_cast<int32_t>(iv);
    store.destStride = 32;
    return std::vector{
        b.loop(iv, 0, upper, stepSize, {b.fill(x, {0}), b.copy(store)})};
  });
}

TEST(Loader, ChecksLoopScaledCopyRanges) {
  EXPECT_EQ(errorOf(storeLoop(4, 4)), "");
  EXPECT_EQ(errorOf(storeLoop(4, 0)), ""); // never runs
  EXPECT_EQ(errorOf(storeLoop(4, 5)),
            "step.bin: functions[0].commands[0].body[1] (Copy): with scalar 0 "
            "= 4 (the last iteration of the Loop functions[0].commands[0]) the "
            "dest range [128, 160) is outside tensors[1] (tensor<4x8xf32>, 128 "
            "bytes)");
  EXPECT_EQ(errorOf(storeLoop(4, 7, 3)),
            "step.bin: functions[0].commands[0].body[1] (Copy): with scalar 0 "
            "= 6 (the last iteration of the Loop functions[0].commands[0]) the "
            "dest range [192, 224) is outside tensors[1] (tensor<4x8xf32>, 128 "
            "bytes)");
  EXPECT_EQ(errorOf(storeLoop(4, 7, 0)),
            "step.bin: functions[0].commands[0] (Loop): step = 0 but it must "
            "be >= 1");
}

TEST(Loader, ChecksFillAndRandom) {
  EXPECT_EQ(errorOf(withCommands([](StepBuilder &b) {
              return std::vector{b.fill(b.arena(DType::F32, {3}), {})};
            })),
            "step.bin: functions[0].commands[0] (Fill): pattern is empty but "
            "expected at least one byte");
  EXPECT_EQ(errorOf(withCommands([](StepBuilder &b) {
              return std::vector{
                  b.fill(b.arena(DType::F32, {3}), {1, 2, 3, 4, 5})};
            })),
            "step.bin: functions[0].commands[0] (Fill): pattern has 5 bytes "
            "but dest tensors[0] (tensor<3xf32>, 12 bytes) is not a multiple "
            "of it");
  auto random = [](std::vector<int64_t> keyShape, DType resultType) {
    return withCommands([=](StepBuilder &b) {
      uint32_t key = b.arena(DType::I64, keyShape);
      uint32_t ctr = b.arena(DType::I64, {});
      uint32_t out = b.arena(resultType, {16});
      return std::vector{
          b.random(step::Distribution::Normal, key, ctr, ctr, out)};
    });
  };
  EXPECT_EQ(errorOf(random({}, DType::BF16)), "");
  EXPECT_EQ(errorOf(random({1}, DType::F32)),
            "step.bin: functions[0].commands[0] (Random): key is tensors[0] "
            "of type tensor<1xi64> but expected tensor<i64>");
  EXPECT_EQ(errorOf(random({}, DType::I32)),
            "step.bin: functions[0].commands[0] (Random): result is "
            "tensors[2] of type tensor<16xi32> but expected a float tensor");
}

TEST(Loader, ChecksHostCallsAndScalarOps) {
  EXPECT_EQ(errorOf(withCommands([](StepBuilder &b) {
              return std::vector{b.hostCall("", {}, {})};
            })),
            "step.bin: functions[0].commands[0] (HostCall): name is empty but "
            "host functions are called by name");
  EXPECT_EQ(errorOf(withCommands([](StepBuilder &b) {
              uint32_t i = b.scalar("i");
              return std::vector{b.loop(
                  i, 0, 4, 1, {b.scalarOp(ScalarOpKind::Const, i, 0, 0, 2)})};
            })),
            "step.bin: functions[0].commands[0].body[0] (ScalarOp Const): dest "
            "= 0 is the induction variable of the enclosing Loop "
            "functions[0].commands[0], which only the Loop may write");
  EXPECT_EQ(errorOf(withCommands([](StepBuilder &b) {
              uint32_t i = b.scalar("i");
              uint32_t t = b.arena(DType::F32, {});
              return std::vector{b.scalarOp(ScalarOpKind::FromTensor, i, t)};
            })),
            "step.bin: functions[0].commands[0] (ScalarOp FromTensor): a is "
            "tensors[0] of type tensor<f32> but expected an integer tensor "
            "with at least one element");
  EXPECT_EQ(errorOf(withCommands([](StepBuilder &b) {
              uint32_t i = b.scalar("i");
              uint32_t t = b.arena(DType::I64, {2});
              return std::vector{b.scalarOp(ScalarOpKind::ToTensor, t, i)};
            })),
            "step.bin: functions[0].commands[0] (ScalarOp ToTensor): dest is "
            "tensors[0] of type tensor<2xi64> but expected an integer tensor "
            "with one element");
  EXPECT_EQ(errorOf(withCommands([](StepBuilder &b) {
              uint32_t i = b.scalar("i");
              return std::vector{b.scalarOp(ScalarOpKind::Add, i, i, 4)};
            })),
            "step.bin: functions[0].commands[0] (ScalarOp Add): b = 4 but "
            "there are 1 scalars");
  EXPECT_EQ(errorOf(withCommands([](StepBuilder &b) {
              uint32_t i = b.scalar("i");
              return std::vector{b.scalarOp(static_cast<ScalarOpKind>(8), i)};
            })),
            "step.bin: functions[0].commands[0] (ScalarOp): kind = 8 but valid "
            "kinds are 0..5 (Const, Add, Sub, Mul, FromTensor, ToTensor)");
}

TEST(Loader, LimitsLoopNesting) {
  auto nested = [](int depth, bool reuseIv) {
    return withCommands([=](StepBuilder &b) {
      std::vector<uint32_t> ivs;
      for (int d = 0; d < depth; ++d)
        ivs.push_back(b.scalar());
      omni::testing::CommandRef inner =
          b.loop(reuseIv ? ivs[0] : ivs[depth - 1], 0, 1, 1, {});
      for (int d = depth - 2; d >= 0; --d)
        inner = b.loop(ivs[d], 0, 1, 1, {inner});
      return std::vector{inner};
    });
  };
  EXPECT_EQ(errorOf(nested(16, false)), "");
  EXPECT_EQ(errorOf(nested(17, false)),
            "step.bin: functions[0].commands[0].body[0].body[0].body[0].body[0]"
            ".body[0].body[0].body[0].body[0].body[0].body[0].body[0].body[0]"
            ".body[0].body[0].body[0].body[0] (Loop): Loops nest 17 deep but "
            "the limit is 16");
  EXPECT_EQ(errorOf(nested(2, true)),
            "step.bin: functions[0].commands[0].body[0] (Loop): iv = 0 is "
            "already the induction variable of the enclosing Loop "
            "functions[0].commands[0]");
}

TEST(Loader, ChecksCalls) {
  auto program =
      [](std::function<void(StepBuilder &, uint32_t, uint32_t)> makeCaller) {
        StepBuilder b;
        uint32_t x = b.argument(DType::F32, {4}, 0);
        uint32_t y = b.arena(DType::F32, {4});
        b.function("callee", {x}, {y}, {b.copy(x, y)});
        makeCaller(b, x, y);
        return b.finish();
      };
  EXPECT_EQ(errorOf(program([](StepBuilder &b, uint32_t x, uint32_t y) {
              uint32_t z = b.arena(DType::F32, {4});
              b.function("main", {x}, {z}, {b.call(0, {x}, {z})});
            })),
            "");
  EXPECT_EQ(errorOf(program([](StepBuilder &b, uint32_t x, uint32_t) {
              b.function("main", {x}, {}, {b.call(0, {x, x}, {})});
            })),
            "step.bin: functions[1].commands[0] (Call): operands has 2 entries "
            "but functions[0] ('callee') has 1 inputs");
  EXPECT_EQ(errorOf(program([](StepBuilder &b, uint32_t x, uint32_t) {
              uint32_t z = b.arena(DType::F32, {2, 2});
              b.function("main", {x}, {}, {b.call(0, {x}, {z})});
            })),
            "step.bin: functions[1].commands[0] (Call): results[0] is "
            "tensors[2] of type tensor<2x2xf32> but functions[0] ('callee') "
            "output 0 is tensor<4xf32>");
  EXPECT_EQ(errorOf(program([](StepBuilder &b, uint32_t, uint32_t) {
              b.function("main", {}, {}, {b.call(7, {}, {})});
            })),
            "step.bin: functions[1].commands[0] (Call): function = 7 but there "
            "are 2 functions");
}

TEST(Loader, RejectsRecursionAndDeepCalls) {
  StepBuilder b;
  b.function("f", {}, {}, {b.call(1, {}, {})});
  b.function("g", {}, {}, {b.call(0, {}, {})});
  EXPECT_EQ(errorOf(b.finish()),
            "step.bin: functions[1].commands[0] (Call): recursion is not "
            "supported (functions[0] ('f') -> functions[1] ('g') -> "
            "functions[0] ('f'))");

  auto chain = [](int n) {
    StepBuilder c;
    for (int i = 0; i < n; ++i) {
      std::vector<omni::testing::CommandRef> commands;
      if (i + 1 < n)
        commands.push_back(c.call(static_cast<uint32_t>(i + 1), {}, {}));
      c.function("f" + std::to_string(i), {}, {}, commands);
    }
    return c.finish();
  };
  EXPECT_EQ(errorOf(chain(32)), "");
  EXPECT_EQ(errorOf(chain(33)),
            "step.bin: functions[0]: calls nest 33 deep but the limit is 32");
}

//===--- Meshes and collectives -----------------------------------------===//

using Collective = StepBuilder::CollectiveSpec;
using step::CollectiveKind;

/// A program on mesh 'm' (dp=2 x tp=3) whose function `f` runs `c` from an
/// arena operand to an arena result of the given types; `edit` may change
/// the builder before the command is made.
std::string
withCollective(Collective c, std::vector<int64_t> operandShape,
               std::vector<int64_t> resultShape, DType dtype = DType::F32,
               const std::function<void(StepBuilder &)> &edit = nullptr,
               DType resultDType = DType::F32) {
  StepBuilder b;
  b.mesh({"m", {"dp", "tp"}, {2, 3}});
  c.operand = b.arena(dtype, operandShape, "x");
  c.result =
      b.arena(dtype == DType::F32 ? resultDType : dtype, resultShape, "y");
  if (edit)
    edit(b);
  b.function("f", {}, {}, {b.collective(c)});
  return b.finish();
}

Collective collective(CollectiveKind kind, std::vector<uint32_t> axes = {0},
                      int64_t dim = 0, int64_t root = 0,
                      step::ReduceOp op = step::ReduceOp::Sum) {
  Collective c;
  c.kind = kind;
  c.axes = std::move(axes);
  c.dim = dim;
  c.root = root;
  c.op = op;
  return c;
}

TEST(Loader, LoadsMeshesAndCollectives) {
  StepBuilder b;
  b.mesh({"m", {"dp", "tp"}, {2, 3}});
  uint32_t x = b.arena(DType::F32, {2, 4}, "x");
  uint32_t g = b.arena(DType::F32, {2, 12}, "g");
  uint32_t s = b.arena(DType::F32, {1, 4}, "s");
  b.function(
      "f", {}, {},
      {b.collective(collective(CollectiveKind::AllReduce, {0, 1})),
       b.collective([&] {
         auto c = collective(CollectiveKind::AllGather, {1}, 1);
         c.operand = x;
         c.result = g;
         return c;
       }()),
       b.collective([&] {
         auto c = collective(CollectiveKind::ReduceScatter, {0}, 0);
         c.operand = x;
         c.result = s;
         return c;
       }()),
       b.collective(collective(CollectiveKind::Broadcast, {1, 0}, 0, 5))});
  auto program = Program::loadBytes(b.finish());
  ASSERT_TRUE(program.ok()) << program.status();
  ASSERT_EQ((*program)->meshes().size(), 1u);
  const MeshInfo &mesh = (*program)->meshes()[0];
  EXPECT_EQ(mesh.name, "m");
  EXPECT_EQ(mesh.axes, (std::vector<std::string>{"dp", "tp"}));
  EXPECT_EQ(mesh.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(mesh.numRanks, 6);
  EXPECT_EQ(mesh.describe(), "'m' (dp=2 x tp=3)");
}

TEST(Loader, MeshGroupsAreRowMajor) {
  // Rank r of a dp=2 x tp=3 mesh has coordinates (r / 3, r % 3).
  MeshInfo mesh;
  mesh.axes = {"dp", "tp"};
  mesh.shape = {2, 3};
  mesh.numRanks = 6;
  for (int64_t r = 0; r < 6; ++r) {
    int64_t dp = r / 3, tp = r % 3;
    MeshInfo::Group all = mesh.groupOf(std::vector<uint32_t>{0, 1}, r);
    EXPECT_EQ(all.color, 0);
    EXPECT_EQ(all.rank, r);
    EXPECT_EQ(all.size, 6);
    // Listed in the other order, the group rank is tp-major.
    MeshInfo::Group swapped = mesh.groupOf(std::vector<uint32_t>{1, 0}, r);
    EXPECT_EQ(swapped.rank, tp * 2 + dp);
    MeshInfo::Group alongTp = mesh.groupOf(std::vector<uint32_t>{1}, r);
    EXPECT_EQ(alongTp.color, dp);
    EXPECT_EQ(alongTp.rank, tp);
    EXPECT_EQ(alongTp.size, 3);
    MeshInfo::Group alongDp = mesh.groupOf(std::vector<uint32_t>{0}, r);
    EXPECT_EQ(alongDp.color, tp);
    EXPECT_EQ(alongDp.rank, dp);
    EXPECT_EQ(alongDp.size, 2);
  }
}

TEST(Loader, ChecksMeshes) {
  auto withMesh = [](StepBuilder::MeshSpec mesh) {
    return build([&](StepBuilder &b) { b.mesh(mesh); });
  };
  EXPECT_EQ(errorOf(withMesh({"m", {}, {}})),
            "step.bin: meshes[0].axes: is empty but a mesh has at least one "
            "axis");
  EXPECT_EQ(errorOf(withMesh({"m", {"dp", "tp"}, {2}})),
            "step.bin: meshes[0].shape: has 1 entries but expected 2 (one per "
            "axis)");
  EXPECT_EQ(errorOf(withMesh({"m", {"dp", ""}, {2, 2}})),
            "step.bin: meshes[0].axes[1]: is empty but collectives name axes");
  EXPECT_EQ(errorOf(withMesh({"m", {"dp", "dp"}, {2, 2}})),
            "step.bin: meshes[0].axes[1]: 'dp' repeats an earlier axis");
  EXPECT_EQ(errorOf(withMesh({"m", {"dp", "tp"}, {2, 0}})),
            "step.bin: meshes[0].shape[1]: = 0 but axis sizes must be >= 1");
  EXPECT_EQ(errorOf(withMesh({"m", {"a", "b"}, {1 << 16, 1 << 16}})),
            "step.bin: meshes[0].shape: has more than 2147483647 ranks in all");
}

TEST(Loader, ChecksCollectiveMeshAndAxes) {
  const std::string at = "step.bin: functions[0].commands[0] (Collective ";
  Collective c = collective(CollectiveKind::AllReduce);
  c.kind = static_cast<CollectiveKind>(9);
  EXPECT_EQ(errorOf(withCollective(c, {4}, {4})),
            "step.bin: functions[0].commands[0] (Collective): kind = 9 but "
            "valid kinds are 0..3 (AllReduce, AllGather, ReduceScatter, "
            "Broadcast)");
  c = collective(CollectiveKind::AllReduce);
  c.mesh = 1;
  EXPECT_EQ(errorOf(withCollective(c, {4}, {4})),
            at + "AllReduce): mesh = 1 but there are 1 meshes");
  EXPECT_EQ(errorOf(withCollective(collective(CollectiveKind::AllReduce, {}),
                                   {4}, {4})),
            at + "AllReduce): axes is empty but expected axes of mesh 'm' "
                 "(dp=2 x tp=3)");
  EXPECT_EQ(errorOf(withCollective(
                collective(CollectiveKind::AllReduce, {1, 2}), {4}, {4})),
            at + "AllReduce): axes[1] = 2 but mesh 'm' (dp=2 x tp=3) has 2 "
                 "axes");
  EXPECT_EQ(errorOf(withCollective(
                collective(CollectiveKind::AllGather, {1, 0, 1}), {4}, {24})),
            at + "AllGather): axes[2] = 1 ('tp') repeats axes[0]");
  c = collective(CollectiveKind::AllReduce);
  c.operand = 99;
  EXPECT_EQ(errorOf([&] {
              StepBuilder b;
              b.mesh({"m", {"dp"}, {2}});
              b.function("f", {}, {}, {b.collective(c)});
              return b.finish();
            }()),
            at + "AllReduce): operand = 99 but there are 0 tensors");
}

TEST(Loader, ChecksCollectiveTypes) {
  const std::string at = "step.bin: functions[0].commands[0] (Collective ";
  EXPECT_EQ(errorOf(withCollective(collective(CollectiveKind::AllReduce), {4},
                                   {4}, DType::F32, nullptr, DType::F64)),
            at + "AllReduce): result is tensors[1] (tensor<4xf64>, 32 bytes) "
                 "but operand is tensors[0] (tensor<4xf32>, 16 bytes) (the "
                 "dtypes must match)");
  EXPECT_EQ(errorOf(withCollective(collective(CollectiveKind::AllReduce), {4},
                                   {2, 2})),
            at + "AllReduce): result is tensors[1] (tensor<2x2xf32>, 16 "
                 "bytes) but operand is tensors[0] (tensor<4xf32>, 16 bytes) "
                 "(the shapes must match)");
  EXPECT_EQ(
      errorOf(withCollective(collective(CollectiveKind::Broadcast), {4}, {5})),
      at + "Broadcast): result is tensors[1] (tensor<5xf32>, 20 bytes) "
           "but operand is tensors[0] (tensor<4xf32>, 16 bytes) (the "
           "shapes must match)");
  EXPECT_EQ(errorOf(withCollective(
                collective(CollectiveKind::Broadcast, {0, 1}, 0, 6), {4}, {4})),
            at + "Broadcast): root = 6 but the group over 'dp', 'tp' (6 "
                 "ranks) has ranks 0..5");
  EXPECT_EQ(errorOf(withCollective(
                collective(CollectiveKind::Broadcast, {1}, 0, -1), {4}, {4})),
            at + "Broadcast): root = -1 but the group over 'tp' (3 ranks) has "
                 "ranks 0..2");
  // Gather along dim 1 over tp (3 ranks): 2x4 -> 2x12.
  EXPECT_EQ(
      errorOf(withCollective(collective(CollectiveKind::AllGather, {1}, 1),
                             {2, 4}, {2, 12})),
      "");
  EXPECT_EQ(errorOf(withCollective(
                collective(CollectiveKind::AllGather, {1}, 1), {2, 4}, {6, 4})),
            at + "AllGather): result is tensors[1] (tensor<6x4xf32>, 96 "
                 "bytes) but gathering operand tensors[0] (tensor<2x4xf32>, 32 "
                 "bytes) along dim 1 over 'tp' (3 ranks) gives "
                 "tensor<2x12xf32>");
  EXPECT_EQ(
      errorOf(withCollective(collective(CollectiveKind::AllGather, {1}, 2),
                             {2, 4}, {2, 12})),
      at + "AllGather): dim = 2 but operand tensors[0] (tensor<2x4xf32>, "
           "32 bytes) has rank 2");
  EXPECT_EQ(errorOf(withCollective(
                collective(CollectiveKind::AllGather, {1}, 0), {}, {3})),
            at + "AllGather): dim = 0 but operand tensors[0] (tensor<f32>, 4 "
                 "bytes) has rank 0");
  // Scatter along dim 0 over dp (2 ranks): 4x3 -> 2x3.
  EXPECT_EQ(
      errorOf(withCollective(collective(CollectiveKind::ReduceScatter, {0}),
                             {4, 3}, {2, 3})),
      "");
  EXPECT_EQ(
      errorOf(withCollective(collective(CollectiveKind::ReduceScatter, {0}),
                             {4, 3}, {2, 2})),
      at + "ReduceScatter): operand is tensors[0] (tensor<4x3xf32>, 48 "
           "bytes) but scattering along dim 0 over 'dp' (2 ranks) needs "
           "dim 0 = 2 x that of result tensors[1] (tensor<2x2xf32>, 16 "
           "bytes) and the other dims equal");
  EXPECT_EQ(
      errorOf(withCollective(collective(CollectiveKind::ReduceScatter, {0}),
                             {4, 3}, {4, 3})),
      at + "ReduceScatter): operand is tensors[0] (tensor<4x3xf32>, 48 "
           "bytes) but scattering along dim 0 over 'dp' (2 ranks) needs "
           "dim 0 = 2 x that of result tensors[1] (tensor<4x3xf32>, 48 "
           "bytes) and the other dims equal");
}

TEST(Loader, ChecksCollectiveReductions) {
  const std::string at = "step.bin: functions[0].commands[0] (Collective ";
  EXPECT_EQ(
      errorOf(withCollective(collective(CollectiveKind::AllReduce, {0}, 0, 0,
                                        static_cast<step::ReduceOp>(7)),
                             {4}, {4})),
      at + "AllReduce): reduce_op = 7 but valid ops are 0..4 (Sum, "
           "Prod, Min, Max, Mean)");
  EXPECT_EQ(errorOf(withCollective(collective(CollectiveKind::AllReduce), {4},
                                   {4}, DType::I1)),
            at + "AllReduce): operand is tensors[0] (tensor<4xi1>, 4 bytes) "
                 "but i1 tensors cannot be reduced");
  EXPECT_EQ(errorOf(withCollective(collective(CollectiveKind::ReduceScatter,
                                              {0}, 0, 0, step::ReduceOp::Mean),
                                   {4}, {2}, DType::I64)),
            at + "ReduceScatter): reduce_op = Mean but operand is tensors[0] "
                 "(tensor<4xi64>, 32 bytes) (Mean needs a float dtype)");
  // i1 may be gathered and broadcast; the reduce op is ignored there.
  EXPECT_EQ(
      errorOf(withCollective(collective(CollectiveKind::AllGather, {0}, 0, 0,
                                        static_cast<step::ReduceOp>(7)),
                             {4}, {8}, DType::I1)),
      "");
  EXPECT_EQ(errorOf(withCollective(collective(CollectiveKind::Broadcast), {4},
                                   {4}, DType::I1)),
            "");
}

TEST(Loader, CollectivesMayNotWriteConstants) {
  StepBuilder b;
  b.mesh({"m", {"dp"}, {2}});
  Collective c = collective(CollectiveKind::Broadcast);
  c.operand = b.arena(DType::F32, {2});
  c.result = b.constant(DType::F32, {2}, std::vector<uint8_t>(8));
  b.function("f", {}, {}, {b.collective(c)});
  EXPECT_EQ(errorOf(b.finish()),
            "step.bin: functions[0].commands[0] (Collective Broadcast): result "
            "is tensors[1], a Constant (read-only)");
}

//===--- AxisIndex and sharded state ------------------------------------===//

TEST(Loader, ChecksAxisIndex) {
  auto withAxisIndex = [](uint32_t mesh, std::vector<uint32_t> axes,
                          DType dtype, std::vector<int64_t> shape) {
    StepBuilder b;
    b.mesh({"m", {"dp", "tp"}, {2, 3}});
    uint32_t r = b.arena(dtype, shape, "k");
    b.function("f", {}, {}, {b.axisIndex(mesh, axes, r)});
    return b.finish();
  };
  const std::string at = "step.bin: functions[0].commands[0] (AxisIndex): ";
  EXPECT_EQ(errorOf(withAxisIndex(0, {1, 0}, DType::I64, {})), "");
  EXPECT_EQ(errorOf(withAxisIndex(1, {0}, DType::I64, {})),
            at + "mesh = 1 but there are 1 meshes");
  EXPECT_EQ(errorOf(withAxisIndex(0, {}, DType::I64, {})),
            at + "axes is empty but expected axes of mesh 'm' (dp=2 x tp=3)");
  EXPECT_EQ(errorOf(withAxisIndex(0, {2}, DType::I64, {})),
            at + "axes[0] = 2 but mesh 'm' (dp=2 x tp=3) has 2 axes");
  EXPECT_EQ(errorOf(withAxisIndex(0, {0, 0}, DType::I64, {})),
            at + "axes[1] = 0 ('dp') repeats axes[0]");
  EXPECT_EQ(errorOf(withAxisIndex(0, {0}, DType::I32, {})),
            at + "result is tensors[0] (tensor<i32>, 4 bytes) but expected a "
                 "tensor<i64> (0-D)");
  EXPECT_EQ(errorOf(withAxisIndex(0, {0}, DType::I64, {1})),
            at + "result is tensors[0] (tensor<1xi64>, 8 bytes) but expected "
                 "a tensor<i64> (0-D)");
  EXPECT_EQ(errorOf([] {
              StepBuilder b;
              b.mesh({"m", {"dp"}, {2}});
              uint32_t c = b.constant(DType::I64, {}, std::vector<uint8_t>(8));
              b.function("f", {}, {}, {b.axisIndex(0, {0}, c)});
              return b.finish();
            }()),
            at + "result is tensors[0], a Constant (read-only)");
}

/// A program on mesh 'm' (dp=2 x fsdp=3) with state slot 'w' of `shape`
/// and the given sharding.
std::string withShardedState(std::vector<int64_t> shape,
                             StepBuilder::ShardingSpec sharding) {
  StepBuilder b;
  b.mesh({"m", {"dp", "fsdp"}, {2, 3}});
  b.stateTensor("w", DType::F32, std::move(shape));
  b.state.back().sharding = std::move(sharding);
  b.function("f", {}, {}, {});
  return b.finish();
}

TEST(Loader, LoadsShardedState) {
  // 10 rows over fsdp (3 ranks): ceil(10 / 3) = 4 rows per rank, the last
  // rank's 2 past the end are padding.
  auto program =
      Program::loadBytes(withShardedState({4, 5}, {0, {1}, 0, {10, 5}}));
  ASSERT_TRUE(program.ok()) << program.status();
  const StateInfo &slot = (*program)->state()[0];
  ASSERT_TRUE(slot.sharding.has_value());
  EXPECT_EQ(slot.sharding->mesh, 0u);
  EXPECT_EQ(slot.sharding->axes, (std::vector<uint32_t>{1}));
  EXPECT_EQ(slot.sharding->dim, 0);
  EXPECT_EQ(slot.sharding->globalShape, (std::vector<int64_t>{10, 5}));
  EXPECT_EQ(slot.sharding->groupSize, 3);
  // Over both axes (6 ranks), along dim 1: ceil(5 / 6) = 1.
  program =
      Program::loadBytes(withShardedState({10, 1}, {0, {0, 1}, 1, {10, 5}}));
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ((*program)->state()[0].sharding->groupSize, 6);
  // A replicated slot has no sharding.
  program = Program::loadBytes(
      build([](StepBuilder &b) { b.stateTensor("w", DType::F32, {2}); }));
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_FALSE((*program)->state()[0].sharding.has_value());
}

TEST(Loader, ChecksShardedState) {
  const std::string at = "step.bin: state[0].sharding";
  EXPECT_EQ(errorOf(withShardedState({4, 5}, {1, {1}, 0, {10, 5}})),
            at + ": mesh = 1 but there are 1 meshes");
  EXPECT_EQ(errorOf(withShardedState({4, 5}, {0, {}, 0, {10, 5}})),
            at + ": axes is empty but expected axes of mesh 'm' (dp=2 x "
                 "fsdp=3)");
  EXPECT_EQ(errorOf(withShardedState({4, 5}, {0, {2}, 0, {10, 5}})),
            at + ": axes[0] = 2 but mesh 'm' (dp=2 x fsdp=3) has 2 axes");
  EXPECT_EQ(errorOf(withShardedState({4, 5}, {0, {1, 1}, 0, {10, 5}})),
            at + ": axes[1] = 1 ('fsdp') repeats axes[0]");
  EXPECT_EQ(errorOf(withShardedState({4, 5}, {0, {1}, 2, {10, 5}})),
            at + ".dim: = 2 but state 'w' is tensor<4x5xf32> of rank 2");
  EXPECT_EQ(errorOf(withShardedState({4, 5}, {0, {1}, -1, {10, 5}})),
            at + ".dim: = -1 but state 'w' is tensor<4x5xf32> of rank 2");
  EXPECT_EQ(errorOf(withShardedState({4, 5}, {0, {1}, 0, {10}})),
            at + ".global_shape: has 1 dimensions but state 'w' is "
                 "tensor<4x5xf32> of rank 2");
  EXPECT_EQ(errorOf(withShardedState({3, 5}, {0, {1}, 0, {10, 5}})),
            at + ".global_shape: = tensor<10x5xf32> but state 'w' is "
                 "tensor<3x5xf32> and splitting dim 0 over 'fsdp' (3 ranks) "
                 "gives 4 rows");
  EXPECT_EQ(errorOf(withShardedState({4, 5}, {0, {1}, 0, {10, 6}})),
            at + ".global_shape: = tensor<10x6xf32> but state 'w' is "
                 "tensor<4x5xf32> (dim 1 differs; only dim 0 is split)");
  EXPECT_EQ(errorOf(withShardedState({4, 5}, {0, {1}, 0, {-10, 5}})),
            at + ".global_shape: [0] = -10 but dimensions must be >= 0");
  // A state slot with no mesh at all.
  EXPECT_EQ(errorOf(build([](StepBuilder &b) {
              b.stateTensor("w", DType::F32, {2});
              b.state.back().sharding =
                  StepBuilder::ShardingSpec{0, {0}, 0, {4}};
            })),
            at + ": mesh = 0 but there are 0 meshes");
}

} // namespace
} // namespace omni::loader
