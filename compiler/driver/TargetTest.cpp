//===- TargetTest.cpp - omnic's target options, end to end ----------------===//
//
// omnic compiles for a CPU this machine is not (cross-compiling is not an
// error, and the loader, which is target-neutral, accepts the step.bin);
// the cpu driver then refuses it when the executor loads its executable,
// with the one-line message of the feature check. The CPU is the first of
// a list of LLVM CPUs that needs a feature this host lacks, so the test
// means the same on every machine (and is skipped on one that has them
// all).
//
//===----------------------------------------------------------------------===//

#include "compiler/driver/Compiler.h"
#include "runtime/base/CpuFeatures.h"
#include "runtime/executor/Executor.h"
#include "runtime/hal/drivers/Drivers.h"
#include "runtime/loader/Program.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <fstream>
#include <gtest/gtest.h>

namespace {

constexpr const char *kProgram = R"mlir(
func.func @main(%x: tensor<4xf32>) -> tensor<4xf32> {
  %one = omni.constant dense<1.0> : tensor<4xf32>
  %y = omni.add %x, %one : tensor<4xf32>
  return %y : tensor<4xf32>
}
)mlir";

/// Writes `text` to a new temporary file with `suffix`; returns its path.
std::string temporaryFile(const char *suffix, const std::string &text) {
  llvm::SmallString<128> path;
  int fd;
  EXPECT_FALSE(
      llvm::sys::fs::createTemporaryFile("omni-target", suffix, fd, path));
  llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
  os << text;
  return path.str().str();
}

/// Compiles kProgram for `cpu` with omnic's library; returns omnic's exit
/// code and its stderr.
int compile(const std::string &cpu, const std::string &output,
            std::string &errors) {
  mlir::omni::CompileOptions options;
  options.input = temporaryFile("mlir", kProgram);
  options.output = output;
  options.target = "cpu";
  options.targetCpu = cpu;
  std::string out;
  llvm::raw_string_ostream outs(out), errs(errors);
  int rc = mlir::omni::runCompiler(options, outs, errs);
  llvm::sys::fs::remove(options.input);
  return rc;
}

TEST(Target, TheCpuDriverRefusesFeaturesTheHostLacks) {
  const omni::CpuFeatures &host = omni::CpuFeatures::host();
  for (const char *cpu : {"x86-64-v4", "sapphirerapids", "znver4",
                          "graniterapids", "diamondrapids"}) {
    std::string bin = temporaryFile("bin", "");
    std::string errors;
    ASSERT_EQ(compile(cpu, bin, errors), 0) << cpu << ": " << errors;
    auto program = omni::loader::Program::loadFile(bin);
    llvm::sys::fs::remove(bin);
    ASSERT_TRUE(program.ok()) << program.status();
    const omni::step::Step &step = (*program)->step();
    ASSERT_EQ(step.executables()->size(), 1u);
    ASSERT_EQ(step.target()->kind()->str(), "cpu");
    ASSERT_EQ(step.target()->cpu()->str(), cpu);
    std::string features = step.executables()->Get(0)->target()->str();
    absl::Status expected = omni::checkLlvmFeatures(features, host);
    if (expected.ok())
      continue; // this machine runs it: try a newer CPU
    auto device = omni::hal::builtinDrivers().createDevice("cpu", {});
    ASSERT_TRUE(device.ok()) << device.status();
    auto executor = omni::executor::Executor::create(*program, **device);
    ASSERT_FALSE(executor.ok()) << cpu;
    EXPECT_EQ(executor.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(executor.status().message(),
              bin + ": executables[0]: executable 'kernels': " +
                  std::string(expected.message()));
    return;
  }
  GTEST_SKIP() << "this CPU has every feature of the CPUs tried";
}

TEST(Target, PortableCodeRunsHere) {
  std::string bin = temporaryFile("bin", "");
  std::string errors;
  ASSERT_EQ(compile("x86-64", bin, errors), 0) << errors;
  auto program = omni::loader::Program::loadFile(bin);
  llvm::sys::fs::remove(bin);
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ((*program)->step().executables()->Get(0)->target()->str(), "");
  auto device = omni::hal::builtinDrivers().createDevice("cpu", {});
  ASSERT_TRUE(device.ok()) << device.status();
  auto executor = omni::executor::Executor::create(*program, **device);
  ASSERT_TRUE(executor.ok()) << executor.status();
  auto out = omni::executor::runHostTensors(
      **executor, "main",
      {omni::HostTensor::fromDoubles(omni::DType::F32, {4}, {0.5, 1, 2, 3})});
  ASSERT_TRUE(out.ok()) << out.status();
  absl::Span<const double> y = out->at(0).floats();
  EXPECT_EQ(std::vector<double>(y.begin(), y.end()),
            (std::vector<double>{1.5, 2, 3, 4}));
}

TEST(Target, UnknownTargetIsOneLine) {
  std::string errors;
  mlir::omni::CompileOptions options;
  options.input = "unused.mlir";
  options.output = "unused.bin";
  options.target = "tpu";
  std::string out;
  llvm::raw_string_ostream outs(out), errs(errors);
  EXPECT_EQ(mlir::omni::runCompiler(options, outs, errs), 1);
  EXPECT_EQ(errors, "omnic: --target=tpu: unknown target; expected cpu\n");
}

} // namespace
