//===- DecomposeEmitter.h - vocabulary of omni decompositions --*- C++ -*-===//
//
// A small helper that emits omni primitives at one location; the
// decomposition patterns of omni-decompose (Decompose.cpp, DecomposeRL.cpp)
// are written in it. Private to passes/.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_PASSES_DECOMPOSEEMITTER_H
#define OMNI_PASSES_DECOMPOSEEMITTER_H

#include "dialects/omni/OmniOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::omni::detail {

/// Emits primitives at one location; the vocabulary of the decompositions.
class Emitter {
public:
  Emitter(PatternRewriter &rewriter, Location loc) : b(rewriter), loc(loc) {}

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
      y = ReshapeOp::create(b, loc,
                            in.clone({typeOf(weight).getDimSize(0)}), y);
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

  Value index(int64_t v) {
    return arith::ConstantIndexOp::create(b, loc, v);
  }

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

  static RankedTensorType typeOf(Value v) {
    return cast<RankedTensorType>(v.getType());
  }

  PatternRewriter &b;
  Location loc;
};

} // namespace mlir::omni::detail

namespace mlir::omni {
/// Patterns for the diffusion RL ops (DecomposeRL.cpp).
void populateDecomposeRLPatterns(RewritePatternSet &patterns);
/// Patterns for the library ops kept by default (attention).
void populateDecomposeLibraryPatterns(RewritePatternSet &patterns);
} // namespace mlir::omni

#endif // OMNI_PASSES_DECOMPOSEEMITTER_H
