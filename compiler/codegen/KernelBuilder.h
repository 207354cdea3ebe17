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

} // namespace mlir::omni

#endif // OMNI_COMPILER_CODEGEN_KERNELBUILDER_H
