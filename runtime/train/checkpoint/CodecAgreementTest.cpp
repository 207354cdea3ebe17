//===- CodecAgreementTest.cpp - Every writer writes the same bytes --------===//
//
// .npy files, safetensors files and the executor's device bytes
// (TensorBytes) once had their own element conversions with different NaN
// handling. Now they share the element codec, so the same tensor, NaNs,
// infinities and subnormals included, must come out as the same bytes from
// all three, and those bytes are the ones ElementCodec.h's rules give (spelled
// out here by hand), and each reader decodes them to the same values.
//
//===----------------------------------------------------------------------===//

#include "runtime/executor/TensorBytes.h"
#include "runtime/io/Npy.h"
#include "runtime/train/checkpoint/Safetensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace omni {
namespace {

double doubleOf(uint64_t bits) {
  double v;
  std::memcpy(&v, &bits, 8);
  return v;
}
uint64_t bitsOf(double v) {
  uint64_t b;
  std::memcpy(&b, &v, 8);
  return b;
}

/// The values every case writes: quiet NaNs of both signs (one with a
/// payload in its leading bits, one only in bits no narrow format keeps), a
/// signaling NaN, infinities, -0, a value that rounds, subnormals of f16.
std::vector<double> specialValues() {
  double inf = std::numeric_limits<double>::infinity();
  return {doubleOf(0x7ff8000000000000ULL),
          doubleOf(0xfff8000000000000ULL),
          doubleOf(0x7ffc000000000000ULL),
          doubleOf(0xfff8000000000001ULL),
          doubleOf(0x7ff0000000000001ULL),
          inf,
          -inf,
          -0.0,
          1.0 / 3.0,
          std::ldexp(1.0, -24),
          -std::ldexp(3.0, -20),
          65504.0};
}

/// The element bytes of `t` as each writer produces them.
struct Written {
  std::string npy, safetensors, executor;
};

Written writeAll(const HostTensor &t) {
  size_t size = static_cast<size_t>(t.numElements() * dtypeSize(t.dtype()));
  Written w;
  std::string npy = serializeNpy(t);
  w.npy = npy.substr(npy.size() - size);
  absl::StatusOr<std::string> st = checkpoint::serializeSafetensors({{"t", t}});
  EXPECT_TRUE(st.ok()) << st.status();
  if (st.ok())
    w.safetensors = st->substr(st->size() - size);
  std::vector<uint8_t> bytes = executor::packTensor(t);
  w.executor.assign(bytes.begin(), bytes.end());
  return w;
}

template <typename T> std::string bytesOf(const std::vector<T> &words) {
  return std::string(reinterpret_cast<const char *>(words.data()),
                     words.size() * sizeof(T));
}

/// Writes `values` as `dtype` through every writer, expects `want`, and
/// reads the bytes back through every reader (bf16 has no .npy dtype).
template <typename T>
void checkAgreement(DType dtype, const std::vector<T> &want) {
  std::vector<double> values = specialValues();
  int64_t n = static_cast<int64_t>(values.size());
  HostTensor t = HostTensor::fromDoubles(dtype, {n}, values);
  Written w = writeAll(t);
  std::string expected = bytesOf(want);
  EXPECT_EQ(w.safetensors, expected) << dtypeName(dtype);
  EXPECT_EQ(w.executor, expected) << dtypeName(dtype);
  if (dtype != DType::BF16)
    EXPECT_EQ(w.npy, expected) << dtypeName(dtype);

  std::vector<HostTensor> read;
  read.push_back(executor::unpackTensor(
      dtype, {n},
      absl::MakeConstSpan(reinterpret_cast<const uint8_t *>(w.executor.data()),
                          w.executor.size())));
  absl::StatusOr<std::string> st = checkpoint::serializeSafetensors({{"t", t}});
  ASSERT_TRUE(st.ok());
  auto parsed = checkpoint::parseSafetensors(*st, "t.safetensors");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  read.push_back(parsed->tensors.at(0).tensor);
  if (dtype != DType::BF16) {
    absl::StatusOr<HostTensor> npy = parseNpy(serializeNpy(t));
    ASSERT_TRUE(npy.ok()) << npy.status();
    read.push_back(*npy);
  }
  for (const HostTensor &r : read)
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(bitsOf(r.floats()[i]), bitsOf(read[0].floats()[i]))
          << dtypeName(dtype) << " element " << i;
}

TEST(CodecAgreement, F16) {
  checkAgreement<uint16_t>(DType::F16,
                           {0x7e00, 0xfe00, 0x7f00, 0xfe00, 0x7e00, 0x7c00,
                            0xfc00, 0x8000, 0x3555, 0x0001, 0x8030, 0x7bff});
}

TEST(CodecAgreement, BF16) {
  checkAgreement<uint16_t>(DType::BF16,
                           {0x7fc0, 0xffc0, 0x7fe0, 0xffc0, 0x7fc0, 0x7f80,
                            0xff80, 0x8000, 0x3eab, 0x3380, 0xb640, 0x4780});
}

TEST(CodecAgreement, F32) {
  checkAgreement<uint32_t>(DType::F32,
                           {0x7fc00000, 0xffc00000, 0x7fe00000, 0xffc00000,
                            0x7fc00000, 0x7f800000, 0xff800000, 0x80000000,
                            0x3eaaaaab, 0x33800000, 0xb6400000, 0x477fe000});
}

TEST(CodecAgreement, F64CopiesEveryBit) {
  std::vector<uint64_t> want;
  for (double v : specialValues())
    want.push_back(bitsOf(v));
  checkAgreement<uint64_t>(DType::F64, want);
}

TEST(CodecAgreement, I1) {
  HostTensor t = HostTensor::fromInts(DType::I1, {3}, {1, 0, 1});
  Written w = writeAll(t);
  EXPECT_EQ(w.npy, std::string("\x01\x00\x01", 3));
  EXPECT_EQ(w.safetensors, w.npy);
  EXPECT_EQ(w.executor, w.npy);
}

} // namespace
} // namespace omni
