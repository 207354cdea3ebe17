//===- PlanMemoryTest.cpp - omni-plan-memory on random programs -----------===//
//
// Generates random omni programs (elementwise chains, broadcasts,
// reductions, reshapes, matmuls, host calls, random numbers, scf.for loops
// with carried tensors, donated arguments), runs omni-fuse and
// omni-plan-memory, and then executes the plan symbolically: every write
// of a value stamps its arena bytes (or its donated argument) with a fresh
// id, every read checks that the bytes still hold the id of the value
// read. A plan in which two simultaneously live buffers overlap fails the
// read that follows the clobbering write. Loops run their trip count and
// copy yielded values into their slots one by one, as the executor does.
// The same programs, without host calls, also check that omni-fuse keeps
// every value bit for bit (the reference evaluator, before and after).
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/Evaluator.h"
#include "dialects/omni/OmniOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"

#include <cmath>
#include <gtest/gtest.h>
#include <map>
#include <random>

using namespace mlir;

namespace {

const char *const kA = "tensor<4x8xf32>";
const char *const kB = "tensor<8xf32>";
const char *const kC = "tensor<32xf32>";
const char *const kM = "tensor<8x8xf32>";

/// Writes one random function @f.
class ProgramGenerator {
public:
  explicit ProgramGenerator(unsigned seed, bool hostCalls = true)
      : rng(seed), hostCalls(hostCalls) {}

  std::string generate() {
    std::string args;
    const char *argTypes[] = {kA, kA, kB, kM, kA};
    for (unsigned i = 0; i < 5; ++i) {
      std::string name = "%arg" + std::to_string(i);
      args += (i ? ", " : "") + name + ": " + argTypes[i];
      if (coin(2))
        args += " {omni.donate}";
      pool[argTypes[i]].push_back(name);
    }
    body += "  %c0 = arith.constant 0 : index\n"
            "  %c1 = arith.constant 1 : index\n"
            "  %c2 = arith.constant 2 : index\n"
            "  %k = omni.constant dense<7> : tensor<i64>\n";
    unsigned n = 6 + pick(20);
    for (unsigned i = 0; i < n; ++i)
      emitOp(pool, body, "  ", /*depth=*/0);
    // Return one to three values, the newest more often.
    std::string results, types;
    unsigned numResults = 1 + pick(3);
    for (unsigned i = 0; i < numResults; ++i) {
      const char *t = anyType(pool);
      auto &vals = pool[t];
      std::string v =
          vals[vals.size() - 1 - pick(std::min<size_t>(vals.size(), 3))];
      results += (i ? ", " : "") + v;
      types += std::string(i ? ", " : "") + t;
    }
    return "func.func @f(" + args + ") -> (" + types + ") {\n" + body +
           "  return " + results + " : " + types + "\n}\n";
  }

private:
  using Pool = std::map<std::string, std::vector<std::string>>;

  unsigned pick(unsigned n) {
    return std::uniform_int_distribution<unsigned>(0, n - 1)(rng);
  }
  bool coin(unsigned oneIn) { return pick(oneIn) == 0; }
  std::string fresh() { return "%v" + std::to_string(counter++); }
  std::string value(Pool &p, const std::string &type) {
    auto &vals = p[type];
    // Prefer recent values so that chains form.
    return vals[vals.size() - 1 - pick(std::min<size_t>(vals.size(), 4))];
  }
  const char *anyType(Pool &p) {
    std::vector<const char *> types;
    for (const char *t : {kA, kB, kC, kM})
      if (!p[t].empty())
        types.push_back(t);
    return types[pick(types.size())];
  }

  void emitOp(Pool &p, std::string &out, const std::string &indent,
              unsigned depth) {
    std::string r = fresh();
    std::string type;
    std::string line;
    switch (pick(depth == 0 ? 12 : 11)) {
    case 0:
    case 1: {
      type = anyType(p);
      const char *ops[] = {"exp", "neg", "tanh"};
      line =
          r + " = omni." + ops[pick(3)] + " " + value(p, type) + " : " + type;
      break;
    }
    case 2:
    case 3: {
      type = anyType(p);
      const char *ops[] = {"add", "mul", "sub"};
      line = r + " = omni." + ops[pick(3)] + " " + value(p, type) + ", " +
             value(p, type) + " : " + type;
      break;
    }
    case 4:
      if (p[kB].empty())
        return;
      type = kA;
      line = r + " = omni.broadcast_in_dim " + value(p, kB) +
             ", dims = [1] : " + kB + " -> " + kA;
      break;
    case 5:
      type = kB;
      line = r + " = omni.reduce sum " + value(p, kA) + " dims = [0] : " + kA +
             " -> " + kB;
      break;
    case 6:
      if (coin(2) || p[kC].empty()) {
        type = kC;
        line = r + " = omni.reshape " + value(p, kA) + " : " + kA + " -> " + kC;
      } else {
        type = kA;
        line = r + " = omni.reshape " + value(p, kC) + " : " + kC + " -> " + kA;
      }
      break;
    case 7:
      type = kA;
      line = r + " = omni.matmul " + value(p, kA) + ", " + value(p, kM) +
             " : " + kA + ", " + kM + " -> " + kA;
      break;
    case 8:
      if (!hostCalls)
        return;
      type = kA;
      line = r + " = omni.host_call \"h\"(" + value(p, kA) + ") : (" + kA +
             ") -> " + kA;
      break;
    case 9:
      type = kA;
      line = r + " = omni.random_normal %k, %k, %k : " + std::string(kA);
      break;
    case 10:
      type = anyType(p);
      line = r + " = omni.constant dense<2.0> : " + type;
      break;
    case 11: {
      // A loop carrying one or two tensors of shape A.
      unsigned carried = 1 + pick(2);
      std::string iterArgs, types, yields;
      std::vector<std::string> accs;
      Pool inner = p;
      for (unsigned k = 0; k < carried; ++k) {
        std::string acc =
            "%acc" + std::to_string(counter) + "_" + std::to_string(k);
        iterArgs += (k ? ", " : "") + acc + " = " + value(p, kA);
        accs.push_back(acc);
        types += std::string(k ? ", " : "") + kA;
        inner[kA].push_back(acc);
      }
      std::string loopBody;
      unsigned n = 1 + pick(6);
      for (unsigned i = 0; i < n; ++i)
        emitOp(inner, loopBody, indent + "  ", depth + 1);
      // Sometimes hand a carried value to the other slot (a swap).
      for (unsigned k = 0; k < carried; ++k)
        yields += (k ? ", " : "") +
                  (carried == 2 && coin(3) ? accs[1 - k] : value(inner, kA));
      std::string results =
          carried == 1 ? r : r + ":" + std::to_string(carried);
      out += indent + results + " = scf.for %i" + std::to_string(counter) +
             " = %c0 to %c2 step %c1 iter_args(" + iterArgs + ") -> (" + types +
             ") {\n" + loopBody + indent + "  scf.yield " + yields + " : " +
             types + "\n" + indent + "}\n";
      for (unsigned k = 0; k < carried; ++k)
        p[kA].push_back(carried == 1 ? r : r + "#" + std::to_string(k));
      return;
    }
    }
    out += indent + line + "\n";
    p[type].push_back(r);
  }

  std::mt19937 rng;
  bool hostCalls;
  Pool pool;
  std::string body;
  unsigned counter = 0;
};

/// Executes a planned function symbolically (see the file comment).
class PlanChecker {
public:
  explicit PlanChecker(func::FuncOp f) : f(f) {}

  /// Returns an empty string when every read sees the value it reads.
  std::string check() {
    arenaSize = cast<IntegerAttr>(f->getAttr("omni.arena_size")).getInt();
    shadow.assign(arenaSize / 64 + 1, 0);
    if (std::string e = collectPlan(); !e.empty())
      return e;
    for (auto [i, arg] : llvm::enumerate(f.getArguments()))
      if (f.getArgAttr(i, "omni.donate")) {
        location[arg] = Location{-1, 0, static_cast<int64_t>(i)};
        write(arg);
      }
    run(f.getBody().front());
    return error;
  }

private:
  struct Location {
    int64_t offset = -1, size = 0;
    int64_t arg = -1; ///< a donated argument's buffer
  };

  static Value root(Value v) {
    while (auto reshape = v.getDefiningOp<mlir::omni::ReshapeOp>())
      v = reshape.getOperand();
    return v;
  }

  static int64_t bytes(Type t) {
    auto tt = cast<RankedTensorType>(t);
    int64_t n = tt.getNumElements() * 4;
    return (n + 63) / 64 * 64;
  }

  void fail(Operation *op, const std::string &what) {
    if (!error.empty())
      return;
    std::string s;
    llvm::raw_string_ostream os(s);
    os << what << " at ";
    op->print(os, OpPrintingFlags().skipRegions());
    error = s;
  }

  /// Reads omni.offsets / omni.donated_args into `location`.
  std::string collectPlan() {
    std::string e;
    f.walk<WalkOrder::PreOrder>([&](Operation *op) {
      if (isa<mlir::omni::FusionOp>(op->getParentOp()))
        return WalkResult::skip();
      bool allocates =
          llvm::any_of(op->getResultTypes(), llvm::IsaPred<RankedTensorType>) &&
          !isa<mlir::omni::ReshapeOp, mlir::omni::ConstantOp>(op);
      auto offsets = op->getAttrOfType<DenseI64ArrayAttr>("omni.offsets");
      if (allocates && !offsets) {
        e = "no omni.offsets on " + op->getName().getStringRef().str();
        return WalkResult::interrupt();
      }
      if (!offsets)
        return WalkResult::advance();
      auto donated = op->getAttrOfType<DenseI64ArrayAttr>("omni.donated_args");
      for (auto [i, r] : llvm::enumerate(op->getResults())) {
        Location loc;
        if (offsets[i] >= 0) {
          loc = {offsets[i], bytes(r.getType())};
          if (offsets[i] % 64 != 0 || loc.offset + loc.size > arenaSize)
            e = "offset outside the arena or misaligned";
        } else if (donated && donated[i] >= 0) {
          loc.arg = donated[i];
          if (!f.getArgAttr(donated[i], "omni.donate"))
            e = "result placed in an argument that is not donated";
        }
        location[r] = loc;
        if (auto loop = dyn_cast<scf::ForOp>(op))
          location[loop.getRegionIterArgs()[i]] = loc;
      }
      return WalkResult::advance();
    });
    return e;
  }

  bool sameLocation(Value a, Value b) {
    auto la = location.find(root(a)), lb = location.find(root(b));
    if (la == location.end() || lb == location.end())
      return false;
    return la->second.offset == lb->second.offset &&
           la->second.arg == lb->second.arg;
  }

  template <typename Fn> void forEachUnit(const Location &loc, Fn fn) {
    if (loc.arg >= 0) {
      fn(argShadow[loc.arg]);
      return;
    }
    for (int64_t u = loc.offset / 64; u < (loc.offset + loc.size) / 64; ++u)
      fn(shadow[u]);
  }

  void write(Value v) {
    auto it = location.find(root(v));
    if (it == location.end() || (it->second.offset < 0 && it->second.arg < 0))
      return;
    uint64_t id = nextId++;
    current[root(v)] = id;
    forEachUnit(it->second, [&](uint64_t &unit) { unit = id; });
  }

  /// Checks that the bytes of `v` still hold instance `id` of it.
  void check(Value v, uint64_t id, Operation *at) {
    auto it = location.find(root(v));
    if (it == location.end() || (it->second.offset < 0 && it->second.arg < 0))
      return;
    bool ok = true;
    forEachUnit(it->second, [&](uint64_t &unit) { ok &= unit == id; });
    if (!ok)
      fail(at, "a read finds the bytes of its value overwritten");
  }

  void read(Value v, Operation *at) { check(v, current.lookup(root(v)), at); }

  void run(Block &block) {
    for (Operation &op : block) {
      if (auto loop = dyn_cast<scf::ForOp>(&op)) {
        runLoop(loop);
        continue;
      }
      if (isa<scf::YieldOp>(op))
        continue; // handled by runLoop
      for (Value v : op.getOperands())
        if (isa<RankedTensorType>(v.getType()))
          read(v, &op);
      for (Value r : op.getResults())
        write(r);
    }
  }

  void runLoop(scf::ForOp loop) {
    auto trips = [](Value v) {
      return cast<IntegerAttr>(v.getDefiningOp<arith::ConstantOp>().getValue())
          .getInt();
    };
    int64_t n = (trips(loop.getUpperBound()) - trips(loop.getLowerBound())) /
                trips(loop.getStep());
    // Slots are filled one by one, in order. A yielded iter_arg of the
    // same loop (a permutation of the slots) is the executor's to handle
    // as a parallel copy; any other value must survive the earlier copies.
    auto copyAll = [&](ValueRange from, Operation *at) {
      SmallVector<uint64_t> ids;
      for (Value v : from)
        ids.push_back(current.lookup(root(v)));
      for (auto [k, v] : llvm::enumerate(from)) {
        Value slot = loop.getRegionIterArgs()[k];
        bool permuted = llvm::is_contained(loop.getRegionIterArgs(), v);
        if (!permuted)
          check(v, ids[k], at);
        if (sameLocation(v, slot))
          current[root(slot)] = ids[k];
        else
          write(slot);
      }
    };
    copyAll(loop.getInitArgs(), loop);
    Operation *yield = loop.getBody()->getTerminator();
    for (int64_t i = 0; i < n; ++i) {
      run(*loop.getBody());
      copyAll(yield->getOperands(), yield);
    }
    for (auto [arg, result] :
         llvm::zip_equal(loop.getRegionIterArgs(), loop.getResults())) {
      if (!sameLocation(arg, result))
        fail(loop, "a loop result is not in its carried slot");
      current[root(result)] = current.lookup(root(arg));
    }
  }

  func::FuncOp f;
  int64_t arenaSize = 0;
  DenseMap<Value, Location> location;
  DenseMap<Value, uint64_t> current;
  std::vector<uint64_t> shadow;
  uint64_t argShadow[8] = {};
  uint64_t nextId = 1;
  std::string error;
};

class PlanMemoryTest : public ::testing::Test {
protected:
  PlanMemoryTest() {
    DialectRegistry registry;
    mlir::omni::registerOmniDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }
  MLIRContext context;
};

TEST_F(PlanMemoryTest, LiveBuffersNeverOverlapOnRandomPrograms) {
  int64_t totalArena = 0, totalTransient = 0;
  unsigned withReuse = 0;
  for (unsigned seed = 0; seed < 1000; ++seed) {
    std::string source = ProgramGenerator(seed).generate();
    OwningOpRef<ModuleOp> module =
        parseSourceString<ModuleOp>(source, ParserConfig(&context));
    ASSERT_TRUE(module) << source;
    PassManager pm(&context);
    pm.addNestedPass<func::FuncOp>(mlir::omni::createOmniFusePass());
    pm.addNestedPass<func::FuncOp>(mlir::omni::createOmniPlanMemoryPass());
    ASSERT_TRUE(succeeded(pm.run(*module))) << source;
    ASSERT_TRUE(succeeded(verify(*module)));
    auto f = *module->getOps<func::FuncOp>().begin();
    std::string error = PlanChecker(f).check();
    if (!error.empty()) {
      std::string planned;
      llvm::raw_string_ostream os(planned);
      module->print(os);
      FAIL() << "seed " << seed << ": " << error << "\n"
             << source << "\n"
             << planned;
    }
    // Bookkeeping for the sanity checks below.
    int64_t transient = 0;
    bool reused = false;
    f.walk([&](Operation *op) {
      auto offsets = op->getAttrOfType<DenseI64ArrayAttr>("omni.offsets");
      if (!offsets)
        return;
      for (auto [i, r] : llvm::enumerate(op->getResults()))
        if (auto t = dyn_cast<RankedTensorType>(r.getType()))
          transient += (t.getNumElements() * 4 + 63) / 64 * 64;
      reused |= op->hasAttr("omni.donated_args");
    });
    totalArena += cast<IntegerAttr>(f->getAttr("omni.arena_size")).getInt();
    totalTransient += transient;
    withReuse += reused;
  }
  // The check is not vacuous: buffers are shared and arguments donated.
  EXPECT_LT(totalArena, totalTransient / 2);
  EXPECT_GT(withReuse, 0u);
}

TEST_F(PlanMemoryTest, FusionKeepsValuesOnRandomPrograms) {
  namespace reference = ::omni::reference;
  std::mt19937 rng(99);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  for (unsigned seed = 0; seed < 100; ++seed) {
    std::string source = ProgramGenerator(seed, /*hostCalls=*/false).generate();
    OwningOpRef<ModuleOp> original =
        parseSourceString<ModuleOp>(source, ParserConfig(&context));
    ASSERT_TRUE(original) << source;
    OwningOpRef<ModuleOp> fused = original->clone();
    PassManager pm(&context);
    pm.addNestedPass<func::FuncOp>(mlir::omni::createOmniFusePass());
    pm.addNestedPass<func::FuncOp>(mlir::omni::createOmniPlanMemoryPass());
    ASSERT_TRUE(succeeded(pm.run(*fused))) << source;

    std::vector<::omni::HostTensor> args;
    auto f = *original->getOps<func::FuncOp>().begin();
    for (Type t : f.getFunctionType().getInputs()) {
      auto tt = cast<RankedTensorType>(t);
      std::vector<double> v(tt.getNumElements());
      for (double &x : v)
        x = dist(rng);
      args.push_back(::omni::HostTensor::fromDoubles(
          ::omni::DType::F32, std::vector<int64_t>(tt.getShape()), v));
    }
    auto want = reference::evaluateFunction(*original, "f", args);
    auto got = reference::evaluateFunction(*fused, "f", args);
    ASSERT_TRUE(want.ok()) << want.status() << "\n" << source;
    ASSERT_TRUE(got.ok()) << got.status() << "\n" << source;
    ASSERT_EQ(want->size(), got->size());
    for (size_t r = 0; r < want->size(); ++r) {
      auto a = (*want)[r].floats(), b = (*got)[r].floats();
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i)
        ASSERT_TRUE(a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i])))
            << "seed " << seed << " result " << r << " element " << i << ": "
            << a[i] << " vs " << b[i] << "\n"
            << source;
    }
  }
}

} // namespace
