//===- Pipelines.cpp - omni pass registration and pipelines ---------------===//
//
// The omni compilation pipeline as a plain function (omnic calls it, and can
// stop after any stage for --emit=<stage>) and as the registered named
// pipeline `omni-pipeline` (lit runs it), so both run exactly the same
// passes. kStages is the one list of the stages: their order, their --emit
// names and their passes.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

#include <vector>

namespace mlir::omni {
namespace {
#define GEN_PASS_REGISTRATION
#include "passes/Passes.h.inc"

/// buildOmniPipeline's options, for the stages that take one.
struct StageOptions {
  bool reportArena = false;
};

void addCleanup(OpPassManager &pm) {
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

// 1. Clean up frontend output: inline model calls, fold constants (the
//    sigma schedule folds here), share common subexpressions.
void addCleanupStage(OpPassManager &pm, const StageOptions &) {
  pm.addPass(createOmniResidentStatePass()); // state slots (before inlining)
  pm.addPass(createInlinerPass());
  addCleanup(pm);
}

// 2. grad / value_and_grad become forward + adjoint IR (calls to generated
//    gradient functions, inlined in turn).
void addAutodiffStage(OpPassManager &pm, const StageOptions &) {
  pm.addPass(createOmniAutodiffPass());
  pm.addPass(createInlinerPass());
  addCleanup(pm);
}

// 3. Composite ops become primitives.
void addDecomposeStage(OpPassManager &pm, const StageOptions &) {
  pm.addPass(createOmniDecomposePass());
  addCleanup(pm);
}

// 4. The SPMD program of every rank of the module's omni.mesh (nothing
//    without one; docs/sharding.md).
void addShardStage(OpPassManager &pm, const StageOptions &) {
  pm.addPass(createOmniShardPass());
  addCleanup(pm);
}

// 5. Kernel boundaries (loop-invariant scalar reads first leave their
//    loops, so a loop that only enqueues device work can be captured as a
//    graph, and so do narrowing casts of loop-invariant tensors, a bf16
//    program's weight copies, shared with the same casts after the loop;
//    large sums over the leading rows become two sums, so the
//    kernels around them split over threads; reshapes leave the middle of
//    fusible chains, which they would split).
void addFuseStage(OpPassManager &pm, const StageOptions &) {
  pm.addNestedPass<func::FuncOp>(createOmniHoistLoopScalarsPass());
  pm.addNestedPass<func::FuncOp>(createOmniSplitReductionsPass());
  pm.addNestedPass<func::FuncOp>(createOmniMoveReshapesPass());
  pm.addNestedPass<func::FuncOp>(createOmniFusePass());
  pm.addPass(createCSEPass());
}

// 6. The static arena.
void addPlanMemoryStage(OpPassManager &pm, const StageOptions &o) {
  OmniPlanMemoryPassOptions plan;
  plan.report = o.reportArena;
  pm.addNestedPass<func::FuncOp>(createOmniPlanMemoryPass(plan));
}

struct Stage {
  PipelineStage stage;
  /// omnic --emit=<name>.
  llvm::StringLiteral name;
  void (*addPasses)(OpPassManager &pm, const StageOptions &options);
};

/// The pipeline, in order: the one list of its stages.
const Stage kStages[] = {
    {PipelineStage::Cleanup, "cleanup", addCleanupStage},
    {PipelineStage::Autodiff, "autodiff", addAutodiffStage},
    {PipelineStage::Decompose, "decompose", addDecomposeStage},
    {PipelineStage::Shard, "shard", addShardStage},
    {PipelineStage::Fuse, "fuse", addFuseStage},
    {PipelineStage::PlanMemory, "plan-memory", addPlanMemoryStage},
};
} // namespace

llvm::ArrayRef<llvm::StringRef> pipelineStageNames() {
  static const std::vector<llvm::StringRef> names = [] {
    std::vector<llvm::StringRef> out;
    for (const Stage &s : kStages)
      out.push_back(s.name);
    return out;
  }();
  return names;
}

std::optional<PipelineStage> parsePipelineStage(llvm::StringRef name) {
  for (const Stage &s : kStages)
    if (s.name == name)
      return s.stage;
  return std::nullopt;
}

void buildOmniPipeline(OpPassManager &pm, PipelineStage last,
                       bool reportArena) {
  StageOptions options;
  options.reportArena = reportArena;
  for (const Stage &s : kStages) {
    s.addPasses(pm, options);
    if (s.stage == last)
      return;
  }
}

void registerOmniPasses() {
  registerOmniTransformsPasses();
  PassPipelineRegistration<>("omni-pipeline",
                             "the omni compilation pipeline omnic runs "
                             "(docs/architecture.md section 2)",
                             [](OpPassManager &pm) { buildOmniPipeline(pm); });
}

} // namespace mlir::omni
