//===- FlowGrpo.h - the FlowGRPO training recipe ----------------*- C++ -*-===//
//
// Emits the whole FlowGRPO training program (docs/flowgrpo-math.md)
// around any registered velocity model and image decoder, in the
// convention `omnirun` trains (runtime/train/driver/Trainer.h):
//
//   @init_state(seed) -> state...
//   @rollout_noise(seed, iteration) -> (x0, noise, window_start)
//   @train_step(state..., seed, iteration, [prompt_embeds],
//               [pooled_prompt_embeds], [prompt_embeds_mask], [negatives],
//               lr, weight_decay, beta1, beta2, adam_eps, max_grad_norm)
//     -> (state'..., metrics..., images)
//
// prompt_embeds_mask [P, L] (and negative_prompt_embeds_mask [1, L] with
// CFG) only for a model whose conditioning() has promptMask (Qwen-Image's
// text mask, docs/prompts.md); other models' programs take none.
//
// State, in order: the model's parameters (`transformer.<diffusers name>`),
// the decoder's (`vae.<name>`), the frozen KL reference copy
// (`ref.transformer.<name>`, only with beta > 0 and no LoRA), the AdamW
// moments (`adamw.m.<name>`, `adamw.v.<name>`, trainable parameters only),
// `adamw.step` and, with ema_decay > 0, the EMA of the trainable parameters
// (`ema.transformer.<name>`, docs/flowgrpo-math.md section 7). Metrics: loss,
// approx_kl, clipfrac, kl, reward_mean, reward_std, advantage_mean, grad_norm,
// skipped; then `images`.
//
// One rollout feeds inner_epochs x (batch / mini_batch_size) optimizer
// steps over contiguous mini-batches, each a sum of value_and_grad calls on
// micro_batch_size samples (docs/recipes.md section 3); the defaults make
// one step over the whole batch.
//
// Random numbers: key = seed; iteration n uses counters n*(N+2) (initial
// noise), n*(N+2)+1+i (noise of step i) and n*(N+2)+N+1 (SDE window
// start); parameter j of the initializer uses counter 2^40 + j.
//
// Sharding (docs/sharding.md section 1): with a mesh (`--mesh=dp=2,fsdp=2`)
// the module declares `omni.mesh @mesh` and `omni.shard_gather`; with an
// fsdp axis of more than one rank, dimension 0 of every state tensor of
// rank >= 1 is split over fsdp (an `omni.sharding` argument/result
// attribute); the rollout batch (the repeated conditioning and x0) is
// marked with `omni.shard` over every mesh axis. The omni-shard pass turns
// that into per-rank programs.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_FRONTENDS_RECIPES_FLOWGRPO_FLOWGRPO_H
#define OMNI_FRONTENDS_RECIPES_FLOWGRPO_FLOWGRPO_H

#include "frontends/builder/Model.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace omni::fe::flowgrpo {

/// Every option of docs/flowgrpo-math.md sections 1-7, with the CPU demo's
/// defaults (section 9). Held as a Config so the tool can take `key=value`.
Config defaultOptions();

/// The options that are runtime hyper-parameters of @train_step (0-D f64
/// inputs after the data inputs, in this order; their defaults and ranges
/// go to step.bin, and `omnirun --set key=value` overrides them): lr,
/// weight_decay, beta1, beta2, adam_eps, max_grad_norm. Every other option
/// is compile-time (it changes shapes or the program's structure).
std::vector<std::string> runtimeOptions();

/// The type of value option `key` takes, as a config file's typed values
/// are checked against it (docs/config.md): "integer", "number",
/// "boolean" or "string" (also for a choice such as sde_type); "" when the
/// recipe has no option `key`.
std::string optionKind(const std::string &key);

/// What the tool asks for: models, their presets/overrides, recipe options.
struct RecipeRequest {
  std::string model = "sd3";
  std::string modelConfig = "tiny";
  std::vector<std::string> modelOverrides;
  std::string decoder = "autoencoder_kl"; // "" : no decoder (logistic)
  std::string decoderConfig = "tiny";
  std::vector<std::string> decoderOverrides;
  std::vector<std::string> options; // key=value over defaultOptions()
  /// "train": the training program; "velocity" or "decode": only that
  /// function, public (for inference and parity checks against diffusers),
  /// with the batch of prompts_per_iteration * group_size; "sample": the
  /// sampling program @init_state, @sample_noise and @sample over the
  /// model's and decoder's weights as state slots, batch sample_batch
  /// (docs/sampling.md).
  std::string program = "train";
  /// The device mesh, `axis=size` comma-separated over the axes dp and fsdp
  /// in mesh order (`dp=2,fsdp=2`); unset: no mesh, one device, and the
  /// program is exactly the unsharded one.
  std::optional<std::string> mesh;
};

/// Builds the training program; errors are one line (unknown model, bad
/// option, shapes of model and decoder that do not fit together).
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
buildProgram(mlir::MLIRContext &context, const RecipeRequest &request,
             const Registry &registry = Registry::builtin());

/// A comment block describing the request (written at the top of
/// train.mlir so the file says how to regenerate it).
std::string describe(const RecipeRequest &request);

} // namespace omni::fe::flowgrpo

#endif // OMNI_FRONTENDS_RECIPES_FLOWGRPO_FLOWGRPO_H
