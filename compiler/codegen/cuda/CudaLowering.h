//===- CudaLowering.h - what the cuda lowering's files share ----*- C++ -*-===//
//
// Internal to compiler/codegen/cuda: the launch helpers of step 3 of the
// lowering (CudaCodegen.cpp) and the reductions' mapping to many threads
// (CudaReductions.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_COMPILER_CODEGEN_CUDA_CUDALOWERING_H
#define OMNI_COMPILER_CODEGEN_CUDA_CUDALOWERING_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"

#include <cstdint>
#include <vector>

namespace mlir::omni::cuda {

/// Threads per block of a parallel launch: enough to hide memory latency
/// with several resident blocks per SM, few enough that small tensors still
/// spread over many SMs.
constexpr int64_t kBlockThreads = 256;

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
LogicalResult parallelToLaunch(scf::ParallelOp par, StringRef symbol);

/// Whether `loop` is a full reduction to one element large enough to run
/// on many blocks (cooperativeReduction).
bool isLargeFullReduction(scf::ForOp loop);

/// A full reduction (isLargeFullReduction): thread t of T reduces elements
/// t, t + T, ... in a register into a scratch partials[t]; with several
/// blocks, thread k then folds block k's partials in order, and one thread
/// combines the accumulator with those (or with the T partials of a single
/// block) in order. Deterministic; float sums still accumulate in f64.
LogicalResult cooperativeReduction(scf::ForOp loop, func::FuncOp fn,
                                   std::vector<int64_t> &scratch,
                                   StringRef symbol);

/// A partial reduction (a top-level scf.parallel over the outputs whose
/// body is a reduction nest into `acc[ivs]`) with few outputs or a long
/// reduced extent becomes two parallel loops: chunks of each output into
/// scratch partials, then one thread per output folding its chunks in
/// order. `parts` receives the loops to map to launches (`par` itself when
/// it is not split).
LogicalResult splitPartialReduction(scf::ParallelOp par, func::FuncOp fn,
                                    std::vector<int64_t> &scratch,
                                    SmallVector<scf::ParallelOp> &parts);

} // namespace mlir::omni::cuda

#endif // OMNI_COMPILER_CODEGEN_CUDA_CUDALOWERING_H
