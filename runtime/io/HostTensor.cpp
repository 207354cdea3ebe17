//===- HostTensor.cpp - A dense tensor in host memory -----------*- C++ -*-===//
//
// The HostTensor container and shape helpers. Element types are DType.h;
// rounding and wrapping to them are the element codec's (ElementCodec.h).
//
//===----------------------------------------------------------------------===//

#include "runtime/io/HostTensor.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

namespace omni {

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
