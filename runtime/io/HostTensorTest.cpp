//===- HostTensorTest.cpp - HostTensor and element-type helpers -----------===//
//
// Rounding to the narrow float formats is where a reference evaluator goes
// subtly wrong (double rounding, overflow thresholds, subnormals), so those
// cases are pinned here against values computed by hand.
//
//===----------------------------------------------------------------------===//

#include "runtime/io/HostTensor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace omni {
namespace {

TEST(DTypeTest, NamesRoundTrip) {
  for (DType d : {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I1,
                  DType::I32, DType::I64})
    EXPECT_EQ(parseDType(dtypeName(d)), d);
  EXPECT_FALSE(parseDType("f8").has_value());
  EXPECT_FALSE(parseDType("").has_value());
  EXPECT_TRUE(isFloatDType(DType::BF16));
  EXPECT_FALSE(isFloatDType(DType::I1));
  EXPECT_EQ(intBitWidth(DType::I32), 32u);
  EXPECT_EQ(intBitWidth(DType::F32), 0u);
}

TEST(DTypeTest, RoundsToFloat32) {
  EXPECT_EQ(roundToDType(0.1, DType::F32), static_cast<double>(0.1f));
  EXPECT_EQ(roundToDType(0.1, DType::F64), 0.1);
  EXPECT_TRUE(std::isinf(roundToDType(1e39, DType::F32)));
}

TEST(DTypeTest, RoundsToHalf) {
  EXPECT_EQ(roundToDType(1.0 + 1.0 / 2048, DType::F16), 1.0); // tie to even
  EXPECT_EQ(roundToDType(1.0 + 3.0 / 2048, DType::F16), 1.0 + 2.0 / 1024);
  EXPECT_EQ(roundToDType(65504.0, DType::F16), 65504.0);
  EXPECT_EQ(roundToDType(65519.0, DType::F16), 65504.0);
  EXPECT_TRUE(std::isinf(roundToDType(65520.0, DType::F16)));
  EXPECT_TRUE(std::isinf(roundToDType(-1e6, DType::F16)));
  EXPECT_LT(roundToDType(-1e6, DType::F16), 0);
  // Smallest subnormal 2^-24; half of it ties to even (zero).
  EXPECT_EQ(roundToDType(std::ldexp(1.0, -24), DType::F16),
            std::ldexp(1.0, -24));
  EXPECT_EQ(roundToDType(std::ldexp(1.0, -25), DType::F16), 0.0);
  EXPECT_EQ(roundToDType(std::ldexp(1.5, -25), DType::F16),
            std::ldexp(1.0, -24));
  EXPECT_TRUE(std::isnan(roundToDType(NAN, DType::F16)));
}

TEST(DTypeTest, RoundsToBFloat16) {
  EXPECT_EQ(roundToDType(1.0 + 1.0 / 256, DType::BF16), 1.0); // tie to even
  EXPECT_EQ(roundToDType(1.0 + 3.0 / 256, DType::BF16), 1.0 + 2.0 / 128);
  EXPECT_EQ(roundToDType(3.14159265, DType::BF16), 3.140625);
  double maxBf16 = std::ldexp(255.0, 120);
  EXPECT_EQ(roundToDType(maxBf16, DType::BF16), maxBf16);
  EXPECT_TRUE(std::isinf(roundToDType(std::ldexp(511.0, 119), DType::BF16)));
  EXPECT_EQ(roundToDType(std::ldexp(1.0, -133), DType::BF16),
            std::ldexp(1.0, -133));
}

TEST(DTypeTest, HalfBitsRoundTrip) {
  EXPECT_EQ(halfBitsFromDouble(1.0), 0x3c00);
  EXPECT_EQ(halfBitsFromDouble(-2.0), 0xc000);
  EXPECT_EQ(halfBitsFromDouble(65504.0), 0x7bff);
  EXPECT_EQ(halfBitsFromDouble(INFINITY), 0x7c00);
  EXPECT_EQ(halfBitsFromDouble(std::ldexp(1.0, -24)), 0x0001);
  EXPECT_EQ(halfBitsFromDouble(-0.0), 0x8000);
  for (uint32_t bits = 0; bits < 0x10000; ++bits) {
    if ((bits & 0x7c00) == 0x7c00 && (bits & 0x3ff))
      continue; // NaN payloads are not preserved
    EXPECT_EQ(halfBitsFromDouble(doubleFromHalfBits(bits)), bits);
  }
}

TEST(DTypeTest, WrapsIntegers) {
  EXPECT_EQ(wrapToDType(int64_t{1} << 31, DType::I32),
            std::numeric_limits<int32_t>::min());
  EXPECT_EQ(wrapToDType(-1, DType::I32), -1);
  EXPECT_EQ(wrapToDType(3, DType::I1), 1);
  EXPECT_EQ(wrapToDType(2, DType::I1), 0);
  EXPECT_EQ(wrapToDType(std::numeric_limits<int64_t>::min(), DType::I64),
            std::numeric_limits<int64_t>::min());
}

TEST(HostTensorTest, ConstructsAndDescribes) {
  HostTensor zeros(DType::F32, {2, 3});
  EXPECT_EQ(zeros.numElements(), 6);
  EXPECT_EQ(zeros.typeString(), "tensor<2x3xf32>");
  EXPECT_EQ(zeros.floats().size(), 6u);
  EXPECT_TRUE(zeros.ints().empty());

  HostTensor scalar = HostTensor::scalarInt(DType::I64, (int64_t{1} << 53) + 1);
  EXPECT_EQ(scalar.typeString(), "tensor<i64>");
  EXPECT_EQ(scalar.ints()[0], (int64_t{1} << 53) + 1);

  HostTensor rounded = HostTensor::fromDoubles(DType::F32, {1}, {0.1});
  EXPECT_EQ(rounded.floats()[0], static_cast<double>(0.1f));

  HostTensor empty(DType::I1, {0, 4});
  EXPECT_EQ(empty.numElements(), 0);
  EXPECT_EQ(empty.typeString(), "tensor<0x4xi1>");
}

TEST(HostTensorTest, ReshapeRetypeAndEquality) {
  HostTensor t = HostTensor::fromDoubles(DType::F64, {2, 2}, {1, 2, 3, 0.1});
  HostTensor u = t;
  EXPECT_EQ(t, u);
  u.reshape({4});
  EXPECT_NE(t, u);
  EXPECT_EQ(u.shape(), (std::vector<int64_t>{4}));
  u.retype(DType::F32);
  EXPECT_EQ(u.dtype(), DType::F32);
  EXPECT_EQ(u.floats()[3], static_cast<double>(0.1f));

  HostTensor n = HostTensor::fromDoubles(DType::F32, {1}, {NAN});
  EXPECT_EQ(n, n);

  HostTensor i = HostTensor::fromInts(DType::I64, {2}, {5, -1});
  i.retype(DType::I1);
  EXPECT_EQ(i.ints()[0], 1);
  EXPECT_EQ(i.doubleAt(1), 1.0);
}

} // namespace
} // namespace omni
