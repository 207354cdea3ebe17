//===- ResidentState.cpp - Mark the training state as resident slots ------===//
//
// omni-resident-state decides which arguments and results of the public
// functions are persistent state (docs/backend.md, "Resident state"): an
// argument with `omni.state = "<name>"` reads state slot <name>, a result
// with it is stored into the slot when the function returns, and the
// step.bin writer turns them into Storage::State tensors instead of
// function inputs and outputs, so the state stays in device buffers across
// calls.
//
// Programs written in the training convention (docs/backend.md,
// "Training") get the attributes inferred; attributes a frontend wrote are
// kept. Either way the pass checks that the slots are consistent
// module-wide (one tensor type per name; a slot read or stored at most
// once per function), so the writer can rely on it.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/StringMap.h"

#include <optional>

#define DEBUG_TYPE "omni-resident-state"

namespace mlir::omni {
#define GEN_PASS_DEF_OMNIRESIDENTSTATEPASS
#include "passes/Passes.h.inc"
} // namespace mlir::omni

using namespace mlir;
using namespace mlir::omni;

namespace {

constexpr const char *kState = "omni.state";
constexpr const char *kName = "omni.name";

/// The data inputs of the training convention (runtime/train/driver
/// Trainer.cpp): trailing arguments with these names (the negatives: CFG's
/// unconditional branch; the masks: the text mask of a model that takes
/// one, docs/prompts.md).
bool isDataName(StringAttr name) {
  return name && (name.getValue() == "prompt_embeds" ||
                  name.getValue() == "pooled_prompt_embeds" ||
                  name.getValue() == "negative_prompt_embeds" ||
                  name.getValue() == "negative_pooled_prompt_embeds" ||
                  name.getValue() == "prompt_embeds_mask" ||
                  name.getValue() == "negative_prompt_embeds_mask");
}

bool isI64Scalar(Type t) {
  auto r = dyn_cast<RankedTensorType>(t);
  return r && r.getRank() == 0 && r.getElementType().isInteger(64);
}

bool hasExplicitState(func::FuncOp fn) {
  for (unsigned i = 0; i < fn.getNumArguments(); ++i)
    if (fn.getArgAttr(i, kState))
      return true;
  for (unsigned i = 0; i < fn.getNumResults(); ++i)
    if (fn.getResultAttr(i, kState))
      return true;
  return false;
}

/// A public function with a body: an entry point of step.bin.
bool isEntryPoint(func::FuncOp fn) {
  return !fn.isExternal() && !fn.isPrivate();
}

/// The number of leading state arguments when `fn` is a training step
/// `(state..., seed, iteration, data..., hyper-parameters...) ->
/// (state'..., results...)` whose
/// state arguments are all named by `omni.name` and whose leading results
/// have the state's types; nullopt otherwise (or when there is no state).
std::optional<unsigned> stepStateCount(func::FuncOp fn) {
  FunctionType type = fn.getFunctionType();
  unsigned numIn = type.getNumInputs();
  unsigned numData = 0;
  // Trailing data inputs and runtime hyper-parameters (omni.hparam,
  // docs/recipes.md section 11).
  while (numData < numIn && (isDataName(fn.getArgAttrOfType<StringAttr>(
                                 numIn - 1 - numData, kName)) ||
                             fn.getArgAttr(numIn - 1 - numData, "omni.hparam")))
    ++numData;
  unsigned k = numIn - numData;
  if (k < 3 || !isI64Scalar(type.getInput(k - 2)) ||
      !isI64Scalar(type.getInput(k - 1)))
    return std::nullopt;
  k -= 2;
  if (type.getNumResults() < k)
    return std::nullopt;
  for (unsigned i = 0; i < k; ++i) {
    auto name = fn.getArgAttrOfType<StringAttr>(i, kName);
    if (!name || name.getValue().empty() ||
        type.getInput(i) != type.getResult(i))
      return std::nullopt;
  }
  return k;
}

/// The state one function reads, in argument order.
struct StateList {
  func::FuncOp fn;
  SmallVector<StringAttr> names;
  SmallVector<Type> types;
};

struct OmniResidentStatePass
    : omni::impl::OmniResidentStatePassBase<OmniResidentStatePass> {
  using Base::Base;

  /// 1. Check the `omni.state` attributes already present (non-empty
  ///    strings); a function that has any is left as written.
  /// 2. Training steps (stepStateCount) get `omni.state = omni.name` on
  ///    their state arguments and the matching leading results.
  /// 3. Initializers `(seed: tensor<i64>) -> (T...)` whose result types
  ///    are the state of a step (with the same names as their results'
  ///    `omni.name` where those are given) get the step's names on their
  ///    results; matching the state of steps with different names is an
  ///    error.
  /// 4. Every slot has one tensor type module-wide, and no function reads
  ///    or stores a slot twice.
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> entries;
    for (auto fn : module.getOps<func::FuncOp>())
      if (isEntryPoint(fn))
        entries.push_back(fn);

    // 1.
    DenseSet<Operation *> explicitState;
    for (func::FuncOp fn : entries) {
      if (!hasExplicitState(fn))
        continue;
      explicitState.insert(fn);
      auto check = [&](Attribute a, StringRef what,
                       unsigned i) -> LogicalResult {
        auto s = dyn_cast_or_null<StringAttr>(a);
        if (!a || (s && !s.getValue().empty()))
          return success();
        return fn.emitError("@") << fn.getSymName() << ": " << what << " #" << i
                                 << " has omni.state = " << a
                                 << "; expected a non-empty state slot name";
      };
      for (unsigned i = 0; i < fn.getNumArguments(); ++i)
        if (failed(check(fn.getArgAttr(i, kState), "argument", i)))
          return signalPassFailure();
      for (unsigned i = 0; i < fn.getNumResults(); ++i)
        if (failed(check(fn.getResultAttr(i, kState), "result", i)))
          return signalPassFailure();
    }

    // 2.
    SmallVector<StateList> lists;
    for (func::FuncOp fn : entries) {
      StateList list{fn, {}, {}};
      if (explicitState.contains(fn)) {
        for (unsigned i = 0; i < fn.getNumArguments(); ++i)
          if (auto s = fn.getArgAttrOfType<StringAttr>(i, kState)) {
            list.names.push_back(s);
            list.types.push_back(fn.getArgumentTypes()[i]);
          }
      } else if (std::optional<unsigned> k = stepStateCount(fn)) {
        for (unsigned i = 0; i < *k; ++i) {
          auto name = fn.getArgAttrOfType<StringAttr>(i, kName);
          fn.setArgAttr(i, kState, name);
          fn.setResultAttr(i, kState, name);
          list.names.push_back(name);
          list.types.push_back(fn.getArgumentTypes()[i]);
        }
      }
      if (!list.names.empty())
        lists.push_back(std::move(list));
    }

    // 3.
    for (func::FuncOp fn : entries) {
      FunctionType type = fn.getFunctionType();
      if (explicitState.contains(fn) || type.getNumInputs() != 1 ||
          !isI64Scalar(type.getInput(0)) || type.getNumResults() == 0)
        continue;
      SmallVector<StringAttr> given;
      for (unsigned i = 0; i < type.getNumResults(); ++i)
        if (auto name = fn.getResultAttrOfType<StringAttr>(i, kName))
          given.push_back(name);
      StateList *match = nullptr;
      for (StateList &list : lists) {
        if (ArrayRef<Type>(list.types) != type.getResults() ||
            (given.size() == list.names.size() &&
             ArrayRef<StringAttr>(given) != ArrayRef(list.names)) ||
            (match && match->names == list.names))
          continue;
        if (match) {
          fn.emitError("@")
              << fn.getSymName() << ": its results match the state of @"
              << match->fn.getSymName() << " and of @" << list.fn.getSymName()
              << ", which name it differently; expected omni.state (or "
                 "omni.name) attributes on its results";
          return signalPassFailure();
        }
        match = &list;
      }
      if (match)
        for (auto [i, name] : llvm::enumerate(match->names))
          fn.setResultAttr(i, kState, name);
    }

    // 4.
    struct Use {
      Type type;
      func::FuncOp fn;
    };
    llvm::StringMap<Use> slots;
    for (func::FuncOp fn : entries) {
      auto visit = [&](StringAttr name, Type type, StringRef what, unsigned i,
                       llvm::StringMap<unsigned> &seen) -> LogicalResult {
        if (!name)
          return success();
        auto tensor = dyn_cast<RankedTensorType>(type);
        if (!tensor || !tensor.hasStaticShape())
          return fn.emitError("@")
                 << fn.getSymName() << ": " << what << " #" << i
                 << " is state '" << name.getValue() << "' of type " << type
                 << "; expected a statically shaped tensor";
        auto [it, inserted] = seen.try_emplace(name.getValue(), i);
        if (!inserted)
          return fn.emitError("@")
                 << fn.getSymName() << ": " << what << "s #" << it->second
                 << " and #" << i << " are both state '" << name.getValue()
                 << "'; expected each slot at most once";
        auto [slot, first] = slots.try_emplace(name.getValue(), Use{type, fn});
        if (!first && slot->second.type != type)
          return fn.emitError("@")
                 << fn.getSymName() << ": state '" << name.getValue() << "' is "
                 << type << " here but " << slot->second.type << " in @"
                 << slot->second.fn.getSymName()
                 << "; expected one type per state slot";
        return success();
      };
      llvm::StringMap<unsigned> args, results;
      for (unsigned i = 0; i < fn.getNumArguments(); ++i)
        if (failed(visit(fn.getArgAttrOfType<StringAttr>(i, kState),
                         fn.getArgumentTypes()[i], "argument", i, args)))
          return signalPassFailure();
      for (unsigned i = 0; i < fn.getNumResults(); ++i)
        if (failed(visit(fn.getResultAttrOfType<StringAttr>(i, kState),
                         fn.getResultTypes()[i], "result", i, results)))
          return signalPassFailure();
    }
  }
};

} // namespace
