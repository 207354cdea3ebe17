//===- RewardsTest.cpp - Tests for named image rewards ----------*- C++ -*-===//
//
// Unit tests for OmniRewards. Most JPEG tests quantize the image
// themselves, call TurboJPEG directly with the parameters of the reward
// definition, and require the reward to equal the formula applied to that
// count bit for bit. PilByteCounts checks the counts themselves against
// what PIL (flow_grpo's encoder) makes for the same images: the fixture
// testdata/pil_jpeg_sizes.inc and the script that wrote it.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/rewards/Rewards.h"
#include "runtime/train/rewards/RewardFunctions.h"

#include "gtest/gtest.h"

#include <turbojpeg.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace omni::rewards {
namespace {

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

::testing::AssertionResult hasSubstr(const absl::Status &status,
                                     const std::string &needle) {
  std::string message(status.message());
  if (message.find(needle) != std::string::npos)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "message \"" << message << "\" lacks \"" << needle << "\"";
}

/// Owns the storage behind an ImageBatch built in a test.
struct HostImages {
  std::vector<float> values;
  std::vector<int64_t> shape;
  ImageBatch view() const { return ImageBatch{values.data(), shape}; }
};

HostImages filled(int64_t n, int64_t h, int64_t w, float value) {
  return HostImages{std::vector<float>(n * 3 * h * w, value), {n, 3, h, w}};
}

HostImages noise(int64_t n, int64_t h, int64_t w, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(0.0f, 1.0f);
  HostImages images = filled(n, h, w, 0.0f);
  for (float &v : images.values)
    v = dist(rng);
  return images;
}

/// The reward definition's quantization, written out independently of the
/// library: clamp(round(255 * v), 0, 255), half to even, HWC order.
std::vector<uint8_t> referenceHwc(const HostImages &images, int64_t index) {
  const int64_t h = images.shape[2], w = images.shape[3];
  std::vector<uint8_t> out(3 * h * w);
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x) {
        float v = images.values[((index * 3 + c) * h + y) * w + x];
        float q = std::clamp(std::nearbyint(255.0f * v), 0.0f, 255.0f);
        out[(y * w + x) * 3 + c] = static_cast<uint8_t>(q);
      }
  return out;
}

/// JPEG size straight from TurboJPEG with the definition's parameters.
unsigned long turboJpegBytes(const std::vector<uint8_t> &hwc, int h, int w) {
  tjhandle handle = tjInitCompress();
  EXPECT_NE(handle, nullptr);
  unsigned char *jpeg = nullptr;
  unsigned long size = 0;
  int rc = tjCompress2(handle, hwc.data(), w, 0, h, TJPF_RGB, &jpeg, &size,
                       TJSAMP_420, 95, TJFLAG_ACCURATEDCT);
  EXPECT_EQ(rc, 0) << tjGetErrorStr2(handle);
  tjFree(jpeg);
  tjDestroy(handle);
  return size;
}

/// Mixed content for batch tests: solid, a smooth gradient, and noise, so the
/// byte counts differ from image to image.
HostImages mixedBatch(int64_t h, int64_t w) {
  HostImages images = noise(3, h, w, /*seed=*/7);
  const int64_t plane = h * w;
  for (int64_t k = 0; k < 3 * plane; ++k)
    images.values[k] = 0.25f;
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x)
        images.values[(3 + c) * plane + y * w + x] =
            static_cast<float>(x + y + c) / static_cast<float>(h + w);
  return images;
}

//===----------------------------------------------------------------------===//
// Registry
//===----------------------------------------------------------------------===//

TEST(RewardsTest, BuiltinsAreRegisteredSorted) {
  std::vector<std::string> names = registeredRewards();
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  for (const char *name :
       {"brightness", "jpeg_compressibility", "jpeg_incompressibility"})
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
}

TEST(RewardsTest, RegisteredRewardIsCallableAndReplaceable) {
  registerReward("test_constant", [](const ImageBatch &batch) {
    return absl::StatusOr<std::vector<float>>(
        std::vector<float>(batch.shape[0], 1.0f));
  });
  HostImages images = filled(2, 4, 4, 0.5f);
  absl::StatusOr<std::vector<float>> r =
      computeReward("test_constant", images.view());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, (std::vector<float>{1.0f, 1.0f}));

  registerReward("test_constant", [](const ImageBatch &batch) {
    return absl::StatusOr<std::vector<float>>(
        std::vector<float>(batch.shape[0], 2.0f));
  });
  r = computeReward("test_constant", images.view());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, (std::vector<float>{2.0f, 2.0f}));
}

TEST(RewardsTest, RegisteredRewardSeesOnlyValidatedBatches) {
  // Shared, not captured by reference: the registry outlives this test.
  auto called = std::make_shared<bool>(false);
  registerReward("test_spy", [called](const ImageBatch &batch) {
    *called = true;
    return absl::StatusOr<std::vector<float>>(
        std::vector<float>(batch.shape[0], 0.0f));
  });
  HostImages images = filled(1, 2, 2, 0.5f);
  images.values[3] = kNan;
  EXPECT_FALSE(computeReward("test_spy", images.view()).ok());
  EXPECT_FALSE(*called);
}

TEST(RewardsTest, NegativeWrongValueCountFromRegisteredReward) {
  registerReward("test_short", [](const ImageBatch &) {
    return absl::StatusOr<std::vector<float>>(std::vector<float>{1.0f});
  });
  HostImages images = filled(3, 2, 2, 0.5f);
  absl::StatusOr<std::vector<float>> r =
      computeReward("test_short", images.view());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInternal);
  EXPECT_TRUE(hasSubstr(r.status(), "returned 1 values"));
  EXPECT_TRUE(hasSubstr(r.status(), "has 3 images"));
}

TEST(RewardsTest, NegativeRegisteredRewardErrorNamesTheReward) {
  registerReward("test_failing", [](const ImageBatch &) {
    return absl::StatusOr<std::vector<float>>(
        absl::FailedPreconditionError("model not loaded"));
  });
  HostImages images = filled(1, 2, 2, 0.5f);
  absl::StatusOr<std::vector<float>> r =
      computeReward("test_failing", images.view());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(hasSubstr(r.status(), "reward 'test_failing': model not loaded"));
}

TEST(RewardsTest, NegativeUnknownName) {
  HostImages images = filled(1, 2, 2, 0.5f);
  absl::StatusOr<std::vector<float>> r =
      computeReward("jpeg_size", images.view());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(hasSubstr(r.status(), "unknown reward 'jpeg_size'"));
  EXPECT_TRUE(hasSubstr(r.status(), "brightness"));
  EXPECT_TRUE(hasSubstr(r.status(), "jpeg_compressibility"));
  EXPECT_TRUE(hasSubstr(r.status(), "jpeg_incompressibility"));
}

//===----------------------------------------------------------------------===//
// Quantization
//===----------------------------------------------------------------------===//

TEST(RewardsTest, QuantizeClampsOutOfRange) {
  EXPECT_EQ(quantizePixel(0.0f), 0);
  EXPECT_EQ(quantizePixel(1.0f), 255);
  EXPECT_EQ(quantizePixel(-0.5f), 0);
  EXPECT_EQ(quantizePixel(-1e30f), 0);
  EXPECT_EQ(quantizePixel(1.5f), 255);
  EXPECT_EQ(quantizePixel(1e30f), 255);
  // Not reachable through computeReward, but defined anyway.
  EXPECT_EQ(quantizePixel(kNan), 0);
  EXPECT_EQ(quantizePixel(kInf), 255);
  EXPECT_EQ(quantizePixel(-kInf), 0);
}

TEST(RewardsTest, QuantizeRoundsHalfToEven) {
  // 255 * 0.5 is exactly 127.5, which rounds to the even 128.
  EXPECT_EQ(quantizePixel(0.5f), 128);
  // Every (k + 0.5) / 255 whose float product with 255 lands exactly on the
  // half distinguishes half-to-even (flow_grpo's torch.round) from
  // half-away-from-zero for even k.
  int exactHalves = 0, evenExactHalves = 0;
  for (int k = 0; k < 255; ++k) {
    float v = (static_cast<float>(k) + 0.5f) / 255.0f;
    if (255.0f * v != static_cast<float>(k) + 0.5f)
      continue;
    ++exactHalves;
    if (k % 2 == 0)
      ++evenExactHalves;
    EXPECT_EQ(quantizePixel(v), k % 2 == 0 ? k : k + 1) << "k = " << k;
  }
  EXPECT_GT(evenExactHalves, 0) << exactHalves << " exact halves, none even";
  for (int k = 0; k < 255; ++k) {
    EXPECT_EQ(quantizePixel((k + 0.49f) / 255.0f), k);
    EXPECT_EQ(quantizePixel((k + 0.51f) / 255.0f), k + 1);
  }
}

TEST(RewardsTest, ImageToHwcU8InterleavesChannels) {
  // Image 1 of 2, each 3x2x2, pixel values k/255 so quantization is exact.
  HostImages images = filled(2, 2, 2, 0.0f);
  for (size_t k = 0; k < images.values.size(); ++k)
    images.values[k] = static_cast<float>(k) / 255.0f;
  absl::StatusOr<std::vector<uint8_t>> hwc = imageToHwcU8(images.view(), 1);
  ASSERT_TRUE(hwc.ok()) << hwc.status();
  // Element (c, y, x) of image 1 sits at 12 + c*4 + y*2 + x in CHW order.
  std::vector<uint8_t> expected;
  for (int p = 0; p < 4; ++p)
    for (int c = 0; c < 3; ++c)
      expected.push_back(static_cast<uint8_t>(12 + c * 4 + p));
  EXPECT_EQ(*hwc, expected);
  EXPECT_EQ(*hwc, referenceHwc(images, 1));
}

TEST(RewardsTest, NegativeImageToHwcU8IndexOutOfRange) {
  HostImages images = filled(2, 2, 2, 0.0f);
  for (int64_t index : {-1, 2}) {
    absl::StatusOr<std::vector<uint8_t>> hwc =
        imageToHwcU8(images.view(), index);
    ASSERT_FALSE(hwc.ok());
    EXPECT_TRUE(hasSubstr(hwc.status(), "out of range for a batch of 2"));
  }
}

//===----------------------------------------------------------------------===//
// JPEG rewards
//===----------------------------------------------------------------------===//

TEST(RewardsTest, JpegRewardsMatchFormulaExactly) {
  const int h = 32, w = 48;
  HostImages images = mixedBatch(h, w);
  absl::StatusOr<std::vector<float>> comp =
      computeReward("jpeg_compressibility", images.view());
  absl::StatusOr<std::vector<float>> incomp =
      computeReward("jpeg_incompressibility", images.view());
  ASSERT_TRUE(comp.ok()) << comp.status();
  ASSERT_TRUE(incomp.ok()) << incomp.status();
  ASSERT_EQ(comp->size(), 3u);
  ASSERT_EQ(incomp->size(), 3u);
  for (int64_t i = 0; i < 3; ++i) {
    std::vector<uint8_t> hwc = referenceHwc(images, i);
    unsigned long bytes = turboJpegBytes(hwc, h, w);
    ASSERT_GT(bytes, 0u);
    EXPECT_EQ((*comp)[i], -static_cast<float>(bytes) / 500000.0f) << i;
    EXPECT_EQ((*incomp)[i], static_cast<float>(bytes) / 1000.0f) << i;
    absl::StatusOr<size_t> helper = jpegEncodedSize(hwc.data(), h, w);
    ASSERT_TRUE(helper.ok()) << helper.status();
    EXPECT_EQ(*helper, bytes);
  }
  // The three images really are different, so order is observable.
  EXPECT_LT((*comp)[2], (*comp)[1]);
  EXPECT_LT((*comp)[1], (*comp)[0]);
}

/// The images of testdata/make_pil_jpeg_sizes.py; must stay identical to
/// its pixel().
int patternPixel(const std::string &pattern, int64_t h, int64_t w, int64_t y,
                 int64_t x, int64_t c) {
  if (pattern == "gradient") {
    const int64_t v[3] = {255 * x / (w - 1), 255 * y / (h - 1),
                          255 * (x + y) / (w + h - 2)};
    return static_cast<int>(v[c]);
  }
  if (pattern == "noise") {
    uint32_t s = static_cast<uint32_t>((y * w + x) * 3 + c);
    for (int k = 0; k < 3; ++k)
      s = s * 1664525u + 1013904223u;
    return static_cast<int>((s >> 24) & 255u);
  }
  if (pattern == "rings") {
    const int64_t dx = x - w / 2, dy = y - h / 3, d = dx * dx + dy * dy;
    const int64_t v[3] = {(d / 16) % 256, (x * y / 8) % 256,
                          (d / 64 + 3 * x) % 256};
    return static_cast<int>(v[c]);
  }
  if (pattern == "checker") {
    const int64_t on = (x / 4 + y / 4) % 2;
    const int64_t v[3] = {20 + 200 * on, 180 - 150 * on, 90};
    return static_cast<int>(v[c]);
  }
  if (pattern == "edge") {
    const int left[3] = {40, 90, 200}, right[3] = {220, 30, 60};
    return x < w / 2 ? left[c] : right[c];
  }
  ADD_FAILURE() << "unknown pattern " << pattern;
  return 0;
}

struct PilSize {
  const char *pattern;
  int64_t h, w;
  size_t bytes;
};

TEST(RewardsTest, PilByteCounts) {
  // flow_grpo encodes with PIL (quality 95, PIL's defaults: 4:2:0, the
  // accurate DCT); the byte counts must be PIL's, not just TurboJPEG's with
  // some flags. Before TJFLAG_ACCURATEDCT every image here differed by a
  // few bytes (e.g. the 64x64 gradient: 1339 instead of 1333).
  const PilSize sizes[] = {
#include "runtime/train/rewards/testdata/pil_jpeg_sizes.inc"
  };
  for (const PilSize &p : sizes) {
    std::string name = std::string(p.pattern) + " " + std::to_string(p.h) +
                       "x" + std::to_string(p.w);
    std::vector<uint8_t> hwc(static_cast<size_t>(p.h * p.w * 3));
    HostImages images = filled(1, p.h, p.w, 0.0f);
    for (int64_t y = 0; y < p.h; ++y)
      for (int64_t x = 0; x < p.w; ++x)
        for (int64_t c = 0; c < 3; ++c) {
          int v = patternPixel(p.pattern, p.h, p.w, y, x, c);
          hwc[(y * p.w + x) * 3 + c] = static_cast<uint8_t>(v);
          // v / 255 quantizes back to v.
          images.values[(c * p.h + y) * p.w + x] =
              static_cast<float>(v) / 255.0f;
        }
    ASSERT_EQ(referenceHwc(images, 0), hwc) << name;
    absl::StatusOr<size_t> bytes = jpegEncodedSize(hwc.data(), p.h, p.w);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    EXPECT_EQ(*bytes, p.bytes) << name;
    absl::StatusOr<std::vector<float>> reward =
        computeReward("jpeg_compressibility", images.view());
    ASSERT_TRUE(reward.ok()) << reward.status();
    EXPECT_EQ((*reward)[0], -static_cast<float>(p.bytes) / 500000.0f) << name;
  }
}

TEST(RewardsTest, SolidColorIsMoreCompressibleThanNoise) {
  HostImages solid = filled(1, 64, 64, 0.4f);
  HostImages random = noise(1, 64, 64, /*seed=*/1);
  absl::StatusOr<std::vector<float>> solidReward =
      computeReward("jpeg_compressibility", solid.view());
  absl::StatusOr<std::vector<float>> noiseReward =
      computeReward("jpeg_compressibility", random.view());
  ASSERT_TRUE(solidReward.ok()) << solidReward.status();
  ASSERT_TRUE(noiseReward.ok()) << noiseReward.status();
  EXPECT_LT((*solidReward)[0], 0.0f);
  EXPECT_GT((*solidReward)[0], (*noiseReward)[0]);

  absl::StatusOr<std::vector<float>> solidIncomp =
      computeReward("jpeg_incompressibility", solid.view());
  absl::StatusOr<std::vector<float>> noiseIncomp =
      computeReward("jpeg_incompressibility", random.view());
  ASSERT_TRUE(solidIncomp.ok() && noiseIncomp.ok());
  EXPECT_LT((*solidIncomp)[0], (*noiseIncomp)[0]);
}

TEST(RewardsTest, JpegClampsOutOfRangeValues) {
  // A noise image pushed outside [0, 1] encodes exactly like its clamped
  // version, so clamping happens before the encoder sees the pixels.
  HostImages wide = noise(1, 16, 16, /*seed=*/3);
  HostImages clamped = wide;
  for (size_t k = 0; k < wide.values.size(); ++k) {
    wide.values[k] = wide.values[k] * 3.0f - 1.0f;
    clamped.values[k] = std::clamp(wide.values[k], 0.0f, 1.0f);
  }
  absl::StatusOr<std::vector<float>> a =
      computeReward("jpeg_incompressibility", wide.view());
  absl::StatusOr<std::vector<float>> b =
      computeReward("jpeg_incompressibility", clamped.view());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
  absl::StatusOr<std::vector<uint8_t>> hwc = imageToHwcU8(wide.view(), 0);
  ASSERT_TRUE(hwc.ok());
  EXPECT_EQ(*hwc, referenceHwc(clamped, 0));
}

TEST(RewardsTest, JpegBatchEqualsImagesScoredOneByOne) {
  const int64_t h = 24, w = 24;
  HostImages batch = mixedBatch(h, w);
  absl::StatusOr<std::vector<float>> together =
      computeReward("jpeg_compressibility", batch.view());
  ASSERT_TRUE(together.ok()) << together.status();
  ASSERT_EQ(together->size(), 3u);
  const size_t perImage = 3 * h * w;
  for (size_t i = 0; i < 3; ++i) {
    ImageBatch one{batch.values.data() + i * perImage, {1, 3, h, w}};
    absl::StatusOr<std::vector<float>> alone =
        computeReward("jpeg_compressibility", one);
    ASSERT_TRUE(alone.ok()) << alone.status();
    ASSERT_EQ(alone->size(), 1u);
    EXPECT_EQ((*alone)[0], (*together)[i]) << i;
  }
}

TEST(RewardsTest, NegativeJpegEncodedSizeArguments) {
  std::vector<uint8_t> pixels(3 * 4 * 4, 0);
  absl::StatusOr<size_t> r = jpegEncodedSize(nullptr, 4, 4);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(hasSubstr(r.status(), "jpeg image data is null"));
  r = jpegEncodedSize(pixels.data(), 0, 4);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(hasSubstr(r.status(), "positive height and width but is 0x4"));
  r = jpegEncodedSize(pixels.data(), 4, 70000);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(
      hasSubstr(r.status(), "at most 65535x65535 pixels but is 4x70000"));
}

TEST(RewardsTest, NegativeJpegImageTooWide) {
  HostImages images = filled(1, 1, 70000, 0.5f);
  absl::StatusOr<std::vector<float>> r =
      computeReward("jpeg_compressibility", images.view());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(hasSubstr(r.status(), "reward 'jpeg_compressibility'"));
  EXPECT_TRUE(hasSubstr(r.status(), "but is 1x70000"));
  // The size limit belongs to JPEG, not to images in general.
  EXPECT_TRUE(computeReward("brightness", images.view()).ok());
}

//===----------------------------------------------------------------------===//
// Brightness
//===----------------------------------------------------------------------===//

TEST(RewardsTest, BrightnessIsPerImageMean) {
  HostImages images = noise(4, 5, 7, /*seed=*/11);
  // Push some values out of range: brightness does not clamp.
  images.values[0] = -2.0f;
  images.values[200] = 3.0f;
  absl::StatusOr<std::vector<float>> r =
      computeReward("brightness", images.view());
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 4u);
  const size_t perImage = 3 * 5 * 7;
  for (size_t i = 0; i < 4; ++i) {
    double sum = 0.0;
    for (size_t k = 0; k < perImage; ++k)
      sum += images.values[i * perImage + k];
    EXPECT_FLOAT_EQ((*r)[i], static_cast<float>(sum / perImage)) << i;
  }
}

TEST(RewardsTest, BrightnessKeepsBatchOrder) {
  HostImages images = filled(4, 3, 3, 0.0f);
  const std::vector<float> levels = {0.75f, 0.0f, 1.0f, 0.25f};
  const size_t perImage = 27;
  for (size_t i = 0; i < 4; ++i)
    std::fill_n(images.values.begin() + i * perImage, perImage, levels[i]);
  absl::StatusOr<std::vector<float>> r =
      computeReward("brightness", images.view());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(*r, levels);
}

//===----------------------------------------------------------------------===//
// Batch validation, for every built-in
//===----------------------------------------------------------------------===//

class BuiltinRewardTest : public ::testing::TestWithParam<const char *> {
protected:
  absl::Status rewardStatus(const ImageBatch &batch) {
    return computeReward(GetParam(), batch).status();
  }
};

TEST_P(BuiltinRewardTest, NegativeWrongRank) {
  std::vector<float> values(3 * 4 * 4, 0.5f);
  absl::Status s = rewardStatus(ImageBatch{values.data(), {3, 4, 4}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(hasSubstr(s, "must have rank 4 (NCHW) but has rank 3"));
  EXPECT_TRUE(hasSubstr(s, "shape 3x4x4"));
  s = rewardStatus(ImageBatch{values.data(), {}});
  EXPECT_TRUE(hasSubstr(s, "but has rank 0 (shape ())"));
}

TEST_P(BuiltinRewardTest, NegativeWrongChannelCount) {
  std::vector<float> values(2 * 4 * 4 * 4, 0.5f);
  for (int64_t c : {1, 4}) {
    absl::Status s = rewardStatus(ImageBatch{values.data(), {2, c, 4, 4}});
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(hasSubstr(s, "must have 3 channels (RGB) but has " +
                                 std::to_string(c)));
  }
}

TEST_P(BuiltinRewardTest, NegativeEmptyOrNegativeDimension) {
  std::vector<float> values(48, 0.5f);
  absl::Status s = rewardStatus(ImageBatch{values.data(), {0, 3, 4, 4}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(hasSubstr(s, "dimension 0 must be positive but is 0"));
  s = rewardStatus(ImageBatch{values.data(), {1, 3, 4, 0}});
  EXPECT_TRUE(hasSubstr(s, "dimension 3 must be positive but is 0"));
  s = rewardStatus(ImageBatch{values.data(), {1, 3, -4, 4}});
  EXPECT_TRUE(hasSubstr(s, "dimension 2 must be positive but is -4"));
}

TEST_P(BuiltinRewardTest, NegativeNullData) {
  absl::Status s = rewardStatus(ImageBatch{nullptr, {1, 3, 4, 4}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(hasSubstr(s, "data is null for shape 1x3x4x4"));
}

TEST_P(BuiltinRewardTest, NegativeTooManyElements) {
  // Rejected from the shape alone; the one float behind it is never read
  // past.
  float one = 0.5f;
  const int64_t huge = std::numeric_limits<int64_t>::max() / 8;
  absl::Status s = rewardStatus(ImageBatch{&one, {huge, 3, 4, 4}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(hasSubstr(s, "has too many elements"));
}

TEST_P(BuiltinRewardTest, NegativeNonFinitePixel) {
  struct Case {
    float value;
    const char *name;
  };
  for (Case c :
       {Case{kNan, "(nan)"}, Case{kInf, "(inf)"}, Case{-kInf, "(-inf)"}}) {
    HostImages images = filled(3, 4, 5, 0.5f);
    // Image 2, channel 1, row 3, column 4: flat 1*20 + 3*5 + 4 = 39.
    images.values[2 * 60 + 39] = c.value;
    absl::Status s = rewardStatus(images.view());
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(hasSubstr(s, std::string("image 2 has a non-finite value ") +
                                 c.name + " at flat index 39"));
    EXPECT_TRUE(hasSubstr(s, "(channel 1, row 3, column 4)"));
  }
}

INSTANTIATE_TEST_SUITE_P(Builtins, BuiltinRewardTest,
                         ::testing::Values("jpeg_compressibility",
                                           "jpeg_incompressibility",
                                           "brightness"));

//===----------------------------------------------------------------------===//
// Rewards as host functions (RewardFunctions.h)
//===----------------------------------------------------------------------===//

TEST(RewardFunctionsTest, RegistersEveryRewardUnderItsName) {
  HostFunctionRegistry registry;
  registry.add("other", [](absl::Span<const HostTensor>) {
    return absl::StatusOr<std::vector<HostTensor>>(std::vector<HostTensor>{});
  });
  registerRewards(registry);
  std::vector<std::string> want = registeredRewards();
  want.push_back("other");
  std::sort(want.begin(), want.end());
  EXPECT_EQ(registry.names(), want);
  EXPECT_EQ(rewardHostFunctions().names(), registeredRewards());
}

TEST(RewardFunctionsTest, BrightnessIsTheMeanPerImageAsF32) {
  HostFunctionRegistry registry = rewardHostFunctions();
  const HostFunction *fn = registry.lookup("brightness");
  ASSERT_NE(fn, nullptr);
  // Two 3x1x2 images: means 0.5 and 1/6.
  HostTensor images = HostTensor::fromDoubles(
      DType::F32, {2, 3, 1, 2}, {0, 1, 0, 1, 0, 1, 1, 0, 0, 0, 0, 0});
  absl::StatusOr<std::vector<HostTensor>> r = (*fn)({images});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].dtype(), DType::F32);
  EXPECT_EQ((*r)[0].shape(), (std::vector<int64_t>{2}));
  EXPECT_EQ((*r)[0].floats()[0], 0.5);
  EXPECT_EQ((*r)[0].floats()[1],
            static_cast<double>(static_cast<float>(1.0 / 6.0)));
}

TEST(RewardFunctionsTest, NegativeOperandsAreChecked) {
  HostFunctionRegistry registry = rewardHostFunctions();
  const HostFunction *fn = registry.lookup("brightness");
  ASSERT_NE(fn, nullptr);
  absl::StatusOr<std::vector<HostTensor>> none = (*fn)({});
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().message(),
            "reward 'brightness' takes 1 image batch, found 0 operands");
  absl::StatusOr<std::vector<HostTensor>> ints =
      (*fn)({HostTensor(DType::I32, {1, 3, 1, 1})});
  ASSERT_FALSE(ints.ok());
  EXPECT_EQ(ints.status().message(),
            "reward 'brightness' takes float images, found "
            "tensor<1x3x1x1xi32>");
}

} // namespace
} // namespace omni::rewards
