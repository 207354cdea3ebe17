//===- HostTensor.h - A dense tensor in host memory -------------*- C++ -*-===//
//
// The value type that crosses the boundary between omni's tools and its
// programs: .npy files, inline `2x3xf32=1,2,...` arguments, the reference
// evaluator's operands and results, and host functions (rewards) all speak
// HostTensor. It is deliberately simple and exact rather than compact: float
// elements of every width live in a std::vector<double> (holding values that
// are representable in the element type, see roundToDType in
// ElementCodec.h), integer and i1
// elements in a std::vector<int64_t>, so an i64 seed or counter never passes
// through a double. The one exception is deliberate: the reference
// evaluator's float64 mode carries f32/f16/bf16 elements at double precision
// (relabel), and such tensors round only when written to a file. MLIR-free.
//
// Ownership: a HostTensor owns its elements (value semantics; copies are
// deep). Thread safety: like std::vector.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_IO_HOSTTENSOR_H
#define OMNI_RUNTIME_IO_HOSTTENSOR_H

#include "runtime/io/DType.h"
#include "runtime/io/ElementCodec.h"

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace omni {

/// "2x3" for {2, 3}; "" for a scalar.
std::string shapeString(absl::Span<const int64_t> shape);

/// The number of elements of `shape` (1 for a scalar). Dimensions must be
/// non-negative.
int64_t numElementsOf(absl::Span<const int64_t> shape);

/// A dense, row-major (C order) tensor of one of the DType element types.
class HostTensor {
public:
  /// A float32 scalar holding 0.
  HostTensor();

  /// A zero-filled tensor. Dimensions must be non-negative.
  HostTensor(DType dtype, std::vector<int64_t> shape);

  /// A float tensor with the given elements, which are rounded to `dtype`
  /// (roundToDType). `dtype` must be a float dtype and `values` must hold
  /// numElementsOf(shape) values.
  static HostTensor fromDoubles(DType dtype, std::vector<int64_t> shape,
                                std::vector<double> values);

  /// An integer (or i1) tensor with the given elements, which are wrapped to
  /// `dtype` (wrapToDType). `dtype` must be an integer dtype and `values`
  /// must hold numElementsOf(shape) values.
  static HostTensor fromInts(DType dtype, std::vector<int64_t> shape,
                             std::vector<int64_t> values);

  /// A rank-0 tensor.
  static HostTensor scalarDouble(DType dtype, double value);
  static HostTensor scalarInt(DType dtype, int64_t value);

  DType dtype() const { return dtype_; }
  bool isFloat() const { return isFloatDType(dtype_); }
  const std::vector<int64_t> &shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t numElements() const { return numElements_; }

  /// The elements of a float tensor (empty span for an integer tensor).
  absl::Span<double> floats() { return absl::MakeSpan(floats_); }
  absl::Span<const double> floats() const { return floats_; }
  /// The elements of an integer or i1 tensor (empty span for a float tensor).
  absl::Span<int64_t> ints() { return absl::MakeSpan(ints_); }
  absl::Span<const int64_t> ints() const { return ints_; }

  /// Element `i` (row-major) as a double, whatever the dtype.
  double doubleAt(int64_t i) const;
  /// Element `i` as an integer; float elements are truncated toward zero
  /// (they must be finite and in range).
  int64_t intAt(int64_t i) const;

  /// "tensor<2x3xf32>".
  std::string typeString() const;

  /// Changes the shape, keeping the row-major elements. The new shape must
  /// have the same number of elements.
  void reshape(std::vector<int64_t> shape);

  /// Changes the element type within its category (float to float, integer
  /// to integer), rounding or wrapping the elements to the new type.
  void retype(DType dtype);

  /// Changes the element type within its category without touching the
  /// elements (see the file comment: float64 evaluation of f32 programs).
  void relabel(DType dtype);

  /// Same dtype, shape and elements (NaN equals NaN bit-pattern-blind).
  bool operator==(const HostTensor &other) const;
  bool operator!=(const HostTensor &other) const { return !(*this == other); }

private:
  DType dtype_ = DType::F32;
  std::vector<int64_t> shape_;
  int64_t numElements_ = 1;
  std::vector<double> floats_;
  std::vector<int64_t> ints_;
};

} // namespace omni

#endif // OMNI_RUNTIME_IO_HOSTTENSOR_H
