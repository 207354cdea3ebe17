//===- MoveReshapes.cpp - Reshapes and narrowing casts out of chains ------===//
//
// omni-move-reshapes prepares a function for omni-fuse by moving two kinds
// of ops to where they cost nothing:
//
//  - An omni.reshape is never inside a fusion region: it aliases its
//    operand (docs/fusion.md). One in the middle of a chain of fusible ops
//    therefore splits the chain into two kernels and stores the value
//    between them. An attention's q, k and v projections are the case that
//    weighs: bias add (bf16 in, f32 out) -> reshape to heads -> per-head RMS
//    norm, transposed -> concatenation; and after the attention, transpose
//    -> reshape -> slice -> round for the out projection. A reshape is
//    moved up to the values the chain starts from (library results,
//    arguments, loop results) or down to the ops that end it, whichever
//    reaches such an edge through fusible ops alone; otherwise it stays.
//  - A narrowing float cast of a concatenation becomes a concatenation of
//    the casts: the concatenation, a kernel of its own when its operands
//    end in reductions (rule 2 of omni-fuse), then moves the narrow bytes,
//    and each cast joins its operand's kernel.
//
// Both rewrites compute the same elements with the same ops, so the values
// are unchanged bit for bit; only kernel boundaries move.
//
//===----------------------------------------------------------------------===//

#include "dialects/omni/OmniOps.h"
#include "passes/FusibleOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Debug.h"

#include <optional>

#define DEBUG_TYPE "omni-move-reshapes"

namespace mlir::omni {
#define GEN_PASS_DEF_OMNIMOVERESHAPESPASS
#include "passes/Passes.h.inc"
} // namespace mlir::omni

using namespace mlir;
using namespace mlir::omni;

namespace {

RankedTensorType tensorType(Value v) {
  return dyn_cast<RankedTensorType>(v.getType());
}

bool isStatic(Value v) {
  RankedTensorType t = tensorType(v);
  return t && t.hasStaticShape();
}

/// A reshape's value costs nothing where it is made from: a block argument
/// or the result of an op that never joins a region (a library call, an
/// opaque op, a loop, a constant, another reshape).
bool isEdgeValue(Value v) {
  Operation *def = v.getDefiningOp();
  return !def || !isFusible(def);
}

/// An elementwise op of one result whose operands all have its shape.
bool isPlainElementwise(Operation *op) {
  if (kindOf(op) != FusionKind::Elementwise || op->getNumResults() != 1 ||
      !isFusible(op) || !isStatic(op->getResult(0)))
    return false;
  ArrayRef<int64_t> shape = tensorType(op->getResult(0)).getShape();
  return llvm::all_of(op->getOperands(), [&](Value v) {
    return isStatic(v) && tensorType(v).getShape() == shape;
  });
}

/// Consecutive dimensions of a reshape's operand and result with equal
/// products, as small as possible: [inBegin, inEnd) becomes
/// [outBegin, outEnd). Unit dimensions may form a group with an empty side.
struct DimGroup {
  int64_t inBegin, inEnd, outBegin, outEnd;
  bool isIdentity() const {
    return inEnd - inBegin == 1 && outEnd - outBegin == 1;
  }
};

std::optional<SmallVector<DimGroup>> dimGroups(ArrayRef<int64_t> in,
                                               ArrayRef<int64_t> out) {
  SmallVector<DimGroup> groups;
  int64_t i = 0, j = 0, n = in.size(), m = out.size();
  while (i < n || j < m) {
    DimGroup g{i, i, j, j};
    int64_t pi = 1, pj = 1;
    if (i < n)
      pi *= in[i++];
    if (j < m)
      pj *= out[j++];
    while (pi != pj) {
      if (pi < pj) {
        if (i == n)
          return std::nullopt;
        pi *= in[i++];
      } else {
        if (j == m)
          return std::nullopt;
        pj *= out[j++];
      }
    }
    g.inEnd = i;
    g.outEnd = j;
    groups.push_back(g);
  }
  return groups;
}

/// `broadcast_in_dim` of a source to `from`, reshaped to `to`, as a
/// broadcast of a reshaped source: the new source's shape and dims. Each
/// dimension group of the reshape must be either all broadcast (no source
/// dimension maps into it) or all from source dimensions of the same sizes,
/// consecutive (a group of one dimension each side may also stretch a
/// source dimension of size 1). Unit dimensions of `from` may be broadcast
/// in any group.
struct BroadcastPlan {
  SmallVector<int64_t> sourceShape, dims;
};

std::optional<BroadcastPlan> planBroadcast(BroadcastInDimOp bc,
                                           ArrayRef<int64_t> to) {
  ArrayRef<int64_t> from = bc.getType().getShape();
  ArrayRef<int64_t> src = bc.getOperand().getType().getShape();
  ArrayRef<int64_t> dims = bc.getDims();
  for (size_t k = 1; k < dims.size(); ++k)
    if (dims[k] <= dims[k - 1])
      return std::nullopt;
  std::optional<SmallVector<DimGroup>> groups = dimGroups(from, to);
  if (!groups)
    return std::nullopt;
  // sourceOf[d]: the source dimension mapped to result dimension d, or -1.
  SmallVector<int64_t> sourceOf(from.size(), -1);
  for (auto [k, d] : llvm::enumerate(dims))
    sourceOf[d] = k;
  BroadcastPlan plan;
  int64_t nextSource = 0;
  for (const DimGroup &g : *groups) {
    SmallVector<int64_t> mapped;
    for (int64_t d = g.inBegin; d < g.inEnd; ++d) {
      if (sourceOf[d] >= 0)
        mapped.push_back(sourceOf[d]);
      else if (from[d] != 1 && !g.isIdentity())
        // A broadcast dimension beside mapped ones in a split or merged
        // group: any mapped one would be a partial broadcast.
        mapped.push_back(-1);
    }
    if (mapped.empty())
      continue; // all broadcast: the group's result dims are not mapped
    if (llvm::is_contained(mapped, -1))
      return std::nullopt;
    for (size_t k = 0; k < mapped.size(); ++k)
      if (mapped[k] != nextSource + static_cast<int64_t>(k))
        return std::nullopt;
    if (g.isIdentity()) {
      plan.sourceShape.push_back(src[mapped[0]]);
      plan.dims.push_back(g.outBegin);
    } else {
      for (int64_t s : mapped)
        if (src[s] != from[dims[s]])
          return std::nullopt;
      for (int64_t d = g.outBegin; d < g.outEnd; ++d) {
        plan.sourceShape.push_back(to[d]);
        plan.dims.push_back(d);
      }
    }
    nextSource += mapped.size();
  }
  if (nextSource != static_cast<int64_t>(src.size()))
    return std::nullopt;
  return plan;
}

/// Moves reshapes and casts in one function.
class Mover {
public:
  void run(func::FuncOp fn);

private:
  // Hoisting: reshape(f(x...)) -> f(reshape(x)...).
  bool canHoist(Value v, ArrayRef<int64_t> shape, unsigned depth);
  Value hoist(OpBuilder &b, Value v, ArrayRef<int64_t> shape);
  // Sinking: g(reshape(x)) -> reshape(g(x)).
  bool canSink(Value v, ArrayRef<int64_t> preShape, unsigned depth,
               bool &reachesFusible);
  void sink(Value oldV, Value newV);
  bool tryMoveReshape(ReshapeOp r);
  bool tryCastConcat(CastOp cast);
  void eraseDead(Operation *op);

  Value reshapeTo(OpBuilder &b, Location loc, Value v, ArrayRef<int64_t> to) {
    RankedTensorType t = tensorType(v);
    if (t.getShape() == to)
      return v;
    if (auto r = v.getDefiningOp<ReshapeOp>())
      return reshapeTo(b, loc, r.getOperand(), to);
    return ReshapeOp::create(b, loc, t.clone(to), v);
  }

  DenseSet<Operation *> erased;
  /// The deepest chain followed: a bound on the recursion, not a
  /// heuristic (the q/k/v chains are a handful of ops).
  static constexpr unsigned kMaxDepth = 64;
};

bool Mover::canHoist(Value v, ArrayRef<int64_t> shape, unsigned depth) {
  if (tensorType(v).getShape() == shape || isEdgeValue(v))
    return true;
  if (depth > kMaxDepth)
    return false;
  Operation *def = v.getDefiningOp();
  if (splatValue(v))
    return true;
  if (auto bc = dyn_cast<BroadcastInDimOp>(def)) {
    // A broadcast is rebuilt for the reshaped reader, whatever its other
    // readers (omni-fuse copies a broadcast into each reader anyway).
    std::optional<BroadcastPlan> plan = planBroadcast(bc, shape);
    return plan && isStatic(bc.getOperand()) &&
           canHoist(bc.getOperand(), plan->sourceShape, depth + 1);
  }
  // An op with other readers would have to be computed twice.
  if (!isPlainElementwise(def) || !v.hasOneUse())
    return false;
  return llvm::all_of(def->getOperands(),
                      [&](Value x) { return canHoist(x, shape, depth + 1); });
}

Value Mover::hoist(OpBuilder &b, Value v, ArrayRef<int64_t> shape) {
  RankedTensorType t = tensorType(v);
  Location loc = v.getLoc();
  if (t.getShape() == shape)
    return v;
  if (DenseElementsAttr splat = splatValue(v))
    return ConstantOp::create(b, loc, splat.reshape(t.clone(shape)));
  if (isEdgeValue(v))
    return reshapeTo(b, loc, v, shape);
  Operation *def = v.getDefiningOp();
  if (auto bc = dyn_cast<BroadcastInDimOp>(def)) {
    BroadcastPlan plan = *planBroadcast(bc, shape);
    Value src = hoist(b, bc.getOperand(), plan.sourceShape);
    return BroadcastInDimOp::create(b, loc, t.clone(shape), src,
                                    b.getDenseI64ArrayAttr(plan.dims));
  }
  SmallVector<Value> operands;
  for (Value x : def->getOperands())
    operands.push_back(hoist(b, x, shape));
  Operation *clone = b.clone(*def);
  clone->setOperands(operands);
  clone->getResult(0).setType(t.clone(shape));
  return clone->getResult(0);
}

bool Mover::canSink(Value v, ArrayRef<int64_t> preShape, unsigned depth,
                    bool &reachesFusible) {
  if (depth > kMaxDepth)
    return false;
  ArrayRef<int64_t> shape = tensorType(v).getShape();
  std::optional<SmallVector<DimGroup>> groups = dimGroups(preShape, shape);
  if (!groups)
    return false;
  for (Operation *user : v.getUsers()) {
    if (!isFusible(user) || isa<ReshapeOp>(user))
      continue; // the reshape goes before it, as before
    reachesFusible = true;
    if (isPlainElementwise(user)) {
      bool onlyChainOrSplats = llvm::all_of(user->getOperands(), [&](Value x) {
        return x == v || splatValue(x);
      });
      if (!onlyChainOrSplats ||
          !canSink(user->getResult(0), preShape, depth + 1, reachesFusible))
        return false;
      continue;
    }
    auto slice = dyn_cast<SliceOp>(user);
    if (!slice)
      return false;
    // A slice commutes with the reshape when it cuts only dimensions that
    // the reshape keeps as they are.
    SmallVector<int64_t> sliced(preShape);
    ArrayRef<int64_t> result = slice.getType().getShape();
    for (const DimGroup &g : *groups)
      for (int64_t d = g.outBegin; d < g.outEnd; ++d) {
        if (result[d] == shape[d])
          continue; // not cut (a stride would shrink it)
        if (!g.isIdentity())
          return false;
        sliced[g.inBegin] = result[d];
      }
    if (!canSink(slice.getResult(), sliced, depth + 1, reachesFusible))
      return false;
  }
  return true;
}

void Mover::sink(Value oldV, Value newV) {
  ArrayRef<int64_t> oldShape = tensorType(oldV).getShape();
  Value back; // reshape(newV) to oldV's shape, made once
  // Each reader once, however many of its operands oldV is (mul %r, %r):
  // a rewritten reader is erased, with all its uses.
  SetVector<Operation *> users(oldV.getUsers().begin(), oldV.getUsers().end());
  for (Operation *user : users) {
    OpBuilder b(user);
    if (!isFusible(user) || isa<ReshapeOp>(user)) {
      if (!back) {
        OpBuilder after(newV.getContext());
        after.setInsertionPointAfterValue(newV);
        back = reshapeTo(after, user->getLoc(), newV, oldShape);
      }
      user->replaceUsesOfWith(oldV, back);
      continue;
    }
    ArrayRef<int64_t> newShape = tensorType(newV).getShape();
    Value next;
    if (auto slice = dyn_cast<SliceOp>(user)) {
      // Map the cut dimensions (identity groups) onto newV's dimensions.
      SmallVector<DimGroup> groups = *dimGroups(newShape, oldShape);
      SmallVector<int64_t> start(newShape.size(), 0), limit(newShape),
          strides(newShape.size(), 1);
      for (const DimGroup &g : groups)
        if (g.isIdentity()) {
          start[g.inBegin] = slice.getStart()[g.outBegin];
          limit[g.inBegin] = slice.getLimit()[g.outBegin];
          strides[g.inBegin] = slice.getStrides()[g.outBegin];
        }
      auto cut =
          SliceOp::create(b, slice.getLoc(), newV, start, limit, strides);
      cut->setDiscardableAttrs(slice->getDiscardableAttrDictionary());
      next = cut.getResult();
    } else {
      SmallVector<Value> operands;
      for (Value x : user->getOperands()) {
        if (x == oldV)
          operands.push_back(newV);
        else
          operands.push_back(ConstantOp::create(
              b, x.getLoc(),
              splatValue(x).reshape(tensorType(x).clone(newShape))));
      }
      Operation *clone = b.clone(*user);
      clone->setOperands(operands);
      clone->getResult(0).setType(
          tensorType(user->getResult(0)).clone(newShape));
      next = clone->getResult(0);
    }
    sink(user->getResult(0), next);
    eraseDead(user);
  }
}

bool Mover::tryMoveReshape(ReshapeOp r) {
  Value x = r.getOperand();
  if (!isStatic(x) || !isStatic(r.getResult()) || isEdgeValue(x))
    return false; // already at an edge
  ArrayRef<int64_t> to = r.getType().getShape();
  bool readByFusible = llvm::any_of(r->getUsers(), [](Operation *u) {
    return isFusible(u) && !isa<ReshapeOp>(u);
  });
  if (readByFusible && x.hasOneUse() && canHoist(x, to, 0)) {
    OpBuilder b(r);
    Value v = hoist(b, x, to);
    r.getResult().replaceAllUsesWith(v);
    eraseDead(r);
    LLVM_DEBUG(llvm::dbgs()
               << "omni-move-reshapes: hoisted " << r.getLoc() << "\n");
    return true;
  }
  bool reachesFusible = false;
  if (canSink(r.getResult(), tensorType(x).getShape(), 0, reachesFusible) &&
      reachesFusible) {
    sink(r.getResult(), x);
    eraseDead(r);
    LLVM_DEBUG(llvm::dbgs()
               << "omni-move-reshapes: sunk " << r.getLoc() << "\n");
    return true;
  }
  return false;
}

bool Mover::tryCastConcat(CastOp cast) {
  auto concat = cast.getOperand().getDefiningOp<ConcatOp>();
  if (!concat || !concat->hasOneUse() || !isStatic(concat.getResult()))
    return false;
  auto from = dyn_cast<FloatType>(concat.getType().getElementType());
  auto to = dyn_cast<FloatType>(cast.getType().getElementType());
  if (!from || !to || to.getWidth() >= from.getWidth())
    return false;
  OpBuilder b(cast);
  SmallVector<Value> parts;
  for (Value in : concat.getInputs()) {
    auto part = CastOp::create(b, cast.getLoc(), tensorType(in).clone(to), in);
    part->setDiscardableAttrs(cast->getDiscardableAttrDictionary());
    parts.push_back(part);
  }
  auto joined = ConcatOp::create(b, concat.getLoc(), parts, concat.getDim());
  joined->setDiscardableAttrs(concat->getDiscardableAttrDictionary());
  cast.getResult().replaceAllUsesWith(joined.getResult());
  eraseDead(cast);
  return true;
}

void Mover::eraseDead(Operation *op) {
  SmallVector<Operation *> work = {op};
  while (!work.empty()) {
    Operation *o = work.pop_back_val();
    if (!o->use_empty() || !isMemoryEffectFree(o) || o->getNumRegions() != 0)
      continue;
    SmallVector<Operation *> defs;
    for (Value x : o->getOperands())
      if (Operation *def = x.getDefiningOp())
        defs.push_back(def);
    // o may be in the list twice (read twice by a dead op): once freed,
    // it must not be looked at again.
    llvm::erase(work, o);
    erased.insert(o);
    o->erase();
    llvm::append_range(work, defs);
  }
}

void Mover::run(func::FuncOp fn) {
  // Each kind collected first (the rewrites erase ops), those erased
  // meanwhile skipped; never inside a fusion region.
  auto each = [&](auto op, auto rewrite) {
    using OpT = decltype(op);
    SmallVector<OpT> ops;
    fn.walk([&](OpT o) {
      if (!o->template getParentOfType<FusionOp>())
        ops.push_back(o);
    });
    for (OpT o : ops)
      if (!erased.contains(o))
        rewrite(o);
  };
  each(CastOp(), [&](CastOp c) { tryCastConcat(c); });
  each(ReshapeOp(), [&](ReshapeOp r) { tryMoveReshape(r); });
}

struct OmniMoveReshapesPass
    : omni::impl::OmniMoveReshapesPassBase<OmniMoveReshapesPass> {
  void runOnOperation() override { Mover().run(getOperation()); }
};

} // namespace
