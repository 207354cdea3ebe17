//===- DecomposeRL.cpp - Decompose the diffusion RL ops ------------------===//
//
// The omni-decompose patterns of flow_schedule, sde_step, group_advantages,
// grpo_loss, adamw and clip_grad_norm, written literally after
// docs/flowgrpo-math.md (sections 1, 2, 5, 6 and 7), and of attention
// (kept for libraries unless the pass's decompose-library-ops option asks).
// The reference evaluator checks each against the op it replaces.
//
//===----------------------------------------------------------------------===//

#include "passes/DecomposePatterns.h"

#include <cmath>

using namespace mlir;
using namespace mlir::omni;

namespace {

/// The schedule is a compile-time table: replace it by its folded constants.
struct DecomposeFlowSchedule : OpRewritePattern<FlowScheduleOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(FlowScheduleOp op,
                                PatternRewriter &r) const override {
    SmallVector<OpFoldResult> folded;
    if (failed(op.fold(FlowScheduleOp::FoldAdaptor({}, op), folded)))
      return r.notifyMatchFailure(op, "schedule options do not evaluate");
    SmallVector<Value> values;
    for (OpFoldResult f : folded)
      values.push_back(ConstantOp::create(
          r, op.getLoc(), cast<ElementsAttr>(cast<Attribute>(f))));
    r.replaceOp(op, values);
    return success();
  }
};

struct DecomposeSdeStep : OpRewritePattern<SdeStepOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(SdeStepOp op,
                                PatternRewriter &r) const override {
    Emitter e(r, op.getLoc());
    Location loc = op.getLoc();
    Value x = op.getX(), v = op.getV();
    RankedTensorType t = Emitter::typeOf(x);
    Type elt = t.getElementType();
    SdeType type = op.getType();
    SdeCoefficients c = e.sdeCoefficients(op);
    Value mean = e.add(e.mul(x, e.fill(c.cx, t)), e.mul(v, e.fill(c.cv, t)));
    Value q = c.q, stdOut = c.std;

    Value next = op.getNext();
    if (!next)
      next = e.add(mean, e.mul(e.fill(q, t), op.getNoise()));

    Value logProb;
    if (c.euler) {
      logProb = e.splat(RankedTensorType::get({t.getDimSize(0)}, elt), 0.0);
    } else {
      Value diff = e.sub(next, mean);
      Value sq = e.mul(diff, diff);
      Value lp;
      if (type == SdeType::sde) {
        // -(x' - mu)^2 / (2 q^2) - log q - log sqrt(2 pi)
        Value twoQ2 = e.scale(e.mul(q, q), 2.0);
        Value logNorm = e.add(LogOp::create(r, loc, q),
                              e.scalar(elt, std::log(std::sqrt(2.0 * M_PI))));
        lp = e.sub(NegOp::create(r, loc, e.div(sq, e.fill(twoQ2, t))),
                   e.fill(logNorm, t));
      } else {
        lp = NegOp::create(r, loc, sq);
      }
      logProb = e.rowMean(lp);
    }
    r.replaceOp(op, {next, logProb, mean, stdOut});
    return success();
  }
};

/// Computed in f64 from the cast rewards and rounded once at the end, as
/// flow_grpo's numpy float64 tracker and runtime/flowgrpo do: the group
/// mean rounded to f32 before the subtraction loses the digits that rewards
/// sharing a large offset differ in (1000 + 0.01 i: 40% off). Conventions
/// of the runtime where the formula is undefined: a std over no more values
/// than ddof is 0, and a zero denominator (eps = 0, equal rewards) gives 0.
struct DecomposeGroupAdvantages : OpRewritePattern<GroupAdvantagesOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(GroupAdvantagesOp op,
                                PatternRewriter &r) const override {
    Emitter e(r, op.getLoc());
    Location loc = op.getLoc();
    Value rewards = op.getRewards();
    RankedTensorType t = Emitter::typeOf(rewards);
    int64_t n = t.getDimSize(0), g = op.getGroupSize();
    bool global = op.getGlobalStd();
    if (g == 1 && !global) {
      // A lone sample has nothing to compare with.
      r.replaceOp(op, e.splat(t, 0.0));
      return success();
    }
    Type f64 = r.getF64Type();
    RankedTensorType t64 = t.clone(f64);
    auto grouped = RankedTensorType::get({n / g, g}, f64);
    Value r64 = r.createOrFold<CastOp>(loc, t64, rewards);
    Value rg = ReshapeOp::create(r, loc, grouped, r64);
    Value groupMean =
        e.unreduce(e.reduce(ReduceKind::mean, rg, {1}), grouped, 1);
    Value centered = e.sub(rg, groupMean);
    auto finish = [&](Value adv) {
      Value flat = ReshapeOp::create(r, loc, t64, adv);
      r.replaceOp(op, r.createOrFold<CastOp>(loc, t, flat));
      return success();
    };
    if (!op.getNormByStd())
      return finish(centered);
    int64_t ddof = static_cast<int64_t>(op.getDdof());
    Value std;
    if (global) {
      if (n - ddof <= 0) {
        std = e.splat(grouped, 0.0);
      } else {
        Value dev = e.sub(r64, e.fill(e.meanAll(r64), t64));
        Value var = e.div(e.sumAll(e.mul(dev, dev)),
                          e.scalar(f64, static_cast<double>(n - ddof)));
        std = e.fill(SqrtOp::create(r, loc, var), grouped);
      }
    } else {
      Value var =
          e.div(e.reduce(ReduceKind::sum, e.mul(centered, centered), {1}),
                e.splat(RankedTensorType::get({n / g}, f64),
                        static_cast<double>(g - ddof)));
      std = e.unreduce(SqrtOp::create(r, loc, var), grouped, 1);
    }
    double eps = op.getEps().convertToDouble();
    Value denom = e.add(std, e.splat(grouped, eps));
    Value adv = e.div(centered, denom);
    if (eps == 0.0)
      adv = e.select(
          e.compare(CompareDirection::eq, denom, e.splat(grouped, 0.0)),
          e.splat(grouped, 0.0), adv);
    return finish(adv);
  }
};

struct DecomposeGrpoLoss : OpRewritePattern<GrpoLossOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(GrpoLossOp op,
                                PatternRewriter &r) const override {
    Emitter e(r, op.getLoc());
    Location loc = op.getLoc();
    Value lp = op.getLogProb(), old = op.getOldLogProb();
    RankedTensorType t = Emitter::typeOf(lp);
    Type elt = t.getElementType();
    double clip = op.getClipRange().convertToDouble();
    double advClip = op.getAdvClipMax().convertToDouble();
    double beta = op.getBeta().convertToDouble();
    // Runtime hyper-parameters (f64 operands) replace the attributes; the
    // derived bounds are computed in f64 and rounded once, as folded here.
    Value clipV = op.getClipRangeValue(), advClipV = op.getAdvClipMaxValue(),
          betaV = op.getBetaValue();
    using E = Emitter;

    Value adv = MaxOp::create(
        r, loc,
        MinOp::create(r, loc, op.getAdvantages(),
                      e.hyperSplat(t, advClipV, advClip)),
        e.hyperSplat(t, advClipV, advClip, E::negated, E::negated));
    Value logRatio = e.sub(lp, old);
    Value ratio = ExpOp::create(r, loc, logRatio);
    Value clipped = MaxOp::create(
        r, loc,
        MinOp::create(r, loc, ratio,
                      e.hyperSplat(t, clipV, clip, E::onePlus, E::onePlus)),
        e.hyperSplat(t, clipV, clip, E::oneMinus, E::oneMinus));
    Value negAdv = NegOp::create(r, loc, adv);
    Value pg =
        MaxOp::create(r, loc, e.mul(negAdv, ratio), e.mul(negAdv, clipped));
    Value loss = e.meanAll(pg);
    Value approxKl = e.scale(e.meanAll(e.mul(logRatio, logRatio)), 0.5);
    Value outside = CompareOp::create(
        r, loc, CompareDirectionAttr::get(r.getContext(), CompareDirection::gt),
        AbsOp::create(r, loc, e.sub(ratio, e.splat(t, 1.0))),
        e.hyperSplat(t, clipV, clip));
    Value clipfrac = e.meanAll(CastOp::create(r, loc, t, outside));

    Value kl = e.scalar(elt, 0.0);
    if (Value mean = op.getMean()) {
      Value d = e.sub(mean, op.getRefMean());
      Value perRow = e.rowMean(e.mul(d, d));
      // q = std sqrt(-dt) for the exact form of an sde step, the only case
      // that has dt (C4); a cps step's std already is its transition std.
      Value std = op.getStd();
      if (Value dt = op.getDt())
        std = e.mul(std, SqrtOp::create(r, loc, NegOp::create(r, loc, dt)));
      Value twoVar = e.scale(e.mul(std, std), 2.0);
      kl = e.meanAll(e.div(perRow, e.fill(twoVar, Emitter::typeOf(perRow))));
      if (betaV)
        loss = e.add(loss, e.mul(kl, e.hyperParam(betaV, beta, elt)));
      else if (beta != 0.0)
        loss = e.add(loss, e.scale(kl, beta));
    }
    r.replaceOp(op, {loss, approxKl, clipfrac, kl});
    return success();
  }
};

struct DecomposeAdamW : OpRewritePattern<AdamWOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AdamWOp op, PatternRewriter &r) const override {
    Emitter e(r, op.getLoc());
    Location loc = op.getLoc();
    Value p = op.getParam(), g = op.getGrad();
    RankedTensorType t = Emitter::typeOf(p);
    Type elt = t.getElementType();
    double lr = op.getLr().convertToDouble(),
           b1 = op.getBeta1().convertToDouble(),
           b2 = op.getBeta2().convertToDouble(),
           eps = op.getEps().convertToDouble(),
           wd = op.getWeightDecay().convertToDouble();
    // Decoupled weight decay first (torch: p *= 1 - lr * wd).
    Value decayed = e.scale(p, 1.0 - lr * wd);
    Value m = e.add(e.scale(op.getM(), b1), e.scale(g, 1.0 - b1));
    Value v = e.add(e.scale(op.getV(), b2), e.scale(e.mul(g, g), 1.0 - b2));
    auto scalarT = RankedTensorType::get({}, elt);
    Value step = CastOp::create(r, loc, scalarT, op.getStep());
    Value bc1 = e.sub(e.scalar(elt, 1.0),
                      PowOp::create(r, loc, e.scalar(elt, b1), step));
    Value bc2 = e.sub(e.scalar(elt, 1.0),
                      PowOp::create(r, loc, e.scalar(elt, b2), step));
    // torch: denom = sqrt(v) / sqrt(bc2) + eps; p -= (lr / bc1) * m / denom.
    Value denom = e.add(e.div(SqrtOp::create(r, loc, v),
                              e.fill(SqrtOp::create(r, loc, bc2), t)),
                        e.splat(t, eps));
    Value stepSize = e.div(e.scalar(elt, lr), bc1);
    Value update = e.div(e.mul(e.fill(stepSize, t), m), denom);
    r.replaceOp(op, {e.sub(decayed, update), m, v});
    return success();
  }
};

struct DecomposeClipGradNorm : OpRewritePattern<ClipGradNormOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ClipGradNormOp op,
                                PatternRewriter &r) const override {
    Emitter e(r, op.getLoc());
    Location loc = op.getLoc();
    // The sum of squares is accumulated in f64 (as the reference does): in
    // f32 it overflows for norms above about 1.8e19, which would skip
    // updates that are finite.
    Type f64 = r.getF64Type();
    Value total = e.scalar(f64, 0.0);
    for (Value g : op.getGrads()) {
      RankedTensorType gt = Emitter::typeOf(g);
      Value g64 = r.createOrFold<CastOp>(loc, gt.clone(f64), g);
      total = e.add(total, e.sumAll(e.mul(g64, g64)));
    }
    Value norm64 = SqrtOp::create(r, loc, total);
    Value norm = r.createOrFold<CastOp>(
        loc, RankedTensorType::get({}, r.getF32Type()), norm64);
    Value finite = IsFiniteOp::create(r, loc, norm);
    // torch: coef = min(max_norm / (norm + 1e-6), 1), computed in the
    // gradients' dtype (runtime/flowgrpo's clipGradNorm<T> does the same):
    // one coefficient per element type, so f64 gradients are scaled by an
    // f64 coefficient, not by one rounded to f32.
    llvm::SmallDenseMap<Type, Value> coefs;
    auto coefFor = [&](Type elt) {
      Value &coef = coefs[elt];
      if (!coef) {
        Value n =
            r.createOrFold<CastOp>(loc, RankedTensorType::get({}, elt), norm64);
        coef = MinOp::create(
            r, loc,
            e.div(e.scalar(elt, op.getMaxNorm().convertToDouble()),
                  e.add(n, e.scalar(elt, 1e-6))),
            e.scalar(elt, 1.0));
      }
      return coef;
    };
    SmallVector<Value> results;
    for (Value g : op.getGrads()) {
      RankedTensorType gt = Emitter::typeOf(g);
      Value scaled = e.mul(g, e.fill(coefFor(gt.getElementType()), gt));
      Value ok = e.fill(finite, gt.clone(r.getI1Type()));
      results.push_back(SelectOp::create(r, loc, ok, scaled, e.splat(gt, 0.0)));
    }
    results.push_back(norm);
    r.replaceOp(op, results);
    return success();
  }
};

/// scores + mask, the mask's size-1 batch and head dimensions broadcast
/// (omni.attention's and omni.attention_grad's C3 / C4).
Value addAttentionMask(Emitter &e, PatternRewriter &r, Location loc,
                       Value scores, Value mask) {
  RankedTensorType st = Emitter::typeOf(scores);
  RankedTensorType mt = Emitter::typeOf(mask);
  if (mt != st) {
    // Size-1 batch/head dimensions broadcast: drop them, then expand.
    SmallVector<int64_t> keep, shape;
    for (int64_t d = 0; d < 4; ++d)
      if (mt.getDimSize(d) != 1 || d >= 2) {
        keep.push_back(d);
        shape.push_back(mt.getDimSize(d));
      }
    Value squeezed = ReshapeOp::create(r, loc, mt.clone(shape), mask);
    mask = BroadcastInDimOp::create(r, loc, st, squeezed,
                                    r.getDenseI64ArrayAttr(keep));
  }
  return e.add(scores, mask);
}

/// softmax(q k^T * scale + mask) v; softmax is decomposed by its own pattern.
struct DecomposeAttention : OpRewritePattern<AttentionOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AttentionOp op,
                                PatternRewriter &r) const override {
    Emitter e(r, op.getLoc());
    Location loc = op.getLoc();
    RankedTensorType qt = Emitter::typeOf(op.getQuery());
    double scale = op.getScale() ? op.getScale()->convertToDouble()
                                 : 1.0 / std::sqrt(double(qt.getDimSize(3)));
    Value scores = MatmulOp::create(r, loc, op.getQuery(), op.getKey(),
                                    /*transpose_lhs=*/false,
                                    /*transpose_rhs=*/true);
    scores = e.scale(scores, scale);
    if (Value mask = op.getMask())
      scores = addAttentionMask(e, r, loc, scores, mask);
    Value probs = SoftmaxOp::create(r, loc, scores, r.getI64IntegerAttr(3));
    r.replaceOp(op, MatmulOp::create(r, loc, probs, op.getValue(), false, false)
                        .getResult());
    return success();
  }
};

/// omni.attention_grad as the matmuls and the softmax it stands for (the
/// VJP omni.attention had before the op existed): S = q k^T scale, P =
/// softmax(S + mask), dv = P^T dO, dP = dO v^T, dS = P (dP - rowsum(dP
/// P)), dq = dS k scale, dk = dS^T q scale. bf16 / f16 operands are widened
/// to f32 and the three cotangents rounded once (the op's definition).
struct DecomposeAttentionGrad : OpRewritePattern<AttentionGradOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(AttentionGradOp op,
                                PatternRewriter &r) const override {
    Emitter e(r, op.getLoc());
    Location loc = op.getLoc();
    RankedTensorType qt = Emitter::typeOf(op.getQuery());
    const bool narrow = !qt.getElementType().isF32();
    auto widen = [&](Value x) -> Value {
      if (!narrow)
        return x;
      return CastOp::create(r, loc, Emitter::typeOf(x).clone(r.getF32Type()),
                            x);
    };
    Value q = widen(op.getQuery()), k = widen(op.getKey()),
          v = widen(op.getValue()), dO = widen(op.getDOutput());
    double scale = op.getScale() ? op.getScale()->convertToDouble()
                                 : 1.0 / std::sqrt(double(qt.getDimSize(3)));
    Value s = e.scale(e.matmul(q, k, false, true), scale);
    if (Value mask = op.getMask())
      s = addAttentionMask(e, r, loc, s, widen(mask));
    RankedTensorType st = Emitter::typeOf(s);
    Value p = SoftmaxOp::create(r, op.getLoc(), s, r.getI64IntegerAttr(3));
    Value dv = e.matmul(p, dO, true, false);
    Value dp = e.matmul(dO, v, false, true);
    Value dot = e.unreduce(e.reduce(ReduceKind::sum, e.mul(dp, p), {3}), st, 3);
    Value ds = e.mul(p, e.sub(dp, dot));
    Value dq = e.scale(e.matmul(ds, k), scale);
    Value dk = e.scale(e.matmul(ds, q, true, false), scale);
    SmallVector<Value> results{dq, dk, dv};
    if (narrow)
      for (auto [result, like] : llvm::zip(results, op.getResults()))
        result = CastOp::create(r, loc, like.getType(), result);
    r.replaceOp(op, results);
    return success();
  }
};

} // namespace

void mlir::omni::populateDecomposeRLPatterns(RewritePatternSet &patterns) {
  patterns
      .add<DecomposeFlowSchedule, DecomposeSdeStep, DecomposeGroupAdvantages,
           DecomposeGrpoLoss, DecomposeAdamW, DecomposeClipGradNorm>(
          patterns.getContext());
}

void mlir::omni::populateDecomposeLibraryPatterns(RewritePatternSet &patterns) {
  patterns.add<DecomposeAttention, DecomposeAttentionGrad>(
      patterns.getContext());
}

void mlir::omni::populateDecomposeAttentionGradPatterns(
    RewritePatternSet &patterns) {
  patterns.add<DecomposeAttentionGrad>(patterns.getContext());
}
