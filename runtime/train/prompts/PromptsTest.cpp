//===- PromptsTest.cpp - The prompt set of training runs ------------------===//

#include "runtime/train/prompts/Prompts.h"

#include "runtime/flowgrpo/Philox.h"
#include "runtime/train/checkpoint/Safetensors.h"

#include "gtest/gtest.h"

#include <fstream>
#include <map>
#include <unistd.h>

namespace omni::train {
namespace {

using checkpoint::NamedTensor;

std::string tempPath(const std::string &name) {
  return ::testing::TempDir() + "/" + std::to_string(::getpid()) + ".prompts." +
         name;
}

/// Prompt k of the set has every element equal to k (+ 0.5 for pooled).
std::vector<NamedTensor> countingSet(int64_t n, int64_t l, int64_t d,
                                     int64_t dp) {
  std::vector<double> e, p;
  for (int64_t k = 0; k < n; ++k) {
    e.insert(e.end(), l * d, double(k));
    p.insert(p.end(), dp, k + 0.5);
  }
  return {{"prompt_embeds", HostTensor::fromDoubles(DType::F32, {n, l, d}, e)},
          {"pooled_prompt_embeds",
           HostTensor::fromDoubles(DType::F32, {n, dp}, p)}};
}

PromptRequest request(int64_t p, int64_t l, int64_t d, int64_t dp) {
  PromptRequest r;
  r.perIteration = p;
  r.embeds = true;
  r.tokens = l;
  r.dim = d;
  r.pooled = true;
  r.pooledDim = dp;
  return r;
}

TEST(PromptSet, IterationsTakeConsecutivePromptsModuloTheSet) {
  std::string path = tempPath("counting.safetensors");
  ASSERT_TRUE(checkpoint::writeSafetensors(path, countingSet(5, 3, 4, 2)).ok());
  absl::StatusOr<PromptSet> set = PromptSet::load(path, request(2, 3, 4, 2));
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->size(), 5);
  EXPECT_EQ(set->source(), path);
  EXPECT_EQ(set->indices(0), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(set->indices(1), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(set->indices(2), (std::vector<int64_t>{4, 0}));
  EXPECT_EQ(set->indices(7), (std::vector<int64_t>{4, 0})); // 14, 15 mod 5
  // No overflow for huge iterations: (i*P + j) mod Np computed exactly.
  int64_t big = int64_t{1} << 62;
  int64_t base = (big % 5) * 2 % 5;
  EXPECT_EQ(set->indices(big), (std::vector<int64_t>{base, (base + 1) % 5}));

  HostTensor e = set->embeds(2);
  EXPECT_EQ(e.shape(), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(e.dtype(), DType::F32);
  for (int64_t i = 0; i < 12; ++i) {
    EXPECT_EQ(e.floats()[i], 4.0);
    EXPECT_EQ(e.floats()[12 + i], 0.0);
  }
  HostTensor p = set->pooled(1);
  EXPECT_EQ(p,
            HostTensor::fromDoubles(DType::F32, {2, 2}, {2.5, 2.5, 3.5, 3.5}));
}

TEST(PromptSet, MorePromptsPerIterationThanTheSetHolds) {
  std::string path = tempPath("small.safetensors");
  ASSERT_TRUE(checkpoint::writeSafetensors(path, countingSet(2, 1, 1, 1)).ok());
  absl::StatusOr<PromptSet> set = PromptSet::load(path, request(5, 1, 1, 1));
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->indices(1), (std::vector<int64_t>{1, 0, 1, 0, 1}));
}

TEST(PromptSet, OnlyTheTensorsTheStepTakesAreNeeded) {
  std::string path = tempPath("embeds-only.safetensors");
  std::vector<NamedTensor> set = countingSet(3, 2, 2, 1);
  set.pop_back();
  ASSERT_TRUE(checkpoint::writeSafetensors(path, set).ok());
  PromptRequest r = request(1, 2, 2, 1);
  r.pooled = false;
  absl::StatusOr<PromptSet> loaded = PromptSet::load(path, r);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->embeds(2).floats()[0], 2.0);
}

TEST(PromptSet, SyntheticSetIsPhiloxNormalUnderAFixedKey) {
  PromptSet set = PromptSet::synthetic(request(3, 2, 4, 5));
  EXPECT_EQ(set.size(), kSyntheticPrompts);
  EXPECT_EQ(set.source(), "synthetic");
  // Iteration 6 takes prompts 18, 19, 20 mod 16 = 2, 3, 4.
  HostTensor e = set.embeds(6), p = set.pooled(6);
  for (int64_t j = 0; j < 3; ++j) {
    for (int64_t x = 0; x < 8; ++x)
      ASSERT_EQ(
          e.floats()[j * 8 + x],
          flowgrpo::philoxNormalAt(kSyntheticPromptKey, 0, (2 + j) * 8 + x));
    for (int64_t x = 0; x < 5; ++x)
      ASSERT_EQ(
          p.floats()[j * 5 + x],
          flowgrpo::philoxNormalAt(kSyntheticPromptKey, 1, (2 + j) * 5 + x));
  }
  // Distinct prompts differ.
  EXPECT_NE(e.floats()[0], e.floats()[8]);
}

TEST(PromptSet, Errors) {
  struct Case {
    std::vector<NamedTensor> tensors;
    PromptRequest request;
    std::string message; // the whole message after "<path>: "
  };
  PromptRequest r = request(2, 3, 4, 2);
  std::vector<NamedTensor> good = countingSet(4, 3, 4, 2);
  std::vector<NamedTensor> noPooled = {good[0]};
  std::vector<NamedTensor> wrongDtype = good;
  wrongDtype[0].tensor.retype(DType::BF16);
  std::vector<NamedTensor> wrongD = good;
  wrongD[0].tensor = HostTensor(DType::F32, {4, 3, 5});
  std::vector<NamedTensor> wrongRank = good;
  wrongRank[1].tensor = HostTensor(DType::F32, {4, 2, 1});
  std::vector<NamedTensor> counts = good;
  counts[1].tensor = HostTensor(DType::F32, {3, 2});
  std::vector<NamedTensor> empty = good;
  empty[0].tensor = HostTensor(DType::F32, {0, 3, 4});
  const Case cases[] = {
      {noPooled, r,
       "no tensor 'pooled_prompt_embeds', expected tensor<Nx2xf32> (Dp = 2 "
       "from @train_step's pooled_prompt_embeds); found tensors: "
       "prompt_embeds"},
      {wrongDtype, r,
       "tensor 'prompt_embeds' is tensor<4x3x4xbf16>, expected "
       "tensor<Nx3x4xf32> (dtype f32)"},
      {wrongD, r,
       "tensor 'prompt_embeds' is tensor<4x3x5xf32>, expected "
       "tensor<Nx3x4xf32> (L = 3, D = 4 from @train_step's prompt_embeds)"},
      {wrongRank, r,
       "tensor 'pooled_prompt_embeds' is tensor<4x2x1xf32>, expected "
       "tensor<Nx2xf32> (Dp = 2 from @train_step's pooled_prompt_embeds)"},
      {counts, r,
       "tensor 'pooled_prompt_embeds' holds 3 prompts, expected 4 as "
       "'prompt_embeds' holds"},
      {empty, r,
       "tensor 'prompt_embeds' is tensor<0x3x4xf32>, expected at least one "
       "prompt (N >= 1)"},
  };
  int n = 0;
  for (const Case &c : cases) {
    std::string path = tempPath("bad" + std::to_string(n++) + ".safetensors");
    ASSERT_TRUE(checkpoint::writeSafetensors(path, c.tensors).ok());
    absl::StatusOr<PromptSet> set = PromptSet::load(path, c.request);
    ASSERT_FALSE(set.ok()) << c.message;
    EXPECT_EQ(set.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(set.status().message(), path + ": " + c.message);
  }
}

TEST(PromptSet, CorruptMissingAndUnusedFiles) {
  std::string path = tempPath("corrupt.safetensors");
  std::ofstream(path, std::ios::binary) << "not a safetensors file";
  absl::StatusOr<PromptSet> set = PromptSet::load(path, request(1, 1, 1, 1));
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().message().substr(0, path.size() + 2), path + ": ");
  EXPECT_EQ(std::string(set.status().message()).find('\n'), std::string::npos);

  set = PromptSet::load("/nonexistent/p.safetensors", request(1, 1, 1, 1));
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(set.status().message().find("/nonexistent/p.safetensors"),
            absl::string_view::npos);

  PromptRequest none;
  none.function = "step";
  set = PromptSet::load(path, none);
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().message(),
            "--prompts " + path +
                ": @step takes no prompt_embeds or pooled_prompt_embeds "
                "input, so it uses no prompts");
}

PromptRequest withNegatives(PromptRequest r) {
  r.negativeEmbeds = true;
  r.negativePooled = true;
  return r;
}

/// countingSet plus negatives: every element of negative_prompt_embeds is
/// -1, of negative_pooled_prompt_embeds -2.
std::vector<NamedTensor> setWithNegatives(int64_t n, int64_t l, int64_t d,
                                          int64_t dp) {
  std::vector<NamedTensor> set = countingSet(n, l, d, dp);
  set.push_back({"negative_prompt_embeds",
                 HostTensor::fromDoubles(DType::F32, {1, l, d},
                                         std::vector<double>(l * d, -1.0))});
  set.push_back({"negative_pooled_prompt_embeds",
                 HostTensor::fromDoubles(DType::F32, {1, dp},
                                         std::vector<double>(dp, -2.0))});
  return set;
}

TEST(PromptSet, NegativesAndTextsFromTheFile) {
  std::string path = tempPath("negatives.safetensors");
  ASSERT_TRUE(checkpoint::writeSafetensors(
                  path, setWithNegatives(3, 2, 2, 3),
                  {{"prompts", R"(["a cat", "the \"dog\"", "ü"])"},
                   {"negative_prompt", "blurry"},
                   {"prompt_fields", "[{}, {}, {}]"}})
                  .ok());
  absl::StatusOr<PromptSet> set =
      PromptSet::load(path, withNegatives(request(2, 2, 2, 3)));
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_TRUE(set->hasNegatives());
  EXPECT_EQ(set->texts(),
            (std::vector<std::string>{"a cat", "the \"dog\"", "ü"}));
  ASSERT_TRUE(set->negativeText().has_value());
  EXPECT_EQ(*set->negativeText(), "blurry");
  EXPECT_EQ(set->negativeEmbeds(),
            HostTensor::fromDoubles(DType::F32, {1, 2, 2}, {-1, -1, -1, -1}));
  EXPECT_EQ(set->negativePooled(),
            HostTensor::fromDoubles(DType::F32, {1, 3}, {-2, -2, -2}));
  // The prompts themselves are unchanged by the negatives.
  EXPECT_EQ(set->embeds(1).floats()[0], 2.0);
}

TEST(PromptSet, NoNegativesInTheFileOrBuiltInAreZeros) {
  std::string path = tempPath("no-negatives.safetensors");
  ASSERT_TRUE(checkpoint::writeSafetensors(path, countingSet(2, 2, 2, 3)).ok());
  PromptRequest r = withNegatives(request(1, 2, 2, 3));
  absl::StatusOr<PromptSet> set = PromptSet::load(path, r);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_FALSE(set->hasNegatives());
  EXPECT_TRUE(set->texts().empty());
  EXPECT_FALSE(set->negativeText().has_value());
  EXPECT_EQ(set->negativeEmbeds(), HostTensor(DType::F32, {1, 2, 2}));
  EXPECT_EQ(set->negativePooled(), HostTensor(DType::F32, {1, 3}));
  EXPECT_EQ(set->negativePooled().floats()[2], 0.0);

  PromptSet synthetic = PromptSet::synthetic(r);
  EXPECT_FALSE(synthetic.hasNegatives());
  EXPECT_TRUE(synthetic.texts().empty());
  EXPECT_EQ(synthetic.negativeEmbeds(), HostTensor(DType::F32, {1, 2, 2}));
}

TEST(PromptSet, NegativesTheStepDoesNotTakeAreIgnored) {
  std::string path = tempPath("unused-negatives.safetensors");
  std::vector<NamedTensor> tensors = setWithNegatives(2, 2, 2, 3);
  // Of the wrong shape, but not taken: no error.
  tensors[2].tensor = HostTensor(DType::F32, {4, 5});
  ASSERT_TRUE(checkpoint::writeSafetensors(path, tensors).ok());
  absl::StatusOr<PromptSet> set = PromptSet::load(path, request(1, 2, 2, 3));
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_FALSE(set->hasNegatives());
}

TEST(PromptSet, NegativeAndTextErrors) {
  struct Case {
    std::vector<NamedTensor> tensors;
    std::map<std::string, std::string> metadata;
    std::string message; // the whole message after "<path>: "
  };
  PromptRequest r = withNegatives(request(1, 2, 2, 3));
  std::vector<NamedTensor> good = setWithNegatives(2, 2, 2, 3);
  std::vector<NamedTensor> onlyOne = good;
  onlyOne.pop_back();
  std::vector<NamedTensor> two = good;
  two[2].tensor = HostTensor(DType::F32, {2, 2, 2});
  std::vector<NamedTensor> wrongDim = good;
  wrongDim[3].tensor = HostTensor(DType::F32, {1, 4});
  std::vector<NamedTensor> wrongDtype = good;
  wrongDtype[3].tensor.retype(DType::F16);
  const Case cases[] = {
      {onlyOne,
       {},
       "no tensor 'negative_pooled_prompt_embeds', expected tensor<Nx3xf32> "
       "(Dp = 3 from @train_step's negative_pooled_prompt_embeds); found "
       "tensors: negative_prompt_embeds, pooled_prompt_embeds, prompt_embeds"},
      {two,
       {},
       "tensor 'negative_prompt_embeds' holds 2 prompts, expected 1 (the "
       "negative prompt, for every sample)"},
      {wrongDim,
       {},
       "tensor 'negative_pooled_prompt_embeds' is tensor<1x4xf32>, expected "
       "tensor<Nx3xf32> (Dp = 3 from @train_step's "
       "negative_pooled_prompt_embeds)"},
      {wrongDtype,
       {},
       "tensor 'negative_pooled_prompt_embeds' is tensor<1x3xf16>, expected "
       "tensor<Nx3xf32> (dtype f32)"},
      {good,
       {{"prompts", R"(["one"])"}},
       "metadata 'prompts' lists 1 texts, expected 2 (one per prompt)"},
      {good,
       {{"prompts", R"(["one", 2])"}},
       "metadata 'prompts' element 1 is an integer, expected a string"},
      {good,
       {{"prompts", R"({"a": "b"})"}},
       "metadata 'prompts' is an object, expected a list of 2 strings"},
  };
  int n = 0;
  for (const Case &c : cases) {
    std::string path =
        tempPath("badneg" + std::to_string(n++) + ".safetensors");
    ASSERT_TRUE(checkpoint::writeSafetensors(path, c.tensors, c.metadata).ok());
    absl::StatusOr<PromptSet> set = PromptSet::load(path, r);
    ASSERT_FALSE(set.ok()) << c.message;
    EXPECT_EQ(set.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(set.status().message(), path + ": " + c.message);
  }
  // Metadata that is not JSON: one line naming the key.
  std::string path = tempPath("badjson.safetensors");
  ASSERT_TRUE(
      checkpoint::writeSafetensors(path, good, {{"prompts", "[\"a\","}}).ok());
  absl::StatusOr<PromptSet> set = PromptSet::load(path, r);
  ASSERT_FALSE(set.ok());
  std::string message(set.status().message());
  EXPECT_EQ(message.rfind(path + ": metadata 'prompts' is not JSON (", 0), 0u)
      << message;
  EXPECT_EQ(message.find('\n'), std::string::npos);
}

} // namespace
} // namespace omni::train
