//===- CheckpointTest.cpp - Tests of OmniCheckpoint -------------*- C++ -*-===//
//
// Round trips for every dtype (bit-exact, NaN payloads included), the header
// layout byte for byte against a hand-computed file, one negative test per
// validation rule, a mutation fuzz loop, and the checkpoint folder.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/checkpoint/Checkpoint.h"
#include "runtime/train/checkpoint/AtomicFile.h"
#include "runtime/train/checkpoint/Safetensors.h"

#include "absl/strings/str_cat.h"

#include "gtest/gtest.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <unistd.h>

namespace omni::checkpoint {
namespace {

/// Succeeds when `text` contains `part`; the failure shows both.
::testing::AssertionResult hasSubstr(const std::string &text,
                                     const std::string &part) {
  if (text.find(part) != std::string::npos)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "'" << text << "' does not contain '" << part << "'";
}

/// A fresh empty folder under the test temp dir.
std::string freshDir(absl::string_view name) {
  std::string dir =
      absl::StrCat(::testing::TempDir(), "/omni_ckpt_", name, "_", ::getpid());
  std::string cmd = absl::StrCat("rm -rf '", dir, "' && mkdir -p '", dir, "'");
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  return dir;
}

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void writeFile(const std::string &path, absl::string_view bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// A file with `header` (unpadded) and `data`.
std::string makeFile(absl::string_view header, absl::string_view data = "") {
  std::string out(8, '\0');
  uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  return absl::StrCat(out, header, data);
}

float floatFromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
uint32_t bitsOfFloat(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}
double doubleFromBits(uint64_t bits) {
  double d;
  std::memcpy(&d, &bits, 8);
  return d;
}
uint64_t bitsOfDouble(double d) {
  uint64_t b;
  std::memcpy(&b, &d, 8);
  return b;
}

/// Serializes, parses and returns the single tensor back.
HostTensor roundTrip(const HostTensor &t) {
  absl::StatusOr<std::string> bytes = serializeSafetensors({{"t", t}});
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<SafetensorsContents> c = parseSafetensors(*bytes, "rt");
  EXPECT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->tensors.size(), 1u);
  return c->tensors.at(0).tensor;
}

//===----------------------------------------------------------------------===//
// Round trips
//===----------------------------------------------------------------------===//

TEST(SafetensorsRoundTrip, F32BitExactIncludingNaNPayloadsInfAndNegativeZero) {
  std::vector<uint32_t> bits = {0x3f800000, 0x80000000, 0x00000000, 0x7f800000,
                                0xff800000, 0x7fc00000, 0x7fc12345, 0xffc00001,
                                0x00000001, 0x7f7fffff, 0x3eaaaaab, 0xc2f6e979};
  std::vector<double> values;
  for (uint32_t b : bits)
    values.push_back(static_cast<double>(floatFromBits(b)));
  HostTensor t = HostTensor::fromDoubles(DType::F32, {3, 4}, values);
  HostTensor back = roundTrip(t);
  ASSERT_EQ(back.dtype(), DType::F32);
  ASSERT_EQ(back.shape(), (std::vector<int64_t>{3, 4}));
  for (size_t i = 0; i < bits.size(); ++i)
    EXPECT_EQ(bitsOfFloat(static_cast<float>(back.floats()[i])), bits[i])
        << "element " << i;
}

TEST(SafetensorsRoundTrip, F64BitExactIncludingNaNPayloadsInfAndNegativeZero) {
  std::vector<uint64_t> bits = {0x3ff0000000000000, 0x8000000000000000,
                                0x7ff0000000000000, 0xfff0000000000000,
                                0x7ff8000000000000, 0x7ff8000000abcdef,
                                0xfff0000000000001, 0x0000000000000001,
                                0x7fefffffffffffff, 0x3fd5555555555555};
  std::vector<double> values;
  for (uint64_t b : bits)
    values.push_back(doubleFromBits(b));
  HostTensor back =
      roundTrip(HostTensor::fromDoubles(DType::F64, {10}, values));
  ASSERT_EQ(back.dtype(), DType::F64);
  for (size_t i = 0; i < bits.size(); ++i)
    EXPECT_EQ(bitsOfDouble(back.floats()[i]), bits[i]) << "element " << i;
}

/// F16 and BF16: every value the io helpers produce comes back bit-exact
/// (NaN as NaN: half NaN payloads are not representable in HostTensor).
void checkHalfRoundTrip(DType dtype) {
  double inf = std::numeric_limits<double>::infinity();
  std::vector<double> values = {1.0,  -0.0,   0.0,         inf,  -inf,
                                0.1,  -3.75,  65504.0,     1e-7, 6e-8,
                                1e30, -1e-40, std::nan("")};
  HostTensor t = HostTensor::fromDoubles(dtype, {13}, values);
  HostTensor back = roundTrip(t);
  ASSERT_EQ(back.dtype(), dtype);
  for (int64_t i = 0; i < t.numElements(); ++i) {
    double want = t.floats()[i], got = back.floats()[i];
    if (std::isnan(want))
      EXPECT_TRUE(std::isnan(got)) << "element " << i;
    else
      EXPECT_EQ(bitsOfDouble(got), bitsOfDouble(want)) << "element " << i;
  }
}

TEST(SafetensorsRoundTrip, F16BitExact) { checkHalfRoundTrip(DType::F16); }
TEST(SafetensorsRoundTrip, BF16BitExact) { checkHalfRoundTrip(DType::BF16); }

TEST(SafetensorsRoundTrip, BF16AllBitPatterns) {
  // Every finite bfloat16 value survives the trip; bytes are the top half
  // of the float32 bits.
  std::vector<double> values;
  for (uint32_t b = 0; b < 0x10000; ++b) {
    float f = floatFromBits(b << 16);
    if (!std::isnan(f))
      values.push_back(f);
  }
  int64_t n = static_cast<int64_t>(values.size());
  HostTensor t = HostTensor::fromDoubles(DType::BF16, {n}, values);
  absl::StatusOr<std::string> bytes = serializeSafetensors({{"t", t}});
  ASSERT_TRUE(bytes.ok());
  absl::string_view data =
      absl::string_view(*bytes).substr(bytes->size() - 2 * values.size());
  for (int64_t i = 0; i < n; ++i) {
    uint16_t got;
    std::memcpy(&got, data.data() + 2 * i, 2);
    ASSERT_EQ(got, bitsOfFloat(static_cast<float>(values[i])) >> 16) << i;
  }
  HostTensor back = roundTrip(t);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(bitsOfDouble(back.floats()[i]), bitsOfDouble(values[i])) << i;
}

TEST(SafetensorsRoundTrip, Integers) {
  int64_t i64min = std::numeric_limits<int64_t>::min();
  int64_t i64max = std::numeric_limits<int64_t>::max();
  HostTensor i64 =
      HostTensor::fromInts(DType::I64, {4}, {i64min, -1, 0, i64max});
  EXPECT_EQ(roundTrip(i64), i64);
  HostTensor i32 =
      HostTensor::fromInts(DType::I32, {2, 2},
                           {std::numeric_limits<int32_t>::min(), -1, 7,
                            std::numeric_limits<int32_t>::max()});
  EXPECT_EQ(roundTrip(i32), i32);
  HostTensor i1 = HostTensor::fromInts(DType::I1, {5}, {0, 1, 1, 0, 1});
  EXPECT_EQ(roundTrip(i1), i1);
}

TEST(SafetensorsRoundTrip, ScalarsAndEmptyTensors) {
  std::vector<NamedTensor> tensors = {
      {"scalar", HostTensor::scalarDouble(DType::F32, 2.5)},
      {"empty", HostTensor(DType::F64, {0, 3})},
      {"empty2", HostTensor(DType::I32, {4, 0})},
      {"seed", HostTensor::scalarInt(DType::I64, 1234567890123)},
  };
  absl::StatusOr<std::string> bytes = serializeSafetensors(tensors);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<SafetensorsContents> c = parseSafetensors(*bytes, "x");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->tensors.size(), 4u);
  // Returned sorted by name.
  EXPECT_EQ(c->tensors[0].name, "empty");
  EXPECT_EQ(c->tensors[0].tensor, tensors[1].tensor);
  EXPECT_EQ(c->tensors[1].name, "empty2");
  EXPECT_EQ(c->tensors[1].tensor, tensors[2].tensor);
  EXPECT_EQ(c->tensors[2].name, "scalar");
  EXPECT_EQ(c->tensors[2].tensor, tensors[0].tensor);
  EXPECT_EQ(c->tensors[3].name, "seed");
  EXPECT_EQ(c->tensors[3].tensor, tensors[3].tensor);
}

TEST(SafetensorsRoundTrip, MetadataAndNamesWithEscapes) {
  std::map<std::string, std::string> metadata = {
      {"format", "pt"},
      {"quote\"back\\slash", "line\nbreak\ttab\x01 ctrl"},
      {"unicode", "caf\xc3\xa9 \xf0\x9f\x98\x80"},
      {"empty", ""},
  };
  std::vector<NamedTensor> tensors = {
      {"unet.down_blocks.0/\"w\"", HostTensor::scalarDouble(DType::F32, 1)}};
  std::string dir = freshDir("meta");
  std::string path = dir + "/m.safetensors";
  ASSERT_TRUE(writeSafetensors(path, tensors, metadata).ok());
  absl::StatusOr<SafetensorsContents> c = readSafetensorsWithMetadata(path);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->metadata, metadata);
  ASSERT_EQ(c->tensors.size(), 1u);
  EXPECT_EQ(c->tensors[0].name, tensors[0].name);
  absl::StatusOr<std::vector<NamedTensor>> only = readSafetensors(path);
  ASSERT_TRUE(only.ok());
  EXPECT_EQ(only->size(), 1u);
}

TEST(SafetensorsRoundTrip, ReadsEscapesWrittenByOtherWriters) {
  // \u escapes (including a surrogate pair), \/ and JSON whitespace, as a
  // pretty-printing writer might produce.
  std::string header =
      "{ \"__metadata__\" : { \"k\\/\\u0041\" : \"\\ud83d\\ude00\\u00e9\" },\n"
      "  \"w\" : { \"shape\" : [ ], \"data_offsets\" : [ 0 , 4 ], "
      "\"dtype\" : \"I32\" } }  ";
  std::string data("\x07\x00\x00\x00", 4);
  absl::StatusOr<SafetensorsContents> c =
      parseSafetensors(makeFile(header, data), "x");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->metadata.at("k/A"), "\xf0\x9f\x98\x80\xc3\xa9");
  EXPECT_EQ(c->tensors.at(0).tensor.ints()[0], 7);
}

//===----------------------------------------------------------------------===//
// The exact file layout
//===----------------------------------------------------------------------===//

TEST(SafetensorsFormat, HeaderByteForByte) {
  // Computed by hand: the compact header below is 85 bytes, padded with 3
  // spaces to 88 = 0x58; then 1.0f (0x3f800000) and -2.0f (0xc0000000)
  // little-endian. This is what Python's safetensors.torch.save_file writes
  // for {"a": torch.tensor([1.0, -2.0])} with metadata {"format": "pt"}.
  std::string expected("\x58\0\0\0\0\0\0\0", 8);
  expected += "{\"__metadata__\":{\"format\":\"pt\"},\"a\":{\"dtype\":\"F32\","
              "\"shape\":[2],\"data_offsets\":[0,8]}}   ";
  expected += std::string("\x00\x00\x80\x3f\x00\x00\x00\xc0", 8);
  absl::StatusOr<std::string> bytes = serializeSafetensors(
      {{"a", HostTensor::fromDoubles(DType::F32, {2}, {1.0, -2.0})}},
      {{"format", "pt"}});
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes, expected);
}

TEST(SafetensorsFormat, SortedByNameAndPaddedWithoutMetadata) {
  std::vector<NamedTensor> tensors = {
      {"b", HostTensor::fromInts(DType::I1, {3}, {1, 0, 1})},
      {"a", HostTensor::fromDoubles(DType::BF16, {1}, {1.0})},
      {"c", HostTensor::fromDoubles(DType::F16, {1}, {-2.0})},
  };
  // bf16 1.0 = 0x3f80, bool 01 00 01, f16 -2.0 = 0xc000.
  std::string header =
      "{\"a\":{\"dtype\":\"BF16\",\"shape\":[1],\"data_offsets\":[0,2]},"
      "\"b\":{\"dtype\":\"BOOL\",\"shape\":[3],\"data_offsets\":[2,5]},"
      "\"c\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[5,7]}}";
  ASSERT_EQ(header.size(), 162u);
  header += "      "; // to 168
  std::string expected =
      makeFile(header, std::string("\x80\x3f\x01\x00\x01\x00\xc0", 7));
  absl::StatusOr<std::string> bytes = serializeSafetensors(tensors);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes, expected);
}

TEST(SafetensorsFormat, ReadsFilesInAnotherTensorOrder) {
  // The reference writer orders by dtype alignment, not name; offsets need
  // not follow key order.
  std::string header =
      "{\"z\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]},"
      "\"a\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[8,12]}}";
  std::string data("\x05\0\0\0\0\0\0\0\x00\x3c\x00\xbc", 12);
  absl::StatusOr<SafetensorsContents> c =
      parseSafetensors(makeFile(header, data), "x");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->tensors.size(), 2u);
  EXPECT_EQ(c->tensors[0].name, "a");
  EXPECT_EQ(c->tensors[0].tensor,
            HostTensor::fromDoubles(DType::F16, {2}, {1.0, -1.0}));
  EXPECT_EQ(c->tensors[1].tensor, HostTensor::fromInts(DType::I64, {1}, {5}));
  EXPECT_TRUE(c->metadata.empty());
}

//===----------------------------------------------------------------------===//
// Validation: one test per rule
//===----------------------------------------------------------------------===//

/// parseSafetensors(bytes, "model.safetensors") must fail with InvalidArgument
/// and a one-line lowercase message containing `part`.
void expectError(absl::string_view bytes, absl::string_view part) {
  absl::StatusOr<SafetensorsContents> c =
      parseSafetensors(bytes, "model.safetensors");
  ASSERT_FALSE(c.ok()) << "expected an error containing: " << part;
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  std::string message(c.status().message());
  EXPECT_TRUE(hasSubstr(message, std::string(part)));
  EXPECT_EQ(message.rfind("model.safetensors: ", 0), 0u) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_NE(message.back(), '.') << message;
}

/// A header with one tensor entry `w` whose fields are `fields`.
std::string oneTensor(absl::string_view fields, absl::string_view data) {
  return makeFile(absl::StrCat("{\"w\":{", fields, "}}"), data);
}

std::string validFile() {
  absl::StatusOr<std::string> bytes = serializeSafetensors(
      {{"w1", HostTensor::fromDoubles(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6})},
       {"w2", HostTensor::fromInts(DType::I64, {2}, {-1, 9})},
       {"w3", HostTensor::fromDoubles(DType::BF16, {3}, {0.5, -1, 2})}},
      {{"format", "pt"}});
  EXPECT_TRUE(bytes.ok());
  return *bytes;
}

TEST(SafetensorsInvalid, TruncatedAtSeveralLengths) {
  std::string good = validFile();
  ASSERT_TRUE(parseSafetensors(good, "x").ok());
  expectError("", "file is 0 bytes, expected at least 8");
  expectError(good.substr(0, 7), "file is 7 bytes, expected at least 8");
  expectError(good.substr(0, 8), "runs past the end of the file");
  expectError(good.substr(0, 50), "runs past the end of the file");
  uint64_t n;
  std::memcpy(&n, good.data(), 8);
  // Header complete, data short: the last tensor runs past the buffer.
  expectError(good.substr(0, 8 + n), "run past the end of the 0-byte");
  expectError(good.substr(0, good.size() - 1),
              "tensor 'w3': data_offsets [40, 46] run past the end of the "
              "45-byte data buffer");
}

TEST(SafetensorsInvalid, HeaderLengthPastEof) {
  std::string f = makeFile("{}");
  f[0] = 100;
  expectError(f, "header length 100 runs past the end of the file, expected "
                 "at most 2");
}

TEST(SafetensorsInvalid, HeaderLengthOverLimit) {
  std::string f = makeFile("{}");
  uint64_t n = kMaxSafetensorsHeaderBytes + 1;
  std::memcpy(f.data(), &n, 8);
  expectError(f, "exceeds the limit of 100000000 bytes");
}

TEST(SafetensorsInvalid, HeaderMustStartWithBrace) {
  expectError(makeFile(""), "header starts with nothing, expected '{'");
  expectError(makeFile(" {}"), "header starts with ' ', expected '{'");
}

TEST(SafetensorsInvalid, BadJson) {
  expectError(makeFile("{"), "invalid JSON at header byte 1: expected a string "
                             "key, found the end of the header");
  expectError(makeFile("{\"a\" 1}"), "expected ':'");
  expectError(makeFile("{\"a\":1 \"b\":2}"), "expected ',' or '}'");
  expectError(makeFile("{\"a\":[1 2]}"), "expected ',' or ']'");
  expectError(makeFile("{\"a\":true}"),
              "expected an object, array, string or integer, found 't'");
  expectError(makeFile("{\"a\":1.5}"), "without fraction or exponent");
  expectError(makeFile("{\"a\":1e3}"), "without fraction or exponent");
  expectError(makeFile("{\"a\":01}"), "expected no leading zeros");
  expectError(makeFile("{\"a\":-}"), "expected a digit");
  expectError(makeFile("{\"a\":99999999999999999999}"),
              "expected an integer below 2^64");
  expectError(makeFile("{\"a\":\"x}"), "expected '\"' to close the string");
  expectError(makeFile("{\"a\":\"\\q\"}"), "expected one of");
  expectError(makeFile("{\"a\":\"\\u12g4\"}"), "expected 4 hex digits");
  expectError(makeFile("{\"a\":\"\\udc00\"}"), "expected a high surrogate");
  expectError(makeFile("{\"a\":\"\\ud800x\"}"), "expected a \\u low surrogate");
  expectError(makeFile("{\"a\":\"\\ud800\\u0041\"}"),
              "expected a low surrogate");
  expectError(makeFile("{\"a\":\"\x01\"}"), "expected no control characters");
  expectError(makeFile("{\"a\":\"\xc3\x28\"}"), "expected valid UTF-8");
  expectError(makeFile("{\"a\":\"\xed\xa0\x80\"}"), "expected valid UTF-8");
  expectError(makeFile("{} x"), "expected the end of the header, found 'x'");
  expectError(makeFile("{}}"), "expected the end of the header");
  std::string deep =
      "{\"a\":" + std::string(100, '[') + std::string(100, ']') + "}";
  expectError(makeFile(deep), "levels of nesting");
}

TEST(SafetensorsInvalid, WrongJsonKinds) {
  expectError(makeFile("{\"__metadata__\":[]}"),
              "'__metadata__' is an array, expected an object of strings");
  expectError(makeFile("{\"__metadata__\":{\"k\":1}}"),
              "'__metadata__' key 'k' is an integer, expected a string");
  expectError(makeFile("{\"w\":\"x\"}"),
              "tensor 'w': entry is a string, expected an object");
  expectError(
      oneTensor("\"dtype\":1,\"shape\":[],\"data_offsets\":[0,4]", "abcd"),
      "tensor 'w': dtype is an integer, expected a string");
  expectError(oneTensor("\"dtype\":\"F32\",\"shape\":{},\"data_offsets\":[0,4]",
                        "abcd"),
              "tensor 'w': shape is an object, expected an array");
  expectError(oneTensor("\"dtype\":\"F32\",\"shape\":[\"1\"],"
                        "\"data_offsets\":[0,4]",
                        "abcd"),
              "tensor 'w': shape[0] is a string, expected a non-negative "
              "integer");
  expectError(
      oneTensor("\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":3", "abcd"),
      "tensor 'w': data_offsets is an integer, expected an array");
}

TEST(SafetensorsInvalid, MissingUnknownAndRepeatedFields) {
  expectError(oneTensor("\"dtype\":\"F32\",\"shape\":[]", "abcd"),
              "tensor 'w': missing field 'data_offsets'");
  expectError(oneTensor("\"shape\":[],\"data_offsets\":[0,4]", "abcd"),
              "tensor 'w': missing field 'dtype'");
  expectError(oneTensor("\"dtype\":\"F32\",\"data_offsets\":[0,4]", "abcd"),
              "tensor 'w': missing field 'shape'");
  expectError(oneTensor("\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4],"
                        "\"extra\":1",
                        "abcd"),
              "tensor 'w': unknown field 'extra', expected 'dtype', 'shape' "
              "or 'data_offsets'");
  expectError(oneTensor("\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[],"
                        "\"data_offsets\":[0,4]",
                        "abcd"),
              "tensor 'w': field 'dtype' appears twice, expected once");
}

TEST(SafetensorsInvalid, UnknownDType) {
  expectError(oneTensor("\"dtype\":\"F8_E4M3\",\"shape\":[4],"
                        "\"data_offsets\":[0,4]",
                        "abcd"),
              "tensor 'w': dtype 'F8_E4M3' is not supported, expected one of "
              "F32, F64, F16, BF16, BOOL, I32, I64");
}

TEST(SafetensorsInvalid, NegativeDim) {
  expectError(oneTensor("\"dtype\":\"F32\",\"shape\":[1,-3],"
                        "\"data_offsets\":[0,4]",
                        "abcd"),
              "tensor 'w': shape[1] is -3, expected a non-negative integer");
  expectError(oneTensor("\"dtype\":\"F32\",\"shape\":[9223372036854775808],"
                        "\"data_offsets\":[0,4]",
                        "abcd"),
              "shape[0] is 9223372036854775808, expected at most "
              "9223372036854775807");
}

TEST(SafetensorsInvalid, NegativeOrMalformedOffsets) {
  expectError(oneTensor("\"dtype\":\"F32\",\"shape\":[],"
                        "\"data_offsets\":[-1,3]",
                        "abcd"),
              "tensor 'w': data_offsets[0] is -1, expected a non-negative "
              "integer");
  expectError(oneTensor("\"dtype\":\"F32\",\"shape\":[],"
                        "\"data_offsets\":[0,4,8]",
                        "abcd"),
              "tensor 'w': data_offsets has 3 entries, expected 2");
  expectError(oneTensor("\"dtype\":\"F32\",\"shape\":[],"
                        "\"data_offsets\":[0]",
                        "abcd"),
              "tensor 'w': data_offsets has 1 entries, expected 2");
}

TEST(SafetensorsInvalid, SizeMismatch) {
  // The example from the brief.
  expectError(oneTensor("\"dtype\":\"F32\",\"shape\":[5,6],"
                        "\"data_offsets\":[0,100]",
                        std::string(100, 'x')),
              "model.safetensors: tensor 'w': data_offsets [0, 100] span 100 "
              "bytes but shape [5, 6] of F32 needs 120");
}

TEST(SafetensorsInvalid, ElementCountOverflow) {
  expectError(oneTensor("\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,"
                        "0],\"data_offsets\":[0,0]",
                        ""),
              "tensor 'w': shape [4294967296, 4294967296, 0] has more than "
              "2^63-1 elements");
  expectError(oneTensor("\"dtype\":\"I64\",\"shape\":[4611686018427387904],"
                        "\"data_offsets\":[0,0]",
                        ""),
              "tensor 'w': shape [4611686018427387904] of I64 needs more "
              "than 2^64 bytes");
  // count * size wraps to exactly the span when computed modulo 2^64.
  expectError(oneTensor("\"dtype\":\"I32\",\"shape\":[4611686018427387905],"
                        "\"data_offsets\":[0,4]",
                        "abcd"),
              "needs more than 2^64 bytes");
}

TEST(SafetensorsInvalid, UnorderedOffsets) {
  expectError(oneTensor("\"dtype\":\"F32\",\"shape\":[],"
                        "\"data_offsets\":[4,0]",
                        "abcd"),
              "tensor 'w': data_offsets [4, 0] end before they begin, "
              "expected begin <= end");
}

TEST(SafetensorsInvalid, OffsetsPastBuffer) {
  expectError(oneTensor("\"dtype\":\"F32\",\"shape\":[2],"
                        "\"data_offsets\":[0,8]",
                        "abcd"),
              "tensor 'w': data_offsets [0, 8] run past the end of the 4-byte "
              "data buffer");
}

TEST(SafetensorsInvalid, OverlappingOffsets) {
  std::string header =
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
      "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}";
  expectError(makeFile(header, std::string(12, 'x')),
              "tensor 'b': data_offsets [4, 12] overlap tensor 'a' at [0, 8], "
              "expected disjoint ranges");
  // Identical ranges are an overlap too.
  header = "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
           "\"b\":{\"dtype\":\"I32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
  expectError(makeFile(header, "abcd"), "overlap tensor 'a' at [0, 4]");
}

TEST(SafetensorsInvalid, GapsBetweenOrBeforeTensors) {
  std::string header =
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
      "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}";
  expectError(makeFile(header, std::string(12, 'x')),
              "tensor 'b': data_offsets [8, 12] leave a gap after tensor 'a', "
              "expected it to begin at 4");
  expectError(oneTensor("\"dtype\":\"F32\",\"shape\":[],"
                        "\"data_offsets\":[4,8]",
                        "abcdefgh"),
              "tensor 'w': data_offsets [4, 8] leave a gap at the start of the "
              "buffer, expected the first tensor to begin at 0");
}

TEST(SafetensorsInvalid, TrailingGarbage) {
  std::string f = validFile() + "junk";
  expectError(f, "data buffer is 50 bytes but the tensors cover 46, expected "
                 "no trailing bytes");
  expectError(makeFile("{}", "x"), "data buffer is 1 bytes but the tensors "
                                   "cover 0");
}

TEST(SafetensorsInvalid, DuplicateNames) {
  std::string header =
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
      "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}";
  expectError(makeFile(header, std::string(8, 'x')),
              "tensor 'a' appears twice in the header, expected unique names");
  expectError(makeFile("{\"__metadata__\":{},\"__metadata__\":{}}"),
              "'__metadata__' appears twice in the header");
  expectError(makeFile("{\"__metadata__\":{\"k\":\"a\",\"k\":\"b\"}}"),
              "'__metadata__' key 'k' appears twice, expected unique keys");
}

TEST(SafetensorsFormat, TrailingWhitespaceAfterHeaderAccepted) {
  // The spec allows padding the header with spaces; JSON whitespace too.
  EXPECT_TRUE(parseSafetensors(makeFile("{}  \n"), "x").ok());
}

TEST(SafetensorsInvalid, BoolBytesOtherThanZeroOrOne) {
  expectError(oneTensor("\"dtype\":\"BOOL\",\"shape\":[2],"
                        "\"data_offsets\":[0,2]",
                        std::string("\x01\x02", 2)),
              "tensor 'w': element 1 of i1 is byte 2, expected 0 or 1");
}

TEST(SafetensorsInvalid, WriterRejectsDuplicatesAndReservedNames) {
  HostTensor t = HostTensor::scalarDouble(DType::F32, 1);
  absl::StatusOr<std::string> dup = serializeSafetensors({{"a", t}, {"a", t}});
  ASSERT_FALSE(dup.ok());
  EXPECT_TRUE(hasSubstr(std::string(dup.status().message()),
                        "tensor 'a' appears twice"));
  EXPECT_FALSE(serializeSafetensors({{"__metadata__", t}}).ok());
  EXPECT_FALSE(serializeSafetensors({{"bad\xff", t}}).ok());
  std::string dir = freshDir("writer");
  absl::Status s =
      writeSafetensors(dir + "/x.safetensors", {{"a", t}, {"a", t}});
  EXPECT_TRUE(hasSubstr(std::string(s.message()), "/x.safetensors: tensor"));
}

TEST(SafetensorsInvalid, MissingFile) {
  absl::StatusOr<std::vector<NamedTensor>> r =
      readSafetensors(freshDir("missing") + "/nope.safetensors");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(hasSubstr(std::string(r.status().message()), "nope.safetensors"));
}

TEST(SafetensorsFuzz, MutationsLoadOrFailCleanly) {
  std::string good = validFile();
  std::mt19937_64 rng(12345);
  int loaded = 0, rejected = 0;
  for (int iter = 0; iter < 5000; ++iter) {
    std::string f = good;
    int kind = static_cast<int>(rng() % 4);
    int flips = 1 + static_cast<int>(rng() % 3);
    if (kind == 0) {
      f.resize(rng() % f.size());
    } else {
      for (int k = 0; k < flips; ++k) {
        size_t at = rng() % f.size();
        if (kind == 1)
          f[at] = static_cast<char>(f[at] ^ (1u << (rng() % 8)));
        else if (kind == 2)
          f[at] = static_cast<char>(rng());
        else // target the length field and the header, where parsing lives
          f[rng() % std::min<size_t>(f.size(), 120)] =
              "{}[]\",:0123456789-\\ ue"[rng() % 22];
      }
    }
    absl::StatusOr<SafetensorsContents> c = parseSafetensors(f, "fuzz");
    if (c.ok()) {
      ++loaded;
    } else {
      ++rejected;
      ASSERT_FALSE(c.status().message().empty());
      ASSERT_EQ(c.status().message().find('\n'), absl::string_view::npos)
          << c.status().message();
    }
  }
  EXPECT_GT(rejected, 0);
  EXPECT_GT(loaded, 0); // flips in the data buffer still load
}

TEST(SafetensorsFuzz, TruncationsThroughFiles) {
  std::string good = validFile();
  std::string dir = freshDir("trunc");
  std::string path = dir + "/t.safetensors";
  for (size_t n = 0; n < good.size(); ++n) {
    writeFile(path, good.substr(0, n));
    absl::StatusOr<std::vector<NamedTensor>> r = readSafetensors(path);
    ASSERT_FALSE(r.ok()) << "length " << n;
    ASSERT_TRUE(hasSubstr(std::string(r.status().message()), path));
  }
  writeFile(path, good);
  EXPECT_TRUE(readSafetensors(path).ok());
}

//===----------------------------------------------------------------------===//
// Checkpoints
//===----------------------------------------------------------------------===//

TEST(Checkpoint, SaveLoadLatest) {
  std::string dir = freshDir("ckpt") + "/run/ckpts"; // created on save
  absl::StatusOr<Checkpoint> none = loadLatestCheckpoint(dir);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);

  std::vector<NamedTensor> v1 = {
      {"w", HostTensor::fromDoubles(DType::F32, {2}, {1, 2})},
      {"rng", HostTensor::scalarInt(DType::I64, 42)}};
  std::vector<NamedTensor> v2 = {
      {"w", HostTensor::fromDoubles(DType::F32, {2}, {3, 4})},
      {"rng", HostTensor::scalarInt(DType::I64, 43)}};
  ASSERT_TRUE(saveCheckpoint(dir, 10, v1, {{"lr", "1e-4"}}).ok());
  ASSERT_TRUE(saveCheckpoint(dir, 20, v2, {{"lr", "5e-5"}}).ok());
  EXPECT_EQ(readFile(dir + "/latest"), "20\n");
  EXPECT_EQ(checkpointPath(dir, 10), dir + "/step-10.safetensors");

  absl::StatusOr<Checkpoint> c = loadLatestCheckpoint(dir);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->step, 20);
  EXPECT_EQ(c->metadata.at("lr"), "5e-5");
  ASSERT_EQ(c->tensors.size(), 2u);
  EXPECT_EQ(c->tensors[0].name, "rng");
  EXPECT_EQ(c->tensors[0].tensor, v2[1].tensor);
  EXPECT_EQ(c->tensors[1].tensor, v2[0].tensor);

  // The older step file is still intact and readable.
  absl::StatusOr<std::vector<NamedTensor>> old =
      readSafetensors(checkpointPath(dir, 10));
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(old->at(1).tensor, v1[0].tensor);

  // No temporaries left behind.
  std::string listing =
      absl::StrCat("ls '", dir, "' | grep -c tmp > /dev/null");
  EXPECT_NE(std::system(listing.c_str()), 0);
}

//===----------------------------------------------------------------------===//
// Typed tensors: the same files, no widening
//===----------------------------------------------------------------------===//

/// One tensor of every dtype, with values that exercise each encoding.
std::vector<NamedTensor> everyDType() {
  const double inf = std::numeric_limits<double>::infinity();
  return {
      {"a.f32",
       HostTensor::fromDoubles(DType::F32, {2, 2}, {1.5, -0.0, inf, 3e-7})},
      {"b.f64", HostTensor::fromDoubles(DType::F64, {3}, {0.1, -inf, 1e300})},
      {"c.f16", HostTensor::fromDoubles(DType::F16, {2}, {65504, -6e-8})},
      {"d.bf16", HostTensor::fromDoubles(DType::BF16, {2}, {-3, 1e38})},
      {"e.bool", HostTensor::fromInts(DType::I1, {3}, {1, 0, 1})},
      {"f.i32", HostTensor::fromInts(DType::I32, {2}, {-7, 1 << 30})},
      {"g.i64", HostTensor::fromInts(DType::I64, {}, {(1LL << 53) + 1})},
      {"h.empty", HostTensor(DType::F32, {0, 3})},
  };
}

TEST(SafetensorsTyped, SameFileBytesAsTheHostTensorWriter) {
  std::vector<NamedTensor> host = everyDType();
  std::vector<NamedTypedTensor> typed;
  for (const NamedTensor &t : host)
    typed.push_back({t.name, TypedTensor::fromHost(t.tensor)});
  std::map<std::string, std::string> metadata = {{"seed", "3"}};
  absl::StatusOr<std::string> a = serializeSafetensors(host, metadata);
  absl::StatusOr<std::string> b = serializeSafetensorsTyped(typed, metadata);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);

  absl::StatusOr<TypedSafetensorsContents> back =
      parseSafetensorsTyped(*b, "typed");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->metadata, metadata);
  ASSERT_EQ(back->tensors.size(), host.size());
  for (size_t i = 0; i < host.size(); ++i) {
    EXPECT_EQ(back->tensors[i].name, host[i].name);
    EXPECT_EQ(back->tensors[i].tensor, typed[i].tensor) << host[i].name;
    EXPECT_EQ(back->tensors[i].tensor.toHost(), host[i].tensor) << host[i].name;
  }
  // A float32 element is its 4 bytes in the file (1.5f = 0x3fc00000).
  EXPECT_EQ(back->tensors[0].tensor.bytes()[3], 0x3f);
  EXPECT_EQ(back->tensors[0].tensor.bytes()[2], 0xc0);
}

TEST(SafetensorsTyped, SameChecksAsTheHostTensorReader) {
  std::string bad = oneTensor("\"dtype\":\"BOOL\",\"shape\":[2],"
                              "\"data_offsets\":[0,2]",
                              std::string("\x01\x02", 2));
  absl::StatusOr<SafetensorsContents> host = parseSafetensors(bad, "f");
  absl::StatusOr<TypedSafetensorsContents> typed =
      parseSafetensorsTyped(bad, "f");
  ASSERT_FALSE(host.ok());
  ASSERT_FALSE(typed.ok());
  EXPECT_EQ(typed.status().message(), host.status().message());
  std::string shortFile = makeFile("{\"w\":{\"dtype\":\"F32\",\"shape\":[2],"
                                   "\"data_offsets\":[0,4]}}",
                                   std::string(4, '\0'));
  EXPECT_EQ(parseSafetensorsTyped(shortFile, "f").status().message(),
            parseSafetensors(shortFile, "f").status().message());
  TypedTensor t = TypedTensor::scalarF32(1);
  absl::StatusOr<std::string> dup =
      serializeSafetensorsTyped({{"a", t}, {"a", t}});
  ASSERT_FALSE(dup.ok());
  EXPECT_EQ(dup.status().message(),
            "tensor 'a' appears twice, expected unique names");
  EXPECT_FALSE(serializeSafetensorsTyped({{"__metadata__", t}}).ok());
}

TEST(Checkpoint, TypedSaveLoadLatest) {
  std::string dir = freshDir("typed") + "/run";
  std::vector<NamedTypedTensor> state;
  for (const NamedTensor &t : everyDType())
    state.push_back({t.name, TypedTensor::fromHost(t.tensor)});
  ASSERT_TRUE(saveCheckpointTyped(dir, 4, state, {{"seed", "1"}}).ok());
  // The same checkpoint loads untyped (tools) and typed (the trainer).
  absl::StatusOr<Checkpoint> host = loadLatestCheckpoint(dir);
  ASSERT_TRUE(host.ok()) << host.status();
  EXPECT_EQ(host->step, 4);
  absl::StatusOr<TypedCheckpoint> typed = loadLatestCheckpointTyped(dir);
  ASSERT_TRUE(typed.ok()) << typed.status();
  EXPECT_EQ(typed->step, 4);
  EXPECT_EQ(typed->metadata.at("seed"), "1");
  ASSERT_EQ(typed->tensors.size(), state.size());
  for (size_t i = 0; i < state.size(); ++i) {
    EXPECT_EQ(typed->tensors[i].tensor, state[i].tensor) << state[i].name;
    EXPECT_EQ(host->tensors[i].tensor, state[i].tensor.toHost());
  }
  // Missing files and folders fail as loadLatestCheckpoint does.
  std::remove(checkpointPath(dir, 4).c_str());
  absl::StatusOr<TypedCheckpoint> lost = loadLatestCheckpointTyped(dir);
  EXPECT_EQ(lost.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(lost.status().message(),
            loadLatestCheckpoint(dir).status().message());
  EXPECT_EQ(loadLatestCheckpointTyped(dir + "/none").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(Checkpoint, RejectsNegativeStep) {
  absl::Status s = saveCheckpoint(freshDir("neg"), -1, {});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(hasSubstr(std::string(s.message()), "step is -1"));
}

TEST(Checkpoint, MalformedLatest) {
  std::string dir = freshDir("badlatest");
  for (absl::string_view text :
       {"", "abc", "12x", "-3", "1\n\n", "9999999999999999999999"}) {
    writeFile(dir + "/latest", text);
    absl::StatusOr<Checkpoint> c = loadLatestCheckpoint(dir);
    ASSERT_FALSE(c.ok()) << text;
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_TRUE(hasSubstr(std::string(c.status().message()),
                          "latest: expected a step number"));
  }
}

TEST(Checkpoint, LatestNamesMissingOrCorruptFile) {
  std::string dir = freshDir("dangling");
  writeFile(dir + "/latest", "7\n");
  absl::StatusOr<Checkpoint> c = loadLatestCheckpoint(dir);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(hasSubstr(std::string(c.status().message()), "names step 7"));

  writeFile(checkpointPath(dir, 7), "garbage!");
  c = loadLatestCheckpoint(dir);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(hasSubstr(std::string(c.status().message()),
                        "step-7.safetensors: header length"));
}

TEST(Checkpoint, PruneKeepsTheNewestAndTheLatest) {
  std::string dir = freshDir("prune");
  std::vector<NamedTensor> t = {{"w", HostTensor::scalarInt(DType::I64, 1)}};
  for (int64_t step : {1, 2, 10, 3})
    ASSERT_TRUE(saveCheckpoint(dir, step, t).ok());
  writeFile(dir + "/step-x.safetensors", "not a checkpoint name");
  absl::StatusOr<std::vector<int64_t>> steps = listCheckpoints(dir);
  ASSERT_TRUE(steps.ok()) << steps.status();
  EXPECT_EQ(*steps, (std::vector<int64_t>{1, 2, 3, 10}));
  // keepLast 2 keeps the two highest steps, 10 and 3 (`latest` names 3).
  absl::StatusOr<int> removed = pruneCheckpoints(dir, 2);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 2);
  EXPECT_EQ(*listCheckpoints(dir), (std::vector<int64_t>{3, 10}));
  // keepLast 1 would remove 3, but `latest` names it.
  removed = pruneCheckpoints(dir, 1);
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(*removed, 0);
  EXPECT_EQ(*listCheckpoints(dir), (std::vector<int64_t>{3, 10}));
  EXPECT_EQ(*pruneCheckpoints(dir, 0), 0); // 0 keeps all
  EXPECT_TRUE(loadLatestCheckpoint(dir).ok());
  EXPECT_TRUE(listCheckpoints(dir + "/missing")->empty());
}

TEST(AtomicFile, RemovesTheTemporariesOfDeadProcessesOnly) {
  std::string dir = freshDir("stale");
  // 999999999 exceeds any pid_max: that writer is gone. Pid 1 and this
  // process are alive.
  writeFile(dir + "/step-4.safetensors.tmp.999999999", "partial");
  writeFile(dir + "/latest.tmp.999999998", "4");
  writeFile(dir + "/step-5.safetensors.tmp.1", "init's");
  std::string mine = absl::StrCat(dir, "/latest.tmp.", ::getpid());
  writeFile(mine, "mine");
  writeFile(dir + "/notes.tmp.txt", "not a temporary");
  writeFile(dir + "/.tmp.5", "no name before .tmp");
  absl::StatusOr<int> removed = removeStaleTemporaries(dir);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 2);
  EXPECT_TRUE(readFile(dir + "/step-4.safetensors.tmp.999999999").empty());
  EXPECT_EQ(readFile(dir + "/step-5.safetensors.tmp.1"), "init's");
  EXPECT_EQ(readFile(mine), "mine");
  EXPECT_EQ(readFile(dir + "/notes.tmp.txt"), "not a temporary");
  EXPECT_EQ(readFile(dir + "/.tmp.5"), "no name before .tmp");
  EXPECT_EQ(*removeStaleTemporaries(dir + "/missing"), 0);
}

TEST(AtomicFile, FingerprintTellsFilesApart) {
  std::string dir = freshDir("fingerprint");
  writeFile(dir + "/a", "step.bin bytes");
  writeFile(dir + "/b", "step.bin bytez");
  writeFile(dir + "/empty", "");
  absl::StatusOr<std::string> a = fingerprintFile(dir + "/a");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->size(), 8u + 16u);
  EXPECT_EQ(*a, *fingerprintFile(dir + "/a"));
  EXPECT_NE(*a, *fingerprintFile(dir + "/b"));
  // FNV-1a of no bytes is its offset basis.
  EXPECT_EQ(*fingerprintFile(dir + "/empty"), "fnv1a64:cbf29ce484222325");
  absl::StatusOr<std::string> missing = fingerprintFile(dir + "/missing");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(),
            dir + "/missing: open failed: No such file or directory");
}

//===----------------------------------------------------------------------===//
// SafetensorsReader: the header only, then one tensor at a time
//===----------------------------------------------------------------------===//

TEST(SafetensorsReader, ReadsWhatTheWholeFileReaderReads) {
  std::string dir = freshDir("reader");
  std::string path = dir + "/m.safetensors";
  writeFile(path, validFile());
  absl::StatusOr<TypedSafetensorsContents> whole = readSafetensorsTyped(path);
  ASSERT_TRUE(whole.ok()) << whole.status();
  absl::StatusOr<SafetensorsReader> reader = SafetensorsReader::open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_EQ(reader->metadata(), whole->metadata);
  ASSERT_EQ(reader->tensors().size(), whole->tensors.size());
  for (size_t i = 0; i < whole->tensors.size(); ++i) {
    const SafetensorsReader::TensorInfo &info = reader->tensors()[i];
    EXPECT_EQ(info.name, whole->tensors[i].name);
    EXPECT_EQ(info.shape, whole->tensors[i].tensor.shape());
    EXPECT_EQ(reader->find(info.name), &info);
    absl::StatusOr<TypedTensor> t = reader->read(info);
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_EQ(t->dtype(), whole->tensors[i].tensor.dtype());
    EXPECT_TRUE(std::equal(t->bytes().begin(), t->bytes().end(),
                           whole->tensors[i].tensor.bytes().begin(),
                           whole->tensors[i].tensor.bytes().end()));
  }
  EXPECT_EQ(reader->find("w4"), nullptr);
  // A reader can be moved (it owns the descriptor).
  SafetensorsReader moved = std::move(*reader);
  EXPECT_TRUE(moved.read(moved.tensors()[0]).ok());
}

TEST(SafetensorsReader, SameHeaderChecksAgainstTheFileSize) {
  std::string dir = freshDir("reader_bad");
  std::string good = validFile();
  auto openError = [&](absl::string_view bytes) {
    std::string path = dir + "/bad.safetensors";
    writeFile(path, bytes);
    absl::StatusOr<SafetensorsReader> r = SafetensorsReader::open(path);
    EXPECT_FALSE(r.ok());
    return r.ok() ? std::string() : std::string(r.status().message());
  };
  EXPECT_TRUE(hasSubstr(openError(good.substr(0, 7)),
                        "bad.safetensors: file is 7 bytes, expected at least "
                        "8"));
  EXPECT_TRUE(hasSubstr(openError(good.substr(0, 50)),
                        "runs past the end of the file"));
  EXPECT_TRUE(hasSubstr(openError(good.substr(0, good.size() - 1)),
                        "tensor 'w3': data_offsets [40, 46] run past the end "
                        "of the 45-byte data buffer"));
  EXPECT_TRUE(hasSubstr(openError(good + "x"), "expected no trailing bytes"));
  absl::StatusOr<SafetensorsReader> missing =
      SafetensorsReader::open(dir + "/none.safetensors");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
}

TEST(SafetensorsReader, FileTruncatedAfterOpenIsDataLoss) {
  std::string dir = freshDir("reader_trunc");
  std::string path = dir + "/m.safetensors";
  std::string good = validFile();
  writeFile(path, good);
  absl::StatusOr<SafetensorsReader> reader = SafetensorsReader::open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(good.size() - 2)), 0);
  const SafetensorsReader::TensorInfo *w3 = reader->find("w3");
  ASSERT_NE(w3, nullptr);
  absl::StatusOr<TypedTensor> t = reader->read(*w3);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(hasSubstr(std::string(t.status().message()),
                        "tensor 'w3': cannot read 6 bytes"))
      << t.status();
  EXPECT_TRUE(reader->read(*reader->find("w1")).ok());
}

} // namespace
} // namespace omni::checkpoint
