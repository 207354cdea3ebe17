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
#include "runtime/hal/drivers/cuda/CudaDevice.h"
#include "runtime/hal/drivers/cuda/CudaExecutable.h"
#include "runtime/hal/drivers/cuda/CudaStream.h"
#include "runtime/hal/drivers/cuda/kernels/Indexing.h"
#include "runtime/io/ElementCodec.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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

TEST(CudaDriver, AttentionKernelComesFromTheEnvironment) {
  {
    ScopedEnv attention("OMNI_CUDA_ATTENTION", "flash");
    auto kernel = attentionKernelFromEnvironment();
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    EXPECT_EQ(*kernel, AttentionKernel::Flash);
  }
  {
    ScopedEnv attention("OMNI_CUDA_ATTENTION", "unfused");
    EXPECT_EQ(*attentionKernelFromEnvironment(), AttentionKernel::Unfused);
  }
  // A bad value is one line, before the driver is looked for.
  ScopedEnv attention("OMNI_CUDA_ATTENTION", "cudnn");
  absl::Status s = createWith("/nonexistent/libcuda.so.1");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "cuda: OMNI_CUDA_ATTENTION must be unfused or "
                         "flash, found 'cudnn'");
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

/// deviceCount is cuDeviceGetCount's answer, or createDevice's reason
/// there is none.
TEST(CudaDriver, CountsItsDevices) {
  ScopedEnv devices("OMNI_FAKE_CUDA_DEVICES", "3");
  CudaDriver driver(OMNI_FAKE_LIBCUDA);
  absl::StatusOr<int> count = driver.deviceCount();
  ASSERT_TRUE(count.ok()) << count.status();
  EXPECT_EQ(*count, 3);
  CudaDriver missing("/nonexistent/libcuda.so.1");
  absl::StatusOr<int> none = missing.deviceCount();
  EXPECT_EQ(none.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(none.status().message(),
            "cuda: no NVIDIA driver (/nonexistent/libcuda.so.1: cannot open "
            "shared object file: No such file or directory)");
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
  // The fake finds base names only, as libcuda's cuGetProcAddress: every
  // entry, the graph ones included, is asked for by its base name
  // ("cuStreamBeginCapture", not cuda.h's cuStreamBeginCapture_v2).
  EXPECT_NE((*api)->cuStreamBeginCapture, nullptr);
  EXPECT_NE((*api)->cuStreamEndCapture, nullptr);
  EXPECT_NE((*api)->cuGraphInstantiateWithFlags, nullptr);
  EXPECT_NE((*api)->cuGraphLaunch, nullptr);
  EXPECT_NE((*api)->cuGraphExecDestroy, nullptr);
  EXPECT_NE((*api)->cuGraphDestroy, nullptr);
  EXPECT_NE((*api)->cuDeviceGetGraphMemAttribute, nullptr);
  // The fake cannot name errors; the built-in table can.
  EXPECT_EQ((*api)->errorName(CUDA_ERROR_ILLEGAL_ADDRESS),
            "CUDA_ERROR_ILLEGAL_ADDRESS");
  EXPECT_EQ((*api)->errorName(static_cast<CUresult>(12345)), "CUresult 12345");
  absl::Status oom = (*api)->check(CUDA_ERROR_OUT_OF_MEMORY, "allocating");
  EXPECT_EQ(oom.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(oom.message(), "allocating: CUDA_ERROR_OUT_OF_MEMORY");
}

TEST(CudaApi, LibrariesLoadOrSayWhyNot) {
  // cuBLASLt and cuDNN load without a GPU (their entry points are found by
  // dlsym); on a machine without them the reason is one line.
  auto api = CudaApi::load(OMNI_FAKE_LIBCUDA);
  ASSERT_TRUE(api.ok()) << api.status();
  absl::StatusOr<const CublasLtApi *> lt = (*api)->cublasLt();
  if (lt.ok()) {
    EXPECT_NE((*lt)->cublasLtMatmul, nullptr);
  } else {
    EXPECT_EQ(lt.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_EQ(lt.status().message().rfind("cuda: no cuBLASLt for matmuls (", 0),
              0u)
        << lt.status();
  }
  absl::StatusOr<const CudnnApi *> dnn = (*api)->cudnn();
  if (dnn.ok()) {
    EXPECT_NE((*dnn)->cudnnConvolutionForward, nullptr);
    EXPECT_GE((*dnn)->cudnnGetVersion(), 90000u);
  } else {
    EXPECT_EQ(dnn.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_EQ(dnn.status().message().rfind("cuda: ", 0), 0u) << dnn.status();
  }
  // Loaded once: the same table (or reason) every time.
  EXPECT_EQ((*api)->cublasLt().ok(), lt.ok());
}

TEST(CudaApi, LibraryVariablesNameTheLibraries) {
  // OMNI_CUBLASLT_LIBRARY and OMNI_CUDNN_LIBRARY (the host model's hooks)
  // replace the default names; a missing file or one without the entry
  // points is the usual one-line Unavailable.
  {
    ScopedEnv lt("OMNI_CUBLASLT_LIBRARY", "/nonexistent/libcublasLt.so");
    ScopedEnv dnn("OMNI_CUDNN_LIBRARY", "/nonexistent/libcudnn.so.9");
    auto api = CudaApi::load(OMNI_FAKE_LIBCUDA);
    ASSERT_TRUE(api.ok()) << api.status();
    EXPECT_EQ((*api)->cublasLt().status().message(),
              "cuda: no cuBLASLt for matmuls (/nonexistent/libcublasLt.so: "
              "cannot open shared object file: No such file or directory)");
    EXPECT_EQ((*api)->cudnn().status().message(),
              "cuda: no cuDNN for convolutions (/nonexistent/libcudnn.so.9: "
              "cannot open shared object file: No such file or directory)");
  }
  ScopedEnv lt("OMNI_CUBLASLT_LIBRARY", OMNI_NOT_A_DRIVER);
  auto api = CudaApi::load(OMNI_FAKE_LIBCUDA);
  ASSERT_TRUE(api.ok()) << api.status();
  EXPECT_EQ((*api)->cublasLt().status().message(),
            "cuda: the cuBLASLt library has no entry point cublasLtCreate");
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

/// What cuBLASLt computes for a plan: D = op(A) op(B), column-major.
std::vector<double> columnMajorGemm(const GemmPlan &plan, int64_t m, int64_t n,
                                    int64_t k, const std::vector<double> &a,
                                    const std::vector<double> &b) {
  // op(A) is n x k, op(B) is k x m, D is n x m with leading dimension ldc.
  auto opA = [&](int64_t i, int64_t j) {
    return plan.transposeA ? a[j + i * plan.lda] : a[i + j * plan.lda];
  };
  auto opB = [&](int64_t i, int64_t j) {
    return plan.transposeB ? b[j + i * plan.ldb] : b[i + j * plan.ldb];
  };
  std::vector<double> d(static_cast<size_t>(plan.ldc * m));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) {
      double acc = 0;
      for (int64_t l = 0; l < k; ++l)
        acc += opA(i, l) * opB(l, j);
      d[static_cast<size_t>(i + j * plan.ldc)] = acc;
    }
  return d;
}

TEST(CudaLibraries, RowMajorMatmulsMapOntoColumnMajorCublas) {
  // The bytes of the row-major operands, read as planGemm says, give the
  // row-major product in the result's bytes, for every transpose.
  const int64_t m = 3, n = 4, k = 5;
  for (bool tl : {false, true})
    for (bool tr : {false, true}) {
      std::vector<double> lhs(m * k), rhs(k * n);
      for (size_t i = 0; i < lhs.size(); ++i)
        lhs[i] = double(i) * 0.5 - 3;
      for (size_t i = 0; i < rhs.size(); ++i)
        rhs[i] = double(i * i % 7) - 2;
      auto L = [&](int64_t i, int64_t l) { // op(lhs)[i, l], row-major
        return tl ? lhs[l * m + i] : lhs[i * k + l];
      };
      auto R = [&](int64_t l, int64_t j) { // op(rhs)[l, j], row-major
        return tr ? rhs[j * k + l] : rhs[l * n + j];
      };
      GemmPlan plan = planGemm(m, n, k, tl, tr);
      EXPECT_EQ(plan.aRows * plan.aCols, uint64_t(k * n));
      EXPECT_EQ(plan.bRows * plan.bCols, uint64_t(m * k));
      std::vector<double> got = columnMajorGemm(plan, m, n, k, rhs, lhs);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          double want = 0;
          for (int64_t l = 0; l < k; ++l)
            want += L(i, l) * R(l, j);
          EXPECT_EQ(got[static_cast<size_t>(i * n + j)], want)
              << "tl " << tl << " tr " << tr << " at " << i << ", " << j;
        }
    }
}

TEST(CudaLibraries, Im2colTimesFilterIsTheConvolution) {
  // The cts conv2d cases: filter [o, c*kh*kw] x col gives naive conv2d.
  struct Case {
    int64_t n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw;
  };
  for (Case k : {Case{2, 3, 8, 7, 4, 3, 3, 1, 1, 1, 1, 1, 1},
                 Case{1, 2, 9, 10, 3, 3, 2, 2, 3, 0, 2, 1, 1},
                 Case{1, 4, 11, 11, 2, 3, 3, 1, 2, 2, 1, 2, 3}}) {
    int64_t oh = (k.h + 2 * k.ph - k.dh * (k.kh - 1) - 1) / k.sh + 1;
    int64_t ow = (k.w + 2 * k.pw - k.dw * (k.kw - 1) - 1) / k.sw + 1;
    Im2colShape shape{k.c,  k.h,  k.w,  k.kh, k.kw, k.sh, k.sw,
                      k.ph, k.pw, k.dh, k.dw, oh,   ow};
    std::vector<double> x(k.n * k.c * k.h * k.w), w(k.o * k.c * k.kh * k.kw);
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = double(i % 13) - 6;
    for (size_t i = 0; i < w.size(); ++i)
      w[i] = double(i % 5) - 2;
    const int64_t rows = k.c * k.kh * k.kw, spatial = oh * ow;
    std::vector<double> col(k.n * rows * spatial);
    for (int64_t i = 0; i < int64_t(col.size()); ++i) {
      int64_t source = im2colSource(shape, i);
      col[i] = source < 0 ? 0.0 : x[source];
    }
    for (int64_t img = 0; img < k.n; ++img)
      for (int64_t o = 0; o < k.o; ++o)
        for (int64_t oy = 0; oy < oh; ++oy)
          for (int64_t ox = 0; ox < ow; ++ox) {
            double want = 0, got = 0;
            for (int64_t c = 0; c < k.c; ++c)
              for (int64_t ky = 0; ky < k.kh; ++ky)
                for (int64_t kx = 0; kx < k.kw; ++kx) {
                  int64_t iy = oy * k.sh - k.ph + ky * k.dh;
                  int64_t ix = ox * k.sw - k.pw + kx * k.dw;
                  if (iy >= 0 && iy < k.h && ix >= 0 && ix < k.w)
                    want += x[((img * k.c + c) * k.h + iy) * k.w + ix] *
                            w[((o * k.c + c) * k.kh + ky) * k.kw + kx];
                }
            for (int64_t r = 0; r < rows; ++r)
              got += w[o * rows + r] *
                     col[(img * rows + r) * spatial + oy * ow + ox];
            ASSERT_EQ(got, want) << img << " " << o << " " << oy << " " << ox;
          }
  }
}

TEST(CudaLibraries, MaskRowsBroadcastAcrossChunks) {
  const int64_t batch = 2, heads = 3, seqQ = 5, seqK = 7;
  for (bool batchShared : {false, true})
    for (bool headShared : {false, true}) {
      const int64_t mh = headShared ? 1 : heads;
      const int64_t batchStride = batchShared ? 0 : mh * seqQ * seqK;
      const int64_t headStride = headShared ? 0 : seqQ * seqK;
      // Chunks of 1, 2 and all (batch, head) pairs.
      for (int64_t chunk : {int64_t(1), int64_t(2), batch * heads})
        for (int64_t bh0 = 0; bh0 < batch * heads; bh0 += chunk)
          for (int64_t row = 0;
               row < std::min(chunk, batch * heads - bh0) * seqQ; ++row) {
            int64_t bh = bh0 + row / seqQ, b = bh / heads, h = bh % heads;
            int64_t q = row % seqQ;
            int64_t want =
                (((batchShared ? 0 : b) * mh + (headShared ? 0 : h)) * seqQ +
                 q) *
                seqK;
            ASSERT_EQ(maskRowOffset(row, bh0, seqQ, seqK, heads, batchStride,
                                    headStride),
                      want);
          }
    }
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

TEST_F(CudaGpuTest, ReadsLandBeforeALaterEventCompletes) {
  auto stream = *device_->createStream();
  std::vector<uint32_t> values(300000);
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = uint32_t(i * 2654435761u);
  auto buffer = *device_->allocate(int64_t(values.size() * 4));
  ASSERT_TRUE(stream->writeBuffer(values.data(), BufferRef::all(*buffer)).ok());
  // The source may be reused as soon as writeBuffer returns.
  std::vector<uint32_t> original = values;
  std::fill(values.begin(), values.end(), 0u);
  std::vector<uint32_t> out(values.size());
  ASSERT_TRUE(stream->readBuffer(BufferRef::all(*buffer), out.data()).ok());
  auto event = stream->recordEvent();
  ASSERT_TRUE(event.ok());
  ASSERT_TRUE((*event)->wait().ok());
  EXPECT_TRUE((*event)->isComplete());
  EXPECT_EQ(out, original);
}

TEST_F(CudaGpuTest, EveryFillPathAndOverlappingCopies) {
  auto stream = *device_->createStream();
  auto buffer = *device_->allocate(96);
  auto expectPattern = [&](absl::Span<const uint8_t> pattern, int64_t offset,
                           int64_t length) {
    ASSERT_TRUE(stream->fill({buffer.get(), offset, length}, pattern).ok());
    std::vector<uint8_t> got(96);
    ASSERT_TRUE(stream->readBuffer(BufferRef::all(*buffer), got.data()).ok());
    ASSERT_TRUE(stream->synchronize().ok());
    for (int64_t i = 0; i < length; ++i)
      ASSERT_EQ(got[offset + i], pattern[i % pattern.size()])
          << pattern.size() << "-byte pattern at " << i;
  };
  const uint8_t two[] = {1, 2}, four[] = {1, 2, 3, 4},
                eight[] = {1, 2, 3, 4, 5, 6, 7, 8};
  uint8_t twentyFour[24];
  for (int i = 0; i < 24; ++i)
    twentyFour[i] = uint8_t(100 + i);
  expectPattern(two, 0, 96);        // cuMemsetD16Async
  expectPattern(two, 1, 94);        // unaligned: the kernel
  expectPattern(four, 4, 88);       // cuMemsetD32Async
  expectPattern(four, 2, 92);       // unaligned: the kernel
  expectPattern(eight, 8, 80);      // the kernel
  expectPattern(twentyFour, 0, 96); // doubling copies
  // Overlapping copies, both directions (memmove).
  std::vector<uint8_t> bytes(96);
  for (int i = 0; i < 96; ++i)
    bytes[i] = uint8_t(i);
  ASSERT_TRUE(stream->writeBuffer(bytes.data(), BufferRef::all(*buffer)).ok());
  ASSERT_TRUE(stream->copy({buffer.get(), 0, 64}, {buffer.get(), 16, 64}).ok());
  ASSERT_TRUE(
      stream->copy({buffer.get(), 40, 50}, {buffer.get(), 30, 50}).ok());
  std::vector<uint8_t> want = bytes;
  std::memmove(want.data() + 16, want.data(), 64);
  std::memmove(want.data() + 30, want.data() + 40, 50);
  std::vector<uint8_t> got(96);
  ASSERT_TRUE(stream->readBuffer(BufferRef::all(*buffer), got.data()).ok());
  ASSERT_TRUE(stream->synchronize().ok());
  EXPECT_EQ(got, want);
}

TEST_F(CudaGpuTest, MemoryIsCountedAndScratchToo) {
  int64_t before = device_->bytesInUse();
  auto buffer = *device_->allocate(1000);
  EXPECT_EQ(device_->bytesInUse(), before + 1000);
  ExecutableSpec spec = addSpec({0, 1, 2});
  spec.gpuKernels[0].scratch = {4096};
  auto exe = device_->loadExecutable(spec);
  ASSERT_TRUE(exe.ok()) << exe.status();
  EXPECT_EQ(device_->bytesInUse(), before + 1000 + 4096);
  exe->reset();
  buffer.reset();
  EXPECT_EQ(device_->bytesInUse(), before);
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

/// Attention of `dtype` (F16 or BF16) on `device`: q, k, v, the mask
/// (empty: none) as element bits, the result's values.
std::vector<double> attentionOn(Device &device, const AttentionParams &p,
                                const std::vector<uint16_t> &q,
                                const std::vector<uint16_t> &k,
                                const std::vector<uint16_t> &v,
                                const std::vector<uint16_t> &mask) {
  auto stream = *device.createStream();
  auto upload = [&](const std::vector<uint16_t> &bits) {
    auto buffer = *device.allocate(std::max<int64_t>(2 * bits.size(), 2));
    if (!bits.empty()) {
      EXPECT_TRUE(
          stream->writeBuffer(bits.data(), BufferRef::all(*buffer)).ok());
    }
    return buffer;
  };
  auto bq = upload(q), bk = upload(k), bv = upload(v), bm = upload(mask);
  const int64_t n = p.batch * p.heads * p.seqQ * p.valueDim;
  auto bo = *device.allocate(2 * n);
  absl::Status s = stream->attention(
      p, BufferRef::all(*bq), BufferRef::all(*bk), BufferRef::all(*bv),
      p.hasMask ? BufferRef::all(*bm) : BufferRef(), BufferRef::all(*bo));
  EXPECT_TRUE(s.ok()) << s;
  std::vector<uint16_t> out(static_cast<size_t>(n));
  EXPECT_TRUE(stream->readBuffer(BufferRef::all(*bo), out.data()).ok());
  EXPECT_TRUE(stream->synchronize().ok());
  std::vector<double> values;
  for (uint16_t bits : out)
    values.push_back(p.dtype == DType::BF16 ? doubleFromBf16Bits(bits)
                                            : doubleFromHalfBits(bits));
  return values;
}

/// The flash kernel (OMNI_CUDA_ATTENTION=flash) against the unfused path:
/// each rounds the probabilities and the result once to the element type,
/// so each is within u max|v| of exact attention (u = 2^-8 for bf16, 2^-11
/// for f16) and they are within 2 u max|v| of each other. Also with a mask
/// that hides some keys and, for one query row, all of them (NaN in both).
TEST_F(CudaGpuTest, FlashAttentionAgreesWithTheUnfusedPath) {
  ScopedEnv flash("OMNI_CUDA_ATTENTION", "flash");
  auto flashDevice = builtinDrivers().createDevice("cuda", {});
  ASSERT_TRUE(flashDevice.ok()) << flashDevice.status();
  uint64_t state = 12345;
  auto uniform = [&] { // in [-1, 1)
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return double(state >> 11) / double(1ull << 52) - 1.0;
  };
  for (int variant = 0; variant < 2; ++variant) {
    AttentionParams p;
    p.dtype = variant == 0 ? DType::BF16 : DType::F16;
    p.batch = 2;
    p.heads = 3;
    p.seqQ = variant == 0 ? 77 : 130;
    p.seqK = variant == 0 ? 150 : 65;
    p.headDim = p.valueDim = variant == 0 ? 64 : 128;
    p.scale = 1.0 / std::sqrt(double(p.headDim));
    p.hasMask = variant == 1;
    p.maskBatchShared = true;
    auto bits = [&](int64_t count, double scale) {
      std::vector<uint16_t> t;
      for (int64_t i = 0; i < count; ++i) {
        double x = scale * uniform();
        t.push_back(p.dtype == DType::BF16 ? bf16BitsFromDouble(x)
                                           : halfBitsFromDouble(x));
      }
      return t;
    };
    const int64_t pairs = p.batch * p.heads;
    std::vector<uint16_t> q = bits(pairs * p.seqQ * p.headDim, 2),
                          k = bits(pairs * p.seqK * p.headDim, 2),
                          v = bits(pairs * p.seqK * p.valueDim, 1), mask;
    if (p.hasMask) {
      mask = bits(p.heads * p.seqQ * p.seqK, 1);
      const uint16_t minusInf = 0xfc00; // f16 -inf
      for (size_t i = 0; i < mask.size(); i += 3)
        mask[i] = minusInf;
      for (int64_t j = 0; j < p.seqK; ++j) // head 0, row 4: all masked
        mask[4 * p.seqK + j] = minusInf;
    }
    std::vector<double> want = attentionOn(*device_, p, q, k, v, mask);
    std::vector<double> got = attentionOn(**flashDevice, p, q, k, v, mask);
    ASSERT_EQ(got.size(), want.size());
    const double u = std::ldexp(1.0, p.dtype == DType::BF16 ? -8 : -11);
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      if (std::isnan(want[i])) {
        EXPECT_TRUE(std::isnan(got[i])) << "element " << i;
        continue;
      }
      worst = std::max(worst, std::fabs(got[i] - want[i]));
      ASSERT_LE(std::fabs(got[i] - want[i]), 2 * u) << "element " << i;
    }
    std::printf("flash vs unfused, %s d=%lld: largest difference %.3g\n",
                p.dtype == DType::BF16 ? "bf16" : "f16",
                static_cast<long long>(p.headDim), worst);
  }
}

/// The attention backward on the GPU, unfused and flash, against
/// the op's definition in double from the same rounded operands. Each
/// path rounds P and dS to the element type before the products that read
/// them (the unfused path's dS also reads the rounded P), so an element is
/// within 2 u times the magnitude of its rounded terms, plus the rounding
/// of the result (u |exact|) and f32 arithmetic (2^-16 of the magnitudes;
/// docs/precision.md). f32 runs the unfused path. Masked variants: a mask
/// shared over the batch with some keys at -inf.
TEST_F(CudaGpuTest, AttentionBackwardMatchesItsDefinition) {
  ScopedEnv flash("OMNI_CUDA_ATTENTION", "flash");
  auto flashDevice = builtinDrivers().createDevice("cuda", {});
  ASSERT_TRUE(flashDevice.ok()) << flashDevice.status();
  uint64_t state = 777;
  auto uniform = [&] { // in [-1, 1)
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return double(state >> 11) / double(1ull << 52) - 1.0;
  };
  struct Variant {
    DType dtype;
    int64_t seqQ, seqK, dim;
    bool flash, masked;
  };
  for (const Variant &var : {Variant{DType::BF16, 77, 150, 64, true, false},
                             Variant{DType::BF16, 77, 150, 64, false, false},
                             Variant{DType::F16, 130, 65, 128, true, false},
                             Variant{DType::F32, 40, 70, 64, false, false},
                             Variant{DType::BF16, 70, 130, 64, true, true},
                             Variant{DType::BF16, 70, 130, 64, false, true},
                             Variant{DType::F32, 40, 70, 64, false, true}}) {
    AttentionParams p;
    p.dtype = var.dtype;
    p.batch = 2;
    p.heads = 2;
    p.seqQ = var.seqQ;
    p.seqK = var.seqK;
    p.headDim = p.valueDim = var.dim;
    p.scale = 1.0 / std::sqrt(double(p.headDim));
    p.hasMask = var.masked;
    p.maskBatchShared = true;
    const int64_t es = dtypeSize(p.dtype), pairs = p.batch * p.heads,
                  qn = pairs * p.seqQ * p.headDim,
                  kn = pairs * p.seqK * p.headDim;
    // Values rounded to the element type, and their bytes.
    auto round = [&](double x) {
      return p.dtype == DType::BF16  ? doubleFromBf16Bits(bf16BitsFromDouble(x))
             : p.dtype == DType::F16 ? doubleFromHalfBits(halfBitsFromDouble(x))
                                     : double(float(x));
    };
    auto random = [&](int64_t n) {
      std::vector<double> t;
      for (int64_t i = 0; i < n; ++i)
        t.push_back(round(uniform()));
      return t;
    };
    std::vector<double> q = random(qn), k = random(kn), v = random(kn),
                        dO = random(qn), o(qn), mask;
    if (var.masked) {
      mask = random(p.heads * p.seqQ * p.seqK);
      for (size_t i = 0; i < mask.size(); i += 3)
        mask[i] = -INFINITY;
    }
    // P in double, o = P v rounded (the forward's result).
    std::vector<double> P(static_cast<size_t>(pairs * p.seqQ * p.seqK));
    const int64_t D = p.headDim;
    for (int64_t b = 0; b < pairs; ++b)
      for (int64_t i = 0; i < p.seqQ; ++i) {
        double *row = &P[(b * p.seqQ + i) * p.seqK];
        double maxS = -INFINITY, sum = 0;
        for (int64_t j = 0; j < p.seqK; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < D; ++e)
            dot += q[(b * p.seqQ + i) * D + e] * k[(b * p.seqK + j) * D + e];
          row[j] = dot * p.scale;
          if (var.masked)
            row[j] += mask[((b % p.heads) * p.seqQ + i) * p.seqK + j];
          maxS = std::max(maxS, row[j]);
        }
        for (int64_t j = 0; j < p.seqK; ++j)
          sum += (row[j] = std::exp(row[j] - maxS));
        for (int64_t j = 0; j < p.seqK; ++j)
          row[j] /= sum;
        for (int64_t e = 0; e < D; ++e) {
          double x = 0;
          for (int64_t j = 0; j < p.seqK; ++j)
            x += row[j] * v[(b * p.seqK + j) * D + e];
          o[(b * p.seqQ + i) * D + e] = round(x);
        }
      }
    auto bytes = [&](const std::vector<double> &t) {
      std::vector<uint8_t> out(t.size() * es);
      for (size_t i = 0; i < t.size(); ++i) {
        if (p.dtype == DType::F32) {
          float f = float(t[i]);
          std::memcpy(&out[i * 4], &f, 4);
        } else {
          uint16_t h = p.dtype == DType::BF16 ? bf16BitsFromDouble(t[i])
                                              : halfBitsFromDouble(t[i]);
          std::memcpy(&out[i * 2], &h, 2);
        }
      }
      return out;
    };
    Device &device = var.flash ? **flashDevice : *device_;
    auto stream = *device.createStream();
    auto upload = [&](const std::vector<double> &t) {
      std::vector<uint8_t> b = bytes(t);
      auto buffer = *device.allocate(int64_t(b.size()));
      EXPECT_TRUE(stream->writeBuffer(b.data(), BufferRef::all(*buffer)).ok());
      return buffer;
    };
    auto bq = upload(q), bk = upload(k), bv = upload(v), bo = upload(o),
         bdO = upload(dO), bm = upload(var.masked ? mask : q);
    auto bdq = *device.allocate(qn * es), bdk = *device.allocate(kn * es),
         bdv = *device.allocate(kn * es);
    absl::Status s = stream->attentionBackward(
        p, BufferRef::all(*bq), BufferRef::all(*bk), BufferRef::all(*bv),
        var.masked ? BufferRef::all(*bm) : BufferRef(), BufferRef::all(*bo),
        BufferRef::all(*bdO), BufferRef::all(*bdq), BufferRef::all(*bdk),
        BufferRef::all(*bdv));
    ASSERT_TRUE(s.ok()) << s;
    auto read = [&](Buffer &buffer, int64_t n) {
      std::vector<uint8_t> raw(static_cast<size_t>(n * es));
      EXPECT_TRUE(stream->readBuffer(BufferRef::all(buffer), raw.data()).ok());
      EXPECT_TRUE(stream->synchronize().ok());
      std::vector<double> values;
      for (int64_t i = 0; i < n; ++i) {
        if (p.dtype == DType::F32) {
          float f;
          std::memcpy(&f, &raw[i * 4], 4);
          values.push_back(f);
        } else {
          uint16_t h;
          std::memcpy(&h, &raw[i * 2], 2);
          values.push_back(p.dtype == DType::BF16 ? doubleFromBf16Bits(h)
                                                  : doubleFromHalfBits(h));
        }
      }
      return values;
    };
    std::vector<double> dq = read(*bdq, qn), dk = read(*bdk, kn),
                        dv = read(*bdv, kn);

    const double u = p.dtype == DType::BF16  ? std::ldexp(1.0, -8)
                     : p.dtype == DType::F16 ? std::ldexp(1.0, -11)
                                             : std::ldexp(1.0, -24);
    const double f32 = std::ldexp(1.0, -16);
    double worst = 0;
    auto expectNear = [&](double got, double want, double bound,
                          const char *what, int64_t index) {
      worst = std::max(worst, std::fabs(got - want));
      EXPECT_LE(std::fabs(got - want), bound)
          << what << "[" << index << "]: got " << got << ", want " << want;
    };
    for (int64_t b = 0; b < pairs; ++b) {
      // dS and |P| (|dP| + |Delta|) per score.
      std::vector<double> ds(p.seqQ * p.seqK), mag(ds.size());
      for (int64_t i = 0; i < p.seqQ; ++i) {
        double delta = 0;
        for (int64_t e = 0; e < D; ++e)
          delta += dO[(b * p.seqQ + i) * D + e] * o[(b * p.seqQ + i) * D + e];
        for (int64_t j = 0; j < p.seqK; ++j) {
          double dp = 0;
          for (int64_t e = 0; e < D; ++e)
            dp += dO[(b * p.seqQ + i) * D + e] * v[(b * p.seqK + j) * D + e];
          const double pij = P[(b * p.seqQ + i) * p.seqK + j];
          ds[i * p.seqK + j] = pij * (dp - delta);
          mag[i * p.seqK + j] = pij * (std::fabs(dp) + std::fabs(delta));
        }
      }
      for (int64_t i = 0; i < p.seqQ; ++i)
        for (int64_t e = 0; e < D; ++e) {
          double want = 0, m = 0;
          for (int64_t j = 0; j < p.seqK; ++j) {
            const double kj = k[(b * p.seqK + j) * D + e];
            want += ds[i * p.seqK + j] * kj;
            m += (2 * u * std::fabs(ds[i * p.seqK + j]) +
                  f32 * mag[i * p.seqK + j]) *
                 std::fabs(kj);
          }
          const int64_t at = (b * p.seqQ + i) * D + e;
          want *= p.scale;
          expectNear(dq[at], want, u * std::fabs(want) + p.scale * m, "dq", at);
        }
      for (int64_t j = 0; j < p.seqK; ++j)
        for (int64_t e = 0; e < D; ++e) {
          double wantK = 0, mK = 0, wantV = 0, mV = 0;
          for (int64_t i = 0; i < p.seqQ; ++i) {
            const double qi = q[(b * p.seqQ + i) * D + e],
                         dOi = dO[(b * p.seqQ + i) * D + e],
                         pij = P[(b * p.seqQ + i) * p.seqK + j];
            wantK += ds[i * p.seqK + j] * qi;
            mK += (2 * u * std::fabs(ds[i * p.seqK + j]) +
                   f32 * mag[i * p.seqK + j]) *
                  std::fabs(qi);
            wantV += pij * dOi;
            mV += (2 * u + f32) * pij * std::fabs(dOi);
          }
          const int64_t at = (b * p.seqK + j) * D + e;
          wantK *= p.scale;
          expectNear(dk[at], wantK, u * std::fabs(wantK) + p.scale * mK, "dk",
                     at);
          expectNear(dv[at], wantV, u * std::fabs(wantV) + mV, "dv", at);
        }
    }
    std::printf("attention backward, %s d=%lld %s%s: largest error %.3g\n",
                std::string(dtypeName(p.dtype)).c_str(),
                static_cast<long long>(D), var.flash ? "flash" : "unfused",
                var.masked ? ", masked" : "", worst);
  }
}

//===----------------------------------------------------------------------===//
// Graphs, with a GPU (the driver-neutral contract: HalGraphTest in the cts)
//===----------------------------------------------------------------------===//

/// Reads `buffer` (floats) on `stream` and waits.
std::vector<float> readFloats(Stream &stream, Buffer &buffer) {
  std::vector<float> out(static_cast<size_t>(buffer.size() / 4));
  EXPECT_TRUE(stream.readBuffer(BufferRef::all(buffer), out.data()).ok());
  EXPECT_TRUE(stream.synchronize().ok());
  return out;
}

TEST_F(CudaGpuTest, PrefersGraphs) { EXPECT_TRUE(device_->prefersGraphs()); }

TEST_F(CudaGpuTest, CapturedFillCopyAndDispatchRunAtEachLaunch) {
  auto exe = device_->loadExecutable(addSpec({0, 1, 2}));
  ASSERT_TRUE(exe.ok()) << exe.status();
  auto stream = *device_->createStream();
  auto ba = *device_->allocate(16), bb = *device_->allocate(16),
       bo = *device_->allocate(16), bc = *device_->allocate(16);
  std::vector<float> a = {1, 2, 3, 4};
  ASSERT_TRUE(stream->writeBuffer(a.data(), BufferRef::all(*ba)).ok());
  ASSERT_TRUE(stream->synchronize().ok());

  ASSERT_TRUE(stream->beginCapture().ok());
  const float ten = 10;
  ASSERT_TRUE(stream
                  ->fill(BufferRef::all(*bb),
                         absl::MakeConstSpan(
                             reinterpret_cast<const uint8_t *>(&ten), 4))
                  .ok()); // cuMemsetD32Async
  const BufferRef buffers[] = {BufferRef::all(*ba), BufferRef::all(*bb),
                               BufferRef::all(*bo)};
  const int64_t scalars[] = {100};
  ASSERT_TRUE(stream->dispatch(**exe, 0, 1, buffers, scalars).ok());
  ASSERT_TRUE(stream->copy(BufferRef::all(*bo), BufferRef::all(*bc)).ok());
  auto graph = stream->endCapture();
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ((*graph)->numCommands(), 3);
  // Nothing ran before the launch.
  EXPECT_EQ(readFloats(*stream, *bb), std::vector<float>(4, 0));
  EXPECT_EQ(readFloats(*stream, *bc), std::vector<float>(4, 0));

  ASSERT_TRUE(stream->launchGraph(**graph).ok());
  EXPECT_EQ(readFloats(*stream, *bc), (std::vector<float>{111, 112, 113, 114}));
  // The second launch reads the inputs as they are then, and fills again.
  a = {5, 6, 7, 8};
  const std::vector<float> zeros(4, 0);
  ASSERT_TRUE(stream->writeBuffer(a.data(), BufferRef::all(*ba)).ok());
  ASSERT_TRUE(stream->writeBuffer(zeros.data(), BufferRef::all(*bb)).ok());
  ASSERT_TRUE(stream->launchGraph(**graph).ok());
  EXPECT_EQ(readFloats(*stream, *bc), (std::vector<float>{115, 116, 117, 118}));
  EXPECT_EQ(readFloats(*stream, *bb), std::vector<float>(4, 10));
}

TEST_F(CudaGpuTest, CapturedWritesAreFillsOfAtMost16Bytes) {
  auto stream = *device_->createStream();
  auto buffer = *device_->allocate(64);
  std::vector<uint8_t> host(64);
  for (int i = 0; i < 64; ++i)
    host[i] = uint8_t(200 + i);
  ASSERT_TRUE(stream->beginCapture().ok());
  // Every fill path: 8 bytes (the kernel), 16 (the kernel), 3 at an odd
  // offset (the kernel), 2 aligned (D16), 4 uniform (D8).
  const std::pair<int64_t, int64_t> writes[] = {
      {0, 8}, {16, 16}, {33, 3}, {40, 2}, {44, 4}};
  std::fill(host.begin() + 44, host.begin() + 48, uint8_t(5));
  for (const auto &[offset, length] : writes)
    ASSERT_TRUE(
        stream
            ->writeBuffer(host.data() + offset, {buffer.get(), offset, length})
            .ok())
        << offset;
  const std::vector<uint8_t> captured = host;
  std::fill(host.begin(), host.end(), uint8_t(0)); // too late for the graph
  auto graph = stream->endCapture();
  ASSERT_TRUE(graph.ok()) << graph.status();
  for (int launch = 0; launch < 2; ++launch) {
    ASSERT_TRUE(stream->writeBuffer(host.data(), BufferRef::all(*buffer)).ok());
    ASSERT_TRUE(stream->launchGraph(**graph).ok());
    std::vector<uint8_t> got(64);
    ASSERT_TRUE(stream->readBuffer(BufferRef::all(*buffer), got.data()).ok());
    ASSERT_TRUE(stream->synchronize().ok());
    std::vector<uint8_t> want(64, 0);
    for (const auto &[offset, length] : writes)
      std::copy(captured.begin() + offset, captured.begin() + offset + length,
                want.begin() + offset);
    EXPECT_EQ(got, want) << "launch " << launch;
  }

  // 17 bytes: refused, and the capture with it; later commands return the
  // same failure until endCapture.
  ASSERT_TRUE(stream->beginCapture().ok());
  absl::Status big = stream->writeBuffer(host.data(), {buffer.get(), 0, 17});
  EXPECT_EQ(big.code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(big.message(),
            "writeBuffer of 17 bytes cannot be captured (at most 16)");
  const uint8_t one[] = {1};
  EXPECT_EQ(stream->fill(BufferRef::all(*buffer), one), big);
  auto failed = stream->endCapture();
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(failed.status().message(),
            "the capture failed: writeBuffer of 17 bytes cannot be captured "
            "(at most 16)");
  // The stream is not failed: 17 bytes outside a capture are staged.
  ASSERT_TRUE(stream->writeBuffer(host.data(), {buffer.get(), 0, 17}).ok());
  EXPECT_TRUE(stream->synchronize().ok());
}

TEST_F(CudaGpuTest, CapturedLibraryCallsOwnTheirMemory) {
  // A 24-byte fill (written in pieces), an overlapping copy, a matmul, an
  // attention and a conv2d captured on a stream that is then destroyed:
  // the graph's temporaries and cuBLASLt workspace are its own memory
  // nodes, so it launches on another stream and matches eager results.
  auto eager = *device_->createStream();
  MatmulParams mp;
  mp.batch = 2, mp.m = 33, mp.n = 17, mp.k = 9;
  AttentionParams ap;
  ap.batch = 2, ap.heads = 2, ap.seqQ = 5, ap.seqK = 7, ap.headDim = 4,
  ap.valueDim = 3, ap.scale = 0.5;
  Conv2dParams cp;
  cp.n = 2, cp.c = 3, cp.h = 8, cp.w = 7, cp.o = 4, cp.kh = 3, cp.kw = 3;
  cp.padH = 1, cp.padW = 1, cp.outH = 8, cp.outW = 7;
  auto sized = [&](int64_t floats, uint32_t seed) {
    auto buffer = *device_->allocate(floats * 4);
    std::vector<float> v(static_cast<size_t>(floats));
    for (size_t i = 0; i < v.size(); ++i)
      v[i] = float(int((i * 7 + seed) % 11) - 5) / 4;
    EXPECT_TRUE(eager->writeBuffer(v.data(), BufferRef::all(*buffer)).ok());
    return buffer;
  };
  auto lhs = sized(mp.batch * mp.m * mp.k, 1),
       rhs = sized(mp.batch * mp.k * mp.n, 2);
  auto q = sized(ap.batch * ap.heads * ap.seqQ * ap.headDim, 3),
       k = sized(ap.batch * ap.heads * ap.seqK * ap.headDim, 4),
       v = sized(ap.batch * ap.heads * ap.seqK * ap.valueDim, 5);
  auto x = sized(cp.n * cp.c * cp.h * cp.w, 6),
       w = sized(cp.o * cp.c * cp.kh * cp.kw, 7);
  const int64_t mOut = mp.batch * mp.m * mp.n,
                aOut = ap.batch * ap.heads * ap.seqQ * ap.valueDim,
                cOut = cp.n * cp.o * cp.outH * cp.outW;
  uint8_t pattern[24];
  for (int i = 0; i < 24; ++i)
    pattern[i] = uint8_t(3 * i + 1);
  struct Outputs {
    std::unique_ptr<Buffer> fill, shifted, matmul, attention, conv;
  };
  auto submit = [&](Stream &s, Outputs &o) {
    o.fill = *device_->allocate(96);
    o.shifted = sized(24, 8);
    o.matmul = *device_->allocate(mOut * 4);
    o.attention = *device_->allocate(aOut * 4);
    o.conv = *device_->allocate(cOut * 4);
    ASSERT_TRUE(eager->synchronize().ok());
    ASSERT_TRUE(s.fill(BufferRef::all(*o.fill), pattern).ok());
    ASSERT_TRUE(
        s.copy({o.shifted.get(), 0, 80}, {o.shifted.get(), 16, 80}).ok());
    ASSERT_TRUE(s.matmul(mp, BufferRef::all(*lhs), BufferRef::all(*rhs),
                         BufferRef::all(*o.matmul))
                    .ok());
    ASSERT_TRUE(s.attention(ap, BufferRef::all(*q), BufferRef::all(*k),
                            BufferRef::all(*v), BufferRef{},
                            BufferRef::all(*o.attention))
                    .ok());
    ASSERT_TRUE(s.conv2d(cp, BufferRef::all(*x), BufferRef::all(*w),
                         BufferRef::all(*o.conv))
                    .ok());
  };
  Outputs want, got;
  submit(*eager, want);
  ASSERT_TRUE(eager->synchronize().ok());
  std::unique_ptr<Graph> graph;
  {
    auto capturing = *device_->createStream();
    ASSERT_TRUE(capturing->beginCapture().ok());
    submit(*capturing, got);
    if (HasFatalFailure())
      return;
    auto ended = capturing->endCapture();
    ASSERT_TRUE(ended.ok()) << ended.status();
    graph = std::move(*ended);
    EXPECT_EQ(graph->numCommands(), 5);
  }
  for (int launch = 0; launch < 2; ++launch) {
    ASSERT_TRUE(eager->launchGraph(*graph).ok());
    if (launch == 1) { // the overlapping copy shifts once per launch
      ASSERT_TRUE(
          eager->copy({want.shifted.get(), 0, 80}, {want.shifted.get(), 16, 80})
              .ok());
    }
    for (auto [a, b] : {std::pair{&want.fill, &got.fill},
                        std::pair{&want.shifted, &got.shifted},
                        std::pair{&want.matmul, &got.matmul},
                        std::pair{&want.attention, &got.attention},
                        std::pair{&want.conv, &got.conv}}) {
      std::vector<float> expected = readFloats(*eager, **a);
      std::vector<float> actual = readFloats(*eager, **b);
      ASSERT_EQ(actual.size(), expected.size());
      for (size_t i = 0; i < actual.size(); ++i)
        ASSERT_NEAR(actual[i], expected[i], 1e-5 * (1 + std::abs(expected[i])))
            << "launch " << launch << ", element " << i;
    }
  }
}

TEST_F(CudaGpuTest, HostWaitsFailTheCaptureAndForeignGraphsAreRefused) {
  auto stream = *device_->createStream();
  auto buffer = *device_->allocate(16);
  std::vector<float> out(4);
  ASSERT_TRUE(stream->beginCapture().ok());
  absl::Status read = stream->readBuffer(BufferRef::all(*buffer), out.data());
  EXPECT_EQ(read.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(read.message(), "readBuffer while the stream captures a graph");
  EXPECT_EQ(stream->synchronize().code(),
            absl::StatusCode::kFailedPrecondition);
  auto failed = stream->endCapture();
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().message(),
            "the capture failed: readBuffer while the stream captures a graph");
  EXPECT_EQ(readFloats(*stream, *buffer), std::vector<float>(4, 0));

  // A cpu graph on a cuda stream.
  auto cpu = builtinDrivers().createDevice("cpu", {});
  ASSERT_TRUE(cpu.ok());
  auto cpuStream = *(*cpu)->createStream();
  ASSERT_TRUE(cpuStream->beginCapture().ok());
  auto cpuGraph = cpuStream->endCapture();
  ASSERT_TRUE(cpuGraph.ok());
  absl::Status foreign = stream->launchGraph(**cpuGraph);
  EXPECT_EQ(foreign.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(foreign.message(),
            "launchGraph: the graph was not captured on cuda:0");
}

} // namespace
} // namespace omni::hal::cuda
