//===- OmniFolders.cpp - omni folders and canonicalization patterns ------===//
//
// Folders remove ops that do nothing (identity reshapes, transposes, slices,
// pads, broadcasts, casts; x + 0, x * 1), fold constants through elementwise
// arithmetic and shape ops, and evaluate omni.flow_schedule to constants. The
// canonicalization patterns merge chains of reshapes and of transposes.
// Floating-point rewrites are only those exact for every input, NaN included
// (so no x * 0 -> 0 and no x - x -> 0).
//
//===----------------------------------------------------------------------===//

#include "dialects/omni/OmniOps.h"

#include "math/flowgrpo/Schedule.h"
#include "mlir/Dialect/CommonFolders.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;
using namespace mlir::omni;

/// True when `attr` is a splat constant equal to `value` (ints or floats).
static bool isSplatOf(Attribute attr, double value) {
  auto splat = dyn_cast_if_present<SplatElementsAttr>(attr);
  if (!splat)
    return false;
  Type elt = splat.getElementType();
  if (isa<FloatType>(elt))
    return splat.getSplatValue<APFloat>().convertToDouble() == value;
  if (isa<IntegerType>(elt))
    return splat.getSplatValue<APInt>().getSExtValue() ==
           static_cast<int64_t>(value);
  return false;
}

/// Folds a shape op on a splat constant to a splat of the result type.
static OpFoldResult foldSplat(Attribute operand, ShapedType resultType) {
  if (auto splat = dyn_cast_if_present<SplatElementsAttr>(operand))
    return splat.resizeSplat(resultType);
  return {};
}

OpFoldResult NegOp::fold(FoldAdaptor adaptor) {
  if (auto inner = getOperand().getDefiningOp<NegOp>())
    return inner.getOperand();
  return constFoldUnaryOp<FloatAttr, APFloat, void>(
      adaptor.getOperands(), [](const APFloat &a) { return -a; });
}

OpFoldResult AddOp::fold(FoldAdaptor adaptor) {
  if (isSplatOf(adaptor.getRhs(), 0.0))
    return getLhs();
  if (isSplatOf(adaptor.getLhs(), 0.0))
    return getRhs();
  if (isa<FloatType>(getType().getElementType()))
    return constFoldBinaryOp<FloatAttr, APFloat, void>(
        adaptor.getOperands(),
        [](const APFloat &a, const APFloat &b) { return a + b; });
  return constFoldBinaryOp<IntegerAttr, APInt, void>(
      adaptor.getOperands(),
      [](const APInt &a, const APInt &b) { return a + b; });
}

OpFoldResult SubOp::fold(FoldAdaptor adaptor) {
  if (isSplatOf(adaptor.getRhs(), 0.0))
    return getLhs();
  if (isa<FloatType>(getType().getElementType()))
    return constFoldBinaryOp<FloatAttr, APFloat, void>(
        adaptor.getOperands(),
        [](const APFloat &a, const APFloat &b) { return a - b; });
  return constFoldBinaryOp<IntegerAttr, APInt, void>(
      adaptor.getOperands(),
      [](const APInt &a, const APInt &b) { return a - b; });
}

OpFoldResult MulOp::fold(FoldAdaptor adaptor) {
  if (isSplatOf(adaptor.getRhs(), 1.0))
    return getLhs();
  if (isSplatOf(adaptor.getLhs(), 1.0))
    return getRhs();
  if (isa<FloatType>(getType().getElementType()))
    return constFoldBinaryOp<FloatAttr, APFloat, void>(
        adaptor.getOperands(),
        [](const APFloat &a, const APFloat &b) { return a * b; });
  return constFoldBinaryOp<IntegerAttr, APInt, void>(
      adaptor.getOperands(),
      [](const APInt &a, const APInt &b) { return a * b; });
}

OpFoldResult DivOp::fold(FoldAdaptor adaptor) {
  if (isSplatOf(adaptor.getRhs(), 1.0))
    return getLhs();
  // Integer division by zero has no value to fold to; leave it to run time.
  if (isa<FloatType>(getType().getElementType()))
    return constFoldBinaryOp<FloatAttr, APFloat, void>(
        adaptor.getOperands(),
        [](const APFloat &a, const APFloat &b) { return a / b; });
  return {};
}

OpFoldResult SelectOp::fold(FoldAdaptor adaptor) {
  if (getOnTrue() == getOnFalse())
    return getOnTrue();
  if (auto pred = dyn_cast_if_present<SplatElementsAttr>(adaptor.getPred()))
    return pred.getSplatValue<bool>() ? getOnTrue() : getOnFalse();
  return {};
}

OpFoldResult CastOp::fold(FoldAdaptor) {
  if (getOperand().getType() == getType())
    return getOperand();
  return {};
}

OpFoldResult BroadcastInDimOp::fold(FoldAdaptor adaptor) {
  // Same type means same rank, and C3 then forces dims = [0, 1, ...].
  if (getOperand().getType() == getType())
    return getOperand();
  return foldSplat(adaptor.getOperand(), getType());
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getOperand().getType() == getType())
    return getOperand();
  if (auto dense = dyn_cast_if_present<DenseElementsAttr>(adaptor.getOperand()))
    return dense.reshape(getType());
  return {};
}

OpFoldResult TransposeOp::fold(FoldAdaptor adaptor) {
  ArrayRef<int64_t> perm = getPermutation();
  for (auto [i, p] : llvm::enumerate(perm))
    if (static_cast<int64_t>(i) != p)
      return foldSplat(adaptor.getOperand(), getType());
  return getOperand();
}

OpFoldResult SliceOp::fold(FoldAdaptor adaptor) {
  if (getOperand().getType() == getType())
    return getOperand(); // full slice with unit strides
  return foldSplat(adaptor.getOperand(), getType());
}

OpFoldResult ConcatOp::fold(FoldAdaptor) {
  if (getInputs().size() == 1)
    return getInputs().front();
  return {};
}

OpFoldResult PadOp::fold(FoldAdaptor) {
  if (getOperand().getType() == getType())
    return getOperand();
  return {};
}

OpFoldResult ReduceOp::fold(FoldAdaptor) {
  if (getDims().empty())
    return getOperand();
  return {};
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValue(); }

LogicalResult FlowScheduleOp::fold(FoldAdaptor,
                                   SmallVectorImpl<OpFoldResult> &results) {
  absl::StatusOr<std::vector<float>> sigmas;
  if (getKind() == ScheduleKind::static_shift) {
    sigmas = ::omni::flowgrpo::staticShiftSigmas(getNumSteps(),
                                                 getShift().convertToDouble());
  } else {
    ::omni::flowgrpo::DynamicShiftOptions options;
    options.baseShift = getBaseShift().convertToDouble();
    options.maxShift = getMaxShift().convertToDouble();
    options.baseSeqLen = getBaseSeqLen();
    options.maxSeqLen = getMaxSeqLen();
    if (auto z = getShiftTerminalAttr())
      options.shiftTerminal = z.getValueAsDouble();
    sigmas = ::omni::flowgrpo::dynamicShiftSigmas(
        getNumSteps(), getImageSeqLenAttr().getInt(), options);
  }
  // The verifier has checked the options; a failure here leaves the op be.
  if (!sigmas.ok())
    return failure();
  std::vector<float> timesteps = ::omni::flowgrpo::timestepsFromSigmas(*sigmas);
  results.push_back(
      DenseElementsAttr::get(getSigmas().getType(), ArrayRef<float>(*sigmas)));
  results.push_back(DenseElementsAttr::get(getTimesteps().getType(),
                                           ArrayRef<float>(timesteps)));
  return success();
}

//===----------------------------------------------------------------------===//
// Canonicalization patterns
//===----------------------------------------------------------------------===//

namespace {
/// reshape(reshape(x)) -> reshape(x): only the final shape matters.
struct MergeReshapes : OpRewritePattern<ReshapeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReshapeOp op,
                                PatternRewriter &rewriter) const override {
    auto inner = op.getOperand().getDefiningOp<ReshapeOp>();
    if (!inner)
      return rewriter.notifyMatchFailure(op, "operand is not a reshape");
    rewriter.replaceOpWithNewOp<ReshapeOp>(op, op.getType(),
                                           inner.getOperand());
    return success();
  }
};

/// transpose(transpose(x, p), q) -> transpose(x, p[q]).
struct MergeTransposes : OpRewritePattern<TransposeOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(TransposeOp op,
                                PatternRewriter &rewriter) const override {
    auto inner = op.getOperand().getDefiningOp<TransposeOp>();
    if (!inner)
      return rewriter.notifyMatchFailure(op, "operand is not a transpose");
    SmallVector<int64_t> perm;
    for (int64_t q : op.getPermutation())
      perm.push_back(inner.getPermutation()[q]);
    rewriter.replaceOpWithNewOp<TransposeOp>(op, op.getType(),
                                             inner.getOperand(), perm);
    return success();
  }
};
} // namespace

void ReshapeOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                            MLIRContext *context) {
  results.add<MergeReshapes>(context);
}

void TransposeOp::getCanonicalizationPatterns(RewritePatternSet &results,
                                              MLIRContext *context) {
  results.add<MergeTransposes>(context);
}
