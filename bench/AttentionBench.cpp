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
// of the fused kernel the CPU runs (avx512, avx2, baseline). Then the same
// for the backward (fusedAttentionBackward against the decomposed VJP's
// sgemms and loops). Each
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

/// The backward as omni.attention's decomposed VJP ran on the cpu target
/// before AttentionBackward (and as `decompose-attention-grad` still
/// gives it): five batched Matmul library calls (runMatmul, the device's
/// gemm on the pool), S = q k^T then scaled, P = softmax(S) and dS = P (dP
/// - rowsum(dP P)) scale in f32 loops over rows on the pool (std::exp; the
/// compiled kernels used a polynomial exp), dv = P^T dO, dP = dO v^T,
/// dq = dS k, dk = dS^T q. S, P, dP and dS are [B, H, Sq, Sk] buffers.
void decomposedBackward(const AttentionParams &p, const float *q,
                        const float *k, const float *v, const float *dO,
                        float *dq, float *dk, float *dv, ThreadPool &pool,
                        std::vector<float> &s, std::vector<float> &dp) {
  const int64_t bh = p.batch * p.heads, sq = p.seqQ, sk = p.seqK;
  const float scale = static_cast<float>(p.scale);
  auto mm = [&](const float *a, const float *b, float *c, int64_t m, int64_t n,
                int64_t kk, bool ta, bool tb) {
    MatmulParams mp;
    mp.batch = bh, mp.m = m, mp.n = n, mp.k = kk;
    mp.transposeLhs = ta, mp.transposeRhs = tb;
    (void)runMatmul(mp, a, b, c, pool);
  };
  s.resize(bh * sq * sk), dp.resize(bh * sq * sk);
  mm(q, k, s.data(), sq, sk, p.headDim, false, true);
  pool.parallelFor(bh * sq, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      float *row = s.data() + r * sk, max = -INFINITY;
      for (int64_t j = 0; j < sk; ++j)
        max = std::max(max, row[j] *= scale);
      double sum = 0;
      for (int64_t j = 0; j < sk; ++j)
        sum += (row[j] = std::exp(row[j] - max));
      for (int64_t j = 0; j < sk; ++j)
        row[j] = static_cast<float>(row[j] / sum);
    }
  });
  mm(s.data(), dO, dv, sk, p.valueDim, sq, true, false);
  mm(dO, v, dp.data(), sq, sk, p.valueDim, false, true);
  pool.parallelFor(bh * sq, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float *pr = s.data() + r * sk;
      float *dpr = dp.data() + r * sk;
      double dot = 0;
      for (int64_t j = 0; j < sk; ++j)
        dot += double(dpr[j]) * pr[j];
      for (int64_t j = 0; j < sk; ++j)
        dpr[j] = pr[j] * (dpr[j] - static_cast<float>(dot)) * scale;
    }
  });
  mm(dp.data(), k, dq, sq, p.headDim, sk, false, false);
  mm(dp.data(), q, dk, sk, p.headDim, sq, true, false);
}

/// The operands and results of one shape (forward: q, k, v -> o; backward:
/// also dO -> dq, dk, dv), o holding the forward's output.
struct Buffers {
  std::vector<float> q, k, v, dO, o, dq, dk, dv;
};

/// One table: per shape (those `include` takes) the baseline's median time
/// and every fused copy's, baseline / best copy by wall and CPU time, and
/// each copy's GFLOP/s counting `products` seqQ seqK headDim flops per
/// (batch, head).
void printTable(
    const char *baseline, double products, const std::vector<Shape> &shapes,
    const std::vector<AttentionIsa> &isas, ThreadPool &pool,
    const std::function<bool(const Shape &)> &include,
    const std::function<void(const AttentionParams &, Buffers &)> &runBaseline,
    const std::function<void(const AttentionParams &, Buffers &, AttentionIsa)>
        &runFused) {
  std::printf("%-24s %12s %8s %10s", "shape", baseline, "ratio", "cpu ratio");
  for (AttentionIsa isa : isas)
    std::printf(" %10s ms %6s GF/s", attentionIsa(isa), "");
  std::printf("\n");
  for (const Shape &s : shapes) {
    if (!include(s))
      continue;
    AttentionParams p;
    p.batch = s.batch, p.heads = s.heads, p.seqQ = p.seqK = s.seq;
    p.headDim = p.valueDim = s.dim;
    p.scale = 1.0 / std::sqrt(double(s.dim));
    const int64_t n = s.batch * s.heads * s.seq * s.dim;
    Buffers d;
    d.q = values(n, 1), d.k = values(n, 2), d.v = values(n, 3);
    d.dO = values(n, 4);
    d.o.resize(n), d.dq.resize(n), d.dk.resize(n), d.dv.resize(n);
    fusedAttention(p, d.q.data(), d.k.data(), d.v.data(), nullptr, d.o.data(),
                   pool);
    auto [base, baseCpu] = medianSeconds(5, [&] { runBaseline(p, d); });
    std::vector<std::pair<double, double>> fused;
    for (AttentionIsa isa : isas)
      fused.push_back(medianSeconds(5, [&] { runFused(p, d, isa); }));
    double flops = products * s.batch * s.heads * s.seq * s.seq * s.dim;
    std::printf("%-24s %10.2fms %7.2fx %9.2fx", s.name, base * 1e3,
                base / fused[0].first, baseCpu / fused[0].second);
    for (auto [wall, cpu] : fused)
      std::printf(" %13.2f %11.1f", wall * 1e3, flops / wall * 1e-9);
    std::printf("\n");
  }
}

} // namespace

int main(int argc, char **argv) {
  int threads = argc > 1
                    ? std::atoi(argv[1])
                    : int(std::max(1u, std::thread::hardware_concurrency()));
  ThreadPool pool(threads);
  openblas_set_num_threads(threads); // as the cpu device does
  const std::vector<Shape> shapes = {
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
  printTable(
      "materialized", 4, shapes, isas, pool, [](const Shape &) { return true; },
      [&](const AttentionParams &p, Buffers &d) {
        (void)runAttention(p, d.q.data(), d.k.data(), d.v.data(), nullptr,
                           d.o.data(), pool, AttentionPath::Materialized);
      },
      [&](const AttentionParams &p, Buffers &d, AttentionIsa isa) {
        fusedAttention(p, d.q.data(), d.k.data(), d.v.data(), nullptr,
                       d.o.data(), pool, isa);
      });

  // The backward (no mask, as omni.attention's VJP emits attention_grad):
  // the fused AttentionBackward kernel against the decomposed path, both
  // on the pool, GFLOP/s counting 10 seqQ seqK headDim per (batch, head)
  // (the five products of the decomposed VJP; the fused kernel also
  // recomputes the row statistics, 2 more). Single-threaded OpenBLAS calls
  // on the pool, as the cpu device runs them (CpuDevice.cpp), for the
  // decomposed path's matmuls.
  openblas_set_num_threads(1);
  std::printf("\nattention backward, %d threads; decomposed / fused (> 1: "
              "fused is faster), ms and GFLOP/s (wall) of every copy\n",
              threads);
  std::vector<float> sBuf, dpBuf;
  printTable(
      "decomposed", 10, shapes, isas, pool,
      // The VAE's single-head attention is not trained.
      [](const Shape &s) { return s.heads > 1; },
      [&](const AttentionParams &p, Buffers &d) {
        decomposedBackward(p, d.q.data(), d.k.data(), d.v.data(), d.dO.data(),
                           d.dq.data(), d.dk.data(), d.dv.data(), pool, sBuf,
                           dpBuf);
      },
      [&](const AttentionParams &p, Buffers &d, AttentionIsa isa) {
        fusedAttentionBackward(p, d.q.data(), d.k.data(), d.v.data(), nullptr,
                               d.o.data(), d.dO.data(), d.dq.data(),
                               d.dk.data(), d.dv.data(), pool, isa);
      });
  return 0;
}
