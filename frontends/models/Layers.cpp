//===- Layers.cpp - building blocks shared by the diffusers models --------===//

#include "frontends/models/Layers.h"

#include <cmath>

namespace omni::fe::layers {

Tensor timestepSinusoids(const Tensor &t, int64_t dim, bool flipSinToCos,
                         double downscaleFreqShift) {
  int64_t half = dim / 2;
  // float32 like torch: exponent = -log(10000) * arange(half) / (half - s).
  std::vector<float> freqs(half);
  float logPeriod = -std::log(10000.0f);
  for (int64_t i = 0; i < half; ++i) {
    float exponent = logPeriod * static_cast<float>(i);
    exponent = exponent / static_cast<float>(half - downscaleFreqShift);
    freqs[i] = std::exp(exponent);
  }
  Graph &g = t.graph();
  int64_t b = t.dim(0);
  Tensor f = g.constant({half}, freqs).broadcastInDim({b, half}, {1});
  Tensor arg = t.broadcastInDim({b, half}, {0}) * f;
  Tensor s = sin(arg), c = cos(arg);
  Tensor emb = flipSinToCos ? concat({c, s}, 1) : concat({s, c}, 1);
  // An odd dim gets a zero column, as diffusers pads.
  return dim % 2 ? concat({emb, g.full({b, 1}, 0.0)}, 1) : emb;
}

Tensor timestepEmbedding(Module m, const Tensor &x, int64_t dim) {
  return m.linear("linear_2", silu(m.linear("linear_1", x, dim)), dim);
}

Tensor sincosPosEmbed2d(Graph &g, int64_t embedDim, int64_t gridSize,
                        double baseSize, double interpolationScale, int64_t top,
                        int64_t left, int64_t h, int64_t w) {
  int64_t quarter = embedDim / 4; // each of the two halves: sin | cos
  std::vector<double> omega(quarter);
  for (int64_t i = 0; i < quarter; ++i)
    omega[i] =
        1.0 / std::pow(10000.0, static_cast<double>(i) / (embedDim / 2 / 2.0));
  // Grid coordinates are float32 in diffusers (arange(...) / (n / base) /
  // interpolation_scale); the outer product and sin/cos are float64.
  auto coord = [&](int64_t i) {
    float v = static_cast<float>(i) /
              static_cast<float>(static_cast<double>(gridSize) / baseSize);
    return static_cast<double>(v / static_cast<float>(interpolationScale));
  };
  std::vector<float> values;
  values.reserve(h * w * embedDim);
  for (int64_t r = top; r < top + h; ++r)
    for (int64_t c = left; c < left + w; ++c) {
      // diffusers' meshgrid(grid_w, grid_h, indexing="xy") puts the column
      // coordinate first: [sin(c w), cos(c w), sin(r w), cos(r w)].
      for (double pos : {coord(c), coord(r)}) {
        for (int64_t i = 0; i < quarter; ++i)
          values.push_back(static_cast<float>(std::sin(pos * omega[i])));
        for (int64_t i = 0; i < quarter; ++i)
          values.push_back(static_cast<float>(std::cos(pos * omega[i])));
      }
    }
  return g.constant({1, h * w, embedDim}, values);
}

Tensor patchEmbed(Module m, const Tensor &x, int64_t dim, int64_t patch) {
  Tensor y = m.conv2d("proj", x, dim, patch, patch, 0); // [B, D, h, w]
  int64_t b = y.dim(0), tokens = y.dim(2) * y.dim(3);
  return y.reshape({b, dim, tokens}).transpose({0, 2, 1});
}

Tensor unpatchify(const Tensor &x, int64_t h, int64_t w, int64_t patch,
                  int64_t channels) {
  int64_t b = x.dim(0);
  Tensor y = x.reshape({b, h, w, patch, patch, channels})
                 .transpose({0, 5, 1, 3, 2, 4});
  return y.reshape({b, channels, h * patch, w * patch});
}

Tensor splitHeads(const Tensor &x, int64_t heads) {
  int64_t b = x.dim(0), s = x.dim(1), d = x.dim(2) / heads;
  return x.reshape({b, s, heads, d}).transpose({0, 2, 1, 3});
}

Tensor mergeHeads(const Tensor &x) {
  int64_t b = x.dim(0), h = x.dim(1), s = x.dim(2), d = x.dim(3);
  return x.transpose({0, 2, 1, 3}).reshape({b, s, h * d});
}

Tensor feedForward(Module m, const Tensor &x, int64_t mult) {
  int64_t dim = x.dim(-1);
  Tensor h = gelu(m.linear("net.0.proj", x, dim * mult), /*tanh=*/true);
  return m.linear("net.2", h, dim);
}

Tensor modulate(const Tensor &x, const Tensor &shift, const Tensor &scale) {
  Shape s = x.shape();
  return x * (1.0 + scale.broadcastInDim(s, {0, 2})) +
         shift.broadcastInDim(s, {0, 2});
}

} // namespace omni::fe::layers
