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

namespace mlir::omni {

#define GEN_PASS_DECL
#include "passes/Passes.h.inc"

/// Appends the omni compilation pipeline (design.md section 2) to `pm`.
/// Later passes (autodiff, shard, fuse, plan-memory) join it in order.
void buildOmniPipeline(OpPassManager &pm);

/// Registers every omni pass and the `omni-pipeline` named pipeline.
void registerOmniPasses();

} // namespace mlir::omni

#endif // OMNI_PASSES_PASSES_H
