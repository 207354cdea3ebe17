//===- Model.h - model interfaces, configs and the registry ----*- C++ -*-===//
//
// What a recipe needs from a model, and how models are found by name:
// - Config: named hyper-parameters (string key -> value) with presets per
//   model (`tiny`, `small`, `sd3.5-medium`, ...) and `key=value` overrides;
// - VelocityModel: v(x, t, conditioning) on NCHW latents (flow matching);
// - ImageDecoder: latents -> images (a VAE decoder);
// - Registry: models by name, each with its named configs.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_FRONTENDS_BUILDER_MODEL_H
#define OMNI_FRONTENDS_BUILDER_MODEL_H

#include "frontends/builder/Builder.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace omni::fe {

/// Hyper-parameters as ordered key -> value text. Getters of a key the
/// config lacks, or of a value that does not parse, are errors reported
/// by `error()` (the first one) so factories check once at the end.
class Config {
public:
  Config() = default;
  Config(std::initializer_list<std::pair<const std::string, std::string>> kv)
      : values_(kv) {}

  void set(const std::string &key, const std::string &value) {
    values_[key] = value;
  }
  bool has(const std::string &key) const { return values_.count(key) != 0; }
  /// Applies `key=value`; the key must already exist (a typo is an error).
  llvm::Error override(const std::string &assignment);

  int64_t getInt(const std::string &key) const;
  double getDouble(const std::string &key) const;
  bool getBool(const std::string &key) const;
  std::string getString(const std::string &key) const;
  std::vector<int64_t> getInts(const std::string &key) const;
  std::vector<double> getDoubles(const std::string &key) const;
  std::vector<bool> getBools(const std::string &key) const;
  /// The first getter failure, if any (and clears it).
  llvm::Error takeError() const;

  const std::map<std::string, std::string> &values() const { return values_; }
  /// `key=value` pairs separated by spaces (for headers and logs).
  std::string str() const;

private:
  void fail(const std::string &key, const std::string &why) const;
  /// Calls `parse` on each comma-separated item of `key`; the first item it
  /// rejects fails the key with "expected comma-separated <expected>"
  /// (and returns false).
  bool forEachItem(const std::string &key, const char *expected,
                   llvm::function_ref<bool(llvm::StringRef)> parse) const;
  std::map<std::string, std::string> values_;
  mutable std::string error_;
};

/// The conditioning a velocity model takes per sample; empty shapes mean
/// the model takes no such input.
struct ConditioningShapes {
  Shape promptEmbeds; // [L, D] (text tokens)
  Shape pooled;       // [Dp]
  /// The model takes a text mask [L] per sample (1: a token, 0: padding;
  /// diffusers' encoder_hidden_states_mask): the recipe's programs then
  /// take prompt_embeds_mask [P, L] (docs/prompts.md).
  bool promptMask = false;
};

/// The shift of the sampler's schedule a model's pipeline uses
/// (docs/flowgrpo-math.md section 1): static (SD3: the recipe's `shift`)
/// or dynamic, from the image's token count (Qwen-Image: diffusers'
/// calculate_shift with the scheduler config's values).
struct ScheduleShift {
  bool dynamic = false;
  int64_t imageSeqLen = 0; // the transformer's image tokens (dynamic)
  double baseShift = 0.5, maxShift = 0.9;
  int64_t baseSeqLen = 256, maxSeqLen = 8192;
  std::optional<double> shiftTerminal;
};

class VelocityModel {
public:
  virtual ~VelocityModel();
  /// Latent shape [C, H, W] of one sample.
  virtual Shape latentShape() const = 0;
  virtual ConditioningShapes conditioning() const = 0;
  /// v(x, t): `x` [B, C, H, W], `timestep` [B] in [0, 1000], `prompt`
  /// [B, L, D] and `pooled` [B, Dp] (null when the model takes none),
  /// `promptMask` [B, L] of 0/1 (null: every token valid; only a model
  /// whose conditioning() has promptMask reads it); returns [B, C, H, W].
  /// Parameters come from `m`.
  virtual Tensor forward(Module &m, const Tensor &x, const Tensor &timestep,
                         const Tensor &prompt, const Tensor &pooled,
                         const Tensor &promptMask) = 0;
  /// Default LoRA targets (layer paths' suffixes).
  virtual std::vector<std::string> loraTargets() const { return {}; }
  /// The schedule shift the model's pipeline uses (default static).
  virtual ScheduleShift scheduleShift() const { return {}; }
  /// True CFG's norm rescale groups a velocity [B, C, H, W] into tokens
  /// [B, S, K], whose norms over K are rescaled (the pipeline's layout):
  /// the default is one token per pixel over the channels; `fromTokens`
  /// is the inverse. Both are permutations of the elements.
  virtual Tensor toTokens(const Tensor &v) const;
  virtual Tensor fromTokens(const Tensor &tokens, const Shape &latent) const;
  /// Whether forward() emits each transformer block as a recomputed block
  /// (layers::RecomputedBlock; the recipe's recompute=blocks): the backward
  /// program recomputes a block's activations instead of saving them.
  /// Models without blocks ignore it.
  void setRecomputeBlocks(bool on) { recomputeBlocks_ = on; }
  bool recomputeBlocks() const { return recomputeBlocks_; }

private:
  bool recomputeBlocks_ = false;
};

class ImageDecoder {
public:
  virtual ~ImageDecoder();
  virtual Shape latentShape() const = 0; // [C, h, w]
  virtual Shape imageShape() const = 0;  // [3, H, W]
  /// Decodes already-unscaled latents [B, C, h, w] to images in about
  /// [-1, 1] (diffusers' decoder output, before `/2 + 0.5`).
  virtual Tensor decode(Module &m, const Tensor &latents) = 0;
  /// What the pipeline does to the transformer's latents [B, C, h, w]
  /// before decode; by default diffusers' `latents / scaling_factor +
  /// shift_factor` (Qwen-Image's VAE has a mean and deviation per channel).
  virtual Tensor unscale(const Tensor &latents) const;
  virtual double scalingFactor() const { return 1.0; }
  virtual double shiftFactor() const { return 0.0; }
};

enum class ModelKind { Velocity, Decoder };

struct ModelEntry {
  std::string name;
  ModelKind kind;
  std::string description;
  /// Named configs; the first is the default.
  std::vector<std::pair<std::string, Config>> presets;
  /// A velocity model: the decoder its diffusers pipeline uses, which
  /// omnigen takes when --decoder is not given.
  std::string pipelineDecoder = "autoencoder_kl";
  std::function<llvm::Expected<std::unique_ptr<VelocityModel>>(const Config &)>
      makeVelocity;
  std::function<llvm::Expected<std::unique_ptr<ImageDecoder>>(const Config &)>
      makeDecoder;
};

class Registry {
public:
  /// The registry with every model in frontends/models registered.
  static const Registry &builtin();

  void add(ModelEntry entry);
  const ModelEntry *find(const std::string &name) const;
  const std::vector<ModelEntry> &entries() const { return entries_; }
  /// The preset `preset` of `model`, with `overrides` (`key=value`)
  /// applied; errors name the model, preset or key.
  llvm::Expected<Config>
  config(const std::string &model, const std::string &preset,
         const std::vector<std::string> &overrides) const;
  llvm::Expected<std::unique_ptr<VelocityModel>>
  makeVelocity(const std::string &model, const Config &config) const;
  llvm::Expected<std::unique_ptr<ImageDecoder>>
  makeDecoder(const std::string &model, const Config &config) const;

private:
  std::vector<ModelEntry> entries_;
};

/// Registers the models of frontends/models (defined there).
void registerBuiltinModels(Registry &registry);

} // namespace omni::fe

#endif // OMNI_FRONTENDS_BUILDER_MODEL_H
