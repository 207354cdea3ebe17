//===- CudaAttentionBench.cpp - Flash vs unfused attention on a GPU -------===//
//
// The cuda driver's two attention forwards and backwards (docs/backend-
// cuda.md, "Library routines"), timed in one run on the same GPU: the
// unfused paths (cuBLASLt products into f32 scores around row kernels)
// and the flash kernels (kernels/FlashAttention.h,
// FlashAttentionBackward.h), for the attention shapes of the SD3.5-Medium
// and Qwen-Image recipes at 512 px. Prints, per shape and direction, the
// median milliseconds of each (after a warm-up), unfused / flash (> 1: the
// flash kernel is faster), the flash kernel's TFLOP/s (4 seqQ seqK headDim
// flops per pair forward, 10 backward: the products of the definition, not
// the recomputations) and the largest difference between the two results.
// Not a test: nothing is asserted (CudaGpuTest.FlashAttentionAgrees...
// checks the values); tools/gpu-check runs it and docs/performance.md
// records the results. "choose by measurement": OMNI_CUDA_ATTENTION's
// default follows these numbers.
//
// Usage: omni-bench-cuda-attention [repetitions] (default 10). Exits 1
// with the driver's one line when there is no GPU.
//
//===----------------------------------------------------------------------===//

#include "runtime/hal/drivers/Drivers.h"
#include "runtime/io/ElementCodec.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

using namespace omni;
using namespace omni::hal;

namespace {

struct Shape {
  const char *name;
  DType dtype;
  int64_t batch, heads, seq, headDim;
  bool mask;
};

/// The recipes' attention at 512 px (64x64 latents, 2x2 patches: 1024 image
/// tokens) with 2 samples: SD3.5-Medium's joint attention (24 heads of 64,
/// 333 text tokens) and Qwen-Image's (24 heads of 128, a text mask).
const Shape kShapes[] = {
    {"sd3.5-medium joint, bf16", DType::BF16, 2, 24, 1024 + 333, 64, false},
    {"sd3.5-medium joint, f16", DType::F16, 2, 24, 1024 + 333, 64, false},
    {"qwen-image joint, bf16, masked", DType::BF16, 2, 24, 1024 + 256, 128,
     true},
    {"qwen-image joint, bf16", DType::BF16, 2, 24, 1024 + 256, 128, false},
};

struct Buffers {
  std::unique_ptr<Buffer> q, k, v, mask, out, dO, dq, dk, dv;
};

absl::StatusOr<Buffers> upload(Device &device, Stream &stream, const Shape &s) {
  uint64_t state = 99;
  auto bits = [&](int64_t n, double scale) {
    std::vector<uint16_t> t(static_cast<size_t>(n));
    for (uint16_t &x : t) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      double u = scale * (double(state >> 11) / double(1ull << 52) - 1.0);
      x = s.dtype == DType::BF16 ? bf16BitsFromDouble(u)
                                 : halfBitsFromDouble(u);
    }
    return t;
  };
  const int64_t n = s.batch * s.heads * s.seq * s.headDim;
  Buffers b;
  // The backward's o is any tensor of the result's shape: its values do
  // not change the work.
  std::vector<uint16_t> host[6] = {bits(n, 2), bits(n, 2),
                                   bits(n, 1), bits(s.seq * s.seq, 1),
                                   bits(n, 1), bits(n, 1)};
  std::unique_ptr<Buffer> *slots[6] = {&b.q,    &b.k,   &b.v,
                                       &b.mask, &b.out, &b.dO};
  for (int i = 0; i < 6; ++i) {
    auto buffer = device.allocate(2 * int64_t(host[i].size()));
    if (!buffer.ok())
      return buffer.status();
    *slots[i] = std::move(*buffer);
    absl::Status w =
        stream.writeBuffer(host[i].data(), BufferRef::all(**slots[i]));
    if (!w.ok())
      return w;
  }
  for (std::unique_ptr<Buffer> *slot : {&b.dq, &b.dk, &b.dv}) {
    auto buffer = device.allocate(2 * n);
    if (!buffer.ok())
      return buffer.status();
    *slot = std::move(*buffer);
  }
  return b;
}

AttentionParams paramsOf(const Shape &s) {
  AttentionParams p;
  p.dtype = s.dtype;
  p.batch = s.batch;
  p.heads = s.heads;
  p.seqQ = p.seqK = s.seq;
  p.headDim = p.valueDim = s.headDim;
  p.scale = 1.0 / std::sqrt(double(s.headDim));
  p.hasMask = s.mask;
  p.maskBatchShared = p.maskHeadShared = true;
  return p;
}

/// Median milliseconds of one attention call (its backward: dq, dk, dv
/// from o and dO), and its results' values.
absl::StatusOr<std::pair<double, std::vector<double>>>
timeOn(Device &device, const Shape &s, int reps, bool backward) {
  auto stream = device.createStream();
  if (!stream.ok())
    return stream.status();
  auto b = upload(device, **stream, s);
  if (!b.ok())
    return b.status();
  const AttentionParams p = paramsOf(s);
  auto once = [&] {
    if (backward)
      return (*stream)->attentionBackward(
          p, BufferRef::all(*b->q), BufferRef::all(*b->k),
          BufferRef::all(*b->v),
          s.mask ? BufferRef::all(*b->mask) : BufferRef(),
          BufferRef::all(*b->out), BufferRef::all(*b->dO),
          BufferRef::all(*b->dq), BufferRef::all(*b->dk),
          BufferRef::all(*b->dv));
    return (*stream)->attention(p, BufferRef::all(*b->q), BufferRef::all(*b->k),
                                BufferRef::all(*b->v),
                                s.mask ? BufferRef::all(*b->mask) : BufferRef(),
                                BufferRef::all(*b->out));
  };
  std::vector<double> ms;
  for (int r = -1; r < reps; ++r) { // -1: the warm-up
    auto start = std::chrono::steady_clock::now();
    absl::Status st = once();
    if (st.ok())
      st = (*stream)->synchronize();
    if (!st.ok())
      return st;
    if (r >= 0)
      ms.push_back(std::chrono::duration<double, std::milli>(
                       std::chrono::steady_clock::now() - start)
                       .count());
  }
  std::sort(ms.begin(), ms.end());
  std::vector<double> values;
  for (Buffer *result :
       backward ? std::vector<Buffer *>{b->dq.get(), b->dk.get(), b->dv.get()}
                : std::vector<Buffer *>{b->out.get()}) {
    std::vector<uint16_t> bits(static_cast<size_t>(result->size() / 2));
    absl::Status st =
        (*stream)->readBuffer(BufferRef::all(*result), bits.data());
    if (st.ok())
      st = (*stream)->synchronize();
    if (!st.ok())
      return st;
    for (uint16_t x : bits)
      values.push_back(s.dtype == DType::BF16 ? doubleFromBf16Bits(x)
                                              : doubleFromHalfBits(x));
  }
  return std::make_pair(ms[ms.size() / 2], std::move(values));
}

absl::StatusOr<std::unique_ptr<Device>> deviceWith(const char *attention) {
  setenv("OMNI_CUDA_ATTENTION", attention, 1);
  return builtinDrivers().createDevice("cuda", {});
}

} // namespace

int main(int argc, char **argv) {
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 10;
  auto unfused = deviceWith("unfused");
  auto flash = deviceWith("flash");
  if (!unfused.ok() || !flash.ok()) {
    std::fprintf(
        stderr, "omni-bench-cuda-attention: %s\n",
        std::string((unfused.ok() ? flash : unfused).status().message())
            .c_str());
    return 1;
  }
  std::printf("%s; median of %d\n", (*unfused)->description().c_str(), reps);
  std::printf("| shape | direction | unfused ms | flash ms | unfused / flash "
              "| flash TFLOP/s | max difference |\n"
              "|---|---|---|---|---|---|---|\n");
  for (bool backward : {false, true})
    for (const Shape &s : kShapes) {
      const char *direction = backward ? "backward" : "forward";
      auto a = timeOn(**unfused, s, reps, backward);
      auto b = timeOn(**flash, s, reps, backward);
      if (!a.ok() || !b.ok()) {
        std::printf("| %s | %s | failed: %s |\n", s.name, direction,
                    std::string((a.ok() ? b : a).status().message()).c_str());
        continue;
      }
      double worst = 0;
      for (size_t i = 0; i < a->second.size(); ++i)
        if (!std::isnan(a->second[i]))
          worst = std::max(worst, std::fabs(a->second[i] - b->second[i]));
      const double flops = (backward ? 10.0 : 4.0) * double(s.batch * s.heads) *
                           double(s.seq) * s.seq * s.headDim;
      std::printf("| %s | %s | %.3f | %.3f | %.2f | %.1f | %.3g |\n", s.name,
                  direction, a->first, b->first, a->first / b->first,
                  flops / (b->first * 1e-3) / 1e12, worst);
    }
  return 0;
}
