//===- Caption.h - Text under the images of a sample grid -------*- C++ -*-===//
//
// Sample grids (Png.h) carry a caption under each image: its prompt and its
// reward (docs/backend.md, "Training"). The text is drawn with a built-in
// 5x7 pixel font (printable ASCII; one '?' for any other character of UTF-8
// text), white on the grid's black, scaled by whole pixels for large
// images. Cells of small images widen (the image centered) to fit the
// longest line up to kMaxCaptionGlyphs glyphs; longer text is clipped to
// whole glyphs inside the cell. No font
// library: the glyphs are a constexpr table in Caption.cpp. MLIR-free;
// pure functions (thread-safe).
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_TRAIN_IMAGE_CAPTION_H
#define OMNI_RUNTIME_TRAIN_IMAGE_CAPTION_H

#include "runtime/train/image/Png.h"

#include "absl/strings/string_view.h"

#include <cstdint>

namespace omni::image {

/// A glyph's cell at scale 1: 5x7 pixels of glyph, one column and one row
/// of spacing.
inline constexpr int64_t kGlyphWidth = 6;
inline constexpr int64_t kGlyphHeight = 8;
/// Images narrower than this get no captions (fewer than 4 glyphs fit).
inline constexpr int64_t kMinCaptionWidth = 4 * kGlyphWidth;

/// Cells widen for caption lines of up to this many glyphs.
inline constexpr int64_t kMaxCaptionGlyphs = 24;

/// The width of a captioned cell of an image `width` pixels wide whose
/// longest line has `glyphs` glyphs: the image's width, or the width of
/// min(glyphs, kMaxCaptionGlyphs) glyphs (the last without its spacing
/// column) when that is wider.
int64_t captionCellWidth(int64_t width, int64_t glyphs);

/// The font scale under an image `width` pixels wide: 1 below 512 pixels,
/// else width / 256, at most 4 (so 512 -> 2, 1024 -> 4).
int64_t captionScale(int64_t width);

/// The pixel rows `lines` lines of caption take under an image `width`
/// pixels wide: scale * (1 + kGlyphHeight * lines) (one row of padding
/// above the text); 0 when lines is 0 or width < kMinCaptionWidth.
int64_t captionHeight(int64_t lines, int64_t width);

/// Draws `text` with its top left corner at (x, y), each font pixel a
/// scale x scale square of `value` (R = G = B), glyphs advancing by
/// kGlyphWidth * scale; only whole glyphs that fit within `maxWidth`
/// pixels from x and inside the image are drawn. Returns the glyphs drawn.
int64_t drawText(RgbImage &image, int64_t x, int64_t y, int64_t maxWidth,
                 absl::string_view text, int64_t scale, uint8_t value = 255);

/// The characters of UTF-8 `text` as drawText draws them: printable ASCII
/// as is, anything else (control bytes, each multi-byte character, a stray
/// byte) as one '?'.
std::string captionGlyphs(absl::string_view text);

/// Whether the font pixel (column cx in 0..4, row cy in 0..6) of character
/// `c` is set (characters outside printable ASCII draw as '?').
bool glyphPixel(char c, int cx, int cy);

} // namespace omni::image

#endif // OMNI_RUNTIME_TRAIN_IMAGE_CAPTION_H
