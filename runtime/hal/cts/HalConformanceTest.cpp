//===- HalConformanceTest.cpp - Every driver against hal/*.h ----*- C++ -*-===//
//
// One suite per hal interface (Buffer, Stream, Executable, Library
// routines, Random, Graph), instantiated for every driver of the built-in
// registry. A capability a driver lacks (an executable format, a library
// dtype, mappable buffers, graphs) skips, never fails. Library routines
// are checked against naive double-precision loops, Random bit for bit
// against runtime/flowgrpo's Philox. Channels: ChannelConformanceTest.cpp.
//
//===----------------------------------------------------------------------===//

#include "runtime/flowgrpo/Philox.h"
#include "runtime/hal/drivers/Drivers.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <random>

namespace omni::hal {
namespace {

std::vector<uint8_t> readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

class HalTest : public ::testing::TestWithParam<std::string> {
public:
  void SetUp() override {
    DeviceOptions options;
    options.threads = 3;
    auto device = builtinDrivers().createDevice(GetParam(), options);
    // A driver whose hardware is absent (cuda on a machine without a GPU)
    // says so with Unavailable.
    if (!device.ok() &&
        device.status().code() == absl::StatusCode::kUnavailable)
      GTEST_SKIP() << "no GPU: " << device.status().message();
    ASSERT_TRUE(device.ok()) << device.status();
    device_ = std::move(*device);
    auto stream = device_->createStream();
    ASSERT_TRUE(stream.ok()) << stream.status();
    stream_ = std::move(*stream);
  }

  template <typename T>
  std::unique_ptr<Buffer> upload(const std::vector<T> &values) {
    auto buffer = device_->allocate(int64_t(values.size() * sizeof(T)));
    EXPECT_TRUE(buffer.ok()) << buffer.status();
    EXPECT_TRUE(
        stream_->writeBuffer(values.data(), BufferRef::all(**buffer)).ok());
    return std::move(*buffer);
  }
  template <typename T> std::unique_ptr<Buffer> zeros(int64_t n) {
    return upload(std::vector<T>(static_cast<size_t>(n)));
  }
  template <typename T> std::vector<T> download(Buffer &buffer) {
    std::vector<T> values(static_cast<size_t>(buffer.size()) / sizeof(T));
    EXPECT_TRUE(
        stream_->readBuffer(BufferRef::all(buffer), values.data()).ok());
    EXPECT_TRUE(stream_->synchronize().ok());
    return values;
  }

  std::unique_ptr<Device> device_;
  std::unique_ptr<Stream> stream_;
};

std::vector<float> randomFloats(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(gen);
  return v;
}

//===----------------------------------------------------------------------===//
// Buffer
//===----------------------------------------------------------------------===//

TEST_P(HalTest, BuffersAreZeroFilledAndSized) {
  auto buffer = device_->allocate(100);
  ASSERT_TRUE(buffer.ok());
  EXPECT_EQ((*buffer)->size(), 100);
  EXPECT_EQ(&(*buffer)->device(), device_.get());
  std::vector<uint8_t> bytes = download<uint8_t>(**buffer);
  EXPECT_EQ(bytes, std::vector<uint8_t>(100, 0));
  EXPECT_TRUE(device_->allocate(0).ok());
  EXPECT_EQ(device_->allocate(-1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(HalTest, MapIsOptional) {
  auto buffer = device_->allocate(16);
  ASSERT_TRUE(buffer.ok());
  absl::StatusOr<void *> mapped = (*buffer)->map();
  if (!mapped.ok()) {
    EXPECT_EQ(mapped.status().code(), absl::StatusCode::kUnimplemented);
    GTEST_SKIP() << "buffers of this driver are not host-visible";
  }
  std::memset(*mapped, 7, 16);
  EXPECT_EQ(download<uint8_t>(**buffer), std::vector<uint8_t>(16, 7));
}

TEST_P(HalTest, MemoryLimit) {
  DeviceOptions options;
  options.memoryLimitBytes = 1000;
  auto device = builtinDrivers().createDevice(GetParam(), options);
  ASSERT_TRUE(device.ok());
  auto a = (*device)->allocate(600);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ((*device)->allocate(600).status().code(),
            absl::StatusCode::kResourceExhausted);
  a->reset();
  EXPECT_TRUE((*device)->allocate(600).ok());
}

//===----------------------------------------------------------------------===//
// Stream
//===----------------------------------------------------------------------===//

TEST_P(HalTest, CopyFillAndRanges) {
  auto buffer = upload<uint8_t>({0, 1, 2, 3, 4, 5, 6, 7});
  Buffer *b = buffer.get();
  // Overlapping copy has memmove semantics.
  ASSERT_TRUE(stream_->copy({b, 0, 6}, {b, 2, 6}).ok());
  EXPECT_EQ(download<uint8_t>(*b),
            (std::vector<uint8_t>{0, 1, 0, 1, 2, 3, 4, 5}));
  const uint8_t pattern[] = {9, 8};
  ASSERT_TRUE(stream_->fill({b, 2, 6}, pattern).ok());
  EXPECT_EQ(download<uint8_t>(*b),
            (std::vector<uint8_t>{0, 1, 9, 8, 9, 8, 9, 8}));
  const uint8_t uniform[] = {5, 5, 5, 5};
  ASSERT_TRUE(stream_->fill({b, 0, 4}, uniform).ok());
  EXPECT_EQ(download<uint8_t>(*b),
            (std::vector<uint8_t>{5, 5, 5, 5, 9, 8, 9, 8}));

  EXPECT_FALSE(stream_->fill({b, 0, 3}, pattern).ok());
  EXPECT_FALSE(stream_->copy({b, 4, 8}, {b, 0, 8}).ok());
  EXPECT_FALSE(stream_->copy({b, 0, 4}, {b, 0, 2}).ok());
  EXPECT_FALSE(stream_->copy({nullptr, 0, 0}, {b, 0, 0}).ok());
  absl::Status outside = stream_->copy({b, -1, 2}, {b, 0, 2});
  EXPECT_EQ(outside.code(), absl::StatusCode::kInvalidArgument);
}

TEST_P(HalTest, RejectsBuffersOfAnotherDevice) {
  auto other = builtinDrivers().createDevice(GetParam(), {});
  ASSERT_TRUE(other.ok());
  auto foreign = (*other)->allocate(8);
  ASSERT_TRUE(foreign.ok());
  auto mine = zeros<uint8_t>(8);
  absl::Status s =
      stream_->copy(BufferRef::all(**foreign), BufferRef::all(*mine));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find("another device"), std::string::npos);
}

TEST_P(HalTest, EventsOrderStreams) {
  auto buffer = upload<float>({1, 2});
  auto event = stream_->recordEvent();
  ASSERT_TRUE(event.ok());
  auto second = device_->createStream();
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE((*second)->waitEvent(*event).ok());
  EXPECT_TRUE((*event)->wait().ok());
  EXPECT_TRUE((*event)->isComplete());
  std::vector<float> out(2);
  ASSERT_TRUE((*second)->readBuffer(BufferRef::all(*buffer), out.data()).ok());
  ASSERT_TRUE((*second)->synchronize().ok());
  EXPECT_EQ(out, (std::vector<float>{1, 2}));
}

//===----------------------------------------------------------------------===//
// Random: bit-identical to runtime/flowgrpo
//===----------------------------------------------------------------------===//

void expectSameBits(const std::vector<float> &a, const std::vector<float> &b) {
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0);
}

TEST_P(HalTest, RandomIsPhiloxBitForBit) {
  const int64_t seed = 0x123456789abcdefLL, counter = -4;
  const int64_t offset = std::numeric_limits<int64_t>::max() - 5000; // wraps
  const int64_t n = 20011;
  auto key = upload<int64_t>({seed});
  auto ctr = upload<int64_t>({counter});
  auto off = upload<int64_t>({offset});
  for (Distribution d : {Distribution::Normal, Distribution::Uniform}) {
    std::vector<float> want(n);
    if (d == Distribution::Normal)
      flowgrpo::philoxNormal(seed, counter, offset, want.data(), n);
    else
      flowgrpo::philoxUniform(seed, counter, offset, want.data(), n);

    auto out = zeros<float>(n);
    ASSERT_TRUE(stream_
                    ->random(d, DType::F32, n, BufferRef::all(*key),
                             BufferRef::all(*ctr), BufferRef::all(*off),
                             BufferRef::all(*out))
                    .ok());
    expectSameBits(download<float>(*out), want);

    auto out64 = zeros<double>(n);
    ASSERT_TRUE(stream_
                    ->random(d, DType::F64, n, BufferRef::all(*key),
                             BufferRef::all(*ctr), BufferRef::all(*off),
                             BufferRef::all(*out64))
                    .ok());
    std::vector<double> got64 = download<double>(*out64);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(got64[i], static_cast<double>(want[i])) << i;

    auto out16 = zeros<uint16_t>(n);
    ASSERT_TRUE(stream_
                    ->random(d, DType::F16, n, BufferRef::all(*key),
                             BufferRef::all(*ctr), BufferRef::all(*off),
                             BufferRef::all(*out16))
                    .ok());
    std::vector<uint16_t> got16 = download<uint16_t>(*out16);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(got16[i], halfBitsFromDouble(want[i])) << i;
  }
  auto small = zeros<float>(3);
  EXPECT_FALSE(stream_
                   ->random(Distribution::Normal, DType::F32, 4,
                            BufferRef::all(*key), BufferRef::all(*ctr),
                            BufferRef::all(*off), BufferRef::all(*small))
                   .ok());
}

//===----------------------------------------------------------------------===//
// Executable and Dispatch
//===----------------------------------------------------------------------===//

class HalExecutableTest : public HalTest {
protected:
  void SetUp() override {
    HalTest::SetUp();
    if (IsSkipped() || HasFatalFailure())
      return;
    if (!device_->supportsFormat(ExecutableFormat::ElfSharedObject))
      GTEST_SKIP() << "the driver does not load ELF shared objects";
    code_ = readFile(OMNI_TEST_KERNELS_SO);
    ASSERT_GT(code_.size(), 4u);
  }
  absl::StatusOr<std::unique_ptr<Executable>>
  load(std::vector<std::string> kernels) {
    ExecutableSpec spec;
    spec.name = "test_kernels";
    spec.code = code_;
    spec.kernels = std::move(kernels);
    return device_->loadExecutable(spec);
  }
  std::vector<uint8_t> code_;
};

TEST_P(HalExecutableTest, DispatchesAKernel) {
  auto exe = load({"omni_test_chunk_begin", "omni_test_add_f32"});
  ASSERT_TRUE(exe.ok()) << exe.status();
  EXPECT_EQ((*exe)->numKernels(), 2);
  EXPECT_EQ((*exe)->findKernel("omni_test_add_f32"), 1);
  const int64_t n = 1001;
  std::vector<float> a = randomFloats(n, 1), b = randomFloats(n, 2);
  auto ba = upload(a), bb = upload(b);
  auto bc = zeros<float>(n);
  BufferRef buffers[] = {BufferRef::all(*ba), BufferRef::all(*bb),
                         BufferRef::all(*bc)};
  ASSERT_TRUE(stream_->dispatch(**exe, 1, n, buffers, {}).ok());
  std::vector<float> c = download<float>(*bc);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(c[i], a[i] + b[i]);
}

TEST_P(HalExecutableTest, GridIsSplitIntoContiguousChunks) {
  auto exe = load({"omni_test_chunk_begin"});
  ASSERT_TRUE(exe.ok()) << exe.status();
  auto out = zeros<int64_t>(10);
  BufferRef buffers[] = {BufferRef::all(*out)};
  ASSERT_TRUE(stream_->dispatch(**exe, 0, 10, buffers, {}).ok());
  std::vector<int64_t> begins = download<int64_t>(*out);
  // Each item records its chunk's first item: non-decreasing, starting at 0,
  // and every recorded begin is the index where its chunk starts.
  EXPECT_EQ(begins[0], 0);
  for (int64_t i = 1; i < 10; ++i) {
    EXPECT_GE(begins[i], begins[i - 1]);
    if (begins[i] != begins[i - 1]) {
      EXPECT_EQ(begins[i], i);
    }
  }
}

TEST_P(HalExecutableTest, MissingKernelIsALoadError) {
  auto exe = load({"omni_test_add_f32", "nope"});
  ASSERT_FALSE(exe.ok());
  EXPECT_EQ(exe.status().message(),
            "executable 'test_kernels': kernel 'nope' is not exported by the "
            "shared object");
}

TEST_P(HalExecutableTest, GarbageIsALoadError) {
  code_ = {0x7f, 'E', 'L', 'F', 1, 2, 3};
  auto exe = load({"k"});
  ASSERT_FALSE(exe.ok());
  EXPECT_NE(std::string(exe.status().message()).find("cannot load"),
            std::string::npos);
}

TEST_P(HalExecutableTest, ManyExecutablesLoadAndUnload) {
  // Live executables coexist; unloading and reloading (fd numbers reused)
  // never returns a stale handle.
  std::vector<std::unique_ptr<Executable>> live;
  for (int i = 0; i < 4; ++i) {
    auto exe = load({"omni_test_add_f32"});
    ASSERT_TRUE(exe.ok()) << exe.status();
    live.push_back(std::move(*exe));
  }
  live.clear();
  for (int i = 0; i < 20; ++i) {
    auto exe = load({"omni_test_add_f32"});
    ASSERT_TRUE(exe.ok()) << exe.status();
    auto a = upload<float>({float(i)}), b = upload<float>({1});
    auto c = zeros<float>(1);
    BufferRef buffers[] = {BufferRef::all(*a), BufferRef::all(*b),
                           BufferRef::all(*c)};
    ASSERT_TRUE(stream_->dispatch(**exe, 0, 1, buffers, {}).ok());
    EXPECT_EQ(download<float>(*c)[0], float(i + 1));
  }
}

// Stream::matmulWithEpilogue has the effect of matmul() then dispatch()
// (step.fbs LibraryCall.epilogue), bit for bit: the epilogue c + b
// (omni_test_add_f32: item i is element i, 4 bytes of every buffer) into
// its own buffer, in place over the result, and over the matmul's lhs,
// which no block may see changed before it has read it (a driver that runs
// the epilogue per block must notice and run it after the matmul). The lhs
// is transposed, [k, m]: every block of rows of the result reads all of it,
// and the first block's items write over all of it.
TEST_P(HalExecutableTest, MatmulWithEpilogueEqualsTheTwoCalls) {
  if (!device_->supportsLibrary(Library::Matmul, DType::F32))
    GTEST_SKIP() << "no Matmul for f32";
  auto exe = load({"omni_test_add_f32"});
  ASSERT_TRUE(exe.ok()) << exe.status();
  MatmulParams p;
  p.m = 256, p.n = 64, p.k = 64; // lhs and result: the same size
  p.transposeLhs = true;
  p.transposeRhs = true;
  p.rhsShared = true;
  const int64_t n = p.batch * p.m * p.n;
  const std::vector<float> lhs = randomFloats(n, 5);
  const std::vector<float> rhs = randomFloats(p.n * p.k, 6);
  const std::vector<float> bias = randomFloats(n, 7);
  const int64_t itemBytes[] = {4, 4, 4};
  enum class Out { Own, Result, Lhs };
  for (Out where : {Out::Own, Out::Result, Out::Lhs}) {
    std::vector<std::vector<float>> got;
    for (bool fused : {false, true}) {
      auto bl = upload(lhs), br = upload(rhs), bb = upload(bias);
      auto bc = zeros<float>(n), bo = zeros<float>(n);
      Buffer &out = where == Out::Own ? *bo : where == Out::Result ? *bc : *bl;
      BufferRef buffers[] = {BufferRef::all(*bc), BufferRef::all(*bb),
                             BufferRef::all(out)};
      if (fused) {
        Stream::Epilogue e;
        e.executable = exe->get();
        e.kernel = 0;
        e.grid = n;
        e.buffers = buffers;
        e.numOperands = 2;
        e.itemBytes = itemBytes;
        e.resultItemBytes = 4;
        ASSERT_TRUE(stream_
                        ->matmulWithEpilogue(p, BufferRef::all(*bl),
                                             BufferRef::all(*br),
                                             BufferRef::all(*bc), e)
                        .ok());
      } else {
        ASSERT_TRUE(stream_
                        ->matmul(p, BufferRef::all(*bl), BufferRef::all(*br),
                                 BufferRef::all(*bc))
                        .ok());
        ASSERT_TRUE(stream_->dispatch(**exe, 0, n, buffers, {}).ok());
      }
      got.push_back(download<float>(out));
      got.push_back(download<float>(*bc));
    }
    EXPECT_EQ(got[0], got[2])
        << "the epilogue's output, case " << static_cast<int>(where);
    EXPECT_EQ(got[1], got[3])
        << "the matmul's result, case " << static_cast<int>(where);
  }
}

//===----------------------------------------------------------------------===//
// Library routines against naive loops
//===----------------------------------------------------------------------===//

template <typename T> std::vector<T> cast(const std::vector<float> &v) {
  return std::vector<T>(v.begin(), v.end());
}

template <typename T>
void expectNear(const std::vector<T> &got, const std::vector<double> &want,
                double tolerance) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(double(got[i]), want[i], tolerance) << "element " << i;
}

template <typename T> void checkMatmul(HalTest &t, Device &device, Stream &s) {
  DType dtype = sizeof(T) == 4 ? DType::F32 : DType::F64;
  if (!device.supportsLibrary(Library::Matmul, dtype))
    GTEST_SKIP() << "no Matmul for " << dtypeName(dtype);
  for (bool tl : {false, true})
    for (bool tr : {false, true})
      for (bool shared : {false, true}) {
        MatmulParams p;
        p.dtype = dtype;
        p.batch = 3, p.m = 5, p.n = 7, p.k = 4;
        p.transposeLhs = tl, p.transposeRhs = tr, p.rhsShared = shared;
        int64_t rhsBatch = shared ? 1 : p.batch;
        std::vector<float> lhs = randomFloats(p.batch * p.m * p.k, 3);
        std::vector<float> rhs = randomFloats(rhsBatch * p.k * p.n, 4);
        std::vector<double> want(p.batch * p.m * p.n);
        for (int64_t b = 0; b < p.batch; ++b)
          for (int64_t i = 0; i < p.m; ++i)
            for (int64_t j = 0; j < p.n; ++j) {
              double acc = 0;
              for (int64_t k = 0; k < p.k; ++k) {
                double x = tl ? lhs[(b * p.k + k) * p.m + i]
                              : lhs[(b * p.m + i) * p.k + k];
                int64_t rb = shared ? 0 : b;
                double y = tr ? rhs[(rb * p.n + j) * p.k + k]
                              : rhs[(rb * p.k + k) * p.n + j];
                acc += x * y;
              }
              want[(b * p.m + i) * p.n + j] = acc;
            }
        auto bl = t.upload(cast<T>(lhs)), br = t.upload(cast<T>(rhs));
        auto bo = t.zeros<T>(p.batch * p.m * p.n);
        ASSERT_TRUE(s.matmul(p, BufferRef::all(*bl), BufferRef::all(*br),
                             BufferRef::all(*bo))
                        .ok());
        expectNear(t.download<T>(*bo), want, 1e-5);
      }
}

TEST_P(HalTest, MatmulF32) { checkMatmul<float>(*this, *device_, *stream_); }
TEST_P(HalTest, MatmulF64) { checkMatmul<double>(*this, *device_, *stream_); }

TEST_P(HalTest, MatmulDegenerateSizes) {
  if (!device_->supportsLibrary(Library::Matmul, DType::F32))
    GTEST_SKIP();
  MatmulParams p;
  p.m = 2, p.n = 3, p.k = 0;
  auto empty = zeros<float>(0);
  auto out = upload<float>({1, 1, 1, 1, 1, 1});
  ASSERT_TRUE(stream_
                  ->matmul(p, BufferRef::all(*empty), BufferRef::all(*empty),
                           BufferRef::all(*out))
                  .ok());
  EXPECT_EQ(download<float>(*out), std::vector<float>(6, 0));
  p.k = 2; // lhs now needs 16 bytes
  EXPECT_FALSE(stream_
                   ->matmul(p, BufferRef::all(*empty), BufferRef::all(*empty),
                            BufferRef::all(*out))
                   .ok());
}

std::vector<double> naiveConv2d(const Conv2dParams &p,
                                const std::vector<float> &x,
                                const std::vector<float> &w) {
  std::vector<double> y(p.n * p.o * p.outH * p.outW);
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t o = 0; o < p.o; ++o)
      for (int64_t oy = 0; oy < p.outH; ++oy)
        for (int64_t ox = 0; ox < p.outW; ++ox) {
          double acc = 0;
          for (int64_t c = 0; c < p.c; ++c)
            for (int64_t ky = 0; ky < p.kh; ++ky)
              for (int64_t kx = 0; kx < p.kw; ++kx) {
                int64_t iy = oy * p.strideH - p.padH + ky * p.dilationH;
                int64_t ix = ox * p.strideW - p.padW + kx * p.dilationW;
                if (iy < 0 || iy >= p.h || ix < 0 || ix >= p.w)
                  continue;
                acc += double(x[((n * p.c + c) * p.h + iy) * p.w + ix]) *
                       w[((o * p.c + c) * p.kh + ky) * p.kw + kx];
              }
          y[((n * p.o + o) * p.outH + oy) * p.outW + ox] = acc;
        }
  return y;
}

TEST_P(HalTest, Conv2dMatchesNaiveLoops) {
  for (DType dtype : {DType::F32, DType::F64}) {
    if (!device_->supportsLibrary(Library::Conv2d, dtype))
      continue;
    struct Case {
      int64_t n, c, h, w, o, kh, kw, sh, sw, ph, pw, dh, dw;
    };
    for (Case k : {Case{2, 3, 8, 7, 4, 3, 3, 1, 1, 1, 1, 1, 1},
                   Case{1, 2, 9, 10, 3, 3, 2, 2, 3, 0, 2, 1, 1},
                   Case{1, 4, 11, 11, 2, 3, 3, 1, 2, 2, 1, 2, 3},
                   Case{3, 1, 5, 5, 1, 1, 1, 1, 1, 0, 0, 1, 1}}) {
      Conv2dParams p;
      p.dtype = dtype;
      p.n = k.n, p.c = k.c, p.h = k.h, p.w = k.w, p.o = k.o, p.kh = k.kh,
      p.kw = k.kw;
      p.strideH = k.sh, p.strideW = k.sw, p.padH = k.ph, p.padW = k.pw;
      p.dilationH = k.dh, p.dilationW = k.dw;
      p.outH =
          (p.h + 2 * p.padH - p.dilationH * (p.kh - 1) - 1) / p.strideH + 1;
      p.outW =
          (p.w + 2 * p.padW - p.dilationW * (p.kw - 1) - 1) / p.strideW + 1;
      std::vector<float> x = randomFloats(p.n * p.c * p.h * p.w, 5);
      std::vector<float> w = randomFloats(p.o * p.c * p.kh * p.kw, 6);
      std::vector<double> want = naiveConv2d(p, x, w);
      int64_t outSize = p.n * p.o * p.outH * p.outW;
      if (dtype == DType::F32) {
        auto bx = upload(x), bw = upload(w);
        auto by = zeros<float>(outSize);
        ASSERT_TRUE(stream_
                        ->conv2d(p, BufferRef::all(*bx), BufferRef::all(*bw),
                                 BufferRef::all(*by))
                        .ok());
        expectNear(download<float>(*by), want, 1e-5);
      } else {
        auto bx = upload(cast<double>(x)), bw = upload(cast<double>(w));
        auto by = zeros<double>(outSize);
        ASSERT_TRUE(stream_
                        ->conv2d(p, BufferRef::all(*bx), BufferRef::all(*bw),
                                 BufferRef::all(*by))
                        .ok());
        expectNear(download<double>(*by), want, 1e-12);
      }
    }
  }
}

TEST_P(HalTest, AttentionMatchesNaiveSoftmax) {
  if (!device_->supportsLibrary(Library::Attention, DType::F32))
    GTEST_SKIP();
  for (int maskKind = 0; maskKind < 3; ++maskKind) {
    AttentionParams p;
    p.batch = 2, p.heads = 3, p.seqQ = 5, p.seqK = 7, p.headDim = 4,
    p.valueDim = 6;
    p.scale = 0.37;
    p.hasMask = maskKind > 0;
    p.maskBatchShared = maskKind == 2;
    p.maskHeadShared = maskKind == 2;
    int64_t mb = p.maskBatchShared ? 1 : p.batch;
    int64_t mh = p.maskHeadShared ? 1 : p.heads;
    std::vector<float> q =
        randomFloats(p.batch * p.heads * p.seqQ * p.headDim, 7);
    std::vector<float> k =
        randomFloats(p.batch * p.heads * p.seqK * p.headDim, 8);
    std::vector<float> v =
        randomFloats(p.batch * p.heads * p.seqK * p.valueDim, 9);
    std::vector<float> mask = randomFloats(mb * mh * p.seqQ * p.seqK, 10);
    for (float &m : mask)
      m *= 4;
    std::vector<double> want(p.batch * p.heads * p.seqQ * p.valueDim);
    for (int64_t b = 0; b < p.batch; ++b)
      for (int64_t h = 0; h < p.heads; ++h)
        for (int64_t i = 0; i < p.seqQ; ++i) {
          std::vector<double> s(p.seqK);
          double max = -1e300, sum = 0;
          for (int64_t j = 0; j < p.seqK; ++j) {
            double dot = 0;
            for (int64_t d = 0; d < p.headDim; ++d)
              dot +=
                  double(q[((b * p.heads + h) * p.seqQ + i) * p.headDim + d]) *
                  k[((b * p.heads + h) * p.seqK + j) * p.headDim + d];
            s[j] = dot * p.scale;
            if (p.hasMask)
              s[j] += mask[(((p.maskBatchShared ? 0 : b) * mh +
                             (p.maskHeadShared ? 0 : h)) *
                                p.seqQ +
                            i) *
                               p.seqK +
                           j];
            max = std::max(max, s[j]);
          }
          for (double &x : s)
            sum += (x = std::exp(x - max));
          for (int64_t e = 0; e < p.valueDim; ++e) {
            double acc = 0;
            for (int64_t j = 0; j < p.seqK; ++j)
              acc += s[j] / sum *
                     v[((b * p.heads + h) * p.seqK + j) * p.valueDim + e];
            want[((b * p.heads + h) * p.seqQ + i) * p.valueDim + e] = acc;
          }
        }
    auto bq = upload(q), bk = upload(k), bv = upload(v), bm = upload(mask);
    auto out = zeros<float>(int64_t(want.size()));
    BufferRef maskRef = p.hasMask ? BufferRef::all(*bm) : BufferRef{};
    ASSERT_TRUE(stream_
                    ->attention(p, BufferRef::all(*bq), BufferRef::all(*bk),
                                BufferRef::all(*bv), maskRef,
                                BufferRef::all(*out))
                    .ok());
    expectNear(download<float>(*out), want, 1e-5);
  }
}

TEST_P(HalTest, AttentionWithLongKeysWorksInRowBlocks) {
  // Long enough that the score matrix is computed a few query rows at a time.
  if (!device_->supportsLibrary(Library::Attention, DType::F32))
    GTEST_SKIP();
  AttentionParams p;
  p.batch = 1, p.heads = 1, p.seqQ = 5, p.seqK = 400000, p.headDim = 2,
  p.valueDim = 2;
  p.scale = 1.0;
  std::vector<float> q = randomFloats(p.seqQ * p.headDim, 11);
  std::vector<float> k = randomFloats(p.seqK * p.headDim, 12);
  std::vector<float> v = randomFloats(p.seqK * p.valueDim, 13);
  std::vector<double> want;
  for (int64_t i = 0; i < p.seqQ; ++i) {
    std::vector<double> s(p.seqK);
    double max = -1e300, sum = 0;
    for (int64_t j = 0; j < p.seqK; ++j) {
      s[j] = double(q[i * 2]) * k[j * 2] + double(q[i * 2 + 1]) * k[j * 2 + 1];
      max = std::max(max, s[j]);
    }
    for (double &x : s)
      sum += (x = std::exp(x - max));
    for (int64_t e = 0; e < 2; ++e) {
      double acc = 0;
      for (int64_t j = 0; j < p.seqK; ++j)
        acc += s[j] / sum * v[j * 2 + e];
      want.push_back(acc);
    }
  }
  auto bq = upload(q), bk = upload(k), bv = upload(v);
  auto out = zeros<float>(int64_t(want.size()));
  ASSERT_TRUE(stream_
                  ->attention(p, BufferRef::all(*bq), BufferRef::all(*bk),
                              BufferRef::all(*bv), BufferRef{},
                              BufferRef::all(*out))
                  .ok());
  expectNear(download<float>(*out), want, 1e-5);
}

//===----------------------------------------------------------------------===//
// Graphs (hal/Graph.h), on every driver whose streams capture
//===----------------------------------------------------------------------===//

/// Whether `stream`'s driver captures graphs, probed with an empty
/// capture; `why` says why not. Another failure of the probe fails the
/// test.
bool captures(Stream &stream, std::string &why) {
  absl::Status probe = stream.beginCapture();
  if (probe.ok())
    probe = stream.endCapture().status();
  if (probe.code() == absl::StatusCode::kUnimplemented) {
    why = std::string(probe.message());
    return false;
  }
  EXPECT_TRUE(probe.ok()) << probe;
  return true;
}

bool mentions(const absl::Status &status, const std::string &text) {
  return std::string(status.message()).find(text) != std::string::npos;
}

class HalGraphTest : public HalTest {
protected:
  void SetUp() override {
    HalTest::SetUp();
    std::string why;
    if (!IsSkipped() && !HasFatalFailure() && !captures(*stream_, why))
      GTEST_SKIP() << "the " << GetParam()
                   << " driver cannot capture graphs: " << why;
  }
  /// Ends the capture, expecting a graph.
  std::unique_ptr<Graph> end() {
    absl::StatusOr<std::unique_ptr<Graph>> graph = stream_->endCapture();
    EXPECT_TRUE(graph.ok()) << graph.status();
    return graph.ok() ? std::move(*graph) : nullptr;
  }
  /// Launches `graph` and waits for it.
  void launch(const Graph &graph) {
    ASSERT_TRUE(stream_->launchGraph(graph).ok());
    ASSERT_TRUE(stream_->synchronize().ok());
  }
};

TEST_P(HalGraphTest, CapturedCommandsRunOnlyAtLaunch) {
  auto buffer = upload<uint32_t>({1, 2, 3, 4});
  ASSERT_TRUE(stream_->beginCapture().ok());
  const uint8_t sevens[] = {7, 0, 0, 0};
  ASSERT_TRUE(stream_->fill(BufferRef::all(*buffer), sevens).ok());
  std::unique_ptr<Graph> graph = end();
  ASSERT_NE(graph, nullptr);
  EXPECT_EQ(graph->numCommands(), 1);
  // Ending the capture ran nothing.
  EXPECT_EQ(download<uint32_t>(*buffer), (std::vector<uint32_t>{1, 2, 3, 4}));
  launch(*graph);
  EXPECT_EQ(download<uint32_t>(*buffer), std::vector<uint32_t>(4, 7));
}

TEST_P(HalGraphTest, EachLaunchRepeatsTheCommands) {
  // A memmove one byte to the right: each launch shifts once more.
  auto buffer = upload<uint8_t>({1, 2, 3, 4, 5, 6, 7, 8});
  Buffer *b = buffer.get();
  ASSERT_TRUE(stream_->beginCapture().ok());
  ASSERT_TRUE(stream_->copy({b, 0, 7}, {b, 1, 7}).ok());
  std::unique_ptr<Graph> graph = end();
  ASSERT_NE(graph, nullptr);
  launch(*graph);
  EXPECT_EQ(download<uint8_t>(*b),
            (std::vector<uint8_t>{1, 1, 2, 3, 4, 5, 6, 7}));
  launch(*graph);
  EXPECT_EQ(download<uint8_t>(*b),
            (std::vector<uint8_t>{1, 1, 1, 2, 3, 4, 5, 6}));
  // On another stream of the device too.
  auto other = device_->createStream();
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE((*other)->launchGraph(*graph).ok());
  ASSERT_TRUE((*other)->synchronize().ok());
  EXPECT_EQ(download<uint8_t>(*b),
            (std::vector<uint8_t>{1, 1, 1, 1, 2, 3, 4, 5}));
}

TEST_P(HalGraphTest, WriteBufferTakesTheBytesAtCapture) {
  auto buffer = zeros<int64_t>(2);
  Buffer *b = buffer.get();
  int64_t index = 7;
  ASSERT_TRUE(stream_->beginCapture().ok());
  ASSERT_TRUE(stream_->writeBuffer(&index, {b, 8, 8}).ok());
  index = 9; // too late for the graph
  std::unique_ptr<Graph> graph = end();
  ASSERT_NE(graph, nullptr);
  EXPECT_EQ(download<int64_t>(*b), (std::vector<int64_t>{0, 0}));
  for (int run = 0; run < 2; ++run) {
    const int64_t zero[] = {0, 0};
    ASSERT_TRUE(stream_->writeBuffer(zero, BufferRef::all(*b)).ok());
    launch(*graph);
    EXPECT_EQ(download<int64_t>(*b), (std::vector<int64_t>{0, 7})) << run;
  }
}

TEST_P(HalGraphTest, HostWaitsAndReadsAreRefusedWhileCapturing) {
  auto buffer = upload<float>({1, 2});
  auto before = stream_->recordEvent();
  ASSERT_TRUE(before.ok());
  const std::string refused = " while the stream captures a graph";
  std::vector<float> out(2);
  const std::pair<const char *, std::function<absl::Status()>> calls[] = {
      {"readBuffer",
       [&] {
         return stream_->readBuffer(BufferRef::all(*buffer), out.data());
       }},
      {"recordEvent", [&] { return stream_->recordEvent().status(); }},
      {"waitEvent", [&] { return stream_->waitEvent(*before); }},
      {"synchronize", [&] { return stream_->synchronize(); }},
  };
  for (const auto &[what, call] : calls) {
    ASSERT_TRUE(stream_->beginCapture().ok()) << what;
    absl::Status s = call();
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << what;
    EXPECT_EQ(s.message(), std::string(what) + refused);
    // The refusal fails the capture, and the stream leaves capture mode.
    absl::StatusOr<std::unique_ptr<Graph>> graph = stream_->endCapture();
    ASSERT_FALSE(graph.ok()) << what;
    EXPECT_TRUE(mentions(graph.status(), std::string(what) + refused))
        << graph.status();
    EXPECT_EQ(download<float>(*buffer), (std::vector<float>{1, 2})) << what;
  }
}

TEST_P(HalGraphTest, AFailedCommandFailsTheCapture) {
  auto buffer = zeros<uint8_t>(8);
  ASSERT_TRUE(stream_->beginCapture().ok());
  const uint8_t pattern[] = {1};
  absl::Status s = stream_->fill({buffer.get(), 0, 100}, pattern);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<std::unique_ptr<Graph>> graph = stream_->endCapture();
  ASSERT_FALSE(graph.ok());
  EXPECT_TRUE(mentions(graph.status(), "the capture failed: "))
      << graph.status();
  EXPECT_TRUE(mentions(graph.status(), std::string(s.message())))
      << graph.status();
  // The stream works again.
  ASSERT_TRUE(stream_->fill(BufferRef::all(*buffer), pattern).ok());
  EXPECT_EQ(download<uint8_t>(*buffer), std::vector<uint8_t>(8, 1));
}

/// Malformed commands fail at capture as they fail when run: sizes that do
/// not match, not only ranges outside their buffers.
TEST_P(HalGraphTest, MalformedCommandsFailTheCaptureAtOnce) {
  auto buffer = zeros<uint8_t>(8);
  auto other = zeros<uint8_t>(4);
  const uint8_t pattern[] = {1, 2, 3};
  auto expectRefused = [&](const char *what, auto submit) {
    ASSERT_TRUE(stream_->beginCapture().ok()) << what;
    absl::Status s = submit();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument)
        << what << ": " << s;
    EXPECT_FALSE(stream_->endCapture().ok()) << what;
  };
  expectRefused("a fill whose pattern does not divide it", [&] {
    return stream_->fill(BufferRef::all(*buffer), pattern);
  });
  expectRefused("a copy of 8 bytes into 4", [&] {
    return stream_->copy(BufferRef::all(*buffer), BufferRef::all(*other));
  });
  expectRefused("random numbers of i32", [&] {
    return stream_->random(Distribution::Normal, DType::I32, 2,
                           BufferRef::all(*buffer), BufferRef::all(*buffer),
                           BufferRef::all(*buffer), BufferRef::all(*buffer));
  });
}

TEST_P(HalGraphTest, CaptureStatesAreChecked) {
  EXPECT_EQ(stream_->endCapture().status().code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(stream_->beginCapture().ok());
  EXPECT_EQ(stream_->beginCapture().code(),
            absl::StatusCode::kFailedPrecondition);
  // The first capture goes on.
  EXPECT_NE(end(), nullptr);
  EXPECT_EQ(stream_->endCapture().status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_P(HalGraphTest, GraphsOfAnotherDeviceAreRefused) {
  auto other = builtinDrivers().createDevice(GetParam(), {});
  ASSERT_TRUE(other.ok());
  auto otherStream = (*other)->createStream();
  ASSERT_TRUE(otherStream.ok());
  ASSERT_TRUE((*otherStream)->beginCapture().ok());
  auto graph = (*otherStream)->endCapture();
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(stream_->launchGraph(**graph).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(HalGraphTest, AStreamDestroyedWhileCapturingLetsGo) {
  auto buffer = upload<uint8_t>({1, 2, 3, 4});
  {
    auto doomed = device_->createStream();
    ASSERT_TRUE(doomed.ok());
    ASSERT_TRUE((*doomed)->beginCapture().ok());
    const uint8_t nines[] = {9};
    ASSERT_TRUE((*doomed)->fill(BufferRef::all(*buffer), nines).ok());
  }
  EXPECT_EQ(download<uint8_t>(*buffer), (std::vector<uint8_t>{1, 2, 3, 4}));
}

TEST_P(HalGraphTest, CapturedMatmulReadsItsOperandsAtLaunch) {
  if (!device_->supportsLibrary(Library::Matmul, DType::F32))
    GTEST_SKIP() << "no Matmul for f32";
  MatmulParams p;
  p.m = 2, p.n = 3, p.k = 4;
  auto lhs = zeros<float>(p.m * p.k), rhs = zeros<float>(p.k * p.n);
  auto result = zeros<float>(p.m * p.n);
  ASSERT_TRUE(stream_->beginCapture().ok());
  ASSERT_TRUE(stream_
                  ->matmul(p, BufferRef::all(*lhs), BufferRef::all(*rhs),
                           BufferRef::all(*result))
                  .ok());
  std::unique_ptr<Graph> graph = end();
  ASSERT_NE(graph, nullptr);
  for (float scale : {1.0f, -2.0f}) {
    // Small integers: every product and sum is exact.
    std::vector<float> l(p.m * p.k), r(p.k * p.n);
    for (size_t i = 0; i < l.size(); ++i)
      l[i] = scale * float(int(i % 5) - 2);
    for (size_t i = 0; i < r.size(); ++i)
      r[i] = float(int(i % 3) - 1);
    ASSERT_TRUE(stream_->writeBuffer(l.data(), BufferRef::all(*lhs)).ok());
    ASSERT_TRUE(stream_->writeBuffer(r.data(), BufferRef::all(*rhs)).ok());
    launch(*graph);
    std::vector<float> want(p.m * p.n);
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t j = 0; j < p.n; ++j)
        for (int64_t k = 0; k < p.k; ++k)
          want[i * p.n + j] += l[i * p.k + k] * r[k * p.n + j];
    EXPECT_EQ(download<float>(*result), want) << "scale " << scale;
  }
}

/// Dispatch in a graph: the cpu test kernels (ELF shared objects).
class HalGraphExecutableTest : public HalExecutableTest {
protected:
  void SetUp() override {
    HalExecutableTest::SetUp();
    std::string why;
    if (!IsSkipped() && !HasFatalFailure() && !captures(*stream_, why))
      GTEST_SKIP() << "the " << GetParam()
                   << " driver cannot capture graphs: " << why;
  }
};

TEST_P(HalGraphExecutableTest, CapturedDispatchReadsItsBuffersAtLaunch) {
  auto exe = load({"omni_test_add_f32"});
  ASSERT_TRUE(exe.ok()) << exe.status();
  const int64_t n = 257;
  auto ba = zeros<float>(n), bb = zeros<float>(n), bc = zeros<float>(n);
  BufferRef buffers[] = {BufferRef::all(*ba), BufferRef::all(*bb),
                         BufferRef::all(*bc)};
  ASSERT_TRUE(stream_->beginCapture().ok());
  ASSERT_TRUE(stream_->dispatch(**exe, 0, n, buffers, {}).ok());
  auto graph = stream_->endCapture();
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(download<float>(*bc), std::vector<float>(n, 0));
  for (uint32_t seed : {1u, 3u}) {
    // Inputs written after the capture: the launch reads them.
    std::vector<float> a = randomFloats(n, seed), b = randomFloats(n, seed + 1);
    ASSERT_TRUE(stream_->writeBuffer(a.data(), BufferRef::all(*ba)).ok());
    ASSERT_TRUE(stream_->writeBuffer(b.data(), BufferRef::all(*bb)).ok());
    ASSERT_TRUE(stream_->launchGraph(**graph).ok());
    std::vector<float> c = download<float>(*bc);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(c[i], a[i] + b[i]) << "seed " << seed << ", element " << i;
  }
}

std::string driverName(const ::testing::TestParamInfo<std::string> &info) {
  return info.param;
}

INSTANTIATE_TEST_SUITE_P(Drivers, HalTest,
                         ::testing::ValuesIn(builtinDrivers().names()),
                         driverName);
INSTANTIATE_TEST_SUITE_P(Drivers, HalExecutableTest,
                         ::testing::ValuesIn(builtinDrivers().names()),
                         driverName);
INSTANTIATE_TEST_SUITE_P(Drivers, HalGraphTest,
                         ::testing::ValuesIn(builtinDrivers().names()),
                         driverName);
INSTANTIATE_TEST_SUITE_P(Drivers, HalGraphExecutableTest,
                         ::testing::ValuesIn(builtinDrivers().names()),
                         driverName);

TEST(DriverRegistry, NamesAndErrors) {
  // "cuda" is registered in every build; without the toolkit its
  // createDevice says so (Unavailable).
  const std::vector<std::string> names = {"cpu", "cuda"};
  const char *available = "cpu, cuda";
  EXPECT_EQ(builtinDrivers().names(), names);
  auto missing = builtinDrivers().createDevice("tpu", {});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(),
            absl::StrCat("no driver named 'tpu' (available: ", available, ")"));
  DeviceOptions bad;
  bad.threads = -2;
  EXPECT_FALSE(builtinDrivers().createDevice("cpu", bad).ok());
}

} // namespace
} // namespace omni::hal
