//===- OmniVerify.cpp - omni op verifiers ---------------------------------===//
//
// Verifiers of the omni ops whose result types are spelled rather than
// inferred, the region verifier of omni.fusion, and the symbol-use checks of
// the ops that refer to functions (grad, value_and_grad) or meshes (shard and
// the collectives). Each check carries the constraint label of the op's
// description in OmniOps.td and has a case in invalid.mlir.
//
//===----------------------------------------------------------------------===//

#include "dialects/omni/OmniDiagnostics.h"
#include "dialects/omni/OmniOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::omni;
using diag::shapeStr;

static RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

//===----------------------------------------------------------------------===//
// Primitives
//===----------------------------------------------------------------------===//

LogicalResult BroadcastInDimOp::verify() {
  RankedTensorType in = getOperand().getType(), out = getType();
  // C1
  if (in.getElementType() != out.getElementType())
    return emitOpError("operand element type ")
           << in.getElementType() << " differs from result element type "
           << out.getElementType();
  ArrayRef<int64_t> dims = getDims();
  // C2
  if (static_cast<int64_t>(dims.size()) != in.getRank())
    return emitOpError("dims has ")
           << dims.size() << " entries but the operand has rank "
           << in.getRank();
  for (auto [i, d] : llvm::enumerate(dims)) {
    // C3
    if (d < 0 || d >= out.getRank() || (i > 0 && d <= dims[i - 1]))
      return emitOpError("dims [")
             << dims << "] must be strictly increasing and within the result "
             << "rank " << out.getRank();
    // C4
    if (in.getDimSize(i) != 1 && in.getDimSize(i) != out.getDimSize(d))
      return emitOpError("operand dimension ")
             << i << " has size " << in.getDimSize(i)
             << " but result dimension " << d << " has size "
             << out.getDimSize(d) << "; expected 1 or equal sizes";
  }
  return success();
}

LogicalResult ReshapeOp::verify() {
  RankedTensorType in = getOperand().getType(), out = getType();
  // C1
  if (in.getElementType() != out.getElementType())
    return emitOpError("operand element type ")
           << in.getElementType() << " differs from result element type "
           << out.getElementType();
  // C2
  if (in.getNumElements() != out.getNumElements())
    return emitOpError("cannot reshape ")
           << shapeStr(in.getShape()) << " (" << in.getNumElements()
           << " elements) to " << shapeStr(out.getShape()) << " ("
           << out.getNumElements() << " elements)";
  return success();
}

LogicalResult IotaOp::verify() {
  // C1
  int64_t dim = getDimAttr().getInt();
  if (dim < 0 || dim >= getType().getRank())
    return emitOpError("dim ")
           << dim << " is outside the result rank " << getType().getRank();
  return success();
}

//===----------------------------------------------------------------------===//
// Composites and diffusion RL
//===----------------------------------------------------------------------===//

LogicalResult SoftmaxOp::verify() {
  // C1
  int64_t dim = getDimAttr().getInt();
  if (dim < 0 || dim >= getType().getRank())
    return emitOpError("dim ")
           << dim << " is outside the rank " << getType().getRank();
  return success();
}

LogicalResult GroupAdvantagesOp::verify() {
  int64_t groupSize = getGroupSizeAttr().getInt();
  // C2
  if (groupSize < 1)
    return emitOpError("group_size must be >= 1, found ") << groupSize;
  // C1
  RankedTensorType r = getRewards().getType();
  if (r.getRank() != 1 || r.getDimSize(0) % groupSize != 0)
    return emitOpError("rewards must be 1-D with a multiple of group_size (")
           << groupSize << ") entries, found " << r;
  // C3
  int64_t ddof = getDdofAttr() ? getDdofAttr().getInt() : 0;
  if (ddof != 0 && ddof != 1)
    return emitOpError("ddof must be 0 or 1, found ") << ddof;
  // C4
  if (!(getEps().convertToDouble() >= 0))
    return emitOpError("eps must be >= 0, found ")
           << getEps().convertToDouble();
  return success();
}

LogicalResult AdamWOp::verify() {
  double lr = getLr().convertToDouble(), eps = getEps().convertToDouble(),
         wd = getWeightDecay().convertToDouble(),
         b1 = getBeta1().convertToDouble(), b2 = getBeta2().convertToDouble();
  // C1
  if (!(lr > 0) || !(eps > 0) || !(wd >= 0))
    return emitOpError("needs lr > 0, eps > 0 and weight_decay >= 0, found ")
           << lr << ", " << eps << ", " << wd;
  // C2
  if (!(b1 >= 0 && b1 < 1) || !(b2 >= 0 && b2 < 1))
    return emitOpError("betas must be in [0, 1), found ") << b1 << ", " << b2;
  return success();
}

//===----------------------------------------------------------------------===//
// Autodiff markers
//===----------------------------------------------------------------------===//

template <typename GradOpT>
static LogicalResult verifyGradSymbolUses(GradOpT op,
                                          SymbolTableCollection &symbols,
                                          bool withValues) {
  // C1
  auto callee =
      symbols.lookupNearestSymbolFrom<func::FuncOp>(op, op.getCalleeAttr());
  if (!callee)
    return op.emitOpError("callee ")
           << op.getCalleeAttr() << " is not a func.func in scope";
  FunctionType fnType = callee.getFunctionType();
  // C2
  if (TypeRange(fnType.getInputs()) != TypeRange(op.getOperands().getTypes()))
    return op.emitOpError("operand types (")
           << op.getOperands().getTypes() << ") do not match the arguments ("
           << fnType.getInputs() << ") of " << op.getCalleeAttr();
  // C3
  auto loss = fnType.getNumResults()
                  ? dyn_cast<RankedTensorType>(fnType.getResult(0))
                  : RankedTensorType();
  if (!loss || loss.getRank() != 0 || !isa<FloatType>(loss.getElementType())) {
    InFlightDiagnostic diag = op.emitOpError("the first result of ")
                              << op.getCalleeAttr()
                              << " must be a 0-D float tensor (the loss), "
                              << "found ";
    if (fnType.getNumResults())
      diag << fnType.getResult(0);
    else
      diag << "no result";
    return diag;
  }
  ArrayRef<int64_t> wrt = op.getWrt();
  // C4
  if (wrt.empty())
    return op.emitOpError("wrt must name at least one operand");
  for (auto [i, w] : llvm::enumerate(wrt)) {
    if (w < 0 || w >= static_cast<int64_t>(fnType.getNumInputs()) ||
        (i > 0 && w <= wrt[i - 1]))
      return op.emitOpError("wrt [")
             << wrt << "] must be strictly increasing operand indices below "
             << fnType.getNumInputs();
    // C5
    auto t = dyn_cast<RankedTensorType>(fnType.getInput(w));
    if (!t || !isa<FloatType>(t.getElementType()))
      return op.emitOpError("cannot differentiate with respect to operand #")
             << w << " of non-float type " << fnType.getInput(w);
  }
  // C6
  SmallVector<Type> expected;
  if (withValues)
    llvm::append_range(expected, fnType.getResults());
  for (int64_t w : wrt)
    expected.push_back(fnType.getInput(w));
  if (TypeRange(expected) != TypeRange(op.getResultTypes()))
    return op.emitOpError("result types (")
           << op.getResultTypes() << ") must be (" << TypeRange(expected)
           << ")";
  return success();
}

LogicalResult GradOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyGradSymbolUses(*this, symbols, /*withValues=*/false);
}

LogicalResult ValueAndGradOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return verifyGradSymbolUses(*this, symbols, /*withValues=*/true);
}

unsigned GradOp::getNumValueResults() { return 0; }

unsigned ValueAndGradOp::getNumValueResults() {
  return getNumResults() - getWrt().size();
}

//===----------------------------------------------------------------------===//
// Fusion and host calls
//===----------------------------------------------------------------------===//

LogicalResult FusionOp::verifyRegions() {
  Block &body = getBody().front();
  // C1
  if (TypeRange(body.getArgumentTypes()) != TypeRange(getInputs().getTypes()))
    return emitOpError("region arguments (")
           << body.getArgumentTypes() << ") must match the inputs ("
           << getInputs().getTypes() << ")";
  // C2
  auto yield = cast<YieldOp>(body.getTerminator());
  if (TypeRange(yield.getOperandTypes()) != TypeRange(getResultTypes()))
    return yield.emitOpError("yields (")
           << yield.getOperandTypes() << ") but the fusion returns ("
           << getResultTypes() << ")";
  // C3
  WalkResult walk = getBody().walk([&](Operation *op) {
    if (isa<FusionOp, HostCallOp, AllReduceOp, AllGatherOp, ReduceScatterOp,
            BroadcastOp, AxisIndexOp>(op)) {
      op->emitOpError("cannot be inside an omni.fusion region");
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

LogicalResult HostCallOp::verify() {
  StringRef name = getCallee();
  // C1
  bool ok = !name.empty() && !llvm::isDigit(name.front()) &&
            llvm::all_of(name, [](char c) {
              return llvm::isAlnum(c) || c == '_' || c == '.';
            });
  if (!ok)
    return emitOpError("callee \"")
           << name << "\" must be a name of [A-Za-z0-9_.] not starting with "
           << "a digit";
  return success();
}

//===----------------------------------------------------------------------===//
// Meshes, sharding and collectives
//===----------------------------------------------------------------------===//

LogicalResult MeshOp::verify() {
  ArrayAttr axes = getAxes();
  ArrayRef<int64_t> shape = getShape();
  // C1
  if (axes.empty() || axes.size() != shape.size())
    return emitOpError("needs one size per axis and at least one axis, found ")
           << axes.size() << " axes and " << shape.size() << " sizes";
  llvm::StringSet<> seen;
  for (auto [name, size] :
       llvm::zip(axes.getAsValueRange<StringAttr>(), shape)) {
    // C2
    if (name.empty() || !seen.insert(name).second)
      return emitOpError("axis names must be non-empty and unique, found \"")
             << name << "\" twice or empty";
    // C3
    if (size < 1)
      return emitOpError("axis \"")
             << name << "\" has size " << size << "; expected >= 1";
  }
  return success();
}

std::optional<int64_t> MeshOp::getAxisSize(StringRef axis) {
  for (auto [name, size] :
       llvm::zip(getAxes().getAsValueRange<StringAttr>(), getShape()))
    if (name == axis)
      return size;
  return std::nullopt;
}

/// Resolves `meshRef` and the product of `axes`' sizes (C1/C2 of the
/// collectives, C1/C3 of shard). Returns failure after emitting.
static FailureOr<int64_t> groupSize(Operation *op,
                                    SymbolTableCollection &symbols,
                                    FlatSymbolRefAttr meshRef,
                                    ArrayRef<StringRef> axes, bool allowEmpty) {
  auto fail = [&]() {
    InFlightDiagnostic diag = op->emitOpError();
    return std::move(diag);
  };
  auto mesh = symbols.lookupNearestSymbolFrom<MeshOp>(op, meshRef);
  if (!mesh) {
    fail() << "mesh " << meshRef << " is not an omni.mesh";
    return failure();
  }
  if (axes.empty() && !allowEmpty) {
    fail() << "needs at least one mesh axis";
    return failure();
  }
  llvm::StringSet<> seen;
  int64_t size = 1;
  for (StringRef axis : axes) {
    if (!seen.insert(axis).second) {
      fail() << "mesh axis \"" << axis << "\" is named twice";
      return failure();
    }
    std::optional<int64_t> axisSize = mesh.getAxisSize(axis);
    if (!axisSize) {
      fail() << "mesh " << meshRef << " has no axis \"" << axis << "\"";
      return failure();
    }
    size *= *axisSize;
  }
  return size;
}

static SmallVector<StringRef> axisNames(ArrayAttr axes) {
  return llvm::to_vector(axes.getAsValueRange<StringAttr>());
}

LogicalResult ShardOp::verifySymbolUses(SymbolTableCollection &symbols) {
  ShardingAttr sharding = getSharding();
  RankedTensorType t = getType();
  // C1 (checked up front: a 0-D tensor has no entry that would resolve it)
  if (failed(groupSize(*this, symbols, sharding.getMesh(), {}, true)))
    return failure();
  // C2
  if (static_cast<int64_t>(sharding.getDims().size()) != t.getRank())
    return emitOpError("sharding has ")
           << sharding.getDims().size() << " entries but the tensor has rank "
           << t.getRank();
  for (int64_t d = 0; d < t.getRank(); ++d) {
    // C1, C3
    FailureOr<int64_t> parts = groupSize(*this, symbols, sharding.getMesh(),
                                         sharding.getAxes(d), true);
    if (failed(parts))
      return failure();
    // C4
    if (t.getDimSize(d) % *parts != 0)
      return emitOpError("dimension ")
             << d << " of size " << t.getDimSize(d) << " is not divisible into "
             << *parts << " shards";
  }
  return success();
}

LogicalResult AllReduceOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return groupSize(*this, symbols, getMeshAttr(), axisNames(getAxes()), false);
}

/// C3/C4 of all_gather and reduce_scatter: `big` is `small` with dimension
/// `dim` multiplied by the group size.
static LogicalResult verifyGatherShapes(Operation *op, RankedTensorType small,
                                        RankedTensorType big, int64_t dim,
                                        int64_t parts) {
  // C3
  if (small.getElementType() != big.getElementType() ||
      small.getRank() != big.getRank())
    return op->emitOpError("operand and result must have the same element ")
           << "type and rank, found " << op->getOperand(0).getType() << " and "
           << op->getResult(0).getType();
  if (dim < 0 || dim >= small.getRank())
    return op->emitOpError("dim ")
           << dim << " is outside the rank " << small.getRank();
  // C4
  for (int64_t d = 0; d < small.getRank(); ++d) {
    int64_t expected = small.getDimSize(d) * (d == dim ? parts : 1);
    if (big.getDimSize(d) != expected)
      return op->emitOpError("expected the gathered dimension ")
             << dim << " to be " << parts << " times the scattered one, "
             << "found " << op->getOperand(0).getType() << " and "
             << op->getResult(0).getType();
  }
  return success();
}

LogicalResult AllGatherOp::verifySymbolUses(SymbolTableCollection &symbols) {
  FailureOr<int64_t> parts =
      groupSize(*this, symbols, getMeshAttr(), axisNames(getAxes()), false);
  if (failed(parts))
    return failure();
  return verifyGatherShapes(*this, tensorType(getOperand()), getType(),
                            getDimAttr().getInt(), *parts);
}

LogicalResult
ReduceScatterOp::verifySymbolUses(SymbolTableCollection &symbols) {
  FailureOr<int64_t> parts =
      groupSize(*this, symbols, getMeshAttr(), axisNames(getAxes()), false);
  if (failed(parts))
    return failure();
  return verifyGatherShapes(*this, getType(), tensorType(getOperand()),
                            getDimAttr().getInt(), *parts);
}

LogicalResult AxisIndexOp::verifySymbolUses(SymbolTableCollection &symbols) {
  return groupSize(*this, symbols, getMeshAttr(), axisNames(getAxes()), false);
}

LogicalResult BroadcastOp::verifySymbolUses(SymbolTableCollection &symbols) {
  FailureOr<int64_t> parts =
      groupSize(*this, symbols, getMeshAttr(), axisNames(getAxes()), false);
  if (failed(parts))
    return failure();
  // C3
  int64_t root = getRootAttr().getInt();
  if (root < 0 || root >= *parts)
    return emitOpError("root ")
           << root << " is outside the group of " << *parts << " ranks";
  return success();
}
