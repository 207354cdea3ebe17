//===- VaeDecoderTest.cpp - autoencoder_kl against diffusers --------------===//
//
// The `autoencoder_kl` decoder against diffusers' AutoencoderKL, through the
// fixture that bench/torch/vae_reference.py writes (testdata/): parameter
// names and shapes equal the state_dict's (tiny, tiny with
// use_post_quant_conv, and the real SD3 VAE), and the decoded images equal
// diffusers' `vae.decode(latents).sample` in float32 and float64. The
// weights are not stored: both sides generate them from the parameter
// names (fixtureWeights below, `fixture_weights` in the script).
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

/// One `decode(latents, params...) -> images` function of a preset.
struct Built {
  mlir::MLIRContext context;
  Graph graph{context};
  Function fn{graph, "decode", /*isPublic=*/true};
  ParamSet params;
  std::unique_ptr<ImageDecoder> decoder;
  Tensor images;

  Built(const std::string &preset, const std::vector<std::string> &overrides,
        int64_t batch) {
    const Registry &r = Registry::builtin();
    llvm::Expected<Config> cfg = r.config("autoencoder_kl", preset, overrides);
    EXPECT_TRUE(static_cast<bool>(cfg)) << llvm::toString(cfg.takeError());
    if (!cfg)
      return;
    auto made = r.makeDecoder("autoencoder_kl", *cfg);
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
  HostTensor got = b.run(readNpy("autoencoder_kl_tiny.latents.npy"),
                         reference::Precision::F32);
  HostTensor want = readNpy("autoencoder_kl_tiny.decoded.npy");
  ASSERT_EQ(got.shape(), want.shape());
  EXPECT_LT(relativeError(got, valuesOf(want)), 1e-5);
}

TEST(VaeDecoderTest, TinyDecodesAsDiffusersFloat64) {
  Built b("tiny", {}, 2);
  ASSERT_TRUE(b.decoder);
  HostTensor got = b.run(readNpy("autoencoder_kl_tiny.latents.npy"),
                         reference::Precision::F64);
  HostTensor want = readNpy("autoencoder_kl_tiny.decoded_f64.npy");
  ASSERT_EQ(got.shape(), want.shape());
  EXPECT_LT(relativeError(got, valuesOf(want)), 1e-12);
}

TEST(VaeDecoderTest, PostQuantConvAsDiffusers) {
  Built b("tiny", {"use_post_quant_conv=true"}, 2);
  ASSERT_TRUE(b.decoder);
  EXPECT_EQ(namesOf(b.params),
            readParams("autoencoder_kl_tiny_pqc.params.txt"));
  HostTensor got = b.run(readNpy("autoencoder_kl_tiny.latents.npy"),
                         reference::Precision::F64);
  HostTensor want = readNpy("autoencoder_kl_tiny_pqc.decoded_f64.npy");
  ASSERT_EQ(got.shape(), want.shape());
  EXPECT_LT(relativeError(got, valuesOf(want)), 1e-12);
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

std::string configError(const std::vector<std::string> &overrides) {
  const Registry &r = Registry::builtin();
  llvm::Expected<Config> cfg = r.config("autoencoder_kl", "tiny", overrides);
  if (!cfg)
    return llvm::toString(cfg.takeError());
  auto made = r.makeDecoder("autoencoder_kl", *cfg);
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

} // namespace
