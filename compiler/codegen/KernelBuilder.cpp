//===- KernelBuilder.cpp - fusion regions to linalg kernels ---------------===//
//
// Lowers the body of an omni.fusion, op by op, to linalg on tensors:
// elementwise ops become linalg.generic with identity maps and an arith /
// math scalar body, broadcast_in_dim a generic with a projected map, reduce
// a generic with reduction iterators (float sums accumulated in f64, see
// lowerReduce), and the movement ops their tensor
// dialect counterparts. Scalar semantics match the reference evaluator:
// max/min propagate NaN (arith.maximumf), casts to integers truncate,
// comparisons are ordered except `ne`. A row-split kernel (planRowSplit,
// RowSplit.cpp) is the same lowering of a detached copy of the fusion whose
// split values carry one work item's types.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/KernelBuilder.h"

#include "dialects/omni/OmniOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/TypeSwitch.h"

#include <limits>

using namespace mlir;
using namespace mlir::omni;

namespace {

using ScalarFn = function_ref<Value(OpBuilder &, Location, ValueRange)>;

RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

bool isFloat(Type t) { return isa<FloatType>(getElementTypeOrSelf(t)); }

Value emptyLike(OpBuilder &b, Location loc, RankedTensorType t) {
  return tensor::EmptyOp::create(b, loc, t.getShape(), t.getElementType());
}

/// A linalg.generic over `resultType` reading `inputs` through `maps` (one
/// per input; the output uses the identity) with `scalar` as its body.
Value generic(OpBuilder &b, Location loc, RankedTensorType resultType,
              ValueRange inputs, ArrayRef<AffineMap> maps, ScalarFn scalar) {
  unsigned rank = resultType.getRank();
  SmallVector<AffineMap> all(maps);
  all.push_back(b.getMultiDimIdentityMap(rank));
  SmallVector<utils::IteratorType> iters(rank, utils::IteratorType::parallel);
  auto op = linalg::GenericOp::create(
      b, loc, TypeRange{resultType}, inputs,
      ValueRange{emptyLike(b, loc, resultType)}, all, iters,
      [&](OpBuilder &nb, Location nl, ValueRange args) {
        linalg::YieldOp::create(nb, nl, scalar(nb, nl, args.drop_back()));
      });
  return op.getResult(0);
}

/// An elementwise generic: every input has the result's shape.
Value elementwise(OpBuilder &b, Location loc, RankedTensorType resultType,
                  ValueRange inputs, ScalarFn scalar) {
  SmallVector<AffineMap> maps(inputs.size(),
                              b.getMultiDimIdentityMap(resultType.getRank()));
  return generic(b, loc, resultType, inputs, maps, scalar);
}

Value floatConst(OpBuilder &b, Location loc, Type t, double v) {
  return arith::ConstantOp::create(b, loc, t, b.getFloatAttr(t, v));
}

/// `v` rounded to the float type `to`, narrower than v's type, once (to
/// nearest even), as the reference evaluator rounds. f64 to a type
/// narrower than f32 (bf16, f16) goes through f32 rounded to odd: with f32's
/// 24 bits, at least two more than the target's, the second rounding then
/// gives the correctly rounded result (round-to-odd, Boldo and Melquiond).
/// A direct arith.truncf from f64 would become a compiler-rt call
/// (__truncdfbf2) that the kernels' shared object cannot resolve, and
/// rounding to f32 by nearest even first could round twice.
Value truncFloat(OpBuilder &b, Location loc, Type to, Value v) {
  Type f32 = b.getF32Type();
  if (!v.getType().isF64() || to.getIntOrFloatBitWidth() >= 32)
    return arith::TruncFOp::create(b, loc, to, v);
  Type i32 = b.getI32Type();
  Value nearest = arith::TruncFOp::create(b, loc, f32, v);
  Value back = arith::ExtFOp::create(b, loc, v.getType(), nearest);
  // Inexact: step the f32 toward zero if it rounded away (the bits of a
  // sign-magnitude float shrink toward zero for either sign), then set its
  // last bit. NaN stays NaN (the exponent is untouched).
  Value inexact =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNE, back, v);
  Value awayFromZero = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT,
                                             math::AbsFOp::create(b, loc, back),
                                             math::AbsFOp::create(b, loc, v));
  Value bits = arith::BitcastOp::create(b, loc, i32, nearest);
  Value one = arith::ConstantOp::create(b, loc, i32, b.getI32IntegerAttr(1));
  Value toward = arith::SelectOp::create(
      b, loc, awayFromZero, arith::SubIOp::create(b, loc, bits, one), bits);
  Value odd = arith::SelectOp::create(
      b, loc, inexact, arith::OrIOp::create(b, loc, toward, one), bits);
  return arith::TruncFOp::create(b, loc, to,
                                 arith::BitcastOp::create(b, loc, f32, odd));
}

/// The scalar body of an elementwise omni op, or null if `op` is not one.
FailureOr<Value> scalarBody(Operation *op, OpBuilder &b, Location loc,
                            ValueRange a) {
  Type t = a.empty() ? Type() : a[0].getType();
  bool f = t && isa<FloatType>(t);
  Value r =
      llvm::TypeSwitch<Operation *, Value>(op)
          .Case([&](NegOp) -> Value {
            if (f)
              return arith::NegFOp::create(b, loc, a[0]);
            Value zero =
                arith::ConstantOp::create(b, loc, t, b.getIntegerAttr(t, 0));
            return arith::SubIOp::create(b, loc, zero, a[0]);
          })
          .Case([&](AbsOp) -> Value {
            return f ? Value(math::AbsFOp::create(b, loc, a[0]))
                     : Value(math::AbsIOp::create(b, loc, a[0]));
          })
          .Case([&](SignOp) -> Value {
            if (!f)
              return Value();
            Value zero = floatConst(b, loc, t, 0.0);
            Value one = math::CopySignOp::create(
                b, loc, floatConst(b, loc, t, 1.0), a[0]);
            Value isZero = arith::CmpFOp::create(
                b, loc, arith::CmpFPredicate::OEQ, a[0], zero);
            return arith::SelectOp::create(b, loc, isZero, zero, one);
          })
          .Case([&](ExpOp) { return math::ExpOp::create(b, loc, a[0]); })
          .Case([&](LogOp) { return math::LogOp::create(b, loc, a[0]); })
          .Case([&](SqrtOp) { return math::SqrtOp::create(b, loc, a[0]); })
          .Case([&](RsqrtOp) { return math::RsqrtOp::create(b, loc, a[0]); })
          .Case([&](TanhOp) { return math::TanhOp::create(b, loc, a[0]); })
          .Case([&](SinOp) { return math::SinOp::create(b, loc, a[0]); })
          .Case([&](CosOp) { return math::CosOp::create(b, loc, a[0]); })
          .Case([&](ErfOp) { return math::ErfOp::create(b, loc, a[0]); })
          .Case([&](FloorOp) { return math::FloorOp::create(b, loc, a[0]); })
          .Case([&](SiluOp) -> Value {
            // x / (1 + exp(-x))
            Value one = floatConst(b, loc, t, 1.0);
            Value e = math::ExpOp::create(b, loc,
                                          arith::NegFOp::create(b, loc, a[0]));
            return arith::DivFOp::create(b, loc, a[0],
                                         arith::AddFOp::create(b, loc, one, e));
          })
          .Case([&](LogisticOp) -> Value {
            Value one = floatConst(b, loc, t, 1.0);
            Value e = math::ExpOp::create(b, loc,
                                          arith::NegFOp::create(b, loc, a[0]));
            return arith::DivFOp::create(b, loc, one,
                                         arith::AddFOp::create(b, loc, one, e));
          })
          .Case([&](AddOp) -> Value {
            return f ? Value(arith::AddFOp::create(b, loc, a[0], a[1]))
                     : Value(arith::AddIOp::create(b, loc, a[0], a[1]));
          })
          .Case([&](SubOp) -> Value {
            return f ? Value(arith::SubFOp::create(b, loc, a[0], a[1]))
                     : Value(arith::SubIOp::create(b, loc, a[0], a[1]));
          })
          .Case([&](MulOp) -> Value {
            return f ? Value(arith::MulFOp::create(b, loc, a[0], a[1]))
                     : Value(arith::MulIOp::create(b, loc, a[0], a[1]));
          })
          .Case([&](DivOp) -> Value {
            return f ? Value(arith::DivFOp::create(b, loc, a[0], a[1]))
                     : Value(arith::DivSIOp::create(b, loc, a[0], a[1]));
          })
          .Case([&](MaxOp) -> Value {
            return f ? Value(arith::MaximumFOp::create(b, loc, a[0], a[1]))
                     : Value(arith::MaxSIOp::create(b, loc, a[0], a[1]));
          })
          .Case([&](MinOp) -> Value {
            return f ? Value(arith::MinimumFOp::create(b, loc, a[0], a[1]))
                     : Value(arith::MinSIOp::create(b, loc, a[0], a[1]));
          })
          .Case([&](PowOp) { return math::PowFOp::create(b, loc, a[0], a[1]); })
          .Case(
              [&](AndOp) { return arith::AndIOp::create(b, loc, a[0], a[1]); })
          .Case([&](OrOp) { return arith::OrIOp::create(b, loc, a[0], a[1]); })
          .Case([&](CompareOp c) -> Value {
            if (f) {
              arith::CmpFPredicate p = arith::CmpFPredicate::OEQ;
              switch (c.getDirection()) {
              case CompareDirection::eq:
                p = arith::CmpFPredicate::OEQ;
                break;
              case CompareDirection::ne:
                p = arith::CmpFPredicate::UNE;
                break;
              case CompareDirection::lt:
                p = arith::CmpFPredicate::OLT;
                break;
              case CompareDirection::le:
                p = arith::CmpFPredicate::OLE;
                break;
              case CompareDirection::gt:
                p = arith::CmpFPredicate::OGT;
                break;
              case CompareDirection::ge:
                p = arith::CmpFPredicate::OGE;
                break;
              }
              return arith::CmpFOp::create(b, loc, p, a[0], a[1]);
            }
            arith::CmpIPredicate p = arith::CmpIPredicate::eq;
            switch (c.getDirection()) {
            case CompareDirection::eq:
              p = arith::CmpIPredicate::eq;
              break;
            case CompareDirection::ne:
              p = arith::CmpIPredicate::ne;
              break;
            case CompareDirection::lt:
              p = arith::CmpIPredicate::slt;
              break;
            case CompareDirection::le:
              p = arith::CmpIPredicate::sle;
              break;
            case CompareDirection::gt:
              p = arith::CmpIPredicate::sgt;
              break;
            case CompareDirection::ge:
              p = arith::CmpIPredicate::sge;
              break;
            }
            return arith::CmpIOp::create(b, loc, p, a[0], a[1]);
          })
          .Case([&](SelectOp) {
            return arith::SelectOp::create(b, loc, a[0], a[1], a[2]);
          })
          .Case([&](IsFiniteOp) -> Value {
            // |x| < inf is false for NaN and both infinities.
            Value inf =
                floatConst(b, loc, t, std::numeric_limits<double>::infinity());
            return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT,
                                         math::AbsFOp::create(b, loc, a[0]),
                                         inf);
          })
          .Case([&](CastOp c) -> Value {
            Type to = c.getType().getElementType();
            if (t == to)
              return a[0];
            bool toF = isa<FloatType>(to);
            if (to.isInteger(1)) {
              if (f)
                return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNE,
                                             a[0], floatConst(b, loc, t, 0.0));
              return arith::CmpIOp::create(
                  b, loc, arith::CmpIPredicate::ne, a[0],
                  arith::ConstantOp::create(b, loc, t, b.getIntegerAttr(t, 0)));
            }
            if (f && toF)
              return to.getIntOrFloatBitWidth() > t.getIntOrFloatBitWidth()
                         ? Value(arith::ExtFOp::create(b, loc, to, a[0]))
                         : truncFloat(b, loc, to, a[0]);
            if (f)
              return arith::FPToSIOp::create(b, loc, to, a[0]);
            if (toF)
              return t.isInteger(1)
                         ? Value(arith::UIToFPOp::create(b, loc, to, a[0]))
                         : Value(arith::SIToFPOp::create(b, loc, to, a[0]));
            unsigned from = t.getIntOrFloatBitWidth(),
                     width = to.getIntOrFloatBitWidth();
            if (width > from)
              return t.isInteger(1)
                         ? Value(arith::ExtUIOp::create(b, loc, to, a[0]))
                         : Value(arith::ExtSIOp::create(b, loc, to, a[0]));
            return arith::TruncIOp::create(b, loc, to, a[0]);
          })
          .Default([](Operation *) { return Value(); });
  if (!r)
    return failure();
  return r;
}

/// Whether `v` is an omni.cast of f32, f16 or bf16 values to f64.
bool isWidenedFloat(Value v) {
  auto cast = v.getDefiningOp<CastOp>();
  if (!cast)
    return false;
  Type from = cast.getOperand().getType().getElementType();
  return isFloat(from) && from.getIntOrFloatBitWidth() < 64;
}

/// Whether every element of the f64 value `v` is exactly a value of a
/// narrower float type or a product of two such (the grad norm's squares of
/// widened f32 gradients): at most 48 significant bits, within f64's
/// exponent range, so the product is exact.
bool isExactNarrowFloat(Value v) {
  if (isWidenedFloat(v))
    return true;
  auto mul = v.getDefiningOp<MulOp>();
  return mul && isWidenedFloat(mul.getLhs()) && isWidenedFloat(mul.getRhs());
}

/// omni.reduce as a linalg.generic with reduction iterators over the input's
/// dims in order (the loops run sequentially inside one work item, so the
/// result never depends on the runtime's thread count).
///
/// Float sums and means must not lose digits with the length of the row: a
/// sequential f32 sum of n elements has an error growing like n * 2^-24
/// (a 16x128x128 latent's log-probability was off by 5e-5 relative).
/// - f32, f16, bf16: the accumulator is f64 (each element is widened
///   exactly, the sum and the mean's division run in f64, the result is
///   rounded once). The f64 add is marked reassoc, so LLVM vectorizes the
///   loop with several partial sums (a sequential chain ran at one 4-cycle
///   add per element: half of the attention backward's softmax kernel).
///   The order is fixed by the compiled code, so the bits still do not
///   depend on the thread count; the error stays below n * 2^-53 relative
///   to sum |x| in any order, far under f32's own rounding for any tensor
///   that fits in memory. So do f64 values widened from those types in the
///   kernel (omni-split-reductions' partial sums) and exact products of two
///   such (the grad norm's squares): isExactNarrowFloat.
/// - f64: Neumaier's compensated summation (a second accumulator holds the
///   rounding error of every addition), whose error bound does not grow
///   with n (2 ulp + O(n^2 2^-106)). Non-finite compensations (an infinite
///   or NaN element) fall back to the plain sum.
/// max and min are exact; integer sums wrap and are exact modulo 2^width.
FailureOr<SmallVector<Value>> lowerReduce(ReduceOp red, OpBuilder &b,
                                          ValueRange operands) {
  Location loc = red.getLoc();
  RankedTensorType in = red.getOperand().getType(), out = red.getType();
  Type t = in.getElementType();
  bool f = isFloat(t);
  ReduceKind kind = red.getKind();
  if (!f && kind != ReduceKind::sum)
    return failure();
  SmallVector<AffineExpr> outExprs;
  SmallVector<utils::IteratorType> iters;
  for (int64_t d = 0; d < in.getRank(); ++d) {
    bool reduced = llvm::is_contained(red.getDims(), d);
    iters.push_back(reduced ? utils::IteratorType::reduction
                            : utils::IteratorType::parallel);
    if (!reduced)
      outExprs.push_back(b.getAffineDimExpr(d));
  }
  AffineMap inMap = b.getMultiDimIdentityMap(in.getRank());
  AffineMap outMap = AffineMap::get(in.getRank(), 0, outExprs, b.getContext());
  auto filled = [&](RankedTensorType type, Value init) {
    return linalg::FillOp::create(b, loc, init, emptyLike(b, loc, type))
        .getResult(0);
  };

  if (!f || kind == ReduceKind::max || kind == ReduceKind::min) {
    double init = kind == ReduceKind::max
                      ? -std::numeric_limits<double>::infinity()
                      : std::numeric_limits<double>::infinity();
    Value initValue =
        f ? floatConst(b, loc, t, init)
          : Value(arith::ConstantOp::create(b, loc, t, b.getIntegerAttr(t, 0)));
    Value r = linalg::GenericOp::create(
                  b, loc, TypeRange{out}, operands,
                  ValueRange{filled(out, initValue)}, {inMap, outMap}, iters,
                  [&](OpBuilder &nb, Location nl, ValueRange a) {
                    Value v;
                    if (kind == ReduceKind::max)
                      v = arith::MaximumFOp::create(nb, nl, a[0], a[1]);
                    else if (kind == ReduceKind::min)
                      v = arith::MinimumFOp::create(nb, nl, a[0], a[1]);
                    else
                      v = arith::AddIOp::create(nb, nl, a[0], a[1]);
                    linalg::YieldOp::create(nb, nl, v);
                  })
                  .getResult(0);
    return SmallVector<Value>{r};
  }

  // Float sum or mean: accumulate in f64 (compensated for f64 inputs).
  // f64 values that are exact narrow floats (widened in this kernel, or a
  // product of two such: isExactNarrowFloat) take the narrow types' rule.
  Type f64 = b.getF64Type();
  bool compensated = t.isF64() && !isExactNarrowFloat(red.getOperand());
  auto accType = RankedTensorType::get(out.getShape(), f64);
  Value zero = floatConst(b, loc, f64, 0.0);
  SmallVector<Value> inits = {filled(accType, zero)};
  SmallVector<AffineMap> maps = {inMap, outMap};
  SmallVector<Type> accTypes = {accType};
  if (compensated) {
    inits.push_back(filled(accType, zero));
    maps.push_back(outMap);
    accTypes.push_back(accType);
  }
  auto acc = linalg::GenericOp::create(
      b, loc, accTypes, operands, inits, maps, iters,
      [&](OpBuilder &nb, Location nl, ValueRange a) {
        Value s = a[1];
        if (!compensated) {
          // reassoc: the widened sum may keep several f64 partial sums
          // (LLVM's vector lanes and interleaved accumulators) instead of
          // one dependency chain of 4-cycle adds.
          Value x = a[0];
          if (x.getType() != f64) // f64 already (isExactNarrowFloat)
            x = arith::ExtFOp::create(nb, nl, f64, x);
          linalg::YieldOp::create(
              nb, nl,
              arith::AddFOp::create(nb, nl, s, x, arith::FastMathFlags::reassoc)
                  .getResult());
          return;
        }
        Value x = a[0];
        Value sum = arith::AddFOp::create(nb, nl, s, x);
        // Neumaier: the part of the smaller addend that the sum lost.
        Value bigS = arith::CmpFOp::create(nb, nl, arith::CmpFPredicate::OGE,
                                           math::AbsFOp::create(nb, nl, s),
                                           math::AbsFOp::create(nb, nl, x));
        Value lostX = arith::AddFOp::create(
            nb, nl, arith::SubFOp::create(nb, nl, s, sum), x);
        Value lostS = arith::AddFOp::create(
            nb, nl, arith::SubFOp::create(nb, nl, x, sum), s);
        Value lost = arith::SelectOp::create(nb, nl, bigS, lostX, lostS);
        linalg::YieldOp::create(
            nb, nl, ValueRange{sum, arith::AddFOp::create(nb, nl, a[2], lost)});
      });
  int64_t count =
      in.getNumElements() / std::max<int64_t>(out.getNumElements(), 1);
  SmallVector<AffineMap> idMaps(acc.getNumResults(),
                                b.getMultiDimIdentityMap(out.getRank()));
  Value r = generic(
      b, loc, out, acc.getResults(), idMaps,
      [&](OpBuilder &nb, Location nl, ValueRange a) -> Value {
        Value v = a[0];
        if (compensated) {
          Value inf =
              floatConst(nb, nl, f64, std::numeric_limits<double>::infinity());
          Value finite =
              arith::CmpFOp::create(nb, nl, arith::CmpFPredicate::OLT,
                                    math::AbsFOp::create(nb, nl, a[1]), inf);
          v = arith::SelectOp::create(
              nb, nl, finite, arith::AddFOp::create(nb, nl, a[0], a[1]), a[0]);
        }
        if (kind == ReduceKind::mean)
          v = arith::DivFOp::create(
              nb, nl, v, floatConst(nb, nl, f64, static_cast<double>(count)));
        if (t != f64)
          v = truncFloat(nb, nl, t, v);
        return v;
      });
  return SmallVector<Value>{r};
}

/// Lowers one op of the fusion body; returns its replacement values.
FailureOr<SmallVector<Value>> lowerOp(Operation *op, OpBuilder &b,
                                      ValueRange operands) {
  Location loc = op->getLoc();
  if (op->hasTrait<OpTrait::Elementwise>()) {
    auto resultType = cast<RankedTensorType>(op->getResult(0).getType());
    bool failedBody = false;
    Value r =
        elementwise(b, loc, resultType, operands,
                    [&](OpBuilder &nb, Location nl, ValueRange args) -> Value {
                      FailureOr<Value> v = scalarBody(op, nb, nl, args);
                      if (failed(v)) {
                        failedBody = true;
                        return args[0];
                      }
                      return *v;
                    });
    if (failedBody)
      return failure();
    return SmallVector<Value>{r};
  }
  if (auto c = dyn_cast<ConstantOp>(op))
    return SmallVector<Value>{
        arith::ConstantOp::create(b, loc, cast<TypedAttr>(c.getValue()))};
  if (auto bc = dyn_cast<BroadcastInDimOp>(op)) {
    RankedTensorType in = bc.getOperand().getType(), out = bc.getType();
    SmallVector<AffineExpr> exprs;
    for (auto [i, d] : llvm::enumerate(bc.getDims()))
      exprs.push_back(in.getDimSize(i) == 1 && out.getDimSize(d) != 1
                          ? b.getAffineConstantExpr(0)
                          : b.getAffineDimExpr(d));
    AffineMap map = AffineMap::get(out.getRank(), 0, exprs, b.getContext());
    return SmallVector<Value>{
        generic(b, loc, out, operands, {map},
                [](OpBuilder &, Location, ValueRange a) { return a[0]; })};
  }
  if (auto t = dyn_cast<TransposeOp>(op)) {
    RankedTensorType out = t.getType();
    SmallVector<AffineExpr> exprs(out.getRank());
    // result[i] = operand[perm^-1]: operand dim perm[i] is result dim i.
    for (auto [i, p] : llvm::enumerate(t.getPermutation()))
      exprs[p] = b.getAffineDimExpr(i);
    AffineMap map = AffineMap::get(out.getRank(), 0, exprs, b.getContext());
    return SmallVector<Value>{
        generic(b, loc, out, operands, {map},
                [](OpBuilder &, Location, ValueRange a) { return a[0]; })};
  }
  if (auto iota = dyn_cast<IotaOp>(op)) {
    RankedTensorType out = iota.getType();
    int64_t dim = iota.getDim();
    return SmallVector<Value>{generic(
        b, loc, out, {}, {}, [&](OpBuilder &nb, Location nl, ValueRange) {
          Value idx = linalg::IndexOp::create(nb, nl, dim);
          Type t = out.getElementType();
          Value i64 = arith::IndexCastOp::create(nb, nl, nb.getI64Type(), idx);
          if (isa<FloatType>(t))
            return Value(arith::SIToFPOp::create(nb, nl, t, i64));
          if (t.getIntOrFloatBitWidth() < 64)
            return Value(arith::TruncIOp::create(nb, nl, t, i64));
          return i64;
        })};
  }
  if (auto red = dyn_cast<ReduceOp>(op))
    return lowerReduce(red, b, operands);
  if (auto s = dyn_cast<SliceOp>(op))
    return SmallVector<Value>{tensor::ExtractSliceOp::create(
        b, loc, s.getType(), operands[0], ValueRange{}, ValueRange{},
        ValueRange{}, s.getStart(),
        [&] {
          SmallVector<int64_t> sizes(s.getType().getShape());
          return sizes;
        }(),
        s.getStrides())};
  if (auto p = dyn_cast<PadOp>(op)) {
    Type t = p.getType().getElementType();
    SmallVector<OpFoldResult> low, high;
    for (int64_t v : p.getLow())
      low.push_back(b.getIndexAttr(v));
    for (int64_t v : p.getHigh())
      high.push_back(b.getIndexAttr(v));
    Value pad =
        isFloat(t)
            ? floatConst(b, loc, t, p.getValue().convertToDouble())
            : Value(arith::ConstantOp::create(
                  b, loc, t,
                  b.getIntegerAttr(t, static_cast<int64_t>(
                                          p.getValue().convertToDouble()))));
    return SmallVector<Value>{
        tensor::PadOp::create(b, loc, p.getType(), operands[0], low, high, pad)
            .getResult()};
  }
  if (auto c = dyn_cast<ConcatOp>(op)) {
    Value result = emptyLike(b, loc, c.getType());
    int64_t offset = 0, dim = c.getDim();
    for (Value in : operands) {
      RankedTensorType t = tensorType(in);
      SmallVector<OpFoldResult> offs(t.getRank(), b.getIndexAttr(0)), sizes,
          strides(t.getRank(), b.getIndexAttr(1));
      for (int64_t s : t.getShape())
        sizes.push_back(b.getIndexAttr(s));
      offs[dim] = b.getIndexAttr(offset);
      result = tensor::InsertSliceOp::create(b, loc, in, result, offs, sizes,
                                             strides);
      offset += t.getDimSize(dim);
    }
    return SmallVector<Value>{result};
  }
  if (auto r = dyn_cast<ReshapeOp>(op)) {
    RankedTensorType out = r.getType();
    Value shape = arith::ConstantOp::create(
        b, loc,
        DenseIntElementsAttr::get(
            RankedTensorType::get({out.getRank()}, b.getI64Type()),
            out.getShape()));
    return SmallVector<Value>{
        tensor::ReshapeOp::create(b, loc, out, operands[0], shape)};
  }
  return failure();
}

} // namespace

FailureOr<func::FuncOp> mlir::omni::buildKernelFunction(FusionOp fusion,
                                                        ModuleOp kernels,
                                                        StringRef name) {
  OpBuilder b(kernels.getContext());
  b.setInsertionPointToEnd(kernels.getBody());
  // The body's types, not the fusion's: a row-split kernel's body is retyped
  // to one work item (buildRowKernelFunction).
  Block &body = fusion.getBody().front();
  auto fn = func::FuncOp::create(
      b, fusion.getLoc(), name,
      b.getFunctionType(body.getArgumentTypes(),
                        body.getTerminator()->getOperandTypes()));
  Block *entry = fn.addEntryBlock();
  b.setInsertionPointToEnd(entry);
  IRMapping map;
  map.map(body.getArguments(), entry->getArguments());
  for (Operation &op : body) {
    SmallVector<Value> operands;
    for (Value v : op.getOperands())
      operands.push_back(map.lookup(v));
    if (auto yield = dyn_cast<YieldOp>(op)) {
      // Each result is its own buffer: a value yielded twice (CSE merges
      // identical ops inside a fusion) is copied for the second result.
      DenseSet<Value> seen;
      for (Value &v : operands)
        if (!seen.insert(v).second) {
          auto type = cast<RankedTensorType>(v.getType());
          Value empty = tensor::EmptyOp::create(b, op.getLoc(), type.getShape(),
                                                type.getElementType());
          v = linalg::CopyOp::create(b, op.getLoc(), v, empty).getResult(0);
        }
      func::ReturnOp::create(b, op.getLoc(), operands);
      continue;
    }
    FailureOr<SmallVector<Value>> lowered = lowerOp(&op, b, operands);
    if (failed(lowered)) {
      op.emitOpError("cannot be compiled into a CPU kernel yet");
      fn.erase();
      return failure();
    }
    map.map(op.getResults(), *lowered);
  }
  return fn;
}

bool mlir::omni::isFlatElementwise(FusionOp fusion) {
  // The element count comes from the first input's size at run time.
  if (fusion.getInputs().empty())
    return false;
  int64_t n = -1;
  auto sameCount = [&](Type t) {
    auto tt = cast<RankedTensorType>(t);
    if (n < 0)
      n = tt.getNumElements();
    return tt.getNumElements() == n;
  };
  if (!llvm::all_of(fusion.getInputs().getTypes(), sameCount) ||
      !llvm::all_of(fusion.getResultTypes(), sameCount))
    return false;
  for (Operation &op : fusion.getBody().front().without_terminator()) {
    if (auto c = dyn_cast<ConstantOp>(op)) {
      if (!isa<SplatElementsAttr>(c.getValue()))
        return false;
      continue;
    }
    if (!op.hasTrait<OpTrait::Elementwise>())
      return false;
    if (op.getNumResults() != 1 ||
        cast<RankedTensorType>(op.getResult(0).getType()).getNumElements() != n)
      return false;
  }
  return true;
}

FailureOr<func::FuncOp> mlir::omni::buildFlatKernelFunction(FusionOp fusion,
                                                            ModuleOp kernels,
                                                            StringRef name) {
  OpBuilder b(kernels.getContext());
  Location loc = fusion.getLoc();
  auto flat = [](Type t) {
    return RankedTensorType::get({ShapedType::kDynamic},
                                 cast<RankedTensorType>(t).getElementType());
  };
  SmallVector<Type> inputs, results;
  for (Type t : fusion.getInputs().getTypes())
    inputs.push_back(flat(t));
  for (Type t : fusion.getResultTypes())
    results.push_back(flat(t));
  b.setInsertionPointToEnd(kernels.getBody());
  auto fn =
      func::FuncOp::create(b, loc, name, b.getFunctionType(inputs, results));
  Block *entry = fn.addEntryBlock();
  b.setInsertionPointToEnd(entry);
  Value size;
  if (!inputs.empty()) {
    size = tensor::DimOp::create(b, loc, entry->getArgument(0), 0);
  } else {
    fn.erase();
    return fusion.emitOpError("without inputs cannot be split"), failure();
  }
  SmallVector<Value> outs;
  for (Type t : results)
    outs.push_back(tensor::EmptyOp::create(b, loc, cast<RankedTensorType>(t),
                                           ValueRange{size}));
  SmallVector<AffineMap> maps(inputs.size() + results.size(),
                              b.getMultiDimIdentityMap(1));
  Block &body = fusion.getBody().front();
  bool failedBody = false;
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange(results), entry->getArguments(), outs, maps,
      {utils::IteratorType::parallel},
      [&](OpBuilder &nb, Location nl, ValueRange args) {
        // Tensor values of the fusion body -> scalars of this element.
        IRMapping scalars;
        scalars.map(body.getArguments(), args.take_front(inputs.size()));
        for (Operation &op : body) {
          if (auto yield = dyn_cast<YieldOp>(op)) {
            SmallVector<Value> yielded;
            for (Value v : yield.getOperands())
              yielded.push_back(scalars.lookup(v));
            linalg::YieldOp::create(nb, nl, yielded);
            continue;
          }
          if (auto c = dyn_cast<ConstantOp>(op)) {
            auto splat = cast<SplatElementsAttr>(c.getValue());
            scalars.map(
                c.getResult(),
                arith::ConstantOp::create(
                    nb, nl, cast<TypedAttr>(splat.getSplatValue<Attribute>())));
            continue;
          }
          SmallVector<Value> operands;
          for (Value v : op.getOperands())
            operands.push_back(scalars.lookup(v));
          Value r;
          FailureOr<Value> v = scalarBody(&op, nb, nl, operands);
          if (failed(v)) {
            failedBody = true;
            r = operands.empty() ? Value() : operands[0];
          } else {
            r = *v;
          }
          scalars.map(op.getResult(0), r);
        }
      });
  if (failedBody) {
    fn.erase();
    return fusion.emitOpError("cannot be compiled into a CPU kernel yet"),
           failure();
  }
  func::ReturnOp::create(b, loc, generic.getResults());
  return fn;
}
