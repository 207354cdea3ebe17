//===- EvalShape.cpp - omni shape and data-movement primitives --*- C++ -*-===//
//
// broadcast_in_dim, reshape, transpose, slice, concat, pad, reduce, iota and
// constant, each a direct transcription of its OmniOps.td definition over
// row-major multi-indices. Reductions accumulate in double (integers in
// wrapping int64) whatever the element type, so float32 mode rounds a sum
// once; max and min propagate NaN.
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/Interpreter.h"

#include "dialects/omni/OmniOps.h"

#include <cmath>
#include <limits>

using namespace mlir;
namespace om = mlir::omni;

namespace omni::reference::detail {
namespace {

absl::StatusOr<Results> evalBroadcast(om::BroadcastInDimOp op,
                                      Interpreter &interp) {
  const HostTensor &in = interp.get(op.getOperand());
  HostTensor out = interp.zerosForResult(op, 0);
  ArrayRef<int64_t> dims = op.getDims();
  if (static_cast<int64_t>(dims.size()) != in.rank())
    return opError(op, "has " + llvm::Twine(dims.size()) +
                           " dims for an operand of rank " +
                           llvm::Twine(in.rank()));
  std::vector<int64_t> inStrides = stridesOf(in.shape());
  forEachIndex(out.shape(), [&](ArrayRef<int64_t> idx, int64_t position) {
    int64_t from = 0;
    for (int64_t i = 0; i < in.rank(); ++i)
      if (in.shape()[i] != 1)
        from += idx[dims[i]] * inStrides[i];
    copyElement(in, from, out, position);
  });
  return Results{std::move(out)};
}

absl::StatusOr<Results> evalReshape(om::ReshapeOp op, Interpreter &interp) {
  HostTensor out = interp.get(op.getOperand());
  HostTensor zeros = interp.zerosForResult(op, 0);
  if (zeros.numElements() != out.numElements())
    return opError(op, "cannot reshape " + out.typeString() + " to " +
                           zeros.typeString());
  out.reshape(zeros.shape());
  return Results{std::move(out)};
}

absl::StatusOr<Results> evalTranspose(om::TransposeOp op, Interpreter &interp) {
  const HostTensor &in = interp.get(op.getOperand());
  HostTensor out = interp.zerosForResult(op, 0);
  ArrayRef<int64_t> perm = op.getPermutation();
  std::vector<int64_t> inStrides = stridesOf(in.shape());
  forEachIndex(out.shape(), [&](ArrayRef<int64_t> idx, int64_t position) {
    int64_t from = 0;
    for (size_t i = 0; i < perm.size(); ++i)
      from += idx[i] * inStrides[perm[i]];
    copyElement(in, from, out, position);
  });
  return Results{std::move(out)};
}

absl::StatusOr<Results> evalSlice(om::SliceOp op, Interpreter &interp) {
  const HostTensor &in = interp.get(op.getOperand());
  HostTensor out = interp.zerosForResult(op, 0);
  ArrayRef<int64_t> start = op.getStart(), strides = op.getStrides();
  std::vector<int64_t> inStrides = stridesOf(in.shape());
  forEachIndex(out.shape(), [&](ArrayRef<int64_t> idx, int64_t position) {
    int64_t from = 0;
    for (size_t d = 0; d < idx.size(); ++d)
      from += (start[d] + idx[d] * strides[d]) * inStrides[d];
    copyElement(in, from, out, position);
  });
  return Results{std::move(out)};
}

absl::StatusOr<Results> evalConcat(om::ConcatOp op, Interpreter &interp) {
  HostTensor out = interp.zerosForResult(op, 0);
  int64_t dim = op.getDim();
  std::vector<int64_t> outStrides = stridesOf(out.shape());
  int64_t offset = 0;
  for (Value input : op.getInputs()) {
    const HostTensor &in = interp.get(input);
    forEachIndex(in.shape(), [&](ArrayRef<int64_t> idx, int64_t position) {
      int64_t to = 0;
      for (size_t d = 0; d < idx.size(); ++d)
        to += (idx[d] + (static_cast<int64_t>(d) == dim ? offset : 0)) *
              outStrides[d];
      copyElement(in, position, out, to);
    });
    offset += in.shape()[dim];
  }
  return Results{std::move(out)};
}

absl::StatusOr<Results> evalPad(om::PadOp op, Interpreter &interp) {
  const HostTensor &in = interp.get(op.getOperand());
  HostTensor out = interp.zerosForResult(op, 0);
  double value = op.getValue().convertToDouble();
  if (out.isFloat()) {
    for (double &v : out.floats())
      v = value;
  } else {
    int64_t iv =
        out.dtype() == DType::I1
            ? (value != 0)
            : saturatingFloatToInt(value, intBitWidth(out.dtype()), false);
    for (int64_t &v : out.ints())
      v = iv;
  }
  ArrayRef<int64_t> low = op.getLow();
  std::vector<int64_t> outStrides = stridesOf(out.shape());
  forEachIndex(in.shape(), [&](ArrayRef<int64_t> idx, int64_t position) {
    int64_t to = 0;
    for (size_t d = 0; d < idx.size(); ++d)
      to += (idx[d] + low[d]) * outStrides[d];
    copyElement(in, position, out, to);
  });
  return Results{std::move(out)};
}

absl::StatusOr<Results> evalReduce(om::ReduceOp op, Interpreter &interp) {
  const HostTensor &in = interp.get(op.getOperand());
  HostTensor out = interp.zerosForResult(op, 0);
  ArrayRef<int64_t> dims = op.getDims();
  om::ReduceKind kind = op.getKind();
  std::vector<bool> reduced(in.rank(), false);
  int64_t count = 1;
  for (int64_t d : dims) {
    if (d < 0 || d >= in.rank())
      return opError(op, "reduces dimension " + llvm::Twine(d) + " of a rank-" +
                             llvm::Twine(in.rank()) + " operand");
    reduced[d] = true;
    count *= in.shape()[d];
  }
  // Where each operand element lands in the result.
  std::vector<int64_t> outStrides = stridesOf(out.shape());
  auto target = [&](ArrayRef<int64_t> idx) {
    int64_t to = 0, k = 0;
    for (int64_t d = 0; d < in.rank(); ++d)
      if (!reduced[d])
        to += idx[d] * outStrides[k++];
    return to;
  };
  bool isMax = kind == om::ReduceKind::max;
  bool isMin = kind == om::ReduceKind::min;
  if (in.isFloat()) {
    double init = isMax   ? -std::numeric_limits<double>::infinity()
                  : isMin ? std::numeric_limits<double>::infinity()
                          : 0.0;
    for (double &v : out.floats())
      v = init;
    forEachIndex(in.shape(), [&](ArrayRef<int64_t> idx, int64_t position) {
      double &acc = out.floats()[target(idx)];
      double x = in.floats()[position];
      if (isMax || isMin) {
        if (std::isnan(acc) || std::isnan(x))
          acc = std::numeric_limits<double>::quiet_NaN();
        else
          acc = isMax ? std::max(acc, x) : std::min(acc, x);
      } else {
        acc += x;
      }
    });
    if (kind == om::ReduceKind::mean)
      for (double &v : out.floats())
        v /= static_cast<double>(count);
    return Results{std::move(out)};
  }
  unsigned width = intBitWidth(in.dtype());
  int64_t lowest = width >= 64 ? std::numeric_limits<int64_t>::min()
                               : -(int64_t{1} << (width - 1));
  int64_t highest = width >= 64 ? std::numeric_limits<int64_t>::max()
                                : (int64_t{1} << (width - 1)) - 1;
  int64_t init = isMax ? lowest : isMin ? highest : 0;
  for (int64_t &v : out.ints())
    v = init;
  forEachIndex(in.shape(), [&](ArrayRef<int64_t> idx, int64_t position) {
    int64_t &acc = out.ints()[target(idx)];
    int64_t x = in.ints()[position];
    if (isMax)
      acc = std::max(acc, x);
    else if (isMin)
      acc = std::min(acc, x);
    else
      acc = static_cast<int64_t>(static_cast<uint64_t>(acc) +
                                 static_cast<uint64_t>(x));
  });
  if (kind == om::ReduceKind::mean)
    return opError(op, "mean needs a float element type");
  return Results{std::move(out)};
}

absl::StatusOr<Results> evalIota(om::IotaOp op, Interpreter &interp) {
  HostTensor out = interp.zerosForResult(op, 0);
  int64_t dim = op.getDim();
  if (dim < 0 || dim >= out.rank())
    return opError(op, "dim " + llvm::Twine(dim) + " is outside the rank " +
                           llvm::Twine(out.rank()));
  forEachIndex(out.shape(), [&](ArrayRef<int64_t> idx, int64_t position) {
    if (out.isFloat())
      out.floats()[position] = static_cast<double>(idx[dim]);
    else
      out.ints()[position] = idx[dim];
  });
  return Results{std::move(out)};
}

absl::StatusOr<Results> evalConstant(om::ConstantOp op, Interpreter &) {
  absl::StatusOr<HostTensor> value =
      attributeValue(op, op.getValue(), op.getType());
  if (!value.ok())
    return value.status();
  return Results{std::move(*value)};
}

} // namespace

void registerShapeHandlers(HandlerTable &table) {
  addHandler<om::BroadcastInDimOp>(table, evalBroadcast);
  addHandler<om::ReshapeOp>(table, evalReshape);
  addHandler<om::TransposeOp>(table, evalTranspose);
  addHandler<om::SliceOp>(table, evalSlice);
  addHandler<om::ConcatOp>(table, evalConcat);
  addHandler<om::PadOp>(table, evalPad);
  addHandler<om::ReduceOp>(table, evalReduce);
  addHandler<om::IotaOp>(table, evalIota);
  addHandler<om::ConstantOp>(table, evalConstant);
}

} // namespace omni::reference::detail
