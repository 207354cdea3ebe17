//===- TensorTextTest.cpp - inline tensor literals and printing -----------===//

#include "runtime/io/TensorText.h"

#include "runtime/io/Npy.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>

namespace omni {
namespace {

HostTensor parseOk(absl::string_view text) {
  absl::StatusOr<HostTensor> t = parseInlineTensor(text);
  EXPECT_TRUE(t.ok()) << text << ": " << t.status();
  return t.ok() ? *t : HostTensor();
}

void expectError(absl::string_view text, absl::string_view fragment) {
  absl::StatusOr<HostTensor> t = parseInlineTensor(text);
  ASSERT_FALSE(t.ok()) << text;
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(t.status().message().find(fragment), absl::string_view::npos)
      << t.status().message();
  EXPECT_EQ(t.status().message().find('\n'), absl::string_view::npos);
}

TEST(InlineTensorTest, ParsesShapedLiterals) {
  HostTensor t = parseOk("2x3xf32=1,2,3,4,5,6");
  EXPECT_EQ(t.typeString(), "tensor<2x3xf32>");
  EXPECT_EQ(t.floats()[5], 6.0);
  EXPECT_EQ(parseOk("2x2xf64=[[1, 2], [3, 4]]").floats()[3], 4.0);
  EXPECT_EQ(parseOk("3xi32=1 -2 +3").ints()[1], -2);
  EXPECT_EQ(parseOk("0x4xf32=").numElements(), 0);
}

TEST(InlineTensorTest, ParsesScalars) {
  HostTensor f = parseOk("f32=1.5");
  EXPECT_EQ(f.rank(), 0);
  EXPECT_EQ(f.floats()[0], 1.5);
  EXPECT_EQ(parseOk("i64=7").ints()[0], 7);
  EXPECT_EQ(parseOk("i1=true").ints()[0], 1);
  EXPECT_EQ(parseOk("2xi1=0,1").ints()[1], 1);
}

TEST(InlineTensorTest, KeepsIntegersExactAndRoundsFloats) {
  EXPECT_EQ(parseOk("i64=9007199254740993").ints()[0], (int64_t{1} << 53) + 1);
  EXPECT_EQ(parseOk("i64=-9223372036854775808").ints()[0],
            std::numeric_limits<int64_t>::min());
  EXPECT_EQ(parseOk("f32=0.1").floats()[0], static_cast<double>(0.1f));
  EXPECT_EQ(parseOk("f64=0.1").floats()[0], 0.1);
  EXPECT_EQ(parseOk("bf16=3.14159265").floats()[0], 3.140625);
  HostTensor special = parseOk("3xf32=inf,-inf,nan");
  EXPECT_TRUE(std::isinf(special.floats()[0]));
  EXPECT_LT(special.floats()[1], 0);
  EXPECT_TRUE(std::isnan(special.floats()[2]));
}

TEST(InlineTensorTest, RejectsMalformedLiterals) {
  expectError("2x3xf32", "found no '='");
  expectError("2x3xf8=1", "expected an element type");
  expectError("2x3=1", "expected an element type (f32, f64, f16, bf16, i1, "
                       "i32 or i64), found '3'");
  expectError("2xax3xf32=1", "expected a non-negative dimension, found 'a'");
  expectError("-2xf32=1", "expected a non-negative dimension, found '-2'");
  expectError("2x3xf32=1,2,3", "expected 6 values for shape 2x3, found 3");
  expectError("f32=1,2", "expected 1 value for a scalar, found 2");
  expectError("2xf32=1,abc", "value #1 'abc' is not a number");
  expectError("i32=1.5", "value #0 '1.5' is not an integer");
  expectError("i32=2147483648", "out of range for i32");
  expectError("i64=9223372036854775808", "is not an integer in the range");
  expectError("i1=2", "out of range for i1 (expected 0, 1, true or false)");
}

TEST(InlineTensorTest, ArgumentsReadNpyFiles) {
  std::string path = ::testing::TempDir() + "/omni_text_test." +
                     std::to_string(::getpid()) + ".npy";
  HostTensor t = HostTensor::fromInts(DType::I64, {2}, {3, 4});
  ASSERT_TRUE(writeNpyFile(path, t).ok());
  absl::StatusOr<HostTensor> back = parseTensorArgument("@" + path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, t);
  std::remove(path.c_str());
  EXPECT_FALSE(parseTensorArgument("@" + path).ok());
  EXPECT_TRUE(parseTensorArgument("i64=1").ok());
}

TEST(FormatTensorTest, NestsByDimension) {
  EXPECT_EQ(formatTensor(parseOk("2x3xf32=1,2,3,4,5,6"), 9),
            "tensor<2x3xf32>=[[1 2 3][4 5 6]]");
  EXPECT_EQ(formatTensor(parseOk("f32=-1.3735254"), 9),
            "tensor<f32>=-1.37352538");
  EXPECT_EQ(formatTensor(parseOk("f64=0.1"), 17),
            "tensor<f64>=0.10000000000000001");
  EXPECT_EQ(formatTensor(parseOk("2xi64=9007199254740993,-1"), 9),
            "tensor<2xi64>=[9007199254740993 -1]");
  EXPECT_EQ(formatTensor(parseOk("1x2x1xi1=1,0"), 9),
            "tensor<1x2x1xi1>=[[[1][0]]]");
  EXPECT_EQ(formatTensor(parseOk("0x2xf32="), 9), "tensor<0x2xf32>=[]");
  EXPECT_EQ(formatValues(parseOk("2xf32=nan,-inf"), 9), "[nan -inf]");
}

} // namespace
} // namespace omni
