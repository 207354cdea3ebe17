//===- Png.cpp - Sample image grids as PNG files --------------------------===//

#include "runtime/train/image/Png.h"

#include "runtime/train/checkpoint/AtomicFile.h"
#include "runtime/train/image/Caption.h"
#include "runtime/train/rewards/Rewards.h"

#include "absl/strings/str_cat.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <png.h>

namespace omni::image {
namespace {

/// The largest grid side accepted (far below libpng's 2^31 limit, and small
/// enough that width * height * 3 never overflows).
constexpr int64_t kMaxSide = int64_t{1} << 24;

} // namespace

absl::StatusOr<RgbImage> imageGrid(const HostTensor &images, int64_t gap,
                                   const Captions &captions) {
  const std::vector<int64_t> &s = images.shape();
  if (!images.isFloat() || s.size() != 4 || s[1] != 3 || s[0] < 1 || s[2] < 1 ||
      s[3] < 1 || gap < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("images: expected a float tensor [B, 3, H, W] with B, H, "
                     "W >= 1, found ",
                     images.typeString()));
  const int64_t b = s[0], h = s[2], w = s[3];
  if (!captions.empty() && static_cast<int64_t>(captions.size()) != b)
    return absl::InvalidArgumentError(
        absl::StrCat("images: expected no captions or one list per image (", b,
                     "), found ", captions.size()));
  size_t lines = 0, glyphs = 0;
  for (const std::vector<std::string> &c : captions) {
    lines = std::max(lines, c.size());
    for (const std::string &line : c)
      glyphs = std::max(glyphs, captionGlyphs(line).size());
  }
  const int64_t scale = captionScale(w);
  const int64_t caption = captionHeight(static_cast<int64_t>(lines), w);
  const int64_t cellH = h + caption;
  const int64_t cellW =
      caption > 0 ? captionCellWidth(w, static_cast<int64_t>(glyphs)) : w;
  // Captions of neighbouring cells stay a glyph apart.
  const int64_t gapX = caption > 0 ? std::max(gap, kGlyphWidth * scale) : gap;
  int64_t cols = static_cast<int64_t>(std::ceil(std::sqrt(double(b))));
  while (cols * cols < b) // guard sqrt rounding
    ++cols;
  while (cols > 1 && (cols - 1) * (cols - 1) >= b)
    --cols;
  const int64_t rows = (b + cols - 1) / cols;
  if (w > kMaxSide || h > kMaxSide || cols * (cellW + gapX) > kMaxSide ||
      rows * (cellH + gap) > kMaxSide)
    return absl::InvalidArgumentError(
        absl::StrCat("images: a grid of ", b, " images of ", h, "x", w,
                     " pixels is larger than ", kMaxSide, " pixels on a side"));
  RgbImage grid;
  grid.width = cols * cellW + (cols - 1) * gapX;
  grid.height = rows * cellH + (rows - 1) * gap;
  grid.pixels.assign(grid.width * grid.height * 3, 0);
  absl::Span<const double> v = images.floats();
  for (int64_t n = 0; n < b; ++n) {
    // The cell's corner; the image centered in a cell widened for text.
    const int64_t x0 = (n % cols) * (cellW + gapX),
                  y0 = (n / cols) * (cellH + gap), ix = x0 + (cellW - w) / 2;
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x) {
          float value = static_cast<float>(v[((n * 3 + c) * h + y) * w + x]);
          grid.pixels[((y0 + y) * grid.width + ix + x) * 3 + c] =
              rewards::quantizePixel(value);
        }
    // The caption: one row of padding, then a line per kGlyphHeight rows.
    if (caption > 0)
      for (size_t l = 0; l < captions[n].size(); ++l)
        drawText(grid, x0,
                 y0 + h + scale +
                     static_cast<int64_t>(l) * kGlyphHeight * scale,
                 cellW, captions[n][l], scale);
  }
  return grid;
}

absl::StatusOr<std::string> encodePng(const RgbImage &image) {
  if (image.width < 1 || image.height < 1 || image.width > kMaxSide ||
      image.height > kMaxSide ||
      static_cast<int64_t>(image.pixels.size()) !=
          image.width * image.height * 3)
    return absl::InvalidArgumentError(
        absl::StrCat("png: expected ", image.width, "x", image.height,
                     " RGB pixels (each side 1..", kMaxSide, "), found ",
                     image.pixels.size(), " bytes"));
  png_image png;
  std::memset(&png, 0, sizeof(png));
  png.version = PNG_IMAGE_VERSION;
  png.width = static_cast<png_uint_32>(image.width);
  png.height = static_cast<png_uint_32>(image.height);
  png.format = PNG_FORMAT_RGB;
  png_alloc_size_t size = 0;
  const png_int_32 stride = static_cast<png_int_32>(image.width * 3);
  if (!png_image_write_get_memory_size(png, size, 0, image.pixels.data(),
                                       stride, nullptr))
    return absl::InternalError(
        absl::StrCat("png: libpng cannot encode the image: ", png.message));
  std::string bytes(size, '\0');
  if (!png_image_write_to_memory(&png, bytes.data(), &size, 0,
                                 image.pixels.data(), stride, nullptr))
    return absl::InternalError(
        absl::StrCat("png: libpng cannot encode the image: ", png.message));
  bytes.resize(size);
  return bytes;
}

absl::StatusOr<RgbImage> decodePng(absl::string_view bytes,
                                   absl::string_view name) {
  png_image png;
  std::memset(&png, 0, sizeof(png));
  png.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_memory(&png, bytes.data(), bytes.size()))
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": not a readable PNG: ", png.message));
  png.format = PNG_FORMAT_RGB;
  RgbImage image;
  image.width = png.width;
  image.height = png.height;
  if (image.width > kMaxSide || image.height > kMaxSide) {
    png_image_free(&png);
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": PNG is ", image.width, "x", image.height,
                     ", expected each side at most ", kMaxSide));
  }
  image.pixels.resize(PNG_IMAGE_SIZE(png));
  if (!png_image_finish_read(&png, nullptr, image.pixels.data(), 0, nullptr))
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": corrupt PNG: ", png.message));
  return image;
}

absl::Status writePng(const std::string &path, const RgbImage &image) {
  absl::StatusOr<std::string> bytes = encodePng(image);
  if (!bytes.ok())
    return absl::Status(bytes.status().code(),
                        absl::StrCat(path, ": ", bytes.status().message()));
  return checkpoint::writeFileAtomically(path, *bytes);
}

} // namespace omni::image
