//===- CpuConv.cpp - Direct f32 convolution on the CPU --------------------===//
//
// See CpuConv.h. The layout of one work item (image n, output rows [y0, y0 +
// rows)), per block of input channels [c0, c0 + cn):
//   band[c - c0][r][0, wp) = x[n, c, y0 + r - padH, -padW .. w + padW)
//     (zeros outside the image), r in [0, rows + kh - 1), wp = w + 2 padW;
//   packed weights pw[ob][c][ky][kx][4] = w[4 ob + i, c, ky, kx] (zeros past
//     the last output channel).
// Output pixel (y, x) then reads band[c][y - y0 + ky][x + kx] for every tap:
// an unaligned load at a constant offset, no border tests. The first channel
// block starts the accumulators at zero, the later ones from the partial
// sums stored in y (a store and reload of an f32 is exact, so the blocks
// change nothing about the order of the sum).
//
//===----------------------------------------------------------------------===//

#include "runtime/hal/drivers/cpu/CpuConv.h"

#include <algorithm>
#include <cstring>
#include <immintrin.h>
#include <vector>

namespace omni::hal::cpu {
namespace {

/// Output channels per register block.
constexpr int kBlock = 4;
/// Floats of one band of input rows (a block of channels): about 256 KiB,
/// half the L2 of the CPUs this was measured on.
constexpr int64_t kBandFloats = int64_t(1) << 16;
/// Output rows per work item.
constexpr int64_t kBandRows = 4;

struct Geometry {
  int64_t wp;       // padded row width
  int64_t rows;     // output rows per work item (the last may have fewer)
  int64_t rowsIn;   // input rows of a band: rows + kh - 1
  int64_t channels; // input channels per band
  int64_t bands;    // work items per image
  int64_t blocks;   // output channel blocks
};

Geometry geometryOf(const Conv2dParams &p) {
  Geometry g;
  g.wp = p.w + 2 * p.padW;
  g.rows = std::min<int64_t>(p.outH, kBandRows);
  g.rowsIn = g.rows + p.kh - 1;
  g.channels = std::clamp<int64_t>(
      kBandFloats / std::max<int64_t>(g.rowsIn * g.wp, 1), 1, p.c);
  g.bands = (p.outH + g.rows - 1) / g.rows;
  g.blocks = (p.o + kBlock - 1) / kBlock;
  return g;
}

/// pw[ob][c][ky][kx][kBlock] from w[o][c][ky][kx].
std::vector<float> packWeights(const Conv2dParams &p, const float *w,
                               int64_t blocks) {
  const int64_t taps = p.kh * p.kw;
  std::vector<float> packed(static_cast<size_t>(blocks * p.c * taps * kBlock),
                            0.0f);
  for (int64_t o = 0; o < p.o; ++o)
    for (int64_t c = 0; c < p.c; ++c)
      for (int64_t t = 0; t < taps; ++t)
        packed[(((o / kBlock) * p.c + c) * taps + t) * kBlock + o % kBlock] =
            w[(o * p.c + c) * taps + t];
  return packed;
}

/// The band of input rows [y0 - padH, y0 - padH + rowsIn) of channels [c0,
/// c0 + cn) of image `x` (x points at [n, 0, 0, 0]), zero-padded.
void fillBand(const Conv2dParams &p, const Geometry &g, const float *x,
              int64_t y0, int64_t c0, int64_t cn, float *band) {
  for (int64_t c = 0; c < cn; ++c) {
    const float *plane = x + (c0 + c) * p.h * p.w;
    for (int64_t r = 0; r < g.rowsIn; ++r) {
      float *dst = band + (c * g.rowsIn + r) * g.wp;
      const int64_t iy = y0 + r - p.padH;
      if (iy < 0 || iy >= p.h) {
        std::fill(dst, dst + g.wp, 0.0f);
        continue;
      }
      std::fill(dst, dst + p.padW, 0.0f);
      std::memcpy(dst + p.padW, plane + iy * p.w, sizeof(float) * p.w);
      std::fill(dst + p.padW + p.w, dst + g.wp, 0.0f);
    }
  }
}

/// The sums of kBlock output channels (oCount of them real) over 8 * NV
/// pixels of one output row, the last vector `mask`ed when Masked.
/// `in` is the band at (channel 0, row y - y0, column x0), `wq` the packed
/// weights of the block at channel c0, `out` y at (o0, y, x0).
template <int NV, bool Masked>
__attribute__((target("avx2,fma"))) void
tile(const float *in, int64_t chanStride, int64_t wp, const float *wq,
     int64_t cn, int64_t kh, int64_t kw, float *out, int64_t outStride,
     int oCount, bool accumulate, __m256i mask) {
  __m256 acc[kBlock][NV];
  for (int o = 0; o < kBlock; ++o)
    for (int j = 0; j < NV; ++j) {
      if (accumulate && o < oCount) {
        const float *src = out + o * outStride + 8 * j;
        acc[o][j] = (Masked && j == NV - 1) ? _mm256_maskload_ps(src, mask)
                                            : _mm256_loadu_ps(src);
      } else {
        acc[o][j] = _mm256_setzero_ps();
      }
    }
  for (int64_t c = 0; c < cn; ++c) {
    for (int64_t ky = 0; ky < kh; ++ky) {
      const float *row = in + c * chanStride + ky * wp;
      const float *wt = wq + (c * kh + ky) * kw * kBlock;
      for (int64_t kx = 0; kx < kw; ++kx) {
        __m256 v[NV];
        for (int j = 0; j < NV; ++j)
          v[j] = (Masked && j == NV - 1)
                     ? _mm256_maskload_ps(row + kx + 8 * j, mask)
                     : _mm256_loadu_ps(row + kx + 8 * j);
        for (int o = 0; o < kBlock; ++o) {
          const __m256 b = _mm256_broadcast_ss(wt + kx * kBlock + o);
          for (int j = 0; j < NV; ++j)
            acc[o][j] = _mm256_fmadd_ps(b, v[j], acc[o][j]);
        }
      }
    }
  }
  for (int o = 0; o < oCount; ++o)
    for (int j = 0; j < NV; ++j) {
      float *dst = out + o * outStride + 8 * j;
      if (Masked && j == NV - 1)
        _mm256_maskstore_ps(dst, mask, acc[o][j]);
      else
        _mm256_storeu_ps(dst, acc[o][j]);
    }
}

/// One output row of one channel block over all its pixels.
__attribute__((target("avx2,fma"))) void
rowOfBlock(const float *in, int64_t chanStride, int64_t wp, const float *wq,
           int64_t cn, int64_t kh, int64_t kw, float *out, int64_t outStride,
           int64_t outW, int oCount, bool accumulate) {
  const __m256i none = _mm256_setzero_si256();
  int64_t x0 = 0;
  for (; x0 + 16 <= outW; x0 += 16)
    tile<2, false>(in + x0, chanStride, wp, wq, cn, kh, kw, out + x0, outStride,
                   oCount, accumulate, none);
  if (x0 + 8 <= outW) {
    tile<1, false>(in + x0, chanStride, wp, wq, cn, kh, kw, out + x0, outStride,
                   oCount, accumulate, none);
    x0 += 8;
  }
  if (x0 < outW) {
    alignas(32) int32_t lanes[8];
    for (int i = 0; i < 8; ++i)
      lanes[i] = x0 + i < outW ? -1 : 0;
    const __m256i mask =
        _mm256_load_si256(reinterpret_cast<const __m256i *>(lanes));
    tile<1, true>(in + x0, chanStride, wp, wq, cn, kh, kw, out + x0, outStride,
                  oCount, accumulate, mask);
  }
}

} // namespace

bool conv2dDirectApplies(const Conv2dParams &p) {
  static const bool cpu =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return cpu && p.strideH == 1 && p.strideW == 1 && p.dilationH == 1 &&
         p.dilationW == 1 && p.c > 0 && p.kh > 0 && p.kw > 0 && p.padH >= 0 &&
         p.padW >= 0 && p.outH == p.h + 2 * p.padH - p.kh + 1 &&
         p.outW == p.w + 2 * p.padW - p.kw + 1;
}

void conv2dDirect(const Conv2dParams &p, const float *x, const float *w,
                  float *y, ThreadPool &pool) {
  if (p.n == 0 || p.o == 0 || p.outH <= 0 || p.outW <= 0)
    return;
  const Geometry g = geometryOf(p);
  const std::vector<float> packed = packWeights(p, w, g.blocks);
  const int64_t taps = p.kh * p.kw;
  const int64_t pixels = p.outH * p.outW;
  pool.parallelFor(p.n * g.bands, [&](int64_t i0, int64_t i1) {
    std::vector<float> band(static_cast<size_t>(g.channels * g.rowsIn * g.wp));
    for (int64_t item = i0; item < i1; ++item) {
      const int64_t n = item / g.bands;
      const int64_t y0 = (item % g.bands) * g.rows;
      const int64_t rows = std::min(g.rows, p.outH - y0);
      const float *image = x + n * p.c * p.h * p.w;
      for (int64_t c0 = 0; c0 < p.c; c0 += g.channels) {
        const int64_t cn = std::min(g.channels, p.c - c0);
        fillBand(p, g, image, y0, c0, cn, band.data());
        for (int64_t ob = 0; ob < g.blocks; ++ob) {
          const int64_t o0 = ob * kBlock;
          const int oCount =
              static_cast<int>(std::min<int64_t>(kBlock, p.o - o0));
          const float *wq = packed.data() + (ob * p.c + c0) * taps * kBlock;
          for (int64_t r = 0; r < rows; ++r)
            rowOfBlock(band.data() + r * g.wp, g.rowsIn * g.wp, g.wp, wq, cn,
                       p.kh, p.kw,
                       y + (n * p.o + o0) * pixels + (y0 + r) * p.outW, pixels,
                       p.outW, oCount, c0 > 0);
        }
      }
    }
  });
}

} // namespace omni::hal::cpu
