//===- OmniFusionKind.cpp - How omni-fuse classifies ops ------------------===//
//
// The fusion kinds (FusionKindOpInterface) of the ops whose kind does not
// follow from the Elementwise trait. omni-fuse groups Elementwise,
// Broadcast, Movement and Reduction ops into kernels, leaves Library ops to
// tuned routines and Reshape ops as views; docs/fusion.md has the rules.
//
//===----------------------------------------------------------------------===//

#include "dialects/omni/OmniOps.h"

using namespace mlir;
using namespace mlir::omni;

FusionKind BroadcastInDimOp::getFusionKind() { return FusionKind::Broadcast; }
FusionKind IotaOp::getFusionKind() { return FusionKind::Broadcast; }

/// A splat is a broadcast of one value (omni-fuse clones it into the
/// regions that read it); other constants are embedded data.
FusionKind ConstantOp::getFusionKind() {
  auto dense = dyn_cast<DenseElementsAttr>(getValue());
  return dense && dense.isSplat() ? FusionKind::Broadcast : FusionKind::Opaque;
}

FusionKind ReshapeOp::getFusionKind() { return FusionKind::Reshape; }

FusionKind ReduceOp::getFusionKind() { return FusionKind::Reduction; }

FusionKind TransposeOp::getFusionKind() { return FusionKind::Movement; }
FusionKind SliceOp::getFusionKind() { return FusionKind::Movement; }
FusionKind ConcatOp::getFusionKind() { return FusionKind::Movement; }
FusionKind PadOp::getFusionKind() { return FusionKind::Movement; }

FusionKind MatmulOp::getFusionKind() { return FusionKind::Library; }
FusionKind Conv2dOp::getFusionKind() { return FusionKind::Library; }
FusionKind AttentionOp::getFusionKind() { return FusionKind::Library; }
FusionKind AttentionGradOp::getFusionKind() { return FusionKind::Library; }
