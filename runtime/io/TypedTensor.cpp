//===- TypedTensor.cpp - A dense tensor in its own dtype's bytes ----------===//
//
// The container and its exact conversions to and from HostTensor. The
// per-dtype element coding here (f16 through HostTensor's half helpers,
// bf16 by truncating a float that is already a bfloat16 value) is meant to
// move into the shared element codec (runtime/io/ElementCodec) when it
// lands.
//
//===----------------------------------------------------------------------===//

#include "runtime/io/TypedTensor.h"

#include <cmath>
#include <cstring>

namespace omni {
namespace {

uint16_t bf16BitsOf(double value) {
  double r = roundToDType(value, DType::BF16);
  if (std::isnan(r))
    return std::signbit(r) ? 0xffc0 : 0x7fc0;
  // r is a bfloat16 value: a float whose low 16 bits are 0.
  float f = static_cast<float>(r);
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return static_cast<uint16_t>(bits >> 16);
}

double fromBf16Bits(uint16_t bits) {
  uint32_t word = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &word, 4);
  return f;
}

} // namespace

TypedTensor::TypedTensor(DType dtype, std::vector<int64_t> shape)
    : dtype_(dtype), shape_(std::move(shape)),
      numElements_(numElementsOf(shape_)),
      byteSize_(numElements_ * dtypeSize(dtype)),
      words_(static_cast<size_t>((byteSize_ + 7) / 8), 0) {}

TypedTensor TypedTensor::fromBytes(DType dtype, std::vector<int64_t> shape,
                                   absl::Span<const uint8_t> bytes) {
  TypedTensor t(dtype, std::move(shape));
  assert(static_cast<int64_t>(bytes.size()) == t.byteSize());
  if (!bytes.empty())
    std::memcpy(t.data(), bytes.data(), bytes.size());
  return t;
}

TypedTensor TypedTensor::scalarI64(int64_t value) {
  TypedTensor t(DType::I64, {});
  t.span<int64_t>()[0] = value;
  return t;
}

TypedTensor TypedTensor::scalarF32(float value) {
  TypedTensor t(DType::F32, {});
  t.span<float>()[0] = value;
  return t;
}

TypedTensor TypedTensor::fromHost(const HostTensor &h) {
  TypedTensor t(h.dtype(), h.shape());
  const int64_t n = t.numElements();
  switch (h.dtype()) {
  case DType::F32: {
    absl::Span<float> out = t.span<float>();
    for (int64_t i = 0; i < n; ++i)
      out[i] = static_cast<float>(h.floats()[i]);
    break;
  }
  case DType::F64:
    std::copy(h.floats().begin(), h.floats().end(), t.span<double>().begin());
    break;
  case DType::F16: {
    absl::Span<uint16_t> out = t.span<uint16_t>();
    for (int64_t i = 0; i < n; ++i)
      out[i] = halfBitsFromDouble(h.floats()[i]);
    break;
  }
  case DType::BF16: {
    absl::Span<uint16_t> out = t.span<uint16_t>();
    for (int64_t i = 0; i < n; ++i)
      out[i] = bf16BitsOf(h.floats()[i]);
    break;
  }
  case DType::I1: {
    absl::Span<uint8_t> out = t.span<uint8_t>();
    for (int64_t i = 0; i < n; ++i)
      out[i] = h.ints()[i] != 0;
    break;
  }
  case DType::I32: {
    absl::Span<int32_t> out = t.span<int32_t>();
    for (int64_t i = 0; i < n; ++i)
      out[i] = static_cast<int32_t>(h.ints()[i]);
    break;
  }
  case DType::I64:
    std::copy(h.ints().begin(), h.ints().end(), t.span<int64_t>().begin());
    break;
  }
  return t;
}

HostTensor TypedTensor::toHost() const {
  HostTensor h(dtype_, shape_);
  const int64_t n = numElements_;
  if (isFloat())
    for (int64_t i = 0; i < n; ++i)
      h.floats()[i] = doubleAt(i);
  else
    for (int64_t i = 0; i < n; ++i)
      h.ints()[i] = intAt(i);
  return h;
}

double TypedTensor::doubleAt(int64_t i) const {
  assert(i >= 0 && i < numElements_);
  switch (dtype_) {
  case DType::F32:
    return span<float>()[i];
  case DType::F64:
    return span<double>()[i];
  case DType::F16:
    return doubleFromHalfBits(span<uint16_t>()[i]);
  case DType::BF16:
    return fromBf16Bits(span<uint16_t>()[i]);
  default:
    return static_cast<double>(intAt(i));
  }
}

int64_t TypedTensor::intAt(int64_t i) const {
  assert(i >= 0 && i < numElements_);
  switch (dtype_) {
  case DType::I1:
    return span<uint8_t>()[i] != 0;
  case DType::I32:
    return span<int32_t>()[i];
  case DType::I64:
    return span<int64_t>()[i];
  default:
    assert(false && "intAt of a float tensor");
    return 0;
  }
}

std::string TypedTensor::typeString() const {
  std::string dims = shapeString(shape_);
  return "tensor<" + dims + (dims.empty() ? "" : "x") +
         std::string(dtypeName(dtype_)) + ">";
}

void TypedTensor::reshape(std::vector<int64_t> shape) {
  assert(numElementsOf(shape) == numElements_);
  shape_ = std::move(shape);
}

bool TypedTensor::operator==(const TypedTensor &other) const {
  return dtype_ == other.dtype_ && shape_ == other.shape_ &&
         (byteSize_ == 0 || std::memcmp(data(), other.data(),
                                        static_cast<size_t>(byteSize_)) == 0);
}

std::vector<TypedTensor> toTyped(absl::Span<const HostTensor> tensors) {
  std::vector<TypedTensor> out;
  out.reserve(tensors.size());
  for (const HostTensor &t : tensors)
    out.push_back(TypedTensor::fromHost(t));
  return out;
}

std::vector<HostTensor> toHost(absl::Span<const TypedTensor> tensors) {
  std::vector<HostTensor> out;
  out.reserve(tensors.size());
  for (const TypedTensor &t : tensors)
    out.push_back(t.toHost());
  return out;
}

} // namespace omni
