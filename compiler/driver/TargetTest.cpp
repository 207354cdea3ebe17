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

#include "compiler/codegen/cuda/CudaCodegen.h"
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

/// Compiles kProgram for `cpu` (or, with target "cuda", for that SM
/// architecture) with omnic's library; returns omnic's exit code and its
/// stderr.
int compile(const std::string &cpu, const std::string &output,
            std::string &errors, const std::string &target = "cpu") {
  mlir::omni::CompileOptions options;
  options.input = temporaryFile("mlir", kProgram);
  options.output = output;
  options.target = target;
  if (target == "cuda")
    options.cudaArch = cpu;
  else
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

/// A device that says it is "cuda" and records the executable the executor
/// asks it to load (then fails, so nothing runs); buffers and streams come
/// from the cpu device.
class RecordingDevice : public omni::hal::Device {
public:
  explicit RecordingDevice(omni::hal::Device &cpu) : cpu_(cpu) {}
  const std::string &driverName() const override { return name_; }
  std::string description() const override { return "a recording device"; }
  absl::StatusOr<std::unique_ptr<omni::hal::Buffer>>
  allocate(int64_t bytes) override {
    return cpu_.allocate(bytes);
  }
  bool supportsFormat(omni::hal::ExecutableFormat) const override {
    return true;
  }
  absl::StatusOr<std::unique_ptr<omni::hal::Executable>>
  loadExecutable(const omni::hal::ExecutableSpec &spec) override {
    format = spec.format;
    target = spec.target;
    kernels = spec.kernels;
    gpuKernels = spec.gpuKernels;
    codeBytes = spec.code.size();
    ptx.assign(spec.ptx.begin(), spec.ptx.end());
    return absl::UnimplementedError("recorded");
  }
  absl::StatusOr<std::unique_ptr<omni::hal::Stream>> createStream() override {
    return cpu_.createStream();
  }

  omni::hal::ExecutableFormat format{};
  std::string target;
  std::vector<std::string> kernels;
  std::vector<omni::hal::GpuKernelSpec> gpuKernels;
  size_t codeBytes = 0;
  std::string ptx;

private:
  omni::hal::Device &cpu_;
  std::string name_ = "cuda";
};

// omnic --target=cuda -> step.bin -> loader -> the executor's
// ExecutableSpec: the launches and the PTX reach the driver as compiled.
TEST(Target, CudaLaunchesReachTheDriver) {
  if (!llvm::sys::fs::can_execute(mlir::omni::ptxasPath()))
    GTEST_SKIP() << "no ptxas at " << mlir::omni::ptxasPath();
  std::string bin = temporaryFile("bin", "");
  std::string errors;
  ASSERT_EQ(compile("sm_90a", bin, errors, "cuda"), 0) << errors;
  auto program = omni::loader::Program::loadFile(bin);
  llvm::sys::fs::remove(bin);
  ASSERT_TRUE(program.ok()) << program.status();
  EXPECT_EQ((*program)->step().target()->kind()->str(), "cuda");
  auto cpu = omni::hal::builtinDrivers().createDevice("cpu", {});
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  RecordingDevice device(**cpu);
  auto executor = omni::executor::Executor::create(*program, device);
  ASSERT_FALSE(executor.ok());
  EXPECT_NE(executor.status().message().find("recorded"), std::string::npos)
      << executor.status();
  EXPECT_EQ(device.format, omni::hal::ExecutableFormat::Cubin);
  EXPECT_EQ(device.target, "sm_90a");
  ASSERT_EQ(device.kernels, std::vector<std::string>{"omni_kernel_0"});
  // x + 1 over 4 elements: one launch of one block of 32 threads (4 rounded
  // up to a warp) over buffers 0 (x) and 1 (the result).
  ASSERT_EQ(device.gpuKernels.size(), 1u);
  const omni::hal::GpuKernelSpec &kernel = device.gpuKernels[0];
  EXPECT_TRUE(kernel.scratch.empty());
  ASSERT_EQ(kernel.launches.size(), 1u);
  const omni::hal::GpuLaunchSpec &launch = kernel.launches[0];
  EXPECT_EQ(launch.entry, "omni_kernel_0_0");
  EXPECT_EQ(std::vector<uint32_t>(launch.grid, launch.grid + 3),
            (std::vector<uint32_t>{1, 1, 1}));
  EXPECT_EQ(std::vector<uint32_t>(launch.block, launch.block + 3),
            (std::vector<uint32_t>{32, 1, 1}));
  EXPECT_EQ(launch.sharedBytes, 0u);
  EXPECT_EQ(launch.args, (std::vector<uint32_t>{0, 1}));
  // The cubin is an ELF file; the PTX is null-terminated text that declares
  // the entry.
  EXPECT_GT(device.codeBytes, 4u);
  ASSERT_FALSE(device.ptx.empty());
  EXPECT_EQ(device.ptx.back(), '\0');
  EXPECT_NE(device.ptx.find(".target sm_90a"), std::string::npos);
  EXPECT_NE(device.ptx.find(".entry omni_kernel_0_0("), std::string::npos);
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
  EXPECT_EQ(errors,
            "omnic: --target=tpu: unknown target; expected cpu, cuda\n");
}

} // namespace
