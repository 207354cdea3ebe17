//===- StepWriter.cpp - lower a compiled module to step.bin ---------------===//
//
// Walks each public function once, in program order, and emits commands:
//
//   omni.fusion                      Dispatch of its kernel (omni.kernel)
//   omni.matmul / conv2d / attention LibraryCall
//   omni.random_* / omni.host_call   Random / HostCall
//   omni.reshape, omni.shard         a new tensor entry over the same bytes
//   omni.constant, arith.constant    an embedded constant
//   tensor.extract_slice, tensor.insert_slice, tensor.extract
//                                    Copy (contiguous, one dynamic offset)
//   arith on index, index_cast, from_elements/extract of i64 scalars
//                                    ScalarOp
//   scf.for                          Loop; carried tensors live in the slots
//                                    omni-plan-memory gave the loop
//
// Every tensor value maps to an entry of the tensor table whose storage is
// the memory plan's arena offset (omni.offsets), a caller argument, a
// donated argument, a constant, or a state slot. Arguments and results
// with `omni.state` (omni-resident-state) are not inputs and outputs: they
// read the slot and are stored into it on return (emitReturn). Scalars (index
// and i64 values) map to index registers.
//
//===----------------------------------------------------------------------===//

#include "compiler/stepbin/StepWriter.h"

#include "dialects/omni/OmniOps.h"
#include "runtime/schema/Integrity.h"
#include "runtime/schema/step_generated.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::omni;
namespace fb = flatbuffers;
namespace st = ::omni::step;

namespace {

int64_t elementBytes(Type e) {
  return e.isInteger(1) ? 1 : e.getIntOrFloatBitWidth() / 8;
}

FailureOr<st::DType> dtypeOf(Type e) {
  if (e.isF32())
    return st::DType::F32;
  if (e.isF64())
    return st::DType::F64;
  if (e.isF16())
    return st::DType::F16;
  if (e.isBF16())
    return st::DType::BF16;
  if (e.isInteger(1))
    return st::DType::I1;
  if (e.isInteger(32))
    return st::DType::I32;
  if (e.isInteger(64))
    return st::DType::I64;
  return failure();
}

std::string locationString(Location loc) {
  std::string s;
  llvm::raw_string_ostream os(s);
  loc.print(os);
  return s;
}

/// The outermost name of a location: a call site's caller before its
/// callee (inlined model code belongs to the phase that called it), the
/// first named part of a fused location.
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

struct TensorEntry {
  std::string name;
  st::DType dtype;
  std::vector<int64_t> shape;
  st::Storage storage;
  int64_t index;
  st::Role role;
};

/// A persistent state slot: every `omni.state` name of the module.
struct StateEntry {
  std::string name;
  RankedTensorType type;
  st::Role role;
};

/// Optimizer state: a name under an optimizer's prefix (`adamw.m.<p>`) or
/// a step counter (`step`, `<prefix>.step`); everything else is a
/// parameter (model weights, frozen copies, LoRA adapters).
st::Role stateRole(StringRef name) {
  for (StringRef prefix : {"adamw.", "adam.", "sgd.", "lion.", "optimizer."})
    if (name.starts_with(prefix))
      return st::Role::OptimizerState;
  if (name == "step" || name.ends_with(".step"))
    return st::Role::OptimizerState;
  return st::Role::Parameter;
}

/// The state of one step.bin being written.
class Writer {
public:
  Writer(ModuleOp module, const CpuExecutable &exe) : module(module), exe(exe) {}
  FailureOr<std::vector<uint8_t>> write(StringRef producer);

private:
  LogicalResult collectState();
  LogicalResult writeFunction(func::FuncOp fn);
  LogicalResult emitReturn(func::FuncOp fn, func::ReturnOp ret,
                           uint32_t numInputs, std::vector<uint32_t> &outputs,
                           std::vector<fb::Offset<st::Command>> &out);
  FailureOr<fb::Offset<fb::Vector<fb::Offset<st::KernelSignature>>>>
  kernelSignatures();
  LogicalResult emitBlock(Block &block, std::vector<fb::Offset<st::Command>> &out);
  LogicalResult emitOp(Operation *op, std::vector<fb::Offset<st::Command>> &out);

  FailureOr<uint32_t> newTensor(Value v, st::Storage storage, int64_t index,
                                st::Role role, RankedTensorType type = {});
  FailureOr<uint32_t> arenaResult(Operation *op, unsigned i);
  FailureOr<uint32_t> slot(Operation *user, Value v);
  FailureOr<uint32_t> scalar(Operation *user, Value v);
  uint32_t newScalar(Value v);
  int64_t extraBytes(int64_t bytes);
  fb::Offset<st::Command> command(Operation *op, st::CommandKind kind,
                                  fb::Offset<void> body);
  fb::Offset<fb::Vector<uint32_t>> slots(Operation *op, ValueRange values,
                                         bool &ok);
  LogicalResult copyRange(Operation *op, uint32_t src, uint32_t dst,
                          int64_t bytes, int64_t srcOffset, int srcScalar,
                          int64_t srcStride, int64_t dstOffset, int dstScalar,
                          int64_t dstStride,
                          std::vector<fb::Offset<st::Command>> &out);

  ModuleOp module;
  const CpuExecutable &exe;
  fb::FlatBufferBuilder fbb{1 << 16};
  std::vector<TensorEntry> tensors;
  std::vector<std::string> scalarNames;
  std::vector<fb::Offset<st::Constant>> constants;
  std::vector<fb::Offset<st::Function>> functions;
  std::vector<StateEntry> state;
  llvm::StringMap<uint32_t> stateIndex;
  int64_t arenaSize = 0;

  // Per function.
  DenseMap<Value, uint32_t> tensorOf;
  DenseMap<Value, uint32_t> scalarOf;
  /// Returned values an op may write straight into the caller's result
  /// buffer (argument numInputs + k) instead of the arena.
  DenseMap<Value, int64_t> resultArgument;
  /// The tensor of each argument (an input or a state slot), by position.
  std::vector<uint32_t> argumentTensor;
  int64_t functionArena = 0;
  int64_t extraTop = 0;
};

FailureOr<uint32_t> Writer::newTensor(Value v, st::Storage storage,
                                      int64_t index, st::Role role,
                                      RankedTensorType type) {
  if (!type)
    type = cast<RankedTensorType>(v.getType());
  FailureOr<st::DType> dtype = dtypeOf(type.getElementType());
  if (failed(dtype))
    return emitError(v.getLoc(), "step.bin cannot hold element type ")
           << type.getElementType();
  tensors.push_back(TensorEntry{"", *dtype,
                                std::vector<int64_t>(type.getShape()),
                                storage, index, role});
  uint32_t id = tensors.size() - 1;
  if (v)
    tensorOf[v] = id;
  return id;
}

/// Bytes past the memory plan for values the plan does not cover (float
/// scalars read by tensor.extract).
int64_t Writer::extraBytes(int64_t bytes) {
  int64_t offset = extraTop;
  extraTop += llvm::alignTo(std::max<int64_t>(bytes, 1), 64);
  arenaSize = std::max(arenaSize, extraTop);
  return offset;
}

FailureOr<uint32_t> Writer::arenaResult(Operation *op, unsigned i) {
  if (auto it = resultArgument.find(op->getResult(i));
      it != resultArgument.end() && !isa<scf::ForOp>(op))
    return newTensor(op->getResult(i), st::Storage::Argument, it->second,
                     st::Role::Output);
  auto offsets = op->getAttrOfType<DenseI64ArrayAttr>("omni.offsets");
  if (!offsets || offsets.size() <= i)
    return op->emitOpError("has no memory plan (run omni-plan-memory first)");
  int64_t offset = offsets[i];
  if (offset < 0) {
    auto donated = op->getAttrOfType<DenseI64ArrayAttr>("omni.donated_args");
    if (!donated || donated.size() <= i || donated[i] < 0 ||
        donated[i] >= static_cast<int64_t>(argumentTensor.size()))
      return op->emitOpError("result #") << i << " has no buffer in the plan";
    // The argument's input buffer, or its state slot.
    const TensorEntry &arg = tensors[argumentTensor[donated[i]]];
    return newTensor(op->getResult(i), arg.storage, arg.index,
                     arg.storage == st::Storage::State ? arg.role
                                                       : st::Role::Transient);
  }
  return newTensor(op->getResult(i), st::Storage::Arena, offset,
                   st::Role::Transient);
}

FailureOr<uint32_t> Writer::slot(Operation *user, Value v) {
  auto it = tensorOf.find(v);
  if (it == tensorOf.end())
    return user->emitOpError("reads a value the step.bin writer did not "
                             "place: ")
           << v.getType();
  return it->second;
}

uint32_t Writer::newScalar(Value v) {
  scalarNames.emplace_back();
  uint32_t id = scalarNames.size() - 1;
  if (v)
    scalarOf[v] = id;
  return id;
}

FailureOr<uint32_t> Writer::scalar(Operation *user, Value v) {
  auto it = scalarOf.find(v);
  if (it == scalarOf.end())
    return user->emitOpError("uses an index value the runtime cannot compute");
  return it->second;
}

fb::Offset<st::Command> Writer::command(Operation *op, st::CommandKind kind,
                                        fb::Offset<void> body) {
  auto loc = fbb.CreateString(locationString(op->getLoc()));
  std::string phase = phaseOf(op->getLoc());
  auto phaseName = phase.empty() ? fb::Offset<fb::String>()
                                 : fbb.CreateSharedString(phase);
  return st::CreateCommand(fbb, kind, body, loc, phaseName);
}

fb::Offset<fb::Vector<uint32_t>> Writer::slots(Operation *op,
                                               ValueRange values, bool &ok) {
  std::vector<uint32_t> ids;
  for (Value v : values) {
    FailureOr<uint32_t> s = slot(op, v);
    if (failed(s)) {
      ok = false;
      return {};
    }
    ids.push_back(*s);
  }
  return fbb.CreateVector(ids);
}

LogicalResult Writer::copyRange(Operation *op, uint32_t src, uint32_t dst,
                                int64_t bytes, int64_t srcOffset,
                                int srcScalar, int64_t srcStride,
                                int64_t dstOffset, int dstScalar,
                                int64_t dstStride,
                                std::vector<fb::Offset<st::Command>> &out) {
  st::CopyBuilder c(fbb);
  c.add_source(src);
  c.add_dest(dst);
  c.add_bytes(bytes);
  c.add_source_offset(srcOffset);
  c.add_source_offset_scalar(srcScalar);
  c.add_source_offset_stride(srcStride);
  c.add_dest_offset(dstOffset);
  c.add_dest_offset_scalar(dstScalar);
  c.add_dest_offset_stride(dstStride);
  auto body = c.Finish();
  out.push_back(command(op, st::CommandKind::Copy, body.Union()));
  return success();
}

/// A contiguous slice: static offsets that are zero past the first
/// dimension, sizes that are full past the first non-unit one, unit
/// strides. Returns (byte offset, scalar register or -1, bytes per unit of
/// the dynamic offset).
struct ContiguousSlice {
  int64_t staticBytes = 0;
  Value dynamicOffset;
  int64_t dynamicStride = 0;
  int64_t bytes = 0;
};

FailureOr<ContiguousSlice> contiguous(Operation *op, RankedTensorType full,
                                      ArrayRef<OpFoldResult> offsets,
                                      ArrayRef<OpFoldResult> sizes,
                                      ArrayRef<OpFoldResult> strides) {
  ContiguousSlice s;
  int64_t eb = elementBytes(full.getElementType());
  SmallVector<int64_t> rowBytes(full.getRank(), eb);
  for (int64_t d = full.getRank() - 2; d >= 0; --d)
    rowBytes[d] = rowBytes[d + 1] * full.getDimSize(d + 1);
  int64_t count = 1;
  bool partial = false;
  for (int64_t d = 0; d < full.getRank(); ++d) {
    std::optional<int64_t> stride = getConstantIntValue(strides[d]);
    std::optional<int64_t> size = getConstantIntValue(sizes[d]);
    if (!stride || *stride != 1 || !size)
      return op->emitOpError("is a strided or dynamically sized slice, which "
                             "the step.bin writer does not support yet");
    if (std::optional<int64_t> off = getConstantIntValue(offsets[d])) {
      s.staticBytes += *off * rowBytes[d];
    } else {
      if (s.dynamicOffset)
        return op->emitOpError("has more than one dynamic offset");
      s.dynamicOffset = cast<Value>(offsets[d]);
      s.dynamicStride = rowBytes[d];
    }
    if (partial && *size != full.getDimSize(d))
      return op->emitOpError("is not contiguous in memory");
    if (*size != 1)
      partial = partial || *size != full.getDimSize(d) || d > 0;
    count *= *size;
  }
  s.bytes = count * eb;
  return s;
}

LogicalResult Writer::emitBlock(Block &block,
                                std::vector<fb::Offset<st::Command>> &out) {
  for (Operation &op : block)
    if (failed(emitOp(&op, out)))
      return failure();
  return success();
}

LogicalResult Writer::emitOp(Operation *op,
                             std::vector<fb::Offset<st::Command>> &out) {
  bool ok = true;
  // Constants: tensors are embedded, index/integer scalars are registers.
  if (auto c = dyn_cast<arith::ConstantOp>(op)) {
    if (isa<IndexType, IntegerType>(c.getType())) {
      uint32_t dest = newScalar(c.getResult());
      auto body = st::CreateScalarOp(
          fbb, st::ScalarOpKind::Const, dest, 0, 0,
          cast<IntegerAttr>(c.getValue()).getInt());
      out.push_back(command(op, st::CommandKind::ScalarOp, body.Union()));
      return success();
    }
  }
  if (op->hasTrait<OpTrait::ConstantLike>()) {
    auto value = dyn_cast<DenseElementsAttr>(
        isa<ConstantOp>(op) ? Attribute(cast<ConstantOp>(op).getValue())
                            : op->getAttr("value"));
    if (!value)
      return op->emitOpError("has a constant the step.bin writer cannot embed");
    auto type = cast<RankedTensorType>(value.getType());
    int64_t eb = elementBytes(type.getElementType());
    // A splat is stored once with a repeat count (>= 1: a zero-element
    // constant is stored as no bytes, once).
    bool splat = value.isSplat() && type.getNumElements() > 0;
    int64_t stored = splat ? 1 : type.getNumElements();
    std::vector<uint8_t> bytes(stored * eb);
    for (int64_t i = 0; i < stored; ++i) {
      Attribute a = splat ? value.getSplatValue<Attribute>()
                                    : value.getValues<Attribute>()[i];
      uint64_t bits = 0;
      if (auto f = dyn_cast<FloatAttr>(a))
        bits = f.getValue().bitcastToAPInt().getZExtValue();
      else
        bits = cast<IntegerAttr>(a).getValue().getZExtValue();
      std::memcpy(&bytes[i * eb], &bits, eb);
    }
    // 32 bytes: the most FlatBuffers allows (a larger request asserts in
    // builds with assertions); the runtime copies constants into device
    // buffers and needs no more (step.fbs).
    fbb.ForceVectorAlignment(bytes.size(), 1, 32);
    auto data = fbb.CreateVector(bytes);
    constants.push_back(st::CreateConstant(
        fbb, data, splat ? type.getNumElements() : 1));
    return failure(failed(newTensor(op->getResult(0), st::Storage::Constant,
                                    constants.size() - 1, st::Role::Constant)));
  }
  if (auto fusion = dyn_cast<FusionOp>(op)) {
    auto kernel = fusion->getAttrOfType<IntegerAttr>("omni.kernel");
    if (!kernel)
      return fusion.emitOpError("has no compiled kernel");
    auto operands = slots(op, fusion.getInputs(), ok);
    if (!ok)
      return failure();
    std::vector<uint32_t> results;
    for (unsigned i = 0; i < fusion.getNumResults(); ++i) {
      FailureOr<uint32_t> r = arenaResult(op, i);
      if (failed(r))
        return failure();
      results.push_back(*r);
    }
    auto grid = fusion->getAttrOfType<IntegerAttr>("omni.grid");
    auto body = st::CreateDispatch(fbb, 0, kernel.getInt(),
                                   grid ? grid.getInt() : 1,
                                   operands, fbb.CreateVector(results),
                                   fbb.CreateVector(std::vector<uint32_t>{}));
    out.push_back(command(op, st::CommandKind::Dispatch, body.Union()));
    return success();
  }
  if (isa<MatmulOp, Conv2dOp, AttentionOp>(op)) {
    auto operands = slots(op, op->getOperands(), ok);
    FailureOr<uint32_t> r = arenaResult(op, 0);
    if (!ok || failed(r))
      return failure();
    std::vector<int64_t> ints;
    std::vector<double> floats;
    st::Library lib;
    if (auto m = dyn_cast<MatmulOp>(op)) {
      lib = st::Library::Matmul;
      ints = {m.getTransposeLhs(), m.getTransposeRhs()};
    } else if (auto c = dyn_cast<Conv2dOp>(op)) {
      lib = st::Library::Conv2d;
      ints = {c.getStrides()[0], c.getStrides()[1], c.getPadding()[0],
              c.getPadding()[1], c.getDilation()[0], c.getDilation()[1]};
    } else {
      auto a = cast<AttentionOp>(op);
      lib = st::Library::Attention;
      ints = {a.getMask() ? 1 : 0};
      if (a.getScale())
        floats.push_back(a.getScale()->convertToDouble());
    }
    auto body = st::CreateLibraryCall(
        fbb, lib, operands, fbb.CreateVector(std::vector<uint32_t>{*r}),
        fbb.CreateVector(ints), fbb.CreateVector(floats));
    out.push_back(command(op, st::CommandKind::LibraryCall, body.Union()));
    return success();
  }
  if (isa<RandomNormalOp, RandomUniformOp>(op)) {
    auto key = slot(op, op->getOperand(0)), counter = slot(op, op->getOperand(1)),
         offset = slot(op, op->getOperand(2));
    FailureOr<uint32_t> r = arenaResult(op, 0);
    if (failed(key) || failed(counter) || failed(offset) || failed(r))
      return failure();
    auto body = st::CreateRandom(
        fbb,
        isa<RandomNormalOp>(op) ? st::Distribution::Normal
                                : st::Distribution::Uniform,
        *key, *counter, *offset, *r);
    out.push_back(command(op, st::CommandKind::Random, body.Union()));
    return success();
  }
  if (auto call = dyn_cast<HostCallOp>(op)) {
    auto operands = slots(op, call.getOperands(), ok);
    if (!ok)
      return failure();
    std::vector<uint32_t> results;
    for (unsigned i = 0; i < call.getNumResults(); ++i) {
      FailureOr<uint32_t> r = arenaResult(op, i);
      if (failed(r))
        return failure();
      results.push_back(*r);
    }
    auto body = st::CreateHostCall(fbb, fbb.CreateString(call.getCallee().str()),
                                   operands, fbb.CreateVector(results));
    out.push_back(command(op, st::CommandKind::HostCall, body.Union()));
    return success();
  }
  if (isa<ReshapeOp, ShardOp>(op)) {
    FailureOr<uint32_t> src = slot(op, op->getOperand(0));
    if (failed(src))
      return failure();
    TensorEntry e = tensors[*src];
    return failure(failed(newTensor(op->getResult(0), e.storage, e.index,
                                    e.role)));
  }
  // Index arithmetic.
  if (isa<arith::AddIOp, arith::SubIOp, arith::MulIOp>(op) &&
      isa<IndexType, IntegerType>(op->getResult(0).getType())) {
    auto a = scalar(op, op->getOperand(0)), b = scalar(op, op->getOperand(1));
    if (failed(a) || failed(b))
      return failure();
    st::ScalarOpKind kind = isa<arith::AddIOp>(op)   ? st::ScalarOpKind::Add
                            : isa<arith::SubIOp>(op) ? st::ScalarOpKind::Sub
                                                     : st::ScalarOpKind::Mul;
    uint32_t dest = newScalar(op->getResult(0));
    auto body = st::CreateScalarOp(fbb, kind, dest, *a, *b, 0);
    out.push_back(command(op, st::CommandKind::ScalarOp, body.Union()));
    return success();
  }
  if (auto cast = dyn_cast<arith::IndexCastOp>(op)) {
    FailureOr<uint32_t> a = scalar(op, cast.getIn());
    if (failed(a))
      return failure();
    scalarOf[cast.getResult()] = *a;
    return success();
  }
  if (auto from = dyn_cast<tensor::FromElementsOp>(op)) {
    if (from.getElements().size() != 1)
      return op->emitOpError("with several elements is not supported yet");
    Value e = from.getElements()[0];
    if (auto it = tensorOf.find(e); it != tensorOf.end()) {
      // A float scalar read by tensor.extract already lives in a 0-D slot.
      tensorOf[from.getResult()] = it->second;
      return success();
    }
    FailureOr<uint32_t> a = scalar(op, e);
    FailureOr<uint32_t> r = arenaResult(op, 0);
    if (failed(a) || failed(r))
      return failure();
    auto body = st::CreateScalarOp(fbb, st::ScalarOpKind::ToTensor, *r, *a, 0, 0);
    out.push_back(command(op, st::CommandKind::ScalarOp, body.Union()));
    return success();
  }
  if (auto extract = dyn_cast<tensor::ExtractOp>(op)) {
    RankedTensorType t = extract.getTensor().getType();
    FailureOr<uint32_t> src = slot(op, extract.getTensor());
    if (failed(src))
      return failure();
    if (isa<IntegerType, IndexType>(extract.getType()) && t.getRank() == 0) {
      uint32_t dest = newScalar(extract.getResult());
      auto body = st::CreateScalarOp(fbb, st::ScalarOpKind::FromTensor, dest,
                                     *src, 0, 0);
      out.push_back(command(op, st::CommandKind::ScalarOp, body.Union()));
      return success();
    }
    if (t.getRank() != 1)
      return op->emitOpError("reads a rank-") << t.getRank()
                                              << " tensor; only 1-D is supported";
    int64_t eb = elementBytes(t.getElementType());
    auto scalarType = RankedTensorType::get({}, t.getElementType());
    FailureOr<uint32_t> dst = newTensor(extract.getResult(), st::Storage::Arena,
                                        functionArena + extraBytes(eb),
                                        st::Role::Transient, scalarType);
    if (failed(dst))
      return failure();
    Value index = extract.getIndices()[0];
    std::optional<int64_t> constant = getConstantIntValue(index);
    int reg = -1;
    if (!constant) {
      FailureOr<uint32_t> s = scalar(op, index);
      if (failed(s))
        return failure();
      reg = *s;
    }
    return copyRange(op, *src, *dst, eb, constant ? *constant * eb : 0, reg,
                     eb, 0, -1, 0, out);
  }
  if (auto slice = dyn_cast<tensor::ExtractSliceOp>(op)) {
    FailureOr<ContiguousSlice> c =
        contiguous(op, slice.getSourceType(), slice.getMixedOffsets(),
                   slice.getMixedSizes(), slice.getMixedStrides());
    FailureOr<uint32_t> src = slot(op, slice.getSource());
    FailureOr<uint32_t> dst = arenaResult(op, 0);
    if (failed(c) || failed(src) || failed(dst))
      return failure();
    int reg = -1;
    if (c->dynamicOffset) {
      FailureOr<uint32_t> s = scalar(op, c->dynamicOffset);
      if (failed(s))
        return failure();
      reg = *s;
    }
    return copyRange(op, *src, *dst, c->bytes, c->staticBytes, reg,
                     c->dynamicStride, 0, -1, 0, out);
  }
  if (auto insert = dyn_cast<tensor::InsertSliceOp>(op)) {
    FailureOr<ContiguousSlice> c =
        contiguous(op, insert.getDestType(), insert.getMixedOffsets(),
                   insert.getMixedSizes(), insert.getMixedStrides());
    FailureOr<uint32_t> src = slot(op, insert.getSource());
    FailureOr<uint32_t> dest = slot(op, insert.getDest());
    FailureOr<uint32_t> r = arenaResult(op, 0);
    if (failed(c) || failed(src) || failed(dest) || failed(r))
      return failure();
    const TensorEntry &de = tensors[*dest], &re = tensors[*r];
    if (de.storage != re.storage || de.index != re.index)
      (void)copyRange(op, *dest, *r, 0, 0, -1, 0, 0, -1, 0, out);
    int reg = -1;
    if (c->dynamicOffset) {
      FailureOr<uint32_t> s = scalar(op, c->dynamicOffset);
      if (failed(s))
        return failure();
      reg = *s;
    }
    return copyRange(op, *src, *r, c->bytes, 0, -1, 0, c->staticBytes, reg,
                     c->dynamicStride, out);
  }
  if (auto loop = dyn_cast<scf::ForOp>(op)) {
    auto lower = getConstantIntValue(loop.getLowerBound()),
         upper = getConstantIntValue(loop.getUpperBound()),
         step = getConstantIntValue(loop.getStep());
    if (!lower || !upper || !step)
      return op->emitOpError("needs constant bounds and step for now");
    // Carried tensors: one slot each for init, iter_arg, yield and result.
    SmallVector<uint32_t> carried;
    for (unsigned k = 0; k < loop.getNumRegionIterArgs(); ++k) {
      FailureOr<uint32_t> s = arenaResult(op, k);
      FailureOr<uint32_t> init = slot(op, loop.getInitArgs()[k]);
      if (failed(s) || failed(init))
        return failure();
      carried.push_back(*s);
      tensorOf[loop.getRegionIterArgs()[k]] = *s;
      const TensorEntry &ie = tensors[*init], &se = tensors[*s];
      if (ie.storage != se.storage || ie.index != se.index)
        (void)copyRange(op, *init, *s, 0, 0, -1, 0, 0, -1, 0, out);
    }
    uint32_t iv = newScalar(loop.getInductionVar());
    std::vector<fb::Offset<st::Command>> body;
    Block &b = loop.getRegion().front();
    for (Operation &inner : b.without_terminator())
      if (failed(emitOp(&inner, body)))
        return failure();
    // Move the yielded values into the carried slots. A yield that reads
    // another carried slot (a swap) goes through scratch space so that no
    // slot is overwritten before it is read.
    auto yield = cast<scf::YieldOp>(b.getTerminator());
    auto sameBytes = [&](uint32_t a, uint32_t c) {
      return tensors[a].storage == tensors[c].storage &&
             tensors[a].index == tensors[c].index;
    };
    SmallVector<uint32_t> sources;
    bool readsCarried = false;
    for (auto [k, v] : llvm::enumerate(yield.getOperands())) {
      FailureOr<uint32_t> y = slot(yield, v);
      if (failed(y))
        return failure();
      sources.push_back(*y);
      for (auto [j, c] : llvm::enumerate(carried))
        readsCarried |= j != k && sameBytes(*y, c);
    }
    if (readsCarried) {
      for (auto [k, src] : llvm::enumerate(sources)) {
        auto type = cast<RankedTensorType>(yield.getOperand(k).getType());
        int64_t bytes =
            type.getNumElements() * elementBytes(type.getElementType());
        FailureOr<uint32_t> tmp =
            newTensor(Value(), st::Storage::Arena,
                      functionArena + extraBytes(bytes), st::Role::Transient,
                      type);
        if (failed(tmp))
          return failure();
        (void)copyRange(yield, src, *tmp, 0, 0, -1, 0, 0, -1, 0, body);
        sources[k] = *tmp;
      }
    }
    for (auto [k, src] : llvm::enumerate(sources))
      if (!sameBytes(src, carried[k]))
        (void)copyRange(yield, src, carried[k], 0, 0, -1, 0, 0, -1, 0, body);
    auto cmds = fbb.CreateVector(body);
    auto l = st::CreateLoop(fbb, iv, *lower, *upper, *step, cmds);
    out.push_back(command(op, st::CommandKind::Loop, l.Union()));
    return success();
  }
  if (isa<tensor::EmptyOp>(op)) // contents undefined: a slot, no command
    return failure(failed(arenaResult(op, 0)));
  if (isa<func::ReturnOp>(op))
    return success();
  return op->emitOpError("cannot be executed by the runtime yet");
}

/// The state table: every `omni.state` name of the public functions, in
/// order of first appearance. omni-resident-state has checked them; a
/// module that did not run it gets the same checks here.
LogicalResult Writer::collectState() {
  for (auto fn : module.getOps<func::FuncOp>()) {
    if (fn.isExternal() || fn.isPrivate())
      continue;
    auto visit = [&](Attribute a, Type t) -> LogicalResult {
      if (!a)
        return success();
      auto name = dyn_cast<StringAttr>(a);
      auto type = dyn_cast<RankedTensorType>(t);
      if (!name || name.getValue().empty() || !type ||
          failed(dtypeOf(type.getElementType())))
        return fn.emitOpError("has omni.state = ")
               << a << " on a value of type " << t
               << "; expected a non-empty name on a tensor step.bin can hold";
      auto [it, inserted] =
          stateIndex.try_emplace(name.getValue(), state.size());
      if (inserted)
        state.push_back({name.str(), type, stateRole(name.getValue())});
      else if (state[it->second].type != type)
        return fn.emitOpError("has state '")
               << name.getValue() << "' of type " << t
               << " but another function has it as " << state[it->second].type;
      return success();
    };
    for (unsigned i = 0; i < fn.getNumArguments(); ++i)
      if (failed(
              visit(fn.getArgAttr(i, "omni.state"), fn.getArgumentTypes()[i])))
        return failure();
    for (unsigned i = 0; i < fn.getNumResults(); ++i)
      if (failed(
              visit(fn.getResultAttr(i, "omni.state"), fn.getResultTypes()[i])))
        return failure();
  }
  return success();
}

LogicalResult Writer::writeFunction(func::FuncOp fn) {
  tensorOf.clear();
  scalarOf.clear();
  resultArgument.clear();
  auto arena = fn->getAttrOfType<IntegerAttr>("omni.arena_size");
  if (!arena)
    return fn.emitOpError("has no memory plan (run omni-plan-memory first)");
  functionArena = 0;
  extraTop = llvm::alignTo(arena.getInt(), 64);
  arenaSize = std::max(arenaSize, extraTop);
  std::vector<uint32_t> inputs, outputs;
  argumentTensor.clear();
  Block &entry = fn.getBody().front();
  for (auto [i, arg] : llvm::enumerate(entry.getArguments())) {
    if (!isa<RankedTensorType>(arg.getType()))
      return fn.emitOpError("argument #")
             << i << " has type " << arg.getType()
             << "; public functions are entry points and take tensors only "
                "(make helpers private so they are inlined)";
    // A state argument reads its slot; the other arguments are the inputs,
    // numbered without the state.
    auto stateName = fn.getArgAttrOfType<StringAttr>(i, "omni.state");
    uint32_t slotIndex =
        stateName ? stateIndex.lookup(stateName.getValue()) : 0;
    FailureOr<uint32_t> t = stateName
                                ? newTensor(arg, st::Storage::State, slotIndex,
                                            state[slotIndex].role)
                                : newTensor(arg, st::Storage::Argument,
                                            inputs.size(), st::Role::Input);
    if (failed(t))
      return failure();
    // State is named by its slot, inputs by `omni.name`.
    if (stateName) {
      tensors[*t].name = stateName.str();
    } else {
      if (auto name = fn.getArgAttrOfType<StringAttr>(i, "omni.name"))
        tensors[*t].name = name.str();
      inputs.push_back(*t);
    }
    argumentTensor.push_back(*t);
  }
  // A value returned once as an output (not stored into a state slot), and
  // computed in the function body, is written directly into its result
  // buffer: no copy on return.
  auto ret = cast<func::ReturnOp>(entry.getTerminator());
  DenseMap<Value, int> uses;
  for (Value v : ret.getOperands())
    ++uses[v];
  int64_t numOutputs = 0;
  for (auto [k, v] : llvm::enumerate(ret.getOperands())) {
    if (fn.getResultAttr(k, "omni.state"))
      continue;
    if (Operation *def = v.getDefiningOp();
        def && uses[v] == 1 && def->getBlock() == &entry &&
        def->getAttrOfType<DenseI64ArrayAttr>("omni.offsets"))
      resultArgument[v] = inputs.size() + numOutputs;
    ++numOutputs;
  }
  std::vector<fb::Offset<st::Command>> commands;
  if (failed(emitBlock(entry, commands)) ||
      failed(emitReturn(fn, ret, inputs.size(), outputs, commands)))
    return failure();
  functions.push_back(st::CreateFunction(
      fbb, fbb.CreateString(fn.getSymName().str()), fbb.CreateVector(inputs),
      fbb.CreateVector(outputs), fbb.CreateVector(commands),
      scalarNames.size()));
  return success();
}

/// The end of a function: its outputs, then the stores into state slots.
/// A store whose value already is its slot (computed into it by donation,
/// or the slot's unchanged read) costs nothing; the others are Copies into
/// the slot, after every command of the body, so every read in the body
/// saw the old value. The Copies must not clobber what is still to be
/// read: an output that reads a slot a Copy overwrites is copied into its
/// result buffer first, and a store whose value is such a slot (a swap)
/// goes through scratch space.
LogicalResult Writer::emitReturn(func::FuncOp fn, func::ReturnOp ret,
                                 uint32_t numInputs,
                                 std::vector<uint32_t> &outputs,
                                 std::vector<fb::Offset<st::Command>> &out) {
  struct Store {
    uint32_t source, slot;
    RankedTensorType type;
  };
  SmallVector<Store> stores;
  DenseSet<int64_t> overwritten;
  SmallVector<uint32_t> values;
  for (auto [k, v] : llvm::enumerate(ret.getOperands())) {
    FailureOr<uint32_t> s = slot(ret, v);
    if (failed(s))
      return failure();
    values.push_back(*s);
    auto name = fn.getResultAttrOfType<StringAttr>(k, "omni.state");
    if (!name)
      continue;
    uint32_t index = stateIndex.lookup(name.getValue());
    if (tensors[*s].storage == st::Storage::State && tensors[*s].index == index)
      continue;
    stores.push_back({*s, index, cast<RankedTensorType>(v.getType())});
    overwritten.insert(index);
  }
  auto readsOverwritten = [&](uint32_t t) {
    return tensors[t].storage == st::Storage::State &&
           overwritten.contains(tensors[t].index);
  };
  for (auto [k, v] : llvm::enumerate(ret.getOperands())) {
    if (fn.getResultAttr(k, "omni.state"))
      continue;
    uint32_t t = values[k];
    auto type = cast<RankedTensorType>(v.getType());
    auto name = fn.getResultAttrOfType<StringAttr>(k, "omni.name");
    if (readsOverwritten(t)) {
      FailureOr<uint32_t> buffer =
          newTensor(Value(), st::Storage::Argument, numInputs + outputs.size(),
                    st::Role::Output, type);
      if (failed(buffer))
        return failure();
      (void)copyRange(ret, t, *buffer, 0, 0, -1, 0, 0, -1, 0, out);
      t = *buffer;
    } else if (name && tensors[t].storage == st::Storage::State) {
      // An output named apart from the slot it reads: an alias entry.
      TensorEntry e = tensors[t];
      FailureOr<uint32_t> alias =
          newTensor(Value(), e.storage, e.index, e.role, type);
      if (failed(alias))
        return failure();
      t = *alias;
    }
    if (name)
      tensors[t].name = name.str();
    outputs.push_back(t);
  }
  for (Store &store : stores) {
    if (!readsOverwritten(store.source))
      continue;
    int64_t bytes =
        store.type.getNumElements() * elementBytes(store.type.getElementType());
    FailureOr<uint32_t> tmp = newTensor(Value(), st::Storage::Arena,
                                        functionArena + extraBytes(bytes),
                                        st::Role::Transient, store.type);
    if (failed(tmp))
      return failure();
    (void)copyRange(ret, store.source, *tmp, 0, 0, -1, 0, 0, -1, 0, out);
    store.source = *tmp;
  }
  for (const Store &store : stores) {
    FailureOr<uint32_t> slotTensor =
        newTensor(Value(), st::Storage::State, store.slot,
                  state[store.slot].role, store.type);
    if (failed(slotTensor))
      return failure();
    tensors[*slotTensor].name = state[store.slot].name;
    (void)copyRange(ret, store.source, *slotTensor, 0, 0, -1, 0, 0, -1, 0, out);
  }
  return success();
}

FailureOr<std::vector<uint8_t>> Writer::write(StringRef producer) {
  if (failed(collectState()))
    return failure();
  for (auto fn : module.getOps<func::FuncOp>()) {
    if (fn.isExternal() || fn.isPrivate())
      continue;
    if (failed(writeFunction(fn)))
      return failure();
  }
  // Executable.
  std::vector<fb::Offset<fb::String>> kernels;
  for (const std::string &k : exe.kernels)
    kernels.push_back(fbb.CreateString(k));
  fbb.ForceVectorAlignment(exe.sharedObject.size(), 1, 32);
  auto data = fbb.CreateVector(
      reinterpret_cast<const uint8_t *>(exe.sharedObject.data()),
      exe.sharedObject.size());
  FailureOr<fb::Offset<fb::Vector<fb::Offset<st::KernelSignature>>>>
      signatures = kernelSignatures();
  if (failed(signatures))
    return failure();
  std::vector<fb::Offset<st::Executable>> executables;
  executables.push_back(st::CreateExecutable(
      fbb, fbb.CreateString("kernels"), st::ExecutableFormat::ElfSharedObject,
      fbb.CreateString(exe.features), data, fbb.CreateVector(kernels),
      *signatures));
  // Tensor table and scalars.
  std::vector<fb::Offset<st::Tensor>> tensorOffsets;
  for (const TensorEntry &t : tensors)
    tensorOffsets.push_back(st::CreateTensor(
        fbb, fbb.CreateString(t.name), t.dtype, fbb.CreateVector(t.shape),
        t.storage, t.index, t.role));
  std::vector<fb::Offset<st::StateSlot>> stateSlots;
  for (const StateEntry &e : state)
    stateSlots.push_back(st::CreateStateSlot(
        fbb, fbb.CreateString(e.name), *dtypeOf(e.type.getElementType()),
        fbb.CreateVector(std::vector<int64_t>(e.type.getShape())), e.role));
  std::vector<fb::Offset<st::Scalar>> scalars;
  for (const std::string &s : scalarNames)
    scalars.push_back(st::CreateScalar(fbb, fbb.CreateString(s)));
  auto target = st::CreateTarget(fbb, fbb.CreateString("cpu"),
                                 fbb.CreateString(exe.cpu),
                                 fbb.CreateString(exe.features));
  // Checksums (Integrity.h): zeros here, filled in once the bytes are final.
  st::Crc32c noChecksum(0);
  auto integrity = st::CreateIntegrity(
      fbb, &noChecksum,
      fbb.CreateVector(std::vector<uint32_t>(executables.size(), 0)),
      fbb.CreateVector(std::vector<uint32_t>(constants.size(), 0)));
  auto root = st::CreateStep(
      fbb, /*version=*/1, fbb.CreateString(producer.str()), target,
      fbb.CreateVector(tensorOffsets), fbb.CreateVector(scalars), arenaSize,
      fbb.CreateVector(executables), fbb.CreateVector(constants),
      fbb.CreateVector(stateSlots), fbb.CreateVector(functions), integrity);
  st::FinishStepBuffer(fbb, root);
  std::vector<uint8_t> bytes(fbb.GetBufferPointer(),
                             fbb.GetBufferPointer() + fbb.GetSize());
  if (!st::sealStepBin(bytes.data(), bytes.size()))
    return emitError(module.getLoc(),
                     "internal error: cannot fill in step.bin's checksums");
  return bytes;
}

/// One signature per kernel (step.fbs KernelSignature) from the fusions
/// compiled into it: codegen shares a kernel only between fusions with the
/// same operand and result types and grid, which is checked here. A kernel
/// no fusion uses gets grid -1, which no Dispatch can match.
FailureOr<fb::Offset<fb::Vector<fb::Offset<st::KernelSignature>>>>
Writer::kernelSignatures() {
  struct Signature {
    std::vector<st::KernelBuffer> operands, results;
    int64_t grid = -1;
    Operation *first = nullptr;
  };
  std::vector<Signature> sigs(exe.kernels.size());
  auto buffers = [](TypeRange types,
                    std::vector<st::KernelBuffer> &out) -> LogicalResult {
    for (Type t : types) {
      auto type = cast<RankedTensorType>(t);
      FailureOr<st::DType> dtype = dtypeOf(type.getElementType());
      if (failed(dtype))
        return failure();
      out.emplace_back(type.getNumElements() *
                           elementBytes(type.getElementType()),
                       *dtype);
    }
    return success();
  };
  WalkResult walk = module.walk([&](FusionOp fusion) {
    auto kernel = fusion->getAttrOfType<IntegerAttr>("omni.kernel");
    if (!kernel)
      return WalkResult::advance(); // reported where it is dispatched
    int64_t k = kernel.getInt();
    if (k < 0 || k >= static_cast<int64_t>(sigs.size())) {
      fusion.emitOpError("has kernel index ")
          << k << " but the executable has " << sigs.size() << " kernels";
      return WalkResult::interrupt();
    }
    Signature sig;
    auto grid = fusion->getAttrOfType<IntegerAttr>("omni.grid");
    sig.grid = grid ? grid.getInt() : 1;
    sig.first = fusion;
    if (failed(buffers(fusion.getInputs().getTypes(), sig.operands)) ||
        failed(buffers(fusion.getResultTypes(), sig.results))) {
      fusion.emitOpError("has a type step.bin cannot hold");
      return WalkResult::interrupt();
    }
    Signature &have = sigs[k];
    if (!have.first) {
      have = std::move(sig);
      return WalkResult::advance();
    }
    auto same = [](const std::vector<st::KernelBuffer> &a,
                   const std::vector<st::KernelBuffer> &b) {
      return a.size() == b.size() &&
             std::equal(a.begin(), a.end(), b.begin(), [](auto &x, auto &y) {
               return x.bytes() == y.bytes() && x.dtype() == y.dtype();
             });
    };
    if (have.grid != sig.grid || !same(have.operands, sig.operands) ||
        !same(have.results, sig.results)) {
      fusion.emitOpError("shares kernel ")
          << k << " with a fusion of other buffer types or grid (internal "
                  "error of kernel sharing)";
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  std::vector<fb::Offset<st::KernelSignature>> tables;
  for (const Signature &sig : sigs)
    tables.push_back(st::CreateKernelSignature(
        fbb, fbb.CreateVectorOfStructs(sig.operands),
        fbb.CreateVectorOfStructs(sig.results), sig.grid, /*num_scalars=*/0));
  return fbb.CreateVector(tables);
}

} // namespace

FailureOr<std::vector<uint8_t>>
mlir::omni::writeStepBin(ModuleOp module, const CpuExecutable &executable,
                         StringRef producer) {
  Writer writer(module, executable);
  return writer.write(producer);
}
