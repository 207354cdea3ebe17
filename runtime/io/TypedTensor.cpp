//===- TypedTensor.cpp - A dense tensor in its own dtype's bytes ----------===//
//
// The container and its exact conversions to and from HostTensor. Every
// element conversion goes through the one element codec
// (runtime/io/ElementCodec.h), so TypedTensor rounds, keeps NaNs and
// stores i1 exactly as .npy, safetensors and the executor do.
//
//===----------------------------------------------------------------------===//

#include "runtime/io/TypedTensor.h"

#include "runtime/io/ElementCodec.h"

#include <cmath>
#include <cstring>

namespace omni {

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
  absl::Span<uint8_t> out(t.data(), static_cast<size_t>(t.byteSize()));
  if (h.isFloat())
    encodeFloats(h.dtype(), h.floats(), out);
  else
    encodeInts(h.dtype(), h.ints(), out);
  return t;
}

HostTensor TypedTensor::toHost() const {
  HostTensor h(dtype_, shape_);
  absl::Span<const uint8_t> in(data(), static_cast<size_t>(byteSize_));
  if (isFloat())
    decodeFloats(dtype_, in, h.floats());
  else
    // An i1 byte other than 0 or 1 reads as its low bit, as a kernel reads
    // it (the codec reports it; device bytes are not a file to refuse).
    (void)decodeInts(dtype_, in, h.ints());
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
    return doubleFromBf16Bits(span<uint16_t>()[i]);
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
