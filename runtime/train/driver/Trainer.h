//===- Trainer.h - the training loop of omnirun --steps ---------*- C++ -*-===//
//
// Runs a compiled FlowGRPO program's training iterations. The program
// follows one convention (examples/flowgrpo-toy/toy.mlir,
// test/train/data-program.mlir):
//   @init_state(seed: tensor<i64>) -> (state_0, ..., state_{K-1})
//   @train_step(state_0, ..., state_{K-1}, seed: tensor<i64>,
//               iteration: tensor<i64>, data...)
//       -> (state'_0, ..., state'_{K-1}, results...)
// in MLIR; in step.bin the state arguments and results are state slots, so
// @init_state(seed) writes the slots and @train_step(seed, iteration,
// data...) -> (results...) reads and updates them in place.
// - State (parameters, optimizer moments, step count) is named by the
//   program's `omni.name` argument attributes (diffusers parameter names:
//   `transformer.<name>`, a frozen KL reference copy `ref.transformer.
//   <name>`, LoRA adapters `....lora_A.` / `....lora_B.`).
// - Data inputs follow `iteration`, named by `omni.name`, each optional:
//   `prompt_embeds` f32 [P, L, D] and `pooled_prompt_embeds` f32 [P, Dp].
//   They are filled every iteration from a PromptSet (prompts/Prompts.h):
//   iteration i takes prompts (i*P + j) mod Np.
// - Runtime hyper-parameters are inputs after `iteration` too: 0-D f64,
//   named as a row of step.bin's hyper-parameter table (HyperParams.h,
//   docs/recipes.md section 11); each iteration gets the default, the
//   --set override, and for lr the schedule's value.
// - Results after the state are named by `omni.name` result attributes:
//   every one-element result is a scalar metric (loss, reward_mean,
//   reward_std, approx_kl, clipfrac, kl, grad_norm, skipped, ...); a result
//   named `images` (f32 [B, 3, H, W] in [0, 1]) is saved as a PNG grid,
//   each image captioned with its prompt and reward (a float [B] result
//   named `rewards`, else the values of the step's one reward call); other
//   tensors are ignored.
// - Rewards are host calls (omni.host_call "<reward>"); TrainOptions::rewards
//   rebinds every callee that is a registered reward to another one, a
//   reward server or a weighted mix (docs/rewards.md); the servers are told
//   each batch's iteration, seed and prompt rows, and the mix's component
//   and sub-score means go to metrics.jsonl as reward/<name>.
// Every iteration's random numbers are keyed on (seed, iteration), so a run
// resumed from a checkpoint continues bit for bit; checkpoints record both,
// and the program's fingerprint (a resume with another step.bin is refused).
// The state lives in the executor's state slots for the whole run (the
// program's step.bin state table, which omnic's omni-resident-state pass
// makes of the convention's state arguments and results): per iteration
// only the seed, the iteration and the prompts go to the device and only
// the results (metrics, images) and the reward host calls' traffic come
// back. The state comes to the host only for a checkpoint; --init and
// resume write it with setState.
// Work is not lost silently: a requested stop (Ctrl-C, SIGTERM) and a
// failed metrics or sample write save the state first; a failed iteration
// cannot (the slots may hold part of its update) and says which checkpoint
// to resume from; a resume cuts metrics.jsonl back to the checkpoint and
// removes the temporaries of writes a killed run left behind.
// MLIR-free.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_TRAIN_DRIVER_TRAINER_H
#define OMNI_RUNTIME_TRAIN_DRIVER_TRAINER_H

#include "runtime/executor/Executor.h"
#include "runtime/hal/Device.h"
#include "runtime/loader/Program.h"

#include "absl/status/status.h"

#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace omni {
class PhaseTimer;
} // namespace omni

namespace omni::train {

/// One --init: the safetensors file `path`'s tensor X sets state
/// `prefix.X` (and `ref.prefix.X` and `ema.prefix.X` when the state has
/// them). With `fromEma` (--init-from-ema) `path` is a checkpoint and its
/// EMA weights are the ones taken: its tensor `ema.prefix.X` sets state
/// `prefix.X` (and the copies), its `prefix.X` does where the checkpoint has
/// no `ema.prefix.X` (LoRA's frozen base), and every other tensor is
/// ignored (docs/recipes.md section 2).
struct InitFile {
  std::string prefix = "transformer";
  std::string path;
  bool fromEma = false;
};

struct TrainOptions {
  /// Iterations to reach (a resumed run continues up to this count).
  int64_t steps = 1;
  /// The run's seed. Unset: 0 for a fresh run, the checkpoint's when
  /// resuming (a set seed must equal the checkpoint's).
  std::optional<int64_t> seed;
  std::string initFunction = "init_state";
  std::string stepFunction = "train_step";
  /// The run's folder: checkpoints (`step-<N>.safetensors`, `latest`),
  /// metrics.jsonl and samples/iter-<N>.png. Empty: resumeDir, else no
  /// files at all (said at the start).
  std::string outDir;
  /// Save every N iterations (and always after the last); 0: only at the end.
  int64_t saveEvery = 0;
  /// Keep only the N newest step files in the out folder; 0: keep all.
  int64_t keepLast = 0;
  /// Continue from the latest checkpoint of resumeDir (empty: outDir). A
  /// missing folder or one without `latest` is an error unless
  /// resumeIfPresent, which then starts from @init_state. Resuming cuts the
  /// metrics file back to the checkpoint's iteration.
  bool resume = false;
  bool resumeIfPresent = false;
  std::string resumeDir;
  /// The identity of the program (checkpoint::fingerprintFile of step.bin),
  /// recorded in checkpoints as `program_hash`; resuming a checkpoint with
  /// another one is refused unless allowProgramChange. Empty: not recorded
  /// or checked.
  std::string programHash;
  bool allowProgramChange = false;
  /// Runtime hyper-parameters (HyperParams.h, docs/recipes.md): `name=value`
  /// overrides of the step.bin defaults (--set), and the learning-rate
  /// schedule (--lr-schedule constant|linear|cosine, --warmup iterations,
  /// --lr-min; the decay ends at `steps`). The values go to run.json and
  /// every checkpoint; a resume with other values is refused unless
  /// allowHparamChange.
  std::vector<std::string> hparamSets;
  std::string lrSchedule;
  int64_t warmup = 0;
  std::optional<double> lrMin;
  bool allowHparamChange = false;
  /// Append one JSON object per iteration here; empty: outDir/metrics.jsonl
  /// (none without an out folder).
  std::string metricsPath;
  /// Save `images` every N iterations (and after the last); 0: saveEvery,
  /// or 10 when that is 0.
  int64_t sampleEvery = 0;
  /// The prompt set (safetensors); empty: the built-in synthetic set.
  std::string promptsPath;
  /// Applied in order after @init_state (not when resuming). f16 and bf16
  /// tensors widen to f32 state exactly; non-finite values are refused.
  std::vector<InitFile> inits;
  /// A diffusers pipeline folder whose transformer/ and vae/ weights set
  /// state transformer.* and vae.* after @init_state and before `inits`
  /// (DiffusersInit.h, docs/diffusers.md); empty: none.
  std::string initDiffusers;
  /// Tensor names in the --init files to ignore (buffers the program
  /// computes itself, e.g. SD3's `pos_embed.pos_embed`); a trailing `*`
  /// matches a prefix (`encoder.*`).
  std::vector<std::string> initSkip;
  /// What the program's reward host calls run instead of their own: a
  /// weighted mix of registered rewards and reward servers, one spec each
  /// (`jpeg_compressibility:0.5`, `http://127.0.0.1:8000:0.5`;
  /// rewards/RewardMix.h, docs/rewards.md); empty: their own.
  std::vector<std::string> rewards;
  /// For reward servers: the longest wait for a connection and for an
  /// answer, and whether images go as raw RGB bytes instead of PNG.
  double rewardTimeoutSeconds = 60;
  bool rewardRawImages = false;
  /// Measure each iteration's host<->device bytes and device memory
  /// (progress line and metrics.jsonl: host_to_device_bytes,
  /// device_to_host_bytes, device_bytes).
  bool stats = false;
  /// Loop capture into graphs (omnirun --graphs; ExecutorOptions::graphs):
  /// auto captures the rollout's loop where the device prefers graphs.
  executor::ExecutorOptions::Graphs graphs =
      executor::ExecutorOptions::Graphs::Auto;
  /// Where rank 0 writes the per-kind, per-kernel profile of the
  /// iterations (runtime/executor/Profile.h, docs/performance.md), with a
  /// short table on stderr at the end; empty: no profile (no cost). An
  /// unwritable path fails before any work; the file is written after the
  /// last iteration.
  std::string profilePath;
  /// Polled before each iteration: a non-zero value (the signal number of
  /// a Ctrl-C or SIGTERM, see Interrupt.h) ends the run after a checkpoint
  /// of the last completed iteration, with a Cancelled status that says
  /// where it is. Empty: never.
  std::function<int()> stopRequested;

  /// This rank's channel of a multi-rank run (runRanks, Ranks.h; not owned,
  /// it must outlive train()); null: one rank. Every rank runs the same
  /// iterations on the same inputs; the executor's collectives and the
  /// sharded state (ShardedState.h) use it. Only rank 0 prints and writes
  /// files (metrics, samples, checkpoints); a stop request is agreed by
  /// all ranks before each iteration (the maximum of their signals).
  hal::Channel *channel = nullptr;
  /// Names the slow start-up phases on rank 0 (loading the kernels, the
  /// initial state, the first iteration: runtime/base/PhaseTimer.h; not
  /// owned); null: silent.
  PhaseTimer *phases = nullptr;
  /// Test hook, called on this rank before each iteration with its index:
  /// an error fails the iteration (runRanks' OMNI_TEST_FAULT). Empty: none.
  std::function<absl::Status(int64_t iteration)> beforeIteration;
};

/// Trains: initial state from `initFunction` (plus `inits`) or the latest
/// checkpoint, then `stepFunction` once per iteration on an executor of
/// `program` on `device`, printing one progress line per iteration to `log`
/// ("iter 3/10  reward 0.51 ± 0.02  loss ...  time 0.12 s (reward 0.01 s,
/// compute 0.11 s)  elapsed 1m02s  eta 16m20s": RunClock.h). Errors are one
/// line naming what, where, the expected and the found. When a side output
/// fails after an iteration (the metrics line, a sample grid), the state is
/// saved first and the error says where; a failed iteration names the
/// checkpoint to resume from (its partial update of the slots is not saved).
/// With `stats` the line adds the iteration's transfers and device memory
/// before the clock ("to device 1.2 KiB, from device 3.4 KiB, device memory 5.6
/// MiB").
absl::Status train(std::shared_ptr<const loader::Program> program,
                   hal::Device &device, const TrainOptions &options,
                   std::ostream &log);

} // namespace omni::train

#endif // OMNI_RUNTIME_TRAIN_DRIVER_TRAINER_H
