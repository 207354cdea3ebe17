//===- CpuExecutableTest.cpp - the cpu driver's target check ----*- C++ -*-===//
//
// The cpu driver refuses an executable whose LLVM feature string names an
// instruction-set extension the CPU lacks, before any code is loaded. CPUs
// are simulated with CpuFeatures flag sets, so the tests do not depend on
// the machine they run on.
//
//===----------------------------------------------------------------------===//

#include "runtime/hal/drivers/cpu/CpuExecutable.h"

#include "gtest/gtest.h"

namespace omni::hal::cpu {
namespace {

ExecutableSpec specFor(const std::string &target,
                       const std::vector<uint8_t> &code) {
  ExecutableSpec spec;
  spec.name = "kernels";
  spec.format = ExecutableFormat::ElfSharedObject;
  spec.code = code;
  spec.target = target;
  spec.kernels = {"k"};
  return spec;
}

TEST(CpuExecutable, ChecksTheTargetFeatures) {
  CpuFeatures avx2({"sse2", "avx", "avx2", "fma"});
  CpuFeatures sse2({"sse2"});
  std::vector<uint8_t> code = {0x7f, 'E', 'L', 'F', 2, 1, 1};
  ExecutableSpec spec = specFor("+avx2,+fma", code);
  EXPECT_TRUE(CpuExecutable::checkTarget(spec, avx2).ok());
  absl::Status missing = CpuExecutable::checkTarget(spec, sse2);
  EXPECT_EQ(missing.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(missing.message(), "executable 'kernels': needs avx2 (cpuinfo "
                               "flag avx2), which this CPU lacks");
  // Tuning flags and disabled features are not requirements; no target is
  // portable code.
  EXPECT_TRUE(CpuExecutable::checkTarget(
                  specFor("+prefer-256-bit,-avx512f", code), sse2)
                  .ok());
  EXPECT_TRUE(CpuExecutable::checkTarget(specFor("", code), sse2).ok());
  // A CPU whose flags are unknown cannot run code that needs any.
  CpuFeatures unknown({}, /*available=*/false);
  EXPECT_EQ(CpuExecutable::checkTarget(spec, unknown).message(),
            "executable 'kernels': needs avx2 but this CPU's features are "
            "unknown (/proc/cpuinfo has no flags)");
}

TEST(CpuExecutable, RefusesBeforeLoading) {
  // Not a loadable shared object: the target check answers first, and
  // without it the dlopen error does.
  CpuFeatures sse2({"sse2"});
  std::vector<uint8_t> code = {0x7f, 'E', 'L', 'F', 2, 1, 1};
  auto refused = CpuExecutable::load(specFor("+avx2", code), &sse2);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(),
            "executable 'kernels': needs avx2 (cpuinfo flag avx2), which "
            "this CPU lacks");
  auto broken = CpuExecutable::load(specFor("", code), &sse2);
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find(
                "executable 'kernels': cannot load the shared object"),
            absl::string_view::npos)
      << broken.status();
}

} // namespace
} // namespace omni::hal::cpu
