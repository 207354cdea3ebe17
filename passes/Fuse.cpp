//===- Fuse.cpp - Form fusion regions --------------------------*- C++ -*-===//
//
// omni-fuse decides the kernels of a program: it groups the ops a backend
// can generate code for (FusionKindOpInterface kinds Elementwise,
// Broadcast, Movement and Reduction) into omni.fusion regions, so that the
// values flowing between them never reach memory. Library ops (matmul,
// conv2d, attention) and opaque ops (random numbers, host calls,
// collectives) stay outside and split groups; every fusible op ends up in
// some region, alone if nothing joins it. The rules, and why, are in
// docs/fusion.md.
//
//===----------------------------------------------------------------------===//

#include "dialects/omni/OmniOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/Debug.h"

#include <deque>

#define DEBUG_TYPE "omni-fuse"

namespace mlir::omni {
#define GEN_PASS_DEF_OMNIFUSEPASS
#include "passes/Passes.h.inc"
} // namespace mlir::omni

using namespace mlir;
using namespace mlir::omni;

namespace {

FusionKind kindOf(Operation *op) { return FusionKindOpInterface::kindOf(op); }

bool isStaticTensor(Type t) {
  auto tt = dyn_cast<RankedTensorType>(t);
  return tt && tt.hasStaticShape();
}

/// The value of a splat constant (of any dialect), or null: regions get
/// their own omni.constant instead of an input.
DenseElementsAttr splatValue(Value v) {
  DenseElementsAttr attr;
  if (!isStaticTensor(v.getType()) || !matchPattern(v, m_Constant(&attr)) ||
      !attr.isSplat() || !attr.getElementType().isIntOrFloat())
    return {};
  return attr;
}

/// Whether omni-fuse puts `op` in a region.
bool isFusible(Operation *op) {
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

/// Ops that read every element of their operands at the result's index
/// (or all of them): siblings through a shared input.
bool readsWholeOperands(Operation *op) {
  FusionKind k = kindOf(op);
  return k == FusionKind::Elementwise || k == FusionKind::Reduction;
}

bool producesOnlyScalars(Operation *op) {
  return llvm::all_of(op->getResultTypes(), [](Type t) {
    return cast<RankedTensorType>(t).getNumElements() <= 1;
  });
}

/// A reduction of a tensor to one element (a sum of squares for the grad
/// norm, a loss mean).
bool isFullReduction(Operation *op) {
  return kindOf(op) == FusionKind::Reduction && producesOnlyScalars(op) &&
         llvm::any_of(op->getOperandTypes(), [](Type t) {
           return cast<RankedTensorType>(t).getNumElements() > 1;
         });
}

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

/// Where a value stands relative to the reductions of its group (rule 2).
struct ReductionState {
  enum Kind { None, Reduced, Full } kind = None;
  /// The operand shape of the reduction (the shape to broadcast back to).
  ArrayRef<int64_t> domain;
};

/// A set of ops that becomes one omni.fusion. Invariant: the members are
/// contiguous in the block and in order, so the block order stays a
/// topological order of the graph with each group contracted to a node.
struct Group {
  SmallVector<Operation *> ops;
};

/// Forms the groups of one block, then turns each into an omni.fusion.
class BlockFuser {
public:
  explicit BlockFuser(Block &block) : block(block) {}

  void duplicateBroadcasts();
  void formGroups();
  void materialize();

private:
  Group *groupOf(Operation *op) const { return owner.lookup(op); }
  static bool hasFullReduction(Group *g) {
    return llvm::any_of(g->ops, isFullReduction);
  }
  bool tryMerge(Group *a, Group *b, bool sibling);
  bool checkReductions(Group *a, Group *b,
                       DenseMap<Operation *, ReductionState> &states);
  /// The ops of this block that define values `op` (or an op nested in
  /// it) reads.
  ArrayRef<Operation *> producersOf(Operation *op);
  void materialize(Group &group);

  Block &block;
  std::deque<Group> groups;
  DenseMap<Operation *, Group *> owner;
  /// Order keys of the block's ops, kept current as merges move ops.
  DenseMap<Operation *, int64_t> pos;
  DenseMap<Operation *, ReductionState> states;
  DenseMap<Operation *, SmallVector<Operation *>> producers;
};

ArrayRef<Operation *> BlockFuser::producersOf(Operation *op) {
  auto [it, inserted] = producers.try_emplace(op);
  if (inserted) {
    SetVector<Operation *> found;
    op->walk([&](Operation *nested) {
      for (Value v : nested->getOperands())
        if (Operation *def = v.getDefiningOp();
            def && def->getBlock() == &block)
          found.insert(def);
    });
    it->second.assign(found.begin(), found.end());
  }
  return it->second;
}

/// Rule 2: inside a region, a reduction's result is read only by
/// elementwise ops on the reduced shape and by a broadcast back to the
/// reduction's operand shape; what follows that broadcast is read only by
/// elementwise ops and further reductions. Computes the states of b's ops
/// as members of a + b (a's do not change: a does not read b).
bool BlockFuser::checkReductions(
    Group *a, Group *b, DenseMap<Operation *, ReductionState> &newStates) {
  for (Operation *m : b->ops) {
    FusionKind kind = kindOf(m);
    ReductionState state;
    if (kind == FusionKind::Reduction)
      state = {ReductionState::Reduced, shapeOf(m->getOperand(0))};
    for (Value v : m->getOperands()) {
      Operation *p = v.getDefiningOp();
      if (!p || (groupOf(p) != a && groupOf(p) != b))
        continue;
      ReductionState in =
          newStates.count(p) ? newStates.lookup(p) : states.lookup(p);
      if (in.kind == ReductionState::None)
        continue;
      if (kind == FusionKind::Elementwise) {
        if (state.kind != ReductionState::None && state.kind != in.kind)
          return false;
        state = in;
        continue;
      }
      bool backToDomain = kind == FusionKind::Broadcast &&
                          in.kind == ReductionState::Reduced &&
                          shapeOf(m->getResult(0)) == in.domain;
      if (backToDomain) {
        state = {ReductionState::Full, in.domain};
        continue;
      }
      bool reduceAgain =
          kind == FusionKind::Reduction && in.kind == ReductionState::Full;
      if (!reduceAgain)
        return false;
    }
    newStates[m] = state;
  }
  return true;
}

/// Merges groups `a` and `b` unless a rule forbids it (see the pass
/// description); on success the members of both are contiguous again.
bool BlockFuser::tryMerge(Group *a, Group *b, bool sibling) {
  if (a == b)
    return false;
  if (pos[a->ops.front()] > pos[b->ops.front()])
    std::swap(a, b);

  // Recomputed ops (omni-autodiff's rematerialization, docs/autodiff.md)
  // stay in the backward program: a forward group does not take them in,
  // which would move them, and the backward ops between, into the forward.
  auto recomputed = [](Operation *op) {
    return op->hasAttr("omni.recomputed");
  };
  if (llvm::any_of(b->ops, recomputed) && !llvm::any_of(a->ops, recomputed))
    return false;

  DenseMap<Operation *, ReductionState> newStates;
  if (!checkReductions(a, b, newStates)) {
    LLVM_DEBUG(llvm::dbgs() << "omni-fuse: reduction rule keeps "
                            << *b->ops.front() << " out\n");
    return false;
  }

  // The ops between the groups that read `a`, directly or through other
  // ops between (tainted), must follow the merged group; the others can
  // precede it. A tainted op that `b` reads closes a cycle (rule 1).
  SmallVector<Operation *> between;
  for (Operation *op = a->ops.back()->getNextNode(); op != b->ops.front();
       op = op->getNextNode())
    between.push_back(op);
  DenseSet<Operation *> tainted;
  auto readsTainted = [&](Operation *op) {
    return llvm::any_of(producersOf(op), [&](Operation *p) {
      return groupOf(p) == a || tainted.contains(p);
    });
  };
  for (size_t i = 0; i < between.size();) {
    Group *g = groupOf(between[i]);
    ArrayRef<Operation *> node =
        g ? ArrayRef<Operation *>(g->ops) : ArrayRef<Operation *>(between[i]);
    if (llvm::any_of(node, readsTainted))
      tainted.insert(node.begin(), node.end());
    i += node.size();
  }
  for (Operation *m : b->ops)
    if (llvm::any_of(producersOf(m),
                     [&](Operation *p) { return tainted.contains(p); }))
      return false;
  if (sibling && !tainted.empty())
    return false;
  if (!llvm::any_of(a->ops, recomputed) &&
      llvm::any_of(between, [&](Operation *op) {
        return !tainted.contains(op) && recomputed(op);
      }))
    return false;
  // Rule 3: tainted ops move down, the others up; two ops with side effects
  // must not swap.
  bool taintedEffect = false;
  for (Operation *op : between) {
    if (isMemoryEffectFree(op))
      continue;
    if (tainted.contains(op))
      taintedEffect = true;
    else if (taintedEffect)
      return false;
  }

  // Commit: U (untainted) a b T (tainted), each part in its old order, on
  // the order keys the range already had.
  SmallVector<int64_t> keys;
  SmallVector<Operation *> newOrder;
  for (Operation *op = a->ops.front(); op != b->ops.back()->getNextNode();
       op = op->getNextNode())
    keys.push_back(pos[op]);
  for (Operation *op : between)
    if (!tainted.contains(op)) {
      op->moveBefore(a->ops.front());
      newOrder.push_back(op);
    }
  newOrder.append(a->ops.begin(), a->ops.end());
  newOrder.append(b->ops.begin(), b->ops.end());
  Operation *anchor = b->ops.back();
  for (Operation *op : between)
    if (tainted.contains(op)) {
      op->moveAfter(anchor);
      anchor = op;
      newOrder.push_back(op);
    }
  for (auto [op, key] : llvm::zip_equal(newOrder, keys))
    pos[op] = key;

  for (Operation *m : b->ops) {
    owner[m] = a;
    states[m] = newStates.lookup(m);
  }
  a->ops.append(b->ops.begin(), b->ops.end());
  b->ops.clear();
  return true;
}

/// Gives every fusible reader of a broadcast its own copy: a
/// broadcast is cheaper to recompute than to store, and a shared one would
/// otherwise tie its readers into one region. Readers that are not fusible
/// keep the original.
void BlockFuser::duplicateBroadcasts() {
  SmallVector<Operation *> broadcasts;
  for (Operation &op : block)
    if (isFusible(&op) && kindOf(&op) == FusionKind::Broadcast)
      broadcasts.push_back(&op);
  // Last first, so that a broadcast of a broadcast is copied per copy.
  for (Operation *op : llvm::reverse(broadcasts)) {
    if (op->hasOneUse())
      continue;
    for (OpOperand &use : llvm::make_early_inc_range(op->getUses())) {
      Operation *user = use.getOwner();
      if (user->getBlock() != &block || !isFusible(user))
        continue;
      OpBuilder b(user);
      use.set(b.clone(*op)->getResult(0));
    }
    if (op->use_empty())
      op->erase();
  }
}

/// Grows groups in program order: each fusible op starts a group, joins
/// the groups of its producers, then those of earlier siblings.
void BlockFuser::formGroups() {
  SmallVector<Operation *> order;
  for (Operation &op : block) {
    pos[&op] = order.size();
    order.push_back(&op);
  }
  for (Operation *op : order) {
    if (!isFusible(op))
      continue;
    Group &g = groups.emplace_back();
    g.ops.push_back(op);
    owner[op] = &g;
    if (kindOf(op) == FusionKind::Reduction)
      states[op] = {ReductionState::Reduced, shapeOf(op->getOperand(0))};

    // Producer/consumer fusion, except across a scalar edge into a tensor
    // consumer: a scalar (a clip factor, a global norm, an optimizer's bias
    // correction) feeds many tensors, and merging each consumer into its
    // producer would chain them all into one huge single-threaded kernel
    // of unrelated tensors.
    //
    // Across a scalar edge, two groups that each reduce a tensor to a
    // scalar do not merge either (docs/fusion.md rule 7): the global grad norm
    // adds one sum of squares per parameter, and merging them would make one
    // kernel that reads every gradient on one thread (at 60 transformer blocks,
    // a kernel of 85k lines that LLVM compiles for minutes).
    for (Value v : op->getOperands())
      if (Operation *def = v.getDefiningOp())
        if (Group *producer = groupOf(def)) {
          bool scalarEdge =
              cast<RankedTensorType>(v.getType()).getNumElements() <= 1;
          if (scalarEdge && !producesOnlyScalars(op))
            continue;
          if (scalarEdge && hasFullReduction(producer) &&
              hasFullReduction(groupOf(op)))
            continue;
          tryMerge(producer, groupOf(op), /*sibling=*/false);
        }

    // Sibling fusion through inputs read whole, nearest sibling first.
    if (!readsWholeOperands(op))
      continue;
    for (Value v : op->getOperands()) {
      if (splatValue(v) ||
          cast<RankedTensorType>(v.getType()).getNumElements() <= 1)
        continue;
      SmallVector<Group *> siblings;
      for (Operation *user : v.getUsers()) {
        Group *other = groupOf(user);
        if (other && other != groupOf(op) && readsWholeOperands(user) &&
            pos[other->ops.front()] < pos[groupOf(op)->ops.front()] &&
            !llvm::is_contained(siblings, other))
          siblings.push_back(other);
      }
      llvm::sort(siblings, [&](Group *x, Group *y) {
        return pos[x->ops.front()] > pos[y->ops.front()];
      });
      for (Group *other : siblings)
        if (!other->ops.empty())
          tryMerge(other, groupOf(op), /*sibling=*/true);
    }
  }
}

/// Replaces `group` by an omni.fusion at its place: inputs are the values
/// read from outside (splat constants are cloned instead), results the
/// values used outside.
void BlockFuser::materialize(Group &group) {
  DenseSet<Operation *> members(group.ops.begin(), group.ops.end());
  SetVector<Value> inputs, splats;
  for (Operation *op : group.ops)
    for (Value v : op->getOperands()) {
      if (Operation *def = v.getDefiningOp(); def && members.contains(def))
        continue;
      if (splatValue(v))
        splats.insert(v);
      else
        inputs.insert(v);
    }
  SmallVector<Value> results;
  for (Operation *op : group.ops)
    for (Value r : op->getResults())
      if (llvm::any_of(r.getUsers(), [&](Operation *user) {
            return !members.contains(block.findAncestorOpInBlock(*user));
          }))
        results.push_back(r);

  SmallVector<Location> locs;
  for (Operation *op : group.ops)
    locs.push_back(op->getLoc());
  OpBuilder b(group.ops.front());
  Location loc = b.getFusedLoc(locs);
  auto fusion = FusionOp::create(b, loc, ValueRange(results).getTypes(),
                                 inputs.getArrayRef());
  SmallVector<Location> argLocs(inputs.size(), loc);
  Block *body =
      b.createBlock(&fusion.getBody(), {},
                    ValueRange(inputs.getArrayRef()).getTypes(), argLocs);
  IRMapping map;
  map.map(inputs.getArrayRef(), body->getArguments());
  for (Value v : splats)
    map.map(v, ConstantOp::create(b, v.getLoc(), splatValue(v)).getResult());
  for (Operation *op : group.ops)
    b.clone(*op, map);
  SmallVector<Value> yielded;
  for (Value r : results)
    yielded.push_back(map.lookup(r));
  YieldOp::create(b, loc, yielded);

  for (auto [r, replacement] : llvm::zip_equal(results, fusion.getResults()))
    r.replaceAllUsesWith(replacement);
  for (Operation *op : llvm::reverse(group.ops))
    op->erase();
  for (Value v : splats)
    if (Operation *def = v.getDefiningOp();
        def && def->use_empty() && isMemoryEffectFree(def))
      def->erase();
}

void BlockFuser::materialize() {
  for (Group &g : groups)
    if (!g.ops.empty())
      materialize(g);
}

struct OmniFusePass : omni::impl::OmniFusePassBase<OmniFusePass> {
  /// 1. Collect the blocks of the function outside fusion regions (the
  ///    body, loop bodies); fusion never crosses a block boundary.
  /// 2. In each block, walk the ops in order; each fusible op starts a
  ///    group, then merges with the groups of its producers and of earlier
  ///    ops that read one of its inputs whole (siblings), each merge
  ///    checked against the rules of the pass description. A merge moves
  ///    the ops between the two groups that do not depend on the first
  ///    above the merged group and those that do below it, so every group
  ///    stays contiguous and the block stays in valid order.
  /// 3. Replace each group by an omni.fusion at its place; drop splat
  ///    constants whose only readers were cloned into regions.
  void runOnOperation() override {
    SmallVector<Block *> blocks;
    getOperation()->walk([&](Block *block) {
      Operation *parent = block->getParentOp();
      if (!isa<FusionOp>(parent) && !parent->getParentOfType<FusionOp>())
        blocks.push_back(block);
    });
    for (Block *block : blocks) {
      BlockFuser fuser(*block);
      fuser.duplicateBroadcasts();
      fuser.formGroups();
      fuser.materialize();
    }
  }
};

} // namespace
