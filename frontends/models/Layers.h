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
// - multi-head attention head split/merge and the GELU feed-forward.
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

/// diffusers FeedForward(dim, activation_fn="gelu-approximate"):
/// net.0.proj (dim -> mult*dim), GELU(tanh), net.2 (-> dim).
Tensor feedForward(Module m, const Tensor &x, int64_t mult = 4);

/// adaLN modulation `x * (1 + scale) + shift` with per-sample [B, D]
/// shift and scale over x [B, S, D].
Tensor modulate(const Tensor &x, const Tensor &shift, const Tensor &scale);

} // namespace omni::fe::layers

#endif // OMNI_FRONTENDS_MODELS_LAYERS_H
