//===- DifferentialTest.cpp - compiled programs vs the reference evaluator ===//
//
// The differential tests of the CPU backend: each program is compiled as
// omnic does (omni-pipeline, kernels, step.bin), loaded and run by the
// runtime (loader, cpu driver, executor), and its results compared with the
// reference evaluator in float32 mode on the same inputs.
//
// Tolerance (float32): |compiled - reference| <= 1e-5 |reference| + 1e-6.
// Kernels use libm's float functions and float32 accumulation in a
// different order than the evaluator (which computes each op in double and
// rounds once), so results differ in the last bits; chains such as the SDE
// rollout amplify that slightly, and their cases state a looser bound.
// Random numbers and rewards must match bit for bit.
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
#include "runtime/train/rewards/RewardFunctions.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <cmath>
#include <gtest/gtest.h>
#include <limits>
#include <map>
#include <random>

using namespace mlir;
using ::omni::DType;
using ::omni::HostTensor;
namespace reference = ::omni::reference;

namespace {

/// A state slot read back as a HostTensor, to compare with the evaluator.
absl::StatusOr<HostTensor> hostState(::omni::executor::Executor &executor,
                                     const std::string &name) {
  absl::StatusOr<::omni::TypedTensor> t = executor.getState(name);
  if (!t.ok())
    return t.status();
  return t->toHost();
}

/// A tensor as text for failure messages: its type and values.
std::string text(const HostTensor &t) {
  std::string s = t.typeString() + "=[";
  for (int64_t i = 0; i < t.numElements(); ++i)
    s += (i ? " " : "") + (t.isFloat() ? std::to_string(t.doubleAt(i))
                                       : std::to_string(t.intAt(i)));
  return s + "]";
}

class DifferentialTest : public ::testing::Test {
protected:
  DifferentialTest() {
    DialectRegistry registry;
    mlir::omni::registerOmniDialects(registry);
    mlir::omni::registerCodegenDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }

  /// Compiles `module` (cloned; the original stays for the evaluator) and
  /// returns an executor for it.
  std::unique_ptr<::omni::executor::Executor> compile(ModuleOp module) {
    OwningOpRef<ModuleOp> copy = module.clone();
    PassManager pm(&context, ModuleOp::getOperationName());
    mlir::omni::buildOmniPipeline(pm);
    EXPECT_TRUE(succeeded(pm.run(*copy)));
    FailureOr<mlir::omni::CodegenResult> exe =
        mlir::omni::compileFusions(*copy);
    EXPECT_TRUE(succeeded(exe));
    if (failed(exe))
      return nullptr;
    FailureOr<std::vector<uint8_t>> bytes =
        mlir::omni::writeStepBin(*copy, *exe, "test");
    EXPECT_TRUE(succeeded(bytes));
    if (failed(bytes))
      return nullptr;
    auto program = ::omni::loader::Program::loadBytes(absl::string_view(
        reinterpret_cast<const char *>(bytes->data()), bytes->size()));
    EXPECT_TRUE(program.ok()) << program.status();
    if (!program.ok())
      return nullptr;
    if (!device) {
      auto created = ::omni::hal::builtinDrivers().createDevice("cpu", {});
      EXPECT_TRUE(created.ok()) << created.status();
      if (!created.ok())
        return nullptr;
      device = std::move(*created);
    }
    ::omni::executor::ExecutorOptions options;
    options.hostFunctions = rewardFns;
    auto executor =
        ::omni::executor::Executor::create(*program, *device, options);
    EXPECT_TRUE(executor.ok()) << executor.status();
    return executor.ok() ? std::move(*executor) : nullptr;
  }

  /// Runs `function` both ways and compares every result.
  void compare(const char *source, const char *function,
               const std::vector<HostTensor> &args, double rel = 1e-5,
               double abs = 1e-6, bool exactIntegers = true) {
    OwningOpRef<ModuleOp> module =
        parseSourceString<ModuleOp>(source, ParserConfig(&context));
    ASSERT_TRUE(module);
    compareModule(*module, function, args, rel, abs, exactIntegers);
  }

  void compareModule(ModuleOp module, const char *function,
                     const std::vector<HostTensor> &args, double rel,
                     double abs, bool exactIntegers = true) {
    auto want = reference::evaluateFunction(module, function, args, eval());
    ASSERT_TRUE(want.ok()) << want.status();
    auto executor = compile(module);
    ASSERT_TRUE(executor);
    auto got = ::omni::executor::runHostTensors(*executor, function, args);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->size(), want->size());
    for (size_t r = 0; r < want->size(); ++r) {
      const HostTensor &w = (*want)[r], &g = (*got)[r];
      ASSERT_EQ(w.shape(), g.shape()) << function << " result " << r;
      if (w.isFloat()) {
        for (size_t i = 0; i < w.floats().size(); ++i)
          ASSERT_NEAR(g.floats()[i], w.floats()[i],
                      rel * std::abs(w.floats()[i]) + abs)
              << function << " result " << r << " element " << i;
      } else if (exactIntegers) {
        for (size_t i = 0; i < w.ints().size(); ++i)
          ASSERT_EQ(g.ints()[i], w.ints()[i])
              << function << " result " << r << " element " << i;
      }
    }
  }

  /// Runs `function` `calls` times both ways: the evaluator takes the state
  /// (`omni.state`, explicit or inferred by omni-resident-state) as
  /// arguments and returns it as results; the compiled program keeps it in
  /// its slots, set once with setState and read with getState after each
  /// call. `state` holds the slots' initial values, `inputs` the other
  /// arguments. Every value must match exactly.
  void compareResident(const char *source, const char *function,
                       std::map<std::string, HostTensor> state,
                       const std::vector<HostTensor> &inputs, int calls) {
    OwningOpRef<ModuleOp> module =
        parseSourceString<ModuleOp>(source, ParserConfig(&context));
    ASSERT_TRUE(module);
    PassManager pm(&context, ModuleOp::getOperationName());
    pm.addPass(mlir::omni::createOmniResidentStatePass());
    ASSERT_TRUE(succeeded(pm.run(*module)));
    auto fn = module->lookupSymbol<func::FuncOp>(function);
    ASSERT_TRUE(fn);
    auto executor = compile(*module);
    ASSERT_TRUE(executor);
    for (const auto &[name, value] : state)
      ASSERT_TRUE(executor->setState(name, value).ok()) << name;
    for (int call = 0; call < calls; ++call) {
      std::vector<HostTensor> args;
      size_t next = 0;
      for (unsigned i = 0; i < fn.getNumArguments(); ++i)
        if (auto slot = fn.getArgAttrOfType<StringAttr>(i, "omni.state"))
          args.push_back(state.at(slot.str()));
        else
          args.push_back(inputs.at(next++));
      auto want = reference::evaluateFunction(*module, function, args);
      ASSERT_TRUE(want.ok()) << want.status();
      auto got = ::omni::executor::runHostTensors(*executor, function, inputs);
      ASSERT_TRUE(got.ok()) << got.status();
      size_t out = 0;
      for (unsigned k = 0; k < fn.getNumResults(); ++k) {
        const HostTensor &w = (*want)[k];
        if (auto slot = fn.getResultAttrOfType<StringAttr>(k, "omni.state")) {
          auto g = hostState(*executor, slot.str());
          ASSERT_TRUE(g.ok()) << g.status();
          EXPECT_TRUE(*g == w) << "call " << call << " state '" << slot.str()
                               << "': " << text(*g) << ", expected " << text(w);
          state[slot.str()] = w;
        } else {
          ASSERT_LT(out, got->size()) << "call " << call;
          EXPECT_TRUE((*got)[out] == w)
              << "call " << call << " result " << k << ": " << text((*got)[out])
              << ", expected " << text(w);
          ++out;
        }
      }
      EXPECT_EQ(out, got->size()) << "call " << call;
    }
  }

  static HostTensor random(std::vector<int64_t> shape, unsigned seed,
                           double lo = -1.0, double hi = 1.0) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> dist(lo, hi);
    std::vector<double> v(::omni::numElementsOf(shape));
    for (double &x : v)
      x = static_cast<float>(dist(rng));
    return HostTensor::fromDoubles(DType::F32, shape, v);
  }

  /// Evaluator options that know the rewards, as the executor's do.
  reference::EvalOptions eval() const {
    reference::EvalOptions options;
    options.hostFunctions = &rewardFns;
    return options;
  }

  MLIRContext context;
  /// The programs' host calls are rewards: both sides get them.
  ::omni::HostFunctionRegistry rewardFns =
      ::omni::rewards::rewardHostFunctions();
  std::unique_ptr<::omni::hal::Device> device;
};

TEST_F(DifferentialTest, LinearGeluLayerNormSoftmax) {
  compare(
      R"(func.func @f(%x: tensor<6x16xf32>, %w: tensor<8x16xf32>, %b: tensor<8xf32>, %g: tensor<8xf32>) -> (tensor<6x8xf32>, tensor<6x8xf32>) {
      %y = omni.linear %x, %w bias %b : (tensor<6x16xf32>, tensor<8x16xf32>, tensor<8xf32>) -> tensor<6x8xf32>
      %a = omni.gelu tanh %y : tensor<6x8xf32>
      %n = omni.layer_norm %a weight %g bias %b : (tensor<6x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<6x8xf32>
      %s = omni.softmax %n, dim = 1 : tensor<6x8xf32>
      %r = omni.rms_norm %y weight %g : (tensor<6x8xf32>, tensor<8xf32>) -> tensor<6x8xf32>
      return %s, %r : tensor<6x8xf32>, tensor<6x8xf32> })",
      "f",
      {random({6, 16}, 1), random({8, 16}, 2), random({8}, 3), random({8}, 4)});
}

TEST_F(DifferentialTest, ConvAttentionAndTransposedMatmul) {
  compare(
      R"(func.func @f(%x: tensor<1x3x8x8xf32>, %k: tensor<4x3x3x3xf32>, %q: tensor<1x2x5x4xf32>, %kk: tensor<1x2x6x4xf32>, %m: tensor<1x1x5x6xf32>, %a: tensor<3x5x4xf32>, %b: tensor<6x4xf32>) -> (tensor<1x4x4x4xf32>, tensor<1x2x5x4xf32>, tensor<3x5x6xf32>) {
      %c = omni.conv2d %x, %k {strides = array<i64: 2, 2>, padding = array<i64: 1, 1>} : tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32> -> tensor<1x4x4x4xf32>
      %o = omni.attention %q, %kk, %kk mask %m : (tensor<1x2x5x4xf32>, tensor<1x2x6x4xf32>, tensor<1x2x6x4xf32>, tensor<1x1x5x6xf32>) -> tensor<1x2x5x4xf32>
      %p = omni.matmul %a, %b transpose_rhs : tensor<3x5x4xf32>, tensor<6x4xf32> -> tensor<3x5x6xf32>
      return %c, %o, %p : tensor<1x4x4x4xf32>, tensor<1x2x5x4xf32>, tensor<3x5x6xf32> })",
      "f",
      {random({1, 3, 8, 8}, 5), random({4, 3, 3, 3}, 6),
       random({1, 2, 5, 4}, 7), random({1, 2, 6, 4}, 8),
       random({1, 1, 5, 6}, 9), random({3, 5, 4}, 10), random({6, 4}, 11)});
}

// omni.attention_grad runs as the cpu driver's AttentionBackward library
// call (fusedAttentionBackward) against the evaluator's definition.
TEST_F(DifferentialTest, AttentionGradLibraryCall) {
  compare(
      R"(func.func @f(%q: tensor<2x2x37x8xf32>, %k: tensor<2x2x130x8xf32>, %v: tensor<2x2x130x5xf32>, %do: tensor<2x2x37x5xf32>) -> (tensor<2x2x37x8xf32>, tensor<2x2x130x8xf32>, tensor<2x2x130x5xf32>) {
      %o = omni.attention %q, %k, %v : (tensor<2x2x37x8xf32>, tensor<2x2x130x8xf32>, tensor<2x2x130x5xf32>) -> tensor<2x2x37x5xf32>
      %g:3 = omni.attention_grad %q, %k, %v, %o, %do : (tensor<2x2x37x8xf32>, tensor<2x2x130x8xf32>, tensor<2x2x130x5xf32>, tensor<2x2x37x5xf32>, tensor<2x2x37x5xf32>) -> (tensor<2x2x37x8xf32>, tensor<2x2x130x8xf32>, tensor<2x2x130x5xf32>)
      return %g#0, %g#1, %g#2 : tensor<2x2x37x8xf32>, tensor<2x2x130x8xf32>, tensor<2x2x130x5xf32> })",
      "f",
      {random({2, 2, 37, 8}, 13), random({2, 2, 130, 8}, 14),
       random({2, 2, 130, 5}, 15), random({2, 2, 37, 5}, 16)});
}

// A masked omni.attention_grad (a mask shared over the heads, some keys at
// -inf): the cpu driver's sgemm path with the mask on each row of scores.
TEST_F(DifferentialTest, AttentionGradWithAMask) {
  HostTensor mask = random({2, 1, 37, 70}, 22);
  for (size_t i = 0; i < mask.floats().size(); i += 3)
    mask.floats()[i] = -std::numeric_limits<double>::infinity();
  compare(
      R"(func.func @f(%q: tensor<2x2x37x8xf32>, %k: tensor<2x2x70x8xf32>, %v: tensor<2x2x70x5xf32>, %do: tensor<2x2x37x5xf32>, %m: tensor<2x1x37x70xf32>) -> (tensor<2x2x37x8xf32>, tensor<2x2x70x8xf32>, tensor<2x2x70x5xf32>) {
      %o = omni.attention %q, %k, %v mask %m : (tensor<2x2x37x8xf32>, tensor<2x2x70x8xf32>, tensor<2x2x70x5xf32>, tensor<2x1x37x70xf32>) -> tensor<2x2x37x5xf32>
      %g:3 = omni.attention_grad %q, %k, %v, %o, %do mask %m : (tensor<2x2x37x8xf32>, tensor<2x2x70x8xf32>, tensor<2x2x70x5xf32>, tensor<2x2x37x5xf32>, tensor<2x2x37x5xf32>, tensor<2x1x37x70xf32>) -> (tensor<2x2x37x8xf32>, tensor<2x2x70x8xf32>, tensor<2x2x70x5xf32>)
      return %g#0, %g#1, %g#2 : tensor<2x2x37x8xf32>, tensor<2x2x70x8xf32>, tensor<2x2x70x5xf32> })",
      "f",
      {random({2, 2, 37, 8}, 23), random({2, 2, 70, 8}, 24),
       random({2, 2, 70, 5}, 25), random({2, 2, 37, 5}, 26), mask});
}

// A bf16 omni.attention_grad (bf16 attention's VJP): the cpu driver widens
// the operands, runs the f32 backward and rounds each cotangent once; the
// evaluator computes in double and rounds once. From the same bf16 operands
// they differ by the f32 arithmetic, far below a bf16 ulp (2^-7 relative
// at most), so by at most one ulp of each result.
TEST_F(DifferentialTest, AttentionGradBf16LibraryCall) {
  compare(
      R"(func.func @f(%q: tensor<1x2x37x8xf32>, %k: tensor<1x2x70x8xf32>, %v: tensor<1x2x70x8xf32>, %o: tensor<1x2x37x8xf32>, %do: tensor<1x2x37x8xf32>) -> (tensor<1x2x37x8xf32>, tensor<1x2x70x8xf32>, tensor<1x2x70x8xf32>) {
      %q16 = omni.cast %q : tensor<1x2x37x8xf32> -> tensor<1x2x37x8xbf16>
      %k16 = omni.cast %k : tensor<1x2x70x8xf32> -> tensor<1x2x70x8xbf16>
      %v16 = omni.cast %v : tensor<1x2x70x8xf32> -> tensor<1x2x70x8xbf16>
      %o16 = omni.cast %o : tensor<1x2x37x8xf32> -> tensor<1x2x37x8xbf16>
      %do16 = omni.cast %do : tensor<1x2x37x8xf32> -> tensor<1x2x37x8xbf16>
      %g:3 = omni.attention_grad %q16, %k16, %v16, %o16, %do16 : (tensor<1x2x37x8xbf16>, tensor<1x2x70x8xbf16>, tensor<1x2x70x8xbf16>, tensor<1x2x37x8xbf16>, tensor<1x2x37x8xbf16>) -> (tensor<1x2x37x8xbf16>, tensor<1x2x70x8xbf16>, tensor<1x2x70x8xbf16>)
      %dq = omni.cast %g#0 : tensor<1x2x37x8xbf16> -> tensor<1x2x37x8xf32>
      %dk = omni.cast %g#1 : tensor<1x2x70x8xbf16> -> tensor<1x2x70x8xf32>
      %dv = omni.cast %g#2 : tensor<1x2x70x8xbf16> -> tensor<1x2x70x8xf32>
      return %dq, %dk, %dv : tensor<1x2x37x8xf32>, tensor<1x2x70x8xf32>, tensor<1x2x70x8xf32> })",
      "f",
      {random({1, 2, 37, 8}, 17), random({1, 2, 70, 8}, 18),
       random({1, 2, 70, 8}, 19), random({1, 2, 37, 8}, 20),
       random({1, 2, 37, 8}, 21)},
      /*rel=*/std::ldexp(1.0, -7), /*abs=*/1e-6);
}

TEST_F(DifferentialTest, RandomNumbersAreBitIdentical) {
  compare(
      R"(func.func @f(%key: tensor<i64>, %ctr: tensor<i64>) -> (tensor<3x50xf32>, tensor<7xf32>) {
      %off = omni.constant dense<100> : tensor<i64>
      %n = omni.random_normal %key, %ctr, %off : tensor<3x50xf32>
      %u = omni.random_uniform %key, %ctr, %off : tensor<7xf32>
      return %n, %u : tensor<3x50xf32>, tensor<7xf32> })",
      "f",
      {HostTensor::scalarInt(DType::I64, 1234567890123LL),
       HostTensor::scalarInt(DType::I64, 42)},
      /*rel=*/0.0, /*abs=*/0.0);
}

TEST_F(DifferentialTest, LoopStoresStepsThroughSlices) {
  compare(
      R"(func.func @f(%x0: tensor<2x3xf32>) -> (tensor<4x2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %z = omni.constant dense<0.0> : tensor<4x2x3xf32>
      %r:2 = scf.for %i = %c0 to %c4 step %c1 iter_args(%x = %x0, %s = %z) -> (tensor<2x3xf32>, tensor<4x2x3xf32>) {
        %s2 = tensor.insert_slice %x into %s[%i, 0, 0] [1, 2, 3] [1, 1, 1] : tensor<2x3xf32> into tensor<4x2x3xf32>
        %t = omni.tanh %x : tensor<2x3xf32>
        %n = omni.add %t, %x : tensor<2x3xf32>
        scf.yield %n, %s2 : tensor<2x3xf32>, tensor<4x2x3xf32>
      }
      %second = tensor.extract_slice %r#1[%c1, 0, 0] [1, 2, 3] [1, 1, 1] : tensor<4x2x3xf32> to tensor<2x3xf32>
      return %r#1, %r#0, %second : tensor<4x2x3xf32>, tensor<2x3xf32>, tensor<2x3xf32> })",
      "f", {random({2, 3}, 12)});
}

TEST_F(DifferentialTest, LoopFillsAnEmptyTensor) {
  compare(R"(func.func @f(%x: tensor<4xf32>) -> tensor<3x4xf32> {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c3 = arith.constant 3 : index
      %e = tensor.empty() : tensor<3x4xf32>
      %r:2 = scf.for %i = %c0 to %c3 step %c1 iter_args(%h = %x, %s = %e) -> (tensor<4xf32>, tensor<3x4xf32>) {
        %n = omni.exp %h : tensor<4xf32>
        %s2 = tensor.insert_slice %n into %s[%i, 0] [1, 4] [1, 1] : tensor<4xf32> into tensor<3x4xf32>
        %d = omni.neg %h : tensor<4xf32>
        scf.yield %d, %s2 : tensor<4xf32>, tensor<3x4xf32>
      }
      return %r#1 : tensor<3x4xf32> })",
          "f", {random({4}, 28)});
}

TEST_F(DifferentialTest, SwappingLoopCarriesStayCorrect) {
  compare(
      R"(func.func @f(%a: tensor<4xf32>, %b: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c3 = arith.constant 3 : index
      %r:2 = scf.for %i = %c0 to %c3 step %c1 iter_args(%x = %a, %y = %b) -> (tensor<4xf32>, tensor<4xf32>) {
        scf.yield %y, %x : tensor<4xf32>, tensor<4xf32>
      }
      return %r#0, %r#1 : tensor<4xf32>, tensor<4xf32> })",
      "f", {random({4}, 13), random({4}, 14)});
}

TEST_F(DifferentialTest, ElementwiseShapeAndReductionOps) {
  compare(
      R"(func.func @f(%x: tensor<4x6xf32>, %y: tensor<4x6xf32>) -> (tensor<4x6xf32>, tensor<6x4xf32>, tensor<4xf32>, tensor<6xf32>, tensor<4xf32>, tensor<2x9xf32>, tensor<4x6xi64>, tensor<4x6xf32>) {
      %a = omni.abs %x : tensor<4x6xf32>
      %e = omni.exp %x : tensor<4x6xf32>
      %l = omni.log %e : tensor<4x6xf32>
      %q = omni.sqrt %a : tensor<4x6xf32>
      %one = omni.constant dense<1.0> : tensor<4x6xf32>
      %a1 = omni.add %a, %one : tensor<4x6xf32>
      %rq = omni.rsqrt %a1 : tensor<4x6xf32>
      %t = omni.tanh %y : tensor<4x6xf32>
      %s = omni.sin %x : tensor<4x6xf32>
      %c = omni.cos %y : tensor<4x6xf32>
      %er = omni.erf %x : tensor<4x6xf32>
      %lg = omni.logistic %y : tensor<4x6xf32>
      %fl = omni.floor %x : tensor<4x6xf32>
      %sg = omni.sign %y : tensor<4x6xf32>
      %pw = omni.pow %a1, %y : tensor<4x6xf32>
      %d = omni.div %pw, %a1 : tensor<4x6xf32>
      %m1 = omni.mul %l, %q : tensor<4x6xf32>
      %m2 = omni.add %m1, %rq : tensor<4x6xf32>
      %m3 = omni.sub %m2, %t : tensor<4x6xf32>
      %m4 = omni.add %m3, %s : tensor<4x6xf32>
      %m5 = omni.mul %m4, %c : tensor<4x6xf32>
      %m6 = omni.add %m5, %er : tensor<4x6xf32>
      %m7 = omni.add %m6, %lg : tensor<4x6xf32>
      %m8 = omni.add %m7, %fl : tensor<4x6xf32>
      %m9 = omni.add %m8, %sg : tensor<4x6xf32>
      %r = omni.add %m9, %d : tensor<4x6xf32>
      %tr = omni.transpose %r, permutation = [1, 0] : tensor<4x6xf32> -> tensor<6x4xf32>
      %mx = omni.reduce max %r dims = [1] : tensor<4x6xf32> -> tensor<4xf32>
      %mn = omni.reduce min %r dims = [0] : tensor<4x6xf32> -> tensor<6xf32>
      %me = omni.reduce mean %r dims = [1] : tensor<4x6xf32> -> tensor<4xf32>
      %sl = omni.slice %r [0:4:2, 1:6:2] : tensor<4x6xf32> -> tensor<2x3xf32>
      %pd = omni.pad %sl low = [0, 1] high = [0, 2] value = -3.0 : tensor<2x3xf32> -> tensor<2x6xf32>
      %ct = omni.concat %pd, %sl dim = 1 : (tensor<2x6xf32>, tensor<2x3xf32>) -> tensor<2x9xf32>
      %io = omni.iota dim = 1 : tensor<4x6xi64>
      %p = omni.compare gt, %x, %y : tensor<4x6xf32>
      %sel = omni.select %p, %x, %y : tensor<4x6xi1>, tensor<4x6xf32>
      return %r, %tr, %mx, %mn, %me, %ct, %io, %sel : tensor<4x6xf32>, tensor<6x4xf32>, tensor<4xf32>, tensor<6xf32>, tensor<4xf32>, tensor<2x9xf32>, tensor<4x6xi64>, tensor<4x6xf32> })",
      "f", {random({4, 6}, 15, -2.0, 2.0), random({4, 6}, 16, -2.0, 2.0)});
}

TEST_F(DifferentialTest, DiffusionRLOps) {
  compare(
      R"(func.func @f(%x: tensor<4x12xf32>, %vv: tensor<8x12xf32>, %e: tensor<4x12xf32>, %r: tensor<4xf32>, %old: tensor<4xf32>, %p: tensor<12xf32>, %g: tensor<12xf32>, %m: tensor<12xf32>) -> (tensor<4x12xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<12xf32>, tensor<12xf32>, tensor<f32>) {
      %s, %ts = omni.flow_schedule static_shift steps = 10 : tensor<11xf32>, tensor<10xf32>
      %i = arith.constant 2 : index
      %v = omni.cfg_combine %vv {guidance_scale = 4.5} : tensor<8x12xf32> -> tensor<4x12xf32>
      %xn, %lp, %mu, %std = omni.sde_step sde %x, %v, %s[%i] noise %e : tensor<4x12xf32>, tensor<11xf32>
      %xc, %lpc, %muc, %stdc = omni.sde_step cps %x, %v, %s[%i] next %xn {noise_level = 0.8} : tensor<4x12xf32>, tensor<11xf32>
      %adv = omni.group_advantages %r {group_size = 2} : tensor<4xf32>
      %l, %akl, %cf, %kl = omni.grpo_loss %lp, %old, %adv kl(%mu, %muc, %std) {beta = 0.04, clip_range = 0.2} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4x12xf32>, tensor<4x12xf32>, tensor<f32>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>)
      %cg, %n = omni.clip_grad_norm %g {max_norm = 0.5} : tensor<12xf32>
      %t = omni.constant dense<3> : tensor<i64>
      %p2, %m2, %v2 = omni.adamw %p, %cg, %m, %m, %t {lr = 1.0e-2} : tensor<12xf32>
      return %xn, %lp, %lpc, %l, %akl, %p2, %m2, %n : tensor<4x12xf32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<12xf32>, tensor<12xf32>, tensor<f32> })",
      "f",
      {random({4, 12}, 17), random({8, 12}, 18), random({4, 12}, 19),
       random({4}, 20), random({4}, 21, -1.0, 0.0), random({12}, 22),
       random({12}, 23), random({12}, 24, 0.0, 1.0)},
      /*rel=*/1e-4, /*abs=*/1e-5);
}

TEST_F(DifferentialTest, JpegRewardHostCall) {
  compare(R"(func.func @f(%x: tensor<2x3x8x8xf32>) -> tensor<2xf32> {
      %s = omni.logistic %x : tensor<2x3x8x8xf32>
      %r = omni.host_call "jpeg_compressibility"(%s) : (tensor<2x3x8x8xf32>) -> tensor<2xf32>
      return %r : tensor<2xf32> })",
          "f", {random({2, 3, 8, 8}, 25, -3.0, 3.0)}, /*rel=*/0.0, /*abs=*/0.0);
}

TEST_F(DifferentialTest, ElementwiseKernelSplitIntoChunks) {
  // 100000 elements: a flat elementwise kernel of 7 work items of 16384
  // elements (the last one partial), spread over the runtime's threads.
  compare(
      R"(func.func @f(%a: tensor<100000xf32>, %b: tensor<100000xf32>) -> (tensor<100000xf32>, tensor<100000xi1>) {
      %s = omni.add %a, %b : tensor<100000xf32>
      %t = omni.tanh %s : tensor<100000xf32>
      %m = omni.mul %t, %a : tensor<100000xf32>
      %p = omni.compare gt, %m, %b : tensor<100000xf32>
      return %m, %p : tensor<100000xf32>, tensor<100000xi1> })",
      "f", {random({100000}, 26), random({100000}, 27)});
}

// Long float reductions (issue 11): a compiled sum's error must not grow
// with the row. The reference here is the double sum of the same float32
// inputs, computed by the test; 1e-6 relative is ~10x the result's own
// float32 rounding and ~30x below a sequential float32 sum's error at 2^22
// (which is what these kernels did before: 3e-6 relative at 2^18).
class LongReductionTest : public DifferentialTest {
protected:
  /// Compiles `source`, runs @f on `args` and returns its results.
  std::vector<HostTensor> run(const std::string &source,
                              const std::vector<HostTensor> &args) {
    OwningOpRef<ModuleOp> module =
        parseSourceString<ModuleOp>(source, ParserConfig(&context));
    EXPECT_TRUE(module);
    if (!module)
      return {};
    auto executor = compile(*module);
    EXPECT_TRUE(executor);
    if (!executor)
      return {};
    auto got = ::omni::executor::runHostTensors(*executor, "f", args);
    EXPECT_TRUE(got.ok()) << got.status();
    return got.ok() ? *got : std::vector<HostTensor>{};
  }
};

TEST_F(LongReductionTest, Float32SumsOf2To18And2To22ElementsMatchFloat64) {
  for (int64_t n : {int64_t(1) << 18, int64_t(1) << 22}) {
    SCOPED_TRACE("n = " + std::to_string(n));
    // Uniform [0, 1): no cancellation, so the relative error is the
    // summation's alone. Besides the whole sum and mean: 16 strided column
    // sums of n/16 elements each (the reduced dim is not the innermost).
    HostTensor x = random({n}, 31, 0.0, 1.0);
    std::string N = std::to_string(n), R = std::to_string(n / 16);
    std::string source =
        "func.func @f(%x: tensor<" + N +
        "xf32>) -> (tensor<f32>, tensor<f32>, "
        "tensor<16xf32>) {\n"
        "  %s = omni.reduce sum %x dims = [0] : tensor<" +
        N +
        "xf32> -> tensor<f32>\n"
        "  %m = omni.reduce mean %x dims = [0] : tensor<" +
        N +
        "xf32> -> tensor<f32>\n"
        "  %x2 = omni.reshape %x : tensor<" +
        N + "xf32> -> tensor<" + R +
        "x16xf32>\n"
        "  %c = omni.reduce sum %x2 dims = [0] : tensor<" +
        R +
        "x16xf32> -> tensor<16xf32>\n"
        "  return %s, %m, %c : tensor<f32>, tensor<f32>, tensor<16xf32> }";
    std::vector<HostTensor> got = run(source, {x});
    ASSERT_EQ(got.size(), 3u);
    double sum = 0;
    std::vector<double> columns(16, 0.0);
    for (int64_t i = 0; i < n; ++i) {
      sum += x.floats()[i];
      columns[i % 16] += x.floats()[i];
    }
    EXPECT_NEAR(got[0].floats()[0], sum, 1e-6 * sum);
    EXPECT_NEAR(got[1].floats()[0], sum / n, 1e-6 * sum / n);
    for (int c = 0; c < 16; ++c)
      EXPECT_NEAR(got[2].floats()[c], columns[c], 1e-6 * columns[c])
          << "column " << c;
  }
}

TEST_F(LongReductionTest, Float64SumsAreCompensated) {
  // 2^53, then n - 2 ones, then -2^53: a sequential double sum loses every
  // one (2^53 + 1 rounds to 2^53) and returns 0; the compensated sum is
  // exactly n - 2.
  const int64_t n = int64_t(1) << 18;
  std::vector<double> v(n, 1.0);
  v.front() = 9007199254740992.0;
  v.back() = -9007199254740992.0;
  std::string N = std::to_string(n);
  std::vector<HostTensor> got =
      run("func.func @f(%x: tensor<" + N +
              "xf64>) -> (tensor<f64>, tensor<f64>) {\n"
              "  %s = omni.reduce sum %x dims = [0] : tensor<" +
              N +
              "xf64> -> tensor<f64>\n"
              "  %m = omni.reduce mean %x dims = [0] : tensor<" +
              N +
              "xf64> -> tensor<f64>\n"
              "  return %s, %m : tensor<f64>, tensor<f64> }",
          {HostTensor::fromDoubles(DType::F64, {n}, v)});
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].floats()[0], static_cast<double>(n - 2));
  EXPECT_EQ(got[1].floats()[0], static_cast<double>(n - 2) / n);
}

TEST_F(LongReductionTest, NonFiniteElementsStayNonFinite) {
  // The compensation of an infinite element is NaN; the sum must still be
  // the infinity (and NaN stays NaN), in f64 and in f32.
  double inf = std::numeric_limits<double>::infinity();
  std::vector<double> v = {1.0, inf, 2.0, 3.0};
  std::vector<HostTensor> got = run(
      "func.func @f(%x: tensor<4xf64>, %y: tensor<4xf32>, %z: "
      "tensor<4xf64>) -> (tensor<f64>, tensor<f32>, tensor<f64>) {\n"
      "  %s = omni.reduce sum %x dims = [0] : tensor<4xf64> -> tensor<f64>\n"
      "  %t = omni.reduce sum %y dims = [0] : tensor<4xf32> -> tensor<f32>\n"
      "  %u = omni.reduce sum %z dims = [0] : tensor<4xf64> -> tensor<f64>\n"
      "  return %s, %t, %u : tensor<f64>, tensor<f32>, tensor<f64> }",
      {HostTensor::fromDoubles(DType::F64, {4}, v),
       HostTensor::fromDoubles(DType::F32, {4}, v),
       HostTensor::fromDoubles(DType::F64, {4},
                               {1.0, std::nan(""), inf, 2.0})});
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].floats()[0], inf);
  EXPECT_EQ(got[1].floats()[0], inf);
  EXPECT_TRUE(std::isnan(got[2].floats()[0]));
}

TEST_F(LongReductionTest, SdeStepLogProbOfAnSd3LatentMatchesFloat64) {
  // The log-probability of one 16x128x128 latent (SD3 at 1024 px), two
  // samples, as the rollout computes it (noise) and as the loss recomputes
  // it (next), for both step types: within 1e-6 relative of the reference
  // evaluator in float64 on the same float32 inputs. The per-element terms
  // are rounded to float32 before the mean; their rounding errors average
  // out, so only the summation could break the bound (it was 3e-5..7e-5
  // with a float32 accumulator).
  const char *source =
      R"(func.func @f(%x: tensor<2x16x128x128xf32>, %v: tensor<2x16x128x128xf32>, %e: tensor<2x16x128x128xf32>) -> (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) {
      %s, %ts = omni.flow_schedule static_shift steps = 10 : tensor<11xf32>, tensor<10xf32>
      %i = arith.constant 3 : index
      %xn, %lp, %mu, %std = omni.sde_step sde %x, %v, %s[%i] noise %e : tensor<2x16x128x128xf32>, tensor<11xf32>
      %xr, %lpr, %mur, %stdr = omni.sde_step sde %x, %v, %s[%i] next %xn : tensor<2x16x128x128xf32>, tensor<11xf32>
      %xc, %lpc, %muc, %stdc = omni.sde_step cps %x, %v, %s[%i] noise %e : tensor<2x16x128x128xf32>, tensor<11xf32>
      %xq, %lpq, %muq, %stdq = omni.sde_step cps %x, %v, %s[%i] next %xc : tensor<2x16x128x128xf32>, tensor<11xf32>
      return %lp, %lpr, %lpc, %lpq : tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32> })";
  OwningOpRef<ModuleOp> module =
      parseSourceString<ModuleOp>(source, ParserConfig(&context));
  ASSERT_TRUE(module);
  std::vector<int64_t> shape = {2, 16, 128, 128};
  std::vector<HostTensor> args = {random(shape, 41), random(shape, 42),
                                  random(shape, 43)};
  // The noise is standard normal, as in a rollout.
  {
    std::mt19937 rng(44);
    std::normal_distribution<double> normal;
    for (double &e : args[2].floats())
      e = static_cast<float>(normal(rng));
  }
  reference::EvalOptions f64 = eval();
  f64.precision = reference::Precision::F64;
  auto want = reference::evaluateFunction(*module, "f", args, f64);
  ASSERT_TRUE(want.ok()) << want.status();
  // The `next` cases read x_{t+1}: the float32 sample the rollout wrote.
  auto executor = compile(*module);
  ASSERT_TRUE(executor);
  auto got = ::omni::executor::runHostTensors(*executor, "f", args);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 4u);
  for (size_t r = 0; r < 4; ++r)
    for (size_t b = 0; b < 2; ++b) {
      double w = (*want)[r].floats()[b], g = (*got)[r].floats()[b];
      EXPECT_NEAR(g, w, 1e-6 * std::abs(w))
          << "result " << r << " sample " << b;
    }
}

//===----------------------------------------------------------------------===//
// Resident state
//===----------------------------------------------------------------------===//

// The stores into state slots happen when the function returns; what the
// body and the other results read is the state before the call. Here x'
// is computed before a matmul reads the old x (so x' cannot be computed
// into its slot), y' is computed into its slot (its last use), a and b
// swap (each store reads a slot another store overwrites), and plain
// results return the old x and a and the new y. Small integers and halves
// keep every value exact, so both ways must agree bit for bit, call after
// call.
TEST_F(DifferentialTest, StateReadsSeeTheValueBeforeTheCall) {
  const char *source = R"(
    func.func @step(%x: tensor<4xf32> {omni.state = "x"},
                    %y: tensor<4xf32> {omni.state = "y"},
                    %a: tensor<4x4xf32> {omni.state = "a"},
                    %b: tensor<4x4xf32> {omni.state = "b"},
                    %d: tensor<4xf32>)
        -> (tensor<4xf32> {omni.state = "x"}, tensor<4xf32> {omni.state = "y"},
            tensor<4x4xf32> {omni.state = "a"},
            tensor<4x4xf32> {omni.state = "b"},
            tensor<4xf32>, tensor<4x4xf32>, tensor<4xf32>) {
      %xn = omni.add %x, %d : tensor<4xf32>
      %xm = omni.reshape %x : tensor<4xf32> -> tensor<1x4xf32>
      %p = omni.matmul %xm, %a : tensor<1x4xf32>, tensor<4x4xf32> -> tensor<1x4xf32>
      %pr = omni.reshape %p : tensor<1x4xf32> -> tensor<4xf32>
      %yn = omni.add %y, %pr : tensor<4xf32>
      return %xn, %yn, %b, %a, %x, %a, %yn
          : tensor<4xf32>, tensor<4xf32>, tensor<4x4xf32>, tensor<4x4xf32>,
            tensor<4xf32>, tensor<4x4xf32>, tensor<4xf32>
    })";
  auto matrix = [](double first) {
    std::vector<double> v(16);
    for (int i = 0; i < 16; ++i)
      v[i] = first + (i % 5) - 2;
    return HostTensor::fromDoubles(DType::F32, {4, 4}, v);
  };
  compareResident(
      source, "step",
      {{"x", HostTensor::fromDoubles(DType::F32, {4}, {1, -2, 0.5, 3})},
       {"y", HostTensor::fromDoubles(DType::F32, {4}, {0, 1, 2, -1})},
       {"a", matrix(0)},
       {"b", matrix(1)}},
      {HostTensor::fromDoubles(DType::F32, {4}, {0.5, 1, -1, 0})},
      /*calls=*/3);
}

// A training step in the convention (omni.state inferred) shares its slots
// with its initializer: @init_state's results are stored, @train_step
// reads and updates them and returns only its metrics.
TEST_F(DifferentialTest, InferredStateIsSharedByInitAndStep) {
  const char *source = R"(
    func.func @init_state(%seed: tensor<i64>) -> (tensor<3xf32>, tensor<i64>) {
      %w = omni.constant dense<[1.0, 2.0, -4.0]> : tensor<3xf32>
      %t = omni.constant dense<0> : tensor<i64>
      return %w, %t : tensor<3xf32>, tensor<i64>
    }
    func.func @train_step(%w: tensor<3xf32> {omni.name = "w"},
                          %t: tensor<i64> {omni.name = "step"},
                          %seed: tensor<i64>, %iteration: tensor<i64>)
        -> (tensor<3xf32>, tensor<i64>, tensor<f32> {omni.name = "loss"}) {
      %half = omni.constant dense<0.5> : tensor<3xf32>
      %wn = omni.mul %w, %half : tensor<3xf32>
      %one = omni.constant dense<1> : tensor<i64>
      %tn = omni.add %t, %one : tensor<i64>
      %l = omni.reduce sum %w dims = [0] : tensor<3xf32> -> tensor<f32>
      return %wn, %tn, %l : tensor<3xf32>, tensor<i64>, tensor<f32>
    })";
  OwningOpRef<ModuleOp> module =
      parseSourceString<ModuleOp>(source, ParserConfig(&context));
  ASSERT_TRUE(module);
  auto executor = compile(*module);
  ASSERT_TRUE(executor);
  EXPECT_EQ(executor->stateNames(), (std::vector<std::string>{"w", "step"}));
  auto init = ::omni::executor::runHostTensors(
      *executor, "init_state", {HostTensor::scalarInt(DType::I64, 1)});
  ASSERT_TRUE(init.ok()) << init.status();
  EXPECT_TRUE(init->empty());
  for (int64_t i = 0; i < 3; ++i) {
    auto loss = ::omni::executor::runHostTensors(
        *executor, "train_step",
        {HostTensor::scalarInt(DType::I64, 1),
         HostTensor::scalarInt(DType::I64, i)});
    ASSERT_TRUE(loss.ok()) << loss.status();
    ASSERT_EQ(loss->size(), 1u);
    // w halves every step: sum(w) = -1 / 2^i before step i.
    EXPECT_EQ((*loss)[0].floats()[0], -1.0 / (1 << i)) << "step " << i;
  }
  auto w = hostState(*executor, "w");
  auto t = hostState(*executor, "step");
  ASSERT_TRUE(w.ok() && t.ok());
  EXPECT_TRUE(*w ==
              HostTensor::fromDoubles(DType::F32, {3}, {0.125, 0.25, -0.5}))
      << text(*w);
  EXPECT_EQ(t->intAt(0), 3);
}

class ToyDifferentialTest : public DifferentialTest {
protected:
  void SetUp() override {
    toy = parseSourceFile<ModuleOp>(OMNI_SOURCE_DIR
                                    "/examples/flowgrpo-toy/toy.mlir",
                                    ParserConfig(&context));
    ASSERT_TRUE(toy);
    auto init = reference::evaluateFunction(
        *toy, "init", {HostTensor::scalarInt(DType::I64, 7)}, eval());
    ASSERT_TRUE(init.ok()) << init.status();
    params = *init;
  }
  OwningOpRef<ModuleOp> toy;
  std::vector<HostTensor> params;
};

TEST_F(ToyDifferentialTest, RolloutMatches) {
  std::vector<HostTensor> args = params;
  args.push_back(HostTensor::scalarInt(DType::I64, 7));
  args.push_back(HostTensor::scalarInt(DType::I64, 3));
  // Four SDE steps of a float32 chain: 1e-4 relative.
  compareModule(*toy, "rollout", args, /*rel=*/1e-4, /*abs=*/1e-5);
}

TEST_F(ToyDifferentialTest, IterationMatches) {
  // The loss is ~1e-7 on-policy (rounding of -mean(A) with mean(A) = 0);
  // advantages divide by a float32 std computed in a different order.
  compareModule(*toy, "main",
                {HostTensor::scalarInt(DType::I64, 7),
                 HostTensor::scalarInt(DType::I64, 0)},
                /*rel=*/1e-4, /*abs=*/1e-5);
}

// The toy's @train_step with resident state computes exactly what the same
// program computes with the state as arguments and results (its state
// unnamed, so omni-resident-state leaves it alone): the same kernels on
// the same values; only where the bytes live differs. Three iterations,
// starting from @init_state on each side.
TEST_F(ToyDifferentialTest, ResidentTrainStepMatchesStateAsArguments) {
  OwningOpRef<ModuleOp> plainModule = toy->clone();
  auto plainStep = plainModule->lookupSymbol<func::FuncOp>("train_step");
  ASSERT_TRUE(plainStep);
  std::vector<std::string> names;
  auto nameAttr = StringAttr::get(&context, "omni.name");
  for (unsigned i = 0; i < 13; ++i) {
    auto name = plainStep.getArgAttrOfType<StringAttr>(i, nameAttr);
    ASSERT_TRUE(name);
    names.push_back(name.str());
    plainStep.removeArgAttr(i, nameAttr);
  }
  auto resident = compile(*toy);
  auto plain = compile(*plainModule);
  ASSERT_TRUE(resident && plain);
  EXPECT_EQ(resident->stateNames(), names);
  EXPECT_TRUE(plain->stateNames().empty());

  HostTensor seed = HostTensor::scalarInt(DType::I64, 7);
  auto state = ::omni::executor::runHostTensors(*plain, "init_state", {seed});
  ASSERT_TRUE(state.ok()) << state.status();
  ASSERT_EQ(state->size(), 13u);
  auto none = ::omni::executor::runHostTensors(*resident, "init_state", {seed});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());
  for (int64_t it = 0; it <= 3; ++it) {
    for (size_t i = 0; i < names.size(); ++i) {
      auto slot = hostState(*resident, names[i]);
      ASSERT_TRUE(slot.ok()) << slot.status();
      ASSERT_TRUE(*slot == (*state)[i])
          << names[i] << " before iteration " << it << ": " << text(*slot)
          << ", expected " << text((*state)[i]);
    }
    if (it == 3)
      break;
    std::vector<HostTensor> args = *state;
    args.push_back(seed);
    args.push_back(HostTensor::scalarInt(DType::I64, it));
    auto want = ::omni::executor::runHostTensors(*plain, "train_step", args);
    ASSERT_TRUE(want.ok()) << want.status();
    auto got = ::omni::executor::runHostTensors(
        *resident, "train_step", {seed, HostTensor::scalarInt(DType::I64, it)});
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(want->size(), 16u);
    ASSERT_EQ(got->size(), 3u);
    for (size_t j = 0; j < 3; ++j)
      EXPECT_TRUE((*got)[j] == (*want)[13 + j])
          << "metric " << j << " of iteration " << it << ": " << text((*got)[j])
          << ", expected " << text((*want)[13 + j]);
    state->assign(want->begin(), want->begin() + 13);
  }
}

} // namespace
