//===- ConvBench.cpp - f32 conv2d methods against today's path ------------===//
//
// The convolutions of the autoencoder_kl decoder of the tiny and small
// recipes (32 images; tiny decodes 16x16 latents to 32x32, small 32x32 to
// 64x64, 32 channels; docs/performance.md "CPU speed (issue 15):
// convolutions and the decode phase"), each method's median time next to
// the baseline measured in the same run, interleaved repetition by
// repetition so that the load of a shared machine falls on all of them:
//   base     the im2col + OpenBLAS path of the cpu driver before issue 15
//            (a copy: per-element im2col parallel over rows, one threaded
//            sgemm per image);
//   im2col   row-segment im2col + one threaded sgemm per image (the
//            driver's fallback path now);
//   im2col1  the same, images parallel over the ThreadPool, each with
//            single-threaded sgemm (openblas_set_num_threads(1));
//   dnnl     oneDNN's convolution_forward, NCHW in and out, the filter
//            reordered to oneDNN's blocked layout each call (one reorder);
//   dnnlblk  oneDNN with its preferred layouts: three reorders (input,
//            filter, output) each call;
//   direct   conv2dDirect (runtime/hal/drivers/cpu/CpuConv.cpp);
//   driver   runConv2d, what the cpu driver runs now (direct where
//            conv2dDirectApplies, im2col + sgemm, or for an unpadded 1x1
//            sgemm on the input).
// Ratios are method / base (< 1: faster). The last rows weight each shape
// by how often the decoder runs it. Not a test: nothing is asserted.
// Build: ninja -C build omni-bench-conv; run build/bin/omni-bench-conv
// [threads] [cpu] (default 2 threads, wall-clock time; `cpu`: the process's
// CPU time instead, which a loaded machine disturbs less: with 1 thread
// (OMP_NUM_THREADS=1 for oneDNN) it is the work of one core).
//
//===----------------------------------------------------------------------===//

#include "runtime/hal/drivers/cpu/CpuConv.h"
#include "runtime/hal/drivers/cpu/CpuLibraries.h"

#ifdef OMNI_BENCH_DNNL
#include "oneapi/dnnl/dnnl.hpp"
#endif

#include <algorithm>
#include <cblas.h>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <random>
#include <string>
#include <vector>

using omni::hal::Conv2dParams;
using omni::hal::cpu::ThreadPool;
using Clock = std::chrono::steady_clock;

extern "C" void openblas_set_num_threads(int);
extern "C" int openblas_get_num_threads(void);

namespace {

void sgemm(int m, int n, int k, const float *a, const float *b, float *c,
           int ldc) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b,
              n, 0.0f, c, ldc);
}

/// The cpu driver's conv2d before issue 15 (f32).
void base(const Conv2dParams &p, const float *input, const float *filter,
          float *out, ThreadPool &pool) {
  const int64_t taps = p.kh * p.kw, rows = p.c * taps, pixels = p.outH * p.outW;
  const int64_t tile = std::max<int64_t>(
      1, std::min<int64_t>(pixels, (int64_t(1) << 22) / rows));
  std::vector<float> col(rows * tile);
  for (int64_t n = 0; n < p.n; ++n) {
    const float *x = input + n * p.c * p.h * p.w;
    float *y = out + n * p.o * pixels;
    for (int64_t p0 = 0; p0 < pixels; p0 += tile) {
      const int64_t width = std::min(tile, pixels - p0);
      pool.parallelFor(rows, [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          const int64_t ci = r / taps, ky = (r / p.kw) % p.kh, kx = r % p.kw;
          const float *plane = x + ci * p.h * p.w;
          float *dst = col.data() + r * width;
          for (int64_t j = 0; j < width; ++j) {
            const int64_t pix = p0 + j;
            const int64_t iy = (pix / p.outW) - p.padH + ky;
            const int64_t ix = (pix % p.outW) - p.padW + kx;
            dst[j] = (iy >= 0 && iy < p.h && ix >= 0 && ix < p.w)
                         ? plane[iy * p.w + ix]
                         : 0.0f;
          }
        }
      });
      sgemm(p.o, width, rows, filter, col.data(), y + p0, pixels);
    }
  }
}

/// im2col of image x (stride 1) by row segments, rows [r0, r1).
void im2colRows(const Conv2dParams &p, const float *x, float *col, int64_t r0,
                int64_t r1) {
  const int64_t taps = p.kh * p.kw, pixels = p.outH * p.outW;
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t ci = r / taps, ky = (r / p.kw) % p.kh, kx = r % p.kw;
    const float *plane = x + ci * p.h * p.w;
    float *dst = col + r * pixels;
    const int64_t base = kx - p.padW;
    for (int64_t oy = 0; oy < p.outH; ++oy) {
      float *d = dst + oy * p.outW;
      const int64_t iy = oy - p.padH + ky;
      if (iy < 0 || iy >= p.h) {
        std::fill(d, d + p.outW, 0.0f);
        continue;
      }
      const int64_t lo = std::clamp<int64_t>(-base, 0, p.outW);
      const int64_t hi = std::clamp<int64_t>(p.w - base, lo, p.outW);
      std::fill(d, d + lo, 0.0f);
      std::copy(plane + iy * p.w + base + lo, plane + iy * p.w + base + hi,
                d + lo);
      std::fill(d + hi, d + p.outW, 0.0f);
    }
  }
}

void im2col(const Conv2dParams &p, const float *input, const float *filter,
            float *out, ThreadPool &pool) {
  const int64_t rows = p.c * p.kh * p.kw, pixels = p.outH * p.outW;
  std::vector<float> col(rows * pixels);
  for (int64_t n = 0; n < p.n; ++n) {
    pool.parallelFor(rows, [&](int64_t r0, int64_t r1) {
      im2colRows(p, input + n * p.c * p.h * p.w, col.data(), r0, r1);
    });
    sgemm(p.o, pixels, rows, filter, col.data(), out + n * p.o * pixels,
          pixels);
  }
}

void im2colSingle(const Conv2dParams &p, const float *input,
                  const float *filter, float *out, ThreadPool &pool) {
  const int64_t rows = p.c * p.kh * p.kw, pixels = p.outH * p.outW;
  const int blasThreads = openblas_get_num_threads();
  openblas_set_num_threads(1);
  pool.parallelFor(p.n, [&](int64_t n0, int64_t n1) {
    std::vector<float> col(rows * pixels);
    for (int64_t n = n0; n < n1; ++n) {
      im2colRows(p, input + n * p.c * p.h * p.w, col.data(), 0, rows);
      sgemm(p.o, pixels, rows, filter, col.data(), out + n * p.o * pixels,
            pixels);
    }
  });
  openblas_set_num_threads(blasThreads);
}

#ifdef OMNI_BENCH_DNNL
/// oneDNN's forward convolution; `blocked`: its preferred layouts for the
/// input and output too (reorders in and out), else NCHW in and out.
struct Dnnl {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  dnnl::convolution_forward conv;
  dnnl::convolution_forward::primitive_desc pd;
  dnnl::memory userX, userW, userY, x, w, y;
  bool blocked;
  int reorders = 0;

  Dnnl(const Conv2dParams &p, float *in, float *filter, float *out,
       bool blocked)
      : blocked(blocked) {
    using tag = dnnl::memory::format_tag;
    using dt = dnnl::memory::data_type;
    dnnl::memory::dims xd{p.n, p.c, p.h, p.w}, wd{p.o, p.c, p.kh, p.kw},
        yd{p.n, p.o, p.outH, p.outW};
    dnnl::memory::desc ux(xd, dt::f32, tag::nchw), uw(wd, dt::f32, tag::oihw),
        uy(yd, dt::f32, tag::nchw);
    dnnl::memory::desc ax(xd, dt::f32, blocked ? tag::any : tag::nchw),
        aw(wd, dt::f32, tag::any),
        ay(yd, dt::f32, blocked ? tag::any : tag::nchw);
    dnnl::convolution_forward::desc d(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_auto,
        ax, aw, ay, {1, 1}, {p.padH, p.padW}, {p.padH, p.padW});
    pd = dnnl::convolution_forward::primitive_desc(d, engine);
    conv = dnnl::convolution_forward(pd);
    userX = dnnl::memory(ux, engine, in);
    userW = dnnl::memory(uw, engine, filter);
    userY = dnnl::memory(uy, engine, out);
    auto own = [&](const dnnl::memory::desc &want, dnnl::memory &user) {
      if (want == user.get_desc())
        return user;
      ++reorders;
      return dnnl::memory(want, engine);
    };
    x = own(pd.src_desc(), userX);
    w = own(pd.weights_desc(), userW);
    y = own(pd.dst_desc(), userY);
  }
  std::string impl() const { return pd.impl_info_str(); }
  void run() {
    if (x != userX)
      dnnl::reorder(userX, x).execute(stream, userX, x);
    if (w != userW)
      dnnl::reorder(userW, w).execute(stream, userW, w);
    conv.execute(stream,
                 {{DNNL_ARG_SRC, x}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DST, y}});
    if (y != userY)
      dnnl::reorder(y, userY).execute(stream, y, userY);
    stream.wait();
  }
};
#endif

struct Case {
  const char *name;
  int64_t c, size, o, k, uses; // uses: how often one decode runs it
  int64_t batch = 32;
};

double maxRelError(const std::vector<float> &got,
                   const std::vector<float> &want) {
  double err = 0, scale = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    err = std::max(err, double(std::fabs(got[i] - want[i])));
    scale = std::max(scale, double(std::fabs(want[i])));
  }
  return err / std::max(scale, 1e-30);
}

} // namespace

double now(bool cpu) {
  if (!cpu)
    return std::chrono::duration<double>(Clock::now().time_since_epoch())
        .count();
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

int main(int argc, char **argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const bool cpu = argc > 2 && std::string(argv[2]) == "cpu";
  ThreadPool pool(threads);
  openblas_set_num_threads(threads);
  // The decoder's convolutions (block_out_channels 32,32, layers_per_block
  // 1): conv_in; mid block and up_blocks.0 resnets at the latent size (8);
  // up_blocks.0's upsampler conv and up_blocks.1's resnets at twice it (5);
  // conv_out.
  const Case cases[] = {
      {"tiny conv_in 16->32 16x16", 16, 16, 32, 3, 1},
      {"tiny 32->32 16x16", 32, 16, 32, 3, 8},
      {"tiny 32->32 32x32", 32, 32, 32, 3, 5},
      {"tiny conv_out 32->3 32x32", 32, 32, 3, 3, 1},
      {"small conv_in 16->32 32x32", 16, 32, 32, 3, 1},
      {"small 32->32 32x32", 32, 32, 32, 3, 8},
      {"small 32->32 64x64", 32, 64, 32, 3, 5},
      {"small conv_out 32->3 64x64", 32, 64, 3, 3, 1},
      // Wider channels, as the sd3 decoder config has (one image each; not
      // in the decode sums).
      {"sd3-like 512->512 32x32 x1", 512, 32, 512, 3, 0, 1},
      {"sd3-like 128->128 128x128 x1", 128, 128, 128, 3, 0, 1},
      {"sd3-like 1x1 512->256 64x64 x1", 512, 64, 256, 1, 0, 1},
  };
  struct Method {
    const char *name;
    std::function<void()> run;
    double total[2] = {0, 0}; // weighted decode sums: tiny, small
  };
  std::printf("threads %d, %s time, medians of 7 interleaved repetitions "
              "after a warm-up; ratio = method / base\n",
              threads, cpu ? "process CPU" : "wall-clock");
  std::vector<std::string> names;
  std::vector<std::vector<double>> medians;
  std::vector<double> weights[2];
  for (const Case &k : cases) {
    Conv2dParams p;
    p.n = k.batch, p.c = k.c, p.h = k.size, p.w = k.size, p.o = k.o;
    p.kh = p.kw = k.k, p.padH = p.padW = k.k / 2;
    p.outH = p.h, p.outW = p.w;
    std::mt19937 gen(1);
    std::uniform_real_distribution<float> dist(-1, 1);
    std::vector<float> x(p.n * p.c * p.h * p.w), w(p.o * p.c * p.kh * p.kw);
    for (float &v : x)
      v = dist(gen);
    for (float &v : w)
      v = dist(gen);
    const size_t outSize = p.n * p.o * p.outH * p.outW;
    std::vector<float> want(outSize), got(outSize);
    std::vector<Method> methods;
    methods.push_back(
        {"base", [&] { base(p, x.data(), w.data(), want.data(), pool); }});
    methods.push_back(
        {"im2col", [&] { im2col(p, x.data(), w.data(), got.data(), pool); }});
    methods.push_back({"im2col1", [&] {
                         im2colSingle(p, x.data(), w.data(), got.data(), pool);
                       }});
#ifdef OMNI_BENCH_DNNL
    Dnnl nchw(p, x.data(), w.data(), got.data(), false);
    Dnnl blocked(p, x.data(), w.data(), got.data(), true);
    if (&k == cases)
      std::printf("dnnl: %s (%d reorder); dnnlblk: %s (%d reorders)\n",
                  nchw.impl().c_str(), nchw.reorders, blocked.impl().c_str(),
                  blocked.reorders);
    methods.push_back({"dnnl", [&] { nchw.run(); }});
    methods.push_back({"dnnlblk", [&] { blocked.run(); }});
#endif
    methods.push_back({"direct", [&] {
                         omni::hal::cpu::conv2dDirect(p, x.data(), w.data(),
                                                      got.data(), pool);
                       }});
    methods.push_back({"driver", [&] {
                         (void)omni::hal::cpu::runConv2d(p, x.data(), w.data(),
                                                         got.data(), pool);
                       }});
    // Check every method against base once.
    methods[0].run();
    std::vector<double> errors;
    for (size_t m = 1; m < methods.size(); ++m) {
      std::fill(got.begin(), got.end(), NAN);
      methods[m].run();
      errors.push_back(maxRelError(got, want));
    }
    std::vector<std::vector<double>> times(methods.size());
    for (int rep = 0; rep < 7; ++rep)
      for (size_t m = 0; m < methods.size(); ++m) {
        const double start = now(cpu);
        methods[m].run();
        times[m].push_back(now(cpu) - start);
      }
    if (names.empty()) {
      std::printf("%-28s %9s", "shape (32 images)", "base ms");
      for (size_t m = 1; m < methods.size(); ++m)
        std::printf(" %9s", methods[m].name);
      std::printf("   max |m - base| / max |base|\n");
      for (const Method &m : methods)
        names.push_back(m.name);
    }
    std::vector<double> med;
    for (auto &t : times) {
      std::sort(t.begin(), t.end());
      med.push_back(t[t.size() / 2]);
    }
    std::printf("%-28s %9.2f", k.name, med[0] * 1e3);
    for (size_t m = 1; m < med.size(); ++m)
      std::printf(" %9.3f", med[m] / med[0]);
    std::printf("  ");
    for (double e : errors)
      std::printf(" %.1e", e);
    std::printf("\n");
    medians.push_back(med);
    const bool small = k.name[0] == 's' && k.name[1] == 'm';
    weights[small].push_back(double(k.uses));
    weights[!small].push_back(0.0);
  }
  for (int config = 0; config < 2; ++config) {
    std::vector<double> total(names.size(), 0.0);
    for (size_t s = 0; s < medians.size(); ++s)
      for (size_t m = 0; m < names.size(); ++m)
        total[m] += weights[config][s] * medians[s][m];
    std::printf("%-28s %9.2f",
                config ? "small decode's convs" : "tiny decode's convs",
                total[0] * 1e3);
    for (size_t m = 1; m < total.size(); ++m)
      std::printf(" %9.3f", total[m] / total[0]);
    std::printf("\n");
  }
  return 0;
}
