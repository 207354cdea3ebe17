//===- CudaLaunches.cpp - parallel loops and serial work to gpu.launch ----===//
//
// Step 3 of the cuda lowering (CudaCodegen.cpp) for one kernel function
// whose loops are parallel: partial reductions split where that pays
// (CudaReductions.cpp), loops over one space fused (CudaLoopFusion.cpp),
// then each top-level parallel loop becomes a gpu.launch over its iteration
// space collapsed to 1-D (large loop-free ones 4 iterations per thread,
// their loads first), large full reductions many-block launches, and the
// serial work between them one-thread launches; every value a launch uses
// from outside is a function argument or cloned into it.
// docs/backend-cuda.md, "Lowering" and "Launch configuration".
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/cuda/CudaLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SetVector.h"

#include <functional>
#include <limits>

using namespace mlir;

namespace mlir::omni::cuda {
SmallVector<Value> delinearize(OpBuilder &b, Location loc, Value linear,
                               ArrayRef<int64_t> trips) {
  Type type = linear.getType();
  SmallVector<Value> ivs(trips.size());
  Value rest = linear;
  for (int d = static_cast<int>(trips.size()) - 1; d >= 0; --d) {
    if (trips[d] == 1) {
      ivs[d] = indexConst(b, loc, type, 0);
    } else if (d == 0) {
      ivs[d] = rest;
    } else {
      Value t = indexConst(b, loc, type, trips[d]);
      ivs[d] = arith::RemUIOp::create(b, loc, rest, t);
      rest = arith::DivUIOp::create(b, loc, rest, t);
    }
  }
  return ivs;
}

/// Creates a gpu.launch of grid x block threads before `at`, with an empty
/// body ending in gpu.terminator; `b` is left before the terminator.
gpu::LaunchOp createLaunch(OpBuilder &b, Operation *at, int64_t grid,
                           int64_t block) {
  Location loc = at->getLoc();
  b.setInsertionPoint(at);
  Type index = b.getIndexType();
  Value one = indexConst(b, loc, index, 1);
  auto launch =
      gpu::LaunchOp::create(b, loc, indexConst(b, loc, index, grid), one, one,
                            indexConst(b, loc, index, block), one, one);
  Block &body = launch.getBody().front();
  b.setInsertionPointToEnd(&body);
  auto terminator = gpu::TerminatorOp::create(b, loc);
  b.setInsertionPoint(terminator);
  return launch;
}

/// Step 3: `par` (constant bounds, no results) becomes a gpu.launch whose
/// thread `blockIdx.x * block + threadIdx.x` runs the iteration with that
/// row-major linear index.
LogicalResult parallelToLaunch(scf::ParallelOp par, StringRef symbol,
                               function_ref<bool(Value, Value)> mayOverlap) {
  Location loc = par.getLoc();
  if (par.getNumResults() != 0)
    return emitError(loc, symbol)
           << ": a parallel loop with reductions cannot be mapped to cuda";
  unsigned rank = par.getNumLoops();
  SmallVector<int64_t> lower(rank), trip(rank), step(rank);
  int64_t n = 1;
  for (unsigned d = 0; d < rank; ++d) {
    std::optional<int64_t> lb = getConstantIntValue(par.getLowerBound()[d]);
    std::optional<int64_t> ub = getConstantIntValue(par.getUpperBound()[d]);
    std::optional<int64_t> st = getConstantIntValue(par.getStep()[d]);
    if (!lb || !ub || !st || *st <= 0)
      return emitError(loc, symbol)
             << ": a parallel loop without constant bounds cannot be mapped "
                "to cuda";
    lower[d] = *lb;
    step[d] = *st;
    trip[d] = *ub > *lb ? (*ub - *lb + *st - 1) / *st : 0;
    if (trip[d] != 0 && n > (int64_t{1} << 50) / trip[d])
      return emitError(loc, symbol)
             << ": a parallel loop of more than 2^50 iterations";
    n *= trip[d];
  }
  if (n == 0) {
    par.erase();
    return success();
  }
  // Large elementwise loops: kCoarsen iterations per thread, n / kCoarsen
  // apart (each load still coalesced), so that a thread has several
  // independent loads in flight.
  const bool loopFree =
      !par.getBody()
           ->walk([](LoopLikeOpInterface) { return WalkResult::interrupt(); })
           .wasInterrupted();
  const int64_t per =
      loopFree && n >= kCoarsenMinIterations && n % kCoarsen == 0 ? kCoarsen
                                                                  : 1;
  const int64_t threads = n / per;
  int64_t block =
      std::min(kBlockThreads, static_cast<int64_t>(llvm::alignTo(threads, 32)));
  int64_t grid = (threads + block - 1) / block;
  if (grid > kMaxGridX)
    return emitError(loc, symbol)
           << ": " << n << " threads need more than 2^31-1 blocks";
  OpBuilder b(par);
  gpu::LaunchOp launch = createLaunch(b, par, grid, block);
  // 32-bit index arithmetic when it cannot overflow: the delinearization's
  // divisions are much cheaper.
  bool narrow =
      std::max(grid * block, n) <= std::numeric_limits<int32_t>::max();
  Type index = b.getIndexType();
  Type it = narrow ? Type(b.getI32Type()) : index;
  auto toIt = [&](Value v) -> Value {
    return narrow ? Value(arith::IndexCastUIOp::create(b, loc, it, v)) : v;
  };
  auto toIndex = [&](Value v) -> Value {
    return narrow ? Value(arith::IndexCastUIOp::create(b, loc, index, v)) : v;
  };
  Value id = arith::AddIOp::create(
      b, loc,
      arith::MulIOp::create(b, loc, toIt(launch.getBlockIds().x),
                            indexConst(b, loc, it, block)),
      toIt(launch.getThreadIds().x));
  if (grid * block != threads) {
    Value inRange = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, id,
                                          indexConst(b, loc, it, threads));
    auto guard = scf::IfOp::create(b, loc, inRange, /*withElseRegion=*/false);
    b.setInsertionPoint(guard.thenBlock()->getTerminator());
  }
  for (int64_t k = 0; k < per; ++k) {
    Value rest = k == 0 ? id
                        : Value(arith::AddIOp::create(
                              b, loc, id, indexConst(b, loc, it, k * threads)));
    SmallVector<Value> ivs = delinearize(b, loc, rest, trip);
    for (unsigned d = 0; d < rank; ++d) {
      Value iv = toIndex(ivs[d]);
      if (step[d] != 1)
        iv = arith::MulIOp::create(b, loc, iv,
                                   indexConst(b, loc, index, step[d]));
      if (lower[d] != 0)
        iv = arith::AddIOp::create(b, loc, iv,
                                   indexConst(b, loc, index, lower[d]));
      ivs[d] = iv;
    }
    IRMapping map;
    map.map(par.getInductionVars(), ivs);
    for (Operation &op : par.getBody()->without_terminator())
      b.clone(op, map);
  }
  if (per > 1 && mayOverlap)
    loadsFirst(b.getInsertionBlock(), mayOverlap);
  par.erase();
  return success();
}

/// In a straight-line block, every load of a buffer that no store of the
/// block may write, and all pure ops, move up to just after their operands:
/// the loads of all of a thread's iterations issue before the first store.
/// Stores and other ops keep their order. A block with another kind of
/// side effect stays as it is.
void loadsFirst(Block *block, function_ref<bool(Value, Value)> mayOverlap) {
  SmallVector<Value> written;
  for (Operation &op : *block) {
    FailureOr<SmallVector<Value>> stored = storedBuffers(&op);
    // Another kind of side effect: nothing moves.
    if (failed(stored))
      return;
    llvm::append_range(written, *stored);
  }
  auto floats = [&](Operation &op) {
    if (auto load = dyn_cast<memref::LoadOp>(op))
      return llvm::none_of(
          written, [&](Value w) { return mayOverlap(w, load.getMemRef()); });
    return op.getNumRegions() == 0 && isMemoryEffectFree(&op);
  };
  for (Operation &op :
       llvm::make_early_inc_range(block->without_terminator())) {
    if (!floats(op))
      continue;
    Operation *after = nullptr;
    for (Value v : op.getOperands())
      if (Operation *def = v.getDefiningOp();
          def && def->getBlock() == block &&
          (!after || after->isBeforeInBlock(def)))
        after = def;
    if (!after)
      op.moveBefore(block, block->begin());
    else if (after->getNextNode() != &op)
      op.moveAfter(after);
  }
}

namespace {

/// Step 3, sinking: every value `launch` uses from outside is a function
/// argument or is recomputed inside by cloning its side-effect-free
/// definition (and theirs).
LogicalResult sinkIntoLaunch(gpu::LaunchOp launch, func::FuncOp fn,
                             const llvm::DenseSet<Operation *> &sinkable,
                             StringRef symbol) {
  llvm::SetVector<Value> above;
  getUsedValuesDefinedAbove(launch.getBody(), above);
  OpBuilder b = OpBuilder::atBlockBegin(&launch.getBody().front());
  IRMapping map;
  std::function<LogicalResult(Value)> sink = [&](Value v) -> LogicalResult {
    if (map.contains(v))
      return success();
    if (auto arg = dyn_cast<BlockArgument>(v))
      return success(arg.getOwner() == &fn.front());
    Operation *def = v.getDefiningOp();
    if (!sinkable.contains(def))
      return failure();
    for (Value operand : def->getOperands())
      if (failed(sink(operand)))
        return failure();
    b.clone(*def, map);
    return success();
  };
  for (Value v : above)
    if (failed(sink(v)))
      return emitError(v.getLoc(), symbol)
             << ": a value computed in one cuda launch is used by another";
  for (Value v : above)
    if (map.contains(v))
      v.replaceUsesWithIf(map.lookup(v), [&](OpOperand &use) {
        return launch->isProperAncestor(use.getOwner());
      });
  return success();
}

/// Whether the top-level `ops` may run after launches that read the
/// buffers `read` (and write only buffers of their own): they only load,
/// store and compute, and store into nothing that overlaps `read`.
bool canWaitPast(ArrayRef<Operation *> ops, ArrayRef<Value> read,
                 function_ref<bool(Value, Value)> mayOverlap) {
  return llvm::all_of(ops, [&](Operation *op) {
    FailureOr<SmallVector<Value>> stored = storedBuffers(op);
    return succeeded(stored) && llvm::none_of(*stored, [&](Value w) {
             return llvm::any_of(read,
                                 [&](Value r) { return mayOverlap(w, r); });
           });
  });
}

/// A launch's 1-D sizes (grid, block), or nullopt.
std::optional<std::pair<int64_t, int64_t>> launchSizes(gpu::LaunchOp launch) {
  std::optional<int64_t> grid = getConstantIntValue(launch.getGridSizeX());
  std::optional<int64_t> block = getConstantIntValue(launch.getBlockSizeX());
  auto one = [](Value v) { return getConstantIntValue(v) == int64_t{1}; };
  if (!grid || !block || !one(launch.getGridSizeY()) ||
      !one(launch.getGridSizeZ()) || !one(launch.getBlockSizeY()) ||
      !one(launch.getBlockSizeZ()))
    return std::nullopt;
  return std::pair(*grid, *block);
}

/// Whether `launch` may share a launch with another: its threads use no
/// shared memory and wait at no barrier, so they need not be all of a
/// block.
bool alone(gpu::LaunchOp launch) {
  return launch.getWorkgroupAttributions().empty() &&
         launch.getPrivateAttributions().empty() &&
         !launch.getBody()
              .walk([](gpu::BarrierOp) { return WalkResult::interrupt(); })
              .wasInterrupted();
}

/// Clones `launch`'s body at `b` as block `block` (of `grid`) and thread
/// `thread` (of `threads`) would run it, in a launch of `wide` >= `threads`
/// threads a block: threads from `threads` on skip it.
void cloneBody(OpBuilder &b, gpu::LaunchOp launch, Value block, Value thread,
               int64_t grid, int64_t threads, int64_t wide) {
  Location loc = launch.getLoc();
  Type index = b.getIndexType();
  OpBuilder::InsertionGuard keep(b);
  if (threads < wide) {
    Value inside =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, thread,
                              indexConst(b, loc, index, threads));
    auto guard = scf::IfOp::create(b, loc, inside, /*withElseRegion=*/false);
    b.setInsertionPoint(guard.thenBlock()->getTerminator());
  }
  Value zero = indexConst(b, loc, index, 0), one = indexConst(b, loc, index, 1);
  IRMapping map;
  auto bind = [&](gpu::KernelDim3 dims, Value x, Value rest) {
    map.map(dims.x, x);
    map.map(dims.y, rest);
    map.map(dims.z, rest);
  };
  bind(launch.getBlockIds(), block, zero);
  bind(launch.getThreadIds(), thread, zero);
  bind(launch.getGridSize(), indexConst(b, loc, index, grid), one);
  bind(launch.getBlockSize(), indexConst(b, loc, index, threads), one);
  for (Operation &op : launch.getBody().front().without_terminator())
    b.clone(op, map);
}

/// Adjacent launches (pure ops between them) that `independent` says touch
/// no element the other writes become one: the blocks of the first, then
/// those of the second, each block running its launch's body. A concat's
/// parts, a kernel's results of different shapes: one launch's latency
/// instead of several.
void mergeIndependentLaunches(
    func::FuncOp fn,
    function_ref<bool(gpu::LaunchOp, gpu::LaunchOp)> independent) {
  gpu::LaunchOp current;
  for (Operation &op : llvm::make_early_inc_range(fn.front())) {
    auto launch = dyn_cast<gpu::LaunchOp>(op);
    if (!launch) {
      if (op.getNumRegions() != 0 || !isMemoryEffectFree(&op))
        current = nullptr;
      continue;
    }
    std::optional<std::pair<int64_t, int64_t>> a =
        current ? launchSizes(current) : std::nullopt;
    std::optional<std::pair<int64_t, int64_t>> b = launchSizes(launch);
    if (!a || !b || !alone(current) || !alone(launch) ||
        a->first + b->first > kMaxGridX || !independent(current, launch)) {
      current = launch;
      continue;
    }
    const int64_t wide = std::max(a->second, b->second);
    OpBuilder builder(fn.getContext());
    gpu::LaunchOp merged =
        createLaunch(builder, launch, a->first + b->first, wide);
    Location loc = launch.getLoc();
    Type index = builder.getIndexType();
    Value block = merged.getBlockIds().x, thread = merged.getThreadIds().x;
    Value firstPart =
        arith::CmpIOp::create(builder, loc, arith::CmpIPredicate::ult, block,
                              indexConst(builder, loc, index, a->first));
    auto parts = scf::IfOp::create(builder, loc, firstPart,
                                   /*withElseRegion=*/true);
    OpBuilder then = parts.getThenBodyBuilder();
    cloneBody(then, current, block, thread, a->first, a->second, wide);
    OpBuilder other = parts.getElseBodyBuilder();
    Value rest = arith::SubIOp::create(other, loc, block,
                                       indexConst(other, loc, index, a->first));
    cloneBody(other, launch, rest, thread, b->first, b->second, wide);
    current.erase();
    launch.erase();
    current = merged;
  }
}

} // namespace

LogicalResult mapToLaunches(func::FuncOp fn, StringRef symbol,
                            std::vector<int64_t> &scratch,
                            SameBuffers sameBuffers, bool rows, bool merge) {
  Block &body = fn.front();
  if (rows)
    rowLaunches(fn, fn.getNumArguments() - scratch.size(), sameBuffers);
  for (auto par : llvm::to_vector(body.getOps<scf::ParallelOp>()))
    if (failed(splitPartialReduction(par, fn, scratch)))
      return failure();
  fuseParallelLoops(fn, fn.getNumArguments() - scratch.size(), sameBuffers);
  scratchToRegisters(fn, fn.getNumArguments() - scratch.size(), scratch);
  // Scratch buffers are the trailing arguments, more as reductions add them.
  auto mayOverlap = [&](Value x, Value y) {
    return buffersMayOverlap(fn, fn.getNumArguments() - scratch.size(),
                             sameBuffers, x, y);
  };
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    ops.push_back(&op);
  llvm::DenseSet<Operation *> sinkable;
  SmallVector<Operation *> serial;
  OpBuilder b(fn.getContext());
  // The launch goes where the last of them is: the first ones may have
  // been kept back past a full reduction's launches (below).
  auto flushSerial = [&] {
    if (serial.empty())
      return;
    createLaunch(b, serial.back(), 1, 1);
    Operation *terminator = b.getInsertionBlock()->getTerminator();
    for (Operation *op : serial)
      op->moveBefore(terminator);
    serial.clear();
  };
  for (Operation *op : ops) {
    if (isa<gpu::LaunchOp>(op)) {
      flushSerial();
      continue;
    }
    if (auto par = dyn_cast<scf::ParallelOp>(op)) {
      flushSerial();
      if (failed(parallelToLaunch(par, symbol, mayOverlap)))
        return failure();
      continue;
    }
    if (auto loop = dyn_cast<scf::ForOp>(op)) {
      if (isLargeFullReduction(loop)) {
        // The serial work before it (the accumulator's fill) joins the
        // reduction's last one-thread step when the reduction's launches
        // read nothing it writes.
        if (!canWaitPast(serial, reducedBuffers(loop), mayOverlap))
          flushSerial();
        SmallVector<Operation *> last;
        if (failed(cooperativeReduction(loop, fn, scratch, symbol, last)))
          return failure();
        serial.append(last.begin(), last.end());
        continue;
      }
    }
    bool pure = op->getNumRegions() == 0 && isMemoryEffectFree(op) &&
                llvm::all_of(op->getOperands(), [&](Value v) {
                  Operation *def = v.getDefiningOp();
                  return !def || sinkable.contains(def);
                });
    if (pure) {
      sinkable.insert(op);
      continue;
    }
    serial.push_back(op);
  }
  flushSerial();
  SmallVector<gpu::LaunchOp> launches(body.getOps<gpu::LaunchOp>());
  for (gpu::LaunchOp launch : launches)
    if (failed(sinkIntoLaunch(launch, fn, sinkable, symbol)))
      return failure();
  if (merge)
    mergeIndependentLaunches(fn, [&](gpu::LaunchOp a, gpu::LaunchOp b) {
      return independentOps(fn, fn.getNumArguments() - scratch.size(),
                            sameBuffers, a, b);
    });
  // The host side keeps only the launches (and their size constants).
  for (Operation *op : llvm::reverse(ops))
    if (sinkable.contains(op) && op->use_empty())
      op->erase();
  return success();
}

} // namespace mlir::omni::cuda
