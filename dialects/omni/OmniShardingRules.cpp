//===- OmniShardingRules.cpp - Per-op sharding rules ----------------------===//
//
// The ShardingRuleOpInterface of the ops omni-shard can split
// (docs/sharding.md section 2). Each rule labels every operand and result
// dimension with a factor (dialects/omni/OmniShardingRule.h); dimensions a
// rule cannot split without communication inside the op (a softmax axis,
// convolution windows, a sliced range) stay kWhole.
//
//===----------------------------------------------------------------------===//

#include "dialects/omni/OmniOps.h"

using namespace mlir;
using namespace mlir::omni;

namespace {
int64_t rankOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getRank();
}
ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}
SmallVector<int> wholeDims(Value v) {
  return SmallVector<int>(rankOf(v), ShardingRule::kWhole);
}
ShardingRule::Reduction reductionOf(ReduceKind kind) {
  switch (kind) {
  case ReduceKind::sum:
    return ShardingRule::Reduction::Sum;
  case ReduceKind::max:
    return ShardingRule::Reduction::Max;
  case ReduceKind::min:
    return ShardingRule::Reduction::Min;
  case ReduceKind::mean:
    return ShardingRule::Reduction::Mean;
  }
  return ShardingRule::Reduction::Sum;
}
} // namespace

ShardingRule ShardingRule::whole(Operation *op) {
  ShardingRule rule;
  for (Value v : op->getOperands())
    rule.operands.push_back(
        isa<RankedTensorType>(v.getType()) ? wholeDims(v) : SmallVector<int>());
  for (Value v : op->getResults())
    rule.results.push_back(
        isa<RankedTensorType>(v.getType()) ? wholeDims(v) : SmallVector<int>());
  return rule;
}

ShardingRule ShardingRule::elementwise(Operation *op) {
  ShardingRule rule = whole(op);
  if (op->getNumResults() != 1 ||
      !isa<RankedTensorType>(op->getResult(0).getType()))
    return rule;
  ArrayRef<int64_t> shape = shapeOf(op->getResult(0));
  for (int64_t size : shape)
    rule.addFactor(size, Reduction::None, /*paddable=*/true);
  auto label = [&](Value v, SmallVector<int> &dims) {
    if (!isa<RankedTensorType>(v.getType()) || shapeOf(v) != shape)
      return;
    for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d)
      dims[d] = static_cast<int>(d);
  };
  for (auto [i, v] : llvm::enumerate(op->getOperands()))
    label(v, rule.operands[i]);
  label(op->getResult(0), rule.results[0]);
  // Partial sums pass through linear elementwise ops without communication.
  if (isa<AddOp, SubOp>(op)) {
    rule.partials = Partials::Additive;
  } else if (isa<NegOp>(op)) {
    rule.partials = Partials::Linear;
    rule.linearIn = 1;
  } else if (isa<MulOp>(op)) {
    rule.partials = Partials::Linear;
    rule.linearIn = 3;
  } else if (isa<DivOp>(op)) {
    rule.partials = Partials::Linear;
    rule.linearIn = 1;
  }
  return rule;
}

std::optional<ShardingRule> mlir::omni::shardingRuleOf(Operation *op) {
  if (auto rule = dyn_cast<ShardingRuleOpInterface>(op))
    return rule.getShardingRule();
  if (op->hasTrait<OpTrait::Elementwise>())
    return ShardingRule::elementwise(op);
  return std::nullopt;
}

/// Operand dimension i is result dimension dims[i] unless it is a size-1
/// dimension being expanded; new result dimensions are their own factors
/// (a split of one is made by slicing the replicated operand).
ShardingRule BroadcastInDimOp::getShardingRule() {
  ShardingRule rule = ShardingRule::whole(*this);
  ArrayRef<int64_t> in = shapeOf(getOperand()), out = getType().getShape();
  for (auto [d, size] : llvm::enumerate(out))
    rule.results[0][d] = rule.addFactor(size);
  for (auto [i, d] : llvm::enumerate(getDims()))
    if (in[i] == out[d])
      rule.operands[0][i] = rule.results[0][d];
  rule.partials = ShardingRule::Partials::Linear;
  rule.linearIn = 1;
  return rule;
}

/// A split stays a contiguous block of the row-major elements when the
/// dimensions before it hold the same number of elements on both sides and
/// the split dimension is the outer part of the other side's dimension (a
/// merge: [4, 8] -> [32]) or the other side's dimension is its outer part
/// (a split: [32] -> [4, 8]). The factor's size is the smaller of the two,
/// which the ranks must divide.
ShardingRule ReshapeOp::getShardingRule() {
  ShardingRule rule = ShardingRule::whole(*this);
  ArrayRef<int64_t> in = shapeOf(getOperand()), out = getType().getShape();
  int64_t inPrefix = 1;
  for (size_t i = 0; i < in.size(); ++i) {
    int64_t outPrefix = 1;
    for (size_t o = 0; o < out.size(); ++o) {
      if (outPrefix == inPrefix && in[i] > 1 && out[o] > 1 &&
          (in[i] % out[o] == 0 || out[o] % in[i] == 0)) {
        int f = rule.addFactor(std::min(in[i], out[o]));
        rule.operands[0][i] = f;
        rule.results[0][o] = f;
        break;
      }
      outPrefix *= out[o];
      if (outPrefix > inPrefix)
        break;
    }
    inPrefix *= in[i];
  }
  rule.partials = ShardingRule::Partials::Linear;
  rule.linearIn = 1;
  return rule;
}

ShardingRule TransposeOp::getShardingRule() {
  ShardingRule rule = ShardingRule::whole(*this);
  for (auto [d, p] : llvm::enumerate(getPermutation())) {
    int f = rule.addFactor(getType().getDimSize(d));
    rule.results[0][d] = f;
    rule.operands[0][p] = f;
  }
  rule.partials = ShardingRule::Partials::Linear;
  rule.linearIn = 1;
  return rule;
}

/// Only dimensions taken whole (start 0, stride 1, the full size) split.
ShardingRule SliceOp::getShardingRule() {
  ShardingRule rule = ShardingRule::whole(*this);
  ArrayRef<int64_t> in = shapeOf(getOperand());
  for (size_t d = 0; d < in.size(); ++d)
    if (getStart()[d] == 0 && getStrides()[d] == 1 && getLimit()[d] == in[d]) {
      int f = rule.addFactor(in[d]);
      rule.operands[0][d] = f;
      rule.results[0][d] = f;
    }
  rule.partials = ShardingRule::Partials::Linear;
  rule.linearIn = 1;
  return rule;
}

ShardingRule ConcatOp::getShardingRule() {
  ShardingRule rule = ShardingRule::whole(*this);
  for (int64_t d = 0; d < getType().getRank(); ++d) {
    if (d == static_cast<int64_t>(getDim()))
      continue;
    int f = rule.addFactor(getType().getDimSize(d));
    rule.results[0][d] = f;
    for (auto &dims : rule.operands)
      dims[d] = f;
  }
  rule.partials = ShardingRule::Partials::Additive;
  return rule;
}

ShardingRule PadOp::getShardingRule() {
  ShardingRule rule = ShardingRule::whole(*this);
  for (int64_t d = 0; d < getType().getRank(); ++d)
    if (getLow()[d] == 0 && getHigh()[d] == 0) {
      int f = rule.addFactor(getType().getDimSize(d));
      rule.operands[0][d] = f;
      rule.results[0][d] = f;
    }
  // Padding with zero keeps a partial sum partial.
  if (getValue().convertToDouble() == 0.0) {
    rule.partials = ShardingRule::Partials::Linear;
    rule.linearIn = 1;
  }
  return rule;
}

/// Kept dimensions pass through; reduced ones are reduction factors.
ShardingRule ReduceOp::getShardingRule() {
  ShardingRule rule = ShardingRule::whole(*this);
  ArrayRef<int64_t> in = shapeOf(getOperand());
  ArrayRef<int64_t> reduced = getDims();
  int64_t out = 0;
  for (int64_t d = 0; d < static_cast<int64_t>(in.size()); ++d) {
    if (llvm::is_contained(reduced, d)) {
      rule.operands[0][d] = rule.addFactor(in[d], reductionOf(getKind()));
      continue;
    }
    int f = rule.addFactor(in[d]);
    rule.operands[0][d] = f;
    rule.results[0][out++] = f;
  }
  if (getKind() == ReduceKind::sum) {
    rule.partials = ShardingRule::Partials::Linear;
    rule.linearIn = 1;
  }
  return rule;
}

/// Batch dimensions, M and N pass through; K is a sum factor.
ShardingRule MatmulOp::getShardingRule() {
  ShardingRule rule = ShardingRule::whole(*this);
  int64_t lr = rankOf(getLhs()), rr = rankOf(getRhs());
  ArrayRef<int64_t> lhs = shapeOf(getLhs()), rhs = shapeOf(getRhs());
  int64_t batch = lr - 2;
  for (int64_t d = 0; d < batch; ++d) {
    int f = rule.addFactor(lhs[d]);
    rule.operands[0][d] = f;
    rule.results[0][d] = f;
    if (rr == lr)
      rule.operands[1][d] = f;
  }
  int64_t lm = getTransposeLhs() ? lr - 1 : lr - 2;
  int64_t lk = getTransposeLhs() ? lr - 2 : lr - 1;
  int64_t rk = getTransposeRhs() ? rr - 1 : rr - 2;
  int64_t rn = getTransposeRhs() ? rr - 2 : rr - 1;
  int m = rule.addFactor(lhs[lm]);
  int n = rule.addFactor(rhs[rn]);
  int k = rule.addFactor(lhs[lk], ShardingRule::Reduction::Sum);
  rule.operands[0][lm] = m;
  rule.operands[0][lk] = k;
  rule.operands[1][rk] = k;
  rule.operands[1][rn] = n;
  rule.results[0][lr - 2] = m;
  rule.results[0][lr - 1] = n;
  rule.partials = ShardingRule::Partials::Linear;
  rule.linearIn = 3;
  return rule;
}

/// The batch and the output channels pass through; input channels are a
/// sum factor; spatial windows stay whole.
ShardingRule Conv2dOp::getShardingRule() {
  ShardingRule rule = ShardingRule::whole(*this);
  ArrayRef<int64_t> in = shapeOf(getInput()), w = shapeOf(getFilter());
  int n = rule.addFactor(in[0]);
  int o = rule.addFactor(w[0]);
  int c = rule.addFactor(in[1], ShardingRule::Reduction::Sum);
  rule.operands[0][0] = n;
  rule.operands[0][1] = c;
  rule.operands[1][0] = o;
  rule.operands[1][1] = c;
  rule.results[0][0] = n;
  rule.results[0][1] = o;
  rule.partials = ShardingRule::Partials::Linear;
  rule.linearIn = 3;
  return rule;
}

/// Batch and heads pass through (a mask broadcast over them stays whole).
ShardingRule AttentionOp::getShardingRule() {
  ShardingRule rule = ShardingRule::whole(*this);
  ArrayRef<int64_t> q = shapeOf(getQuery());
  for (int64_t d = 0; d < 2; ++d) {
    int f = rule.addFactor(q[d]);
    for (unsigned i = 0; i < 3; ++i)
      rule.operands[i][d] = f;
    if (getMask() && shapeOf(getMask())[d] == q[d])
      rule.operands[3][d] = f;
    rule.results[0][d] = f;
  }
  return rule;
}

/// Batch and heads pass through every operand and result (a mask's where
/// it is not broadcast).
ShardingRule AttentionGradOp::getShardingRule() {
  ShardingRule rule = ShardingRule::whole(*this);
  ArrayRef<int64_t> q = shapeOf(getQuery());
  for (int64_t d = 0; d < 2; ++d) {
    int f = rule.addFactor(q[d]);
    for (unsigned i = 0; i < 5; ++i)
      rule.operands[i][d] = f;
    if (getMask() && shapeOf(getMask())[d] == q[d])
      rule.operands[5][d] = f;
    for (unsigned i = 0; i < 3; ++i)
      rule.results[i][d] = f;
  }
  return rule;
}

/// Host functions (the rewards) work sample by sample: dimension 0 of
/// every operand and result, when they all have the same one, splits.
ShardingRule HostCallOp::getShardingRule() {
  ShardingRule rule = ShardingRule::whole(*this);
  std::optional<int64_t> batch;
  for (Value v : llvm::concat<Value>(getOperands(), getResults())) {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    if (!t || t.getRank() == 0 || (batch && *batch != t.getDimSize(0)))
      return rule;
    batch = t.getDimSize(0);
  }
  if (!batch)
    return rule;
  int f = rule.addFactor(*batch);
  for (auto &dims : llvm::concat<SmallVector<int>>(rule.operands, rule.results))
    dims[0] = f;
  return rule;
}
