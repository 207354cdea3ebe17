//===- EvalArith.cpp - arith dialect ops ------------------------*- C++ -*-===//
//
// arith ops on scalars (indices, loop counters, step arithmetic) and on
// tensors, elementwise. Integers are held sign-extended from their width
// (i1 as 0 or 1) and interpreted as signed or unsigned by each op as arith
// specifies; results wrap to their width. Where arith leaves a result
// undefined (poison), the evaluator either reports an error (division by
// zero, over-wide shifts) or picks the defined behaviour documented on the
// handler (float-to-int conversion saturates, NaN becomes 0).
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/Interpreter.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#include <cmath>
#include <limits>
#include <optional>

using namespace mlir;

namespace omni::reference::detail {

namespace {

unsigned widthOf(const HostTensor &t) {
  unsigned w = intBitWidth(t.dtype());
  return w ? w : 64;
}

/// The signed value of a stored integer of width `width` (i1 true is -1).
int64_t signedValue(int64_t raw, unsigned width) {
  return width == 1 ? -(raw & 1) : raw;
}

/// The unsigned value of a stored integer of width `width`.
uint64_t unsignedValue(int64_t raw, unsigned width) {
  uint64_t u = static_cast<uint64_t>(raw);
  return width >= 64 ? u : u & ((uint64_t{1} << width) - 1);
}

} // namespace

/// Float-to-integer conversion shared with omni.cast: truncation toward
/// zero, saturating at the bounds of a `width`-bit (un)signed integer; NaN
/// converts to 0.
int64_t saturatingFloatToInt(double x, unsigned width, bool isUnsigned) {
  if (std::isnan(x))
    return 0;
  double t = std::trunc(x);
  if (isUnsigned) {
    double hi = std::ldexp(1.0, static_cast<int>(width)); // exclusive
    if (t <= 0)
      return 0;
    if (t >= hi)
      return static_cast<int64_t>(width >= 64 ? ~uint64_t{0}
                                              : (uint64_t{1} << width) - 1);
    return static_cast<int64_t>(static_cast<uint64_t>(t));
  }
  double lo = -std::ldexp(1.0, static_cast<int>(width) - 1);
  double hi = std::ldexp(1.0, static_cast<int>(width) - 1); // exclusive
  if (t < lo)
    return width >= 64 ? std::numeric_limits<int64_t>::min()
                       : static_cast<int64_t>(lo);
  if (t >= hi)
    return width >= 64 ? std::numeric_limits<int64_t>::max()
                       : static_cast<int64_t>(hi) - 1;
  return static_cast<int64_t>(t);
}

namespace {

/// Applies `f(a, b, width)` elementwise to two integer operands of one type;
/// `f` returns std::nullopt for an undefined result, reported with `why`.
template <typename F>
absl::StatusOr<Results> intBinary(Operation *op, Interpreter &interp, F f,
                                  const char *why) {
  const HostTensor &a = interp.get(op->getOperand(0));
  const HostTensor &b = interp.get(op->getOperand(1));
  HostTensor out = interp.zerosForResult(op, 0);
  unsigned width = widthOf(a);
  for (int64_t i = 0; i < out.numElements(); ++i) {
    std::optional<int64_t> r = f(a.ints()[i], b.ints()[i], width);
    if (!r)
      return opError(op, llvm::Twine(why) + " at element " + llvm::Twine(i));
    out.ints()[i] = *r;
  }
  return Results{std::move(out)};
}

template <typename F>
absl::StatusOr<Results> floatBinary(Operation *op, Interpreter &interp, F f) {
  const HostTensor &a = interp.get(op->getOperand(0));
  const HostTensor &b = interp.get(op->getOperand(1));
  HostTensor out = interp.zerosForResult(op, 0);
  for (int64_t i = 0; i < out.numElements(); ++i)
    out.floats()[i] = f(a.floats()[i], b.floats()[i]);
  return Results{std::move(out)};
}

/// Applies `f(element)` to operand 0, writing doubles or ints by the result
/// category.
template <typename F>
absl::StatusOr<Results> convert(Operation *op, Interpreter &interp, F f) {
  const HostTensor &a = interp.get(op->getOperand(0));
  HostTensor out = interp.zerosForResult(op, 0);
  for (int64_t i = 0; i < out.numElements(); ++i) {
    if (out.isFloat())
      out.floats()[i] = static_cast<double>(f(a, i));
    else
      out.ints()[i] = static_cast<int64_t>(f(a, i));
  }
  return Results{std::move(out)};
}

/// NaN-propagating maximum (arith.maximumf), -0 < +0.
double maximumF(double a, double b) {
  if (std::isnan(a) || std::isnan(b))
    return std::numeric_limits<double>::quiet_NaN();
  if (a == b)
    return std::signbit(a) ? b : a;
  return a > b ? a : b;
}

double minimumF(double a, double b) {
  if (std::isnan(a) || std::isnan(b))
    return std::numeric_limits<double>::quiet_NaN();
  if (a == b)
    return std::signbit(a) ? a : b;
  return a < b ? a : b;
}

bool comparePredicate(arith::CmpFPredicate p, double a, double b) {
  bool unordered = std::isnan(a) || std::isnan(b);
  using P = arith::CmpFPredicate;
  switch (p) {
  case P::AlwaysFalse:
    return false;
  case P::AlwaysTrue:
    return true;
  case P::OEQ:
    return !unordered && a == b;
  case P::OGT:
    return !unordered && a > b;
  case P::OGE:
    return !unordered && a >= b;
  case P::OLT:
    return !unordered && a < b;
  case P::OLE:
    return !unordered && a <= b;
  case P::ONE:
    return !unordered && a != b;
  case P::ORD:
    return !unordered;
  case P::UEQ:
    return unordered || a == b;
  case P::UGT:
    return unordered || a > b;
  case P::UGE:
    return unordered || a >= b;
  case P::ULT:
    return unordered || a < b;
  case P::ULE:
    return unordered || a <= b;
  case P::UNE:
    return unordered || a != b;
  case P::UNO:
    return unordered;
  }
  return false;
}

bool comparePredicate(arith::CmpIPredicate p, int64_t a, int64_t b,
                      unsigned width) {
  int64_t sa = signedValue(a, width), sb = signedValue(b, width);
  uint64_t ua = unsignedValue(a, width), ub = unsignedValue(b, width);
  using P = arith::CmpIPredicate;
  switch (p) {
  case P::eq:
    return ua == ub;
  case P::ne:
    return ua != ub;
  case P::slt:
    return sa < sb;
  case P::sle:
    return sa <= sb;
  case P::sgt:
    return sa > sb;
  case P::sge:
    return sa >= sb;
  case P::ult:
    return ua < ub;
  case P::ule:
    return ua <= ub;
  case P::ugt:
    return ua > ub;
  case P::uge:
    return ua >= ub;
  }
  return false;
}

using OptInt = std::optional<int64_t>;

OptInt signedDivide(int64_t a, int64_t b, unsigned w, bool floorDiv,
                    bool ceilDiv) {
  int64_t x = signedValue(a, w), y = signedValue(b, w);
  if (y == 0)
    return std::nullopt;
  if (x == std::numeric_limits<int64_t>::min() && y == -1)
    return x; // wraps
  int64_t q = x / y, r = x % y;
  if (r != 0 && floorDiv && ((r < 0) != (y < 0)))
    --q;
  if (r != 0 && ceilDiv && ((r < 0) == (y < 0)))
    ++q;
  return q;
}

} // namespace

void registerArithHandlers(HandlerTable &table) {
  addHandler<arith::ConstantOp>(
      table,
      [](arith::ConstantOp op, Interpreter &) -> absl::StatusOr<Results> {
        absl::StatusOr<HostTensor> value =
            attributeValue(op, op.getValue(), op.getType());
        if (!value.ok())
          return value.status();
        return Results{std::move(*value)};
      });

  // Integer arithmetic, computed on unsigned 64-bit words so that overflow
  // wraps instead of being undefined.
  auto wrapping = [](auto f) {
    return [f](Operation *op, Interpreter &interp) {
      return intBinary(
          op, interp,
          [f](int64_t a, int64_t b, unsigned) -> OptInt {
            return static_cast<int64_t>(
                f(static_cast<uint64_t>(a), static_cast<uint64_t>(b)));
          },
          "");
    };
  };
  addGenericHandler<arith::AddIOp>(
      table, wrapping([](uint64_t a, uint64_t b) { return a + b; }));
  addGenericHandler<arith::SubIOp>(
      table, wrapping([](uint64_t a, uint64_t b) { return a - b; }));
  addGenericHandler<arith::MulIOp>(
      table, wrapping([](uint64_t a, uint64_t b) { return a * b; }));
  addGenericHandler<arith::AndIOp>(
      table, wrapping([](uint64_t a, uint64_t b) { return a & b; }));
  addGenericHandler<arith::OrIOp>(
      table, wrapping([](uint64_t a, uint64_t b) { return a | b; }));
  addGenericHandler<arith::XOrIOp>(
      table, wrapping([](uint64_t a, uint64_t b) { return a ^ b; }));

  auto division = [](auto f, const char *why) {
    return [f, why](Operation *op, Interpreter &interp) {
      return intBinary(op, interp, f, why);
    };
  };
  const char *byZero = "divides by zero";
  addGenericHandler<arith::DivSIOp>(
      table,
      division([](int64_t a, int64_t b,
                  unsigned w) { return signedDivide(a, b, w, false, false); },
               byZero));
  addGenericHandler<arith::FloorDivSIOp>(
      table,
      division([](int64_t a, int64_t b,
                  unsigned w) { return signedDivide(a, b, w, true, false); },
               byZero));
  addGenericHandler<arith::CeilDivSIOp>(
      table,
      division([](int64_t a, int64_t b,
                  unsigned w) { return signedDivide(a, b, w, false, true); },
               byZero));
  addGenericHandler<arith::RemSIOp>(
      table, division(
                 [](int64_t a, int64_t b, unsigned w) -> OptInt {
                   int64_t x = signedValue(a, w), y = signedValue(b, w);
                   if (y == 0)
                     return std::nullopt;
                   if (y == -1)
                     return 0;
                   return x % y;
                 },
                 byZero));
  addGenericHandler<arith::DivUIOp>(
      table, division(
                 [](int64_t a, int64_t b, unsigned w) -> OptInt {
                   uint64_t y = unsignedValue(b, w);
                   if (y == 0)
                     return std::nullopt;
                   return static_cast<int64_t>(unsignedValue(a, w) / y);
                 },
                 byZero));
  addGenericHandler<arith::CeilDivUIOp>(
      table, division(
                 [](int64_t a, int64_t b, unsigned w) -> OptInt {
                   uint64_t x = unsignedValue(a, w), y = unsignedValue(b, w);
                   if (y == 0)
                     return std::nullopt;
                   return static_cast<int64_t>(x / y + (x % y != 0));
                 },
                 byZero));
  addGenericHandler<arith::RemUIOp>(
      table, division(
                 [](int64_t a, int64_t b, unsigned w) -> OptInt {
                   uint64_t y = unsignedValue(b, w);
                   if (y == 0)
                     return std::nullopt;
                   return static_cast<int64_t>(unsignedValue(a, w) % y);
                 },
                 byZero));
  const char *wideShift = "shifts by at least the bit width";
  addGenericHandler<arith::ShLIOp>(
      table, division(
                 [](int64_t a, int64_t b, unsigned w) -> OptInt {
                   uint64_t s = unsignedValue(b, w);
                   if (s >= w)
                     return std::nullopt;
                   return static_cast<int64_t>(static_cast<uint64_t>(a) << s);
                 },
                 wideShift));
  addGenericHandler<arith::ShRUIOp>(
      table, division(
                 [](int64_t a, int64_t b, unsigned w) -> OptInt {
                   uint64_t s = unsignedValue(b, w);
                   if (s >= w)
                     return std::nullopt;
                   return static_cast<int64_t>(unsignedValue(a, w) >> s);
                 },
                 wideShift));
  addGenericHandler<arith::ShRSIOp>(
      table, division(
                 [](int64_t a, int64_t b, unsigned w) -> OptInt {
                   uint64_t s = unsignedValue(b, w);
                   if (s >= w)
                     return std::nullopt;
                   return signedValue(a, w) >> s;
                 },
                 wideShift));
  addGenericHandler<arith::MaxSIOp>(
      table, division(
                 [](int64_t a, int64_t b, unsigned w) -> OptInt {
                   return signedValue(a, w) >= signedValue(b, w) ? a : b;
                 },
                 ""));
  addGenericHandler<arith::MinSIOp>(
      table, division(
                 [](int64_t a, int64_t b, unsigned w) -> OptInt {
                   return signedValue(a, w) <= signedValue(b, w) ? a : b;
                 },
                 ""));
  addGenericHandler<arith::MaxUIOp>(
      table, division(
                 [](int64_t a, int64_t b, unsigned w) -> OptInt {
                   return unsignedValue(a, w) >= unsignedValue(b, w) ? a : b;
                 },
                 ""));
  addGenericHandler<arith::MinUIOp>(
      table, division(
                 [](int64_t a, int64_t b, unsigned w) -> OptInt {
                   return unsignedValue(a, w) <= unsignedValue(b, w) ? a : b;
                 },
                 ""));

  // Float arithmetic in double; the driver rounds to the result type.
  auto floating = [](auto f) {
    return [f](Operation *op, Interpreter &interp) {
      return floatBinary(op, interp, f);
    };
  };
  addGenericHandler<arith::AddFOp>(
      table, floating([](double a, double b) { return a + b; }));
  addGenericHandler<arith::SubFOp>(
      table, floating([](double a, double b) { return a - b; }));
  addGenericHandler<arith::MulFOp>(
      table, floating([](double a, double b) { return a * b; }));
  addGenericHandler<arith::DivFOp>(
      table, floating([](double a, double b) { return a / b; }));
  addGenericHandler<arith::RemFOp>(
      table, floating([](double a, double b) { return std::fmod(a, b); }));
  addGenericHandler<arith::MaximumFOp>(table, floating(maximumF));
  addGenericHandler<arith::MinimumFOp>(table, floating(minimumF));
  addGenericHandler<arith::MaxNumFOp>(
      table, floating([](double a, double b) { return std::fmax(a, b); }));
  addGenericHandler<arith::MinNumFOp>(
      table, floating([](double a, double b) { return std::fmin(a, b); }));
  addGenericHandler<arith::NegFOp>(
      table, [](Operation *op, Interpreter &interp) {
        return convert(op, interp, [](const HostTensor &a, int64_t i) {
          return -a.floats()[i];
        });
      });

  addHandler<arith::CmpFOp>(
      table,
      [](arith::CmpFOp op, Interpreter &interp) -> absl::StatusOr<Results> {
        const HostTensor &a = interp.get(op.getLhs());
        const HostTensor &b = interp.get(op.getRhs());
        HostTensor out = interp.zerosForResult(op, 0);
        for (int64_t i = 0; i < out.numElements(); ++i)
          out.ints()[i] =
              comparePredicate(op.getPredicate(), a.floats()[i], b.floats()[i]);
        return Results{std::move(out)};
      });
  addHandler<arith::CmpIOp>(
      table,
      [](arith::CmpIOp op, Interpreter &interp) -> absl::StatusOr<Results> {
        const HostTensor &a = interp.get(op.getLhs());
        const HostTensor &b = interp.get(op.getRhs());
        HostTensor out = interp.zerosForResult(op, 0);
        unsigned width = widthOf(a);
        for (int64_t i = 0; i < out.numElements(); ++i)
          out.ints()[i] = comparePredicate(op.getPredicate(), a.ints()[i],
                                           b.ints()[i], width);
        return Results{std::move(out)};
      });
  addHandler<arith::SelectOp>(
      table,
      [](arith::SelectOp op, Interpreter &interp) -> absl::StatusOr<Results> {
        const HostTensor &c = interp.get(op.getCondition());
        const HostTensor &t = interp.get(op.getTrueValue());
        const HostTensor &f = interp.get(op.getFalseValue());
        if (c.rank() == 0)
          return Results{c.ints()[0] ? t : f};
        HostTensor out = t;
        for (int64_t i = 0; i < out.numElements(); ++i)
          if (!c.ints()[i]) {
            if (out.isFloat())
              out.floats()[i] = f.floats()[i];
            else
              out.ints()[i] = f.ints()[i];
          }
        return Results{std::move(out)};
      });

  // Conversions. The driver wraps integer results to their width and
  // rounds float results, so truncations need no code of their own.
  auto signExtend = [](Operation *op, Interpreter &interp) {
    return convert(op, interp, [](const HostTensor &a, int64_t i) {
      return signedValue(a.ints()[i], widthOf(a));
    });
  };
  auto zeroExtend = [](Operation *op, Interpreter &interp) {
    return convert(op, interp, [](const HostTensor &a, int64_t i) {
      return static_cast<int64_t>(unsignedValue(a.ints()[i], widthOf(a)));
    });
  };
  addGenericHandler<arith::ExtSIOp, arith::IndexCastOp, arith::TruncIOp>(
      table, signExtend);
  addGenericHandler<arith::ExtUIOp, arith::IndexCastUIOp>(table, zeroExtend);
  addGenericHandler<arith::SIToFPOp>(
      table, [](Operation *op, Interpreter &interp) {
        return convert(op, interp, [](const HostTensor &a, int64_t i) {
          return static_cast<double>(signedValue(a.ints()[i], widthOf(a)));
        });
      });
  addGenericHandler<arith::UIToFPOp>(
      table, [](Operation *op, Interpreter &interp) {
        return convert(op, interp, [](const HostTensor &a, int64_t i) {
          return static_cast<double>(unsignedValue(a.ints()[i], widthOf(a)));
        });
      });
  addGenericHandler<arith::ExtFOp, arith::TruncFOp>(
      table, [](Operation *op, Interpreter &interp) {
        return convert(op, interp, [](const HostTensor &a, int64_t i) {
          return a.floats()[i];
        });
      });
  auto floatToInt = [](bool isUnsigned) {
    return [isUnsigned](Operation *op, Interpreter &interp) {
      HostTensor zeros = interp.zerosForResult(op, 0);
      unsigned width = widthOf(zeros);
      return convert(op, interp, [=](const HostTensor &a, int64_t i) {
        return saturatingFloatToInt(a.floats()[i], width, isUnsigned);
      });
    };
  };
  addGenericHandler<arith::FPToSIOp>(table, floatToInt(false));
  addGenericHandler<arith::FPToUIOp>(table, floatToInt(true));
}

} // namespace omni::reference::detail
