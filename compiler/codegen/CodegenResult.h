//===- CodegenResult.h - what code generation hands the writer --*- C++ -*-===//
//
// The protocol between code generation (compiler/codegen) and the step.bin
// writer (compiler/stepbin): the executables codegen built, each with its
// format, the target it was compiled for, its code bytes and its kernels
// (symbol, buffer signature, launch metadata), and for every omni.fusion of
// the program the (executable, kernel) that runs it. Nothing travels as IR
// attributes: the writer reads this and the program, nothing else.
//
// Launch metadata is a variant so that a target adds its own kind without
// touching the others: the cpu target splits work items [0, grid) over the
// runtime's threads; a GPU target will add grid/block/shared memory.
//
// Ownership: plain values; `kernelOf` points at ops of the program codegen
// ran on, valid while that module is alive and its fusions are not erased.
// Thread safety: none needed (built once, then read).
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_COMPILER_CODEGEN_CODEGENRESULT_H
#define OMNI_COMPILER_CODEGEN_CODEGENRESULT_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/DenseMap.h"

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace mlir::omni {

/// A CPU kernel runs work items [0, grid) (docs/backend.md, the kernel ABI):
/// grid 1 runs the whole kernel as one item; an elementwise kernel is split
/// into chunks of elements that the runtime spreads over its threads.
struct CpuLaunch {
  int64_t grid = 1;
  /// Per buffer (operands, then results): work item w touches bytes
  /// [w * b, (w + 1) * b) of it (a flat kernel's last item may stop at the
  /// end); 0: every item may touch the whole buffer (step.fbs
  /// KernelSignature.item_bytes).
  std::vector<int64_t> itemBytes;
};

/// One GPU launch of a cuda kernel (step.fbs GpuLaunch): `args` index the
/// kernel's buffers (operands, results, then `GpuLaunches::scratch`).
struct GpuLaunch {
  std::string entry;
  uint32_t grid[3] = {1, 1, 1};
  uint32_t block[3] = {1, 1, 1};
  uint32_t sharedBytes = 0;
  std::vector<uint32_t> args;
};

/// A cuda kernel is a sequence of GPU launches over its buffers and scratch
/// temporaries (step.fbs GpuKernel); its Dispatch has grid 1.
struct GpuLaunches {
  std::vector<GpuLaunch> launches;
  std::vector<int64_t> scratch;
  /// (operand, result) pairs, flattened, that a dispatch may make one
  /// buffer (step.fbs GpuKernel.in_place).
  std::vector<uint32_t> inPlace;
  int64_t grid = 1;
};

/// How a kernel is launched; one alternative per target kind.
using KernelLaunch = std::variant<CpuLaunch, GpuLaunches>;

/// The work-item count step.bin's Dispatch and KernelSignature record.
inline int64_t dispatchGrid(const KernelLaunch &launch) {
  return std::visit([](const auto &l) { return l.grid; }, launch);
}

/// The launch's per-buffer item bytes (CpuLaunch::itemBytes); empty for a
/// launch that does not record them.
inline const std::vector<int64_t> &itemBytesOf(const KernelLaunch &launch) {
  static const std::vector<int64_t> none;
  const auto *cpu = std::get_if<CpuLaunch>(&launch);
  return cpu ? cpu->itemBytes : none;
}

/// One exported kernel of an executable.
struct CompiledKernel {
  /// The exported symbol the runtime resolves at load time.
  std::string symbol;
  /// The buffers the kernel reads (the fusion's inputs) and writes (its
  /// results), in order.
  std::vector<RankedTensorType> operands, results;
  KernelLaunch launch;
};

/// The container of an executable's code (step.fbs ExecutableFormat).
enum class CodeFormat { ElfSharedObject, Ptx, Cubin };

/// What the code was compiled for; the runtime's driver checks it when it
/// loads the executable.
struct CodeTarget {
  /// "cpu" (later "cuda"): the runtime driver that runs it.
  std::string kind;
  /// The LLVM CPU name ("haswell"), later the SM architecture ("sm_90").
  std::string arch;
  /// The LLVM feature string the code needs ("+avx2,+fma,..."); empty when
  /// the target has none.
  std::string features;
};

struct CompiledExecutable {
  std::string name;
  CodeFormat format = CodeFormat::ElfSharedObject;
  CodeTarget target;
  std::vector<char> code;
  /// Cubin: the PTX it was assembled from (step.fbs Executable.ptx).
  std::vector<char> ptx;
  std::vector<CompiledKernel> kernels;
};

/// Which kernel runs a fusion.
struct KernelRef {
  unsigned executable = 0;
  unsigned kernel = 0;
};

struct CodegenResult {
  std::vector<CompiledExecutable> executables;
  /// Every omni.fusion of the program -> its kernel.
  llvm::DenseMap<Operation *, KernelRef> kernelOf;

  const CompiledKernel &kernel(KernelRef ref) const {
    return executables[ref.executable].kernels[ref.kernel];
  }
};

} // namespace mlir::omni

#endif // OMNI_COMPILER_CODEGEN_CODEGENRESULT_H
