//===- QwenImageVae.cpp - the decoder of diffusers' AutoencoderKLQwenImage ===//
//
// latents -> images, as diffusers 0.42.1's AutoencoderKLQwenImage.decode
// computes them for one frame (autoencoder_kl_qwenimage.py), which is how
// QwenImagePipeline uses it (latents [B, C, 1, h, w], image `[:, :, 0]`):
//
//   post_quant_conv (1x1x1)
//   decoder.conv_in (3x3x3) -> decoder.mid_block -> decoder.up_blocks.* ->
//   decoder.norm_out (channel RMS) -> SiLU -> decoder.conv_out (3x3x3)
//   -> clamp(-1, 1)
//
// The VAE is a causal video VAE (Wan's): every QwenImageCausalConv3d pads
// time with 2 * padding zero frames *before* the input. The first frame of
// a video therefore sees only the last time slice of each kernel:
//
//   conv3d(pad_t(x, 2, 0), W)[:, :, 0] = conv2d(x[:, :, 0], W[:, :, k - 1])
//
// so on a single frame every causal conv is a 2-D conv with that slice, and
// the `upsample3d` resamplers skip their time_conv (diffusers marks the
// first chunk "Rep" and runs only the spatial part). The parameters keep
// diffusers' 5-D shapes and names, so a Qwen-Image checkpoint's decoder
// weights load directly; the slice is a graph op. The time_conv weights of
// the upsample3d blocks are never read for one frame and are not
// parameters of the program (like the encoder's).
//
// - QwenImageRMS_norm: F.normalize over the channels (x / max(||x||_2,
//   1e-12)) times sqrt(C) times gamma ([C, 1, 1, 1], or [C, 1, 1] in the
//   attention block), no bias.
// - QwenImageResidualBlock: RMS -> SiLU -> conv1 (3x3x3) -> RMS -> SiLU ->
//   conv2 (3x3x3), plus the input (through a 1x1x1 conv_shortcut when the
//   channel count changes).
// - QwenImageAttentionBlock: RMS -> to_qkv (1x1 conv) -> one head of
//   dimension C over the h*w pixels -> proj (1x1 conv), plus the input.
// - QwenImageUpBlock: num_res_blocks + 1 residual blocks, then (all but the
//   last block) nearest x2 and a 3x3 conv to half the channels
//   (`upsamplers.0.resample.1`).
//
// The pipeline's latent normalization (`latents / (1 / std) + mean` per
// channel, QwenImagePipeline) is `unscale`.
//
//===----------------------------------------------------------------------===//

#include "frontends/builder/Model.h"
#include "frontends/models/Layers.h"
#include "frontends/models/Models.h"

#include <cmath>

using namespace omni::fe;
using namespace omni::fe::layers;

namespace {

struct QwenVaeConfig {
  int64_t baseDim, zDim, numResBlocks, inputChannels, latentSize;
  std::vector<int64_t> dimMult;
  std::vector<double> latentsMean, latentsStd;
};

/// The first frame of QwenImageCausalConv3d(in, out, k, padding=k/2): a 2-D
/// conv with the kernel's last time slice.
Tensor causalConv(Module m, const Tensor &x, int64_t out, int64_t k) {
  int64_t in = x.dim(1);
  int64_t fanIn = in * k * k * k;
  Tensor w = m.param("weight", {out, in, k, k, k}, Init::torchDefault(fanIn));
  Tensor b = m.param("bias", {out}, Init::torchDefault(fanIn));
  return conv2d(x, w.slice(2, k - 1, k).reshape({out, in, k, k}), b, 1, k / 2);
}

/// QwenImageRMS_norm(C, images) on NCHW input.
Tensor channelRms(Module m, const Tensor &x, bool images) {
  int64_t c = x.dim(1);
  Shape gammaShape = images ? Shape{c, 1, 1} : Shape{c, 1, 1, 1};
  Tensor gamma = m.param("gamma", gammaShape, Init::ones());
  // F.normalize(x, dim=1) * sqrt(C) = x / clamp_min(||x||_2, eps) * sqrt(C)
  // = x / clamp_min(sqrt(mean(x^2)), eps / sqrt(C)): no float32 constant
  // sqrt(C) (torch multiplies a float64 model by the exact double).
  double rootC = std::sqrt(static_cast<double>(c));
  Tensor rms = sqrt((x * x).mean({1}, /*keepDims=*/true));
  Tensor eps = x.graph().scalar(1e-12 / rootC);
  return x / maximum(rms, eps) * gamma.reshape({1, c, 1, 1});
}

/// QwenImageResidualBlock(in, out) on one frame.
Tensor residualBlock(Module m, const Tensor &x, int64_t out) {
  Tensor shortcut =
      x.dim(1) == out ? x : causalConv(m["conv_shortcut"], x, out, 1);
  Tensor h =
      causalConv(m["conv1"], silu(channelRms(m["norm1"], x, false)), out, 3);
  h = causalConv(m["conv2"], silu(channelRms(m["norm2"], h, false)), out, 3);
  return h + shortcut;
}

/// QwenImageAttentionBlock(C): one head of dimension C over the pixels.
Tensor attentionBlock(Module m, const Tensor &x) {
  Shape s = x.shape();
  int64_t b = s[0], c = s[1], hw = s[2] * s[3];
  Tensor n = channelRms(m["norm"], x, /*images=*/true);
  Tensor qkv = m.conv2d("to_qkv", n, 3 * c, 1)
                   .reshape({b, 3 * c, hw})
                   .transpose({0, 2, 1}); // [B, HW, 3C]
  auto head = [&](int64_t i) {
    return qkv.slice(2, i * c, (i + 1) * c).reshape({b, 1, hw, c});
  };
  Tensor a = attention(head(0), head(1), head(2)); // [B, 1, HW, C]
  a = a.reshape({b, hw, c}).transpose({0, 2, 1}).reshape(s);
  return m.conv2d("proj", a, c, 1) + x;
}

class QwenImageVae final : public ImageDecoder {
public:
  explicit QwenImageVae(QwenVaeConfig c) : c_(std::move(c)) {}

  Shape latentShape() const override {
    return {c_.zDim, c_.latentSize, c_.latentSize};
  }
  Shape imageShape() const override {
    int64_t size = c_.latentSize << (c_.dimMult.size() - 1);
    return {c_.inputChannels, size, size};
  }

  /// QwenImagePipeline: latents_std = 1 / std (float32), then
  /// `latents / latents_std + latents_mean`, per channel.
  Tensor unscale(const Tensor &latents) const override {
    Graph &g = latents.graph();
    std::vector<float> inverseStd, mean;
    for (size_t i = 0; i < c_.latentsStd.size(); ++i) {
      inverseStd.push_back(1.0f / static_cast<float>(c_.latentsStd[i]));
      mean.push_back(static_cast<float>(c_.latentsMean[i]));
    }
    Shape perChannel{1, c_.zDim, 1, 1};
    return latents / g.constant(perChannel, inverseStd) +
           g.constant(perChannel, mean);
  }

  Tensor decode(Module &m, const Tensor &latents) override {
    Graph &g = latents.graph();
    g.setLocation("post_quant_conv");
    Tensor x = causalConv(m["post_quant_conv"], latents, c_.zDim, 1);

    // QwenImageDecoder3d: dims = base_dim * [dim_mult[-1]] +
    // base_dim * reversed(dim_mult).
    std::vector<int64_t> dims{c_.baseDim * c_.dimMult.back()};
    for (auto it = c_.dimMult.rbegin(); it != c_.dimMult.rend(); ++it)
      dims.push_back(c_.baseDim * *it);

    Module dec = m["decoder"];
    g.setLocation("decoder.conv_in");
    x = causalConv(dec["conv_in"], x, dims[0], 3);

    g.setLocation("decoder.mid_block");
    Module mid = dec["mid_block"];
    x = residualBlock(mid["resnets"]["0"], x, dims[0]);
    x = attentionBlock(mid["attentions"]["0"], x);
    x = residualBlock(mid["resnets"]["1"], x, dims[0]);

    size_t blocks = c_.dimMult.size();
    for (size_t i = 0; i < blocks; ++i) {
      std::string name = std::to_string(i);
      g.setLocation("decoder.up_blocks." + name);
      Module up = dec["up_blocks"][name];
      int64_t out = dims[i + 1];
      for (int64_t j = 0; j <= c_.numResBlocks; ++j)
        x = residualBlock(up["resnets"][std::to_string(j)], x, out);
      if (i + 1 < blocks)
        x = up["upsamplers"]["0"]["resample"].conv2d("1", upsampleNearest(x, 2),
                                                     out / 2, 3, 1, 1);
    }

    g.setLocation("decoder.conv_out");
    x = silu(channelRms(dec["norm_out"], x, false));
    x = causalConv(dec["conv_out"], x, c_.inputChannels, 3);
    g.setLocation("");
    return clamp(x, -1.0, 1.0);
  }

private:
  QwenVaeConfig c_;
};

llvm::Error invalid(const std::string &message) {
  return llvm::createStringError("autoencoder_kl_qwenimage: " + message);
}

llvm::Expected<std::unique_ptr<ImageDecoder>> makeQwenVae(const Config &cfg) {
  QwenVaeConfig c{
      cfg.getInt("base_dim"),         cfg.getInt("z_dim"),
      cfg.getInt("num_res_blocks"),   cfg.getInt("input_channels"),
      cfg.getInt("latent_size"),      cfg.getInts("dim_mult"),
      cfg.getDoubles("latents_mean"), cfg.getDoubles("latents_std")};
  std::vector<bool> temporal = cfg.getBools("temperal_downsample");
  if (llvm::Error e = cfg.takeError())
    return std::move(e);
  if (c.baseDim <= 0 || c.zDim <= 0 || c.inputChannels <= 0 ||
      c.latentSize <= 0)
    return invalid("base_dim, z_dim, input_channels and latent_size must be "
                   "positive");
  if (c.numResBlocks < 0)
    return invalid("num_res_blocks must be >= 0, found " +
                   std::to_string(c.numResBlocks));
  if (c.dimMult.empty() || c.dimMult.size() > 16)
    return invalid("dim_mult must list 1 to 16 multipliers");
  for (int64_t u : c.dimMult)
    if (u <= 0)
      return invalid("dim_mult entries must be positive, found " +
                     std::to_string(u));
  if (temporal.size() + 1 != c.dimMult.size())
    return invalid("temperal_downsample must have one entry fewer than "
                   "dim_mult (" +
                   std::to_string(c.dimMult.size() - 1) + "), found " +
                   std::to_string(temporal.size()));
  size_t z = static_cast<size_t>(c.zDim);
  if (c.latentsMean.size() != z || c.latentsStd.size() != z)
    return invalid("latents_mean and latents_std must have z_dim (" +
                   std::to_string(z) + ") entries, found " +
                   std::to_string(c.latentsMean.size()) + " and " +
                   std::to_string(c.latentsStd.size()));
  for (double s : c.latentsStd)
    if (!(std::isfinite(s) && s != 0.0))
      return invalid("latents_std entries must be finite and non-zero");
  return std::make_unique<QwenImageVae>(std::move(c));
}

} // namespace

void omni::fe::registerQwenImageVae(Registry &registry) {
  ModelEntry e;
  e.name = "autoencoder_kl_qwenimage";
  e.kind = ModelKind::Decoder;
  e.description = "decoder of diffusers' AutoencoderKLQwenImage on single "
                  "frames (the Qwen-Image VAE with the qwen-image config)";
  // Qwen/Qwen-Image vae/config.json, which equals diffusers' defaults.
  Config full{{"base_dim", "96"},
              {"z_dim", "16"},
              {"dim_mult", "1,2,4,4"},
              {"num_res_blocks", "2"},
              {"temperal_downsample", "false,true,true"},
              {"input_channels", "3"},
              {"latents_mean", "-0.7571,-0.7089,-0.9113,0.1075,-0.1745,0.9653,"
                               "-0.1517,1.5508,0.4134,-0.0715,0.5517,-0.3632,"
                               "-0.1922,-0.9497,0.2503,-0.2921"},
              {"latents_std",
               "2.8184,1.4541,2.3275,2.6558,1.2196,1.7708,2.6052,"
               "2.0743,3.2687,2.1526,2.8652,1.5579,1.6382,1.1253,"
               "2.8251,1.9160"},
              {"latent_size", "128"}};
  // Three blocks (one upsample2d, one upsample3d) of 8 to 16 channels:
  // 16x16 latents, 64x64 images.
  Config tiny = full;
  tiny.set("base_dim", "8");
  tiny.set("dim_mult", "1,2,2");
  tiny.set("num_res_blocks", "1");
  tiny.set("temperal_downsample", "false,true");
  tiny.set("latent_size", "16");
  e.presets = {{"tiny", tiny}, {"qwen-image", full}};
  e.makeDecoder = makeQwenVae;
  registry.add(std::move(e));
}
