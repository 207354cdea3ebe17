//===- HostCollectives.cpp - Collectives over host memory -------*- C++ -*-===//

#include "runtime/hal/HostCollectives.h"

#include "runtime/io/ElementCodec.h"

#include "absl/strings/str_cat.h"

#include <cmath>
#include <cstring>
#include <type_traits>

namespace omni::hal {
namespace {

//===--- Element access per dtype (Acc: the accumulation type) -----------===//

template <typename T> T loadRaw(const uint8_t *p, int64_t i) {
  T v;
  std::memcpy(&v, p + i * int64_t(sizeof(T)), sizeof(T));
  return v;
}
template <typename T> void storeRaw(uint8_t *p, int64_t i, T v) {
  std::memcpy(p + i * int64_t(sizeof(T)), &v, sizeof(T));
}

template <typename T> struct FloatTraits {
  using Acc = T;
  static constexpr bool kFloat = true;
  static Acc load(const uint8_t *p, int64_t i) { return loadRaw<T>(p, i); }
  static void store(uint8_t *p, int64_t i, Acc v) { storeRaw<T>(p, i, v); }
};
using F32Traits = FloatTraits<float>;
using F64Traits = FloatTraits<double>;

struct F16Traits {
  using Acc = float;
  static constexpr bool kFloat = true;
  static Acc load(const uint8_t *p, int64_t i) {
    return static_cast<float>(doubleFromHalfBits(loadRaw<uint16_t>(p, i)));
  }
  static void store(uint8_t *p, int64_t i, Acc v) {
    storeRaw<uint16_t>(p, i, halfBitsFromDouble(v)); // one rounding
  }
};

struct BF16Traits {
  using Acc = float;
  static constexpr bool kFloat = true;
  static Acc load(const uint8_t *p, int64_t i) {
    uint32_t bits = uint32_t(loadRaw<uint16_t>(p, i)) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  static void store(uint8_t *p, int64_t i, Acc v) {
    float rounded = static_cast<float>(roundToDType(v, DType::BF16));
    uint32_t bits;
    std::memcpy(&bits, &rounded, 4);
    storeRaw<uint16_t>(p, i, static_cast<uint16_t>(bits >> 16));
  }
};

template <typename T> struct IntTraits {
  using Acc = T;
  using U = std::make_unsigned_t<T>;
  static constexpr bool kFloat = false;
  static Acc load(const uint8_t *p, int64_t i) { return loadRaw<T>(p, i); }
  static void store(uint8_t *p, int64_t i, Acc v) { storeRaw<T>(p, i, v); }
};

/// Sum and product: floats round in Acc, integers wrap.
template <typename Tr>
typename Tr::Acc add(typename Tr::Acc a, typename Tr::Acc b) {
  if constexpr (Tr::kFloat)
    return a + b;
  else
    return static_cast<typename Tr::Acc>(typename Tr::U(a) + typename Tr::U(b));
}
template <typename Tr>
typename Tr::Acc mul(typename Tr::Acc a, typename Tr::Acc b) {
  if constexpr (Tr::kFloat)
    return a * b;
  else
    return static_cast<typename Tr::Acc>(typename Tr::U(a) * typename Tr::U(b));
}
template <typename Tr> bool isNan(typename Tr::Acc v) {
  if constexpr (Tr::kFloat)
    return std::isnan(v);
  else
    return false;
}

/// out[i] = op over ranks r = 0..n-1 of src[r][first + i], i in [begin, end).
template <typename Tr>
void combine(ReduceOp op, const std::vector<const uint8_t *> &src,
             int64_t first, uint8_t *out, int64_t begin, int64_t end) {
  using Acc = typename Tr::Acc;
  const size_t n = src.size();
  for (int64_t i = begin; i < end; ++i) {
    Acc acc = Tr::load(src[0], first + i);
    for (size_t r = 1; r < n; ++r) {
      Acc v = Tr::load(src[r], first + i);
      switch (op) {
      case ReduceOp::Sum:
      case ReduceOp::Mean:
        acc = add<Tr>(acc, v);
        break;
      case ReduceOp::Prod:
        acc = mul<Tr>(acc, v);
        break;
      case ReduceOp::Min:
        if (!isNan<Tr>(acc) && (isNan<Tr>(v) || v < acc))
          acc = v;
        break;
      case ReduceOp::Max:
        if (!isNan<Tr>(acc) && (isNan<Tr>(v) || v > acc))
          acc = v;
        break;
      }
    }
    if constexpr (Tr::kFloat)
      if (op == ReduceOp::Mean)
        acc = acc / static_cast<Acc>(n);
    Tr::store(out, i, acc);
  }
}

} // namespace

void reduceHostElements(DType dtype, ReduceOp op,
                        const std::vector<const uint8_t *> &src, int64_t first,
                        uint8_t *out, int64_t begin, int64_t end) {
  switch (dtype) {
  case DType::F32:
    return combine<F32Traits>(op, src, first, out, begin, end);
  case DType::F64:
    return combine<F64Traits>(op, src, first, out, begin, end);
  case DType::F16:
    return combine<F16Traits>(op, src, first, out, begin, end);
  case DType::BF16:
    return combine<BF16Traits>(op, src, first, out, begin, end);
  case DType::I32:
    return combine<IntTraits<int32_t>>(op, src, first, out, begin, end);
  case DType::I64:
    return combine<IntTraits<int64_t>>(op, src, first, out, begin, end);
  case DType::I1:
    break; // refused by checkHostReduction
  }
}

absl::Status checkHostReduction(DType dtype, ReduceOp op) {
  if (dtype == DType::I1)
    return absl::InvalidArgumentError(
        "i1 tensors cannot be reduced (only gathered and broadcast)");
  if (op == ReduceOp::Mean && !isFloatDType(dtype))
    return absl::InvalidArgumentError(absl::StrCat(
        "mean of ", dtypeName(dtype), " (expected a float dtype)"));
  if (op < ReduceOp::Sum || op > ReduceOp::Mean)
    return absl::InvalidArgumentError(
        absl::StrCat("reduce op ", static_cast<int>(op)));
  return absl::OkStatus();
}

} // namespace omni::hal
