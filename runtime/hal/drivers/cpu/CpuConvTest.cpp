//===- CpuConvTest.cpp - Tests of the direct f32 convolution ----*- C++ -*-===//
//
// conv2dDirect and runConv2d (which dispatches to it or to im2col + gemm)
// against a double-precision loop, within the rounding bound of an f32 sum
// of K = c * kh * kw products: |got - exact| <= gamma_K * sum |w x|,
// gamma_K = K u / (1 - K u), u = 2^-24 (each fused multiply-add rounds
// once; the products themselves are exact in the double reference). And the
// same bits for any thread count.
//
//===----------------------------------------------------------------------===//

#include "runtime/hal/drivers/cpu/CpuConv.h"

#include "runtime/hal/drivers/cpu/CpuLibraries.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace omni::hal::cpu {
namespace {

struct Shape {
  int64_t n, c, h, w, o, kh, kw, ph, pw, sh = 1, sw = 1, dh = 1, dw = 1;
};

Conv2dParams paramsOf(const Shape &s) {
  Conv2dParams p;
  p.n = s.n, p.c = s.c, p.h = s.h, p.w = s.w, p.o = s.o, p.kh = s.kh,
  p.kw = s.kw, p.padH = s.ph, p.padW = s.pw;
  p.strideH = s.sh, p.strideW = s.sw, p.dilationH = s.dh, p.dilationW = s.dw;
  p.outH = (p.h + 2 * p.padH - p.dilationH * (p.kh - 1) - 1) / p.strideH + 1;
  p.outW = (p.w + 2 * p.padW - p.dilationW * (p.kw - 1) - 1) / p.strideW + 1;
  return p;
}

std::vector<float> randomFloats(int64_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float &x : v)
    x = dist(gen);
  return v;
}

/// The exact sums (double: products of floats are exact, and these sums of
/// at most a few thousand terms lose nothing that matters against the f32
/// bound) and sum |w x| of every output element.
void reference(const Conv2dParams &p, const std::vector<float> &x,
               const std::vector<float> &w, std::vector<double> &exact,
               std::vector<double> &magnitude) {
  exact.assign(p.n * p.o * p.outH * p.outW, 0.0);
  magnitude.assign(exact.size(), 0.0);
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t o = 0; o < p.o; ++o)
      for (int64_t oy = 0; oy < p.outH; ++oy)
        for (int64_t ox = 0; ox < p.outW; ++ox) {
          double acc = 0, mag = 0;
          for (int64_t c = 0; c < p.c; ++c)
            for (int64_t ky = 0; ky < p.kh; ++ky)
              for (int64_t kx = 0; kx < p.kw; ++kx) {
                int64_t iy = oy * p.strideH - p.padH + ky * p.dilationH;
                int64_t ix = ox * p.strideW - p.padW + kx * p.dilationW;
                if (iy < 0 || iy >= p.h || ix < 0 || ix >= p.w)
                  continue;
                double prod = double(x[((n * p.c + c) * p.h + iy) * p.w + ix]) *
                              w[((o * p.c + c) * p.kh + ky) * p.kw + kx];
                acc += prod;
                mag += std::fabs(prod);
              }
          int64_t i = ((n * p.o + o) * p.outH + oy) * p.outW + ox;
          exact[i] = acc;
          magnitude[i] = mag;
        }
}

void expectWithinBound(const Conv2dParams &p, const std::vector<float> &got,
                       const std::vector<double> &exact,
                       const std::vector<double> &magnitude) {
  const double k = double(p.c * p.kh * p.kw), u = std::ldexp(1.0, -24);
  const double gamma = k * u / (1 - k * u);
  ASSERT_EQ(got.size(), exact.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_LE(std::fabs(double(got[i]) - exact[i]), gamma * magnitude[i])
        << "element " << i << ": got " << got[i] << ", exact " << exact[i];
}

// Row widths with 16-pixel tiles, an 8-pixel tile and masked tails; output
// channel counts that are not multiples of the block of 4; 1x1, even and
// asymmetric kernels; padding wider than half the kernel; more channels than
// one band holds (200 channels of 128-float rows, 300 channels: several
// bands). conv2dDirect computes every stride-1 convolution, also those that
// conv2dDirectApplies sends to sgemm (the unpadded 1x1, the 300 channels).
const Shape kDirectShapes[] = {
    {2, 3, 8, 7, 4, 3, 3, 1, 1},     {1, 5, 9, 37, 7, 3, 3, 1, 1},
    {3, 32, 16, 16, 32, 3, 3, 1, 1}, {2, 16, 5, 24, 3, 1, 1, 0, 0},
    {1, 200, 6, 126, 5, 3, 3, 1, 1}, {1, 2, 4, 4, 3, 5, 5, 3, 2},
    {1, 3, 10, 10, 2, 2, 3, 0, 1},   {1, 4, 3, 3, 2, 3, 3, 0, 0},
    {1, 300, 4, 20, 13, 3, 3, 1, 1}, {2, 7, 6, 6, 9, 1, 1, 1, 0},
};

/// Whether this CPU runs the direct path (AVX2 and FMA).
bool haveDirect() {
  return conv2dDirectApplies(paramsOf({1, 1, 3, 3, 1, 3, 3, 1, 1}));
}

TEST(CpuConv, DirectAppliesToStrideOneUpTo256Channels) {
  if (!haveDirect())
    GTEST_SKIP() << "this CPU lacks AVX2 or FMA";
  EXPECT_TRUE(conv2dDirectApplies(paramsOf({2, 32, 64, 64, 32, 3, 3, 1, 1})));
  EXPECT_TRUE(conv2dDirectApplies(paramsOf({1, 256, 8, 8, 4, 3, 3, 1, 1})));
  EXPECT_TRUE(conv2dDirectApplies(paramsOf({1, 4, 8, 8, 4, 1, 1, 1, 0})));
  EXPECT_FALSE(conv2dDirectApplies(paramsOf({1, 257, 8, 8, 4, 3, 3, 1, 1})));
  EXPECT_FALSE(conv2dDirectApplies(paramsOf({1, 4, 8, 8, 4, 1, 1, 0, 0})));
  EXPECT_FALSE(
      conv2dDirectApplies(paramsOf({1, 4, 9, 9, 4, 3, 3, 1, 1, 2, 2})));
  EXPECT_FALSE(
      conv2dDirectApplies(paramsOf({1, 4, 9, 9, 4, 3, 3, 2, 2, 1, 1, 2, 2})));
  Conv2dParams wrongSize = paramsOf({1, 4, 8, 8, 4, 3, 3, 1, 1});
  wrongSize.outW = 7;
  EXPECT_FALSE(conv2dDirectApplies(wrongSize));
}

TEST(CpuConv, DirectIsWithinTheF32RoundingBound) {
  if (!haveDirect())
    GTEST_SKIP() << "this CPU lacks AVX2 or FMA";
  ThreadPool pool(2);
  for (const Shape &s : kDirectShapes) {
    Conv2dParams p = paramsOf(s);
    std::vector<float> x = randomFloats(p.n * p.c * p.h * p.w, 1);
    std::vector<float> w = randomFloats(p.o * p.c * p.kh * p.kw, 2);
    std::vector<double> exact, magnitude;
    reference(p, x, w, exact, magnitude);
    std::vector<float> y(exact.size(), NAN);
    conv2dDirect(p, x.data(), w.data(), y.data(), pool);
    SCOPED_TRACE(testing::Message()
                 << "c " << p.c << " h " << p.h << " w " << p.w << " o " << p.o
                 << " k " << p.kh << "x" << p.kw);
    expectWithinBound(p, y, exact, magnitude);
  }
}

TEST(CpuConv, DirectGivesTheSameBitsForAnyThreadCount) {
  if (!haveDirect())
    GTEST_SKIP() << "this CPU lacks AVX2 or FMA";
  ThreadPool one(1), two(2), three(3), five(5);
  for (const Shape &s : kDirectShapes) {
    Conv2dParams p = paramsOf(s);
    std::vector<float> x = randomFloats(p.n * p.c * p.h * p.w, 3);
    std::vector<float> w = randomFloats(p.o * p.c * p.kh * p.kw, 4);
    const size_t size = p.n * p.o * p.outH * p.outW;
    std::vector<float> want(size);
    conv2dDirect(p, x.data(), w.data(), want.data(), one);
    for (ThreadPool *pool : {&two, &three, &five}) {
      std::vector<float> got(size, NAN);
      conv2dDirect(p, x.data(), w.data(), got.data(), *pool);
      EXPECT_EQ(std::memcmp(got.data(), want.data(), size * sizeof(float)), 0)
          << pool->size() << " threads, c " << p.c << " w " << p.w;
    }
  }
}

// runConv2d: the direct path for stride 1, im2col + sgemm for the rest
// (strides, dilations, more than 256 channels, and every shape on a CPU
// without AVX2), sgemm on the input for an unpadded 1x1.
TEST(CpuConv, RunConv2dIsWithinTheF32RoundingBoundOnBothPaths) {
  ThreadPool pool(2);
  std::vector<Shape> shapes(std::begin(kDirectShapes), std::end(kDirectShapes));
  shapes.push_back({1, 2, 9, 10, 3, 3, 2, 0, 2, 2, 3});
  shapes.push_back({1, 4, 11, 11, 2, 3, 3, 2, 1, 1, 2, 2, 3});
  shapes.push_back({2, 3, 17, 19, 5, 3, 3, 1, 1, 2, 2});
  // A DiT's patchify (pos_embed): kernel = stride = 2, a batch of small
  // images (one image per work item).
  shapes.push_back({4, 16, 16, 16, 64, 2, 2, 0, 0, 2, 2});
  for (const Shape &s : shapes) {
    Conv2dParams p = paramsOf(s);
    std::vector<float> x = randomFloats(p.n * p.c * p.h * p.w, 5);
    std::vector<float> w = randomFloats(p.o * p.c * p.kh * p.kw, 6);
    std::vector<double> exact, magnitude;
    reference(p, x, w, exact, magnitude);
    std::vector<float> y(exact.size(), NAN);
    ASSERT_TRUE(runConv2d(p, x.data(), w.data(), y.data(), pool).ok());
    SCOPED_TRACE(testing::Message() << "c " << p.c << " w " << p.w << " stride "
                                    << p.strideH << "x" << p.strideW);
    expectWithinBound(p, y, exact, magnitude);
  }
}

// The im2col path computes a batch of small images one image per work item
// and a single image (or large ones) split over the pool: an image's bits
// must depend on neither its batch nor the thread count (an image must not
// change with its place in the batch: test/sample/sample.test's swap).
TEST(CpuConv, Im2colGivesAnImageTheSameBitsInAnyBatchAndThreadCount) {
  ThreadPool one(1), two(2), three(3), five(5);
  for (const Shape &s : {Shape{5, 16, 16, 16, 64, 2, 2, 0, 0, 2, 2},
                         Shape{3, 3, 17, 19, 5, 3, 3, 1, 1, 2, 2}}) {
    Conv2dParams p = paramsOf(s);
    std::vector<float> x = randomFloats(p.n * p.c * p.h * p.w, 7);
    std::vector<float> w = randomFloats(p.o * p.c * p.kh * p.kw, 8);
    const int64_t image = p.c * p.h * p.w, pixels = p.o * p.outH * p.outW;
    // Each image alone (n = 1: the pool-split path).
    Conv2dParams single = p;
    single.n = 1;
    std::vector<float> want(p.n * pixels, NAN);
    for (int64_t n = 0; n < p.n; ++n)
      ASSERT_TRUE(runConv2d(single, x.data() + n * image, w.data(),
                            want.data() + n * pixels, two)
                      .ok());
    for (ThreadPool *pool : {&one, &two, &three, &five}) {
      std::vector<float> got(want.size(), NAN);
      ASSERT_TRUE(runConv2d(p, x.data(), w.data(), got.data(), *pool).ok());
      EXPECT_EQ(
          std::memcmp(got.data(), want.data(), want.size() * sizeof(float)), 0)
          << pool->size() << " threads, c " << p.c << " k " << p.kh;
    }
  }
}

} // namespace
} // namespace omni::hal::cpu
