//===- NpyTest.cpp - .npy reader and writer -------------------------------===//
//
// Round trips for every dtype, a byte-exact comparison with the header NumPy
// writes, and one test per rejection (each message names what was expected
// and what was found).
//
//===----------------------------------------------------------------------===//

#include "runtime/io/Npy.h"

#include "absl/strings/str_cat.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>

namespace omni {
namespace {

/// A .npy file with the given header dict and data bytes, version 1.0.
std::string npyBytes(std::string dict, std::string data, char major = 1) {
  dict += '\n';
  std::string out = "\x93NUMPY";
  out += major;
  out += '\0';
  size_t n = dict.size();
  out += static_cast<char>(n & 0xff);
  out += static_cast<char>(n >> 8);
  if (major == 2) {
    out += '\0';
    out += '\0';
  }
  return out + dict + data;
}

std::string floatBytes(std::initializer_list<float> values) {
  std::string out;
  for (float v : values)
    out.append(reinterpret_cast<const char *>(&v), 4);
  return out;
}

void expectError(const absl::StatusOr<HostTensor> &result,
                 absl::string_view fragment) {
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(result.status().message().find(fragment), absl::string_view::npos)
      << result.status().message();
  EXPECT_EQ(result.status().message().find('\n'), absl::string_view::npos);
}

TEST(NpyTest, RoundTripsEveryDType) {
  std::vector<HostTensor> tensors = {
      HostTensor::fromDoubles(DType::F32, {2, 3},
                              {1.5, -2, 0.1, 1e30, -0.0, INFINITY}),
      HostTensor::fromDoubles(DType::F64, {3}, {0.1, -1e300, NAN}),
      HostTensor::fromDoubles(DType::F16, {2, 2}, {1, -65504, 6e-8, 0.333}),
      HostTensor::fromInts(DType::I32, {2},
                           {std::numeric_limits<int32_t>::min(), 7}),
      HostTensor::fromInts(DType::I64, {}, {(int64_t{1} << 53) + 1}),
      HostTensor::fromInts(DType::I64, {2},
                           {std::numeric_limits<int64_t>::min(),
                            std::numeric_limits<int64_t>::max()}),
      HostTensor::fromInts(DType::I1, {1, 3}, {1, 0, 1}),
      HostTensor(DType::F32, {0, 5}),
  };
  for (const HostTensor &t : tensors) {
    std::string bytes = serializeNpy(t);
    absl::StatusOr<HostTensor> back = parseNpy(bytes);
    ASSERT_TRUE(back.ok()) << t.typeString() << ": " << back.status();
    EXPECT_EQ(*back, t) << t.typeString();
  }
}

TEST(NpyTest, BFloat16IsWrittenAsFloat32) {
  HostTensor t = HostTensor::fromDoubles(DType::BF16, {2}, {3.140625, -1});
  absl::StatusOr<HostTensor> back = parseNpy(serializeNpy(t));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->dtype(), DType::F32);
  EXPECT_EQ(back->floats()[0], 3.140625);
}

TEST(NpyTest, MatchesNumPyHeaderByteForByte) {
  // np.save(f, np.arange(6, dtype='<f4').reshape(2, 3)) writes this header:
  // 10 prefix bytes + 118 header bytes = 128, padded with spaces.
  std::string dict =
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  dict.append(118 - 1 - dict.size(), ' ');
  std::string expected = npyBytes(dict, floatBytes({0, 1, 2, 3, 4, 5}));
  HostTensor t =
      HostTensor::fromDoubles(DType::F32, {2, 3}, {0, 1, 2, 3, 4, 5});
  EXPECT_EQ(serializeNpy(t), expected);
  // One-element tuples keep NumPy's trailing comma.
  std::string oneD = serializeNpy(HostTensor(DType::I64, {4}));
  EXPECT_NE(oneD.find("'shape': (4,), }"), std::string::npos);
  std::string scalar = serializeNpy(HostTensor(DType::I64, {}));
  EXPECT_NE(scalar.find("'shape': (), }"), std::string::npos);
}

TEST(NpyTest, ReadsVersion2AndHeaderVariants) {
  absl::StatusOr<HostTensor> t = parseNpy(npyBytes(
      "{\"shape\": (2L,), \"fortran_order\": False, \"descr\": \"<f4\"}",
      floatBytes({1, 2}), /*major=*/2));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->shape(), (std::vector<int64_t>{2}));
  EXPECT_EQ(t->floats()[1], 2.0);
}

TEST(NpyTest, WritesVersion2ForHugeHeaders) {
  std::vector<int64_t> shape(30000, 1);
  std::string bytes = serializeNpy(HostTensor(DType::I1, shape));
  EXPECT_EQ(bytes[6], 2);
  absl::StatusOr<HostTensor> back = parseNpy(bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->rank(), 30000);
}

TEST(NpyTest, RejectsBoolBytesOtherThanZeroOrOne) {
  // NumPy would read byte 7 as true, a kernel's i1 load as false: the
  // element codec refuses to guess (ElementCodec.h).
  expectError(parseNpy(npyBytes(
                  "{'descr': '|b1', 'fortran_order': False, 'shape': (3,), }",
                  std::string("\x01\x07\x00", 3))),
              "invalid .npy data: element 1 of i1 is byte 7, expected 0 or 1");
  absl::StatusOr<HostTensor> t = parseNpy(
      npyBytes("{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }",
               std::string("\x00\x01", 2)));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->ints()[0], 0);
  EXPECT_EQ(t->ints()[1], 1);
}

TEST(NpyTest, RejectsBadMagic) {
  expectError(parseNpy("PK\x03\x04 not numpy"),
              "expected the magic string \"\\x93NUMPY\", found \"PK");
  expectError(parseNpy(""), "expected the magic string");
}

TEST(NpyTest, RejectsUnsupportedVersion) {
  std::string bytes =
      npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (), }",
               floatBytes({1}));
  bytes[6] = 3;
  expectError(parseNpy(bytes),
              "unsupported .npy format version 3.0: expected 1.0 or 2.0");
}

TEST(NpyTest, RejectsTruncatedHeader) {
  expectError(parseNpy(std::string("\x93NUMPY\x01", 7)), "truncated .npy file");
  expectError(parseNpy(std::string("\x93NUMPY\x01\x00\x05", 9)),
              "truncated .npy file");
  std::string bytes =
      npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (), }", "");
  expectError(parseNpy(bytes.substr(0, 30)), "truncated .npy header: expected");
}

TEST(NpyTest, RejectsMalformedHeaders) {
  expectError(parseNpy(npyBytes("['descr']", "")), "expected '{'");
  expectError(parseNpy(npyBytes("{'descr': '<f4', 'shape': (), }", "")),
              "missing key 'fortran_order'");
  expectError(parseNpy(npyBytes(
                  "{'descr': '<f4', 'fortran_order': 0, 'shape': (), }", "")),
              "expected True or False");
  expectError(parseNpy(npyBytes("{'descr': '<f4', 'fortran_order': False, "
                                "'shape': (2, -1), }",
                                "")),
              "expected a non-negative integer dimension");
  expectError(parseNpy(npyBytes("{'descr': '<f4', 'fortran_order': False, "
                                "'shape': (), 'extra': 1}",
                                "")),
              "unexpected key 'extra'");
}

TEST(NpyTest, RejectsBigEndian) {
  expectError(parseNpy(npyBytes(
                  "{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }",
                  floatBytes({1}))),
              "big-endian dtype '>f4' is not supported: expected "
              "little-endian ('<f4')");
}

TEST(NpyTest, RejectsUnsupportedDType) {
  expectError(
      parseNpy(npyBytes(
          "{'descr': '<u2', 'fortran_order': False, 'shape': (1,), }", "ab")),
      "unsupported dtype '<u2': expected one of '<f4'");
}

TEST(NpyTest, RejectsFortranOrder) {
  expectError(parseNpy(npyBytes(
                  "{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }",
                  floatBytes({1}))),
              "fortran_order True is not supported: expected False");
}

TEST(NpyTest, RejectsTruncatedAndTrailingData) {
  std::string dict =
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  expectError(parseNpy(npyBytes(dict, floatBytes({1, 2, 3, 4, 5}))),
              "truncated .npy data: expected 24 bytes of '<f4' for shape "
              "(2, 3), found 20");
  expectError(parseNpy(npyBytes(dict, floatBytes({1, 2, 3, 4, 5, 6, 7}))),
              "trailing bytes after .npy data: expected 24 bytes");
}

TEST(NpyTest, FilesRoundTripAndNameThePath) {
  std::string path = ::testing::TempDir() + "/omni_npy_test." +
                     std::to_string(::getpid()) + ".npy";
  HostTensor t = HostTensor::fromInts(DType::I32, {3}, {1, 2, 3});
  ASSERT_TRUE(writeNpyFile(path, t).ok());
  absl::StatusOr<HostTensor> back = readNpyFile(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, t);

  {
    std::ofstream bad(path, std::ios::binary);
    bad << "garbage";
  }
  absl::StatusOr<HostTensor> badResult = readNpyFile(path);
  ASSERT_FALSE(badResult.ok());
  EXPECT_EQ(badResult.status().message().rfind(path + ": not a .npy file", 0),
            0u)
      << badResult.status().message();
  std::remove(path.c_str());

  absl::StatusOr<HostTensor> missing = readNpyFile(path + ".missing");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("cannot open"),
            absl::string_view::npos);
}

} // namespace
} // namespace omni
