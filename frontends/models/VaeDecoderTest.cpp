//===- VaeDecoderTest.cpp - the VAE decoders against diffusers ------------===//
//
// The `autoencoder_kl` decoder against diffusers' AutoencoderKL, through the
// fixture that bench/torch/vae_reference.py writes (testdata/): parameter
// names and shapes equal the state_dict's (tiny, tiny with
// use_post_quant_conv, and the real SD3 VAE), and the decoded images equal
// diffusers' `vae.decode(latents).sample` in float32 and float64. The
// weights are not stored: both sides generate them from the parameter
// names (fixtureWeights below, `fixture_weights` in the script).
//
// `autoencoder_kl_qwenimage` the same way against AutoencoderKLQwenImage
// decoding one frame (bench/torch/qwen_vae_reference.py), plus the
// pipeline's per-channel unscaling.
//
//===----------------------------------------------------------------------===//

#include "frontends/builder/Model.h"
#include "frontends/builder/testing/TestUtil.h"
#include "frontends/models/testing/Fixture.h"
#include "runtime/io/Npy.h"

#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

#include <fstream>
#include <limits>
#include <sstream>

using namespace omni;
using namespace omni::fe;
using namespace omni::fe::testing;

namespace {

/// One `decode(latents, params...) -> images` function of a preset.
struct Built {
  mlir::MLIRContext context;
  Graph graph{context};
  Function fn{graph, "decode", /*isPublic=*/true};
  ParamSet params;
  std::unique_ptr<ImageDecoder> decoder;
  Tensor images;

  Built(const std::string &preset, const std::vector<std::string> &overrides,
        int64_t batch, const std::string &model = "autoencoder_kl") {
    const Registry &r = Registry::builtin();
    llvm::Expected<Config> cfg = r.config(model, preset, overrides);
    EXPECT_TRUE(static_cast<bool>(cfg)) << llvm::toString(cfg.takeError());
    if (!cfg)
      return;
    auto made = r.makeDecoder(model, *cfg);
    EXPECT_TRUE(static_cast<bool>(made)) << llvm::toString(made.takeError());
    if (!made)
      return;
    decoder = std::move(*made);
    Shape latent = decoder->latentShape();
    latent.insert(latent.begin(), batch);
    Tensor x = fn.argument(latent, "latents");
    Module m(fn, params);
    images = decoder->decode(m, x);
    fn.returns({images}, {"images"});
  }

  /// Decodes `latents` with the fixture's weights.
  HostTensor run(const HostTensor &latents, reference::Precision p) {
    std::vector<HostTensor> args{latents};
    for (const auto &[name, t] : fn.parameters())
      args.push_back(fixtureWeights(name, t.shape()));
    absl::StatusOr<std::vector<HostTensor>> out =
        evaluate(graph, "decode", args, p);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? out->front() : HostTensor();
  }

  /// max |decoded - want| / max |want| of the fixture's latents decoded
  /// against its expected images (infinite when the shapes differ).
  double errorAgainst(const std::string &latents, const std::string &want,
                      reference::Precision p) {
    HostTensor got = run(readNpy(latents), p);
    HostTensor expected = readNpy(want);
    EXPECT_EQ(got.shape(), expected.shape());
    if (got.shape() != expected.shape())
      return std::numeric_limits<double>::infinity();
    return relativeError(got, valuesOf(expected));
  }
};

TEST(VaeDecoderTest, RegisteredAsDecoder) {
  const ModelEntry *e = Registry::builtin().find("autoencoder_kl");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->kind, ModelKind::Decoder);
  ASSERT_GE(e->presets.size(), 2u);
  EXPECT_EQ(e->presets[0].first, "tiny");
  Built b("sd3", {}, 1);
  ASSERT_TRUE(b.decoder);
  EXPECT_DOUBLE_EQ(b.decoder->scalingFactor(), 1.5305);
  EXPECT_DOUBLE_EQ(b.decoder->shiftFactor(), 0.0609);
}

TEST(VaeDecoderTest, TinyNamesAndShapesAreDiffusers) {
  Built b("tiny", {}, 2);
  ASSERT_TRUE(b.decoder);
  EXPECT_EQ(namesOf(b.params), readParams("autoencoder_kl_tiny.params.txt"));
  EXPECT_EQ(b.decoder->latentShape(), (Shape{16, 16, 16}));
  EXPECT_EQ(b.decoder->imageShape(), (Shape{3, 32, 32}));
  EXPECT_EQ(b.images.shape(), (Shape{2, 3, 32, 32}));
}

TEST(VaeDecoderTest, TinyDecodesAsDiffusersFloat32) {
  Built b("tiny", {}, 2);
  ASSERT_TRUE(b.decoder);
  EXPECT_LT(b.errorAgainst("autoencoder_kl_tiny.latents.npy",
                           "autoencoder_kl_tiny.decoded.npy",
                           reference::Precision::F32),
            1e-5);
}

TEST(VaeDecoderTest, TinyDecodesAsDiffusersFloat64) {
  Built b("tiny", {}, 2);
  ASSERT_TRUE(b.decoder);
  EXPECT_LT(b.errorAgainst("autoencoder_kl_tiny.latents.npy",
                           "autoencoder_kl_tiny.decoded_f64.npy",
                           reference::Precision::F64),
            1e-12);
}

TEST(VaeDecoderTest, PostQuantConvAsDiffusers) {
  Built b("tiny", {"use_post_quant_conv=true"}, 2);
  ASSERT_TRUE(b.decoder);
  EXPECT_EQ(namesOf(b.params),
            readParams("autoencoder_kl_tiny_pqc.params.txt"));
  EXPECT_LT(b.errorAgainst("autoencoder_kl_tiny.latents.npy",
                           "autoencoder_kl_tiny_pqc.decoded_f64.npy",
                           reference::Precision::F64),
            1e-12);
}

TEST(VaeDecoderTest, Sd3IsTheRealSd3Decoder) {
  Built b("sd3", {}, 1);
  ASSERT_TRUE(b.decoder);
  EXPECT_TRUE(mlir::succeeded(mlir::verify(b.graph.module())));
  int64_t total = -1;
  EXPECT_EQ(namesOf(b.params),
            readParams("autoencoder_kl_sd3.params.txt", &total));
  // diffusers 0.42.1: AutoencoderKL(**SD3 config).decoder, no
  // post_quant_conv.
  EXPECT_EQ(total, 49545475);
  EXPECT_EQ(b.params.numElements(), 49545475);
  EXPECT_EQ(b.decoder->latentShape(), (Shape{16, 64, 64}));
  EXPECT_EQ(b.decoder->imageShape(), (Shape{3, 512, 512}));
  EXPECT_EQ(b.images.shape(), (Shape{1, 3, 512, 512}));
}

std::string configError(const std::vector<std::string> &overrides,
                        const std::string &model = "autoencoder_kl") {
  const Registry &r = Registry::builtin();
  llvm::Expected<Config> cfg = r.config(model, "tiny", overrides);
  if (!cfg)
    return llvm::toString(cfg.takeError());
  auto made = r.makeDecoder(model, *cfg);
  return made ? "" : llvm::toString(made.takeError());
}

TEST(VaeDecoderTest, InvalidConfigsAreOneLineErrors) {
  EXPECT_EQ(configError({}), "");
  EXPECT_EQ(configError({"block_out_channels=32,36"}),
            "autoencoder_kl: block_out_channels entry 36 is not a positive "
            "multiple of norm_num_groups (8)");
  EXPECT_EQ(configError({"block_out_channels="}),
            "autoencoder_kl: block_out_channels must list 1 to 16 channel "
            "counts");
  EXPECT_EQ(configError({"norm_num_groups=0"}),
            "autoencoder_kl: norm_num_groups must be positive, found 0");
  EXPECT_EQ(configError({"layers_per_block=-1"}),
            "autoencoder_kl: layers_per_block must be >= 0, found -1");
  EXPECT_EQ(configError({"latent_size=0"}),
            "autoencoder_kl: latent_channels, out_channels and latent_size "
            "must be positive");
  EXPECT_EQ(configError({"scaling_factor=0"}),
            "autoencoder_kl: scaling_factor must be non-zero");
  EXPECT_EQ(configError({"use_post_quant_conv=maybe"}),
            "config key 'use_post_quant_conv': expected true or false, found "
            "'maybe'");
  EXPECT_NE(configError({"sample_size=64"}).find("unknown key 'sample_size'"),
            std::string::npos);
}

//===-- autoencoder_kl_qwenimage ------------------------------------------===//

constexpr const char *kQwenVae = "autoencoder_kl_qwenimage";

/// The fixture decodes 8x8 latents of the tiny preset (32x32 images).
Built qwenTiny(int64_t batch) {
  return Built("tiny", {"latent_size=8"}, batch, kQwenVae);
}

TEST(QwenImageVaeTest, TinyNamesAndShapesAreDiffusers) {
  Built b = qwenTiny(2);
  ASSERT_TRUE(b.decoder);
  // diffusers' decoder and post_quant_conv parameters without the
  // upsample3d time_conv (the script checks a frame never reads it).
  EXPECT_EQ(namesOf(b.params),
            readParams("autoencoder_kl_qwenimage_tiny.params.txt"));
  EXPECT_EQ(b.decoder->latentShape(), (Shape{16, 8, 8}));
  EXPECT_EQ(b.decoder->imageShape(), (Shape{3, 32, 32}));
  EXPECT_EQ(b.images.shape(), (Shape{2, 3, 32, 32}));
}

TEST(QwenImageVaeTest, TinyDecodesAsDiffusersFloat32) {
  Built b = qwenTiny(2);
  ASSERT_TRUE(b.decoder);
  EXPECT_LT(b.errorAgainst("autoencoder_kl_qwenimage_tiny.latents.npy",
                           "autoencoder_kl_qwenimage_tiny.decoded.npy",
                           reference::Precision::F32),
            1e-5);
}

TEST(QwenImageVaeTest, TinyDecodesAsDiffusersFloat64) {
  Built b = qwenTiny(2);
  ASSERT_TRUE(b.decoder);
  // QwenImageUpsample rounds its input to float32 even in a float64 model
  // (`x.float()`): two roundings of relative 2^-24 between the blocks, so
  // agreement to a few 1e-8 (with the cast patched out of diffusers the
  // same decode differs from this fixture by 2.86e-8, as ours does).
  EXPECT_LT(b.errorAgainst("autoencoder_kl_qwenimage_tiny.latents.npy",
                           "autoencoder_kl_qwenimage_tiny.decoded_f64.npy",
                           reference::Precision::F64),
            1e-7);
}

TEST(QwenImageVaeTest, UnscaleIsThePipelinesPerChannelMeanAndStd) {
  mlir::MLIRContext context;
  Graph graph(context);
  Function fn(graph, "unscale", /*isPublic=*/true);
  const Registry &r = Registry::builtin();
  auto made = r.makeDecoder(kQwenVae, *r.config(kQwenVae, "tiny", {}));
  ASSERT_TRUE(static_cast<bool>(made)) << llvm::toString(made.takeError());
  Tensor z = fn.argument({2, 16, 8, 8}, "latents");
  fn.returns({(*made)->unscale(z)});
  absl::StatusOr<std::vector<HostTensor>> out = evaluate(
      graph, "unscale", {readNpy("autoencoder_kl_qwenimage_tiny.latents.npy")},
      reference::Precision::F32);
  ASSERT_TRUE(out.ok()) << out.status();
  HostTensor want = readNpy("autoencoder_kl_qwenimage_tiny.unscaled.npy");
  // The same float32 division by 1/std and addition as torch: equal bits.
  EXPECT_EQ(valuesOf(out->front()), valuesOf(want));
}

TEST(QwenImageVaeTest, QwenImageIsTheRealQwenImageDecoder) {
  Built b("qwen-image", {}, 1, kQwenVae);
  ASSERT_TRUE(b.decoder);
  EXPECT_TRUE(mlir::succeeded(mlir::verify(b.graph.module())));
  int64_t total = -1;
  EXPECT_EQ(namesOf(b.params),
            readParams("autoencoder_kl_qwenimage.params.txt", &total));
  // diffusers 0.42.1 AutoencoderKLQwenImage(**Qwen/Qwen-Image vae config):
  // decoder and post_quant_conv without the two time_conv layers.
  EXPECT_EQ(total, 71524595);
  EXPECT_EQ(b.params.numElements(), 71524595);
  EXPECT_EQ(b.decoder->latentShape(), (Shape{16, 128, 128}));
  EXPECT_EQ(b.decoder->imageShape(), (Shape{3, 1024, 1024}));
}

TEST(QwenImageVaeTest, InvalidConfigsAreOneLineErrors) {
  EXPECT_EQ(configError({}, kQwenVae), "");
  EXPECT_EQ(configError({"temperal_downsample=true"}, kQwenVae),
            "autoencoder_kl_qwenimage: temperal_downsample must have one "
            "entry fewer than dim_mult (2), found 1");
  EXPECT_EQ(configError({"temperal_downsample=true,maybe"}, kQwenVae),
            "config key 'temperal_downsample': expected comma-separated true "
            "or false, found 'true,maybe'");
  EXPECT_EQ(configError({"latents_std=1,2"}, kQwenVae),
            "autoencoder_kl_qwenimage: latents_mean and latents_std must have "
            "z_dim (16) entries, found 16 and 2");
  EXPECT_EQ(configError({"latents_mean=0,x"}, kQwenVae),
            "config key 'latents_mean': expected comma-separated numbers, "
            "found '0,x'");
  EXPECT_EQ(
      configError({"latents_std=1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,0"}, kQwenVae),
      "autoencoder_kl_qwenimage: latents_std entries must be finite and "
      "non-zero");
  EXPECT_EQ(configError({"dim_mult=1,0,2"}, kQwenVae),
            "autoencoder_kl_qwenimage: dim_mult entries must be positive, "
            "found 0");
  EXPECT_EQ(configError({"num_res_blocks=-1"}, kQwenVae),
            "autoencoder_kl_qwenimage: num_res_blocks must be >= 0, found -1");
  EXPECT_EQ(configError({"base_dim=0"}, kQwenVae),
            "autoencoder_kl_qwenimage: base_dim, z_dim, input_channels and "
            "latent_size must be positive");
}

} // namespace
