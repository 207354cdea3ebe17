//===- Interpreter.cpp - The reference evaluator's driver -------*- C++ -*-===//
//
// evaluateFunction and the Interpreter: argument checking, frames, block
// walking, handler dispatch and the result invariants (see Interpreter.h).
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/Interpreter.h"

#include "dialects/omni/OmniOps.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Location.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace omni::reference {
namespace detail {

std::string locationString(Location loc) {
  if (auto file = loc->findInstanceOf<FileLineColLoc>())
    return absl::StrCat(file.getFilename().str(), ":", file.getLine(), ":",
                        file.getColumn());
  std::string s;
  llvm::raw_string_ostream os(s);
  loc.print(os);
  return s;
}

absl::Status opError(Operation *op, const llvm::Twine &message) {
  return absl::InvalidArgumentError(
      absl::StrCat(locationString(op->getLoc()), ": '",
                   op->getName().getStringRef().str(), "' ", message.str()));
}

absl::Status opError(Operation *op, const absl::Status &status) {
  return absl::Status(status.code(),
                      absl::StrCat(locationString(op->getLoc()), ": '",
                                   op->getName().getStringRef().str(), "' ",
                                   status.message()));
}

std::vector<int64_t> stridesOf(llvm::ArrayRef<int64_t> shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

std::string typeString(Type type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  type.print(os);
  return s;
}

namespace {
std::optional<DType> dtypeOfElement(Type t) {
  if (t.isF32())
    return DType::F32;
  if (t.isF64())
    return DType::F64;
  if (t.isF16())
    return DType::F16;
  if (t.isBF16())
    return DType::BF16;
  if (t.isIndex())
    return DType::I64;
  if (auto i = dyn_cast<IntegerType>(t)) {
    switch (i.getWidth()) {
    case 1:
      return DType::I1;
    case 32:
      return DType::I32;
    case 64:
      return DType::I64;
    default:
      return std::nullopt;
    }
  }
  return std::nullopt;
}
} // namespace

absl::StatusOr<ValueType> valueTypeOf(Type type) {
  Type element = type;
  std::vector<int64_t> shape;
  if (auto tensor = dyn_cast<RankedTensorType>(type)) {
    if (!tensor.hasStaticShape())
      return absl::InvalidArgumentError(
          absl::StrCat("type ", typeString(type), " is not statically shaped"));
    element = tensor.getElementType();
    shape.assign(tensor.getShape().begin(), tensor.getShape().end());
    // Elements are held as 8-byte values; refuse what cannot fit rather
    // than fail inside an allocation.
    constexpr int64_t kMaxElements = int64_t{1} << 31;
    int64_t count = 1;
    for (int64_t d : shape) {
      if (d != 0 && count > kMaxElements / d)
        return absl::InvalidArgumentError(absl::StrCat(
            "type ", typeString(type),
            " has more than 2^31 elements, the reference evaluator's limit"));
      count *= d;
    }
  } else if (isa<ShapedType>(type)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "type ", typeString(type), " is not a statically shaped tensor"));
  }
  std::optional<DType> dtype = dtypeOfElement(element);
  if (!dtype)
    return absl::InvalidArgumentError(absl::StrCat(
        "element type ", typeString(element),
        " is not one of f32, f64, f16, bf16, i1, i32, i64, index"));
  return ValueType{*dtype, std::move(shape)};
}

absl::StatusOr<HostTensor> attributeValue(Operation *op, Attribute attr,
                                          Type type) {
  absl::StatusOr<ValueType> vt = valueTypeOf(type);
  if (!vt.ok())
    return opError(op, vt.status());
  HostTensor t(vt->dtype, vt->shape);
  bool isFloat = isFloatDType(vt->dtype);
  bool isBool = vt->dtype == DType::I1;
  auto intValue = [&](const APInt &v) {
    return isBool ? static_cast<int64_t>(v.getZExtValue()) : v.getSExtValue();
  };
  if (auto i = dyn_cast<IntegerAttr>(attr); i && !isFloat && t.rank() == 0) {
    t.ints()[0] = intValue(i.getValue());
    return t;
  }
  if (auto f = dyn_cast<FloatAttr>(attr); f && isFloat && t.rank() == 0) {
    t.floats()[0] = f.getValueAsDouble();
    return t;
  }
  auto elements = dyn_cast<ElementsAttr>(attr);
  if (!elements)
    return opError(op, "has a constant attribute the reference evaluator "
                       "cannot read: " +
                           typeString(type));
  if (elements.getNumElements() != t.numElements())
    return opError(op, "constant holds " +
                           llvm::Twine(elements.getNumElements()) +
                           " elements but its type " + typeString(type) +
                           " needs " + llvm::Twine(t.numElements()));
  int64_t k = 0;
  if (isFloat) {
    auto values = elements.tryGetValues<APFloat>();
    if (!values)
      return opError(op, "has a float constant whose elements cannot be read "
                         "(dense_resource blobs are not supported)");
    for (const APFloat &v : *values) {
      APFloat copy = v;
      bool lost = false;
      copy.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
      t.floats()[k++] = copy.convertToDouble();
    }
    return t;
  }
  auto values = elements.tryGetValues<APInt>();
  if (!values)
    return opError(op, "has an integer constant whose elements cannot be "
                       "read (dense_resource blobs are not supported)");
  for (const APInt &v : *values)
    t.ints()[k++] = intValue(v);
  return t;
}

//===----------------------------------------------------------------------===//
// Interpreter
//===----------------------------------------------------------------------===//

Interpreter::Interpreter(ModuleOp module, const EvalOptions &options)
    : module(module), options(options) {
  hostFns = options.hostFunctions ? options.hostFunctions : &noHostFns;
  registerStructuredHandlers(handlers);
  registerArithHandlers(handlers);
  registerElementwiseHandlers(handlers);
  registerShapeHandlers(handlers);
  registerContractionHandlers(handlers);
  registerCompositeHandlers(handlers);
  registerDiffusionHandlers(handlers);
  registerStructureHandlers(handlers);
}

absl::StatusOr<Results>
Interpreter::callFunction(func::FuncOp fn, llvm::ArrayRef<HostTensor> args,
                          Operation *caller) {
  Operation *where = caller ? caller : fn.getOperation();
  if (fn.isExternal())
    return opError(where, llvm::Twine("calls @") + fn.getSymName() +
                              ", which has no body");
  if (!fn.getBody().hasOneBlock())
    return opError(fn, "has several blocks; the reference evaluator runs "
                       "single-block functions");
  if (static_cast<int>(frames.size()) >= options.maxCallDepth)
    return opError(where, llvm::Twine("nests calls deeper than ") +
                              llvm::Twine(options.maxCallDepth) +
                              " (unbounded recursion?)");
  frames.push_back(std::make_unique<Frame>());
  absl::StatusOr<Results> results = runBlock(fn.getBody().front(), args, fn);
  frames.pop_back();
  return results;
}

absl::StatusOr<Results> Interpreter::runBlock(Block &block,
                                              llvm::ArrayRef<HostTensor> args,
                                              Operation *owner) {
  if (args.size() != block.getNumArguments())
    return opError(owner, llvm::Twine("region takes ") +
                              llvm::Twine(block.getNumArguments()) +
                              " arguments but was given " +
                              llvm::Twine(args.size()));
  for (auto [i, arg] : llvm::enumerate(block.getArguments()))
    if (absl::Status status =
            bind(arg, args[i], owner,
                 llvm::Twine("block argument #") + llvm::Twine(i));
        !status.ok())
      return status;
  for (Operation &op : block.without_terminator())
    if (absl::Status status = runOp(&op); !status.ok())
      return status;
  Operation *terminator = block.getTerminator();
  if (!terminator)
    return opError(owner, "has a region without a terminator");
  if (!isa<func::ReturnOp, scf::YieldOp, mlir::omni::YieldOp>(terminator))
    return opError(terminator,
                   "is not a terminator the reference evaluator supports "
                   "(func.return, scf.yield, omni.yield)");
  Results results;
  for (Value v : terminator->getOperands()) {
    auto it = frames.back()->find(v);
    if (it == frames.back()->end())
      return opError(terminator, "uses a value that has not been computed");
    results.push_back(it->second);
  }
  return results;
}

const HostTensor &Interpreter::get(Value value) const {
  return frames.back()->at(value);
}

HostTensor Interpreter::zerosForResult(Operation *op, unsigned index) const {
  absl::StatusOr<ValueType> type = valueTypeOf(op->getResult(index).getType());
  // runOp rejects ops with unsupported result types before their handlers.
  if (!type.ok())
    return HostTensor();
  return HostTensor(type->dtype, type->shape);
}

absl::Status Interpreter::runOp(Operation *op) {
  auto it = handlers.find(op->getName().getTypeID());
  if (it == handlers.end()) {
    if (!op->isRegistered())
      return opError(op, "is an unregistered op; the reference evaluator "
                         "cannot run it");
    return opError(op, "is not supported by the reference evaluator");
  }
  for (auto [i, operand] : llvm::enumerate(op->getOperands()))
    if (!frames.back()->count(operand))
      return opError(op, llvm::Twine("operand #") + llvm::Twine(i) +
                             " has no value");
  // Handlers may assume that zerosForResult gives each result's shape.
  for (auto [i, result] : llvm::enumerate(op->getResults()))
    if (absl::StatusOr<ValueType> type = valueTypeOf(result.getType());
        !type.ok())
      return opError(op, llvm::Twine("result #") + llvm::Twine(i) + ": " +
                             std::string(type.status().message()));
  absl::StatusOr<Results> results = it->second(op, *this);
  if (!results.ok())
    return results.status();
  if (results->size() != op->getNumResults())
    return opError(op, llvm::Twine("evaluated to ") +
                           llvm::Twine(results->size()) + " results but has " +
                           llvm::Twine(op->getNumResults()));
  for (auto [i, result] : llvm::enumerate(op->getResults()))
    if (absl::Status status = bind(result, std::move((*results)[i]), op,
                                   llvm::Twine("result #") + llvm::Twine(i));
        !status.ok())
      return status;
  if (traceLog)
    if (auto id = op->getAttrOfType<IntegerAttr>(kTraceAttr)) {
      Results values;
      for (Value result : op->getResults())
        values.push_back(get(result));
      traceLog->entries.push_back({id.getInt(), op, std::move(values)});
    }
  return absl::OkStatus();
}

absl::Status Interpreter::bind(Value value, HostTensor tensor, Operation *owner,
                               const llvm::Twine &what) {
  absl::StatusOr<ValueType> type = valueTypeOf(value.getType());
  if (!type.ok())
    return opError(owner, what + ": " + std::string(type.status().message()));
  if (tensor.shape() != type->shape ||
      tensor.isFloat() != isFloatDType(type->dtype))
    return opError(owner, what + " has type " + typeString(value.getType()) +
                              " but its value is " + tensor.typeString());
  tensor.relabel(type->dtype);
  if (tensor.isFloat()) {
    if (options.precision == Precision::F32 && type->dtype != DType::F64)
      for (double &v : tensor.floats())
        v = roundToDType(v, type->dtype);
  } else {
    for (int64_t &v : tensor.ints())
      v = wrapToDType(v, type->dtype);
  }
  frames.back()->insert_or_assign(value, std::move(tensor));
  return absl::OkStatus();
}

absl::StatusOr<func::FuncOp> checkedFunction(ModuleOp module,
                                             llvm::StringRef name,
                                             llvm::ArrayRef<HostTensor> args) {
  auto fn = module.lookupSymbol<func::FuncOp>(name);
  if (!fn) {
    std::vector<std::string> names;
    for (auto f : module.getOps<func::FuncOp>())
      names.push_back(absl::StrCat("@", f.getSymName().str()));
    return absl::NotFoundError(
        absl::StrCat("no function @", name.str(), " in the module (functions: ",
                     names.empty() ? "none" : absl::StrJoin(names, ", "), ")"));
  }
  if (fn.isExternal())
    return absl::InvalidArgumentError(absl::StrCat(
        "function @", name.str(), " is external (it has no body)"));
  FunctionType type = fn.getFunctionType();
  if (args.size() != type.getNumInputs())
    return absl::InvalidArgumentError(absl::StrCat(
        "function @", name.str(), " takes ", type.getNumInputs(), " argument",
        type.getNumInputs() == 1 ? "" : "s", ", found ", args.size()));
  for (auto [i, input] : llvm::enumerate(type.getInputs())) {
    absl::StatusOr<ValueType> expected = valueTypeOf(input);
    if (!expected.ok())
      return absl::InvalidArgumentError(
          absl::StrCat("argument #", i, " of @", name.str(), ": ",
                       expected.status().message()));
    const HostTensor &arg = args[i];
    if (arg.dtype() != expected->dtype || arg.shape() != expected->shape)
      return absl::InvalidArgumentError(absl::StrCat(
          "argument #", i, " of @", name.str(), ": expected ",
          typeString(input), input.isIndex() ? " (an i64 scalar)" : "",
          ", found ", arg.typeString()));
  }
  return fn;
}

} // namespace detail

absl::StatusOr<std::vector<HostTensor>>
evaluateFunction(ModuleOp module, llvm::StringRef name,
                 llvm::ArrayRef<HostTensor> args, const EvalOptions &options) {
  absl::StatusOr<func::FuncOp> fn = detail::checkedFunction(module, name, args);
  if (!fn.ok())
    return fn.status();
  detail::Interpreter interpreter(module, options);
  return interpreter.callFunction(*fn, args, nullptr);
}
} // namespace omni::reference
