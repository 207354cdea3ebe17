//===- RuntimeChecks.cpp - omnic refuses what omnirun would refuse --------===//

#include "compiler/driver/RuntimeChecks.h"

#include "runtime/loader/Program.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;

namespace {

/// Whether a static tensor type's byte size fits in int64, as the loader
/// computes it (elements times element bytes, i1 stored as a byte).
bool bytesFitInt64(RankedTensorType t) {
  if (!t.hasStaticShape())
    return true;
  Type e = t.getElementType();
  int64_t bytes = 1;
  if (e.isIntOrFloat())
    bytes = std::max<int64_t>(1, (e.getIntOrFloatBitWidth() + 7) / 8);
  else if (e.isIndex())
    bytes = 8;
  for (int64_t d : t.getShape())
    if (__builtin_mul_overflow(bytes, d, &bytes))
      return false;
  return true;
}

/// Fails at `op` if one of `types` is too large to count in bytes.
LogicalResult checkTypes(Operation *op, TypeRange types, const char *what) {
  for (auto [i, type] : llvm::enumerate(types)) {
    auto t = dyn_cast<RankedTensorType>(type);
    if (t && !bytesFitInt64(t)) {
      // The loader's words, with the type unquoted as it prints it.
      std::string type;
      llvm::raw_string_ostream(type) << t;
      return op->emitOpError() << what << " #" << i << ": " << type
                               << " has more bytes than int64 can count";
    }
  }
  return success();
}

} // namespace

LogicalResult mlir::omni::checkProgramForRuntime(ModuleOp module,
                                                 bool needsEntry) {
  bool hasEntry = !needsEntry;
  for (auto fn : module.getOps<func::FuncOp>())
    hasEntry |= fn.isPublic() && !fn.isExternal();
  if (!hasEntry)
    return module.emitError(
        "no public function to compile: step.bin would hold nothing to run "
        "(omnirun runs the public func.func of the module)");
  WalkResult walk = module.walk([](Operation *op) {
    if (auto fn = dyn_cast<func::FuncOp>(op))
      if (failed(checkTypes(op, fn.getArgumentTypes(), "argument")) ||
          failed(checkTypes(op, fn.getResultTypes(), "result")))
        return WalkResult::interrupt();
    if (failed(checkTypes(op, op->getResultTypes(), "result")))
      return WalkResult::interrupt();
    for (Region &region : op->getRegions())
      for (Block &block : region)
        if (failed(checkTypes(op, block.getArgumentTypes(), "block argument")))
          return WalkResult::interrupt();
    if (auto loop = dyn_cast<scf::ForOp>(op)) {
      std::optional<int64_t> step = getConstantIntValue(loop.getStep());
      // The loader's rule for a Loop.
      if (step && *step < 1) {
        loop.emitOpError() << "step = " << *step << " but it must be >= 1";
        return WalkResult::interrupt();
      }
    }
    return WalkResult::advance();
  });
  return failure(walk.wasInterrupted());
}

LogicalResult mlir::omni::checkStepBinLoads(const std::vector<uint8_t> &bytes,
                                            llvm::StringRef name,
                                            llvm::raw_ostream &errs) {
  ::omni::loader::LoadOptions options;
  options.name = name.str();
  absl::StatusOr<std::shared_ptr<const ::omni::loader::Program>> program =
      ::omni::loader::Program::loadBytes(
          absl::string_view(reinterpret_cast<const char *>(bytes.data()),
                            bytes.size()),
          options);
  if (program.ok())
    return success();
  errs << "omnic: " << std::string(program.status().message()) << "\n";
  return failure();
}
