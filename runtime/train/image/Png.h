//===- Png.h - Sample image grids as PNG files ------------------*- C++ -*-===//
//
// The training driver saves the images a step returns (`images`, f32
// [B, 3, H, W], values in [0, 1]) as one PNG grid per sample point: ceil(
// sqrt(B)) columns, rows as needed, `gap` black pixels between cells (and
// black empty cells). Each image may have lines of caption under it
// (Caption.h: its prompt and reward), which make every cell taller by the
// same captionHeight, and as wide as the longest line needs
// (captionCellWidth, the image centered), with at least a glyph's width
// (kGlyphWidth x the font scale) between captioned cells. Pixels are quantized
// as the rewards see them: rewards::quantizePixel (clamp(round(255 v), 0, 255),
// half to even). Encoding and decoding use libpng's simplified API (8-bit RGB,
// no setjmp); files are written atomically (AtomicFile.h). MLIR-free.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_TRAIN_IMAGE_PNG_H
#define OMNI_RUNTIME_TRAIN_IMAGE_PNG_H

#include "runtime/io/HostTensor.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include <cstdint>
#include <string>
#include <vector>

namespace omni::image {

/// An 8-bit RGB image, rows top to bottom, pixels interleaved (HWC).
struct RgbImage {
  int64_t width = 0;
  int64_t height = 0;
  std::vector<uint8_t> pixels; // height * width * 3
};

/// The caption lines of each image of a batch, in batch order.
using Captions = std::vector<std::vector<std::string>>;

/// Tiles the float batch `images` ([B, 3, H, W], B, H, W >= 1) into one
/// image, with `captions` (none, or one list of lines per image) under the
/// images: every cell gets room for the longest list and line
/// (captionHeight, captionCellWidth; no captions below kMinCaptionWidth
/// pixels of width). InvalidArgument (one line) for
/// any other type, a caption count other than B, or a grid wider or
/// taller than 2^24 pixels.
absl::StatusOr<RgbImage> imageGrid(const HostTensor &images, int64_t gap = 2,
                                   const Captions &captions = {});

/// The PNG file bytes of `image`.
absl::StatusOr<std::string> encodePng(const RgbImage &image);

/// Decodes PNG bytes to 8-bit RGB (whatever the file's format); `name`
/// prefixes errors.
absl::StatusOr<RgbImage> decodePng(absl::string_view bytes,
                                   absl::string_view name = "png");

/// encodePng, then an atomic write to `path` (its folder must exist).
absl::Status writePng(const std::string &path, const RgbImage &image);

} // namespace omni::image

#endif // OMNI_RUNTIME_TRAIN_IMAGE_PNG_H
