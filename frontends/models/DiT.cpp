//===- DiT.cpp - a plain DiT velocity model (docs/writing-a-model.md) -----===//
//
// The worked example of docs/writing-a-model.md: a DiT (Peebles & Xie) with
// adaLN-Zero blocks, conditioned on the timestep and a pooled text
// embedding (no text tokens). Parameter names follow diffusers' conventions
// (PatchEmbed, CombinedTimestepTextProjEmbeddings, AdaLayerNormZero,
// Attention, FeedForward, AdaLayerNormContinuous).
//
//===----------------------------------------------------------------------===//

#include "frontends/builder/Model.h"
#include "frontends/models/Layers.h"
#include "frontends/models/Models.h"

using namespace omni::fe;
using namespace omni::fe::layers;

namespace {

struct DiTConfig {
  int64_t sampleSize, patchSize, inChannels, numLayers, headDim, heads,
      pooledDim;
  int64_t width() const { return headDim * heads; }
};

class DiT final : public VelocityModel {
public:
  explicit DiT(DiTConfig c) : c_(c) {}

  Shape latentShape() const override {
    return {c_.inChannels, c_.sampleSize, c_.sampleSize};
  }
  ConditioningShapes conditioning() const override {
    return {{}, {c_.pooledDim}};
  }
  std::vector<std::string> loraTargets() const override {
    return {"attn.to_q", "attn.to_k", "attn.to_v", "attn.to_out.0"};
  }

  Tensor forward(Module &m, const Tensor &x, const Tensor &timestep,
                 const Tensor &, const Tensor &pooled,
                 const Tensor &) override {
    Graph &g = x.graph();
    int64_t d = c_.width(), p = c_.patchSize;
    int64_t h = c_.sampleSize / p, w = c_.sampleSize / p;

    g.setLocation("pos_embed");
    Tensor tokens = patchEmbed(m["pos_embed"], x, d, p) +
                    sincosPosEmbed2d(g, d, h, h, 1.0, 0, 0, h, w);

    g.setLocation("time_text_embed");
    Module emb = m["time_text_embed"];
    Tensor temb = timestepEmbedding(
        emb["timestep_embedder"],
        timestepSinusoids(timestep, 256, /*flipSinToCos=*/true, 0.0), d);
    Module text = emb["text_embedder"];
    Tensor cond =
        temb +
        text.linear("linear_2", silu(text.linear("linear_1", pooled, d)), d);
    Tensor act = silu(cond);

    for (int64_t i = 0; i < c_.numLayers; ++i) {
      g.setLocation("transformer_blocks." + std::to_string(i));
      Module blk = m["transformer_blocks"][std::to_string(i)];
      std::vector<Tensor> mod =
          blk["norm1"].linear("linear", act, 6 * d).chunk(6, 1);
      Tensor n = modulate(layerNorm(tokens, {}, {}, 1e-6), mod[0], mod[1]);
      Module attn = blk["attn"];
      Tensor q = splitHeads(attn.linear("to_q", n, d), c_.heads);
      Tensor k = splitHeads(attn.linear("to_k", n, d), c_.heads);
      Tensor v = splitHeads(attn.linear("to_v", n, d), c_.heads);
      Tensor a = attn.linear("to_out.0", mergeHeads(attention(q, k, v)), d);
      Shape s = tokens.shape();
      tokens = tokens + mod[2].broadcastInDim(s, {0, 2}) * a;
      Tensor n2 = modulate(layerNorm(tokens, {}, {}, 1e-6), mod[3], mod[4]);
      tokens = tokens +
               mod[5].broadcastInDim(s, {0, 2}) * feedForward(blk["ff"], n2);
    }

    g.setLocation("norm_out");
    // AdaLayerNormContinuous: (scale, shift) in that order.
    std::vector<Tensor> ss =
        m["norm_out"].linear("linear", act, 2 * d).chunk(2, 1);
    Tensor out = modulate(layerNorm(tokens, {}, {}, 1e-6), ss[1], ss[0]);
    out = m.linear("proj_out", out, p * p * c_.inChannels);
    g.setLocation("");
    return unpatchify(out, h, w, p, c_.inChannels);
  }

private:
  DiTConfig c_;
};

llvm::Expected<std::unique_ptr<VelocityModel>> makeDiT(const Config &cfg) {
  DiTConfig c{
      cfg.getInt("sample_size"),          cfg.getInt("patch_size"),
      cfg.getInt("in_channels"),          cfg.getInt("num_layers"),
      cfg.getInt("attention_head_dim"),   cfg.getInt("num_attention_heads"),
      cfg.getInt("pooled_projection_dim")};
  if (llvm::Error e = cfg.takeError())
    return llvm::createStringError("dit: " + llvm::toString(std::move(e)));
  if (c.sampleSize <= 0 || c.patchSize <= 0 || c.sampleSize % c.patchSize)
    return llvm::createStringError(
        "dit: sample_size (" + std::to_string(c.sampleSize) +
        ") must be a positive multiple of patch_size (" +
        std::to_string(c.patchSize) + ")");
  if (c.inChannels <= 0 || c.numLayers < 0 || c.headDim <= 0 || c.heads <= 0 ||
      c.pooledDim <= 0 || c.width() % 4)
    return llvm::createStringError(
        "dit: in_channels, attention_head_dim, num_attention_heads and "
        "pooled_projection_dim must be positive and the width a multiple of 4");
  return std::make_unique<DiT>(c);
}

} // namespace

void omni::fe::registerDiT(Registry &registry) {
  ModelEntry e;
  e.name = "dit";
  e.kind = ModelKind::Velocity;
  e.description = "plain DiT with adaLN-Zero, timestep + pooled-text "
                  "conditioning (the worked example of writing-a-model.md)";
  Config tiny{{"sample_size", "16"},          {"patch_size", "2"},
              {"in_channels", "16"},          {"num_layers", "2"},
              {"attention_head_dim", "16"},   {"num_attention_heads", "4"},
              {"pooled_projection_dim", "32"}};
  Config small = tiny;
  small.set("sample_size", "32");
  small.set("num_layers", "6");
  small.set("attention_head_dim", "32");
  small.set("num_attention_heads", "8");
  small.set("pooled_projection_dim", "128");
  e.presets = {{"tiny", tiny}, {"small", small}};
  e.makeVelocity = makeDiT;
  registry.add(std::move(e));
}
