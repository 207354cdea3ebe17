//===- QwenImage.cpp - Qwen-Image MMDiT (QwenImageTransformer2DModel) -----===//
//
// The transformer of Qwen-Image with the structure and parameter names of
// diffusers' QwenImageTransformer2DModel (transformer_qwenimage.py, 0.42.1),
// so that a diffusers `transformer/` safetensors file loads by name:
// - the latents [B, C, H, W] are packed into 2x2 patches as the pipeline's
//   _pack_latents does ([B, (H/2)(W/2), 4C], channel-major within a patch)
//   and the output is unpacked the same way (_unpack_latents), so the model
//   keeps the VelocityModel contract of frontends/builder/Model.h;
// - img_in (linear on the packed latents), txt_norm (RMSNorm) + txt_in on
//   the text tokens;
// - time_text_embed: QwenTimestepProjEmbeddings (256 sinusoids, cos first,
//   of 1000 sigma -> timestep_embedder);
// - transformer_blocks.N: QwenImageTransformerBlock: img_mod.1 / txt_mod.1
//   (SiLU + linear, 6 chunks: shift, scale, gate for attention and MLP),
//   affine-free layer norms, joint attention over [text; image] tokens
//   (QwenDoubleStreamAttnProcessor2_0: to_q/k/v and add_q/k/v_proj, RMS
//   norm_q/k and norm_added_q/k per head, then the rotary embedding of
//   QwenEmbedRope), to_out.0 / to_add_out, img_mlp / txt_mlp (GELU tanh);
// - norm_out (AdaLayerNormContinuous: scale, shift), proj_out.
//
// QwenEmbedRope (scale_rope=True, as the model builds it): each image
// token at grid row r, column c of the h x w patch grid has positions
// (frame 0, r - ceil(h/2), c - ceil(w/2)) on the axes of axes_dims_rope;
// text token j has position max(h/2, w/2) + j on all three axes. The tables
// are constants (diffusers recomputes them, they are no parameters).
//
// For the recipe (docs/writing-a-model.md section 7.5): scheduleShift()
// is the pipeline's dynamic shift (Qwen/Qwen-Image's scheduler config),
// toTokens()/fromTokens() the packed layout true CFG's norm rescale uses.
//
// Config keys are those of diffusers' config.json plus `latent_size` (the
// latent height/width the program runs at) and `text_tokens` (the prompt
// length L). The text mask (encoder_hidden_states_mask) is an additive
// key padding mask of the joint attention. Not modelled: zero_cond_t,
// use_additional_t_cond and use_layer3d_rope (the Edit variants), guidance
// embeddings (unused by diffusers' class).
//
//===----------------------------------------------------------------------===//

#include "frontends/builder/Model.h"
#include "frontends/models/Layers.h"
#include "frontends/models/Models.h"

#include <algorithm>
#include <tuple>

using namespace omni::fe;
using namespace omni::fe::layers;

namespace {

constexpr double kEps = 1e-6;
constexpr double kRopeTheta = 10000.0;
/// QwenEmbedRope's table length: positions lie in [-4096, 4096).
constexpr int64_t kRopePositions = 4096;

struct QwenImageConfig {
  int64_t patchSize, inChannels, outChannels, numLayers, headDim, heads,
      jointDim, latentSize, textTokens;
  std::vector<int64_t> axesDims;
  int64_t width() const { return headDim * heads; }
};

/// `x + gate * y` with a per-sample gate [B, D] over y [B, S, D].
Tensor gatedAdd(const Tensor &x, const Tensor &gate, const Tensor &y) {
  return x + gate.broadcastInDim(y.shape(), {0, 2}) * y;
}

/// _pack_latents: [B, C, 2h, 2w] -> [B, h*w, 4C] by
/// view(B, C, h, 2, w, 2).permute(0, 2, 4, 1, 3, 5).
Tensor pack(const Tensor &x) {
  int64_t b = x.dim(0), ch = x.dim(1), h = x.dim(2) / 2, w = x.dim(3) / 2;
  return x.reshape({b, ch, h, 2, w, 2})
      .transpose({0, 2, 4, 1, 3, 5})
      .reshape({b, h * w, ch * 4});
}

/// _unpack_latents: [B, h*w, 4C] -> [B, C, 2h, 2w] by
/// view(B, h, w, C, 2, 2).permute(0, 3, 1, 4, 2, 5).
Tensor unpack(const Tensor &tokens, int64_t ch, int64_t h, int64_t w) {
  int64_t b = tokens.dim(0);
  return tokens.reshape({b, h, w, ch, 2, 2})
      .transpose({0, 3, 1, 4, 2, 5})
      .reshape({b, ch, 2 * h, 2 * w});
}

/// Rotary cos/sin of the image tokens and the text tokens.
struct Rope {
  Tensor imgCos, imgSin, txtCos, txtSin;
};

class QwenImage final : public VelocityModel {
public:
  explicit QwenImage(QwenImageConfig c) : c_(std::move(c)) {}

  Shape latentShape() const override {
    return {c_.outChannels, c_.latentSize, c_.latentSize};
  }
  ConditioningShapes conditioning() const override {
    return {{c_.textTokens, c_.jointDim}, {}, /*promptMask=*/true};
  }
  /// QwenImagePipeline: mu = calculate_shift(image_seq_len, ...) with
  /// Qwen/Qwen-Image's scheduler_config.json (base_image_seq_len 256,
  /// max_image_seq_len 8192, base_shift 0.5, max_shift 0.9, shift_terminal
  /// 0.02, exponential time shift); image_seq_len is the packed token count.
  ScheduleShift scheduleShift() const override {
    ScheduleShift s;
    s.dynamic = true;
    s.imageSeqLen = (c_.latentSize / 2) * (c_.latentSize / 2);
    s.baseShift = 0.5;
    s.maxShift = 0.9;
    s.baseSeqLen = 256;
    s.maxSeqLen = 8192;
    s.shiftTerminal = 0.02;
    return s;
  }
  /// True CFG rescales norms over the packed tokens' 4C channels
  /// (torch.norm(noise_pred, dim=-1) on [B, S, 4C]).
  Tensor toTokens(const Tensor &v) const override { return pack(v); }
  Tensor fromTokens(const Tensor &tokens, const Shape &latent) const override {
    return unpack(tokens, latent[0], latent[1] / 2, latent[2] / 2);
  }
  std::vector<std::string> loraTargets() const override {
    return {"attn.to_q",       "attn.to_k",       "attn.to_v",
            "attn.to_out.0",   "attn.add_q_proj", "attn.add_k_proj",
            "attn.add_v_proj", "attn.to_add_out"};
  }

  Tensor forward(Module &m, const Tensor &x, const Tensor &timestep,
                 const Tensor &prompt, const Tensor &,
                 const Tensor &promptMask) override {
    Graph &g = x.graph();
    int64_t d = c_.width();
    int64_t h = x.dim(2) / 2, w = x.dim(3) / 2, l = prompt.dim(1);

    g.setLocation("img_in");
    Tensor img = m.linear("img_in", pack(x), d);

    // QwenTimestepProjEmbeddings: Timesteps(256, flip_sin_to_cos, shift 0,
    // scale 1000) of sigma = our timestep / 1000.
    g.setLocation("time_text_embed");
    Tensor tProj = timestepSinusoids(timestep, 256, /*flipSinToCos=*/true, 0.0);
    Tensor temb =
        timestepEmbedding(m["time_text_embed"]["timestep_embedder"], tProj, d);
    Tensor act = silu(temb);

    g.setLocation("txt_in");
    Tensor txt = m.rmsNorm("txt_norm", prompt, kEps);
    txt = m.linear("txt_in", txt, d);

    g.setLocation("pos_embed");
    Rope rope = ropeTables(g, h, w, l);

    // encoder_hidden_states_mask: the joint key padding mask over [txt;
    // img] (the image tokens all valid), as the transformer's forward
    // builds it once for every block; the rotary text positions stay those
    // of the padded length. Masked keys get no weight in any row, so the
    // padded tokens change nothing else.
    Tensor mask;
    if (promptMask) {
      g.setLocation("attention_mask");
      int64_t b = x.dim(0);
      Tensor valid = concat({promptMask, g.full({b, h * w}, 1.0)}, 1);
      mask = keyPaddingMask(valid, l + h * w);
    }

    for (int64_t i = 0; i < c_.numLayers; ++i) {
      std::string name = std::to_string(i);
      g.setLocation("transformer_blocks." + name);
      block(m["transformer_blocks"][name], img, txt, act, rope, mask);
    }

    // AdaLayerNormContinuous: (scale, shift) in that order.
    g.setLocation("norm_out");
    std::vector<Tensor> ss =
        m["norm_out"].linear("linear", act, 2 * d).chunk(2, 1);
    Tensor out = modulate(layerNorm(img, {}, {}, kEps), ss[1], ss[0]);
    g.setLocation("proj_out");
    out =
        m.linear("proj_out", out,
                 c_.patchSize * c_.patchSize * c_.outChannels); // [B, h*w, 4C]

    g.setLocation("");
    return unpack(out, c_.outChannels, h, w);
  }

private:
  /// QwenEmbedRope(theta 10000, axes_dims_rope, scale_rope=True) for an
  /// h x w patch grid and l text tokens.
  Rope ropeTables(Graph &g, int64_t h, int64_t w, int64_t l) const {
    std::vector<std::vector<int64_t>> imgPos, txtPos;
    for (int64_t r = 0; r < h; ++r)
      for (int64_t c = 0; c < w; ++c)
        imgPos.push_back({0, r - (h - h / 2), c - (w - w / 2)});
    int64_t start = std::max(h / 2, w / 2);
    for (int64_t j = 0; j < l; ++j)
      txtPos.push_back({start + j, start + j, start + j});
    Rope rope;
    std::tie(rope.imgCos, rope.imgSin) =
        rotaryConstants(g, rotaryTable(imgPos, c_.axesDims, kRopeTheta));
    std::tie(rope.txtCos, rope.txtSin) =
        rotaryConstants(g, rotaryTable(txtPos, c_.axesDims, kRopeTheta));
    return rope;
  }

  /// Query/key/value heads [B, H, S, D] of one stream: RMS q/k norms, then
  /// the rotary embedding of q and k.
  std::vector<Tensor> qkv(Module attn, const Tensor &x, const char *q,
                          const char *k, const char *v, const char *normQ,
                          const char *normK, const Tensor &cos,
                          const Tensor &sin) {
    int64_t d = c_.width();
    Tensor qh = splitHeads(attn.linear(q, x, d), c_.heads);
    Tensor kh = splitHeads(attn.linear(k, x, d), c_.heads);
    Tensor vh = splitHeads(attn.linear(v, x, d), c_.heads);
    qh = attn.rmsNorm(normQ, qh, kEps);
    kh = attn.rmsNorm(normK, kh, kEps);
    return {applyRotary(qh, cos, sin), applyRotary(kh, cos, sin), vh};
  }

  /// One QwenImageTransformerBlock; updates the image and text tokens.
  void block(Module blk, Tensor &img, Tensor &txt, const Tensor &act,
             const Rope &rope, const Tensor &mask) {
    int64_t d = c_.width();
    // img_mod / txt_mod: shift, scale, gate (attention), then (MLP).
    std::vector<Tensor> im = blk["img_mod"].linear("1", act, 6 * d).chunk(6, 1);
    std::vector<Tensor> tm = blk["txt_mod"].linear("1", act, 6 * d).chunk(6, 1);
    Tensor nImg = modulate(layerNorm(img, {}, {}, kEps), im[0], im[1]);
    Tensor nTxt = modulate(layerNorm(txt, {}, {}, kEps), tm[0], tm[1]);

    // Joint attention over [text; image] tokens.
    Module attn = blk["attn"];
    std::vector<Tensor> a = qkv(attn, nImg, "to_q", "to_k", "to_v", "norm_q",
                                "norm_k", rope.imgCos, rope.imgSin);
    std::vector<Tensor> t =
        qkv(attn, nTxt, "add_q_proj", "add_k_proj", "add_v_proj",
            "norm_added_q", "norm_added_k", rope.txtCos, rope.txtSin);
    Tensor joint =
        mergeHeads(attention(concat({t[0], a[0]}, 2), concat({t[1], a[1]}, 2),
                             concat({t[2], a[2]}, 2), mask));
    int64_t l = txt.dim(1), s = img.dim(1);
    Tensor imgAttn = attn.linear("to_out.0", joint.slice(1, l, l + s), d);
    Tensor txtAttn = attn.linear("to_add_out", joint.slice(1, 0, l), d);
    img = gatedAdd(img, im[2], imgAttn);
    txt = gatedAdd(txt, tm[2], txtAttn);

    Tensor ffImg = modulate(layerNorm(img, {}, {}, kEps), im[3], im[4]);
    img = gatedAdd(img, im[5], feedForward(blk["img_mlp"], ffImg));
    Tensor ffTxt = modulate(layerNorm(txt, {}, {}, kEps), tm[3], tm[4]);
    txt = gatedAdd(txt, tm[5], feedForward(blk["txt_mlp"], ffTxt));
  }

  QwenImageConfig c_;
};

llvm::Error qwenError(const std::string &message) {
  return llvm::createStringError("qwen_image: " + message);
}

llvm::Expected<std::unique_ptr<VelocityModel>>
makeQwenImage(const Config &cfg) {
  QwenImageConfig c;
  c.patchSize = cfg.getInt("patch_size");
  c.inChannels = cfg.getInt("in_channels");
  c.outChannels = cfg.getInt("out_channels");
  c.numLayers = cfg.getInt("num_layers");
  c.headDim = cfg.getInt("attention_head_dim");
  c.heads = cfg.getInt("num_attention_heads");
  c.jointDim = cfg.getInt("joint_attention_dim");
  c.axesDims = cfg.getInts("axes_dims_rope");
  c.latentSize = cfg.getInt("latent_size");
  c.textTokens = cfg.getInt("text_tokens");
  if (llvm::Error e = cfg.takeError())
    return qwenError(llvm::toString(std::move(e)));

  const std::pair<const char *, int64_t> positive[] = {
      {"patch_size", c.patchSize},         {"in_channels", c.inChannels},
      {"out_channels", c.outChannels},     {"num_layers", c.numLayers},
      {"attention_head_dim", c.headDim},   {"num_attention_heads", c.heads},
      {"joint_attention_dim", c.jointDim}, {"latent_size", c.latentSize},
      {"text_tokens", c.textTokens}};
  for (const auto &[key, value] : positive)
    if (value <= 0)
      return qwenError(std::string(key) + " must be positive, found " +
                       std::to_string(value));
  if (c.patchSize != 2)
    return qwenError("patch_size must be 2 (the pipeline packs 2x2 latent "
                     "patches), found " +
                     std::to_string(c.patchSize));
  if (c.inChannels != 4 * c.outChannels)
    return qwenError("in_channels (" + std::to_string(c.inChannels) +
                     ") must be 4 * out_channels (" +
                     std::to_string(c.outChannels) +
                     "): a packed 2x2 patch of the latent channels");
  if (c.latentSize % 2)
    return qwenError("latent_size (" + std::to_string(c.latentSize) +
                     ") must be even (2x2 packing)");
  if (c.axesDims.size() != 3)
    return qwenError("axes_dims_rope must list 3 dimensions (frame, height, "
                     "width), found " +
                     std::to_string(c.axesDims.size()));
  int64_t sum = 0;
  for (int64_t a : c.axesDims) {
    if (a <= 0 || a % 2)
      return qwenError("axes_dims_rope entries must be positive and even, "
                       "found " +
                       std::to_string(a));
    sum += a;
  }
  if (sum != c.headDim)
    return qwenError("axes_dims_rope must sum to attention_head_dim (" +
                     std::to_string(c.headDim) + "), found " +
                     std::to_string(sum));
  int64_t grid = c.latentSize / 2;
  if (grid - grid / 2 > kRopePositions ||
      grid / 2 + c.textTokens > kRopePositions)
    return qwenError("latent_size / 4 + text_tokens (" +
                     std::to_string(grid / 2 + c.textTokens) +
                     ") exceeds the 4096 rotary positions of QwenEmbedRope");
  return std::make_unique<QwenImage>(std::move(c));
}

} // namespace

void omni::fe::registerQwenImage(Registry &registry) {
  ModelEntry e;
  e.name = "qwen_image";
  e.kind = ModelKind::Velocity;
  e.description =
      "Qwen-Image MMDiT (diffusers QwenImageTransformer2DModel names): 2x2 "
      "packed latents, 3-D rotary embedding, text tokens without pooled text";
  Config tiny{{"patch_size", "2"},           {"in_channels", "64"},
              {"out_channels", "16"},        {"num_layers", "2"},
              {"attention_head_dim", "32"},  {"num_attention_heads", "2"},
              {"joint_attention_dim", "32"}, {"axes_dims_rope", "8,12,12"},
              {"latent_size", "16"},         {"text_tokens", "8"}};
  Config small = tiny;
  small.set("num_layers", "6");
  small.set("num_attention_heads", "8");
  small.set("joint_attention_dim", "256");
  small.set("latent_size", "32");
  small.set("text_tokens", "32");
  // Qwen/Qwen-Image transformer/config.json (diffusers' __init__ defaults);
  // latent_size 128 is the pipeline's default 1024 x 1024, text_tokens its
  // max_sequence_length.
  Config full{{"patch_size", "2"},
              {"in_channels", "64"},
              {"out_channels", "16"},
              {"num_layers", "60"},
              {"attention_head_dim", "128"},
              {"num_attention_heads", "24"},
              {"joint_attention_dim", "3584"},
              {"axes_dims_rope", "16,56,56"},
              {"latent_size", "128"},
              {"text_tokens", "512"}};
  e.presets = {{"tiny", tiny}, {"small", small}, {"qwen-image", full}};
  e.pipelineDecoder = "autoencoder_kl_qwenimage";
  e.makeVelocity = makeQwenImage;
  registry.add(std::move(e));
}
