//===- CpuMathTest.cpp - accuracy of the cpu kernels' math functions ------===//
//
// The cpu target replaces libm calls for f32 exp, log, tanh and erf by
// polynomial approximations (CpuCodegen.cpp approximateMath, bounds in
// docs/precision.md "Transcendental functions on the cpu"). This test
// compiles one elementwise kernel per run that applies each omni function to
// a sweep of f32 inputs -- every binade of both signs, subnormals, +-0,
// +-inf, NaN, the overflow/underflow thresholds and dense samples of the
// ranges models use -- and compares each result with the double libm
// function of the same input, in ulps of the f32 nearest the exact value.
// The bounds asserted are the documented ones; sin and cos stay libm's
// (< 1 ulp).
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/Codegen.h"
#include "dialects/omni/OmniOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Parser/Parser.h"

#include <cfloat>
#include <cmath>
#include <cstring>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <random>
#include <sys/mman.h>
#include <unistd.h>

using namespace mlir;

namespace {

using KernelFn = void (*)(int64_t, int64_t, void **, const int64_t *);

/// dlopen()s a shared object held in memory (as the cpu driver does).
void *loadFromMemory(const std::vector<char> &bytes) {
  int fd = memfd_create("omni-kernels", MFD_CLOEXEC);
  if (fd < 0)
    return nullptr;
  if (write(fd, bytes.data(), bytes.size()) !=
      static_cast<ssize_t>(bytes.size())) {
    close(fd);
    return nullptr;
  }
  std::string path = "/proc/self/fd/" + std::to_string(fd);
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  close(fd);
  return handle;
}

/// One omni function and its documented accuracy.
struct MathFn {
  const char *op;          ///< omni op name
  double (*exact)(double); ///< the double libm function (< 1 ulp of double)
  double maxUlp;           ///< bound on the error, f32 ulps
  /// Exact results below this magnitude may come back as 0 (the
  /// approximation flushes subnormal results); 0 = none may.
  double flushBelow;
};

double expD(double x) { return std::exp(x); }
double logD(double x) { return std::log(x); }
double tanhD(double x) { return std::tanh(x); }
double erfD(double x) { return std::erf(x); }
double sinD(double x) { return std::sin(x); }
double cosD(double x) { return std::cos(x); }

/// The bounds of docs/precision.md.
const MathFn kFunctions[] = {
    {"exp", expD, 2.0, 0x1p-126}, {"log", logD, 1.5, 0},
    {"tanh", tanhD, 5.0, 0},      {"erf", erfD, 4.5, 0},
    {"sin", sinD, 1.0, 0},        {"cos", cosD, 1.0, 0},
};

/// `got`'s error in ulps of the f32 nearest `exact` (subnormal ulps below
/// 2^-126); 0 when both are the same NaN/infinity, infinite when only one
/// is.
double ulpError(float got, double exact) {
  if (std::isnan(exact))
    return std::isnan(got) ? 0 : INFINITY;
  auto rounded = static_cast<float>(exact);
  if (std::isinf(rounded))
    return got == rounded ? 0 : INFINITY;
  if (!std::isfinite(got))
    return INFINITY;
  int e = rounded == 0 ? -126 : std::max(std::ilogb(rounded), -126);
  return std::abs(static_cast<double>(got) - exact) / std::ldexp(1.0, e - 23);
}

/// The inputs: special values and thresholds, a few random significands in
/// every binade of both signs (subnormals included), and dense uniform
/// samples of [-10, 10], [-100, 100] and [0, 4]; `n` in all.
std::vector<float> sweepInputs(size_t n) {
  std::vector<float> v = {0.0f,        -0.0f,
                          INFINITY,    -INFINITY,
                          NAN,         FLT_MAX,
                          -FLT_MAX,    FLT_MIN,
                          -FLT_MIN,    1.0f,
                          -1.0f,       0x1p-149f,
                          -0x1p-149f,  0x1.fffffcp-127f,
                          88.72283f,   88.72284f,
                          -87.33654f,  -87.33655f,
                          -103.9721f,  -88.0f,
                          -100.0f,     7.9988117f,
                          -7.9988117f, 0.0004f,
                          -0.0004f,    3.75f,
                          0.8f,        2.0f,
                          9.0f,        -9.0f,
                          1e-30f,      1e30f};
  std::mt19937 rng(7);
  for (uint32_t sign = 0; sign < 2; ++sign)
    for (uint32_t exponent = 0; exponent < 255; ++exponent)
      for (int i = 0; i < 64; ++i) {
        uint32_t bits = sign << 31 | exponent << 23 | (rng() & 0x7fffff);
        float f;
        std::memcpy(&f, &bits, sizeof f);
        v.push_back(f);
      }
  std::uniform_real_distribution<float> models(-10.0f, 10.0f);
  std::uniform_real_distribution<float> wide(-100.0f, 100.0f);
  std::uniform_real_distribution<float> positive(0.0f, 4.0f);
  while (v.size() < n) {
    size_t k = v.size() % 4;
    v.push_back(k == 0 ? wide(rng) : k == 1 ? positive(rng) : models(rng));
  }
  v.resize(n);
  return v;
}

class CpuMathTest : public ::testing::Test {
protected:
  CpuMathTest() {
    DialectRegistry registry;
    mlir::omni::registerOmniDialects(registry);
    mlir::omni::registerCodegenDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }

  /// Compiles `@f(%a: tensor<n x f32>)` applying every function of
  /// kFunctions to %a (one fused elementwise kernel), runs it over all its
  /// work items on `input` and returns one output per function.
  std::vector<std::vector<float>> run(const std::vector<float> &input) {
    std::string t = "tensor<" + std::to_string(input.size()) + "xf32>";
    std::string results, body, yields;
    for (const MathFn &fn : kFunctions) {
      std::string sep = results.empty() ? "" : ", ";
      results += sep + t;
      yields += sep + "%" + fn.op;
      body +=
          "%" + std::string(fn.op) + " = omni." + fn.op + " %x : " + t + "\n";
    }
    std::string source = "func.func @f(%a: " + t + ") -> (" + results +
                         ") {\n%r:" + std::to_string(std::size(kFunctions)) +
                         " = omni.fusion (%a) : (" + t + ") -> (" + results +
                         ") {\n^bb0(%x: " + t + "):\n" + body + "omni.yield " +
                         yields + " : " + results + "\n}\nreturn ";
    for (size_t i = 0; i < std::size(kFunctions); ++i)
      source += (i ? ", %r#" : "%r#") + std::to_string(i);
    source += " : " + results + "\n}";
    OwningOpRef<ModuleOp> module =
        parseSourceString<ModuleOp>(source, ParserConfig(&context));
    EXPECT_TRUE(module) << source;
    if (!module)
      return {};
    FailureOr<mlir::omni::CodegenResult> exe =
        mlir::omni::compileFusions(*module);
    EXPECT_TRUE(succeeded(exe));
    if (failed(exe) || exe->executables.size() != 1 ||
        exe->executables[0].kernels.size() != 1) {
      ADD_FAILURE() << "expected one kernel";
      return {};
    }
    const mlir::omni::CompiledExecutable &so = exe->executables[0];
    void *handle = loadFromMemory(so.code);
    EXPECT_NE(handle, nullptr) << dlerror();
    if (!handle)
      return {};
    auto kernel =
        reinterpret_cast<KernelFn>(dlsym(handle, so.kernels[0].symbol.c_str()));
    EXPECT_NE(kernel, nullptr);
    std::vector<std::vector<float>> outs(std::size(kFunctions),
                                         std::vector<float>(input.size()));
    std::vector<void *> pointers = {const_cast<float *>(input.data())};
    for (std::vector<float> &o : outs)
      pointers.push_back(o.data());
    if (kernel) {
      int64_t grid = mlir::omni::dispatchGrid(so.kernels[0].launch);
      kernel(0, grid, pointers.data(), nullptr);
    }
    dlclose(handle);
    return outs;
  }

  MLIRContext context;
};

TEST_F(CpuMathTest, WithinTheDocumentedUlpBounds) {
  std::vector<float> input = sweepInputs(1 << 18);
  std::vector<std::vector<float>> outs = run(input);
  ASSERT_EQ(outs.size(), std::size(kFunctions));
  for (auto [k, fn] : llvm::enumerate(kFunctions)) {
    double worst = 0;
    float worstAt = 0;
    for (size_t i = 0; i < input.size(); ++i) {
      double exact = fn.exact(input[i]);
      float got = outs[k][i];
      double err = ulpError(got, exact);
      if (std::abs(exact) < fn.flushBelow && got == 0)
        err = 0;
      if (err > worst || std::isnan(err))
        worst = err, worstAt = input[i];
      EXPECT_LE(err, fn.maxUlp)
          << fn.op << "(" << input[i] << ") = " << got << ", exact " << exact;
    }
    // The measured maximum, for docs/precision.md.
    std::printf("%-5s max error %.3f ulp at x = %a (%g)\n", fn.op, worst,
                static_cast<double>(worstAt), static_cast<double>(worstAt));
  }
}

/// The approximations are plain IEEE arithmetic (explicit fma, no
/// reassociation), so a value's result does not depend on where it sits:
/// the vector body and the scalar remainder of the loop, and any work item
/// (thread) split of the kernel, give the same bits.
TEST_F(CpuMathTest, SameBitsAtEveryPosition) {
  std::vector<float> pattern = sweepInputs(1 << 12);
  std::mt19937 rng(3);
  std::shuffle(pattern.begin(), pattern.end(), rng);
  pattern.resize(13);
  std::vector<float> input(1031);
  for (size_t i = 0; i < input.size(); ++i)
    input[i] = pattern[i % pattern.size()];
  std::vector<std::vector<float>> outs = run(input);
  ASSERT_EQ(outs.size(), std::size(kFunctions));
  for (auto [k, fn] : llvm::enumerate(kFunctions))
    for (size_t i = pattern.size(); i < input.size(); ++i)
      EXPECT_EQ(
          std::memcmp(&outs[k][i], &outs[k][i % pattern.size()], sizeof(float)),
          0)
          << fn.op << "(" << input[i] << ") at " << i << ": " << outs[k][i]
          << " vs " << outs[k][i % pattern.size()];
}

} // namespace
