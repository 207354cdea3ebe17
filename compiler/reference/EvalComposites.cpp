//===- EvalComposites.cpp - softmax, norms, gelu ----------------*- C++ -*-===//
//
// Composite ops evaluated as wholes (in double, rounded once), not through
// their omni-decompose expansions, so the evaluator is an independent check
// of the decompositions.
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

constexpr double kPi = 3.14159265358979323846;

absl::StatusOr<Results> evalSoftmax(om::SoftmaxOp op, Interpreter &interp) {
  HostTensor out = interp.get(op.getOperand());
  int64_t dim = op.getDim();
  if (dim < 0 || dim >= out.rank())
    return opError(op, "dim " + llvm::Twine(dim) + " is outside the rank " +
                           llvm::Twine(out.rank()));
  int64_t extent = out.shape()[dim];
  int64_t inner = stridesOf(out.shape())[dim];
  int64_t outer = extent ? out.numElements() / (extent * inner) : 0;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      double *base = &out.floats()[o * extent * inner + i];
      double maxValue = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j < extent; ++j)
        maxValue = std::max(maxValue, base[j * inner]);
      double total = 0;
      for (int64_t j = 0; j < extent; ++j) {
        base[j * inner] = std::exp(base[j * inner] - maxValue);
        total += base[j * inner];
      }
      for (int64_t j = 0; j < extent; ++j)
        base[j * inner] /= total;
    }
  return Results{std::move(out)};
}

/// Normalizes each row of the last dimension: layer_norm (centred, biased
/// variance) or rms_norm.
absl::StatusOr<Results> normalize(Operation *op, Interpreter &interp,
                                  Value operand, Value weight, Value bias,
                                  double eps, bool centred) {
  HostTensor out = interp.get(operand);
  if (out.rank() < 1)
    return opError(op, "needs an operand of rank >= 1");
  int64_t n = out.shape().back();
  const HostTensor *w = weight ? &interp.get(weight) : nullptr;
  const HostTensor *b = bias ? &interp.get(bias) : nullptr;
  if ((w && w->numElements() != n) || (b && b->numElements() != n))
    return opError(op,
                   "weight and bias must have " + llvm::Twine(n) + " elements");
  int64_t rows = n ? out.numElements() / n : 0;
  for (int64_t r = 0; r < rows; ++r) {
    double *row = &out.floats()[r * n];
    double mean = 0;
    if (centred) {
      for (int64_t j = 0; j < n; ++j)
        mean += row[j];
      mean /= static_cast<double>(n);
    }
    double sq = 0;
    for (int64_t j = 0; j < n; ++j)
      sq += (row[j] - mean) * (row[j] - mean);
    double inv = 1.0 / std::sqrt(sq / static_cast<double>(n) + eps);
    for (int64_t j = 0; j < n; ++j) {
      double y = (row[j] - mean) * inv;
      if (w)
        y *= w->floats()[j];
      if (b)
        y += b->floats()[j];
      row[j] = y;
    }
  }
  return Results{std::move(out)};
}

absl::StatusOr<Results> evalGelu(om::GeluOp op, Interpreter &interp) {
  HostTensor out = interp.get(op.getOperand());
  bool tanhForm = op.getApproximation() == om::GeluApproximation::tanh;
  for (double &x : out.floats()) {
    if (tanhForm)
      x = 0.5 * x *
          (1.0 + std::tanh(std::sqrt(2.0 / kPi) * (x + 0.044715 * x * x * x)));
    else
      x = 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
  }
  return Results{std::move(out)};
}

} // namespace

void registerCompositeHandlers(HandlerTable &table) {
  addHandler<om::SoftmaxOp>(table, evalSoftmax);
  addHandler<om::LayerNormOp>(
      table, [](om::LayerNormOp op, Interpreter &interp) {
        return normalize(op, interp, op.getOperand(), op.getWeight(),
                         op.getBias(), op.getEps().convertToDouble(),
                         /*centred=*/true);
      });
  addHandler<om::RmsNormOp>(table, [](om::RmsNormOp op, Interpreter &interp) {
    return normalize(op, interp, op.getOperand(), op.getWeight(), Value(),
                     op.getEps().convertToDouble(), /*centred=*/false);
  });
  addHandler<om::GeluOp>(table, evalGelu);
}

} // namespace omni::reference::detail
