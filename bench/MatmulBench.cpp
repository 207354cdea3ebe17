//===- MatmulBench.cpp - Matmul libraries on the recipes' shapes ---------===//
//
// Times the matmuls one FlowGRPO iteration of the tiny and small recipes
// runs (rollout and loss phases; the shapes come from bench/matmul_shapes.py
// over `omnic --emit=json` of `omnigen --config=tiny|small`) through:
//   openblas-own  OpenBLAS with its own threads, one call per batch entry
//                 (the cpu driver before issue 15): the baseline;
//   openblas-own+ the same with a shared rhs folded into one call;
//   openblas-pool single-threaded OpenBLAS on the fixed blocks of
//                 runtime/hal/drivers/cpu/Gemm.h, run by omni's ThreadPool
//                 (the cpu driver's f32 gemm until 2026-12-06);
//   blis-own      BLIS (Debian libblis4-pthread) with its own threads;
//   blis-pool     serial BLIS (libblis4-serial) on the same blocks and pool;
//   dnnl-own      oneDNN dnnl_sgemm with its own (OpenMP) threads;
//   dnnl-pool     oneDNN single-threaded (omp_set_num_threads(1) on each
//                 pool thread) on the same blocks and pool (what the cpu
//                 driver does now).
// openblas-own+, blis-own and dnnl-own fold a shared rhs's batch into the
// rows; the pool variants, like the driver, make one gemm per batch entry
// (a fold made an entry's bits depend on its index). Each shape runs in rounds
// of one call per variant in turn (after a warm-up call), at least 3 rounds
// and up to 30 within ~0.3 s; a variant's time for the shape is its fastest
// round (the least disturbed on a shared machine) times how often one
// iteration runs the shape. Prints each phase's total per variant and its
// ratio to openblas-own measured in the same run.
// BLIS is loaded with dlopen (its BLAS symbols would clash with OpenBLAS's
// at link time); a missing library skips its rows. Not a test; the results
// go to docs/performance.md.
//
// Usage: omni-bench-matmul [threads (default 2)] [recipe (tiny|small|all)]
//                          [variants to skip, comma-separated]
//
//===----------------------------------------------------------------------===//

#include "runtime/hal/drivers/cpu/Gemm.h"
#include "runtime/hal/drivers/cpu/ThreadPool.h"

#include <algorithm>
#include <cblas.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#ifdef OMNI_BENCH_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif

extern "C" void openblas_set_num_threads(int);
extern "C" void omp_set_num_threads(int) __attribute__((weak));

using namespace omni::hal::cpu;
using Clock = std::chrono::steady_clock;

namespace {

struct Shape {
  const char *recipe, *phase;
  int64_t batch, m, n, k;
  bool ta, tb, rhsShared;
  int64_t times; // per iteration
};

// bench/matmul_shapes.py tiny tiny.json; ... small small.json (main at
// 446c94b).
const Shape kShapes[] = {
#include "MatmulShapes.inc"
};

double seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// BLIS's typed API (blis.h, BLIS 0.9: dim_t and inc_t are int64_t).
using BliSgemm = void (*)(int, int, int64_t, int64_t, int64_t, const float *,
                          const float *, int64_t, int64_t, const float *,
                          int64_t, int64_t, const float *, float *, int64_t,
                          int64_t);
using BliSetThreads = void (*)(int64_t);
struct Blis {
  BliSgemm sgemm = nullptr;
  BliSetThreads setThreads = nullptr;
};
Blis loadBlis(const char *path) {
  Blis b;
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  if (!h) {
    std::fprintf(stderr, "bench: %s: %s (skipped)\n", path, dlerror());
    return b;
  }
  b.sgemm = reinterpret_cast<BliSgemm>(dlsym(h, "bli_sgemm"));
  b.setThreads =
      reinterpret_cast<BliSetThreads>(dlsym(h, "bli_thread_set_num_threads"));
  return b;
}

void blisGemm(const Blis &blis, const GemmArgs<float> &g) {
  if (g.m == 0 || g.n == 0 || g.k == 0)
    return;
  // op(A)[i][p] at a[i * rsa + p * csa], likewise B; no transpose flags.
  const int64_t rsa = g.transA ? 1 : g.lda, csa = g.transA ? g.lda : 1;
  const int64_t rsb = g.transB ? 1 : g.ldb, csb = g.transB ? g.ldb : 1;
  const float beta = 0;
  blis.sgemm(0, 0, g.m, g.n, g.k, &g.alpha, g.a, rsa, csa, g.b, rsb, csb, &beta,
             g.c, g.ldc, 1);
}

#ifdef OMNI_BENCH_DNNL
constexpr bool haveDnnl = true;
void dnnlGemm(const GemmArgs<float> &g) {
  if (g.m == 0 || g.n == 0 || g.k == 0)
    return;
  dnnl_sgemm(g.transA ? 'T' : 'N', g.transB ? 'T' : 'N', g.m, g.n, g.k, g.alpha,
             g.a, g.lda, g.b, g.ldb, 0.0f, g.c, g.ldc);
}
#else
// Built without oneDNN (libdnnl-dev): its rows are skipped.
constexpr bool haveDnnl = false;
void dnnlGemm(const GemmArgs<float> &) {}
#endif

/// The shape's matmul as gemm arguments (one batch entry) plus strides;
/// `fold` merges a shared rhs's batch into m.
struct Problem {
  GemmArgs<float> args;
  int64_t batch, strideA, strideB, strideC;
};
Problem problem(const Shape &s, bool fold, const float *a, const float *b,
                float *c) {
  Problem p;
  p.args.transA = s.ta;
  p.args.transB = s.tb;
  p.args.m = s.m;
  p.args.n = s.n;
  p.args.k = s.k;
  p.args.a = a;
  p.args.lda = s.ta ? s.m : s.k;
  p.args.b = b;
  p.args.ldb = s.tb ? s.k : s.n;
  p.args.c = c;
  p.args.ldc = s.n;
  p.batch = s.batch;
  p.strideA = s.m * s.k;
  p.strideB = s.rhsShared ? 0 : s.k * s.n;
  p.strideC = s.m * s.n;
  if (fold && s.rhsShared && !s.ta && s.batch > 1) {
    p.args.m *= s.batch;
    p.batch = 1;
  }
  return p;
}

using Kernel = std::function<void(const GemmArgs<float> &)>;

/// The library's own threading: one call per batch entry.
void ownThreads(const Problem &p, const Kernel &kernel) {
  for (int64_t i = 0; i < p.batch; ++i) {
    GemmArgs<float> g = p.args;
    g.a += i * p.strideA;
    g.b += i * p.strideB;
    g.c += i * p.strideC;
    kernel(g);
  }
}

/// Single-threaded kernel calls on Gemm.h's blocks, run by the pool.
void onPool(ThreadPool &pool, const Problem &p, const Kernel &kernel) {
  const GemmBlocking blocking =
      gemmBlocking(p.args.m, p.args.n, p.args.k, p.batch);
  const int64_t dim = blocking.splitRows ? p.args.m : p.args.n;
  pool.parallelFor(p.batch * blocking.count, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t i = item / blocking.count, block = item % blocking.count;
      GemmArgs<float> g = p.args;
      g.a += i * p.strideA;
      g.b += i * p.strideB;
      g.c += i * p.strideC;
      const int64_t lo = block * blocking.size;
      kernel(gemmBlock(g, blocking.splitRows, lo,
                       std::min(dim, lo + blocking.size)));
    }
  });
}

struct Variant {
  std::string name;
  bool available;
  std::function<void()> setUp; // thread settings, before the variant runs
  std::function<void(const Problem &)> run;
  bool fold;
};

} // namespace

int main(int argc, char **argv) {
  const int threads = argc > 1 ? std::max(1, std::atoi(argv[1])) : 2;
  const std::string only = argc > 2 ? argv[2] : "all";
  const std::string skip = argc > 3 ? "," + std::string(argv[3]) + "," : "";
  ThreadPool pool(threads);

  Blis blisOwn =
      loadBlis("/usr/lib/x86_64-linux-gnu/blis-pthread/libblis.so.4");
  Blis blisSerial =
      loadBlis("/usr/lib/x86_64-linux-gnu/blis-serial/libblis.so.4");

  Kernel openblas = [](const GemmArgs<float> &g) {
    if (g.m == 0 || g.n == 0 || g.k == 0)
      return;
    cblas_sgemm(CblasRowMajor, g.transA ? CblasTrans : CblasNoTrans,
                g.transB ? CblasTrans : CblasNoTrans, int(g.m), int(g.n),
                int(g.k), g.alpha, g.a, int(g.lda), g.b, int(g.ldb), 0.0f, g.c,
                int(g.ldc));
  };
  Kernel blisOwnK = [&](const GemmArgs<float> &g) { blisGemm(blisOwn, g); };
  Kernel blisSerialK = [&](const GemmArgs<float> &g) {
    blisGemm(blisSerial, g);
  };
  Kernel dnnl = [](const GemmArgs<float> &g) { dnnlGemm(g); };
  auto poolThreads = [&](int n) {
    pool.parallelFor(threads,
                     [&](int64_t, int64_t) { omp_set_num_threads(n); });
  };

  std::vector<Variant> variants = {
      {"openblas-own", true, [&] { openblas_set_num_threads(threads); },
       [&](const Problem &p) { ownThreads(p, openblas); }, false},
      {"openblas-own+", true, [&] { openblas_set_num_threads(threads); },
       [&](const Problem &p) { ownThreads(p, openblas); }, true},
      {"openblas-pool", true, [&] { openblas_set_num_threads(1); },
       [&](const Problem &p) { onPool(pool, p, openblas); }, false},
      {"blis-own", blisOwn.sgemm && blisOwn.setThreads,
       [&] { blisOwn.setThreads(threads); },
       [&](const Problem &p) { ownThreads(p, blisOwnK); }, true},
      {"blis-pool", blisSerial.sgemm != nullptr, [] {},
       [&](const Problem &p) { onPool(pool, p, blisSerialK); }, false},
      {"dnnl-own", haveDnnl, [&] { omp_set_num_threads(threads); },
       [&](const Problem &p) { ownThreads(p, dnnl); }, true},
      {"dnnl-pool", haveDnnl,
       [&] {
         // The calling thread is a pool thread too (chunk 0).
         poolThreads(1);
       },
       [&](const Problem &p) { onPool(pool, p, dnnl); }, false},
  };

  for (size_t v = 1; v < variants.size(); ++v)
    if (skip.find("," + variants[v].name + ",") != std::string::npos)
      variants[v].available = false;

  // Buffers per distinct shape, filled once.
  std::mt19937 rng(15);
  std::uniform_real_distribution<float> dist(-1, 1);
  struct Buffers {
    std::vector<float> a, b, c;
  };
  std::vector<Buffers> buffers;
  std::vector<const Shape *> shapes;
  for (const Shape &s : kShapes) {
    if (only != "all" && only != s.recipe)
      continue;
    Buffers buf;
    buf.a.resize(s.batch * s.m * s.k);
    buf.b.resize((s.rhsShared ? 1 : s.batch) * s.k * s.n);
    buf.c.resize(s.batch * s.m * s.n);
    for (float &x : buf.a)
      x = dist(rng);
    for (float &x : buf.b)
      x = dist(rng);
    buffers.push_back(std::move(buf));
    shapes.push_back(&s);
  }

  // totals[variant][recipe/phase] in seconds per iteration.
  std::vector<std::map<std::string, double>> totals(variants.size());
  std::map<std::string, double> flops;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const Shape &s = *shapes[i];
    flops[std::string(s.recipe) + " " + s.phase] +=
        2.0 * s.batch * s.m * s.n * s.k * s.times;
  }
  // Per shape, rounds that run every variant once in turn (so the
  // machine's drift hits all alike); each variant's fastest round counts
  // (on a shared machine the minimum is the least disturbed estimate).
  for (size_t i = 0; i < shapes.size(); ++i) {
    const Shape &s = *shapes[i];
    Buffers &buf = buffers[i];
    std::vector<double> best(variants.size(), 1e30);
    int rounds = 0;
    auto begin = Clock::now();
    while (rounds < 3 || (seconds(begin) < 0.3 && rounds < 30)) {
      for (size_t v = 0; v < variants.size(); ++v) {
        if (!variants[v].available)
          continue;
        variants[v].setUp();
        Problem p = problem(s, variants[v].fold, buf.a.data(), buf.b.data(),
                            buf.c.data());
        if (rounds == 0)
          variants[v].run(p); // warm-up
        auto start = Clock::now();
        variants[v].run(p);
        best[v] = std::min(best[v], seconds(start));
      }
      ++rounds;
    }
    for (size_t v = 0; v < variants.size(); ++v)
      totals[v][std::string(s.recipe) + " " + s.phase] += best[v] * s.times;
  }
  openblas_set_num_threads(threads);

  std::printf("matmuls of one iteration, %d threads: seconds (ratio to "
              "openblas-own, < 1 is faster) and GFLOP/s\n",
              threads);
  std::printf("%-14s", "variant");
  for (auto &[key, f] : flops)
    std::printf(" %26s", key.c_str());
  std::printf("\n");
  for (size_t v = 0; v < variants.size(); ++v) {
    if (!variants[v].available)
      continue;
    std::printf("%-14s", variants[v].name.c_str());
    for (auto &[key, f] : flops) {
      double t = totals[v][key], base = totals[0][key];
      std::printf("   %7.4f s %5.2fx %5.1f GF", t, t / base, f / t * 1e-9);
    }
    std::printf("\n");
  }
  return 0;
}
