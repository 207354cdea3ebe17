//===- TypedTensor.h - A dense tensor in its own dtype's bytes --*- C++ -*-===//
//
// The host-side tensor of the runtime's data path: the executor's host API
// (Executor::run, getState, setState), the training driver's metrics,
// images, prompts and checkpoint state. Unlike HostTensor (which widens
// every float to a double and every integer to an int64 for the tools and
// the reference evaluator), a TypedTensor holds its elements exactly as
// device buffers, step.bin, .npy and safetensors files do: dense, row-major,
// little-endian elements of its dtype (f16/bf16 as their 16-bit patterns,
// i1 as one byte 0 or 1). So a tensor costs its dtype's size per element on
// the host, and moving it to or from a device or a file is one memcpy.
//
// Typed access: span<T>() for the C++ type of the dtype (float: f32,
// double: f64, uint16_t: f16 and bf16 bit patterns, uint8_t: i1, int32_t:
// i32, int64_t: i64); the storage is 8-byte aligned. fromHost/toHost
// convert exactly (a HostTensor's elements are representable in its dtype;
// a HostTensor holding more precision than its dtype, see HostTensor
// relabel, is rounded). MLIR-free.
//
// Ownership: a TypedTensor owns its bytes (value semantics; copies are
// deep). Thread safety: like std::vector.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_IO_TYPEDTENSOR_H
#define OMNI_RUNTIME_IO_TYPEDTENSOR_H

#include "runtime/io/HostTensor.h"

#include "absl/types/span.h"

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

namespace omni {

/// Whether `T` is the C++ element type of `dtype` (see the file comment).
template <typename T> bool isElementTypeOf(DType dtype) {
  using U = std::remove_const_t<T>;
  if constexpr (std::is_same_v<U, float>)
    return dtype == DType::F32;
  else if constexpr (std::is_same_v<U, double>)
    return dtype == DType::F64;
  else if constexpr (std::is_same_v<U, uint16_t>)
    return dtype == DType::F16 || dtype == DType::BF16;
  else if constexpr (std::is_same_v<U, uint8_t>)
    return dtype == DType::I1;
  else if constexpr (std::is_same_v<U, int32_t>)
    return dtype == DType::I32;
  else if constexpr (std::is_same_v<U, int64_t>)
    return dtype == DType::I64;
  else
    return false;
}

/// A dense, row-major tensor stored as its dtype's little-endian bytes.
class TypedTensor {
public:
  /// A float32 scalar holding 0.
  TypedTensor() : TypedTensor(DType::F32, {}) {}

  /// A zero-filled tensor (all-zero bytes: 0, 0.0 or false in every dtype).
  /// Dimensions must be non-negative.
  TypedTensor(DType dtype, std::vector<int64_t> shape);

  /// fromHost(tensor). Implicit so that tools and tests that build
  /// HostTensors (.npy files, literals, the evaluator) can hand them to the
  /// typed APIs; the conversion is a copy, as an explicit one would be.
  TypedTensor(const HostTensor &tensor) : TypedTensor(fromHost(tensor)) {}

  /// A tensor holding a copy of `bytes`, which must be exactly
  /// numElementsOf(shape) * dtypeSize(dtype) bytes (i1 bytes must be 0 or 1).
  static TypedTensor fromBytes(DType dtype, std::vector<int64_t> shape,
                               absl::Span<const uint8_t> bytes);

  /// A tensor of the given elements; `T` must be the element type of
  /// `dtype` and `values` must hold numElementsOf(shape) elements.
  template <typename T>
  static TypedTensor of(DType dtype, std::vector<int64_t> shape,
                        absl::Span<const T> values) {
    assert(isElementTypeOf<T>(dtype));
    TypedTensor t(dtype, std::move(shape));
    assert(static_cast<int64_t>(values.size()) == t.numElements());
    std::copy(values.begin(), values.end(), t.span<T>().begin());
    return t;
  }

  /// Rank-0 tensors.
  static TypedTensor scalarI64(int64_t value);
  static TypedTensor scalarF32(float value);

  /// The same tensor, element for element (see the file comment).
  static TypedTensor fromHost(const HostTensor &tensor);
  HostTensor toHost() const;

  DType dtype() const { return dtype_; }
  bool isFloat() const { return isFloatDType(dtype_); }
  const std::vector<int64_t> &shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t numElements() const { return numElements_; }
  /// numElements() * dtypeSize(dtype()).
  int64_t byteSize() const { return byteSize_; }

  /// The elements' bytes.
  absl::Span<uint8_t> bytes() {
    return absl::MakeSpan(data(), static_cast<size_t>(byteSize_));
  }
  absl::Span<const uint8_t> bytes() const {
    return absl::MakeConstSpan(data(), static_cast<size_t>(byteSize_));
  }

  /// The elements as `T`, which must be the element type of dtype().
  template <typename T> absl::Span<T> span() {
    assert(isElementTypeOf<T>(dtype_));
    return absl::MakeSpan(reinterpret_cast<T *>(data()),
                          static_cast<size_t>(numElements_));
  }
  template <typename T> absl::Span<const T> span() const {
    assert(isElementTypeOf<T>(dtype_));
    return absl::MakeConstSpan(reinterpret_cast<const T *>(data()),
                               static_cast<size_t>(numElements_));
  }

  /// Element `i` (row-major) as a double, whatever the dtype (f16 and bf16
  /// decoded, i64 beyond 2^53 rounded).
  double doubleAt(int64_t i) const;
  /// Element `i` of an integer or i1 tensor.
  int64_t intAt(int64_t i) const;

  /// "tensor<2x3xf32>".
  std::string typeString() const;

  /// Changes the shape, keeping the bytes. The new shape must have the same
  /// number of elements.
  void reshape(std::vector<int64_t> shape);

  /// Same dtype, shape and bytes (bit for bit: NaNs with the same payload
  /// are equal, +0 and -0 are not).
  bool operator==(const TypedTensor &other) const;
  bool operator!=(const TypedTensor &other) const { return !(*this == other); }

private:
  uint8_t *data() { return reinterpret_cast<uint8_t *>(words_.data()); }
  const uint8_t *data() const {
    return reinterpret_cast<const uint8_t *>(words_.data());
  }

  DType dtype_ = DType::F32;
  std::vector<int64_t> shape_;
  int64_t numElements_ = 1;
  int64_t byteSize_ = 4;
  /// The bytes, in 8-byte words so that span<T>() is aligned for every T.
  std::vector<uint64_t> words_;
};

/// fromHost / toHost over a list.
std::vector<TypedTensor> toTyped(absl::Span<const HostTensor> tensors);
std::vector<HostTensor> toHost(absl::Span<const TypedTensor> tensors);

} // namespace omni

#endif // OMNI_RUNTIME_IO_TYPEDTENSOR_H
