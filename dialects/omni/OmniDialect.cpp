//===- OmniDialect.cpp - omni dialect registration and attributes --------===//
//
// Registers the omni ops and attributes, verifies the sharding attribute's
// mesh-independent constraints, and materializes folded constants as
// omni.constant.
//
//===----------------------------------------------------------------------===//

#include "dialects/omni/OmniOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/Extensions/InlinerExtension.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/Transforms/InliningUtils.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::omni;

#include "dialects/omni/OmniDialect.cpp.inc"
#include "dialects/omni/OmniEnums.cpp.inc"
#include "dialects/omni/OmniInterfaces.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/omni/OmniAttrs.cpp.inc"

namespace {
/// Every omni op may be inlined: omni ops are pure or side-effecting only
/// through the runtime (host calls), never through the caller's frame.
struct OmniInlinerInterface : DialectInlinerInterface {
  using DialectInlinerInterface::DialectInlinerInterface;
  bool isLegalToInline(Operation *, Region *, bool, IRMapping &) const final {
    return true;
  }
  bool isLegalToInline(Region *, Region *, bool, IRMapping &) const final {
    return true;
  }
};
} // namespace

void OmniDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/omni/OmniOps.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/omni/OmniAttrs.cpp.inc"
      >();
  addInterfaces<OmniInlinerInterface>();
}

Operation *OmniDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                            Type type, Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, elements);
}

void mlir::omni::registerOmniDialects(DialectRegistry &registry) {
  registry.insert<OmniDialect, func::FuncDialect, scf::SCFDialect,
                  arith::ArithDialect, tensor::TensorDialect>();
  // Lets the inliner (omni-pipeline's first pass) inline func.call.
  func::registerInlinerExtension(registry);
}

//===----------------------------------------------------------------------===//
// ShardingAttr
//===----------------------------------------------------------------------===//

LogicalResult ShardingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                   FlatSymbolRefAttr mesh, ArrayAttr dims) {
  llvm::StringSet<> seen;
  for (auto [i, entry] : llvm::enumerate(dims)) {
    auto axes = dyn_cast<ArrayAttr>(entry);
    // C1
    if (!axes || !llvm::all_of(axes, llvm::IsaPred<StringAttr>))
      return emitError() << "sharding entry #" << i
                         << " must be a list of axis names, found " << entry;
    // C2
    for (Attribute axis : axes)
      if (!seen.insert(cast<StringAttr>(axis).getValue()).second)
        return emitError() << "sharding uses mesh axis "
                           << cast<StringAttr>(axis) << " more than once";
  }
  return success();
}

SmallVector<StringRef> ShardingAttr::getAxes(unsigned dim) const {
  SmallVector<StringRef> axes;
  for (Attribute axis : cast<ArrayAttr>(getDims()[dim]))
    axes.push_back(cast<StringAttr>(axis).getValue());
  return axes;
}
