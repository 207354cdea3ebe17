//===- Rewards.cpp - Named image rewards ------------------------*- C++ -*-===//
//
// Implements the reward registry and the built-in rewards. The JPEG rewards
// follow docs/flowgrpo-math.md section 4: quantize to u8, lay out as HWC RGB,
// encode with TurboJPEG at quality 95, 4:2:0 and the accurate DCT (what PIL's
// Image.save(buf, "JPEG", quality=95) does in flow_grpo), and scale the
// byte count. All input
// checks happen once, in validateImageBatch, before any reward runs, so the
// reward bodies can index freely and every malformed input becomes a Status
// rather than a crash.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/rewards/Rewards.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"

#include <turbojpeg.h>

#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

namespace omni::rewards {
namespace {

/// Quality and subsampling fixed by the reward definition; changing either
/// changes every reward value, so they are not options.
constexpr int kJpegQuality = 95;
constexpr int kJpegSubsampling = TJSAMP_420;
/// PIL (flow_grpo's encoder) leaves libjpeg's default, the accurate integer
/// DCT; TurboJPEG picks the fast DCT below quality 96 unless asked, which
/// changes the byte counts (1339 instead of PIL's 1333 on a 64x64
/// gradient). With this flag the sizes equal PIL's (testdata/).
constexpr int kJpegFlags = TJFLAG_ACCURATEDCT;
/// libjpeg's JPEG_MAX_DIMENSION; TurboJPEG would reject larger images too,
/// but checking first gives a message that names the limit and keeps the
/// int conversions below in range.
constexpr int64_t kJpegMaxDimension = 65535;
constexpr int64_t kChannels = 3;

std::string formatShape(const std::vector<int64_t> &shape) {
  if (shape.empty())
    return "()";
  return absl::StrJoin(shape, "x");
}

//===----------------------------------------------------------------------===//
// TurboJPEG
//===----------------------------------------------------------------------===//

struct TjHandleDeleter {
  void operator()(void *handle) const { tjDestroy(handle); }
};
using TjHandle = std::unique_ptr<void, TjHandleDeleter>;

/// TurboJPEG allocates the output buffer itself (we cannot know the size
/// beforehand without tjBufSize's worst case); it must be freed with tjFree,
/// including after a failed call, where it may already be allocated.
struct TjBufferDeleter {
  void operator()(unsigned char *buffer) const { tjFree(buffer); }
};

absl::StatusOr<TjHandle> makeCompressor() {
  TjHandle handle(tjInitCompress());
  if (!handle)
    return absl::InternalError(
        absl::StrCat("tjInitCompress failed: ", tjGetErrorStr2(nullptr)));
  return handle;
}

absl::Status checkJpegDimensions(int64_t h, int64_t w) {
  if (h <= 0 || w <= 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "jpeg image must have positive height and width but is ", h, "x", w));
  if (h > kJpegMaxDimension || w > kJpegMaxDimension)
    return absl::InvalidArgumentError(
        absl::StrCat("jpeg image must be at most ", kJpegMaxDimension, "x",
                     kJpegMaxDimension, " pixels but is ", h, "x", w));
  return absl::OkStatus();
}

/// Encodes with an existing handle so a batch pays for one tjInitCompress.
/// Dimensions must have passed checkJpegDimensions.
absl::StatusOr<size_t> encodedSize(tjhandle handle, const uint8_t *hwc,
                                   int64_t h, int64_t w) {
  unsigned char *jpeg = nullptr;
  unsigned long jpegSize = 0;
  int rc = tjCompress2(handle, hwc, static_cast<int>(w), /*pitch=*/0,
                       static_cast<int>(h), TJPF_RGB, &jpeg, &jpegSize,
                       kJpegSubsampling, kJpegQuality, kJpegFlags);
  std::unique_ptr<unsigned char, TjBufferDeleter> owned(jpeg);
  if (rc != 0)
    return absl::InternalError(
        absl::StrCat("tjCompress2 failed on a ", h, "x", w,
                     " image: ", tjGetErrorStr2(handle)));
  return static_cast<size_t>(jpegSize);
}

/// Writes image `index` of a validated batch into `out` as HWC u8; `out` is
/// reused across the images of a batch.
void fillHwcU8(const ImageBatch &batch, int64_t index,
               std::vector<uint8_t> &out) {
  const int64_t h = batch.shape[2], w = batch.shape[3];
  const size_t plane = static_cast<size_t>(h * w);
  const float *image =
      batch.data + static_cast<size_t>(index) * kChannels * plane;
  out.resize(plane * kChannels);
  for (size_t p = 0; p < plane; ++p)
    for (int64_t c = 0; c < kChannels; ++c)
      out[p * kChannels + c] = quantizePixel(image[c * plane + p]);
}

/// JPEG byte count of every image of a validated batch, in order.
absl::StatusOr<std::vector<size_t>> jpegSizes(const ImageBatch &batch) {
  const int64_t n = batch.shape[0], h = batch.shape[2], w = batch.shape[3];
  if (absl::Status s = checkJpegDimensions(h, w); !s.ok())
    return s;
  absl::StatusOr<TjHandle> handle = makeCompressor();
  if (!handle.ok())
    return handle.status();
  std::vector<size_t> sizes;
  sizes.reserve(static_cast<size_t>(n));
  std::vector<uint8_t> hwc;
  for (int64_t i = 0; i < n; ++i) {
    fillHwcU8(batch, i, hwc);
    absl::StatusOr<size_t> size = encodedSize(handle->get(), hwc.data(), h, w);
    if (!size.ok())
      return absl::Status(
          size.status().code(),
          absl::StrCat("image ", i, ": ", size.status().message()));
    sizes.push_back(*size);
  }
  return sizes;
}

//===----------------------------------------------------------------------===//
// Built-in rewards
//===----------------------------------------------------------------------===//

/// docs/flowgrpo-math.md section 4. The division is in float32 so the value
/// equals -float(bytes) / 500000.0f bit for bit, which is what tests and the
/// reference evaluator compare against.
absl::StatusOr<std::vector<float>>
jpegCompressibility(const ImageBatch &batch) {
  absl::StatusOr<std::vector<size_t>> sizes = jpegSizes(batch);
  if (!sizes.ok())
    return sizes.status();
  std::vector<float> rewards;
  rewards.reserve(sizes->size());
  for (size_t bytes : *sizes)
    rewards.push_back(-(static_cast<float>(bytes) / 500000.0f));
  return rewards;
}

absl::StatusOr<std::vector<float>>
jpegIncompressibility(const ImageBatch &batch) {
  absl::StatusOr<std::vector<size_t>> sizes = jpegSizes(batch);
  if (!sizes.ok())
    return sizes.status();
  std::vector<float> rewards;
  rewards.reserve(sizes->size());
  for (size_t bytes : *sizes)
    rewards.push_back(static_cast<float>(bytes) / 1000.0f);
  return rewards;
}

/// Mean of all C*H*W values of each image, unclamped. Cheap and exactly
/// predictable, so tests of the training loop can check rewards without an
/// encoder. Accumulated in double so the order of summation barely matters.
absl::StatusOr<std::vector<float>> brightness(const ImageBatch &batch) {
  const int64_t n = batch.shape[0];
  const size_t perImage =
      static_cast<size_t>(batch.shape[1] * batch.shape[2] * batch.shape[3]);
  std::vector<float> rewards;
  rewards.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const float *image = batch.data + static_cast<size_t>(i) * perImage;
    double sum = 0.0;
    for (size_t k = 0; k < perImage; ++k)
      sum += image[k];
    rewards.push_back(static_cast<float>(sum / static_cast<double>(perImage)));
  }
  return rewards;
}

//===----------------------------------------------------------------------===//
// Registry
//===----------------------------------------------------------------------===//

struct Registry {
  std::mutex mutex;
  /// Ordered so that registeredRewards and error messages list names in a
  /// stable order; transparent comparator to look up string_views.
  std::map<std::string, RewardFn, std::less<>> rewards;
};

/// Built-ins are installed on first use rather than by static initializers,
/// so no registration can run before the map exists. Intentionally leaked:
/// a reward may be computed from another static's destructor.
Registry &registry() {
  static Registry *instance = [] {
    auto *r = new Registry;
    r->rewards.emplace("jpeg_compressibility", jpegCompressibility);
    r->rewards.emplace("jpeg_incompressibility", jpegIncompressibility);
    r->rewards.emplace("brightness", brightness);
    return r;
  }();
  return *instance;
}

} // namespace

//===----------------------------------------------------------------------===//
// Public API
//===----------------------------------------------------------------------===//

absl::Status validateImageBatch(const ImageBatch &batch) {
  const std::vector<int64_t> &shape = batch.shape;
  if (shape.size() != 4)
    return absl::InvalidArgumentError(
        absl::StrCat("image batch must have rank 4 (NCHW) but has rank ",
                     shape.size(), " (shape ", formatShape(shape), ")"));
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] <= 0)
      return absl::InvalidArgumentError(
          absl::StrCat("image batch dimension ", d, " must be positive but is ",
                       shape[d], " (shape ", formatShape(shape), ")"));
  if (shape[1] != kChannels)
    return absl::InvalidArgumentError(absl::StrCat(
        "image batch must have ", kChannels, " channels (RGB) but has ",
        shape[1], " (shape ", formatShape(shape), ")"));
  // Byte size must fit in size_t/int64 so that later index arithmetic cannot
  // wrap; only absurd shapes fail here.
  int64_t elements = 1;
  const int64_t limit =
      std::numeric_limits<int64_t>::max() / static_cast<int64_t>(sizeof(float));
  for (int64_t d : shape) {
    if (elements > limit / d)
      return absl::InvalidArgumentError(absl::StrCat(
          "image batch shape ", formatShape(shape), " has too many elements"));
    elements *= d;
  }
  if (batch.data == nullptr)
    return absl::InvalidArgumentError(absl::StrCat(
        "image batch data is null for shape ", formatShape(shape)));
  const int64_t h = shape[2], w = shape[3];
  const int64_t perImage = kChannels * h * w;
  for (int64_t k = 0; k < elements; ++k) {
    float v = batch.data[k];
    if (std::isfinite(v))
      continue;
    const int64_t image = k / perImage, flat = k % perImage;
    return absl::InvalidArgumentError(
        absl::StrCat("image ", image, " has a non-finite value (",
                     std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf"),
                     ") at flat index ", flat, " (channel ", flat / (h * w),
                     ", row ", (flat / w) % h, ", column ", flat % w, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> computeReward(std::string_view name,
                                                 const ImageBatch &batch) {
  RewardFn fn;
  {
    Registry &r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.rewards.find(name);
    if (it == r.rewards.end()) {
      std::vector<absl::string_view> names;
      for (const auto &entry : r.rewards)
        names.push_back(entry.first);
      return absl::NotFoundError(absl::StrCat(
          "unknown reward '", absl::string_view(name.data(), name.size()),
          "'; registered rewards: ", absl::StrJoin(names, ", ")));
    }
    // Copied so the lock is not held while the reward runs (a reward may be
    // slow, or may itself call computeReward).
    fn = it->second;
  }
  if (absl::Status s = validateImageBatch(batch); !s.ok())
    return s;
  absl::StatusOr<std::vector<float>> rewards = fn(batch);
  const absl::string_view nameView(name.data(), name.size());
  if (!rewards.ok())
    return absl::Status(
        rewards.status().code(),
        absl::StrCat("reward '", nameView, "': ", rewards.status().message()));
  if (static_cast<int64_t>(rewards->size()) != batch.shape[0])
    return absl::InternalError(
        absl::StrCat("reward '", nameView, "' returned ", rewards->size(),
                     " values but the batch has ", batch.shape[0], " images"));
  return rewards;
}

std::vector<std::string> registeredRewards() {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  std::vector<std::string> names;
  names.reserve(r.rewards.size());
  for (const auto &entry : r.rewards)
    names.push_back(entry.first);
  return names;
}

void registerReward(std::string name, RewardFn fn) {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.rewards.insert_or_assign(std::move(name), std::move(fn));
}

uint8_t quantizePixel(float v) {
  // Clamp first: identical to clamping after rounding for finite v, and keeps
  // the argument of nearbyint in range. `!(v > 0)` also sends NaN to 0, so the
  // result is defined for every input.
  if (!(v > 0.0f))
    return 0;
  if (v >= 1.0f)
    return 255;
  // Half to even, as torch.round in flow_grpo's (img * 255).round().
  return static_cast<uint8_t>(std::nearbyint(255.0f * v));
}

absl::StatusOr<std::vector<uint8_t>> imageToHwcU8(const ImageBatch &batch,
                                                  int64_t index) {
  if (absl::Status s = validateImageBatch(batch); !s.ok())
    return s;
  if (index < 0 || index >= batch.shape[0])
    return absl::InvalidArgumentError(
        absl::StrCat("image index ", index, " is out of range for a batch of ",
                     batch.shape[0], " images"));
  std::vector<uint8_t> out;
  fillHwcU8(batch, index, out);
  return out;
}

absl::StatusOr<size_t> jpegEncodedSize(const uint8_t *hwc, int64_t h,
                                       int64_t w) {
  if (absl::Status s = checkJpegDimensions(h, w); !s.ok())
    return s;
  if (hwc == nullptr)
    return absl::InvalidArgumentError(
        absl::StrCat("jpeg image data is null for a ", h, "x", w, " image"));
  absl::StatusOr<TjHandle> handle = makeCompressor();
  if (!handle.ok())
    return handle.status();
  return encodedSize(handle->get(), hwc, h, w);
}

} // namespace omni::rewards
