//===- DiffusersConfigTest.cpp - configs from diffusers folders -----------===//
//
// The committed tiny folder (bench/torch/make_tiny_diffusers.py) maps to
// exactly the tiny presets; every key of the presets is set; SD3.0 and
// SD3.5-medium configs (as diffusers writes them) map to the sd3.5-medium
// preset's values; unsupported values, unknown and missing keys are one
// line naming the file and the key.
//
//===----------------------------------------------------------------------===//

#include "frontends/models/DiffusersConfig.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

using namespace omni::fe;
using namespace omni::fe::diffusers;

namespace {

const char *kFolder = OMNI_SOURCE_DIR "/test/train/Inputs/diffusers/tiny-sd3";

Config preset(const std::string &model, const std::string &name) {
  llvm::Expected<Config> c = Registry::builtin().config(model, name, {});
  EXPECT_TRUE(static_cast<bool>(c));
  return c ? *c : Config();
}

template <typename T> std::string errorOf(llvm::Expected<T> v) {
  return v ? std::string("(no error)") : llvm::toString(v.takeError());
}

// SD3.5-medium's transformer/config.json as diffusers writes it.
const char *kMedium = R"({
  "_class_name": "SD3Transformer2DModel", "_diffusers_version": "0.31.0",
  "attention_head_dim": 64, "caption_projection_dim": 1536,
  "dual_attention_layers": [0,1,2,3,4,5,6,7,8,9,10,11,12],
  "in_channels": 16, "joint_attention_dim": 4096, "num_attention_heads": 24,
  "num_layers": 24, "out_channels": 16, "patch_size": 2,
  "pooled_projection_dim": 2048, "pos_embed_max_size": 384,
  "qk_norm": "rms_norm", "sample_size": 128})";

TEST(DiffusersConfig, TinyFolderIsTheTinyPresets) {
  llvm::Expected<FolderConfigs> f = readFolder(kFolder);
  ASSERT_TRUE(static_cast<bool>(f)) << llvm::toString(f.takeError());
  // The folder has no tokenizer: 77 CLIP + 256 T5 tokens.
  Config want = preset("sd3", "tiny");
  want.set("text_tokens", "333");
  EXPECT_EQ(f->transformer.values(), want.values());
  EXPECT_EQ(f->vae.values(), preset("autoencoder_kl", "tiny").values());
  EXPECT_EQ(f->textTokensFrom, "the default 77 CLIP + 256 T5 tokens");
  // The configs build.
  EXPECT_TRUE(static_cast<bool>(
      Registry::builtin().makeVelocity("sd3", f->transformer)));
  EXPECT_TRUE(static_cast<bool>(
      Registry::builtin().makeDecoder("autoencoder_kl", f->vae)));
  std::vector<std::string> a = assignments(f->vae);
  EXPECT_EQ(a.size(), f->vae.values().size());
  EXPECT_EQ(a.front(), "block_out_channels=32,32");
}

TEST(DiffusersConfig, Sd35MediumIsThePreset) {
  llvm::Expected<Config> c =
      sd3ConfigFromJson(kMedium, "transformer/config.json", 333);
  ASSERT_TRUE(static_cast<bool>(c)) << llvm::toString(c.takeError());
  EXPECT_EQ(c->values(), preset("sd3", "sd3.5-medium").values());
}

TEST(DiffusersConfig, Sd30DefaultsAndNulls) {
  // SD3-medium (3.0): no qk_norm, no dual attention, out_channels null.
  llvm::Expected<Config> c = sd3ConfigFromJson(
      R"({"_class_name": "SD3Transformer2DModel", "attention_head_dim": 64,
          "caption_projection_dim": 1536, "in_channels": 16,
          "joint_attention_dim": 4096, "num_attention_heads": 24,
          "num_layers": 24, "out_channels": null, "patch_size": 2,
          "pooled_projection_dim": 2048, "pos_embed_max_size": 192,
          "sample_size": 128})",
      "c.json", 154);
  ASSERT_TRUE(static_cast<bool>(c)) << llvm::toString(c.takeError());
  EXPECT_EQ(c->getString("qk_norm"), "none");
  EXPECT_EQ(c->getString("dual_attention_layers"), "");
  EXPECT_EQ(c->getInt("out_channels"), 16);
  EXPECT_EQ(c->getInt("latent_size"), 128);
  EXPECT_EQ(c->getInt("text_tokens"), 154);
  EXPECT_TRUE(static_cast<bool>(Registry::builtin().makeVelocity("sd3", *c)));
}

TEST(DiffusersConfig, TransformerErrorsNameFileAndKey) {
  auto err = [](const std::string &from, const std::string &to) {
    std::string text = kMedium;
    size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    return errorOf(sd3ConfigFromJson(text, "t/config.json", 333));
  };
  EXPECT_EQ(err("\"num_layers\": 24,", ""),
            "t/config.json: missing key 'num_layers'");
  EXPECT_EQ(err("\"num_layers\": 24", "\"num_layers\": 2.5"),
            "t/config.json: key 'num_layers' is 2.5, expected an integer");
  EXPECT_EQ(err("\"rms_norm\"", "\"layer_norm\""),
            "t/config.json: key 'qk_norm' is \"layer_norm\", expected "
            "\"rms_norm\" (null or rms_norm are the qk norms sd3 builds)");
  EXPECT_EQ(err("\"sample_size\": 128", "\"sample_size\": 128, \"x\": 1"),
            "t/config.json: key 'x' is not one omnigen's sd3 "
            "(SD3Transformer2DModel) knows (unsupported: a model built "
            "without it would differ)");
  EXPECT_EQ(err("[0,1,2,3,4,5,6,7,8,9,10,11,12]", "[0, \"a\"]"),
            "t/config.json: key 'dual_attention_layers' is [0,\"a\"], "
            "expected an array of integers");
  EXPECT_EQ(err("\"SD3Transformer2DModel\"", "\"FluxTransformer2DModel\""),
            "t/config.json: key '_class_name' is \"FluxTransformer2DModel\", "
            "expected \"SD3Transformer2DModel\"");
  EXPECT_EQ(errorOf(sd3ConfigFromJson("[1]", "t/config.json", 1)),
            "t/config.json: is [1], expected a JSON object");
  EXPECT_NE(errorOf(sd3ConfigFromJson("{", "t/config.json", 1))
                .rfind("t/config.json: not valid JSON: ", 0),
            std::string::npos);
}

TEST(DiffusersConfig, VaeChecksWhatTheDecoderBuilds) {
  std::string base = R"({"_class_name": "AutoencoderKL", "act_fn": "silu",
    "block_out_channels": [128, 256, 512, 512],
    "down_block_types": ["DownEncoderBlock2D", "DownEncoderBlock2D",
                         "DownEncoderBlock2D", "DownEncoderBlock2D"],
    "force_upcast": true, "in_channels": 3, "latent_channels": 16,
    "latents_mean": null, "latents_std": null, "layers_per_block": 2,
    "mid_block_add_attention": true, "norm_num_groups": 32,
    "out_channels": 3, "sample_size": 1024, "scaling_factor": 1.5305,
    "shift_factor": 0.0609,
    "up_block_types": ["UpDecoderBlock2D", "UpDecoderBlock2D",
                       "UpDecoderBlock2D", "UpDecoderBlock2D"],
    "use_post_quant_conv": false, "use_quant_conv": false})";
  llvm::Expected<Config> c = vaeConfigFromJson(base, "vae/config.json", 64);
  ASSERT_TRUE(static_cast<bool>(c)) << llvm::toString(c.takeError());
  EXPECT_EQ(c->values(), preset("autoencoder_kl", "sd3").values());

  auto err = [&](const std::string &from, const std::string &to) {
    std::string text = base;
    size_t at = text.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    text.replace(at, from.size(), to);
    return errorOf(vaeConfigFromJson(text, "vae/config.json", 64));
  };
  EXPECT_EQ(err("\"silu\"", "\"gelu\""),
            "vae/config.json: key 'act_fn' is \"gelu\", expected \"silu\" "
            "(the activation autoencoder_kl builds)");
  EXPECT_EQ(err("\"layers_per_block\": 2,", ""),
            "vae/config.json: missing key 'layers_per_block'");
  EXPECT_EQ(err("\"up_block_types\": [\"UpDecoderBlock2D\", ",
                "\"up_block_types\": ["),
            "vae/config.json: key 'up_block_types' is "
            "[\"UpDecoderBlock2D\",\"UpDecoderBlock2D\",\"UpDecoderBlock2D\"], "
            "expected 4 times \"UpDecoderBlock2D\" (one per block_out_channels "
            "entry, the blocks autoencoder_kl builds)");
  EXPECT_EQ(err("\"shift_factor\": 0.0609", "\"shift_factor\": null"),
            "(no error)");
  EXPECT_EQ(err("\"use_post_quant_conv\": false", "\"use_post_quant_conv\": 1"),
            "vae/config.json: key 'use_post_quant_conv' is 1, expected true or "
            "false");
  EXPECT_EQ(err("\"in_channels\": 3,", "\"in_channels\": 3, \"norm\": 1,"),
            "vae/config.json: key 'norm' is not one omnigen's autoencoder_kl "
            "(AutoencoderKL) knows (unsupported: a model built without it "
            "would differ)");
}

TEST(DiffusersConfig, ModelIndex) {
  EXPECT_EQ(
      errorOf(checkModelIndex(R"({"_class_name": "FluxPipeline"})", "m.json")),
      "m.json: pipeline '_class_name' is \"FluxPipeline\", expected "
      "\"StableDiffusion3Pipeline\" (omnigen --from-diffusers reads SD3 "
      "and SD3.5 folders)");
  EXPECT_EQ(errorOf(checkModelIndex(
                R"({"_class_name": "StableDiffusion3Pipeline",
                    "transformer": ["diffusers", "SD3Transformer2DModel"],
                    "vae": ["diffusers", "AutoencoderTiny"]})",
                "m.json")),
            "m.json: key 'vae' is [\"diffusers\",\"AutoencoderTiny\"], "
            "expected [\"diffusers\", \"AutoencoderKL\"]");
  llvm::Expected<bool> tok = checkModelIndex(
      R"({"_class_name": "StableDiffusion3Pipeline",
          "tokenizer": ["transformers", "CLIPTokenizer"],
          "transformer": ["diffusers", "SD3Transformer2DModel"],
          "vae": ["diffusers", "AutoencoderKL"]})",
      "m.json");
  ASSERT_TRUE(static_cast<bool>(tok));
  EXPECT_TRUE(*tok);
  EXPECT_EQ(errorOf(readFolder("/nonexistent/x")),
            "--from-diffusers /nonexistent/x: no such folder, expected a "
            "diffusers pipeline folder with model_index.json");
}

void writeFile(const std::string &path, llvm::StringRef text) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  ASSERT_FALSE(ec) << path;
  os << text;
}

TEST(DiffusersConfig, TextTokensFromTheTokenizer) {
  // A copy of the tiny folder's configs whose model_index names a CLIP
  // tokenizer with its tokenizer_config.json.
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("diffusers", dir));
  std::string d(dir);
  for (const char *sub : {"transformer", "vae", "tokenizer"})
    ASSERT_FALSE(llvm::sys::fs::create_directory(d + "/" + sub));
  for (const char *f : {"transformer/config.json", "vae/config.json"})
    ASSERT_FALSE(
        llvm::sys::fs::copy_file(std::string(kFolder) + "/" + f, d + "/" + f));
  writeFile(d + "/model_index.json",
            R"({"_class_name": "StableDiffusion3Pipeline",
                "tokenizer": ["transformers", "CLIPTokenizer"],
                "transformer": ["diffusers", "SD3Transformer2DModel"],
                "vae": ["diffusers", "AutoencoderKL"]})");
  writeFile(d + "/tokenizer/tokenizer_config.json",
            R"({"model_max_length": 64, "pad_token": "!"})");
  llvm::Expected<FolderConfigs> f = readFolder(d);
  ASSERT_TRUE(static_cast<bool>(f)) << llvm::toString(f.takeError());
  EXPECT_EQ(f->transformer.getInt("text_tokens"), 64 + 256);
  EXPECT_EQ(f->textTokensFrom, "64 CLIP (" + d +
                                   "/tokenizer/tokenizer_config.json) + 256 T5 "
                                   "tokens");
  // transformers' "no limit" (1e30) is no prompt length.
  writeFile(d + "/tokenizer/tokenizer_config.json",
            R"({"model_max_length": 1000000000000000019884624838656})");
  EXPECT_EQ(errorOf(readFolder(d)),
            d + "/tokenizer/tokenizer_config.json: key 'model_max_length' is "
                "1e+30, expected the CLIP prompt length (an "
                "integer in [1, 100000])");
  llvm::sys::fs::remove_directories(d);
}

} // namespace
