//===- DecomposePatterns.h - omni-decompose pattern groups ----*- C++ -*-===//
//
// The pattern groups of omni-decompose, split over Decompose.cpp and
// DecomposeRL.cpp. Private to passes/.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_PASSES_DECOMPOSEPATTERNS_H
#define OMNI_PASSES_DECOMPOSEPATTERNS_H

#include "dialects/omni/OmniEmitter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::omni {
/// Patterns for the diffusion RL ops (DecomposeRL.cpp).
void populateDecomposeRLPatterns(RewritePatternSet &patterns);
/// Patterns for the library ops kept by default (attention).
void populateDecomposeLibraryPatterns(RewritePatternSet &patterns);
/// omni.attention_grad alone (the targets without its library call).
void populateDecomposeAttentionGradPatterns(RewritePatternSet &patterns);
} // namespace mlir::omni

#endif // OMNI_PASSES_DECOMPOSEPATTERNS_H
