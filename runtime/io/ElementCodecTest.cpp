//===- ElementCodecTest.cpp - The element codec against references -------===//
//
// Every f16 and bf16 bit pattern is decoded and compared with a value built
// independently (the IEEE formula with ldexp for f16, the top half of a
// float32 for bf16), and every rounding boundary between adjacent values
// (the midpoints and their neighbours in double) is checked against ties to
// even. f32 is checked on a strided sweep against the compiler's float
// conversion. Then the NaN, infinity, subnormal and i1 rules of
// ElementCodec.h one by one.
//
//===----------------------------------------------------------------------===//

#include "runtime/io/ElementCodec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace omni {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

uint64_t bitsOf(double v) {
  uint64_t b;
  std::memcpy(&b, &v, 8);
  return b;
}
double doubleOf(uint64_t b) {
  double v;
  std::memcpy(&v, &b, 8);
  return v;
}
uint32_t bitsOfFloat(float v) {
  uint32_t b;
  std::memcpy(&b, &v, 4);
  return b;
}
float floatOf(uint32_t b) {
  float v;
  std::memcpy(&v, &b, 4);
  return v;
}

/// The value of binary16 `bits` by the IEEE 754 formula (not NaN).
double halfReference(uint16_t bits) {
  double sign = (bits & 0x8000) ? -1.0 : 1.0;
  int e = (bits >> 10) & 0x1f, m = bits & 0x3ff;
  if (e == 0x1f)
    return sign * kInf;
  if (e == 0)
    return sign * std::ldexp(m, -24);
  return sign * std::ldexp(1024 + m, e - 25);
}

bool isHalfNaN(uint16_t b) { return (b & 0x7c00) == 0x7c00 && (b & 0x3ff); }
bool isBf16NaN(uint16_t b) { return (b & 0x7f80) == 0x7f80 && (b & 0x7f); }

/// Same double, bit for bit (so -0 differs from +0).
#define EXPECT_SAME_DOUBLE(a, b) EXPECT_EQ(bitsOf(a), bitsOf(b))

//===----------------------------------------------------------------------===//
// f16
//===----------------------------------------------------------------------===//

TEST(ElementCodecF16, DecodesEveryBitPatternLikeTheFormula) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    uint16_t bits = static_cast<uint16_t>(b);
    double got = doubleFromHalfBits(bits);
    if (isHalfNaN(bits)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << b;
      ASSERT_EQ(std::signbit(got), (b & 0x8000) != 0) << std::hex << b;
      // Quiet, with the 10 fraction bits at the top of double's 52.
      ASSERT_EQ(bitsOf(got) & 0x000fffffffffffffULL,
                (static_cast<uint64_t>(b & 0x3ff) << 42) | (1ULL << 51))
          << std::hex << b;
    } else {
      ASSERT_EQ(bitsOf(got), bitsOf(halfReference(bits))) << std::hex << b;
    }
  }
}

TEST(ElementCodecF16, EveryBitPatternRoundTrips) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    uint16_t bits = static_cast<uint16_t>(b);
    // A signaling NaN (quiet bit 0x200 clear) comes back quieted.
    uint16_t want = isHalfNaN(bits) ? (bits | 0x200) : bits;
    ASSERT_EQ(halfBitsFromDouble(doubleFromHalfBits(bits)), want)
        << std::hex << b;
    ASSERT_EQ(bitsOf(roundToDType(doubleFromHalfBits(bits), DType::F16)),
              bitsOf(doubleFromHalfBits(want)))
        << std::hex << b;
  }
}

/// Checks rounding at the boundary between adjacent finite values `lo` and
/// `hi` (bits `loBits`, `hiBits` = loBits + 1, same sign): the midpoint ties
/// to the even pattern, its neighbours in double go to the nearer value.
template <typename Encode>
void checkBoundary(Encode encode, uint16_t loBits, double lo, double hi) {
  uint16_t hiBits = static_cast<uint16_t>(loBits + 1);
  double mid = lo + (hi - lo) / 2; // exact: one more bit than the format
  ASSERT_EQ(encode(mid), (loBits & 1) ? hiBits : loBits) << std::hex << loBits;
  ASSERT_EQ(encode(std::nextafter(mid, hi)), hiBits) << std::hex << loBits;
  ASSERT_EQ(encode(std::nextafter(mid, lo)), loBits) << std::hex << loBits;
}

TEST(ElementCodecF16, RoundsToNearestEvenAtEveryBoundary) {
  // 0x7c00 is +inf: the last finite boundary is 0x7bfe / 0x7bff.
  for (uint16_t k = 0; k < 0x7bff; ++k) {
    double lo = halfReference(k), hi = halfReference(k + 1);
    checkBoundary(halfBitsFromDouble, k, lo, hi);
    checkBoundary(halfBitsFromDouble, static_cast<uint16_t>(k | 0x8000), -lo,
                  -hi);
  }
  // Overflow: half a unit above 65504 (the next value would be 65536)
  // rounds to even, which is the infinity pattern.
  EXPECT_EQ(halfBitsFromDouble(65520.0), 0x7c00);
  EXPECT_EQ(halfBitsFromDouble(std::nextafter(65520.0, 0.0)), 0x7bff);
  EXPECT_EQ(halfBitsFromDouble(-65520.0), 0xfc00);
  EXPECT_EQ(halfBitsFromDouble(1e300), 0x7c00);
  // Below half the smallest subnormal: signed zero.
  EXPECT_EQ(halfBitsFromDouble(std::ldexp(1.0, -25)), 0x0000);
  EXPECT_EQ(halfBitsFromDouble(std::nextafter(std::ldexp(1.0, -25), 1.0)),
            0x0001);
  EXPECT_EQ(halfBitsFromDouble(-1e-300), 0x8000);
  EXPECT_EQ(halfBitsFromDouble(-std::numeric_limits<double>::denorm_min()),
            0x8000);
}

//===----------------------------------------------------------------------===//
// bf16
//===----------------------------------------------------------------------===//

TEST(ElementCodecBF16, DecodesEveryBitPatternAsTheTopOfAFloat) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    uint16_t bits = static_cast<uint16_t>(b);
    double got = doubleFromBf16Bits(bits);
    double want = floatOf(b << 16); // float -> double is exact
    if (isBf16NaN(bits)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << b;
      ASSERT_EQ(std::signbit(got), (b & 0x8000) != 0) << std::hex << b;
      ASSERT_EQ(bitsOf(got) & 0x000fffffffffffffULL,
                (static_cast<uint64_t>(b & 0x7f) << 45) | (1ULL << 51))
          << std::hex << b;
    } else {
      ASSERT_EQ(bitsOf(got), bitsOf(want)) << std::hex << b;
    }
  }
}

TEST(ElementCodecBF16, EveryBitPatternRoundTrips) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    uint16_t bits = static_cast<uint16_t>(b);
    uint16_t want = isBf16NaN(bits) ? (bits | 0x40) : bits;
    ASSERT_EQ(bf16BitsFromDouble(doubleFromBf16Bits(bits)), want)
        << std::hex << b;
  }
}

TEST(ElementCodecBF16, RoundsToNearestEvenAtEveryBoundary) {
  for (uint16_t k = 0; k < 0x7f7f; ++k) {
    double lo = floatOf(uint32_t{k} << 16),
           hi = floatOf(uint32_t{k + 1u} << 16);
    checkBoundary(bf16BitsFromDouble, k, lo, hi);
    checkBoundary(bf16BitsFromDouble, static_cast<uint16_t>(k | 0x8000), -lo,
                  -hi);
  }
  double maxBf16 = std::ldexp(255.0, 120);
  EXPECT_EQ(bf16BitsFromDouble(maxBf16), 0x7f7f);
  EXPECT_EQ(bf16BitsFromDouble(std::ldexp(511.0, 119)), 0x7f80); // tie: inf
  EXPECT_EQ(bf16BitsFromDouble(std::nextafter(std::ldexp(511.0, 119), 0.0)),
            0x7f7f);
}

TEST(ElementCodecBF16, RoundsOnceFromDoubleNeverThroughFloat) {
  // 1 + 2^-8 + 2^-40 is just above the midpoint between 1 and 1 + 2^-7;
  // through float it would first become the midpoint and then tie down.
  double v = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40);
  ASSERT_EQ(static_cast<double>(static_cast<float>(v)),
            1.0 + std::ldexp(1.0, -8));
  EXPECT_EQ(bf16BitsFromDouble(v), 0x3f81);
  EXPECT_EQ(roundToDType(v, DType::BF16), 1.0 + std::ldexp(1.0, -7));
  // The same for f16: 1 + 2^-11 + 2^-40.
  double h = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  EXPECT_EQ(halfBitsFromDouble(h), 0x3c01);
}

TEST(ElementCodecBF16, MatchesTheFloatRoundingBiasTrickOnFloats) {
  // For inputs that are floats, the classic bit trick (add 0x7fff plus the
  // lowest kept bit, truncate) is a correct reference.
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 997) {
    uint32_t f = static_cast<uint32_t>(u);
    float x = floatOf(f);
    if (std::isnan(x))
      continue;
    uint32_t trick = (f + 0x7fff + ((f >> 16) & 1)) >> 16;
    ASSERT_EQ(bf16BitsFromDouble(x), trick) << std::hex << f;
  }
}

//===----------------------------------------------------------------------===//
// f32
//===----------------------------------------------------------------------===//

TEST(ElementCodecF32, MatchesTheHardwareConversionOnASweep) {
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 997) {
    uint32_t f = static_cast<uint32_t>(u);
    float x = floatOf(f);
    if (std::isnan(x))
      continue;
    ASSERT_EQ(bitsOf(doubleFromF32Bits(f)), bitsOf(static_cast<double>(x)))
        << std::hex << f;
    ASSERT_EQ(f32BitsFromDouble(static_cast<double>(x)), f) << std::hex << f;
  }
  // Doubles between floats, including subnormal results.
  for (double d : {0.1, -1.0 / 3, 1e-40, -3e-45, 1e-46, 3.4028235e38, 1e39,
                   std::ldexp(1.0, -150), std::ldexp(1.5, -150)})
    EXPECT_EQ(f32BitsFromDouble(d), bitsOfFloat(static_cast<float>(d))) << d;
  EXPECT_EQ(f32BitsFromDouble(std::ldexp(1.0, -150)), 0u); // tie to even
  EXPECT_EQ(f32BitsFromDouble(std::ldexp(1.5, -150)), 1u);
}

//===----------------------------------------------------------------------===//
// The NaN rule
//===----------------------------------------------------------------------===//

TEST(ElementCodecNaN, KeepsSignAndLeadingPayloadAndIsQuiet) {
  double qnan = doubleOf(0x7ff8000000000000ULL);
  double negQnan = doubleOf(0xfff8000000000000ULL);
  EXPECT_EQ(halfBitsFromDouble(qnan), 0x7e00);
  EXPECT_EQ(halfBitsFromDouble(negQnan), 0xfe00);
  EXPECT_EQ(bf16BitsFromDouble(qnan), 0x7fc0);
  EXPECT_EQ(bf16BitsFromDouble(negQnan), 0xffc0);
  EXPECT_EQ(f32BitsFromDouble(qnan), 0x7fc00000u);
  EXPECT_EQ(f32BitsFromDouble(negQnan), 0xffc00000u);
  // All payload bits set: every kept bit set.
  double full = doubleOf(0xffffffffffffffffULL);
  EXPECT_EQ(halfBitsFromDouble(full), 0xffff);
  EXPECT_EQ(bf16BitsFromDouble(full), 0xffff);
  EXPECT_EQ(f32BitsFromDouble(full), 0xffffffffu);
  // A signaling NaN whose payload is only in the dropped low bits stays a
  // NaN (quieted), never becomes an infinity.
  double snanLow = doubleOf(0x7ff0000000000001ULL);
  EXPECT_EQ(halfBitsFromDouble(snanLow), 0x7e00);
  EXPECT_EQ(bf16BitsFromDouble(snanLow), 0x7fc0);
  EXPECT_EQ(f32BitsFromDouble(snanLow), 0x7fc00000u);
  EXPECT_TRUE(std::isnan(roundToDType(snanLow, DType::F16)));
  EXPECT_TRUE(std::isnan(roundToDType(snanLow, DType::BF16)));
  EXPECT_TRUE(std::isnan(roundToDType(snanLow, DType::F32)));
  // A quiet f32 NaN with a payload comes back bit-exact through double.
  for (uint32_t f : {0x7fc12345u, 0xffc00001u, 0x7fffffffu})
    EXPECT_EQ(f32BitsFromDouble(doubleFromF32Bits(f)), f) << std::hex << f;
  EXPECT_EQ(f32BitsFromDouble(doubleFromF32Bits(0x7f800001u)), 0x7fc00001u);
}

TEST(ElementCodecNaN, F64BytesAreCopiedUnchanged) {
  std::vector<double> values = {doubleOf(0x7ff0000000000001ULL),
                                doubleOf(0xfff8000000abcdefULL), -0.0};
  std::vector<uint8_t> bytes(24);
  encodeFloats(DType::F64, values, absl::MakeSpan(bytes));
  std::vector<double> back(3);
  decodeFloats(DType::F64, bytes, absl::MakeSpan(back));
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(bitsOf(back[i]), bitsOf(values[i])) << i;
}

TEST(ElementCodecEdges, InfinitiesZerosAndSubnormals) {
  EXPECT_EQ(halfBitsFromDouble(kInf), 0x7c00);
  EXPECT_EQ(halfBitsFromDouble(-kInf), 0xfc00);
  EXPECT_EQ(bf16BitsFromDouble(-kInf), 0xff80);
  EXPECT_EQ(f32BitsFromDouble(-kInf), 0xff800000u);
  EXPECT_EQ(halfBitsFromDouble(-0.0), 0x8000);
  EXPECT_EQ(bf16BitsFromDouble(-0.0), 0x8000);
  EXPECT_SAME_DOUBLE(doubleFromHalfBits(0x8000), -0.0);
  EXPECT_SAME_DOUBLE(doubleFromBf16Bits(0xff80), -kInf);
  // Smallest and largest subnormals and the smallest normal.
  EXPECT_EQ(doubleFromHalfBits(0x0001), std::ldexp(1.0, -24));
  EXPECT_EQ(doubleFromHalfBits(0x03ff), std::ldexp(1023.0, -24));
  EXPECT_EQ(doubleFromHalfBits(0x0400), std::ldexp(1.0, -14));
  EXPECT_EQ(doubleFromBf16Bits(0x0001), std::ldexp(1.0, -133));
  EXPECT_EQ(halfBitsFromDouble(std::ldexp(1023.5, -24)), 0x0400); // carry
  EXPECT_EQ(doubleFromF32Bits(1u), std::ldexp(1.0, -149));
}

//===----------------------------------------------------------------------===//
// Bytes
//===----------------------------------------------------------------------===//

TEST(ElementCodecBytes, FloatsAreLittleEndianElements) {
  std::vector<double> values = {1.0, -2.0};
  std::vector<uint8_t> f16(4), bf16(4), f32(8);
  encodeFloats(DType::F16, values, absl::MakeSpan(f16));
  encodeFloats(DType::BF16, values, absl::MakeSpan(bf16));
  encodeFloats(DType::F32, values, absl::MakeSpan(f32));
  EXPECT_EQ(f16, (std::vector<uint8_t>{0x00, 0x3c, 0x00, 0xc0}));
  EXPECT_EQ(bf16, (std::vector<uint8_t>{0x80, 0x3f, 0x00, 0xc0}));
  EXPECT_EQ(f32, (std::vector<uint8_t>{0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0}));
  std::vector<double> back(2);
  decodeFloats(DType::BF16, bf16, absl::MakeSpan(back));
  EXPECT_EQ(back, values);
}

TEST(ElementCodecBytes, IntegersWrapAndI1IsOneByte) {
  std::vector<int64_t> values = {0, 1, 2, 3, -1};
  std::vector<uint8_t> i1(5);
  encodeInts(DType::I1, values, absl::MakeSpan(i1));
  EXPECT_EQ(i1, (std::vector<uint8_t>{0, 1, 0, 1, 1})); // the low bit
  std::vector<uint8_t> i32(20);
  encodeInts(DType::I32, {int64_t{1} << 32 | 5, -2, 0, 0, 0},
             absl::MakeSpan(i32));
  std::vector<int64_t> back(5);
  ASSERT_TRUE(decodeInts(DType::I32, i32, absl::MakeSpan(back)).ok());
  EXPECT_EQ(back, (std::vector<int64_t>{5, -2, 0, 0, 0}));
  std::vector<uint8_t> i64(16);
  encodeInts(DType::I64, {std::numeric_limits<int64_t>::min(), -1},
             absl::MakeSpan(i64));
  std::vector<int64_t> back64(2);
  ASSERT_TRUE(decodeInts(DType::I64, i64, absl::MakeSpan(back64)).ok());
  EXPECT_EQ(back64[0], std::numeric_limits<int64_t>::min());
  EXPECT_EQ(back64[1], -1);
}

TEST(ElementCodecBytes, I1BytesOtherThanZeroOrOneAreAnError) {
  std::vector<uint8_t> bytes = {1, 0, 2, 0xff};
  std::vector<int64_t> values(4);
  absl::Status s = decodeInts(DType::I1, bytes, absl::MakeSpan(values));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "element 2 of i1 is byte 2, expected 0 or 1");
  // Still decoded: the low bit, as a kernel's i1 load reads it.
  EXPECT_EQ(values, (std::vector<int64_t>{1, 0, 0, 1}));
  std::vector<uint8_t> good = {0, 1};
  std::vector<int64_t> two(2);
  EXPECT_TRUE(decodeInts(DType::I1, good, absl::MakeSpan(two)).ok());
  EXPECT_EQ(two, (std::vector<int64_t>{0, 1}));
}

TEST(ElementCodecBytes, EmptySpansAreFine) {
  encodeFloats(DType::F64, {}, {});
  decodeFloats(DType::F16, {}, {});
  encodeInts(DType::I64, {}, {});
  EXPECT_TRUE(decodeInts(DType::I1, {}, {}).ok());
}

} // namespace
} // namespace omni
