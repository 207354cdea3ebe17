//===- KernelSet.h - the distinct kernels of a program ----------*- C++ -*-===//
//
// The target-neutral half of code generation: every omni.fusion of a
// program becomes a func.func on tensors (KernelBuilder.h) in a separate
// kernel module, and identical fusions (every transformer block, every
// unrolled step) share one kernel. Each distinct kernel records its buffer
// signature, whether it is flat elementwise and, for a target that asks,
// how its rows split into work items (the cpu target), which is what a
// target needs to choose how it is launched. Targets (cpu/, cuda/) lower the
// kernel module in place.
//
// Ownership: a KernelSet owns its kernel module (in the program's context);
// `kernelOf` points at the program's fusions.
// Thread safety: none (one MLIRContext).
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_COMPILER_CODEGEN_KERNELSET_H
#define OMNI_COMPILER_CODEGEN_KERNELSET_H

#include "compiler/codegen/KernelBuilder.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/DenseMap.h"

#include <string>
#include <vector>

namespace mlir::omni {

/// One distinct kernel, before target lowering.
struct KernelDef {
  /// The symbol the target exports ("omni_kernel_<k>"); its body is the
  /// kernel module's func.func `<symbol>_impl`.
  std::string symbol;
  /// The fusion's inputs and results, in order.
  std::vector<RankedTensorType> operands, results;
  /// Elementwise over one shape (isFlatElementwise): the body takes 1-D
  /// dynamic tensors and may run on any contiguous range of elements.
  bool flat = false;
  /// Elements of every buffer of a flat kernel (of its first result).
  int64_t elements = 0;
  /// A kernel that is not flat: its work items (KernelBuilder.h RowSplit);
  /// grid 1 and no item types when it runs whole (or the target does not
  /// split rows).
  RowSplit rows;
  /// The in-place patterns of the fusions that use this kernel (the memory
  /// plan's `omni.overwrites`: per operand, the result written over its
  /// buffer, or -1), each once, in program order; the fusions that write
  /// over nothing have none. A target may tell its code that those
  /// buffers are one (the cpu target: LLVM then vectorizes an in-place
  /// loop instead of falling back to scalar code when its run-time overlap
  /// check fails).
  std::vector<std::vector<int64_t>> overwrites;
};

struct KernelSet {
  /// func.func @<symbol>_impl on tensors, one per kernel, in kernel order.
  OwningOpRef<ModuleOp> module;
  std::vector<KernelDef> kernels;
  /// Every omni.fusion of the program -> its index in `kernels`.
  llvm::DenseMap<Operation *, unsigned> kernelOf;
};

/// Builds the kernel set of `program`, whose fusions keep their order: the
/// k-th distinct fusion in program order is kernel k. Emits an error on the
/// fusion and fails for an op it cannot lower. With `splitRows`, a kernel
/// that is not flat but has rows (planRowSplit) is built for one work item
/// of its split.
FailureOr<KernelSet> buildKernelSet(ModuleOp program, bool splitRows = false);

/// For every target, after one-shot bufferization of the kernel module: the
/// bufferization turns every non-splat constant into a memref.global named
/// `__constant_<type>[_<n>]` whose numbering changes from run to run
/// (observed: the same value was `_0` in one compile and `_1` in the next,
/// presumably an order over pointers), which changed step.bin (the cpu
/// target's llvm::SplitModule groups and orders by name; the PTX names
/// them). Renames every global to `omni_constant_<k>`, k counting first
/// uses in module order, moves them to the module's start in that order and
/// drops unused private ones, so the code depends only on the program.
void canonicalizeConstantGlobals(ModuleOp kernels);

/// For every target, after bufferization: each memref.copy becomes a
/// linalg.copy, which lowers to plain loops (the cpu target would otherwise
/// call memrefCopy from MLIR's runner utilities for strided views, and the
/// cuda target has no GPU lowering of memref.copy at all).
void copiesToLinalg(ModuleOp kernels);

} // namespace mlir::omni

#endif // OMNI_COMPILER_CODEGEN_KERNELSET_H
