//===- RotaryTest.cpp - the rotary embedding building blocks of Layers.h --===//
//
// layers::rotaryTable, rotaryConstants and applyRotary (docs/writing-a-model.md
// section 7), checked against independent computations:
// - the table holds cos/sin of pos * theta^(-2k/dim) per axis, in axis
//   order, from the float32 inverse frequencies torch uses;
// - applyRotary is the complex product (x[2k] + i x[2k+1]) (cos + i sin)
//   per head and token, computed here on the host in double precision;
// - its gradients, through omni-autodiff, match central finite differences
//   (float64, reference evaluator) of a loss that rotates q and k and runs
//   attention on them, as Qwen-Image's joint attention does.
//
//===----------------------------------------------------------------------===//

#include "dialects/omni/OmniOps.h"
#include "frontends/builder/testing/TestUtil.h"
#include "frontends/models/Layers.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace omni;
using namespace omni::fe;
using namespace omni::fe::layers;
using namespace omni::fe::testing;

namespace {

TEST(RotaryTest, TableIsRopeParamsPerAxis) {
  // Axes of 4, 2 and 6 dimensions: 2 + 1 + 3 pairs per token.
  std::vector<int64_t> axes = {4, 2, 6};
  std::vector<std::vector<int64_t>> pos = {{0, 0, 0}, {3, -2, 7}, {1, 5, -4}};
  RotaryTable t = rotaryTable(pos, axes, 10000.0);
  ASSERT_EQ(t.tokens, 3);
  ASSERT_EQ(t.half, 6);
  ASSERT_EQ(t.cos.size(), 18u);
  ASSERT_EQ(t.sin.size(), 18u);
  for (int64_t r = 0; r < 3; ++r) {
    int64_t j = 0;
    for (size_t a = 0; a < axes.size(); ++a)
      for (int64_t k = 0; k < axes[a] / 2; ++k, ++j) {
        double angle = static_cast<double>(pos[r][a]) *
                       std::pow(10000.0, -2.0 * k / axes[a]);
        // float32 inverse frequencies and angles: |angle| <= 7 here, so
        // the rounding is below 1e-6.
        EXPECT_NEAR(t.cos[r * 6 + j], std::cos(angle), 1e-6) << r << " " << j;
        EXPECT_NEAR(t.sin[r * 6 + j], std::sin(angle), 1e-6) << r << " " << j;
      }
  }
  // Position 0 is the identity; axis 0's first pair turns by the position.
  for (int64_t j = 0; j < 6; ++j) {
    EXPECT_EQ(t.cos[j], 1.0f);
    EXPECT_EQ(t.sin[j], 0.0f);
  }
  EXPECT_FLOAT_EQ(t.cos[6], static_cast<float>(std::cos(3.0)));
  EXPECT_FLOAT_EQ(t.sin[12 + 2], static_cast<float>(std::sin(5.0)));
}

/// `rotary(x) -> x'` for x [B, H, S, D] and a table of S tokens.
struct RotaryFn {
  mlir::MLIRContext context;
  Graph g{context};
  RotaryTable table;

  RotaryFn(const Shape &xs, const std::vector<std::vector<int64_t>> &pos,
           const std::vector<int64_t> &axes) {
    table = rotaryTable(pos, axes, 10000.0);
    Function fn(g, "rotary", /*isPublic=*/true);
    Tensor x = fn.argument(xs, "x");
    auto [c, s] = rotaryConstants(g, table);
    fn.returns({applyRotary(x, c, s)});
  }
};

TEST(RotaryTest, ApplyRotaryIsTheComplexProductOfInterleavedPairs) {
  const int64_t b = 2, h = 3, s = 4, d = 8;
  std::vector<std::vector<int64_t>> pos = {
      {0, -2, -2}, {0, -2, 1}, {0, 1, -2}, {4, 4, 4}};
  RotaryFn f({b, h, s, d}, pos, {2, 2, 4});
  HostTensor x = randomF32({b, h, s, d}, 11);
  auto out = evaluate(f.g, "rotary", {x}, reference::Precision::F64);
  ASSERT_TRUE(out.ok()) << out.status();
  const HostTensor &y = out->front();
  ASSERT_EQ(y.shape(), (Shape{b, h, s, d}));
  double worst = 0.0;
  for (int64_t i = 0; i < b * h; ++i)
    for (int64_t t = 0; t < s; ++t)
      for (int64_t k = 0; k < d / 2; ++k) {
        int64_t at = (i * s + t) * d + 2 * k;
        double re = x.doubleAt(at), im = x.doubleAt(at + 1);
        double c = f.table.cos[t * (d / 2) + k];
        double sn = f.table.sin[t * (d / 2) + k];
        worst = std::max(worst, std::abs(y.doubleAt(at) - (re * c - im * sn)));
        worst =
            std::max(worst, std::abs(y.doubleAt(at + 1) - (re * sn + im * c)));
      }
  EXPECT_LT(worst, 1e-12);
  // A rotation keeps each pair's norm; the first token of a zero position
  // vector would be unchanged, the others are not (the check is not
  // vacuous).
  double moved = 0.0;
  for (int64_t i = 0; i < y.numElements(); ++i)
    moved = std::max(moved, std::abs(y.doubleAt(i) - x.doubleAt(i)));
  EXPECT_GT(moved, 0.1);
}

TEST(RotaryTest, GradientsThroughAttentionMatchFiniteDifferences) {
  // loss(q, k, v, c) = sum(attention(rot(q), rot(k), v) * c); omni.grad
  // wrt q and k (the rotated operands) and v.
  const int64_t b = 1, h = 2, s = 3, d = 4;
  const Shape xs = {b, h, s, d};
  mlir::MLIRContext context;
  Graph g(context);
  std::vector<std::vector<int64_t>> pos = {{0, -1}, {0, 0}, {3, 3}};
  RotaryTable table = rotaryTable(pos, {2, 2}, 10000.0);
  {
    Function loss(g, "loss");
    Tensor q = loss.argument(xs, "q"), k = loss.argument(xs, "k");
    Tensor v = loss.argument(xs, "v"), c = loss.argument(xs, "c");
    auto [cs, sn] = rotaryConstants(g, table);
    Tensor a = attention(applyRotary(q, cs, sn), applyRotary(k, cs, sn), v);
    loss.returns({(a * c).sum({0, 1, 2, 3})});
  }
  {
    Function grad(g, "grad", /*isPublic=*/true);
    std::vector<mlir::Value> args;
    for (const char *n : {"q", "k", "v", "c"})
      args.push_back(grad.argument(xs, n).value());
    mlir::Type t = g.tensorType(xs, g.f32());
    auto op = mlir::omni::GradOp::create(
        g.builder(), g.loc(), mlir::TypeRange{t, t, t},
        mlir::SymbolRefAttr::get(&context, "loss"), args,
        g.builder().getDenseI64ArrayAttr({0, 1, 2}));
    grad.returns({Tensor(&g, op.getResult(0)), Tensor(&g, op.getResult(1)),
                  Tensor(&g, op.getResult(2))});
  }
  mlir::PassManager pm(&context);
  pm.addPass(mlir::omni::createOmniAutodiffPass());
  ASSERT_TRUE(mlir::succeeded(pm.run(g.module())));

  std::vector<HostTensor> in;
  for (uint64_t seed = 1; seed <= 4; ++seed)
    in.push_back(randomF32(xs, seed));
  auto grads = evaluate(g, "grad", in, reference::Precision::F64);
  ASSERT_TRUE(grads.ok()) << grads.status();
  auto lossAt = [&](const std::vector<HostTensor> &args) {
    auto r = evaluate(g, "loss", args, reference::Precision::F64);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->front().doubleAt(0) : NAN;
  };
  // Central differences, step 1e-6: truncation ~1e-12, rounding ~1e-10.
  int checked = 0;
  for (int w = 0; w < 3; ++w)
    for (int64_t j = 0; j < in[w].numElements(); ++j) {
      std::vector<HostTensor> up = in, down = in;
      const double step = 1e-6;
      up[w].floats()[j] += step;
      down[w].floats()[j] -= step;
      double fd = (lossAt(up) - lossAt(down)) / (2 * step);
      double got = (*grads)[w].doubleAt(j);
      EXPECT_NEAR(got, fd, 1e-6 * std::abs(fd) + 1e-8)
          << "argument " << w << " element " << j;
      ++checked;
    }
  EXPECT_EQ(checked, 3 * 24);
}

} // namespace
