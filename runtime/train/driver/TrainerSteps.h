//===- TrainerSteps.h - the named steps of train() --------------*- C++ -*-===//
//
// What Trainer.cpp's train() is made of, one file per step:
//   Signature.cpp     the step function against the convention of Trainer.h
//                     (inputs, results, the program's state slots) and the
//                     host functions (timed rewards, --reward);
//   InitialState.cpp  the state slots from the latest checkpoint, or from
//                     the init function and the --init files;
//   SideOutputs.cpp   the progress line, metrics.jsonl and sample grids;
//   HyperParams.cpp   the runtime hyper-parameters' values (--set, the lr
//                     schedule) and their record (run.json, checkpoints);
//   Trainer.cpp       options, one iteration, checkpoints, the loop.
// The training state stays in the executor's state slots the whole run;
// only checkpoints (getState) and --init/resume (setState) move it.
// Internal to runtime/train/driver. MLIR-free.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_TRAIN_DRIVER_TRAINERSTEPS_H
#define OMNI_RUNTIME_TRAIN_DRIVER_TRAINERSTEPS_H

#include "runtime/executor/Executor.h"
#include "runtime/hostfn/HostFunctions.h"
#include "runtime/loader/Program.h"
#include "runtime/train/driver/HyperParams.h"
#include "runtime/train/driver/ShardedState.h"
#include "runtime/train/driver/Trainer.h"
#include "runtime/train/image/Png.h"
#include "runtime/train/prompts/Prompts.h"
#include "runtime/train/rewards/RewardMix.h"

#include "absl/status/statusor.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace omni::train::detail {

constexpr const char *kEmbeds = "prompt_embeds";
constexpr const char *kPooled = "pooled_prompt_embeds";
/// CFG's unconditional branch ([1, L, D] / [1, Dp], docs/prompts.md).
constexpr const char *kNegativeEmbeds = "negative_prompt_embeds";
constexpr const char *kNegativePooled = "negative_pooled_prompt_embeds";
/// The text masks ([P, L] / [1, L], 1 = token, 0 = padding) of a model
/// that takes them (docs/prompts.md).
constexpr const char *kEmbedsMask = "prompt_embeds_mask";
constexpr const char *kNegativeEmbedsMask = "negative_prompt_embeds_mask";
constexpr const char *kImages = "images";
constexpr const char *kRewards = "rewards";

//===--- Signature.cpp ----------------------------------------------------===//

/// The step function as the driver uses it.
struct Signature {
  uint32_t function = 0;
  /// The training state: every state slot of the program, in step.bin order
  /// (names and types from the state table).
  std::vector<const loader::StateInfo *> state;
  /// The data inputs after seed and iteration, in the function's order
  /// (kEmbeds / kPooled / kNegativeEmbeds / kNegativePooled).
  std::vector<std::string> data;
  /// Every input after seed and iteration in order: the data inputs and
  /// the runtime hyper-parameters (HyperParams.h), by name.
  std::vector<std::string> inputs;
  PromptRequest prompts;
  /// Scalar metrics: output index and name, in the function's order.
  std::vector<std::pair<size_t, std::string>> metrics;
  std::optional<size_t> images;
  /// A float [B] result named `rewards`: each image's reward (the sample
  /// grid's captions), not a metric.
  std::optional<size_t> rewards;

  /// The state slot `name`, if the program has it.
  const loader::StateInfo *findState(const std::string &name) const;
};

/// Checks `name` against the convention: (seed, iteration, data...) ->
/// (results...) over the program's state slots. One-line errors.
absl::StatusOr<Signature> checkStep(const loader::Program &program,
                                    const std::string &name);

/// What the reward host calls of an iteration returned, for the sample
/// grid's captions of a step without a `rewards` result. Thread-safe.
/// With rollout_chunks the step makes one call per chunk, in chunk order
/// and never two at once (docs/backend.md, asynchronous host calls), so
/// their values concatenated are the batch's rewards.
class CapturedRewards {
public:
  /// A reward call's result ([N] floats; anything else makes this
  /// iteration's rewards unknown).
  void record(const HostTensor &values);
  /// The iteration's reward calls' values in call order (empty when one
  /// was not [N] floats); then starts over. The caller checks the count.
  std::vector<double> take();

private:
  std::mutex mutex_;
  bool unusable_ = false;
  std::vector<double> values_;
};

/// The executor's host functions: every registered one, timed into
/// `nanos`, the rewards' results recorded into `captured` (may be null);
/// with `mix`, every reward runs the mix (and the step must call at least
/// one).
absl::StatusOr<HostFunctionRegistry> trainingHostFunctions(
    const loader::Program &program, uint32_t step, const std::string &stepName,
    std::shared_ptr<rewards::RewardMix> mix,
    std::shared_ptr<std::atomic<int64_t>> nanos,
    std::shared_ptr<CapturedRewards> captured, std::ostream &log);

//===--- InitialState.cpp -------------------------------------------------===//

/// Where the run starts.
struct Start {
  int64_t iteration = 0;
  int64_t seed = 0;
  /// From a checkpoint (else from the init function).
  bool resumed = false;
};

/// Sets every state slot: from the latest checkpoint of `resumeFrom` when
/// `resume` (and one exists, or !resumeIfPresent makes its absence an
/// error), else by running the init function on the seed and applying the
/// --init files. Says what it did on `log`. Checkpoints and --init files
/// hold whole tensors; a sharded slot gets this rank's block of them
/// (`sharded`).
/// Resuming, `hparams` must agree with the checkpoint's record of them
/// unless options.allowHparamChange.
absl::StatusOr<Start>
initialState(executor::Executor &executor, const ShardedState &sharded,
             const Signature &sig, const TrainOptions &options,
             const HyperParams &hparams, bool resume,
             const std::string &resumeFrom, std::ostream &log);

/// Applies one --init file to the state slots of `sig` (after the init
/// function ran): its tensors by name under the file's prefix, and the
/// `ref.` and `ema.` copies that start at them; every slot under the prefix
/// except LoRA adapters must be given. `stepName` names the function in
/// errors. Also used by the sampling program's loader
/// (runtime/train/sample/Sampler.h).
absl::Status applyInit(executor::Executor &executor,
                       const ShardedState &sharded, const InitFile &init,
                       const Signature &sig, const std::string &stepName,
                       const std::vector<std::string> &skip, std::ostream &log);

//===--- SideOutputs.cpp --------------------------------------------------===//

/// What the step function returned, as the driver reports it.
struct IterationResult {
  int64_t iteration = 0;
  std::vector<TypedTensor> outputs;
  double totalSeconds = 0, rewardSeconds = 0, computeSeconds = 0;
  /// Named phases, or {reward, compute} for a program without names.
  std::vector<std::pair<std::string, double>> phases;
  bool namedPhases = false;
  int64_t badImages = 0, numImages = 0;
  /// The --reward mix's means of the iteration (reward/<name>).
  std::vector<std::pair<std::string, double>> rewardMeans;
  /// With --stats: host<->device bytes and peak device memory of the
  /// iteration (-1: the device does not count).
  std::optional<executor::TransferStats> transfers;
  int64_t peakDeviceBytes = -1;
  /// The learning rate the iteration was fed (a program with a runtime lr).
  std::optional<double> lr;
  /// Each image's reward: the step's `rewards` result, else the reward
  /// host call's values when it made one call for all the images; empty
  /// when not known.
  std::vector<double> sampleRewards;
  /// Each image's prompt row in the prompt set (B = P * G, prompt-major);
  /// empty when the step takes no prompts or P does not divide B.
  std::vector<int64_t> samplePrompts;
  /// The texts of the iteration's P prompts, in order, when the prompt set
  /// has texts (metrics.jsonl "prompts"); else empty.
  std::vector<std::string> promptTexts;
};

std::string format(const char *spec, double v);
double seconds(std::chrono::steady_clock::duration d);

/// The images of `images` ([B, ...]) with a non-finite element.
int64_t nonFiniteImages(const TypedTensor &images);

/// "iter 3/10  reward 0.51 ± 0.02  loss ...  time 0.12 s (...)" (and the
/// stats when measured), then `clock` (RunClock::text(): "elapsed 1m02s
/// eta 16m20s") when not empty.
std::string progressLine(int64_t steps, const Signature &sig,
                         const IterationResult &r,
                         const std::string &clock = "");

/// The metrics.jsonl line of an iteration (with its newline).
std::string metricsLine(const Signature &sig, const IterationResult &r);

/// The caption lines under each image of `r`: its prompt ("prompt 5", or
/// the prompt's text when `promptTexts` has it; "sample 3" when the prompt
/// is not known) and its reward ("reward 0.5123") when known.
image::Captions sampleCaptions(const IterationResult &r,
                               const std::vector<std::string> &promptTexts);

/// Writes outDir/samples/iter-<N>.png, the grid of the images result with
/// `captions` under the images.
absl::Status writeSampleGrid(const std::string &outDir,
                             const TypedTensor &images, int64_t iteration,
                             const image::Captions &captions = {});

/// metrics.jsonl, appended one whole line per write: a failed write is cut
/// off again, so the file never ends in half a JSON line (where the file
/// can be truncated at all).
class MetricsFile {
public:
  MetricsFile() = default;
  MetricsFile(const MetricsFile &) = delete;
  MetricsFile &operator=(const MetricsFile &) = delete;
  ~MetricsFile();

  bool isOpen() const { return fd_ >= 0; }
  absl::Status open(const std::string &path);
  absl::Status append(const std::string &line);

private:
  std::string path_;
  int fd_ = -1;
};

/// A resumed run repeats the iterations after its checkpoint: drops their
/// lines (written by the run that was interrupted) and a partial last line,
/// so every iteration appears once. Only regular files are cut.
absl::Status cutMetrics(const std::string &path, int64_t start,
                        std::ostream &log);

} // namespace omni::train::detail

#endif // OMNI_RUNTIME_TRAIN_DRIVER_TRAINERSTEPS_H
