//===- SpmdTest.cpp - unit tests of SPMD evaluation and compareSharded ----===//
//
// Hand-written SPMD programs on 2 and 4 simulated ranks (evaluateSpmd),
// compared with values computed independently in the test: a data-parallel
// linear layer whose weight gradient is all-reduced, an FSDP all_gather of a
// sharded weight, reduce_scatter, broadcast, axis_index on a hybrid mesh,
// the f32 accumulation order of the runtime's channel; the failures (a rank
// that fails, a collective part of the group never reaches); and
// compareSharded on an unsharded / sharded pair, passing and naming the
// first wrong op. Data are small integers where exact float32 results are
// promised, so comparisons are bit for bit.
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/Evaluator.h"

#include "dialects/omni/OmniOps.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace mlir;

namespace omni::reference {
namespace {

HostTensor f32(std::vector<int64_t> shape, std::vector<double> values) {
  return HostTensor::fromDoubles(DType::F32, std::move(shape),
                                 std::move(values));
}
std::vector<double> values(const HostTensor &t) {
  std::vector<double> out;
  for (int64_t i = 0; i < t.numElements(); ++i)
    out.push_back(t.doubleAt(i));
  return out;
}

class SpmdTest : public ::testing::Test {
protected:
  SpmdTest() {
    DialectRegistry registry;
    mlir::omni::registerOmniDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }

  OwningOpRef<ModuleOp> parse(const std::string &ir) {
    ParserConfig config(&context);
    OwningOpRef<ModuleOp> module =
        parseSourceString<ModuleOp>(ir, config, "test.mlir");
    EXPECT_TRUE(module) << "failed to parse:\n" << ir;
    return module;
  }

  std::vector<std::vector<HostTensor>>
  runOk(const std::string &ir, int64_t ranks,
        std::vector<std::vector<HostTensor>> args,
        const std::string &name = "f") {
    OwningOpRef<ModuleOp> module = parse(ir);
    if (!module)
      return {};
    absl::StatusOr<std::vector<std::vector<HostTensor>>> results =
        evaluateSpmd(*module, name, ranks, args);
    EXPECT_TRUE(results.ok()) << results.status();
    return results.ok() ? *results : std::vector<std::vector<HostTensor>>{};
  }

  /// Expects the evaluation to fail with one line containing `fragment`.
  void expectError(const std::string &ir, int64_t ranks,
                   std::vector<std::vector<HostTensor>> args,
                   const std::string &fragment) {
    OwningOpRef<ModuleOp> module = parse(ir);
    ASSERT_TRUE(module);
    absl::StatusOr<std::vector<std::vector<HostTensor>>> results =
        evaluateSpmd(*module, "f", ranks, args);
    ASSERT_FALSE(results.ok()) << "expected an error containing: " << fragment;
    std::string message(results.status().message());
    EXPECT_NE(message.find(fragment), std::string::npos) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }

  MLIRContext context;
};

/// A data-parallel linear layer y = x w with loss 0.5 |y|^2 over the global
/// batch: each rank has its rows of x, the weight gradient x^T y is partial
/// and all-reduced.
std::string linearLayer(int64_t ranks) {
  std::string n = std::to_string(ranks);
  return R"(
omni.mesh @mesh axes = ["dp"] shape = [)" +
         n + R"(]
func.func @f(%x: tensor<2x3xf32>, %w: tensor<3x2xf32>) -> (tensor<2x2xf32>, tensor<3x2xf32>) {
  %y = omni.matmul %x, %w : tensor<2x3xf32>, tensor<3x2xf32> -> tensor<2x2xf32>
  %gp = omni.matmul %x, %y transpose_lhs : tensor<2x3xf32>, tensor<2x2xf32> -> tensor<3x2xf32>
  %g = omni.all_reduce sum %gp over @mesh ["dp"] : tensor<3x2xf32>
  return %y, %g : tensor<2x2xf32>, tensor<3x2xf32>
})";
}

TEST_F(SpmdTest, DataParallelLinearLayerAllReducesTheWeightGradient) {
  for (int64_t ranks : {2, 4}) {
    SCOPED_TRACE(ranks);
    const int64_t batch = 2 * ranks;
    std::vector<double> x(batch * 3), w = {1, -2, 0, 3, 2, 1};
    for (int64_t i = 0; i < batch * 3; ++i)
      x[i] = static_cast<double>((i * 7) % 5) - 2;
    // The unsharded gradient X^T (X W) over the global batch, in double
    // (small integers: exact in f32 too).
    std::vector<double> y(batch * 2, 0), g(3 * 2, 0);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t j = 0; j < 2; ++j)
        for (int64_t k = 0; k < 3; ++k)
          y[b * 2 + j] += x[b * 3 + k] * w[k * 2 + j];
    for (int64_t k = 0; k < 3; ++k)
      for (int64_t j = 0; j < 2; ++j)
        for (int64_t b = 0; b < batch; ++b)
          g[k * 2 + j] += x[b * 3 + k] * y[b * 2 + j];
    std::vector<std::vector<HostTensor>> args;
    for (int64_t r = 0; r < ranks; ++r)
      args.push_back({f32({2, 3}, std::vector<double>(x.begin() + r * 6,
                                                      x.begin() + r * 6 + 6)),
                      f32({3, 2}, w)});
    auto results = runOk(linearLayer(ranks), ranks, args);
    ASSERT_EQ(results.size(), static_cast<size_t>(ranks));
    for (int64_t r = 0; r < ranks; ++r) {
      EXPECT_EQ(values(results[r][0]),
                std::vector<double>(y.begin() + r * 4, y.begin() + r * 4 + 4));
      EXPECT_EQ(values(results[r][1]), g) << "rank " << r;
    }
  }
}

TEST_F(SpmdTest, ShardArgumentsSplitsShardedArgumentsWithPadding) {
  // 3 rows over 2 ranks: blocks of 2, the last row of rank 1 is padding.
  std::string ir = R"(
omni.mesh @mesh axes = ["dp", "fsdp"] shape = [2, 2]
func.func @f(%w: tensor<2x2xf32> {omni.sharding = #omni.sharding<@mesh, [["fsdp"], []]>, omni.global_type = tensor<3x2xf32>}, %p: tensor<2xf32>) -> tensor<2x2xf32> {
  return %w : tensor<2x2xf32>
})";
  OwningOpRef<ModuleOp> module = parse(ir);
  ASSERT_TRUE(module);
  absl::StatusOr<std::vector<std::vector<HostTensor>>> args = shardArguments(
      *module, "f", 4, {f32({3, 2}, {1, 2, 3, 4, 5, 6}), f32({2}, {7, 8})});
  ASSERT_TRUE(args.ok()) << args.status();
  // Rank r has coordinates (r / 2, r % 2); its fsdp block is r % 2.
  for (int64_t r = 0; r < 4; ++r) {
    EXPECT_EQ(values((*args)[r][0]), r % 2 == 0
                                         ? (std::vector<double>{1, 2, 3, 4})
                                         : (std::vector<double>{5, 6, 0, 0}))
        << "rank " << r;
    EXPECT_EQ(values((*args)[r][1]), (std::vector<double>{7, 8}));
  }
  absl::StatusOr<std::vector<std::vector<HostTensor>>> bad = shardArguments(
      *module, "f", 4, {f32({2, 2}, {1, 2, 3, 4}), f32({2}, {7, 8})});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "argument #0 of @f: expected the global tensor<3x2xf32>, found "
            "tensor<2x2xf32>");
}

TEST_F(SpmdTest, FsdpAllGatherConcatenatesTheShardsInRankOrder) {
  std::string ir = R"(
omni.mesh @mesh axes = ["fsdp"] shape = [4]
func.func @f(%w: tensor<1x3xf32>) -> tensor<4x3xf32> {
  %g = omni.all_gather %w over @mesh ["fsdp"] dim = 0 : tensor<1x3xf32> -> tensor<4x3xf32>
  return %g : tensor<4x3xf32>
})";
  std::vector<std::vector<HostTensor>> args;
  std::vector<double> full;
  for (int64_t r = 0; r < 4; ++r) {
    std::vector<double> row = {double(r), double(10 * r), double(-r)};
    full.insert(full.end(), row.begin(), row.end());
    args.push_back({f32({1, 3}, row)});
  }
  auto results = runOk(ir, 4, args);
  ASSERT_EQ(results.size(), 4u);
  for (int64_t r = 0; r < 4; ++r)
    EXPECT_EQ(values(results[r][0]), full) << "rank " << r;
}

TEST_F(SpmdTest, ReduceScatterGivesEachRankItsSliceOfTheSum) {
  std::string ir = R"(
omni.mesh @mesh axes = ["dp"] shape = [2]
func.func @f(%x: tensor<2x4xf32>) -> tensor<2x2xf32> {
  %s = omni.reduce_scatter sum %x over @mesh ["dp"] dim = 1 : tensor<2x4xf32> -> tensor<2x2xf32>
  return %s : tensor<2x2xf32>
})";
  std::vector<double> a = {1, 2, 3, 4, 5, 6, 7, 8},
                      b = {10, 20, 30, 40, 50, 60, 70, 80};
  auto results = runOk(ir, 2, {{f32({2, 4}, a)}, {f32({2, 4}, b)}});
  ASSERT_EQ(results.size(), 2u);
  // Sum = [[11,22,33,44],[55,66,77,88]]; rank k keeps columns 2k, 2k+1.
  EXPECT_EQ(values(results[0][0]), (std::vector<double>{11, 22, 55, 66}));
  EXPECT_EQ(values(results[1][0]), (std::vector<double>{33, 44, 77, 88}));
}

TEST_F(SpmdTest, HybridMeshGroupsAndAxisIndex) {
  // Rank r of dp=2 x fsdp=2 has coordinates (r / 2, r % 2). The dp groups
  // are {0, 2} and {1, 3}; the fsdp groups {0, 1} and {2, 3}.
  std::string ir = R"(
omni.mesh @mesh axes = ["dp", "fsdp"] shape = [2, 2]
func.func @f(%x: tensor<2xf32>) -> (tensor<i64>, tensor<i64>, tensor<i64>, tensor<i64>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) {
  %dp = omni.axis_index over @mesh ["dp"] : tensor<i64>
  %fsdp = omni.axis_index over @mesh ["fsdp"] : tensor<i64>
  %both = omni.axis_index over @mesh ["dp", "fsdp"] : tensor<i64>
  %swapped = omni.axis_index over @mesh ["fsdp", "dp"] : tensor<i64>
  %sum = omni.all_reduce sum %x over @mesh ["dp"] : tensor<2xf32>
  %max = omni.all_reduce max %x over @mesh ["fsdp"] : tensor<2xf32>
  %min = omni.all_reduce min %x over @mesh ["dp", "fsdp"] : tensor<2xf32>
  %mean = omni.all_reduce mean %x over @mesh ["dp", "fsdp"] : tensor<2xf32>
  %b = omni.broadcast %x over @mesh ["fsdp", "dp"] root = 1 : tensor<2xf32>
  return %dp, %fsdp, %both, %swapped, %sum, %max, %min, %mean, %b : tensor<i64>, tensor<i64>, tensor<i64>, tensor<i64>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
})";
  auto input = [](int64_t r) {
    return f32({2}, {double(r + 1), double(-3 * r)});
  };
  std::vector<std::vector<HostTensor>> args;
  for (int64_t r = 0; r < 4; ++r)
    args.push_back({input(r)});
  auto results = runOk(ir, 4, args);
  ASSERT_EQ(results.size(), 4u);
  for (int64_t r = 0; r < 4; ++r) {
    SCOPED_TRACE(r);
    int64_t dp = r / 2, fsdp = r % 2;
    EXPECT_EQ(results[r][0].ints()[0], dp);
    EXPECT_EQ(results[r][1].ints()[0], fsdp);
    EXPECT_EQ(results[r][2].ints()[0], r);
    EXPECT_EQ(results[r][3].ints()[0], fsdp * 2 + dp);
    int64_t peer = (r + 2) % 4; // the other member of r's dp group
    EXPECT_EQ(values(results[r][4]),
              (std::vector<double>{double(r + 1 + peer + 1),
                                   double(-3 * r - 3 * peer)}));
    int64_t first = r - fsdp; // r's fsdp group is {first, first + 1}
    EXPECT_EQ(values(results[r][5]),
              (std::vector<double>{double(first + 2), double(-3 * first)}));
    EXPECT_EQ(values(results[r][6]), (std::vector<double>{1, -9}));
    EXPECT_EQ(values(results[r][7]), (std::vector<double>{2.5, -4.5}));
    // Group ["fsdp", "dp"] rank 1 is coordinates fsdp 0, dp 1: rank 2.
    EXPECT_EQ(values(results[r][8]), values(input(2)));
  }
}

TEST_F(SpmdTest, SumsAccumulateInFloat32InRankOrder) {
  // As the cpu channel: acc = x0; acc = f32(acc + x1); ... Over
  // [1, 2^-24, 2^-24, 0] each addition of 2^-24 to 1 rounds back to 1
  // (ties to even); a double accumulation would give 1 + 2^-23. Over
  // [2^-24, 2^-24, 1, 0] the small terms meet first: 1 + 2^-23.
  std::string ir = R"(
omni.mesh @mesh axes = ["dp"] shape = [4]
func.func @f(%x: tensor<2xf32>) -> tensor<2xf32> {
  %s = omni.all_reduce sum %x over @mesh ["dp"] : tensor<2xf32>
  return %s : tensor<2xf32>
})";
  double e = std::ldexp(1.0, -24);
  std::vector<std::vector<HostTensor>> args = {{f32({2}, {1, e})},
                                               {f32({2}, {e, e})},
                                               {f32({2}, {e, 1})},
                                               {f32({2}, {0, 0})}};
  auto results = runOk(ir, 4, args);
  ASSERT_EQ(results.size(), 4u);
  for (int64_t r = 0; r < 4; ++r)
    EXPECT_EQ(values(results[r][0]),
              (std::vector<double>{1.0, 1.0 + std::ldexp(1.0, -23)}));
}

TEST_F(SpmdTest, Bf16SumsAccumulateInFloat32AndRoundOnce) {
  // bf16 has 8 significant bits: 1 + 2^-8 is a tie that rounds to 1, so
  // rounding after every addition would give 1; the f32 accumulator holds
  // 1 + 2^-7, a bf16 value. Integer sums wrap at their width.
  std::string ir = R"(
omni.mesh @mesh axes = ["dp"] shape = [4]
func.func @f(%x: tensor<1xbf16>, %n: tensor<1xi32>) -> (tensor<1xbf16>, tensor<1xi32>) {
  %s = omni.all_reduce sum %x over @mesh ["dp"] : tensor<1xbf16>
  %t = omni.all_reduce sum %n over @mesh ["dp"] : tensor<1xi32>
  return %s, %t : tensor<1xbf16>, tensor<1xi32>
})";
  double e = std::ldexp(1.0, -8);
  std::vector<double> x = {1, e, e, 0};
  std::vector<int64_t> n = {2147483647, 1, 0, 0};
  std::vector<std::vector<HostTensor>> args;
  for (int64_t r = 0; r < 4; ++r)
    args.push_back({HostTensor::fromDoubles(DType::BF16, {1}, {x[r]}),
                    HostTensor::fromInts(DType::I32, {1}, {n[r]})});
  auto results = runOk(ir, 4, args);
  ASSERT_EQ(results.size(), 4u);
  for (int64_t r = 0; r < 4; ++r) {
    EXPECT_EQ(values(results[r][0]),
              (std::vector<double>{1.0 + std::ldexp(1.0, -7)}));
    EXPECT_EQ(results[r][1].ints()[0], -2147483648LL);
  }
}

TEST_F(SpmdTest, IntegerMeanIsAnError) {
  std::string ir = R"(
omni.mesh @mesh axes = ["dp"] shape = [2]
func.func @f(%x: tensor<2xi64>) -> tensor<2xi64> {
  %s = omni.all_reduce mean %x over @mesh ["dp"] : tensor<2xi64>
  return %s : tensor<2xi64>
})";
  std::vector<std::vector<HostTensor>> args(
      2, {HostTensor::fromInts(DType::I64, {2}, {1, 2})});
  expectError(ir, 2, args,
              "rank 0: test.mlir:4:8: 'omni.all_reduce' reduces an integer "
              "tensor with 'mean' (expected a float tensor)");
}

TEST_F(SpmdTest, ARankThatFailsFailsEveryRank) {
  // Rank 0 divides by its axis index (0); rank 1 waits in the all_reduce
  // and must not hang.
  std::string ir = R"(
omni.mesh @mesh axes = ["dp"] shape = [2]
func.func @f(%x: tensor<2xf32>) -> tensor<2xf32> {
  %k = omni.axis_index over @mesh ["dp"] : tensor<i64>
  %one = omni.constant dense<1> : tensor<i64>
  %q = omni.div %one, %k : tensor<i64>
  %s = omni.all_reduce sum %x over @mesh ["dp"] : tensor<2xf32>
  return %s : tensor<2xf32>
})";
  expectError(ir, 2, {{f32({2}, {1, 2})}, {f32({2}, {3, 4})}},
              "rank 0: test.mlir:6:8: 'omni.div' divides by zero");
}

TEST_F(SpmdTest, ACollectiveOnlyPartOfTheGroupReachesFails) {
  // Only rank 0 enters the branch with the all_reduce; rank 1 returns.
  std::string ir = R"(
omni.mesh @mesh axes = ["dp"] shape = [2]
func.func @f(%x: tensor<2xf32>) -> tensor<2xf32> {
  %k = omni.axis_index over @mesh ["dp"] : tensor<i64>
  %kv = tensor.extract %k[] : tensor<i64>
  %zero = arith.constant 0 : i64
  %first = arith.cmpi eq, %kv, %zero : i64
  %r = scf.if %first -> tensor<2xf32> {
    %s = omni.all_reduce sum %x over @mesh ["dp"] : tensor<2xf32>
    scf.yield %s : tensor<2xf32>
  } else {
    scf.yield %x : tensor<2xf32>
  }
  return %r : tensor<2xf32>
})";
  expectError(ir, 2, {{f32({2}, {1, 2})}, {f32({2}, {3, 4})}},
              "rank 1 returned without reaching 'omni.all_reduce' at "
              "test.mlir:9:10, which rank 0 of group [0, 1] waits on");
}

TEST_F(SpmdTest, RanksWaitingOnDifferentGroupsFail) {
  // Ranks 0 and 3 reach a dp collective (groups {0, 2}, {1, 3}), ranks 1
  // and 2 an fsdp one (groups {0, 1}, {2, 3}): each waits on a rank that
  // waits on another group, and nobody returns.
  std::string ir = R"(
omni.mesh @mesh axes = ["dp", "fsdp"] shape = [2, 2]
func.func @f(%x: tensor<2xf32>) -> tensor<2xf32> {
  %k = omni.axis_index over @mesh ["dp", "fsdp"] : tensor<i64>
  %kv = tensor.extract %k[] : tensor<i64>
  %zero = arith.constant 0 : i64
  %three = arith.constant 3 : i64
  %is0 = arith.cmpi eq, %kv, %zero : i64
  %is3 = arith.cmpi eq, %kv, %three : i64
  %first = arith.ori %is0, %is3 : i1
  %r = scf.if %first -> tensor<2xf32> {
    %s = omni.all_reduce sum %x over @mesh ["dp"] : tensor<2xf32>
    scf.yield %s : tensor<2xf32>
  } else {
    %s = omni.all_reduce sum %x over @mesh ["fsdp"] : tensor<2xf32>
    scf.yield %s : tensor<2xf32>
  }
  return %r : tensor<2xf32>
})";
  std::vector<std::vector<HostTensor>> args(4, {f32({2}, {1, 2})});
  expectError(ir, 4, args,
              "the ranks wait on collectives that cannot complete (a "
              "collective reached by only part of its group): rank 0 on "
              "'omni.all_reduce' at test.mlir:12:10; rank 1 on "
              "'omni.all_reduce' at test.mlir:15:10; rank 2 on "
              "'omni.all_reduce' at test.mlir:15:10; rank 3 on "
              "'omni.all_reduce' at test.mlir:12:10");
}

TEST_F(SpmdTest, TheNumberOfRanksIsBounded) {
  expectError(linearLayer(2), 0, {},
              "the number of ranks must be in [1, 256], "
              "found 0");
  expectError(linearLayer(2), 100000, {},
              "the number of ranks must be in [1, 256], found 100000");
}

TEST_F(SpmdTest, TheMeshMustHaveTheWorldsRanks) {
  expectError(
      linearLayer(4), 2,
      {{f32({2, 3}, {1, 2, 3, 4, 5, 6}), f32({3, 2}, {1, 2, 3, 4, 5, 6})},
       {f32({2, 3}, {1, 2, 3, 4, 5, 6}), f32({3, 2}, {1, 2, 3, 4, 5, 6})}},
      "test.mlir:2:1: mesh @mesh has 4 ranks but the evaluation runs 2");
  expectError(
      linearLayer(2), 2,
      {{f32({2, 3}, {1, 2, 3, 4, 5, 6}), f32({3, 2}, {1, 2, 3, 4, 5, 6})},
       {f32({4, 3}, std::vector<double>(12, 0)),
        f32({3, 2}, {1, 2, 3, 4, 5, 6})}},
      "rank 1: argument #0 of @f: expected tensor<2x3xf32>, found "
      "tensor<4x3xf32>");
}

//===----------------------------------------------------------------------===//
// compareSharded
//===----------------------------------------------------------------------===//

/// The unsharded program, as omni-shard{trace-only} stamps it: y = x w,
/// the weight gradient x^T y scaled by 0.5, the loss-like sum of y, the
/// weight squared (an FSDP-sharded parameter in the sharded program) and
/// the batch mean of y (the ranks' means, whose mean it is).
const char *kUnsharded = R"(
omni.mesh @mesh axes = ["dp"] shape = [2]
func.func @f(%x: tensor<4x3xf32>, %w: tensor<3x2xf32>) -> (tensor<3x2xf32>, tensor<f32>, tensor<3x2xf32>) {
  %y = omni.matmul %x, %w {omni.trace = 1 : i64} : tensor<4x3xf32>, tensor<3x2xf32> -> tensor<4x2xf32>
  %g = omni.matmul %x, %y transpose_lhs {omni.trace = 2 : i64} : tensor<4x3xf32>, tensor<4x2xf32> -> tensor<3x2xf32>
  %half = omni.constant {omni.trace = 3 : i64} dense<0.5> : tensor<3x2xf32>
  %gs = omni.mul %g, %half {omni.trace = 4 : i64} : tensor<3x2xf32>
  %s = omni.reduce sum %y dims = [0, 1] {omni.trace = 5 : i64} : tensor<4x2xf32> -> tensor<f32>
  %m = omni.reduce max %y dims = [0, 1] {omni.trace = 6 : i64} : tensor<4x2xf32> -> tensor<f32>
  %w2 = omni.mul %w, %w {omni.trace = 7 : i64} : tensor<3x2xf32>
  %a = omni.reduce mean %y dims = [0] {omni.trace = 8 : i64} : tensor<4x2xf32> -> tensor<2xf32>
  return %gs, %s, %w2 : tensor<3x2xf32>, tensor<f32>, tensor<3x2xf32>
})";

/// The same on dp=2: x split on the batch, w FSDP-sharded on dimension 0
/// (3 rows: blocks of 2, one padding row) and gathered before use. `reduce`
/// is the kind of the gradient's all_reduce (sum is right).
std::string shardedProgram(const std::string &reduce) {
  return R"(
omni.mesh @mesh axes = ["dp"] shape = [2]
func.func @f(%x: tensor<2x3xf32> {omni.sharding = #omni.sharding<@mesh, [["dp"], []]>, omni.global_type = tensor<4x3xf32>},
             %wl: tensor<2x2xf32> {omni.sharding = #omni.sharding<@mesh, [["dp"], []]>, omni.global_type = tensor<3x2xf32>}) -> (tensor<3x2xf32>, tensor<f32>, tensor<2x2xf32>) {
  %wg = omni.all_gather %wl over @mesh ["dp"] dim = 0 : tensor<2x2xf32> -> tensor<4x2xf32>
  %w = tensor.extract_slice %wg[0, 0] [3, 2] [1, 1] : tensor<4x2xf32> to tensor<3x2xf32>
  %y = omni.matmul %x, %w {omni.trace = 1 : i64, omni.result_shardings = [#omni.sharding<@mesh, [["dp"], []]>]} : tensor<2x3xf32>, tensor<3x2xf32> -> tensor<2x2xf32>
  %gp = omni.matmul %x, %y transpose_lhs {omni.trace = 2 : i64, omni.result_shardings = ["partial:sum:dp"]} : tensor<2x3xf32>, tensor<2x2xf32> -> tensor<3x2xf32>
  %g = omni.all_reduce )" +
         reduce + R"( %gp over @mesh ["dp"] : tensor<3x2xf32>
  %half = omni.constant {omni.trace = 3 : i64, omni.result_shardings = [#omni.sharding<@mesh, [[], []]>]} dense<0.5> : tensor<3x2xf32>
  %gs = omni.mul %g, %half {omni.trace = 4 : i64, omni.result_shardings = [#omni.sharding<@mesh, [[], []]>]} : tensor<3x2xf32>
  %sp = omni.reduce sum %y dims = [0, 1] {omni.trace = 5 : i64, omni.result_shardings = ["partial:sum:dp"]} : tensor<2x2xf32> -> tensor<f32>
  %s = omni.all_reduce sum %sp over @mesh ["dp"] : tensor<f32>
  %mp = omni.reduce max %y dims = [0, 1] {omni.trace = 6 : i64, omni.result_shardings = ["partial:max:dp"]} : tensor<2x2xf32> -> tensor<f32>
  %w2 = omni.mul %wl, %wl {omni.trace = 7 : i64, omni.result_shardings = [#omni.sharding<@mesh, [["dp"], []]>]} : tensor<2x2xf32>
  %ap = omni.reduce mean %y dims = [0] {omni.trace = 8 : i64, omni.result_shardings = ["partial:mean:dp"]} : tensor<2x2xf32> -> tensor<2xf32>
  return %gs, %s, %w2 : tensor<3x2xf32>, tensor<f32>, tensor<2x2xf32>
})";
}

std::vector<HostTensor> compareInputs() {
  return {f32({4, 3}, {1, 0, -1, 2, 1, 0, 0, -2, 1, 1, 1, 1}),
          f32({3, 2}, {1, 2, -1, 0, 3, -2})};
}

TEST_F(SpmdTest, CompareShardedAcceptsACorrectShardedProgram) {
  OwningOpRef<ModuleOp> unsharded = parse(kUnsharded);
  OwningOpRef<ModuleOp> sharded = parse(shardedProgram("sum"));
  ASSERT_TRUE(unsharded && sharded);
  absl::StatusOr<ShardedComparison> c =
      compareSharded(*unsharded, *sharded, "f", 2, compareInputs(), 1e-6);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->mismatch) << c->summary();
  EXPECT_EQ(c->valuesCompared, 8);
  EXPECT_EQ(c->summary(), "8 traced values agree");
}

TEST_F(SpmdTest, CompareShardedNamesTheFirstWrongOp) {
  // A mean where the gradient needs a sum: the partial gradient (trace 2)
  // is right, the scaled all-reduced one (trace 4) is half of it.
  OwningOpRef<ModuleOp> unsharded = parse(kUnsharded);
  OwningOpRef<ModuleOp> sharded = parse(shardedProgram("mean"));
  ASSERT_TRUE(unsharded && sharded);
  absl::StatusOr<ShardedComparison> c =
      compareSharded(*unsharded, *sharded, "f", 2, compareInputs(), 1e-6);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(c->mismatch);
  EXPECT_EQ(c->mismatch->traceId, 4);
  EXPECT_EQ(c->mismatch->opName, "omni.mul");
  EXPECT_EQ(c->mismatch->location, "test.mlir:11:9");
  EXPECT_EQ(c->mismatch->rank, 0);
  EXPECT_EQ(c->valuesCompared, 4);
  EXPECT_GT(c->mismatch->maxError, 0.1);
  EXPECT_NE(c->summary().find("trace 4 'omni.mul' at test.mlir:11:9 result "
                              "#0: rank 0's value differs"),
            std::string::npos)
      << c->summary();
}

TEST_F(SpmdTest, CompareShardedChecksEachBlockOfASplitValue) {
  // Rank 1's block of y is wrong: it computes with rank 0's rows of x (a
  // broadcast), so trace 1 fails on rank 1 only.
  std::string wrong = shardedProgram("sum");
  std::string from = "%y = omni.matmul %x, %w";
  std::string to = "%xb = omni.broadcast %x over @mesh [\"dp\"] root = 0 : "
                   "tensor<2x3xf32>\n  %y = omni.matmul %xb, %w";
  wrong.replace(wrong.find(from), from.size(), to);
  OwningOpRef<ModuleOp> unsharded = parse(kUnsharded);
  OwningOpRef<ModuleOp> sharded = parse(wrong);
  ASSERT_TRUE(unsharded && sharded);
  absl::StatusOr<ShardedComparison> c =
      compareSharded(*unsharded, *sharded, "f", 2, compareInputs(), 1e-6);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(c->mismatch);
  EXPECT_EQ(c->mismatch->traceId, 1);
  EXPECT_EQ(c->mismatch->opName, "omni.matmul");
  EXPECT_EQ(c->mismatch->rank, 1);
  EXPECT_NE(c->mismatch->detail.find("rank 1's block 1 (rows 2..4 of "
                                     "dimension 0)"),
            std::string::npos)
      << c->mismatch->detail;
}

TEST_F(SpmdTest, CompareShardedRejectsMalformedTraces) {
  std::string wrong = shardedProgram("sum");
  std::string from = "omni.trace = 7 : i64";
  wrong.replace(wrong.find(from), from.size(), "omni.trace = 70 : i64");
  OwningOpRef<ModuleOp> unsharded = parse(kUnsharded);
  OwningOpRef<ModuleOp> sharded = parse(wrong);
  ASSERT_TRUE(unsharded && sharded);
  absl::StatusOr<ShardedComparison> c =
      compareSharded(*unsharded, *sharded, "f", 2, compareInputs(), 1e-6);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "test.mlir:15:9: 'omni.mul' has trace id 70, which no op of the "
            "unsharded program has");

  std::string bad = shardedProgram("sum");
  from = "\"partial:max:dp\"";
  bad.replace(bad.find(from), from.size(), "\"partial:prod:dp\"");
  sharded = parse(bad);
  ASSERT_TRUE(sharded);
  c = compareSharded(*unsharded, *sharded, "f", 2, compareInputs(), 1e-6);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(),
            "test.mlir:14:9: 'omni.reduce' has partial kind 'prod' in "
            "omni.result_shardings (expected sum, mean, max or min)");
}

} // namespace
} // namespace omni::reference
