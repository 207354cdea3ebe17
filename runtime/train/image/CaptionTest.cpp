//===- CaptionTest.cpp - Captions under the images of a sample grid ------===//
//
// The font's glyphs against shapes known without it (H: two full columns
// and a bar in the middle row), the text clipped to whole glyphs in the
// cell, and the grid: every cell taller by the caption, the images where
// they were, the caption's pixels under each image and nowhere else.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/image/Caption.h"

#include "gtest/gtest.h"

#include <cmath>

namespace omni::image {
namespace {

HostTensor gray(int64_t b, int64_t h, int64_t w, double v = 0.5) {
  return HostTensor::fromDoubles(DType::F32, {b, 3, h, w},
                                 std::vector<double>(b * 3 * h * w, v));
}

uint8_t at(const RgbImage &image, int64_t x, int64_t y, int c = 0) {
  return image.pixels[(y * image.width + x) * 3 + c];
}

/// The white pixels of the rectangle [x0, x1) x [y0, y1).
int64_t whiteIn(const RgbImage &image, int64_t x0, int64_t y0, int64_t x1,
                int64_t y1) {
  int64_t n = 0;
  for (int64_t y = y0; y < y1; ++y)
    for (int64_t x = x0; x < x1; ++x)
      n += at(image, x, y) == 255 && at(image, x, y, 1) == 255 &&
           at(image, x, y, 2) == 255;
  return n;
}

TEST(Caption, GlyphsHaveTheirShapes) {
  // H: full first and last columns, the bar in the middle row only.
  for (int y = 0; y < 7; ++y) {
    EXPECT_TRUE(glyphPixel('H', 0, y)) << y;
    EXPECT_TRUE(glyphPixel('H', 4, y)) << y;
    for (int x = 1; x < 4; ++x)
      EXPECT_EQ(glyphPixel('H', x, y), y == 3) << x << " " << y;
  }
  // A space is empty; '-' is the middle row; every printable character
  // but the space has a pixel, and no glyph leaves its 5x7 box.
  for (int x = 0; x < 5; ++x)
    for (int y = 0; y < 7; ++y) {
      EXPECT_FALSE(glyphPixel(' ', x, y));
      EXPECT_EQ(glyphPixel('-', x, y), y == 3);
    }
  for (char c = '!'; c <= '~'; ++c) {
    int set = 0;
    for (int x = 0; x < 5; ++x)
      for (int y = 0; y < 7; ++y)
        set += glyphPixel(c, x, y);
    EXPECT_GT(set, 0) << c;
    EXPECT_FALSE(glyphPixel(c, 5, 0) || glyphPixel(c, 0, 7) ||
                 glyphPixel(c, -1, 0));
  }
  // Distinct characters look different (a typo in the table shows here).
  for (char a = '!'; a <= '~'; ++a)
    for (char b = a + 1; b <= '~'; ++b) {
      bool same = true;
      for (int x = 0; x < 5 && same; ++x)
        for (int y = 0; y < 7 && same; ++y)
          same = glyphPixel(a, x, y) == glyphPixel(b, x, y);
      EXPECT_FALSE(same) << a << " and " << b;
    }
}

TEST(Caption, NonAsciiIsOneQuestionMarkPerCharacter) {
  EXPECT_EQ(captionGlyphs("a cat"), "a cat");
  // é (2 bytes), ☃ (3 bytes), a tab, a stray continuation byte.
  EXPECT_EQ(captionGlyphs("caf\xc3\xa9 \xe2\x98\x83\tx\x80y"), "caf? ??x?y");
  for (int x = 0; x < 5; ++x)
    for (int y = 0; y < 7; ++y)
      EXPECT_EQ(glyphPixel('\x01', x, y), glyphPixel('?', x, y));
}

TEST(Caption, ScaleAndHeight) {
  EXPECT_EQ(captionScale(24), 1);
  EXPECT_EQ(captionScale(511), 1);
  EXPECT_EQ(captionScale(512), 2);
  EXPECT_EQ(captionScale(1024), 4);
  EXPECT_EQ(captionScale(8192), 4);
  EXPECT_EQ(captionHeight(2, 64), 1 + 2 * kGlyphHeight);
  EXPECT_EQ(captionHeight(2, 512), 2 * (1 + 2 * kGlyphHeight));
  EXPECT_EQ(captionHeight(0, 64), 0);
  EXPECT_EQ(captionHeight(2, kMinCaptionWidth - 1), 0);
  EXPECT_GT(captionHeight(1, kMinCaptionWidth), 0);
}

TEST(Caption, TextIsClippedToWholeGlyphs) {
  RgbImage image;
  image.width = 40;
  image.height = 10;
  image.pixels.assign(40 * 10 * 3, 0);
  // 20 pixels hold glyphs at 0, 6 and 12 (each 5 wide); the 4th would end
  // at 23.
  EXPECT_EQ(drawText(image, 1, 1, 20, "HHHHHH", 1), 3);
  for (int k = 0; k < 3; ++k)
    for (int y = 0; y < 7; ++y) {
      EXPECT_EQ(at(image, 1 + 6 * k, 1 + y), 255) << k << " " << y;
      EXPECT_EQ(at(image, 1 + 6 * k + 5, 1 + y), 0) << k << " " << y;
    }
  EXPECT_EQ(whiteIn(image, 21, 0, 40, 10), 0);
  EXPECT_EQ(whiteIn(image, 0, 0, 40, 1), 0);
  EXPECT_EQ(whiteIn(image, 0, 8, 40, 10), 0);
  // Scale 2: every font pixel is a 2x2 square; the bottom of the image
  // clips nothing partially (a line that does not fit is not drawn).
  RgbImage big;
  big.width = 40;
  big.height = 14;
  big.pixels.assign(40 * 14 * 3, 0);
  EXPECT_EQ(drawText(big, 0, 0, 40, "H", 2), 1);
  EXPECT_EQ(whiteIn(big, 0, 0, 2, 14), 2 * 14);
  EXPECT_EQ(whiteIn(big, 2, 6, 8, 8), 6 * 2); // the bar, rows 6 and 7
  EXPECT_EQ(whiteIn(big, 2, 0, 8, 6), 0);
  EXPECT_EQ(drawText(big, 0, 1, 40, "H", 2), 0);
  EXPECT_EQ(drawText(big, 0, 0, 9, "H", 2), 0); // 10 pixels wide
}

TEST(Caption, GridCellsGrowByTheCaption) {
  const int64_t h = 5, w = 30, gap = 2;
  HostTensor images = gray(5, h, w); // 3 columns, 2 rows
  Captions captions(5);
  for (int n = 0; n < 5; ++n) // up to 5 glyphs: 29 pixels, no widening
    captions[n] = {"H", std::string(n + 1, 'H')};
  captions[2] = {"H"}; // one line
  absl::StatusOr<RgbImage> plain = imageGrid(images, gap);
  absl::StatusOr<RgbImage> grid = imageGrid(images, gap, captions);
  ASSERT_TRUE(plain.ok() && grid.ok()) << grid.status();
  const int64_t ch = 1 + 2 * kGlyphHeight, cellH = h + ch;
  // Captioned cells are a glyph (6 pixels) apart, not `gap`.
  const int64_t gapX = kGlyphWidth;
  EXPECT_EQ(plain->width, 3 * w + 2 * gap);
  EXPECT_EQ(grid->width, 3 * w + 2 * gapX);
  EXPECT_EQ(grid->height, 2 * cellH + gap);
  EXPECT_EQ(plain->height, 2 * h + gap);
  for (int64_t n = 0; n < 6; ++n) {
    const int64_t x0 = (n % 3) * (w + gapX), y0 = (n / 3) * (cellH + gap);
    // The image in its cell: row 0 as before, row 1 moved down by the
    // caption.
    for (int64_t y = 0; y < h && n < 5; ++y)
      for (int64_t x = 0; x < w; ++x)
        ASSERT_EQ(at(*grid, x0 + x, y0 + y), 128) << n;
    if (n == 5) { // the empty cell stays black
      EXPECT_EQ(whiteIn(*grid, x0, y0, x0 + w, y0 + cellH), 0);
      continue;
    }
    // One row of padding, then line 1 ("H") and line 2 (n + 1 H's).
    const int64_t line1 = y0 + h + 1, line2 = line1 + kGlyphHeight;
    EXPECT_EQ(whiteIn(*grid, x0, y0 + h, x0 + w, line1), 0) << n;
    int64_t glyphs2 = n == 2 ? 0 : n + 1;
    for (int64_t k = 0; k < 5; ++k) {
      EXPECT_EQ(whiteIn(*grid, x0 + 6 * k, line1, x0 + 6 * k + 1, line1 + 7),
                k < 1 ? 7 : 0)
          << n << " " << k;
      EXPECT_EQ(whiteIn(*grid, x0 + 6 * k, line2, x0 + 6 * k + 1, line2 + 7),
                k < glyphs2 ? 7 : 0)
          << n << " " << k;
    }
    // H has 7 + 7 + 3 pixels.
    EXPECT_EQ(whiteIn(*grid, x0, y0 + h, x0 + w, y0 + cellH),
              17 * (1 + glyphs2))
        << n;
    // Nothing in the gaps.
    if (n % 3 != 2) {
      EXPECT_EQ(whiteIn(*grid, x0 + w, y0, x0 + w + gapX, y0 + cellH), 0);
    }
  }
}

TEST(Caption, CellsWidenForLongLinesUpToAMaximum) {
  const int64_t h = 3, w = 30, gap = 2;
  // 10 glyphs and 40 (clipped to kMaxCaptionGlyphs = 24): the cells are
  // 24 glyphs wide, 24 * 6 - 1 = 143 pixels, the images centered.
  absl::StatusOr<RgbImage> grid = imageGrid(
      gray(2, h, w), gap, {{std::string(10, 'H')}, {std::string(40, 'H')}});
  ASSERT_TRUE(grid.ok()) << grid.status();
  const int64_t cellW = 143, cellH = h + 1 + kGlyphHeight;
  EXPECT_EQ(captionCellWidth(w, 40), cellW);
  EXPECT_EQ(captionCellWidth(w, 10), 59);
  EXPECT_EQ(captionCellWidth(w, 5), w);
  EXPECT_EQ(captionCellWidth(1024, 300), 1024);
  EXPECT_EQ(grid->width, 2 * cellW + kGlyphWidth);
  EXPECT_EQ(grid->height, cellH);
  for (int64_t n = 0; n < 2; ++n) {
    const int64_t x0 = n * (cellW + kGlyphWidth), ix = x0 + (cellW - w) / 2;
    for (int64_t y = 0; y < h; ++y) {
      EXPECT_EQ(at(*grid, ix - 1, y), 0);
      EXPECT_EQ(at(*grid, ix, y), 128);
      EXPECT_EQ(at(*grid, ix + w - 1, y), 128);
      EXPECT_EQ(at(*grid, ix + w, y), 0);
    }
    int64_t glyphs = 0;
    for (int64_t k = 0; k * 6 < cellW; ++k)
      glyphs += whiteIn(*grid, x0 + 6 * k, h + 1, x0 + 6 * k + 1, h + 8) == 7;
    EXPECT_EQ(glyphs, n == 0 ? 10 : 24) << n;
    EXPECT_EQ(whiteIn(*grid, x0, h, x0 + cellW, cellH), 17 * glyphs);
  }
}

TEST(Caption, NarrowImagesAndWrongCounts) {
  // Narrower than kMinCaptionWidth: the grid has no captions.
  HostTensor narrow = gray(4, 2, 2);
  absl::StatusOr<RgbImage> g = imageGrid(narrow, 2, Captions(4, {"prompt 1"}));
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->width, 6);
  EXPECT_EQ(g->height, 6);
  // Captions for 3 of 4 images.
  g = imageGrid(gray(4, 2, 30), 2, Captions(3, {"x"}));
  EXPECT_EQ(g.status().message(),
            "images: expected no captions or one list per image (4), found 3");
  // Empty lists: no room is made.
  g = imageGrid(gray(1, 2, 30), 2, Captions(1));
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->height, 2);
}

} // namespace
} // namespace omni::image
