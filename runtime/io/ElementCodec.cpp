//===- ElementCodec.cpp - The one element codec of every dtype --*- C++ -*-===//
//
// One pair of templates, narrowTo<Format> and widen<Format>, codes binary32,
// binary16 and bfloat16 from and to double bits with integer arithmetic
// only; the byte functions loop over a whole span with the dtype switch
// outside the loop. The rules are in the header.
//
//===----------------------------------------------------------------------===//

#include "runtime/io/ElementCodec.h"

#include "absl/strings/str_cat.h"

#include <cassert>
#include <cstring>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "omni stores elements little-endian and copies them as host words"
#endif

namespace omni {
namespace {

uint64_t bitsOf(double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, 8);
  return bits;
}

double doubleOf(uint64_t bits) {
  double value;
  std::memcpy(&value, &bits, 8);
  return value;
}

constexpr uint64_t kF64Sign = uint64_t{1} << 63;
constexpr uint64_t kF64ExpMask = uint64_t{0x7ff} << 52;
constexpr uint64_t kF64FracMask = (uint64_t{1} << 52) - 1;
constexpr uint64_t kF64Quiet = uint64_t{1} << 51;

/// A binary interchange format with `E` exponent and `M` fraction bits.
template <int E, int M> struct Format {
  static constexpr int kFracBits = M;
  static constexpr int kWidth = 1 + E + M;
  static constexpr int kBias = (1 << (E - 1)) - 1;
  static constexpr int kMinExp = 1 - kBias; // of the smallest normal
  static constexpr uint32_t kExpMask = ((uint32_t{1} << E) - 1) << M;
  static constexpr uint32_t kFracMask = (uint32_t{1} << M) - 1;
  static constexpr uint32_t kQuiet = uint32_t{1} << (M - 1);
  static constexpr uint32_t kSign = uint32_t{1} << (E + M);
};
using F32Format = Format<8, 23>;
using F16Format = Format<5, 10>;
using BF16Format = Format<8, 7>;

/// The bits of `value` in format F, rounded to nearest even.
template <typename F> uint32_t narrowTo(double value) {
  constexpr int kM = F::kFracBits;
  uint64_t d = bitsOf(value);
  uint32_t sign = (d & kF64Sign) ? F::kSign : 0;
  uint64_t mag = d & ~kF64Sign;
  if (mag > kF64ExpMask) // NaN: quiet, payload's leading bits kept
    return sign | F::kExpMask | F::kQuiet |
           static_cast<uint32_t>((mag & kF64FracMask) >> (52 - kM));
  if (mag == kF64ExpMask)
    return sign | F::kExpMask;
  int exp = static_cast<int>(mag >> 52) - 1023;
  uint64_t sig = mag & kF64FracMask;
  if (exp == -1023)
    exp = -1022; // a double subnormal: no implicit bit
  else
    sig |= uint64_t{1} << 52;
  // sig * 2^(exp - 52) in units of the target's last place at exponent
  // max(exp, kMinExp).
  bool normal = exp >= F::kMinExp;
  int shift = 52 - kM + (normal ? 0 : F::kMinExp - exp);
  if (shift > 53) // below half the smallest subnormal: rounds to zero
    return sign;
  uint64_t q = sig >> shift;
  uint64_t rem = sig & ((uint64_t{1} << shift) - 1);
  uint64_t half = uint64_t{1} << (shift - 1);
  if (rem > half || (rem == half && (q & 1)))
    ++q; // a carry out of the fraction correctly bumps the exponent
  uint64_t bits =
      normal ? (static_cast<uint64_t>(exp + F::kBias - 1) << kM) + q : q;
  if (bits >= F::kExpMask)
    return sign | F::kExpMask; // overflow: infinity
  return sign | static_cast<uint32_t>(bits);
}

/// The double value of format-F bits (exact; NaN quieted, payload on top).
template <typename F> double widen(uint32_t bits) {
  constexpr int kM = F::kFracBits;
  uint64_t sign = (bits & F::kSign) ? kF64Sign : 0;
  uint32_t expField = (bits & F::kExpMask) >> kM;
  uint64_t frac = bits & F::kFracMask;
  if ((bits & F::kExpMask) == F::kExpMask)
    return doubleOf(frac ? sign | kF64ExpMask | kF64Quiet | (frac << (52 - kM))
                         : sign | kF64ExpMask);
  if (expField == 0) {
    if (frac == 0)
      return doubleOf(sign);
    // frac * 2^(kMinExp - kM): normalize the leading bit p into the
    // implicit position.
    int p = 63 - __builtin_clzll(frac);
    uint64_t exp = static_cast<uint64_t>(F::kMinExp - kM + p + 1023);
    uint64_t fraction = (frac & ~(uint64_t{1} << p)) << (52 - p);
    return doubleOf(sign | (exp << 52) | fraction);
  }
  uint64_t exp =
      static_cast<uint64_t>(static_cast<int>(expField) - F::kBias + 1023);
  return doubleOf(sign | (exp << 52) | (frac << (52 - kM)));
}

template <typename T> void store(uint8_t *out, T value) {
  std::memcpy(out, &value, sizeof(T));
}
template <typename T> T load(const uint8_t *in) {
  T value;
  std::memcpy(&value, in, sizeof(T));
  return value;
}

} // namespace

uint32_t f32BitsFromDouble(double value) { return narrowTo<F32Format>(value); }
double doubleFromF32Bits(uint32_t bits) { return widen<F32Format>(bits); }

uint16_t halfBitsFromDouble(double value) {
  return static_cast<uint16_t>(narrowTo<F16Format>(value));
}
double doubleFromHalfBits(uint16_t bits) { return widen<F16Format>(bits); }

uint16_t bf16BitsFromDouble(double value) {
  return static_cast<uint16_t>(narrowTo<BF16Format>(value));
}
double doubleFromBf16Bits(uint16_t bits) { return widen<BF16Format>(bits); }

double roundToDType(double value, DType dtype) {
  switch (dtype) {
  case DType::F32:
    return doubleFromF32Bits(f32BitsFromDouble(value));
  case DType::F16:
    return doubleFromHalfBits(halfBitsFromDouble(value));
  case DType::BF16:
    return doubleFromBf16Bits(bf16BitsFromDouble(value));
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

void encodeFloats(DType dtype, absl::Span<const double> values,
                  absl::Span<uint8_t> out) {
  assert(isFloatDType(dtype) && "encodeFloats needs a float dtype");
  assert(out.size() == values.size() * static_cast<size_t>(dtypeSize(dtype)) &&
         "byte count does not match the element count");
  uint8_t *p = out.data();
  switch (dtype) {
  case DType::F32:
    for (double v : values)
      store<uint32_t>(p, f32BitsFromDouble(v)), p += 4;
    return;
  case DType::F64:
    if (!values.empty())
      std::memcpy(p, values.data(), values.size() * 8);
    return;
  case DType::F16:
    for (double v : values)
      store<uint16_t>(p, halfBitsFromDouble(v)), p += 2;
    return;
  case DType::BF16:
    for (double v : values)
      store<uint16_t>(p, bf16BitsFromDouble(v)), p += 2;
    return;
  default:
    return;
  }
}

void decodeFloats(DType dtype, absl::Span<const uint8_t> in,
                  absl::Span<double> values) {
  assert(isFloatDType(dtype) && "decodeFloats needs a float dtype");
  assert(in.size() == values.size() * static_cast<size_t>(dtypeSize(dtype)) &&
         "byte count does not match the element count");
  const uint8_t *p = in.data();
  switch (dtype) {
  case DType::F32:
    for (double &v : values)
      v = doubleFromF32Bits(load<uint32_t>(p)), p += 4;
    return;
  case DType::F64:
    if (!values.empty())
      std::memcpy(values.data(), p, values.size() * 8);
    return;
  case DType::F16:
    for (double &v : values)
      v = doubleFromHalfBits(load<uint16_t>(p)), p += 2;
    return;
  case DType::BF16:
    for (double &v : values)
      v = doubleFromBf16Bits(load<uint16_t>(p)), p += 2;
    return;
  default:
    return;
  }
}

void encodeInts(DType dtype, absl::Span<const int64_t> values,
                absl::Span<uint8_t> out) {
  assert(!isFloatDType(dtype) && "encodeInts needs an integer dtype");
  assert(out.size() == values.size() * static_cast<size_t>(dtypeSize(dtype)) &&
         "byte count does not match the element count");
  uint8_t *p = out.data();
  switch (dtype) {
  case DType::I1:
    for (int64_t v : values)
      *p++ = static_cast<uint8_t>(v & 1);
    return;
  case DType::I32:
    for (int64_t v : values)
      store<uint32_t>(p, static_cast<uint32_t>(v)), p += 4;
    return;
  case DType::I64:
    if (!values.empty())
      std::memcpy(p, values.data(), values.size() * 8);
    return;
  default:
    return;
  }
}

absl::Status checkI1Bytes(absl::Span<const uint8_t> in) {
  for (size_t i = 0; i < in.size(); ++i)
    if (in[i] > 1)
      return absl::InvalidArgumentError(
          absl::StrCat("element ", i, " of i1 is byte ",
                       static_cast<unsigned>(in[i]), ", expected 0 or 1"));
  return absl::OkStatus();
}

absl::Status decodeInts(DType dtype, absl::Span<const uint8_t> in,
                        absl::Span<int64_t> values) {
  assert(!isFloatDType(dtype) && "decodeInts needs an integer dtype");
  assert(in.size() == values.size() * static_cast<size_t>(dtypeSize(dtype)) &&
         "byte count does not match the element count");
  const uint8_t *p = in.data();
  switch (dtype) {
  case DType::I1:
    for (size_t i = 0; i < values.size(); ++i)
      values[i] = p[i] & 1;
    return checkI1Bytes(in);
  case DType::I32:
    for (int64_t &v : values)
      v = load<int32_t>(p), p += 4;
    return absl::OkStatus();
  case DType::I64:
    if (!values.empty())
      std::memcpy(values.data(), p, values.size() * 8);
    return absl::OkStatus();
  default:
    return absl::OkStatus();
  }
}

} // namespace omni
