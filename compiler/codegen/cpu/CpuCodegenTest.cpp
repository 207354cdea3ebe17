//===- CpuCodegenTest.cpp - compiled fusion kernels vs the evaluator ------===//
//
// Compiles omni.fusion regions to a shared object, loads it from memory
// (memfd + dlopen, as the cpu driver does), runs each kernel through the
// runtime ABI, and compares the results with the reference evaluator in
// float32 mode. Tolerance: 2e-6 relative (+1e-6 absolute) -- the kernels'
// exp, log, tanh and erf are polynomials within a few ulps
// (docs/precision.md section 5, CpuMathTest.cpp), the evaluator rounds
// double results, so transcendental results may differ in the last bits.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/Codegen.h"
#include "compiler/codegen/KernelBuilder.h"
#include "compiler/reference/Evaluator.h"
#include "dialects/omni/OmniOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Parser/Parser.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <memory>
#include <random>
#include <sys/mman.h>
#include <unistd.h>

using namespace mlir;
using ::omni::DType;
using ::omni::HostTensor;
namespace reference = ::omni::reference;

namespace {

using KernelFn = void (*)(int64_t, int64_t, void **, const int64_t *);

/// dlopen()s a shared object held in memory.
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

struct Case {
  const char *name;
  const char *source; ///< @f(args) whose body is one omni.fusion
  /// Whether the cpu target splits the (not flat) kernel into work items of
  /// row blocks (KernelBuilder.h RowSplit): grid > 1, else grid 1.
  bool splitsRows = false;
  /// When > 0: the grid must be larger (more items than the leading
  /// dimension has rows: a split over several leading dimensions).
  int64_t gridAbove = 0;
};

class CpuCodegenTest : public ::testing::TestWithParam<Case> {
protected:
  CpuCodegenTest() {
    DialectRegistry registry;
    mlir::omni::registerOmniDialects(registry);
    mlir::omni::registerCodegenDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }
  MLIRContext context;
};

/// Storage of one buffer for the kernel: float32, int64 or i1 bytes.
struct Buffer {
  std::vector<float> f32;
  std::vector<int64_t> i64;
  std::vector<int32_t> i32;
  std::vector<uint8_t> i1;
  std::vector<double> f64;
  void *data(RankedTensorType t) {
    Type e = t.getElementType();
    if (e.isF32())
      return f32.data();
    if (e.isF64())
      return f64.data();
    if (e.isInteger(64))
      return i64.data();
    if (e.isInteger(32))
      return i32.data();
    return i1.data();
  }
  void resize(RankedTensorType t) {
    size_t n = t.getNumElements();
    f32.resize(n);
    f64.resize(n);
    i64.resize(n);
    i32.resize(n);
    i1.resize(n);
  }
};

TEST_P(CpuCodegenTest, MatchesTheEvaluator) {
  const Case &c = GetParam();
  OwningOpRef<ModuleOp> module =
      parseSourceString<ModuleOp>(c.source, ParserConfig(&context));
  ASSERT_TRUE(module) << c.name;
  auto fn = module->lookupSymbol<func::FuncOp>("f");
  mlir::omni::FusionOp fusion;
  fn.walk([&](mlir::omni::FusionOp f) { fusion = f; });
  ASSERT_TRUE(fusion);

  // Random inputs (values in [-2, 2], integers 0..4, booleans).
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<HostTensor> args;
  std::vector<Buffer> buffers;
  for (Type t : fn.getFunctionType().getInputs()) {
    auto tt = cast<RankedTensorType>(t);
    std::vector<int64_t> shape(tt.getShape());
    Buffer buf;
    buf.resize(tt);
    if (tt.getElementType().isF32()) {
      std::vector<double> v(tt.getNumElements());
      for (size_t i = 0; i < v.size(); ++i)
        buf.f32[i] = dist(rng), v[i] = buf.f32[i];
      args.push_back(HostTensor::fromDoubles(DType::F32, shape, v));
    } else if (tt.getElementType().isInteger(1)) {
      std::vector<int64_t> v(tt.getNumElements());
      for (size_t i = 0; i < v.size(); ++i)
        buf.i1[i] = v[i] = rng() % 2;
      args.push_back(HostTensor::fromInts(DType::I1, shape, v));
    } else {
      std::vector<int64_t> v(tt.getNumElements());
      for (size_t i = 0; i < v.size(); ++i)
        buf.i64[i] = v[i] = rng() % 5;
      args.push_back(HostTensor::fromInts(DType::I64, shape, v));
    }
    buffers.push_back(std::move(buf));
  }
  auto want = reference::evaluateFunction(*module, "f", args);
  ASSERT_TRUE(want.ok()) << want.status();

  FailureOr<mlir::omni::CodegenResult> exe =
      mlir::omni::compileFusions(*module);
  ASSERT_TRUE(succeeded(exe)) << c.name;
  ASSERT_EQ(exe->executables.size(), 1u);
  const mlir::omni::CompiledExecutable &so = exe->executables[0];
  EXPECT_EQ(so.format, mlir::omni::CodeFormat::ElfSharedObject);
  EXPECT_EQ(so.target.kind, "cpu");
  ASSERT_EQ(so.kernels.size(), 1u);
  // The fusion maps to the one kernel, whose signature is the fusion's.
  ASSERT_EQ(exe->kernelOf.count(fusion), 1u);
  EXPECT_EQ(exe->kernelOf.lookup(fusion).kernel, 0u);
  EXPECT_TRUE(
      llvm::equal(so.kernels[0].operands, fusion.getInputs().getTypes()));
  EXPECT_TRUE(llvm::equal(so.kernels[0].results, fusion.getResultTypes()));
  void *handle = loadFromMemory(so.code);
  ASSERT_NE(handle, nullptr) << dlerror();
  auto kernel =
      reinterpret_cast<KernelFn>(dlsym(handle, so.kernels[0].symbol.c_str()));
  ASSERT_NE(kernel, nullptr);

  std::vector<void *> pointers;
  for (auto [i, t] : llvm::enumerate(fusion.getInputs().getTypes()))
    pointers.push_back(buffers[i].data(cast<RankedTensorType>(t)));
  std::vector<Buffer> outs(fusion.getNumResults());
  for (auto [i, t] : llvm::enumerate(fusion.getResultTypes())) {
    outs[i].resize(cast<RankedTensorType>(t));
    pointers.push_back(outs[i].data(cast<RankedTensorType>(t)));
  }
  // Every work item of the launch's grid (flat kernels are split).
  int64_t grid = mlir::omni::dispatchGrid(so.kernels[0].launch);
  ASSERT_GE(grid, 1);
  kernel(0, grid, pointers.data(), nullptr);

  for (auto [r, t] : llvm::enumerate(fusion.getResultTypes())) {
    auto tt = cast<RankedTensorType>(t);
    const HostTensor &expected = (*want)[r];
    for (int64_t i = 0; i < tt.getNumElements(); ++i) {
      if (tt.getElementType().isF32()) {
        double e = expected.floats()[i], g = outs[r].f32[i];
        EXPECT_NEAR(g, e, 2e-6 * std::abs(e) + 1e-6)
            << c.name << " result " << r << " element " << i;
      } else if (tt.getElementType().isInteger(1)) {
        EXPECT_EQ(outs[r].i1[i] & 1, expected.ints()[i])
            << c.name << " result " << r << " element " << i;
      } else {
        EXPECT_EQ(outs[r].i64[i], expected.ints()[i])
            << c.name << " result " << r << " element " << i;
      }
    }
  }
  dlclose(handle);
}

/// The bytes of `n` elements of `t`'s element type in `buf`.
std::vector<char> bytesOf(Buffer &buf, RankedTensorType t) {
  Type e = t.getElementType();
  size_t width = e.isInteger(1) ? 1 : e.getIntOrFloatBitWidth() / 8;
  auto *p = static_cast<const char *>(buf.data(t));
  return std::vector<char>(p, p + width * t.getNumElements());
}

// A kernel split into row blocks computes the same bits for every way of
// cutting [0, grid) into calls (the runtime's thread count decides the cut)
// and the same bits as the whole kernel (CpuTargetOptions::splitRows off):
// rows never interact, reductions run inside a row in the same order.
TEST_P(CpuCodegenTest, EverySplitGivesTheSameBits) {
  const Case &c = GetParam();
  OwningOpRef<ModuleOp> module =
      parseSourceString<ModuleOp>(c.source, ParserConfig(&context));
  ASSERT_TRUE(module) << c.name;
  auto fn = module->lookupSymbol<func::FuncOp>("f");
  mlir::omni::FusionOp fusion;
  fn.walk([&](mlir::omni::FusionOp f) { fusion = f; });
  ASSERT_TRUE(fusion);
  std::vector<RankedTensorType> types;
  for (Type t : fusion.getInputs().getTypes())
    types.push_back(cast<RankedTensorType>(t));
  for (Type t : fusion.getResultTypes())
    types.push_back(cast<RankedTensorType>(t));
  size_t inputs = fusion.getInputs().size();
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<Buffer> in(inputs);
  for (size_t i = 0; i < inputs; ++i) {
    in[i].resize(types[i]);
    for (size_t k = 0; k < in[i].f32.size(); ++k) {
      in[i].f32[k] = dist(rng);
      in[i].i64[k] = rng() % 5;
      in[i].i1[k] = rng() % 2;
    }
  }

  /// A compiled kernel loaded into this process.
  struct Loaded {
    std::shared_ptr<void> handle;
    KernelFn kernel = nullptr;
    int64_t grid = 0;
  };
  auto compile = [&](bool splitRows) {
    Loaded loaded;
    mlir::omni::CodegenOptions options;
    options.cpu.splitRows = splitRows;
    FailureOr<mlir::omni::CodegenResult> exe =
        mlir::omni::compileFusions(*module, options);
    EXPECT_TRUE(succeeded(exe)) << c.name;
    if (failed(exe))
      return loaded;
    const mlir::omni::CompiledExecutable &so = exe->executables[0];
    void *handle = loadFromMemory(so.code);
    EXPECT_NE(handle, nullptr) << dlerror();
    if (!handle)
      return loaded;
    loaded.handle = std::shared_ptr<void>(handle, dlclose);
    loaded.kernel =
        reinterpret_cast<KernelFn>(dlsym(handle, so.kernels[0].symbol.c_str()));
    loaded.grid = mlir::omni::dispatchGrid(so.kernels[0].launch);
    return loaded;
  };
  /// Runs `k` with `cuts` (the calls' [begin, end) boundaries; empty:
  /// [0, grid) in one call), the calls in reverse order (no item may depend
  /// on an earlier one), and returns every result's bytes.
  auto run = [&](const Loaded &k, const std::vector<int64_t> &cuts) {
    std::vector<Buffer> out(types.size() - inputs);
    std::vector<void *> pointers;
    for (size_t i = 0; i < types.size(); ++i) {
      if (i >= inputs)
        out[i - inputs].resize(types[i]);
      pointers.push_back(i < inputs ? in[i].data(types[i])
                                    : out[i - inputs].data(types[i]));
    }
    std::vector<int64_t> bounds = {0};
    for (int64_t cut : cuts)
      if (cut > bounds.back() && cut < k.grid)
        bounds.push_back(cut);
    bounds.push_back(k.grid);
    for (size_t b = bounds.size() - 1; b > 0; --b)
      k.kernel(bounds[b - 1], bounds[b], pointers.data(), nullptr);
    std::vector<std::vector<char>> results;
    for (size_t r = 0; r < out.size(); ++r)
      results.push_back(bytesOf(out[r], types[inputs + r]));
    return results;
  };

  Loaded whole = compile(false), split = compile(true);
  ASSERT_TRUE(whole.kernel && split.kernel) << c.name;
  int64_t grid = split.grid;
  if (c.splitsRows) {
    EXPECT_EQ(whole.grid, 1) << c.name;
    EXPECT_GT(grid, std::max<int64_t>(1, c.gridAbove)) << c.name;
  } else if (!mlir::omni::isFlatElementwise(fusion)) {
    EXPECT_EQ(grid, 1) << c.name;
  }
  std::vector<std::vector<char>> want = run(whole, {});
  // One call, cuts of two threads and of three, and every item on its own.
  std::vector<int64_t> each;
  for (int64_t w = 1; w < grid; ++w)
    each.push_back(w);
  for (const std::vector<int64_t> &cuts : {std::vector<int64_t>{},
                                           {grid / 2},
                                           {grid / 3, 2 * grid / 3},
                                           {1},
                                           each}) {
    std::vector<std::vector<char>> got = run(split, cuts);
    ASSERT_EQ(got.size(), want.size());
    for (size_t r = 0; r < want.size(); ++r)
      EXPECT_TRUE(got[r] == want[r])
          << c.name << " result " << r << " cut into " << cuts.size() + 1;
  }
}

const Case kCases[] = {
    {"elementwise_chain",
     R"(func.func @f(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
      %r = omni.fusion (%a, %b) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32> {
      ^bb0(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>):
        %s = omni.add %x, %y : tensor<4x8xf32>
        %m = omni.mul %s, %x : tensor<4x8xf32>
        %t = omni.tanh %m : tensor<4x8xf32>
        %e = omni.exp %t : tensor<4x8xf32>
        %n = omni.neg %e : tensor<4x8xf32>
        %g = omni.logistic %n : tensor<4x8xf32>
        %q = omni.erf %g : tensor<4x8xf32>
        %z = omni.silu %q : tensor<4x8xf32>
        %mx = omni.max %z, %y : tensor<4x8xf32>
        %mn = omni.min %mx, %s : tensor<4x8xf32>
        %ab = omni.abs %mn : tensor<4x8xf32>
        %sq = omni.sqrt %ab : tensor<4x8xf32>
        %dv = omni.div %sq, %e : tensor<4x8xf32>
        %sg = omni.sign %y : tensor<4x8xf32>
        %o = omni.sub %dv, %sg : tensor<4x8xf32>
        omni.yield %o : tensor<4x8xf32>
      }
      return %r : tensor<4x8xf32> })"},
    {"broadcast_reduce",
     R"(func.func @f(%a: tensor<4x8xf32>, %b: tensor<8xf32>) -> (tensor<4xf32>, tensor<4x8xf32>, tensor<8xf32>) {
      %r:3 = omni.fusion (%a, %b) : (tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4xf32>, tensor<4x8xf32>, tensor<8xf32>) {
      ^bb0(%x: tensor<4x8xf32>, %w: tensor<8xf32>):
        %wb = omni.broadcast_in_dim %w, dims = [1] : tensor<8xf32> -> tensor<4x8xf32>
        %p = omni.mul %x, %wb : tensor<4x8xf32>
        %s = omni.reduce sum %p dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
        %m = omni.reduce mean %p dims = [1] : tensor<4x8xf32> -> tensor<4xf32>
        %mb = omni.broadcast_in_dim %m, dims = [0] : tensor<4xf32> -> tensor<4x8xf32>
        %c = omni.sub %p, %mb : tensor<4x8xf32>
        %mx = omni.reduce max %c dims = [0] : tensor<4x8xf32> -> tensor<8xf32>
        %sum = omni.add %s, %m : tensor<4xf32>
        omni.yield %sum, %c, %mx : tensor<4xf32>, tensor<4x8xf32>, tensor<8xf32>
      }
      return %r#0, %r#1, %r#2 : tensor<4xf32>, tensor<4x8xf32>, tensor<8xf32> })"},
    {"movement",
     R"(func.func @f(%a: tensor<4x6xf32>) -> (tensor<6x4xf32>, tensor<2x7xf32>, tensor<24xf32>) {
      %r:3 = omni.fusion (%a) : (tensor<4x6xf32>) -> (tensor<6x4xf32>, tensor<2x7xf32>, tensor<24xf32>) {
      ^bb0(%x: tensor<4x6xf32>):
        %t = omni.transpose %x, permutation = [1, 0] : tensor<4x6xf32> -> tensor<6x4xf32>
        %s = omni.slice %x [1:4:2, 0:6:2] : tensor<4x6xf32> -> tensor<2x3xf32>
        %p = omni.pad %s low = [0, 1] high = [0, 0] value = 0.5 : tensor<2x3xf32> -> tensor<2x4xf32>
        %c = omni.concat %p, %s dim = 1 : (tensor<2x4xf32>, tensor<2x3xf32>) -> tensor<2x7xf32>
        %f = omni.reshape %x : tensor<4x6xf32> -> tensor<24xf32>
        omni.yield %t, %c, %f : tensor<6x4xf32>, tensor<2x7xf32>, tensor<24xf32>
      }
      return %r#0, %r#1, %r#2 : tensor<6x4xf32>, tensor<2x7xf32>, tensor<24xf32> })"},
    {"compare_select_cast",
     R"(func.func @f(%a: tensor<16xf32>, %b: tensor<16xf32>, %i: tensor<16xi64>) -> (tensor<16xf32>, tensor<16xi1>, tensor<16xi64>, tensor<16xf32>) {
      %r:4 = omni.fusion (%a, %b, %i) : (tensor<16xf32>, tensor<16xf32>, tensor<16xi64>) -> (tensor<16xf32>, tensor<16xi1>, tensor<16xi64>, tensor<16xf32>) {
      ^bb0(%x: tensor<16xf32>, %y: tensor<16xf32>, %n: tensor<16xi64>):
        %p = omni.compare lt, %x, %y : tensor<16xf32>
        %s = omni.select %p, %x, %y : tensor<16xi1>, tensor<16xf32>
        %fin = omni.is_finite %s : tensor<16xf32>
        %k = omni.cast %x : tensor<16xf32> -> tensor<16xi64>
        %k2 = omni.add %k, %n : tensor<16xi64>
        %io = omni.iota dim = 0 : tensor<16xi64>
        %k3 = omni.mul %k2, %io : tensor<16xi64>
        %nf = omni.cast %n : tensor<16xi64> -> tensor<16xf32>
        %c = omni.constant dense<3.0> : tensor<16xf32>
        %pw = omni.pow %c, %nf : tensor<16xf32>
        omni.yield %s, %fin, %k3, %pw : tensor<16xf32>, tensor<16xi1>, tensor<16xi64>, tensor<16xf32>
      }
      return %r#0, %r#1, %r#2, %r#3 : tensor<16xf32>, tensor<16xi1>, tensor<16xi64>, tensor<16xf32> })"},
    // Kernels large enough to split over their rows (KernelBuilder.h
    // kMinRowWork): a layer norm (row reductions, broadcasts of the row
    // statistics and of a weight) ...
    {"layer_norm_rows",
     R"(func.func @f(%a: tensor<64x512xf32>, %w: tensor<512xf32>) -> (tensor<64x512xf32>, tensor<64xf32>) {
      %r:2 = omni.fusion (%a, %w) : (tensor<64x512xf32>, tensor<512xf32>) -> (tensor<64x512xf32>, tensor<64xf32>) {
      ^bb0(%x: tensor<64x512xf32>, %g: tensor<512xf32>):
        %m = omni.reduce mean %x dims = [1] : tensor<64x512xf32> -> tensor<64xf32>
        %mb = omni.broadcast_in_dim %m, dims = [0] : tensor<64xf32> -> tensor<64x512xf32>
        %c = omni.sub %x, %mb : tensor<64x512xf32>
        %sq = omni.mul %c, %c : tensor<64x512xf32>
        %v = omni.reduce mean %sq dims = [1] : tensor<64x512xf32> -> tensor<64xf32>
        %eps = omni.constant dense<1.0e-5> : tensor<64xf32>
        %ve = omni.add %v, %eps : tensor<64xf32>
        %rs = omni.rsqrt %ve : tensor<64xf32>
        %rb = omni.broadcast_in_dim %rs, dims = [0] : tensor<64xf32> -> tensor<64x512xf32>
        %n = omni.mul %c, %rb : tensor<64x512xf32>
        %ge = omni.exp %g : tensor<512xf32>
        %gb = omni.broadcast_in_dim %ge, dims = [1] : tensor<512xf32> -> tensor<64x512xf32>
        %y = omni.mul %n, %gb : tensor<64x512xf32>
        omni.yield %y, %m : tensor<64x512xf32>, tensor<64xf32>
      }
      return %r#0, %r#1 : tensor<64x512xf32>, tensor<64xf32> })",
     true},
    // ... a softmax behind a leading unit dimension (rows are dim 1) ...
    {"softmax_unit_lead",
     R"(func.func @f(%a: tensor<1x32x16x64xf32>) -> tensor<1x32x16x64xf32> {
      %r = omni.fusion (%a) : (tensor<1x32x16x64xf32>) -> tensor<1x32x16x64xf32> {
      ^bb0(%x: tensor<1x32x16x64xf32>):
        %mx = omni.reduce max %x dims = [3] : tensor<1x32x16x64xf32> -> tensor<1x32x16xf32>
        %mb = omni.broadcast_in_dim %mx, dims = [0, 1, 2] : tensor<1x32x16xf32> -> tensor<1x32x16x64xf32>
        %d = omni.sub %x, %mb : tensor<1x32x16x64xf32>
        %e = omni.exp %d : tensor<1x32x16x64xf32>
        %s = omni.reduce sum %e dims = [3] : tensor<1x32x16x64xf32> -> tensor<1x32x16xf32>
        %sb = omni.broadcast_in_dim %s, dims = [0, 1, 2] : tensor<1x32x16xf32> -> tensor<1x32x16x64xf32>
        %y = omni.div %e, %sb : tensor<1x32x16x64xf32>
        omni.yield %y : tensor<1x32x16x64xf32>
      }
      return %r : tensor<1x32x16x64xf32> })",
     true},
    // ... a transpose that keeps the rows, reshapes to and from more rows,
    // a concat, slice and pad beside them, an iota and i1 / i64 results ...
    {"movement_rows",
     R"(func.func @f(%a: tensor<16x64x32xf32>, %i: tensor<16x2048xi64>) -> (tensor<16x32x64xf32>, tensor<16x64x66xf32>, tensor<16x2048xi1>, tensor<16x2048xi64>) {
      %r:4 = omni.fusion (%a, %i) : (tensor<16x64x32xf32>, tensor<16x2048xi64>) -> (tensor<16x32x64xf32>, tensor<16x64x66xf32>, tensor<16x2048xi1>, tensor<16x2048xi64>) {
      ^bb0(%x: tensor<16x64x32xf32>, %n: tensor<16x2048xi64>):
        %t = omni.transpose %x, permutation = [0, 2, 1] : tensor<16x64x32xf32> -> tensor<16x32x64xf32>
        %f = omni.reshape %x : tensor<16x64x32xf32> -> tensor<1024x32xf32>
        %io = omni.iota dim = 1 : tensor<1024x32xf32>
        %c = omni.concat %f, %io dim = 1 : (tensor<1024x32xf32>, tensor<1024x32xf32>) -> tensor<1024x64xf32>
        %s = omni.slice %c [0:1024:1, 0:64:2] : tensor<1024x64xf32> -> tensor<1024x32xf32>
        %p = omni.pad %s low = [0, 1] high = [0, 1] value = 0.5 : tensor<1024x32xf32> -> tensor<1024x34xf32>
        %sl = omni.slice %p [0:1024:1, 0:33:1] : tensor<1024x34xf32> -> tensor<1024x33xf32>
        %cc = omni.concat %sl, %sl dim = 1 : (tensor<1024x33xf32>, tensor<1024x33xf32>) -> tensor<1024x66xf32>
        %b = omni.reshape %cc : tensor<1024x66xf32> -> tensor<16x64x66xf32>
        %fl = omni.reshape %x : tensor<16x64x32xf32> -> tensor<16x2048xf32>
        %z = omni.constant dense<0.0> : tensor<16x2048xf32>
        %gt = omni.compare gt, %fl, %z : tensor<16x2048xf32>
        %k = omni.cast %fl : tensor<16x2048xf32> -> tensor<16x2048xi64>
        %k2 = omni.add %k, %n : tensor<16x2048xi64>
        omni.yield %t, %b, %gt, %k2 : tensor<16x32x64xf32>, tensor<16x64x66xf32>, tensor<16x2048xi1>, tensor<16x2048xi64>
      }
      return %r#0, %r#1, %r#2, %r#3 : tensor<16x32x64xf32>, tensor<16x64x66xf32>, tensor<16x2048xi1>, tensor<16x2048xi64> })",
     true},
    // ... the attention backward's softmax pieces over [batch, heads, q, k]:
    // split over batch and heads together (RowSplit::prefix), more items
    // than the 4 of the batch; a per-head row statistic broadcast back in
    // place, a transpose of the last two dimensions ...
    {"softmax_grad_prefix",
     R"(func.func @f(%a: tensor<4x8x32x64xf32>, %b: tensor<4x8x32x64xf32>) -> (tensor<4x8x32x64xf32>, tensor<4x8x64x32xf32>) {
      %r:2 = omni.fusion (%a, %b) : (tensor<4x8x32x64xf32>, tensor<4x8x32x64xf32>) -> (tensor<4x8x32x64xf32>, tensor<4x8x64x32xf32>) {
      ^bb0(%s: tensor<4x8x32x64xf32>, %dp: tensor<4x8x32x64xf32>):
        %mx = omni.reduce max %s dims = [3] : tensor<4x8x32x64xf32> -> tensor<4x8x32xf32>
        %mb = omni.broadcast_in_dim %mx, dims = [0, 1, 2] : tensor<4x8x32xf32> -> tensor<4x8x32x64xf32>
        %d = omni.sub %s, %mb : tensor<4x8x32x64xf32>
        %e = omni.exp %d : tensor<4x8x32x64xf32>
        %sum = omni.reduce sum %e dims = [3] : tensor<4x8x32x64xf32> -> tensor<4x8x32xf32>
        %sb = omni.broadcast_in_dim %sum, dims = [0, 1, 2] : tensor<4x8x32xf32> -> tensor<4x8x32x64xf32>
        %p = omni.div %e, %sb : tensor<4x8x32x64xf32>
        %pd = omni.mul %p, %dp : tensor<4x8x32x64xf32>
        %rs = omni.reduce sum %pd dims = [3] : tensor<4x8x32x64xf32> -> tensor<4x8x32xf32>
        %rb = omni.broadcast_in_dim %rs, dims = [0, 1, 2] : tensor<4x8x32xf32> -> tensor<4x8x32x64xf32>
        %c = omni.sub %dp, %rb : tensor<4x8x32x64xf32>
        %ds = omni.mul %p, %c : tensor<4x8x32x64xf32>
        %t = omni.transpose %ds, permutation = [0, 1, 3, 2] : tensor<4x8x32x64xf32> -> tensor<4x8x64x32xf32>
        omni.yield %ds, %t : tensor<4x8x32x64xf32>, tensor<4x8x64x32xf32>
      }
      return %r#0, %r#1 : tensor<4x8x32x64xf32>, tensor<4x8x64x32xf32> })",
     true, 4},
    // ... a weight indexed by the head but broadcast over the batch cannot
    // follow a (batch, head) split: the split stays on the batch.
    {"head_weight_lead_only",
     R"(func.func @f(%a: tensor<4x8x32x64xf32>, %w: tensor<8x64xf32>) -> tensor<4x8x32x64xf32> {
      %r = omni.fusion (%a, %w) : (tensor<4x8x32x64xf32>, tensor<8x64xf32>) -> tensor<4x8x32x64xf32> {
      ^bb0(%x: tensor<4x8x32x64xf32>, %g: tensor<8x64xf32>):
        %gb = omni.broadcast_in_dim %g, dims = [1, 3] : tensor<8x64xf32> -> tensor<4x8x32x64xf32>
        %m = omni.mul %x, %gb : tensor<4x8x32x64xf32>
        %s = omni.reduce sum %m dims = [3] : tensor<4x8x32x64xf32> -> tensor<4x8x32xf32>
        %sb = omni.broadcast_in_dim %s, dims = [0, 1, 2] : tensor<4x8x32xf32> -> tensor<4x8x32x64xf32>
        %y = omni.sub %m, %sb : tensor<4x8x32x64xf32>
        omni.yield %y : tensor<4x8x32x64xf32>
      }
      return %r : tensor<4x8x32x64xf32> })",
     true},
    // ... but kernels that mix rows run whole: a full reduction, sums over
    // the rows, a transpose that moves them.
    {"rows_mixed_whole",
     R"(func.func @f(%a: tensor<128x256xf32>) -> (tensor<f32>, tensor<256xf32>, tensor<256x128xf32>) {
      %r:3 = omni.fusion (%a) : (tensor<128x256xf32>) -> (tensor<f32>, tensor<256xf32>, tensor<256x128xf32>) {
      ^bb0(%x: tensor<128x256xf32>):
        %s = omni.reduce sum %x dims = [0, 1] : tensor<128x256xf32> -> tensor<f32>
        %c = omni.reduce sum %x dims = [0] : tensor<128x256xf32> -> tensor<256xf32>
        %t = omni.transpose %x, permutation = [1, 0] : tensor<128x256xf32> -> tensor<256x128xf32>
        omni.yield %s, %c, %t : tensor<f32>, tensor<256xf32>, tensor<256x128xf32>
      }
      return %r#0, %r#1, %r#2 : tensor<f32>, tensor<256xf32>, tensor<256x128xf32> })"},
    {"transpose_moves_rows",
     R"(func.func @f(%a: tensor<128x256xf32>) -> tensor<256x128xf32> {
      %r = omni.fusion (%a) : (tensor<128x256xf32>) -> tensor<256x128xf32> {
      ^bb0(%x: tensor<128x256xf32>):
        %e = omni.exp %x : tensor<128x256xf32>
        %t = omni.transpose %e, permutation = [1, 0] : tensor<128x256xf32> -> tensor<256x128xf32>
        omni.yield %t : tensor<256x128xf32>
      }
      return %r : tensor<256x128xf32> })"},
};

INSTANTIATE_TEST_SUITE_P(Kernels, CpuCodegenTest, ::testing::ValuesIn(kCases),
                         [](const auto &info) {
                           return std::string(info.param.name);
                         });

} // namespace
