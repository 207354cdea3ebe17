//===- EvalStructured.cpp - func, scf and tensor ops ------------*- C++ -*-===//
//
// The upstream structure omni programs are written in: calls, counted loops
// with loop-carried values (the denoising loop), conditionals, and the
// tensor ops that move scalars in and out of tensors. Loop bounds follow
// scf.for: the body runs for iv = lb, lb + step, ... while iv < ub, and a
// non-positive step (undefined in scf) is an error here.
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/Interpreter.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;

namespace omni::reference::detail {
namespace {

/// The row-major position of `indices` in `shape`, or an error naming the
/// op when an index is out of bounds.
absl::StatusOr<int64_t> linearIndex(Operation *op, const HostTensor &tensor,
                                    ValueRange indices, Interpreter &interp) {
  if (static_cast<int64_t>(indices.size()) != tensor.rank())
    return opError(op, "has " + llvm::Twine(indices.size()) +
                           " indices for a tensor of rank " +
                           llvm::Twine(tensor.rank()));
  std::vector<int64_t> strides = stridesOf(tensor.shape());
  int64_t position = 0;
  for (auto [d, index] : llvm::enumerate(indices)) {
    int64_t i = interp.get(index).intAt(0);
    if (i < 0 || i >= tensor.shape()[d])
      return opError(op, "index " + llvm::Twine(i) + " of dimension " +
                             llvm::Twine(d) + " is outside [0, " +
                             llvm::Twine(tensor.shape()[d]) + ")");
    position += i * strides[d];
  }
  return position;
}

/// Copies element `from` of a tensor or scalar into element `to` of `dst`
/// (same category; the scalar may come from arith with another width).
void copyScalar(const HostTensor &src, int64_t from, HostTensor &dst,
                int64_t to) {
  if (dst.isFloat())
    dst.floats()[to] = src.doubleAt(from);
  else
    dst.ints()[to] = src.intAt(from);
}

absl::StatusOr<Results> evalCall(func::CallOp op, Interpreter &interp) {
  auto fn = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
      op, op.getCalleeAttr());
  if (!fn)
    return opError(op, "calls @" + op.getCallee() +
                           ", which is not a func.func of the module");
  Results args;
  for (Value v : op.getOperands())
    args.push_back(interp.get(v));
  return interp.callFunction(fn, args, op);
}

absl::StatusOr<Results> evalFor(scf::ForOp op, Interpreter &interp) {
  int64_t lb = interp.get(op.getLowerBound()).intAt(0);
  int64_t ub = interp.get(op.getUpperBound()).intAt(0);
  int64_t step = interp.get(op.getStep()).intAt(0);
  if (step <= 0)
    return opError(op, "step must be positive, found " + llvm::Twine(step));
  bool isUnsigned = static_cast<bool>(op.getUnsignedCmp());
  absl::StatusOr<ValueType> ivType =
      valueTypeOf(op.getInductionVar().getType());
  if (!ivType.ok())
    return opError(op, ivType.status());
  Results carried;
  for (Value v : op.getInitArgs())
    carried.push_back(interp.get(v));
  auto less = [&](int64_t a, int64_t b) {
    return isUnsigned ? static_cast<uint64_t>(a) < static_cast<uint64_t>(b)
                      : a < b;
  };
  for (int64_t iv = lb; less(iv, ub);) {
    Results args;
    args.reserve(carried.size() + 1);
    args.push_back(HostTensor::scalarInt(ivType->dtype, iv));
    for (HostTensor &t : carried)
      args.push_back(std::move(t));
    absl::StatusOr<Results> yielded = interp.runBlock(*op.getBody(), args, op);
    if (!yielded.ok())
      return yielded.status();
    carried = std::move(*yielded);
    // Stop instead of wrapping around when iv + step overflows.
    if (__builtin_add_overflow(iv, step, &iv))
      break;
  }
  return carried;
}

absl::StatusOr<Results> evalIf(scf::IfOp op, Interpreter &interp) {
  bool condition = interp.get(op.getCondition()).intAt(0) != 0;
  Region &region = condition ? op.getThenRegion() : op.getElseRegion();
  if (region.empty())
    return Results{};
  return interp.runBlock(region.front(), {}, op);
}

absl::StatusOr<Results> evalExtract(tensor::ExtractOp op, Interpreter &interp) {
  const HostTensor &src = interp.get(op.getTensor());
  absl::StatusOr<int64_t> position =
      linearIndex(op, src, op.getIndices(), interp);
  if (!position.ok())
    return position.status();
  HostTensor out = interp.zerosForResult(op, 0);
  copyScalar(src, *position, out, 0);
  return Results{std::move(out)};
}

absl::StatusOr<Results> evalInsert(tensor::InsertOp op, Interpreter &interp) {
  HostTensor dest = interp.get(op.getDest());
  absl::StatusOr<int64_t> position =
      linearIndex(op, dest, op.getIndices(), interp);
  if (!position.ok())
    return position.status();
  copyScalar(interp.get(op.getScalar()), 0, dest, *position);
  return Results{std::move(dest)};
}

absl::StatusOr<Results> evalFromElements(tensor::FromElementsOp op,
                                         Interpreter &interp) {
  HostTensor out = interp.zerosForResult(op, 0);
  if (static_cast<int64_t>(op.getElements().size()) != out.numElements())
    return opError(op, "has " + llvm::Twine(op.getElements().size()) +
                           " elements for " + llvm::Twine(out.numElements()));
  for (auto [i, v] : llvm::enumerate(op.getElements()))
    copyScalar(interp.get(v), 0, out, static_cast<int64_t>(i));
  return Results{std::move(out)};
}

absl::StatusOr<Results> evalSplat(tensor::SplatOp op, Interpreter &interp) {
  if (!op.getDynamicSizes().empty())
    return opError(op, "has dynamic sizes; the reference evaluator needs "
                       "static shapes");
  HostTensor out = interp.zerosForResult(op, 0);
  const HostTensor &scalar = interp.get(op.getInput());
  for (int64_t i = 0; i < out.numElements(); ++i)
    copyScalar(scalar, 0, out, i);
  return Results{std::move(out)};
}

/// Ops that only reinterpret the shape of their first operand.
absl::StatusOr<Results> evalReshapeLike(Operation *op, Interpreter &interp) {
  HostTensor out = interp.get(op->getOperand(0));
  HostTensor zeros = interp.zerosForResult(op, 0);
  if (zeros.numElements() != out.numElements())
    return opError(op, "changes the element count from " +
                           llvm::Twine(out.numElements()) + " to " +
                           llvm::Twine(zeros.numElements()));
  out.reshape(zeros.shape());
  return Results{std::move(out)};
}

absl::StatusOr<Results> evalDim(tensor::DimOp op, Interpreter &interp) {
  const HostTensor &src = interp.get(op.getSource());
  int64_t d = interp.get(op.getIndex()).intAt(0);
  if (d < 0 || d >= src.rank())
    return opError(op, "dimension " + llvm::Twine(d) + " is outside the rank " +
                           llvm::Twine(src.rank()));
  return Results{HostTensor::scalarInt(DType::I64, src.shape()[d])};
}

} // namespace

void registerStructuredHandlers(HandlerTable &table) {
  addHandler<func::CallOp>(table, evalCall);
  addHandler<scf::ForOp>(table, evalFor);
  addHandler<scf::IfOp>(table, evalIf);
  addHandler<tensor::ExtractOp>(table, evalExtract);
  addHandler<tensor::InsertOp>(table, evalInsert);
  addHandler<tensor::FromElementsOp>(table, evalFromElements);
  addHandler<tensor::SplatOp>(table, evalSplat);
  addHandler<tensor::DimOp>(table, evalDim);
  addHandler<tensor::EmptyOp>(
      table,
      [](tensor::EmptyOp op, Interpreter &interp) -> absl::StatusOr<Results> {
        // Uninitialized in MLIR; zeros here, so reads are deterministic.
        return Results{interp.zerosForResult(op, 0)};
      });
  addGenericHandler<tensor::CastOp, tensor::CollapseShapeOp,
                    tensor::ExpandShapeOp>(table, evalReshapeLike);
}

} // namespace omni::reference::detail
