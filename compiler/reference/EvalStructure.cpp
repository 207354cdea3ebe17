//===- EvalStructure.cpp - fusion, host calls, sharding, collectives ---===//
//
// Structure ops: a fusion region is evaluated through its body; omni.shard
// is the identity; host calls go through the HostFunctionRegistry; autodiff
// markers must have been expanded. Collectives and omni.axis_index run on
// the interpreter's World (evaluateSpmd, Spmd.cpp) and compute what
// step.fbs's Collective command does (docs/backend.md "Channels and the
// mesh"); without a world (evaluateFunction) only 1-rank groups exist,
// where a collective is the identity and axis_index is 0.
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/Interpreter.h"

#include "dialects/omni/OmniOps.h"

#include "absl/strings/str_join.h"
#include "llvm/ADT/STLExtras.h"

#include "mlir/IR/SymbolTable.h"
#include <cmath>

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

/// The calling rank's group over a collective's axes: its members (world
/// ranks in group rank order) and its position among them. Without a world
/// (evaluateFunction) the evaluation is rank 0 of a 1-rank world, and a
/// group of more ranks is an error.
struct RankGroup {
  std::vector<int64_t> members;
  int64_t groupRank = 0;
};

absl::StatusOr<RankGroup> rankGroup(Operation *op, FlatSymbolRefAttr meshRef,
                                    ArrayAttr axes, Interpreter &interp) {
  absl::StatusOr<MeshGroups> mesh = meshOf(op, meshRef);
  if (!mesh.ok())
    return mesh.status();
  std::vector<std::string> names = axisList(axes);
  for (const std::string &axis : names)
    if (llvm::find(mesh->axes, axis) == mesh->axes.end())
      return opError(op, "mesh @" + meshRef.getValue() + " has no axis '" +
                             axis + "'");
  World *world = interp.getWorld();
  if (!world) {
    int64_t size = 1;
    for (const std::string &axis : names)
      size *= mesh->shape[llvm::find(mesh->axes, axis) - mesh->axes.begin()];
    if (size != 1)
      return opError(op, "runs over a group of " + llvm::Twine(size) +
                             " ranks (mesh @" + meshRef.getValue() +
                             "); the single-process reference evaluator "
                             "supports only groups of 1 rank (evaluate the "
                             "unsharded program, or run it on N ranks: "
                             "omni-eval --ranks N)");
    return RankGroup{{0}, 0};
  }
  RankGroup group;
  group.members = mesh->groupOf(names, interp.getRank(), &group.groupRank);
  return group;
}

/// The elementwise reduction of the group's `posts`, in group rank order,
/// with the runtime's accumulation (runtime/hal/Channel.h): f32 sums round
/// to f32 after every addition, f16 and bf16 accumulate in f32 (the driver
/// rounds the result to the dtype once), f64 in double; integers wrap;
/// mean is the sum divided by the group size; min and max propagate NaN.
/// Float64 mode carries every float in double.
absl::StatusOr<HostTensor> reducePosts(Operation *op, om::ReduceKind kind,
                                       const std::vector<HostTensor> &posts,
                                       Interpreter &interp) {
  HostTensor out = posts[0];
  const int64_t n = static_cast<int64_t>(posts.size());
  if (!out.isFloat()) {
    if (kind == om::ReduceKind::mean)
      return opError(op, "reduces an integer tensor with 'mean' (expected "
                         "a float tensor)");
    for (int64_t i = 0; i < out.numElements(); ++i) {
      int64_t acc = posts[0].ints()[i];
      for (int64_t r = 1; r < n; ++r) {
        int64_t v = posts[r].ints()[i];
        switch (kind) {
        case om::ReduceKind::sum:
        case om::ReduceKind::mean:
          acc = static_cast<int64_t>(static_cast<uint64_t>(acc) +
                                     static_cast<uint64_t>(v));
          break;
        case om::ReduceKind::max:
          acc = std::max(acc, v);
          break;
        case om::ReduceKind::min:
          acc = std::min(acc, v);
          break;
        }
      }
      out.ints()[i] = acc;
    }
    return out;
  }
  // f32 arithmetic unless the values are carried in double.
  bool inDouble = interp.usesDouble(out.dtype());
  auto round = [&](double v) {
    return inDouble ? v : static_cast<double>(static_cast<float>(v));
  };
  for (int64_t i = 0; i < out.numElements(); ++i) {
    double acc = round(posts[0].floats()[i]);
    for (int64_t r = 1; r < n; ++r) {
      double v = posts[r].floats()[i];
      switch (kind) {
      case om::ReduceKind::sum:
      case om::ReduceKind::mean:
        acc = round(acc + v);
        break;
      case om::ReduceKind::max:
        if (!std::isnan(acc) && (std::isnan(v) || v > acc))
          acc = v;
        break;
      case om::ReduceKind::min:
        if (!std::isnan(acc) && (std::isnan(v) || v < acc))
          acc = v;
        break;
      }
    }
    if (kind == om::ReduceKind::mean)
      acc = round(acc / static_cast<double>(n));
    out.floats()[i] = acc;
  }
  return out;
}

/// Posts the operand on the op's group and returns every member's operand
/// in group rank order (the operand alone for a 1-rank group).
template <typename OpT>
absl::StatusOr<std::vector<HostTensor>>
postAndGather(OpT op, Interpreter &interp, RankGroup *group) {
  absl::StatusOr<RankGroup> g =
      rankGroup(op, op.getMeshAttr(), op.getAxesAttr(), interp);
  if (!g.ok())
    return g.status();
  *group = *g;
  const HostTensor &operand = interp.get(op.getOperand());
  if (group->members.size() == 1)
    return std::vector<HostTensor>{operand};
  return interp.getWorld()->exchange(op, interp.getRank(), group->members,
                                     group->groupRank, operand);
}

/// Concatenates `parts` (equal shapes) along `dim`.
HostTensor concatenate(const std::vector<HostTensor> &parts, int64_t dim) {
  std::vector<int64_t> shape = parts[0].shape();
  int64_t block = shape[dim];
  shape[dim] *= static_cast<int64_t>(parts.size());
  HostTensor out(parts[0].dtype(), shape);
  std::vector<int64_t> strides = stridesOf(shape);
  for (auto [k, part] : llvm::enumerate(parts))
    forEachIndex(part.shape(),
                 [&](llvm::ArrayRef<int64_t> index, int64_t position) {
                   int64_t to = 0;
                   for (size_t d = 0; d < index.size(); ++d)
                     to += (static_cast<int64_t>(d) == dim
                                ? index[d] + static_cast<int64_t>(k) * block
                                : index[d]) *
                           strides[d];
                   copyElement(part, position, out, to);
                 });
  return out;
}

/// Block `k` of `size` along `dim` of `t`.
HostTensor sliceBlock(const HostTensor &t, int64_t dim, int64_t k,
                      int64_t size) {
  std::vector<int64_t> shape = t.shape();
  shape[dim] = size;
  HostTensor out(t.dtype(), shape);
  std::vector<int64_t> strides = stridesOf(t.shape());
  forEachIndex(shape, [&](llvm::ArrayRef<int64_t> index, int64_t position) {
    int64_t from = 0;
    for (size_t d = 0; d < index.size(); ++d)
      from +=
          (static_cast<int64_t>(d) == dim ? index[d] + k * size : index[d]) *
          strides[d];
    copyElement(t, from, out, position);
  });
  return out;
}

absl::StatusOr<Results> evalAllReduce(om::AllReduceOp op, Interpreter &interp) {
  RankGroup group;
  absl::StatusOr<std::vector<HostTensor>> posts =
      postAndGather(op, interp, &group);
  if (!posts.ok())
    return posts.status();
  absl::StatusOr<HostTensor> sum =
      reducePosts(op, op.getKind(), *posts, interp);
  if (!sum.ok())
    return sum.status();
  return Results{std::move(*sum)};
}

absl::StatusOr<Results> evalReduceScatter(om::ReduceScatterOp op,
                                          Interpreter &interp) {
  RankGroup group;
  absl::StatusOr<std::vector<HostTensor>> posts =
      postAndGather(op, interp, &group);
  if (!posts.ok())
    return posts.status();
  absl::StatusOr<HostTensor> sum =
      reducePosts(op, op.getKind(), *posts, interp);
  if (!sum.ok())
    return sum.status();
  int64_t dim = op.getDim();
  HostTensor zeros = interp.zerosForResult(op, 0);
  return Results{sliceBlock(*sum, dim, group.groupRank, zeros.shape()[dim])};
}

absl::StatusOr<Results> evalAllGather(om::AllGatherOp op, Interpreter &interp) {
  RankGroup group;
  absl::StatusOr<std::vector<HostTensor>> posts =
      postAndGather(op, interp, &group);
  if (!posts.ok())
    return posts.status();
  return Results{concatenate(*posts, op.getDim())};
}

absl::StatusOr<Results> evalBroadcast(om::BroadcastOp op, Interpreter &interp) {
  RankGroup group;
  absl::StatusOr<std::vector<HostTensor>> posts =
      postAndGather(op, interp, &group);
  if (!posts.ok())
    return posts.status();
  int64_t root = op.getRoot();
  if (root < 0 || root >= static_cast<int64_t>(posts->size()))
    return opError(op, "has root " + llvm::Twine(root) +
                           " outside its group of " +
                           llvm::Twine(posts->size()) + " ranks");
  return Results{(*posts)[root]};
}

absl::StatusOr<Results> evalAxisIndex(om::AxisIndexOp op, Interpreter &interp) {
  absl::StatusOr<RankGroup> group =
      rankGroup(op, op.getMeshAttr(), op.getAxesAttr(), interp);
  if (!group.ok())
    return group.status();
  return Results{HostTensor::scalarInt(DType::I64, group->groupRank)};
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
  addHandler<om::AllReduceOp>(table, evalAllReduce);
  addHandler<om::AllGatherOp>(table, evalAllGather);
  addHandler<om::ReduceScatterOp>(table, evalReduceScatter);
  addHandler<om::BroadcastOp>(table, evalBroadcast);
  addHandler<om::AxisIndexOp>(table, evalAxisIndex);
  addGenericHandler<om::GradOp, om::ValueAndGradOp>(table, autodiffMarker);
}

} // namespace omni::reference::detail
