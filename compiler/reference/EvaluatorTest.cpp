//===- EvaluatorTest.cpp - unit tests of the reference evaluator ----------===//
//
// One test group per op family, each parsing a small module from a raw
// string (house style) and comparing with values computed independently in
// the test: by hand, with float arithmetic, or through runtime/flowgrpo
// directly. The float32 tests compare bit for bit where the semantics
// promise exact IEEE float32 results.
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/Evaluator.h"

#include "dialects/omni/OmniOps.h"
#include "math/flowgrpo/Schedule.h"
#include "runtime/flowgrpo/Advantages.h"
#include "runtime/flowgrpo/Optim.h"
#include "runtime/flowgrpo/Philox.h"
#include "runtime/flowgrpo/SdeStep.h"
#include "runtime/train/rewards/RewardFunctions.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace mlir;

namespace omni::reference {
namespace {

HostTensor f32(std::vector<int64_t> shape, std::vector<double> values) {
  return HostTensor::fromDoubles(DType::F32, std::move(shape),
                                 std::move(values));
}
HostTensor f64(std::vector<int64_t> shape, std::vector<double> values) {
  return HostTensor::fromDoubles(DType::F64, std::move(shape),
                                 std::move(values));
}
HostTensor i64(std::vector<int64_t> shape, std::vector<int64_t> values) {
  return HostTensor::fromInts(DType::I64, std::move(shape), std::move(values));
}
HostTensor i32(std::vector<int64_t> shape, std::vector<int64_t> values) {
  return HostTensor::fromInts(DType::I32, std::move(shape), std::move(values));
}
std::vector<double> values(const HostTensor &t) {
  std::vector<double> out;
  for (int64_t i = 0; i < t.numElements(); ++i)
    out.push_back(t.doubleAt(i));
  return out;
}

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

class EvaluatorTest : public ::testing::Test {
protected:
  EvaluatorTest() {
    DialectRegistry registry;
    mlir::omni::registerOmniDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }

  /// Parses and verifies `ir` (source name "test.mlir").
  OwningOpRef<ModuleOp> parse(const std::string &ir) {
    ParserConfig config(&context);
    OwningOpRef<ModuleOp> module =
        parseSourceString<ModuleOp>(ir, config, "test.mlir");
    EXPECT_TRUE(module) << "failed to parse:\n" << ir;
    return module;
  }

  absl::StatusOr<std::vector<HostTensor>>
  run(const std::string &ir, std::vector<HostTensor> args,
      Precision precision = Precision::F32, const std::string &name = "f",
      const HostFunctionRegistry *hostFunctions = nullptr) {
    OwningOpRef<ModuleOp> module = parse(ir);
    if (!module)
      return absl::InternalError("parse failed");
    EvalOptions options;
    options.precision = precision;
    options.hostFunctions = hostFunctions ? hostFunctions : &rewardFns;
    return evaluateFunction(*module, name, args, options);
  }

  /// What omni-eval registers: the rewards.
  HostFunctionRegistry rewardFns = rewards::rewardHostFunctions();

  std::vector<HostTensor> runOk(const std::string &ir,
                                std::vector<HostTensor> args,
                                Precision precision = Precision::F32,
                                const std::string &name = "f") {
    absl::StatusOr<std::vector<HostTensor>> results =
        run(ir, std::move(args), precision, name);
    EXPECT_TRUE(results.ok()) << results.status();
    return results.ok() ? *results : std::vector<HostTensor>{};
  }

  /// Expects evaluation to fail with a one-line message containing
  /// `fragment`.
  void expectError(const std::string &ir, std::vector<HostTensor> args,
                   const std::string &fragment, const std::string &name = "f",
                   const HostFunctionRegistry *hostFunctions = nullptr) {
    absl::StatusOr<std::vector<HostTensor>> results =
        run(ir, std::move(args), Precision::F32, name, hostFunctions);
    ASSERT_FALSE(results.ok()) << "expected an error containing: " << fragment;
    std::string message(results.status().message());
    EXPECT_NE(message.find(fragment), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }

  MLIRContext context;
};

/// A module with one function @f applying `body` (which defines %r) to
/// arguments of `argTypes` and returning %r of `resultType`.
std::string unaryModule(const std::string &argType, const std::string &body,
                        const std::string &resultType) {
  return "func.func @f(%x: " + argType + ") -> " + resultType + " {\n  " +
         body + "\n  return %r : " + resultType + "\n}\n";
}
std::string binaryModule(const std::string &argType, const std::string &body,
                         const std::string &resultType) {
  return "func.func @f(%x: " + argType + ", %y: " + argType + ") -> " +
         resultType + " {\n  " + body + "\n  return %r : " + resultType +
         "\n}\n";
}

//===----------------------------------------------------------------------===//
// Elementwise primitives
//===----------------------------------------------------------------------===//

TEST_F(EvaluatorTest, UnaryFloatOps) {
  struct Case {
    const char *op;
    double (*ref)(double);
  };
  const Case cases[] = {
      {"neg", [](double x) { return -x; }},
      {"abs", [](double x) { return std::fabs(x); }},
      {"exp", [](double x) { return std::exp(x); }},
      {"log", [](double x) { return std::log(x); }},
      {"sqrt", [](double x) { return std::sqrt(x); }},
      {"rsqrt", [](double x) { return 1 / std::sqrt(x); }},
      {"tanh", [](double x) { return std::tanh(x); }},
      {"sin", [](double x) { return std::sin(x); }},
      {"cos", [](double x) { return std::cos(x); }},
      {"erf", [](double x) { return std::erf(x); }},
      {"floor", [](double x) { return std::floor(x); }},
      {"logistic", [](double x) { return 1 / (1 + std::exp(-x)); }},
      {"silu", [](double x) { return x / (1 + std::exp(-x)); }},
  };
  std::vector<double> in = {0.25, 1.5, 3.0};
  for (const Case &c : cases) {
    std::string ir =
        unaryModule("tensor<3xf64>",
                    std::string("%r = omni.") + c.op + " %x : tensor<3xf64>",
                    "tensor<3xf64>");
    std::vector<HostTensor> r = runOk(ir, {f64({3}, in)});
    ASSERT_EQ(r.size(), 1u) << c.op;
    for (int i = 0; i < 3; ++i)
      EXPECT_DOUBLE_EQ(r[0].floats()[i], c.ref(in[i])) << c.op;
  }
  std::vector<HostTensor> s =
      runOk(unaryModule("tensor<4xf32>", "%r = omni.sign %x : tensor<4xf32>",
                        "tensor<4xf32>"),
            {f32({4}, {-2, 0, 3, kNaN})});
  EXPECT_EQ(s[0].floats()[0], -1);
  EXPECT_EQ(s[0].floats()[1], 0);
  EXPECT_EQ(s[0].floats()[2], 1);
  EXPECT_TRUE(std::isnan(s[0].floats()[3]));
}

TEST_F(EvaluatorTest, Float32ModeRoundsEveryOpLikeIeeeFloat) {
  // (x + y) * y / x - sqrt(y) in float32, op by op.
  std::string ir = binaryModule("tensor<3xf32>", R"(
  %a = omni.add %x, %y : tensor<3xf32>
  %b = omni.mul %a, %y : tensor<3xf32>
  %c = omni.div %b, %x : tensor<3xf32>
  %s = omni.sqrt %y : tensor<3xf32>
  %r = omni.sub %c, %s : tensor<3xf32>)",
                                "tensor<3xf32>");
  std::vector<float> x = {0.1f, 1.0f / 3, 1e-3f}, y = {0.2f, 7.7f, 1e7f};
  HostTensor xt = f32({3}, {x[0], x[1], x[2]});
  HostTensor yt = f32({3}, {y[0], y[1], y[2]});
  std::vector<HostTensor> r = runOk(ir, {xt, yt});
  for (int i = 0; i < 3; ++i) {
    float expected = (x[i] + y[i]) * y[i] / x[i] - std::sqrt(y[i]);
    EXPECT_EQ(r[0].floats()[i], static_cast<double>(expected)) << i;
  }
  // Float64 mode carries the same program in double, unrounded.
  std::vector<HostTensor> d = runOk(ir, {xt, yt}, Precision::F64);
  EXPECT_EQ(d[0].dtype(), DType::F32);
  for (int i = 0; i < 3; ++i) {
    double xd = x[i], yd = y[i];
    EXPECT_EQ(d[0].floats()[i], (xd + yd) * yd / xd - std::sqrt(yd)) << i;
  }
}

TEST_F(EvaluatorTest, NarrowFloatsRoundAfterEveryOp) {
  std::string ir = R"(
func.func @f(%x: tensor<2xf32>) -> (tensor<2xbf16>, tensor<2xbf16>, tensor<2xf16>) {
  %b = omni.cast %x : tensor<2xf32> -> tensor<2xbf16>
  %s = omni.add %b, %b : tensor<2xbf16>
  %h = omni.cast %x : tensor<2xf32> -> tensor<2xf16>
  return %b, %s, %h : tensor<2xbf16>, tensor<2xbf16>, tensor<2xf16>
})";
  std::vector<HostTensor> r = runOk(ir, {f32({2}, {3.14159265, 70000})});
  EXPECT_EQ(r[0].dtype(), DType::BF16);
  EXPECT_EQ(r[0].floats()[0], 3.140625);
  EXPECT_EQ(r[1].floats()[0], 6.28125);
  EXPECT_EQ(r[2].floats()[0],
            roundToDType(static_cast<float>(3.14159265), DType::F16));
  EXPECT_TRUE(std::isinf(r[2].floats()[1])); // beyond f16's 65504
}

TEST_F(EvaluatorTest, BinaryFloatOpsPropagateNaN) {
  std::vector<HostTensor> args = {f32({3}, {1, kNaN, -2}),
                                  f32({3}, {2, 5, -3})};
  std::vector<HostTensor> mx = runOk(
      binaryModule("tensor<3xf32>", "%r = omni.max %x, %y : tensor<3xf32>",
                   "tensor<3xf32>"),
      args);
  EXPECT_EQ(mx[0].floats()[0], 2);
  EXPECT_TRUE(std::isnan(mx[0].floats()[1]));
  EXPECT_EQ(mx[0].floats()[2], -2);
  std::vector<HostTensor> mn = runOk(
      binaryModule("tensor<3xf32>", "%r = omni.min %x, %y : tensor<3xf32>",
                   "tensor<3xf32>"),
      args);
  EXPECT_EQ(mn[0].floats()[2], -3);
  EXPECT_TRUE(std::isnan(mn[0].floats()[1]));
  std::vector<HostTensor> pw = runOk(
      binaryModule("tensor<3xf32>", "%r = omni.pow %x, %y : tensor<3xf32>",
                   "tensor<3xf32>"),
      {f32({3}, {2, 4, 9}), f32({3}, {3, 0.5, -1})});
  EXPECT_EQ(values(pw[0]),
            (std::vector<double>{8, 2, static_cast<float>(1.0 / 9)}));
}

TEST_F(EvaluatorTest, IntegerArithmeticWrapsAndTruncates) {
  std::string ir = R"(
func.func @f(%x: tensor<4xi32>, %y: tensor<4xi32>) -> (tensor<4xi32>, tensor<4xi32>, tensor<4xi32>, tensor<4xi32>) {
  %a = omni.add %x, %y : tensor<4xi32>
  %m = omni.mul %x, %y : tensor<4xi32>
  %d = omni.div %x, %y : tensor<4xi32>
  %n = omni.neg %x : tensor<4xi32>
  return %a, %m, %d, %n : tensor<4xi32>, tensor<4xi32>, tensor<4xi32>, tensor<4xi32>
})";
  int64_t mn = std::numeric_limits<int32_t>::min();
  int64_t mx = std::numeric_limits<int32_t>::max();
  std::vector<HostTensor> r =
      runOk(ir, {i32({4}, {mx, -7, mn, 6}), i32({4}, {1, 2, -1, -4})});
  EXPECT_EQ(r[0].ints()[0], mn); // max + 1 wraps
  EXPECT_EQ(r[1].ints()[1], -14);
  EXPECT_EQ(r[2].ints()[1], -3); // truncation toward zero
  EXPECT_EQ(r[2].ints()[2], mn); // INT_MIN / -1 wraps
  EXPECT_EQ(r[2].ints()[3], -1);
  EXPECT_EQ(r[3].ints()[2], mn);
  expectError(ir, {i32({4}, {1, 2, 3, 4}), i32({4}, {1, 0, 1, 1})},
              "test.mlir:5:8: 'omni.div' divides by zero at element 1");
}

TEST_F(EvaluatorTest, CompareSelectAndLogic) {
  std::string ir = R"(
func.func @f(%x: tensor<3xf32>, %y: tensor<3xf32>) -> (tensor<3xi1>, tensor<3xi1>, tensor<3xi1>, tensor<3xf32>, tensor<3xi1>, tensor<3xi1>) {
  %lt = omni.compare lt, %x, %y : tensor<3xf32>
  %ne = omni.compare ne, %x, %y : tensor<3xf32>
  %eq = omni.compare eq, %x, %y : tensor<3xf32>
  %s = omni.select %lt, %x, %y : tensor<3xi1>, tensor<3xf32>
  %and = omni.and %lt, %ne : tensor<3xi1>
  %or = omni.or %lt, %eq : tensor<3xi1>
  return %lt, %ne, %eq, %s, %and, %or : tensor<3xi1>, tensor<3xi1>, tensor<3xi1>, tensor<3xf32>, tensor<3xi1>, tensor<3xi1>
})";
  std::vector<HostTensor> r =
      runOk(ir, {f32({3}, {1, kNaN, 3}), f32({3}, {2, 2, 3})});
  EXPECT_EQ(r[0].ints(), absl::MakeConstSpan(std::vector<int64_t>{1, 0, 0}));
  EXPECT_EQ(r[1].ints(), absl::MakeConstSpan(std::vector<int64_t>{1, 1, 0}));
  EXPECT_EQ(r[2].ints(), absl::MakeConstSpan(std::vector<int64_t>{0, 0, 1}));
  EXPECT_EQ(values(r[3]), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(r[4].ints(), absl::MakeConstSpan(std::vector<int64_t>{1, 0, 0}));
  EXPECT_EQ(r[5].ints(), absl::MakeConstSpan(std::vector<int64_t>{1, 0, 1}));
}

TEST_F(EvaluatorTest, CastConvertsAsDocumented) {
  std::string good = R"(
func.func @f(%x: tensor<6xf32>) -> (tensor<6xi32>, tensor<6xi1>, tensor<6xf32>, tensor<6xi64>, tensor<6xi1>) {
  %i = omni.cast %x : tensor<6xf32> -> tensor<6xi32>
  %b = omni.cast %x : tensor<6xf32> -> tensor<6xi1>
  %f = omni.cast %b : tensor<6xi1> -> tensor<6xf32>
  %w = omni.cast %i : tensor<6xi32> -> tensor<6xi64>
  %fin = omni.is_finite %x : tensor<6xf32>
  return %i, %b, %f, %w, %fin : tensor<6xi32>, tensor<6xi1>, tensor<6xf32>, tensor<6xi64>, tensor<6xi1>
})";
  std::vector<HostTensor> r =
      runOk(good, {f32({6}, {-2.7, 2.7, 0, kNaN, 1e20, -kInf})});
  EXPECT_EQ(r[0].ints(), absl::MakeConstSpan(std::vector<int64_t>{
                             -2, 2, 0, 0, std::numeric_limits<int32_t>::max(),
                             std::numeric_limits<int32_t>::min()}));
  EXPECT_EQ(r[1].ints(),
            absl::MakeConstSpan(std::vector<int64_t>{1, 1, 0, 1, 1, 1}));
  EXPECT_EQ(values(r[2]), (std::vector<double>{1, 1, 0, 1, 1, 1}));
  EXPECT_EQ(r[3].dtype(), DType::I64);
  EXPECT_EQ(r[4].ints(),
            absl::MakeConstSpan(std::vector<int64_t>{1, 1, 1, 0, 1, 0}));
}

//===----------------------------------------------------------------------===//
// Shape and data movement
//===----------------------------------------------------------------------===//

TEST_F(EvaluatorTest, BroadcastReshapeTranspose) {
  std::string ir = R"(
func.func @f(%x: tensor<1x3xf32>) -> (tensor<2x4x3xf32>, tensor<3x1xf32>, tensor<3x1xf32>) {
  %b = omni.broadcast_in_dim %x, dims = [0, 2] : tensor<1x3xf32> -> tensor<2x4x3xf32>
  %r = omni.reshape %x : tensor<1x3xf32> -> tensor<3x1xf32>
  %t = omni.transpose %x, permutation = [1, 0] : tensor<1x3xf32> -> tensor<3x1xf32>
  return %b, %r, %t : tensor<2x4x3xf32>, tensor<3x1xf32>, tensor<3x1xf32>
})";
  std::vector<HostTensor> r = runOk(ir, {f32({1, 3}, {1, 2, 3})});
  for (int64_t i = 0; i < 24; ++i)
    EXPECT_EQ(r[0].floats()[i], 1 + i % 3);
  EXPECT_EQ(values(r[1]), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(r[2], r[1]);

  std::string t3 = R"(
func.func @f(%x: tensor<2x3x4xf32>) -> tensor<4x2x3xf32> {
  %t = omni.transpose %x, permutation = [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
  return %t : tensor<4x2x3xf32>
})";
  std::vector<double> in(24);
  for (int i = 0; i < 24; ++i)
    in[i] = i;
  std::vector<HostTensor> t = runOk(t3, {f32({2, 3, 4}, in)});
  // result[k][i][j] = x[i][j][k]
  for (int k = 0; k < 4; ++k)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j)
        EXPECT_EQ(t[0].floats()[(k * 2 + i) * 3 + j], (i * 3 + j) * 4 + k);
}

TEST_F(EvaluatorTest, SliceConcatPad) {
  std::string ir = R"(
func.func @f(%x: tensor<4x5xi64>) -> (tensor<2x2xi64>, tensor<6x5xi64>, tensor<5x7xi64>) {
  %s = omni.slice %x [1:4:2, 0:5:3] : tensor<4x5xi64> -> tensor<2x2xi64>
  %top = omni.slice %x [0:2:1, 0:5:1] : tensor<4x5xi64> -> tensor<2x5xi64>
  %c = omni.concat %x, %top dim = 0 : (tensor<4x5xi64>, tensor<2x5xi64>) -> tensor<6x5xi64>
  %p = omni.pad %x low = [1, 0] high = [0, 2] value = 7.0 : tensor<4x5xi64> -> tensor<5x7xi64>
  return %s, %c, %p : tensor<2x2xi64>, tensor<6x5xi64>, tensor<5x7xi64>
})";
  std::vector<int64_t> in(20);
  for (int i = 0; i < 20; ++i)
    in[i] = i;
  std::vector<HostTensor> r = runOk(ir, {i64({4, 5}, in)});
  EXPECT_EQ(values(r[0]), (std::vector<double>{5, 8, 15, 18}));
  EXPECT_EQ(r[1].ints()[20], 0);
  EXPECT_EQ(r[1].ints()[29], 9);
  EXPECT_EQ(r[1].ints()[19], 19);
  // Row 0 is padding; row 1 is x[0] followed by two 7s.
  EXPECT_EQ(r[2].ints()[0], 7);
  EXPECT_EQ(r[2].ints()[7], 0);
  EXPECT_EQ(r[2].ints()[11], 4);
  EXPECT_EQ(r[2].ints()[12], 7);
  EXPECT_EQ(r[2].ints()[34], 7);
}

TEST_F(EvaluatorTest, Reductions) {
  std::string ir = R"(
func.func @f(%x: tensor<2x3xf32>) -> (tensor<2xf32>, tensor<3xf32>, tensor<2xf32>, tensor<f32>, tensor<2x3xf32>) {
  %s = omni.reduce sum %x dims = [1] : tensor<2x3xf32> -> tensor<2xf32>
  %m = omni.reduce max %x dims = [0] : tensor<2x3xf32> -> tensor<3xf32>
  %n = omni.reduce min %x dims = [1] : tensor<2x3xf32> -> tensor<2xf32>
  %a = omni.reduce mean %x dims = [0, 1] : tensor<2x3xf32> -> tensor<f32>
  %id = omni.reduce sum %x dims = [] : tensor<2x3xf32> -> tensor<2x3xf32>
  return %s, %m, %n, %a, %id : tensor<2xf32>, tensor<3xf32>, tensor<2xf32>, tensor<f32>, tensor<2x3xf32>
})";
  HostTensor x = f32({2, 3}, {1, 5, -2, 4, kNaN, 0.5});
  std::vector<HostTensor> r = runOk(ir, {x});
  EXPECT_EQ(r[0].floats()[0], 4);
  EXPECT_TRUE(std::isnan(r[0].floats()[1]));
  EXPECT_EQ(r[1].floats()[0], 4);
  EXPECT_TRUE(std::isnan(r[1].floats()[1]));
  EXPECT_EQ(r[1].floats()[2], 0.5);
  EXPECT_EQ(r[2].floats()[0], -2);
  EXPECT_TRUE(std::isnan(r[3].floats()[0]));
  EXPECT_EQ(r[4], x);
  std::vector<HostTensor> mean = runOk(ir, {f32({2, 3}, {1, 2, 3, 4, 5, 6})});
  EXPECT_EQ(mean[3].floats()[0], 3.5);
}

TEST_F(EvaluatorTest, IotaAndConstants) {
  std::string ir = R"(
func.func @f() -> (tensor<2x3xi64>, tensor<2x3xf32>, tensor<3xf32>, tensor<2xi1>) {
  %i = omni.iota dim = 1 : tensor<2x3xi64>
  %j = omni.iota dim = 0 : tensor<2x3xf32>
  %c = omni.constant dense<[1.5, -2.0, 0.1]> : tensor<3xf32>
  %b = arith.constant dense<[true, false]> : tensor<2xi1>
  return %i, %j, %c, %b : tensor<2x3xi64>, tensor<2x3xf32>, tensor<3xf32>, tensor<2xi1>
})";
  std::vector<HostTensor> r = runOk(ir, {});
  EXPECT_EQ(values(r[0]), (std::vector<double>{0, 1, 2, 0, 1, 2}));
  EXPECT_EQ(values(r[1]), (std::vector<double>{0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(r[2].floats()[2], static_cast<double>(0.1f));
  EXPECT_EQ(r[3].ints(), absl::MakeConstSpan(std::vector<int64_t>{1, 0}));
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

TEST_F(EvaluatorTest, MatmulTransposesAndBatches) {
  std::string ir = R"(
func.func @f(%a: tensor<2x3xf32>, %b: tensor<3x2xf32>, %bt: tensor<2x3xf32>, %at: tensor<3x2xf32>,
             %ba: tensor<2x2x3xf32>, %bb: tensor<2x3x2xf32>)
    -> (tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2x2xf32>, tensor<2x2x2xf32>) {
  %p = omni.matmul %a, %b : tensor<2x3xf32>, tensor<3x2xf32> -> tensor<2x2xf32>
  %q = omni.matmul %a, %bt transpose_rhs : tensor<2x3xf32>, tensor<2x3xf32> -> tensor<2x2xf32>
  %r = omni.matmul %at, %b transpose_lhs : tensor<3x2xf32>, tensor<3x2xf32> -> tensor<2x2xf32>
  %s = omni.matmul %ba, %bb : tensor<2x2x3xf32>, tensor<2x3x2xf32> -> tensor<2x2x2xf32>
  %t = omni.matmul %ba, %b : tensor<2x2x3xf32>, tensor<3x2xf32> -> tensor<2x2x2xf32>
  return %p, %q, %r, %s, %t : tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2x2xf32>, tensor<2x2x2xf32>
})";
  HostTensor a = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  HostTensor b = f32({3, 2}, {7, 8, 9, 10, 11, 12});
  HostTensor bt = f32({2, 3}, {7, 9, 11, 8, 10, 12});
  HostTensor at = f32({3, 2}, {1, 4, 2, 5, 3, 6});
  HostTensor ba = f32({2, 2, 3}, {1, 2, 3, 4, 5, 6, 0, 1, 0, 1, 0, 0});
  HostTensor bb = f32({2, 3, 2}, {7, 8, 9, 10, 11, 12, 1, 2, 3, 4, 5, 6});
  std::vector<HostTensor> r = runOk(ir, {a, b, bt, at, ba, bb});
  std::vector<double> expected = {58, 64, 139, 154};
  EXPECT_EQ(values(r[0]), expected);
  EXPECT_EQ(values(r[1]), expected);
  EXPECT_EQ(values(r[2]), expected);
  EXPECT_EQ(values(r[3]), (std::vector<double>{58, 64, 139, 154, 3, 4, 1, 2}));
  EXPECT_EQ(values(r[4]), (std::vector<double>{58, 64, 139, 154, 9, 10, 7, 8}));
}

TEST_F(EvaluatorTest, IntegerMatmul) {
  std::string ir = R"(
func.func @f(%a: tensor<1x2xi64>, %b: tensor<2x1xi64>) -> tensor<1x1xi64> {
  %p = omni.matmul %a, %b : tensor<1x2xi64>, tensor<2x1xi64> -> tensor<1x1xi64>
  return %p : tensor<1x1xi64>
})";
  std::vector<HostTensor> r = runOk(
      ir, {i64({1, 2}, {(int64_t{1} << 53) + 1, 3}), i64({2, 1}, {1, -1})});
  EXPECT_EQ(r[0].ints()[0], (int64_t{1} << 53) - 2);
}

TEST_F(EvaluatorTest, Conv2dStridesPaddingDilation) {
  std::string ir = R"(
func.func @f(%x: tensor<1x2x5x5xf64>, %w: tensor<3x2x3x3xf64>) -> tensor<1x3x3x1xf64> {
  %y = omni.conv2d %x, %w {strides = array<i64: 2, 3>, padding = array<i64: 1, 1>, dilation = array<i64: 1, 2>} : tensor<1x2x5x5xf64>, tensor<3x2x3x3xf64> -> tensor<1x3x3x1xf64>
  return %y : tensor<1x3x3x1xf64>
})";
  std::vector<double> x(50), w(54);
  for (int i = 0; i < 50; ++i)
    x[i] = std::sin(i + 1.0);
  for (int i = 0; i < 54; ++i)
    w[i] = std::cos(i * 0.5);
  std::vector<HostTensor> r =
      runOk(ir, {f64({1, 2, 5, 5}, x), f64({3, 2, 3, 3}, w)});
  for (int o = 0; o < 3; ++o)
    for (int oy = 0; oy < 3; ++oy)
      for (int ox = 0; ox < 1; ++ox) {
        double acc = 0;
        for (int c = 0; c < 2; ++c)
          for (int ky = 0; ky < 3; ++ky)
            for (int kx = 0; kx < 3; ++kx) {
              int iy = oy * 2 - 1 + ky, ix = ox * 3 - 1 + kx * 2;
              if (iy < 0 || iy >= 5 || ix < 0 || ix >= 5)
                continue;
              acc +=
                  x[(c * 5 + iy) * 5 + ix] * w[((o * 2 + c) * 3 + ky) * 3 + kx];
            }
        EXPECT_NEAR(r[0].floats()[(o * 3 + oy) + ox], acc, 1e-12);
      }
}

TEST_F(EvaluatorTest, AttentionWithMaskAndScale) {
  std::string ir = R"(
func.func @f(%q: tensor<1x1x2x2xf64>, %k: tensor<1x1x3x2xf64>, %v: tensor<1x1x3x1xf64>, %m: tensor<1x1x2x3xf64>)
    -> (tensor<1x1x2x1xf64>, tensor<1x1x2x1xf64>) {
  %a = omni.attention %q, %k, %v : (tensor<1x1x2x2xf64>, tensor<1x1x3x2xf64>, tensor<1x1x3x1xf64>) -> tensor<1x1x2x1xf64>
  %b = omni.attention %q, %k, %v mask %m {scale = 2.0} : (tensor<1x1x2x2xf64>, tensor<1x1x3x2xf64>, tensor<1x1x3x1xf64>, tensor<1x1x2x3xf64>) -> tensor<1x1x2x1xf64>
  return %a, %b : tensor<1x1x2x1xf64>, tensor<1x1x2x1xf64>
})";
  std::vector<double> q = {1, 0, 0.5, -1}, k = {1, 2, 0, 1, -1, 0.5},
                      v = {10, 20, 30}, m = {0, -1e9, 0, 0.5, 0, -0.5};
  std::vector<HostTensor> r =
      runOk(ir, {f64({1, 1, 2, 2}, q), f64({1, 1, 3, 2}, k),
                 f64({1, 1, 3, 1}, v), f64({1, 1, 2, 3}, m)});
  auto reference = [&](int i, double scale, bool masked) {
    double s[3], total = 0, out = 0;
    for (int j = 0; j < 3; ++j) {
      s[j] = (q[i * 2] * k[j * 2] + q[i * 2 + 1] * k[j * 2 + 1]) * scale +
             (masked ? m[i * 3 + j] : 0);
      s[j] = std::exp(s[j]);
      total += s[j];
    }
    for (int j = 0; j < 3; ++j)
      out += s[j] / total * v[j];
    return out;
  };
  for (int i = 0; i < 2; ++i) {
    EXPECT_NEAR(r[0].floats()[i], reference(i, 1 / std::sqrt(2.0), false),
                1e-12);
    EXPECT_NEAR(r[1].floats()[i], reference(i, 2.0, true), 1e-12);
  }
}

// attention_grad's definition (rowsum(dO o)) against the previous VJP
// written out (rowsum(dP P), five matmuls around a softmax), in the
// float64 oracle where o = P v exactly: the two must agree to rounding.
TEST_F(EvaluatorTest, AttentionGradEqualsItsDecomposition) {
  std::string ir = R"(
func.func @f(%q: tensor<1x2x5x4xf32>, %k: tensor<1x2x6x4xf32>, %v: tensor<1x2x6x3xf32>, %do: tensor<1x2x5x3xf32>)
    -> (tensor<1x2x5x4xf32>, tensor<1x2x6x4xf32>, tensor<1x2x6x3xf32>, tensor<1x2x5x4xf32>, tensor<1x2x6x4xf32>, tensor<1x2x6x3xf32>) {
  %o = omni.attention %q, %k, %v {scale = 0.75} : (tensor<1x2x5x4xf32>, tensor<1x2x6x4xf32>, tensor<1x2x6x3xf32>) -> tensor<1x2x5x3xf32>
  %g:3 = omni.attention_grad %q, %k, %v, %o, %do {scale = 0.75} : (tensor<1x2x5x4xf32>, tensor<1x2x6x4xf32>, tensor<1x2x6x3xf32>, tensor<1x2x5x3xf32>, tensor<1x2x5x3xf32>) -> (tensor<1x2x5x4xf32>, tensor<1x2x6x4xf32>, tensor<1x2x6x3xf32>)
  %s0 = omni.matmul %q, %k transpose_rhs : tensor<1x2x5x4xf32>, tensor<1x2x6x4xf32> -> tensor<1x2x5x6xf32>
  %c = omni.constant dense<0.75> : tensor<1x2x5x6xf32>
  %s = omni.mul %s0, %c : tensor<1x2x5x6xf32>
  %p = omni.softmax %s, dim = 3 : tensor<1x2x5x6xf32>
  %dv = omni.matmul %p, %do transpose_lhs : tensor<1x2x5x6xf32>, tensor<1x2x5x3xf32> -> tensor<1x2x6x3xf32>
  %dp = omni.matmul %do, %v transpose_rhs : tensor<1x2x5x3xf32>, tensor<1x2x6x3xf32> -> tensor<1x2x5x6xf32>
  %pd = omni.mul %dp, %p : tensor<1x2x5x6xf32>
  %rs = omni.reduce sum %pd dims = [3] : tensor<1x2x5x6xf32> -> tensor<1x2x5xf32>
  %rb = omni.broadcast_in_dim %rs, dims = [0, 1, 2] : tensor<1x2x5xf32> -> tensor<1x2x5x6xf32>
  %d = omni.sub %dp, %rb : tensor<1x2x5x6xf32>
  %ds0 = omni.mul %p, %d : tensor<1x2x5x6xf32>
  %ds = omni.mul %ds0, %c : tensor<1x2x5x6xf32>
  %dq = omni.matmul %ds, %k : tensor<1x2x5x6xf32>, tensor<1x2x6x4xf32> -> tensor<1x2x5x4xf32>
  %dk = omni.matmul %ds, %q transpose_lhs : tensor<1x2x5x6xf32>, tensor<1x2x5x4xf32> -> tensor<1x2x6x4xf32>
  return %g#0, %g#1, %g#2, %dq, %dk, %dv : tensor<1x2x5x4xf32>, tensor<1x2x6x4xf32>, tensor<1x2x6x3xf32>, tensor<1x2x5x4xf32>, tensor<1x2x6x4xf32>, tensor<1x2x6x3xf32>
})";
  auto values = [](int64_t n, double phase) {
    std::vector<double> out;
    for (int64_t i = 0; i < n; ++i)
      out.push_back(std::sin(1.7 * double(i) + phase));
    return out;
  };
  std::vector<HostTensor> r = runOk(
      ir,
      {f32({1, 2, 5, 4}, values(40, 0.1)), f32({1, 2, 6, 4}, values(48, 0.2)),
       f32({1, 2, 6, 3}, values(36, 0.3)), f32({1, 2, 5, 3}, values(30, 0.4))},
      Precision::F64);
  ASSERT_EQ(r.size(), 6u);
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(r[i].floats().size(), r[i + 3].floats().size());
    double largest = 0;
    for (size_t e = 0; e < r[i].floats().size(); ++e) {
      EXPECT_NEAR(r[i].floats()[e], r[i + 3].floats()[e], 1e-12)
          << "result " << i << " [" << e << "]";
      largest = std::max(largest, std::abs(r[i + 3].floats()[e]));
    }
    EXPECT_GT(largest, 1e-3) << "result " << i << " is not a vacuous zero";
  }
}

TEST_F(EvaluatorTest, LinearAndLoraLinear) {
  std::string ir = R"(
func.func @f(%x: tensor<1x2xf64>, %w: tensor<3x2xf64>, %b: tensor<3xf64>, %a: tensor<1x2xf64>, %lb: tensor<3x1xf64>)
    -> (tensor<1x3xf64>, tensor<1x3xf64>) {
  %y = omni.linear %x, %w bias %b : (tensor<1x2xf64>, tensor<3x2xf64>, tensor<3xf64>) -> tensor<1x3xf64>
  %z = omni.lora_linear %x, %w lora(%a, %lb) {scale = 0.5} : (tensor<1x2xf64>, tensor<3x2xf64>, tensor<1x2xf64>, tensor<3x1xf64>) -> tensor<1x3xf64>
  return %y, %z : tensor<1x3xf64>, tensor<1x3xf64>
})";
  std::vector<HostTensor> r =
      runOk(ir, {f64({1, 2}, {1, 2}), f64({3, 2}, {1, 0, 0, 1, 1, 1}),
                 f64({3}, {0.5, 0, -1}), f64({1, 2}, {3, -1}),
                 f64({3, 1}, {1, 2, 4})});
  EXPECT_EQ(values(r[0]), (std::vector<double>{1.5, 2, 2}));
  // x A^T = 1; + 0.5 * [1, 2, 4]
  EXPECT_EQ(values(r[1]), (std::vector<double>{1.5, 3, 5}));
}

//===----------------------------------------------------------------------===//
// Composites
//===----------------------------------------------------------------------===//

TEST_F(EvaluatorTest, SoftmaxNormsGelu) {
  std::string ir = R"(
func.func @f(%x: tensor<2x3xf64>, %w: tensor<3xf64>, %b: tensor<3xf64>)
    -> (tensor<2x3xf64>, tensor<2x3xf64>, tensor<2x3xf64>, tensor<2x3xf64>, tensor<2x3xf64>, tensor<2x3xf64>) {
  %s = omni.softmax %x, dim = 0 : tensor<2x3xf64>
  %l = omni.layer_norm %x weight %w bias %b {eps = 1.0e-5} : (tensor<2x3xf64>, tensor<3xf64>, tensor<3xf64>) -> tensor<2x3xf64>
  %n = omni.layer_norm %x : (tensor<2x3xf64>) -> tensor<2x3xf64>
  %r = omni.rms_norm %x weight %w : (tensor<2x3xf64>, tensor<3xf64>) -> tensor<2x3xf64>
  %ge = omni.gelu erf %x : tensor<2x3xf64>
  %gt = omni.gelu tanh %x : tensor<2x3xf64>
  return %s, %l, %n, %r, %ge, %gt : tensor<2x3xf64>, tensor<2x3xf64>, tensor<2x3xf64>, tensor<2x3xf64>, tensor<2x3xf64>, tensor<2x3xf64>
})";
  std::vector<double> x = {1, 2, 3, -1, 0.5, 4}, w = {1, 2, 0.5},
                      b = {0, 1, -1};
  std::vector<HostTensor> r =
      runOk(ir, {f64({2, 3}, x), f64({3}, w), f64({3}, b)});
  for (int j = 0; j < 3; ++j) {
    double e0 = std::exp(x[j]), e1 = std::exp(x[3 + j]);
    EXPECT_NEAR(r[0].floats()[j], e0 / (e0 + e1), 1e-15);
    EXPECT_NEAR(r[0].floats()[3 + j], e1 / (e0 + e1), 1e-15);
  }
  for (int row = 0; row < 2; ++row) {
    const double *xr = &x[row * 3];
    double mean = (xr[0] + xr[1] + xr[2]) / 3, var = 0, ms = 0;
    for (int j = 0; j < 3; ++j) {
      var += (xr[j] - mean) * (xr[j] - mean) / 3;
      ms += xr[j] * xr[j] / 3;
    }
    for (int j = 0; j < 3; ++j) {
      double norm = (xr[j] - mean) / std::sqrt(var + 1e-5);
      EXPECT_NEAR(r[1].floats()[row * 3 + j], norm * w[j] + b[j], 1e-12);
      EXPECT_NEAR(r[2].floats()[row * 3 + j], norm, 1e-12);
      EXPECT_NEAR(r[3].floats()[row * 3 + j],
                  xr[j] / std::sqrt(ms + 1e-6) * w[j], 1e-12);
    }
  }
  for (int i = 0; i < 6; ++i) {
    double v = x[i];
    EXPECT_NEAR(r[4].floats()[i], 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))),
                1e-15);
    EXPECT_NEAR(
        r[5].floats()[i],
        0.5 * v *
            (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))),
        1e-15);
  }
}

//===----------------------------------------------------------------------===//
// Diffusion RL ops and random numbers
//===----------------------------------------------------------------------===//

TEST_F(EvaluatorTest, FlowScheduleMatchesTheLibrary) {
  std::string ir = R"(
func.func @f() -> (tensor<11xf32>, tensor<10xf32>, tensor<5xf32>, tensor<4xf32>) {
  %s, %t = omni.flow_schedule static_shift steps = 10 : tensor<11xf32>, tensor<10xf32>
  %ds, %dt = omni.flow_schedule dynamic_shift steps = 4 {image_seq_len = 1024} : tensor<5xf32>, tensor<4xf32>
  return %s, %t, %ds, %dt : tensor<11xf32>, tensor<10xf32>, tensor<5xf32>, tensor<4xf32>
})";
  std::vector<HostTensor> r = runOk(ir, {});
  std::vector<float> s = *flowgrpo::staticShiftSigmas(10, 3.0);
  std::vector<float> t = flowgrpo::timestepsFromSigmas(s);
  std::vector<float> ds = *flowgrpo::dynamicShiftSigmas(4, 1024);
  for (int i = 0; i < 11; ++i)
    EXPECT_EQ(r[0].floats()[i], s[i]);
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(r[1].floats()[i], t[i]);
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(r[2].floats()[i], ds[i]);
  EXPECT_NEAR(r[1].floats()[1], 960.1293335, 1e-3);
}

TEST_F(EvaluatorTest, SdeStepMatchesTheLibraryInBothPrecisions) {
  std::string ir = R"(
func.func @f(%x: tensor<2x3xf32>, %v: tensor<2x3xf32>, %e: tensor<2x3xf32>, %i: index)
    -> (tensor<2x3xf32>, tensor<2xf32>, tensor<2x3xf32>, tensor<f32>) {
  %s, %t = omni.flow_schedule static_shift steps = 10 : tensor<11xf32>, tensor<10xf32>
  %xn, %lp, %mu, %std = omni.sde_step sde %x, %v, %s[%i] noise %e {noise_level = 0.7} : tensor<2x3xf32>, tensor<11xf32>
  return %xn, %lp, %mu, %std : tensor<2x3xf32>, tensor<2xf32>, tensor<2x3xf32>, tensor<f32>
})";
  std::vector<float> x = {0.5f, -1, 2, 0, 0.3f, -0.7f},
                     v = {-0.3f, 0.8f, -1.5f, 0.25f, 1, 2},
                     e = {1, -0.5f, 0.25f, 2, 0.1f, -1};
  auto tensor = [](const std::vector<float> &values) {
    return f32({2, 3}, std::vector<double>(values.begin(), values.end()));
  };
  std::vector<float> sigmas = *flowgrpo::staticShiftSigmas(10, 3.0);
  flowgrpo::SdeStepOptions options;
  for (Precision p : {Precision::F32, Precision::F64}) {
    std::vector<HostTensor> r =
        runOk(ir, {tensor(x), tensor(v), tensor(e), i64({}, {4})}, p);
    if (p == Precision::F32) {
      auto expected =
          *flowgrpo::sdeStepWithNoise<float>(sigmas, 4, options, 2, x, v, e);
      for (int k = 0; k < 6; ++k) {
        EXPECT_EQ(r[0].floats()[k], expected.next[k]);
        EXPECT_EQ(r[2].floats()[k], expected.mean[k]);
      }
      EXPECT_EQ(r[1].floats()[1], expected.logProb[1]);
      EXPECT_EQ(r[3].floats()[0], expected.std);
    } else {
      std::vector<double> xd(x.begin(), x.end()), vd(v.begin(), v.end()),
          ed(e.begin(), e.end());
      auto expected = *flowgrpo::sdeStepWithNoise<double>(sigmas, 4, options, 2,
                                                          xd, vd, ed);
      for (int k = 0; k < 6; ++k)
        EXPECT_EQ(r[0].floats()[k], expected.next[k]);
      EXPECT_EQ(r[1].floats()[0], expected.logProb[0]);
    }
  }
  expectError(ir, {tensor(x), tensor(v), tensor(e), i64({}, {10})},
              "test.mlir:5:25: 'omni.sde_step' step must be in [0, 10)");
}

TEST_F(EvaluatorTest, AdvantagesLossAndCfg) {
  std::string ir = R"(
func.func @f(%r: tensor<4xf32>, %lp: tensor<4xf32>, %old: tensor<4xf32>, %vv: tensor<4x2xf32>)
    -> (tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<2x2xf32>) {
  %a = omni.group_advantages %r {group_size = 2, ddof = 1} : tensor<4xf32>
  %loss, %akl, %cf, %kl = omni.grpo_loss %lp, %old, %a {clip_range = 0.2} : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<f32>, tensor<f32>, tensor<f32>, tensor<f32>)
  %v = omni.cfg_combine %vv {guidance_scale = 4.5} : tensor<4x2xf32> -> tensor<2x2xf32>
  return %a, %loss, %akl, %cf, %v : tensor<4xf32>, tensor<f32>, tensor<f32>, tensor<f32>, tensor<2x2xf32>
})";
  std::vector<float> rewards = {1, 3, 0, 2};
  std::vector<HostTensor> r = runOk(
      ir, {f32({4}, {1, 3, 0, 2}), f32({4}, {0.5, 0, 0, 0}),
           f32({4}, {0, 0, 0, 0}), f32({4, 2}, {1, 2, 3, 4, 2, 2, 5, 5})});
  flowgrpo::AdvantageOptions options;
  options.groupSize = 2;
  options.ddof = 1;
  std::vector<float> a = *flowgrpo::groupAdvantages<float>(rewards, options);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(r[0].floats()[i], a[i]);
  EXPECT_EQ(r[3].floats()[0], 0.25); // one ratio of four leaves the range
  // uncond [[1, 2], [3, 4]], cond [[2, 2], [5, 5]]: u + 4.5 (c - u).
  EXPECT_EQ(values(r[4]), (std::vector<double>{5.5, 2, 12, 8.5}));
}

TEST_F(EvaluatorTest, AdamWAndClipGradNormMatchTheLibrary) {
  std::string ir = R"(
func.func @f(%p: tensor<3xf32>, %g: tensor<3xf32>, %m: tensor<3xf32>, %v: tensor<3xf32>, %t: tensor<i64>, %h: tensor<2x2xf32>)
    -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<2x2xf32>, tensor<f32>) {
  %p2, %m2, %v2 = omni.adamw %p, %g, %m, %v, %t {lr = 1.0e-3} : tensor<3xf32>
  %c:2, %n = omni.clip_grad_norm %g, %h {max_norm = 1.0} : tensor<3xf32>, tensor<2x2xf32>
  return %p2, %m2, %v2, %c#0, %c#1, %n : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<2x2xf32>, tensor<f32>
})";
  std::vector<float> p = {1, -2, 0.5f}, g = {0.1f, -0.3f, 2}, m = {0, 0.1f, 0},
                     v = {0, 0.01f, 0.5f};
  std::vector<HostTensor> r =
      runOk(ir, {f32({3}, {1, -2, 0.5}), f32({3}, {0.1f, -0.3f, 2}),
                 f32({3}, {0, 0.1f, 0}), f32({3}, {0, 0.01f, 0.5f}),
                 i64({}, {3}), f32({2, 2}, {1, 1, 1, 1})});
  flowgrpo::AdamWOptions options;
  options.lr = 1e-3;
  ASSERT_TRUE(flowgrpo::adamwStep<float>(absl::MakeSpan(p), g,
                                         absl::MakeSpan(m), absl::MakeSpan(v),
                                         3, options)
                  .ok());
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(r[0].floats()[i], p[i]);
    EXPECT_EQ(r[1].floats()[i], m[i]);
    EXPECT_EQ(r[2].floats()[i], v[i]);
  }
  double norm = std::sqrt(0.1f * 0.1f + 0.3f * 0.3f + 2.0f * 2.0f + 4.0);
  EXPECT_NEAR(r[5].floats()[0], norm, 1e-6);
  EXPECT_NEAR(r[4].floats()[0], 1 / (norm + 1e-6), 1e-6);
}

TEST_F(EvaluatorTest, RandomNumbersArePhilox) {
  std::string ir = R"(
func.func @f(%key: tensor<i64>, %ctr: tensor<i64>, %off: tensor<i64>) -> (tensor<2x3xf32>, tensor<5xf64>) {
  %n = omni.random_normal %key, %ctr, %off : tensor<2x3xf32>
  %u = omni.random_uniform %key, %ctr, %off : tensor<5xf64>
  return %n, %u : tensor<2x3xf32>, tensor<5xf64>
})";
  int64_t key = (int64_t{1} << 53) + 1;
  std::vector<HostTensor> r =
      runOk(ir, {i64({}, {key}), i64({}, {-4}), i64({}, {100})});
  float n[6], u[5];
  flowgrpo::philoxNormal(key, -4, 100, n, 6);
  flowgrpo::philoxUniform(key, -4, 100, u, 5);
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(r[0].floats()[i], n[i]);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(r[1].floats()[i], u[i]);
    EXPECT_GE(r[1].floats()[i], 0);
    EXPECT_LT(r[1].floats()[i], 1);
  }
}

//===----------------------------------------------------------------------===//
// Structure ops
//===----------------------------------------------------------------------===//

TEST_F(EvaluatorTest, FusionShardAndOneRankCollectives) {
  std::string ir = R"(
omni.mesh @one axes = ["dp", "tp"] shape = [1, 1]
omni.mesh @four axes = ["dp"] shape = [4]
func.func @f(%x: tensor<2xf32>) -> (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) {
  %y = omni.fusion (%x, %x) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32> {
  ^bb0(%a: tensor<2xf32>, %b: tensor<2xf32>):
    %s = omni.mul %a, %b : tensor<2xf32>
    omni.yield %s : tensor<2xf32>
  }
  %s = omni.shard %y : tensor<2xf32> to #omni.sharding<@one, [["dp"]]>
  %r = omni.all_reduce mean %s over @one ["dp", "tp"] : tensor<2xf32>
  %g = omni.all_gather %r over @one ["dp"] dim = 0 : tensor<2xf32> -> tensor<2xf32>
  %c = omni.reduce_scatter sum %g over @one ["tp"] dim = 0 : tensor<2xf32> -> tensor<2xf32>
  %b = omni.broadcast %c over @one ["dp"] root = 0 : tensor<2xf32>
  return %y, %r, %g, %c, %b : tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
}
func.func @g(%x: tensor<8xf32>) -> tensor<8xf32> {
  %r = omni.all_reduce sum %x over @four ["dp"] : tensor<8xf32>
  return %r : tensor<8xf32>
})";
  std::vector<HostTensor> r = runOk(ir, {f32({2}, {3, -2})});
  for (const HostTensor &t : r)
    EXPECT_EQ(values(t), (std::vector<double>{9, 4}));
  expectError(ir, {f32({8}, {0, 0, 0, 0, 0, 0, 0, 0})},
              "test.mlir:18:8: 'omni.all_reduce' runs over a group of 4 ranks",
              "g");
}

TEST_F(EvaluatorTest, HostCallsUseTheRegistry) {
  std::string ir = R"(
func.func @f(%img: tensor<2x3x1x2xf32>) -> (tensor<2xf32>, tensor<2xf64>) {
  %r = omni.host_call "brightness"(%img) : (tensor<2x3x1x2xf32>) -> tensor<2xf32>
  %d = omni.host_call "brightness"(%img) : (tensor<2x3x1x2xf32>) -> tensor<2xf64>
  return %r, %d : tensor<2xf32>, tensor<2xf64>
}
func.func @g(%x: tensor<3xi64>) -> tensor<3xi64> {
  %r = omni.host_call "twice"(%x) : (tensor<3xi64>) -> tensor<3xi64>
  return %r : tensor<3xi64>
})";
  std::vector<HostTensor> r =
      runOk(ir, {f32({2, 3, 1, 2}, {0, 0, 0, 0, 0, 0.6, 1, 1, 1, 1, 1, 1})});
  EXPECT_EQ(r[0].floats()[0], static_cast<double>(0.1f));
  EXPECT_EQ(r[0].floats()[1], 1);
  EXPECT_EQ(r[1].dtype(), DType::F64);

  HostFunctionRegistry registry;
  registry.add("twice",
               [](absl::Span<const HostTensor> args)
                   -> absl::StatusOr<std::vector<HostTensor>> {
                 HostTensor out = args[0];
                 for (int64_t &v : out.ints())
                   v *= 2;
                 return std::vector<HostTensor>{out};
               });
  EvalOptions options;
  options.hostFunctions = &registry;
  OwningOpRef<ModuleOp> module = parse(ir);
  absl::StatusOr<std::vector<HostTensor>> twice =
      evaluateFunction(*module, "g", {i64({3}, {1, -2, 3})}, options);
  ASSERT_TRUE(twice.ok()) << twice.status();
  EXPECT_EQ((*twice)[0].ints(),
            absl::MakeConstSpan(std::vector<int64_t>{2, -4, 6}));
  // The rewards' registry (the fixture's default) has only the rewards.
  expectError(ir, {i64({3}, {1, 2, 3})},
              "'omni.host_call' calls unknown host function 'twice' "
              "(registered: brightness",
              "g");
  // EvalOptions' default names no host function, not even the rewards:
  // the evaluator does not depend on runtime/train.
  absl::StatusOr<std::vector<HostTensor>> none = evaluateFunction(
      *module, "f",
      {f32({2, 3, 1, 2}, {0, 0, 0, 0, 0, 0.6, 1, 1, 1, 1, 1, 1})});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find(
                "'omni.host_call' calls unknown host function "
                "'brightness' (registered: none)"),
            std::string::npos)
      << none.status().message();
  // A reward's own error keeps the op's location.
  expectError(ir, {f32({2, 3, 1, 2}, {kNaN, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1})},
              "test.mlir:3:8: 'omni.host_call' ");
  registry.add("twice",
               [](absl::Span<const HostTensor>)
                   -> absl::StatusOr<std::vector<HostTensor>> {
                 return std::vector<HostTensor>{};
               });
  expectError(ir, {i64({3}, {1, 2, 3})},
              "host function 'twice' returned 0 results but the op has 1", "g",
              &registry);
}

TEST_F(EvaluatorTest, AutodiffMarkersNeedExpansion) {
  std::string ir = R"(
func.func @loss(%w: tensor<2xf32>) -> tensor<f32> {
  %s = omni.reduce sum %w dims = [0] : tensor<2xf32> -> tensor<f32>
  return %s : tensor<f32>
}
func.func @f(%w: tensor<2xf32>) -> (tensor<f32>, tensor<2xf32>) {
  %l, %g = omni.value_and_grad @loss(%w) wrt = [0] : (tensor<2xf32>) -> (tensor<f32>, tensor<2xf32>)
  return %l, %g : tensor<f32>, tensor<2xf32>
})";
  expectError(ir, {f32({2}, {1, 2})},
              "test.mlir:7:12: 'omni.value_and_grad' must be expanded by "
              "omni-autodiff first");
}

//===----------------------------------------------------------------------===//
// func, scf, arith, tensor
//===----------------------------------------------------------------------===//

TEST_F(EvaluatorTest, LoopsConditionalsAndCalls) {
  std::string ir = R"(
func.func @square(%x: tensor<f32>) -> tensor<f32> {
  %r = omni.mul %x, %x : tensor<f32>
  return %r : tensor<f32>
}
func.func @f(%n: index, %x: tensor<f32>) -> (tensor<f32>, index, tensor<4xi64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %init = arith.constant dense<0> : tensor<4xi64>
  %r, %count, %evens = scf.for %i = %c0 to %n step %c1
      iter_args(%acc = %x, %k = %c0, %t = %init) -> (tensor<f32>, index, tensor<4xi64>) {
    %rem = arith.remui %i, %c2 : index
    %even = arith.cmpi eq, %rem, %c0 : index
    %next = scf.if %even -> tensor<f32> {
      %sq = func.call @square(%acc) : (tensor<f32>) -> tensor<f32>
      scf.yield %sq : tensor<f32>
    } else {
      scf.yield %acc : tensor<f32>
    }
    %one = arith.select %even, %c1, %c0 : index
    %k2 = arith.addi %k, %one : index
    %iv = arith.index_cast %i : index to i64
    %t2 = tensor.insert %iv into %t[%k] : tensor<4xi64>
    scf.yield %next, %k2, %t2 : tensor<f32>, index, tensor<4xi64>
  }
  return %r, %count, %evens : tensor<f32>, index, tensor<4xi64>
})";
  std::vector<HostTensor> r = runOk(ir, {i64({}, {5}), f32({}, {1.5})});
  EXPECT_EQ(r[0].floats()[0], std::pow(1.5, 8)); // squared at i = 0, 2, 4
  EXPECT_EQ(r[1].ints()[0], 3);
  EXPECT_EQ(r[1].dtype(), DType::I64);
  // Each iteration writes i at the count of even i's before it: the odd
  // i's are overwritten by the next even one.
  EXPECT_EQ(r[2].ints(), absl::MakeConstSpan(std::vector<int64_t>{0, 2, 4, 0}));
  // Zero iterations return the initial values.
  std::vector<HostTensor> none = runOk(ir, {i64({}, {0}), f32({}, {1.5})});
  EXPECT_EQ(none[0].floats()[0], 1.5);
}

TEST_F(EvaluatorTest, ArithScalarsAndConversions) {
  std::string ir = R"(
func.func @f(%a: i32, %b: i32, %x: f32) -> (i32, i32, i32, i32, i1, f32, i32, i64, f64, i32) {
  %d = arith.divsi %a, %b : i32
  %fd = arith.floordivsi %a, %b : i32
  %r = arith.remsi %a, %b : i32
  %u = arith.divui %a, %b : i32
  %lt = arith.cmpi ult, %a, %b : i32
  %xf = arith.sitofp %a : i32 to f32
  %xi = arith.fptosi %x : f32 to i32
  %w = arith.extsi %a : i32 to i64
  %e = arith.extf %x : f32 to f64
  %sh = arith.shli %b, %b : i32
  %s = arith.addf %xf, %x : f32
  return %d, %fd, %r, %u, %lt, %s, %xi, %w, %e, %sh : i32, i32, i32, i32, i1, f32, i32, i64, f64, i32
})";
  std::vector<HostTensor> r =
      runOk(ir, {HostTensor::scalarInt(DType::I32, -7),
                 HostTensor::scalarInt(DType::I32, 2),
                 HostTensor::scalarDouble(DType::F32, -2.75)});
  EXPECT_EQ(r[0].ints()[0], -3);
  EXPECT_EQ(r[1].ints()[0], -4);
  EXPECT_EQ(r[2].ints()[0], -1);
  EXPECT_EQ(r[3].ints()[0], 2147483644); // (2^32 - 7) / 2
  EXPECT_EQ(r[4].ints()[0], 0);          // 2^32 - 7 is not < 2 unsigned
  EXPECT_EQ(r[5].floats()[0], -9.75);
  EXPECT_EQ(r[6].ints()[0], -2);
  EXPECT_EQ(r[7].ints()[0], -7);
  EXPECT_EQ(r[8].floats()[0], -2.75);
  EXPECT_EQ(r[9].ints()[0], 8);
  expectError(ir,
              {HostTensor::scalarInt(DType::I32, 1),
               HostTensor::scalarInt(DType::I32, 0),
               HostTensor::scalarDouble(DType::F32, 0)},
              "test.mlir:3:8: 'arith.divsi' divides by zero");
}

TEST_F(EvaluatorTest, TensorOps) {
  std::string ir = R"(
func.func @f(%t: tensor<2x2xf32>, %i: index) -> (f32, tensor<3xf32>, tensor<2x2xf32>, tensor<2xi64>, tensor<4xf32>) {
  %c0 = arith.constant 0 : index
  %e = tensor.extract %t[%i, %c0] : tensor<2x2xf32>
  %from = tensor.from_elements %e, %e, %e : tensor<3xf32>
  %ins = tensor.insert %e into %t[%c0, %i] : tensor<2x2xf32>
  %seven = arith.constant 7 : i64
  %s = tensor.splat %seven : tensor<2xi64>
  %flat = tensor.collapse_shape %t [[0, 1]] : tensor<2x2xf32> into tensor<4xf32>
  return %e, %from, %ins, %s, %flat : f32, tensor<3xf32>, tensor<2x2xf32>, tensor<2xi64>, tensor<4xf32>
})";
  HostTensor t = f32({2, 2}, {1, 2, 3, 4});
  std::vector<HostTensor> r = runOk(ir, {t, i64({}, {1})});
  EXPECT_EQ(r[0].floats()[0], 3);
  EXPECT_EQ(r[0].rank(), 0);
  EXPECT_EQ(values(r[1]), (std::vector<double>{3, 3, 3}));
  EXPECT_EQ(values(r[2]), (std::vector<double>{1, 3, 3, 4}));
  EXPECT_EQ(values(r[3]), (std::vector<double>{7, 7}));
  EXPECT_EQ(values(r[4]), (std::vector<double>{1, 2, 3, 4}));
  expectError(ir, {t, i64({}, {2})},
              "test.mlir:4:8: 'tensor.extract' index 2 of dimension 0 is "
              "outside [0, 2)");
}

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

TEST_F(EvaluatorTest, RejectsBadArguments) {
  std::string ir = R"(
func.func @f(%x: tensor<2x3xf32>, %n: index) -> tensor<2x3xf32> {
  return %x : tensor<2x3xf32>
}
func.func private @external(tensor<2xf32>) -> tensor<2xf32>
func.func @calls_external(%x: tensor<2xf32>) -> tensor<2xf32> {
  %r = func.call @external(%x) : (tensor<2xf32>) -> tensor<2xf32>
  return %r : tensor<2xf32>
})";
  HostTensor good = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  expectError(ir, {good}, "function @f takes 2 arguments, found 1");
  expectError(ir, {f32({3, 2}, {1, 2, 3, 4, 5, 6}), i64({}, {0})},
              "argument #0 of @f: expected tensor<2x3xf32>, found "
              "tensor<3x2xf32>");
  expectError(ir, {HostTensor(DType::F64, {2, 3}), i64({}, {0})},
              "argument #0 of @f: expected tensor<2x3xf32>, found "
              "tensor<2x3xf64>");
  expectError(ir, {good, i32({}, {0})},
              "argument #1 of @f: expected index (an i64 scalar), found "
              "tensor<i32>");
  expectError(ir, {good},
              "no function @nope in the module (functions: @f, "
              "@external, @calls_external)",
              "nope");
  expectError(ir, {f32({2}, {1, 2})}, "function @external is external",
              "external");
  expectError(ir, {f32({2}, {1, 2})},
              "test.mlir:7:8: 'func.call' calls @external, which has no body",
              "calls_external");
}

TEST_F(EvaluatorTest, RejectsUnsupportedOpsAndRecursion) {
  std::string ir = R"(
func.func @f(%x: tensor<2xf32>) -> tensor<2xi32> {
  %r = arith.bitcast %x : tensor<2xf32> to tensor<2xi32>
  return %r : tensor<2xi32>
}
func.func @forever(%x: tensor<2xf32>) -> tensor<2xf32> {
  %r = func.call @forever(%x) : (tensor<2xf32>) -> tensor<2xf32>
  return %r : tensor<2xf32>
}
func.func @narrow(%x: i32) -> i8 {
  %r = arith.trunci %x : i32 to i8
  return %r : i8
}
func.func @huge() -> tensor<65536x65536xf32> {
  %r = omni.constant dense<0.0> : tensor<65536x65536xf32>
  return %r : tensor<65536x65536xf32>
})";
  expectError(ir, {f32({2}, {1, 2})},
              "test.mlir:3:8: 'arith.bitcast' is not supported by the "
              "reference evaluator");
  expectError(ir, {f32({2}, {1, 2})}, "nests calls deeper than 128", "forever");
  expectError(ir, {HostTensor::scalarInt(DType::I32, 1)},
              "test.mlir:11:8: 'arith.trunci' result #0: element type i8 is "
              "not one of f32, f64, f16, bf16, i1, i32, i64, index",
              "narrow");
  expectError(ir, {},
              "test.mlir:15:8: 'omni.constant' result #0: type "
              "tensor<65536x65536xf32> has more than 2^31 elements",
              "huge");
}

} // namespace
} // namespace omni::reference
