//===- WriterCommands.cpp - one emitter per op kind -----------------------===//
//
// Writer::emitters() says which emitter writes an op (the first row that
// matches):
//
//   arith.constant of index/integer  ScalarOp Const
//   omni.constant, arith.constant    an embedded constant (no command)
//   omni.fusion                      Dispatch of its kernel (CodegenResult)
//   omni.matmul / conv2d / attention LibraryCall
//   omni.random_* / omni.host_call   Random / HostCall
//   omni.reshape, omni.shard         a new tensor entry over the same bytes
//   arith on index, index_cast, from_elements/extract of i64 scalars
//                                    ScalarOp
//   tensor.extract_slice, tensor.insert_slice, tensor.extract
//                                    Copy (contiguous, one dynamic offset)
//   scf.for                          Loop; carried tensors live in the slots
//                                    omni-plan-memory gave the loop
//   omni.all_reduce / all_gather / reduce_scatter / broadcast
//                                    Collective (mesh and axes by index
//                                    into the meshes table)
//   omni.axis_index                  AxisIndex
//   tensor.empty                     a slot, no command
//
// An op no row matches is an error at the op. Each emitter places its
// results (WriterValues.cpp) and appends its commands.
//
//===----------------------------------------------------------------------===//

#include "compiler/stepbin/WriterImpl.h"

#include "dialects/omni/OmniOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <cstring>

namespace mlir::omni::stepbin {
namespace {

bool isIntegerLike(Type t) { return isa<IndexType, IntegerType>(t); }

} // namespace

/// The emitter table (the file comment lists it).
ArrayRef<Writer::EmitterRow> Writer::emitters() {
  static const EmitterRow rows[] = {
      {[](Operation *op) {
         auto c = dyn_cast<arith::ConstantOp>(op);
         return c && isIntegerLike(c.getType());
       },
       &Writer::emitScalarConstant},
      {[](Operation *op) { return op->hasTrait<OpTrait::ConstantLike>(); },
       &Writer::emitTensorConstant},
      {[](Operation *op) { return isa<FusionOp>(op); }, &Writer::emitDispatch},
      {[](Operation *op) {
         return isa<MatmulOp, Conv2dOp, AttentionOp, AttentionGradOp>(op);
       },
       &Writer::emitLibraryCall},
      {[](Operation *op) { return isa<RandomNormalOp, RandomUniformOp>(op); },
       &Writer::emitRandom},
      {[](Operation *op) { return isa<HostCallOp>(op); },
       &Writer::emitHostCall},
      {[](Operation *op) { return isa<ReshapeOp, ShardOp>(op); },
       &Writer::emitAlias},
      {[](Operation *op) {
         return isa<arith::AddIOp, arith::SubIOp, arith::MulIOp>(op) &&
                isIntegerLike(op->getResult(0).getType());
       },
       &Writer::emitScalarArith},
      {[](Operation *op) { return isa<arith::IndexCastOp>(op); },
       &Writer::emitIndexCast},
      {[](Operation *op) { return isa<tensor::FromElementsOp>(op); },
       &Writer::emitFromElements},
      {[](Operation *op) { return isa<tensor::ExtractOp>(op); },
       &Writer::emitExtract},
      {[](Operation *op) { return isa<tensor::ExtractSliceOp>(op); },
       &Writer::emitExtractSlice},
      {[](Operation *op) { return isa<tensor::InsertSliceOp>(op); },
       &Writer::emitInsertSlice},
      {[](Operation *op) { return isa<scf::ForOp>(op); }, &Writer::emitLoop},
      {[](Operation *op) {
         return isa<AllReduceOp, AllGatherOp, ReduceScatterOp, BroadcastOp>(op);
       },
       &Writer::emitCollective},
      {[](Operation *op) { return isa<AxisIndexOp>(op); },
       &Writer::emitAxisIndex},
      {[](Operation *op) { return isa<tensor::EmptyOp>(op); },
       &Writer::emitEmpty},
      {[](Operation *op) { return isa<func::ReturnOp>(op); },
       &Writer::emitNothing},
  };
  return rows;
}

namespace {

/// A contiguous slice: static offsets that are zero past the first
/// dimension, sizes that are full past the first non-unit one, unit
/// strides: (byte offset, the dynamic offset if any, bytes per unit of the
/// dynamic offset, bytes).
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
    // A dimension cut short is contiguous only below dimensions of size 1
    // (count is the product of the outer sizes).
    if ((partial || count > 1) && *size != full.getDimSize(d))
      return op->emitOpError("is not contiguous in memory");
    if (*size != 1)
      partial = partial || *size != full.getDimSize(d) || d > 0;
    count *= *size;
  }
  s.bytes = count * eb;
  return s;
}

} // namespace

LogicalResult Writer::emitBlock(Block &block, Commands &out) {
  for (Operation &op : block)
    if (failed(emitOp(&op, out)))
      return failure();
  return success();
}

LogicalResult Writer::emitOp(Operation *op, Commands &out) {
  for (const EmitterRow &row : emitters())
    if (row.matches(op))
      return (this->*row.emit)(op, out);
  return op->emitOpError("cannot be executed by the runtime yet");
}

/// Index and integer constants are registers.
LogicalResult Writer::emitScalarConstant(Operation *op, Commands &out) {
  auto c = cast<arith::ConstantOp>(op);
  uint32_t dest = newScalar(c.getResult());
  auto body = st::CreateScalarOp(fbb, st::ScalarOpKind::Const, dest, 0, 0,
                                 cast<IntegerAttr>(c.getValue()).getInt());
  out.push_back(command(op, st::CommandKind::ScalarOp, body.Union()));
  return success();
}

/// Tensor constants are embedded in step.bin.
LogicalResult Writer::emitTensorConstant(Operation *op, Commands &) {
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
  constants.push_back(
      st::CreateConstant(fbb, data, splat ? type.getNumElements() : 1));
  return failure(failed(newTensor(op->getResult(0), st::Storage::Constant,
                                  constants.size() - 1, st::Role::Constant)));
}

LogicalResult Writer::emitDispatch(Operation *op, Commands &out) {
  auto fusion = cast<FusionOp>(op);
  auto ref = codegen.kernelOf.find(op);
  if (ref == codegen.kernelOf.end())
    return fusion.emitOpError("has no compiled kernel");
  const CompiledKernel &kernel = codegen.kernel(ref->second);
  if (!llvm::equal(fusion.getInputs().getTypes(), kernel.operands) ||
      !llvm::equal(fusion.getResultTypes(), kernel.results))
    return fusion.emitOpError("runs kernel '")
           << kernel.symbol
           << "' compiled for other buffer types (internal error of kernel "
              "sharing)";
  bool ok = true;
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
  auto body = st::CreateDispatch(
      fbb, ref->second.executable, ref->second.kernel,
      dispatchGrid(kernel.launch), operands, fbb.CreateVector(results),
      fbb.CreateVector(std::vector<uint32_t>{}));
  out.push_back(command(op, st::CommandKind::Dispatch, body.Union()));
  return success();
}

LogicalResult Writer::emitLibraryCall(Operation *op, Commands &out) {
  bool ok = true;
  auto operands = slots(op, op->getOperands(), ok);
  std::vector<uint32_t> results;
  for (unsigned i = 0; i < op->getNumResults(); ++i) {
    FailureOr<uint32_t> r = arenaResult(op, i);
    if (failed(r))
      return failure();
    results.push_back(*r);
  }
  if (!ok)
    return failure();
  std::vector<int64_t> ints;
  std::vector<double> floats;
  st::Library lib;
  bool epilogue = false;
  if (auto m = dyn_cast<MatmulOp>(op)) {
    lib = st::Library::Matmul;
    ints = {m.getTransposeLhs(), m.getTransposeRhs()};
    epilogue = options.matmulEpilogues && hasEpilogue(op);
  } else if (auto c = dyn_cast<Conv2dOp>(op)) {
    lib = st::Library::Conv2d;
    ints = {c.getStrides()[0], c.getStrides()[1],  c.getPadding()[0],
            c.getPadding()[1], c.getDilation()[0], c.getDilation()[1]};
  } else if (auto a = dyn_cast<AttentionOp>(op)) {
    lib = st::Library::Attention;
    ints = {a.getMask() ? 1 : 0};
    if (a.getScale())
      floats.push_back(a.getScale()->convertToDouble());
  } else {
    auto g = cast<AttentionGradOp>(op);
    lib = st::Library::AttentionBackward;
    if (g.getScale())
      floats.push_back(g.getScale()->convertToDouble());
  }
  auto body = st::CreateLibraryCall(
      fbb, lib, operands, fbb.CreateVector(results), fbb.CreateVector(ints),
      fbb.CreateVector(floats), epilogue);
  out.push_back(command(op, st::CommandKind::LibraryCall, body.Union()));
  return success();
}

bool Writer::hasEpilogue(Operation *op) const {
  // The fusion must be the next op after reshapes of the result (aliases
  // of its bytes, which write no command): its Dispatch is then the next
  // command (emitDispatch writes one), in the same list.
  llvm::SmallPtrSet<Value, 4> result{op->getResult(0)};
  Operation *next = op->getNextNode();
  while (isa_and_nonnull<ReshapeOp>(next) &&
         result.contains(next->getOperand(0))) {
    result.insert(next->getResult(0));
    next = next->getNextNode();
  }
  auto fusion = dyn_cast_or_null<FusionOp>(next);
  // The pair runs as one command, timed in the matmul's phase: only pairs
  // within one phase.
  if (!fusion || phaseOf(fusion->getLoc()) != phaseOf(op->getLoc()))
    return false;
  auto ref = codegen.kernelOf.find(fusion);
  if (ref == codegen.kernelOf.end())
    return false;
  const CompiledKernel &kernel = codegen.kernel(ref->second);
  const std::vector<int64_t> &itemBytes = itemBytesOf(kernel.launch);
  if (itemBytes.size() != kernel.operands.size() + kernel.results.size())
    return false;
  // Every input that is the matmul's result is read by slices, and the
  // slices tile it (the loader checks the same, step.fbs).
  auto type = cast<RankedTensorType>(op->getResult(0).getType());
  const int64_t bytes =
      type.getNumElements() * (type.getElementTypeBitWidth() / 8);
  const int64_t grid = dispatchGrid(kernel.launch);
  bool reads = false;
  for (auto [i, input] : llvm::enumerate(fusion.getInputs())) {
    if (!result.contains(input))
      continue;
    const int64_t b = itemBytes[i];
    if (b <= 0 || b > bytes || (bytes + b - 1) / b != grid)
      return false;
    reads = true;
  }
  return reads;
}

LogicalResult Writer::emitRandom(Operation *op, Commands &out) {
  auto key = slot(op, op->getOperand(0)), counter = slot(op, op->getOperand(1)),
       offset = slot(op, op->getOperand(2));
  FailureOr<uint32_t> r = arenaResult(op, 0);
  if (failed(key) || failed(counter) || failed(offset) || failed(r))
    return failure();
  auto body =
      st::CreateRandom(fbb,
                       isa<RandomNormalOp>(op) ? st::Distribution::Normal
                                               : st::Distribution::Uniform,
                       *key, *counter, *offset, *r);
  out.push_back(command(op, st::CommandKind::Random, body.Union()));
  return success();
}

LogicalResult Writer::emitHostCall(Operation *op, Commands &out) {
  auto call = cast<HostCallOp>(op);
  bool ok = true;
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

/// A reshape or shard reads the same bytes: a new entry, no command.
LogicalResult Writer::emitAlias(Operation *op, Commands &) {
  FailureOr<uint32_t> src = slot(op, op->getOperand(0));
  if (failed(src))
    return failure();
  TensorEntry e = tensors[*src];
  return failure(
      failed(newTensor(op->getResult(0), e.storage, e.index, e.role)));
}

/// Index arithmetic.
LogicalResult Writer::emitScalarArith(Operation *op, Commands &out) {
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

/// Registers hold int64: a cast is the same register.
LogicalResult Writer::emitIndexCast(Operation *op, Commands &) {
  auto indexCast = cast<arith::IndexCastOp>(op);
  FailureOr<uint32_t> a = scalar(op, indexCast.getIn());
  if (failed(a))
    return failure();
  scalarOf[indexCast.getResult()] = *a;
  return success();
}

LogicalResult Writer::emitFromElements(Operation *op, Commands &out) {
  auto from = cast<tensor::FromElementsOp>(op);
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

/// An integer from a 0-D tensor is a register; a float element of a 1-D
/// tensor is copied into a 0-D slot past the memory plan.
LogicalResult Writer::emitExtract(Operation *op, Commands &out) {
  auto extract = cast<tensor::ExtractOp>(op);
  RankedTensorType t = extract.getTensor().getType();
  FailureOr<uint32_t> src = slot(op, extract.getTensor());
  if (failed(src))
    return failure();
  if (isIntegerLike(extract.getType()) && t.getRank() == 0) {
    uint32_t dest = newScalar(extract.getResult());
    auto body =
        st::CreateScalarOp(fbb, st::ScalarOpKind::FromTensor, dest, *src, 0, 0);
    out.push_back(command(op, st::CommandKind::ScalarOp, body.Union()));
    return success();
  }
  if (t.getRank() != 1)
    return op->emitOpError("reads a rank-")
           << t.getRank() << " tensor; only 1-D is supported";
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
  return copyRange(op, *src, *dst, eb, constant ? *constant * eb : 0, reg, eb,
                   0, -1, 0, out);
}

LogicalResult Writer::emitExtractSlice(Operation *op, Commands &out) {
  auto slice = cast<tensor::ExtractSliceOp>(op);
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

/// The destination is copied into the result's slot unless they share
/// bytes, then the source into its range.
LogicalResult Writer::emitInsertSlice(Operation *op, Commands &out) {
  auto insert = cast<tensor::InsertSliceOp>(op);
  FailureOr<ContiguousSlice> c =
      contiguous(op, insert.getDestType(), insert.getMixedOffsets(),
                 insert.getMixedSizes(), insert.getMixedStrides());
  FailureOr<uint32_t> src = slot(op, insert.getSource());
  FailureOr<uint32_t> dest = slot(op, insert.getDest());
  FailureOr<uint32_t> r = arenaResult(op, 0);
  if (failed(c) || failed(src) || failed(dest) || failed(r))
    return failure();
  if (!sameBytes(*dest, *r))
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

LogicalResult Writer::emitLoop(Operation *op, Commands &out) {
  auto loop = cast<scf::ForOp>(op);
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
    if (!sameBytes(*init, *s))
      (void)copyRange(op, *init, *s, 0, 0, -1, 0, 0, -1, 0, out);
  }
  uint32_t iv = newScalar(loop.getInductionVar());
  Commands body;
  Block &b = loop.getRegion().front();
  for (Operation &inner : b.without_terminator())
    if (failed(emitOp(&inner, body)))
      return failure();
  // Move the yielded values into the carried slots. A yield that reads
  // another carried slot (a swap) goes through scratch space so that no
  // slot is overwritten before it is read.
  auto yield = cast<scf::YieldOp>(b.getTerminator());
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
      FailureOr<uint32_t> tmp = newTensor(Value(), st::Storage::Arena,
                                          functionArena + extraBytes(bytes),
                                          st::Role::Transient, type);
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

namespace {

st::ReduceOp toSchema(ReduceKind kind) {
  switch (kind) {
  case ReduceKind::sum:
    return st::ReduceOp::Sum;
  case ReduceKind::max:
    return st::ReduceOp::Max;
  case ReduceKind::min:
    return st::ReduceOp::Min;
  case ReduceKind::mean:
    return st::ReduceOp::Mean;
  }
  llvm_unreachable("unknown reduce kind");
}

} // namespace

/// A collective reads its operand and writes its own result buffer (the
/// executor stages through scratch where a gather or scatter along an
/// inner dimension needs it).
LogicalResult Writer::emitCollective(Operation *op, Commands &out) {
  st::CollectiveKind kind = st::CollectiveKind::AllReduce;
  st::ReduceOp reduce = st::ReduceOp::Sum;
  int64_t dim = 0, root = 0;
  StringRef mesh;
  ArrayAttr axes;
  if (auto c = dyn_cast<AllReduceOp>(op)) {
    reduce = toSchema(c.getKind());
    mesh = c.getMesh();
    axes = c.getAxes();
  } else if (auto c = dyn_cast<AllGatherOp>(op)) {
    kind = st::CollectiveKind::AllGather;
    dim = c.getDim();
    mesh = c.getMesh();
    axes = c.getAxes();
  } else if (auto c = dyn_cast<ReduceScatterOp>(op)) {
    kind = st::CollectiveKind::ReduceScatter;
    reduce = toSchema(c.getKind());
    dim = c.getDim();
    mesh = c.getMesh();
    axes = c.getAxes();
  } else {
    auto b = cast<BroadcastOp>(op);
    kind = st::CollectiveKind::Broadcast;
    root = b.getRoot();
    mesh = b.getMesh();
    axes = b.getAxes();
  }
  uint32_t meshAt = 0;
  std::vector<uint32_t> axisIndices;
  if (failed(meshAxes(op, mesh, axes, meshAt, axisIndices)))
    return failure();
  FailureOr<uint32_t> operand = slot(op, op->getOperand(0));
  FailureOr<uint32_t> result = arenaResult(op, 0);
  if (failed(operand) || failed(result))
    return failure();
  auto body = st::CreateCollective(fbb, kind, reduce, meshAt,
                                   fbb.CreateVector(axisIndices), dim, root,
                                   *operand, *result);
  out.push_back(command(op, st::CommandKind::Collective, body.Union()));
  return success();
}

LogicalResult Writer::emitAxisIndex(Operation *op, Commands &out) {
  auto a = cast<AxisIndexOp>(op);
  uint32_t meshAt = 0;
  std::vector<uint32_t> axisIndices;
  if (failed(meshAxes(op, a.getMesh(), a.getAxes(), meshAt, axisIndices)))
    return failure();
  FailureOr<uint32_t> result = arenaResult(op, 0);
  if (failed(result))
    return failure();
  auto body =
      st::CreateAxisIndex(fbb, meshAt, fbb.CreateVector(axisIndices), *result);
  out.push_back(command(op, st::CommandKind::AxisIndex, body.Union()));
  return success();
}

/// Contents undefined: a slot, no command.
LogicalResult Writer::emitEmpty(Operation *op, Commands &) {
  return failure(failed(arenaResult(op, 0)));
}

/// The function's return: its values are the outputs (writeFunction).
LogicalResult Writer::emitNothing(Operation *, Commands &) { return success(); }

} // namespace mlir::omni::stepbin
