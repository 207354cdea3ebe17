//===- TypedTensorTest.cpp - TypedTensor ----------------------------------===//
//
// The bytes are the dtype's little-endian elements (checked against
// hand-written IEEE bit patterns), the conversions to and from HostTensor
// are exact for every dtype, and equality is bit for bit.
//
//===----------------------------------------------------------------------===//

#include "runtime/io/TypedTensor.h"

#include <cmath>
#include <cstring>
#include <gtest/gtest.h>
#include <limits>

namespace omni {
namespace {

TEST(TypedTensorTest, ZeroFilledWithTheDTypesSize) {
  TypedTensor t(DType::F16, {2, 3});
  EXPECT_EQ(t.numElements(), 6);
  EXPECT_EQ(t.byteSize(), 12);
  EXPECT_EQ(t.bytes().size(), 12u);
  for (uint8_t b : t.bytes())
    EXPECT_EQ(b, 0);
  EXPECT_EQ(t.typeString(), "tensor<2x3xf16>");
  EXPECT_EQ(TypedTensor().typeString(), "tensor<f32>");
  EXPECT_EQ(TypedTensor(DType::I1, {0, 4}).byteSize(), 0);
  EXPECT_EQ(TypedTensor(DType::I64, {5}).byteSize(), 40);
}

TEST(TypedTensorTest, BytesAreLittleEndianElements) {
  TypedTensor t =
      TypedTensor::of<float>(DType::F32, {2}, std::vector<float>{1.0f, -2.0f});
  // 1.0f = 0x3f800000, -2.0f = 0xc0000000.
  std::vector<uint8_t> want = {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0};
  EXPECT_EQ(std::vector<uint8_t>(t.bytes().begin(), t.bytes().end()), want);
  TypedTensor i = TypedTensor::scalarI64(0x0102030405060708);
  EXPECT_EQ(i.bytes()[0], 0x08);
  EXPECT_EQ(i.bytes()[7], 0x01);
  TypedTensor back = TypedTensor::fromBytes(DType::F32, {2}, t.bytes());
  EXPECT_EQ(back, t);
  EXPECT_EQ(back.span<float>()[1], -2.0f);
}

TEST(TypedTensorTest, HalfPrecisionHoldsBitPatterns) {
  HostTensor h = HostTensor::fromDoubles(DType::F16, {3}, {1.0, -0.5, 65504});
  TypedTensor t = TypedTensor::fromHost(h);
  // IEEE binary16: 1.0 = 0x3c00, -0.5 = 0xb800, 65504 = 0x7bff.
  EXPECT_EQ(t.span<uint16_t>()[0], 0x3c00);
  EXPECT_EQ(t.span<uint16_t>()[1], 0xb800);
  EXPECT_EQ(t.span<uint16_t>()[2], 0x7bff);
  EXPECT_EQ(t.doubleAt(2), 65504.0);
  HostTensor b = HostTensor::fromDoubles(DType::BF16, {2}, {1.0, -3.0});
  TypedTensor tb = TypedTensor::fromHost(b);
  // bfloat16: the high half of the float: 1.0 = 0x3f80, -3.0 = 0xc040.
  EXPECT_EQ(tb.span<uint16_t>()[0], 0x3f80);
  EXPECT_EQ(tb.span<uint16_t>()[1], 0xc040);
  EXPECT_EQ(tb.toHost(), b);
}

TEST(TypedTensorTest, HostRoundTripIsExactForEveryDType) {
  const double inf = std::numeric_limits<double>::infinity();
  for (DType d : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
    HostTensor h =
        HostTensor::fromDoubles(d, {2, 3}, {0.0, -0.0, 1.5, -inf, 1e-3, 7.0});
    TypedTensor t = TypedTensor::fromHost(h);
    EXPECT_EQ(t.byteSize(), 6 * dtypeSize(d)) << dtypeName(d);
    HostTensor back = t.toHost();
    EXPECT_EQ(back, h) << dtypeName(d);
    EXPECT_TRUE(std::signbit(back.floats()[1])) << dtypeName(d);
  }
  for (DType d : {DType::I1, DType::I32, DType::I64}) {
    HostTensor h = HostTensor::fromInts(d, {4}, {0, 1, -7, 5});
    TypedTensor t = TypedTensor::fromHost(h);
    EXPECT_EQ(t.toHost(), h) << dtypeName(d);
  }
  HostTensor big = HostTensor::fromInts(
      DType::I64, {2}, {std::numeric_limits<int64_t>::min(), (1LL << 53) + 1});
  EXPECT_EQ(TypedTensor::fromHost(big).span<int64_t>()[1], (1LL << 53) + 1);
  EXPECT_EQ(TypedTensor::fromHost(big).toHost(), big);
}

TEST(TypedTensorTest, EqualityIsBitForBit) {
  TypedTensor a =
      TypedTensor::of<float>(DType::F32, {2}, std::vector<float>{0.0f, 1.0f});
  TypedTensor b = a;
  EXPECT_EQ(a, b);
  b.span<float>()[0] = -0.0f; // equal as numbers, not as bits
  EXPECT_NE(a, b);
  TypedTensor c = a;
  c.reshape({1, 2});
  EXPECT_NE(a, c);
  TypedTensor n = TypedTensor::scalarF32(std::nanf(""));
  EXPECT_EQ(n, n);
  EXPECT_NE(TypedTensor(DType::I32, {2}), TypedTensor(DType::F32, {2}));
}

TEST(TypedTensorTest, ElementTypes) {
  EXPECT_TRUE(isElementTypeOf<float>(DType::F32));
  EXPECT_TRUE(isElementTypeOf<uint16_t>(DType::BF16));
  EXPECT_TRUE(isElementTypeOf<const uint8_t>(DType::I1));
  EXPECT_FALSE(isElementTypeOf<float>(DType::F64));
  EXPECT_FALSE(isElementTypeOf<int64_t>(DType::I32));
  TypedTensor t(DType::I1, {3});
  t.span<uint8_t>()[1] = 1;
  EXPECT_EQ(t.intAt(1), 1);
  EXPECT_EQ(t.doubleAt(1), 1.0);
  EXPECT_EQ(t.toHost().ints()[1], 1);
}

} // namespace
} // namespace omni
