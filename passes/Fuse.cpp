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
#include "passes/FusibleOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Debug.h"

#include <deque>
#include <set>

#define DEBUG_TYPE "omni-fuse"

namespace mlir::omni {
#define GEN_PASS_DEF_OMNIFUSEPASS
#include "passes/Passes.h.inc"
} // namespace mlir::omni

using namespace mlir;
using namespace mlir::omni;

namespace {

/// The pass statistics below are compiled out of LLVM builds without
/// statistics (Debian's release packages), so the counts that
/// test/passes/fuse-scale.mlir checks are also printed on request.
llvm::cl::opt<bool> printFuseStats(
    "omni-fuse-stats",
    llvm::cl::desc("print omni-fuse's legality-check counts per function "
                   "to stderr (ops visited, keys renumbered, landmark "
                   "rejections)"),
    llvm::cl::init(false));

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

/// Order keys of a block's ops: integers increasing in block order, with
/// gaps, so that a merge that moves a run of ops gives them keys between
/// their new neighbours without renumbering the block (an order-maintenance
/// list). Where the gap is too small, a window around the run, doubled on
/// both sides until its span leaves at least max(64, c) keys per op for its
/// c ops, is renumbered evenly; a window is only renumbered once about c
/// insertions have filled it, so the cost is amortized small.
class OrderKeys {
public:
  static constexpr int64_t kSpacing = int64_t(1) << 20;

  void assign(Block &block) {
    int64_t k = 0;
    for (Operation &op : block)
      keys[&op] = k += kSpacing;
  }
  int64_t operator()(Operation *op) const { return keys.lookup(op); }
  /// Gives keys to `count` ops from `first` to `last`, contiguous in the
  /// block where they were just moved; the keys of the others keep their
  /// order.
  void placeRun(Operation *first, Operation *last, uint64_t count);

  /// Ops outside the moved runs that got new keys (a pass statistic).
  uint64_t renumbered = 0;

private:
  DenseMap<Operation *, int64_t> keys;
};

void OrderKeys::placeRun(Operation *first, Operation *last, uint64_t count) {
  Operation *l = first->getPrevNode(), *r = last->getNextNode();
  uint64_t c = count;
  auto roomy = [&] {
    return (keys[r] - keys[l]) / int64_t(c + 1) >=
           std::max<int64_t>(64, int64_t(c));
  };
  for (uint64_t ext = 1; l && r && !roomy(); ext *= 2) {
    for (uint64_t i = 0; i < ext && l; ++i, ++c) {
      first = l;
      l = l->getPrevNode();
    }
    for (uint64_t i = 0; i < ext && r; ++i, ++c) {
      last = r;
      r = r->getNextNode();
    }
  }
  renumbered += c - count;
  // At an end of the block the keys continue past the last one (or below
  // the first, negative if need be).
  int64_t step = kSpacing, k = 0;
  if (l && r)
    step = (keys[r] - keys[l]) / int64_t(c + 1), k = keys[l];
  else if (l)
    k = keys[l];
  else if (r)
    k = keys[r] - kSpacing * int64_t(c + 1);
  for (Operation *op = first;; op = op->getNextNode()) {
    keys[op] = k += step;
    if (op == last)
      break;
  }
}

/// Ops ordered by their current keys. Renumbering keeps the order, so only
/// the ops a merge moves are taken out and put back.
struct ByKey {
  using is_transparent = void;
  const OrderKeys *keys;
  bool operator()(Operation *x, Operation *y) const {
    return (*keys)(x) < (*keys)(y);
  }
  bool operator()(Operation *x, int64_t k) const { return (*keys)(x) < k; }
  bool operator()(int64_t k, Operation *y) const { return k < (*keys)(y); }
};
using OpsByKey = std::set<Operation *, ByKey>;

/// Forms the groups of one block, then turns each into an omni.fusion.
class BlockFuser {
public:
  explicit BlockFuser(Block &block) : block(block) {}

  void duplicateBroadcasts();
  void formGroups();
  void sinkBroadcasts();
  void recomputeCheapValues();
  void materialize();

  /// Ops whose users the merge legality check walked (a pass statistic: it
  /// grows with the ops that depend on a group, not with the distance
  /// between the groups).
  uint64_t visited = 0;
  /// Merges ruled out by rule 1 through a landmark, without a walk.
  uint64_t landmarkRejections = 0;
  uint64_t renumbered() const { return key.renumbered; }

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
  /// Moves `ops` (in key order) to just before `before` or just after
  /// `after`, keeping the order keys and the sorted lists current.
  void moveRun(ArrayRef<Operation *> ops, Operation *before, Operation *after);
  void materialize(Group &group);
  void findLandmarks(ArrayRef<Operation *> order);
  bool landmarkBetween(Group *a, const DenseSet<Operation *> &readByB);

  Block &block;
  std::deque<Group> groups;
  DenseMap<Operation *, Group *> owner;
  /// Order keys of the block's ops, kept current as merges move ops.
  OrderKeys key;
  /// The block's ops with side effects and its recomputed ops, by key
  /// (rules 3 and 6 look only at those between two groups).
  OpsByKey effects{ByKey{&key}}, recomputedOps{ByKey{&key}};
  DenseMap<Operation *, ReductionState> states;
  DenseMap<Operation *, SmallVector<Operation *>> producers;
  /// Rule 1's shortcut: up to 64 * kWords landmarks, ops that never join a
  /// group spread evenly over the block, and for each op (by its index in
  /// the block before fusion) the landmarks that reach it and those it
  /// reaches, in the graph before fusion (merging only adds paths).
  static constexpr unsigned kWords = 4;
  DenseMap<Operation *, unsigned> index;
  DenseMap<Operation *, unsigned> landmark;
  std::vector<uint64_t> reachedBy, reaches;
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

void BlockFuser::moveRun(ArrayRef<Operation *> ops, Operation *before,
                         Operation *after) {
  for (Operation *op : ops) {
    effects.erase(op);
    recomputedOps.erase(op);
  }
  for (Operation *op : ops) {
    if (before)
      op->moveBefore(before);
    else
      op->moveAfter(after);
    after = op;
  }
  key.placeRun(ops.front(), ops.back(), ops.size());
  for (Operation *op : ops) {
    if (!isMemoryEffectFree(op))
      effects.insert(op);
    if (op->hasAttr("omni.recomputed"))
      recomputedOps.insert(op);
  }
}

void BlockFuser::findLandmarks(ArrayRef<Operation *> order) {
  SmallVector<Operation *> candidates;
  for (Operation *op : order)
    if (!isFusible(op) && !op->hasTrait<OpTrait::ConstantLike>() &&
        !op->use_empty())
      candidates.push_back(op);
  size_t k = std::min<size_t>(candidates.size(), 64 * kWords);
  for (size_t i = 0; i < k; ++i)
    landmark[candidates[i * candidates.size() / k]] = i;
  for (auto [i, op] : llvm::enumerate(order))
    index[op] = i;
  reachedBy.assign(order.size() * kWords, 0);
  reaches.assign(order.size() * kWords, 0);
  auto set = [](uint64_t *bits, unsigned bit) {
    bits[bit / 64] |= uint64_t(1) << (bit % 64);
  };
  for (auto [i, op] : llvm::enumerate(order))
    for (Operation *p : producersOf(op)) {
      unsigned j = index.lookup(p);
      for (unsigned w = 0; w < kWords; ++w)
        reachedBy[i * kWords + w] |= reachedBy[j * kWords + w];
      if (auto it = landmark.find(p); it != landmark.end())
        set(&reachedBy[i * kWords], it->second);
    }
  for (size_t i = order.size(); i-- > 0;)
    for (Operation *p : producersOf(order[i])) {
      unsigned j = index.lookup(p);
      for (unsigned w = 0; w < kWords; ++w)
        reaches[j * kWords + w] |= reaches[i * kWords + w];
      if (auto it = landmark.find(order[i]); it != landmark.end())
        set(&reaches[j * kWords], it->second);
    }
}

/// Whether a landmark lies on a path from `a` to an op `b` reads: then that
/// op is tainted, the landmark being outside every group and, like every op
/// on the path, between the two groups. Costs kWords words per op of `a`
/// and per op that `b` reads between the groups, however long the path.
bool BlockFuser::landmarkBetween(Group *a,
                                 const DenseSet<Operation *> &readByB) {
  if (landmark.empty() || readByB.empty())
    return false;
  uint64_t fromA[kWords] = {};
  for (Operation *m : a->ops)
    for (unsigned w = 0; w < kWords; ++w)
      fromA[w] |= reaches[index.lookup(m) * kWords + w];
  for (Operation *p : readByB) {
    uint64_t toP[kWords];
    for (unsigned w = 0; w < kWords; ++w)
      toP[w] = reachedBy[index.lookup(p) * kWords + w];
    if (auto it = landmark.find(p); it != landmark.end())
      toP[it->second / 64] |= uint64_t(1) << (it->second % 64);
    for (unsigned w = 0; w < kWords; ++w)
      if (fromA[w] & toP[w])
        return true;
  }
  return false;
}

/// Merges groups `a` and `b` unless a rule forbids it (see the pass
/// description); on success the members of both are contiguous again.
///
/// The cost does not grow with the number of ops between the groups: the
/// check walks only the users of `a` and of the ops that depend on it
/// (positioned before `b`), and the side-effecting and recomputed ops
/// between, by key; the commit moves only those dependent ops and `a`.
bool BlockFuser::tryMerge(Group *a, Group *b, bool sibling) {
  if (a == b)
    return false;
  if (key(a->ops.front()) > key(b->ops.front()))
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
  // ops between (tainted: the users of `a` closed under users, restricted
  // to keys between the groups, a group taken whole), must follow the
  // merged group; the others can precede it. A tainted op that `b` reads
  // closes a cycle (rule 1); for siblings any tainted op rules the merge
  // out (rule 4).
  int64_t lo = key(a->ops.back()), hi = key(b->ops.front());
  auto between = [&](Operation *op) {
    int64_t k = key(op);
    return lo < k && k < hi;
  };
  DenseSet<Operation *> readByB;
  for (Operation *m : b->ops)
    for (Operation *p : producersOf(m))
      if (between(p))
        readByB.insert(p);
  if (landmarkBetween(a, readByB)) {
    ++landmarkRejections;
    return false;
  }
  SmallVector<Operation *> tainted;
  DenseSet<Operation *> isTainted;
  SmallVector<Operation *> work(a->ops.begin(), a->ops.end());
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    ++visited;
    for (Operation *user : op->getUsers()) {
      Operation *reader = block.findAncestorOpInBlock(*user);
      if (!reader || !between(reader) || isTainted.contains(reader))
        continue;
      Group *g = groupOf(reader);
      ArrayRef<Operation *> node =
          g ? ArrayRef<Operation *>(g->ops) : ArrayRef<Operation *>(reader);
      if (sibling)
        return false;
      for (Operation *m : node) {
        if (readByB.contains(m))
          return false;
        isTainted.insert(m);
        tainted.push_back(m);
        work.push_back(m);
      }
    }
  }
  if (!llvm::any_of(a->ops, recomputed))
    for (auto it = recomputedOps.upper_bound(lo);
         it != recomputedOps.end() && key(*it) < hi; ++it)
      if (!isTainted.contains(*it))
        return false;
  // Rule 3: tainted ops move down, the others up; two ops with side effects
  // must not swap: no untainted one may follow the first tainted one.
  llvm::sort(tainted,
             [&](Operation *x, Operation *y) { return key(x) < key(y); });
  auto firstEffect =
      llvm::find_if(tainted, [&](Operation *op) { return effects.count(op); });
  if (firstEffect != tainted.end())
    for (auto it = effects.upper_bound(key(*firstEffect));
         it != effects.end() && key(*it) < hi; ++it)
      if (!isTainted.contains(*it))
        return false;

  // Commit: U (untainted) a b T (tainted), each part in its old order: T
  // moves below b, then a down to b when untainted ops remain between.
  if (!tainted.empty())
    moveRun(tainted, /*before=*/nullptr, /*after=*/b->ops.back());
  if (a->ops.back()->getNextNode() != b->ops.front())
    moveRun(a->ops, /*before=*/b->ops.front(), /*after=*/nullptr);

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
  key.assign(block);
  for (Operation &op : block) {
    order.push_back(&op);
    if (!isMemoryEffectFree(&op))
      effects.insert(&op);
    if (op.hasAttr("omni.recomputed"))
      recomputedOps.insert(&op);
  }
  findLandmarks(order);
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
            key(other->ops.front()) < key(groupOf(op)->ops.front()) &&
            !llvm::is_contained(siblings, other))
          siblings.push_back(other);
      }
      llvm::sort(siblings, [&](Group *x, Group *y) {
        return key(x->ops.front()) > key(y->ops.front());
      });
      for (Group *other : siblings)
        if (!other->ops.empty())
          tryMerge(other, groupOf(op), /*sibling=*/true);
    }
  }
}

/// Moves a broadcast whose readers are all in one later group H into H,
/// together with an elementwise op of it and splats (the `1 + scale` of an
/// adaLN modulation): H then reads the broadcast's small source instead of
/// a materialized copy (docs/fusion.md, "Broadcasts go to their readers").
/// duplicateBroadcasts gave every reader its own copy, but a copy joins
/// the group of its source before its reader's group exists; when the
/// reader cannot join that group (a matmul or attention lies between), the
/// copy became a result: written whole by one kernel, read by the next.
/// Runs once every merge is done (the order keys are not kept current).
void BlockFuser::sinkBroadcasts() {
  // The one group other than `from` that reads all of `op`'s results, if
  // any; every reader must be a member of it.
  auto readerGroup = [&](Operation *op, Group *from) -> Group * {
    Group *to = nullptr;
    for (Operation *user : op->getUsers()) {
      Group *g = user->getBlock() == &block ? groupOf(user) : nullptr;
      if (!g || g == from || (to && g != to))
        return nullptr;
      to = g;
    }
    return to;
  };
  auto isBroadcast = [](Operation *op) {
    return kindOf(op) == FusionKind::Broadcast;
  };
  // Moves `ops` (in block order) from `from` to just before the first
  // reader of the last of them in `to`.
  auto move = [&](ArrayRef<Operation *> ops, Group *from, Group *to) {
    Operation *reader = nullptr;
    for (Operation *user : ops.back()->getUsers())
      if (!reader || user->isBeforeInBlock(reader))
        reader = user;
    auto at = llvm::find(to->ops, reader);
    for (Operation *op : ops) {
      op->moveBefore(reader);
      llvm::erase(from->ops, op);
      owner[op] = to;
    }
    to->ops.insert(at, ops.begin(), ops.end());
  };
  for (Group &g : groups) {
    // A copy: the moves below change g.ops (and a temporary in the range
    // expression would not outlive llvm::reverse's view of it).
    SmallVector<Operation *> members(g.ops);
    for (Operation *op : llvm::reverse(members)) {
      if (groupOf(op) != &g || op->getNumResults() != 1)
        continue;
      Group *to = readerGroup(op, &g);
      if (!to)
        continue;
      if (isBroadcast(op)) {
        move({op}, &g, to);
        continue;
      }
      // An elementwise op of broadcasts (each read only by it) and splats.
      if (kindOf(op) != FusionKind::Elementwise)
        continue;
      SmallVector<Operation *> run;
      bool cheap = true;
      for (Value v : op->getOperands()) {
        if (splatValue(v))
          continue;
        Operation *def = v.getDefiningOp();
        if (!def || groupOf(def) != &g || !isBroadcast(def) ||
            !def->hasOneUse() || llvm::is_contained(run, def)) {
          cheap = false;
          break;
        }
        run.push_back(def);
      }
      if (!cheap || run.empty())
        continue;
      llvm::sort(run, [](Operation *x, Operation *y) {
        return x->isBeforeInBlock(y);
      });
      run.push_back(op);
      move(run, &g, to);
    }
  }
}

/// The bytes of a tensor value.
int64_t bytesOf(Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  return t.getNumElements() *
         static_cast<int64_t>((t.getElementTypeBitWidth() + 7) / 8);
}

/// The most ops copied into a reader for one value.
constexpr unsigned kMaxRecomputedOps = 16;

/// Gives each later group that reads a value of another group its own
/// copy of the ops that compute it, when they are elementwise ops and
/// broadcasts of the first group's inputs and reading those inputs costs
/// no more than storing the value: stored, the value is written once and
/// read by each of the k reader groups; recomputed, each reads the inputs
/// (broadcast sources count whole, splats nothing). Only values read by
/// groups alone (none by a library op, a loop or the return, which need it
/// stored anyway), and only when the inputs hold no more bytes than the
/// value, so keeping them alive for the readers takes no more memory than
/// the value took. An MLP's pre-activation, the bf16 product widened to
/// f32 with its bias added, is read by the forward's GELU and by the
/// backward's GELU derivative across matmuls: the backward now reads the
/// bf16 product (docs/fusion.md, "Cheap values go to their readers").
/// Runs once every merge is done.
void BlockFuser::recomputeCheapValues() {
  for (Group &g : groups) {
    if (g.ops.empty())
      continue;
    DenseSet<Operation *> copied; // ops of g copied into readers
    SmallVector<Operation *> candidates(g.ops);
    for (Operation *op : candidates) {
      if (op->getNumResults() != 1 || kindOf(op) != FusionKind::Elementwise)
        continue;
      Value v = op->getResult(0);
      // A scalar stays one computation read by its consumers (rule 5).
      if (cast<RankedTensorType>(v.getType()).getNumElements() <= 1)
        continue;
      SmallVector<Group *> readers;
      bool onlyGroups = true;
      for (Operation *user : v.getUsers()) {
        Group *h = user->getBlock() == &block ? groupOf(user) : nullptr;
        if (h == &g)
          continue;
        if (!h) {
          onlyGroups = false;
          break;
        }
        if (!llvm::is_contained(readers, h))
          readers.push_back(h);
      }
      if (!onlyGroups || readers.empty())
        continue;
      // The ops of g that compute v from g's inputs (the leaves).
      SetVector<Operation *> chain;
      SetVector<Value> leaves;
      SmallVector<Value> work = {v};
      bool cheap = true;
      while (cheap && !work.empty()) {
        Value x = work.pop_back_val();
        Operation *def = x.getDefiningOp();
        if (!def || groupOf(def) != &g) {
          leaves.insert(x);
          continue;
        }
        FusionKind k = kindOf(def);
        cheap = (k == FusionKind::Elementwise || k == FusionKind::Broadcast) &&
                def->getNumResults() == 1 && chain.size() < kMaxRecomputedOps;
        if (cheap && chain.insert(def))
          llvm::append_range(work, def->getOperands());
      }
      if (!cheap)
        continue;
      int64_t inputs = 0;
      for (Value leaf : leaves)
        if (!splatValue(leaf))
          inputs += bytesOf(leaf);
      int64_t k = static_cast<int64_t>(readers.size());
      if (inputs > bytesOf(v) || inputs * k > bytesOf(v) * (k + 1))
        continue;
      copied.insert(chain.begin(), chain.end());
      SmallVector<Operation *> ordered(chain.begin(), chain.end());
      llvm::sort(ordered, [](Operation *x, Operation *y) {
        return x->isBeforeInBlock(y);
      });
      for (Group *h : readers) {
        auto first = llvm::find_if(h->ops, [&](Operation *m) {
          return llvm::is_contained(m->getOperands(), v);
        });
        Operation *reader = *first;
        OpBuilder b(reader);
        IRMapping map;
        SmallVector<Operation *> copies;
        for (Operation *c : ordered) {
          Operation *copy = b.clone(*c, map);
          owner[copy] = h;
          copies.push_back(copy);
        }
        h->ops.insert(first, copies.begin(), copies.end());
        Value copied = map.lookup(v);
        for (Operation *m : h->ops)
          m->replaceUsesOfWith(v, copied);
      }
    }
    // What only the readers needed is dead in g now (a group may be left
    // with nothing to compute).
    SmallVector<Operation *> members(g.ops);
    for (Operation *op : llvm::reverse(members))
      if (copied.contains(op) && op->use_empty()) {
        llvm::erase(g.ops, op);
        owner.erase(op);
        op->erase();
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
    uint64_t visited = 0, renumbered = 0, rejections = 0;
    for (Block *block : blocks) {
      BlockFuser fuser(*block);
      fuser.duplicateBroadcasts();
      fuser.formGroups();
      fuser.sinkBroadcasts();
      fuser.recomputeCheapValues();
      fuser.materialize();
      numLegalityVisits += fuser.visited;
      numKeysRenumbered += fuser.renumbered();
      numLandmarkRejections += fuser.landmarkRejections;
      visited += fuser.visited;
      renumbered += fuser.renumbered();
      rejections += fuser.landmarkRejections;
    }
    if (printFuseStats)
      llvm::errs() << "omni-fuse: " << visited << " ops visited, " << renumbered
                   << " keys renumbered, " << rejections
                   << " landmark rejections (@" << getOperation().getSymName()
                   << ")\n";
  }
};

} // namespace
