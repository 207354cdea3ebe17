//===- PlanMemory.cpp - Static arena plan ----------------------*- C++ -*-===//
//
// omni-plan-memory gives every transient tensor of a fused function a byte
// range in one static arena, so the runtime allocates once per function and
// never during a step. Values that are never live at the same time share
// bytes; a result may overwrite an operand that dies at its op (in place),
// a loop keeps each carried tensor in one slot, and a donated argument's
// buffer (or a state argument's slot) takes the result that replaces it. The
// plan is attributes the step.bin writer reads: `omni.offsets` per allocating
// op and `omni.arena_size` per function (docs/fusion.md, "Memory plan").
//
//===----------------------------------------------------------------------===//

#include "dialects/omni/OmniOps.h"
#include "passes/FusibleOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Debug.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <deque>
#include <map>
#include <queue>

#define DEBUG_TYPE "omni-plan-memory"

namespace mlir::omni {
#define GEN_PASS_DEF_OMNIPLANMEMORYPASS
#include "passes/Passes.h.inc"
} // namespace mlir::omni

using namespace mlir;
using namespace mlir::omni;

namespace {

constexpr int64_t kAlignment = 64;

/// Bytes of one element as the runtime stores it: i1 and other sub-byte
/// integers take a byte, index takes eight.
int64_t elementBytes(RankedTensorType t) {
  Type e = t.getElementType();
  if (e.isIndex())
    return 8;
  return llvm::divideCeil(e.getIntOrFloatBitWidth(), 8);
}

/// Bytes of a tensor rounded up to the arena alignment; at least one
/// alignment unit, so that every buffer has its own offset.
int64_t allocationSize(RankedTensorType t) {
  int64_t bytes = std::max<int64_t>(t.getNumElements() * elementBytes(t), 1);
  return llvm::alignTo(bytes, kAlignment);
}

/// A best-fit free list over a growing arena.
class Arena {
public:
  int64_t allocate(int64_t size) {
    auto best = free.end();
    for (auto it = free.begin(); it != free.end(); ++it)
      if (it->second >= size &&
          (best == free.end() || it->second < best->second))
        best = it;
    if (best != free.end()) {
      auto [offset, blockSize] = *best;
      free.erase(best);
      if (blockSize > size)
        free[offset + size] = blockSize - size;
      return offset;
    }
    // Grow, starting inside a free block that ends at the top.
    int64_t offset = top;
    if (!free.empty() && free.rbegin()->first + free.rbegin()->second == top) {
      offset = free.rbegin()->first;
      free.erase(offset);
    }
    top = offset + size;
    return offset;
  }

  void release(int64_t offset, int64_t size) {
    auto next = free.lower_bound(offset);
    if (next != free.end() && offset + size == next->first) {
      size += next->second;
      free.erase(next);
    }
    auto it = free.lower_bound(offset);
    if (it != free.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == offset) {
        prev->second += size;
        return;
      }
    }
    free[offset] = size;
  }

  int64_t size() const { return top; }

private:
  std::map<int64_t, int64_t> free; ///< offset -> size
  int64_t top = 0;
};

/// Bytes shared by one or more values over time.
struct Buffer {
  enum Kind { Arena, Carried, Donated } kind = Arena;
  int64_t offset = -1;
  int64_t size = 0;
  /// Last program point at which a value in the buffer is live.
  int64_t end = 0;
  /// Carried: the loop and the iter_arg, and the last point of the value
  /// the body holds in the slot now.
  Operation *loop = nullptr;
  unsigned iterIndex = 0;
  int64_t innerEnd = 0;
  /// Donated: the function argument, and its state slot (`omni.state`)
  /// when it is one.
  unsigned argIndex = 0;
  StringAttr state;
  bool released = false;
  /// The program point at which the buffer was allocated (for the report).
  int64_t start = 0;
};

/// One value placed in a buffer at a program point (for the report).
struct Binding {
  int64_t point;
  Value value;
  Buffer *buffer;
};

/// The plan of one function.
class Planner {
public:
  explicit Planner(func::FuncOp func) : func(func) {}
  LogicalResult run();

  int64_t arenaSize() const { return arena.size(); }
  unsigned numAllocated = 0, numReused = 0;

  /// Prints where the arena peaks and what is live there (--report-arena).
  void printPeak(llvm::raw_ostream &os) const;

private:
  void number(Block &block);
  int64_t usePoint(Value v, Operation *user);
  Value aliasRoot(Value v);
  void computeLiveness();
  Buffer *allocate(RankedTensorType t, int64_t t0);
  void bind(Value v, Buffer *b);
  Buffer *inPlaceBuffer(Operation *op, OpResult r, ArrayRef<Buffer *> taken);
  bool fusionCanWriteOver(FusionOp f, unsigned input, unsigned result);
  LogicalResult plan(Operation *op);
  void releaseBefore(int64_t t);

  func::FuncOp func;
  Arena arena;
  DenseMap<Operation *, int64_t> index, subtreeEnd;
  /// Last point at which a value or one of its reshapes is live, by root.
  DenseMap<Value, int64_t> aliasEnd;
  DenseMap<Value, Buffer *> bufferOf;
  std::deque<Buffer> buffers;
  using Entry = std::pair<int64_t, Buffer *>;
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> active;
  int64_t next = 0;
  /// The report's record: every placement in program order, the op at each
  /// point, and the point at which the arena last grew (its peak).
  std::vector<Binding> bindings;
  DenseMap<int64_t, Operation *> opAt;
  int64_t current = 0, peakPoint = -1;
};

void Planner::number(Block &block) {
  for (Operation &op : block) {
    index[&op] = next++;
    if (!isa<FusionOp>(op))
      for (Region &region : op.getRegions())
        for (Block &b : region)
          number(b);
    subtreeEnd[&op] = next - 1;
  }
}

/// The point until which a use keeps `v` live: the user, or the end of
/// the outermost loop around the user that does not contain the
/// definition (the value is read again in every iteration).
int64_t Planner::usePoint(Value v, Operation *user) {
  int64_t point = index.lookup(user);
  Block *defBlock = v.getParentBlock();
  for (Operation *op = user; op->getBlock() != defBlock;) {
    op = op->getParentOp();
    if (isa<LoopLikeOpInterface>(op))
      point = std::max(point, subtreeEnd.lookup(op));
  }
  return point;
}

/// Reshapes are views: a value and its reshapes share one buffer.
Value Planner::aliasRoot(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (kindOf(def) != FusionKind::Reshape)
      break;
    v = def->getOperand(0);
  }
  return v;
}

void Planner::computeLiveness() {
  auto visit = [&](Value v, int64_t defPoint) {
    if (!isa<RankedTensorType>(v.getType()))
      return;
    int64_t last = defPoint;
    for (Operation *user : v.getUsers())
      last = std::max(last, usePoint(v, user));
    int64_t &end = aliasEnd[aliasRoot(v)];
    end = std::max(end, last);
  };
  for (BlockArgument arg : func.getArguments())
    visit(arg, 0);
  func.walk<WalkOrder::PreOrder>([&](Operation *op) {
    if (isa<FusionOp>(op->getParentOp()))
      return WalkResult::skip();
    for (Value r : op->getResults())
      visit(r, index.lookup(op));
    if (auto loop = dyn_cast<scf::ForOp>(op))
      for (Value arg : loop.getRegionIterArgs())
        visit(arg, index.lookup(op));
    return WalkResult::advance();
  });
}

Buffer *Planner::allocate(RankedTensorType t, int64_t t0) {
  Buffer &b = buffers.emplace_back();
  b.size = allocationSize(t);
  int64_t before = arena.size();
  b.offset = arena.allocate(b.size);
  if (arena.size() > before)
    peakPoint = t0;
  b.end = t0;
  b.start = t0;
  ++numAllocated;
  return &b;
}

/// Puts `v` (and its reshapes) in `b` and keeps `b` live as long as they are.
void Planner::bind(Value v, Buffer *b) {
  bufferOf[v] = b;
  bindings.push_back({current, v, b});
  b->end = std::max(b->end, aliasEnd.lookup(v));
  active.push({b->end, b});
}

/// Rule (a) of in-place reuse: fusion result `result` may be written over
/// input `input` when the body holds only Elementwise and Broadcast ops,
/// the input is read only by Elementwise ops no later than the op that
/// yields the result, and both have one shape and element size.
bool Planner::fusionCanWriteOver(FusionOp f, unsigned input, unsigned result) {
  Block &body = f.getBody().front();
  for (Operation &op : body.without_terminator()) {
    FusionKind k = kindOf(&op);
    if (k != FusionKind::Elementwise && k != FusionKind::Broadcast)
      return false;
  }
  Value arg = body.getArgument(input);
  Value res = body.getTerminator()->getOperand(result);
  Operation *producer = res.getDefiningOp();
  if (!producer || kindOf(producer) != FusionKind::Elementwise)
    return false;
  auto argType = cast<RankedTensorType>(arg.getType());
  auto resType = cast<RankedTensorType>(res.getType());
  if (argType.getShape() != resType.getShape() ||
      elementBytes(argType) != elementBytes(resType))
    return false;
  return llvm::all_of(arg.getUsers(), [&](Operation *user) {
    return kindOf(user) == FusionKind::Elementwise &&
           !producer->isBeforeInBlock(user);
  });
}

/// A buffer that result `r` of `op` may take over in place, or null.
Buffer *Planner::inPlaceBuffer(Operation *op, OpResult r,
                               ArrayRef<Buffer *> taken) {
  int64_t t = index.lookup(op);
  SmallVector<Value> candidates;
  if (auto dps = dyn_cast<DestinationStyleOpInterface>(op))
    candidates.push_back(dps.getTiedOpOperand(r)->get());
  auto fusion = dyn_cast<FusionOp>(op);
  if (fusion)
    llvm::append_range(candidates, fusion.getInputs());
  // A loop slot first: taking it saves the copy at the yield; then a
  // donated argument or state slot: taking it saves the copy at the return
  // (an AdamW update whose gradient, a dead transient of the same size,
  // comes first among the inputs would otherwise take the gradient's buffer
  // and leave the new parameters to be copied into their slot).
  auto rank = [&](Value x) {
    Buffer *b = bufferOf.lookup(aliasRoot(x));
    if (b && b->kind == Buffer::Carried)
      return 0;
    return b && b->kind == Buffer::Donated ? 1 : 2;
  };
  std::stable_sort(candidates.begin(), candidates.end(),
                   [&](Value x, Value y) { return rank(x) < rank(y); });

  for (Value x : candidates) {
    Buffer *b = bufferOf.lookup(aliasRoot(x));
    if (!b || llvm::is_contained(taken, b) ||
        allocationSize(cast<RankedTensorType>(r.getType())) != b->size)
      continue;
    if (fusion) {
      // Every input in this buffer must allow the overwrite.
      bool ok = true;
      for (auto [i, in] : llvm::enumerate(fusion.getInputs()))
        if (bufferOf.lookup(aliasRoot(in)) == b)
          ok &= fusionCanWriteOver(fusion, i, r.getResultNumber());
      if (!ok)
        continue;
    }
    if (b->kind == Buffer::Carried && t <= subtreeEnd.lookup(b->loop)) {
      // Inside its loop a slot goes only to the value yielded back into
      // it, once the body no longer needs what the slot holds.
      auto loop = cast<scf::ForOp>(b->loop);
      Operation *yield = loop.getBody()->getTerminator();
      if (op->getBlock() == loop.getBody() && b->innerEnd == t &&
          yield->getOperand(b->iterIndex) == r)
        return b;
    } else if (b->kind == Buffer::Donated) {
      // Only a result of the function replaces a donated argument; a state
      // slot only the value stored back into that slot.
      bool returned = llvm::any_of(r.getUses(), [&](OpOperand &use) {
        return isa<func::ReturnOp>(use.getOwner()) &&
               (!b->state || func.getResultAttr(use.getOperandNumber(),
                                                "omni.state") == b->state);
      });
      if (b->end == t && returned && fusion)
        return b;
    } else if (b->end == t) {
      return b;
    }
  }
  return nullptr;
}

void Planner::releaseBefore(int64_t t) {
  while (!active.empty() && active.top().first < t) {
    auto [end, b] = active.top();
    active.pop();
    if (b->released || end != b->end)
      continue; // extended since; a later entry holds its real end
    b->released = true;
    if (b->kind != Buffer::Donated)
      arena.release(b->offset, b->size);
  }
}

LogicalResult Planner::plan(Operation *op) {
  int64_t t = index.lookup(op);
  current = t;
  opAt[t] = op;
  releaseBefore(t);
  SmallVector<int64_t> offsets;
  SmallVector<int64_t> donated;
  bool anyDonated = false;

  if (auto loop = dyn_cast<scf::ForOp>(op)) {
    // Each carried tensor gets one slot for the whole loop: the init's
    // buffer when the init dies here, a fresh one otherwise.
    SmallVector<Buffer *> taken;
    for (auto [k, init] : llvm::enumerate(loop.getInitArgs())) {
      auto type = dyn_cast<RankedTensorType>(init.getType());
      if (!type) {
        offsets.push_back(-1);
        continue;
      }
      Buffer *b = bufferOf.lookup(aliasRoot(init));
      bool free =
          b && (b->kind == Buffer::Arena ||
                (b->kind == Buffer::Carried && t > subtreeEnd.lookup(b->loop)));
      if (free && b->end == t && b->size == allocationSize(type) &&
          !llvm::is_contained(taken, b)) {
        ++numReused;
      } else {
        b = allocate(type, t);
      }
      taken.push_back(b);
      b->kind = Buffer::Carried;
      b->loop = loop;
      b->iterIndex = k;
      Value iterArg = loop.getRegionIterArgs()[k];
      b->innerEnd = aliasEnd.lookup(iterArg);
      b->end = std::max(b->end, subtreeEnd.lookup(op));
      bind(iterArg, b);
      bind(loop.getResult(k), b);
      offsets.push_back(b->offset);
    }
  } else {
    if (op->hasTrait<OpTrait::ConstantLike>() ||
        kindOf(op) == FusionKind::Reshape ||
        llvm::none_of(op->getResultTypes(), llvm::IsaPred<RankedTensorType>))
      return success();
    SmallVector<Buffer *> taken;
    auto fusion = dyn_cast<FusionOp>(op);
    SmallVector<int64_t> overwrites(fusion ? fusion.getInputs().size() : 0, -1);
    for (OpResult r : op->getResults()) {
      auto type = dyn_cast<RankedTensorType>(r.getType());
      if (!type) {
        offsets.push_back(-1);
        donated.push_back(-1);
        continue;
      }
      Buffer *b = inPlaceBuffer(op, r, taken);
      if (b) {
        ++numReused;
        if (b->kind == Buffer::Carried)
          b->innerEnd = aliasEnd.lookup(r);
        if (fusion)
          for (auto [i, in] : llvm::enumerate(fusion.getInputs()))
            if (bufferOf.lookup(aliasRoot(in)) == b)
              overwrites[i] = r.getResultNumber();
      } else {
        b = allocate(type, t);
      }
      taken.push_back(b);
      bind(r, b);
      bool inArgument = b->kind == Buffer::Donated;
      anyDonated |= inArgument;
      offsets.push_back(inArgument ? -1 : b->offset);
      donated.push_back(inArgument ? int64_t(b->argIndex) : -1);
    }
    // The kernel of an in-place fusion is told which of its input buffers
    // is which result's (compiler/codegen/KernelSet.h, KernelDef::overwrites).
    if (llvm::any_of(overwrites, [](int64_t r) { return r >= 0; }))
      op->setAttr("omni.overwrites",
                  Builder(op->getContext()).getDenseI64ArrayAttr(overwrites));
  }
  Builder builder(op->getContext());
  op->setAttr("omni.offsets", builder.getDenseI64ArrayAttr(offsets));
  if (anyDonated)
    op->setAttr("omni.donated_args", builder.getDenseI64ArrayAttr(donated));
  return success();
}

LogicalResult Planner::run() {
  // Static shapes only: the arena is sized at compile time.
  WalkResult shapes = func.walk([&](Operation *op) {
    for (Type t : op->getResultTypes()) {
      auto st = dyn_cast<ShapedType>(t);
      if (!st)
        continue;
      if (!isa<RankedTensorType>(st) || !st.hasStaticShape() ||
          !st.getElementType().isIntOrIndexOrFloat()) {
        op->emitError("omni-plan-memory needs statically shaped tensors of "
                      "integers or floats, found ")
            << t;
        return WalkResult::interrupt();
      }
    }
    return WalkResult::advance();
  });
  if (shapes.wasInterrupted())
    return failure();

  number(func.getBody().front());
  computeLiveness();
  for (auto [i, arg] : llvm::enumerate(func.getArguments())) {
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    auto state = func.getArgAttrOfType<StringAttr>(i, "omni.state");
    if (!type || (!state && !func.getArgAttr(i, "omni.donate")))
      continue;
    Buffer &b = buffers.emplace_back();
    b.kind = Buffer::Donated;
    b.argIndex = i;
    b.state = state;
    b.size = allocationSize(type);
    bind(arg, &b);
  }
  WalkResult planned = func.walk<WalkOrder::PreOrder>([&](Operation *op) {
    if (op == func)
      return WalkResult::advance();
    if (failed(plan(op)))
      return WalkResult::interrupt();
    return isa<FusionOp>(op) ? WalkResult::skip() : WalkResult::advance();
  });
  return failure(planned.wasInterrupted());
}

/// The names along a location, outermost first: a call site's caller
/// before its callee, the first named part of a fused location. The first
/// is the op's phase (as the step.bin writer's phaseOf has it), the last
/// the innermost name (the model layer for the model's ops).
void locationNames(Location loc, SmallVectorImpl<StringRef> &names) {
  if (auto site = dyn_cast<CallSiteLoc>(loc)) {
    locationNames(site.getCaller(), names);
    locationNames(site.getCallee(), names);
  } else if (auto name = dyn_cast<NameLoc>(loc)) {
    names.push_back(name.getName().strref());
    locationNames(name.getChildLoc(), names);
  } else if (auto fused = dyn_cast<FusedLoc>(loc)) {
    for (Location part : fused.getLocations()) {
      size_t before = names.size();
      locationNames(part, names);
      if (names.size() > before)
        return;
    }
  }
}

/// Bytes as `<n> bytes (<x> MB)`, MB = 10^6 bytes as docs/performance.md
/// counts them.
std::string formatBytes(int64_t bytes) {
  return llvm::formatv("{0} bytes ({1:F2} MB)", bytes, bytes / 1e6).str();
}

void Planner::printPeak(llvm::raw_ostream &os) const {
  StringRef name = func::FuncOp(func).getSymName();
  if (peakPoint < 0) {
    os << "arena peak (@" << name << "): empty\n";
    return;
  }
  // A buffer is live from its allocation to its end (releaseBefore frees it
  // at the first op after that).
  auto inArena = [](const Buffer &b) { return b.kind != Buffer::Donated; };
  auto liveAt = [](const Buffer &b, int64_t t) {
    return b.start <= t && t <= b.end;
  };
  // The most bytes live at once in this op order: what any placement of
  // these buffers needs at least. More arena than that is fragmentation.
  std::vector<std::pair<int64_t, int64_t>> events;
  for (const Buffer &b : buffers)
    if (inArena(b)) {
      events.push_back({b.start, b.size});
      events.push_back({b.end + 1, -b.size});
    }
  llvm::sort(events);
  int64_t liveBytes = 0, maxLive = 0, maxLivePoint = 0;
  for (size_t i = 0; i < events.size();) {
    int64_t t = events[i].first;
    for (; i < events.size() && events[i].first == t; ++i)
      liveBytes += events[i].second;
    if (liveBytes > maxLive) {
      maxLive = liveBytes;
      maxLivePoint = t;
    }
  }

  // What each live buffer holds at the peak: its latest placement.
  DenseMap<const Buffer *, Value> held;
  for (const Binding &bd : bindings) {
    if (bd.point > peakPoint)
      break;
    held[bd.buffer] = bd.value;
  }
  struct Live {
    int64_t bytes;
    Value value;
    SmallVector<StringRef> names;
  };
  std::vector<Live> live;
  int64_t peakLive = 0;
  for (const Buffer &b : buffers) {
    if (!inArena(b) || !liveAt(b, peakPoint))
      continue;
    Live l{b.size, held.lookup(&b), {}};
    if (l.value)
      locationNames(l.value.getLoc(), l.names);
    peakLive += b.size;
    live.push_back(std::move(l));
  }

  auto describeOp = [&](Operation *op) {
    std::string s;
    llvm::raw_string_ostream out(s);
    out << op->getName();
    SmallVector<StringRef> names;
    locationNames(op->getLoc(), names);
    if (!names.empty())
      out << " in " << llvm::join(names, " / ");
    return s;
  };
  Operation *peakOp = opAt.lookup(peakPoint);
  os << "arena peak (@" << name << "): " << formatBytes(arena.size())
     << " reached at op " << peakPoint << " (" << describeOp(peakOp)
     << "); live there: " << formatBytes(peakLive) << " in " << live.size()
     << " buffers\n";
  os << "most live at once (@" << name << "): " << formatBytes(maxLive)
     << " at op " << maxLivePoint;
  if (Operation *op = opAt.lookup(maxLivePoint))
    os << " (" << describeOp(op) << ")";
  os << "\n";

  // Grouped by phase, then by phase and innermost name, most bytes first.
  auto group = [&](StringRef what, auto keyOf, size_t limit) {
    llvm::StringMap<std::pair<int64_t, int64_t>> sums;
    for (const Live &l : live) {
      auto &[bytes, count] = sums[keyOf(l)];
      bytes += l.bytes;
      ++count;
    }
    std::vector<std::pair<std::string, std::pair<int64_t, int64_t>>> sorted;
    for (auto &e : sums)
      sorted.push_back({e.getKey().str(), e.getValue()});
    llvm::stable_sort(sorted, [](const auto &a, const auto &b) {
      return a.second.first != b.second.first ? a.second.first > b.second.first
                                              : a.first < b.first;
    });
    for (size_t i = 0; i < sorted.size() && i < limit; ++i)
      os << "  " << what << " " << sorted[i].first << ": "
         << formatBytes(sorted[i].second.first) << " in "
         << sorted[i].second.second << " values\n";
  };
  auto phaseOf = [](const Live &l) -> std::string {
    return l.names.empty() ? "(none)" : l.names.front().str();
  };
  group("phase", phaseOf, SIZE_MAX);
  group(
      "layer",
      [&](const Live &l) -> std::string {
        if (l.names.size() < 2)
          return phaseOf(l);
        return (l.names.front() + " / " + l.names.back()).str();
      },
      10);

  // The biggest values, with the op that made them.
  llvm::stable_sort(
      live, [](const Live &a, const Live &b) { return a.bytes > b.bytes; });
  for (size_t i = 0; i < live.size() && i < 10; ++i) {
    const Live &l = live[i];
    os << "  value " << formatBytes(l.bytes) << " ";
    if (!l.value) {
      os << "(unknown)\n";
      continue;
    }
    Value v = l.value;
    os << v.getType() << " from ";
    if (Operation *def = v.getDefiningOp())
      os << describeOp(def);
    else
      os << describeOp(v.getParentBlock()->getParentOp()) << " (iter_arg)";
    os << "\n";
  }
}

struct OmniPlanMemoryPass
    : omni::impl::OmniPlanMemoryPassBase<OmniPlanMemoryPass> {
  using Base::Base;

  /// 1. Number the ops of the function in program order (loop bodies
  ///    inline, fusion bodies skipped); an op with regions also records
  ///    the last number inside it.
  /// 2. Liveness: a value lives from its definition to its last use; a
  ///    use inside a loop that does not contain the definition counts as
  ///    a use at the loop's end. A value and its reshapes form one class
  ///    living as long as its longest member.
  /// 3. Donated arguments (`omni.donate`) and state slots (`omni.state`)
  ///    become buffers outside the arena that die with the argument; a
  ///    slot is taken only by the value stored back into it.
  /// 4. Linear scan in program order: at each op, first return to the
  ///    free list every buffer whose values all died before it, then give
  ///    each tensor result a buffer: the buffer of an operand dying at
  ///    this op when an in-place rule allows it, otherwise the best-fit
  ///    free block (the smallest that fits, growing the arena when none
  ///    does). An scf.for gets one slot per carried tensor (the init's
  ///    buffer when the init dies at the loop) shared by the iter_arg,
  ///    the value yielded back into it and the loop result.
  /// 5. Record `omni.offsets` on every op that allocated and
  ///    `omni.arena_size` (the high-water mark) on the function.
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    Planner planner(func);
    if (failed(planner.run()))
      return signalPassFailure();
    func->setAttr(
        "omni.arena_size",
        Builder(func.getContext()).getI64IntegerAttr(planner.arenaSize()));
    if (report)
      llvm::errs() << "arena: " << planner.arenaSize() << " bytes, "
                   << planner.numAllocated << " buffers, " << planner.numReused
                   << " reused (@" << func.getSymName() << ")\n";
    if (report) // after the summary line, which scripts and tests read
      planner.printPeak(llvm::errs());
  }
};

} // namespace
