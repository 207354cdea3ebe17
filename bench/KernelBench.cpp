//===- KernelBench.cpp - memory bandwidth of a step.bin's fused kernels ---===//
//
// Times the fused kernels (Dispatch commands) of one function of a step.bin
// on a device, each alone, and compares the bytes it moves per second with
// a device-to-device copy of the same bytes timed in the same run (the
// baseline: what the memory system gives a plain copy). For the cuda target
// this is issue 14's bandwidth target: elementwise and reduction kernels on
// large tensors should reach >= 70% of HBM bandwidth; run.sh runs it on the
// SD3.5-Medium recipe's train_step.
//
// Every distinct dispatch (executable, kernel, grid and tensor sizes) of
// the function (loop bodies included) moving at least --min-mb MB (operand
// and result tensors, each once, as `omnirun --profile` counts bytes) is
// run on fresh zero-filled buffers: a warm-up, then --reps dispatches back
// to back and one synchronize (launch costs overlap as they do in a run),
// against a copy of half those bytes (read plus write) timed the same way.
// Scalars are 0 (index registers such as a rank's AxisIndex). Prints a
// table, largest first, and the bytes-weighted totals. Then the function's
// distinct Matmul library calls, most flops per run first (--top of them),
// each in TFLOP/s against a square gemm of the same element type
// (--baseline-gemm, default 4096^3) timed in the same run: how far the
// model's shapes are from what the library gives its best shape. Not a
// test: nothing is asserted; docs/performance.md records the results.
//
// Usage: omni-bench-kernels STEP.bin [--function=train_step]
//          [--device=cpu|cuda] [--reps=20] [--min-mb=16] [--top=25]
//          [--peak-gbs=G] (the device's nominal bandwidth, for a column
//          of percentages) [--baseline-gemm=N]
// Exits 1 with one line when the step.bin or the device cannot be used.
//
//===----------------------------------------------------------------------===//

#include "runtime/executor/Executor.h"
#include "runtime/hal/drivers/Drivers.h"
#include "runtime/loader/Program.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

using namespace omni;

namespace {

struct Options {
  std::string stepBin, function = "train_step", device = "cpu";
  int reps = 20, top = 25, baselineGemm = 4096;
  double minMb = 16, peakGbs = 0;
};

/// One distinct dispatch: its command and how often the function runs it.
struct Site {
  const step::Dispatch *dispatch = nullptr;
  std::string where;
  int64_t bytes = 0, count = 0;
};

/// One distinct Matmul library call: its shapes and how often it runs.
struct MatmulSite {
  hal::MatmulParams params;
  int64_t count = 0;
  double flops() const {
    return 2.0 * params.batch * params.m * params.n * params.k;
  }
};

int usage(const std::string &why) {
  std::fprintf(stderr,
               "omni-bench-kernels: %s\nusage: omni-bench-kernels STEP.bin "
               "[--function=NAME] [--device=cpu|cuda] [--reps=N] "
               "[--min-mb=MB] [--top=N] [--peak-gbs=G] [--baseline-gemm=N]\n",
               why.c_str());
  return 1;
}

bool parse(int argc, char **argv, Options &o, std::string &error) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](const char *flag, std::string &out) {
      std::string prefix = std::string(flag) + "=";
      if (arg.rfind(prefix, 0) != 0)
        return false;
      out = arg.substr(prefix.size());
      return true;
    };
    std::string v;
    bool ok = true;
    if (value("--function", o.function) || value("--device", o.device))
      continue;
    if (value("--reps", v))
      ok = absl::SimpleAtoi(v, &o.reps) && o.reps > 0;
    else if (value("--top", v))
      ok = absl::SimpleAtoi(v, &o.top) && o.top > 0;
    else if (value("--min-mb", v))
      ok = absl::SimpleAtod(v, &o.minMb) && o.minMb >= 0;
    else if (value("--peak-gbs", v))
      ok = absl::SimpleAtod(v, &o.peakGbs) && o.peakGbs > 0;
    else if (value("--baseline-gemm", v))
      ok = absl::SimpleAtoi(v, &o.baselineGemm) && o.baselineGemm > 0 &&
           o.baselineGemm <= 65536;
    else if (arg.rfind("--", 0) != 0 && o.stepBin.empty())
      o.stepBin = arg;
    else
      ok = false;
    if (!ok) {
      error = absl::StrCat(arg, ": unknown flag or bad value");
      return false;
    }
  }
  if (o.stepBin.empty())
    error = "no step.bin given";
  return !o.stepBin.empty();
}

/// The distinct dispatches of `commands` (loop bodies included), counted
/// `times` per run.
void collect(
    const loader::Program &program,
    const flatbuffers::Vector<flatbuffers::Offset<step::Command>> *commands,
    int64_t times, std::map<std::vector<int64_t>, Site> &sites,
    std::map<std::vector<int64_t>, MatmulSite> &matmuls) {
  if (!commands)
    return;
  for (const step::Command *command : *commands) {
    if (const step::Loop *loop = command->kind_as_Loop()) {
      const int64_t trips =
          loop->step() > 0 && loop->upper() > loop->lower()
              ? (loop->upper() - loop->lower() + loop->step() - 1) /
                    loop->step()
              : 0;
      collect(program, loop->body(), times * trips, sites, matmuls);
      continue;
    }
    if (const step::LibraryCall *call = command->kind_as_LibraryCall();
        call && call->library() == step::Library::Matmul) {
      hal::MatmulParams p = executor::matmulParams(program, *call);
      MatmulSite &site =
          matmuls[{static_cast<int64_t>(p.dtype), p.batch, p.m, p.n, p.k,
                   p.transposeLhs, p.transposeRhs, p.rhsShared}];
      site.params = p;
      site.count += times;
      continue;
    }
    const step::Dispatch *d = command->kind_as_Dispatch();
    if (!d)
      continue;
    std::vector<int64_t> key = {d->executable(), d->kernel(), d->grid()};
    int64_t bytes = 0;
    for (const auto *list : {d->operands(), d->results()})
      for (uint32_t t : *list) {
        key.push_back(program.tensor(t).bytes);
        bytes += program.tensor(t).bytes;
      }
    Site &site = sites[key];
    if (!site.dispatch) {
      site.dispatch = d;
      site.bytes = bytes;
      site.where = command->location() ? command->location()->str() : "";
    }
    site.count += times;
  }
}

using Clock = std::chrono::steady_clock;

/// Seconds per call of `once`, over `reps` calls and one synchronize,
/// after a warm-up call.
absl::StatusOr<double> timePerCall(hal::Stream &stream, int reps,
                                   const std::function<absl::Status()> &once) {
  absl::Status st = once();
  if (st.ok())
    st = stream.synchronize();
  if (!st.ok())
    return st;
  const Clock::time_point begin = Clock::now();
  for (int r = 0; r < reps && st.ok(); ++r)
    st = once();
  if (st.ok())
    st = stream.synchronize();
  if (!st.ok())
    return st;
  return std::chrono::duration<double>(Clock::now() - begin).count() / reps;
}

/// A location such as loc(callsite("transformer_blocks.3" at
/// callsite("transformer_blocks.3" at "loss"))), shortened for the table to
/// its first and last names: "transformer_blocks.3 in loss".
std::string shortWhere(const std::string &where) {
  std::vector<std::string> names;
  for (size_t at = where.find('"'); at != std::string::npos;) {
    size_t end = where.find('"', at + 1);
    if (end == std::string::npos)
      break;
    names.push_back(where.substr(at + 1, end - at - 1));
    at = where.find('"', end + 1);
  }
  if (names.empty())
    return where;
  if (names.size() == 1 || names.front() == names.back())
    return names.front();
  return names.front() + " in " + names.back();
}

/// Seconds per matmul of `p` on fresh zero-filled buffers.
absl::StatusOr<double> timeMatmul(hal::Device &device, hal::Stream &stream,
                                  const hal::MatmulParams &p, int reps) {
  const int64_t e = dtypeSize(p.dtype);
  const int64_t lhs = p.batch * p.m * p.k * e;
  const int64_t rhs = (p.rhsShared ? 1 : p.batch) * p.k * p.n * e;
  const int64_t out = p.batch * p.m * p.n * e;
  std::vector<std::unique_ptr<hal::Buffer>> b;
  for (int64_t bytes : {lhs, rhs, out}) {
    auto buffer = device.allocate(bytes);
    if (!buffer.ok())
      return buffer.status();
    b.push_back(std::move(*buffer));
  }
  return timePerCall(stream, reps, [&] {
    return stream.matmul(p, hal::BufferRef::all(*b[0]),
                         hal::BufferRef::all(*b[1]),
                         hal::BufferRef::all(*b[2]));
  });
}

/// The matmul table: the function's distinct matmul shapes with the most
/// flops per run, each against a square gemm of the same element type
/// (--baseline-gemm) timed in the same run. False when a baseline fails.
bool timeMatmuls(hal::Device &device, hal::Stream &stream, const Options &o,
                 const std::map<std::vector<int64_t>, MatmulSite> &byKey) {
  std::vector<MatmulSite> sites;
  for (const auto &[key, site] : byKey)
    sites.push_back(site);
  std::stable_sort(sites.begin(), sites.end(),
                   [](const MatmulSite &a, const MatmulSite &b) {
                     return a.flops() * a.count > b.flops() * b.count;
                   });
  if (static_cast<int>(sites.size()) > o.top)
    sites.resize(o.top);
  std::printf("\n%zu matmul shapes, most flops per run first; against a "
              "%d^3 gemm of the same type\n",
              sites.size(), o.baselineGemm);
  if (sites.empty())
    return true;
  std::printf("| dtype | batch x m x n x k | t | per run | us | TFLOP/s | "
              "vs the square gemm |\n|---|---|---|---|---|---|---|\n");
  std::map<DType, double> baseline;
  for (const MatmulSite &site : sites) {
    const hal::MatmulParams &p = site.params;
    const std::string type(dtypeName(p.dtype));
    if (!baseline.count(p.dtype)) {
      hal::MatmulParams square;
      square.dtype = p.dtype;
      square.m = square.n = square.k = o.baselineGemm;
      absl::StatusOr<double> t = timeMatmul(device, stream, square, o.reps);
      if (!t.ok()) {
        std::printf("the %s baseline gemm failed: %s\n", type.c_str(),
                    std::string(t.status().message()).c_str());
        return false;
      }
      baseline[p.dtype] = 2.0 * square.m * square.n * square.k / *t / 1e12;
    }
    absl::StatusOr<double> t = timeMatmul(device, stream, p, o.reps);
    const std::string shape =
        absl::StrCat(p.batch, " x ", p.m, " x ", p.n, " x ", p.k);
    const char *trans = p.transposeLhs ? (p.transposeRhs ? "tt" : "tn")
                                       : (p.transposeRhs ? "nt" : "nn");
    if (!t.ok()) {
      std::printf("| %s | %s | %s | failed: %s |\n", type.c_str(),
                  shape.c_str(), trans,
                  std::string(t.status().message()).c_str());
      continue;
    }
    const double tflops = site.flops() / *t / 1e12;
    std::printf("| %s | %s | %s | %lld | %.1f | %.3f | %.2f |\n", type.c_str(),
                shape.c_str(), trans, static_cast<long long>(site.count),
                *t * 1e6, tflops, tflops / baseline[p.dtype]);
  }
  for (const auto &[dtype, tflops] : baseline)
    std::printf("the %d^3 %s gemm: %.3f TFLOP/s\n", o.baselineGemm,
                std::string(dtypeName(dtype)).c_str(), tflops);
  return true;
}

} // namespace

int main(int argc, char **argv) {
  Options o;
  std::string error;
  if (!parse(argc, argv, o, error))
    return usage(error);
  auto program = loader::Program::loadFile(o.stepBin);
  if (!program.ok())
    return usage(std::string(program.status().message()));
  std::optional<uint32_t> fn = (*program)->findFunction(o.function);
  if (!fn)
    return usage(
        absl::StrCat(o.stepBin, " has no function '", o.function, "'"));
  auto device = hal::builtinDrivers().createDevice(o.device, {});
  if (!device.ok())
    return usage(std::string(device.status().message()));
  auto stream = (*device)->createStream();
  if (!stream.ok())
    return usage(std::string(stream.status().message()));
  const step::Step &s = (*program)->step();
  std::vector<std::unique_ptr<hal::Executable>> executables;
  for (uint32_t e = 0; s.executables() && e < s.executables()->size(); ++e) {
    auto exe = (*device)->loadExecutable(
        executor::executableSpec(*s.executables()->Get(e), e));
    if (!exe.ok())
      return usage(
          absl::StrCat("executables[", e, "]: ", exe.status().message()));
    executables.push_back(std::move(*exe));
  }

  std::map<std::vector<int64_t>, Site> byKey;
  std::map<std::vector<int64_t>, MatmulSite> matmulsByKey;
  collect(**program, s.functions()->Get(*fn)->commands(), 1, byKey,
          matmulsByKey);
  std::vector<Site> sites;
  for (auto &[key, site] : byKey)
    if (site.bytes >= o.minMb * 1e6)
      sites.push_back(site);
  std::stable_sort(
      sites.begin(), sites.end(),
      [](const Site &a, const Site &b) { return a.bytes > b.bytes; });
  if (static_cast<int>(sites.size()) > o.top)
    sites.resize(o.top);

  std::printf("%s; %s, function %s: %zu kernels of at least %g MB; %d "
              "dispatches each, against a copy of the same bytes\n",
              (*device)->description().c_str(), o.stepBin.c_str(),
              o.function.c_str(), sites.size(), o.minMb, o.reps);
  std::printf("| kernel | where | per run | MB | us | GB/s | copy GB/s | "
              "kernel / copy |%s\n|---|---|---|---|---|---|---|---|%s\n",
              o.peakGbs > 0 ? " % of peak |" : "", o.peakGbs > 0 ? "---|" : "");
  double bytesAll = 0, kernelAll = 0, copyAll = 0;
  for (const Site &site : sites) {
    const step::Dispatch &d = *site.dispatch;
    std::vector<std::unique_ptr<hal::Buffer>> owned;
    std::vector<hal::BufferRef> buffers;
    absl::Status st;
    for (const auto *list : {d.operands(), d.results()})
      for (uint32_t t : *list) {
        auto buffer = (*device)->allocate((*program)->tensor(t).bytes);
        if (!buffer.ok()) {
          st = buffer.status();
          break;
        }
        buffers.push_back(hal::BufferRef::all(**buffer));
        owned.push_back(std::move(*buffer));
      }
    const std::vector<int64_t> scalars(d.scalars() ? d.scalars()->size() : 0,
                                       0);
    const hal::Executable &exe = *executables[d.executable()];
    const std::string name = exe.kernelName(d.kernel());
    absl::StatusOr<double> kernel =
        st.ok() ? timePerCall(**stream, o.reps,
                              [&] {
                                return (*stream)->dispatch(exe, d.kernel(),
                                                           d.grid(), buffers,
                                                           scalars);
                              })
                : absl::StatusOr<double>(st);
    owned.clear();
    // The baseline: half the bytes read, half written.
    const int64_t half = std::max<int64_t>(site.bytes / 2, 1);
    auto a = (*device)->allocate(half), b = (*device)->allocate(half);
    absl::StatusOr<double> copy =
        !a.ok()   ? absl::StatusOr<double>(a.status())
        : !b.ok() ? absl::StatusOr<double>(b.status())
                  : timePerCall(**stream, o.reps, [&] {
                      return (*stream)->copy(hal::BufferRef::all(**a),
                                             hal::BufferRef::all(**b));
                    });
    if (!kernel.ok() || !copy.ok()) {
      std::printf("| %s | %s | failed: %s |\n", name.c_str(),
                  shortWhere(site.where).c_str(),
                  std::string((kernel.ok() ? copy : kernel).status().message())
                      .c_str());
      continue;
    }
    const double mb = site.bytes / 1e6;
    const double gbs = site.bytes / *kernel / 1e9;
    const double copyGbs = site.bytes / *copy / 1e9;
    bytesAll += site.bytes;
    kernelAll += *kernel;
    copyAll += *copy;
    std::printf("| %s | %s | %lld | %.1f | %.1f | %.0f | %.0f | %.2f |",
                name.c_str(), shortWhere(site.where).c_str(),
                static_cast<long long>(site.count), mb, *kernel * 1e6, gbs,
                copyGbs, *copy / *kernel);
    if (o.peakGbs > 0)
      std::printf(" %.0f%% |", 100 * gbs / o.peakGbs);
    std::printf("\n");
  }
  if (kernelAll > 0) {
    std::printf("all %zu: %.0f GB/s, a copy %.0f GB/s, kernel / copy %.2f",
                sites.size(), bytesAll / kernelAll / 1e9,
                bytesAll / copyAll / 1e9, copyAll / kernelAll);
    if (o.peakGbs > 0)
      std::printf(", %.0f%% of %g GB/s",
                  100 * bytesAll / kernelAll / 1e9 / o.peakGbs, o.peakGbs);
    std::printf("\n");
  }
  return timeMatmuls(**device, **stream, o, matmulsByKey) ? 0 : 1;
}
