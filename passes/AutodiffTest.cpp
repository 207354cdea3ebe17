//===- AutodiffTest.cpp - omni-autodiff gradients match finite differences ===//
//
// Gradient checks of omni-autodiff and of every VJP rule: for each
// differentiable op a function @f applies it, a generated @loss weights every
// float result of @f by a random tensor (a non-wrt argument, so that every
// output element reaches the loss) and sums, and the gradient omni-autodiff
// builds for omni.grad @loss is compared, in float64 through the reference
// evaluator, with central finite differences of @loss. Beyond single ops: a
// small transformer block written in primitives, the toy FlowGRPO program of
// examples/flowgrpo-toy with the clipping branch exercised, and the
// structural rules (fan-out sums, unused arguments get exact zeros, a float
// scalar on the path is refused rather than cutting the gradient).
//
// Tolerance: |autodiff - fd| <= 1e-6 |fd| + 1e-8 max(1, |loss|) (the toy
// program, whose loss and gradients are ~1e-4, uses 1e-10 for the second
// factor). Central differences with step h = 1e-6 max(1, |x|) have a
// truncation error of order h^2 |f'''| ~ 1e-12 and a rounding error of
// order eps |L| / h ~ 1e-10 |L|; the worst error observed is below 3e-9, 7%
// of the tolerance. Inputs are chosen away from kinks (positive for log,
// sqrt, pow; continuous random values, so that max, min and reduce max have
// distinct candidates; ratios away from the clip boundaries) so the loss is
// smooth within h.
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/Evaluator.h"
#include "dialects/omni/OmniOps.h"
#include "passes/Passes.h"
#include "runtime/train/rewards/RewardFunctions.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <random>
#include <sstream>

using namespace mlir;
using ::omni::DType;
using ::omni::HostTensor;
namespace reference = ::omni::reference;

namespace {

constexpr double kRelTol = 1e-6;
constexpr double kAbsTol = 1e-8;

/// The finite-difference step for an element of value `x`.
double fdStep(double x) { return 1e-6 * std::max(1.0, std::abs(x)); }

/// The allowed |autodiff - fd|: relative to the derivative, plus an
/// absolute part that grows with the loss, since the rounding error of a
/// central difference is about eps |L| / h = 1e-10 |L|.
double fdTolerance(double fd, double loss, double absTol = kAbsTol) {
  return kRelTol * std::abs(fd) + absTol * std::max(1.0, std::abs(loss));
}

/// FNV-1a: a seed from a case name that is the same on every platform.
uint64_t seedOf(const std::string &name) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name)
    h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string str(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return s;
}

std::string join(ArrayRef<std::string> parts, StringRef sep = ", ") {
  std::string s;
  for (size_t i = 0; i < parts.size(); ++i)
    s += (i ? sep.str() : "") + parts[i];
  return s;
}

DType dtypeOf(Type elt) {
  if (elt.isF64())
    return DType::F64;
  if (elt.isF32())
    return DType::F32;
  if (elt.isBF16())
    return DType::BF16;
  if (elt.isF16())
    return DType::F16;
  if (elt.isInteger(1))
    return DType::I1;
  if (elt.isInteger(32))
    return DType::I32;
  return DType::I64;
}

/// A tensor of `type` with floats uniform in [lo, hi) (kept unrounded: the
/// float64 evaluator carries every float as a double) and random 0 / 1
/// otherwise (select's predicate).
HostTensor randomTensor(RankedTensorType type, std::mt19937_64 &rng, double lo,
                        double hi) {
  HostTensor t(dtypeOf(type.getElementType()),
               std::vector<int64_t>(type.getShape()));
  if (t.isFloat()) {
    std::uniform_real_distribution<double> dist(lo, hi);
    for (double &x : t.floats())
      x = dist(rng);
  } else {
    std::uniform_int_distribution<int64_t> dist(0, 1);
    for (int64_t &x : t.ints())
      x = dist(rng);
  }
  return t;
}

/// `omni.grad @<loss>` wrapped in a function @<name> with the loss's
/// arguments.
std::string gradFunction(func::FuncOp loss, ArrayRef<int64_t> wrt,
                         StringRef name) {
  FunctionType ft = loss.getFunctionType();
  std::vector<std::string> params, args, ins, outs, gs;
  for (auto [i, t] : llvm::enumerate(ft.getInputs())) {
    params.push_back("%a" + std::to_string(i) + ": " + str(t));
    args.push_back("%a" + std::to_string(i));
    ins.push_back(str(t));
  }
  for (auto [i, w] : llvm::enumerate(wrt)) {
    outs.push_back(str(ft.getInput(w)));
    gs.push_back("%g#" + std::to_string(i));
  }
  std::vector<std::string> wrtText;
  for (int64_t w : wrt)
    wrtText.push_back(std::to_string(w));
  return "func.func @" + name.str() + "(" + join(params) + ") -> (" +
         join(outs) + ") {\n  %g:" + std::to_string(wrt.size()) +
         " = omni.grad @" + loss.getSymName().str() + "(" + join(args) +
         ") wrt = [" + join(wrtText) + "] : (" + join(ins) + ") -> (" +
         join(outs) + ")\n  return " + join(gs) + " : " + join(outs) + "\n}\n";
}

/// @loss(args of @f, c_0, ..., c_k) = sum_r cast<f64>(sum(f(args)_r * c_r))
/// over the float results r of @f.
std::string weightedLoss(func::FuncOp f) {
  FunctionType ft = f.getFunctionType();
  std::vector<std::string> params, args, ins, res;
  for (auto [i, t] : llvm::enumerate(ft.getInputs())) {
    params.push_back("%a" + std::to_string(i) + ": " + str(t));
    args.push_back("%a" + std::to_string(i));
    ins.push_back(str(t));
  }
  for (Type t : ft.getResults())
    res.push_back(str(t));
  std::string body = "  %r:" + std::to_string(ft.getNumResults()) +
                     " = func.call @f(" + join(args) + ") : (" + join(ins) +
                     ") -> (" + join(res) + ")\n";
  std::vector<std::string> terms;
  for (auto [r, t] : llvm::enumerate(ft.getResults())) {
    auto tt = cast<RankedTensorType>(t);
    if (!isa<FloatType>(tt.getElementType()))
      continue;
    std::string n = std::to_string(r), c = "%c" + n;
    params.push_back(c + ": " + str(t));
    body +=
        "  %p" + n + " = omni.mul %r#" + n + ", " + c + " : " + str(t) + "\n";
    std::string sum = "%p" + n;
    auto scalar = RankedTensorType::get({}, tt.getElementType());
    if (tt.getRank() > 0) {
      std::vector<std::string> dims;
      for (int64_t d = 0; d < tt.getRank(); ++d)
        dims.push_back(std::to_string(d));
      sum = "%s" + n;
      body += "  " + sum + " = omni.reduce sum %p" + n + " dims = [" +
              join(dims) + "] : " + str(t) + " -> " + str(scalar) + "\n";
    }
    if (!tt.getElementType().isF64()) {
      body += "  %t" + n + " = omni.cast " + sum + " : " + str(scalar) +
              " -> tensor<f64>\n";
      sum = "%t" + n;
    }
    terms.push_back(sum);
  }
  std::string acc = terms[0];
  for (size_t i = 1; i < terms.size(); ++i) {
    std::string next = "%acc" + std::to_string(i);
    body += "  " + next + " = omni.add " + acc + ", " + terms[i] +
            " : tensor<f64>\n";
    acc = next;
  }
  return "func.func @loss(" + join(params) + ") -> tensor<f64> {\n" + body +
         "  return " + acc + " : tensor<f64>\n}\n";
}

class AutodiffTest : public ::testing::Test {
protected:
  AutodiffTest() {
    DialectRegistry registry;
    mlir::omni::registerOmniDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }

  OwningOpRef<ModuleOp> parse(const std::string &source) {
    return parseSourceString<ModuleOp>(source, ParserConfig(&context));
  }

  /// Runs omni-autodiff, recomputing the functions named in `recompute`;
  /// the pass manager verifies the result.
  bool differentiate(ModuleOp module, ArrayRef<std::string> recompute = {}) {
    PassManager pm(&context);
    mlir::omni::OmniAutodiffPassOptions options;
    options.recompute.assign(recompute.begin(), recompute.end());
    pm.addPass(mlir::omni::createOmniAutodiffPass(options));
    return succeeded(pm.run(module));
  }

  static std::vector<HostTensor> eval(ModuleOp module, StringRef name,
                                      ArrayRef<HostTensor> args) {
    static const ::omni::HostFunctionRegistry rewardFns =
        ::omni::rewards::rewardHostFunctions(); // the toy's reward
    reference::EvalOptions f64;
    f64.precision = reference::Precision::F64;
    f64.hostFunctions = &rewardFns;
    auto r = reference::evaluateFunction(module, name, args, f64);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : std::vector<HostTensor>{};
  }

  static double lossAt(ModuleOp module, StringRef loss,
                       ArrayRef<HostTensor> args) {
    std::vector<HostTensor> r = eval(module, loss, args);
    return r.empty() ? NAN : r[0].floats()[0];
  }

  /// Compares `grads` (one per `wrt` argument) with central differences of
  /// `loss` at the elements `pick(arg)` lists (all when it returns none).
  /// Returns the number of elements checked and the number that disagree.
  std::pair<int, int> checkAgainstFiniteDifferences(
      ModuleOp module, StringRef loss, std::vector<HostTensor> args,
      ArrayRef<int64_t> wrt, ArrayRef<HostTensor> grads,
      const std::function<std::vector<int64_t>(int64_t)> &pick = {},
      double absTol = kAbsTol) {
    double base = lossAt(module, loss, args);
    int checked = 0, bad = 0;
    for (auto [k, w] : llvm::enumerate(wrt)) {
      HostTensor &x = args[w];
      std::vector<int64_t> elements = pick ? pick(w) : std::vector<int64_t>{};
      if (elements.empty())
        for (int64_t j = 0; j < x.numElements(); ++j)
          elements.push_back(j);
      for (int64_t j : elements) {
        double v = x.floats()[j], h = fdStep(v);
        x.floats()[j] = v + h;
        double up = lossAt(module, loss, args);
        x.floats()[j] = v - h;
        double down = lossAt(module, loss, args);
        x.floats()[j] = v;
        double fd = (up - down) / (2 * h);
        double got = grads[k].floats()[j];
        bool ok = std::abs(got - fd) <= fdTolerance(fd, base, absTol);
        ++checked;
        bad += !ok;
        EXPECT_TRUE(ok) << "argument #" << w << " element " << j
                        << ": autodiff " << got << ", finite differences "
                        << fd;
      }
    }
    return {checked, bad};
  }

  MLIRContext context;
};

//===----------------------------------------------------------------------===//
// One op at a time
//===----------------------------------------------------------------------===//

/// The float arguments of @f numbered `arg` are drawn from [lo, hi).
struct ArgRange {
  unsigned arg;
  double lo, hi;
};

struct Case {
  std::string name;
  /// Module body with a function @f applying the op under test.
  std::string source;
  /// Range of the float arguments of @f (all differentiated) unless
  /// `ranges` says otherwise; the weights are in [-1, 1).
  double lo = -1.0, hi = 1.0;
  std::vector<ArgRange> ranges = {};
  /// The op is piecewise constant: the gradient must be exactly zero.
  bool zeroGradient = false;
};

/// Names the case in gtest's messages instead of dumping its bytes.
void PrintTo(const Case &c, std::ostream *os) { *os << c.name; }

class OpGradientTest : public AutodiffTest,
                       public ::testing::WithParamInterface<Case> {};

TEST_P(OpGradientTest, MatchesFiniteDifferences) {
  const Case &c = GetParam();
  OwningOpRef<ModuleOp> withF = parse(c.source);
  ASSERT_TRUE(withF) << c.source;
  auto f = withF->lookupSymbol<func::FuncOp>("f");
  ASSERT_TRUE(f);
  std::vector<int64_t> wrt;
  for (auto [i, t] : llvm::enumerate(f.getFunctionType().getInputs()))
    if (isa<FloatType>(cast<RankedTensorType>(t).getElementType()))
      wrt.push_back(i);
  std::string lossText = weightedLoss(f);
  OwningOpRef<ModuleOp> withLoss = parse(c.source + lossText);
  ASSERT_TRUE(withLoss) << lossText;
  auto loss = withLoss->lookupSymbol<func::FuncOp>("loss");
  std::string source = c.source + lossText + gradFunction(loss, wrt, "grad");
  OwningOpRef<ModuleOp> module = parse(source);
  ASSERT_TRUE(module) << source;
  ASSERT_TRUE(differentiate(*module)) << source;
  std::string text;
  llvm::raw_string_ostream os(text);
  module->print(os);

  std::mt19937_64 rng(seedOf(c.name));
  std::vector<HostTensor> args;
  unsigned numF = f.getNumArguments();
  for (auto [i, t] : llvm::enumerate(loss.getFunctionType().getInputs())) {
    double lo = c.lo, hi = c.hi;
    for (const ArgRange &r : c.ranges)
      if (r.arg == i && i < numF)
        lo = r.lo, hi = r.hi;
    if (i >= numF) // a weight
      lo = -1.0, hi = 1.0;
    args.push_back(randomTensor(cast<RankedTensorType>(t), rng, lo, hi));
  }
  std::vector<HostTensor> grads = eval(*module, "grad", args);
  ASSERT_EQ(grads.size(), wrt.size()) << text;
  auto [checked, bad] =
      checkAgainstFiniteDifferences(*module, "loss", args, wrt, grads);
  EXPECT_GT(checked, 0);
  // Not vacuous: some gradient element is far from zero (or, for a
  // piecewise constant op, every one is exactly zero).
  double largest = 0;
  for (const HostTensor &g : grads)
    for (double v : g.floats())
      largest = std::max(largest, std::abs(v));
  if (c.zeroGradient)
    EXPECT_EQ(largest, 0.0);
  else
    EXPECT_GT(largest, 1e-2);
  if (bad)
    ADD_FAILURE() << c.name << ": " << bad << " of " << checked
                  << " gradient elements disagree\n"
                  << text;
}

/// `text` with every `$KEY` replaced by its value.
std::string substitute(std::string text,
                       ArrayRef<std::pair<std::string, std::string>> vars) {
  for (const auto &[key, value] : vars)
    for (size_t p = text.find(key); p != std::string::npos;
         p = text.find(key, p + value.size()))
      text.replace(p, key.size(), value);
  return text;
}

Case unary(const std::string &op, double lo = -1.0, double hi = 1.0) {
  return {op,
          substitute(R"(
func.func @f(%x: tensor<3x4xf64>) -> tensor<3x4xf64> {
  %y = omni.$OP %x : tensor<3x4xf64>
  return %y : tensor<3x4xf64>
})",
                     {{"$OP", op}}),
          lo, hi};
}

Case binary(const std::string &op, std::vector<ArgRange> ranges = {}) {
  return {op,
          substitute(R"(
func.func @f(%x: tensor<3x4xf64>, %y: tensor<3x4xf64>) -> tensor<3x4xf64> {
  %z = omni.$OP %x, %y : tensor<3x4xf64>
  return %z : tensor<3x4xf64>
})",
                     {{"$OP", op}}),
          -1.0, 1.0, std::move(ranges)};
}

Case castCase(const std::string &from, const std::string &to) {
  return {"cast_" + from + "_to_" + to,
          substitute(R"(
func.func @f(%x: tensor<3x4x$FROM>) -> tensor<3x4x$TO> {
  %y = omni.cast %x : tensor<3x4x$FROM> -> tensor<3x4x$TO>
  return %y : tensor<3x4x$TO>
})",
                     {{"$FROM", from}, {"$TO", to}})};
}

Case matmul(const std::string &name, const std::string &lhs,
            const std::string &rhs, const std::string &res,
            const std::string &flags) {
  return {
      "matmul_" + name,
      substitute(
          R"(
func.func @f(%a: $LHS, %b: $RHS) -> $RES {
  %c = omni.matmul %a, %b $FLAGS : $LHS, $RHS -> $RES
  return %c : $RES
})",
          {{"$LHS", lhs}, {"$RHS", rhs}, {"$RES", res}, {"$FLAGS", flags}})};
}

Case conv(const std::string &name, const std::string &input,
          const std::string &filter, const std::string &res,
          const std::string &attrs) {
  return {"conv2d_" + name, substitute(R"(
func.func @f(%x: $INPUT, %w: $FILTER) -> $RES {
  %y = omni.conv2d %x, %w $ATTRS : $INPUT, $FILTER -> $RES
  return %y : $RES
})",
                                       {{"$INPUT", input},
                                        {"$FILTER", filter},
                                        {"$RES", res},
                                        {"$ATTRS", attrs}})};
}

/// One sde_step of type `type` at `step` of a 10-step schedule, given
/// `input` ("noise" or "next") %e; x, v and %e have type `x`, with a batch
/// of 2.
Case sdeStep(const std::string &name, const std::string &type, int step,
             const std::string &input, const std::string &attrs = "",
             const std::string &x = "tensor<2x4xf64>") {
  return {"sde_step_" + name, substitute(R"(
func.func @f(%x: $X, %v: $X, %e: $X) -> ($X, tensor<2xf64>, $X, tensor<f64>) {
  %s, %t = omni.flow_schedule static_shift steps = 10 : tensor<11xf32>, tensor<10xf32>
  %i = arith.constant $STEP : index
  %n, %lp, %mu, %std = omni.sde_step $TYPE %x, %v, %s[%i] $INPUT %e $ATTRS : $X, tensor<11xf32>
  return %n, %lp, %mu, %std : $X, tensor<2xf64>, $X, tensor<f64>
})",
                                         {{"$X", x},
                                          {"$STEP", std::to_string(step)},
                                          {"$TYPE", type},
                                          {"$INPUT", input},
                                          {"$ATTRS", attrs}})};
}

std::vector<Case> allCases() {
  std::vector<Case> cases;
  // Elementwise unary ops; log, sqrt and rsqrt on positive inputs.
  for (const char *op :
       {"neg", "abs", "exp", "tanh", "sin", "cos", "erf", "logistic", "silu"})
    cases.push_back(unary(op));
  for (const char *op : {"log", "sqrt", "rsqrt"})
    cases.push_back(unary(op, 0.3, 2.0));
  // Piecewise constant: the gradient is zero (inputs away from the jumps).
  cases.push_back(unary("sign"));
  cases.push_back(unary("floor", -2.0, 2.0));
  cases.end()[-1].zeroGradient = cases.end()[-2].zeroGradient = true;

  for (const char *op : {"add", "sub", "mul", "max", "min"})
    cases.push_back(binary(op));
  cases.push_back(binary("div", {{1, 0.5, 1.5}}));
  cases.push_back(binary("pow", {{0, 0.3, 2.0}, {1, -1.5, 1.5}}));
  cases.push_back({"select", R"(
func.func @f(%p: tensor<3x4xi1>, %a: tensor<3x4xf64>, %b: tensor<3x4xf64>) -> tensor<3x4xf64> {
  %r = omni.select %p, %a, %b : tensor<3x4xi1>, tensor<3x4xf64>
  return %r : tensor<3x4xf64>
})"});
  for (auto [from, to] :
       std::vector<std::pair<const char *, const char *>>{{"f64", "f32"},
                                                          {"f32", "f64"},
                                                          {"f32", "bf16"},
                                                          {"bf16", "f32"},
                                                          {"f64", "bf16"},
                                                          {"bf16", "f64"}})
    cases.push_back(castCase(from, to));

  // Shape ops.
  cases.push_back({"broadcast_in_dim", R"(
func.func @f(%x: tensor<3x1xf64>, %s: tensor<f64>, %y: tensor<4xf64>) -> (tensor<3x2x4xf64>, tensor<2x3xf64>, tensor<3x4xf64>) {
  %a = omni.broadcast_in_dim %x, dims = [0, 2] : tensor<3x1xf64> -> tensor<3x2x4xf64>
  %b = omni.broadcast_in_dim %s, dims = [] : tensor<f64> -> tensor<2x3xf64>
  %c = omni.broadcast_in_dim %y, dims = [1] : tensor<4xf64> -> tensor<3x4xf64>
  return %a, %b, %c : tensor<3x2x4xf64>, tensor<2x3xf64>, tensor<3x4xf64>
})"});
  cases.push_back({"reduce", R"(
func.func @f(%x: tensor<3x4x5xf64>) -> (tensor<3x5xf64>, tensor<4xf64>, tensor<3x4xf64>, tensor<f64>, tensor<f64>) {
  %a = omni.reduce sum %x dims = [1] : tensor<3x4x5xf64> -> tensor<3x5xf64>
  %b = omni.reduce mean %x dims = [0, 2] : tensor<3x4x5xf64> -> tensor<4xf64>
  %c = omni.reduce max %x dims = [2] : tensor<3x4x5xf64> -> tensor<3x4xf64>
  %d = omni.reduce min %x dims = [0, 1, 2] : tensor<3x4x5xf64> -> tensor<f64>
  %e = omni.reduce max %x dims = [0, 1, 2] : tensor<3x4x5xf64> -> tensor<f64>
  return %a, %b, %c, %d, %e : tensor<3x5xf64>, tensor<4xf64>, tensor<3x4xf64>, tensor<f64>, tensor<f64>
})"});
  cases.push_back({"reshape", R"(
func.func @f(%x: tensor<3x4xf64>) -> (tensor<2x6xf64>, tensor<12xf64>, tensor<2x1x6xf64>) {
  %a = omni.reshape %x : tensor<3x4xf64> -> tensor<2x6xf64>
  %b = omni.reshape %x : tensor<3x4xf64> -> tensor<12xf64>
  %c = omni.reshape %a : tensor<2x6xf64> -> tensor<2x1x6xf64>
  return %a, %b, %c : tensor<2x6xf64>, tensor<12xf64>, tensor<2x1x6xf64>
})"});
  cases.push_back({"transpose", R"(
func.func @f(%x: tensor<2x3x4xf64>) -> (tensor<4x2x3xf64>, tensor<3x2x4xf64>) {
  %a = omni.transpose %x, permutation = [2, 0, 1] : tensor<2x3x4xf64> -> tensor<4x2x3xf64>
  %b = omni.transpose %x, permutation = [1, 0, 2] : tensor<2x3x4xf64> -> tensor<3x2x4xf64>
  return %a, %b : tensor<4x2x3xf64>, tensor<3x2x4xf64>
})"});
  cases.push_back({"slice", R"(
func.func @f(%x: tensor<7x6xf64>) -> (tensor<3x2xf64>, tensor<3x4xf64>, tensor<2x6xf64>, tensor<1x1xf64>) {
  %a = omni.slice %x [1:7:2, 0:5:3] : tensor<7x6xf64> -> tensor<3x2xf64>
  %b = omni.slice %x [0:7:3, 2:6:1] : tensor<7x6xf64> -> tensor<3x4xf64>
  %c = omni.slice %x [1:3:1, 0:6:1] : tensor<7x6xf64> -> tensor<2x6xf64>
  %d = omni.slice %x [6:7:4, 5:6:2] : tensor<7x6xf64> -> tensor<1x1xf64>
  return %a, %b, %c, %d : tensor<3x2xf64>, tensor<3x4xf64>, tensor<2x6xf64>, tensor<1x1xf64>
})"});
  cases.push_back({"concat", R"(
func.func @f(%a: tensor<2x3xf64>, %b: tensor<2x1xf64>, %c: tensor<2x2xf64>, %d: tensor<1x3xf64>) -> (tensor<2x6xf64>, tensor<3x3xf64>) {
  %x = omni.concat %a, %b, %c dim = 1 : (tensor<2x3xf64>, tensor<2x1xf64>, tensor<2x2xf64>) -> tensor<2x6xf64>
  %y = omni.concat %d, %a dim = 0 : (tensor<1x3xf64>, tensor<2x3xf64>) -> tensor<3x3xf64>
  return %x, %y : tensor<2x6xf64>, tensor<3x3xf64>
})"});
  cases.push_back({"pad", R"(
func.func @f(%x: tensor<2x3xf64>) -> tensor<5x4xf64> {
  %p = omni.pad %x low = [1, 0] high = [2, 1] value = 0.5 : tensor<2x3xf64> -> tensor<5x4xf64>
  return %p : tensor<5x4xf64>
})"});

  // Contractions: every transpose combination, batched, and a rank-2 rhs
  // shared by a batched lhs.
  cases.push_back(matmul("nn", "tensor<3x4xf64>", "tensor<4x5xf64>",
                         "tensor<3x5xf64>", ""));
  cases.push_back(matmul("tn", "tensor<4x3xf64>", "tensor<4x5xf64>",
                         "tensor<3x5xf64>", "transpose_lhs"));
  cases.push_back(matmul("nt", "tensor<3x4xf64>", "tensor<5x4xf64>",
                         "tensor<3x5xf64>", "transpose_rhs"));
  cases.push_back(matmul("tt", "tensor<4x3xf64>", "tensor<5x4xf64>",
                         "tensor<3x5xf64>", "transpose_lhs transpose_rhs"));
  cases.push_back(matmul("batched_nn", "tensor<2x3x4xf64>", "tensor<2x4x5xf64>",
                         "tensor<2x3x5xf64>", ""));
  cases.push_back(matmul("batched_tt", "tensor<2x4x3xf64>", "tensor<2x5x4xf64>",
                         "tensor<2x3x5xf64>", "transpose_lhs transpose_rhs"));
  cases.push_back(matmul("shared_nn", "tensor<2x3x4xf64>", "tensor<4x5xf64>",
                         "tensor<2x3x5xf64>", ""));
  cases.push_back(matmul("shared_tn", "tensor<2x4x3xf64>", "tensor<4x5xf64>",
                         "tensor<2x3x5xf64>", "transpose_lhs"));
  cases.push_back(matmul("shared_nt", "tensor<2x3x4xf64>", "tensor<5x4xf64>",
                         "tensor<2x3x5xf64>", "transpose_rhs"));
  cases.push_back(matmul("shared_tt", "tensor<2x4x3xf64>", "tensor<5x4xf64>",
                         "tensor<2x3x5xf64>", "transpose_lhs transpose_rhs"));
  cases.push_back(matmul("shared_rank4", "tensor<2x2x3x4xf64>",
                         "tensor<4x5xf64>", "tensor<2x2x3x5xf64>", ""));

  cases.push_back(conv("stride1", "tensor<1x2x5x5xf64>", "tensor<3x2x3x3xf64>",
                       "tensor<1x3x3x3xf64>", ""));
  cases.push_back(conv("stride2_padding1", "tensor<2x2x7x7xf64>",
                       "tensor<3x2x3x3xf64>", "tensor<2x3x4x4xf64>",
                       "{strides = array<i64: 2, 2>, padding = array<i64: 1, "
                       "1>}"));
  cases.push_back(conv("stride2_even", "tensor<1x2x6x6xf64>",
                       "tensor<2x2x3x3xf64>", "tensor<1x2x2x2xf64>",
                       "{strides = array<i64: 2, 2>}"));
  cases.push_back(conv("dilation2", "tensor<1x2x7x6xf64>",
                       "tensor<2x2x3x2xf64>", "tensor<1x2x3x4xf64>",
                       "{dilation = array<i64: 2, 2>}"));
  cases.push_back(conv("mixed", "tensor<1x2x8x6xf64>", "tensor<2x2x3x3xf64>",
                       "tensor<1x2x3x8xf64>",
                       "{strides = array<i64: 2, 1>, padding = array<i64: 1, "
                       "2>, dilation = array<i64: 2, 1>}"));

  // Composites.
  cases.push_back({"attention", R"(
func.func @f(%q: tensor<1x2x3x4xf64>, %k: tensor<1x2x5x4xf64>, %v: tensor<1x2x5x6xf64>) -> tensor<1x2x3x6xf64> {
  %o = omni.attention %q, %k, %v : (tensor<1x2x3x4xf64>, tensor<1x2x5x4xf64>, tensor<1x2x5x6xf64>) -> tensor<1x2x3x6xf64>
  return %o : tensor<1x2x3x6xf64>
})"});
  cases.push_back({"attention_mask_scale", R"(
func.func @f(%q: tensor<2x2x3x4xf64>, %k: tensor<2x2x5x4xf64>, %v: tensor<2x2x5x6xf64>, %m: tensor<2x1x3x5xf64>, %m1: tensor<1x1x3x5xf64>) -> (tensor<2x2x3x6xf64>, tensor<2x2x3x6xf64>) {
  %a = omni.attention %q, %k, %v mask %m {scale = 0.3} : (tensor<2x2x3x4xf64>, tensor<2x2x5x4xf64>, tensor<2x2x5x6xf64>, tensor<2x1x3x5xf64>) -> tensor<2x2x3x6xf64>
  %b = omni.attention %q, %k, %v mask %m1 {scale = 0.7} : (tensor<2x2x3x4xf64>, tensor<2x2x5x4xf64>, tensor<2x2x5x6xf64>, tensor<1x1x3x5xf64>) -> tensor<2x2x3x6xf64>
  return %a, %b : tensor<2x2x3x6xf64>, tensor<2x2x3x6xf64>
})"});
  cases.push_back({"layer_norm", R"(
func.func @f(%x: tensor<2x3x8xf64>, %w: tensor<8xf64>, %b: tensor<8xf64>) -> (tensor<2x3x8xf64>, tensor<2x3x8xf64>) {
  %a = omni.layer_norm %x weight %w bias %b {eps = 1.0e-5} : (tensor<2x3x8xf64>, tensor<8xf64>, tensor<8xf64>) -> tensor<2x3x8xf64>
  %c = omni.layer_norm %x : (tensor<2x3x8xf64>) -> tensor<2x3x8xf64>
  return %a, %c : tensor<2x3x8xf64>, tensor<2x3x8xf64>
})"});
  cases.push_back({"rms_norm", R"(
func.func @f(%x: tensor<2x3x8xf64>, %w: tensor<8xf64>) -> (tensor<2x3x8xf64>, tensor<2x3x8xf64>) {
  %a = omni.rms_norm %x weight %w : (tensor<2x3x8xf64>, tensor<8xf64>) -> tensor<2x3x8xf64>
  %c = omni.rms_norm %x {eps = 1.0e-5} : (tensor<2x3x8xf64>) -> tensor<2x3x8xf64>
  return %a, %c : tensor<2x3x8xf64>, tensor<2x3x8xf64>
})"});
  cases.push_back({"softmax", R"(
func.func @f(%x: tensor<3x5xf64>, %y: tensor<2x3x4xf64>) -> (tensor<3x5xf64>, tensor<3x5xf64>, tensor<2x3x4xf64>) {
  %a = omni.softmax %x, dim = 1 : tensor<3x5xf64>
  %b = omni.softmax %x, dim = 0 : tensor<3x5xf64>
  %c = omni.softmax %y, dim = 1 : tensor<2x3x4xf64>
  return %a, %b, %c : tensor<3x5xf64>, tensor<3x5xf64>, tensor<2x3x4xf64>
})"});
  cases.push_back({"gelu",
                   R"(
func.func @f(%x: tensor<3x5xf64>) -> (tensor<3x5xf64>, tensor<3x5xf64>) {
  %a = omni.gelu tanh %x : tensor<3x5xf64>
  %b = omni.gelu erf %x : tensor<3x5xf64>
  return %a, %b : tensor<3x5xf64>, tensor<3x5xf64>
})",
                   -3.0, 3.0});
  cases.push_back({"linear", R"(
func.func @f(%v: tensor<8xf64>, %x: tensor<3x8xf64>, %y: tensor<2x3x8xf64>, %w: tensor<4x8xf64>, %b: tensor<4xf64>) -> (tensor<4xf64>, tensor<4xf64>, tensor<3x4xf64>, tensor<3x4xf64>, tensor<2x3x4xf64>, tensor<2x3x4xf64>) {
  %a = omni.linear %v, %w : (tensor<8xf64>, tensor<4x8xf64>) -> tensor<4xf64>
  %a2 = omni.linear %v, %w bias %b : (tensor<8xf64>, tensor<4x8xf64>, tensor<4xf64>) -> tensor<4xf64>
  %c = omni.linear %x, %w : (tensor<3x8xf64>, tensor<4x8xf64>) -> tensor<3x4xf64>
  %c2 = omni.linear %x, %w bias %b : (tensor<3x8xf64>, tensor<4x8xf64>, tensor<4xf64>) -> tensor<3x4xf64>
  %d = omni.linear %y, %w : (tensor<2x3x8xf64>, tensor<4x8xf64>) -> tensor<2x3x4xf64>
  %d2 = omni.linear %y, %w bias %b : (tensor<2x3x8xf64>, tensor<4x8xf64>, tensor<4xf64>) -> tensor<2x3x4xf64>
  return %a, %a2, %c, %c2, %d, %d2 : tensor<4xf64>, tensor<4xf64>, tensor<3x4xf64>, tensor<3x4xf64>, tensor<2x3x4xf64>, tensor<2x3x4xf64>
})"});
  cases.push_back({"lora_linear", R"(
func.func @f(%x: tensor<3x8xf64>, %y: tensor<2x3x8xf64>, %w: tensor<4x8xf64>, %b: tensor<4xf64>, %la: tensor<2x8xf64>, %lb: tensor<4x2xf64>) -> (tensor<3x4xf64>, tensor<2x3x4xf64>) {
  %a = omni.lora_linear %x, %w bias %b lora(%la, %lb) {scale = 2.0} : (tensor<3x8xf64>, tensor<4x8xf64>, tensor<4xf64>, tensor<2x8xf64>, tensor<4x2xf64>) -> tensor<3x4xf64>
  %c = omni.lora_linear %y, %w lora(%la, %lb) {scale = 0.5} : (tensor<2x3x8xf64>, tensor<4x8xf64>, tensor<2x8xf64>, tensor<4x2xf64>) -> tensor<2x3x4xf64>
  return %a, %c : tensor<3x4xf64>, tensor<2x3x4xf64>
})"});
  cases.push_back({"cfg_combine", R"(
func.func @f(%v: tensor<4x6xf64>, %u: tensor<4x2x3xf64>) -> (tensor<2x6xf64>, tensor<2x2x3xf64>) {
  %a = omni.cfg_combine %v {guidance_scale = 4.5} : tensor<4x6xf64> -> tensor<2x6xf64>
  %b = omni.cfg_combine %u {guidance_scale = 1.5} : tensor<4x2x3xf64> -> tensor<2x2x3xf64>
  return %a, %b : tensor<2x6xf64>, tensor<2x2x3xf64>
})"});
  // A runtime guidance scale (an f64 operand) replaces the attribute.
  cases.push_back({"cfg_combine_operand", R"(
func.func @f(%v: tensor<4x6xf64>) -> tensor<2x6xf64> {
  %g = omni.constant dense<3.5> : tensor<f64>
  %a = omni.cfg_combine %v guidance_scale(%g) {guidance_scale = 9.0} : tensor<4x6xf64> -> tensor<2x6xf64>
  return %a : tensor<2x6xf64>
})"});
  cases.push_back({"shard", R"(
omni.mesh @mesh axes = ["dp"] shape = [2]
func.func @f(%x: tensor<4x3xf64>) -> tensor<4x3xf64> {
  %s = omni.shard %x : tensor<4x3xf64> to #omni.sharding<@mesh, [["dp"], []]>
  %y = omni.mul %s, %s : tensor<4x3xf64>
  return %y : tensor<4x3xf64>
})"});

  // sde_step with respect to x, v and the noise / next sample, whose
  // sigmas come from omni.flow_schedule. Step 0 has sigma 1 (the s[1]
  // substitution), step 9 is the last (cps: q = 0).
  cases.push_back(sdeStep("sde_noise_step0", "sde", 0, "noise"));
  cases.push_back(
      sdeStep("sde_noise_step4", "sde", 4, "noise", "{noise_level = 0.5}"));
  cases.push_back(sdeStep("sde_next_step0", "sde", 0, "next"));
  cases.push_back(sdeStep("sde_next_step3", "sde", 3, "next"));
  cases.push_back(
      sdeStep("sde_next_rank3", "sde", 2, "next", "", "tensor<2x2x3xf64>"));
  cases.push_back(
      sdeStep("cps_noise_step1", "cps", 1, "noise", "{noise_level = 0.8}"));
  cases.push_back(
      sdeStep("cps_next_step3", "cps", 3, "next", "{noise_level = 0.8}"));
  cases.push_back(
      sdeStep("cps_next_last", "cps", 9, "next", "{noise_level = 0.8}"));
  cases.push_back(sdeStep("ode_noise", "ode", 3, "noise"));
  cases.push_back(sdeStep("ode_next", "ode", 3, "next"));
  cases.push_back(
      sdeStep("sde_level0_next", "sde", 3, "next", "{noise_level = 0.0}"));
  // The runtime noise level (an f64 operand, here a constant that is no
  // differentiated argument) replaces the attribute in the VJP rule.
  for (const char *type : {"sde", "cps"})
    cases.push_back({std::string("sde_step_") + type + "_noise_level_operand",
                     substitute(R"(
func.func @f(%x: tensor<2x4xf64>, %v: tensor<2x4xf64>, %e: tensor<2x4xf64>) -> (tensor<2x4xf64>, tensor<2xf64>, tensor<2x4xf64>, tensor<f64>, tensor<2xf64>) {
  %s, %t = omni.flow_schedule static_shift steps = 10 : tensor<11xf32>, tensor<10xf32>
  %i = arith.constant 3 : index
  %a = omni.constant dense<0.6> : tensor<f64>
  %n, %lp, %mu, %std = omni.sde_step $TYPE %x, %v, %s[%i] next %e noise_level(%a) {noise_level = 5.0} : tensor<2x4xf64>, tensor<11xf32>
  %n2, %lp2, %mu2, %std2 = omni.sde_step $TYPE %x, %v, %s[%i] noise %e noise_level(%a) : tensor<2x4xf64>, tensor<11xf32>
  return %n, %lp, %mu, %std, %lp2 : tensor<2x4xf64>, tensor<2xf64>, tensor<2x4xf64>, tensor<f64>, tensor<2xf64>
})",
                                {{"$TYPE", type}})});

  // grpo_loss: ratios exp(lp - old) spread over [0.55, 1.8] so that with
  // clip range 0.2 both branches occur; advantages partly beyond the clamp
  // at 5; std > 0, dt < 0.
  std::vector<ArgRange> grpoRanges = {{0, -0.3, 0.3},
                                      {1, -0.3, 0.3},
                                      {2, -7.0, 7.0},
                                      {5, 0.5, 1.5},
                                      {6, -0.3, -0.1}};
  cases.push_back({"grpo_loss",
                   R"(
func.func @f(%lp: tensor<6xf64>, %old: tensor<6xf64>, %a: tensor<6xf64>) -> (tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>) {
  %l, %k, %c, %kl = omni.grpo_loss %lp, %old, %a {clip_range = 0.2} : (tensor<6xf64>, tensor<6xf64>, tensor<6xf64>) -> (tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>)
  return %l, %k, %c, %kl : tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>
})",
                   -1.0, 1.0, grpoRanges});
  cases.push_back({"grpo_loss_kl_reference",
                   R"(
func.func @f(%lp: tensor<6xf64>, %old: tensor<6xf64>, %a: tensor<6xf64>, %mu: tensor<6x5xf64>, %ref: tensor<6x5xf64>, %std: tensor<f64>) -> (tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>) {
  %l, %k, %c, %kl = omni.grpo_loss %lp, %old, %a kl(%mu, %ref, %std) {beta = 0.04, clip_range = 0.2} : (tensor<6xf64>, tensor<6xf64>, tensor<6xf64>, tensor<6x5xf64>, tensor<6x5xf64>, tensor<f64>) -> (tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>)
  return %l, %k, %c, %kl : tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>
})",
                   -1.0, 1.0, grpoRanges});
  cases.push_back({"grpo_loss_kl_exact",
                   R"(
func.func @f(%lp: tensor<6xf64>, %old: tensor<6xf64>, %a: tensor<6xf64>, %mu: tensor<6x2x3xf64>, %ref: tensor<6x2x3xf64>, %std: tensor<f64>, %dt: tensor<f64>) -> (tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>) {
  %l, %k, %c, %kl = omni.grpo_loss %lp, %old, %a kl(%mu, %ref, %std) dt(%dt) {beta = 0.5, clip_range = 0.2, kl_form = #omni.kl_form<exact>} : (tensor<6xf64>, tensor<6xf64>, tensor<6xf64>, tensor<6x2x3xf64>, tensor<6x2x3xf64>, tensor<f64>, tensor<f64>) -> (tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>)
  return %l, %k, %c, %kl : tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>
})",
                   -1.0, 1.0, grpoRanges});
  // Runtime clip range, advantage clamp and KL weight (f64 operands that
  // are no differentiated arguments) replace attributes that would give
  // other values: clamp 3 cuts advantages in [-7, 7).
  cases.push_back({"grpo_loss_operands",
                   R"(
func.func @f(%lp: tensor<6xf64>, %old: tensor<6xf64>, %a: tensor<6xf64>, %mu: tensor<6x5xf64>, %ref: tensor<6x5xf64>, %std: tensor<f64>) -> (tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>) {
  %cr = omni.constant dense<0.2> : tensor<f64>
  %am = omni.constant dense<3.0> : tensor<f64>
  %b = omni.constant dense<0.3> : tensor<f64>
  %l, %k, %c, %kl = omni.grpo_loss %lp, %old, %a kl(%mu, %ref, %std) clip_range(%cr) adv_clip_max(%am) beta(%b) {beta = 0.04, clip_range = 0.9} : (tensor<6xf64>, tensor<6xf64>, tensor<6xf64>, tensor<6x5xf64>, tensor<6x5xf64>, tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>) -> (tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>)
  return %l, %k, %c, %kl : tensor<f64>, tensor<f64>, tensor<f64>, tensor<f64>
})",
                   -1.0, 1.0, grpoRanges});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(EveryDifferentiableOp, OpGradientTest,
                         ::testing::ValuesIn(allCases()),
                         [](const auto &info) { return info.param.name; });

//===----------------------------------------------------------------------===//
// Programs
//===----------------------------------------------------------------------===//

/// The transformer block, with the block's forward ops saved for the
/// backward program or (`true`) recomputed there.
class TransformerBlockTest : public AutodiffTest,
                             public ::testing::WithParamInterface<bool> {};

TEST_P(TransformerBlockTest, GradientsOfAllWeights) {
  // x [2, 4, 8] (batch, tokens, width), 2 heads of 4, causal mask:
  // h = x + Wo attn(rms_norm(x) Wq, .. Wk, .. Wv); y = h + W2 gelu(W1 rms(h)).
  // The projections multiply the batched activations by rank-2 weights.
  const std::string source = R"(
func.func @loss(%x: tensor<2x4x8xf64>, %g1: tensor<8xf64>, %wq: tensor<8x8xf64>, %wk: tensor<8x8xf64>, %wv: tensor<8x8xf64>, %wo: tensor<8x8xf64>, %g2: tensor<8xf64>, %w1: tensor<8x16xf64>, %b1: tensor<16xf64>, %w2: tensor<16x8xf64>, %c: tensor<2x4x8xf64>) -> tensor<f64> {
  %y = func.call @block(%x, %g1, %wq, %wk, %wv, %wo, %g2, %w1, %b1, %w2) : (tensor<2x4x8xf64>, tensor<8xf64>, tensor<8x8xf64>, tensor<8x8xf64>, tensor<8x8xf64>, tensor<8x8xf64>, tensor<8xf64>, tensor<8x16xf64>, tensor<16xf64>, tensor<16x8xf64>) -> tensor<2x4x8xf64>
  %yc = omni.mul %y, %c : tensor<2x4x8xf64>
  %l = omni.reduce sum %yc dims = [0, 1, 2] : tensor<2x4x8xf64> -> tensor<f64>
  return %l : tensor<f64>
}
func.func @block(%x: tensor<2x4x8xf64>, %g1: tensor<8xf64>, %wq: tensor<8x8xf64>, %wk: tensor<8x8xf64>, %wv: tensor<8x8xf64>, %wo: tensor<8x8xf64>, %g2: tensor<8xf64>, %w1: tensor<8x16xf64>, %b1: tensor<16xf64>, %w2: tensor<16x8xf64>) -> tensor<2x4x8xf64> {
  %n1 = omni.rms_norm %x weight %g1 : (tensor<2x4x8xf64>, tensor<8xf64>) -> tensor<2x4x8xf64>
  %q = omni.matmul %n1, %wq : tensor<2x4x8xf64>, tensor<8x8xf64> -> tensor<2x4x8xf64>
  %k = omni.matmul %n1, %wk : tensor<2x4x8xf64>, tensor<8x8xf64> -> tensor<2x4x8xf64>
  %v = omni.matmul %n1, %wv : tensor<2x4x8xf64>, tensor<8x8xf64> -> tensor<2x4x8xf64>
  %q4 = omni.reshape %q : tensor<2x4x8xf64> -> tensor<2x4x2x4xf64>
  %k4 = omni.reshape %k : tensor<2x4x8xf64> -> tensor<2x4x2x4xf64>
  %v4 = omni.reshape %v : tensor<2x4x8xf64> -> tensor<2x4x2x4xf64>
  %qh = omni.transpose %q4, permutation = [0, 2, 1, 3] : tensor<2x4x2x4xf64> -> tensor<2x2x4x4xf64>
  %kh = omni.transpose %k4, permutation = [0, 2, 1, 3] : tensor<2x4x2x4xf64> -> tensor<2x2x4x4xf64>
  %vh = omni.transpose %v4, permutation = [0, 2, 1, 3] : tensor<2x4x2x4xf64> -> tensor<2x2x4x4xf64>
  %s = omni.matmul %qh, %kh transpose_rhs : tensor<2x2x4x4xf64>, tensor<2x2x4x4xf64> -> tensor<2x2x4x4xf64>
  %scale = omni.constant dense<0.5> : tensor<2x2x4x4xf64>
  %ss = omni.mul %s, %scale : tensor<2x2x4x4xf64>
  %mask = omni.constant dense<[[0.0, -1.0e9, -1.0e9, -1.0e9], [0.0, 0.0, -1.0e9, -1.0e9], [0.0, 0.0, 0.0, -1.0e9], [0.0, 0.0, 0.0, 0.0]]> : tensor<4x4xf64>
  %mb = omni.broadcast_in_dim %mask, dims = [2, 3] : tensor<4x4xf64> -> tensor<2x2x4x4xf64>
  %sm = omni.add %ss, %mb : tensor<2x2x4x4xf64>
  %p = omni.softmax %sm, dim = 3 : tensor<2x2x4x4xf64>
  %oh = omni.matmul %p, %vh : tensor<2x2x4x4xf64>, tensor<2x2x4x4xf64> -> tensor<2x2x4x4xf64>
  %ot = omni.transpose %oh, permutation = [0, 2, 1, 3] : tensor<2x2x4x4xf64> -> tensor<2x4x2x4xf64>
  %o = omni.reshape %ot : tensor<2x4x2x4xf64> -> tensor<2x4x8xf64>
  %proj = omni.matmul %o, %wo : tensor<2x4x8xf64>, tensor<8x8xf64> -> tensor<2x4x8xf64>
  %h = omni.add %x, %proj : tensor<2x4x8xf64>
  %n2 = omni.rms_norm %h weight %g2 : (tensor<2x4x8xf64>, tensor<8xf64>) -> tensor<2x4x8xf64>
  %u = omni.matmul %n2, %w1 : tensor<2x4x8xf64>, tensor<8x16xf64> -> tensor<2x4x16xf64>
  %ub = omni.broadcast_in_dim %b1, dims = [2] : tensor<16xf64> -> tensor<2x4x16xf64>
  %u1 = omni.add %u, %ub : tensor<2x4x16xf64>
  %a = omni.gelu tanh %u1 : tensor<2x4x16xf64>
  %d = omni.matmul %a, %w2 : tensor<2x4x16xf64>, tensor<16x8xf64> -> tensor<2x4x8xf64>
  %y = omni.add %h, %d : tensor<2x4x8xf64>
  return %y : tensor<2x4x8xf64>
}
)";
  OwningOpRef<ModuleOp> withLoss = parse(source);
  ASSERT_TRUE(withLoss);
  auto loss = withLoss->lookupSymbol<func::FuncOp>("loss");
  std::vector<int64_t> wrt = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::string full = source + gradFunction(loss, wrt, "grad");
  OwningOpRef<ModuleOp> module = parse(full);
  ASSERT_TRUE(module);
  std::vector<std::string> recompute;
  if (GetParam())
    recompute.push_back("block");
  ASSERT_TRUE(differentiate(*module, recompute));
  std::mt19937_64 rng(42);
  std::vector<HostTensor> args;
  for (auto [i, t] : llvm::enumerate(loss.getFunctionType().getInputs())) {
    // Norm gains near 1, weights scaled like an init, inputs O(1).
    double lo = -0.5, hi = 0.5;
    if (i == 1 || i == 6)
      lo = 0.8, hi = 1.2;
    if (i == 0 || i == 10)
      lo = -1.0, hi = 1.0;
    args.push_back(randomTensor(cast<RankedTensorType>(t), rng, lo, hi));
  }
  std::vector<HostTensor> grads = eval(*module, "grad", args);
  ASSERT_EQ(grads.size(), wrt.size());
  auto [checked, bad] =
      checkAgainstFiniteDifferences(*module, "loss", args, wrt, grads);
  EXPECT_EQ(checked, 64 + 8 + 4 * 64 + 8 + 128 + 16 + 128);
  EXPECT_EQ(bad, 0);
}

INSTANTIATE_TEST_SUITE_P(SavedOrRecomputed, TransformerBlockTest,
                         ::testing::Bool(), [](const auto &info) {
                           return std::string(info.param ? "Recomputed"
                                                         : "Saved");
                         });

TEST_F(AutodiffTest, ParameterUsedTwiceGetsTheSumAndUnusedGetsZero) {
  // %w enters through two paths (fan-out); %u is never read.
  const std::string source = R"(
func.func @loss(%w: tensor<3x4xf64>, %x: tensor<3x4xf64>, %u: tensor<5xf64>, %c: tensor<4x4xf64>) -> tensor<f64> {
  %a = omni.tanh %w : tensor<3x4xf64>
  %b = omni.mul %a, %x : tensor<3x4xf64>
  %m = omni.matmul %b, %w transpose_lhs : tensor<3x4xf64>, tensor<3x4xf64> -> tensor<4x4xf64>
  %s = omni.mul %m, %c : tensor<4x4xf64>
  %sq = omni.mul %w, %w : tensor<3x4xf64>
  %l1 = omni.reduce sum %s dims = [0, 1] : tensor<4x4xf64> -> tensor<f64>
  %l2 = omni.reduce sum %sq dims = [0, 1] : tensor<3x4xf64> -> tensor<f64>
  %l = omni.add %l1, %l2 : tensor<f64>
  return %l : tensor<f64>
}
)";
  OwningOpRef<ModuleOp> withLoss = parse(source);
  ASSERT_TRUE(withLoss);
  auto loss = withLoss->lookupSymbol<func::FuncOp>("loss");
  std::vector<int64_t> wrt = {0, 2};
  OwningOpRef<ModuleOp> module =
      parse(source + gradFunction(loss, wrt, "grad"));
  ASSERT_TRUE(module);
  ASSERT_TRUE(differentiate(*module));
  std::mt19937_64 rng(5);
  std::vector<HostTensor> args;
  for (Type t : loss.getFunctionType().getInputs())
    args.push_back(randomTensor(cast<RankedTensorType>(t), rng, -1.0, 1.0));
  std::vector<HostTensor> grads = eval(*module, "grad", args);
  ASSERT_EQ(grads.size(), 2u);
  checkAgainstFiniteDifferences(*module, "loss", args, {0}, {grads[0]});
  for (double g : grads[1].floats())
    EXPECT_EQ(g, 0.0);
  // The gradient of w is not just one path: tanh/matmul's and 2w differ.
  bool differs = false;
  for (int64_t j = 0; j < 12; ++j)
    differs |= std::abs(grads[0].floats()[j] - 2 * args[0].floats()[j]) > 1e-3;
  EXPECT_TRUE(differs);
}

TEST_F(AutodiffTest, SameArgumentTwiceToOneOp) {
  // mul %w, %w and a call that passes %w for two parameters.
  const std::string source = R"(
func.func @twice(%a: tensor<4xf64>, %b: tensor<4xf64>) -> tensor<4xf64> {
  %d = omni.div %a, %b : tensor<4xf64>
  return %d : tensor<4xf64>
}
func.func @loss(%w: tensor<4xf64>, %c: tensor<4xf64>) -> tensor<f64> {
  %p = omni.mul %w, %w : tensor<4xf64>
  %q = func.call @twice(%p, %w) : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64>
  %s = omni.mul %q, %c : tensor<4xf64>
  %l = omni.reduce sum %s dims = [0] : tensor<4xf64> -> tensor<f64>
  return %l : tensor<f64>
}
)";
  OwningOpRef<ModuleOp> withLoss = parse(source);
  ASSERT_TRUE(withLoss);
  auto loss = withLoss->lookupSymbol<func::FuncOp>("loss");
  OwningOpRef<ModuleOp> module =
      parse(source + gradFunction(loss, {0}, "grad"));
  ASSERT_TRUE(module);
  ASSERT_TRUE(differentiate(*module));
  std::vector<HostTensor> args = {
      HostTensor::fromDoubles(DType::F64, {4}, {0.5, 1.5, -0.7, 2.0}),
      HostTensor::fromDoubles(DType::F64, {4}, {1.0, -2.0, 0.5, 0.25})};
  std::vector<HostTensor> grads = eval(*module, "grad", args);
  ASSERT_EQ(grads.size(), 1u);
  // w^2 / w = w: the gradient is c exactly (up to rounding).
  for (int j = 0; j < 4; ++j)
    EXPECT_NEAR(grads[0].floats()[j], args[1].floats()[j], 1e-14);
  checkAgainstFiniteDifferences(*module, "loss", args, {0}, grads);
}

TEST_F(AutodiffTest, FloatScalarOnThePathIsReportedNotZeroed) {
  // The loss reads w[0] through a float scalar: no adjoint can flow through
  // tensor.extract / from_elements, so the pass must refuse rather than
  // return a zero gradient.
  const std::string source = R"(
func.func @loss(%w: tensor<2xf64>) -> tensor<f64> {
  %c0 = arith.constant 0 : index
  %e = tensor.extract %w[%c0] : tensor<2xf64>
  %t = tensor.from_elements %e : tensor<f64>
  %s = omni.mul %t, %t : tensor<f64>
  return %s : tensor<f64>
}
func.func @grad(%w: tensor<2xf64>) -> tensor<2xf64> {
  %g = omni.grad @loss(%w) wrt = [0] : (tensor<2xf64>) -> tensor<2xf64>
  return %g : tensor<2xf64>
}
)";
  OwningOpRef<ModuleOp> module = parse(source);
  ASSERT_TRUE(module);
  std::string message;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &d) {
    if (message.empty())
      message = d.str();
    return success();
  });
  EXPECT_FALSE(differentiate(*module));
  EXPECT_NE(message.find("'tensor.from_elements' op is not differentiable"),
            std::string::npos)
      << message;
}

//===----------------------------------------------------------------------===//
// The toy FlowGRPO program
//===----------------------------------------------------------------------===//

TEST_F(AutodiffTest, FlowGrpoToyLossWithClipping) {
  std::ifstream file(OMNI_SOURCE_DIR "/examples/flowgrpo-toy/toy.mlir");
  ASSERT_TRUE(file) << "cannot read toy.mlir";
  std::stringstream buffer;
  buffer << file.rdbuf();
  std::string source = buffer.str() + R"(
func.func @advantages(%r: tensor<8xf32>) -> tensor<8xf32> {
  %a = omni.group_advantages %r {group_size = 4} : tensor<8xf32>
  return %a : tensor<8xf32>
}
)";
  OwningOpRef<ModuleOp> plain = parse(source);
  ASSERT_TRUE(plain);
  auto loss = plain->lookupSymbol<func::FuncOp>("loss");
  std::vector<int64_t> wrt = {0, 1, 2, 3};
  OwningOpRef<ModuleOp> module =
      parse(source + gradFunction(loss, wrt, "loss_grad"));
  ASSERT_TRUE(module);
  ASSERT_TRUE(differentiate(*module));

  // Parameters from @init, trajectories from @rollout (seed 7, iteration
  // 0), advantages of its rewards.
  HostTensor seed = HostTensor::scalarInt(DType::I64, 7);
  std::vector<HostTensor> params = eval(*module, "init", {seed});
  ASSERT_EQ(params.size(), 4u);
  std::vector<HostTensor> rollout =
      eval(*module, "rollout",
           {params[0], params[1], params[2], params[3], seed,
            HostTensor::scalarInt(DType::I64, 0)});
  ASSERT_EQ(rollout.size(), 4u);
  std::vector<HostTensor> adv = eval(*module, "advantages", {rollout[3]});
  ASSERT_EQ(adv.size(), 1u);

  // Off-policy old log-probs: most shifted by +-1e-2 (ratio far outside the
  // clip range 1e-4: the clipped, constant branch wins where the shift and
  // the advantage have the same sign), every third by +-3e-5 (inside the
  // range: the unclipped branch). Every |lp - old| stays at least 7e-5 away
  // from the clip boundary 1e-4, far more than a finite-difference step
  // moves a log-prob.
  HostTensor old = rollout[2];
  for (int64_t j = 0; j < old.numElements(); ++j) {
    double size = j % 3 == 0 ? 3e-5 : 1e-2 * (1.0 + 0.1 * ((7 * j) % 5));
    old.floats()[j] += (j % 2 ? size : -size);
  }
  std::vector<HostTensor> args = {params[0],  params[1], params[2], params[3],
                                  rollout[1], old,       adv[0]};
  std::vector<HostTensor> metrics = eval(*module, "loss", args);
  ASSERT_EQ(metrics.size(), 3u);
  // Some but not all samples are clipped.
  EXPECT_GT(metrics[2].floats()[0], 0.2);
  EXPECT_LT(metrics[2].floats()[0], 0.9);

  std::vector<HostTensor> grads = eval(*module, "loss_grad", args);
  ASSERT_EQ(grads.size(), 4u);
  // Forty random parameter entries, ten per tensor.
  std::mt19937_64 rng(2024);
  auto pick = [&](int64_t arg) {
    std::uniform_int_distribution<int64_t> dist(0, args[arg].numElements() - 1);
    std::vector<int64_t> elements;
    for (int i = 0; i < 10; ++i)
      elements.push_back(dist(rng));
    return elements;
  };
  // The loss and its gradient are small here (about 1e-4): the absolute
  // tolerance scales with them, 1e-10 instead of 1e-8, so that a wrong
  // term of relative size 1e-6 still shows.
  auto [checked, bad] = checkAgainstFiniteDifferences(
      *module, "loss", args, wrt, grads, pick, /*absTol=*/1e-10);
  EXPECT_EQ(checked, 40);
  EXPECT_EQ(bad, 0);
  // The gradient is not trivially zero.
  double norm = 0;
  for (const HostTensor &g : grads)
    for (double v : g.floats())
      norm += v * v;
  EXPECT_GT(norm, 1e-12);
}

} // namespace
