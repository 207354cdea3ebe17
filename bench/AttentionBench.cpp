//===- AttentionBench.cpp - Fused vs materialized attention on the CPU ----===//
//
// For each attention shape of the tiny and small FlowGRPO recipes (the
// shapes `omnigen --model=sd3 --config=tiny|small` writes: joint image+text
// attention, image-only attention of the dual-attention layers, the VAE's
// single-head attention; batch 32 = the rollout batch), times the cpu
// driver's two attention paths in one run on the same pool and prints
// materialized / fused (> 1: the fused kernel is faster) by wall time and
// by process CPU time (steadier on a loaded machine; with more than one
// thread it also counts OpenBLAS's spinning workers), then the wall time
// and GFLOP/s (4 seqQ seqK headDim flops per (batch, head)) of every copy
// of the fused kernel the CPU runs (avx512, avx2, baseline). Each
// figure is the median of several repetitions after a warm-up. Not a test:
// nothing is asserted; docs/performance.md ("CPU speed (issue 15): fused
// attention") records the results.
//
// Usage: omni-bench-attention [threads] (default: hardware_concurrency).
//
//===----------------------------------------------------------------------===//

#include "runtime/hal/drivers/cpu/CpuAttention.h"
#include "runtime/hal/drivers/cpu/CpuLibraries.h"

#include <algorithm>
#include <cblas.h>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <thread>
#include <utility>
#include <vector>

using namespace omni::hal;
using namespace omni::hal::cpu;
using Clock = std::chrono::steady_clock;

namespace {

double cpuSeconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

/// Median wall and process CPU seconds.
std::pair<double, double> medianSeconds(int reps,
                                        const std::function<void()> &fn) {
  fn(); // warm-up
  std::vector<double> wall, cpu;
  for (int i = 0; i < reps; ++i) {
    auto start = Clock::now();
    double cpu0 = cpuSeconds();
    fn();
    cpu.push_back(cpuSeconds() - cpu0);
    wall.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  std::sort(wall.begin(), wall.end());
  std::sort(cpu.begin(), cpu.end());
  return {wall[wall.size() / 2], cpu[cpu.size() / 2]};
}

std::vector<float> values(int64_t n, uint32_t seed) {
  std::vector<float> out(static_cast<size_t>(n));
  for (float &x : out) {
    seed = seed * 1664525u + 1013904223u;
    x = static_cast<float>(seed >> 8) / float(1 << 24) * 2 - 1;
  }
  return out;
}

struct Shape {
  const char *name;
  int64_t batch, heads, seq, dim;
};

} // namespace

int main(int argc, char **argv) {
  int threads = argc > 1
                    ? std::atoi(argv[1])
                    : int(std::max(1u, std::thread::hardware_concurrency()));
  ThreadPool pool(threads);
  openblas_set_num_threads(threads); // as the cpu device does
  const Shape shapes[] = {
      {"tiny joint (72 tokens)", 32, 4, 72, 16},
      {"tiny image-only (64)", 32, 4, 64, 16},
      {"tiny VAE mid (256)", 32, 1, 256, 32},
      {"small joint (288)", 32, 8, 288, 32},
      {"small image-only (256)", 32, 8, 256, 32},
      {"small VAE mid (1024)", 32, 1, 1024, 32},
      // Wider heads (SD3.5-Medium: 64, Qwen-Image: 128), where sgemm's
      // efficiency counts more against the softmax.
      {"head dim 64 (1024)", 2, 8, 1024, 64},
      {"head dim 128 (1024)", 2, 8, 1024, 128},
  };
  // Every copy of the fused kernel this CPU runs, widest first.
  std::vector<AttentionIsa> isas;
  for (AttentionIsa isa :
       {AttentionIsa::Avx512, AttentionIsa::Avx2, AttentionIsa::Baseline})
    if (attentionIsaAvailable(isa))
      isas.push_back(isa);
  std::printf("attention, %d threads; materialized / fused (> 1: fused is "
              "faster) for the fused kernel's best copy (%s); ms and GFLOP/s "
              "(wall) of every copy\n",
              threads, attentionIsa(AttentionIsa::Best));
  std::printf("%-24s %12s %8s %10s", "shape", "materialized", "ratio",
              "cpu ratio");
  for (AttentionIsa isa : isas)
    std::printf(" %10s ms %6s GF/s", attentionIsa(isa), "");
  std::printf("\n");
  for (const Shape &s : shapes) {
    AttentionParams p;
    p.batch = s.batch, p.heads = s.heads, p.seqQ = p.seqK = s.seq;
    p.headDim = p.valueDim = s.dim;
    p.scale = 1.0 / std::sqrt(double(s.dim));
    const int64_t n = s.batch * s.heads * s.seq * s.dim;
    std::vector<float> q = values(n, 1), k = values(n, 2), v = values(n, 3);
    std::vector<float> out(static_cast<size_t>(n));
    auto [mat, matCpu] = medianSeconds(5, [&] {
      (void)runAttention(p, q.data(), k.data(), v.data(), nullptr, out.data(),
                         pool, AttentionPath::Materialized);
    });
    std::vector<std::pair<double, double>> fused;
    for (AttentionIsa isa : isas)
      fused.push_back(medianSeconds(5, [&] {
        fusedAttention(p, q.data(), k.data(), v.data(), nullptr, out.data(),
                       pool, isa);
      }));
    double flops = 4.0 * s.batch * s.heads * s.seq * s.seq * s.dim;
    std::printf("%-24s %10.2fms %7.2fx %9.2fx", s.name, mat * 1e3,
                mat / fused[0].first, matCpu / fused[0].second);
    for (auto [wall, cpu] : fused)
      std::printf(" %13.2f %11.1f", wall * 1e3, flops / wall * 1e-9);
    std::printf("\n");
  }
  return 0;
}
