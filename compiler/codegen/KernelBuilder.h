//===- KernelBuilder.h - fusion regions to linalg kernels -------*- C++ -*-===//
//
// The first step of CPU code generation: an omni.fusion region becomes a
// func.func on tensors whose body is linalg / tensor / arith / math IR, the
// form upstream MLIR bufferizes and lowers to loops and LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_COMPILER_CODEGEN_KERNELBUILDER_H
#define OMNI_COMPILER_CODEGEN_KERNELBUILDER_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <vector>

namespace mlir::omni {
class FusionOp;

/// Builds in `kernels` a public func.func `name` whose arguments are the
/// fusion's inputs and whose results are its results, computing the body
/// with linalg, tensor, arith and math ops. Emits an error on the fusion and
/// fails for an op it cannot lower.
FailureOr<func::FuncOp> buildKernelFunction(FusionOp fusion, ModuleOp kernels,
                                            StringRef name);

/// Whether the fusion is elementwise over one shape: every body op is an
/// Elementwise op (or a splat constant) and every input and result has the
/// same number of elements. Such a kernel can run on any contiguous range
/// of elements, so the runtime splits it over its threads.
bool isFlatElementwise(FusionOp fusion);

/// Builds a kernel for a flat elementwise fusion over 1-D dynamic tensors
/// (`tensor<?xT>` per input and result): one linalg.generic whose body is
/// the composition of the fusion's scalar ops.
FailureOr<func::FuncOp>
buildFlatKernelFunction(FusionOp fusion, ModuleOp kernels, StringRef name);

/// Work per work item of a split kernel, in elements of the kernel's values
/// (flat kernels: elements of every buffer, cpu/CpuCodegen.cpp kFlatChunk):
/// large enough to amortize a call, small enough to spread a layer norm of
/// a few hundred thousand elements over several threads.
constexpr int64_t kMinRowWork = 16384;

/// How a kernel that is not flat elementwise runs as work items [0, grid)
/// (docs/backend.md, "Kernel ABI"): the leading non-unit dimension of every
/// result has `rows` * m rows for some m, and every op of the body computes
/// row block i of its result from row block i of its split operands (or
/// from whole operands: weights, broadcast sources). Work item w computes
/// row blocks [w * rows / grid, (w + 1) * rows / grid) of every split value
/// on static shapes whose leading non-unit dimension is divided by `grid`;
/// each split buffer's pointer advances by `itemBytes` per work item, a
/// whole buffer (itemBytes 0) is read whole by every item. Rows never
/// interact, so every split computes the same bits.
///
/// With `prefix` = k >= 2 the rows are the first k dimensions taken
/// together instead (every split value's shape starts with the same k
/// sizes, `rows` is their product, and no op mixes any of them): a
/// [32, 8, 288, 288] softmax splits into items of [1, 1, r, 288], not into
/// the 32 items of [1, 8, 288, 288] whose intermediates overflow the L2
/// cache. Work item w then has sizes 1 in the first k - 1 dimensions and
/// rows / grid in dimension k - 1.
struct RowSplit {
  int64_t rows = 1;
  int64_t grid = 1;
  int64_t prefix = 0; // 0: the leading non-unit dimension
  /// Per buffer, the fusion's inputs then its results: the type one work
  /// item sees, and the bytes its pointer advances per work item.
  std::vector<RankedTensorType> itemTypes;
  std::vector<int64_t> itemBytes;
};

/// The row split of a fusion that is not flat elementwise, or nullopt when
/// it runs whole: a result without rows (a full reduction), an op that
/// mixes rows (a reduction over them, a transpose that moves them, a slice
/// or concat along them, an iota over them), a value needed both whole and
/// split, or too little work for two items of kMinRowWork (whole values,
/// which every item recomputes, must stay under a quarter of an item).
std::optional<RowSplit> planRowSplit(FusionOp fusion);

/// Builds the kernel of one work item of `split` (planRowSplit's): the
/// fusion's body on the items' types, as buildKernelFunction builds it.
FailureOr<func::FuncOp> buildRowKernelFunction(FusionOp fusion,
                                               const RowSplit &split,
                                               ModuleOp kernels,
                                               StringRef name);

} // namespace mlir::omni

#endif // OMNI_COMPILER_CODEGEN_KERNELBUILDER_H
