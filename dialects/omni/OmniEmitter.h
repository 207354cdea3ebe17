//===- OmniEmitter.h - build omni primitives tersely ------------*- C++ -*-===//
//
// A small helper that emits omni primitives at one location: the vocabulary
// in which omni-decompose's patterns and the ops' VJP rules are written.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_DIALECTS_OMNI_OMNIEMITTER_H
#define OMNI_DIALECTS_OMNI_OMNIEMITTER_H

#include "dialects/omni/OmniOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"

#include <cmath>

namespace mlir::omni {

/// The per-step scalars of omni.sde_step (docs/flowgrpo-math.md section 2), as
/// 0-D tensors of the latents' element type: the transition mean is `cx * x +
/// cv * v`, the next sample `mean + q * noise`, and `std` is the op's std
/// result. `euler` marks type ode or noise level 0 (no density).
struct SdeCoefficients {
  Value s, sNext, dt, cx, cv, q, std;
  bool euler = false;
};

/// Emits primitives at one location; the vocabulary of the decompositions.
class Emitter {
public:
  Emitter(OpBuilder &builder, Location loc) : b(builder), loc(loc) {}

  /// A constant of type `t` with every element `v`.
  Value splat(RankedTensorType t, double v) {
    Attribute elt = isa<FloatType>(t.getElementType())
                        ? Attribute(FloatAttr::get(t.getElementType(), v))
                        : Attribute(IntegerAttr::get(t.getElementType(),
                                                     static_cast<int64_t>(v)));
    return ConstantOp::create(b, loc, DenseElementsAttr::get(t, elt));
  }
  Value splatLike(Value like, double v) { return splat(typeOf(like), v); }

  Value add(Value x, Value y) { return AddOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return SubOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return MulOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return DivOp::create(b, loc, x, y); }
  Value scale(Value x, double v) { return mul(x, splatLike(x, v)); }

  /// Reduces `dims` of `x` away.
  Value reduce(ReduceKind kind, Value x, ArrayRef<int64_t> dims) {
    return ReduceOp::create(b, loc, ReduceKindAttr::get(b.getContext(), kind),
                            x, b.getDenseI64ArrayAttr(dims));
  }

  /// Broadcasts `x`, which is `to` with dimension `dim` removed, back to `to`.
  Value unreduce(Value x, RankedTensorType to, int64_t dim) {
    SmallVector<int64_t> dims;
    for (int64_t d = 0; d < to.getRank(); ++d)
      if (d != dim)
        dims.push_back(d);
    return BroadcastInDimOp::create(b, loc, to, x,
                                    b.getDenseI64ArrayAttr(dims));
  }

  /// Broadcasts a 1-D per-feature vector along the last dimension of `to`.
  Value alongLast(Value v, RankedTensorType to) {
    return BroadcastInDimOp::create(b, loc, to, v,
                                    b.getDenseI64ArrayAttr({to.getRank() - 1}));
  }

  /// x W^T + b for `input` [..., in] and `weight` [out, in].
  Value linear(Value input, Value weight, Value bias) {
    RankedTensorType in = typeOf(input);
    Value x = input;
    if (in.getRank() == 1)
      x = ReshapeOp::create(b, loc, in.clone({1, in.getDimSize(0)}), x);
    Value y = MatmulOp::create(b, loc, x, weight, /*transpose_lhs=*/false,
                               /*transpose_rhs=*/true);
    if (in.getRank() == 1)
      y = ReshapeOp::create(b, loc, in.clone({typeOf(weight).getDimSize(0)}),
                            y);
    if (bias)
      y = add(y, alongLast(bias, typeOf(y)));
    return y;
  }

  /// A 0-D tensor of `elt` with value `v`.
  Value scalar(Type elt, double v) {
    return splat(RankedTensorType::get({}, elt), v);
  }

  /// Broadcasts a 0-D tensor to `to`.
  Value fill(Value scalar, RankedTensorType to) {
    return BroadcastInDimOp::create(b, loc, to, scalar,
                                    b.getDenseI64ArrayAttr({}));
  }

  /// `sigmas[index]` as a 0-D tensor of element type `elt`.
  Value sigmaAt(Value sigmas, Value index, Type elt) {
    Value s = tensor::ExtractOp::create(b, loc, sigmas, ValueRange{index});
    Value t = tensor::FromElementsOp::create(
        b, loc, RankedTensorType::get({}, s.getType()), ValueRange{s});
    return b.createOrFold<CastOp>(loc, RankedTensorType::get({}, elt), t);
  }

  Value index(int64_t v) { return arith::ConstantIndexOp::create(b, loc, v); }

  /// A scalar hyper-parameter as a 0-D tensor of `elt`: the f64 operand
  /// `value` rounded once to `elt` when given, else the constant `attr`
  /// (rounded by FloatAttr the same way), so equal values give equal bits
  /// (docs/recipes.md section 11). `derive`, when given, maps the f64
  /// value before the rounding (emitted in f64 on the operand, folded in
  /// double on the attribute: the same IEEE operations).
  Value hyperParam(Value value, double attr, Type elt,
                   double (*fold)(double) = nullptr,
                   Value (*derive)(Emitter &, Value) = nullptr) {
    if (!value)
      return scalar(elt, fold ? fold(attr) : attr);
    Value v = derive ? derive(*this, value) : value;
    return b.createOrFold<CastOp>(loc, RankedTensorType::get({}, elt), v);
  }
  /// hyperParam() filled to `t`; without an operand, splat() of the folded
  /// attribute (the constant the attribute form always emitted).
  Value hyperSplat(RankedTensorType t, Value value, double attr,
                   double (*fold)(double) = nullptr,
                   Value (*derive)(Emitter &, Value) = nullptr) {
    if (!value)
      return splat(t, fold ? fold(attr) : attr);
    return fill(hyperParam(value, attr, t.getElementType(), fold, derive), t);
  }
  /// 1 + x, 1 - x and -x on an f64 hyper-parameter, for hyperParam's
  /// `fold` and `derive` (grpo_loss's clip bounds, cfg_combine's VJP).
  static double onePlus(double x) { return 1.0 + x; }
  static double oneMinus(double x) { return 1.0 - x; }
  static double negated(double x) { return -x; }
  static Value onePlus(Emitter &e, Value x) {
    return e.add(e.scalar(typeOf(x).getElementType(), 1.0), x);
  }
  static Value oneMinus(Emitter &e, Value x) {
    return e.sub(e.scalar(typeOf(x).getElementType(), 1.0), x);
  }
  static Value negated(Emitter &e, Value x) { return e.neg(x); }

  /// Mean over every dimension but the first: one value per batch row.
  Value rowMean(Value x) {
    SmallVector<int64_t> dims;
    for (int64_t d = 1; d < typeOf(x).getRank(); ++d)
      dims.push_back(d);
    return b.createOrFold<ReduceOp>(
        loc, ReduceKindAttr::get(b.getContext(), ReduceKind::mean), x,
        b.getDenseI64ArrayAttr(dims));
  }

  /// Mean over every dimension.
  Value meanAll(Value x) {
    SmallVector<int64_t> dims;
    for (int64_t d = 0; d < typeOf(x).getRank(); ++d)
      dims.push_back(d);
    return b.createOrFold<ReduceOp>(
        loc, ReduceKindAttr::get(b.getContext(), ReduceKind::mean), x,
        b.getDenseI64ArrayAttr(dims));
  }

  Value sumAll(Value x) {
    SmallVector<int64_t> dims;
    for (int64_t d = 0; d < typeOf(x).getRank(); ++d)
      dims.push_back(d);
    return b.createOrFold<ReduceOp>(
        loc, ReduceKindAttr::get(b.getContext(), ReduceKind::sum), x,
        b.getDenseI64ArrayAttr(dims));
  }

  template <typename OpT> Value unary(Value x) {
    return OpT::create(b, loc, x);
  }
  Value neg(Value x) { return NegOp::create(b, loc, x); }
  Value select(Value pred, Value onTrue, Value onFalse) {
    return SelectOp::create(b, loc, pred, onTrue, onFalse);
  }
  Value compare(CompareDirection dir, Value x, Value y) {
    return CompareOp::create(
        b, loc, CompareDirectionAttr::get(b.getContext(), dir), x, y);
  }
  Value matmul(Value x, Value y, bool transposeLhs = false,
               bool transposeRhs = false) {
    return MatmulOp::create(b, loc, x, y, transposeLhs, transposeRhs);
  }
  Value reshape(Value x, ArrayRef<int64_t> shape) {
    return b.createOrFold<ReshapeOp>(loc, typeOf(x).clone(shape), x);
  }
  Value transpose(Value x, ArrayRef<int64_t> perm) {
    return b.createOrFold<TransposeOp>(loc, x, b.getDenseI64ArrayAttr(perm));
  }
  Value zerosLike(Value x) { return splatLike(x, 0.0); }

  /// Sums `x` over `dims` and reshapes the result to `shape` (the reverse of
  /// a broadcast: the adjoint of a broadcast operand).
  Value sumTo(Value x, ArrayRef<int64_t> dims, ArrayRef<int64_t> shape) {
    Value s = dims.empty() ? x : reduce(ReduceKind::sum, x, dims);
    return reshape(s, shape);
  }

  /// Builds the coefficients of `op`'s step (shared by omni-decompose and
  /// the op's VJP rule, so both use exactly the same formulas).
  SdeCoefficients sdeCoefficients(SdeStepOp op) {
    Type elt = typeOf(op.getX()).getElementType();
    SdeCoefficients c;
    c.s = sigmaAt(op.getSigmas(), op.getStep(), elt);
    c.sNext =
        sigmaAt(op.getSigmas(),
                arith::AddIOp::create(b, loc, op.getStep(), index(1)), elt);
    c.dt = sub(c.sNext, c.s);
    Value one = scalar(elt, 1.0);
    double a = op.getNoiseLevel().convertToDouble();
    // The runtime noise level (an f64 operand) replaces the attribute; it
    // is > 0 (the op's documentation), so only the attribute can ask for
    // the Euler step.
    Value a64 = op.getNoiseLevelValue();
    c.euler = op.getType() == SdeType::ode || (!a64 && a == 0.0);
    if (c.euler) {
      // x + v dt; no transition noise.
      c.cx = one;
      c.cv = c.dt;
      c.q = scalar(elt, 0.0);
      c.std = c.q;
    } else if (op.getType() == SdeType::sde) {
      // std_dev = a sqrt(s / (1 - s)), with 1 - s[1] in the denominator at
      // s == 1 exactly;
      // mean = x (1 + std_dev^2 dt / 2s) + v (1 + std_dev^2 (1 - s) / 2s) dt.
      Value s1 = sigmaAt(op.getSigmas(), index(1), elt);
      Value denom = select(compare(CompareDirection::eq, c.s, one), s1, c.s);
      Value stdDev = mul(unary<SqrtOp>(div(c.s, sub(one, denom))),
                         hyperParam(a64, a, elt));
      Value var = mul(stdDev, stdDev);
      Value twoS = scale(c.s, 2.0);
      c.cx = add(one, div(mul(var, c.dt), twoS));
      c.cv = mul(add(one, div(mul(var, sub(one, c.s)), twoS)), c.dt);
      c.q = mul(stdDev, unary<SqrtOp>(neg(c.dt)));
      c.std = stdDev;
    } else {
      // cps: std = s' sin(a pi / 2) is the transition std;
      // mean = (x - s v)(1 - s') + (x + (1 - s) v) sqrt(s'^2 - std^2).
      c.std = mul(
          c.sNext,
          hyperParam(
              a64, a, elt, [](double x) { return std::sin(x * M_PI / 2.0); },
              [](Emitter &e, Value x) {
                Type f64 = typeOf(x).getElementType();
                return e.unary<SinOp>(
                    e.div(e.mul(x, e.scalar(f64, M_PI)), e.scalar(f64, 2.0)));
              }));
      Value c1 = unary<SqrtOp>(sub(mul(c.sNext, c.sNext), mul(c.std, c.std)));
      Value c0 = sub(one, c.sNext);
      c.cx = add(c0, c1);
      c.cv = sub(mul(sub(one, c.s), c1), mul(c.s, c0));
      c.q = c.std;
    }
    return c;
  }

  static RankedTensorType typeOf(Value v) {
    return cast<RankedTensorType>(v.getType());
  }

  /// The product of dimensions [from, to) of `t`: the rows of a row-wise
  /// view. Computed as a product, never as elements / row size, so that a
  /// zero-size dimension gives 0 rows instead of a division by zero.
  static int64_t dimProduct(RankedTensorType t, int64_t from, int64_t to) {
    int64_t n = 1;
    for (int64_t d = from; d < to; ++d)
      n *= t.getDimSize(d);
    return n;
  }

  OpBuilder &b;
  Location loc;
};

} // namespace mlir::omni

#endif // OMNI_DIALECTS_OMNI_OMNIEMITTER_H
