//===- Layers.h - building blocks shared by the diffusers models -*- C++
//-*-===//
//
// Pieces several diffusers models share, written once with the graph
// builder and matching diffusers' numerics (float32):
// - timestep sinusoidal embedding (diffusers.models.embeddings.
//   get_timestep_embedding) and the TimestepEmbedding MLP;
// - 2-D sin-cos positional embeddings (get_2d_sincos_pos_embed), computed
//   on the host in double precision like diffusers' numpy/float64 path;
// - patch embedding (conv, stride p) and unpatchify;
// - multi-head attention head split/merge and the GELU feed-forward;
// - rotary position embeddings (RoPE) over several position axes, in the
//   complex, interleaved-pairs form of diffusers' apply_rotary_emb with
//   use_real=False (Qwen-Image, FLUX, Wan): the cos/sin tables are computed
//   on the host and emitted as constants (docs/writing-a-model.md section 7).
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_FRONTENDS_MODELS_LAYERS_H
#define OMNI_FRONTENDS_MODELS_LAYERS_H

#include "frontends/builder/Builder.h"

namespace omni::fe::layers {

/// get_timestep_embedding(t, dim, flip_sin_to_cos, downscale_freq_shift,
/// scale = 1, max_period = 10000): `t` [B] -> [B, dim].
Tensor timestepSinusoids(const Tensor &t, int64_t dim, bool flipSinToCos,
                         double downscaleFreqShift);

/// diffusers TimestepEmbedding: linear_1 -> SiLU -> linear_2.
Tensor timestepEmbedding(Module m, const Tensor &x, int64_t dim);

/// get_2d_sincos_pos_embed(embed_dim, grid_size, base_size,
/// interpolation_scale) cropped to rows [top, top + h) and columns
/// [left, left + w) of the `gridSize` x `gridSize` grid: h*w rows of
/// embed_dim values (row-major), as a [1, h*w, embed_dim] constant.
Tensor sincosPosEmbed2d(Graph &g, int64_t embedDim, int64_t gridSize,
                        double baseSize, double interpolationScale, int64_t top,
                        int64_t left, int64_t h, int64_t w);

/// PatchEmbed's projection: conv2d(C -> dim, kernel p, stride p), then
/// flatten to tokens [B, (H/p)(W/p), dim].
Tensor patchEmbed(Module m, const Tensor &x, int64_t dim, int64_t patch);

/// [B, h*w, p*p*C] -> [B, C, h*p, w*p] (diffusers' unpatchify:
/// reshape (B, h, w, p, p, C), einsum nhwpqc->nchpwq).
Tensor unpatchify(const Tensor &x, int64_t h, int64_t w, int64_t patch,
                  int64_t channels);

/// [B, S, H*D] -> [B, H, S, D].
Tensor splitHeads(const Tensor &x, int64_t heads);
/// [B, H, S, D] -> [B, S, H*D].
Tensor mergeHeads(const Tensor &x);
/// The additive attention mask [B, 1, Sq, Sk] of a key padding mask
/// `valid` [B, Sk] (1: a token, 0: padding; torch's boolean key mask):
/// 0 on valid keys, -1e30 on padding, for every one of the `queries`
/// rows. exp underflows to exactly 0 on padding, as -inf would, and a
/// block of only padded keys cannot make a NaN in an online softmax.
Tensor keyPaddingMask(const Tensor &valid, int64_t queries);

/// diffusers FeedForward(dim, activation_fn="gelu-approximate"):
/// net.0.proj (dim -> mult*dim), GELU(tanh), net.2 (-> dim).
Tensor feedForward(Module m, const Tensor &x, int64_t mult = 4);

/// adaLN modulation `x * (1 + scale) + shift` with per-sample [B, D]
/// shift and scale over x [B, S, D].
Tensor modulate(const Tensor &x, const Tensor &shift, const Tensor &scale);

/// Per-token rotation angles of a multi-axis rotary embedding: token t's
/// row holds, for each axis a in order, the angles
/// positions[t][a] * theta^(-2k / axesDims[a]) for k < axesDims[a] / 2
/// (diffusers' rope_params per axis, concatenated like QwenEmbedRope's
/// pos_freqs; FLUX's FluxPosEmbed and Wan's rope tables are the same
/// construction). Angles are float32 products as torch computes them
/// (float32 inverse frequencies times the position); cos and sin are taken
/// in double precision and rounded.
struct RotaryTable {
  int64_t tokens = 0;
  int64_t half = 0;            // sum(axesDims) / 2: the rotated pairs per head
  std::vector<float> cos, sin; // [tokens][half], row-major
};

/// The table of `positions` (one row of per-axis integer positions per
/// token; every row has axesDims.size() entries, every axis dim is even).
RotaryTable rotaryTable(const std::vector<std::vector<int64_t>> &positions,
                        const std::vector<int64_t> &axesDims, double theta);

/// The table's cos and sin as [tokens, half] f32 constants.
std::pair<Tensor, Tensor> rotaryConstants(Graph &g, const RotaryTable &table);

/// Rotary embedding of x [B, H, S, D] with cos/sin [S, D/2]: each pair
/// (x[2k], x[2k+1]) of a head is the complex number x[2k] + i x[2k+1],
/// multiplied by cos[s, k] + i sin[s, k] (diffusers apply_rotary_emb*
/// with use_real=False, or use_real=True with interleaved cos/sin).
Tensor applyRotary(const Tensor &x, const Tensor &cos, const Tensor &sin);

/// A recomputed block (activation checkpointing, docs/autodiff.md
/// "Rematerialization"): the ops built between construction and `finish`
/// move into a private func.func `<enclosing function>.<name>` marked
/// `omni.recompute` and `no_inline`, and a call to it takes their place, so
/// that omni-autodiff recomputes the block's activations in the backward
/// program and saves only its results. Constants built before the block
/// are cloned into it; every other value from outside becomes an argument
/// (parameters stay arguments of the enclosing function, so the public
/// programs and the parameter names do not change). Nothing built inside
/// may be used after `finish` except the results it returns. Disabled, it
/// builds the ops in place and `finish` returns `outputs` unchanged.
class RecomputedBlock {
public:
  RecomputedBlock(Graph &g, bool enabled);
  /// Outlines the block; returns the call's results for `outputs`.
  std::vector<Tensor> finish(const std::string &name,
                             const std::vector<Tensor> &outputs);

private:
  Graph &g_;
  bool enabled_;
  mlir::Block *block_ = nullptr;
  /// The op before the block's first op (null: it starts the body).
  mlir::Operation *before_ = nullptr;
};

} // namespace omni::fe::layers

#endif // OMNI_FRONTENDS_MODELS_LAYERS_H
