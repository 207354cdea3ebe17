//===- BaseTest.cpp - Tests of the runtime base library ---------*- C++ -*-===//

#include "runtime/base/CheckedMath.h"
#include "runtime/base/CpuFeatures.h"
#include "runtime/base/JsonNonFinite.h"
#include "runtime/base/Logging.h"
#include "runtime/base/Status.h"

#include "gtest/gtest.h"

#include <limits>

namespace omni {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

TEST(CheckedMath, DetectsOverflow) {
  EXPECT_EQ(checkedAdd(2, 3), 5);
  EXPECT_FALSE(checkedAdd(kMax, 1));
  EXPECT_EQ(checkedMul(-4, 3), -12);
  EXPECT_FALSE(checkedMul(kMax / 2 + 1, 2));
  EXPECT_EQ(checkedNumElements({}), 1);
  EXPECT_EQ(checkedNumElements({2, 0, 5}), 0);
  EXPECT_FALSE(checkedNumElements({2, -1}));
  EXPECT_FALSE(checkedNumElements({1 << 30, 1 << 30, 1 << 30}));
}

TEST(CheckedMath, RangeInside) {
  EXPECT_TRUE(rangeInside(0, 8, 8));
  EXPECT_TRUE(rangeInside(8, 0, 8));
  EXPECT_FALSE(rangeInside(4, 5, 8));
  EXPECT_FALSE(rangeInside(-1, 1, 8));
  EXPECT_FALSE(rangeInside(kMax, 2, kMax));
}

TEST(CpuFeatures, ChecksInstructionSetFeatures) {
  CpuFeatures cpu({"sse4_2", "avx2", "fma", "pni"});
  EXPECT_TRUE(checkLlvmFeatures("+avx2,+fma,+sse4.2,+sse3", cpu).ok());
  // Tuning flags and removed features are not instruction sets.
  EXPECT_TRUE(
      checkLlvmFeatures("+prefer-256-bit,-avx512f,+fast-gather", cpu).ok());
  absl::Status missing = checkLlvmFeatures("+avx2,+avx512f", cpu);
  EXPECT_EQ(missing.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(missing.message(),
            "needs avx512f (cpuinfo flag avx512f), which this CPU lacks");
  EXPECT_EQ(
      checkLlvmFeatures("+avx512vnni", cpu).message(),
      "needs avx512vnni (cpuinfo flag avx512_vnni), which this CPU lacks");
}

TEST(CpuFeatures, HostHasBaselineX86) {
  const CpuFeatures &host = CpuFeatures::host();
  if (!host.available())
    GTEST_SKIP() << "/proc/cpuinfo has no flags";
  EXPECT_TRUE(host.has("sse2"));
  EXPECT_TRUE(checkLlvmFeatures("+sse2,+cx8", host).ok());
}

TEST(Status, AnnotateAndMacros) {
  EXPECT_TRUE(annotate(absl::OkStatus(), "x: ").ok());
  absl::Status s = annotate(absl::NotFoundError("gone"), "file: ");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "file: gone");

  auto half = [](int v) -> absl::StatusOr<int> {
    if (v % 2)
      return absl::InvalidArgumentError("odd");
    return v / 2;
  };
  auto quarter = [&](int v) -> absl::StatusOr<int> {
    OMNI_ASSIGN_OR_RETURN(int h, half(v));
    OMNI_ASSIGN_OR_RETURN(int q, half(h));
    return q;
  };
  EXPECT_EQ(*quarter(8), 2);
  EXPECT_EQ(quarter(6).status().message(), "odd");
}

int64_t tracedScopes = 0;
void countScope(absl::string_view, int64_t begin, int64_t end) {
  EXPECT_LE(begin, end);
  ++tracedScopes;
}

TEST(Logging, TraceSink) {
  setTraceSink(countScope);
  {
    TraceScope scope("work");
  }
  setTraceSink(nullptr);
  {
    TraceScope scope("untraced");
  }
  EXPECT_EQ(tracedScopes, 1);
}

} // namespace
} // namespace omni

TEST(JsonNonFiniteTest, QuotesBareWordsOutsideStringsOnly) {
  EXPECT_EQ(omni::quoteNonFinite(R"({"a": [1, 2.5], "b": "NaN"})"),
            std::nullopt);
  std::optional<std::string> q = omni::quoteNonFinite(
      R"({"a": [NaN, -Infinity, Infinity], "s": "x\"NaN"})");
  ASSERT_TRUE(q.has_value());
  EXPECT_EQ(*q, "{\"a\": [\"\\u0001non-finite:NaN\", "
                "\"\\u0001non-finite:-Infinity\", "
                "\"\\u0001non-finite:Infinity\"], \"s\": \"x\\\"NaN\"}");
}
