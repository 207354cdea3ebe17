//===- CudaLoopFusion.cpp - one launch for parallel loops over one space --===//
//
// Step 3 of the cuda lowering (CudaCodegen.cpp), before the launches: a
// kernel's top-level parallel loops over the same iteration space become
// one loop, hence one launch, when that cannot change what any iteration
// sees. A reduction is written as three loops over its outputs (fill the
// accumulator, fold the elements, round into the result), a multi-result
// elementwise kernel as one loop per result: each a launch of its own, with
// a pass over memory and a launch's latency each. docs/backend-cuda.md,
// "Lowering".
//
// Loops A, then B, over the same space fuse into one whose iteration i runs
// A's body, then B's, when every element that one of them writes the other
// touches only in the same iteration: the same memref value indexed by the
// same function of the induction variables, each variable used (so distinct
// iterations touch distinct elements). Loops between them must be
// independent of B (then B's body joins A) or of A (then A's body joins B).
//
// Which buffers may overlap: scratch buffers are the kernel's own; other
// arguments only as a pair of an input and the result the memory plan may
// write over it (the kernel's `overwrites` patterns, docs/fusion.md
// "In-place rules"), and then they are one buffer: two such arguments of
// one type, read and written directly, count as one memref here. Two views
// of one buffer always may overlap.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/cuda/CudaLowering.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallBitVector.h"

#include <variant>

using namespace mlir;

namespace mlir::omni::cuda {
namespace {

bool isPair(SameBuffers pairs, unsigned a, unsigned b) {
  return llvm::is_contained(pairs, std::pair(a, b)) ||
         llvm::is_contained(pairs, std::pair(b, a));
}

/// One load or store of a top-level op, with its indices in terms of the
/// op's induction variables where they are that simple: each index an
/// induction variable's position or a constant.
struct Access {
  Value memref;
  bool write = false;
  /// Empty when an index is neither (then it matches nothing).
  SmallVector<std::variant<unsigned, int64_t>> at;
  bool usesEveryIv = false;
  /// Each index's induction variable position, or -1 for another value.
  SmallVector<int> ivAt;
};

/// The loads and stores of `op` (nested ones included), or failure when it
/// holds another op with memory effects.
FailureOr<SmallVector<Access>> accessesOf(Operation *op) {
  ValueRange ivs;
  if (auto par = dyn_cast<scf::ParallelOp>(op))
    ivs = par.getInductionVars();
  SmallVector<Access> out;
  auto record = [&](Value memref, ValueRange indices, bool write) {
    Access &a = out.emplace_back();
    a.memref = memref;
    a.write = write;
    llvm::SmallBitVector used(ivs.size());
    bool simple = true;
    for (Value index : indices) {
      auto iv = llvm::find(ivs, index);
      a.ivAt.push_back(iv == ivs.end() ? -1 : std::distance(ivs.begin(), iv));
      if (iv != ivs.end()) {
        unsigned d = static_cast<unsigned>(a.ivAt.back());
        a.at.push_back(d);
        used.set(d);
      } else if (std::optional<int64_t> c = getConstantIntValue(index)) {
        a.at.push_back(*c);
      } else {
        simple = false;
      }
    }
    if (!simple)
      a.at.clear();
    a.usesEveryIv = simple && !ivs.empty() && used.all();
  };
  WalkResult walked = op->walk([&](Operation *inner) {
    if (auto load = dyn_cast<memref::LoadOp>(inner)) {
      record(load.getMemRef(), load.getIndices(), false);
      return WalkResult::advance();
    }
    if (auto store = dyn_cast<memref::StoreOp>(inner)) {
      record(store.getMemRef(), store.getIndices(), true);
      return WalkResult::advance();
    }
    if (isMemoryEffectFree(inner) ||
        inner->hasTrait<OpTrait::HasRecursiveMemoryEffects>())
      return WalkResult::advance();
    return WalkResult::interrupt();
  });
  if (walked.wasInterrupted())
    return failure();
  return out;
}

/// The buffer a memref value views: a function argument, or the value
/// itself when it is not a view of one.
Value baseOf(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (auto view = dyn_cast<ViewLikeOpInterface>(def))
      v = view.getViewSource();
    else if (auto cast = dyn_cast<memref::CastOp>(def))
      v = cast.getSource();
    else
      break;
  }
  return v;
}

/// Whether `a` and `b` are subviews of one buffer of identity layout (so
/// that distinct indices are distinct elements), without rank reduction,
/// whose static ranges of some dimension do not meet: the two halves of a
/// concatenation.
bool disjointSubviews(Value a, Value b) {
  auto va = a.getDefiningOp<memref::SubViewOp>();
  auto vb = b.getDefiningOp<memref::SubViewOp>();
  if (!va || !vb || va.getSource() != vb.getSource())
    return false;
  auto source = cast<MemRefType>(va.getSource().getType());
  if (!source.getLayout().isIdentity() ||
      va.getType().getRank() != source.getRank() ||
      vb.getType().getRank() != source.getRank())
    return false;
  for (int64_t d = 0; d < source.getRank(); ++d) {
    int64_t offsetA = va.getStaticOffsets()[d], sizeA = va.getStaticSizes()[d];
    int64_t offsetB = vb.getStaticOffsets()[d], sizeB = vb.getStaticSizes()[d];
    if (llvm::any_of(ArrayRef<int64_t>{offsetA, sizeA, offsetB, sizeB},
                     ShapedType::isDynamic) ||
        va.getStaticStrides()[d] != 1 || vb.getStaticStrides()[d] != 1)
      continue;
    if (offsetA + sizeA <= offsetB || offsetB + sizeB <= offsetA)
      return true;
  }
  return false;
}

class Fuser {
public:
  Fuser(func::FuncOp fn, unsigned firstScratch, SameBuffers sameBuffers)
      : fn(fn), firstScratch(firstScratch), sameBuffers(sameBuffers) {}

  void run();

  /// No element one of them writes is touched by the other.
  bool independent(ArrayRef<Access> a, ArrayRef<Access> b) const {
    for (const Access &x : a)
      for (const Access &y : b)
        if ((x.write || y.write) && mayAlias(x.memref, y.memref))
          return false;
    return true;
  }

  /// Every element one writes the other touches only in the same row: both
  /// index it by the first `rows` induction variables of their own loop,
  /// each once, at the same positions.
  bool rowLocal(ArrayRef<Access> a, ArrayRef<Access> b, unsigned rows) const {
    auto positions = [&](const Access &x) {
      SmallVector<int64_t> at(rows, -1);
      for (auto [p, iv] : llvm::enumerate(x.ivAt))
        if (iv >= 0 && static_cast<unsigned>(iv) < rows) {
          if (at[iv] >= 0)
            return SmallVector<int64_t>();
          at[iv] = static_cast<int64_t>(p);
        }
      if (llvm::is_contained(at, -1))
        return SmallVector<int64_t>();
      return at;
    };
    return conflictsAgree(a, b, [&](const Access &x, const Access &y) {
      SmallVector<int64_t> px = positions(x);
      return !px.empty() && px == positions(y);
    });
  }

private:
  bool mayAlias(Value a, Value b) const {
    return buffersMayOverlap(fn, firstScratch, sameBuffers, a, b);
  }

  /// The same elements at the same indices: one memref value, or the two
  /// arguments of an in-place pair with one type (the plan gives a result
  /// the whole buffer of the input it overwrites, shape for shape).
  bool sameMemref(Value a, Value b) const {
    if (a == b)
      return true;
    auto x = dyn_cast<BlockArgument>(a), y = dyn_cast<BlockArgument>(b);
    Block *entry = x ? x.getOwner() : nullptr;
    if (!x || !y || !entry->isEntryBlock() ||
        !isa<func::FuncOp>(entry->getParentOp()) || y.getOwner() != entry ||
        x.getType() != y.getType() ||
        !cast<MemRefType>(x.getType()).getLayout().isIdentity())
      return false;
    return isPair(sameBuffers, x.getArgNumber(), y.getArgNumber());
  }

  /// Whether every two accesses, one of `a` and one of `b`, that may touch
  /// one element and one of which writes it, access the same memref and
  /// `agree`.
  bool conflictsAgree(
      ArrayRef<Access> a, ArrayRef<Access> b,
      function_ref<bool(const Access &, const Access &)> agree) const {
    for (const Access &x : a)
      for (const Access &y : b) {
        if (!(x.write || y.write) || !mayAlias(x.memref, y.memref))
          continue;
        if (!sameMemref(x.memref, y.memref) || !agree(x, y))
          return false;
      }
    return true;
  }

  /// Every element one writes the other touches only in the same iteration.
  bool fusible(ArrayRef<Access> a, ArrayRef<Access> b) const {
    return conflictsAgree(a, b, [](const Access &x, const Access &y) {
      return !x.at.empty() && x.usesEveryIv && x.at == y.at;
    });
  }

  static bool sameSpace(scf::ParallelOp a, scf::ParallelOp b) {
    if (a.getNumLoops() != b.getNumLoops())
      return false;
    for (auto [x, y] :
         llvm::zip(llvm::concat<Value>(a.getLowerBound(), a.getUpperBound(),
                                       a.getStep()),
                   llvm::concat<Value>(b.getLowerBound(), b.getUpperBound(),
                                       b.getStep()))) {
      std::optional<int64_t> cx = getConstantIntValue(x);
      std::optional<int64_t> cy = getConstantIntValue(y);
      if (!cx || !cy || *cx != *cy)
        return false;
    }
    return true;
  }

  /// Moves `from`'s body into `into` and erases `from`: to the front of
  /// `into`'s body (`from` came first and moves down to `into`) or to its
  /// end (`from` came later); the pure ops between the loops that a body
  /// moving up uses move above both.
  void merge(scf::ParallelOp from, scf::ParallelOp into, bool front);

  func::FuncOp fn;
  unsigned firstScratch;
  SameBuffers sameBuffers;
};

void Fuser::merge(scf::ParallelOp from, scf::ParallelOp into, bool front) {
  // Pure ops between the loops that `from` (moving up into `into`) uses.
  if (into->isBeforeInBlock(from)) {
    llvm::SetVector<Value> above;
    getUsedValuesDefinedAbove(from.getRegion(), above);
    SmallVector<Operation *> hoist;
    std::function<void(Value)> need = [&](Value v) {
      Operation *def = v.getDefiningOp();
      if (!def || def->getBlock() != into->getBlock() ||
          def->isBeforeInBlock(into) || llvm::is_contained(hoist, def))
        return;
      for (Value operand : def->getOperands())
        need(operand);
      hoist.push_back(def);
    };
    for (Value v : above)
      need(v);
    for (Operation *op : hoist)
      op->moveBefore(into);
  }
  Block &target = into.getRegion().front();
  Block &source = from.getRegion().front();
  for (auto [x, y] :
       llvm::zip(from.getInductionVars(), into.getInductionVars()))
    x.replaceAllUsesWith(y);
  Operation *anchor = front ? &target.front() : target.getTerminator();
  for (Operation &op : llvm::make_early_inc_range(source.without_terminator()))
    op.moveBefore(anchor);
  from.erase();
}

void Fuser::run() {
  Block &body = fn.front();
  bool changed = true;
  while (changed) {
    changed = false;
    SmallVector<Operation *> ops;
    for (Operation &op : body.without_terminator())
      if (!isMemoryEffectFree(&op))
        ops.push_back(&op);
    SmallVector<std::optional<SmallVector<Access>>> accesses;
    for (Operation *op : ops) {
      FailureOr<SmallVector<Access>> a = accessesOf(op);
      accesses.push_back(succeeded(a) ? std::optional(*a) : std::nullopt);
    }
    for (size_t j = 0; j < ops.size() && !changed; ++j) {
      auto b = dyn_cast<scf::ParallelOp>(ops[j]);
      if (!b || b.getNumResults() != 0 || !accesses[j])
        continue;
      // The nearest earlier loop over the same space it can join.
      for (size_t i = j; i-- > 0;) {
        if (!accesses[i])
          break;
        auto a = dyn_cast<scf::ParallelOp>(ops[i]);
        bool between = true, bJumps = true, aJumps = true;
        for (size_t k = i + 1; k < j && between; ++k) {
          if (!accesses[k]) {
            between = false;
            break;
          }
          bJumps = bJumps && independent(*accesses[j], *accesses[k]);
          aJumps = aJumps && independent(*accesses[i], *accesses[k]);
        }
        if (!between || !(bJumps || aJumps))
          break;
        if (!a || a.getNumResults() != 0 || !sameSpace(a, b) ||
            !fusible(*accesses[i], *accesses[j]))
          continue;
        if (bJumps)
          merge(b, a, /*front=*/false);
        else
          merge(a, b, /*front=*/true);
        changed = true;
        break;
      }
    }
  }
}

} // namespace

FailureOr<SmallVector<Value>> storedBuffers(Operation *op) {
  FailureOr<SmallVector<Access>> accesses = accessesOf(op);
  if (failed(accesses))
    return failure();
  SmallVector<Value> out;
  for (const Access &a : *accesses)
    if (a.write)
      out.push_back(a.memref);
  return out;
}

bool buffersMayOverlap(func::FuncOp fn, unsigned firstScratch,
                       SameBuffers sameBuffers, Value a, Value b) {
  Value x = baseOf(a), y = baseOf(b);
  if (x == y)
    return !disjointSubviews(a, b);
  auto ax = dyn_cast<BlockArgument>(x), ay = dyn_cast<BlockArgument>(y);
  Block *entry = &fn.front();
  if (!ax || !ay || ax.getOwner() != entry || ay.getOwner() != entry)
    return false;
  return ax.getArgNumber() < firstScratch && ay.getArgNumber() < firstScratch &&
         isPair(sameBuffers, ax.getArgNumber(), ay.getArgNumber());
}

bool rowLocal(func::FuncOp fn, unsigned firstScratch, SameBuffers sameBuffers,
              scf::ParallelOp a, scf::ParallelOp b, unsigned rows) {
  FailureOr<SmallVector<Access>> x = accessesOf(a), y = accessesOf(b);
  return succeeded(x) && succeeded(y) &&
         Fuser(fn, firstScratch, sameBuffers).rowLocal(*x, *y, rows);
}

bool independentOps(func::FuncOp fn, unsigned firstScratch,
                    SameBuffers sameBuffers, Operation *a, Operation *b) {
  FailureOr<SmallVector<Access>> x = accessesOf(a), y = accessesOf(b);
  return succeeded(x) && succeeded(y) &&
         Fuser(fn, firstScratch, sameBuffers).independent(*x, *y);
}

void fuseParallelLoops(func::FuncOp fn, unsigned firstScratch,
                       SameBuffers sameBuffers) {
  Fuser(fn, firstScratch, sameBuffers).run();
}

namespace {

/// The top-level parallel loop whose body (not a region nested in it) holds
/// every use of `buffer`, each a load or store at the loop's induction
/// variables, every one once and in one order; or null.
scf::ParallelOp ownLoop(Value buffer) {
  scf::ParallelOp loop;
  SmallVector<Value> at;
  for (Operation *user : buffer.getUsers()) {
    ValueRange indices;
    if (auto load = dyn_cast<memref::LoadOp>(user))
      indices = load.getIndices();
    else if (auto store = dyn_cast<memref::StoreOp>(user);
             store && store.getMemRef() == buffer)
      indices = store.getIndices();
    else
      return nullptr;
    auto par = dyn_cast<scf::ParallelOp>(user->getParentOp());
    if (!par || (loop && par != loop) ||
        par->getBlock() != buffer.getParentBlock())
      return nullptr;
    if (!loop) {
      loop = par;
      at.assign(indices.begin(), indices.end());
      if (at.size() != par.getNumLoops() ||
          !llvm::all_of(par.getInductionVars(),
                        [&](Value iv) { return llvm::count(at, iv) == 1; }))
        return nullptr;
    } else if (!llvm::equal(indices, at)) {
      return nullptr;
    }
  }
  return loop;
}

} // namespace

void scratchToRegisters(func::FuncOp fn, unsigned firstScratch,
                        std::vector<int64_t> &scratch) {
  for (unsigned a = fn.getNumArguments(); a-- > firstScratch;) {
    Value buffer = fn.getArgument(a);
    scf::ParallelOp loop = ownLoop(buffer);
    if (!loop)
      continue;
    // In body order each load reads the value its iteration stored last;
    // a load before the first store reads no value of this iteration.
    SmallVector<std::pair<memref::LoadOp, Value>> loads;
    SmallVector<Operation *> stores;
    Value stored;
    bool ok = true;
    for (Operation &op : loop.getBody()->without_terminator()) {
      if (auto store = dyn_cast<memref::StoreOp>(op);
          store && store.getMemRef() == buffer) {
        stored = store.getValueToStore();
        stores.push_back(store);
      } else if (auto load = dyn_cast<memref::LoadOp>(op);
                 load && load.getMemRef() == buffer) {
        ok &= static_cast<bool>(stored);
        loads.emplace_back(load, stored);
      }
    }
    if (!ok)
      continue;
    for (auto [load, value] : loads) {
      load.getResult().replaceAllUsesWith(value);
      load.erase();
    }
    for (Operation *store : stores)
      store->erase();
    (void)fn.eraseArgument(a);
    scratch.erase(scratch.begin() + (a - firstScratch));
  }
}

} // namespace mlir::omni::cuda
