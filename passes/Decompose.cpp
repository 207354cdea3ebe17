//===- Decompose.cpp - Rewrite composite ops into primitives -------------===//
//
// omni-decompose replaces every composite op by the primitives its
// description in OmniOps.td documents. Library ops (matmul, conv2d,
// attention) are kept: backends call tuned kernels for them. The rewrites
// follow the reference formulas literally (for example layer_norm's biased
// variance, gelu's tanh constant 0.044715) so that the reference evaluator
// gives the same numbers on an op and on its decomposition.
//
//===----------------------------------------------------------------------===//

#include "dialects/omni/OmniOps.h"
#include "passes/DecomposePatterns.h"
#include "passes/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#include <cmath>

#define DEBUG_TYPE "omni-decompose"

namespace mlir::omni {
#define GEN_PASS_DEF_OMNIDECOMPOSEPASS
#include "passes/Passes.h.inc"
} // namespace mlir::omni

using namespace mlir;
using namespace mlir::omni;

namespace {

struct DecomposeSilu : OpRewritePattern<SiluOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SiluOp op, PatternRewriter &r) const override {
    Emitter e(r, op.getLoc());
    Value sig = LogisticOp::create(r, op.getLoc(), op.getOperand());
    r.replaceOp(op, e.mul(op.getOperand(), sig));
    return success();
  }
};

struct DecomposeGelu : OpRewritePattern<GeluOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(GeluOp op, PatternRewriter &r) const override {
    Emitter e(r, op.getLoc());
    Value x = op.getOperand();
    if (op.getApproximation() == GeluApproximation::tanh) {
      // 0.5 x (1 + tanh(u)) = x logistic(2 u), u = sqrt(2/pi) (x + 0.044715
      // x^3): one exp and one division where tanh costs an exp, a rational
      // polynomial and two divisions on the cpu (the kernels compute both
      // of tanh's branches), and no cancellation for any x.
      Value x3 = e.mul(e.mul(x, x), x);
      Value poly = e.add(x, e.scale(x3, 0.044715));
      Value s = LogisticOp::create(r, op.getLoc(),
                                   e.scale(poly, 2 * std::sqrt(2.0 / M_PI)));
      r.replaceOp(op, e.mul(x, s));
      return success();
    }
    Value inner = ErfOp::create(r, op.getLoc(), e.scale(x, M_SQRT1_2));
    Value onePlus = e.add(inner, e.splatLike(x, 1.0));
    r.replaceOp(op, e.mul(e.scale(x, 0.5), onePlus));
    return success();
  }
};

struct DecomposeSoftmax : OpRewritePattern<SoftmaxOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SoftmaxOp op,
                                PatternRewriter &r) const override {
    Emitter e(r, op.getLoc());
    Value x = op.getOperand();
    RankedTensorType t = Emitter::typeOf(x);
    int64_t dim = op.getDimAttr().getInt();
    Value max = e.unreduce(e.reduce(ReduceKind::max, x, {dim}), t, dim);
    Value ex = ExpOp::create(r, op.getLoc(), e.sub(x, max));
    Value sum = e.unreduce(e.reduce(ReduceKind::sum, ex, {dim}), t, dim);
    r.replaceOp(op, e.div(ex, sum));
    return success();
  }
};

/// x * rsqrt(mean_last(x^2 or centered^2) + eps), shared by the two norms.
static Value normalizeLast(Emitter &e, Value centered, double eps) {
  RankedTensorType t = Emitter::typeOf(centered);
  int64_t last = t.getRank() - 1;
  Value meanSq = e.reduce(ReduceKind::mean, e.mul(centered, centered), {last});
  Value inv =
      RsqrtOp::create(e.b, e.loc, e.add(meanSq, e.splatLike(meanSq, eps)));
  return e.mul(centered, e.unreduce(inv, t, last));
}

struct DecomposeLayerNorm : OpRewritePattern<LayerNormOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LayerNormOp op,
                                PatternRewriter &r) const override {
    Emitter e(r, op.getLoc());
    Value x = op.getOperand();
    RankedTensorType t = Emitter::typeOf(x);
    int64_t last = t.getRank() - 1;
    Value mean = e.unreduce(e.reduce(ReduceKind::mean, x, {last}), t, last);
    Value y = normalizeLast(e, e.sub(x, mean), op.getEps().convertToDouble());
    if (Value w = op.getWeight())
      y = e.mul(y, e.alongLast(w, t));
    if (Value bias = op.getBias())
      y = e.add(y, e.alongLast(bias, t));
    r.replaceOp(op, y);
    return success();
  }
};

struct DecomposeRmsNorm : OpRewritePattern<RmsNormOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(RmsNormOp op,
                                PatternRewriter &r) const override {
    Emitter e(r, op.getLoc());
    Value y = normalizeLast(e, op.getOperand(), op.getEps().convertToDouble());
    if (Value w = op.getWeight())
      y = e.mul(y, e.alongLast(w, op.getType()));
    r.replaceOp(op, y);
    return success();
  }
};

struct DecomposeLinear : OpRewritePattern<LinearOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LinearOp op,
                                PatternRewriter &r) const override {
    Emitter e(r, op.getLoc());
    r.replaceOp(op, e.linear(op.getInput(), op.getWeight(), op.getBias()));
    return success();
  }
};

struct DecomposeLoraLinear : OpRewritePattern<LoraLinearOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(LoraLinearOp op,
                                PatternRewriter &r) const override {
    Emitter e(r, op.getLoc());
    Value base = e.linear(op.getInput(), op.getWeight(), op.getBias());
    Value down = e.linear(op.getInput(), op.getLoraA(), Value());
    Value up = e.linear(down, op.getLoraB(), Value());
    r.replaceOp(op, e.add(base, e.scale(up, op.getScale().convertToDouble())));
    return success();
  }
};

struct DecomposeCfgCombine : OpRewritePattern<CfgCombineOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(CfgCombineOp op,
                                PatternRewriter &r) const override {
    Emitter e(r, op.getLoc());
    RankedTensorType t = Emitter::typeOf(op.getOperand());
    int64_t half = t.getDimSize(0) / 2;
    SmallVector<int64_t> start(t.getRank(), 0), limit(t.getShape()),
        strides(t.getRank(), 1);
    limit[0] = half;
    Value uncond =
        SliceOp::create(r, op.getLoc(), op.getOperand(), start, limit, strides);
    start[0] = half;
    limit[0] = t.getDimSize(0);
    Value cond =
        SliceOp::create(r, op.getLoc(), op.getOperand(), start, limit, strides);
    double g = op.getGuidanceScale().convertToDouble();
    // A runtime guidance scale (an f64 operand) replaces the attribute,
    // rounded once to the element type as the attribute's constant is.
    Value diff = e.sub(cond, uncond);
    Value scaled =
        op.getGuidanceScaleValue()
            ? e.mul(diff, e.hyperSplat(Emitter::typeOf(diff),
                                       op.getGuidanceScaleValue(), g))
            : e.scale(diff, g);
    r.replaceOp(op, e.add(uncond, scaled));
    return success();
  }
};

struct OmniDecomposePass
    : mlir::omni::impl::OmniDecomposePassBase<OmniDecomposePass> {
  using OmniDecomposePassBase::OmniDecomposePassBase;
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<DecomposeSilu, DecomposeGelu, DecomposeSoftmax,
                 DecomposeLayerNorm, DecomposeRmsNorm, DecomposeLinear,
                 DecomposeLoraLinear, DecomposeCfgCombine>(&getContext());
    populateDecomposeRLPatterns(patterns);
    if (decomposeLibraryOps)
      populateDecomposeLibraryPatterns(patterns);
    else if (decomposeAttentionGrad)
      populateDecomposeAttentionGradPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
