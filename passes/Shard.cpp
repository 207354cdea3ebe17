//===- Shard.cpp - omni-shard: one program, every rank's share ------------===//
//
// Makes the SPMD program of a module with an omni.mesh (docs/sharding.md
// section 3). A value's sharding is one of
//   - whole: every rank holds the entire tensor;
//   - split(d, axes): the ranks of the group `axes` form hold consecutive
//     blocks of dimension d (block k = rows [k*c, (k+1)*c), c = ceil(n/G));
//     the last blocks are padded when G does not divide n (state only);
//   - partial(kind, axes): every rank holds a tensor of the full shape and
//     the true value is their reduction (kind) over the group.
// The pass runs in three steps per function: preferences (backward: the
// sharding a value's consumers end up wanting, so that a partial gradient
// is reduce-scattered straight into the layout of its parameter), analysis
// (forward, to a fixed point around loops: every value's sharding and the
// sharding every use needs, from the ops' rules), rewrite (conversions at
// the uses, local types). Ops it has no rule for compute on whole operands.
//
//===----------------------------------------------------------------------===//

#include "dialects/omni/OmniOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Pass/Pass.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"

#include <map>
#include <tuple>

namespace mlir::omni {
#define GEN_PASS_DEF_OMNISHARDPASS
#include "passes/Passes.h.inc"
} // namespace mlir::omni

using namespace mlir;
using namespace mlir::omni;

namespace {

using Reduction = ShardingRule::Reduction;

/// A value's sharding (file comment).
struct Sh {
  enum Kind : uint8_t { Whole, Split, Partial };
  Kind kind = Whole;
  int64_t dim = -1;
  SmallVector<StringRef, 2> axes;
  Reduction reduction = Reduction::None;
  /// A split that comes from a state slot's layout (FSDP storage): it
  /// passes through elementwise ops and reductions (the optimizer update,
  /// the gradient norm) but a contraction gathers the whole tensor first
  /// instead of splitting its computation. Not part of the layout (==).
  bool storage = false;

  static Sh whole() { return {}; }
  static Sh split(int64_t dim, ArrayRef<StringRef> axes) {
    Sh s;
    s.kind = Split;
    s.dim = dim;
    s.axes.assign(axes.begin(), axes.end());
    return s;
  }
  static Sh partial(Reduction r, ArrayRef<StringRef> axes) {
    Sh s;
    s.kind = Partial;
    s.reduction = r;
    s.axes.assign(axes.begin(), axes.end());
    return s;
  }
  bool operator==(const Sh &o) const {
    return std::tie(kind, dim, reduction) ==
               std::tie(o.kind, o.dim, o.reduction) &&
           axes == o.axes;
  }
  bool operator!=(const Sh &o) const { return !(*this == o); }
  /// A total order, for the conversion cache.
  bool operator<(const Sh &o) const {
    if (kind != o.kind)
      return kind < o.kind;
    if (dim != o.dim)
      return dim < o.dim;
    if (reduction != o.reduction)
      return reduction < o.reduction;
    return std::lexicographical_compare(axes.begin(), axes.end(),
                                        o.axes.begin(), o.axes.end());
  }
};

RankedTensorType tensorTypeOf(Value v) {
  return dyn_cast<RankedTensorType>(v.getType());
}

ReduceKind reduceKindOf(Reduction r) {
  switch (r) {
  case Reduction::Max:
    return ReduceKind::max;
  case Reduction::Min:
    return ReduceKind::min;
  case Reduction::Mean:
    return ReduceKind::mean;
  default:
    return ReduceKind::sum;
  }
}

StringRef reductionName(Reduction r) {
  switch (r) {
  case Reduction::Max:
    return "max";
  case Reduction::Min:
    return "min";
  case Reduction::Mean:
    return "mean";
  default:
    return "sum";
  }
}

class Sharder {
public:
  Sharder(ModuleOp module, MeshOp mesh, bool perStep, bool trace)
      : module_(module), mesh_(mesh), perStep_(perStep), trace_(trace) {}

  LogicalResult run(func::FuncOp fn);

private:
  // --- the mesh -----------------------------------------------------------
  int64_t groupSize(ArrayRef<StringRef> axes) {
    int64_t g = 1;
    for (StringRef a : axes)
      g *= mesh_.getAxisSize(a).value_or(1);
    return g;
  }
  int64_t blockSize(int64_t n, ArrayRef<StringRef> axes) {
    int64_t g = groupSize(axes);
    return (n + g - 1) / g;
  }
  /// The local type of a value of type `t` with sharding `s`.
  RankedTensorType localType(RankedTensorType t, const Sh &s) {
    if (s.kind != Sh::Split)
      return t;
    SmallVector<int64_t> shape(t.getShape());
    shape[s.dim] = blockSize(shape[s.dim], s.axes);
    return RankedTensorType::get(shape, t.getElementType());
  }
  ArrayAttr axesAttr(ArrayRef<StringRef> axes) {
    Builder b(module_.getContext());
    return b.getStrArrayAttr(SmallVector<StringRef>(axes));
  }
  FlatSymbolRefAttr meshRef() {
    return FlatSymbolRefAttr::get(mesh_.getSymNameAttr());
  }

  /// The unsharded type of `v`, which has sharding `s` (and its local type
  /// when split).
  RankedTensorType globalType(Value v, const Sh &s) {
    RankedTensorType t = tensorTypeOf(v);
    if (s.kind != Sh::Split)
      return t;
    SmallVector<int64_t> shape(t.getShape());
    auto it = globalDims_.find(v.getAsOpaquePointer());
    shape[s.dim] =
        it != globalDims_.end() ? it->second : shape[s.dim] * groupSize(s.axes);
    return RankedTensorType::get(shape, t.getElementType());
  }

  // --- analysis -----------------------------------------------------------
  Sh shardingOf(Value v) {
    auto it = sh_.find(v);
    return it == sh_.end() ? Sh::whole() : it->second;
  }
  /// What a partial value becomes when a user cannot take it partial: its
  /// preferred split when that is compatible, else whole.
  Sh resolved(Value v) {
    Sh s = shardingOf(v);
    if (s.kind != Sh::Partial)
      return s;
    auto pref = pref_.find(v);
    if (pref != pref_.end() && pref->second.kind == Sh::Split &&
        s.reduction == Reduction::Sum &&
        llvm::all_of(pref->second.axes, [&](StringRef a) {
          return llvm::is_contained(s.axes, a);
        }))
      return pref->second;
    return Sh::whole();
  }
  /// The sharding a user sees: partial values with several users are
  /// completed once, at their definition.
  Sh operandSharding(Value v) {
    Sh s = shardingOf(v);
    if (s.kind == Sh::Partial && !v.hasOneUse())
      return resolved(v);
    return s;
  }

  void prefer(Block &block);
  LogicalResult analyze(Block &block);
  LogicalResult analyzeFor(scf::ForOp loop);
  void analyzeByRule(Operation *op, const ShardingRule &rule);
  void analyzeWhole(Operation *op);
  std::optional<ShardingRule> ruleOf(Operation *op);

  // --- rewrite ------------------------------------------------------------
  LogicalResult rewrite(Block &block);
  Value materialize(Value v, const Sh &target, Operation *user);
  Value convert(OpBuilder &b, Location loc, Value v, const Sh &from,
                const Sh &to);
  Value makeLocally(OpBuilder &b, Value v, const Sh &to);
  Value padToBlocks(OpBuilder &b, Location loc, Value v,
                    RankedTensorType global, const Sh &to);
  Value blockOffset(OpBuilder &b, Location loc, ArrayRef<StringRef> axes,
                    int64_t scale);
  Value axisIndex(OpBuilder &b, Location loc, ArrayRef<StringRef> axes);
  Value i64Constant(OpBuilder &b, Location loc, int64_t value);
  void retype(Operation *op);

  ModuleOp module_;
  MeshOp mesh_;
  bool perStep_;
  bool trace_;
  llvm::DenseMap<Value, Sh> sh_, pref_;
  llvm::DenseMap<Operation *, SmallVector<Sh>> required_;
  std::map<std::tuple<void *, Sh, Block *>, Value> cache_;
  SmallVector<Sh> argSh_, resultSh_;
  /// The unsharded size of the split dimension of values that have their
  /// local type (padding makes it unrecoverable from the type).
  llvm::DenseMap<void *, int64_t> globalDims_;
};

//===----------------------------------------------------------------------===//
// Preferences: backward through same-shape ops and loops.
//===----------------------------------------------------------------------===//

void Sharder::prefer(Block &block) {
  for (Operation &op : llvm::reverse(block)) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (auto [i, v] : llvm::enumerate(ret.getOperands()))
        if (resultSh_[i].kind == Sh::Split)
          pref_.try_emplace(v, resultSh_[i]);
      continue;
    }
    if (auto loop = dyn_cast<scf::ForOp>(op)) {
      auto yield = cast<scf::YieldOp>(loop.getBody()->getTerminator());
      for (auto [i, r] : llvm::enumerate(loop.getResults())) {
        auto p = pref_.find(r);
        if (p == pref_.end())
          continue;
        pref_.try_emplace(yield.getOperand(i), p->second);
        pref_.try_emplace(loop.getInitArgs()[i], p->second);
      }
      prefer(*loop.getBody());
      continue;
    }
    if (op.getNumResults() != 1)
      continue;
    auto p = pref_.find(op.getResult(0));
    RankedTensorType t = tensorTypeOf(op.getResult(0));
    if (p == pref_.end() || !t)
      continue;
    Sh want = p->second;
    for (Value v : op.getOperands())
      if (tensorTypeOf(v) && tensorTypeOf(v).getShape() == t.getShape())
        pref_.try_emplace(v, want);
  }
}

//===----------------------------------------------------------------------===//
// Analysis: every value's sharding, every use's requirement.
//===----------------------------------------------------------------------===//

/// The rules of the upstream ops a program has after decomposition.
std::optional<ShardingRule> Sharder::ruleOf(Operation *op) {
  if (auto slice = dyn_cast<tensor::ExtractSliceOp>(op)) {
    ShardingRule rule = ShardingRule::whole(op);
    RankedTensorType src = slice.getSourceType();
    llvm::SmallBitVector dropped = slice.getDroppedDims();
    int64_t r = 0;
    for (int64_t d = 0; d < src.getRank(); ++d) {
      if (dropped.test(d))
        continue;
      if (slice.isDynamicOffset(d) || slice.isDynamicSize(d) ||
          slice.isDynamicStride(d) || slice.getStaticOffset(d) != 0 ||
          slice.getStaticStride(d) != 1 ||
          slice.getStaticSize(d) != src.getDimSize(d)) {
        ++r;
        continue;
      }
      int f = rule.addFactor(src.getDimSize(d));
      rule.operands[0][d] = f;
      rule.results[0][r++] = f;
    }
    return rule;
  }
  if (auto insert = dyn_cast<tensor::InsertSliceOp>(op)) {
    ShardingRule rule = ShardingRule::whole(op);
    RankedTensorType dst = insert.getDestType();
    llvm::SmallBitVector dropped = insert.getDroppedDims();
    int64_t s = 0;
    for (int64_t d = 0; d < dst.getRank(); ++d) {
      bool full = !dropped.test(d) && !insert.isDynamicOffset(d) &&
                  !insert.isDynamicSize(d) && !insert.isDynamicStride(d) &&
                  insert.getStaticOffset(d) == 0 &&
                  insert.getStaticStride(d) == 1 &&
                  insert.getStaticSize(d) == dst.getDimSize(d);
      if (full) {
        int f = rule.addFactor(dst.getDimSize(d));
        rule.operands[0][s] = f;
        rule.operands[1][d] = f;
        rule.results[0][d] = f;
      }
      if (!dropped.test(d))
        ++s;
    }
    return rule;
  }
  return shardingRuleOf(op);
}

void Sharder::analyzeWhole(Operation *op) {
  required_[op] = SmallVector<Sh>(op->getNumOperands(), Sh::whole());
  for (Value r : op->getResults())
    sh_[r] = Sh::whole();
}

void Sharder::analyzeByRule(Operation *op, const ShardingRule &rule) {
  unsigned n = op->getNumOperands();
  SmallVector<Sh> in;
  for (Value v : op->getOperands())
    in.push_back(tensorTypeOf(v) ? operandSharding(v) : Sh::whole());

  // Partial sums that pass through (the rule's `partials`).
  auto isTensor = [&](unsigned i) {
    return static_cast<bool>(tensorTypeOf(op->getOperand(i)));
  };
  SmallVector<unsigned> partialOps;
  for (unsigned i = 0; i < n; ++i)
    if (isTensor(i) && in[i].kind == Sh::Partial)
      partialOps.push_back(i);
  if (!partialOps.empty()) {
    const Sh &p = in[partialOps.front()];
    bool sum = p.reduction == Reduction::Sum;
    bool allSame =
        llvm::all_of(partialOps, [&](unsigned i) { return in[i] == p; });
    bool passes = false;
    if (sum && rule.partials == ShardingRule::Partials::Additive && allSame)
      passes = llvm::all_of(llvm::seq(0u, n), [&](unsigned i) {
        return !isTensor(i) || in[i].kind == Sh::Partial;
      });
    if (sum && rule.partials == ShardingRule::Partials::Linear &&
        partialOps.size() == 1 && (rule.linearIn >> partialOps.front()) & 1)
      passes = llvm::all_of(llvm::seq(0u, n), [&](unsigned i) {
        return i == partialOps.front() || in[i].kind == Sh::Whole;
      });
    if (passes) {
      required_[op] = in;
      for (Value r : op->getResults())
        sh_[r] = p;
      return;
    }
    for (unsigned i : partialOps)
      in[i] = resolved(op->getOperand(i));
  }

  // One factor may be split: the first split operand's, when the rule can
  // split that dimension and the group divides it (or the op computes every
  // element on its own, which pads).
  int chosen = ShardingRule::kWhole;
  SmallVector<StringRef, 2> axes;
  for (unsigned i = 0; i < n && chosen == ShardingRule::kWhole; ++i) {
    if (!isTensor(i) || in[i].kind != Sh::Split)
      continue;
    int f = rule.operands[i][in[i].dim];
    if (f == ShardingRule::kWhole)
      continue;
    int64_t g = groupSize(in[i].axes);
    const ShardingRule::Factor &factor = rule.factors[f];
    if (in[i].storage && !factor.paddable && !isa<ReduceOp>(op))
      continue;
    int64_t size = tensorTypeOf(op->getOperand(i)).getDimSize(in[i].dim);
    if (factor.size % g != 0 && !(factor.paddable && size == factor.size))
      continue;
    chosen = f;
    axes = in[i].axes;
  }
  bool storage = false;
  for (unsigned i = 0; i < n; ++i)
    if (isTensor(i) && in[i].kind == Sh::Split && in[i].axes == axes &&
        in[i].storage && chosen != ShardingRule::kWhole &&
        rule.operands[i][in[i].dim] == chosen)
      storage = true;
  SmallVector<Sh> req;
  for (unsigned i = 0; i < n; ++i) {
    Sh want = Sh::whole();
    if (isTensor(i) && chosen != ShardingRule::kWhole)
      for (auto [d, f] : llvm::enumerate(rule.operands[i]))
        if (f == chosen) {
          want = Sh::split(d, axes);
          want.storage = storage;
        }
    req.push_back(want);
  }
  required_[op] = req;
  for (auto [k, r] : llvm::enumerate(op->getResults())) {
    Sh out = Sh::whole();
    if (chosen != ShardingRule::kWhole && tensorTypeOf(r)) {
      if (rule.factors[chosen].reduction != Reduction::None)
        out = Sh::partial(rule.factors[chosen].reduction, axes);
      else
        for (auto [d, f] : llvm::enumerate(rule.results[k]))
          if (f == chosen) {
            out = Sh::split(d, axes);
            out.storage = storage;
          }
    }
    sh_[r] = out;
  }
}

LogicalResult Sharder::analyzeFor(scf::ForOp loop) {
  auto yield = cast<scf::YieldOp>(loop.getBody()->getTerminator());
  SmallVector<Sh> carried;
  for (Value init : loop.getInitArgs())
    carried.push_back(tensorTypeOf(init) ? resolved(init) : Sh::whole());
  for (int round = 0;; ++round) {
    for (auto [i, arg] : llvm::enumerate(loop.getRegionIterArgs()))
      sh_[arg] = carried[i];
    if (failed(analyze(*loop.getBody())))
      return failure();
    bool changed = false;
    for (auto [i, v] : llvm::enumerate(yield.getOperands())) {
      if (!tensorTypeOf(v))
        continue;
      Sh next = resolved(v);
      if (next == carried[i])
        continue;
      // Split wins over whole: the loop then carries blocks.
      Sh join = next.kind == Sh::Split ? next : carried[i];
      if (round >= 3)
        join = Sh::whole();
      if (join != carried[i]) {
        carried[i] = join;
        changed = true;
      }
    }
    if (!changed)
      break;
  }
  SmallVector<Sh> req(loop->getNumOperands(), Sh::whole());
  for (auto [i, init] : llvm::enumerate(loop.getInitArgsMutable()))
    req[init.getOperandNumber()] = carried[i];
  required_[loop] = req;
  required_[yield] = SmallVector<Sh>(carried);
  for (auto [i, r] : llvm::enumerate(loop.getResults()))
    sh_[r] = carried[i];
  return success();
}

LogicalResult Sharder::analyze(Block &block) {
  for (Operation &op : block) {
    if (auto loop = dyn_cast<scf::ForOp>(op)) {
      if (failed(analyzeFor(loop)))
        return failure();
      continue;
    }
    if (isa<scf::YieldOp>(op))
      continue;
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      required_[&op] = resultSh_;
      continue;
    }
    if (auto shard = dyn_cast<ShardOp>(op)) {
      ShardingAttr attr = shard.getSharding();
      Sh s = Sh::whole();
      for (int64_t d = 0; d < shard.getType().getRank(); ++d)
        if (!attr.getAxes(d).empty()) {
          if (s.kind == Sh::Split)
            return shard.emitOpError(
                "splits more than one dimension; omni-shard splits at most "
                "one dimension of a tensor");
          s = Sh::split(d, attr.getAxes(d));
        }
      required_[&op] = {s};
      sh_[shard.getResult()] = s;
      continue;
    }
    if (isa<func::CallOp>(op))
      return op.emitOpError("is left in the program; omni-shard runs on "
                            "inlined programs (after the cleanup stage)");
    if (isa<tensor::EmptyOp, tensor::FromElementsOp, tensor::ExtractOp>(op) ||
        op.getNumRegions() != 0) {
      analyzeWhole(&op);
      continue;
    }
    std::optional<ShardingRule> rule = ruleOf(&op);
    if (!rule) {
      analyzeWhole(&op);
      continue;
    }
    analyzeByRule(&op, *rule);
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Rewrite
//===----------------------------------------------------------------------===//

Value Sharder::i64Constant(OpBuilder &b, Location loc, int64_t value) {
  auto t = RankedTensorType::get({}, b.getI64Type());
  return ConstantOp::create(b, loc, DenseElementsAttr::get(t, value));
}

Value Sharder::axisIndex(OpBuilder &b, Location loc, ArrayRef<StringRef> axes) {
  auto t = RankedTensorType::get({}, b.getI64Type());
  return AxisIndexOp::create(b, loc, t, meshRef(), axesAttr(axes));
}

/// axis_index(axes) * scale as an index value.
Value Sharder::blockOffset(OpBuilder &b, Location loc, ArrayRef<StringRef> axes,
                           int64_t scale) {
  Value k = axisIndex(b, loc, axes);
  Value off = MulOp::create(b, loc, k, i64Constant(b, loc, scale));
  Value e = tensor::ExtractOp::create(b, loc, off, ValueRange{});
  return arith::IndexCastOp::create(b, loc, b.getIndexType(), e);
}

/// Makes the local block of a whole value by recomputing its producer at
/// the local shape (random rows keyed by their global position, broadcasts,
/// splats, empty tensors), or null when the producer is not one of those.
Value Sharder::makeLocally(OpBuilder &b, Value v, const Sh &to) {
  Operation *def = v.getDefiningOp();
  RankedTensorType t = tensorTypeOf(v);
  if (!def || t.getDimSize(to.dim) % groupSize(to.axes) != 0)
    return nullptr;
  RankedTensorType local = localType(t, to);
  Location loc = def->getLoc();
  if (auto bcast = dyn_cast<BroadcastInDimOp>(def)) {
    ArrayRef<int64_t> dims = bcast.getDims();
    auto in = tensorTypeOf(bcast.getOperand());
    for (auto [i, d] : llvm::enumerate(dims))
      if (d == to.dim && in.getDimSize(i) != 1)
        return nullptr;
    return BroadcastInDimOp::create(b, loc, local, bcast.getOperand(),
                                    bcast.getDimsAttr());
  }
  if (auto constant = dyn_cast<ConstantOp>(def)) {
    auto dense = dyn_cast<DenseElementsAttr>(constant.getValue());
    if (!dense || !dense.isSplat())
      return nullptr;
    return ConstantOp::create(b, loc, dense.resizeSplat(local));
  }
  if (isa<tensor::EmptyOp>(def))
    return tensor::EmptyOp::create(b, loc, local.getShape(),
                                   local.getElementType());
  if (isa<RandomNormalOp, RandomUniformOp>(def) && to.dim == 0) {
    int64_t rowSize = 1;
    for (int64_t d = 1; d < t.getRank(); ++d)
      rowSize *= t.getDimSize(d);
    int64_t rows = local.getDimSize(0);
    Value shift = MulOp::create(b, loc, axisIndex(b, loc, to.axes),
                                i64Constant(b, loc, rows * rowSize));
    Value offset = AddOp::create(b, loc, def->getOperand(2), shift);
    Operation *clone = b.clone(*def);
    // A new op: not the traced original (the oracle skips untraced ops).
    clone->removeAttr("omni.trace");
    clone->removeAttr("omni.result_shardings");
    clone->setOperand(2, offset);
    clone->getResult(0).setType(local);
    return clone->getResult(0);
  }
  return nullptr;
}

/// `v` (whole shape `global`) with zero rows appended to the split
/// dimension of `to` up to G blocks of c rows; `v` itself when G divides it.
Value Sharder::padToBlocks(OpBuilder &b, Location loc, Value v,
                           RankedTensorType global, const Sh &to) {
  int64_t g = groupSize(to.axes);
  int64_t n = global.getDimSize(to.dim), c = blockSize(n, to.axes);
  if (c * g == n)
    return v;
  SmallVector<int64_t> low(global.getRank(), 0), high(low);
  high[to.dim] = c * g - n;
  SmallVector<int64_t> shape(global.getShape());
  shape[to.dim] = c * g;
  return PadOp::create(b, loc,
                       RankedTensorType::get(shape, global.getElementType()), v,
                       b.getDenseI64ArrayAttr(low),
                       b.getDenseI64ArrayAttr(high), b.getF64FloatAttr(0.0));
}

Value Sharder::convert(OpBuilder &b, Location loc, Value v, const Sh &from,
                       const Sh &to) {
  RankedTensorType global = globalType(v, from);
  if (from == to)
    return v;
  // partial -> ...
  if (from.kind == Sh::Partial) {
    SmallVector<StringRef, 2> rest;
    if (to.kind == Sh::Split && from.reduction == Reduction::Sum &&
        llvm::all_of(to.axes, [&](StringRef a) {
          return llvm::is_contained(from.axes, a);
        })) {
      for (StringRef a : from.axes)
        if (!llvm::is_contained(to.axes, a))
          rest.push_back(a);
      Value x = padToBlocks(b, loc, v, global, to);
      Value y = ReduceScatterOp::create(
          b, loc, localType(global, to),
          ReduceKindAttr::get(b.getContext(), ReduceKind::sum), x, meshRef(),
          axesAttr(to.axes), b.getI64IntegerAttr(to.dim));
      if (!rest.empty())
        y = AllReduceOp::create(
            b, loc, y.getType(),
            ReduceKindAttr::get(b.getContext(), ReduceKind::sum), y, meshRef(),
            axesAttr(rest));
      return y;
    }
    Value whole = AllReduceOp::create(
        b, loc, v.getType(),
        ReduceKindAttr::get(b.getContext(), reduceKindOf(from.reduction)), v,
        meshRef(), axesAttr(from.axes));
    return convert(b, loc, whole, Sh::whole(), to);
  }
  // split -> ...
  if (from.kind == Sh::Split) {
    int64_t g = groupSize(from.axes);
    RankedTensorType local = tensorTypeOf(v);
    SmallVector<int64_t> shape(local.getShape());
    shape[from.dim] *= g;
    Value x = AllGatherOp::create(
        b, loc, RankedTensorType::get(shape, local.getElementType()), v,
        meshRef(), axesAttr(from.axes), b.getI64IntegerAttr(from.dim));
    if (shape[from.dim] != global.getDimSize(from.dim)) {
      SmallVector<int64_t> start(global.getRank(), 0),
          strides(global.getRank(), 1);
      x = SliceOp::create(b, loc, global, x, b.getDenseI64ArrayAttr(start),
                          b.getDenseI64ArrayAttr(global.getShape()),
                          b.getDenseI64ArrayAttr(strides));
    }
    return convert(b, loc, x, Sh::whole(), to);
  }
  // whole -> split
  if (to.kind != Sh::Split)
    return v; // whole -> partial never asked for
  if (Value made = makeLocally(b, v, to))
    return made;
  int64_t c = blockSize(global.getDimSize(to.dim), to.axes);
  Value x = padToBlocks(b, loc, v, global, to);
  RankedTensorType local = localType(global, to);
  SmallVector<OpFoldResult> offsets, sizes, strides;
  for (int64_t d = 0; d < global.getRank(); ++d) {
    offsets.push_back(d == to.dim
                          ? OpFoldResult(blockOffset(b, loc, to.axes, c))
                          : OpFoldResult(b.getIndexAttr(0)));
    sizes.push_back(b.getIndexAttr(local.getDimSize(d)));
    strides.push_back(b.getIndexAttr(1));
  }
  return tensor::ExtractSliceOp::create(b, loc, local, x, offsets, sizes,
                                        strides);
}

Value Sharder::materialize(Value v, const Sh &target, Operation *user) {
  if (!tensorTypeOf(v))
    return v;
  Sh from = shardingOf(v);
  if (from == target)
    return v;
  // Where the conversion goes: right after the definition (a parameter
  // used in a loop is gathered once), or before the user when the user is
  // in a loop the definition is not in and the program asks for per-step
  // gathers.
  Block *defBlock = v.getParentBlock();
  Block *at = defBlock;
  if (perStep_ && user->getBlock() != defBlock)
    at = user->getBlock();
  auto key = std::make_tuple(v.getAsOpaquePointer(), target, at);
  if (auto it = cache_.find(key); it != cache_.end())
    return it->second;
  OpBuilder b(module_.getContext());
  if (at != defBlock)
    b.setInsertionPoint(user);
  else if (Operation *def = v.getDefiningOp())
    b.setInsertionPointAfter(def);
  else
    b.setInsertionPointToStart(defBlock);
  Value out = convert(b, v.getLoc(), v, from, target);
  cache_[key] = out;
  return out;
}

/// Static sizes of a tensor.extract_slice / insert_slice that take a
/// dimension whole at offset 0 shrink with that dimension of `sliced` (the
/// sliced or written-into tensor, at its local type).
template <typename SliceOpT>
static void clampSizes(SliceOpT op, RankedTensorType sliced) {
  SmallVector<int64_t> sizes(op.getStaticSizes());
  for (int64_t d = 0; d < sliced.getRank(); ++d)
    if (sizes[d] != ShapedType::kDynamic && !op.isDynamicOffset(d) &&
        op.getStaticOffset(d) == 0 && sizes[d] > sliced.getDimSize(d))
      sizes[d] = sliced.getDimSize(d);
  op.setStaticSizes(sizes);
}

/// Gives op's results and region arguments their local types.
void Sharder::retype(Operation *op) {
  for (Value r : op->getResults())
    if (RankedTensorType t = tensorTypeOf(r)) {
      Sh s = shardingOf(r);
      if (s.kind == Sh::Split) {
        globalDims_[r.getAsOpaquePointer()] = t.getDimSize(s.dim);
        r.setType(localType(t, s));
      }
    }
  if (auto slice = dyn_cast<SliceOp>(op)) {
    SmallVector<int64_t> limit(slice.getLimit());
    auto in = tensorTypeOf(slice.getOperand());
    for (int64_t d = 0; d < in.getRank(); ++d)
      if (slice.getStart()[d] == 0 && limit[d] > in.getDimSize(d))
        limit[d] = in.getDimSize(d);
    slice.setLimit(limit);
  }
  if (auto slice = dyn_cast<tensor::ExtractSliceOp>(op))
    clampSizes(slice, slice.getSourceType());
  if (auto insert = dyn_cast<tensor::InsertSliceOp>(op))
    clampSizes(insert, insert.getDestType());
}

LogicalResult Sharder::rewrite(Block &block) {
  for (Operation &op : llvm::make_early_inc_range(block)) {
    if (auto shard = dyn_cast<ShardOp>(op)) {
      Value x = materialize(shard.getOperand(), required_[&op][0], &op);
      if (x != shard.getOperand()) {
        globalDims_[x.getAsOpaquePointer()] =
            shard.getType().getDimSize(required_[&op][0].dim);
      }
      sh_[x] = required_[&op][0];
      shard.getResult().replaceAllUsesWith(x);
      op.erase();
      continue;
    }
    auto req = required_.find(&op);
    if (req != required_.end())
      for (auto [i, want] : llvm::enumerate(req->second)) {
        Value v = op.getOperand(i);
        Value x = materialize(v, want, &op);
        if (x != v) {
          if (want.kind == Sh::Split)
            globalDims_[x.getAsOpaquePointer()] =
                globalType(v, shardingOf(v)).getDimSize(want.dim);
          sh_[x] = want;
          op.setOperand(i, x);
        }
      }
    if (auto loop = dyn_cast<scf::ForOp>(op)) {
      for (BlockArgument arg : loop.getRegionIterArgs())
        if (RankedTensorType t = tensorTypeOf(arg)) {
          Sh s = shardingOf(arg);
          if (s.kind == Sh::Split) {
            globalDims_[arg.getAsOpaquePointer()] = t.getDimSize(s.dim);
            arg.setType(localType(t, s));
          }
        }
      if (failed(rewrite(*loop.getBody())))
        return failure();
    }
    retype(&op);
    if (trace_ && op.hasAttr("omni.trace")) {
      SmallVector<Attribute> shardings;
      Builder b(op.getContext());
      for (Value r : op.getResults()) {
        Sh s = shardingOf(r);
        RankedTensorType t = tensorTypeOf(r);
        if (s.kind == Sh::Partial) {
          std::string text =
              ("partial:" + reductionName(s.reduction) + ":").str();
          text += llvm::join(s.axes, ",");
          shardings.push_back(b.getStringAttr(text));
          continue;
        }
        SmallVector<Attribute> dims;
        for (int64_t d = 0; d < (t ? t.getRank() : 0); ++d)
          dims.push_back(s.kind == Sh::Split && s.dim == d
                             ? b.getStrArrayAttr(SmallVector<StringRef>(
                                   s.axes.begin(), s.axes.end()))
                             : b.getStrArrayAttr({}));
        shardings.push_back(ShardingAttr::get(op.getContext(), meshRef(),
                                              b.getArrayAttr(dims)));
      }
      op.setAttr("omni.result_shardings", b.getArrayAttr(shardings));
    }
  }
  return success();
}

LogicalResult Sharder::run(func::FuncOp fn) {
  sh_.clear();
  pref_.clear();
  required_.clear();
  cache_.clear();
  argSh_.assign(fn.getNumArguments(), Sh::whole());
  resultSh_.assign(fn.getNumResults(), Sh::whole());
  auto parse = [&](DictionaryAttr attrs, Type type, bool isArg, unsigned index,
                   Sh &out) -> LogicalResult {
    auto attr = attrs ? attrs.getAs<ShardingAttr>("omni.sharding") : nullptr;
    if (!attr)
      return success();
    auto what = [&] {
      return (Twine(isArg ? "argument " : "result ") + Twine(index)).str();
    };
    if (!attrs.get("omni.state"))
      return fn.emitOpError() << what() << " has omni.sharding but is not "
                              << "state (omni.state): only state is split at "
                                 "a function's boundary; split data with "
                                 "omni.shard in the body";
    auto t = dyn_cast<RankedTensorType>(type);
    if (!t || t.getRank() == 0)
      return fn.emitOpError() << what() << " is a 0-D tensor and cannot be "
                              << "split";
    if (static_cast<int64_t>(attr.getDims().size()) != t.getRank())
      return fn.emitOpError()
             << what() << "'s sharding has " << attr.getDims().size()
             << " entries but the tensor has rank " << t.getRank();
    if (attr.getMesh() != meshRef())
      return fn.emitOpError()
             << what() << "'s sharding names mesh " << attr.getMesh()
             << " but the module's mesh is " << meshRef();
    for (int64_t d = 0; d < t.getRank(); ++d) {
      SmallVector<StringRef> axes = attr.getAxes(d);
      if (axes.empty())
        continue;
      for (StringRef a : axes)
        if (!mesh_.getAxisSize(a))
          return fn.emitOpError()
                 << what() << "'s sharding names axis \"" << a
                 << "\" that mesh " << meshRef() << " does not have";
      if (out.kind == Sh::Split)
        return fn.emitOpError() << what() << " splits more than one "
                                << "dimension; omni-shard splits at most one "
                                   "dimension of a tensor";
      out = Sh::split(d, axes);
      out.storage = true;
    }
    return success();
  };
  for (unsigned i = 0; i < fn.getNumArguments(); ++i)
    if (failed(parse(fn.getArgAttrDict(i), fn.getArgumentTypes()[i], true, i,
                     argSh_[i])))
      return failure();
  for (unsigned i = 0; i < fn.getNumResults(); ++i)
    if (failed(parse(fn.getResultAttrDict(i), fn.getResultTypes()[i], false, i,
                     resultSh_[i])))
      return failure();
  // A state slot has one layout: on entry and on return.
  llvm::StringMap<std::pair<Sh, unsigned>> stateLayout;
  for (unsigned i = 0; i < fn.getNumArguments(); ++i)
    if (auto name = fn.getArgAttrOfType<StringAttr>(i, "omni.state"))
      stateLayout[name.getValue()] = {argSh_[i], i};
  for (unsigned i = 0; i < fn.getNumResults(); ++i)
    if (auto name = fn.getResultAttrOfType<StringAttr>(i, "omni.state")) {
      auto it = stateLayout.find(name.getValue());
      if (it != stateLayout.end() && it->second.first != resultSh_[i])
        return fn.emitOpError()
               << "state '" << name.getValue() << "' is split differently "
               << "as argument " << it->second.second << " and as result " << i
               << "; a state slot has one layout";
    }

  Block &entry = fn.getBody().front();
  for (auto [i, arg] : llvm::enumerate(entry.getArguments()))
    sh_[arg] = argSh_[i];
  prefer(entry);
  if (failed(analyze(entry)))
    return failure();
  // Arguments take their local types first: their uses convert from them.
  Builder b(fn.getContext());
  for (auto [i, arg] : llvm::enumerate(entry.getArguments()))
    if (argSh_[i].kind == Sh::Split) {
      auto t = cast<RankedTensorType>(arg.getType());
      globalDims_[arg.getAsOpaquePointer()] = t.getDimSize(argSh_[i].dim);
      fn.setArgAttr(i, "omni.global_type", TypeAttr::get(t));
      arg.setType(localType(t, argSh_[i]));
    }
  for (unsigned i = 0; i < fn.getNumResults(); ++i)
    if (resultSh_[i].kind == Sh::Split)
      fn.setResultAttr(i, "omni.global_type",
                       TypeAttr::get(fn.getResultTypes()[i]));
  if (failed(rewrite(entry)))
    return failure();
  auto ret = cast<func::ReturnOp>(entry.getTerminator());
  fn.setType(FunctionType::get(fn.getContext(), entry.getArgumentTypes(),
                               ret.getOperandTypes()));
  return success();
}

/// A function already in per-rank form (written by hand, or sharded
/// before): its split state carries omni.global_type. It is kept as is.
bool isSharded(func::FuncOp fn) {
  for (unsigned i = 0; i < fn.getNumArguments(); ++i)
    if (fn.getArgAttr(i, "omni.global_type"))
      return true;
  for (unsigned i = 0; i < fn.getNumResults(); ++i)
    if (fn.getResultAttr(i, "omni.global_type"))
      return true;
  return false;
}

struct OmniShardPass : omni::impl::OmniShardPassBase<OmniShardPass> {
  using OmniShardPassBase::OmniShardPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (trace || traceOnly) {
      int64_t id = 0;
      Builder b(module.getContext());
      module.walk([&](Operation *op) {
        if (op->getDialect() && !isa<func::FuncOp, ModuleOp, MeshOp>(op))
          op->setAttr("omni.trace", b.getI64IntegerAttr(id++));
      });
    }
    if (traceOnly)
      return;
    SmallVector<MeshOp> meshes(module.getOps<MeshOp>());
    if (meshes.empty()) {
      WalkResult walk = module.walk([&](ShardOp op) {
        op.emitOpError("needs an omni.mesh in the module");
        return WalkResult::interrupt();
      });
      if (walk.wasInterrupted())
        signalPassFailure();
      return;
    }
    if (meshes.size() > 1) {
      meshes[1].emitOpError("is a second mesh; omni-shard supports one "
                            "mesh per program");
      return signalPassFailure();
    }
    bool perStep = false;
    if (Attribute a = module->getAttr("omni.shard_gather")) {
      auto s = dyn_cast<StringAttr>(a);
      if (!s || (s.getValue() != "once" && s.getValue() != "per-step")) {
        module.emitOpError("omni.shard_gather is ")
            << a << " but must be \"once\" or \"per-step\"";
        return signalPassFailure();
      }
      perStep = s.getValue() == "per-step";
    }
    Sharder sharder(module, meshes.front(), perStep, trace);
    for (auto fn : llvm::make_early_inc_range(module.getOps<func::FuncOp>()))
      if (!fn.isExternal() && !isSharded(fn) && failed(sharder.run(fn)))
        return signalPassFailure();
  }
};

} // namespace
