//===- CudaDriverTest.cpp - The cuda driver without (and with) a GPU ------===//
//
// CudaApi::load's one-line errors, each reached on a machine without a GPU:
// a missing library, a library that is not a driver, the toolkit's stub
// library, and (through FakeLibcuda.c) a driver too old, one without
// devices and an ordinal past the last device. The hal conformance suites
// (runtime/hal/cts) cover a real GPU; the last tests here check what only
// the cuda driver does (architecture choice, launch checks) and skip
// without one.
//
//===----------------------------------------------------------------------===//

#include "runtime/hal/drivers/cuda/CudaDriver.h"
#include "runtime/hal/drivers/Drivers.h"
#include "runtime/hal/drivers/cuda/CudaApi.h"
#include "runtime/hal/drivers/cuda/CudaExecutable.h"

#include "gtest/gtest.h"

#include <cstdlib>
#include <dlfcn.h>
#include <fstream>
#include <optional>

namespace omni::hal::cuda {
namespace {

/// Sets environment variables for one test and restores them after.
class ScopedEnv {
public:
  ScopedEnv(const char *name, const std::string &value) : name_(name) {
    if (const char *old = std::getenv(name))
      old_ = old;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }

private:
  const char *name_;
  std::optional<std::string> old_;
};

absl::Status createWith(const std::string &library, int ordinal = 0) {
  CudaDriver driver(library);
  DeviceOptions options;
  options.ordinal = ordinal;
  return driver.createDevice(options).status();
}

TEST(CudaDriver, IsRegistered) {
  EXPECT_NE(builtinDrivers().find("cuda"), nullptr);
}

TEST(CudaDriver, MissingLibraryIsOneLine) {
  absl::Status s = createWith("/nonexistent/libcuda.so.1");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s.message(),
            "cuda: no NVIDIA driver (/nonexistent/libcuda.so.1: cannot open "
            "shared object file: No such file or directory)");
}

TEST(CudaDriver, EnvironmentOverridesTheLibrary) {
  ScopedEnv env("OMNI_CUDA_DRIVER_LIBRARY", "/nonexistent/libcuda-test.so");
  CudaDriver driver;
  absl::Status s = driver.createDevice({}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s.message(),
            "cuda: no NVIDIA driver (/nonexistent/libcuda-test.so: cannot "
            "open shared object file: No such file or directory)");
}

TEST(CudaDriver, DefaultLibraryWithoutADriver) {
  if (void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) {
    dlclose(h);
    GTEST_SKIP() << "this machine has libcuda.so.1";
  }
  unsetenv("OMNI_CUDA_DRIVER_LIBRARY");
  auto device = builtinDrivers().createDevice("cuda", {});
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(device.status().message(),
            "cuda: no NVIDIA driver (libcuda.so.1: cannot open shared object "
            "file: No such file or directory)");
}

TEST(CudaDriver, LibraryWithoutTheEntryPoints) {
  absl::Status s = createWith(OMNI_NOT_A_DRIVER);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s.message(),
            std::string("cuda: no NVIDIA driver (") + OMNI_NOT_A_DRIVER +
                " has no cuGetProcAddress_v2; the driver must be 12.0 or "
                "newer)");
}

TEST(CudaDriver, ToolkitStubLibrary) {
  if (!std::ifstream(OMNI_CUDA_STUB_LIBCUDA).good())
    GTEST_SKIP() << "no stub library at " << OMNI_CUDA_STUB_LIBCUDA;
  absl::Status s = createWith(OMNI_CUDA_STUB_LIBCUDA);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s.message(),
            std::string("cuda: no NVIDIA driver (") + OMNI_CUDA_STUB_LIBCUDA +
                " is the CUDA toolkit's stub library, not a driver)");
}

TEST(CudaDriver, DriverTooOld) {
  ScopedEnv version("OMNI_FAKE_CUDA_VERSION", "11080");
  absl::Status s = createWith(OMNI_FAKE_LIBCUDA);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s.message(),
            "cuda: driver version 11.8 is too old; need 12.0 or newer");
}

TEST(CudaDriver, NoDevicesAtInit) {
  ScopedEnv init("OMNI_FAKE_CUDA_INIT", "100"); // CUDA_ERROR_NO_DEVICE
  absl::Status s = createWith(OMNI_FAKE_LIBCUDA);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s.message(),
            "cuda: the driver has no devices (cuInit: CUDA_ERROR_NO_DEVICE)");
}

TEST(CudaDriver, OtherInitFailuresAreNamed) {
  ScopedEnv init("OMNI_FAKE_CUDA_INIT", "803"); // SYSTEM_DRIVER_MISMATCH
  absl::Status s = createWith(OMNI_FAKE_LIBCUDA);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "cuda: the driver did not start (cuInit: "
                         "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH)");
}

TEST(CudaDriver, ZeroDevices) {
  ScopedEnv devices("OMNI_FAKE_CUDA_DEVICES", "0");
  absl::Status s = createWith(OMNI_FAKE_LIBCUDA);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s.message(),
            "cuda: the driver has no devices (cuDeviceGetCount: 0)");
}

TEST(CudaDriver, OrdinalPastTheLastDevice) {
  ScopedEnv devices("OMNI_FAKE_CUDA_DEVICES", "1");
  absl::Status s = createWith(OMNI_FAKE_LIBCUDA, 3);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "cuda: device 3 requested but only 1 present");
  absl::Status negative = createWith(OMNI_FAKE_LIBCUDA, -1);
  EXPECT_EQ(negative.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(negative.message(), "cuda: device -1 requested (expected >= 0)");
}

TEST(CudaDriver, TheFailureIsKept) {
  // A driver that failed to load fails the same way every time (no retry
  // that could find another library).
  CudaDriver driver("/nonexistent/libcuda.so.1");
  absl::Status first = driver.createDevice({}).status();
  absl::Status second = driver.createDevice({}).status();
  EXPECT_EQ(first, second);
}

TEST(CudaApi, LoadsTheFake) {
  // Everything CudaApi resolves exists in the fake, so load succeeds and
  // reports what the fake says.
  ScopedEnv version("OMNI_FAKE_CUDA_VERSION", "12080");
  ScopedEnv devices("OMNI_FAKE_CUDA_DEVICES", "4");
  auto api = CudaApi::load(OMNI_FAKE_LIBCUDA);
  ASSERT_TRUE(api.ok()) << api.status();
  EXPECT_EQ((*api)->driverVersion(), 12080);
  EXPECT_EQ((*api)->deviceCount(), 4);
  EXPECT_TRUE((*api)->checkOrdinal(3).ok());
  // The fake cannot name errors; the built-in table can.
  EXPECT_EQ((*api)->errorName(CUDA_ERROR_ILLEGAL_ADDRESS),
            "CUDA_ERROR_ILLEGAL_ADDRESS");
  EXPECT_EQ((*api)->errorName(static_cast<CUresult>(12345)), "CUresult 12345");
  absl::Status oom = (*api)->check(CUDA_ERROR_OUT_OF_MEMORY, "allocating");
  EXPECT_EQ(oom.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(oom.message(), "allocating: CUDA_ERROR_OUT_OF_MEMORY");
}

TEST(CudaExecutable, WhichCubinRunsWhere) {
  // Arch-specific cubins run on exactly their device.
  EXPECT_TRUE(cubinRunsOn("sm_90a", 9, 0));
  EXPECT_FALSE(cubinRunsOn("sm_90a", 10, 0));
  EXPECT_FALSE(cubinRunsOn("sm_90a", 8, 0));
  // Plain cubins run on later minors of the same major.
  EXPECT_TRUE(cubinRunsOn("sm_80", 8, 0));
  EXPECT_TRUE(cubinRunsOn("sm_80", 8, 9));
  EXPECT_FALSE(cubinRunsOn("sm_86", 8, 0));
  EXPECT_FALSE(cubinRunsOn("sm_80", 9, 0));
  EXPECT_TRUE(cubinRunsOn("sm_100", 10, 0));
  EXPECT_TRUE(cubinRunsOn("sm_100f", 10, 3));
  // Not an architecture.
  EXPECT_FALSE(cubinRunsOn("", 9, 0));
  EXPECT_FALSE(cubinRunsOn("compute_90", 9, 0));
  EXPECT_FALSE(cubinRunsOn("sm_x0", 9, 0));
}

//===----------------------------------------------------------------------===//
// With a GPU
//===----------------------------------------------------------------------===//

class CudaGpuTest : public ::testing::Test {
protected:
  void SetUp() override {
    auto device = builtinDrivers().createDevice("cuda", {});
    if (!device.ok()) {
      ASSERT_EQ(device.status().code(), absl::StatusCode::kUnavailable)
          << device.status();
      GTEST_SKIP() << "no GPU: " << device.status().message();
    }
    device_ = std::move(*device);
  }
  std::unique_ptr<Device> device_;
};

// A PTX module with one kernel: out[i] = a[i] + b[i] + s (s: an i64
// scalar after the pointers, as GpuLaunch's ABI says).
constexpr char kAddPtx[] = R"(
.version 8.0
.target sm_80
.address_size 64
.visible .entry add_scalar(.param .u64 a, .param .u64 b, .param .u64 out,
                           .param .u64 s)
{
  .reg .b64 %rd<12>;
  .reg .f32 %f<5>;
  .reg .b32 %r<3>;
  ld.param.u64 %rd1, [a];
  ld.param.u64 %rd2, [b];
  ld.param.u64 %rd3, [out];
  ld.param.u64 %rd4, [s];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd5, %r1, 4;
  cvta.to.global.u64 %rd6, %rd1;
  cvta.to.global.u64 %rd7, %rd2;
  cvta.to.global.u64 %rd8, %rd3;
  add.s64 %rd9, %rd6, %rd5;
  add.s64 %rd10, %rd7, %rd5;
  add.s64 %rd11, %rd8, %rd5;
  ld.global.f32 %f1, [%rd9];
  ld.global.f32 %f2, [%rd10];
  cvt.rn.f32.s64 %f3, %rd4;
  add.f32 %f4, %f1, %f2;
  add.f32 %f4, %f4, %f3;
  st.global.f32 [%rd11], %f4;
  ret;
}
)";

ExecutableSpec addSpec(std::vector<uint32_t> args) {
  ExecutableSpec spec;
  spec.name = "add";
  spec.format = ExecutableFormat::Ptx;
  spec.code = absl::Span<const uint8_t>(
      reinterpret_cast<const uint8_t *>(kAddPtx), sizeof(kAddPtx));
  spec.target = "sm_80";
  spec.kernels = {"add"};
  GpuKernelSpec kernel;
  GpuLaunchSpec launch;
  launch.entry = "add_scalar";
  launch.block[0] = 4;
  launch.args = std::move(args);
  kernel.launches.push_back(launch);
  spec.gpuKernels.push_back(kernel);
  return spec;
}

TEST_F(CudaGpuTest, DispatchesAPtxKernelWithPointersThenScalars) {
  auto exe = device_->loadExecutable(addSpec({0, 1, 2}));
  ASSERT_TRUE(exe.ok()) << exe.status();
  auto stream = *device_->createStream();
  std::vector<float> a = {1, 2, 3, 4}, b = {10, 20, 30, 40}, out(4);
  auto ba = *device_->allocate(16), bb = *device_->allocate(16),
       bo = *device_->allocate(16);
  ASSERT_TRUE(stream->writeBuffer(a.data(), BufferRef::all(*ba)).ok());
  ASSERT_TRUE(stream->writeBuffer(b.data(), BufferRef::all(*bb)).ok());
  const BufferRef buffers[] = {BufferRef::all(*ba), BufferRef::all(*bb),
                               BufferRef::all(*bo)};
  const int64_t scalars[] = {100};
  ASSERT_TRUE(stream->dispatch(**exe, 0, 1, buffers, scalars).ok());
  ASSERT_TRUE(stream->readBuffer(BufferRef::all(*bo), out.data()).ok());
  ASSERT_TRUE(stream->synchronize().ok());
  EXPECT_EQ(out, (std::vector<float>{111, 122, 133, 144}));
}

TEST_F(CudaGpuTest, LoadErrorsAreOneLine) {
  ExecutableSpec missing = addSpec({0, 1, 2});
  missing.gpuKernels[0].launches[0].entry = "nope";
  auto exe = device_->loadExecutable(missing);
  ASSERT_FALSE(exe.ok());
  EXPECT_EQ(exe.status().message(), "cuda: executable 'add' has no entry "
                                    "point 'nope' (kernel 'add')");

  // A cubin for another architecture without PTX.
  ExecutableSpec cubin = addSpec({0, 1, 2});
  cubin.format = ExecutableFormat::Cubin;
  cubin.target = "sm_10a";
  auto wrong = device_->loadExecutable(cubin);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(std::string(wrong.status().message())
                .find("is a cubin for sm_10a but cuda:0 is sm_"),
            std::string::npos)
      << wrong.status();
  // ... with the PTX fallback it loads.
  cubin.ptx = cubin.code;
  EXPECT_TRUE(device_->loadExecutable(cubin).ok());

  // An argument index past the dispatch's buffers fails at dispatch.
  auto bad = device_->loadExecutable(addSpec({0, 1, 5}));
  ASSERT_TRUE(bad.ok()) << bad.status();
  auto stream = *device_->createStream();
  auto buffer = *device_->allocate(16);
  const BufferRef buffers[] = {BufferRef::all(*buffer), BufferRef::all(*buffer),
                               BufferRef::all(*buffer)};
  const int64_t scalars[] = {0};
  absl::Status s = stream->dispatch(**bad, 0, 1, buffers, scalars);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(stream->synchronize().ok());
}

TEST_F(CudaGpuTest, DescriptionNamesTheArchitecture) {
  EXPECT_NE(device_->description().find("(sm_"), std::string::npos)
      << device_->description();
  EXPECT_EQ(device_->driverName(), "cuda");
}

TEST_F(CudaGpuTest, Bf16MatmulAccumulatesInF32) {
  // 512 ones times 512 ones: an f32 accumulator reaches 512 (exact in
  // bf16); a bf16 running sum would stall at 256 (256 + 1 rounds to even).
  const int64_t k = 512;
  std::vector<uint16_t> ones(k, 0x3f80);
  auto stream = *device_->createStream();
  auto bl = *device_->allocate(2 * k), br = *device_->allocate(2 * k),
       bo = *device_->allocate(2);
  ASSERT_TRUE(stream->writeBuffer(ones.data(), BufferRef::all(*bl)).ok());
  ASSERT_TRUE(stream->writeBuffer(ones.data(), BufferRef::all(*br)).ok());
  MatmulParams p;
  p.dtype = DType::BF16;
  p.m = 1;
  p.n = 1;
  p.k = k;
  absl::Status s = stream->matmul(p, BufferRef::all(*bl), BufferRef::all(*br),
                                  BufferRef::all(*bo));
  ASSERT_TRUE(s.ok()) << s;
  uint16_t out = 0;
  ASSERT_TRUE(stream->readBuffer(BufferRef::all(*bo), &out).ok());
  ASSERT_TRUE(stream->synchronize().ok());
  EXPECT_EQ(out, 0x4400); // 512.0 in bf16
}

} // namespace
} // namespace omni::hal::cuda
