//===- DecomposeTest.cpp - omni-decompose preserves values ----------------===//
//
// For every composite and diffusion RL op: the reference evaluator gives the
// same results, in float64, on a function using the op and on the same
// function after omni-decompose, for random inputs (1e-12 relative, or
// absolute near zero). This is the contract of omni-decompose.
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/Evaluator.h"
#include "dialects/omni/OmniOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>
#include <random>

using namespace mlir;
using ::omni::DType;
using ::omni::HostTensor;
namespace reference = ::omni::reference;

namespace {

struct Case {
  const char *name;
  const char *source; ///< one function @f
  bool libraryOps = false;
  /// The op under test when the case's name is not its name.
  const char *op = nullptr;
};

class DecomposeTest : public ::testing::TestWithParam<Case> {
protected:
  DecomposeTest() {
    DialectRegistry registry;
    mlir::omni::registerOmniDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }

  /// Random arguments for `fn`: floats uniform in [0.1, 1.5) (positive so
  /// logs and square roots stay defined), integers 2. The programs are
  /// typed f64 so that their constants are exact in double.
  std::vector<HostTensor> randomArgs(func::FuncOp fn) {
    std::mt19937_64 rng(1234);
    std::uniform_real_distribution<double> dist(0.1, 1.5);
    std::vector<HostTensor> args;
    for (Type t : fn.getFunctionType().getInputs()) {
      auto tt = cast<RankedTensorType>(t);
      std::vector<int64_t> shape(tt.getShape());
      if (isa<FloatType>(tt.getElementType())) {
        std::vector<double> v(tt.getNumElements());
        for (double &x : v)
          x = dist(rng);
        args.push_back(HostTensor::fromDoubles(DType::F64, shape, v));
      } else {
        args.push_back(HostTensor::fromInts(
            DType::I64, shape, std::vector<int64_t>(tt.getNumElements(), 2)));
      }
    }
    return args;
  }

  MLIRContext context;
};

TEST_P(DecomposeTest, SameValuesInFloat64) {
  const Case &c = GetParam();
  OwningOpRef<ModuleOp> original =
      parseSourceString<ModuleOp>(c.source, ParserConfig(&context));
  ASSERT_TRUE(original) << c.name;
  OwningOpRef<ModuleOp> decomposed = original->clone();
  PassManager pm(&context);
  mlir::omni::OmniDecomposePassOptions options;
  options.decomposeLibraryOps = c.libraryOps;
  pm.addPass(mlir::omni::createOmniDecomposePass(options));
  ASSERT_TRUE(succeeded(pm.run(*decomposed))) << c.name;

  // The decomposition really removed the op under test.
  std::string text;
  llvm::raw_string_ostream os(text);
  decomposed->print(os);
  EXPECT_EQ(text.find(std::string("omni.") + (c.op ? c.op : c.name) + " "),
            std::string::npos)
      << text;

  auto fn = original->lookupSymbol<func::FuncOp>("f");
  std::vector<HostTensor> args = randomArgs(fn);
  reference::EvalOptions f64;
  f64.precision = reference::Precision::F64;
  auto want = reference::evaluateFunction(*original, "f", args, f64);
  auto got = reference::evaluateFunction(*decomposed, "f", args, f64);
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_TRUE(got.ok()) << got.status() << "\n" << text;
  ASSERT_EQ(want->size(), got->size());
  for (size_t r = 0; r < want->size(); ++r) {
    auto a = (*want)[r].floats(), b = (*got)[r].floats();
    ASSERT_EQ(a.size(), b.size()) << "result " << r;
    for (size_t i = 0; i < a.size(); ++i)
      EXPECT_NEAR(b[i], a[i], 1e-12 * std::max(1.0, std::abs(a[i])))
          << c.name << " result " << r << " element " << i;
  }
}

const Case kCases[] = {
    {"silu", R"(func.func @f(%x: tensor<3x5xf64>) -> tensor<3x5xf64> {
      %y = omni.silu %x : tensor<3x5xf64>
      return %y : tensor<3x5xf64> })"},
    {"gelu",
     R"(func.func @f(%x: tensor<3x5xf64>) -> (tensor<3x5xf64>, tensor<3x5xf64>) {
      %a = omni.gelu tanh %x : tensor<3x5xf64>
      %b = omni.gelu erf %x : tensor<3x5xf64>
      return %a, %b : tensor<3x5xf64>, tensor<3x5xf64> })"},
    {"softmax",
     R"(func.func @f(%x: tensor<3x5xf64>) -> (tensor<3x5xf64>, tensor<3x5xf64>) {
      %a = omni.softmax %x, dim = 1 : tensor<3x5xf64>
      %b = omni.softmax %x, dim = 0 : tensor<3x5xf64>
      return %a, %b : tensor<3x5xf64>, tensor<3x5xf64> })"},
    {"layer_norm",
     R"(func.func @f(%x: tensor<2x3x8xf64>, %w: tensor<8xf64>, %b: tensor<8xf64>) -> (tensor<2x3x8xf64>, tensor<2x3x8xf64>) {
      %a = omni.layer_norm %x weight %w bias %b {eps = 1.0e-6} : (tensor<2x3x8xf64>, tensor<8xf64>, tensor<8xf64>) -> tensor<2x3x8xf64>
      %c = omni.layer_norm %x : (tensor<2x3x8xf64>) -> tensor<2x3x8xf64>
      return %a, %c : tensor<2x3x8xf64>, tensor<2x3x8xf64> })"},
    {"rms_norm",
     R"(func.func @f(%x: tensor<2x8xf64>, %w: tensor<8xf64>) -> tensor<2x8xf64> {
      %a = omni.rms_norm %x weight %w : (tensor<2x8xf64>, tensor<8xf64>) -> tensor<2x8xf64>
      return %a : tensor<2x8xf64> })"},
    {"linear",
     R"(func.func @f(%x: tensor<2x3x8xf64>, %w: tensor<4x8xf64>, %b: tensor<4xf64>, %v: tensor<8xf64>) -> (tensor<2x3x4xf64>, tensor<4xf64>) {
      %a = omni.linear %x, %w bias %b : (tensor<2x3x8xf64>, tensor<4x8xf64>, tensor<4xf64>) -> tensor<2x3x4xf64>
      %c = omni.linear %v, %w : (tensor<8xf64>, tensor<4x8xf64>) -> tensor<4xf64>
      return %a, %c : tensor<2x3x4xf64>, tensor<4xf64> })"},
    {"lora_linear",
     R"(func.func @f(%x: tensor<2x8xf64>, %w: tensor<4x8xf64>, %b: tensor<4xf64>, %la: tensor<2x8xf64>, %lb: tensor<4x2xf64>) -> tensor<2x4xf64> {
      %a = omni.lora_linear %x, %w bias %b lora(%la, %lb) {scale = 2.0} : (tensor<2x8xf64>, tensor<4x8xf64>, tensor<4xf64>, tensor<2x8xf64>, tensor<4x2xf64>) -> tensor<2x4xf64>
      return %a : tensor<2x4xf64> })"},
    {"cfg_combine", R"(func.func @f(%v: tensor<4x6xf64>) -> tensor<2x6xf64> {
      %a = omni.cfg_combine %v {guidance_scale = 4.5} : tensor<4x6xf64> -> tensor<2x6xf64>
      return %a : tensor<2x6xf64> })"},
    {"attention",
     R"(func.func @f(%q: tensor<1x2x3x4xf64>, %k: tensor<1x2x5x4xf64>, %v: tensor<1x2x5x6xf64>, %m: tensor<1x1x3x5xf64>) -> (tensor<1x2x3x6xf64>, tensor<1x2x3x6xf64>) {
      %a = omni.attention %q, %k, %v : (tensor<1x2x3x4xf64>, tensor<1x2x5x4xf64>, tensor<1x2x5x6xf64>) -> tensor<1x2x3x6xf64>
      %b = omni.attention %q, %k, %v mask %m {scale = 0.3} : (tensor<1x2x3x4xf64>, tensor<1x2x5x4xf64>, tensor<1x2x5x6xf64>, tensor<1x1x3x5xf64>) -> tensor<1x2x3x6xf64>
      return %a, %b : tensor<1x2x3x6xf64>, tensor<1x2x3x6xf64> })",
     /*libraryOps=*/true},
    {"sde_step",
     R"(func.func @f(%x: tensor<2x4xf64>, %v: tensor<2x4xf64>, %e: tensor<2x4xf64>) -> (tensor<2x4xf64>, tensor<2xf64>, tensor<2x4xf64>, tensor<f64>, tensor<2xf64>, tensor<2x4xf64>, tensor<2xf64>, tensor<2xf64>, tensor<2x4xf64>) {
      %s, %t = omni.flow_schedule static_shift steps = 10 : tensor<11xf32>, tensor<10xf32>
      %i0 = arith.constant 0 : index
      %i3 = arith.constant 3 : index
      %n, %lp, %mu, %std = omni.sde_step sde %x, %v, %s[%i0] noise %e : tensor<2x4xf64>, tensor<11xf32>
      %n2, %lp2, %mu2, %std2 = omni.sde_step cps %x, %v, %s[%i3] noise %e {noise_level = 0.8} : tensor<2x4xf64>, tensor<11xf32>
      %n3, %lp3, %mu3, %std3 = omni.sde_step sde %x, %v, %s[%i3] next %e : tensor<2x4xf64>, tensor<11xf32>
      %n4, %lp4, %mu4, %std4 = omni.sde_step ode %x, %v, %s[%i3] noise %e : tensor<2x4xf64>, tensor<11xf32>
      return %n, %lp, %mu, %std, %lp2, %mu2, %lp3, %lp4, %n4 : tensor<2x4xf64>, tensor<2xf64>, tensor<2x4xf64>, tensor<f64>, tensor<2xf64>, tensor<2x4xf64>, tensor<2xf64>, tensor<2xf64>, tensor<2x4xf64> })"},
    // Runtime hyper-parameters: f64 arguments (random, in [0.1, 1.5))
    // replace attributes that would give other values.
    {"cfg_combine_operand",
     R"(func.func @f(%v: tensor<4x6xf64>, %g: tensor<f64>) -> tensor<2x6xf64> {
      %a = omni.cfg_combine %v guidance_scale(%g) {guidance_scale = 4.5} : tensor<4x6xf64> -> tensor<2x6xf64>
      return %a : tensor<2x6xf64> })",
     false, "cfg_combine"},
    {"sde_step_operand",
     R"(func.func @f(%x: tensor<2x4xf64>, %v: tensor<2x4xf64>, %e: tensor<2x4xf64>, %a: tensor<f64>) -> (tensor<2x4xf64>, tensor<2xf64>, tensor<2x4xf64>, tensor<f64>, tensor<2xf64>, tensor<2x4xf64>, tensor<f64>) {
      %s, %t = omni.flow_schedule static_shift steps = 10 : tensor<11xf32>, tensor<10xf32>
      %i0 = arith.constant 0 : index
      %i3 = arith.constant 3 : index
      %n, %lp, %mu, %std = omni.sde_step sde %x, %v, %s[%i0] noise %e noise_level(%a) : tensor<2x4xf64>, tensor<11xf32>
      %n2, %lp2, %mu2, %std2 = omni.sde_step cps %x, %v, %s[%i3] next %e noise_level(%a) {noise_level = 0.8} : tensor<2x4xf64>, tensor<11xf32>
      return %n, %lp, %mu, %std, %lp2, %mu2, %std2 : tensor<2x4xf64>, tensor<2xf64>, tensor<2x4xf64>, tensor<f64>, tensor<2xf64>, tensor<2x4xf64>, tensor<f64> })",
     false, "sde_step"},
    {"grpo_loss_operands",
     R"(func.func @f(%lp: tensor<4xf64>, %old: tensor<4xf64>, %a: tensor<4xf64>, %mu: tensor<4x3xf64>, %ref: tensor<4x3xf64>, %std: tensor<f64>, %cr: tensor<f64>, %am: tensor<f64>, %b: tensor<f64>) -> (tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>) {
      %l, %k, %c, %kl = omni.grpo_loss %lp, %old, %a kl(%mu, %ref, %std) clip_range(%cr) adv_clip_max(%am) beta(%b) {beta = 0.04, clip_range = 0.01} : (tensor<4xf64>, tensor<4xf64>, tensor<4xf64>, tensor<4x3xf64>, tensor<4x3xf64>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>) -> (tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>)
      return %l, %k, %c, %kl : tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64> })",
     false, "grpo_loss"},
    {"group_advantages",
     R"(func.func @f(%r: tensor<6xf64>) -> (tensor<6xf64>, tensor<6xf64>, tensor<6xf64>) {
      %a = omni.group_advantages %r {group_size = 3} : tensor<6xf64>
      %b = omni.group_advantages %r {group_size = 3, global_std = false, ddof = 1} : tensor<6xf64>
      %c = omni.group_advantages %r {group_size = 2, norm_by_std = false} : tensor<6xf64>
      return %a, %b, %c : tensor<6xf64>, tensor<6xf64>, tensor<6xf64> })"},
    {"grpo_loss",
     R"(func.func @f(%lp: tensor<4xf64>, %old: tensor<4xf64>, %a: tensor<4xf64>, %mu: tensor<4x3xf64>, %ref: tensor<4x3xf64>, %std: tensor<f64>) -> (tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>) {
      %l, %k, %c, %kl = omni.grpo_loss %lp, %old, %a : (tensor<4xf64>, tensor<4xf64>, tensor<4xf64>) -> (tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>)
      %l2, %k2, %c2, %kl2 = omni.grpo_loss %lp, %old, %a kl(%mu, %ref, %std) {beta = 0.04, clip_range = 0.2} : (tensor<4xf64>, tensor<4xf64>, tensor<4xf64>, tensor<4x3xf64>, tensor<4x3xf64>, tensor<f64>) -> (tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>)
      return %l, %k, %c, %l2, %c2, %kl2 : tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64> })"},
    {"adamw",
     R"(func.func @f(%p: tensor<5xf64>, %g: tensor<5xf64>, %m: tensor<5xf64>, %v: tensor<5xf64>, %t: tensor<i64>) -> (tensor<5xf64>, tensor<5xf64>, tensor<5xf64>) {
      %p2, %m2, %v2 = omni.adamw %p, %g, %m, %v, %t {lr = 1.0e-3} : tensor<5xf64>
      return %p2, %m2, %v2 : tensor<5xf64>, tensor<5xf64>, tensor<5xf64> })"},
    {"clip_grad_norm",
     R"(func.func @f(%a: tensor<5xf64>, %b: tensor<2x3xf64>) -> (tensor<5xf64>, tensor<2x3xf64>, tensor<f32>) {
      %g:2, %n = omni.clip_grad_norm %a, %b {max_norm = 0.5} : tensor<5xf64>, tensor<2x3xf64>
      return %g#0, %g#1, %n : tensor<5xf64>, tensor<2x3xf64>, tensor<f32> })"},
    {"flow_schedule", R"(func.func @f() -> (tensor<11xf32>, tensor<10xf32>) {
      %s, %t = omni.flow_schedule static_shift steps = 10 : tensor<11xf32>, tensor<10xf32>
      return %s, %t : tensor<11xf32>, tensor<10xf32> })"},
};

INSTANTIATE_TEST_SUITE_P(AllComposites, DecomposeTest,
                         ::testing::ValuesIn(kCases), [](const auto &info) {
                           return std::string(info.param.name);
                         });

} // namespace
