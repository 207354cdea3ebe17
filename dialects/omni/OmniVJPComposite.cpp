//===- OmniVJPComposite.cpp - VJP rules of composite and RL ops -----------===//
//
// The vector-Jacobian products of the composite ops (softmax, norms, gelu,
// attention, linear, lora_linear, cfg_combine) and of the diffusion RL ops
// autodiff must see through (sde_step, grpo_loss). Rules recompute the
// cheap statistics they need (norm means, softmax probabilities) from the
// forward operands rather than asking the forward pass to keep them.
//
//===----------------------------------------------------------------------===//

#include "dialects/omni/OmniEmitter.h"
#include "dialects/omni/OmniOps.h"

#include <cmath>

using namespace mlir;
using namespace mlir::omni;

static Emitter begin(Operation *op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  out.assign(op->getNumOperands(), Value());
  return Emitter(b, op->getLoc());
}

/// All dimensions but the last.
static SmallVector<int64_t> leadingDims(RankedTensorType t) {
  SmallVector<int64_t> dims;
  for (int64_t d = 0; d + 1 < t.getRank(); ++d)
    dims.push_back(d);
  return dims;
}

LogicalResult SoftmaxOp::buildVJP(OpBuilder &b, ArrayRef<Value> g,
                                  SmallVectorImpl<Value> &out) {
  // dx = y (g - sum(g y))
  Emitter e = begin(*this, b, out);
  Value y = getResult();
  int64_t dim = getDim();
  Value dot = e.unreduce(e.reduce(ReduceKind::sum, e.mul(g[0], y), {dim}),
                         getType(), dim);
  out[0] = e.mul(y, e.sub(g[0], dot));
  return success();
}

LogicalResult GeluOp::buildVJP(OpBuilder &b, ArrayRef<Value> g,
                               SmallVectorImpl<Value> &out) {
  Emitter e = begin(*this, b, out);
  Value x = getOperand();
  Value one = e.splatLike(x, 1.0);
  Value d;
  if (getApproximation() == GeluApproximation::erf) {
    // Phi(x) + x phi(x)
    Value cdf = e.scale(e.add(one, e.unary<ErfOp>(e.scale(x, M_SQRT1_2))), 0.5);
    Value pdf = e.scale(e.unary<ExpOp>(e.scale(e.mul(x, x), -0.5)),
                        1.0 / std::sqrt(2.0 * M_PI));
    d = e.add(cdf, e.mul(x, pdf));
  } else {
    // 0.5 (1 + t) + 0.5 x (1 - t^2) u' with t = tanh(u), u = c (x + k
    // x^3), u' = c (1 + 3 k x^2); in s = logistic(2 u) = 0.5 (1 + t), as
    // the decomposition computes gelu: s + 2 x s (1 - s) u'.
    const double c = std::sqrt(2.0 / M_PI), k = 0.044715;
    Value x2 = e.mul(x, x);
    Value s =
        e.unary<LogisticOp>(e.scale(e.add(x, e.scale(e.mul(x2, x), k)), 2 * c));
    Value du = e.scale(e.add(one, e.scale(x2, 3.0 * k)), c);
    d = e.add(s, e.mul(e.scale(x, 2.0), e.mul(e.mul(s, e.sub(one, s)), du)));
  }
  out[0] = e.mul(g[0], d);
  return success();
}

LogicalResult LayerNormOp::buildVJP(OpBuilder &b, ArrayRef<Value> g,
                                    SmallVectorImpl<Value> &out) {
  // xhat = (x - mean) r, r = rsqrt(var + eps); gh = g w;
  // dx = r (gh - mean(gh) - xhat mean(gh xhat)); dw = sum g xhat; db = sum g
  Emitter e = begin(*this, b, out);
  Value x = getOperand();
  RankedTensorType t = getType();
  int64_t last = t.getRank() - 1;
  Value mean = e.unreduce(e.reduce(ReduceKind::mean, x, {last}), t, last);
  Value xc = e.sub(x, mean);
  Value var = e.reduce(ReduceKind::mean, e.mul(xc, xc), {last});
  Value r = e.unreduce(e.unary<RsqrtOp>(e.add(
                           var, e.splatLike(var, getEps().convertToDouble()))),
                       t, last);
  Value xhat = e.mul(xc, r);
  Value gh = getWeight() ? e.mul(g[0], e.alongLast(getWeight(), t)) : g[0];
  Value m1 = e.unreduce(e.reduce(ReduceKind::mean, gh, {last}), t, last);
  Value m2 =
      e.unreduce(e.reduce(ReduceKind::mean, e.mul(gh, xhat), {last}), t, last);
  out[0] = e.mul(r, e.sub(e.sub(gh, m1), e.mul(xhat, m2)));
  int64_t c = t.getShape().back();
  if (getWeight())
    out[1] = e.sumTo(e.mul(g[0], xhat), leadingDims(t), {c});
  if (getBias())
    out[getWeight() ? 2 : 1] = e.sumTo(g[0], leadingDims(t), {c});
  return success();
}

LogicalResult RmsNormOp::buildVJP(OpBuilder &b, ArrayRef<Value> g,
                                  SmallVectorImpl<Value> &out) {
  // r = rsqrt(mean(x^2) + eps); gh = g w; dx = r gh - x r^3 mean(gh x)
  Emitter e = begin(*this, b, out);
  Value x = getOperand();
  RankedTensorType t = getType();
  int64_t last = t.getRank() - 1;
  Value ms = e.reduce(ReduceKind::mean, e.mul(x, x), {last});
  Value r = e.unreduce(
      e.unary<RsqrtOp>(e.add(ms, e.splatLike(ms, getEps().convertToDouble()))),
      t, last);
  Value gh = getWeight() ? e.mul(g[0], e.alongLast(getWeight(), t)) : g[0];
  Value m =
      e.unreduce(e.reduce(ReduceKind::mean, e.mul(gh, x), {last}), t, last);
  out[0] = e.sub(e.mul(r, gh), e.mul(e.mul(x, e.mul(e.mul(r, r), r)), m));
  if (getWeight())
    out[1] = e.sumTo(e.mul(g[0], e.mul(x, r)), leadingDims(t),
                     {t.getShape().back()});
  return success();
}

/// dx, dW, db of y = x W^T + b.
static void linearVJP(Emitter &e, Value x, Value w, bool hasBias, Value g,
                      Value &dx, Value &dw, Value &db) {
  RankedTensorType xt = Emitter::typeOf(x), wt = Emitter::typeOf(w);
  int64_t in = wt.getDimSize(1), outF = wt.getDimSize(0);
  int64_t rows = Emitter::dimProduct(xt, 0, xt.getRank() - 1);
  Value g2 = e.reshape(g, {rows, outF});
  Value x2 = e.reshape(x, {rows, in});
  dx = e.reshape(e.matmul(g2, w), xt.getShape());
  dw = e.matmul(g2, x2, /*transposeLhs=*/true);
  if (hasBias)
    db = e.reduce(ReduceKind::sum, g2, {0});
}

LogicalResult LinearOp::buildVJP(OpBuilder &b, ArrayRef<Value> g,
                                 SmallVectorImpl<Value> &out) {
  Emitter e = begin(*this, b, out);
  Value db;
  linearVJP(e, getInput(), getWeight(), static_cast<bool>(getBias()), g[0],
            out[0], out[1], db);
  if (getBias())
    out[2] = db;
  return success();
}

LogicalResult LoraLinearOp::buildVJP(OpBuilder &b, ArrayRef<Value> g,
                                     SmallVectorImpl<Value> &out) {
  // y = x W^T + b + s (x A^T) B^T
  Emitter e = begin(*this, b, out);
  Value dx, dw, db;
  linearVJP(e, getInput(), getWeight(), static_cast<bool>(getBias()), g[0], dx,
            dw, db);
  double s = getScale().convertToDouble();
  RankedTensorType xt = getInput().getType();
  int64_t in = xt.getShape().back();
  int64_t rows = Emitter::dimProduct(xt, 0, xt.getRank() - 1);
  int64_t outF = getWeight().getType().getDimSize(0);
  Value x2 = e.reshape(getInput(), {rows, in});
  Value g2 = e.reshape(g[0], {rows, outF});
  Value h = e.matmul(x2, getLoraA(), false, true); // [rows, r]
  Value dh = e.scale(e.matmul(g2, getLoraB()), s); // [rows, r]
  unsigned i = 0;
  out[i++] = e.add(dx, e.reshape(e.matmul(dh, getLoraA()), xt.getShape()));
  out[i++] = dw;
  if (getBias())
    out[i++] = db;
  out[i++] = e.matmul(dh, x2, true);            // dA [r, in]
  out[i++] = e.scale(e.matmul(g2, h, true), s); // dB [out, r]
  return success();
}

LogicalResult CfgCombineOp::buildVJP(OpBuilder &b, ArrayRef<Value> g,
                                     SmallVectorImpl<Value> &out) {
  // y = (1 - s) u + s c over the [u; c] halves.
  Emitter e = begin(*this, b, out);
  double s = getGuidanceScale().convertToDouble();
  RankedTensorType t = Emitter::typeOf(g[0]);
  // A runtime scale (an f64 operand, no cotangent) replaces the attribute;
  // 1 - s in f64, rounded once, as the attribute form folds it.
  Value sv = getGuidanceScaleValue();
  out[0] = ConcatOp::create(
      b, getLoc(),
      ValueRange{e.mul(g[0], e.hyperSplat(t, sv, s, Emitter::oneMinus,
                                          Emitter::oneMinus)),
                 e.mul(g[0], e.hyperSplat(t, sv, s))},
      b.getI64IntegerAttr(0));
  return success();
}

LogicalResult AttentionOp::buildVJP(OpBuilder &b, ArrayRef<Value> g,
                                    SmallVectorImpl<Value> &out) {
  // S = q k^T scale + mask, P = softmax(S), O = P v:
  // dv = P^T dO; dP = dO v^T; dS = P (dP - sum(dP P)); dq = dS k scale;
  // dk = dS^T q scale; dmask = dS summed to the mask's shape.
  // bf16/f16 operands: all of it in f32 (the operands widened exactly, the
  // cotangents rounded once at the end), as the forward op keeps its
  // softmax in f32 (docs/precision.md).
  Emitter e = begin(*this, b, out);
  Location loc = getLoc();
  RankedTensorType qt = getQuery().getType();
  Type element = qt.getElementType();
  // f32, bf16, f16: dq, dk, dv from one op, a library call on the cpu and
  // cuda drivers (or what follows where decompose-attention-grad rewrites
  // it). With a mask, its cotangent still comes from what follows; the
  // rest of it is dead unless something uses the mask's cotangent.
  AttentionGradOp grad;
  if (!element.isF64())
    grad =
        AttentionGradOp::create(b, loc, getQuery(), getKey(), getValue(),
                                getResult(), g[0], getMask(), getScaleAttr());
  auto useGrad = [&] {
    out[0] = grad.getDQuery();
    out[1] = grad.getDKey();
    out[2] = grad.getDValue();
    return success();
  };
  if (grad && !getMask())
    return useGrad();
  bool narrow = element.getIntOrFloatBitWidth() < 32;
  auto widen = [&](Value x) -> Value {
    if (!narrow || !x)
      return x;
    auto t = cast<RankedTensorType>(x.getType());
    return b.createOrFold<CastOp>(loc, t.clone(b.getF32Type()), x);
  };
  auto narrowTo = [&](Value x, Value like) -> Value {
    return narrow ? b.createOrFold<CastOp>(loc, like.getType(), x) : x;
  };
  Value q = widen(getQuery()), k = widen(getKey()), v = widen(getValue());
  Value dO = widen(g[0]);
  double scale = getScale() ? getScale()->convertToDouble()
                            : 1.0 / std::sqrt(double(qt.getDimSize(3)));
  Value s = e.scale(e.matmul(q, k, false, true), scale);
  RankedTensorType st = Emitter::typeOf(s);
  Value mask = getMask();
  SmallVector<int64_t> maskReduced;
  if (mask) {
    RankedTensorType mt = cast<RankedTensorType>(mask.getType());
    SmallVector<int64_t> keep, shape;
    for (int64_t d = 0; d < 4; ++d) {
      if (mt.getDimSize(d) == 1 && st.getDimSize(d) != 1) {
        maskReduced.push_back(d);
      } else {
        keep.push_back(d);
        shape.push_back(mt.getDimSize(d));
      }
    }
    Value full =
        BroadcastInDimOp::create(b, loc, st, e.reshape(widen(mask), shape),
                                 b.getDenseI64ArrayAttr(keep));
    s = e.add(s, full);
  }
  Value p = SoftmaxOp::create(b, loc, s, b.getI64IntegerAttr(3));
  out[2] = narrowTo(e.matmul(p, dO, true, false), getValue());
  Value dp = e.matmul(dO, v, false, true);
  Value dot = e.unreduce(e.reduce(ReduceKind::sum, e.mul(dp, p), {3}), st, 3);
  Value ds = e.mul(p, e.sub(dp, dot));
  out[0] = narrowTo(e.scale(e.matmul(ds, k), scale), getQuery());
  out[1] = narrowTo(e.scale(e.matmul(ds, q, true, false), scale), getKey());
  if (mask) {
    auto mt = cast<RankedTensorType>(mask.getType());
    Value dmask = e.sumTo(ds, maskReduced, mt.getShape());
    out[3] = narrowTo(dmask, mask);
  }
  return grad ? useGrad() : success();
}

//===----------------------------------------------------------------------===//
// Diffusion RL
//===----------------------------------------------------------------------===//

LogicalResult SdeStepOp::buildVJP(OpBuilder &b, ArrayRef<Value> g,
                                  SmallVectorImpl<Value> &out) {
  // mean = cx x + cv v with scalar coefficients of the step
  // (docs/flowgrpo-math.md section 2); log_prob is a row mean of a function of
  // (next - mean).
  Emitter e = begin(*this, b, out);
  Location loc = getLoc();
  RankedTensorType t = getX().getType();
  Type elt = t.getElementType();
  SdeCoefficients coeffs = e.sdeCoefficients(*this);
  bool euler = coeffs.euler;
  Value cx = coeffs.cx, cv = coeffs.cv, q = coeffs.q;
  Value gNext = g[0], gLp = g[1], gMean = g[2];
  // lp is a function of (next - mean); its adjoint reaches the next sample
  // as well as the mean. Given noise, next = mean + q noise, so that part
  // flows on through next: the mean terms cancel and lp moves with the
  // noise only (its value does not depend on x or v).
  Value dMean = gMean;
  Value dNextIn;
  Value next = getNoise() ? getNextSample() : getNext();
  if (gLp && !euler) {
    int64_t rowSize = Emitter::dimProduct(t, 1, t.getRank());
    SmallVector<int64_t> rowDims;
    for (int64_t d = 1; d < t.getRank(); ++d)
      rowDims.push_back(d);
    Value gRow = rowDims.empty()
                     ? gLp
                     : BroadcastInDimOp::create(b, loc, t, gLp,
                                                b.getDenseI64ArrayAttr({0}))
                           .getResult();
    Value diff = e.sub(next, getMean());
    // d lp / d mean: sde: diff / (q^2 D); cps: 2 diff / D.
    Value coef = getType() == SdeType::sde
                     ? e.div(e.scalar(elt, 1.0 / double(rowSize)), e.mul(q, q))
                     : e.scalar(elt, 2.0 / double(rowSize));
    Value dLpMean = e.mul(gRow, e.mul(diff, e.fill(coef, t)));
    dMean = dMean ? e.add(dMean, dLpMean) : dLpMean;
    dNextIn = e.neg(dLpMean);
  }
  // The total adjoint of the next sample.
  Value dNext = gNext;
  if (dNextIn)
    dNext = dNext ? e.add(dNext, dNextIn) : dNextIn;
  if (getNoise() && dNext) {
    // next = mean + q noise
    dMean = dMean ? e.add(dMean, dNext) : dNext;
    out[4] = e.mul(dNext, e.fill(q, t)); // the noise operand
  } else if (getNext()) {
    out[4] = dNext; // the next operand
  }
  if (dMean) {
    out[0] = e.mul(dMean, e.fill(cx, t));
    out[1] = e.mul(dMean, e.fill(cv, t));
  }
  return success();
}

LogicalResult GrpoLossOp::buildVJP(OpBuilder &b, ArrayRef<Value> g,
                                   SmallVectorImpl<Value> &out) {
  // loss = mean_b max(-A r, -A clip(r)) + beta kl; r = exp(lp - old).
  Emitter e = begin(*this, b, out);
  Location loc = getLoc();
  RankedTensorType t = getLogProb().getType();
  Type elt = t.getElementType();
  int64_t n = t.getDimSize(0);
  double clip = getClipRange().convertToDouble();
  double advClip = getAdvClipMax().convertToDouble();
  double beta = getBeta().convertToDouble();
  // Runtime hyper-parameters (f64 operands, no cotangents) replace the
  // attributes, with the same constants as omni-decompose's pattern.
  Value clipV = getClipRangeValue(), advClipV = getAdvClipMaxValue(),
        betaV = getBetaValue();
  using E = Emitter;
  Value gLoss = g[0], gApprox = g[1], gKl = g[3];
  Value logRatio = e.sub(getLogProb(), getOldLogProb());
  Value dLp;
  if (gLoss) {
    Value advMax = e.hyperSplat(t, advClipV, advClip);
    Value adv = MaxOp::create(
        b, loc, MinOp::create(b, loc, getAdvantages(), advMax),
        e.hyperSplat(t, advClipV, advClip, E::negated, E::negated));
    Value r = e.unary<ExpOp>(logRatio);
    Value clipped = MaxOp::create(
        b, loc,
        MinOp::create(b, loc, r,
                      e.hyperSplat(t, clipV, clip, E::onePlus, E::onePlus)),
        e.hyperSplat(t, clipV, clip, E::oneMinus, E::oneMinus));
    Value negAdv = e.neg(adv);
    // The unclipped branch is the max (ties included): its derivative
    // reaches the ratio; the clipped branch is constant in lp.
    Value unclipped = e.compare(CompareDirection::ge, e.mul(negAdv, r),
                                e.mul(negAdv, clipped));
    Value gB = e.fill(e.scale(gLoss, 1.0 / double(n)), t);
    Value d = e.mul(gB, e.mul(negAdv, r));
    dLp = e.select(unclipped, d, e.zerosLike(d));
    // Advantages: -(chosen ratio), through the clamp where it is inactive.
    Value chosen = e.select(unclipped, r, clipped);
    Value inRange =
        e.compare(CompareDirection::le, e.unary<AbsOp>(getAdvantages()),
                  advClipV ? advMax : e.splat(t, advClip));
    Value dAdv = e.neg(e.mul(gB, chosen));
    out[2] = e.select(inRange, dAdv, e.zerosLike(dAdv));
  }
  if (gApprox) {
    // approx_kl = mean(d^2) / 2
    Value d = e.mul(e.fill(e.scale(gApprox, 1.0 / double(n)), t), logRatio);
    dLp = dLp ? e.add(dLp, d) : d;
  }
  if (dLp) {
    out[0] = dLp;
    out[1] = e.neg(dLp);
  }
  // KL: kl = mean_b(mean_j (mu - ref)^2 / (2 std'^2)).
  Value gKlTotal = gKl;
  if (gLoss && (betaV || beta != 0.0)) {
    Value w = betaV ? e.mul(gLoss, e.hyperParam(betaV, beta, elt))
                    : e.scale(gLoss, beta);
    gKlTotal = gKlTotal ? e.add(gKlTotal, w) : w;
  }
  if (getMean() && gKlTotal) {
    RankedTensorType mt = cast<RankedTensorType>(getMean().getType());
    double rowSize = double(mt.getNumElements()) / double(n);
    // dt is given exactly for the exact form of an sde step (C4): q = std
    // sqrt(-dt); a cps step's std already is its transition std.
    Value std = getStd();
    if (getDt())
      std = e.mul(std, e.unary<SqrtOp>(e.neg(getDt())));
    Value coef =
        e.div(e.scale(gKlTotal, 1.0 / (double(n) * rowSize)), e.mul(std, std));
    Value diff = e.sub(getMean(), getRefMean());
    Value d = e.mul(diff, e.fill(coef, mt));
    out[3] = d;
    out[4] = e.neg(d);
    // kl is proportional to 1 / std^2 (and to 1 / -dt in the exact form):
    // d kl / d std = -2 kl / std, d kl / d dt = -kl / dt. A std or dt that
    // depends on a trained value must not silently get no gradient.
    // kl = mean((mean - ref)^2) / (2 std'^2), every row having one size.
    Value kl =
        e.div(e.scale(e.meanAll(e.mul(diff, diff)), 0.5), e.mul(std, std));
    Value gKlValue = e.mul(gKlTotal, kl);
    out[5] = e.neg(e.div(e.scale(gKlValue, 2.0), getStd()));
    if (getDt())
      out[6] = e.neg(e.div(gKlValue, getDt()));
  }
  return success();
}
