//===- Autodiff.cpp - Expand grad / value_and_grad into reverse mode -----===//
//
// omni-autodiff replaces every omni.grad / omni.value_and_grad by a call to
// a generated function that runs the callee forward and then its adjoint
// (reverse-mode) program, built from the VJP rule each differentiable op
// carries (VJPOpInterface).
//
//===----------------------------------------------------------------------===//

#include "dialects/omni/OmniOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/CSE.h"
#include "llvm/ADT/StringSet.h"

#define DEBUG_TYPE "omni-autodiff"

namespace mlir::omni {
#define GEN_PASS_DEF_OMNIAUTODIFFPASS
#include "passes/Passes.h.inc"
} // namespace mlir::omni

using namespace mlir;
using namespace mlir::omni;

namespace {

/// A func.func whose calls omni-autodiff recomputes (as if named in
/// `recompute`); the frontends set it with no_inline.
constexpr llvm::StringLiteral kRecomputeAttr = "omni.recompute";
/// On the backward program's copies of recomputed forward ops.
constexpr llvm::StringLiteral kRecomputedAttr = "omni.recomputed";

bool isFloatTensor(Type t) {
  auto tt = dyn_cast<RankedTensorType>(t);
  return tt && isa<FloatType>(tt.getElementType());
}

/// Float tensors carry adjoints; float scalars (tensor.extract results,
/// arith on f32) carry none, but a value that depends on a wrt argument
/// through one must still count as varied, so that the op that turns it
/// back into a tensor is reported instead of silently cutting the
/// gradient to zero.
bool carriesDerivative(Type t) { return isa<FloatType>(t) || isFloatTensor(t); }

Value zerosLike(OpBuilder &b, Location loc, Type type) {
  auto t = cast<RankedTensorType>(type);
  return ConstantOp::create(
      b, loc,
      DenseElementsAttr::get(t, FloatAttr::get(t.getElementType(), 0.0)));
}

/// Builds the forward-and-adjoint function of one (callee, wrt) pair.
class GradientBuilder {
public:
  GradientBuilder(ModuleOp module, func::FuncOp callee, ArrayRef<int64_t> wrt,
                  bool withValues, const llvm::StringSet<> &recompute)
      : module(module), callee(callee), wrt(wrt), withValues(withValues),
        recompute(recompute) {}

  /// Returns the generated function, or null after emitting at `user`.
  func::FuncOp build(Operation *user, StringRef name);

private:
  LogicalResult inlineCalls(func::FuncOp fn, Operation *user);
  LogicalResult unrollLoops(func::FuncOp fn, Operation *user);
  void analyzeActivity(Block &body, Value loss);
  LogicalResult checkIntegerMath(Block &body);
  LogicalResult buildAdjoints(OpBuilder &b, Block &body, Value loss);
  LogicalResult differentiateUpstream(OpBuilder &b, Operation *op,
                                      ArrayRef<Value> resultAdjoints,
                                      SmallVectorImpl<Value> &operandAdjoints);
  void rematerialize(Block &body, Operation *firstBackward);
  void accumulate(OpBuilder &b, Value v, Value adjoint);

  ModuleOp module;
  func::FuncOp callee;
  ArrayRef<int64_t> wrt;
  bool withValues;
  const llvm::StringSet<> &recompute;

  /// Float values (tensors and scalars) that depend on a wrt argument, with
  /// the first such argument (for diagnostics).
  DenseMap<Value, int64_t> varied;
  /// Values the loss depends on.
  DenseSet<Value> useful;
  DenseMap<Value, Value> adjoints;
};

func::FuncOp GradientBuilder::build(Operation *user, StringRef name) {
  OpBuilder b(module.getContext());
  b.setInsertionPointAfter(callee);
  FunctionType fnType = callee.getFunctionType();
  SmallVector<Type> results;
  if (withValues)
    llvm::append_range(results, fnType.getResults());
  for (int64_t w : wrt)
    results.push_back(fnType.getInput(w));
  auto fn = func::FuncOp::create(
      b, callee.getLoc(), name, b.getFunctionType(fnType.getInputs(), results));
  fn.setPrivate();
  IRMapping mapping;
  callee.getBody().cloneInto(&fn.getBody(), mapping);
  if (!fn.getBody().hasOneBlock()) {
    user->emitOpError("cannot differentiate ")
        << callee.getSymName() << ": it has more than one block";
    fn.erase();
    return {};
  }
  if (failed(inlineCalls(fn, user))) {
    fn.erase();
    return {};
  }
  // The calls the cleanup stage left (no_inline: the recomputed blocks) are
  // inlined only now, so CSE has not yet seen their bodies together: without
  // it, two trained steps would each keep their own copy of what they compute
  // alike (block 0's text-token layer norm), their adjoints would be summed
  // in another order than with recompute=none, and the bits would differ.
  // CSE compares attributes, so a recomputed op merges only with a
  // recomputed one.
  IRRewriter rewriter(fn.getContext());
  DominanceInfo dominance(fn);
  eliminateCommonSubExpressions(rewriter, dominance, fn);
  if (failed(unrollLoops(fn, user))) {
    fn.erase();
    return {};
  }
  Block &body = fn.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  Value loss = ret.getOperand(0);
  analyzeActivity(body, loss);
  if (failed(checkIntegerMath(body))) {
    fn.erase();
    return {};
  }

  // The backward program goes between the forward and the return.
  b.setInsertionPoint(ret);
  Operation *marker = nullptr;
  SmallVector<Value> outs;
  if (withValues)
    llvm::append_range(outs, ret.getOperands());
  if (useful.contains(loss) && varied.contains(loss)) {
    Value one = ConstantOp::create(
        b, ret.getLoc(),
        DenseElementsAttr::get(
            cast<RankedTensorType>(loss.getType()),
            FloatAttr::get(
                cast<RankedTensorType>(loss.getType()).getElementType(), 1.0)));
    marker = one.getDefiningOp();
    adjoints[loss] = one;
    if (failed(buildAdjoints(b, body, loss))) {
      fn.erase();
      return {};
    }
  }
  for (int64_t w : wrt) {
    Value arg = body.getArgument(w);
    Value adj = adjoints.lookup(arg);
    outs.push_back(adj ? adj : zerosLike(b, ret.getLoc(), arg.getType()));
  }
  ret->setOperands(outs);
  if (marker && !recompute.empty())
    rematerialize(body, marker);

  // Drop what the gradient does not need: the adjoints of inactive operands
  // and, for omni.grad, the forward values nothing reads.
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
    if (isOpTriviallyDead(&op))
      op.erase();
  return fn;
}

/// What MLIR's inliner does to the locations of the ops it inlines: each
/// clone's location, and its nested ops', becomes callsite(own at call), so
/// an inlined op still names the phase of the code that called it (the
/// step.bin writer takes a call site's caller first; docs/backend.md).
static void atCallSite(Operation *clone, Location call) {
  clone->walk(
      [&](Operation *op) { op->setLoc(CallSiteLoc::get(op->getLoc(), call)); });
}

LogicalResult GradientBuilder::inlineCalls(func::FuncOp fn, Operation *user) {
  for (int depth = 0;; ++depth) {
    SmallVector<func::CallOp> calls;
    fn.walk([&](func::CallOp call) { calls.push_back(call); });
    if (calls.empty())
      return success();
    if (depth > 64)
      return user->emitOpError("cannot differentiate ")
             << callee.getSymName() << ": calls nest deeper than 64";
    for (func::CallOp call : calls) {
      auto target = module.lookupSymbol<func::FuncOp>(call.getCallee());
      if (!target || target.isExternal() || !target.getBody().hasOneBlock())
        return call.emitOpError("cannot be differentiated through: ")
               << call.getCalleeAttr()
               << " must be a func.func with a one-block body";
      OpBuilder b(call);
      IRMapping mapping;
      Block &tb = target.getBody().front();
      mapping.map(tb.getArguments(), call.getOperands());
      bool tag = recompute.contains(call.getCallee());
      // The ops that compute the call's results are not tagged: the results
      // are the checkpoints the recomputation starts from.
      for (Operation &op : tb.without_terminator()) {
        Operation *clone = b.clone(op, mapping);
        atCallSite(clone, call.getLoc());
        bool result = llvm::any_of(op.getResults(), [&](Value r) {
          return llvm::is_contained(tb.getTerminator()->getOperands(), r);
        });
        if (tag && !result)
          clone->setAttr("omni.recompute", b.getUnitAttr());
      }
      for (auto [res, val] :
           llvm::zip(call.getResults(), tb.getTerminator()->getOperands()))
        res.replaceAllUsesWith(mapping.lookupOrDefault(val));
      call.erase();
    }
  }
}

LogicalResult GradientBuilder::unrollLoops(func::FuncOp fn, Operation *user) {
  SmallVector<scf::ForOp> loops;
  fn.walk([&](scf::ForOp loop) { loops.push_back(loop); }); // inner first
  for (scf::ForOp loop : loops) {
    if (!loop.getStaticTripCount())
      return loop.emitOpError("cannot be differentiated: the trip count is "
                              "not a compile-time constant");
    if (failed(loopUnrollFull(loop)))
      return loop.emitOpError("cannot be unrolled for differentiation");
  }
  return success();
}

void GradientBuilder::analyzeActivity(Block &body, Value loss) {
  for (auto [i, w] : llvm::enumerate(wrt))
    varied[body.getArgument(w)] = w;
  for (Operation &op : body) {
    std::optional<int64_t> source;
    op.walk([&](Operation *inner) {
      for (Value v : inner->getOperands())
        if (auto it = varied.find(v); it != varied.end() && !source)
          source = it->second;
    });
    if (!source)
      continue;
    for (Value r : op.getResults())
      if (carriesDerivative(r.getType()))
        varied[r] = *source;
  }
  useful.insert(loss);
  for (Operation &op : llvm::reverse(body))
    if (llvm::any_of(op.getResults(),
                     [&](Value r) { return useful.contains(r); }))
      op.walk([&](Operation *inner) {
        for (Value v : inner->getOperands())
          useful.insert(v);
      });
}

LogicalResult GradientBuilder::checkIntegerMath(Block &body) {
  for (Operation &op : body) {
    Operation *opPtr = &op;
    // Integer math cuts the derivative silently; refuse it on the path.
    if (auto cast = dyn_cast<CastOp>(opPtr);
        cast && varied.contains(cast.getOperand()) &&
        useful.contains(cast.getResult()) && !isFloatTensor(cast.getType()))
      return cast.emitOpError("converts a value that depends on argument #")
             << varied.lookup(cast.getOperand()) << " of "
             << callee.getSymName()
             << " to integers on the path to its loss; integer math is not "
                "differentiable";
  }
  return success();
}

void GradientBuilder::accumulate(OpBuilder &b, Value v, Value adjoint) {
  auto [it, inserted] = adjoints.try_emplace(v, adjoint);
  if (!inserted)
    it->second = AddOp::create(b, adjoint.getLoc(), it->second, adjoint);
}

LogicalResult GradientBuilder::buildAdjoints(OpBuilder &b, Block &body,
                                             Value loss) {
  SmallVector<Operation *> forward;
  for (Operation &op : body.without_terminator())
    forward.push_back(&op);
  for (Operation *op : llvm::reverse(forward)) {
    bool active = llvm::any_of(op->getResults(), [&](Value r) {
      return useful.contains(r) && varied.contains(r);
    });
    if (!active)
      continue;
    SmallVector<Value> resultAdjoints;
    for (Value r : op->getResults())
      resultAdjoints.push_back(adjoints.lookup(r));
    if (llvm::all_of(resultAdjoints, [](Value v) { return !v; }))
      continue;
    SmallVector<Value> operandAdjoints;
    if (auto vjp = dyn_cast<VJPOpInterface>(op)) {
      if (failed(vjp.buildVJP(b, resultAdjoints, operandAdjoints)))
        return failure();
    } else if (failed(differentiateUpstream(b, op, resultAdjoints,
                                            operandAdjoints))) {
      return failure();
    }
    for (auto [operand, adj] : llvm::zip(op->getOperands(), operandAdjoints))
      if (adj && varied.contains(operand))
        accumulate(b, operand, adj);
  }
  return success();
}

LogicalResult GradientBuilder::differentiateUpstream(
    OpBuilder &b, Operation *op, ArrayRef<Value> resultAdjoints,
    SmallVectorImpl<Value> &operandAdjoints) {
  Location loc = op->getLoc();
  operandAdjoints.assign(op->getNumOperands(), Value());
  if (auto extract = dyn_cast<tensor::ExtractSliceOp>(op)) {
    // The slice's adjoint lands in the slice of a zero tensor.
    Value zero = zerosLike(b, loc, extract.getSourceType());
    operandAdjoints[0] = tensor::InsertSliceOp::create(
        b, loc, resultAdjoints[0], zero, extract.getMixedOffsets(),
        extract.getMixedSizes(), extract.getMixedStrides());
    return success();
  }
  if (auto insert = dyn_cast<tensor::InsertSliceOp>(op)) {
    Value adj = resultAdjoints[0];
    // source: the slice of the adjoint; dest: the adjoint with the slice
    // zeroed (those elements were overwritten).
    operandAdjoints[0] = tensor::ExtractSliceOp::create(
        b, loc, insert.getSourceType(), adj, insert.getMixedOffsets(),
        insert.getMixedSizes(), insert.getMixedStrides());
    Value zero = zerosLike(b, loc, insert.getSourceType());
    operandAdjoints[1] = tensor::InsertSliceOp::create(
        b, loc, zero, adj, insert.getMixedOffsets(), insert.getMixedSizes(),
        insert.getMixedStrides());
    return success();
  }
  // Name the op and the argument whose gradient it blocks.
  int64_t arg = -1;
  for (Value v : op->getOperands())
    if (auto it = varied.find(v); it != varied.end()) {
      arg = it->second;
      break;
    }
  return op->emitOpError("is not differentiable but lies on the path from "
                         "argument #")
         << arg << " of " << callee.getSymName() << " to its loss";
}

/// Forward ops tagged omni.recompute (from calls named in `recompute`) that
/// the backward program reads are cloned right before their first backward
/// use, so their forward values need not stay alive until then. Except a
/// cast of an argument to an element type no wider (a weight's bf16 copy):
/// keeping it costs at most the bytes of the argument, which stays alive
/// anyway, and recomputing it would be another pass over the weight.
void GradientBuilder::rematerialize(Block &body, Operation *firstBackward) {
  DenseMap<Value, Value> recomputed;
  auto keptCast = [&](Operation *def) {
    auto cast = dyn_cast<CastOp>(def);
    if (!cast)
      return false;
    auto arg = dyn_cast<BlockArgument>(cast->getOperand(0));
    auto from = dyn_cast<RankedTensorType>(cast->getOperand(0).getType());
    auto to = dyn_cast<RankedTensorType>(cast->getResult(0).getType());
    return arg && arg.getOwner() == &body && from && to &&
           to.getElementTypeBitWidth() <= from.getElementTypeBitWidth();
  };
  auto isForwardRecompute = [&](Value v) {
    Operation *def = v.getDefiningOp();
    return def && def->hasAttr("omni.recompute") &&
           def->isBeforeInBlock(firstBackward) && !keptCast(def);
  };
  std::function<Value(Value, OpBuilder &)> materialize = [&](Value v,
                                                             OpBuilder &b) {
    if (!isForwardRecompute(v))
      return v;
    if (Value done = recomputed.lookup(v))
      return done;
    Operation *def = v.getDefiningOp();
    IRMapping mapping;
    for (Value operand : def->getOperands())
      mapping.map(operand, materialize(operand, b));
    Operation *clone = b.clone(*def, mapping);
    // The mark keeps CSE from merging the copy back into the forward op it
    // repeats (CSE compares attributes); it has no other meaning.
    clone->removeAttr("omni.recompute");
    clone->setAttr(kRecomputedAttr, b.getUnitAttr());
    for (auto [orig, copy] : llvm::zip(def->getResults(), clone->getResults()))
      recomputed[orig] = copy;
    return recomputed.lookup(v);
  };
  SmallVector<Operation *> backward;
  for (Operation *op = firstBackward; op; op = op->getNextNode())
    backward.push_back(op);
  for (Operation *op : backward) {
    OpBuilder b(op);
    for (OpOperand &use : op->getOpOperands())
      if (isForwardRecompute(use.get()))
        use.set(materialize(use.get(), b));
  }
  for (Operation &op : body)
    op.removeAttr("omni.recompute");
}

struct OmniAutodiffPass
    : mlir::omni::impl::OmniAutodiffPassBase<OmniAutodiffPass> {
  using OmniAutodiffPassBase::OmniAutodiffPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    // The functions named in `recompute` and those the frontend marked
    // omni.recompute (with no_inline, so that the cleanup stage's inliner
    // left their calls for this pass; docs/autodiff.md).
    llvm::StringSet<> recomputeSet;
    for (const std::string &name : recompute)
      recomputeSet.insert(name);
    SmallVector<func::FuncOp> marked;
    for (auto fn : module.getOps<func::FuncOp>())
      if (fn->hasAttr(kRecomputeAttr)) {
        recomputeSet.insert(fn.getSymName());
        marked.push_back(fn);
      }
    SmallVector<Operation *> markers;
    module.walk([&](Operation *op) {
      if (isa<GradOp, ValueAndGradOp>(op))
        markers.push_back(op);
    });
    llvm::StringMap<func::FuncOp> generated;
    for (Operation *op : markers) {
      bool withValues = isa<ValueAndGradOp>(op);
      auto calleeAttr = op->getAttrOfType<FlatSymbolRefAttr>("callee");
      ArrayRef<int64_t> wrt = withValues ? cast<ValueAndGradOp>(op).getWrt()
                                         : cast<GradOp>(op).getWrt();
      std::string name =
          (calleeAttr.getValue() + (withValues ? "_value_and_grad" : "_grad"))
              .str();
      for (int64_t w : wrt)
        name += "_" + std::to_string(w);
      func::FuncOp fn = generated.lookup(name);
      if (!fn) {
        auto callee = module.lookupSymbol<func::FuncOp>(calleeAttr);
        GradientBuilder builder(module, callee, wrt, withValues, recomputeSet);
        fn = builder.build(op, name);
        if (!fn)
          return signalPassFailure();
        generated[name] = fn;
      }
      OpBuilder b(op);
      auto call = func::CallOp::create(b, op->getLoc(), fn, op->getOperands());
      op->replaceAllUsesWith(call.getResults());
      op->erase();
    }
    // The calls left (outside gradients: the rollout's) are inlined here,
    // as the cleanup stage would have, and the marked functions go.
    SmallVector<func::CallOp> rest;
    module.walk([&](func::CallOp call) {
      if (llvm::any_of(marked, [&](func::FuncOp fn) {
            return fn.getSymName() == call.getCallee();
          }))
        rest.push_back(call);
    });
    for (func::CallOp call : rest) {
      auto target = module.lookupSymbol<func::FuncOp>(call.getCallee());
      OpBuilder b(call);
      IRMapping mapping;
      Block &tb = target.getBody().front();
      mapping.map(tb.getArguments(), call.getOperands());
      for (Operation &op : tb.without_terminator())
        atCallSite(b.clone(op, mapping), call.getLoc());
      for (auto [res, val] :
           llvm::zip(call.getResults(), tb.getTerminator()->getOperands()))
        res.replaceAllUsesWith(mapping.lookupOrDefault(val));
      call.erase();
    }
    for (func::FuncOp fn : marked)
      fn.erase();
  }
};

} // namespace
