//===- PngTest.cpp - Sample grids as PNG files ----------------------------===//
//
// Decodes with libpng's low-level reader (not the simplified API the library
// uses) so the encoder is checked independently.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/image/Png.h"

#include "runtime/train/rewards/Rewards.h"

#include "gtest/gtest.h"

#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <fstream>
#include <png.h>
#include <sstream>
#include <unistd.h>

namespace omni::image {
namespace {

/// Reads an 8-bit RGB PNG file with libpng's classic API.
bool readPngFile(const std::string &path, RgbImage &image) {
  FILE *f = std::fopen(path.c_str(), "rb");
  if (!f)
    return false;
  png_structp png =
      png_create_read_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    std::fclose(f);
    return false;
  }
  png_init_io(png, f);
  png_read_png(png, info, PNG_TRANSFORM_IDENTITY, nullptr);
  bool ok = png_get_bit_depth(png, info) == 8 &&
            png_get_color_type(png, info) == PNG_COLOR_TYPE_RGB;
  if (ok) {
    image.width = png_get_image_width(png, info);
    image.height = png_get_image_height(png, info);
    png_bytepp rows = png_get_rows(png, info);
    image.pixels.clear();
    for (int64_t y = 0; y < image.height; ++y)
      image.pixels.insert(image.pixels.end(), rows[y],
                          rows[y] + image.width * 3);
  }
  png_destroy_read_struct(&png, &info, nullptr);
  std::fclose(f);
  return ok;
}

HostTensor batch(int64_t b, int64_t h, int64_t w) {
  std::vector<double> v;
  for (int64_t i = 0; i < b * 3 * h * w; ++i)
    v.push_back(std::fmod(i * 0.1373, 1.2) - 0.1); // some outside [0, 1]
  return HostTensor::fromDoubles(DType::F32, {b, 3, h, w}, v);
}

uint8_t expected(const HostTensor &t, int64_t n, int64_t c, int64_t y,
                 int64_t x) {
  const auto &s = t.shape();
  double v = t.floats()[((n * 3 + c) * s[2] + y) * s[3] + x];
  double r = std::nearbyint(255.0 * std::min(1.0, std::max(0.0, v)));
  return static_cast<uint8_t>(r);
}

TEST(Png, GridLayoutPixelsAndGaps) {
  HostTensor images = batch(5, 3, 4); // 3 columns, 2 rows
  absl::StatusOr<RgbImage> grid = imageGrid(images);
  ASSERT_TRUE(grid.ok()) << grid.status();
  EXPECT_EQ(grid->width, 3 * 4 + 2 * 2);
  EXPECT_EQ(grid->height, 2 * 3 + 1 * 2);

  std::string path =
      ::testing::TempDir() + "/" + std::to_string(::getpid()) + ".grid.png";
  ASSERT_TRUE(writePng(path, *grid).ok());
  RgbImage decoded;
  ASSERT_TRUE(readPngFile(path, decoded));
  ASSERT_EQ(decoded.width, grid->width);
  ASSERT_EQ(decoded.height, grid->height);
  int64_t checked = 0;
  for (int64_t y = 0; y < decoded.height; ++y)
    for (int64_t x = 0; x < decoded.width; ++x) {
      int64_t col = x / 6, row = y / 5, ix = x % 6, iy = y % 5;
      int64_t n = row * 3 + col;
      bool gap = ix >= 4 || iy >= 3 || n >= 5;
      for (int64_t c = 0; c < 3; ++c) {
        uint8_t got = decoded.pixels[(y * decoded.width + x) * 3 + c];
        uint8_t want = gap ? 0 : expected(images, n, c, iy, ix);
        ASSERT_EQ(got, want) << "x " << x << " y " << y << " c " << c;
        checked += !gap;
      }
    }
  EXPECT_EQ(checked, 5 * 3 * 3 * 4);
  // The simplified-API decoder agrees.
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  absl::StatusOr<RgbImage> again = decodePng(bytes.str());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->pixels, decoded.pixels);
}

TEST(Png, RoundingIsHalfToEvenLikeTheRewards) {
  // Values at the .5 ties of 255 v quantize exactly as the rewards do.
  HostTensor t = HostTensor::fromDoubles(DType::F32, {1, 3, 1, 1},
                                         {0.5 / 255, 1.5 / 255, 254.5 / 255});
  absl::StatusOr<RgbImage> grid = imageGrid(t);
  ASSERT_TRUE(grid.ok());
  for (int c = 0; c < 3; ++c)
    EXPECT_EQ(grid->pixels[c],
              rewards::quantizePixel(static_cast<float>(t.floats()[c])));
  EXPECT_EQ(grid->width, 1);
  EXPECT_EQ(grid->height, 1);
}

TEST(Png, SquareCountsFillTheGrid) {
  absl::StatusOr<RgbImage> g4 = imageGrid(batch(4, 1, 1), 2);
  ASSERT_TRUE(g4.ok());
  EXPECT_EQ(g4->width, 4);
  EXPECT_EQ(g4->height, 4);
  absl::StatusOr<RgbImage> g10 = imageGrid(batch(10, 2, 2), 0);
  ASSERT_TRUE(g10.ok());
  EXPECT_EQ(g10->width, 8);  // 4 columns
  EXPECT_EQ(g10->height, 6); // 3 rows
}

TEST(Png, Errors) {
  absl::StatusOr<RgbImage> g = imageGrid(HostTensor(DType::F32, {2, 4, 3, 3}));
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().message(),
            "images: expected a float tensor [B, 3, H, W] with B, H, W >= 1, "
            "found tensor<2x4x3x3xf32>");
  g = imageGrid(HostTensor(DType::I64, {1, 3, 2, 2}));
  ASSERT_FALSE(g.ok());
  absl::StatusOr<RgbImage> d = decodePng("not a png", "x.png");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().message().substr(0, 24), "x.png: not a readable PN");
  RgbImage bad;
  bad.width = 2;
  bad.height = 2;
  bad.pixels.resize(5);
  EXPECT_FALSE(encodePng(bad).ok());
  // Writing into a missing folder fails cleanly.
  absl::StatusOr<RgbImage> ok = imageGrid(batch(1, 1, 1));
  ASSERT_TRUE(ok.ok());
  absl::Status s = writePng("/nonexistent/dir/x.png", *ok);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("/nonexistent/dir/x.png"),
            absl::string_view::npos);
}

} // namespace
} // namespace omni::image
