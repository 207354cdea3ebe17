//===- TensorBytes.cpp - HostTensor <-> device bytes ------------*- C++ -*-===//

#include "runtime/executor/TensorBytes.h"

#include "runtime/loader/Program.h"

#include <cassert>
#include <cstring>

namespace omni::executor {
namespace {

template <typename T> void put(uint8_t *out, int64_t i, T value) {
  std::memcpy(out + i * static_cast<int64_t>(sizeof(T)), &value, sizeof(T));
}
template <typename T> T get(const uint8_t *in, int64_t i) {
  T value;
  std::memcpy(&value, in + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return value;
}

uint16_t bf16BitsOf(double value) {
  float f = static_cast<float>(roundToDType(value, DType::BF16));
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return static_cast<uint16_t>(bits >> 16);
}

double doubleFromBf16Bits(uint16_t bits) {
  uint32_t word = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &word, 4);
  return f;
}

} // namespace

std::vector<uint8_t> packTensor(const HostTensor &tensor) {
  const int64_t n = tensor.numElements();
  const DType dtype = tensor.dtype();
  std::vector<uint8_t> bytes(static_cast<size_t>(n * loader::dtypeSize(dtype)));
  uint8_t *out = bytes.data();
  for (int64_t i = 0; i < n; ++i) {
    switch (dtype) {
    case DType::F32:
      put<float>(out, i, static_cast<float>(tensor.floats()[i]));
      break;
    case DType::F64:
      put<double>(out, i, tensor.floats()[i]);
      break;
    case DType::F16:
      put<uint16_t>(out, i, halfBitsFromDouble(tensor.floats()[i]));
      break;
    case DType::BF16:
      put<uint16_t>(out, i, bf16BitsOf(tensor.floats()[i]));
      break;
    case DType::I1:
      put<uint8_t>(out, i, tensor.ints()[i] != 0);
      break;
    case DType::I32:
      put<int32_t>(out, i, static_cast<int32_t>(tensor.ints()[i]));
      break;
    case DType::I64:
      put<int64_t>(out, i, tensor.ints()[i]);
      break;
    }
  }
  return bytes;
}

HostTensor unpackTensor(DType dtype, std::vector<int64_t> shape,
                        absl::Span<const uint8_t> bytes) {
  HostTensor tensor(dtype, std::move(shape));
  const int64_t n = tensor.numElements();
  assert(static_cast<int64_t>(bytes.size()) == n * loader::dtypeSize(dtype));
  const uint8_t *in = bytes.data();
  for (int64_t i = 0; i < n; ++i) {
    switch (dtype) {
    case DType::F32:
      tensor.floats()[i] = get<float>(in, i);
      break;
    case DType::F64:
      tensor.floats()[i] = get<double>(in, i);
      break;
    case DType::F16:
      tensor.floats()[i] = doubleFromHalfBits(get<uint16_t>(in, i));
      break;
    case DType::BF16:
      tensor.floats()[i] = doubleFromBf16Bits(get<uint16_t>(in, i));
      break;
    case DType::I1:
      tensor.ints()[i] = get<uint8_t>(in, i) != 0;
      break;
    case DType::I32:
      tensor.ints()[i] = get<int32_t>(in, i);
      break;
    case DType::I64:
      tensor.ints()[i] = get<int64_t>(in, i);
      break;
    }
  }
  return tensor;
}

} // namespace omni::executor
