//===- BuilderTest.cpp - the graph builder, checked numerically -----------===//
//
// Each builder piece (operators with NumPy broadcasting, shape ops, group
// norm, upsampling, the shared layers of frontends/models) is built into a
// function, run through the reference evaluator (float64 unless said) and
// compared with the same computation written directly in C++ here, from
// the PyTorch/diffusers definitions rather than from the builder's code.
// Then the bookkeeping: module naming, parameter dedup, LoRA, configs and
// the registry's error messages.
//
//===----------------------------------------------------------------------===//

#include "frontends/builder/Model.h"
#include "frontends/builder/testing/TestUtil.h"
#include "frontends/models/Layers.h"
#include "runtime/io/ElementCodec.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>

using namespace omni;
using namespace omni::fe;
using namespace omni::fe::testing;

namespace {

using Index = std::vector<int64_t>;

/// Calls `f(index, flat)` for every index of `shape` in row-major order.
void forEachIndex(const Shape &shape,
                  const std::function<void(const Index &, int64_t)> &f) {
  Index idx(shape.size(), 0);
  int64_t n = numElementsOf(shape);
  for (int64_t flat = 0; flat < n; ++flat) {
    f(idx, flat);
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
      if (++idx[d] < shape[d])
        break;
      idx[d] = 0;
    }
  }
}

double at(const HostTensor &t, const Index &idx) {
  int64_t flat = 0;
  for (size_t d = 0; d < idx.size(); ++d)
    flat = flat * t.shape()[d] + idx[d];
  return t.doubleAt(flat);
}

/// Every element of `got` (of shape `shape`) equals `want(index)`.
void expectValues(const HostTensor &got, const Shape &shape,
                  const std::function<double(const Index &)> &want,
                  double tol = 1e-12, const std::string &what = "") {
  ASSERT_EQ(got.shape(), shape) << what;
  int bad = 0;
  forEachIndex(shape, [&](const Index &idx, int64_t flat) {
    double w = want(idx), g = got.doubleAt(flat);
    if (std::abs(g - w) > tol * std::max(1.0, std::abs(w)) && bad++ < 5)
      ADD_FAILURE() << what << " element " << flat << ": got " << g << ", want "
                    << w;
  });
}

/// One public function @f under construction.
struct Fn {
  mlir::MLIRContext context;
  Graph g{context};
  Function fn{g, "f", /*isPublic=*/true};
  ParamSet params;

  /// `inputs`, then the parameter arguments taken from `byName` in the
  /// function's order (which, for parameters created within one call's
  /// arguments, depends on the compiler's evaluation order).
  std::vector<HostTensor>
  withParams(std::vector<HostTensor> inputs,
             const std::map<std::string, HostTensor> &byName) {
    for (const auto &[name, t] : fn.parameters()) {
      EXPECT_EQ(byName.count(name), 1u) << name;
      inputs.push_back(byName.count(name) ? byName.at(name) : HostTensor());
    }
    return inputs;
  }

  /// Returns `outs` and evaluates @f on `args`.
  std::vector<HostTensor>
  run(const std::vector<Tensor> &outs, const std::vector<HostTensor> &args,
      reference::Precision p = reference::Precision::F64) {
    fn.returns(outs);
    absl::StatusOr<std::vector<HostTensor>> r = evaluate(g, "f", args, p);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : std::vector<HostTensor>(outs.size());
  }
};

TEST(BuilderTest, BinaryOperatorsBroadcastLikeNumPy) {
  Fn f;
  Tensor a = f.fn.argument({2, 3, 4}), b = f.fn.argument({3, 1}),
         s = f.fn.argument({4});
  HostTensor ha = randomF32({2, 3, 4}, 1), hb = randomF32({3, 1}, 2, 0.5, 2),
             hs = randomF32({4}, 3);
  std::vector<Tensor> outs{a + b,
                           a - s,
                           a * b,
                           a / b,
                           b + s,
                           2.0 - a,
                           a * 0.5 + 1.0,
                           -a,
                           maximum(a, s),
                           minimum(b, s),
                           clamp(a, -0.5, 0.25),
                           3.0 * s / 2.0};
  std::vector<HostTensor> r = f.run(outs, {ha, hb, hs});
  auto A = [&](const Index &i) { return at(ha, i); };
  auto B = [&](const Index &i) { return at(hb, {i[i.size() - 2], 0}); };
  auto S = [&](const Index &i) { return at(hs, {i.back()}); };
  Shape abc{2, 3, 4};
  expectValues(r[0], abc, [&](const Index &i) { return A(i) + B(i); });
  expectValues(r[1], abc, [&](const Index &i) { return A(i) - S(i); });
  expectValues(r[2], abc, [&](const Index &i) { return A(i) * B(i); });
  expectValues(r[3], abc, [&](const Index &i) { return A(i) / B(i); });
  expectValues(r[4], {3, 4}, [&](const Index &i) { return B(i) + S(i); });
  expectValues(r[5], abc, [&](const Index &i) { return 2.0 - A(i); });
  expectValues(r[6], abc, [&](const Index &i) { return A(i) * 0.5 + 1.0; });
  expectValues(r[7], abc, [&](const Index &i) { return -A(i); });
  expectValues(r[8], abc, [&](const Index &i) { return std::max(A(i), S(i)); });
  expectValues(r[9], {3, 4},
               [&](const Index &i) { return std::min(B(i), S(i)); });
  expectValues(r[10], abc, [&](const Index &i) {
    return std::min(std::max(A(i), -0.5), 0.25);
  });
  expectValues(r[11], {4}, [&](const Index &i) { return 3.0 * S(i) / 2.0; });
}

TEST(BuilderTest, ReductionsAndShapeOps) {
  Fn f;
  Tensor x = f.fn.argument({2, 6, 4});
  HostTensor hx = randomF32({2, 6, 4}, 4);
  std::vector<Tensor> chunks = x.chunk(3, 1);
  ASSERT_EQ(chunks.size(), 3u);
  std::vector<Tensor> outs{x.sum({-1}),
                           x.mean({0, 2}, /*keepDims=*/true),
                           chunks[2],
                           x.slice(-1, 1, 3),
                           x.transpose({2, 0, 1}),
                           x.reshape({12, 4}),
                           x.sum({1}).broadcastInDim({2, 5, 4}, {0, 2}),
                           x.slice(1, 0, 1).broadcastTo({3, 2, 6, 4})};
  std::vector<HostTensor> r = f.run(outs, {hx});
  auto X = [&](int64_t i, int64_t j, int64_t k) { return at(hx, {i, j, k}); };
  expectValues(r[0], {2, 6}, [&](const Index &i) {
    double s = 0;
    for (int64_t k = 0; k < 4; ++k)
      s += X(i[0], i[1], k);
    return s;
  });
  expectValues(r[1], {1, 6, 1}, [&](const Index &i) {
    double s = 0;
    for (int64_t a = 0; a < 2; ++a)
      for (int64_t k = 0; k < 4; ++k)
        s += X(a, i[1], k);
    return s / 8;
  });
  expectValues(r[2], {2, 2, 4},
               [&](const Index &i) { return X(i[0], i[1] + 4, i[2]); });
  expectValues(r[3], {2, 6, 2},
               [&](const Index &i) { return X(i[0], i[1], i[2] + 1); });
  expectValues(r[4], {4, 2, 6},
               [&](const Index &i) { return X(i[1], i[2], i[0]); });
  expectValues(r[5], {12, 4},
               [&](const Index &i) { return X(i[0] / 6, i[0] % 6, i[1]); });
  expectValues(r[6], {2, 5, 4}, [&](const Index &i) {
    double s = 0;
    for (int64_t j = 0; j < 6; ++j)
      s += X(i[0], j, i[2]);
    return s;
  });
  expectValues(r[7], {3, 2, 6, 4},
               [&](const Index &i) { return X(i[1], 0, i[3]); });
}

TEST(BuilderTest, GroupNormIsTorchGroupNorm) {
  Fn f;
  const int64_t n = 2, c = 6, h = 3, w = 4, groups = 3;
  Tensor x = f.fn.argument({n, c, h, w});
  Module m(f.fn, f.params);
  Tensor y = m.groupNorm("gn", x, groups, 1e-5);
  EXPECT_EQ(f.params.find("gn.weight")->shape, (Shape{c}));
  EXPECT_EQ(f.params.find("gn.bias")->init.kind, Init::Kind::Zeros);
  HostTensor hx = randomF32({n, c, h, w}, 5, -2, 3), hw = randomF32({c}, 6),
             hb = randomF32({c}, 7);
  std::vector<HostTensor> r =
      f.run({y}, f.withParams({hx}, {{"gn.weight", hw}, {"gn.bias", hb}}));
  const int64_t per = c / groups;
  expectValues(r[0], {n, c, h, w}, [&](const Index &i) {
    int64_t g0 = i[1] / per * per;
    double mean = 0, var = 0;
    for (int64_t ch = g0; ch < g0 + per; ++ch)
      for (int64_t a = 0; a < h; ++a)
        for (int64_t b = 0; b < w; ++b)
          mean += at(hx, {i[0], ch, a, b});
    mean /= per * h * w;
    for (int64_t ch = g0; ch < g0 + per; ++ch)
      for (int64_t a = 0; a < h; ++a)
        for (int64_t b = 0; b < w; ++b)
          var += std::pow(at(hx, {i[0], ch, a, b}) - mean, 2);
    var /= per * h * w; // biased, as torch
    return (at(hx, i) - mean) / std::sqrt(var + 1e-5) * at(hw, {i[1]}) +
           at(hb, {i[1]});
  });
}

TEST(BuilderTest, UpsampleNearestAndConv) {
  Fn f;
  Tensor x = f.fn.argument({2, 3, 3, 4});
  Module m(f.fn, f.params);
  Tensor conv = m.conv2d("conv", x, 5, 3, /*stride=*/2, /*padding=*/1);
  const ParamSpec *cw = f.params.find("conv.weight");
  ASSERT_NE(cw, nullptr);
  EXPECT_EQ(cw->shape, (Shape{5, 3, 3, 3}));
  EXPECT_DOUBLE_EQ(cw->init.scale, 1.0 / std::sqrt(27.0));
  HostTensor hx = randomF32({2, 3, 3, 4}, 8), hw = randomF32({5, 3, 3, 3}, 9),
             hb = randomF32({5}, 10);
  std::vector<HostTensor> r =
      f.run({upsampleNearest(x, 2), upsampleNearest(x, 3), conv}, {hx, hw, hb});
  expectValues(r[0], {2, 3, 6, 8}, [&](const Index &i) {
    return at(hx, {i[0], i[1], i[2] / 2, i[3] / 2});
  });
  expectValues(r[1], {2, 3, 9, 12}, [&](const Index &i) {
    return at(hx, {i[0], i[1], i[2] / 3, i[3] / 3});
  });
  expectValues(r[2], {2, 5, 2, 2}, [&](const Index &i) {
    double s = at(hb, {i[1]});
    for (int64_t ci = 0; ci < 3; ++ci)
      for (int64_t ky = 0; ky < 3; ++ky)
        for (int64_t kx = 0; kx < 3; ++kx) {
          int64_t y = i[2] * 2 - 1 + ky, xx = i[3] * 2 - 1 + kx;
          if (y >= 0 && y < 3 && xx >= 0 && xx < 4)
            s += at(hx, {i[0], ci, y, xx}) * at(hw, {i[1], ci, ky, kx});
        }
    return s;
  });
}

TEST(BuilderTest, AttentionAndHeads) {
  Fn f;
  const int64_t b = 2, s = 3, heads = 2, d = 4;
  Tensor q = f.fn.argument({b, s, heads * d}),
         k = f.fn.argument({b, s, heads * d}),
         v = f.fn.argument({b, s, heads * d});
  Tensor split = layers::splitHeads(q, heads);
  Tensor o = layers::mergeHeads(attention(split, layers::splitHeads(k, heads),
                                          layers::splitHeads(v, heads)));
  HostTensor hq = randomF32({b, s, heads * d}, 11),
             hk = randomF32({b, s, heads * d}, 12),
             hv = randomF32({b, s, heads * d}, 13);
  std::vector<HostTensor> r =
      f.run({split, layers::mergeHeads(split), o}, {hq, hk, hv});
  expectValues(r[0], {b, heads, s, d}, [&](const Index &i) {
    return at(hq, {i[0], i[2], i[1] * d + i[3]});
  });
  expectValues(r[1], {b, s, heads * d},
               [&](const Index &i) { return at(hq, i); });
  expectValues(r[2], {b, s, heads * d}, [&](const Index &i) {
    int64_t h = i[2] / d, e = i[2] % d;
    std::vector<double> logits(s);
    double mx = -1e300, den = 0, out = 0;
    for (int64_t j = 0; j < s; ++j) {
      double dot = 0;
      for (int64_t c = 0; c < d; ++c)
        dot += at(hq, {i[0], i[1], h * d + c}) * at(hk, {i[0], j, h * d + c});
      logits[j] = dot / std::sqrt(static_cast<double>(d));
      mx = std::max(mx, logits[j]);
    }
    for (int64_t j = 0; j < s; ++j) {
      double p = std::exp(logits[j] - mx);
      den += p;
      out += p * at(hv, {i[0], j, h * d + e});
    }
    return out / den;
  });
}

TEST(BuilderTest, UnpatchifyIsDiffusersEinsum) {
  Fn f;
  const int64_t b = 2, h = 2, w = 3, p = 2, c = 3;
  Tensor x = f.fn.argument({b, h * w, p * p * c});
  HostTensor hx = randomF32({b, h * w, p * p * c}, 14);
  std::vector<HostTensor> r = f.run({layers::unpatchify(x, h, w, p, c)}, {hx});
  // x.reshape(B, h, w, p, q, C); einsum("nhwpqc->nchpwq"); reshape.
  expectValues(r[0], {b, c, h * p, w * p}, [&](const Index &i) {
    int64_t hh = i[2] / p, pp = i[2] % p, ww = i[3] / p, qq = i[3] % p;
    return at(hx, {i[0], hh * w + ww, (pp * p + qq) * c + i[1]});
  });
}

TEST(BuilderTest, SincosPosEmbed2dIsDiffusers) {
  Fn f;
  const int64_t dim = 16, grid = 6, top = 1, left = 2, h = 3, w = 4;
  const double base = 3, interp = 1.5;
  Tensor e =
      layers::sincosPosEmbed2d(f.g, dim, grid, base, interp, top, left, h, w);
  std::vector<HostTensor> r = f.run({e}, {});
  // get_2d_sincos_pos_embed: grid = meshgrid(grid_w, grid_h); the first
  // half embeds grid[0] (the column), the second grid[1] (the row); each
  // half is get_1d_sincos_pos_embed_from_grid(dim / 2, pos):
  // [sin(pos * omega), cos(pos * omega)], omega_i = 10000^-(i / (dim / 4)).
  expectValues(
      r[0], {1, h * w, dim},
      [&](const Index &i) {
        int64_t row = top + i[1] / w, col = left + i[1] % w;
        int64_t half = dim / 2, quarter = dim / 4;
        int64_t j = i[2] % half;
        double pos = (i[2] < half ? col : row) / (grid / base) / interp;
        double omega = 1.0 / std::pow(10000.0, (j % quarter) / (half / 2.0));
        return j < quarter ? std::sin(pos * omega) : std::cos(pos * omega);
      },
      1e-6);
}

TEST(BuilderTest, TimestepSinusoidsIsDiffusers) {
  for (bool flip : {true, false}) {
    for (double shift : {0.0, 1.0}) {
      Fn f;
      const int64_t dim = 8, half = dim / 2;
      Tensor t = f.fn.argument({3});
      HostTensor ht =
          HostTensor::fromDoubles(DType::F32, {3}, {0.0, 1.5, 999.0});
      std::vector<HostTensor> r =
          f.run({layers::timestepSinusoids(t, dim, flip, shift)}, {ht});
      // get_timestep_embedding: exp(-log(10000) i / (half - shift)) t, then
      // [sin, cos] ([cos, sin] with flip_sin_to_cos).
      expectValues(
          r[0], {3, dim},
          [&](const Index &i) {
            int64_t j = i[1] % half;
            double arg = at(ht, {i[0]}) *
                         std::exp(-std::log(10000.0) * j / (half - shift));
            bool first = i[1] < half;
            return first != flip ? std::sin(arg) : std::cos(arg);
          },
          2e-4, flip ? "flip" : "noflip");
    }
  }
}

TEST(BuilderTest, ModuleNamingAndParameterDedup) {
  Fn f;
  Module m(f.fn, f.params);
  EXPECT_EQ(m.path("x"), "x");
  EXPECT_EQ(m["up_blocks"]["0"].path("conv"), "up_blocks.0.conv");
  EXPECT_EQ(m.child("a").child("b").path("c"), "a.b.c");

  Tensor x = f.fn.argument({2, 3}, "x");
  Tensor p1 = m["a"].param("w", {4, 3}, Init::ones());
  Tensor p2 = m.child("a").param("w", {4, 3}, Init::zeros());
  EXPECT_EQ(p1.value(), p2.value());
  ASSERT_EQ(f.params.specs().size(), 1u);
  EXPECT_EQ(f.params.specs()[0].init.kind, Init::Kind::Ones); // first wins
  ASSERT_EQ(f.fn.parameters().size(), 1u);

  Tensor y = m["blk"].linear("proj", x, 4);
  const ParamSpec *w = f.params.find("blk.proj.weight");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->shape, (Shape{4, 3}));
  EXPECT_EQ(w->init.kind, Init::Kind::Uniform);
  EXPECT_DOUBLE_EQ(w->init.scale, 1.0 / std::sqrt(3.0));
  EXPECT_TRUE(w->trainable);
  EXPECT_EQ(f.params.find("blk.proj.bias")->shape, (Shape{4}));
  EXPECT_EQ(f.params.numElements(), 12 + 12 + 4);
  EXPECT_EQ(m["blk"].linear("proj", x, 4).shape(), (Shape{2, 4}));
  EXPECT_EQ(f.fn.parameters().size(), 3u); // reused, not re-added

  // Parameters are trailing arguments named with their full path.
  mlir::func::FuncOp fn = f.fn.op();
  ASSERT_EQ(fn.getNumArguments(), 4u);
  std::vector<std::string> names;
  for (unsigned i = 0; i < fn.getNumArguments(); ++i)
    if (auto a = fn.getArgAttrOfType<mlir::StringAttr>(i, "omni.name"))
      names.push_back(a.str());
  EXPECT_EQ(names, (std::vector<std::string>{"x", "a.w", "blk.proj.weight",
                                             "blk.proj.bias"}));

  HostTensor hx = randomF32({2, 3}, 15), hp = randomF32({4, 3}, 16),
             hw = randomF32({4, 3}, 17), hb = randomF32({4}, 18);
  std::vector<HostTensor> r = f.run({y}, {hx, hp, hw, hb});
  expectValues(r[0], {2, 4}, [&](const Index &i) {
    double s = at(hb, {i[1]});
    for (int64_t k = 0; k < 3; ++k)
      s += at(hx, {i[0], k}) * at(hw, {i[1], k});
    return s;
  });
}

TEST(BuilderDeathTest, ParameterWithTwoShapesIsAModelBug) {
  ::testing::GTEST_FLAG(death_test_style) = "threadsafe";
  EXPECT_DEATH(
      {
        Fn f;
        Module m(f.fn, f.params);
        m.param("w", {2}, Init::zeros());
        m.param("w", {3}, Init::zeros());
      },
      "parameter w used with two shapes");
}

TEST(BuilderTest, LoraAdaptsOnlyTargetsAndFreezesTheRest) {
  Fn f;
  LoraOptions lora;
  lora.rank = 2;
  lora.alpha = 3.0;
  lora.targets = {"attn.to_q"};
  EXPECT_TRUE(lora.matches("blk.attn.to_q"));
  EXPECT_TRUE(lora.matches("attn.to_q"));
  EXPECT_FALSE(lora.matches("blk.xattn.to_q"));
  EXPECT_FALSE(lora.matches("blk.attn.to_q.x"));

  Module m(f.fn, f.params, "", &lora);
  Tensor x = f.fn.argument({2, 3}, "x");
  Tensor q = m["blk"]["attn"].linear("to_q", x, 4);
  Tensor k = m["blk"]["attn"].linear("to_k", x, 4);
  Tensor xq = m["blk"]["xattn"].linear("to_q", x, 4, /*bias=*/false);

  std::vector<std::string> names;
  for (const ParamSpec &s : f.params.specs())
    names.push_back(s.name + (s.trainable ? " T" : " F"));
  EXPECT_EQ(names,
            (std::vector<std::string>{
                "blk.attn.to_q.weight F", "blk.attn.to_q.bias F",
                "blk.attn.to_q.lora_A.weight T",
                "blk.attn.to_q.lora_B.weight T", "blk.attn.to_k.weight F",
                "blk.attn.to_k.bias F", "blk.xattn.to_q.weight F"}));
  const ParamSpec *a = f.params.find("blk.attn.to_q.lora_A.weight");
  const ParamSpec *b = f.params.find("blk.attn.to_q.lora_B.weight");
  EXPECT_EQ(a->shape, (Shape{2, 3}));
  EXPECT_EQ(a->init.kind, Init::Kind::Normal);
  EXPECT_EQ(b->shape, (Shape{4, 2}));
  EXPECT_EQ(b->init.kind, Init::Kind::Zeros); // starts as the base model

  int loraOps = 0, linearOps = 0;
  f.g.module().walk([&](mlir::Operation *op) {
    loraOps += op->getName().getStringRef() == "omni.lora_linear";
    linearOps += op->getName().getStringRef() == "omni.linear";
  });
  EXPECT_EQ(loraOps, 1);
  EXPECT_EQ(linearOps, 2);

  HostTensor hx = randomF32({2, 3}, 19), hw = randomF32({4, 3}, 20),
             hb = randomF32({4}, 21), ha = randomF32({2, 3}, 22),
             hbb = randomF32({4, 2}, 23);
  std::vector<HostTensor> args{hx, hw, hb, ha, hbb};
  const auto &ps = f.fn.parameters(); // to_k and xattn.to_q after these
  for (size_t i = 4; i < ps.size(); ++i)
    args.push_back(randomF32(ps[i].second.shape(), 24 + i));
  ASSERT_EQ(args.size(), 1 + f.fn.parameters().size());
  std::vector<HostTensor> r = f.run({q}, args);
  // y = x W^T + b + (alpha / r) (x A^T) B^T (PEFT's LoRA).
  expectValues(r[0], {2, 4}, [&](const Index &i) {
    double y = at(hb, {i[1]});
    for (int64_t c = 0; c < 3; ++c)
      y += at(hx, {i[0], c}) * at(hw, {i[1], c});
    for (int64_t j = 0; j < 2; ++j) {
      double xa = 0;
      for (int64_t c = 0; c < 3; ++c)
        xa += at(hx, {i[0], c}) * at(ha, {j, c});
      y += 1.5 * xa * at(hbb, {i[1], j});
    }
    return y;
  });
}

/// With the graph's contraction type bf16 (docs/precision.md): linear,
/// matmul and LoRA take their operands rounded to bf16 and round their
/// result to bf16, and the bias, the LoRA scaling and sum stay f32. Checked
/// in the evaluator's float32 mode, where every op rounds to its type.
TEST(BuilderTest, Bf16ContractionsRoundOperandsAndKeepTheRestF32) {
  Fn f;
  LoraOptions lora;
  lora.rank = 2;
  lora.alpha = 3.0;
  lora.targets = {"lo"};
  Module m(f.fn, f.params, "", &lora);
  Tensor x = f.fn.argument({2, 3}, "x");
  Tensor y = f.fn.argument({3, 5}, "y");
  Tensor lin, mm, lo, after;
  {
    ContractionScope scope(f.g, f.g.bf16());
    lin = m.linear("lin", x, 4);
    mm = matmul(x, y);
    lo = m.linear("lo", x, 4);
  }
  EXPECT_FALSE(f.g.contractionType());
  after = matmul(x, y);
  EXPECT_TRUE(lin.elementType().isF32());
  EXPECT_TRUE(mm.elementType().isF32());
  int bf16Linears = 0, loraOps = 0;
  f.g.module().walk([&](mlir::Operation *op) {
    llvm::StringRef name = op->getName().getStringRef();
    loraOps += name == "omni.lora_linear";
    if ((name == "omni.linear" || name == "omni.matmul") &&
        llvm::all_of(op->getOperandTypes(), [](mlir::Type t) {
          return llvm::cast<mlir::RankedTensorType>(t)
              .getElementType()
              .isBF16();
        }))
      ++bf16Linears;
  });
  EXPECT_EQ(loraOps, 0);     // built from its decomposition
  EXPECT_EQ(bf16Linears, 5); // lin, mm, lo's base, A and B; not `after`

  HostTensor hx = randomF32({2, 3}, 31), hy = randomF32({3, 5}, 32);
  std::map<std::string, HostTensor> params;
  for (const auto &[name, t] : f.fn.parameters())
    params[name] = randomF32(t.shape(), 33 + params.size());
  std::vector<HostTensor> r =
      f.run({lin, mm, lo, after}, f.withParams({hx, hy}, params),
            reference::Precision::F32);
  auto bf = [](double v) { return roundToDType(v, DType::BF16); };
  auto f32 = [](double v) { return roundToDType(v, DType::F32); };
  const HostTensor &w = params.at("lin.weight"), &b = params.at("lin.bias");
  // f32 (one rounding of the add); the bf16 product is rounded exactly as
  // the reference rounds it, so 1 f32 ulp is the tolerance.
  expectValues(
      r[0], {2, 4},
      [&](const Index &i) {
        double s = 0;
        for (int64_t c = 0; c < 3; ++c)
          s += bf(at(hx, {i[0], c})) * bf(at(w, {i[1], c}));
        return f32(bf(s) + at(b, {i[1]}));
      },
      1.2e-7, "linear");
  expectValues(
      r[1], {2, 5},
      [&](const Index &i) {
        double s = 0;
        for (int64_t c = 0; c < 3; ++c)
          s += bf(at(hx, {i[0], c})) * bf(at(hy, {c, i[1]}));
        return bf(s);
      },
      0.0, "matmul");
  const HostTensor &lw = params.at("lo.weight"), &lb = params.at("lo.bias"),
                   &la = params.at("lo.lora_A.weight"),
                   &lbb = params.at("lo.lora_B.weight");
  expectValues(
      r[2], {2, 4},
      [&](const Index &i) {
        double base = 0, up = 0;
        for (int64_t c = 0; c < 3; ++c)
          base += bf(at(hx, {i[0], c})) * bf(at(lw, {i[1], c}));
        for (int64_t j = 0; j < 2; ++j) {
          double down = 0;
          for (int64_t c = 0; c < 3; ++c)
            down += bf(at(hx, {i[0], c})) * bf(at(la, {j, c}));
          up += bf(down) * bf(at(lbb, {i[1], j}));
        }
        return f32(f32(bf(base) + at(lb, {i[1]})) + f32(bf(up) * 1.5));
      },
      1.2e-7, "lora");
  // Outside the scope: plain f32.
  expectValues(
      r[3], {2, 5},
      [&](const Index &i) {
        double s = 0;
        for (int64_t c = 0; c < 3; ++c)
          s += at(hx, {i[0], c}) * at(hy, {c, i[1]});
        return f32(s);
      },
      0.0, "f32 matmul");
}

TEST(BuilderTest, WithoutLoraEverythingTrains) {
  Fn f;
  LoraOptions none; // rank 0
  Module m(f.fn, f.params, "", &none);
  m["attn"].linear("to_q", f.fn.argument({1, 2}), 2);
  for (const ParamSpec &s : f.params.specs())
    EXPECT_TRUE(s.trainable) << s.name;
  EXPECT_EQ(f.params.specs().size(), 2u);
}

std::string errorText(llvm::Error e) {
  return e ? llvm::toString(std::move(e)) : "";
}

TEST(BuilderTest, ConfigGettersOverridesAndErrors) {
  Config c{{"depth", "4"},
           {"ch", "32, 64,128"},
           {"eps", "1e-6"},
           {"on", "true"},
           {"name", "x"}};
  EXPECT_EQ(errorText(c.override("depth=6")), "");
  EXPECT_EQ(c.getInt("depth"), 6);
  EXPECT_EQ(c.getInts("ch"), (std::vector<int64_t>{32, 64, 128}));
  EXPECT_DOUBLE_EQ(c.getDouble("eps"), 1e-6);
  EXPECT_TRUE(c.getBool("on"));
  EXPECT_EQ(errorText(c.takeError()), "");

  EXPECT_EQ(errorText(c.override("detph=6")),
            "config override 'detph=6': unknown key 'detph' (known: ch, "
            "depth, eps, name, on)");
  EXPECT_EQ(errorText(c.override("depth")),
            "config override 'depth': expected key=value");
  EXPECT_EQ(errorText(c.override("=1")),
            "config override '=1': expected key=value");

  c.getInt("name");
  c.getInt("missing"); // only the first failure is kept
  EXPECT_EQ(errorText(c.takeError()),
            "config key 'name': expected an integer, found 'x'");
  EXPECT_EQ(errorText(c.takeError()), ""); // taken
  c.getDouble("missing");
  EXPECT_EQ(errorText(c.takeError()), "config key 'missing': missing");
  c.getInts("name");
  EXPECT_EQ(errorText(c.takeError()),
            "config key 'name': expected comma-separated integers, found 'x'");
  c.getBool("depth");
  EXPECT_EQ(errorText(c.takeError()),
            "config key 'depth': expected true or false, found '6'");
  EXPECT_EQ(c.str(), "ch=32, 64,128 depth=6 eps=1e-6 name=x on=true");
}

TEST(BuilderTest, RegistryErrorsNameTheModelPresetOrKey) {
  const Registry &r = Registry::builtin();
  llvm::Expected<Config> bad = r.config("nope", "", {});
  ASSERT_FALSE(bad);
  std::string text = llvm::toString(bad.takeError());
  EXPECT_EQ(text.rfind("unknown model 'nope' (known: ", 0), 0u) << text;
  EXPECT_NE(text.find("dit"), std::string::npos) << text;
  EXPECT_NE(text.find("autoencoder_kl"), std::string::npos) << text;

  llvm::Expected<Config> preset = r.config("dit", "huge", {});
  ASSERT_FALSE(preset);
  EXPECT_EQ(llvm::toString(preset.takeError()),
            "model 'dit' has no config 'huge' (known: tiny, small)");

  llvm::Expected<Config> key = r.config("dit", "tiny", {"sample_sise=8"});
  ASSERT_FALSE(key);
  EXPECT_EQ(llvm::toString(key.takeError())
                .rfind("config override 'sample_sise=8': unknown key "
                       "'sample_sise' (known: ",
                       0),
            0u);

  llvm::Expected<Config> first = r.config("dit", "", {"num_layers=1"});
  ASSERT_TRUE(static_cast<bool>(first)) << llvm::toString(first.takeError());
  EXPECT_EQ(first->getString("sample_size"), "16"); // tiny, the default
  EXPECT_EQ(first->getInt("num_layers"), 1);

  auto wrongKind = r.makeVelocity("autoencoder_kl", *first);
  ASSERT_FALSE(wrongKind);
  EXPECT_EQ(llvm::toString(wrongKind.takeError())
                .rfind("unknown velocity model 'autoencoder_kl' (known: ", 0),
            0u);
}

} // namespace
