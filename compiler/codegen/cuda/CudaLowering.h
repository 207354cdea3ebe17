//===- CudaLowering.h - what the cuda lowering's files share ----*- C++ -*-===//
//
// Internal to compiler/codegen/cuda: the elementwise fusion of step 2
// (CudaLinalgFusion.cpp) and step 3 of the lowering (CudaCodegen.cpp runs
// both): the launches (CudaLaunches.cpp), the reductions' mapping to many
// threads (CudaReductions.cpp) and the fusion of loops over one space
// (CudaLoopFusion.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_COMPILER_CODEGEN_CUDA_CUDALOWERING_H
#define OMNI_COMPILER_CODEGEN_CUDA_CUDALOWERING_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"

#include <cstdint>
#include <vector>

namespace mlir::omni::cuda {

/// Pairs of a kernel function's argument numbers (an input, then a result)
/// that the memory plan may make one buffer: the result written over the
/// input by rule (a) of docs/fusion.md, whole buffer over whole buffer. Any
/// other two arguments never share a byte.
using SameBuffers = ArrayRef<std::pair<unsigned, unsigned>>;

/// Step 2, first: linalg-fuse-elementwise-ops over every kernel of
/// `kernels`, with a producer of several readers recomputed in each where
/// that moves fewer bytes than a scratch buffer. `overwritten`: the kernel
/// arguments some result may be written over (never re-read).
LogicalResult fuseElementwise(ModuleOp kernels,
                              const DenseSet<Value> &overwritten);

/// Step 2, between two elementwise fusions: a slice of a parallel
/// linalg.generic that only slices read becomes the generic over the
/// slice, reading slices of its inputs.
void sliceProducers(ModuleOp kernels, const DenseSet<Value> &overwritten);

/// Threads per block of a parallel launch: enough to hide memory latency
/// with several resident blocks per SM, few enough that small tensors still
/// spread over many SMs.
constexpr int64_t kBlockThreads = 256;

/// A loop-free parallel loop of at least kCoarsenMinIterations iterations,
/// a multiple of kCoarsen, runs kCoarsen of them per thread (iterations
/// t, t + n / kCoarsen, ...): a thread with one 4-byte load in flight per
/// buffer keeps too little memory traffic in flight to approach an H200's
/// bandwidth (about 22 KB per SM at 4.8 TB/s and 600 ns; 2048 resident
/// threads hold 8 KB). With 2^20 iterations the launch still fills every
/// SM of an H200 with 2048 threads.
constexpr int64_t kCoarsen = 4;
constexpr int64_t kCoarsenMinIterations = int64_t{1} << 20;

/// The largest grid.x a launch may have.
constexpr int64_t kMaxGridX = 2147483647;

/// `linear` as the indices of the row-major space `trips` (the last
/// fastest), in `linear`'s type (index, or i32 where the space fits: its
/// divisions are much cheaper on a GPU).
SmallVector<Value> delinearize(OpBuilder &b, Location loc, Value linear,
                               ArrayRef<int64_t> trips);

/// Bytes of one element in memory (i1 takes one byte, as on the cpu).
int64_t elementBytes(Type t);

/// A new scratch buffer of `type` for `fn`: a trailing argument whose size
/// in bytes is appended to `scratch` (the runtime allocates it).
FailureOr<Value> addScratch(func::FuncOp fn, MemRefType type, Location loc,
                            std::vector<int64_t> &scratch);

/// An integer or index constant of type `t`.
Value indexConst(OpBuilder &b, Location loc, Type t, int64_t v);

/// Creates a gpu.launch of grid x block threads before `at`, with an empty
/// body ending in gpu.terminator; `b` is left before the terminator.
gpu::LaunchOp createLaunch(OpBuilder &b, Operation *at, int64_t grid,
                           int64_t block);

/// `par` (constant bounds, no results) becomes a gpu.launch whose thread
/// `blockIdx.x * block + threadIdx.x` runs the iteration with that
/// row-major linear index; `symbol` names the kernel in errors.
/// A loop run kCoarsen iterations per thread issues the loads of all of
/// them first where no store may write their buffers (`mayOverlap(written,
/// read)`; without it, nothing moves).
LogicalResult
parallelToLaunch(scf::ParallelOp par, StringRef symbol,
                 function_ref<bool(Value, Value)> mayOverlap = nullptr);

/// In the straight-line `block`: loads of buffers no store of the block may
/// write, and pure ops, move up to just after their operands.
void loadsFirst(Block *block, function_ref<bool(Value, Value)> mayOverlap);

/// Step 3 for one kernel function (loops already parallel,
/// CudaLaunches.cpp): norms and softmaxes as row launches (`rowLaunches`),
/// partial reductions split where that pays, loops over one space fused,
/// then its top-level ops become launches, independent neighbours merged
/// (`mergeLaunches`); `scratch` receives the scratch buffers added.
/// `sameBuffers`: the kernel's in-place pairs (KernelDef::overwrites).
LogicalResult mapToLaunches(func::FuncOp fn, StringRef symbol,
                            std::vector<int64_t> &scratch,
                            SameBuffers sameBuffers, bool rowLaunches = true,
                            bool mergeLaunches = true);

/// A reduction nest: a perfect nest of scf.for loops with constant bounds
/// whose innermost body loads an accumulator element once, combines it with
/// a value that does not depend on it by an associative, commutative op
/// with an identity, and stores it back to the same element; nothing else
/// in the body has side effects but loads. A full reduction's accumulator
/// is 0-d; a partial one's element is indexed by the enclosing parallel
/// loop's induction variables.
struct ReductionNest {
  SmallVector<scf::ForOp> nest;
  SmallVector<int64_t> lower, trip, step;
  int64_t elements = 1;
  memref::LoadOp load;
  memref::StoreOp store;
  Operation *combine = nullptr;
  TypedAttr identity;
};

/// The reduction nest rooted at `outer` whose accumulator element is
/// `acc[accIndices]` (none: a 0-d accumulator), or nullopt.
std::optional<ReductionNest> matchReductionNest(scf::ForOp outer,
                                                ValueRange accIndices = {});

/// In a loop over the elements of `r`'s nest (`e`, row-major), the value
/// of one element combined with `acc`: `e` delinearized into the nest's
/// induction variables, the innermost body cloned (without the
/// accumulator's load and store, `acc` standing for the loaded value).
/// `map` receives the clones.
Value combinedAt(OpBuilder &nb, Location nl, ReductionNest &r, Value e,
                 Value acc, IRMapping &map);

/// `acc` combined with `other` by `r`'s combining op, built at `b`.
Value combineWith(OpBuilder &b, ReductionNest &r, Value acc, Value other);

/// A new shared (workgroup) buffer of `count` elements of `type` for the
/// blocks of `launch`.
Value addSharedBuffer(gpu::LaunchOp launch, Type type, int64_t count);

/// Threads in a warp.
constexpr int64_t kWarpThreads = 32;

/// At `b`, the top level of the body of a launch of `threads` threads a
/// block: what each of `span` consecutive threads (a power of two,
/// starting at a multiple of it) stored before, the others of them see
/// after. Within a warp (span <= 32) a warp barrier (bar.warp.sync, which
/// orders memory among its threads), else a block barrier.
void syncLanes(OpBuilder &b, Location loc, int64_t span, int64_t threads);

/// At `b`, the top level of a launch's body (`threads` a block): lane
/// `lane` of a group of `lanes` threads (a power of two, the group's
/// first thread a multiple of it) stores `value` into the block's
/// `shared` buffer at base + lane, then the group folds its values as a
/// tree by `r`'s combining op, syncLanes after each step but the last
/// (steps among the first 32 lanes need only a warp's barrier).
/// shared[base] holds the group's value for lane 0 (the others need a
/// barrier first).
void foldBlock(OpBuilder &b, Location loc, ReductionNest &r, Value shared,
               Value base, Value lane, int64_t lanes, int64_t threads,
               Value value);

/// Whether consecutive elements of `r`'s nest are consecutive in memory:
/// the innermost induction variable is the last index of a load (a row
/// sum; a column sum reads with the outputs' stride).
bool readsAlongRows(ReductionNest &r);

/// Whether `loop` is a full reduction to one element large enough to run
/// on many blocks (cooperativeReduction).
bool isLargeFullReduction(scf::ForOp loop);

/// A full reduction (isLargeFullReduction): thread t of T reduces elements
/// t, t + T, ... in a register, each block folds its threads' values in
/// shared memory into a scratch blockPartials[block] (one launch), and one
/// thread combines the accumulator with those in order: the top-level ops
/// of that last step are appended to `last`, for the caller's one-thread
/// launch. Deterministic; float sums still accumulate in f64.
LogicalResult cooperativeReduction(scf::ForOp loop, func::FuncOp fn,
                                   std::vector<int64_t> &scratch,
                                   StringRef symbol,
                                   SmallVectorImpl<Operation *> &last);

/// The buffers a full reduction's elements come from (its loads but the
/// accumulator's): what the launches of cooperativeReduction read.
SmallVector<Value> reducedBuffers(scf::ForOp loop);

/// A partial reduction (a top-level scf.parallel over the outputs whose
/// body is a reduction nest into `acc[ivs]`) with few outputs or a long
/// reduced extent becomes two parallel loops: chunks of each output into
/// scratch partials, then one thread per output folding its chunks in
/// order. Unsplit, it still folds in a register. The new loops take
/// `par`'s place.
LogicalResult splitPartialReduction(scf::ParallelOp par, func::FuncOp fn,
                                    std::vector<int64_t> &scratch);

/// Fuses top-level parallel loops of `fn` over the same iteration space
/// where no iteration can see a difference (CudaLoopFusion.cpp): a
/// reduction's fill, fold and rounding loops become one launch. Arguments
/// from `firstScratch` on are the kernel's scratch buffers; of the others,
/// only the pairs of `sameBuffers` may be one buffer.
void fuseParallelLoops(func::FuncOp fn, unsigned firstScratch,
                       SameBuffers sameBuffers);

/// Whether `a` and `b` (in either order), whose first `rows` induction
/// variables range over one space, may run row by row: row r of one, then
/// row r of the other, rows in any order. Every element one writes that the
/// other touches is indexed in both by those variables, directly, each
/// once, at the same positions of the same memref (by the rule of
/// fuseParallelLoops).
bool rowLocal(func::FuncOp fn, unsigned firstScratch, SameBuffers sameBuffers,
              scf::ParallelOp a, scf::ParallelOp b, unsigned rows);

/// Whether no element that `a` or `b` writes the other touches (by the
/// rule of fuseParallelLoops), and they only load and store.
bool independentOps(func::FuncOp fn, unsigned firstScratch,
                    SameBuffers sameBuffers, Operation *a, Operation *b);

/// Step 3, first: runs of top-level parallel loops over one leading row
/// space with a reduction over rows of 32 to kRowMaxElements elements (a
/// layer norm, a softmax) become one launch of one block per row
/// (CudaRowLaunches.cpp): its threads stride over the row, each reduction
/// folded through shared memory, barriers between the loops.
void rowLaunches(func::FuncOp fn, unsigned firstScratch,
                 SameBuffers sameBuffers);

/// After fuseParallelLoops: a scratch buffer (argument `firstScratch` on)
/// that one top-level parallel loop alone uses, each iteration storing its
/// own element before reading it back, becomes the values stored: no
/// memory pass, and the argument and its entry of `scratch` go.
void scratchToRegisters(func::FuncOp fn, unsigned firstScratch,
                        std::vector<int64_t> &scratch);

/// The memrefs `op` (nested ops included) stores into, or failure when it
/// has a side effect other than memref loads and stores (the rule
/// fuseParallelLoops reads a loop's accesses by).
FailureOr<SmallVector<Value>> storedBuffers(Operation *op);

/// Whether memrefs `a` and `b` of `fn` may share bytes, by the rule above:
/// views of one buffer may; scratch buffers overlap nothing else; other
/// arguments only as a pair of `sameBuffers`.
bool buffersMayOverlap(func::FuncOp fn, unsigned firstScratch,
                       SameBuffers sameBuffers, Value a, Value b);

} // namespace mlir::omni::cuda

#endif // OMNI_COMPILER_CODEGEN_CUDA_CUDALOWERING_H
