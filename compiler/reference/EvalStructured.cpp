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

/// The offsets, sizes and strides of a slice op as integers, checked to stay
/// inside a tensor of `shape`.
struct SliceBox {
  llvm::SmallVector<int64_t> offsets, sizes, strides;
};

static absl::StatusOr<SliceBox>
resolveSlice(mlir::Operation *op, llvm::ArrayRef<mlir::OpFoldResult> offsets,
             llvm::ArrayRef<mlir::OpFoldResult> sizes,
             llvm::ArrayRef<mlir::OpFoldResult> strides,
             llvm::ArrayRef<int64_t> shape, Interpreter &interp) {
  SliceBox box;
  auto value = [&](mlir::OpFoldResult f) -> int64_t {
    if (auto attr = llvm::dyn_cast_if_present<mlir::Attribute>(f))
      return llvm::cast<mlir::IntegerAttr>(attr).getInt();
    return interp.get(llvm::cast<mlir::Value>(f)).intAt(0);
  };
  for (size_t d = 0; d < shape.size(); ++d) {
    box.offsets.push_back(value(offsets[d]));
    box.sizes.push_back(value(sizes[d]));
    box.strides.push_back(value(strides[d]));
    int64_t last = box.offsets[d] + (box.sizes[d] - 1) * box.strides[d];
    if (box.offsets[d] < 0 || box.sizes[d] < 0 || box.strides[d] < 1 ||
        (box.sizes[d] > 0 && last >= shape[d]))
      return opError(op, "slice of dimension " + llvm::Twine(d) + " (offset " +
                             llvm::Twine(box.offsets[d]) + ", size " +
                             llvm::Twine(box.sizes[d]) + ", stride " +
                             llvm::Twine(box.strides[d]) +
                             ") is outside the size " + llvm::Twine(shape[d]));
  }
  return box;
}

/// Calls `fn(sliceIndex, fullIndex)` for every element of the slice, in
/// row-major order of the slice (rank-reduced unit dimensions included).
template <typename F>
static void forEachInSlice(const SliceBox &box, llvm::ArrayRef<int64_t> shape,
                           F fn) {
  int64_t total = 1;
  for (int64_t s : box.sizes)
    total *= s;
  llvm::SmallVector<int64_t> idx(box.sizes.size(), 0);
  for (int64_t n = 0; n < total; ++n) {
    int64_t full = 0;
    for (size_t d = 0; d < shape.size(); ++d)
      full = full * shape[d] + box.offsets[d] + idx[d] * box.strides[d];
    fn(n, full);
    for (int64_t d = static_cast<int64_t>(idx.size()) - 1; d >= 0; --d) {
      if (++idx[d] < box.sizes[d])
        break;
      idx[d] = 0;
    }
  }
}

absl::StatusOr<Results> evalExtractSlice(tensor::ExtractSliceOp op,
                                         Interpreter &interp) {
  const HostTensor &src = interp.get(op.getSource());
  absl::StatusOr<SliceBox> box =
      resolveSlice(op, op.getMixedOffsets(), op.getMixedSizes(),
                   op.getMixedStrides(), src.shape(), interp);
  if (!box.ok())
    return box.status();
  HostTensor out = interp.zerosForResult(op, 0);
  forEachInSlice(*box, src.shape(), [&](int64_t n, int64_t full) {
    copyScalar(src, full, out, n);
  });
  return Results{std::move(out)};
}

absl::StatusOr<Results> evalInsertSlice(tensor::InsertSliceOp op,
                                        Interpreter &interp) {
  HostTensor dest = interp.get(op.getDest());
  const HostTensor &src = interp.get(op.getSource());
  absl::StatusOr<SliceBox> box =
      resolveSlice(op, op.getMixedOffsets(), op.getMixedSizes(),
                   op.getMixedStrides(), dest.shape(), interp);
  if (!box.ok())
    return box.status();
  forEachInSlice(*box, dest.shape(), [&](int64_t n, int64_t full) {
    copyScalar(src, n, dest, full);
  });
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
  addHandler<tensor::ExtractSliceOp>(table, evalExtractSlice);
  addHandler<tensor::InsertSliceOp>(table, evalInsertSlice);
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
