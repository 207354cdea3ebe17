//===- Pipelines.cpp - omni pass registration and pipelines ---------------===//
//
// The omni compilation pipeline as a plain function (omnic calls it, and can
// stop after any stage for --emit=<stage>) and as the registered named
// pipeline `omni-pipeline` (lit runs it), so both run exactly the same
// passes.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

namespace mlir::omni {
namespace {
#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

void addCleanup(OpPassManager &pm) {
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}
} // namespace

void buildOmniPipeline(OpPassManager &pm, PipelineStage last,
                       bool reportArena) {
  // 1. Clean up frontend output: inline model calls, fold constants (the
  //    sigma schedule folds here), share common subexpressions.
  pm.addPass(createOmniResidentStatePass()); // state slots (before inlining)
  pm.addPass(createInlinerPass());
  addCleanup(pm);
  if (last == PipelineStage::Cleanup)
    return;
  // 2. grad / value_and_grad become forward + adjoint IR (calls to
  //    generated gradient functions, inlined in turn).
  pm.addPass(createOmniAutodiffPass());
  pm.addPass(createInlinerPass());
  addCleanup(pm);
  if (last == PipelineStage::Autodiff)
    return;
  // 3. Composite ops become primitives.
  pm.addPass(createOmniDecomposePass());
  addCleanup(pm);
  if (last == PipelineStage::Decompose)
    return;
  // 4. Kernel boundaries.
  pm.addNestedPass<func::FuncOp>(createOmniFusePass());
  pm.addPass(createCSEPass());
  if (last == PipelineStage::Fuse)
    return;
  // 5. The static arena.
  OmniPlanMemoryPassOptions plan;
  plan.report = reportArena;
  pm.addNestedPass<func::FuncOp>(createOmniPlanMemoryPass(plan));
}

void registerOmniPasses() {
  registerOmniTransformsPasses();
  PassPipelineRegistration<>(
      "omni-pipeline",
      "the omni compilation pipeline omnic runs (design.md section 2)",
      [](OpPassManager &pm) { buildOmniPipeline(pm); });
}

} // namespace mlir::omni
