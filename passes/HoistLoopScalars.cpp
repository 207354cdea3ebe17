//===- HoistLoopScalars.cpp - Loop-invariant scalars out of loops ---------===//
//
// omni-hoist-loop-scalars moves reads of 0-D tensors and the scalar
// arithmetic on them that do not change across an scf.for's iterations out
// of the loop (Passes.td has the rules). The step.bin writer turns such a
// read into a ScalarOp FromTensor, which reads the device; inside a loop it
// ran once per iteration and kept the executor from capturing the loop as a
// graph (docs/backend.md, "Graphs"). The FlowGRPO train loop reads its
// window start that way once per micro-batch.
//
// Only scalars move: a tensor-valued op moved out of a loop would keep its
// buffer live across the whole loop, which is omni-plan-memory's business.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/LoopInvariantCodeMotionUtils.h"

#define DEBUG_TYPE "omni-hoist-loop-scalars"

namespace mlir::omni {
#define GEN_PASS_DEF_OMNIHOISTLOOPSCALARSPASS
#include "passes/Passes.h.inc"
} // namespace mlir::omni

using namespace mlir;

namespace {

bool isScalar(Type t) { return t.isIntOrIndexOrFloat(); }

/// Whether `op` may run once before the loop instead of in every iteration
/// (its operands being defined outside the loop is checked by the caller).
bool isHoistableScalarOp(Operation *op) {
  if (op->getNumRegions() != 0 || op->getNumResults() == 0 ||
      !llvm::all_of(op->getResultTypes(), isScalar))
    return false;
  // A 0-D read is always in bounds, so it may run even when the loop runs
  // no iteration (tensor.extract is not speculatable in general: an index
  // may be out of bounds).
  if (auto extract = dyn_cast<tensor::ExtractOp>(op))
    return extract.getTensor().getType().getRank() == 0;
  return isMemoryEffectFree(op) && isSpeculatable(op);
}

struct OmniHoistLoopScalarsPass
    : omni::impl::OmniHoistLoopScalarsPassBase<OmniHoistLoopScalarsPass> {
  void runOnOperation() override {
    // Post-order: an inner loop's scalars leave it first, then may leave the
    // loops around it too.
    getOperation().walk([](scf::ForOp loop) {
      moveLoopInvariantCode(
          loop.getLoopRegions(),
          [&](Value value, Region *) {
            return loop.isDefinedOutsideOfLoop(value);
          },
          [](Operation *op, Region *) { return isHoistableScalarOp(op); },
          [&](Operation *op, Region *) { loop.moveOutOfLoop(op); });
    });
  }
};

} // namespace
