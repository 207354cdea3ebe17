//===- CudaRowLaunches.cpp - a norm or a softmax as one launch ------------===//
//
// Step 3 of the cuda lowering, first (mapToLaunches, CudaLaunches.cpp). A
// layer norm is loops over its rows (fill the accumulators, fold each row,
// round the results) and loops over its elements (the input's producer,
// the normalized output). Split and fused as other reductions are, that
// is 4 to 7 launches, each with a launch's latency, most of them reading
// the row again. Here a run of top-level parallel loops whose leading
// dimensions are one "row" space, one of them a reduction over exactly
// those rows, becomes one launch. Each row gets T threads (its lanes,
// about one per 4 elements of the longest loop) and a block 256 / T rows:
//
// - a loop over the rows only: lane 0 runs the row's iteration;
// - a loop over the rows and more: lane l runs the row's iterations
//   l, l + T, ... (consecutive lanes on consecutive elements);
// - a reduction (a loop over the rows whose body is a reduction nest into
//   acc[row]): lane l folds elements l, l + T, ... in a register from the
//   identity, the row's lanes fold the T values as a tree in shared
//   memory, and lane 0 combines acc[row] with the result;
//
// and a barrier after each loop, so that each sees what the ones before
// it stored. This is right when every element that one loop of the run
// writes and another touches is indexed by the row indices in both, at the
// same positions (rowLocal, CudaLoopFusion.cpp): rows are then independent
// of each other. Sums fold in another order than on the cpu, in f64 as
// everywhere. docs/backend-cuda.md, "Lowering", "Row launches".
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/cuda/CudaLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;

namespace mlir::omni::cuda {
namespace {

/// A reduction starts a row launch when its rows have at least this many
/// elements (shorter ones are one thread per row already).
constexpr int64_t kRowMinElements = 32;
/// No loop of a row launch has more elements per row than this: with
/// kBlockThreads threads a thread walks at most 64 of them, and a few long
/// rows are better split (splitPartialReduction).
constexpr int64_t kRowMaxElements = 16384;
/// A row launch gives each row about this many elements per thread in its
/// longest loop: enough loads in flight per thread, and a short fold.
constexpr int64_t kRowElementsPerThread = 4;

enum class Kind { Row, Elements, Reduce };

/// One loop of a row launch.
struct Member {
  scf::ParallelOp par;
  Kind kind = Kind::Row;
  /// Elements per row: the reduced extent, or the iterations per row.
  int64_t perRow = 1;
  std::optional<ReductionNest> reduction;
};

/// The trip counts of `par` when its bounds are constants from 0 by 1.
std::optional<SmallVector<int64_t>> unitTrips(scf::ParallelOp par) {
  SmallVector<int64_t> trips;
  for (unsigned d = 0; d < par.getNumLoops(); ++d) {
    std::optional<int64_t> lb = getConstantIntValue(par.getLowerBound()[d]);
    std::optional<int64_t> ub = getConstantIntValue(par.getUpperBound()[d]);
    std::optional<int64_t> st = getConstantIntValue(par.getStep()[d]);
    if (!lb || !ub || !st || *lb != 0 || *st != 1 || *ub < 1)
      return std::nullopt;
    trips.push_back(*ub);
  }
  return trips;
}

/// What `par` would be in a row launch over `rows`, or nullopt when it
/// cannot join one.
std::optional<Member> classify(scf::ParallelOp par, ArrayRef<int64_t> rows) {
  std::optional<SmallVector<int64_t>> trips = unitTrips(par);
  if (par.getNumResults() != 0 || !trips || trips->size() < rows.size() ||
      !llvm::equal(ArrayRef(*trips).take_front(rows.size()), rows))
    return std::nullopt;
  Member m;
  m.par = par;
  if (trips->size() > rows.size()) {
    m.kind = Kind::Elements;
    for (int64_t t : ArrayRef(*trips).drop_front(rows.size()))
      m.perRow *= t;
    if (m.perRow > kRowMaxElements)
      return std::nullopt;
    return m;
  }
  auto ops = par.getBody()->without_terminator();
  if (llvm::hasSingleElement(ops))
    if (auto outer = dyn_cast<scf::ForOp>(*ops.begin())) {
      std::optional<ReductionNest> r =
          matchReductionNest(outer, par.getInductionVars());
      // A column-like reduction would read with a stride in every thread.
      if (!r || !readsAlongRows(*r) || r->elements > kRowMaxElements)
        return std::nullopt;
      m.kind = Kind::Reduce;
      m.perRow = r->elements;
      m.reduction = std::move(r);
      return m;
    }
  // Thread 0 runs a row's iteration: no loops in it.
  if (par.getBody()
          ->walk([](LoopLikeOpInterface) { return WalkResult::interrupt(); })
          .wasInterrupted())
    return std::nullopt;
  m.kind = Kind::Row;
  return m;
}

/// delinearize() of the index `linear` in 32-bit arithmetic (it fits: a
/// row launch has fewer than 2^31 rows and 16384 elements a row), the
/// indices back as index values.
SmallVector<Value> delinearize32(OpBuilder &b, Location loc, Value linear,
                                 ArrayRef<int64_t> trips) {
  Value narrow = arith::IndexCastUIOp::create(b, loc, b.getI32Type(), linear);
  SmallVector<Value> ivs = delinearize(b, loc, narrow, trips);
  for (Value &iv : ivs)
    iv = arith::IndexCastUIOp::create(b, loc, b.getIndexType(), iv);
  return ivs;
}

/// Thread `tid` of `threads` runs elements tid, tid + threads, ... of
/// `count`: a loop of a constant trip count (LLVM unrolls it and issues the
/// loads together), each element guarded when `count` is not a multiple of
/// `threads`. `body` builds one element at `e` from the carried `iter`
/// (empty, or one value) and returns what to carry on; the loop's results
/// are returned.
ValueRange stridedLoop(
    OpBuilder &b, Location loc, Value tid, int64_t count, int64_t threads,
    ValueRange init,
    function_ref<SmallVector<Value>(OpBuilder &, Value, ValueRange)> body) {
  Type index = b.getIndexType();
  auto loop = scf::ForOp::create(
      b, loc, indexConst(b, loc, index, 0),
      indexConst(b, loc, index, (count + threads - 1) / threads),
      indexConst(b, loc, index, 1), init,
      [&](OpBuilder &nb, Location nl, Value j, ValueRange iter) {
        Value e = arith::AddIOp::create(
            nb, nl, tid,
            arith::MulIOp::create(nb, nl, j,
                                  indexConst(nb, nl, index, threads)));
        if (count % threads == 0) {
          scf::YieldOp::create(nb, nl, body(nb, e, iter));
          return;
        }
        Value inRange =
            arith::CmpIOp::create(nb, nl, arith::CmpIPredicate::ult, e,
                                  indexConst(nb, nl, index, count));
        auto guard = scf::IfOp::create(nb, nl, iter.getTypes(), inRange,
                                       /*withElseRegion=*/!iter.empty());
        OpBuilder tb = OpBuilder::atBlockEnd(guard.thenBlock());
        if (iter.empty())
          tb.setInsertionPoint(guard.thenBlock()->getTerminator());
        SmallVector<Value> out = body(tb, e, iter);
        if (!iter.empty()) {
          scf::YieldOp::create(tb, nl, out);
          OpBuilder eb = OpBuilder::atBlockEnd(guard.elseBlock());
          scf::YieldOp::create(eb, nl, iter);
        }
        scf::YieldOp::create(nb, nl, guard.getResults());
      });
  return loop.getResults();
}

/// Replaces the loops of `group` (over `rows`) by one launch, where the
/// last of them was: T threads a row (a power of two, about
/// kRowElementsPerThread elements each in the longest loop, 8 to
/// kBlockThreads), P = kBlockThreads / T rows a block (fewer when there
/// are fewer rows). Thread t of a block runs lane t % T of row
/// block * P + t / T; the rows past the last (in the last block) only
/// take part in the barriers.
void emitRowLaunch(MutableArrayRef<Member> group, ArrayRef<int64_t> rows) {
  scf::ParallelOp last = group.back().par;
  Location loc = group.front().par.getLoc();
  int64_t count = 1, widest = 1;
  for (int64_t r : rows)
    count *= r;
  for (const Member &m : group)
    widest = std::max(widest, m.perRow);
  const int64_t lanes = std::clamp<int64_t>(
      static_cast<int64_t>(llvm::PowerOf2Ceil(
          (widest + kRowElementsPerThread - 1) / kRowElementsPerThread)),
      8, kBlockThreads);
  const int64_t perBlock = std::min(
      kBlockThreads / lanes, static_cast<int64_t>(llvm::PowerOf2Ceil(count)));
  const int64_t threads = lanes * perBlock;
  const int64_t blocks = (count + perBlock - 1) / perBlock;
  OpBuilder b(last);
  gpu::LaunchOp launch = createLaunch(b, last, blocks, threads);
  Type index = b.getIndexType();
  auto c = [&](int64_t v) { return indexConst(b, loc, index, v); };
  Value tid = launch.getThreadIds().x;
  Value lane =
      perBlock == 1 ? tid : arith::RemUIOp::create(b, loc, tid, c(lanes));
  Value slot =
      perBlock == 1 ? c(0) : arith::DivUIOp::create(b, loc, tid, c(lanes));
  Value row = arith::AddIOp::create(
      b, loc,
      arith::MulIOp::create(b, loc, launch.getBlockIds().x, c(perBlock)), slot);
  // The row's part of each shared buffer.
  Value base = arith::MulIOp::create(b, loc, slot, c(lanes));
  SmallVector<Value> rowIvs = delinearize32(b, loc, row, rows);
  // Whether this thread's row exists (all do unless the last block has
  // fewer): the loops' work is guarded, the barriers are not.
  Value exists = count % perBlock == 0
                     ? Value()
                     : arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                             row, c(count))
                           .getResult();
  Value firstLane =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, lane, c(0));
  Value leads =
      exists ? arith::AndIOp::create(b, loc, firstLane, exists).getResult()
             : firstLane;
  // Runs `build` at `b` for existing rows only: in an scf.if yielding
  // `otherwise`'s types (`otherwise` for the rows past the last).
  auto ifExists = [&](ValueRange otherwise,
                      function_ref<SmallVector<Value>(OpBuilder &)> build)
      -> SmallVector<Value> {
    if (!exists)
      return build(b);
    auto guard = scf::IfOp::create(b, loc, otherwise.getTypes(), exists,
                                   /*withElseRegion=*/!otherwise.empty());
    OpBuilder tb = OpBuilder::atBlockEnd(guard.thenBlock());
    if (otherwise.empty()) {
      tb.setInsertionPoint(guard.thenBlock()->getTerminator());
      build(tb);
      return {};
    }
    scf::YieldOp::create(tb, loc, build(tb));
    OpBuilder eb = OpBuilder::atBlockEnd(guard.elseBlock());
    scf::YieldOp::create(eb, loc, otherwise);
    return guard.getResults();
  };
  // One shared buffer per accumulator type, reused: a barrier separates
  // one reduction's last read of it from the next one's first write.
  DenseMap<Type, Value> shared;
  for (auto [k, m] : llvm::enumerate(group)) {
    IRMapping map;
    for (auto [d, iv] : llvm::enumerate(rowIvs))
      map.map(m.par.getInductionVars()[d], iv);
    Block *body = m.par.getBody();
    switch (m.kind) {
    case Kind::Row: {
      auto guard = scf::IfOp::create(b, loc, leads, /*withElseRegion=*/false);
      OpBuilder gb = guard.getThenBodyBuilder();
      for (Operation &op : body->without_terminator())
        gb.clone(op, map);
      break;
    }
    case Kind::Elements: {
      SmallVector<int64_t> inner(
          ArrayRef(*unitTrips(m.par)).drop_front(rows.size()));
      ifExists({}, [&](OpBuilder &eb) {
        stridedLoop(eb, loc, lane, m.perRow, lanes, {},
                    [&](OpBuilder &nb, Value e, ValueRange) {
                      for (auto [d, iv] :
                           llvm::enumerate(delinearize32(nb, loc, e, inner)))
                        map.map(m.par.getInductionVars()[rows.size() + d], iv);
                      for (Operation &op : body->without_terminator())
                        nb.clone(op, map);
                      return SmallVector<Value>();
                    });
        return SmallVector<Value>();
      });
      break;
    }
    case Kind::Reduce: {
      ReductionNest &r = *m.reduction;
      Type accType = r.load.getResult().getType();
      Value &sh = shared[accType];
      if (!sh)
        sh = addSharedBuffer(launch, accType, threads);
      Value identity = arith::ConstantOp::create(b, loc, r.identity);
      Value partial = ifExists(identity, [&](OpBuilder &eb) {
        return SmallVector<Value>(
            stridedLoop(eb, loc, lane, r.elements, lanes, identity,
                        [&](OpBuilder &nb, Value e, ValueRange iter) {
                          return SmallVector<Value>{
                              combinedAt(nb, loc, r, e, iter[0], map)};
                        }));
      })[0];
      foldBlock(b, loc, r, sh, base, lane, lanes, threads, partial);
      auto guard = scf::IfOp::create(b, loc, leads, false);
      OpBuilder gb = guard.getThenBodyBuilder();
      SmallVector<Value> at;
      for (Value v : r.load.getIndices())
        at.push_back(map.lookupOrDefault(v));
      Value acc = r.store.getMemRef();
      Value old = memref::LoadOp::create(gb, loc, acc, at);
      Value total = memref::LoadOp::create(gb, loc, sh, base);
      memref::StoreOp::create(gb, loc, combineWith(gb, r, old, total), acc, at);
      break;
    }
    }
    // A row's lanes are one warp or whole warps, and only they exchange
    // values (rowLocal).
    if (k + 1 < group.size())
      syncLanes(b, loc, lanes, threads);
  }
  for (Member &m : group)
    m.par.erase();
}

} // namespace

void rowLaunches(func::FuncOp fn, unsigned firstScratch,
                 SameBuffers sameBuffers) {
  SmallVector<Operation *> top;
  for (Operation &op : fn.front().without_terminator())
    top.push_back(&op);
  auto pure = [](Operation *op) {
    return op->getNumRegions() == 0 && isMemoryEffectFree(op);
  };
  llvm::DenseSet<Operation *> taken;
  std::vector<std::pair<SmallVector<Member, 4>, SmallVector<int64_t>>> groups;
  for (auto [i, op] : llvm::enumerate(top)) {
    auto seed = dyn_cast<scf::ParallelOp>(op);
    if (!seed || taken.contains(op))
      continue;
    std::optional<SmallVector<int64_t>> rows = unitTrips(seed);
    if (!rows)
      continue;
    std::optional<Member> m = classify(seed, *rows);
    // Rows beyond a launch's blocks (each holds at least one) stay split.
    int64_t count = 1;
    for (int64_t r : *rows)
      count = r > kMaxGridX / count ? kMaxGridX + 1 : count * r;
    if (!m || m->kind != Kind::Reduce || m->perRow < kRowMinElements ||
        count > kMaxGridX)
      continue;
    SmallVector<Member, 4> group;
    group.push_back(std::move(*m));
    // The loops before and after it (pure ops between them stay where
    // they are: the launch goes where the last loop was, after them).
    auto join = [&](Operation *other) -> std::optional<Member> {
      auto par = dyn_cast<scf::ParallelOp>(other);
      if (!par || taken.contains(other))
        return std::nullopt;
      std::optional<Member> joined = classify(par, *rows);
      if (!joined || llvm::any_of(group, [&](const Member &g) {
            return !rowLocal(fn, firstScratch, sameBuffers, g.par, par,
                             rows->size());
          }))
        return std::nullopt;
      return joined;
    };
    for (size_t j = i; j-- > 0;) {
      if (pure(top[j]))
        continue;
      std::optional<Member> joined = join(top[j]);
      if (!joined)
        break;
      group.insert(group.begin(), std::move(*joined));
    }
    for (size_t j = i + 1; j < top.size(); ++j) {
      if (pure(top[j]))
        continue;
      std::optional<Member> joined = join(top[j]);
      if (!joined)
        break;
      group.push_back(std::move(*joined));
    }
    for (const Member &g : group)
      taken.insert(g.par);
    groups.emplace_back(std::move(group), std::move(*rows));
  }
  for (auto &[group, rows] : groups)
    emitRowLaunch(group, rows);
}

} // namespace mlir::omni::cuda
