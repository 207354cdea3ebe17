//===- Pipelines.cpp - omni pass registration and pipelines ---------------===//
//
// The omni compilation pipeline as a plain function (omnic calls it) and as
// the registered named pipeline `omni-pipeline` (lit runs it), so both run
// exactly the same passes.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

namespace mlir::omni {
namespace {
#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"
} // namespace

void buildOmniPipeline(OpPassManager &pm) {
  // Clean up frontend output: inline model calls, fold constants (the
  // sigma schedule folds here), share common subexpressions.
  pm.addPass(createInlinerPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  // grad / value_and_grad become forward + adjoint IR.
  pm.addPass(createOmniAutodiffPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  // Composite ops become primitives.
  pm.addPass(createOmniDecomposePass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void registerOmniPasses() {
  registerOmniTransformsPasses();
  PassPipelineRegistration<>(
      "omni-pipeline",
      "the omni compilation pipeline omnic runs (design.md section 2)",
      buildOmniPipeline);
}

} // namespace mlir::omni
