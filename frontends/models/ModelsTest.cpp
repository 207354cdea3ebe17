//===- ModelsTest.cpp - the registered velocity models --------------------===//
//
// - `sd3` against diffusers' SD3Transformer2DModel, through the fixture that
//   bench/torch/sd3_reference.py writes (testdata/sd3_*): the tiny preset's
//   parameter names and shapes equal diffusers', its velocity equals
//   diffusers' in float32 and float64 (also at a latent size other than
//   sample_size, which crops the position table elsewhere), and the
//   sd3.5-medium preset is the real SD3.5-Medium transformer (names,
//   shapes, parameter count). The weights are not stored: both sides
//   generate them from the parameter names (fixtureWeights below,
//   `fixture_weights` in bench/torch/vae_reference.py).
// - `qwen_image` against diffusers' QwenImageTransformer2DModel through the
//   fixture of bench/torch/qwen_image_reference.py (testdata/qwen_image_*,
//   qwen-image.params.txt): names and shapes, the velocity (packed 2x2,
//   rotary) in float32 and float64, unmasked and with a text mask that
//   pads a prompt (encoder_hidden_states_mask), a padded prompt equal to
//   the shorter prompt, an odd patch grid, the 20 B preset;
// - every preset of every velocity model builds a module that verifies;
// - `dit`: the velocity has the latent's shape and depends on the timestep;
// - bad config overrides are one-line errors.
//
//===----------------------------------------------------------------------===//

#include "frontends/builder/Model.h"
#include "frontends/builder/testing/TestUtil.h"
#include "frontends/models/testing/Fixture.h"
#include "runtime/io/Npy.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

using namespace omni;
using namespace omni::fe;
using namespace omni::fe::testing;

namespace {

/// `velocity(x, timestep[, prompt][, pooled][, prompt_mask], params...) -> v`
/// of one model preset, as a recipe builds it.
struct Built {
  mlir::MLIRContext context;
  Graph graph{context};
  Function fn{graph, "velocity", /*isPublic=*/true};
  ParamSet params;
  LoraOptions lora;
  std::unique_ptr<VelocityModel> model;
  Tensor v;

  /// `withMask`: a model that takes a text mask gets the argument
  /// `prompt_mask` [B, L] after the conditioning (else none: all valid).
  Built(const std::string &name, const std::string &preset,
        const std::vector<std::string> &overrides, int64_t batch,
        int64_t loraRank = 0, bool withMask = false) {
    const Registry &r = Registry::builtin();
    llvm::Expected<Config> cfg = r.config(name, preset, overrides);
    EXPECT_TRUE(static_cast<bool>(cfg)) << llvm::toString(cfg.takeError());
    if (!cfg)
      return;
    auto made = r.makeVelocity(name, *cfg);
    EXPECT_TRUE(static_cast<bool>(made)) << llvm::toString(made.takeError());
    if (!made)
      return;
    model = std::move(*made);
    auto batched = [&](Shape s) {
      s.insert(s.begin(), batch);
      return s;
    };
    ConditioningShapes cs = model->conditioning();
    Tensor x = fn.argument(batched(model->latentShape()), "x");
    Tensor t = fn.argument(Shape{batch}, "timestep");
    Tensor prompt = cs.promptEmbeds.empty()
                        ? Tensor()
                        : fn.argument(batched(cs.promptEmbeds), "prompt");
    Tensor pooled = cs.pooled.empty()
                        ? Tensor()
                        : fn.argument(batched(cs.pooled), "pooled");
    Tensor mask =
        withMask && cs.promptMask
            ? fn.argument(Shape{batch, cs.promptEmbeds[0]}, "prompt_mask")
            : Tensor();
    lora.rank = loraRank;
    lora.alpha = static_cast<double>(loraRank);
    lora.targets = model->loraTargets();
    Module m(fn, params, "", &lora);
    v = model->forward(m, x, t, prompt, pooled, mask);
    fn.returns({v}, {"v"});
  }

  bool verifies() { return mlir::succeeded(mlir::verify(graph.module())); }

  /// The velocity on `inputs` (x, timestep, conditioning) with the
  /// fixture's weights.
  HostTensor run(std::vector<HostTensor> inputs, reference::Precision p) {
    for (const auto &[name, t] : fn.parameters())
      inputs.push_back(fixtureWeights(name, t.shape()));
    absl::StatusOr<std::vector<HostTensor>> out =
        evaluate(graph, "velocity", inputs, p);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? out->front() : HostTensor();
  }
};

std::vector<HostTensor> sd3TinyInputs() {
  return {readNpy("sd3_tiny.x.npy"), readNpy("sd3_tiny.timestep.npy"),
          readNpy("sd3_tiny.prompt.npy"), readNpy("sd3_tiny.pooled.npy")};
}

TEST(ModelsTest, Sd3IsRegistered) {
  const ModelEntry *e = Registry::builtin().find("sd3");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->kind, ModelKind::Velocity);
  ASSERT_EQ(e->presets.size(), 3u);
  EXPECT_EQ(e->presets[0].first, "tiny");
  EXPECT_EQ(e->presets[1].first, "small");
  EXPECT_EQ(e->presets[2].first, "sd3.5-medium");
  Built b("sd3", "sd3.5-medium", {"latent_size=64"}, 1);
  ASSERT_TRUE(b.model);
  EXPECT_EQ(b.model->latentShape(), (Shape{16, 64, 64}));
  EXPECT_EQ(b.model->conditioning().promptEmbeds, (Shape{333, 4096}));
  EXPECT_EQ(b.model->conditioning().pooled, (Shape{2048}));
  EXPECT_EQ(b.v.shape(), (Shape{1, 16, 64, 64}));
}

TEST(ModelsTest, Sd3TinyNamesAndShapesAreDiffusers) {
  Built b("sd3", "tiny", {}, 2);
  ASSERT_TRUE(b.model);
  int64_t total = -1;
  EXPECT_EQ(namesOf(b.params), readParams("sd3_tiny.params.txt", &total));
  EXPECT_EQ(b.params.numElements(), total);
  EXPECT_EQ(b.v.shape(), (Shape{2, 16, 16, 16}));
}

TEST(ModelsTest, Sd3TinyVelocityIsDiffusersFloat32) {
  Built b("sd3", "tiny", {}, 2);
  ASSERT_TRUE(b.model);
  HostTensor got = b.run(sd3TinyInputs(), reference::Precision::F32);
  HostTensor want = readNpy("sd3_tiny.velocity.npy");
  ASSERT_EQ(got.shape(), want.shape());
  EXPECT_LT(relativeError(got, valuesOf(want)), 1e-5);
}

TEST(ModelsTest, Sd3TinyVelocityIsDiffusersFloat64) {
  Built b("sd3", "tiny", {}, 2);
  ASSERT_TRUE(b.model);
  HostTensor got = b.run(sd3TinyInputs(), reference::Precision::F64);
  HostTensor want = readNpy("sd3_tiny.velocity_f64.npy");
  ASSERT_EQ(got.shape(), want.shape());
  // diffusers computes the timestep sinusoids in float32 even in a float64
  // model; everything else agrees to float64 rounding.
  EXPECT_LT(relativeError(got, valuesOf(want)), 1e-6);
}

TEST(ModelsTest, Sd3CropsThePositionTableAsDiffusers) {
  // A 6x6 patch grid of the 16x16 table (sample_size 16 sets its scale).
  Built b("sd3", "tiny", {"latent_size=12"}, 1);
  ASSERT_TRUE(b.model);
  std::vector<HostTensor> in = sd3TinyInputs();
  in[0] = readNpy("sd3_tiny_12.x.npy");
  for (size_t i = 1; i < in.size(); ++i) { // the first sample's conditioning
    Shape s = in[i].shape();
    s[0] = 1;
    std::vector<double> v = valuesOf(in[i]);
    v.resize(numElementsOf(s));
    in[i] = HostTensor::fromDoubles(DType::F32, s, v);
  }
  HostTensor got = b.run(in, reference::Precision::F64);
  HostTensor want = readNpy("sd3_tiny_12.velocity_f64.npy");
  ASSERT_EQ(got.shape(), want.shape());
  EXPECT_LT(relativeError(got, valuesOf(want)), 1e-6);
}

TEST(ModelsTest, Sd35MediumIsTheRealTransformer) {
  Built b("sd3", "sd3.5-medium", {}, 1);
  ASSERT_TRUE(b.model);
  EXPECT_TRUE(b.verifies());
  int64_t total = -1;
  EXPECT_EQ(namesOf(b.params), readParams("sd3.5-medium.params.txt", &total));
  // diffusers 0.42.1: SD3Transformer2DModel(**the SD3.5-Medium config)
  // .named_parameters(), without the 1x147456x1536 pos_embed buffer.
  EXPECT_EQ(total, 2243171520);
  EXPECT_EQ(b.params.numElements(), 2243171520);
  EXPECT_EQ(b.v.shape(), (Shape{1, 16, 128, 128}));
}

TEST(ModelsTest, EveryVelocityPresetVerifies) {
  for (const ModelEntry &e : Registry::builtin().entries()) {
    if (e.kind != ModelKind::Velocity)
      continue;
    for (const auto &[preset, cfg] : e.presets) {
      SCOPED_TRACE(e.name + " " + preset);
      Built b(e.name, preset, {}, 2);
      ASSERT_TRUE(b.model);
      EXPECT_TRUE(b.verifies());
      Shape want = b.model->latentShape();
      want.insert(want.begin(), 2);
      EXPECT_EQ(b.v.shape(), want);
    }
  }
}

TEST(ModelsTest, Sd3LoraTargetsArePeftNames) {
  Built b("sd3", "tiny", {}, 2, /*loraRank=*/4);
  ASSERT_TRUE(b.model);
  EXPECT_TRUE(b.verifies());
  std::vector<std::string> trained;
  for (const ParamSpec &s : b.params.specs())
    if (s.trainable)
      trained.push_back(s.name);
  // Block 0 has every target; the last (context_pre_only) no to_add_out;
  // attn2 (dual attention) is not a target.
  EXPECT_EQ(trained.size(), 2u * (8 + 7));
  for (const std::string &n : trained)
    EXPECT_EQ(n.find("attn2"), std::string::npos) << n;
  EXPECT_NE(b.params.find("transformer_blocks.0.attn.to_add_out.lora_B.weight"),
            nullptr);
  const ParamSpec *a =
      b.params.find("transformer_blocks.1.attn.add_q_proj.lora_A.weight");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->shape, (Shape{4, 64}));
}

TEST(ModelsTest, DiTVelocityDependsOnTheTimestep) {
  Built b("dit", "tiny", {}, 2);
  ASSERT_TRUE(b.model);
  EXPECT_TRUE(b.verifies());
  Shape latent = b.model->latentShape();
  EXPECT_EQ(b.v.shape(), (Shape{2, latent[0], latent[1], latent[2]}));
  Shape xs = latent;
  xs.insert(xs.begin(), 2);
  HostTensor x = randomF32(xs, 1);
  HostTensor pooled = randomF32({2, b.model->conditioning().pooled[0]}, 2);
  auto at = [&](double t0, double t1) {
    HostTensor t = HostTensor::fromDoubles(DType::F32, {2}, {t0, t1});
    return b.run({x, t, pooled}, reference::Precision::F32);
  };
  HostTensor early = at(100.0, 900.0), late = at(900.0, 100.0);
  ASSERT_EQ(early.shape(), xs);
  double diff = 0.0;
  for (int64_t i = 0; i < early.numElements(); ++i) {
    ASSERT_TRUE(std::isfinite(early.doubleAt(i)));
    diff = std::max(diff, std::abs(early.doubleAt(i) - late.doubleAt(i)));
  }
  EXPECT_GT(diff, 1e-3);
  EXPECT_EQ(at(100.0, 900.0), early); // deterministic
}

std::vector<HostTensor> qwenTinyInputs() {
  return {readNpy("qwen_image_tiny.x.npy"),
          readNpy("qwen_image_tiny.timestep.npy"),
          readNpy("qwen_image_tiny.prompt.npy")};
}

TEST(ModelsTest, QwenImageIsRegistered) {
  const ModelEntry *e = Registry::builtin().find("qwen_image");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->kind, ModelKind::Velocity);
  ASSERT_EQ(e->presets.size(), 3u);
  EXPECT_EQ(e->presets[0].first, "tiny");
  EXPECT_EQ(e->presets[1].first, "small");
  EXPECT_EQ(e->presets[2].first, "qwen-image");
  Built b("qwen_image", "tiny", {}, 2);
  ASSERT_TRUE(b.model);
  // 16 latent channels (in_channels 64 = 16 x the 2x2 patch), no pooled.
  EXPECT_EQ(b.model->latentShape(), (Shape{16, 16, 16}));
  EXPECT_EQ(b.model->conditioning().promptEmbeds, (Shape{8, 32}));
  EXPECT_TRUE(b.model->conditioning().pooled.empty());
}

TEST(ModelsTest, QwenImageTinyNamesAndShapesAreDiffusers) {
  Built b("qwen_image", "tiny", {}, 2);
  ASSERT_TRUE(b.model);
  int64_t total = -1;
  EXPECT_EQ(namesOf(b.params),
            readParams("qwen_image_tiny.params.txt", &total));
  EXPECT_EQ(b.params.numElements(), total);
  EXPECT_EQ(b.v.shape(), (Shape{2, 16, 16, 16}));
}

TEST(ModelsTest, QwenImageTinyVelocityIsDiffusersFloat32) {
  Built b("qwen_image", "tiny", {}, 2);
  ASSERT_TRUE(b.model);
  HostTensor got = b.run(qwenTinyInputs(), reference::Precision::F32);
  HostTensor want = readNpy("qwen_image_tiny.velocity.npy");
  ASSERT_EQ(got.shape(), want.shape());
  EXPECT_LT(relativeError(got, valuesOf(want)), 1e-5);
}

TEST(ModelsTest, QwenImageTinyVelocityIsDiffusersFloat64) {
  Built b("qwen_image", "tiny", {}, 2);
  ASSERT_TRUE(b.model);
  HostTensor got = b.run(qwenTinyInputs(), reference::Precision::F64);
  HostTensor want = readNpy("qwen_image_tiny.velocity_f64.npy");
  ASSERT_EQ(got.shape(), want.shape());
  // diffusers computes the timestep sinusoids and the rotary angles in
  // float32 even in a float64 model (so do our tables); the rest agrees to
  // float64 rounding.
  EXPECT_LT(relativeError(got, valuesOf(want)), 1e-6);
}

std::vector<HostTensor> qwenMaskedInputs() {
  std::vector<HostTensor> in = qwenTinyInputs();
  in.push_back(readNpy("qwen_image_tiny.mask.npy"));
  return in;
}

/// Sample `b` of `t` ([B, ...]) as a [1, ...] tensor, its first `keep`
/// entries along dimension 1 (-1: all).
HostTensor sampleOf(const HostTensor &t, int64_t b, int64_t keep = -1) {
  Shape s = t.shape();
  int64_t rows = s[1], row = numElementsOf(s) / s[0] / rows;
  std::vector<double> all = valuesOf(t), out;
  if (keep < 0)
    keep = rows;
  for (int64_t i = 0; i < keep * row; ++i)
    out.push_back(all[(b * rows) * row + i]);
  s[0] = 1;
  s[1] = keep;
  return HostTensor::fromDoubles(t.dtype(), s, out);
}

TEST(ModelsTest, QwenImageTinyMaskedVelocityIsDiffusersFloat32) {
  // encoder_hidden_states_mask with the second prompt's last 3 tokens
  // padded: diffusers' joint key padding mask over [txt; img].
  Built b("qwen_image", "tiny", {}, 2, 0, /*withMask=*/true);
  ASSERT_TRUE(b.model);
  HostTensor got = b.run(qwenMaskedInputs(), reference::Precision::F32);
  HostTensor want = readNpy("qwen_image_tiny_masked.velocity.npy");
  ASSERT_EQ(got.shape(), want.shape());
  EXPECT_LT(relativeError(got, valuesOf(want)), 1e-5);
  // The mask matters: the padded sample differs from the unmasked one.
  HostTensor unmasked = readNpy("qwen_image_tiny.velocity.npy");
  EXPECT_GT(relativeError(sampleOf(got, 1), valuesOf(sampleOf(unmasked, 1))),
            1e-3);
}

TEST(ModelsTest, QwenImageTinyMaskedVelocityIsDiffusersFloat64) {
  Built b("qwen_image", "tiny", {}, 2, 0, /*withMask=*/true);
  ASSERT_TRUE(b.model);
  HostTensor got = b.run(qwenMaskedInputs(), reference::Precision::F64);
  HostTensor want = readNpy("qwen_image_tiny_masked.velocity_f64.npy");
  ASSERT_EQ(got.shape(), want.shape());
  EXPECT_LT(relativeError(got, valuesOf(want)), 1e-6);
  // Sample 0's mask is all ones: exactly the unmasked model's velocity.
  HostTensor unmasked = readNpy("qwen_image_tiny.velocity_f64.npy");
  EXPECT_LT(relativeError(sampleOf(got, 0), valuesOf(sampleOf(unmasked, 0))),
            1e-6);
}

TEST(ModelsTest, QwenImagePaddedPromptIsTheShorterPrompt) {
  // Masked keys get no attention weight in any row and the valid text
  // tokens keep their rotary positions, so a prompt padded from 5 to 8
  // tokens gives the 5-token prompt's velocity. Both batches hold the same
  // two samples: sample 1 alone in a batch of 1 differs from sample 1 of
  // this batch of 2 by about 3e-8 relative even without a mask (in the
  // float64 evaluator; a property of the unmasked model, not of the mask).
  Built padded("qwen_image", "tiny", {}, 2, 0, /*withMask=*/true);
  Built shorter("qwen_image", "tiny", {"text_tokens=5"}, 2);
  ASSERT_TRUE(padded.model && shorter.model);
  std::vector<HostTensor> in = qwenMaskedInputs();
  HostTensor v8 = padded.run(in, reference::Precision::F64);
  std::vector<double> p = valuesOf(in[2]), p5;
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < 5 * 32; ++i)
      p5.push_back(p[b * 8 * 32 + i]);
  HostTensor v5 = shorter.run(
      {in[0], in[1], HostTensor::fromDoubles(DType::F32, {2, 5, 32}, p5)},
      reference::Precision::F64);
  HostTensor got = sampleOf(v8, 1), want = sampleOf(v5, 1);
  ASSERT_EQ(got.shape(), want.shape());
  EXPECT_LT(relativeError(got, valuesOf(want)), 1e-12);
}

TEST(ModelsTest, QwenImageOddGridIsDiffusers) {
  // A 5x5 patch grid: scale_rope's uneven split (rows -3..1) and the text
  // offset max(h/2, w/2) = 2 differ from the 8x8 grid's.
  Built b("qwen_image", "tiny", {"latent_size=10"}, 1);
  ASSERT_TRUE(b.model);
  std::vector<HostTensor> in = qwenTinyInputs();
  in[0] = readNpy("qwen_image_tiny_10.x.npy");
  for (size_t i = 1; i < in.size(); ++i) { // the first sample's conditioning
    Shape s = in[i].shape();
    s[0] = 1;
    std::vector<double> v = valuesOf(in[i]);
    v.resize(numElementsOf(s));
    in[i] = HostTensor::fromDoubles(DType::F32, s, v);
  }
  HostTensor got = b.run(in, reference::Precision::F64);
  HostTensor want = readNpy("qwen_image_tiny_10.velocity_f64.npy");
  ASSERT_EQ(got.shape(), want.shape());
  EXPECT_LT(relativeError(got, valuesOf(want)), 1e-6);
}

TEST(ModelsTest, QwenImagePresetIsTheRealTransformer) {
  Built b("qwen_image", "qwen-image", {}, 1);
  ASSERT_TRUE(b.model);
  EXPECT_TRUE(b.verifies());
  int64_t total = -1;
  EXPECT_EQ(namesOf(b.params), readParams("qwen-image.params.txt", &total));
  // diffusers 0.42.1: QwenImageTransformer2DModel(**Qwen/Qwen-Image's
  // transformer/config.json).named_parameters().
  EXPECT_EQ(total, 20430401088);
  EXPECT_EQ(b.params.numElements(), 20430401088);
  EXPECT_EQ(b.v.shape(), (Shape{1, 16, 128, 128}));
}

TEST(ModelsTest, QwenImageLoraTargetsArePeftNames) {
  Built b("qwen_image", "tiny", {}, 2, /*loraRank=*/4);
  ASSERT_TRUE(b.model);
  EXPECT_TRUE(b.verifies());
  std::vector<std::string> trained;
  for (const ParamSpec &s : b.params.specs())
    if (s.trainable)
      trained.push_back(s.name);
  EXPECT_EQ(trained.size(), 2u * 2u * 8u); // A and B of 8 targets, 2 blocks
  const ParamSpec *a =
      b.params.find("transformer_blocks.1.attn.add_q_proj.lora_A.weight");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->shape, (Shape{4, 64}));
}

std::string configError(const std::string &model,
                        const std::vector<std::string> &overrides) {
  const Registry &r = Registry::builtin();
  llvm::Expected<Config> cfg = r.config(model, "tiny", overrides);
  if (!cfg)
    return llvm::toString(cfg.takeError());
  auto made = r.makeVelocity(model, *cfg);
  return made ? "" : llvm::toString(made.takeError());
}

TEST(ModelsTest, BadSd3ConfigsAreOneLineErrors) {
  EXPECT_EQ(configError("sd3", {}), "");
  EXPECT_EQ(configError("sd3", {"dual_attention_layers="}), "");
  EXPECT_EQ(configError("sd3", {"qk_norm=none"}), "");
  EXPECT_EQ(configError("sd3", {"num_layers=abc"}),
            "sd3: config key 'num_layers': expected an integer, found 'abc'");
  EXPECT_EQ(configError("sd3", {"patch_size=0"}),
            "sd3: patch_size must be positive, found 0");
  EXPECT_EQ(configError("sd3", {"latent_size=15"}),
            "sd3: latent_size (15) must be a multiple of patch_size (2)");
  EXPECT_EQ(configError("sd3", {"latent_size=34"}),
            "sd3: latent_size / patch_size (17) exceeds pos_embed_max_size "
            "(16)");
  EXPECT_EQ(configError("sd3", {"sample_size=1"}),
            "sd3: sample_size (1) must be at least patch_size (2)");
  EXPECT_EQ(configError("sd3", {"attention_head_dim=3", "num_attention_heads=2",
                                "caption_projection_dim=6"}),
            "sd3: the width num_attention_heads * attention_head_dim (6) "
            "must be a multiple of 4 (2-D sin-cos embedding)");
  EXPECT_EQ(configError("sd3", {"caption_projection_dim=32"}),
            "sd3: caption_projection_dim (32) must equal num_attention_heads "
            "* attention_head_dim (64)");
  EXPECT_EQ(configError("sd3", {"out_channels=8"}),
            "sd3: out_channels (8) must equal in_channels (16) for a velocity "
            "model");
  EXPECT_EQ(configError("sd3", {"qk_norm=layer_norm"}),
            "sd3: qk_norm must be rms_norm or none, found 'layer_norm'");
  EXPECT_EQ(configError("sd3", {"dual_attention_layers=0,2"}),
            "sd3: dual_attention_layers entry 2 is not a layer index in [0, "
            "2)");
  EXPECT_EQ(configError("sd3", {"dual_attention_layers=0;1"}),
            "sd3: config key 'dual_attention_layers': expected "
            "comma-separated integers, found '0;1'");
  EXPECT_NE(configError("sd3", {"num_layer=3"}).find("unknown key 'num_layer'"),
            std::string::npos);
  for (const char *bad :
       {"num_layers=x", "patch_size=-2", "qk_norm=", "num_layer=3"}) {
    std::string e = configError("sd3", {bad});
    EXPECT_FALSE(e.empty()) << bad;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  }
}

TEST(ModelsTest, BadQwenImageConfigsAreOneLineErrors) {
  EXPECT_EQ(configError("qwen_image", {}), "");
  EXPECT_EQ(configError("qwen_image", {"num_layers=abc"}),
            "qwen_image: config key 'num_layers': expected an integer, found "
            "'abc'");
  EXPECT_EQ(configError("qwen_image", {"text_tokens=0"}),
            "qwen_image: text_tokens must be positive, found 0");
  EXPECT_EQ(configError("qwen_image", {"patch_size=4"}),
            "qwen_image: patch_size must be 2 (the pipeline packs 2x2 latent "
            "patches), found 4");
  EXPECT_EQ(configError("qwen_image", {"in_channels=16"}),
            "qwen_image: in_channels (16) must be 4 * out_channels (16): a "
            "packed 2x2 patch of the latent channels");
  EXPECT_EQ(configError("qwen_image", {"latent_size=15"}),
            "qwen_image: latent_size (15) must be even (2x2 packing)");
  EXPECT_EQ(configError("qwen_image", {"axes_dims_rope=16,16"}),
            "qwen_image: axes_dims_rope must list 3 dimensions (frame, "
            "height, width), found 2");
  EXPECT_EQ(configError("qwen_image", {"axes_dims_rope=7,13,12"}),
            "qwen_image: axes_dims_rope entries must be positive and even, "
            "found 7");
  EXPECT_EQ(configError("qwen_image", {"axes_dims_rope=8,8,8"}),
            "qwen_image: axes_dims_rope must sum to attention_head_dim (32), "
            "found 24");
  EXPECT_EQ(configError("qwen_image", {"text_tokens=4093"}),
            "qwen_image: latent_size / 4 + text_tokens (4097) exceeds the "
            "4096 rotary positions of QwenEmbedRope");
  EXPECT_NE(configError("qwen_image", {"pooled_projection_dim=768"})
                .find("unknown key 'pooled_projection_dim'"),
            std::string::npos);
}

TEST(ModelsTest, BadDiTConfigsAreOneLineErrors) {
  EXPECT_EQ(configError("dit", {}), "");
  EXPECT_EQ(configError("dit", {"sample_size=15"}),
            "dit: sample_size (15) must be a positive multiple of patch_size "
            "(2)");
  EXPECT_EQ(configError("dit", {"num_layers=abc"}),
            "dit: config key 'num_layers': expected an integer, found 'abc'");
  std::string e = configError("dit", {"num_attention_heads=0"});
  EXPECT_EQ(e.rfind("dit: ", 0), 0u) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
}

} // namespace
