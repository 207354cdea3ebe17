//===- CpuBench.cpp - CPU backend benchmark, ratios against baselines -----===//
//
// Prints, measured in one run on this machine, each figure next to a
// baseline measured the same way:
//   1. a fused chain of 8 elementwise ops over 4M floats (compiled kernel,
//      run by the executor) against memcpy of the same bytes: the fraction
//      of copy bandwidth the kernel reaches;
//   2. a 512x512x512 matmul through the executor (oneDNN on the device's
//      pool) against calling OpenBLAS sgemm with its own threads directly;
//   3. the toy FlowGRPO iteration compiled and executed against the
//      reference evaluator;
//   4. the compile time of the toy program.
// Each timing is the median of several repetitions after a warm-up. Not a
// test: nothing is asserted; docs/performance.md records the results.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/Codegen.h"
#include "compiler/reference/Evaluator.h"
#include "compiler/stepbin/StepWriter.h"
#include "dialects/omni/OmniOps.h"
#include "passes/Passes.h"
#include "runtime/executor/Executor.h"
#include "runtime/hal/drivers/Drivers.h"
#include "runtime/loader/Program.h"

#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <algorithm>
#include <cblas.h>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <thread>

using namespace mlir;
using ::omni::DType;
using ::omni::HostTensor;
using Clock = std::chrono::steady_clock;

namespace {

double medianSeconds(int reps, const std::function<void()> &fn) {
  fn(); // warm-up
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto start = Clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

struct Compiled {
  std::unique_ptr<::omni::hal::Device> device;
  std::unique_ptr<::omni::executor::Executor> executor;
  double compileSeconds = 0;
};

Compiled compile(MLIRContext &ctx, ModuleOp module) {
  Compiled c;
  auto start = Clock::now();
  OwningOpRef<ModuleOp> copy = module.clone();
  PassManager pm(&ctx, ModuleOp::getOperationName());
  mlir::omni::buildOmniPipeline(pm);
  if (failed(pm.run(*copy)))
    return c;
  auto exe = mlir::omni::compileFusions(*copy);
  if (failed(exe))
    return c;
  auto bytes = mlir::omni::writeStepBin(*copy, *exe, "bench");
  if (failed(bytes))
    return c;
  c.compileSeconds =
      std::chrono::duration<double>(Clock::now() - start).count();
  auto program = ::omni::loader::Program::loadBytes(absl::string_view(
      reinterpret_cast<const char *>(bytes->data()), bytes->size()));
  if (!program.ok())
    return c;
  auto device = ::omni::hal::builtinDrivers().createDevice("cpu", {});
  if (!device.ok())
    return c;
  c.device = std::move(*device);
  auto executor = ::omni::executor::Executor::create(*program, *c.device);
  if (executor.ok())
    c.executor = std::move(*executor);
  return c;
}

HostTensor filled(std::vector<int64_t> shape, double v) {
  return HostTensor::fromDoubles(
      DType::F32, shape, std::vector<double>(::omni::numElementsOf(shape), v));
}

} // namespace

int main() {
  DialectRegistry registry;
  mlir::omni::registerOmniDialects(registry);
  mlir::omni::registerCodegenDialects(registry);
  MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();

  std::printf("%-44s %12s %12s %8s\n", "benchmark", "omni", "baseline",
              "ratio");

  // 1. Fused elementwise chain vs memcpy.
  {
    const int64_t n = 1 << 22;
    std::string src =
        "func.func @f(%a: tensor<4194304xf32>, %b: tensor<4194304xf32>) -> "
        "tensor<4194304xf32> {\n"
        "  %0 = omni.add %a, %b : tensor<4194304xf32>\n"
        "  %1 = omni.mul %0, %a : tensor<4194304xf32>\n"
        "  %2 = omni.sub %1, %b : tensor<4194304xf32>\n"
        "  %3 = omni.max %2, %a : tensor<4194304xf32>\n"
        "  %4 = omni.mul %3, %3 : tensor<4194304xf32>\n"
        "  %5 = omni.add %4, %b : tensor<4194304xf32>\n"
        "  %6 = omni.min %5, %a : tensor<4194304xf32>\n"
        "  %7 = omni.neg %6 : tensor<4194304xf32>\n"
        "  return %7 : tensor<4194304xf32>\n}\n";
    auto module = parseSourceString<ModuleOp>(src, ParserConfig(&ctx));
    Compiled c = compile(ctx, *module);
    if (!c.executor) {
      std::fprintf(stderr, "bench: compiling the chain failed\n");
      return 1;
    }
    // Device-resident run: buffers stay on the device across repetitions.
    auto &dev = *c.device;
    const int64_t bytes = n * 4;
    auto a = dev.allocate(bytes), b = dev.allocate(bytes),
         r = dev.allocate(bytes);
    if (!a.ok() || !b.ok() || !r.ok())
      return 1;
    std::vector<::omni::hal::BufferRef> ins = {{a->get(), 0, bytes},
                                               {b->get(), 0, bytes}};
    std::vector<::omni::hal::BufferRef> outs = {{r->get(), 0, bytes}};
    double kernel = medianSeconds(9, [&] {
      (void)c.executor->runOnDevice(0, ins, outs);
      (void)c.executor->stream().synchronize();
    });
    std::vector<float> x(n, 1.0f), y(n, 2.0f), z(n);
    double copy = medianSeconds(9, [&] {
      // The chain reads two arrays and writes one: copy the same 3n floats.
      std::memcpy(z.data(), x.data(), bytes);
      std::memcpy(y.data(), z.data(), bytes / 2);
      std::memcpy(y.data() + n / 2, x.data(), bytes / 2);
    });
    std::printf("%-44s %10.3f ms %10.3f ms %7.2fx\n",
                "fused 8-op chain, 4M f32 (vs memcpy)", kernel * 1e3,
                copy * 1e3, copy / kernel);
  }

  // 2. Matmul via the executor vs OpenBLAS directly.
  {
    const int m = 512;
    std::string src = "func.func @f(%a: tensor<512x512xf32>, %b: "
                      "tensor<512x512xf32>) -> tensor<512x512xf32> {\n"
                      "  %c = omni.matmul %a, %b : tensor<512x512xf32>, "
                      "tensor<512x512xf32> -> tensor<512x512xf32>\n"
                      "  return %c : tensor<512x512xf32>\n}\n";
    auto module = parseSourceString<ModuleOp>(src, ParserConfig(&ctx));
    Compiled c = compile(ctx, *module);
    if (!c.executor)
      return 1;
    auto &dev = *c.device;
    const int64_t bytes = int64_t(m) * m * 4;
    auto a = dev.allocate(bytes), b = dev.allocate(bytes),
         r = dev.allocate(bytes);
    std::vector<::omni::hal::BufferRef> ins = {{a->get(), 0, bytes},
                                               {b->get(), 0, bytes}};
    std::vector<::omni::hal::BufferRef> outs = {{r->get(), 0, bytes}};
    double omni = medianSeconds(9, [&] {
      (void)c.executor->runOnDevice(0, ins, outs);
      (void)c.executor->stream().synchronize();
    });
    std::vector<float> x(m * m, 0.5f), y(m * m, 0.25f), z(m * m);
    // The baseline is OpenBLAS with its own threads, as many as the
    // device's (which turned them off: runtime/hal/drivers/cpu/Gemm.h).
    openblas_set_num_threads(
        static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
    double blas = medianSeconds(9, [&] {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, m, m, 1.0f,
                  x.data(), m, y.data(), m, 0.0f, z.data(), m);
    });
    openblas_set_num_threads(1);
    std::printf("%-44s %10.3f ms %10.3f ms %7.2fx\n",
                "matmul 512^3 f32 (vs direct OpenBLAS)", omni * 1e3, blas * 1e3,
                blas / omni);
  }

  // 3 and 4. The toy FlowGRPO iteration: compiled vs evaluator; compile time.
  {
    auto module = parseSourceFile<ModuleOp>(
        OMNI_SOURCE_DIR "/examples/flowgrpo-toy/toy.mlir", ParserConfig(&ctx));
    if (!module)
      return 1;
    Compiled c = compile(ctx, *module);
    if (!c.executor)
      return 1;
    std::vector<HostTensor> args = {HostTensor::scalarInt(DType::I64, 7),
                                    HostTensor::scalarInt(DType::I64, 0)};
    double compiled = medianSeconds(
        9, [&] { (void)c.executor->run("main", ::omni::toTyped(args)); });
    double evaluator = medianSeconds(3, [&] {
      (void)::omni::reference::evaluateFunction(*module, "main", args);
    });
    std::printf("%-44s %10.3f ms %10.3f ms %7.2fx\n",
                "toy FlowGRPO iteration (vs evaluator)", compiled * 1e3,
                evaluator * 1e3, evaluator / compiled);
    std::printf("%-44s %10.3f s\n", "omnic compile of the toy program",
                c.compileSeconds);
  }
  return 0;
}
