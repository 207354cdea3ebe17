//===- EvalStructure.cpp - fusion, host calls, sharding, collectives ---===//
//
// Structure ops on a single host: a fusion region is evaluated through its
// body; omni.shard is the identity (shapes are global); collectives are the
// identity for groups of one rank and an error otherwise, because a
// single-process evaluator has no other ranks; host calls go through the
// HostFunctionRegistry; autodiff markers must have been expanded.
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/Interpreter.h"

#include "dialects/omni/OmniOps.h"

#include "absl/strings/str_join.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;
namespace om = mlir::omni;

namespace omni::reference::detail {
namespace {

absl::StatusOr<Results> evalFusion(om::FusionOp op, Interpreter &interp) {
  Results inputs;
  for (Value v : op.getInputs())
    inputs.push_back(interp.get(v));
  return interp.runBlock(op.getBody().front(), inputs, op);
}

absl::StatusOr<Results> evalHostCall(om::HostCallOp op, Interpreter &interp) {
  std::string name = op.getCallee().str();
  const HostFunction *fn = interp.hostFunctions().lookup(name);
  if (!fn)
    return opError(
        op, "calls unknown host function '" + name + "' (registered: " +
                (interp.hostFunctions().names().empty()
                     ? std::string("none")
                     : absl::StrJoin(interp.hostFunctions().names(), ", ")) +
                ")");
  Results args;
  for (Value v : op.getOperands())
    args.push_back(interp.get(v));
  absl::StatusOr<Results> results = (*fn)(args);
  if (!results.ok())
    return opError(op, results.status());
  if (results->size() != op.getNumResults())
    return opError(op, "host function '" + name + "' returned " +
                           llvm::Twine(results->size()) +
                           " results but the op has " +
                           llvm::Twine(op.getNumResults()));
  for (auto [i, t] : llvm::enumerate(*results)) {
    // The host function may use another float width (rewards return f32).
    absl::StatusOr<ValueType> type = valueTypeOf(op.getResult(i).getType());
    if (type.ok() && t.isFloat() && isFloatDType(type->dtype))
      t.relabel(type->dtype);
  }
  return results;
}

/// The number of ranks in the group that `axes` of `mesh` form.
absl::StatusOr<int64_t> groupSize(Operation *op, FlatSymbolRefAttr meshRef,
                                  ArrayAttr axes) {
  auto mesh = SymbolTable::lookupNearestSymbolFrom<om::MeshOp>(op, meshRef);
  if (!mesh)
    return opError(op, "refers to unknown mesh " + meshRef.getValue());
  int64_t size = 1;
  for (Attribute a : axes) {
    llvm::StringRef axis = cast<StringAttr>(a).getValue();
    std::optional<int64_t> n = mesh.getAxisSize(axis);
    if (!n)
      return opError(op, "mesh @" + meshRef.getValue() + " has no axis '" +
                             axis + "'");
    size *= *n;
  }
  return size;
}

/// Collectives over a group of one rank return their operand.
template <typename OpT>
absl::StatusOr<Results> evalCollective(OpT op, Interpreter &interp) {
  absl::StatusOr<int64_t> size =
      groupSize(op, op.getMeshAttr(), op.getAxesAttr());
  if (!size.ok())
    return size.status();
  if (*size != 1)
    return opError(op, "runs over a group of " + llvm::Twine(*size) +
                           " ranks (mesh @" + op.getMesh() +
                           "); the single-process reference evaluator "
                           "supports only groups of 1 rank (evaluate the "
                           "unsharded program instead)");
  return Results{interp.get(op.getOperand())};
}

absl::StatusOr<Results> autodiffMarker(Operation *op, Interpreter &) {
  return opError(op, "must be expanded by omni-autodiff first; the "
                     "reference evaluator runs differentiated programs");
}

} // namespace

void registerStructureHandlers(HandlerTable &table) {
  addHandler<om::FusionOp>(table, evalFusion);
  addHandler<om::HostCallOp>(table, evalHostCall);
  addHandler<om::ShardOp>(
      table,
      [](om::ShardOp op, Interpreter &interp) -> absl::StatusOr<Results> {
        return Results{interp.get(op.getOperand())};
      });
  addHandler<om::AllReduceOp>(table, evalCollective<om::AllReduceOp>);
  addHandler<om::AllGatherOp>(table, evalCollective<om::AllGatherOp>);
  addHandler<om::ReduceScatterOp>(table, evalCollective<om::ReduceScatterOp>);
  addHandler<om::BroadcastOp>(table, evalCollective<om::BroadcastOp>);
  addGenericHandler<om::GradOp, om::ValueAndGradOp>(table, autodiffMarker);
}

} // namespace omni::reference::detail
