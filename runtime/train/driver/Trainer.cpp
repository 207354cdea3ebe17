//===- Trainer.cpp - the training loop of omnirun --steps -----------------===//
//
// train() in named steps (TrainerSteps.h has the map):
// 1. checkStep: the step function against the convention of Trainer.h.
// 2. The executor with the training host functions (trainingHostFunctions)
//    and the prompt set.
// 3. initialState: the state slots from the latest checkpoint or from the
//    init function and the --init files.
// 4. Per iteration (runIteration): the step function on (seed, iteration,
//    prompts, hyper-parameters: HyperParams.h); the state is updated in
//    its slots on the device, and only the results (metrics, images) come
//    back to the host. Then the side outputs (progress line, metrics.jsonl,
//    sample grids) and, when due, a checkpoint (Checkpointer: the slots read
//    back with getState). run.json records what the run uses.
// With several ranks (TrainOptions::channel) every rank runs all of this;
// only rank 0 prints and writes files, a checkpoint gathers sharded slots
// from every rank first (ShardedState.h), and a stop request is agreed
// before each iteration (maxOverRanks), so every rank stops at the same one.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/driver/Trainer.h"

#include "runtime/base/PhaseTimer.h"
#include "runtime/executor/Executor.h"
#include "runtime/executor/Profile.h"
#include "runtime/train/checkpoint/AtomicFile.h"
#include "runtime/train/checkpoint/Checkpoint.h"
#include "runtime/train/driver/Interrupt.h"
#include "runtime/train/driver/RunClock.h"
#include "runtime/train/driver/TrainerSteps.h"

#include "absl/strings/str_cat.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <iostream>
#include <map>
#include <optional>
#include <sys/stat.h>
#include <unistd.h>

namespace omni::train {
namespace {

using namespace detail;

/// Whether paths `a` and `b` name the same folder ("run", "run/", "./run").
bool sameFolder(const std::string &a, const std::string &b) {
  struct stat sa, sb;
  return a == b ||
         (::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 &&
          sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino);
}

/// Options after their checks, with the defaults resolved.
struct RunPaths {
  bool resume = false;
  /// Resuming from the --out folder itself (its checkpoints continue).
  bool resumesInOut = false;
  std::string out, resumeFrom, metricsPath;
  int64_t sampleEvery = 10;
};

absl::StatusOr<RunPaths> checkOptions(const TrainOptions &options) {
  if (options.steps < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("--steps must be >= 0, found ", options.steps));
  if (options.saveEvery < 0 || options.sampleEvery < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("--save-every and --sample-every must be >= 0, found ",
                     options.saveEvery, " and ", options.sampleEvery));
  if (options.keepLast < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("--keep-last must be >= 0, found ", options.keepLast));
  RunPaths p;
  p.resume = options.resume || options.resumeIfPresent;
  p.out = options.outDir.empty() ? options.resumeDir : options.outDir;
  p.resumeFrom = options.resumeDir.empty() ? p.out : options.resumeDir;
  if (p.resume && p.resumeFrom.empty())
    return absl::InvalidArgumentError(
        "--resume needs a folder: --resume DIR, --out DIR or "
        "--checkpoint-dir DIR");
  p.metricsPath = !options.metricsPath.empty() ? options.metricsPath
                  : p.out.empty()              ? std::string()
                                               : p.out + "/metrics.jsonl";
  p.sampleEvery = options.sampleEvery > 0 ? options.sampleEvery
                  : options.saveEvery > 0 ? options.saveEvery
                                          : 10;
  // A run that does not continue the checkpoints in its --out would write
  // its own over them and append its metrics to theirs: refuse, before any
  // work (every rank reads the folder, as a resume does).
  p.resumesInOut = p.resume && sameFolder(p.resumeFrom, p.out);
  struct stat st;
  if (!p.out.empty() && !p.resumesInOut && ::stat(p.out.c_str(), &st) == 0 &&
      S_ISDIR(st.st_mode)) {
    absl::StatusOr<std::vector<int64_t>> steps =
        checkpoint::listCheckpoints(p.out);
    if (!steps.ok())
      return steps.status();
    if (!steps->empty())
      return absl::AlreadyExistsError(absl::StrCat(
          "--out ", p.out,
          ": the folder already holds a run (checkpoints up to step-",
          steps->back(),
          ".safetensors), expected a new or empty folder; "
          "--resume ",
          p.out, " continues that run"));
  }
  return p;
}

/// Checkpoints of the state slots into the out folder. `saved` is the step
/// whose state is on disk there. With several ranks, save() is collective
/// (sharded slots are gathered) and only rank 0 writes.
class Checkpointer {
public:
  Checkpointer(executor::Executor &executor, ShardedState &sharded,
               const Signature &sig, const TrainOptions &options,
               const HyperParams &hparams, std::string out, int64_t seed,
               int64_t saved)
      : executor_(executor), sharded_(sharded), sig_(sig), options_(options),
        hparams_(hparams), out_(std::move(out)), seed_(seed), saved_(saved) {}

  int64_t saved() const { return saved_; }

  /// Writes step-<step>.safetensors of the slots as they are now: whole
  /// tensors, as a 1-rank run writes them.
  absl::Status save(int64_t step) {
    const bool lead = sharded_.rank() == 0;
    std::vector<checkpoint::NamedTypedTensor> named;
    named.reserve(sig_.state.size());
    for (const loader::StateInfo *slot : sig_.state) {
      absl::StatusOr<TypedTensor> value = executor_.getState(slot->name);
      if (!value.ok())
        return value.status();
      // Every rank gathers each whole tensor; the ranks but 0 drop it at
      // once (memory: ShardedState.h).
      absl::StatusOr<TypedTensor> whole =
          sharded_.gather(*slot, std::move(*value));
      if (!whole.ok())
        return whole.status();
      if (lead)
        named.push_back({slot->name, std::move(*whole)});
    }
    if (!lead) {
      saved_ = step;
      return absl::OkStatus();
    }
    // The RNG is keyed on (seed, iteration): the next iteration is `step`.
    std::map<std::string, std::string> metadata = {
        {"seed", std::to_string(seed_)},
        {"iteration", std::to_string(step)},
        {"step_function", options_.stepFunction}};
    if (!options_.programHash.empty())
      metadata["program_hash"] = options_.programHash;
    // What the run used (a resume compares it: InitialState.cpp).
    for (const auto &[key, value] : hparams_.record())
      metadata[key] = value;
    if (absl::Status s =
            checkpoint::saveCheckpointTyped(out_, step, named, metadata);
        !s.ok())
      return s;
    saved_ = step;
    return checkpoint::pruneCheckpoints(out_, options_.keepLast).status();
  }

  /// After a failure: the state of `step` onto disk, and where it went.
  std::string keepState(int64_t step) {
    if (out_.empty())
      return " (no --out: the training state is not saved)";
    // Saving is collective, and the other ranks are not in it.
    if (options_.channel && options_.channel->size() > 1)
      return saved_ < 0
                 ? std::string(" (not saved: with several ranks a checkpoint "
                               "needs every rank; this run has none yet)")
                 : absl::StrCat(" (not saved: with several ranks a checkpoint "
                                "needs every rank; resume from iteration ",
                                saved_, " in ",
                                checkpoint::checkpointPath(out_, saved_), ")");
    if (saved_ != step)
      if (absl::Status s = save(step); !s.ok())
        return absl::StrCat(
            " (saving the training state failed too: ", s.message(), ")");
    return absl::StrCat(" (training state of iteration ", step, " saved in ",
                        checkpoint::checkpointPath(out_, step), ")");
  }

  /// After iteration `it` failed: the slots may hold part of its update
  /// (they are updated in place), so they are not saved; says which
  /// checkpoint to resume from instead.
  std::string afterFailedIteration(int64_t it) const {
    if (out_.empty())
      return " (no --out: the training state is not saved)";
    std::string why = absl::StrCat(
        " (the state during iteration ", it,
        " is not saved: the failed step may have updated part of it");
    if (saved_ < 0)
      return why + "; this run has no checkpoint yet)";
    return absl::StrCat(why, "; resume from iteration ", saved_, " in ",
                        checkpoint::checkpointPath(out_, saved_), ")");
  }

private:
  executor::Executor &executor_;
  ShardedState &sharded_;
  const Signature &sig_;
  const TrainOptions &options_;
  const HyperParams &hparams_;
  std::string out_;
  int64_t seed_;
  int64_t saved_;
};

/// One iteration: the step function on (seed, iteration, data...); the
/// state is updated in place in its slots.
absl::StatusOr<IterationResult>
runIteration(executor::Executor &executor, const Signature &sig,
             const std::optional<PromptSet> &prompts,
             const HyperParams &hparams, int64_t seed, int64_t it,
             std::atomic<int64_t> &rewardNanos, bool stats) {
  IterationResult r;
  r.iteration = it;
  executor::TransferStats before = executor.transfers();
  if (stats)
    (void)executor.takePeakDeviceBytes();
  auto begin = std::chrono::steady_clock::now();
  std::vector<TypedTensor> inputs;
  inputs.push_back(TypedTensor::scalarI64(seed));
  inputs.push_back(TypedTensor::scalarI64(it));
  for (const std::string &name : sig.inputs) {
    if (name == kEmbeds)
      inputs.push_back(prompts->embeds(it));
    else if (name == kPooled)
      inputs.push_back(prompts->pooled(it));
    else if (name == kNegativeEmbeds)
      inputs.push_back(prompts->negativeEmbeds());
    else if (name == kNegativePooled)
      inputs.push_back(prompts->negativePooled());
    else if (name == kEmbedsMask)
      inputs.push_back(prompts->mask(it));
    else if (name == kNegativeEmbedsMask)
      inputs.push_back(prompts->negativeMask());
    else
      inputs.push_back(TypedTensor::fromHost(HostTensor::fromDoubles(
          DType::F64, {}, {hparams.valueAt(name, it)})));
  }
  if (hparams.hasLr())
    r.lr = hparams.valueAt("lr", it);
  rewardNanos = 0;
  absl::StatusOr<std::vector<TypedTensor>> outs =
      executor.run(sig.function, inputs);
  if (!outs.ok())
    return outs.status();
  r.outputs = std::move(*outs);
  r.totalSeconds = seconds(std::chrono::steady_clock::now() - begin);
  r.rewardSeconds = static_cast<double>(rewardNanos.load()) * 1e-9;
  r.computeSeconds = std::max(0.0, r.totalSeconds - r.rewardSeconds);
  if (stats) {
    executor::TransferStats after = executor.transfers();
    r.transfers =
        executor::TransferStats{after.hostToDevice - before.hostToDevice,
                                after.deviceToHost - before.deviceToHost};
    r.peakDeviceBytes = executor.takePeakDeviceBytes();
  }
  // Phases of the program (omnigen's recipe names rollout, reward, loss,
  // update, metrics); a program without names reports reward host calls
  // and the rest.
  r.phases = executor.takePhaseTimes();
  r.namedPhases = std::any_of(r.phases.begin(), r.phases.end(),
                              [](const auto &p) { return !p.first.empty(); });
  if (!r.namedPhases)
    r.phases = {{"reward", r.rewardSeconds}, {"compute", r.computeSeconds}};
  // Decoded images that are not finite get meaningless rewards: counted
  // like the skipped updates of non-finite gradients.
  if (sig.images) {
    const TypedTensor &images = r.outputs[*sig.images];
    r.numImages = images.shape()[0];
    r.badImages = nonFiniteImages(images);
  }
  return r;
}

/// The side outputs of iteration `r` (the metrics line, a sample grid when
/// due). The first failure is returned.
absl::Status writeSideOutputs(const Signature &sig, const IterationResult &r,
                              const TrainOptions &options,
                              const RunPaths &paths, MetricsFile &metrics,
                              const std::vector<std::string> &promptTexts) {
  if (metrics.isOpen())
    if (absl::Status s = metrics.append(metricsLine(sig, r)); !s.ok())
      return s;
  bool last = r.iteration + 1 == options.steps;
  // The captions name prompts by their text when the set has texts, else
  // by row.
  if (!paths.out.empty() && sig.images &&
      (last || (r.iteration + 1) % paths.sampleEvery == 0))
    return writeSampleGrid(paths.out, r.outputs[*sig.images], r.iteration + 1,
                           sampleCaptions(r, promptTexts));
  return absl::OkStatus();
}

/// What the sample grid's captions need of iteration `r`: each image's
/// prompt row (prompt-major, B = P * G: docs/recipes.md) and reward (the
/// step's `rewards` result, else the one reward call's values).
void sampleDetails(const Signature &sig,
                   const std::optional<PromptSet> &prompts,
                   CapturedRewards &captured, IterationResult &r) {
  std::vector<double> called = captured.take();
  if (prompts && !prompts->texts().empty())
    for (int64_t row : prompts->indices(r.iteration))
      r.promptTexts.push_back(prompts->texts()[row]);
  if (!sig.images)
    return;
  const int64_t b = r.numImages, p = sig.prompts.perIteration;
  if (prompts && p > 0 && b % p == 0) {
    std::vector<int64_t> rows = prompts->indices(r.iteration);
    for (int64_t n = 0; n < b; ++n)
      r.samplePrompts.push_back(rows[n / (b / p)]);
  }
  if (sig.rewards) {
    const TypedTensor &t = r.outputs[*sig.rewards];
    for (int64_t n = 0; n < t.numElements(); ++n)
      r.sampleRewards.push_back(t.doubleAt(n));
  } else if (static_cast<int64_t>(called.size()) == b) {
    r.sampleRewards = std::move(called);
  }
}

/// Prepares the side outputs of a run starting at iteration `start`: the
/// out folder (created; what a run killed while writing left behind is
/// removed) and the metrics file (cut back to `start` when resuming,
/// opened for appending).
absl::Status openOutputs(const RunPaths &paths, int64_t start,
                         MetricsFile &metrics, std::ostream &log) {
  const std::string &out = paths.out;
  if (!out.empty())
    if (absl::Status s = checkpoint::makeDirectories(out); !s.ok())
      return s;
  int stale = 0;
  for (const std::string &folder : {out, out + "/samples"}) {
    if (out.empty())
      break;
    absl::StatusOr<int> removed = checkpoint::removeStaleTemporaries(folder);
    if (!removed.ok())
      return removed.status();
    stale += *removed;
  }
  if (stale)
    log << "removed " << stale << " temporary file" << (stale == 1 ? "" : "s")
        << " of writes an earlier run did not finish in " << out << "\n";
  if (paths.metricsPath.empty())
    return absl::OkStatus();
  // A resumed run redoes the iterations after its checkpoint (all of them
  // when there was none); a new run in its own folder starts the file over
  // (lines left by a run that died before its first checkpoint).
  if (paths.resume ||
      (!paths.out.empty() && paths.metricsPath == paths.out + "/metrics.jsonl"))
    if (absl::Status s = cutMetrics(paths.metricsPath, start, log); !s.ok())
      return s;
  return metrics.open(paths.metricsPath);
}

/// The executor with the training host functions (rewards timed into
/// `rewardNanos` and their values into `captured`, rebound by --reward to
/// `mix`), timing phases.
absl::StatusOr<std::unique_ptr<executor::Executor>>
makeExecutor(std::shared_ptr<const loader::Program> program,
             hal::Device &device, const Signature &sig,
             const TrainOptions &options,
             std::shared_ptr<rewards::RewardMix> mix,
             std::shared_ptr<std::atomic<int64_t>> rewardNanos,
             std::shared_ptr<CapturedRewards> captured, std::ostream &log) {
  absl::StatusOr<HostFunctionRegistry> hostFunctions = trainingHostFunctions(
      *program, sig.function, options.stepFunction, std::move(mix),
      std::move(rewardNanos), std::move(captured), log);
  if (!hostFunctions.ok())
    return hostFunctions.status();
  executor::ExecutorOptions executorOptions;
  executorOptions.hostFunctions = std::move(*hostFunctions);
  executorOptions.channel = options.channel;
  executorOptions.graphs = options.graphs;
  absl::StatusOr<std::unique_ptr<executor::Executor>> created =
      executor::Executor::create(program, device, std::move(executorOptions));
  if (created.ok())
    (*created)->setPhaseTiming(true);
  return created;
}

/// The prompt set the step's data inputs are filled from (none when it
/// takes none).
absl::StatusOr<std::optional<PromptSet>>
loadPrompts(const Signature &sig, const TrainOptions &options,
            std::ostream &log) {
  std::optional<PromptSet> prompts;
  if (!options.promptsPath.empty()) {
    absl::StatusOr<PromptSet> loaded =
        PromptSet::load(options.promptsPath, sig.prompts);
    if (!loaded.ok())
      return loaded.status();
    prompts = std::move(*loaded);
  } else if (sig.prompts.embeds || sig.prompts.pooled) {
    prompts = PromptSet::synthetic(sig.prompts);
  }
  if (prompts)
    log << "prompts: " << prompts->size() << " from " << prompts->source()
        << ", " << sig.prompts.perIteration << " per iteration"
        << (prompts->texts().empty() ? "" : ", with texts") << "\n";
  // The text masks of a model that takes them (docs/prompts.md).
  if (prompts && sig.prompts.mask)
    log << "prompts: text mask "
        << (prompts->hasMask()
                ? "from " + prompts->source()
                : "all ones (" + prompts->source() +
                      " has no prompt_embeds_mask: fixed-length prompts)")
        << (!sig.prompts.negativeMask ? ""
            : prompts->hasNegativeMask()
                ? ", the negative prompt's from the file"
                : ", the negative prompt's all ones")
        << "\n";
  // CFG's unconditional branch (docs/prompts.md).
  if (prompts && (sig.prompts.negativeEmbeds || sig.prompts.negativePooled)) {
    if (prompts->hasNegatives())
      log << "prompts: the unconditional (CFG) branch uses the negative "
             "prompt"
          << (prompts->negativeText() ? " '" + *prompts->negativeText() + "'"
                                      : std::string())
          << " from " << prompts->source() << "\n";
    else
      log << "prompts: the unconditional (CFG) branch uses zeros ("
          << prompts->source()
          << " has no negative_prompt_embeds; tools/encode-prompts writes "
             "them)\n";
  }
  return prompts;
}

/// A stop request before iteration `it`: saves its state and says where.
absl::Status stopAndSave(int signal, int64_t it, const TrainOptions &options,
                         const RunPaths &paths, Checkpointer &checkpoints) {
  std::string what =
      absl::StrCat("interrupted by ", signalName(signal), " after iteration ",
                   it, " of ", options.steps);
  if (paths.out.empty())
    return absl::CancelledError(
        absl::StrCat(what, "; nothing saved (no --out)"));
  if (checkpoints.saved() != it)
    if (absl::Status s = checkpoints.save(it); !s.ok())
      return absl::Status(s.code(),
                          absl::StrCat(what, "; saving failed: ", s.message()));
  return absl::CancelledError(
      absl::StrCat(what, ": saved ", checkpoint::checkpointPath(paths.out, it),
                   "; continue with --resume ", paths.out));
}

} // namespace

absl::Status train(std::shared_ptr<const loader::Program> program,
                   hal::Device &device, const TrainOptions &options,
                   std::ostream &leadLog) {
  // The progress line's elapsed time counts from here (RunClock.h).
  const auto began = std::chrono::steady_clock::now();
  auto clockSeconds = [began] {
    return seconds(std::chrono::steady_clock::now() - began);
  };
  // Only rank 0 prints and writes files.
  const bool lead = !options.channel || options.channel->rank() == 0;
  std::ostream nowhere(nullptr);
  std::ostream &log = lead ? leadLog : nowhere;
  // 1. The step function and the options.
  absl::StatusOr<Signature> sig = checkStep(*program, options.stepFunction);
  if (!sig.ok())
    return sig.status();
  absl::StatusOr<RunPaths> checked = checkOptions(options);
  if (!checked.ok())
    return checked.status();
  const RunPaths &paths = *checked;
  // An unwritable --profile fails before any work (the file is written
  // after the last iteration).
  if (lead && !options.profilePath.empty()) {
    int fd = ::open(options.profilePath.c_str(),
                    O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
      return absl::InvalidArgumentError(absl::StrCat("--profile: cannot write ",
                                                     options.profilePath, ": ",
                                                     std::strerror(errno)));
    ::close(fd);
  }
  HyperParamRequest request;
  request.sets = options.hparamSets;
  request.lrSchedule = options.lrSchedule;
  request.warmup = options.warmup;
  request.lrMin = options.lrMin;
  request.steps = options.steps;
  absl::StatusOr<HyperParams> hparams = HyperParams::resolve(*program, request);
  if (!hparams.ok())
    return hparams.status();
  // A run that keeps nothing says so before it spends the time.
  if (paths.out.empty()) {
    if (paths.metricsPath.empty())
      log << "no --out: this run saves nothing (no checkpoints, metrics or "
             "samples)\n";
    else
      log << "no --out: this run saves no checkpoints or samples (metrics go "
             "to "
          << paths.metricsPath << ")\n";
  }

  // 2. Host functions (--reward's mix), the executor and the prompt set.
  std::shared_ptr<rewards::RewardMix> mix;
  if (!options.rewards.empty()) {
    rewards::HttpRewardOptions http;
    http.timeoutSeconds = options.rewardTimeoutSeconds;
    http.encoding = options.rewardRawImages ? rewards::ImageEncoding::Raw
                                            : rewards::ImageEncoding::Png;
    absl::StatusOr<std::shared_ptr<rewards::RewardMix>> made =
        rewards::RewardMix::create(options.rewards, http);
    if (!made.ok())
      return made.status();
    mix = std::move(*made);
  }
  auto rewardNanos = std::make_shared<std::atomic<int64_t>>(0);
  auto captured = std::make_shared<CapturedRewards>();
  // Start-up phases that take long are named on stderr (rank 0 only).
  using Phase = PhaseTimer::Scope;
  PhaseTimer *phases = lead ? options.phases : nullptr;
  Phase loading;
  loading.start(phases, "loading the kernels");
  absl::StatusOr<std::unique_ptr<executor::Executor>> created = makeExecutor(
      program, device, *sig, options, mix, rewardNanos, captured, log);
  loading.stop();
  if (!created.ok())
    return created.status();
  executor::Executor &executor = **created;
  absl::StatusOr<std::unique_ptr<ShardedState>> sharded = ShardedState::create(
      program->meshes(), program->state(), device, options.channel);
  if (!sharded.ok())
    return sharded.status();
  absl::StatusOr<std::optional<PromptSet>> prompts =
      loadPrompts(*sig, options, log);
  if (!prompts.ok())
    return prompts.status();

  // 3. The initial state, in the slots.
  loading.start(phases, paths.resume
                            ? "loading the state from " + paths.resumeFrom
                            : std::string("initializing the state"));
  absl::StatusOr<Start> start =
      initialState(executor, **sharded, *sig, options, *hparams, paths.resume,
                   paths.resumeFrom, log);
  loading.stop();
  if (!start.ok())
    return start.status();

  MetricsFile metrics;
  if (lead)
    if (absl::Status s = openOutputs(paths, start->iteration, metrics, log);
        !s.ok())
      return s;
  // Everything the run uses, for people and tools (the checkpoints hold
  // the same values for the resume check).
  if (lead && !paths.out.empty())
    if (absl::Status s = checkpoint::writeFileAtomically(
            paths.out + "/run.json",
            hparams->runJson(options.programHash, start->seed, options.steps));
        !s.ok())
      return s;
  Checkpointer checkpoints(
      executor, **sharded, *sig, options, *hparams, paths.out, start->seed,
      start->resumed && paths.resumesInOut ? start->iteration : -1);

  executor.takePhaseTimes(); // not @init_state's
  // --profile: the iterations' commands, timed (rank 0 only).
  std::optional<executor::Profile> profile;
  auto writeProfile = [&]() -> absl::Status {
    absl::Status s =
        checkpoint::writeFileAtomically(options.profilePath, profile->json());
    if (!s.ok())
      return absl::Status(s.code(), absl::StrCat("--profile: ", s.message()));
    return s;
  };
  if (lead && !options.profilePath.empty()) {
    profile.emplace();
    executor.setProfile(&*profile);
  }
  captured->take();
  // --steps 0: the initial state (after --init) as a checkpoint, for other
  // implementations to start from (bench/torch/parity_iteration.py).
  if (options.steps == 0 && start->iteration == 0 && !paths.out.empty())
    if (absl::Status s = checkpoints.save(0); !s.ok())
      return s;

  // 4. Iterations.
  bool warnedImages = false;
  RunClock clock(options.steps, 0.0);
  for (int64_t it = start->iteration; it < options.steps; ++it) {
    int64_t signal = options.stopRequested ? options.stopRequested() : 0;
    if (options.channel) {
      absl::StatusOr<int64_t> agreed =
          maxOverRanks(device, options.channel, signal);
      if (!agreed.ok())
        return absl::Status(agreed.status().code(),
                            absl::StrCat("before iteration ", it, ": ",
                                         agreed.status().message(),
                                         checkpoints.afterFailedIteration(it)));
      signal = *agreed;
    }
    if (signal)
      return stopAndSave(static_cast<int>(signal), it, options, paths,
                         checkpoints);
    absl::Status hook = options.beforeIteration ? options.beforeIteration(it)
                                                : absl::OkStatus();
    // What reward servers are told about this iteration's images. Each
    // rank scores the batch its host call sees; which prompt rows a rank's
    // part of a sharded batch holds is not known here, so only one rank
    // says (docs/rewards.md).
    if (mix) {
      rewards::ScoreContext context;
      context.iteration = it;
      context.seed = start->seed;
      if (!options.channel || options.channel->size() == 1) {
        context.promptsPerIteration = sig->prompts.perIteration;
        context.promptCount = *prompts ? (*prompts)->size() : 0;
        if (*prompts)
          context.promptTexts = (*prompts)->texts();
        // The recipe's rollout chunks score parts of this batch.
        if (sig->images)
          context.batchSize =
              program
                  ->tensor(program->step()
                               .functions()
                               ->Get(sig->function)
                               ->outputs()
                               ->Get(static_cast<uint32_t>(*sig->images)))
                  .shape[0];
      }
      mix->setContext(std::move(context));
    }
    const double iterationStart = clockSeconds();
    // The first iteration in this process carries the warm-up.
    if (it == start->iteration)
      loading.start(phases, absl::StrCat("iteration ", it + 1,
                                         " (the first, with warm-up)"));
    absl::StatusOr<IterationResult> r =
        hook.ok() ? runIteration(executor, *sig, *prompts, *hparams,
                                 start->seed, it, *rewardNanos, options.stats)
                  : absl::StatusOr<IterationResult>(hook);
    loading.stop();
    if (!r.ok())
      return absl::Status(r.status().code(),
                          absl::StrCat("iteration ", it, ": ",
                                       r.status().message(),
                                       checkpoints.afterFailedIteration(it)));
    if (mix)
      r->rewardMeans = mix->takeMeans();
    sampleDetails(*sig, *prompts, *captured, *r);
    if (profile)
      profile->addIteration();
    if (r->badImages && !warnedImages) {
      log << "warning: iteration " << it << ": " << r->badImages << " of "
          << r->numImages
          << " images are not finite, so their rewards mean nothing "
             "(nonfinite_images counts them)\n";
      warnedImages = true;
    }
    clock.iterationDone(it, iterationStart, clockSeconds());
    log << progressLine(options.steps, *sig, *r, clock.text()) << std::endl;
    // Side outputs: a failure stops the run, but only after the state is
    // saved.
    if (absl::Status side =
            lead ? writeSideOutputs(*sig, *r, options, paths, metrics,
                                    *prompts ? (*prompts)->texts()
                                             : std::vector<std::string>())
                 : absl::OkStatus();
        !side.ok())
      return absl::Status(
          side.code(),
          absl::StrCat(side.message(), checkpoints.keepState(it + 1)));
    bool last = it + 1 == options.steps;
    bool due = options.saveEvery > 0 && (it + 1) % options.saveEvery == 0;
    if (!paths.out.empty() && (last || due))
      if (absl::Status s = checkpoints.save(it + 1); !s.ok())
        return s;
  }
  // What loop capture did (omnirun --graphs), once the iterations ran.
  if (lead && executor.graphsEnabled() && start->iteration < options.steps)
    log << executor::describeGraphs(executor.graphStats()) << "\n";
  if (profile) {
    executor.setProfile(nullptr);
    if (absl::Status s = writeProfile(); !s.ok())
      return s;
    std::cerr << profile->table() << std::flush;
  }
  return absl::OkStatus();
}

} // namespace omni::train
