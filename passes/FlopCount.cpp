//===- FlopCount.cpp - The FLOPs of a program -------------------*- C++ -*-===//
//
// The counting rules are FlopCount.h's; ops are told apart by name so that
// every stage of the pipeline (composites before omni-decompose, fusion
// regions after omni-fuse) counts the same way.
//
//===----------------------------------------------------------------------===//

#include "passes/FlopCount.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Location.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringSet.h"

#include <optional>

namespace mlir::omni {

int64_t FlopCounts::total() const {
  int64_t sum = 0;
  for (int64_t f : flops)
    sum += f;
  return sum;
}

FlopCounts &FlopCounts::operator+=(const FlopCounts &other) {
  for (int i = 0; i < kNumFlopClasses; ++i)
    flops[i] += other.flops[i];
  return *this;
}

namespace {

FlopCounts scaled(FlopCounts c, int64_t factor) {
  for (int64_t &f : c.flops)
    f *= factor;
  return c;
}

/// As step.bin's Command.phase (compiler/stepbin/WriterValues.cpp): the
/// outermost name of the location.
std::string phaseOf(Location loc) {
  if (auto site = dyn_cast<CallSiteLoc>(loc)) {
    std::string caller = phaseOf(site.getCaller());
    return caller.empty() ? phaseOf(site.getCallee()) : caller;
  }
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location part : fused.getLocations())
      if (std::string p = phaseOf(part); !p.empty())
        return p;
  return "";
}

int64_t elements(Type type) {
  auto ranked = dyn_cast<RankedTensorType>(type);
  return ranked && ranked.hasStaticShape() ? ranked.getNumElements() : 0;
}

ArrayRef<int64_t> shapeOf(Value v) {
  if (auto ranked = dyn_cast<RankedTensorType>(v.getType()))
    return ranked.getShape();
  return {};
}

int64_t product(ArrayRef<int64_t> dims) {
  int64_t p = 1;
  for (int64_t d : dims)
    p *= d;
  return p;
}

const llvm::StringSet<> &elementwiseOps() {
  static const llvm::StringSet<> ops = {
      "neg",  "abs", "sign",    "exp",   "log",      "sqrt",  "rsqrt",
      "tanh", "sin", "cos",     "erf",   "logistic", "floor", "is_finite",
      "add",  "sub", "mul",     "div",   "max",      "min",   "pow",
      "and",  "or",  "compare", "select"};
  return ops;
}

/// The FLOPs of `op` itself (not of its regions).
FlopCounts ownFlops(Operation *op) {
  FlopCounts c;
  // Counted from the first result's elements (or, for the contractions,
  // their operands' shapes); ops without a rule count nothing.
  if (op->getName().getDialectNamespace() != "omni" || op->getNumResults() == 0)
    return c;
  llvm::StringRef name = op->getName().stripDialect();
  const int64_t out = elements(op->getResult(0).getType());
  auto add = [&](FlopClass k, int64_t f) { c.flops[static_cast<int>(k)] += f; };
  if (name == "matmul") {
    ArrayRef<int64_t> lhs = shapeOf(op->getOperand(0));
    if (lhs.size() >= 2) {
      int64_t k =
          op->hasAttr("transpose_lhs") ? lhs[lhs.size() - 2] : lhs.back();
      add(FlopClass::Matmul, 2 * out * k);
    }
  } else if (name == "linear") {
    // input [..., K] x weight [N, K]: 2 K per output element, plus a bias.
    ArrayRef<int64_t> in = shapeOf(op->getOperand(0));
    if (!in.empty())
      add(FlopClass::Matmul, 2 * out * in.back());
    if (op->getNumOperands() > 2)
      add(FlopClass::Elementwise, out);
  } else if (name == "attention") {
    ArrayRef<int64_t> q = shapeOf(op->getOperand(0)),
                      k = shapeOf(op->getOperand(1)),
                      v = shapeOf(op->getOperand(2));
    if (q.size() == 4 && k.size() == 4 && v.size() == 4) {
      int64_t scores = q[0] * q[1] * q[2] * k[2];
      add(FlopClass::Attention,
          2 * scores * q[3] + 2 * scores * v[3] + 5 * scores);
    }
  } else if (name == "attention_grad") {
    ArrayRef<int64_t> q = shapeOf(op->getOperand(0));
    ArrayRef<int64_t> k = shapeOf(op->getOperand(1));
    ArrayRef<int64_t> v = shapeOf(op->getOperand(2));
    if (q.size() == 4 && k.size() == 4 && v.size() == 4) {
      // As its decomposition: q k^T again, dO v^T, P^T dO, dS k, dS^T q,
      // and the softmax and its backward elementwise.
      int64_t scores = q[0] * q[1] * q[2] * k[2];
      add(FlopClass::Attention,
          2 * scores * (3 * q[3] + 2 * v[3]) + 8 * scores);
    }
  } else if (name == "conv2d") {
    ArrayRef<int64_t> filter = shapeOf(op->getOperand(1));
    if (filter.size() == 4)
      add(FlopClass::Conv2d, 2 * out * product(filter.drop_front()));
  } else if (name == "reduce") {
    add(FlopClass::Reduction, elements(op->getOperand(0).getType()));
  } else if (elementwiseOps().contains(name)) {
    add(FlopClass::Elementwise, out);
  } else if (name == "softmax" || name == "rms_norm") {
    add(FlopClass::Elementwise, 5 * out);
  } else if (name == "layer_norm" || name == "gelu") {
    add(FlopClass::Elementwise, 8 * out);
  } else if (name == "silu") {
    add(FlopClass::Elementwise, 4 * out);
  }
  return c;
}

std::optional<int64_t> tripCount(scf::ForOp loop) {
  std::optional<int64_t> lb = getConstantIntValue(loop.getLowerBound());
  std::optional<int64_t> ub = getConstantIntValue(loop.getUpperBound());
  std::optional<int64_t> step = getConstantIntValue(loop.getStep());
  if (!lb || !ub || !step || *step <= 0)
    return std::nullopt;
  return *ub <= *lb ? 0 : (*ub - *lb + *step - 1) / *step;
}

using Phases = std::vector<std::pair<std::string, FlopCounts>>;

void addTo(Phases &phases, const std::string &phase, const FlopCounts &c) {
  if (c.total() == 0)
    return;
  for (auto &[name, counts] : phases)
    if (name == phase) {
      counts += c;
      return;
    }
  phases.push_back({phase, c});
}

class Counter {
public:
  explicit Counter(ModuleOp module) : module_(module) {}

  /// The ops of `block` times `factor`, into `phases`; `loops` (when not
  /// null) gains the block's scf.for loops.
  void count(Block &block, int64_t factor, const std::string &outer,
             Phases &phases, std::vector<FunctionFlops::Loop> *loops) {
    for (Operation &op : block) {
      std::string phase = phaseOf(op.getLoc());
      if (phase.empty())
        phase = outer;
      if (auto loop = dyn_cast<scf::ForOp>(op)) {
        // A loop of unknown trip count counts one trip.
        int64_t trips = tripCount(loop).value_or(1);
        count(*loop.getBody(), factor * trips, phase, phases, nullptr);
        if (loops) {
          Phases one;
          count(*loop.getBody(), 1, phase, one, nullptr);
          FlopCounts perTrip;
          for (auto &[name, c] : one)
            perTrip += c;
          std::string where;
          llvm::raw_string_ostream os(where);
          loop.getLoc().print(os);
          loops->push_back({where, trips, perTrip});
        }
        continue;
      }
      if (auto call = dyn_cast<func::CallOp>(op)) {
        if (auto callee =
                module_.lookupSymbol<func::FuncOp>(call.getCalleeAttr()))
          addTo(phases, phase, scaled(functionTotal(callee), factor));
        continue;
      }
      addTo(phases, phase, scaled(ownFlops(&op), factor));
      for (Region &region : op.getRegions())
        for (Block &inner : region)
          count(inner, factor, phase, phases, nullptr);
    }
  }

  FlopCounts functionTotal(func::FuncOp fn) {
    auto it = totals_.find(fn);
    if (it != totals_.end())
      return it->second;
    totals_[fn] = FlopCounts(); // a recursive call counts 0
    Phases phases;
    for (Block &block : fn.getBody())
      count(block, 1, "", phases, nullptr);
    FlopCounts total;
    for (auto &[name, c] : phases)
      total += c;
    totals_[fn] = total;
    return total;
  }

private:
  ModuleOp module_;
  llvm::DenseMap<Operation *, FlopCounts> totals_;
};

} // namespace

std::vector<FunctionFlops> countFlops(ModuleOp module) {
  Counter counter(module);
  std::vector<FunctionFlops> out;
  for (func::FuncOp fn : module.getOps<func::FuncOp>()) {
    if (!fn.isPublic() || fn.isExternal())
      continue;
    FunctionFlops f;
    f.name = fn.getSymName().str();
    for (Block &block : fn.getBody())
      counter.count(block, 1, "", f.phases, &f.loops);
    for (auto &[name, c] : f.phases)
      f.total += c;
    out.push_back(std::move(f));
  }
  return out;
}

void printFlops(const std::vector<FunctionFlops> &functions,
                llvm::raw_ostream &os) {
  auto line = [&](const FlopCounts &c) {
    const auto &f = c.flops;
    os << c.total() << " FLOPs (matmul " << f[0] << ", attention " << f[1]
       << ", conv2d " << f[2] << ", elementwise " << f[3] << ", reduction "
       << f[4] << ")\n";
  };
  for (const FunctionFlops &fn : functions) {
    os << "@" << fn.name << ": ";
    line(fn.total);
    for (const auto &[phase, c] : fn.phases) {
      os << "  phase " << (phase.empty() ? "(none)" : phase) << ": ";
      line(c);
    }
    for (const FunctionFlops::Loop &loop : fn.loops) {
      os << "  loop " << loop.location << ": " << loop.trips << " trips of ";
      line(loop.perTrip);
    }
  }
}

} // namespace mlir::omni
