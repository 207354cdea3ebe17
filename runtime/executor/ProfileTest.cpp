//===- ProfileTest.cpp - The profile's rows and reports ---------*- C++ -*-===//
//
// Profile (Profile.h) on hand-made rows: the sums per row and per kind, the
// order (phases as first timed, rows longest first), the shares and the
// JSON's fields, read back by nlohmann-json.
//
//===----------------------------------------------------------------------===//

#include "runtime/executor/Profile.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace omni::executor {
namespace {

TEST(Profile, SumsRowsAndKinds) {
  Profile p;
  p.addPhase("rollout", 1.0);
  p.addPhase("loss", 4.0);
  p.addPhase("rollout", 1.0); // 2 s in all
  p.add("loss", "matmul", "matmul 1x2x3x4 nn", "loc(a)", 1.5, 100, 48);
  p.add("loss", "matmul", "matmul 1x2x3x4 nn", "loc(b)", 0.5, 100, 48);
  p.add("loss", "fused kernel", "omni_kernel_3", "", 1.0, 8, 0);
  p.add("rollout", "matmul", "matmul 2x2x2x2 nt", "", 0.25, 10, 32);
  p.add("rollout", "copy", "copy", "", 1.5, 64, 0);
  p.add("metrics", "fused kernel", "omni_kernel_9", "", 0.125, 4, 0);
  p.addIteration();

  std::vector<ProfileRow> rows = p.rows();
  ASSERT_EQ(rows.size(), 5u);
  // rollout first (timed first), longest row first; metrics (untimed) last.
  EXPECT_EQ(rows[0].symbol, "copy");
  EXPECT_EQ(rows[1].symbol, "matmul 2x2x2x2 nt");
  EXPECT_EQ(rows[2].symbol, "matmul 1x2x3x4 nn");
  EXPECT_EQ(rows[2].count, 2);
  EXPECT_DOUBLE_EQ(rows[2].seconds, 2.0);
  EXPECT_EQ(rows[2].bytes, 200);
  EXPECT_EQ(rows[2].flops, 96);
  EXPECT_EQ(rows[2].where, "loc(a)"); // the first command's
  EXPECT_EQ(rows[4].phase, "metrics");

  auto json = nlohmann::json::parse(p.json());
  EXPECT_EQ(json["iterations"], 1);
  ASSERT_EQ(json["phases"].size(), 3u);
  const auto &loss = json["phases"][1];
  EXPECT_EQ(loss["phase"], "loss");
  EXPECT_DOUBLE_EQ(loss["seconds"].get<double>(), 4.0);
  EXPECT_DOUBLE_EQ(loss["profiled_seconds"].get<double>(), 3.0);
  ASSERT_EQ(loss["kinds"].size(), 2u);
  EXPECT_EQ(loss["kinds"][0]["kind"], "matmul");
  EXPECT_EQ(loss["kinds"][0]["count"], 2);
  EXPECT_DOUBLE_EQ(loss["kinds"][0]["share"].get<double>(), 0.5);
  EXPECT_EQ(loss["kinds"][0]["flops"], 96);
  EXPECT_DOUBLE_EQ(loss["kinds"][1]["share"].get<double>(), 0.25);
  ASSERT_EQ(loss["symbols"].size(), 2u);
  const auto &rollout = json["phases"][0];
  EXPECT_DOUBLE_EQ(rollout["seconds"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(rollout["kinds"][0]["share"].get<double>(), 0.75);
  // A phase without top-level time has shares of 0, not a division by 0.
  const auto &metrics = json["phases"][2];
  EXPECT_DOUBLE_EQ(metrics["seconds"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(metrics["symbols"][0]["share"].get<double>(), 0.0);

  std::string table = p.table();
  EXPECT_NE(table.find("profile of 1 iteration(s)"), std::string::npos);
  EXPECT_NE(table.find("loss"), std::string::npos);
  EXPECT_NE(table.find(" 50.0%"), std::string::npos) << table;
}

TEST(Profile, EmptyIsValidJson) {
  Profile p;
  auto json = nlohmann::json::parse(p.json());
  EXPECT_EQ(json["iterations"], 0);
  EXPECT_TRUE(json["phases"].empty());
}

} // namespace
} // namespace omni::executor
