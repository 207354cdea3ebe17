//===- EvalElementwise.cpp - omni elementwise primitives --------*- C++ -*-===//
//
// Unary and binary math, comparisons, select, cast and is_finite. Float
// math runs in double on the operands' values; the driver rounds the result
// to its element type in float32 mode. Integer math wraps (two's
// complement), integer division truncates toward zero and reports division
// by zero. max and min propagate NaN (torch.maximum, StableHLO), and
// comparisons with NaN are false except `ne`.
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/Interpreter.h"

#include "dialects/omni/OmniOps.h"

#include <cmath>
#include <limits>
#include <optional>

using namespace mlir;
namespace om = mlir::omni;

namespace omni::reference::detail {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// A float-only unary op.
OpHandler unaryFloat(double (*f)(double)) {
  return [f](Operation *op, Interpreter &interp) -> absl::StatusOr<Results> {
    HostTensor out = interp.get(op->getOperand(0));
    for (double &v : out.floats())
      v = f(v);
    return Results{std::move(out)};
  };
}

/// A unary op on floats or integers (integers computed as uint64 words so
/// that overflow wraps).
OpHandler unaryNumeric(double (*f)(double), int64_t (*g)(int64_t)) {
  return [f, g](Operation *op, Interpreter &interp) -> absl::StatusOr<Results> {
    HostTensor out = interp.get(op->getOperand(0));
    for (double &v : out.floats())
      v = f(v);
    for (int64_t &v : out.ints())
      v = g(v);
    return Results{std::move(out)};
  };
}

/// A binary op on floats (f) or integers (g, which returns std::nullopt
/// for an undefined result, reported as `why`).
OpHandler binary(double (*f)(double, double),
                 std::optional<int64_t> (*g)(int64_t, int64_t),
                 const char *why = "") {
  return [f, g, why](Operation *op,
                     Interpreter &interp) -> absl::StatusOr<Results> {
    HostTensor out = interp.get(op->getOperand(0));
    const HostTensor &rhs = interp.get(op->getOperand(1));
    if (out.isFloat()) {
      if (!f)
        return opError(op, "does not take float operands");
      for (int64_t i = 0; i < out.numElements(); ++i)
        out.floats()[i] = f(out.floats()[i], rhs.floats()[i]);
      return Results{std::move(out)};
    }
    if (!g)
      return opError(op, "does not take integer operands");
    for (int64_t i = 0; i < out.numElements(); ++i) {
      std::optional<int64_t> r = g(out.ints()[i], rhs.ints()[i]);
      if (!r)
        return opError(op, llvm::Twine(why) + " at element " + llvm::Twine(i));
      out.ints()[i] = *r;
    }
    return Results{std::move(out)};
  };
}

int64_t wrapAdd(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) +
                              static_cast<uint64_t>(b));
}
int64_t wrapSub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) -
                              static_cast<uint64_t>(b));
}
int64_t wrapMul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) *
                              static_cast<uint64_t>(b));
}

double nanMax(double a, double b) {
  return std::isnan(a) || std::isnan(b) ? kNaN : (a > b ? a : b);
}
double nanMin(double a, double b) {
  return std::isnan(a) || std::isnan(b) ? kNaN : (a < b ? a : b);
}

double sign(double x) { return x > 0 ? 1.0 : x < 0 ? -1.0 : x; }
double logistic(double x) { return 1.0 / (1.0 + std::exp(-x)); }

/// Ordered comparison (NaN compares false except `ne`), for floats and
/// integers alike.
template <typename T> bool compare(om::CompareDirection d, T a, T b) {
  switch (d) {
  case om::CompareDirection::eq:
    return a == b;
  case om::CompareDirection::ne:
    return a != b;
  case om::CompareDirection::lt:
    return a < b;
  case om::CompareDirection::le:
    return a <= b;
  case om::CompareDirection::gt:
    return a > b;
  case om::CompareDirection::ge:
    return a >= b;
  }
  return false;
}

absl::StatusOr<Results> evalCompare(om::CompareOp op, Interpreter &interp) {
  const HostTensor &a = interp.get(op.getLhs());
  const HostTensor &b = interp.get(op.getRhs());
  HostTensor out = interp.zerosForResult(op, 0);
  om::CompareDirection d = op.getDirection();
  for (int64_t i = 0; i < out.numElements(); ++i)
    out.ints()[i] = a.isFloat() ? compare(d, a.floats()[i], b.floats()[i])
                                : compare(d, a.ints()[i], b.ints()[i]);
  return Results{std::move(out)};
}

absl::StatusOr<Results> evalSelect(om::SelectOp op, Interpreter &interp) {
  const HostTensor &pred = interp.get(op.getPred());
  HostTensor out = interp.get(op.getOnTrue());
  const HostTensor &onFalse = interp.get(op.getOnFalse());
  if (pred.shape() != out.shape())
    return opError(op, "predicate " + pred.typeString() + " does not match " +
                           out.typeString());
  for (int64_t i = 0; i < out.numElements(); ++i) {
    if (pred.ints()[i])
      continue;
    if (out.isFloat())
      out.floats()[i] = onFalse.floats()[i];
    else
      out.ints()[i] = onFalse.ints()[i];
  }
  return Results{std::move(out)};
}

/// Floats round to nearest even (by the driver); float to integer truncates
/// toward zero and saturates (NaN gives 0); to i1 means != 0; i1 converts
/// as 0 or 1; integer to integer wraps.
absl::StatusOr<Results> evalCast(om::CastOp op, Interpreter &interp) {
  const HostTensor &in = interp.get(op.getOperand());
  HostTensor out = interp.zerosForResult(op, 0);
  if (out.numElements() != in.numElements())
    return opError(op, "changes the shape from " + in.typeString() + " to " +
                           out.typeString());
  bool toBool = out.dtype() == DType::I1;
  unsigned width = intBitWidth(out.dtype());
  for (int64_t i = 0; i < out.numElements(); ++i) {
    if (out.isFloat())
      out.floats()[i] = in.doubleAt(i);
    else if (toBool)
      out.ints()[i] = in.doubleAt(i) != 0; // NaN != 0 is true
    else if (in.isFloat())
      out.ints()[i] = saturatingFloatToInt(in.floats()[i], width, false);
    else
      out.ints()[i] = in.ints()[i];
  }
  return Results{std::move(out)};
}

absl::StatusOr<Results> evalIsFinite(om::IsFiniteOp op, Interpreter &interp) {
  const HostTensor &in = interp.get(op.getOperand());
  HostTensor out = interp.zerosForResult(op, 0);
  for (int64_t i = 0; i < out.numElements(); ++i)
    out.ints()[i] = std::isfinite(in.floats()[i]);
  return Results{std::move(out)};
}

} // namespace

void registerElementwiseHandlers(HandlerTable &table) {
  addGenericHandler<om::NegOp>(
      table, unaryNumeric([](double x) { return -x; },
                          [](int64_t x) { return wrapSub(0, x); }));
  addGenericHandler<om::AbsOp>(
      table, unaryNumeric([](double x) { return std::fabs(x); },
                          [](int64_t x) { return x < 0 ? wrapSub(0, x) : x; }));
  addGenericHandler<om::SignOp>(table,
                                unaryNumeric(sign, [](int64_t x) -> int64_t {
                                  return x > 0 ? 1 : x < 0 ? -1 : 0;
                                }));
  addGenericHandler<om::ExpOp>(
      table, unaryFloat([](double x) { return std::exp(x); }));
  addGenericHandler<om::LogOp>(
      table, unaryFloat([](double x) { return std::log(x); }));
  addGenericHandler<om::SqrtOp>(
      table, unaryFloat([](double x) { return std::sqrt(x); }));
  addGenericHandler<om::RsqrtOp>(
      table, unaryFloat([](double x) { return 1.0 / std::sqrt(x); }));
  addGenericHandler<om::TanhOp>(
      table, unaryFloat([](double x) { return std::tanh(x); }));
  addGenericHandler<om::SinOp>(
      table, unaryFloat([](double x) { return std::sin(x); }));
  addGenericHandler<om::CosOp>(
      table, unaryFloat([](double x) { return std::cos(x); }));
  addGenericHandler<om::ErfOp>(
      table, unaryFloat([](double x) { return std::erf(x); }));
  addGenericHandler<om::FloorOp>(
      table, unaryFloat([](double x) { return std::floor(x); }));
  addGenericHandler<om::LogisticOp>(table, unaryFloat(logistic));
  addGenericHandler<om::SiluOp>(
      table, unaryFloat([](double x) { return x * logistic(x); }));

  using OptInt = std::optional<int64_t>;
  addGenericHandler<om::AddOp>(
      table,
      binary([](double a, double b) { return a + b; },
             [](int64_t a, int64_t b) -> OptInt { return wrapAdd(a, b); }));
  addGenericHandler<om::SubOp>(
      table,
      binary([](double a, double b) { return a - b; },
             [](int64_t a, int64_t b) -> OptInt { return wrapSub(a, b); }));
  addGenericHandler<om::MulOp>(
      table,
      binary([](double a, double b) { return a * b; },
             [](int64_t a, int64_t b) -> OptInt { return wrapMul(a, b); }));
  addGenericHandler<om::DivOp>(
      table, binary([](double a, double b) { return a / b; },
                    [](int64_t a, int64_t b) -> OptInt {
                      if (b == 0)
                        return std::nullopt;
                      if (b == -1)
                        return wrapSub(0, a); // INT_MIN / -1 wraps
                      return a / b;
                    },
                    "divides by zero"));
  addGenericHandler<om::MaxOp>(
      table, binary(nanMax, [](int64_t a, int64_t b) -> OptInt {
        return a > b ? a : b;
      }));
  addGenericHandler<om::MinOp>(
      table, binary(nanMin, [](int64_t a, int64_t b) -> OptInt {
        return a < b ? a : b;
      }));
  addGenericHandler<om::PowOp>(
      table,
      binary([](double a, double b) { return std::pow(a, b); }, nullptr));
  addGenericHandler<om::AndOp>(
      table, binary(nullptr, [](int64_t a, int64_t b) -> OptInt {
        return (a & b) & 1;
      }));
  addGenericHandler<om::OrOp>(
      table, binary(nullptr, [](int64_t a, int64_t b) -> OptInt {
        return (a | b) & 1;
      }));

  addHandler<om::CompareOp>(table, evalCompare);
  addHandler<om::SelectOp>(table, evalSelect);
  addHandler<om::CastOp>(table, evalCast);
  addHandler<om::IsFiniteOp>(table, evalIsFinite);
}

} // namespace omni::reference::detail
