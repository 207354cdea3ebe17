//===- SD3Transformer.cpp - SD3 / SD3.5 MMDiT (SD3Transformer2DModel) -----===//
//
// The MMDiT of Stable Diffusion 3 and 3.5 with the structure and parameter
// names of diffusers' SD3Transformer2DModel (transformer_sd3.py), so that a
// diffusers `transformer/` safetensors file loads by name:
// - pos_embed: PatchEmbed (conv p x p) plus the 2-D sin-cos table of
//   pos_embed_max_size^2 positions, centre-cropped to the latent's patch
//   grid. The table is a constant here (diffusers keeps it as the buffer
//   `pos_embed.pos_embed`, which a loader skips);
// - time_text_embed: CombinedTimestepTextProjEmbeddings (256 sinusoids ->
//   timestep_embedder; pooled text -> text_embedder), summed;
// - context_embedder: the text tokens' projection;
// - transformer_blocks.N: JointTransformerBlock with AdaLayerNormZero (or
//   SD35AdaLayerNormZeroX on dual_attention_layers, which adds attn2, a
//   self-attention over the image tokens), joint attention over
//   [image; text] tokens (JointAttnProcessor2_0: to_q/k/v for the image,
//   add_q/k/v_proj for the text, optional RMS qk-norm per head), to_out.0
//   and to_add_out, and the two GELU(tanh) feed-forwards. The last block is
//   context_pre_only: AdaLayerNormContinuous on the text, no to_add_out, no
//   text feed-forward;
// - norm_out (AdaLayerNormContinuous), proj_out and unpatchify.
//
// Config keys are those of diffusers' config.json plus `latent_size` (the
// latent height/width the program runs at; sample_size stays the trained
// one, which sets the positional table's base size) and `text_tokens` (the
// prompt length L). `qk_norm` is `rms_norm` or `none`;
// `dual_attention_layers` a comma-separated list (empty for SD3.0).
//
//===----------------------------------------------------------------------===//

#include "frontends/builder/Model.h"
#include "frontends/models/Layers.h"
#include "frontends/models/Models.h"

#include <set>

using namespace omni::fe;
using namespace omni::fe::layers;

namespace {

constexpr double kEps = 1e-6;

struct SD3Config {
  int64_t sampleSize, latentSize, patchSize, inChannels, numLayers, headDim,
      heads, jointDim, captionDim, pooledDim, outChannels, posEmbedMaxSize,
      textTokens;
  bool qkNorm;
  std::set<int64_t> dualLayers;
  int64_t width() const { return headDim * heads; }
};

/// `x + gate * y` with a per-sample gate [B, D] over y [B, S, D].
Tensor gatedAdd(const Tensor &x, const Tensor &gate, const Tensor &y) {
  return x + gate.broadcastInDim(y.shape(), {0, 2}) * y;
}

class SD3Transformer final : public VelocityModel {
public:
  explicit SD3Transformer(SD3Config c) : c_(std::move(c)) {}

  Shape latentShape() const override {
    return {c_.inChannels, c_.latentSize, c_.latentSize};
  }
  ConditioningShapes conditioning() const override {
    return {{c_.textTokens, c_.jointDim}, {c_.pooledDim}};
  }
  std::vector<std::string> loraTargets() const override {
    return {"attn.to_q",       "attn.to_k",       "attn.to_v",
            "attn.to_out.0",   "attn.add_q_proj", "attn.add_k_proj",
            "attn.add_v_proj", "attn.to_add_out"};
  }

  Tensor forward(Module &m, const Tensor &x, const Tensor &timestep,
                 const Tensor &prompt, const Tensor &pooled,
                 const Tensor &) override {
    Graph &g = x.graph();
    int64_t d = c_.width(), p = c_.patchSize;
    int64_t h = x.dim(2) / p, w = x.dim(3) / p;

    // PatchEmbed with SD3's centre crop of the max-size table.
    g.setLocation("pos_embed");
    int64_t top = (c_.posEmbedMaxSize - h) / 2;
    int64_t left = (c_.posEmbedMaxSize - w) / 2;
    Tensor img = patchEmbed(m["pos_embed"], x, d, p) +
                 sincosPosEmbed2d(g, d, c_.posEmbedMaxSize,
                                  static_cast<double>(c_.sampleSize / p), 1.0,
                                  top, left, h, w);

    // CombinedTimestepTextProjEmbeddings.
    g.setLocation("time_text_embed");
    Module te = m["time_text_embed"];
    Tensor tProj = timestepSinusoids(timestep, 256, /*flipSinToCos=*/true, 0.0);
    Tensor pooledProj = te["text_embedder"].linear(
        "linear_2", silu(te["text_embedder"].linear("linear_1", pooled, d)), d);
    Tensor temb =
        timestepEmbedding(te["timestep_embedder"], tProj, d) + pooledProj;
    Tensor act = silu(temb);

    g.setLocation("context_embedder");
    Tensor txt = m.linear("context_embedder", prompt, c_.captionDim);

    for (int64_t i = 0; i < c_.numLayers; ++i) {
      std::string name = std::to_string(i);
      g.setLocation("transformer_blocks." + name);
      // A private function per block when the recipe recomputes blocks.
      RecomputedBlock rb(g, recomputeBlocks());
      block(m["transformer_blocks"][name], img, txt, act,
            /*contextPreOnly=*/i == c_.numLayers - 1,
            /*dual=*/c_.dualLayers.count(i) != 0);
      std::vector<Tensor> out =
          rb.finish("transformer_blocks." + name, {img, txt});
      img = out[0];
      txt = out[1];
    }

    // AdaLayerNormContinuous: (scale, shift) in that order.
    g.setLocation("norm_out");
    std::vector<Tensor> ss =
        m["norm_out"].linear("linear", act, 2 * d).chunk(2, 1);
    Tensor out = modulate(layerNorm(img, {}, {}, kEps), ss[1], ss[0]);
    g.setLocation("proj_out");
    out = m.linear("proj_out", out, p * p * c_.outChannels);
    g.setLocation("");
    return unpatchify(out, h, w, p, c_.outChannels);
  }

private:
  /// Query/key/value heads [B, H, S, D] of one token stream, qk-normed.
  std::vector<Tensor> qkv(Module attn, const Tensor &x, const std::string &q,
                          const std::string &k, const std::string &v,
                          const std::string &normQ, const std::string &normK) {
    int64_t d = c_.width();
    Tensor qh = splitHeads(attn.linear(q, x, d), c_.heads);
    Tensor kh = splitHeads(attn.linear(k, x, d), c_.heads);
    Tensor vh = splitHeads(attn.linear(v, x, d), c_.heads);
    if (c_.qkNorm) {
      qh = attn.rmsNorm(normQ, qh, kEps);
      kh = attn.rmsNorm(normK, kh, kEps);
    }
    return {qh, kh, vh};
  }

  /// One JointTransformerBlock; updates the image and text tokens.
  void block(Module blk, Tensor &img, Tensor &txt, const Tensor &act,
             bool contextPreOnly, bool dual) {
    int64_t d = c_.width();
    // norm1: AdaLayerNormZero (6 chunks) or SD35AdaLayerNormZeroX (9):
    // shift_msa, scale_msa, gate_msa, shift_mlp, scale_mlp, gate_mlp
    // [, shift_msa2, scale_msa2, gate_msa2].
    int64_t parts = dual ? 9 : 6;
    std::vector<Tensor> mod =
        blk["norm1"].linear("linear", act, parts * d).chunk(parts, 1);
    Tensor imgNormed = layerNorm(img, {}, {}, kEps);
    Tensor nImg = modulate(imgNormed, mod[0], mod[1]);

    // norm1_context: AdaLayerNormZero, or AdaLayerNormContinuous (scale,
    // shift) on the last block.
    std::vector<Tensor> cmod;
    Tensor txtNormed = layerNorm(txt, {}, {}, kEps), nTxt;
    if (contextPreOnly) {
      cmod = blk["norm1_context"].linear("linear", act, 2 * d).chunk(2, 1);
      nTxt = modulate(txtNormed, cmod[1], cmod[0]);
    } else {
      cmod = blk["norm1_context"].linear("linear", act, 6 * d).chunk(6, 1);
      nTxt = modulate(txtNormed, cmod[0], cmod[1]);
    }

    // Joint attention over [image; text] tokens.
    Module attn = blk["attn"];
    std::vector<Tensor> a =
        qkv(attn, nImg, "to_q", "to_k", "to_v", "norm_q", "norm_k");
    std::vector<Tensor> b = qkv(attn, nTxt, "add_q_proj", "add_k_proj",
                                "add_v_proj", "norm_added_q", "norm_added_k");
    Tensor joint =
        mergeHeads(attention(concat({a[0], b[0]}, 2), concat({a[1], b[1]}, 2),
                             concat({a[2], b[2]}, 2)));
    int64_t s = img.dim(1), l = txt.dim(1);
    Tensor imgAttn = attn.linear("to_out.0", joint.slice(1, 0, s), d);
    img = gatedAdd(img, mod[2], imgAttn);

    if (dual) {
      Module attn2 = blk["attn2"];
      Tensor n2 = modulate(imgNormed, mod[6], mod[7]);
      std::vector<Tensor> q =
          qkv(attn2, n2, "to_q", "to_k", "to_v", "norm_q", "norm_k");
      Tensor selfAttn =
          attn2.linear("to_out.0", mergeHeads(attention(q[0], q[1], q[2])), d);
      img = gatedAdd(img, mod[8], selfAttn);
    }

    Tensor ffIn = modulate(layerNorm(img, {}, {}, kEps), mod[3], mod[4]);
    img = gatedAdd(img, mod[5], feedForward(blk["ff"], ffIn));

    if (contextPreOnly)
      return; // diffusers drops the text stream after the last block
    Tensor txtAttn = attn.linear("to_add_out", joint.slice(1, s, s + l), d);
    txt = gatedAdd(txt, cmod[2], txtAttn);
    Tensor ffCtx = modulate(layerNorm(txt, {}, {}, kEps), cmod[3], cmod[4]);
    txt = gatedAdd(txt, cmod[5], feedForward(blk["ff_context"], ffCtx));
  }

  SD3Config c_;
};

llvm::Error sd3Error(const std::string &message) {
  return llvm::createStringError("sd3: " + message);
}

llvm::Expected<std::unique_ptr<VelocityModel>> makeSD3(const Config &cfg) {
  SD3Config c;
  c.sampleSize = cfg.getInt("sample_size");
  c.latentSize = cfg.getInt("latent_size");
  c.patchSize = cfg.getInt("patch_size");
  c.inChannels = cfg.getInt("in_channels");
  c.numLayers = cfg.getInt("num_layers");
  c.headDim = cfg.getInt("attention_head_dim");
  c.heads = cfg.getInt("num_attention_heads");
  c.jointDim = cfg.getInt("joint_attention_dim");
  c.captionDim = cfg.getInt("caption_projection_dim");
  c.pooledDim = cfg.getInt("pooled_projection_dim");
  c.outChannels = cfg.getInt("out_channels");
  c.posEmbedMaxSize = cfg.getInt("pos_embed_max_size");
  c.textTokens = cfg.getInt("text_tokens");
  std::string qkNorm = cfg.getString("qk_norm");
  std::vector<int64_t> dual = cfg.getInts("dual_attention_layers");
  if (llvm::Error e = cfg.takeError())
    return sd3Error(llvm::toString(std::move(e)));

  const std::pair<const char *, int64_t> positive[] = {
      {"sample_size", c.sampleSize},
      {"latent_size", c.latentSize},
      {"patch_size", c.patchSize},
      {"in_channels", c.inChannels},
      {"num_layers", c.numLayers},
      {"attention_head_dim", c.headDim},
      {"num_attention_heads", c.heads},
      {"joint_attention_dim", c.jointDim},
      {"caption_projection_dim", c.captionDim},
      {"pooled_projection_dim", c.pooledDim},
      {"out_channels", c.outChannels},
      {"pos_embed_max_size", c.posEmbedMaxSize},
      {"text_tokens", c.textTokens}};
  for (const auto &[key, value] : positive)
    if (value <= 0)
      return sd3Error(std::string(key) + " must be positive, found " +
                      std::to_string(value));
  if (c.latentSize % c.patchSize)
    return sd3Error("latent_size (" + std::to_string(c.latentSize) +
                    ") must be a multiple of patch_size (" +
                    std::to_string(c.patchSize) + ")");
  if (c.latentSize / c.patchSize > c.posEmbedMaxSize)
    return sd3Error("latent_size / patch_size (" +
                    std::to_string(c.latentSize / c.patchSize) +
                    ") exceeds pos_embed_max_size (" +
                    std::to_string(c.posEmbedMaxSize) + ")");
  if (c.sampleSize < c.patchSize)
    return sd3Error("sample_size (" + std::to_string(c.sampleSize) +
                    ") must be at least patch_size (" +
                    std::to_string(c.patchSize) + ")");
  if (c.width() % 4)
    return sd3Error("the width num_attention_heads * attention_head_dim (" +
                    std::to_string(c.width()) +
                    ") must be a multiple of 4 (2-D sin-cos embedding)");
  if (c.captionDim != c.width())
    return sd3Error("caption_projection_dim (" + std::to_string(c.captionDim) +
                    ") must equal num_attention_heads * attention_head_dim (" +
                    std::to_string(c.width()) + ")");
  if (c.outChannels != c.inChannels)
    return sd3Error("out_channels (" + std::to_string(c.outChannels) +
                    ") must equal in_channels (" +
                    std::to_string(c.inChannels) + ") for a velocity model");
  if (qkNorm != "rms_norm" && qkNorm != "none")
    return sd3Error("qk_norm must be rms_norm or none, found '" + qkNorm + "'");
  c.qkNorm = qkNorm == "rms_norm";
  for (int64_t i : dual) {
    if (i < 0 || i >= c.numLayers)
      return sd3Error("dual_attention_layers entry " + std::to_string(i) +
                      " is not a layer index in [0, " +
                      std::to_string(c.numLayers) + ")");
    c.dualLayers.insert(i);
  }
  return std::make_unique<SD3Transformer>(std::move(c));
}

} // namespace

void omni::fe::registerSD3Transformer(Registry &registry) {
  ModelEntry e;
  e.name = "sd3";
  e.kind = ModelKind::Velocity;
  e.description = "SD3/SD3.5 MMDiT (diffusers SD3Transformer2DModel names): "
                  "joint text-image attention, text tokens + pooled text";
  Config tiny{{"sample_size", "16"},
              {"latent_size", "16"},
              {"patch_size", "2"},
              {"in_channels", "16"},
              {"num_layers", "2"},
              {"attention_head_dim", "16"},
              {"num_attention_heads", "4"},
              {"joint_attention_dim", "32"},
              {"caption_projection_dim", "64"},
              {"pooled_projection_dim", "32"},
              {"out_channels", "16"},
              {"pos_embed_max_size", "16"},
              {"qk_norm", "rms_norm"},
              {"dual_attention_layers", "0"},
              {"text_tokens", "8"}};
  Config small = tiny;
  small.set("sample_size", "32");
  small.set("latent_size", "32");
  small.set("num_layers", "6");
  small.set("attention_head_dim", "32");
  small.set("num_attention_heads", "8");
  small.set("joint_attention_dim", "256");
  small.set("caption_projection_dim", "256");
  small.set("pooled_projection_dim", "128");
  small.set("pos_embed_max_size", "32");
  small.set("dual_attention_layers", "0,1,2");
  small.set("text_tokens", "32");
  // stabilityai/stable-diffusion-3.5-medium transformer/config.json; the
  // prompt is 77 CLIP + 256 T5 tokens. latent_size=64 runs it at 512 px.
  Config medium{{"sample_size", "128"},
                {"latent_size", "128"},
                {"patch_size", "2"},
                {"in_channels", "16"},
                {"num_layers", "24"},
                {"attention_head_dim", "64"},
                {"num_attention_heads", "24"},
                {"joint_attention_dim", "4096"},
                {"caption_projection_dim", "1536"},
                {"pooled_projection_dim", "2048"},
                {"out_channels", "16"},
                {"pos_embed_max_size", "384"},
                {"qk_norm", "rms_norm"},
                {"dual_attention_layers", "0,1,2,3,4,5,6,7,8,9,10,11,12"},
                {"text_tokens", "333"}};
  e.presets = {{"tiny", tiny}, {"small", small}, {"sd3.5-medium", medium}};
  e.makeVelocity = makeSD3;
  registry.add(std::move(e));
}
