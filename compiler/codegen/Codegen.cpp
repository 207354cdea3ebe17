//===- Codegen.cpp - native kernels for every omni.fusion -----------------===//
//
// The table of targets and the two halves put together: buildKernelSet
// (shared), then the target's lowering of the kernel set into one
// executable. A new target adds a row to kTargets and a folder beside cpu/.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/Codegen.h"
#include "compiler/codegen/KernelSet.h"
#include "compiler/codegen/cpu/CpuCodegen.h"
#include "compiler/codegen/cuda/CudaCodegen.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace mlir::omni;

namespace {

struct TargetInfo {
  llvm::StringLiteral name;
  /// Checks the target's own options ("" when valid).
  std::string (*checkOptions)(const CodegenOptions &);
  /// Lowers the kernel set (whose module it may rewrite) into an executable.
  FailureOr<CompiledExecutable> (*lower)(KernelSet &, const CodegenOptions &,
                                         std::string *targetIR);
};

const TargetInfo kTargets[] = {
    {"cpu", [](const CodegenOptions &o) { return checkTargetCpu(o.cpu.cpu); },
     lowerKernelSetForCpu},
    {"cuda", [](const CodegenOptions &o) { return checkCudaArch(o.cuda.arch); },
     lowerKernelSetForCuda},
};

const TargetInfo *findTarget(llvm::StringRef name) {
  for (const TargetInfo &t : kTargets)
    if (t.name == name)
      return &t;
  return nullptr;
}

} // namespace

std::vector<llvm::StringRef> mlir::omni::codegenTargets() {
  std::vector<llvm::StringRef> names;
  for (const TargetInfo &t : kTargets)
    names.push_back(t.name);
  return names;
}

std::string mlir::omni::checkCodegenOptions(const CodegenOptions &options) {
  const TargetInfo *target = findTarget(options.target);
  if (!target)
    return "--target=" + options.target + ": unknown target; expected " +
           llvm::join(codegenTargets(), ", ");
  if (options.optLevel < 0 || options.optLevel > 3)
    return "-O" + std::to_string(options.optLevel) + ": expected 0 to 3";
  return target->checkOptions(options);
}

void mlir::omni::registerCodegenDialects(DialectRegistry &registry) {
  registerAllDialects(registry);
  registerAllExtensions(registry);
  registerAllToLLVMIRTranslations(registry);
}

FailureOr<CodegenResult>
mlir::omni::compileFusions(ModuleOp program, const CodegenOptions &options,
                           const CodegenDumps &dumps) {
  if (std::string bad = checkCodegenOptions(options); !bad.empty())
    return emitError(program.getLoc(), bad);
  const TargetInfo *target = findTarget(options.target);
  // Rows split into work items on the cpu target only (the cuda target
  // launches its own grids, docs/backend-cuda.md).
  FailureOr<KernelSet> set =
      buildKernelSet(program, options.target == "cpu" && options.cpu.splitRows);
  if (failed(set))
    return failure();
  if (dumps.kernels) {
    llvm::raw_string_ostream os(*dumps.kernels);
    set->module->print(os);
  }
  FailureOr<CompiledExecutable> exe =
      target->lower(*set, options, dumps.targetIR);
  if (failed(exe))
    return failure();
  CodegenResult result;
  result.executables.push_back(std::move(*exe));
  for (auto [fusion, kernel] : set->kernelOf)
    result.kernelOf[fusion] = KernelRef{0, kernel};
  return result;
}
