//===- CheckedMath.h - Overflow-checked size arithmetic ---------*- C++ -*-===//
//
// Sizes and offsets read from a step.bin are never trusted: every product of
// dimensions and every offset + length goes through these helpers, which
// report overflow instead of wrapping (signed overflow would be undefined
// behaviour, and a wrapped size would pass a bounds check it should fail).
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_BASE_CHECKEDMATH_H
#define OMNI_RUNTIME_BASE_CHECKEDMATH_H

#include "absl/types/span.h"

#include <cstdint>
#include <optional>
#include <string>

namespace omni {

/// a + b, or nullopt when it overflows int64.
inline std::optional<int64_t> checkedAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r))
    return std::nullopt;
  return r;
}

/// a * b, or nullopt when it overflows int64.
inline std::optional<int64_t> checkedMul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r))
    return std::nullopt;
  return r;
}

/// The product of `shape` (1 for a scalar), or nullopt when a dimension is
/// negative or the product overflows int64.
inline std::optional<int64_t>
checkedNumElements(absl::Span<const int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      return std::nullopt;
    std::optional<int64_t> r = checkedMul(n, d);
    if (!r)
      return std::nullopt;
    n = *r;
  }
  return n;
}

/// True when [offset, offset + length) lies inside [0, size), computed
/// without overflow; negative offsets or lengths are never inside.
inline bool rangeInside(int64_t offset, int64_t length, int64_t size) {
  if (offset < 0 || length < 0 || size < 0)
    return false;
  std::optional<int64_t> end = checkedAdd(offset, length);
  return end && *end <= size;
}

/// Decimal digits of `v`: sizes read from files are computed in 128 bits so
/// that no sum or product of two int64 values can overflow, and messages
/// print them.
inline std::string int128String(__int128 v) {
  if (v == 0)
    return "0";
  bool negative = v < 0;
  unsigned __int128 u = negative ? -static_cast<unsigned __int128>(v)
                                 : static_cast<unsigned __int128>(v);
  std::string digits;
  while (u) {
    digits.insert(digits.begin(), static_cast<char>('0' + u % 10));
    u /= 10;
  }
  return negative ? "-" + digits : digits;
}

} // namespace omni

#endif // OMNI_RUNTIME_BASE_CHECKEDMATH_H
