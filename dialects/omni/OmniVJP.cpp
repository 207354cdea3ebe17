//===- OmniVJP.cpp - VJP rules of the omni primitives ---------------------===//
//
// The vector-Jacobian products of the elementwise, shape, reduction and
// contraction primitives (VJPOpInterface). Each rule receives the adjoints
// of the op's results and emits the adjoints of its operands in omni
// primitives; omni-autodiff sums them over uses. The rules of composite and
// diffusion RL ops are in OmniVJPComposite.cpp. Gradient checks against
// finite differences are in passes/AutodiffTest.cpp.
//
//===----------------------------------------------------------------------===//

#include "dialects/omni/OmniEmitter.h"
#include "dialects/omni/OmniOps.h"

#include <cmath>

using namespace mlir;
using namespace mlir::omni;

/// Starts a rule: one adjoint slot per operand, all "no gradient".
static Emitter begin(Operation *op, OpBuilder &b, SmallVectorImpl<Value> &out) {
  out.assign(op->getNumOperands(), Value());
  return Emitter(b, op->getLoc());
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

LogicalResult NegOp::buildVJP(OpBuilder &b, ArrayRef<Value> g,
                              SmallVectorImpl<Value> &out) {
  Emitter e = begin(*this, b, out);
  out[0] = e.neg(g[0]);
  return success();
}

LogicalResult AbsOp::buildVJP(OpBuilder &b, ArrayRef<Value> g,
                              SmallVectorImpl<Value> &out) {
  Emitter e = begin(*this, b, out);
  out[0] = e.mul(g[0], e.unary<SignOp>(getOperand()));
  return success();
}

// Piecewise constant: no gradient.
LogicalResult SignOp::buildVJP(OpBuilder &b, ArrayRef<Value>,
                               SmallVectorImpl<Value> &out) {
  begin(*this, b, out);
  return success();
}

LogicalResult FloorOp::buildVJP(OpBuilder &b, ArrayRef<Value>,
                                SmallVectorImpl<Value> &out) {
  begin(*this, b, out);
  return success();
}

LogicalResult ExpOp::buildVJP(OpBuilder &b, ArrayRef<Value> g,
                              SmallVectorImpl<Value> &out) {
  Emitter e = begin(*this, b, out);
  out[0] = e.mul(g[0], getResult());
  return success();
}

LogicalResult LogOp::buildVJP(OpBuilder &b, ArrayRef<Value> g,
                              SmallVectorImpl<Value> &out) {
  Emitter e = begin(*this, b, out);
  out[0] = e.div(g[0], getOperand());
  return success();
}

LogicalResult SqrtOp::buildVJP(OpBuilder &b, ArrayRef<Value> g,
                               SmallVectorImpl<Value> &out) {
  Emitter e = begin(*this, b, out);
  out[0] = e.div(e.scale(g[0], 0.5), getResult());
  return success();
}

LogicalResult RsqrtOp::buildVJP(OpBuilder &b, ArrayRef<Value> g,
                                SmallVectorImpl<Value> &out) {
  // d/dx x^(-1/2) = -1/2 y^3
  Emitter e = begin(*this, b, out);
  Value y = getResult();
  out[0] = e.mul(g[0], e.scale(e.mul(e.mul(y, y), y), -0.5));
  return success();
}

LogicalResult TanhOp::buildVJP(OpBuilder &b, ArrayRef<Value> g,
                               SmallVectorImpl<Value> &out) {
  Emitter e = begin(*this, b, out);
  Value y = getResult();
  out[0] = e.mul(g[0], e.sub(e.splatLike(y, 1.0), e.mul(y, y)));
  return success();
}

LogicalResult SinOp::buildVJP(OpBuilder &b, ArrayRef<Value> g,
                              SmallVectorImpl<Value> &out) {
  Emitter e = begin(*this, b, out);
  out[0] = e.mul(g[0], e.unary<CosOp>(getOperand()));
  return success();
}

LogicalResult CosOp::buildVJP(OpBuilder &b, ArrayRef<Value> g,
                              SmallVectorImpl<Value> &out) {
  Emitter e = begin(*this, b, out);
  out[0] = e.neg(e.mul(g[0], e.unary<SinOp>(getOperand())));
  return success();
}

LogicalResult ErfOp::buildVJP(OpBuilder &b, ArrayRef<Value> g,
                              SmallVectorImpl<Value> &out) {
  // d/dx erf(x) = 2/sqrt(pi) exp(-x^2)
  Emitter e = begin(*this, b, out);
  Value x = getOperand();
  Value d = e.unary<ExpOp>(e.neg(e.mul(x, x)));
  out[0] = e.mul(g[0], e.scale(d, 2.0 / std::sqrt(M_PI)));
  return success();
}

LogicalResult LogisticOp::buildVJP(OpBuilder &b, ArrayRef<Value> g,
                                   SmallVectorImpl<Value> &out) {
  Emitter e = begin(*this, b, out);
  Value y = getResult();
  out[0] = e.mul(g[0], e.mul(y, e.sub(e.splatLike(y, 1.0), y)));
  return success();
}

LogicalResult SiluOp::buildVJP(OpBuilder &b, ArrayRef<Value> g,
                               SmallVectorImpl<Value> &out) {
  // d/dx x s(x) = s (1 + x (1 - s))
  Emitter e = begin(*this, b, out);
  Value x = getOperand();
  Value s = e.unary<LogisticOp>(x);
  Value one = e.splatLike(x, 1.0);
  out[0] = e.mul(g[0], e.mul(s, e.add(one, e.mul(x, e.sub(one, s)))));
  return success();
}

LogicalResult AddOp::buildVJP(OpBuilder &b, ArrayRef<Value> g,
                              SmallVectorImpl<Value> &out) {
  begin(*this, b, out);
  out[0] = g[0];
  out[1] = g[0];
  return success();
}

LogicalResult SubOp::buildVJP(OpBuilder &b, ArrayRef<Value> g,
                              SmallVectorImpl<Value> &out) {
  Emitter e = begin(*this, b, out);
  out[0] = g[0];
  out[1] = e.neg(g[0]);
  return success();
}

LogicalResult MulOp::buildVJP(OpBuilder &b, ArrayRef<Value> g,
                              SmallVectorImpl<Value> &out) {
  Emitter e = begin(*this, b, out);
  out[0] = e.mul(g[0], getRhs());
  out[1] = e.mul(g[0], getLhs());
  return success();
}

LogicalResult DivOp::buildVJP(OpBuilder &b, ArrayRef<Value> g,
                              SmallVectorImpl<Value> &out) {
  Emitter e = begin(*this, b, out);
  out[0] = e.div(g[0], getRhs());
  out[1] = e.neg(e.div(e.mul(g[0], getResult()), getRhs()));
  return success();
}

/// max/min: the adjoint goes to the chosen operand (lhs on ties).
static void chooseVJP(Emitter &e, CompareDirection lhsWins, Value lhs,
                      Value rhs, Value g, SmallVectorImpl<Value> &out) {
  Value pick = e.compare(lhsWins, lhs, rhs);
  Value zero = e.zerosLike(g);
  out[0] = e.select(pick, g, zero);
  out[1] = e.select(pick, zero, g);
}

LogicalResult MaxOp::buildVJP(OpBuilder &b, ArrayRef<Value> g,
                              SmallVectorImpl<Value> &out) {
  Emitter e = begin(*this, b, out);
  chooseVJP(e, CompareDirection::ge, getLhs(), getRhs(), g[0], out);
  return success();
}

LogicalResult MinOp::buildVJP(OpBuilder &b, ArrayRef<Value> g,
                              SmallVectorImpl<Value> &out) {
  Emitter e = begin(*this, b, out);
  chooseVJP(e, CompareDirection::le, getLhs(), getRhs(), g[0], out);
  return success();
}

LogicalResult PowOp::buildVJP(OpBuilder &b, ArrayRef<Value> g,
                              SmallVectorImpl<Value> &out) {
  // d/dx x^y = y x^(y-1); d/dy x^y = x^y log x
  Emitter e = begin(*this, b, out);
  Value x = getLhs(), y = getRhs();
  Value xm1 = PowOp::create(b, getLoc(), x, e.sub(y, e.splatLike(y, 1.0)));
  out[0] = e.mul(g[0], e.mul(y, xm1));
  out[1] = e.mul(g[0], e.mul(getResult(), e.unary<LogOp>(x)));
  return success();
}

LogicalResult SelectOp::buildVJP(OpBuilder &b, ArrayRef<Value> g,
                                 SmallVectorImpl<Value> &out) {
  Emitter e = begin(*this, b, out);
  Value zero = e.zerosLike(g[0]);
  out[1] = e.select(getPred(), g[0], zero);
  out[2] = e.select(getPred(), zero, g[0]);
  return success();
}

LogicalResult CastOp::buildVJP(OpBuilder &b, ArrayRef<Value> g,
                               SmallVectorImpl<Value> &out) {
  begin(*this, b, out);
  RankedTensorType in = getOperand().getType();
  if (isa<FloatType>(in.getElementType()))
    out[0] = b.createOrFold<CastOp>(getLoc(), in, g[0]);
  return success();
}

LogicalResult ShardOp::buildVJP(OpBuilder &b, ArrayRef<Value> g,
                                SmallVectorImpl<Value> &out) {
  begin(*this, b, out);
  out[0] = g[0];
  return success();
}

//===----------------------------------------------------------------------===//
// Shape ops
//===----------------------------------------------------------------------===//

LogicalResult BroadcastInDimOp::buildVJP(OpBuilder &b, ArrayRef<Value> g,
                                         SmallVectorImpl<Value> &out) {
  // Sum over the new dimensions and the expanded size-1 dimensions.
  Emitter e = begin(*this, b, out);
  RankedTensorType in = getOperand().getType(), res = getType();
  SmallVector<int64_t> reduced;
  for (int64_t d = 0; d < res.getRank(); ++d) {
    auto it = llvm::find(getDims(), d);
    if (it == getDims().end() ||
        (in.getDimSize(it - getDims().begin()) == 1 && res.getDimSize(d) != 1))
      reduced.push_back(d);
  }
  out[0] = e.sumTo(g[0], reduced, in.getShape());
  return success();
}

LogicalResult ReshapeOp::buildVJP(OpBuilder &b, ArrayRef<Value> g,
                                  SmallVectorImpl<Value> &out) {
  Emitter e = begin(*this, b, out);
  out[0] = e.reshape(g[0], getOperand().getType().getShape());
  return success();
}

LogicalResult TransposeOp::buildVJP(OpBuilder &b, ArrayRef<Value> g,
                                    SmallVectorImpl<Value> &out) {
  Emitter e = begin(*this, b, out);
  SmallVector<int64_t> inverse(getPermutation().size());
  for (auto [i, p] : llvm::enumerate(getPermutation()))
    inverse[p] = i;
  out[0] = e.transpose(g[0], inverse);
  return success();
}

/// Spreads `x` along `dim` with `stride - 1` zeros after every element
/// (length n -> n * stride): the adjoint of a strided read.
static Value interleaveZeros(Emitter &e, Value x, int64_t dim, int64_t stride) {
  if (stride == 1)
    return x;
  RankedTensorType t = Emitter::typeOf(x);
  SmallVector<int64_t> split(t.getShape());
  split.insert(split.begin() + dim + 1, 1);
  Value col = e.reshape(x, split);
  SmallVector<int64_t> low(split.size(), 0), high(split.size(), 0);
  high[dim + 1] = stride - 1;
  Value padded =
      PadOp::create(e.b, e.loc, col, e.b.getDenseI64ArrayAttr(low),
                    e.b.getDenseI64ArrayAttr(high), e.b.getF64FloatAttr(0.0));
  SmallVector<int64_t> merged(t.getShape());
  merged[dim] *= stride;
  return e.reshape(padded, merged);
}

/// Places `x` (the values read by a strided slice) back at their positions
/// in a zero tensor of `shape`.
static Value scatterSlice(Emitter &e, Value x, ArrayRef<int64_t> start,
                          ArrayRef<int64_t> strides, ArrayRef<int64_t> shape) {
  Value y = x;
  SmallVector<int64_t> low, high;
  for (size_t d = 0; d < shape.size(); ++d) {
    y = interleaveZeros(e, y, d, strides[d]);
    int64_t len = Emitter::typeOf(y).getDimSize(d);
    int64_t keep = std::min(len, shape[d] - start[d]);
    if (keep != len) {
      RankedTensorType t = Emitter::typeOf(y);
      SmallVector<int64_t> s(t.getRank(), 0), l(t.getShape()),
          st(t.getRank(), 1);
      l[d] = keep;
      y = SliceOp::create(e.b, e.loc, y, s, l, st);
    }
    low.push_back(start[d]);
    high.push_back(shape[d] - start[d] - keep);
  }
  return e.b.createOrFold<PadOp>(e.loc, y, e.b.getDenseI64ArrayAttr(low),
                                 e.b.getDenseI64ArrayAttr(high),
                                 e.b.getF64FloatAttr(0.0));
}

LogicalResult SliceOp::buildVJP(OpBuilder &b, ArrayRef<Value> g,
                                SmallVectorImpl<Value> &out) {
  Emitter e = begin(*this, b, out);
  out[0] = scatterSlice(e, g[0], getStart(), getStrides(),
                        getOperand().getType().getShape());
  return success();
}

LogicalResult ConcatOp::buildVJP(OpBuilder &b, ArrayRef<Value> g,
                                 SmallVectorImpl<Value> &out) {
  begin(*this, b, out);
  int64_t dim = getDim(), offset = 0;
  RankedTensorType t = getType();
  for (auto [i, input] : llvm::enumerate(getInputs())) {
    int64_t size = cast<RankedTensorType>(input.getType()).getDimSize(dim);
    SmallVector<int64_t> start(t.getRank(), 0), limit(t.getShape()),
        strides(t.getRank(), 1);
    start[dim] = offset;
    limit[dim] = offset + size;
    out[i] = b.createOrFold<SliceOp>(
        getLoc(), g[0], b.getDenseI64ArrayAttr(start),
        b.getDenseI64ArrayAttr(limit), b.getDenseI64ArrayAttr(strides));
    offset += size;
  }
  return success();
}

LogicalResult PadOp::buildVJP(OpBuilder &b, ArrayRef<Value> g,
                              SmallVectorImpl<Value> &out) {
  begin(*this, b, out);
  RankedTensorType in = getOperand().getType();
  SmallVector<int64_t> limit, strides(in.getRank(), 1);
  for (int64_t d = 0; d < in.getRank(); ++d)
    limit.push_back(getLow()[d] + in.getDimSize(d));
  out[0] = b.createOrFold<SliceOp>(getLoc(), g[0], getLowAttr(),
                                   b.getDenseI64ArrayAttr(limit),
                                   b.getDenseI64ArrayAttr(strides));
  return success();
}

LogicalResult ReduceOp::buildVJP(OpBuilder &b, ArrayRef<Value> g,
                                 SmallVectorImpl<Value> &out) {
  Emitter e = begin(*this, b, out);
  RankedTensorType in = getOperand().getType();
  if (!isa<FloatType>(in.getElementType()))
    return success();
  SmallVector<int64_t> kept;
  int64_t count = 1;
  for (int64_t d = 0; d < in.getRank(); ++d) {
    if (llvm::is_contained(getDims(), d))
      count *= in.getDimSize(d);
    else
      kept.push_back(d);
  }
  auto spread = [&](Value v) {
    return BroadcastInDimOp::create(b, getLoc(), in, v,
                                    b.getDenseI64ArrayAttr(kept));
  };
  Value gb = spread(g[0]);
  switch (getKind()) {
  case ReduceKind::sum:
    out[0] = gb;
    break;
  case ReduceKind::mean:
    out[0] = e.scale(gb, 1.0 / static_cast<double>(count));
    break;
  case ReduceKind::max:
  case ReduceKind::min: {
    // Every element equal to the extremum receives the adjoint.
    Value hit =
        e.compare(CompareDirection::eq, getOperand(), spread(getResult()));
    out[0] = e.select(hit, gb, e.zerosLike(gb));
    break;
  }
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

LogicalResult MatmulOp::buildVJP(OpBuilder &b, ArrayRef<Value> g,
                                 SmallVectorImpl<Value> &out) {
  Emitter e = begin(*this, b, out);
  Value lhs = getLhs(), rhs = getRhs(), d = g[0];
  bool tl = getTransposeLhs(), tr = getTransposeRhs();
  RankedTensorType lt = getLhs().getType(), rt = getRhs().getType();
  // C = op(A) op(B). Stored adjoints, case by case:
  //   dA = tl ? op(B) dC^T : dC op(B)^T
  //   dB = tr ? dC^T op(A) : op(A)^T dC
  bool sharedRhs = rt.getRank() == 2 && lt.getRank() > 2;
  // Swaps the last two dimensions of a batched operand.
  auto swapLast = [&](Value v) {
    SmallVector<int64_t> perm;
    for (int64_t i = 0; i < lt.getRank() - 2; ++i)
      perm.push_back(i);
    perm.push_back(lt.getRank() - 1);
    perm.push_back(lt.getRank() - 2);
    return e.transpose(v, perm);
  };
  if (!tl)
    out[0] = e.matmul(d, rhs, false, !tr);
  else if (!sharedRhs)
    out[0] = e.matmul(rhs, d, tr, true);
  else
    // op(B) dC^T would put the rank-2 operand on the left, which matmul
    // does not broadcast (C2): build (dC op(B)^T)^T instead.
    out[0] = swapLast(e.matmul(d, rhs, false, !tr));
  // A rank-2 rhs is shared by every batch: fold the batch into the rows.
  if (sharedRhs) {
    if (tl)
      lhs = swapLast(lhs);
    RankedTensorType at = Emitter::typeOf(lhs), dt = Emitter::typeOf(d);
    int64_t rows = Emitter::dimProduct(at, 0, at.getRank() - 1);
    lhs = e.reshape(lhs, {rows, at.getShape().back()});
    d = e.reshape(d, {rows, dt.getShape().back()});
    tl = false;
  }
  if (!tr)
    out[1] = e.matmul(lhs, d, !tl, false);
  else
    out[1] = e.matmul(d, lhs, true, tl);
  return success();
}

LogicalResult Conv2dOp::buildVJP(OpBuilder &b, ArrayRef<Value> g,
                                 SmallVectorImpl<Value> &out) {
  Emitter e = begin(*this, b, out);
  Location loc = getLoc();
  RankedTensorType in = getInput().getType(), w = getFilter().getType();
  ArrayRef<int64_t> s = getStrides(), p = getPadding(), dl = getDilation();
  Value d = g[0];

  // dInput: the adjoint spread back to stride 1, padded so that a stride-1
  // convolution with the flipped, channel-swapped filter lands on [H, W].
  Value spread = d;
  for (int i = 0; i < 2; ++i)
    spread = interleaveZeros(e, spread, 2 + i, s[i]);
  RankedTensorType st = Emitter::typeOf(spread);
  SmallVector<int64_t> low(4, 0), high(4, 0), cut(st.getShape());
  for (int i = 0; i < 2; ++i) {
    int64_t k = dl[i] * (w.getDimSize(2 + i) - 1);
    int64_t lo = k - p[i];
    // The spread ends with s-1 zeros past the last output: drop them first.
    int64_t used = (Emitter::typeOf(d).getDimSize(2 + i) - 1) * s[i] + 1;
    cut[2 + i] = used;
    int64_t hi = in.getDimSize(2 + i) + k - lo - used;
    low[2 + i] = lo;
    high[2 + i] = hi;
  }
  spread = b.createOrFold<SliceOp>(
      loc, spread, b.getDenseI64ArrayAttr({0, 0, 0, 0}),
      b.getDenseI64ArrayAttr(cut), b.getDenseI64ArrayAttr({1, 1, 1, 1}));
  // Negative padding means cropping.
  SmallVector<int64_t> cropStart(4, 0),
      cropLimit(Emitter::typeOf(spread).getShape());
  for (int i = 2; i < 4; ++i) {
    if (low[i] < 0) {
      cropStart[i] = -low[i];
      low[i] = 0;
    }
    if (high[i] < 0) {
      cropLimit[i] += high[i];
      high[i] = 0;
    }
  }
  spread = b.createOrFold<SliceOp>(
      loc, spread, b.getDenseI64ArrayAttr(cropStart),
      b.getDenseI64ArrayAttr(cropLimit), b.getDenseI64ArrayAttr({1, 1, 1, 1}));
  spread = b.createOrFold<PadOp>(loc, spread, b.getDenseI64ArrayAttr(low),
                                 b.getDenseI64ArrayAttr(high),
                                 b.getF64FloatAttr(0.0));
  // Flip the filter spatially (reverse via a strided gather is not a
  // primitive; reverse by transposing through a reversal matrix instead).
  Value flipped = getFilter();
  for (int i = 0; i < 2; ++i) {
    int64_t k = w.getDimSize(2 + i);
    if (k == 1)
      continue;
    SmallVector<double> rev(k * k, 0.0);
    for (int64_t j = 0; j < k; ++j)
      rev[j * k + (k - 1 - j)] = 1.0;
    auto revType = RankedTensorType::get({k, k}, w.getElementType());
    SmallVector<Attribute> values;
    for (double v : rev)
      values.push_back(FloatAttr::get(w.getElementType(), v));
    Value revMat =
        ConstantOp::create(b, loc, DenseElementsAttr::get(revType, values));
    // Move dimension 2+i last, multiply by the reversal, move it back.
    SmallVector<int64_t> perm = {0, 1, 2, 3};
    std::swap(perm[2 + i], perm[3]);
    Value moved = e.transpose(flipped, perm);
    flipped = e.transpose(e.matmul(moved, revMat), perm);
  }
  Value swapped = e.transpose(flipped, {1, 0, 2, 3});
  out[0] =
      Conv2dOp::create(b, loc, spread, swapped, b.getDenseI64ArrayAttr({1, 1}),
                       b.getDenseI64ArrayAttr({0, 0}), getDilationAttr());

  // dFilter[o, c, kh, kw] = sum_{n,i,j} d[n,o,i,j] xpad[n,c,i*s+kh*dl,...]:
  // a convolution of the padded input (channels <-> batch) with the adjoint
  // as the filter, the stride and dilation exchanging roles.
  Value xs = e.transpose(getInput(), {1, 0, 2, 3});
  Value ds = e.transpose(d, {1, 0, 2, 3});
  Value corr = Conv2dOp::create(b, loc, xs, ds, getDilationAttr(),
                                getPaddingAttr(), getStridesAttr());
  RankedTensorType ct = Emitter::typeOf(corr);
  if (ct.getDimSize(2) != w.getDimSize(2) ||
      ct.getDimSize(3) != w.getDimSize(3))
    corr = b.createOrFold<SliceOp>(
        loc, corr, b.getDenseI64ArrayAttr({0, 0, 0, 0}),
        b.getDenseI64ArrayAttr({ct.getDimSize(0), ct.getDimSize(1),
                                w.getDimSize(2), w.getDimSize(3)}),
        b.getDenseI64ArrayAttr({1, 1, 1, 1}));
  out[1] = e.transpose(corr, {1, 0, 2, 3});
  return success();
}
