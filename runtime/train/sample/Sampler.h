//===- Sampler.h - images from a sampling program's @sample -----*- C++ -*-===//
//
// The core of `omnirun sample.bin` (runtime/omnirun/Sample.cpp) and of a
// sampling server: loads a program written by `omnigen --program=sample`
// (docs/sampling.md) and its weights once, then turns seeds and prompt
// embeddings into images, B at a time.
//
//   @init_state(seed) -> (transformer.*, vae.*)       (the state slots)
//   @sample_noise(seeds [B]) -> latents [B, C, h, w]
//   @sample_steps() -> steps i64                    (N, the sampler's steps)
//   @sample(seeds [B], [prompt_embeds [B, L, D]], [pooled_prompt_embeds
//           [B, Dp]], [guidance_scale]) -> (images [B, 3, H, W],
//           [log_probs [B, N]])
//
// The weights are the program's state slots, named as the training
// program's, so a training checkpoint loads: from a checkpoint (only the
// slots' names are taken; with `ema`, `ema.<name>` where the checkpoint
// has it), or @init_state and then --init files (train::detail::applyInit,
// as a training run applies them).
//
// Sample b's noise depends only on seeds[b], so a request gets the same
// image whatever its position in a batch and whatever else is batched with
// it; a partial batch is padded (the padding's images are dropped).
//
// Not thread-safe: one call at a time (a server serializes sample()).
// MLIR-free.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_TRAIN_SAMPLE_SAMPLER_H
#define OMNI_RUNTIME_TRAIN_SAMPLE_SAMPLER_H

#include "runtime/executor/Executor.h"
#include "runtime/hal/Device.h"
#include "runtime/io/TypedTensor.h"
#include "runtime/loader/Program.h"
#include "runtime/train/driver/Trainer.h"

#include "absl/status/statusor.h"
#include "absl/types/span.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace omni::train::sample {

/// Where the weights come from. `checkpoint` (a checkpoint file, or a run
/// folder: its latest checkpoint) excludes `inits`; with neither, the
/// weights are @init_state's (random, for tests).
struct WeightSource {
  std::string checkpoint;
  /// With `checkpoint`: take `ema.<name>` where the checkpoint has it.
  bool ema = false;
  /// Applied in order after @init_state(initSeed), as omnirun --init.
  std::vector<InitFile> inits;
  std::vector<std::string> initSkip;
  int64_t initSeed = 0;
  /// A diffusers folder (omnirun --init-diffusers, docs/diffusers.md): read
  /// after @init_state, before the --init files.
  std::string diffusers;
};

/// What one sample() call returns, for the n samples asked for.
struct SampleOutput {
  /// [n, 3, H, W] f32 in [0, 1].
  TypedTensor images;
  /// [n, N] f32: each SDE step's log-probability; empty (no value) for the
  /// ODE sampler, whose program returns none.
  std::optional<TypedTensor> logProbs;
};

class Sampler {
public:
  /// Checks that `program` is a sampling program, makes the executor on
  /// `device` (which must outlive the Sampler) and loads the weights,
  /// saying what it loaded on `log`. One-line errors. `graphs`: the
  /// executor's loop capture (omnirun --graphs).
  static absl::StatusOr<std::unique_ptr<Sampler>>
  create(std::shared_ptr<const loader::Program> program, hal::Device &device,
         const WeightSource &weights, std::ostream &log,
         executor::ExecutorOptions::Graphs graphs =
             executor::ExecutorOptions::Graphs::Auto);

  /// Whether `program` is a sampling program: it has @sample and no
  /// @train_step.
  static bool isSamplingProgram(const loader::Program &program);

  /// B: the samples of one @sample call.
  int64_t batch() const { return batch_; }
  /// N: sampler steps (the columns of the log-probs); 0 for the ODE sampler
  /// (no log-probs).
  int64_t logProbSteps() const { return logProbSteps_; }
  /// N: the sampler's steps, from @sample_steps() -> i64 (which omnigen
  /// --program=sample writes, docs/sampling.md); a program without it:
  /// logProbSteps() (0 for the ODE sampler, whose N it does not say).
  int64_t steps() const { return steps_; }
  /// prompt_embeds' [L, D] per sample (empty: the program takes none).
  const std::vector<int64_t> &promptShape() const { return promptShape_; }
  /// pooled_prompt_embeds' [Dp] per sample (empty: none).
  const std::vector<int64_t> &pooledShape() const { return pooledShape_; }
  /// The compiled-in CFG scale when the program takes guidance_scale.
  std::optional<double> defaultGuidance() const { return guidance_; }
  /// [3, H, W] of one image.
  const std::vector<int64_t> &imageShape() const { return imageShape_; }
  /// Whether @sample takes CFG's unconditional conditioning
  /// (negative_prompt_embeds [1, L, D] and/or negative_pooled_prompt_embeds
  /// [1, Dp], docs/prompts.md); zeros until setNegatives.
  bool takesNegatives() const {
    return !negativeEmbeds_.empty() || !negativePooled_.empty();
  }
  /// The unconditional conditioning every later sample() uses: one row of
  /// promptShape() floats and one of pooledShape() floats (each empty when
  /// the program does not take it). Fails on a wrong size or when the
  /// program takes no negatives.
  absl::Status setNegatives(absl::Span<const float> prompt,
                            absl::Span<const float> pooled);
  /// Whether @sample takes prompt_embeds_mask [B, L] (a model with a text
  /// mask, docs/prompts.md).
  bool takesMask() const { return takesMask_; }
  /// Whether @sample takes negative_prompt_embeds_mask [1, L].
  bool takesNegativeMask() const { return !negativeMask_.empty(); }
  /// The negative prompt's text mask every later sample() uses (L floats,
  /// 0 or 1; all ones until set). Fails on a wrong size or when the program
  /// takes none.
  absl::Status setNegativeMask(absl::Span<const float> mask);

  /// Samples n = seeds.size() images, 1 <= n <= batch(): `prompts` holds n
  /// rows of promptShape() floats (empty when the program takes none),
  /// `pooled` n rows of pooledShape(). `guidance`: the CFG scale (unset:
  /// the default; an error when the program has no CFG and a value other
  /// than 1 is given). `masks`: n rows of L floats (0/1) when the program
  /// takesMask(); empty: all ones.
  absl::StatusOr<SampleOutput> sample(absl::Span<const int64_t> seeds,
                                      absl::Span<const float> prompts,
                                      absl::Span<const float> pooled,
                                      std::optional<double> guidance = {},
                                      absl::Span<const float> masks = {});

  /// The initial latents @sample starts from for `seeds` (n <= batch()):
  /// [n, C, h, w] (parity checks, docs/sampling.md).
  absl::StatusOr<TypedTensor> initialNoise(absl::Span<const int64_t> seeds);

private:
  Sampler() = default;
  absl::Status loadWeights(const WeightSource &weights, std::ostream &log);
  absl::Status loadCheckpoint(const WeightSource &weights, std::ostream &log);
  /// The padded [B] seeds tensor.
  absl::StatusOr<TypedTensor> seedsTensor(absl::Span<const int64_t> seeds,
                                          const char *what) const;

  std::shared_ptr<const loader::Program> program_;
  std::unique_ptr<executor::Executor> executor_;
  int64_t batch_ = 0, logProbSteps_ = 0, steps_ = 0;
  std::vector<int64_t> promptShape_, pooledShape_, imageShape_;
  std::optional<double> guidance_;
  /// @sample's inputs after the seeds, by name.
  std::vector<std::string> inputs_;
  /// The negatives @sample takes (empty: not taken); zeros by default.
  std::vector<float> negativeEmbeds_, negativePooled_;
  /// The text masks: prompt_embeds_mask taken; the negative's (empty: not
  /// taken; all ones by default).
  bool takesMask_ = false;
  std::vector<float> negativeMask_;
};

} // namespace omni::train::sample

#endif // OMNI_RUNTIME_TRAIN_SAMPLE_SAMPLER_H
