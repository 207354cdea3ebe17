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
// Of tensor-valued ops, only casts of loop-invariant float tensors to a
// narrower 16-bit float move (the bf16 copy of a weight, which the
// rollout's denoise loop would otherwise make again at every step): the
// copy then lives across the loop, but it is smaller than its operand,
// which lives across the loop anyway. Any other tensor-valued op would keep
// a buffer live across the whole loop that nothing bounds, so it stays.
//
//===----------------------------------------------------------------------===//

#include "dialects/omni/OmniOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Dominance.h"
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

/// A cast of a float tensor to a narrower 16-bit float type (a weight's
/// bf16 copy). Not f64 -> f32: the schedule's arithmetic, whose casts are
/// small, stays where its phase computes it.
bool isNarrowingCast(Operation *op) {
  auto cast = dyn_cast<omni::CastOp>(op);
  if (!cast)
    return false;
  auto from = dyn_cast<RankedTensorType>(cast->getOperand(0).getType());
  auto to = dyn_cast<RankedTensorType>(cast->getResult(0).getType());
  return from && to && isa<FloatType>(from.getElementType()) &&
         isa<FloatType>(to.getElementType()) &&
         to.getElementTypeBitWidth() < from.getElementTypeBitWidth() &&
         to.getElementTypeBitWidth() <= 16;
}

/// Whether `op` may run once before the loop instead of in every iteration
/// (its operands being defined outside the loop is checked by the caller):
/// a scalar op, or a narrowing cast to a 16-bit float (omni.cast is pure
/// and defined for every element).
bool isHoistableScalarOp(Operation *op) {
  if (isNarrowingCast(op))
    return true;
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
    SmallVector<Operation *> casts;
    getOperation().walk([&](scf::ForOp loop) {
      moveLoopInvariantCode(
          loop.getLoopRegions(),
          [&](Value value, Region *) {
            return loop.isDefinedOutsideOfLoop(value);
          },
          [](Operation *op, Region *) { return isHoistableScalarOp(op); },
          [&](Operation *op, Region *) {
            loop.moveOutOfLoop(op);
            if (isNarrowingCast(op))
              casts.push_back(op);
          });
    });
    // A hoisted cast of a function argument (a weight) serves the same
    // casts it dominates (the train phase's casts of the weights the
    // rollout's loop cast): one copy per iteration. Only those merge: a
    // computed value's cast, shared with later code, would let omni-fuse
    // schedule that code (the train phase's own schedule arithmetic) before
    // the loop, out of its phase.
    if (casts.empty())
      return;
    DominanceInfo dominance(getOperation());
    Block *entry = &getOperation().getBody().front();
    llvm::SmallPtrSet<Operation *, 16> erased;
    for (Operation *hoisted : casts) {
      if (erased.contains(hoisted))
        continue; // merged into a cast hoisted from an earlier loop
      auto arg = dyn_cast<BlockArgument>(hoisted->getOperand(0));
      if (!arg || arg.getOwner() != entry)
        continue;
      for (Operation *user :
           llvm::make_early_inc_range(hoisted->getOperand(0).getUsers())) {
        if (user == hoisted || user->getName() != hoisted->getName() ||
            user->getResultTypes() != hoisted->getResultTypes() ||
            user->getAttrDictionary() != hoisted->getAttrDictionary() ||
            !dominance.properlyDominates(hoisted, user))
          continue;
        user->getResult(0).replaceAllUsesWith(hoisted->getResult(0));
        erased.insert(user);
        user->erase();
      }
    }
  }
};

} // namespace
