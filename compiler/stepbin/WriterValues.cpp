//===- WriterValues.cpp - values to tensor slots and index registers ------===//
//
// Every tensor value maps to an entry of the tensor table whose storage is
// the memory plan's arena offset (omni.offsets), a caller argument, a
// donated argument, a constant, or a state slot. Scalars (index and i64 values)
// map to index registers. Also the helpers every emitter uses to build a
// command.
//
//===----------------------------------------------------------------------===//

#include "compiler/stepbin/WriterImpl.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::omni::stepbin {

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

FailureOr<uint32_t> Writer::newTensor(Value v, st::Storage storage,
                                      int64_t index, st::Role role,
                                      RankedTensorType type) {
  if (!type)
    type = cast<RankedTensorType>(v.getType());
  FailureOr<st::DType> dtype = dtypeOf(type.getElementType());
  if (failed(dtype))
    return emitError(v.getLoc(), "step.bin cannot hold element type ")
           << type.getElementType();
  tensors.push_back(TensorEntry{
      "", *dtype, std::vector<int64_t>(type.getShape()), storage, index, role});
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
  auto phaseName =
      phase.empty() ? fb::Offset<fb::String>() : fbb.CreateSharedString(phase);
  return st::CreateCommand(fbb, kind, body, loc, phaseName);
}

fb::Offset<fb::Vector<uint32_t>> Writer::slots(Operation *op, ValueRange values,
                                               bool &ok) {
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
                                int64_t bytes, int64_t srcOffset, int srcScalar,
                                int64_t srcStride, int64_t dstOffset,
                                int dstScalar, int64_t dstStride,
                                Commands &out) {
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

bool Writer::sameBytes(uint32_t a, uint32_t b) const {
  return tensors[a].storage == tensors[b].storage &&
         tensors[a].index == tensors[b].index;
}

} // namespace mlir::omni::stepbin
