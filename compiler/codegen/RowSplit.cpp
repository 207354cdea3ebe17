//===- RowSplit.cpp - kernels cut into work items along their rows ------===//
//
// planRowSplit and buildRowKernelFunction (KernelBuilder.h, RowSplit): which
// values of a fusion body split into row blocks, how many work items a
// kernel runs as, and the kernel of one item (the body on the item's
// types, lowered by buildKernelFunction).
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/KernelBuilder.h"

#include "dialects/omni/OmniOps.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/TypeSwitch.h"

#include <numeric>

using namespace mlir;
using namespace mlir::omni;

namespace {

RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

} // namespace

namespace {

/// The first dimension of `t` whose size is not 1 (-1 if none): the
/// dimension a row split divides (leading unit dimensions do not change the
/// layout).
int64_t leadDim(RankedTensorType t) {
  for (int64_t d = 0; d < t.getRank(); ++d)
    if (t.getDimSize(d) != 1)
      return d;
  return -1;
}

/// A split's demand on a value: split (true) or whole (false); false when
/// the value cannot be split so or is already demanded the other way.
using Demand = llvm::function_ref<bool(Value, bool)>;

/// Which values of the fusion's body are split into row blocks (true) or
/// needed whole by every work item (false), or nullopt when the body cannot
/// be split so. Demands flow from the results (all split) back to the
/// inputs; every op is visited after all its users. An op none of whose
/// results is split needs its operands whole; a single-result op whose
/// result is split asks `rule(op, result type, demand)` to demand its
/// operands; `canSplit` says which values may be split at all.
std::optional<DenseMap<Value, bool>> propagateSplit(
    FusionOp fusion, llvm::function_ref<bool(Value)> canSplit,
    llvm::function_ref<bool(Operation *, RankedTensorType, Demand)> rule) {
  DenseMap<Value, bool> split;
  auto demand = [&](Value v, bool s) {
    if (s && !canSplit(v))
      return false;
    auto [it, inserted] = split.try_emplace(v, s);
    return inserted || it->second == s;
  };
  Block &body = fusion.getBody().front();
  for (Value v : body.getTerminator()->getOperands())
    if (!demand(v, true))
      return std::nullopt;
  for (Operation &op : llvm::reverse(body.without_terminator())) {
    bool anySplit = false, anyWhole = false;
    for (Value r : op.getResults()) {
      auto it = split.find(r);
      if (it != split.end())
        (it->second ? anySplit : anyWhole) = true;
    }
    if (!anySplit) {
      for (Value v : op.getOperands())
        if (!demand(v, false))
          return std::nullopt;
      continue;
    }
    if (anyWhole || op.getNumResults() != 1 ||
        !rule(&op, tensorType(op.getResult(0)), demand))
      return std::nullopt;
  }
  return split;
}

/// Both splits' rule for an elementwise op (any other op: false): every
/// operand has the result's shape and is split with it.
bool splitElementwise(Operation *op, RankedTensorType out, Demand demand) {
  if (!op->hasTrait<OpTrait::Elementwise>())
    return false;
  return llvm::all_of(op->getOperands(), [&](Value v) {
    return tensorType(v).getShape() == out.getShape() && demand(v, true);
  });
}

/// The split into `rows` row blocks of the leading non-unit dimension.
std::optional<DenseMap<Value, bool>> splitValues(FusionOp fusion,
                                                 int64_t rows) {
  auto canSplit = [&](Value v) {
    RankedTensorType t = tensorType(v);
    int64_t lead = leadDim(t);
    return lead >= 0 && t.getDimSize(lead) % rows == 0;
  };
  auto rule = [&](Operation *op, RankedTensorType out, Demand demand) {
    int64_t lead = leadDim(out), size = out.getDimSize(lead);
    // Operand `v`'s leading dimension must be `d` and hold the result's
    // rows.
    auto splitAt = [&](Value v, int64_t d, int64_t size) {
      RankedTensorType t = tensorType(v);
      return leadDim(t) == d && t.getDimSize(d) == size && demand(v, true);
    };
    return llvm::TypeSwitch<Operation *, bool>(op)
        .Case(
            [&](ConstantOp c) { return isa<SplatElementsAttr>(c.getValue()); })
        .Case([&](IotaOp iota) {
          return static_cast<int64_t>(iota.getDim()) != lead;
        })
        .Case([&](BroadcastInDimOp bc) {
          for (auto [i, d] : llvm::enumerate(bc.getDims()))
            if (d == lead && bc.getOperand().getType().getDimSize(i) != 1)
              return splitAt(bc.getOperand(), static_cast<int64_t>(i), size);
          // Broadcast along the rows: every item reads the source whole.
          return demand(bc.getOperand(), false);
        })
        .Case([&](TransposeOp t) {
          return splitAt(t.getOperand(), t.getPermutation()[lead], size);
        })
        .Case([&](ReduceOp red) {
          // The input dimension that becomes the result's `lead`.
          int64_t kept = 0;
          for (int64_t d = 0; d < red.getOperand().getType().getRank(); ++d) {
            if (llvm::is_contained(red.getDims(), d))
              continue;
            if (kept++ == lead)
              return splitAt(red.getOperand(), d, size);
          }
          return false;
        })
        .Case([&](ReshapeOp) {
          // Row-major order is kept: row block i of the result is row
          // block i of the input whenever both have whole row blocks.
          return demand(op->getOperand(0), true);
        })
        .Case([&](SliceOp s) {
          return s.getStart()[lead] == 0 && s.getStrides()[lead] == 1 &&
                 splitAt(s.getOperand(), lead, size);
        })
        .Case([&](PadOp p) {
          return p.getLow()[lead] == 0 && p.getHigh()[lead] == 0 &&
                 splitAt(p.getOperand(), lead, size);
        })
        .Case([&](ConcatOp c) {
          return static_cast<int64_t>(c.getDim()) != lead &&
                 llvm::all_of(c->getOperands(),
                              [&](Value v) { return splitAt(v, lead, size); });
        })
        .Default(
            [&](Operation *o) { return splitElementwise(o, out, demand); });
  };
  return propagateSplit(fusion, canSplit, rule);
}

/// The split over the first prefix.size() >= 2 dimensions together
/// (RowSplit::prefix): every split value's shape starts with `prefix`, and
/// every op keeps those dimensions where they are.
std::optional<DenseMap<Value, bool>>
splitPrefixValues(FusionOp fusion, ArrayRef<int64_t> prefix) {
  const int64_t k = static_cast<int64_t>(prefix.size());
  auto canSplit = [&](Value v) {
    RankedTensorType t = tensorType(v);
    return t.getRank() >= k && t.getShape().take_front(k) == prefix;
  };
  auto untouched = [&](ArrayRef<int64_t> starts, ArrayRef<int64_t> ends) {
    for (int64_t d = 0; d < k; ++d)
      if (starts[d] != 0 || ends[d] != 0)
        return false;
    return true;
  };
  auto rule = [&](Operation *op, RankedTensorType out, Demand demand) {
    return llvm::TypeSwitch<Operation *, bool>(op)
        .Case(
            [&](ConstantOp c) { return isa<SplatElementsAttr>(c.getValue()); })
        .Case([&](IotaOp iota) {
          return static_cast<int64_t>(iota.getDim()) >= k;
        })
        .Case([&](BroadcastInDimOp bc) {
          // Either the source holds the prefix dimensions in place
          // (split like the result) or it has none of them (whole).
          RankedTensorType src = bc.getOperand().getType();
          bool inPlace = true, anyFed = false;
          for (int64_t j = 0; j < k; ++j) {
            bool fedInPlace = false;
            for (auto [i, d] : llvm::enumerate(bc.getDims())) {
              if (static_cast<int64_t>(d) != j || src.getDimSize(i) == 1)
                continue;
              anyFed = true;
              fedInPlace = static_cast<int64_t>(i) == j;
            }
            inPlace = inPlace && fedInPlace;
          }
          if (inPlace)
            return demand(bc.getOperand(), true);
          return !anyFed && demand(bc.getOperand(), false);
        })
        .Case([&](TransposeOp t) {
          for (int64_t d = 0; d < k; ++d)
            if (static_cast<int64_t>(t.getPermutation()[d]) != d)
              return false;
          return demand(t.getOperand(), true);
        })
        .Case([&](ReduceOp red) {
          for (int64_t d : red.getDims())
            if (d < k)
              return false;
          return demand(red.getOperand(), true);
        })
        .Case([&](ReshapeOp) {
          // Row-major order: the item's elements are one contiguous
          // range of both, and the operand has the same prefix.
          return demand(op->getOperand(0), true);
        })
        .Case([&](SliceOp sl) {
          SmallVector<int64_t> zero(k, 0), stride(sl.getStrides());
          for (int64_t d = 0; d < k; ++d)
            stride[d] -= 1;
          return untouched(sl.getStart(), zero) && untouched(stride, zero) &&
                 demand(sl.getOperand(), true);
        })
        .Case([&](PadOp p) {
          return untouched(p.getLow(), p.getHigh()) &&
                 demand(p.getOperand(), true);
        })
        .Case([&](ConcatOp c) {
          return static_cast<int64_t>(c.getDim()) >= k &&
                 llvm::all_of(c->getOperands(),
                              [&](Value v) { return demand(v, true); });
        })
        .Default(
            [&](Operation *o) { return splitElementwise(o, out, demand); });
  };
  return propagateSplit(fusion, canSplit, rule);
}

/// `t` for one of `plan.grid` work items: its leading non-unit dimension
/// divided, or (prefix split) its first prefix - 1 dimensions 1 and
/// dimension prefix - 1 holding rows / grid.
RankedTensorType itemType(RankedTensorType t, const RowSplit &plan) {
  SmallVector<int64_t> shape(t.getShape());
  if (plan.prefix == 0) {
    shape[leadDim(t)] /= plan.grid;
  } else {
    for (int64_t d = 0; d + 1 < plan.prefix; ++d)
      shape[d] = 1;
    shape[plan.prefix - 1] = plan.rows / plan.grid;
  }
  return RankedTensorType::get(shape, t.getElementType());
}

/// The values split for `plan` (splitValues or splitPrefixValues).
std::optional<DenseMap<Value, bool>> planValues(FusionOp fusion,
                                                const RowSplit &plan) {
  if (plan.prefix == 0)
    return splitValues(fusion, plan.rows);
  auto first = cast<RankedTensorType>(fusion.getResultTypes().front());
  return splitPrefixValues(fusion, first.getShape().take_front(plan.prefix));
}

int64_t elementBytes(Type e) {
  return e.isInteger(1) ? 1 : (e.getIntOrFloatBitWidth() + 7) / 8;
}

} // namespace

namespace {

/// The most work items whose item has at least kMinRowWork elements of
/// split values and whose whole values (which every item recomputes) stay
/// under a quarter of it, among `grids`; 1 when none has two.
int64_t chooseGrid(const DenseMap<Value, bool> &split,
                   ArrayRef<int64_t> grids) {
  int64_t splitWork = 0, wholeWork = 0;
  for (auto [v, s] : split) {
    int64_t n = tensorType(v).getNumElements();
    if (s)
      splitWork += n;
    else if (!isa<BlockArgument>(v) && !v.getDefiningOp<ConstantOp>())
      wholeWork += n;
  }
  int64_t grid = 1;
  for (int64_t g : grids) {
    int64_t item = splitWork / g;
    if (g > grid && item >= kMinRowWork && 4 * wholeWork <= item)
      grid = g;
  }
  return grid;
}

/// The divisors of n.
SmallVector<int64_t> divisors(int64_t n) {
  SmallVector<int64_t> out;
  for (int64_t d = 1; d * d <= n; ++d)
    if (n % d == 0) {
      out.push_back(d);
      if (d != n / d)
        out.push_back(n / d);
    }
  return out;
}

/// The best split of the rows as the leading non-unit dimension
/// (RowSplit::prefix 0), without item types; grid 1 when none.
RowSplit planLeadSplit(FusionOp fusion) {
  RowSplit plan;
  int64_t rows = 0;
  for (Type t : fusion.getResultTypes()) {
    auto tt = cast<RankedTensorType>(t);
    int64_t lead = leadDim(tt);
    if (lead < 0)
      return plan;
    rows = std::gcd(rows, tt.getDimSize(lead));
  }
  if (rows < 2)
    return plan;
  std::optional<DenseMap<Value, bool>> split = splitValues(fusion, rows);
  if (!split)
    return plan;
  plan.rows = rows;
  plan.grid = chooseGrid(*split, divisors(rows));
  return plan;
}

/// The best split of the rows as the first k >= 2 dimensions together,
/// for the k that gives the most work items; grid 1 when none.
RowSplit planPrefixSplit(FusionOp fusion) {
  RowSplit best;
  ArrayRef<int64_t> shape =
      cast<RankedTensorType>(fusion.getResultTypes().front()).getShape();
  int64_t outer = 1; // the product of dimensions [0, k - 1)
  for (int64_t k = 2; k <= static_cast<int64_t>(shape.size()); ++k) {
    outer *= shape[k - 2];
    ArrayRef<int64_t> prefix = shape.take_front(k);
    bool shared = llvm::all_of(fusion.getResultTypes(), [&](Type t) {
      auto tt = cast<RankedTensorType>(t);
      return tt.getRank() >= k && tt.getShape().take_front(k) == prefix;
    });
    if (!shared)
      break;
    std::optional<DenseMap<Value, bool>> split =
        splitPrefixValues(fusion, prefix);
    if (!split)
      break; // a longer prefix only adds constraints
    SmallVector<int64_t> grids;
    for (int64_t d : divisors(shape[k - 1]))
      grids.push_back(outer * d);
    int64_t grid = chooseGrid(*split, grids);
    if (grid > best.grid) {
      best.rows = outer * shape[k - 1];
      best.grid = grid;
      best.prefix = k;
    }
  }
  return best;
}

} // namespace

std::optional<RowSplit> mlir::omni::planRowSplit(FusionOp fusion) {
  RowSplit lead = planLeadSplit(fusion), prefix = planPrefixSplit(fusion);
  RowSplit plan = prefix.grid > lead.grid ? prefix : lead;
  if (plan.grid < 2)
    return std::nullopt;
  std::optional<DenseMap<Value, bool>> split = planValues(fusion, plan);
  Block &body = fusion.getBody().front();
  SmallVector<Value> buffers(body.getArguments());
  llvm::append_range(buffers, body.getTerminator()->getOperands());
  for (Value v : buffers) {
    RankedTensorType t = tensorType(v);
    auto it = split->find(v);
    bool s = it != split->end() && it->second;
    plan.itemTypes.push_back(s ? itemType(t, plan) : t);
    plan.itemBytes.push_back(s ? t.getNumElements() / plan.grid *
                                     elementBytes(t.getElementType())
                               : 0);
  }
  return plan;
}

FailureOr<func::FuncOp> mlir::omni::buildRowKernelFunction(FusionOp fusion,
                                                           const RowSplit &plan,
                                                           ModuleOp kernels,
                                                           StringRef name) {
  std::optional<DenseMap<Value, bool>> split = planValues(fusion, plan);
  if (!split)
    return fusion.emitOpError("cannot be split into rows"), failure();
  // A detached copy of the fusion whose split values have the item's types
  // (and splat constants the item's shape), built as any other kernel.
  IRMapping copies;
  Operation *copy = fusion->clone(copies);
  for (auto [v, s] : *split) {
    if (!s)
      continue;
    Value c = copies.lookup(v);
    RankedTensorType t = itemType(tensorType(v), plan);
    c.setType(t);
    if (auto k = c.getDefiningOp<ConstantOp>())
      k.setValueAttr(SplatElementsAttr::get(
          t, cast<SplatElementsAttr>(k.getValue()).getSplatValue<Attribute>()));
  }
  FailureOr<func::FuncOp> fn =
      buildKernelFunction(cast<FusionOp>(copy), kernels, name);
  copy->erase();
  return fn;
}
