//===- CudaReductions.cpp - reductions mapped to many GPU threads
//----------===//
//
// Step 3 of the cuda lowering (CudaCodegen.cpp) for reductions, which
// one thread per output would leave to a few threads: a full reduction to
// one element runs on many blocks, a partial one with few outputs or a long
// extent on chunks of each output; both fold their partial results in a
// fixed order (deterministic, f64 sums). docs/backend-cuda.md, "Lowering".
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/cuda/CudaLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;

namespace mlir::omni::cuda {
namespace {

/// The identity of `combine` (0 for sums, -inf for max, ...), or null.
TypedAttr identityOf(Operation *combine) {
  Type t = combine->getResult(0).getType();
  auto kind =
      llvm::TypeSwitch<Operation *, std::optional<arith::AtomicRMWKind>>(
          combine)
          .Case([](arith::AddFOp) { return arith::AtomicRMWKind::addf; })
          .Case([](arith::MulFOp) { return arith::AtomicRMWKind::mulf; })
          .Case(
              [](arith::MaximumFOp) { return arith::AtomicRMWKind::maximumf; })
          .Case(
              [](arith::MinimumFOp) { return arith::AtomicRMWKind::minimumf; })
          .Case([](arith::MaxNumFOp) { return arith::AtomicRMWKind::maxnumf; })
          .Case([](arith::MinNumFOp) { return arith::AtomicRMWKind::minnumf; })
          .Case([](arith::AddIOp) { return arith::AtomicRMWKind::addi; })
          .Case([](arith::MulIOp) { return arith::AtomicRMWKind::muli; })
          .Case([](arith::MaxSIOp) { return arith::AtomicRMWKind::maxs; })
          .Case([](arith::MinSIOp) { return arith::AtomicRMWKind::mins; })
          .Case([](arith::MaxUIOp) { return arith::AtomicRMWKind::maxu; })
          .Case([](arith::MinUIOp) { return arith::AtomicRMWKind::minu; })
          .Case([](arith::OrIOp) { return arith::AtomicRMWKind::ori; })
          .Case([](arith::AndIOp) { return arith::AtomicRMWKind::andi; })
          .Default([](Operation *) { return std::nullopt; });
  if (!kind)
    return {};
  OpBuilder b(combine->getContext());
  return arith::getIdentityValueAttr(*kind, t, b, combine->getLoc());
}

} // namespace

std::optional<ReductionNest> matchReductionNest(scf::ForOp outer,
                                                ValueRange accIndices) {
  ReductionNest r;
  for (scf::ForOp f = outer;;) {
    if (f.getNumResults() != 0)
      return std::nullopt;
    std::optional<int64_t> lb = getConstantIntValue(f.getLowerBound());
    std::optional<int64_t> ub = getConstantIntValue(f.getUpperBound());
    std::optional<int64_t> st = getConstantIntValue(f.getStep());
    if (!lb || !ub || !st || *st <= 0 || *ub <= *lb)
      return std::nullopt;
    int64_t trip = (*ub - *lb + *st - 1) / *st;
    if (r.elements > (int64_t{1} << 50) / trip)
      return std::nullopt;
    r.elements *= trip;
    r.nest.push_back(f);
    r.lower.push_back(*lb);
    r.trip.push_back(trip);
    r.step.push_back(*st);
    auto ops = f.getBody()->without_terminator();
    if (llvm::hasSingleElement(ops))
      if (auto inner = dyn_cast<scf::ForOp>(ops.begin()))
        f = inner;
      else
        break;
    else
      break;
  }
  Block *body = r.nest.back().getBody();
  for (Operation &op : body->without_terminator()) {
    if (auto store = dyn_cast<memref::StoreOp>(op)) {
      if (r.store)
        return std::nullopt;
      r.store = store;
    } else if (op.getNumRegions() != 0 ||
               (!isMemoryEffectFree(&op) && !isa<memref::LoadOp>(op))) {
      return std::nullopt;
    }
  }
  auto sameIndices = [&](ValueRange indices) {
    return llvm::equal(indices, accIndices);
  };
  if (!r.store || !sameIndices(r.store.getIndices()))
    return std::nullopt;
  Value acc = r.store.getMemRef();
  for (Operation &op : body->without_terminator())
    if (auto load = dyn_cast<memref::LoadOp>(op);
        load && load.getMemRef() == acc) {
      if (r.load)
        return std::nullopt;
      r.load = load;
    }
  if (!r.load || !sameIndices(r.load.getIndices()) ||
      !r.load.getResult().hasOneUse())
    return std::nullopt;
  r.combine = r.store.getValue().getDefiningOp();
  if (!r.combine || r.combine->getBlock() != body ||
      r.combine->getNumOperands() != 2 ||
      *r.load.getResult().getUsers().begin() != r.combine ||
      r.combine->getOperand(0) == r.combine->getOperand(1))
    return std::nullopt;
  r.identity = identityOf(r.combine);
  if (!r.identity)
    return std::nullopt;
  return r;
}

/// See CudaLowering.h.
Value combinedAt(OpBuilder &nb, Location nl, ReductionNest &r, Value e,
                 Value acc, IRMapping &map) {
  Type indexType = nb.getIndexType();
  SmallVector<Value> ivs = delinearize(nb, nl, e, r.trip);
  for (size_t d = 0; d < r.nest.size(); ++d) {
    Value i = ivs[d];
    if (r.step[d] != 1)
      i = arith::MulIOp::create(nb, nl, i,
                                indexConst(nb, nl, indexType, r.step[d]));
    if (r.lower[d] != 0)
      i = arith::AddIOp::create(nb, nl, i,
                                indexConst(nb, nl, indexType, r.lower[d]));
    map.map(r.nest[d].getInductionVar(), i);
  }
  map.map(r.load.getResult(), acc);
  for (Operation &op : r.nest.back().getBody()->without_terminator())
    if (&op != r.load.getOperation() && &op != r.store.getOperation())
      nb.clone(op, map);
  return map.lookup(r.store.getValue());
}

bool readsAlongRows(ReductionNest &r) {
  Value innermost = r.nest.back().getInductionVar();
  for (Operation &op : r.nest.back().getBody()->without_terminator())
    if (auto load = dyn_cast<memref::LoadOp>(op);
        load && load != r.load && !load.getIndices().empty() &&
        load.getIndices().back() == innermost)
      return true;
  return false;
}

Value addSharedBuffer(gpu::LaunchOp launch, Type type, int64_t count) {
  auto workgroup = gpu::AddressSpaceAttr::get(launch.getContext(),
                                              gpu::AddressSpace::Workgroup);
  return launch.addWorkgroupAttribution(
      MemRefType::get({count}, type, MemRefLayoutAttrInterface(), workgroup),
      launch.getLoc());
}

void syncLanes(OpBuilder &b, Location loc, int64_t span, int64_t threads) {
  if (span > kWarpThreads) {
    gpu::BarrierOp::create(b, loc);
    return;
  }
  // Every thread of the block runs it (it is at the top level of the
  // body); a block smaller than a warp names only its threads.
  const uint32_t mask =
      threads >= kWarpThreads
          ? 0xffffffffu
          : static_cast<uint32_t>((uint64_t{1} << threads) - 1);
  NVVM::SyncWarpOp::create(
      b, loc,
      arith::ConstantOp::create(
          b, loc, b.getI32IntegerAttr(static_cast<int32_t>(mask))));
}

void foldBlock(OpBuilder &b, Location loc, ReductionNest &r, Value shared,
               Value base, Value lane, int64_t lanes, int64_t threads,
               Value value) {
  Type index = b.getIndexType();
  Value mineAt = arith::AddIOp::create(b, loc, base, lane);
  memref::StoreOp::create(b, loc, value, shared, mineAt);
  syncLanes(b, loc, lanes, threads);
  // Lane l < s folds l + s into l; after s = 1, element `base` holds the
  // group's value (lane 0 wrote it last and reads it next).
  for (int64_t s = lanes / 2; s >= 1; s /= 2) {
    Value active = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                         lane, indexConst(b, loc, index, s));
    auto fold = scf::IfOp::create(b, loc, active, /*withElseRegion=*/false);
    OpBuilder fb = fold.getThenBodyBuilder();
    Value mine = memref::LoadOp::create(fb, loc, shared, mineAt);
    Value at =
        arith::AddIOp::create(fb, loc, mineAt, indexConst(fb, loc, index, s));
    Value other = memref::LoadOp::create(fb, loc, shared, at);
    memref::StoreOp::create(fb, loc, combineWith(fb, r, mine, other), shared,
                            mineAt);
    // The next step reads what lanes s / 2 to s - 1 wrote.
    if (s > 1)
      syncLanes(b, loc, s, threads);
  }
}

Value combineWith(OpBuilder &b, ReductionNest &r, Value acc, Value other) {
  Value accValue = r.load.getResult();
  Value operand = r.combine->getOperand(0) == accValue
                      ? r.combine->getOperand(1)
                      : r.combine->getOperand(0);
  IRMapping map;
  map.map(accValue, acc);
  map.map(operand, other);
  return b.clone(*r.combine, map)->getResult(0);
}

namespace {

/// Combines `init` with `count` values in order by `r`'s combining op:
/// `load(k)` builds the k-th value (k an index, 0 to count - 1). Returns
/// the combined value.
Value foldInOrder(OpBuilder &b, Location loc, ReductionNest &r, Value init,
                  int64_t count,
                  function_ref<Value(OpBuilder &, Location, Value)> load) {
  Type indexType = b.getIndexType();
  return scf::ForOp::create(
             b, loc, indexConst(b, loc, indexType, 0),
             indexConst(b, loc, indexType, count),
             indexConst(b, loc, indexType, 1), ValueRange{init},
             [&](OpBuilder &fb, Location fl, Value k, ValueRange iter) {
               scf::YieldOp::create(
                   fb, fl, combineWith(fb, r, iter[0], load(fb, fl, k)));
             })
      .getResult(0);
}

/// Full reductions of at least this many elements run on many blocks.
constexpr int64_t kCooperativeMinElements = 1024;
/// At most this many blocks (two per SM of an H200) each of kBlockThreads
/// threads; every thread reduces at least 4 elements.
constexpr int64_t kCooperativeMaxBlocks = 264;

/// Step 3 for a full reduction (matchReductionNest): instead of one thread,
/// thread t of T reduces elements t, t + T, ... (consecutive threads read
/// consecutive elements) in a register; each block folds its threads'
/// values as a tree in shared memory into blockPartials[block] (a new
/// scratch buffer), and one thread combines the accumulator with those in
/// order. Deterministic; float sums still accumulate in f64.
LogicalResult cooperativeReductionOf(ReductionNest &r, func::FuncOp fn,
                                     std::vector<int64_t> &scratch,
                                     SmallVectorImpl<Operation *> &last) {
  scf::ForOp outer = r.nest.front();
  Location loc = outer.getLoc();
  int64_t blocks =
      std::min(kCooperativeMaxBlocks,
               (r.elements + 4 * kBlockThreads - 1) / (4 * kBlockThreads));
  int64_t threads = blocks * kBlockThreads;
  Type accType = r.load.getResult().getType();
  FailureOr<Value> blockPartials =
      addScratch(fn, MemRefType::get({blocks}, accType), loc, scratch);
  if (failed(blockPartials))
    return failure();
  Value acc = r.store.getMemRef();

  OpBuilder b(outer);
  Type indexType = b.getIndexType();
  auto c = [&](int64_t v) { return indexConst(b, loc, indexType, v); };
  // The launch: each block's value.
  gpu::LaunchOp first = createLaunch(b, outer, blocks, kBlockThreads);
  Value tid = first.getThreadIds().x;
  Value t = arith::AddIOp::create(
      b, loc,
      arith::MulIOp::create(b, loc, first.getBlockIds().x, c(kBlockThreads)),
      tid);
  Value identity = arith::ConstantOp::create(b, loc, r.identity);
  auto strided = scf::ForOp::create(
      b, loc, t, c(r.elements), c(threads), ValueRange{identity},
      [&](OpBuilder &nb, Location nl, Value e, ValueRange iter) {
        IRMapping map;
        scf::YieldOp::create(nb, nl, combinedAt(nb, nl, r, e, iter[0], map));
      });
  Value shared = addSharedBuffer(first, accType, kBlockThreads);
  foldBlock(b, loc, r, shared, c(0), tid, kBlockThreads, kBlockThreads,
            strided.getResult(0));
  Value isFirst =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tid, c(0));
  auto guard = scf::IfOp::create(b, loc, isFirst, /*withElseRegion=*/false);
  OpBuilder gb = guard.getThenBodyBuilder();
  memref::StoreOp::create(
      gb, loc,
      memref::LoadOp::create(gb, loc, shared,
                             ValueRange{indexConst(gb, loc, indexType, 0)}),
      *blockPartials, ValueRange{first.getBlockIds().x});
  // Last, one thread folds them into the accumulator, in order: top-level
  // ops the caller runs in a one-thread launch with the serial work around
  // them (the accumulator's fill before, the rounding into the result
  // after).
  b.setInsertionPoint(outer);
  Operation *before = outer->getPrevNode();
  Value init = memref::LoadOp::create(b, loc, acc, ValueRange{});
  Value folded =
      foldInOrder(b, loc, r, init, blocks,
                  [&](OpBuilder &fb, Location fl, Value k) -> Value {
                    return memref::LoadOp::create(fb, fl, *blockPartials, k);
                  });
  memref::StoreOp::create(b, loc, folded, acc, ValueRange{});
  for (Operation *op = before->getNextNode(); op != outer.getOperation();
       op = op->getNextNode())
    last.push_back(op);
  outer.erase();
  return success();
}

/// Partial reductions are split when the reduced extent has at least this
/// many elements and the outputs are fewer than kSplitThreads threads.
constexpr int64_t kSplitMinReduced = 64;
/// Threads a split reduction's first launch aims at (about half of what an
/// H200's 132 SMs hold resident, 2048 each).
constexpr int64_t kSplitThreads = 131072;
/// Elements each thread of a split reduction's first launch reduces, at
/// least.
constexpr int64_t kSplitMinPerThread = 16;

} // namespace

bool isLargeFullReduction(scf::ForOp loop) {
  std::optional<ReductionNest> r = matchReductionNest(loop);
  return r && r->elements >= kCooperativeMinElements;
}

LogicalResult cooperativeReduction(scf::ForOp loop, func::FuncOp fn,
                                   std::vector<int64_t> &scratch,
                                   StringRef symbol,
                                   SmallVectorImpl<Operation *> &last) {
  std::optional<ReductionNest> r = matchReductionNest(loop);
  if (!r)
    return emitError(loop.getLoc(), symbol)
           << ": internal error: not a full reduction";
  return cooperativeReductionOf(*r, fn, scratch, last);
}

SmallVector<Value> reducedBuffers(scf::ForOp loop) {
  SmallVector<Value> out;
  std::optional<ReductionNest> r = matchReductionNest(loop);
  if (!r)
    return out;
  loop.walk([&](memref::LoadOp load) {
    if (load != r->load)
      out.push_back(load.getMemRef());
  });
  return out;
}

/// Step 3 for a partial reduction (a top-level scf.parallel over the
/// outputs whose body is a reduction nest into `acc[ivs]`): one thread per
/// output leaves most of the GPU idle when the outputs are few (a layer
/// norm's 2048 rows: 8 blocks) and walks a long reduced extent alone. When
/// it pays (kSplit*), `par` becomes two parallel loops:
///   1. over (outputs, chunk c of C): reduce elements c, c + C, ... of the
///      output's reduced extent in a register into partials[output][c];
///   2. over the outputs: combine acc[output] with its C partials in order.
/// Consecutive threads read consecutive addresses: in a row reduction (the
/// innermost reduced index is a load's last) the chunk varies fastest, in
/// a column reduction the output. Deterministic; sums stay f64 as the
/// accumulator is. The partials are a scratch buffer. The new loops take
/// `par`'s place.
///
/// Unsplit (many outputs, or a short extent), each thread still folds its
/// output's elements in a register, from acc[output] and in the nest's
/// order (the same bits), and stores once: in the nest as written the
/// accumulator is loaded and stored through global memory at every element,
/// since nothing tells the GPU compiler that it does not alias the inputs.
LogicalResult splitPartialReduction(scf::ParallelOp par, func::FuncOp fn,
                                    std::vector<int64_t> &scratch) {
  auto ops = par.getBody()->without_terminator();
  if (par.getNumResults() != 0 || !llvm::hasSingleElement(ops))
    return success();
  auto outer = dyn_cast<scf::ForOp>(*ops.begin());
  if (!outer)
    return success();
  std::optional<ReductionNest> r =
      matchReductionNest(outer, par.getInductionVars());
  if (!r)
    return success();
  // Split only with constant bounds, fewer outputs than kSplitThreads and
  // a long enough extent (chunks 1: unsplit).
  SmallVector<int64_t> trips;
  int64_t outputs = 1;
  bool splittable = r->elements >= kSplitMinReduced;
  for (unsigned d = 0; d < par.getNumLoops() && splittable; ++d) {
    std::optional<int64_t> lb = getConstantIntValue(par.getLowerBound()[d]);
    std::optional<int64_t> ub = getConstantIntValue(par.getUpperBound()[d]);
    std::optional<int64_t> st = getConstantIntValue(par.getStep()[d]);
    splittable = lb && ub && st && *st > 0 && *ub > *lb;
    if (splittable) {
      trips.push_back((*ub - *lb + *st - 1) / *st);
      outputs *= trips.back();
      splittable = outputs < kSplitThreads;
    }
  }
  const int64_t chunks = splittable
                             ? std::min(r->elements / kSplitMinPerThread,
                                        (kSplitThreads + outputs - 1) / outputs)
                             : 1;
  Location loc = par.getLoc();
  Value acc = r->store.getMemRef();
  OpBuilder b(par);
  Type indexType = b.getIndexType();
  auto c = [&](int64_t v) { return indexConst(b, loc, indexType, v); };
  if (chunks < 2) {
    scf::ParallelOp::create(
        b, loc, par.getLowerBound(), par.getUpperBound(), par.getStep(),
        [&](OpBuilder &nb, Location nl, ValueRange ivs) {
          IRMapping map;
          map.map(par.getInductionVars(), ivs);
          Value init = memref::LoadOp::create(nb, nl, acc, ivs);
          auto folded = scf::ForOp::create(
              nb, nl, indexConst(nb, nl, indexType, 0),
              indexConst(nb, nl, indexType, r->elements),
              indexConst(nb, nl, indexType, 1), ValueRange{init},
              [&](OpBuilder &lb, Location ll, Value e, ValueRange iter) {
                scf::YieldOp::create(lb, ll,
                                     combinedAt(lb, ll, *r, e, iter[0], map));
              });
          memref::StoreOp::create(nb, nl, folded.getResult(0), acc, ivs);
        });
    par.erase();
    return success();
  }
  const bool rowLike = readsAlongRows(*r);

  Type accType = r->load.getResult().getType();
  SmallVector<int64_t> shape(trips);
  if (rowLike)
    shape.push_back(chunks);
  else
    shape.insert(shape.begin(), chunks);
  FailureOr<Value> scratchPartials =
      addScratch(fn, MemRefType::get(shape, accType), loc, scratch);
  if (failed(scratchPartials))
    return failure();
  Value partials = *scratchPartials;

  // Which of a stage's induction variables is the chunk, and the outputs'.
  const unsigned chunkDim = rowLike ? par.getNumLoops() : 0;
  SmallVector<Value> lbs(par.getLowerBound()), ubs(par.getUpperBound()),
      steps(par.getStep());
  lbs.insert(lbs.begin() + chunkDim, c(0));
  ubs.insert(ubs.begin() + chunkDim, c(chunks));
  steps.insert(steps.begin() + chunkDim, c(1));
  scf::ParallelOp::create(
      b, loc, lbs, ubs, steps, [&](OpBuilder &nb, Location nl, ValueRange ivs) {
        IRMapping map;
        SmallVector<Value> outIvs(ivs);
        Value chunk = outIvs[chunkDim];
        outIvs.erase(outIvs.begin() + chunkDim);
        map.map(par.getInductionVars(), outIvs);
        Value identity = arith::ConstantOp::create(nb, nl, r->identity);
        auto strided = scf::ForOp::create(
            nb, nl, chunk, indexConst(nb, nl, indexType, r->elements),
            indexConst(nb, nl, indexType, chunks), ValueRange{identity},
            [&](OpBuilder &lb, Location ll, Value e, ValueRange iter) {
              scf::YieldOp::create(lb, ll,
                                   combinedAt(lb, ll, *r, e, iter[0], map));
            });
        memref::StoreOp::create(nb, nl, strided.getResult(0), partials, ivs);
      });
  scf::ParallelOp::create(
      b, loc, par.getLowerBound(), par.getUpperBound(), par.getStep(),
      [&](OpBuilder &nb, Location nl, ValueRange ivs) {
        Value init = memref::LoadOp::create(nb, nl, acc, ivs);
        Value folded =
            foldInOrder(nb, nl, *r, init, chunks,
                        [&](OpBuilder &lb, Location ll, Value k) -> Value {
                          SmallVector<Value> at(ivs);
                          at.insert(at.begin() + chunkDim, k);
                          return memref::LoadOp::create(lb, ll, partials, at);
                        });
        memref::StoreOp::create(nb, nl, folded, acc, ivs);
      });
  par.erase();
  return success();
}

} // namespace mlir::omni::cuda
