//===- Rewards.h - Named image rewards --------------------------*- C++ -*-===//
//
// FlowGRPO scores each final sample with a reward: a host function that takes
// a batch of decoded images and returns one float per image
// (docs/flowgrpo-math.md section 4). This header declares the image batch view,
// the built-in rewards (jpeg_compressibility, jpeg_incompressibility,
// brightness) and a registry keyed by name, so that the reference evaluator,
// the compiler's host calls and the training driver all resolve a reward name
// to the same code. The library is MLIR-free and owns no tensors: it only reads
// the caller's buffer.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_TRAIN_REWARDS_REWARDS_H
#define OMNI_RUNTIME_TRAIN_REWARDS_REWARDS_H

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace omni::rewards {

/// A read-only view of a batch of images in NCHW float32 layout, values
/// nominally in [0, 1] (the decoder's output; values outside are clamped by
/// the JPEG rewards, see quantizePixel).
///
/// Requirements, checked by validateImageBatch and therefore by
/// computeReward: rank 4, C == 3 (RGB; grayscale is not accepted because the
/// JPEG rewards are defined on RGB images and a silent broadcast would change
/// the byte count), every dimension positive, `data` non-null, every value
/// finite. The view does not own `data`; the caller keeps it alive for the
/// duration of the call.
struct ImageBatch {
  const float *data = nullptr;
  std::vector<int64_t> shape;
};

/// A reward: given a validated batch of N images, return N floats in image
/// order. Must be safe to call concurrently from several threads if the
/// caller computes rewards concurrently.
using RewardFn =
    std::function<absl::StatusOr<std::vector<float>>(const ImageBatch &)>;

/// Checks the requirements listed on ImageBatch. Errors name what was
/// expected and what was found; a non-finite value is reported with its image
/// index and its flat element index within that image (c*H*W + y*W + x).
absl::Status validateImageBatch(const ImageBatch &batch);

/// Computes the reward registered under `name` for every image of `batch`.
/// The batch is validated first, so registered functions only ever see
/// well-formed input. Fails with NotFound (listing the registered names) for
/// an unknown name, InvalidArgument for a malformed batch, and Internal if a
/// registered function returns the wrong number of values; a registered
/// function's own error keeps its code and gains a "reward '<name>': " prefix.
/// Thread-safe.
///
/// Built-ins:
/// - `jpeg_compressibility`: -bytes / 500000, where bytes is
///   jpegEncodedSize of the image quantized by quantizePixel in HWC order;
///   the division is in float32, so the value is bit-identical to
///   -float(bytes) / 500000.0f.
/// - `jpeg_incompressibility`: float(bytes) / 1000.0f.
/// - `brightness`: the mean of all C*H*W values of the image (summed in
///   double, not clamped); a cheap, exactly predictable reward for tests.
absl::StatusOr<std::vector<float>> computeReward(std::string_view name,
                                                 const ImageBatch &batch);

/// The registered reward names, sorted. Thread-safe.
std::vector<std::string> registeredRewards();

/// Registers `fn` under `name`; a later registration under the same name
/// replaces the earlier one (including a built-in), so a runtime can swap in
/// its own implementation. Thread-safe.
void registerReward(std::string name, RewardFn fn);

//===----------------------------------------------------------------------===//
// Building blocks, exposed for tests and for callers that already hold u8
// images.
//===----------------------------------------------------------------------===//

/// Converts one pixel value to u8 as clamp(round(255 * v), 0, 255), with the
/// product taken in float32 and rounding half to even as torch.round does in
/// flow_grpo (e.g. 127.5 -> 128, 128.5 -> 128). Clamping happens before
/// rounding, which gives the same result for every finite input and keeps
/// nearbyint in range. Defined for every input: +inf gives 255, -inf and NaN
/// give 0 (batches with non-finite values are rejected before this is reached).
uint8_t quantizePixel(float v);

/// Converts image `index` of `batch` from planar CHW float to interleaved HWC
/// u8 RGB (the layout TurboJPEG takes), using quantizePixel. Validates the
/// batch and the index first.
absl::StatusOr<std::vector<uint8_t>> imageToHwcU8(const ImageBatch &batch,
                                                  int64_t index);

/// Returns the size in bytes of the JPEG that libjpeg-turbo's TurboJPEG API
/// produces for an interleaved RGB u8 image of h x w pixels (row pitch 3*w)
/// at quality 95 with 4:2:0 chroma subsampling and the accurate DCT
/// (TJFLAG_ACCURATEDCT): the settings of PIL's Image.save(buf, "JPEG",
/// quality=95), which flow_grpo's jpeg rewards call, and the same byte
/// counts (RewardsTest checks them against counts PIL made, testdata/).
absl::StatusOr<size_t> jpegEncodedSize(const uint8_t *hwc, int64_t h,
                                       int64_t w);

} // namespace omni::rewards

#endif // OMNI_RUNTIME_TRAIN_REWARDS_REWARDS_H
