//===- VaeDecoder.cpp - the decoder of diffusers' AutoencoderKL -----------===//
//
// latents -> images, as diffusers' AutoencoderKL.decode computes them
// (diffusers/models/autoencoders/vae.py `Decoder`):
//
//   post_quant_conv (1x1, only with use_post_quant_conv)
//   decoder.conv_in (3x3) -> decoder.mid_block -> decoder.up_blocks.* ->
//   decoder.conv_norm_out (GroupNorm) -> SiLU -> decoder.conv_out (3x3)
//
// - ResnetBlock2D (resnet.py, no time embedding): GroupNorm -> SiLU ->
//   conv1 -> GroupNorm -> SiLU -> conv2, plus the input (through a 1x1
//   conv_shortcut when the channel count changes); eps 1e-6 throughout.
// - UNetMidBlock2D with add_attention: resnets.0, attentions.0, resnets.1.
//   The attention (attention_processor.Attention with group_norm and
//   residual_connection) runs on [B, HW, C] tokens with one head of dim C.
// - UpDecoderBlock2D: layers_per_block + 1 resnets, then (all but the last
//   block) Upsample2D: nearest x2 and a 3x3 conv named upsamplers.0.conv.
//   Blocks run over reversed(block_out_channels).
//
// Parameter names are the AutoencoderKL state_dict's, so a diffusers
// checkpoint's decoder weights load directly.
//
//===----------------------------------------------------------------------===//

#include "frontends/builder/Model.h"
#include "frontends/models/Layers.h"
#include "frontends/models/Models.h"

using namespace omni::fe;
using namespace omni::fe::layers;

namespace {

constexpr double kEps = 1e-6;

struct VaeConfig {
  int64_t latentChannels, outChannels, layersPerBlock, groups, latentSize;
  std::vector<int64_t> blockOut;
  double scalingFactor, shiftFactor;
  bool postQuantConv, midAttention;
};

/// ResnetBlock2D(in, out, temb_channels=None, eps=1e-6).
Tensor resnetBlock(Module m, const Tensor &x, int64_t out, int64_t groups) {
  Tensor h = silu(m.groupNorm("norm1", x, groups, kEps));
  h = m.conv2d("conv1", h, out, 3, 1, 1);
  h = silu(m.groupNorm("norm2", h, groups, kEps));
  h = m.conv2d("conv2", h, out, 3, 1, 1);
  Tensor shortcut = x.dim(1) == out ? x : m.conv2d("conv_shortcut", x, out, 1);
  return shortcut + h;
}

/// Attention(C, heads=1, dim_head=C, norm_num_groups, residual_connection,
/// rescale_output_factor=1) on NCHW input.
Tensor midAttention(Module m, const Tensor &x, int64_t groups) {
  Shape s = x.shape();
  int64_t b = s[0], c = s[1], hw = s[2] * s[3];
  // GroupNorm over [B, C, HW] equals GroupNorm over [B, C, H, W].
  Tensor n = m.groupNorm("group_norm", x, groups, kEps);
  Tensor tokens = n.reshape({b, c, hw}).transpose({0, 2, 1}); // [B, HW, C]
  Tensor q = splitHeads(m.linear("to_q", tokens, c), 1);
  Tensor k = splitHeads(m.linear("to_k", tokens, c), 1);
  Tensor v = splitHeads(m.linear("to_v", tokens, c), 1);
  Tensor a = m.linear("to_out.0", mergeHeads(attention(q, k, v)), c);
  return a.transpose({0, 2, 1}).reshape(s) + x;
}

class VaeDecoder final : public ImageDecoder {
public:
  explicit VaeDecoder(VaeConfig c) : c_(std::move(c)) {}

  Shape latentShape() const override {
    return {c_.latentChannels, c_.latentSize, c_.latentSize};
  }
  Shape imageShape() const override {
    int64_t size = c_.latentSize << (c_.blockOut.size() - 1);
    return {c_.outChannels, size, size};
  }
  double scalingFactor() const override { return c_.scalingFactor; }
  double shiftFactor() const override { return c_.shiftFactor; }

  Tensor decode(Module &m, const Tensor &latents) override {
    Graph &g = latents.graph();
    Tensor x = latents;
    if (c_.postQuantConv) {
      g.setLocation("post_quant_conv");
      x = m.conv2d("post_quant_conv", x, c_.latentChannels, 1);
    }
    Module dec = m["decoder"];
    g.setLocation("decoder.conv_in");
    x = dec.conv2d("conv_in", x, c_.blockOut.back(), 3, 1, 1);

    g.setLocation("decoder.mid_block");
    Module mid = dec["mid_block"];
    x = resnetBlock(mid["resnets"]["0"], x, x.dim(1), c_.groups);
    if (c_.midAttention)
      x = midAttention(mid["attentions"]["0"], x, c_.groups);
    x = resnetBlock(mid["resnets"]["1"], x, x.dim(1), c_.groups);

    size_t blocks = c_.blockOut.size();
    for (size_t i = 0; i < blocks; ++i) {
      std::string name = std::to_string(i);
      g.setLocation("decoder.up_blocks." + name);
      Module up = dec["up_blocks"][name];
      int64_t out = c_.blockOut[blocks - 1 - i];
      for (int64_t j = 0; j <= c_.layersPerBlock; ++j)
        x = resnetBlock(up["resnets"][std::to_string(j)], x, out, c_.groups);
      if (i + 1 < blocks)
        x = up["upsamplers"]["0"].conv2d("conv", upsampleNearest(x, 2), out, 3,
                                         1, 1);
    }

    g.setLocation("decoder.conv_out");
    x = silu(dec.groupNorm("conv_norm_out", x, c_.groups, kEps));
    x = dec.conv2d("conv_out", x, c_.outChannels, 3, 1, 1);
    g.setLocation("");
    return x;
  }

private:
  VaeConfig c_;
};

llvm::Error invalid(const std::string &message) {
  return llvm::createStringError("autoencoder_kl: " + message);
}

llvm::Expected<std::unique_ptr<ImageDecoder>> makeVae(const Config &cfg) {
  VaeConfig c{cfg.getInt("latent_channels"),
              cfg.getInt("out_channels"),
              cfg.getInt("layers_per_block"),
              cfg.getInt("norm_num_groups"),
              cfg.getInt("latent_size"),
              cfg.getInts("block_out_channels"),
              cfg.getDouble("scaling_factor"),
              cfg.getDouble("shift_factor"),
              cfg.getBool("use_post_quant_conv"),
              cfg.getBool("mid_block_add_attention")};
  if (llvm::Error e = cfg.takeError())
    return std::move(e);
  if (c.latentChannels <= 0 || c.outChannels <= 0 || c.latentSize <= 0)
    return invalid("latent_channels, out_channels and latent_size must be "
                   "positive");
  if (c.layersPerBlock < 0)
    return invalid("layers_per_block must be >= 0, found " +
                   std::to_string(c.layersPerBlock));
  if (c.groups <= 0)
    return invalid("norm_num_groups must be positive, found " +
                   std::to_string(c.groups));
  if (c.blockOut.empty() || c.blockOut.size() > 16)
    return invalid("block_out_channels must list 1 to 16 channel counts");
  for (int64_t ch : c.blockOut)
    if (ch <= 0 || ch % c.groups)
      return invalid("block_out_channels entry " + std::to_string(ch) +
                     " is not a positive multiple of norm_num_groups (" +
                     std::to_string(c.groups) + ")");
  if (c.scalingFactor == 0.0)
    return invalid("scaling_factor must be non-zero");
  return std::make_unique<VaeDecoder>(std::move(c));
}

} // namespace

void omni::fe::registerAutoencoderKL(Registry &registry) {
  ModelEntry e;
  e.name = "autoencoder_kl";
  e.kind = ModelKind::Decoder;
  e.description = "decoder of diffusers' AutoencoderKL (the SD3/SD3.5 VAE "
                  "with the sd3 config)";
  Config tiny{
      {"latent_channels", "16"},        {"out_channels", "3"},
      {"block_out_channels", "32,32"},  {"layers_per_block", "1"},
      {"norm_num_groups", "8"},         {"latent_size", "16"},
      {"scaling_factor", "1.5305"},     {"shift_factor", "0.0609"},
      {"use_post_quant_conv", "false"}, {"mid_block_add_attention", "true"}};
  // stabilityai/stable-diffusion-3.5-medium vae/config.json; 64x64 latents
  // are FlowGRPO's 512x512 images.
  Config sd3 = tiny;
  sd3.set("block_out_channels", "128,256,512,512");
  sd3.set("layers_per_block", "2");
  sd3.set("norm_num_groups", "32");
  sd3.set("latent_size", "64");
  e.presets = {{"tiny", tiny}, {"sd3", sd3}};
  e.makeDecoder = makeVae;
  registry.add(std::move(e));
}
