//===- ConfigFileTest.cpp - omni.toml reader tests ------------------------===//
//
// Every kind of key and every error of runtime/base/ConfigFile.h, with the
// line and column the error names (docs/config.md).
//
//===----------------------------------------------------------------------===//

#include "runtime/base/ConfigFile.h"

#include "absl/strings/str_join.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

namespace omni::config {
namespace {

/// The arguments of `text` for `tool`, joined by spaces.
std::string args(const std::string &text, Tool tool) {
  absl::StatusOr<std::vector<ConfigArg>> parsed =
      parseConfig(text, "omni.toml", tool);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  if (!parsed.ok())
    return "";
  std::vector<std::string> out;
  for (const ConfigArg &a : *parsed)
    out.push_back(a.arg());
  return absl::StrJoin(out, " ");
}

/// The error of `text` (for either tool: both check the whole file).
std::string error(const std::string &text) {
  absl::StatusOr<std::vector<ConfigArg>> gen =
      parseConfig(text, "omni.toml", Tool::Omnigen);
  absl::StatusOr<std::vector<ConfigArg>> run =
      parseConfig(text, "omni.toml", Tool::Omnirun);
  EXPECT_FALSE(gen.ok());
  EXPECT_FALSE(run.ok());
  if (gen.ok() || run.ok())
    return "";
  EXPECT_EQ(gen.status().message(), run.status().message());
  return std::string(gen.status().message());
}

constexpr const char *kFull = R"(# a full file
mesh = "dp=2,fsdp=2"

[model]
name = "sd3"
config = "tiny"
overrides = { latent_size = 16, dual_attention_layers = [0, 1] }

[decoder]
name = "autoencoder_kl"
config = "tiny"
[decoder.overrides]
latent_size = 16

[recipe]
group_size = 4
lr = 3e-4
global_std = false
sde_type = "cps"

[run]
steps = 120
seed = 7
out = "runs/a"
stats = true
allow-program-change = false
resume-if-present = true
reward = ["jpeg_compressibility:0.5", "http://127.0.0.1:8000:0.5"]
lr-min = 1
set = { lr = 1e-4, max_grad_norm = 2 }
)";

TEST(ConfigFile, OmnigenTakesItsSectionsInFileOrder) {
  EXPECT_EQ(args(kFull, Tool::Omnigen),
            "--mesh=dp=2,fsdp=2 --model=sd3 --config=tiny "
            "--set=latent_size=16 --set=dual_attention_layers=0,1 "
            "--decoder=autoencoder_kl --decoder-config=tiny "
            "--decoder-set=latent_size=16 --opt=group_size=4 --opt=lr=0.0003 "
            "--opt=global_std=false --opt=sde_type=cps");
}

TEST(ConfigFile, OmnirunTakesRun) {
  // A false switch is no flag; true is the flag; numbers are the shortest
  // text that reads back; a table is one --set per entry.
  EXPECT_EQ(args(kFull, Tool::Omnirun),
            "--steps=120 --seed=7 --out=runs/a --stats --resume-if-present "
            "--reward=jpeg_compressibility:0.5 "
            "--reward=http://127.0.0.1:8000:0.5 --lr-min=1 --set=lr=0.0001 "
            "--set=max_grad_norm=2");
}

TEST(ConfigFile, ArgsSayWhereAndWhat) {
  absl::StatusOr<std::vector<ConfigArg>> parsed =
      parseConfig(kFull, "dir/omni.toml", Tool::Omnirun);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->size(), 10u);
  const ConfigArg &steps = (*parsed)[0];
  EXPECT_EQ(steps.key, "run.steps");
  EXPECT_EQ(steps.where, "dir/omni.toml:22:1");
  EXPECT_EQ(steps.type, "an integer");
  EXPECT_FALSE(steps.listItem);
  const ConfigArg &reward = (*parsed)[6];
  EXPECT_EQ(reward.key, "run.reward[1]");
  EXPECT_EQ(reward.where, "dir/omni.toml:28:39");
  EXPECT_EQ(*reward.value, "http://127.0.0.1:8000:0.5");
  EXPECT_TRUE(reward.listItem);
  const ConfigArg &set = (*parsed)[9];
  EXPECT_EQ(set.key, "run.set.max_grad_norm");
  EXPECT_EQ(set.flag, "--set");
  EXPECT_EQ(*set.value, "max_grad_norm=2");
}

TEST(ConfigFile, RecipeValuesKeepTheirType) {
  absl::StatusOr<std::vector<ConfigArg>> parsed =
      parseConfig("[recipe]\nsteps = 4\nlr = 1.5\nreward = \"x\"\nflag = "
                  "true\n",
                  "f.toml", Tool::Omnigen);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->size(), 4u);
  EXPECT_EQ((*parsed)[0].type, "an integer");
  EXPECT_EQ((*parsed)[1].type, "a number");
  EXPECT_EQ((*parsed)[2].type, "a string");
  EXPECT_EQ((*parsed)[3].type, "a boolean");
  EXPECT_EQ((*parsed)[3].where, "f.toml:5:1");
}

TEST(ConfigFile, OneStringIsAListOfOne) {
  EXPECT_EQ(args("[run]\nreward = \"brightness\"\ninit = "
                 "[\"a.safetensors\", \"vae=b.safetensors\"]\n",
                 Tool::Omnirun),
            "--reward=brightness --init=a.safetensors "
            "--init=vae=b.safetensors");
  EXPECT_EQ(args("[run]\nresume = \"runs/a\"\n", Tool::Omnirun),
            "--resume=runs/a");
}

TEST(ConfigFile, EmptyFileAndEmptySections) {
  EXPECT_EQ(args("", Tool::Omnigen), "");
  EXPECT_EQ(args("[model]\n[run]\n", Tool::Omnirun), "");
}

TEST(ConfigFile, ParseErrorIsOneLineWithLineAndColumn) {
  std::string e = error("[run]\nsteps = 1\nseed = = 2\n");
  EXPECT_EQ(e.rfind("omni.toml:3:", 0), 0u) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  // A key given twice is TOML's error, on the second one's line.
  e = error("[run]\nsteps = 1\nsteps = 2\n");
  EXPECT_EQ(e, "omni.toml:3:9: Error while parsing key-value pair: cannot "
               "redefine existing integer 'steps'");
}

TEST(ConfigFile, UnknownSection) {
  EXPECT_EQ(error("[run]\nsteps = 1\n\n[trainer]\nlr = 1\n"),
            "omni.toml:4:2: unknown section [trainer] (known: [model], "
            "[decoder], [recipe], [run] and the key mesh)");
}

TEST(ConfigFile, UnknownKeyNamesItAndItsLine) {
  // Every key of [run] is named (runKeys(), which grows with omnirun's
  // flags).
  std::string e = error("[run]\nsteps = 1\nstpes = 2\n");
  EXPECT_EQ(e, "omni.toml:3:1: unknown key 'run.stpes' (known in [run]: " +
                   absl::StrJoin(runKeys(), ", ") + ")");
  EXPECT_EQ(e.rfind("omni.toml:3:1: unknown key 'run.stpes' (known in [run]: "
                    "steps, seed, out, save-every, ",
                    0),
            0u);
  EXPECT_EQ(error("\n[model]\nname = \"sd3\"\n  preset = \"tiny\"\n"),
            "omni.toml:4:3: unknown key 'model.preset' (known in [model]: "
            "name, config, from_diffusers, overrides)");
  EXPECT_EQ(error("steps = 3\n"),
            "omni.toml:1:1: unknown key 'steps' (known at the top: mesh, and "
            "the sections [model], [decoder], [recipe], [run])");
}

TEST(ConfigFile, WrongTypes) {
  EXPECT_EQ(error("[run]\nsteps = \"120\"\n"),
            "omni.toml:2:1: run.steps: expected an integer, found a string");
  EXPECT_EQ(error("[run]\nsteps = 1.5\n"),
            "omni.toml:2:1: run.steps: expected an integer, found a number");
  EXPECT_EQ(error("[run]\nlr-min = true\n"),
            "omni.toml:2:1: run.lr-min: expected a number, found a boolean");
  EXPECT_EQ(error("[run]\nstats = 1\n"),
            "omni.toml:2:1: run.stats: expected a boolean, found an integer");
  EXPECT_EQ(error("[run]\nout = 3\n"),
            "omni.toml:2:1: run.out: expected a string, found an integer");
  EXPECT_EQ(error("[run]\nresume = 3\n"),
            "omni.toml:2:1: run.resume: expected a folder (a string) or a "
            "boolean, found an integer");
  EXPECT_EQ(error("[run]\nreward = [\"a\", 2]\n"),
            "omni.toml:2:16: run.reward[1]: expected a string, found an "
            "integer");
  EXPECT_EQ(error("[run]\nreward = { a = 1 }\n"),
            "omni.toml:2:1: run.reward: expected a string or an array of "
            "strings, found a table");
  EXPECT_EQ(error("[run]\nset = 3\n"),
            "omni.toml:2:1: run.set: expected a table, found an integer");
  EXPECT_EQ(error("[run.set]\nlr = \"fast\"\n"),
            "omni.toml:2:1: run.set.lr: expected a number, found a string");
  EXPECT_EQ(error("[recipe]\ngroup_size = [4]\n"),
            "omni.toml:2:1: recipe.group_size: expected a string, a number "
            "or a boolean, found an array");
  EXPECT_EQ(error("[model.overrides]\ndepth = { a = 1 }\n"),
            "omni.toml:2:1: model.overrides.depth: expected a string, a "
            "number, a boolean or an array, found a table");
  EXPECT_EQ(error("[model]\nname = 1979-05-27\n"),
            "omni.toml:2:1: model.name: expected a string, found a date or "
            "time");
  EXPECT_EQ(error("mesh = { dp = 2 }\n"),
            "omni.toml:1:1: mesh: expected a string, found a table");
}

TEST(ConfigFile, MissingFile) {
  absl::StatusOr<std::vector<ConfigArg>> parsed =
      readConfigFile("/nonexistent/omni.toml", Tool::Omnirun);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().message(),
            "cannot read config file /nonexistent/omni.toml: No such file or "
            "directory");
}

TEST(ConfigFile, ReadsAFile) {
  const std::string path = ::testing::TempDir() + "/config-file-test.toml";
  {
    std::ofstream out(path);
    out << "[run]\nsteps = 2\n";
  }
  absl::StatusOr<std::vector<ConfigArg>> parsed =
      readConfigFile(path, Tool::Omnirun);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_EQ(parsed->size(), 1u);
  EXPECT_EQ((*parsed)[0].arg(), "--steps=2");
  EXPECT_EQ((*parsed)[0].where, path + ":2:1");
  std::remove(path.c_str());
}

TEST(ConfigFile, AFolderIsNotAFile) {
  absl::StatusOr<std::vector<ConfigArg>> parsed =
      readConfigFile(::testing::TempDir(), Tool::Omnirun);
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().message(), "cannot read config file " +
                                           ::testing::TempDir() +
                                           ": it is a folder, expected a file");
}

} // namespace
} // namespace omni::config
