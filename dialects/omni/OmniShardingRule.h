//===- OmniShardingRule.h - How an op's dimensions may be split -*- C++ -*-===//
//
// The sharding rule of an op (docs/sharding.md section 2), which omni-shard
// reads through ShardingRuleOpInterface or shardingRuleOf(): every dimension
// of every operand and result is labeled with a factor, or with kWhole when
// it must not be split. Dimensions that carry the same factor are split the
// same way (elementwise ops share every factor; a matmul shares its batch
// and M/N factors between an operand and the result). A factor that appears
// only in operands is a reduction factor: splitting it leaves every rank a
// partial result, which a collective completes (a contraction's K, a
// reduce's reduced dimensions).
//
// `partials` says how the op treats operands that are partial sums (the
// ranks' values add up to the true value): an additive op (add, sub) maps
// all-partial operands to a partial result, a linear op maps exactly one
// partial operand (among `linearIn`) and replicated others to a partial
// result. Other ops need their operands completed first.
//
// Plain data, no MLIR headers beyond ADT: cheap to include.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_DIALECTS_OMNI_OMNISHARDINGRULE_H
#define OMNI_DIALECTS_OMNI_OMNISHARDINGRULE_H

#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <optional>

namespace mlir {
class Operation;
} // namespace mlir

namespace mlir::omni {

struct ShardingRule {
  /// A dimension that must stay whole (replicated).
  static constexpr int kWhole = -1;

  enum class Reduction { None, Sum, Max, Min, Mean };
  struct Factor {
    int64_t size = 1;
    /// How a reduction factor combines the ranks' partial results; None
    /// for a factor that some result carries.
    Reduction reduction = Reduction::None;
    /// The factor may be split into blocks padded past its size (only ops
    /// that compute every element independently: elementwise ops).
    bool paddable = false;
  };
  enum class Partials { None, Additive, Linear };

  llvm::SmallVector<Factor> factors;
  /// Per operand (result), per dimension: a factor index or kWhole.
  llvm::SmallVector<llvm::SmallVector<int>> operands, results;
  Partials partials = Partials::None;
  /// Linear: the operands the op is linear in (bit i = operand i).
  uint32_t linearIn = 0;

  /// Adds a factor and returns its index.
  int addFactor(int64_t size, Reduction reduction = Reduction::None,
                bool paddable = false) {
    factors.push_back({size, reduction, paddable});
    return static_cast<int>(factors.size()) - 1;
  }
  /// Every operand and result dimension kWhole.
  static ShardingRule whole(Operation *op);
  /// Operands and results of one shape, dimension d of each = factor d
  /// (paddable). Operands of another shape (a 0-D operand) stay whole.
  static ShardingRule elementwise(Operation *op);
};

/// The rule of `op`: its ShardingRuleOpInterface, the elementwise rule for
/// ops with the Elementwise trait, std::nullopt for an op omni-shard has no
/// rule for (it replicates the op's operands and results).
std::optional<ShardingRule> shardingRuleOf(Operation *op);

} // namespace mlir::omni

#endif // OMNI_DIALECTS_OMNI_OMNISHARDINGRULE_H
