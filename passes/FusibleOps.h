//===- FusibleOps.h - What omni-fuse puts in regions ------------*- C++ -*-===//
//
// The op classification omni-fuse groups by, shared with the passes that
// prepare a function for it (omni-move-reshapes moves reshapes to where
// omni-fuse's regions end): one definition, so the two cannot disagree on
// where a region may end.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_PASSES_FUSIBLEOPS_H
#define OMNI_PASSES_FUSIBLEOPS_H

#include "dialects/omni/OmniOps.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"

namespace mlir::omni {

inline FusionKind kindOf(Operation *op) {
  return FusionKindOpInterface::kindOf(op);
}

inline bool isStaticTensor(Type t) {
  auto tt = dyn_cast<RankedTensorType>(t);
  return tt && tt.hasStaticShape();
}

/// The value of a splat constant (of any dialect), or null: regions get
/// their own omni.constant instead of an input.
inline DenseElementsAttr splatValue(Value v) {
  DenseElementsAttr attr;
  if (!isStaticTensor(v.getType()) || !matchPattern(v, m_Constant(&attr)) ||
      !attr.isSplat() || !attr.getElementType().isIntOrFloat())
    return {};
  return attr;
}

/// Whether omni-fuse puts `op` in a region: an Elementwise, Broadcast,
/// Movement or Reduction op (not a constant, no regions) on static shapes.
inline bool isFusible(Operation *op) {
  if (op->hasTrait<OpTrait::ConstantLike>() || op->getNumRegions() != 0)
    return false;
  switch (kindOf(op)) {
  case FusionKind::Elementwise:
  case FusionKind::Broadcast:
  case FusionKind::Movement:
  case FusionKind::Reduction:
    break;
  default:
    return false;
  }
  return llvm::all_of(op->getOperandTypes(), isStaticTensor) &&
         llvm::all_of(op->getResultTypes(), isStaticTensor);
}

} // namespace mlir::omni

#endif // OMNI_PASSES_FUSIBLEOPS_H
