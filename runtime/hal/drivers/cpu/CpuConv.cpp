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

/// Floats of one band of input rows (a block of channels): about 256 KiB,
/// half the L2 of the CPUs this was measured on.
constexpr int64_t kBandFloats = int64_t(1) << 16;
/// Floats of one block's weights over a band's channels: 16 KiB, half an
/// L1, so that the broadcasts of the inner loop hit L1.
constexpr int64_t kWeightFloats = int64_t(1) << 12;
/// More input channels than this go to im2col + sgemm: measured (bench/
/// ConvBench.cpp, 3x3) the direct loop is 2x faster at 128 channels and 15%
/// slower at 512.
constexpr int64_t kMaxChannels = 256;
/// Output rows per work item.
constexpr int64_t kBandRows = 4;

struct Geometry {
  int64_t wp;       // padded row width
  int64_t rows;     // output rows per work item (the last may have fewer)
  int64_t rowsIn;   // input rows of a band: rows + kh - 1
  int64_t channels; // input channels per band
  int64_t bands;    // work items per image
};

/// Output channels [o0, o0 + count) computed together, `size` (6 or 4)
/// accumulator rows, their packed weights at `offset`.
struct Block {
  int64_t o0, size, count, offset;
};

/// Blocks of 6 output channels (12 accumulators of 16 pixels) and of 4 for
/// what 6 does not divide, so that no lane is wasted when o is even and at
/// least 4: 32 = 6 + 6 + 6 + 6 + 4 + 4.
std::vector<Block> planBlocks(int64_t o, int64_t c, int64_t taps) {
  int64_t sixes = o / 6, fours = 0;
  for (int64_t f = 0; f <= 2; ++f)
    if (o >= 4 * f && (o - 4 * f) % 6 == 0) {
      sixes = (o - 4 * f) / 6, fours = f;
      break;
    }
  std::vector<Block> blocks;
  int64_t o0 = 0, offset = 0;
  auto add = [&](int64_t size, int64_t count) {
    blocks.push_back({o0, size, count, offset});
    o0 += count;
    offset += size * c * taps;
  };
  for (int64_t i = 0; i < sixes; ++i)
    add(6, 6);
  for (int64_t i = 0; i < fours; ++i)
    add(4, 4);
  if (o0 < o) // o odd, or 2: one partly used block
    add(o - o0 == 5 ? 6 : 4, o - o0);
  return blocks;
}

Geometry geometryOf(const Conv2dParams &p) {
  Geometry g;
  g.wp = p.w + 2 * p.padW;
  g.rows = std::min<int64_t>(p.outH, kBandRows);
  g.rowsIn = g.rows + p.kh - 1;
  g.channels = std::clamp<int64_t>(
      std::min(kBandFloats / std::max<int64_t>(g.rowsIn * g.wp, 1),
               kWeightFloats / (6 * p.kh * p.kw)),
      1, p.c);
  g.bands = (p.outH + g.rows - 1) / g.rows;
  return g;
}

/// Block b's weights at b.offset: [c][ky][kx][b.size], zeros past b.count.
std::vector<float> packWeights(const Conv2dParams &p, const float *w,
                               const std::vector<Block> &blocks) {
  const int64_t taps = p.kh * p.kw;
  const Block &last = blocks.back();
  std::vector<float> packed(
      static_cast<size_t>(last.offset + last.size * p.c * taps), 0.0f);
  for (const Block &b : blocks)
    for (int64_t i = 0; i < b.count; ++i)
      for (int64_t c = 0; c < p.c; ++c)
        for (int64_t t = 0; t < taps; ++t)
          packed[b.offset + (c * taps + t) * b.size + i] =
              w[((b.o0 + i) * p.c + c) * taps + t];
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

/// The sums of OB output channels (oCount of them real) over 8 * NV pixels
/// of one output row, the last vector `mask`ed when Masked; KH, KW the
/// kernel size (0: kh, kw at run time). `in` is the band at (channel 0, row
/// y - y0, column x0), `wq` the packed weights of the block at channel c0,
/// `out` y at (o0, y, x0). The loops over o and j are unrolled so that the
/// OB x NV accumulators live in registers.
template <int OB, int NV, bool Masked, int KH, int KW>
__attribute__((target("avx2,fma"))) void
tile(const float *in, int64_t chanStride, int64_t wp, const float *wq,
     int64_t cn, int64_t khAtRun, int64_t kwAtRun, float *out,
     int64_t outStride, int oCount, bool accumulate, __m256i mask) {
  const int64_t kh = KH ? KH : khAtRun, kw = KW ? KW : kwAtRun;
  __m256 acc[OB][NV];
#pragma GCC unroll 8
  for (int o = 0; o < OB; ++o)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) {
      const float *src = out + o * outStride + 8 * j;
      if (!accumulate || o >= oCount)
        acc[o][j] = _mm256_setzero_ps();
      else if (Masked && j == NV - 1)
        acc[o][j] = _mm256_maskload_ps(src, mask);
      else
        acc[o][j] = _mm256_loadu_ps(src);
    }
  for (int64_t c = 0; c < cn; ++c) {
    const float *plane = in + c * chanStride;
    const float *wc = wq + c * kh * kw * OB;
#pragma GCC unroll 3
    for (int64_t ky = 0; ky < kh; ++ky) {
#pragma GCC unroll 3
      for (int64_t kx = 0; kx < kw; ++kx) {
        const float *row = plane + ky * wp + kx;
        const float *wt = wc + (ky * kw + kx) * OB;
        __m256 v[NV];
#pragma GCC unroll 4
        for (int j = 0; j < NV; ++j)
          v[j] = (Masked && j == NV - 1) ? _mm256_maskload_ps(row + 8 * j, mask)
                                         : _mm256_loadu_ps(row + 8 * j);
#pragma GCC unroll 8
        for (int o = 0; o < OB; ++o) {
          const __m256 b = _mm256_broadcast_ss(wt + o);
#pragma GCC unroll 4
          for (int j = 0; j < NV; ++j)
            acc[o][j] = _mm256_fmadd_ps(b, v[j], acc[o][j]);
        }
      }
    }
  }
#pragma GCC unroll 8
  for (int o = 0; o < OB; ++o)
#pragma GCC unroll 4
    for (int j = 0; j < NV; ++j) {
      if (o >= oCount)
        continue;
      float *dst = out + o * outStride + 8 * j;
      if (Masked && j == NV - 1)
        _mm256_maskstore_ps(dst, mask, acc[o][j]);
      else
        _mm256_storeu_ps(dst, acc[o][j]);
    }
}

/// The arguments of tile that do not change along a row.
struct RowArgs {
  const float *in;
  int64_t chanStride, wp;
  const float *wq;
  int64_t cn, kh, kw;
  float *out;
  int64_t outStride, outW;
  int oCount;
  bool accumulate;
};

/// One output row of one block of OB channels over all its pixels.
template <int OB, int KH, int KW>
__attribute__((target("avx2,fma"))) void rowOfBlock(const RowArgs &a) {
  const __m256i none = _mm256_setzero_si256();
  int64_t x0 = 0;
  for (; x0 + 16 <= a.outW; x0 += 16)
    tile<OB, 2, false, KH, KW>(a.in + x0, a.chanStride, a.wp, a.wq, a.cn, a.kh,
                               a.kw, a.out + x0, a.outStride, a.oCount,
                               a.accumulate, none);
  if (x0 + 8 <= a.outW) {
    tile<OB, 1, false, KH, KW>(a.in + x0, a.chanStride, a.wp, a.wq, a.cn, a.kh,
                               a.kw, a.out + x0, a.outStride, a.oCount,
                               a.accumulate, none);
    x0 += 8;
  }
  if (x0 < a.outW) {
    alignas(32) int32_t lanes[8];
    for (int i = 0; i < 8; ++i)
      lanes[i] = x0 + i < a.outW ? -1 : 0;
    const __m256i mask =
        _mm256_load_si256(reinterpret_cast<const __m256i *>(lanes));
    tile<OB, 1, true, KH, KW>(a.in + x0, a.chanStride, a.wp, a.wq, a.cn, a.kh,
                              a.kw, a.out + x0, a.outStride, a.oCount,
                              a.accumulate, mask);
  }
}

template <int OB> void rowOfBlockAnyKernel(const RowArgs &a) {
  if (a.kh == 3 && a.kw == 3)
    rowOfBlock<OB, 3, 3>(a);
  else if (a.kh == 1 && a.kw == 1)
    rowOfBlock<OB, 1, 1>(a);
  else
    rowOfBlock<OB, 0, 0>(a);
}

} // namespace

bool conv2dDirectApplies(const Conv2dParams &p) {
  static const bool cpu =
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool unpadded1x1 = p.kh == 1 && p.kw == 1 && p.padH == 0 && p.padW == 0;
  return cpu && p.strideH == 1 && p.strideW == 1 && p.dilationH == 1 &&
         p.dilationW == 1 && p.c > 0 && p.c <= kMaxChannels && p.kh > 0 &&
         p.kw > 0 && !unpadded1x1 && p.padH >= 0 && p.padW >= 0 &&
         p.outH == p.h + 2 * p.padH - p.kh + 1 &&
         p.outW == p.w + 2 * p.padW - p.kw + 1;
}

void conv2dDirect(const Conv2dParams &p, const float *x, const float *w,
                  float *y, ThreadPool &pool) {
  if (p.n == 0 || p.o == 0 || p.outH <= 0 || p.outW <= 0)
    return;
  const Geometry g = geometryOf(p);
  const int64_t taps = p.kh * p.kw;
  const std::vector<Block> blocks = planBlocks(p.o, p.c, taps);
  const std::vector<float> packed = packWeights(p, w, blocks);
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
        for (const Block &b : blocks) {
          RowArgs a{nullptr,
                    g.rowsIn * g.wp,
                    g.wp,
                    packed.data() + b.offset + c0 * taps * b.size,
                    cn,
                    p.kh,
                    p.kw,
                    nullptr,
                    pixels,
                    p.outW,
                    static_cast<int>(b.count),
                    c0 > 0};
          for (int64_t r = 0; r < rows; ++r) {
            a.in = band.data() + r * g.wp;
            a.out = y + (n * p.o + b.o0) * pixels + (y0 + r) * p.outW;
            if (b.size == 6)
              rowOfBlockAnyKernel<6>(a);
            else
              rowOfBlockAnyKernel<4>(a);
          }
        }
      }
    }
  });
}

} // namespace omni::hal::cpu
