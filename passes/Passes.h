//===- Passes.h - omni passes and pipelines ---------------------*- C++ -*-===//
//
// Declarations of the omni passes (generated from Passes.td), their
// registration, and the pipeline builder omnic and lit share.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_PASSES_PASSES_H
#define OMNI_PASSES_PASSES_H

#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <optional>

namespace mlir::omni {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

/// The stages of the omni pipeline, in order; omnic --emit=<stage> stops
/// after one. Their names and passes are one table (Pipelines.cpp).
enum class PipelineStage {
  Cleanup,
  Autodiff,
  Decompose,
  Shard,
  Fuse,
  PlanMemory
};

/// The --emit names of the stages, in pipeline order ("cleanup", ...,
/// "plan-memory").
llvm::ArrayRef<llvm::StringRef> pipelineStageNames();

/// The stage called `name`, if any.
std::optional<PipelineStage> parsePipelineStage(llvm::StringRef name);

/// Appends the omni compilation pipeline (docs/architecture.md section 2) to
/// `pm`, a module pass manager, up to and including `last`. `reportArena` makes
/// omni-plan-memory print each function's arena size.
void buildOmniPipeline(OpPassManager &pm,
                       PipelineStage last = PipelineStage::PlanMemory,
                       bool reportArena = false);

/// Registers every omni pass and the `omni-pipeline` named pipeline.
void registerOmniPasses();

} // namespace mlir::omni

#endif // OMNI_PASSES_PASSES_H
