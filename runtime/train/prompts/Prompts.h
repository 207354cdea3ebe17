//===- Prompts.h - The prompt set a training run draws from -----*- C++ -*-===//
//
// A FlowGRPO step takes its prompts as precomputed text-encoder outputs
// (Trainer.h): `prompt_embeds` f32 [P, L, D] and `pooled_prompt_embeds`
// f32 [P, Dp], P prompts per iteration. A PromptSet holds Np prompts, from a
// safetensors file with tensors `prompt_embeds` [Np, L, D] and
// `pooled_prompt_embeds` [Np, Dp] (only those the step takes are needed), or
// built in: Np = 16 standard-normal prompts drawn with Philox under a fixed
// key (independent of the run's seed). Iteration i uses prompts
// (i*P + j) mod Np for j = 0..P-1, so the data of an iteration is a pure
// function of i and a resumed run sees the same prompts.
//
// With CFG the step also takes the unconditional branch's conditioning,
// `negative_prompt_embeds` [1, L, D] and `negative_pooled_prompt_embeds`
// [1, Dp], the same every iteration: from the file when it has them
// (tools/encode-prompts writes the empty or a given negative prompt's),
// else zeros (the built-in set always; docs/prompts.md). The file's
// `__metadata__` may name the prompts: "prompts" a JSON list of Np strings,
// "negative_prompt" a string (tools/encode-prompts writes both).
//
// A model that takes a text mask (Qwen-Image) also takes
// `prompt_embeds_mask` [P, L] (1 = token, 0 = padding) and, with CFG,
// `negative_prompt_embeds_mask` [1, L]: from the file's
// `prompt_embeds_mask` [Np, L] / `negative_prompt_embeds_mask` [1, L] when
// it has them, else all ones (fixed-length prompts). A mask holds only 0
// and 1 and every row at least one 1.
//
// Files are checked against what the step takes; every error is one line
// naming the file, the tensor, what was expected and what was found.
// MLIR-free. A PromptSet is immutable after creation (thread-compatible).
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_TRAIN_PROMPTS_PROMPTS_H
#define OMNI_RUNTIME_TRAIN_PROMPTS_PROMPTS_H

#include "runtime/io/HostTensor.h"

#include "absl/status/statusor.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace omni::train {

/// The data inputs a step function takes (read from its input types).
struct PromptRequest {
  /// The function's name, for messages ("train_step").
  std::string function = "train_step";
  /// P: prompts per iteration.
  int64_t perIteration = 0;
  /// prompt_embeds [P, L, D], if taken.
  bool embeds = false;
  int64_t tokens = 0; // L
  int64_t dim = 0;    // D
  /// pooled_prompt_embeds [P, Dp], if taken.
  bool pooled = false;
  int64_t pooledDim = 0; // Dp
  /// negative_prompt_embeds [1, L, D] / negative_pooled_prompt_embeds
  /// [1, Dp] (CFG's unconditional branch), if taken.
  bool negativeEmbeds = false;
  bool negativePooled = false;
  /// prompt_embeds_mask [P, L] / negative_prompt_embeds_mask [1, L] (the
  /// text mask of a model that takes one), if taken; L is `tokens`.
  bool mask = false;
  bool negativeMask = false;
};

/// The number of prompts of the built-in set.
inline constexpr int64_t kSyntheticPrompts = 16;
/// The Philox key of the built-in set ("omniprom"); prompt_embeds use
/// counter 0, pooled_prompt_embeds counter 1, position = flat index in the
/// [Np, L, D] / [Np, Dp] tensor.
inline constexpr int64_t kSyntheticPromptKey = 0x6f6d6e6970726f6d;

class PromptSet {
public:
  /// Reads `path` and checks it against `request`: every tensor the step
  /// takes must be present, f32, and have the step's L, D (or Dp); both
  /// tensors must hold the same number of prompts, at least one. The
  /// negatives, when the step takes them and the file has them, must be
  /// f32 [1, L, D] / [1, Dp]; a file with neither gives zeros. Metadata
  /// "prompts", when present, must be a JSON list of Np strings.
  static absl::StatusOr<PromptSet> load(const std::string &path,
                                        const PromptRequest &request);

  /// The built-in set: kSyntheticPrompts standard-normal prompts.
  static PromptSet synthetic(const PromptRequest &request);

  /// Np.
  int64_t size() const { return count_; }
  /// "synthetic" or the file's path.
  const std::string &source() const { return source_; }
  /// The prompt texts (metadata "prompts"), Np of them; empty when not
  /// known (the built-in set, a file without them).
  const std::vector<std::string> &texts() const { return texts_; }
  /// The negative prompt's text (metadata "negative_prompt"), if known.
  const std::optional<std::string> &negativeText() const {
    return negativeText_;
  }
  /// True when the negatives come from the file (else they are zeros).
  bool hasNegatives() const { return hasNegatives_; }
  /// True when the prompts' / the negative's text mask comes from the file
  /// (else it is all ones).
  bool hasMask() const { return !mask_.empty(); }
  bool hasNegativeMask() const { return !negativeMask_.empty(); }
  const PromptRequest &request() const { return request_; }

  /// The prompt indices of iteration `iteration`: (i*P + j) mod Np.
  /// `iteration` must be non-negative.
  std::vector<int64_t> indices(int64_t iteration) const;
  /// The step's prompt_embeds for `iteration` ([P, L, D] f32); only when
  /// request().embeds.
  HostTensor embeds(int64_t iteration) const;
  /// The step's pooled_prompt_embeds for `iteration` ([P, Dp] f32); only
  /// when request().pooled.
  HostTensor pooled(int64_t iteration) const;
  /// negative_prompt_embeds [1, L, D] f32 (zeros unless hasNegatives());
  /// only when request().negativeEmbeds.
  HostTensor negativeEmbeds() const;
  /// negative_pooled_prompt_embeds [1, Dp] f32 (zeros unless
  /// hasNegatives()); only when request().negativePooled.
  HostTensor negativePooled() const;
  /// prompt_embeds_mask for `iteration` ([P, L] f32, all ones unless
  /// hasMask()); only when request().mask.
  HostTensor mask(int64_t iteration) const;
  /// negative_prompt_embeds_mask [1, L] f32 (all ones unless
  /// hasNegativeMask()); only when request().negativeMask.
  HostTensor negativeMask() const;

private:
  HostTensor gather(const std::vector<float> &rows, int64_t rowSize,
                    std::vector<int64_t> shape, int64_t iteration) const;

  PromptRequest request_;
  std::string source_;
  int64_t count_ = 0;
  std::vector<float> embeds_; // [Np, L, D]
  std::vector<float> pooled_; // [Np, Dp]
  bool hasNegatives_ = false;
  std::vector<float> negativeEmbeds_; // [1, L, D], empty: zeros
  std::vector<float> negativePooled_; // [1, Dp], empty: zeros
  std::vector<float> mask_;           // [Np, L], empty: ones
  std::vector<float> negativeMask_;   // [1, L], empty: ones
  std::vector<std::string> texts_;
  std::optional<std::string> negativeText_;
};

} // namespace omni::train

#endif // OMNI_RUNTIME_TRAIN_PROMPTS_PROMPTS_H
