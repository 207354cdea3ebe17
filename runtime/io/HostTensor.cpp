//===- HostTensor.cpp - A dense tensor in host memory -----------*- C++ -*-===//
//
// Element-type helpers (names, rounding to the narrow float formats, integer
// wrapping) and the HostTensor container. The narrow float formats are
// rounded directly from double, never through float, so that no value is
// rounded twice.
//
//===----------------------------------------------------------------------===//

#include "runtime/io/HostTensor.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

namespace omni {

absl::string_view dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "f32";
  case DType::F64:
    return "f64";
  case DType::F16:
    return "f16";
  case DType::BF16:
    return "bf16";
  case DType::I1:
    return "i1";
  case DType::I32:
    return "i32";
  case DType::I64:
    return "i64";
  }
  return "?";
}

std::optional<DType> parseDType(absl::string_view name) {
  for (DType d : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I1,
                  DType::I32, DType::I64})
    if (dtypeName(d) == name)
      return d;
  return std::nullopt;
}

int64_t dtypeSize(DType dtype) {
  switch (dtype) {
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::F64:
  case DType::I64:
    return 8;
  case DType::F16:
  case DType::BF16:
    return 2;
  case DType::I1:
    return 1;
  }
  return 1;
}

bool isFloatDType(DType dtype) {
  return dtype == DType::F32 || dtype == DType::F64 || dtype == DType::F16 ||
         dtype == DType::BF16;
}

unsigned intBitWidth(DType dtype) {
  switch (dtype) {
  case DType::I1:
    return 1;
  case DType::I32:
    return 32;
  case DType::I64:
    return 64;
  default:
    return 0;
  }
}

namespace {
/// Rounds a finite, non-zero |value| to a binary format with `precision`
/// significand bits (implicit bit included), smallest normal exponent
/// `minExp` and largest finite value `maxFinite`; round to nearest even.
double roundToFormat(double value, int precision, int minExp,
                     double maxFinite) {
  if (!std::isfinite(value) || value == 0.0)
    return value;
  double magnitude = std::fabs(value);
  int exp = 0;
  std::frexp(magnitude, &exp); // magnitude = m * 2^exp, m in [0.5, 1)
  int unitExp = std::max(exp - 1, minExp) - (precision - 1);
  double quantum = std::ldexp(1.0, unitExp);
  // Division by a power of two is exact; nearbyint rounds half to even in
  // the default rounding mode.
  double rounded = std::nearbyint(magnitude / quantum) * quantum;
  if (rounded > maxFinite)
    rounded = std::numeric_limits<double>::infinity();
  return std::copysign(rounded, value);
}
} // namespace

double roundToDType(double value, DType dtype) {
  switch (dtype) {
  case DType::F32:
    return static_cast<double>(static_cast<float>(value));
  case DType::F16:
    return roundToFormat(value, 11, -14, 65504.0);
  case DType::BF16:
    // Largest finite bfloat16: (2 - 2^-7) * 2^127 = 255 * 2^120.
    return roundToFormat(value, 8, -126, std::ldexp(255.0, 120));
  default:
    return value;
  }
}

int64_t wrapToDType(int64_t value, DType dtype) {
  switch (dtype) {
  case DType::I1:
    return value & 1;
  case DType::I32:
    return static_cast<int64_t>(
        static_cast<int32_t>(static_cast<uint32_t>(value)));
  default:
    return value;
  }
}

uint16_t halfBitsFromDouble(double value) {
  double r = roundToDType(value, DType::F16);
  uint16_t sign = std::signbit(r) ? 0x8000 : 0;
  if (std::isnan(r))
    return 0x7e00;
  double magnitude = std::fabs(r);
  if (std::isinf(magnitude))
    return sign | 0x7c00;
  if (magnitude < std::ldexp(1.0, -14)) // subnormal or zero: units of 2^-24
    return sign | static_cast<uint16_t>(std::ldexp(magnitude, 24));
  int exp = 0;
  double m = std::frexp(magnitude, &exp); // magnitude = m * 2^exp
  uint16_t biased = static_cast<uint16_t>(exp - 1 + 15);
  uint16_t mantissa = static_cast<uint16_t>(std::ldexp(m * 2.0 - 1.0, 10));
  return sign | static_cast<uint16_t>(biased << 10) | mantissa;
}

double doubleFromHalfBits(uint16_t bits) {
  double sign = (bits & 0x8000) ? -1.0 : 1.0;
  int biased = (bits >> 10) & 0x1f;
  int mantissa = bits & 0x3ff;
  if (biased == 0x1f)
    return mantissa ? std::numeric_limits<double>::quiet_NaN()
                    : sign * std::numeric_limits<double>::infinity();
  if (biased == 0)
    return sign * std::ldexp(static_cast<double>(mantissa), -24);
  return sign * std::ldexp(1.0 + mantissa / 1024.0, biased - 15);
}

std::string shapeString(absl::Span<const int64_t> shape) {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      s += "x";
    s += std::to_string(shape[i]);
  }
  return s;
}

int64_t numElementsOf(absl::Span<const int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    assert(d >= 0 && "negative dimension");
    n *= d;
  }
  return n;
}

//===----------------------------------------------------------------------===//
// HostTensor
//===----------------------------------------------------------------------===//

HostTensor::HostTensor() : floats_(1, 0.0) {}

HostTensor::HostTensor(DType dtype, std::vector<int64_t> shape)
    : dtype_(dtype), shape_(std::move(shape)),
      numElements_(numElementsOf(shape_)) {
  if (isFloatDType(dtype_))
    floats_.assign(static_cast<size_t>(numElements_), 0.0);
  else
    ints_.assign(static_cast<size_t>(numElements_), 0);
}

HostTensor HostTensor::fromDoubles(DType dtype, std::vector<int64_t> shape,
                                   std::vector<double> values) {
  assert(isFloatDType(dtype) && "fromDoubles needs a float dtype");
  HostTensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.numElements_ = numElementsOf(t.shape_);
  assert(static_cast<int64_t>(values.size()) == t.numElements_ &&
         "element count does not match the shape");
  for (double &v : values)
    v = roundToDType(v, dtype);
  t.floats_ = std::move(values);
  return t;
}

HostTensor HostTensor::fromInts(DType dtype, std::vector<int64_t> shape,
                                std::vector<int64_t> values) {
  assert(!isFloatDType(dtype) && "fromInts needs an integer dtype");
  HostTensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.numElements_ = numElementsOf(t.shape_);
  assert(static_cast<int64_t>(values.size()) == t.numElements_ &&
         "element count does not match the shape");
  for (int64_t &v : values)
    v = wrapToDType(v, dtype);
  t.floats_.clear();
  t.ints_ = std::move(values);
  return t;
}

HostTensor HostTensor::scalarDouble(DType dtype, double value) {
  return fromDoubles(dtype, {}, {value});
}

HostTensor HostTensor::scalarInt(DType dtype, int64_t value) {
  return fromInts(dtype, {}, {value});
}

double HostTensor::doubleAt(int64_t i) const {
  return isFloat() ? floats_[static_cast<size_t>(i)]
                   : static_cast<double>(ints_[static_cast<size_t>(i)]);
}

int64_t HostTensor::intAt(int64_t i) const {
  return isFloat() ? static_cast<int64_t>(floats_[static_cast<size_t>(i)])
                   : ints_[static_cast<size_t>(i)];
}

std::string HostTensor::typeString() const {
  std::string s = "tensor<";
  for (int64_t d : shape_)
    s += std::to_string(d) + "x";
  s += std::string(dtypeName(dtype_));
  return s + ">";
}

void HostTensor::reshape(std::vector<int64_t> shape) {
  assert(numElementsOf(shape) == numElements_ && "reshape changes the size");
  shape_ = std::move(shape);
}

void HostTensor::retype(DType dtype) {
  assert(isFloatDType(dtype) == isFloat() && "retype changes the category");
  dtype_ = dtype;
  for (double &v : floats_)
    v = roundToDType(v, dtype);
  for (int64_t &v : ints_)
    v = wrapToDType(v, dtype);
}

void HostTensor::relabel(DType dtype) {
  assert(isFloatDType(dtype) == isFloat() && "relabel changes the category");
  dtype_ = dtype;
}

bool HostTensor::operator==(const HostTensor &other) const {
  if (dtype_ != other.dtype_ || shape_ != other.shape_ ||
      ints_ != other.ints_ || floats_.size() != other.floats_.size())
    return false;
  for (size_t i = 0; i < floats_.size(); ++i) {
    double a = floats_[i], b = other.floats_[i];
    if (!(a == b || (std::isnan(a) && std::isnan(b))))
      return false;
  }
  return true;
}

} // namespace omni
