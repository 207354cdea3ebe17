//===- OmniRun.cpp - The omnirun tool as a library --------------*- C++ -*-===//
//
// The command line is one table, kFlags: each row names a flag, how it
// takes its value, its mode (general or training), its help text and the
// setter that applies it. parse() and --help (usage()) read the table, so a
// new flag is one row (and, for a training flag, a [run] key in
// runtime/base/ConfigFile.cpp). `--config FILE` applies the file's [run]
// section through the same parse() first (applyConfig), so the command
// line overrides it (docs/config.md). The rest runs what the options ask
// for: --list, one function, or training (runtime/train/driver/Trainer.h).
//
//===----------------------------------------------------------------------===//

#include "runtime/omnirun/OmniRun.h"
#include "runtime/omnirun/Export.h"

#include "runtime/base/ConfigFile.h"
#include "runtime/base/PhaseTimer.h"
#include "runtime/executor/Executor.h"
#include "runtime/hal/drivers/Drivers.h"
#include "runtime/hal/drivers/cpu/CpuDriver.h"
#ifdef OMNI_HAVE_CUDA
#include "runtime/hal/drivers/cuda/NcclChannel.h"
#endif
#include "runtime/hal/mpi/MpiChannel.h"
#include "runtime/io/Npy.h"
#include "runtime/io/TensorText.h"
#include "runtime/loader/Program.h"
#include "runtime/omnirun/Sample.h"
#include "runtime/omnirun/Serve.h"
#include "runtime/train/checkpoint/AtomicFile.h"
#include "runtime/train/checkpoint/Safetensors.h"
#include "runtime/train/driver/HyperParams.h"
#include "runtime/train/driver/Interrupt.h"
#include "runtime/train/driver/Ranks.h"
#include "runtime/train/driver/Trainer.h"
#include "runtime/train/rewards/RewardFunctions.h"
#include "runtime/train/sample/Sampler.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <optional>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

namespace omni::omnirun {
namespace {

struct Options {
  std::string file;
  bool list = false;
  std::optional<std::string> function;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  /// --function with resident state: set the state slots from a
  /// safetensors file before the run, save them to one after it.
  std::string stateIn, stateOut;
  int threads = 0;
  std::string device = "cpu";
  /// --device was given.
  bool deviceGiven = false;
  /// --gpus: the GPUs of this process (0: not given).
  int gpus = 0;
  bool help = false;
  /// Training mode: --train or any training option (the first one seen).
  bool train = false;
  std::string trainingOption;
  /// --ranks: the ranks of an in-process run (threads of this process).
  int ranks = 1;
  /// --ranks was given (an error under mpirun, which starts the ranks).
  bool ranksGiven = false;
  /// --collective-timeout, in seconds; 0 waits forever.
  double collectiveTimeoutSeconds = 60;
  /// --serve HOST:PORT and its --max-queue, --max-batch-wait-ms (Serve.h);
  /// serveFlag names the first serving flag seen.
  bool serve = false;
  std::string serveFlag;
  ServeArgs serveArgs;

  train::TrainOptions training;
  /// The training flags given, by name (sampling takes only some).
  std::vector<std::string> trainFlags;
  /// Sampling mode (a program with @sample, Sample.h).
  SampleFlags sampling;
  /// --export and its flags (Export.h); --checkpoint and --ema are shared
  /// with sampling.
  ExportOptions exporting;
};

/// How a flag takes its value.
enum class Arg {
  None,   // --name
  Value,  // --name=V or --name V
  Folder, // --name, --name=DIR or --name DIR (DIR is taken when the
          // step.bin came first or DIR is an existing folder)
};

/// Where a flag belongs: any flag of Mode::Train makes omnirun train (and
/// --help lists it under "Training").
enum class Mode { General, Train };

/// Applies a flag to the options: `name` as the table spells it, `value`
/// what was given (none for Arg::None, and for Arg::Folder without a
/// value). Returns an error line.
using Setter =
    std::optional<std::string> (*)(Options &, const std::string &name,
                                   const std::optional<std::string> &value);

struct Flag {
  const char *name;
  Arg arg;
  Mode mode;
  /// The value's name in --help (`--steps=<n>`); "" for Arg::None.
  const char *valueName;
  /// Help text, wrapped by usage(); nullptr: an alias --help leaves out.
  const char *help;
  Setter set;
  /// For an old name, the flag it is the old name of (--help lists old
  /// names in one line at the end).
  const char *oldNameOf = nullptr;
};

/// The most GPUs one process drives (--gpus).
constexpr int kMaxGpus = 64;

/// Parses a non-negative integer flag value.
std::optional<std::string> parseCount(const std::string &name,
                                      const std::string &value, int64_t &out) {
  if (!absl::SimpleAtoi(value, &out) || out < 0)
    return absl::StrCat(name, " expects a non-negative integer, found '", value,
                        "'");
  return std::nullopt;
}

/// Parses an --init value: FILE or PREFIX=FILE (a PREFIX has no '/').
std::optional<std::string> parseInit(const std::string &value,
                                     train::InitFile &out) {
  size_t eq = value.find('=');
  if (eq != std::string::npos &&
      value.substr(0, eq).find('/') == std::string::npos) {
    out.prefix = value.substr(0, eq);
    out.path = value.substr(eq + 1);
  } else {
    out.path = value;
  }
  if (out.prefix.empty() || out.path.empty())
    return absl::StrCat("--init expects <file> or <prefix>=<file>, found '",
                        value, "'");
  return std::nullopt;
}

bool isFolder(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Setters shared by several rows.

template <int64_t train::TrainOptions::*Field>
std::optional<std::string> setCount(Options &o, const std::string &name,
                                    const std::optional<std::string> &value) {
  return parseCount(name, *value, o.training.*Field);
}

template <std::string train::TrainOptions::*Field>
std::optional<std::string> setText(Options &o, const std::string &,
                                   const std::optional<std::string> &value) {
  o.training.*Field = *value;
  return std::nullopt;
}

template <bool train::TrainOptions::*Field>
std::optional<std::string> setOn(Options &o, const std::string &,
                                 const std::optional<std::string> &) {
  o.training.*Field = true;
  return std::nullopt;
}

/// A value of the run itself (not of training), such as --state-in.
template <std::string Options::*Field>
std::optional<std::string> setOwn(Options &o, const std::string &,
                                  const std::optional<std::string> &value) {
  o.*Field = *value;
  return std::nullopt;
}

/// --resume and --resume-if-present, which exclude each other.
template <bool train::TrainOptions::*Field>
std::optional<std::string> setResume(Options &o, const std::string &name,
                                     const std::optional<std::string> &value) {
  train::TrainOptions &t = o.training;
  t.*Field = true;
  if (t.resume && t.resumeIfPresent)
    return std::string("--resume and --resume-if-present exclude each "
                       "other, expected one of them");
  if (value && value->empty())
    return absl::StrCat(name, "= needs a folder");
  if (value)
    t.resumeDir = *value;
  return std::nullopt;
}

/// Every flag, in --help's order.
const Flag kFlags[] = {
    {"--list", Arg::None, Mode::General, "",
     "print the functions (with their input and output types) and the "
     "state slots, then exit",
     [](Options &o, const std::string &,
        const std::optional<std::string> &) -> std::optional<std::string> {
       o.list = true;
       return std::nullopt;
     }},
    {"--export", Arg::Value, Mode::General, "<dir>",
     "write --checkpoint's transformer as a diffusers folder (config.json "
     "from the step.bin's metadata; a LoRA run's adapters as "
     "pytorch_lora_weights.safetensors), then exit (docs/export.md)",
     [](Options &o, const std::string &,
        const std::optional<std::string> &v) -> std::optional<std::string> {
       o.exporting.dir = *v;
       return std::nullopt;
     }},
    {"--base-diffusers", Arg::Value, Mode::General, "<dir>",
     "with --export: copy (hard-link) the other components and "
     "model_index.json from this diffusers folder, and use its "
     "transformer/config.json",
     [](Options &o, const std::string &name,
        const std::optional<std::string> &v) -> std::optional<std::string> {
       o.exporting.baseDiffusers = *v;
       if (o.exporting.firstFlag.empty())
         o.exporting.firstFlag = name;
       return std::nullopt;
     }},
    {"--merge-lora", Arg::None, Mode::General, "",
     "with --export of a LoRA run: merge the adapters into the weights "
     "(W + alpha/r B A) instead of writing the adapter file",
     [](Options &o, const std::string &name,
        const std::optional<std::string> &) -> std::optional<std::string> {
       o.exporting.mergeLora = true;
       if (o.exporting.firstFlag.empty())
         o.exporting.firstFlag = name;
       return std::nullopt;
     }},
    {"--force", Arg::None, Mode::General, "",
     "with --export: replace the folder if it exists and is not empty",
     [](Options &o, const std::string &name,
        const std::optional<std::string> &) -> std::optional<std::string> {
       o.exporting.force = true;
       if (o.exporting.firstFlag.empty())
         o.exporting.firstFlag = name;
       return std::nullopt;
     }},
    {"--function", Arg::Value, Mode::General, "<name>", "the function to run",
     [](Options &o, const std::string &,
        const std::optional<std::string> &v) -> std::optional<std::string> {
       o.function = *v;
       return std::nullopt;
     }},
    {"--input", Arg::Value, Mode::General, "<tensor>",
     "an argument, in order: @file.npy or an inline literal such as "
     "2x3xf32=1,2,3,4,5,6 or i64=7",
     [](Options &o, const std::string &,
        const std::optional<std::string> &v) -> std::optional<std::string> {
       o.inputs.push_back(*v);
       return std::nullopt;
     }},
    {"--output", Arg::Value, Mode::General, "<target>",
     "where result i goes, in order: @file.npy, or - to print it (the "
     "default when no --output is given)",
     [](Options &o, const std::string &,
        const std::optional<std::string> &v) -> std::optional<std::string> {
       o.outputs.push_back(*v);
       return std::nullopt;
     }},
    {"--state-in", Arg::Value, Mode::General, "<file>",
     "with --function: set the program's state slots from this "
     "safetensors file (tensors named as the slots; slots it lacks keep "
     "their values, zero at first) before the run",
     setOwn<&Options::stateIn>},
    {"--state-out", Arg::Value, Mode::General, "<file>",
     "with --function: save every state slot to this safetensors file "
     "after the run",
     setOwn<&Options::stateOut>},
    {"--threads", Arg::Value, Mode::General, "<n>",
     "worker threads of the cpu device, at most 1024 (default: one per core)",
     [](Options &o, const std::string &,
        const std::optional<std::string> &v) -> std::optional<std::string> {
       if (!absl::SimpleAtoi(*v, &o.threads) || o.threads < 0 ||
           o.threads > hal::cpu::kMaxThreads)
         return absl::StrCat("--threads expects an integer from 0 to ",
                             hal::cpu::kMaxThreads, ", found '", *v, "'");
       return std::nullopt;
     }},
    {"--device", Arg::Value, Mode::General, "<driver>",
     "the hal driver (default: cpu)",
     [](Options &o, const std::string &,
        const std::optional<std::string> &v) -> std::optional<std::string> {
       o.device = *v;
       o.deviceGiven = true;
       return std::nullopt;
     }},
    {"--gpus", Arg::Value, Mode::General, "<n>",
     "run on n GPUs of this machine (the cuda driver, ordinals 0..n-1): one "
     "rank per GPU, each a thread, joined by NCCL; n must be the rank count "
     "of the program's mesh (1 for a program without one). Under mpirun -np "
     "P: n per process, P x n ranks; the k-th process of a machine takes "
     "ordinals k n..k n + n - 1, unless it sees exactly n devices "
     "(CUDA_VISIBLE_DEVICES per process). The step.bin must be compiled "
     "with omnic --target=cuda",
     [](Options &o, const std::string &name,
        const std::optional<std::string> &v) -> std::optional<std::string> {
       if (!absl::SimpleAtoi(*v, &o.gpus) || o.gpus < 1 || o.gpus > kMaxGpus)
         return absl::StrCat(name, " expects an integer from 1 to ", kMaxGpus,
                             ", found '", *v, "'");
       return std::nullopt;
     }},
    {"--graphs", Arg::Value, Mode::General, "auto|on|off",
     "capture each loop that only runs device work (the rollout's denoise "
     "loop), and each run of 8 or more such commands (the train phase), "
     "into a graph and replay it as one launch (docs/backend.md, Graphs); "
     "auto (default): on GPUs only; the results are the same either way",
     [](Options &o, const std::string &name,
        const std::optional<std::string> &v) -> std::optional<std::string> {
       using Graphs = executor::ExecutorOptions::Graphs;
       if (*v == "auto")
         o.training.graphs = Graphs::Auto;
       else if (*v == "on")
         o.training.graphs = Graphs::On;
       else if (*v == "off")
         o.training.graphs = Graphs::Off;
       else
         return absl::StrCat(name, " expects auto, on or off, found '", *v,
                             "'");
       return std::nullopt;
     }},
    {"--serve", Arg::Value, Mode::General, "<host>:<port>",
     "serve the program's @sample over HTTP on this address until SIGINT or "
     "SIGTERM (docs/serving.md; port 0 picks a free one)",
     [](Options &o, const std::string &,
        const std::optional<std::string> &v) -> std::optional<std::string> {
       if (absl::Status s = parseServeAddress(*v, o.serveArgs); !s.ok())
         return std::string(s.message());
       o.serve = true;
       return std::nullopt;
     }},
    {"--max-queue", Arg::Value, Mode::General, "<n>",
     "with --serve: requests that may wait for the sampler (default 64); "
     "one more is answered 503",
     [](Options &o, const std::string &name,
        const std::optional<std::string> &v) -> std::optional<std::string> {
       if (!absl::SimpleAtoi(*v, &o.serveArgs.maxQueue) ||
           o.serveArgs.maxQueue < 1 || o.serveArgs.maxQueue > 1000000)
         return absl::StrCat(name,
                             " expects an integer from 1 to 1000000, "
                             "found '",
                             *v, "'");
       if (o.serveFlag.empty())
         o.serveFlag = name;
       return std::nullopt;
     }},
    {"--max-batch-wait-ms", Arg::Value, Mode::General, "<ms>",
     "with --serve: how long a request waits for others to share its batch "
     "(default 5)",
     [](Options &o, const std::string &name,
        const std::optional<std::string> &v) -> std::optional<std::string> {
       if (!absl::SimpleAtoi(*v, &o.serveArgs.maxBatchWaitMs) ||
           o.serveArgs.maxBatchWaitMs < 0 || o.serveArgs.maxBatchWaitMs > 60000)
         return absl::StrCat(name,
                             " expects an integer from 0 to 60000, "
                             "found '",
                             *v, "'");
       if (o.serveFlag.empty())
         o.serveFlag = name;
       return std::nullopt;
     }},
    {"--help", Arg::None, Mode::General, "", "print this help",
     [](Options &o, const std::string &,
        const std::optional<std::string> &) -> std::optional<std::string> {
       o.help = true;
       return std::nullopt;
     }},
    {"-h", Arg::None, Mode::General, "", nullptr,
     [](Options &o, const std::string &,
        const std::optional<std::string> &) -> std::optional<std::string> {
       o.help = true;
       return std::nullopt;
     }},
    {"--config", Arg::Value, Mode::General, "<file>",
     "read options from this omni.toml first: its [run] section holds "
     "these flags without -- (docs/config.md); a flag given here overrides "
     "the file's value, and --reward, --init or --init-skip given here "
     "replace the file's list",
     // run() reads the file before parse(); the row is for --help and so
     // that parse() takes the flag and its value.
     [](Options &, const std::string &, const std::optional<std::string> &)
         -> std::optional<std::string> { return std::nullopt; }},

    {"--steps", Arg::Value, Mode::Train, "<n>",
     "iterations to reach (default 1); 0 with --out writes the initial "
     "state as step-0.safetensors",
     setCount<&train::TrainOptions::steps>},
    {"--seed", Arg::Value, Mode::Train, "<n>",
     "the run's seed (default 0; a resumed run takes the checkpoint's, and a "
     "different --seed is an error)",
     [](Options &o, const std::string &name,
        const std::optional<std::string> &v) -> std::optional<std::string> {
       int64_t seed = 0;
       if (std::optional<std::string> error = parseCount(name, *v, seed))
         return error;
       o.training.seed = seed;
       return std::nullopt;
     }},
    {"--out", Arg::Value, Mode::Train, "<dir>",
     "the run's folder: step-<n>.safetensors checkpoints, metrics.jsonl, "
     "samples/iter-<n>.png",
     setText<&train::TrainOptions::outDir>},
    {"--save-every", Arg::Value, Mode::Train, "<k>",
     "also save a checkpoint every k iterations (default: at the end only; "
     "Ctrl-C or SIGTERM saves too, then exits with 130 or 143; a second "
     "signal exits at once)",
     setCount<&train::TrainOptions::saveEvery>},
    {"--keep-last", Arg::Value, Mode::Train, "<n>",
     "keep only the n newest checkpoints (default: all)",
     setCount<&train::TrainOptions::keepLast>},
    {"--resume", Arg::Folder, Mode::Train, "<dir>",
     "continue from the latest checkpoint in <dir> (also --resume <dir>; "
     "default: --out); --out defaults to <dir>; no checkpoint there is an "
     "error. Cuts metrics.jsonl back to the checkpoint's iteration",
     setResume<&train::TrainOptions::resume>},
    {"--resume-if-present", Arg::Folder, Mode::Train, "<dir>",
     "--resume when <dir> has a checkpoint, else start from @init_state",
     setResume<&train::TrainOptions::resumeIfPresent>},
    {"--allow-program-change", Arg::None, Mode::Train, "",
     "resume a checkpoint that another step.bin wrote (checkpoints record "
     "the program's fingerprint)",
     setOn<&train::TrainOptions::allowProgramChange>},
    {"--set", Arg::Value, Mode::Train, "<name>=<value>",
     "override a runtime hyper-parameter's default (step.bin records them: "
     "omnirun --list shows names, defaults and ranges; the FlowGRPO "
     "recipe's are lr, weight_decay, beta1, beta2, adam_eps and "
     "max_grad_norm, every other recipe option is compile-time, set with "
     "omnigen --opt); repeatable",
     [](Options &o, const std::string &,
        const std::optional<std::string> &v) -> std::optional<std::string> {
       o.training.hparamSets.push_back(*v);
       return std::nullopt;
     }},
    {"--lr-schedule", Arg::Value, Mode::Train, "<kind>",
     "constant (default), linear or cosine: after the warmup, lr decays "
     "from its value to --lr-min at --steps (docs/recipes.md has the "
     "formula); each iteration's lr is in metrics.jsonl",
     setText<&train::TrainOptions::lrSchedule>},
    {"--warmup", Arg::Value, Mode::Train, "<n>",
     "raise lr linearly from 0 over the first n iterations (default 0)",
     setCount<&train::TrainOptions::warmup>},
    {"--lr-min", Arg::Value, Mode::Train, "<lr>",
     "the lr a linear or cosine schedule ends at (default 0)",
     [](Options &o, const std::string &name,
        const std::optional<std::string> &v) -> std::optional<std::string> {
       double lr = 0;
       if (!absl::SimpleAtod(*v, &lr) || !(lr >= 0) || std::isinf(lr))
         return absl::StrCat(name, " expects a finite number >= 0, found '", *v,
                             "'");
       o.training.lrMin = lr;
       return std::nullopt;
     }},
    {"--allow-hparam-change", Arg::None, Mode::Train, "",
     "resume a checkpoint trained with other hyper-parameter values "
     "(--set, the schedule; checkpoints and run.json record them)",
     setOn<&train::TrainOptions::allowHparamChange>},
    {"--stats", Arg::None, Mode::Train, "",
     "per iteration, the bytes copied to and from the device and the device "
     "memory in use (progress line and metrics.jsonl)",
     setOn<&train::TrainOptions::stats>},
    {"--profile", Arg::Value, Mode::Train, "<file>",
     "time every command of the iterations and write, per phase, each "
     "command kind's and kernel's count, seconds, share of the phase, bytes "
     "and FLOPs here as JSON, with a short table on stderr at the end "
     "(rank 0; docs/performance.md); the stream is synchronized after each "
     "command",
     setText<&train::TrainOptions::profilePath>},
    {"--sample-every", Arg::Value, Mode::Train, "<k>",
     "write the step's `images` every k iterations (default: --save-every, "
     "or 10)",
     setCount<&train::TrainOptions::sampleEvery>},
    {"--prompts", Arg::Value, Mode::Train, "<file>",
     "the prompt set: a safetensors file with prompt_embeds [N, L, D] and "
     "pooled_prompt_embeds [N, Dp] (default: 16 synthetic prompts)",
     setText<&train::TrainOptions::promptsPath>},
    {"--init", Arg::Value, Mode::Train, "[<prefix>=]<file>",
     "after @init_state, set state <prefix>.X (and ref.<prefix>.X, "
     "ema.<prefix>.X) from each tensor X of the safetensors file (prefix "
     "default: transformer; f16/bf16 widen to f32); repeatable",
     [](Options &o, const std::string &,
        const std::optional<std::string> &v) -> std::optional<std::string> {
       train::InitFile init;
       if (std::optional<std::string> error = parseInit(*v, init))
         return error;
       o.training.inits.push_back(init);
       return std::nullopt;
     }},
    {"--init-from-ema", Arg::Value, Mode::Train, "[<prefix>=]<checkpoint>",
     "like --init, with a checkpoint's EMA weights: state <prefix>.X from "
     "its tensor ema.<prefix>.X (from <prefix>.X where it has no EMA of X, "
     "e.g. LoRA's frozen base); its other tensors are ignored",
     [](Options &o, const std::string &name,
        const std::optional<std::string> &v) -> std::optional<std::string> {
       train::InitFile init;
       if (parseInit(*v, init))
         return absl::StrCat(name,
                             " expects <checkpoint> or "
                             "<prefix>=<checkpoint>, found '",
                             *v, "'");
       init.fromEma = true;
       o.training.inits.push_back(init);
       return std::nullopt;
     }},
    {"--init-skip", Arg::Value, Mode::Train, "<name>",
     "ignore tensor <name> of the --init files (a buffer the program "
     "computes, e.g. SD3's pos_embed.pos_embed; a trailing * matches a "
     "prefix, e.g. encoder.*); repeatable",
     [](Options &o, const std::string &,
        const std::optional<std::string> &v) -> std::optional<std::string> {
       o.training.initSkip.push_back(*v);
       return std::nullopt;
     }},
    {"--init-diffusers", Arg::Value, Mode::Train, "<dir>",
     "after @init_state (before --init), set state transformer.* and vae.* "
     "from a diffusers folder's transformer/ and vae/ weights (one "
     "safetensors file or the shards of its .index.json; f16/bf16 widen to "
     "f32; the VAE encoder is skipped; docs/diffusers.md)",
     setText<&train::TrainOptions::initDiffusers>},
    {"--reward", Arg::Value, Mode::Train, "<spec>",
     "run this reward wherever the program calls one: a built-in's name or "
     "a reward server, http://HOST:PORT[/PATH] or unix:SOCKET "
     "(docs/rewards.md); "
     "repeatable for a weighted mix, each spec with an optional :WEIGHT "
     "(default 1), e.g. --reward jpeg_compressibility:0.5 --reward "
     "http://127.0.0.1:8000:0.5",
     [](Options &o, const std::string &,
        const std::optional<std::string> &v) -> std::optional<std::string> {
       o.training.rewards.push_back(*v);
       return std::nullopt;
     }},
    {"--reward-timeout", Arg::Value, Mode::Train, "<seconds>",
     "the longest wait for a reward server's connection and answer "
     "(default 60); a server that cannot be reached is tried 5 times "
     "over about 4 s",
     [](Options &o, const std::string &name,
        const std::optional<std::string> &v) -> std::optional<std::string> {
       double seconds = 0;
       if (!absl::SimpleAtod(*v, &seconds) || !(seconds > 0) || seconds > 1e6)
         return absl::StrCat(
             name, " expects seconds above 0, at most 1000000, found '", *v,
             "'");
       o.training.rewardTimeoutSeconds = seconds;
       return std::nullopt;
     }},
    {"--reward-images", Arg::Value, Mode::Train, "png|raw",
     "how images go to reward servers: base64 PNG (default) or base64 raw "
     "RGB bytes, row-major HWC",
     [](Options &o, const std::string &name,
        const std::optional<std::string> &v) -> std::optional<std::string> {
       if (*v != "png" && *v != "raw")
         return absl::StrCat(name, " expects png or raw, found '", *v, "'");
       o.training.rewardRawImages = *v == "raw";
       return std::nullopt;
     }},
    {"--metrics", Arg::Value, Mode::Train, "<file>",
     "append the JSON metrics lines here instead",
     setText<&train::TrainOptions::metricsPath>},
    {"--train", Arg::None, Mode::Train, "", "train with the defaults above",
     [](Options &, const std::string &, const std::optional<std::string> &)
         -> std::optional<std::string> { return std::nullopt; }},
    {"--ranks", Arg::Value, Mode::Train, "<n>",
     "train on n ranks, threads of this process with a cpu device each and "
     "--threads split between them; n must be the rank count of the "
     "program's mesh (default 1). Only rank 0 prints and writes files; "
     "checkpoints hold whole tensors, so a run resumes on any n",
     [](Options &o, const std::string &name,
        const std::optional<std::string> &v) -> std::optional<std::string> {
       if (!absl::SimpleAtoi(*v, &o.ranks) || o.ranks < 1 ||
           o.ranks > hal::cpu::kMaxThreads)
         return absl::StrCat(name, " expects an integer from 1 to ",
                             hal::cpu::kMaxThreads, ", found '", *v, "'");
       o.ranksGiven = true;
       return std::nullopt;
     }},
    {"--collective-timeout", Arg::Value, Mode::Train, "<seconds>",
     "with --ranks, --gpus or under mpirun: a rank that waits longer than this "
     "for "
     "the others in a "
     "collective ends the run, naming the ranks that did not arrive "
     "(default 60; 0 waits forever; keep it above the time rank 0 takes to "
     "write a checkpoint, which the others wait for)",
     [](Options &o, const std::string &name,
        const std::optional<std::string> &v) -> std::optional<std::string> {
       double seconds = 0;
       if (!absl::SimpleAtod(*v, &seconds) || !(seconds >= 0) || seconds > 1e6)
         return absl::StrCat(
             name, " expects seconds from 0 to 1000000, found '", *v, "'");
       o.collectiveTimeoutSeconds = seconds;
       return std::nullopt;
     }},
    // Sampling (Sample.h, docs/sampling.md): a program with @sample and no
    // @train_step samples with --prompts, --out, --seed, --set
    // guidance_scale=..., --init and --init-skip, and these.
    {"--checkpoint", Arg::Value, Mode::General, "<file|dir>",
     "sampling program: the weights from this checkpoint (a run folder: "
     "its latest), only the program's state names (transformer.*, vae.*); "
     "with --export: the checkpoint to export",
     [](Options &o, const std::string &name,
        const std::optional<std::string> &v) -> std::optional<std::string> {
       if (v->empty())
         return absl::StrCat(name, " needs a checkpoint file or run folder");
       o.sampling.checkpoint = *v;
       o.sampling.given = o.sampling.given.empty() ? name : o.sampling.given;
       o.exporting.checkpoint = *v; // --export's too (Export.h)
       return std::nullopt;
     }},
    {"--ema", Arg::None, Mode::General, "",
     "sampling program, with --checkpoint: its EMA weights ema.<name> where "
     "it has them; with --export: export the EMA weights",
     [](Options &o, const std::string &name,
        const std::optional<std::string> &) -> std::optional<std::string> {
       o.sampling.ema = true;
       o.sampling.given = o.sampling.given.empty() ? name : o.sampling.given;
       o.exporting.ema = true; // --export's too (Export.h)
       return std::nullopt;
     }},
    {"--images-per-prompt", Arg::Value, Mode::General, "<k>",
     "sampling program: k images per prompt, seeds --seed .. --seed + k - 1 "
     "(default 1)",
     [](Options &o, const std::string &name,
        const std::optional<std::string> &v) -> std::optional<std::string> {
       int64_t k = 0;
       if (!absl::SimpleAtoi(*v, &k) || k < 1 || k > 1000000)
         return absl::StrCat(name,
                             " expects an integer from 1 to 1000000, "
                             "found '",
                             *v, "'");
       o.sampling.imagesPerPrompt = k;
       o.sampling.given = o.sampling.given.empty() ? name : o.sampling.given;
       return std::nullopt;
     }},
    {"--save-latents", Arg::None, Mode::General, "",
     "sampling program: also write each image's initial latents "
     "(p<i>-s<seed>.latents.npy, for parity checks)",
     [](Options &o, const std::string &name,
        const std::optional<std::string> &) -> std::optional<std::string> {
       o.sampling.saveLatents = true;
       o.sampling.given = o.sampling.given.empty() ? name : o.sampling.given;
       return std::nullopt;
     }},
    {"--checkpoint-dir", Arg::Value, Mode::Train, "<dir>", nullptr,
     setText<&train::TrainOptions::outDir>, "--out"},
    {"--checkpoint-every", Arg::Value, Mode::Train, "<k>", nullptr,
     setCount<&train::TrainOptions::saveEvery>, "--save-every"},
};

constexpr const char *kIntro = R"(usage: omnirun <step.bin> [options]

Runs a function of a compiled omni program (step.bin). A step.bin
contains native code that omnirun loads and executes: run only step.bin
files you would run as programs.

)";

constexpr const char *kTrainingIntro = R"(
Training (the program follows the convention of runtime/train/driver/
Trainer.h: @init_state(seed) and @train_step(state..., seed, iteration,
[prompt_embeds], [pooled_prompt_embeds], hyper-parameters...), the state
in omni.state slots; any of these options trains). Runtime
hyper-parameters (--set, --lr-schedule) change without recompiling;
options that change shapes or the program (group size, prompts per
iteration, steps, window, LoRA rank, whether beta > 0 and whether
guidance_scale != 1, ...) are compile-time: omnigen --opt, then omnic:
)";

/// `--name`, `--name=<v>` or `--name[=<v>]`, as --help shows a flag.
std::string spelling(const Flag &flag) {
  switch (flag.arg) {
  case Arg::None:
    return flag.name;
  case Arg::Value:
    return absl::StrCat(flag.name, "=", flag.valueName);
  case Arg::Folder:
    return absl::StrCat(flag.name, "[=", flag.valueName, "]");
  }
  return flag.name;
}

constexpr size_t kHelpColumn = 25, kHelpWidth = 76;

/// Appends `line` and then the words of `text` to `out`, wrapping at
/// kHelpWidth columns with continuation lines indented to kHelpColumn.
void appendWrapped(std::string &out, std::string line, absl::string_view text) {
  for (absl::string_view word : absl::StrSplit(text, ' ')) {
    size_t column = line.size() - (line.rfind('\n') + 1);
    if (column > kHelpColumn && column + 1 + word.size() > kHelpWidth)
      line += "\n" + std::string(kHelpColumn, ' ');
    else if (column > kHelpColumn)
      line += " ";
    absl::StrAppend(&line, word);
  }
  out += line + "\n";
}

/// --help: the flags of kFlags in two sections, each flag's help beside it
/// (or below it, when the flag is long).
std::string usage() {
  std::string out = kIntro;
  auto section = [&](Mode mode) {
    std::vector<std::string> oldNames, newNames;
    for (const Flag &flag : kFlags) {
      if (flag.mode != mode)
        continue;
      if (flag.oldNameOf) {
        oldNames.push_back(spelling(flag));
        newNames.push_back(flag.oldNameOf);
      }
      if (!flag.help)
        continue;
      std::string line = "  " + spelling(flag);
      line += line.size() + 1 > kHelpColumn
                  ? "\n" + std::string(kHelpColumn, ' ')
                  : std::string(kHelpColumn - line.size(), ' ');
      appendWrapped(out, line, flag.help);
    }
    if (!oldNames.empty())
      appendWrapped(out, "  " + absl::StrJoin(oldNames, ", ") + ":",
                    "old names of " + absl::StrJoin(newNames, " and "));
  };
  section(Mode::General);
  out += kTrainingIntro;
  section(Mode::Train);
  return out;
}

/// The row for `arg` (`--name` or `--name=...` when the flag takes a
/// value), or nullptr.
const Flag *findFlag(const std::string &arg) {
  for (const Flag &flag : kFlags) {
    if (arg == flag.name)
      return &flag;
    if (flag.arg != Arg::None && absl::StartsWith(arg, flag.name) &&
        arg.size() > std::strlen(flag.name) &&
        arg[std::strlen(flag.name)] == '=')
      return &flag;
  }
  return nullptr;
}

/// Parses `args` with kFlags; returns an error line on failure.
std::optional<std::string> parse(const std::vector<std::string> &args,
                                 Options &options) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &arg = args[i];
    if (!absl::StartsWith(arg, "-") || arg == "-") {
      if (!options.file.empty())
        return absl::StrCat("expected one step.bin but found '", options.file,
                            "' and '", arg, "'");
      options.file = arg;
      continue;
    }
    const Flag *flag = findFlag(arg);
    if (!flag)
      return absl::StrCat("unknown option '", arg, "' (see --help)");
    std::string name = flag->name;
    std::optional<std::string> value;
    if (arg.size() > name.size()) {
      value = arg.substr(name.size() + 1);
    } else if (flag->arg == Arg::Value) {
      if (i + 1 == args.size())
        return absl::StrCat(name, " needs a value");
      value = args[++i];
    } else if (flag->arg == Arg::Folder && i + 1 < args.size() &&
               !absl::StartsWith(args[i + 1], "-") &&
               (!options.file.empty() || isFolder(args[i + 1]))) {
      value = args[++i];
    }
    if (flag->mode == Mode::Train) {
      options.trainFlags.push_back(name);
      options.train = true;
      if (options.trainingOption.empty())
        options.trainingOption = name;
    }
    if (std::optional<std::string> error = flag->set(options, name, value))
      return error;
  }
  return std::nullopt;
}

/// The --config FILE of `args` into `path` ("" for none); an error line
/// when it is given twice.
std::optional<std::string> configPath(const std::vector<std::string> &args,
                                      std::string &path) {
  std::vector<std::string> paths;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--config")
      paths.push_back(i + 1 < args.size() ? args[++i] : "");
    else if (absl::StartsWith(args[i], "--config="))
      paths.push_back(args[i].substr(std::strlen("--config=")));
  }
  if (paths.size() > 1)
    return absl::StrCat("--config is given two config files, ", paths[0],
                        " and ", paths[1], ": expected one");
  path = paths.empty() ? "" : paths[0];
  return std::nullopt;
}

/// Applies the [run] section of the --config file to `options`, before
/// parse() applies the command line over it (docs/config.md): each
/// argument of the file goes through parse(), and its errors name the
/// file's line and key. A list flag (--reward, --init, --init-skip) that
/// `args` gives replaces the file's items.
std::optional<std::string> applyConfig(const std::string &path,
                                       const std::vector<std::string> &args,
                                       Options &options) {
  if (path.empty())
    return std::string("--config needs a file");
  absl::StatusOr<std::vector<config::ConfigArg>> file =
      config::readConfigFile(path, config::Tool::Omnirun);
  if (!file.ok())
    return std::string(file.status().message());
  std::set<std::string> given;
  for (const std::string &arg : args)
    if (const Flag *flag = findFlag(arg))
      given.insert(flag->name);
  for (const config::ConfigArg &arg : *file) {
    if (arg.listItem && given.count(arg.flag))
      continue;
    if (std::optional<std::string> error = parse({arg.arg()}, options))
      return absl::StrCat(arg.where, ": ", arg.key, ": ", *error);
  }
  return std::nullopt;
}

void list(const loader::Program &program, std::ostream &out) {
  for (uint32_t f = 0; f < program.numFunctions(); ++f)
    out << "@" << program.step().functions()->Get(f)->name()->str()
        << program.functionSignature(f) << "\n";
  // Runtime hyper-parameters: what --set may change.
  for (const loader::HyperParamInfo &hp : program.hyperParams())
    out << "hparam '" << hp.name << "': default "
        << train::formatExact(hp.defaultValue) << ", range " << hp.range
        << " (runtime: --set " << hp.name << "=<value>)\n";
  // What the program was made from (docs/backend.md, "Metadata"), one
  // line per key: a value's line breaks are written as \n.
  for (const auto &[key, value] : program.metadata())
    out << "metadata '" << key
        << "': " << absl::StrReplaceAll(value, {{"\n", "\\n"}}) << "\n";
  // A sharded slot says which part of which tensor one rank holds:
  // "(Parameter, shard 1/2 of tensor<64x64xf32> dim 0 over 'fsdp')".
  for (const loader::StateInfo &slot : program.state()) {
    out << "state '" << slot.name
        << "': " << loader::tensorTypeString(slot.dtype, slot.shape) << " ("
        << step::EnumNameRole(slot.role);
    if (const auto &s = slot.sharding)
      out << ", shard 1/" << s->groupSize << " of "
          << loader::tensorTypeString(slot.dtype, s->globalShape) << " dim "
          << s->dim << " over " << program.meshes()[s->mesh].axisNames(s->axes);
    out << ")\n";
  }
}

/// The kind of program `program` is ("cpu" or "cuda"; "cpu" for a file
/// without a target).
std::string targetKind(const loader::Program &program) {
  const step::Target *target = program.step().target();
  return target && target->kind() ? target->kind()->str() : "cpu";
}

/// Under mpirun: the pids of the job's other processes on this host, which
/// the interrupt handler watches (a SIGTERM after one of them died means
/// mpirun is ending the job: Interrupt.h). Every rank broadcasts its pid
/// and host name in turn (collective).
absl::StatusOr<std::vector<train::InterruptHandler::Peer>> peersOnThisHost(
    int rank, int size,
    const std::function<absl::Status(void *, int64_t, int)> &broadcast) {
  struct Identity {
    int32_t pid;
    char host[252];
  };
  Identity own{};
  own.pid = static_cast<int32_t>(::getpid());
  if (::gethostname(own.host, sizeof(own.host) - 1) != 0)
    own.host[0] = '\0';
  std::vector<train::InterruptHandler::Peer> peers;
  for (int root = 0; root < size; ++root) {
    Identity other = own;
    if (absl::Status s = broadcast(&other, sizeof(other), root); !s.ok())
      return s;
    other.host[sizeof(other.host) - 1] = '\0';
    if (root != rank && std::strcmp(other.host, own.host) == 0)
      peers.push_back({root, other.pid});
  }
  return peers;
}

/// A step.bin compiled for one target run on another device: one line
/// naming the target and the fix.
std::optional<std::string> checkTarget(const loader::Program &program,
                                       const std::string &file,
                                       const Options &options) {
  const std::string kind = targetKind(program);
  const std::string how = options.gpus
                              ? absl::StrCat("--gpus ", options.gpus)
                              : absl::StrCat("--device ", options.device);
  if (options.device == "cuda" && kind != "cuda")
    return absl::StrCat(file, " was compiled for ", kind, ", but ", how,
                        " runs cuda programs (compile it with omnic "
                        "--target=cuda)");
  if (options.device == "cpu" && kind == "cuda")
    return absl::StrCat(file,
                        " was compiled for cuda, which the cpu device cannot "
                        "run (run it with --gpus N, or compile it with omnic "
                        "--target=cpu)");
  return std::nullopt;
}

/// The first cuda ordinal of this process's `n` GPUs (--gpus n). Under
/// mpirun the host's k-th process takes ordinals k n .. k n + n - 1, so
/// that processes sharing a machine share no GPU, unless it sees exactly
/// n devices: then the launcher gave each process its own
/// (CUDA_VISIBLE_DEVICES) and they are 0..n-1. One line when the machine
/// has too few.
absl::StatusOr<int> firstGpu(int n) {
  hal::Driver *cuda = hal::builtinDrivers().find("cuda");
  absl::StatusOr<int> count =
      cuda ? cuda->deviceCount() : absl::NotFoundError("no cuda driver");
  if (!count.ok())
    return 0; // the first createDevice says why, in one line
  const int local = hal::mpi::launchedByMpi()
                        ? std::max(0, hal::mpi::launcherLocalRank())
                        : 0;
  const int first = *count == n ? 0 : local * n;
  if (first + n <= *count)
    return first;
  if (local == 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "--gpus ", n, " needs ", n, " GPUs but this machine has ", *count));
  return absl::InvalidArgumentError(absl::StrCat(
      "under mpirun this process is number ", local,
      " (from 0) of its host, so --gpus ", n, " gives it cuda devices ", first,
      "..", first + n - 1, ", but the host has ", *count,
      " (start fewer processes per host, or give each its own GPUs through "
      "CUDA_VISIBLE_DEVICES)"));
}

/// The ranks of an `omnirun --gpus N` run and how they find each other.
struct GpuWorld {
  std::unique_ptr<hal::ChannelProvider> provider;
  /// Under mpirun: the MPI world, kept for the whole run (its broadcast
  /// carried the NCCL unique id; mpirun ends the job through it).
  std::unique_ptr<hal::ChannelProvider> mpi;
  std::vector<int> localRanks;
  /// For checkWorld's message ("--gpus 2", "mpirun -np 2 x --gpus 8").
  std::string how;
};

absl::StatusOr<GpuWorld> gpuWorld(const loader::Program &program, int gpus,
                                  std::chrono::milliseconds timeout,
                                  const MpiJoin &joinMpi) {
  GpuWorld world;
  int nodes = 1, node = 0;
  std::function<absl::Status(void *, int64_t, int)> broadcast;
  if (hal::mpi::launchedByMpi()) {
    if (!joinMpi)
      return absl::FailedPreconditionError(
          "this omnirun was started by mpirun but built without MPI (install "
          "libopenmpi-dev and rebuild, or drop mpirun)");
    absl::StatusOr<MpiWorld> mpi = joinMpi(timeout);
    if (!mpi.ok())
      return mpi.status();
    nodes = mpi->provider->size();
    node = mpi->rank;
    broadcast = mpi->broadcast;
    // The broadcast uses the provider: it lives as long as the world.
    world.mpi = std::move(mpi->provider);
    world.how = absl::StrCat("mpirun -np ", nodes, " x --gpus ", gpus);
    if (broadcast) {
      absl::StatusOr<std::vector<train::InterruptHandler::Peer>> peers =
          peersOnThisHost(node, nodes, broadcast);
      if (!peers.ok())
        return peers.status();
      train::InterruptHandler::watchPeers(node, *peers);
    }
  } else {
    world.how = absl::StrCat("--gpus ", gpus);
  }
  const int size = nodes * gpus;
  if (absl::Status s = train::checkWorld(program, size, world.how); !s.ok())
    return s;
  for (int i = 0; i < gpus; ++i)
    world.localRanks.push_back(node * gpus + i);
  if (size == 1) {
    world.provider = std::make_unique<hal::LoopbackChannelProvider>();
    return world;
  }
#ifdef OMNI_HAVE_CUDA
  if (nodes == 1) {
    world.provider =
        std::make_unique<hal::cuda::NcclChannelProvider>(size, timeout);
    return world;
  }
  if (!broadcast)
    return absl::FailedPreconditionError(
        "this omnirun's MPI cannot broadcast the NCCL unique id");
  // MPI rank 0 makes the id; every process gets it (and rank 0's failure,
  // so that no process waits for an id that never comes).
  std::array<char, 1 + 128> message{};
  std::string error;
  if (node == 0) {
    absl::StatusOr<hal::cuda::NcclUniqueId> id = hal::cuda::makeNcclUniqueId();
    if (id.ok()) {
      message[0] = 1;
      std::memcpy(message.data() + 1, id->data(), id->size());
    } else {
      error = std::string(id.status().message());
    }
  }
  if (absl::Status s = broadcast(message.data(), message.size(), 0); !s.ok())
    return s;
  if (!message[0])
    return absl::FailedPreconditionError(
        node == 0 ? error
                  : "MPI rank 0 could not make the NCCL unique id (see its "
                    "message)");
  hal::cuda::NcclUniqueId id;
  std::memcpy(id.data(), message.data() + 1, id.size());
  world.provider = std::make_unique<hal::cuda::NcclChannelProvider>(
      size, id, world.localRanks, timeout);
  return world;
#else
  (void)broadcast;
  return absl::FailedPreconditionError(absl::StrCat(
      world.how,
      " needs NCCL, but this omnirun was built without the cuda driver (no "
      "CUDA toolkit at build time)"));
#endif
}

/// --serve with another mode's flags: one line naming the flag.
std::optional<std::string> checkServeOptions(const Options &options) {
  if (options.list || options.function)
    return absl::StrCat(options.list ? "--list" : "--function",
                        " and --serve exclude each other");
  // The sampling mode's weights, prompts and --set guidance_scale apply
  // (--prompts: the set requests name by index); other training flags and
  // the sampling mode's output flags do not.
  for (const std::string &flag : options.trainFlags)
    if (flag != "--prompts" && flag != "--set" && flag != "--init" &&
        flag != "--init-skip" && flag != "--init-diffusers")
      return absl::StrCat(flag,
                          " is a training option and cannot be combined with "
                          "--serve");
  if (options.sampling.imagesPerPrompt != 1 || options.sampling.saveLatents)
    return absl::StrCat(options.sampling.saveLatents ? "--save-latents"
                                                     : "--images-per-prompt",
                        " writes the sampling mode's files and cannot be "
                        "combined with --serve (requests say how many images)");
  if (options.gpus > 1)
    return absl::StrCat("--gpus ", options.gpus,
                        " with --serve: serving runs on one GPU (--gpus 1)");
  return std::nullopt;
}

/// The --serve mode (Serve.h) with omnirun's backend.
int serveProgram(const std::shared_ptr<const loader::Program> &program,
                 const Options &options, std::ostream &out, std::ostream &err) {
  ServeArgs args = options.serveArgs;
  args.file = options.file;
  args.device = options.device;
  args.threads = options.threads;
  args.graphs = options.training.graphs;
  args.promptsPath = options.training.promptsPath;
  args.weights = samplingWeights(options.sampling, options.training);
  args.hparamSets = options.training.hparamSets;
  args.log = &out;
  return serve(program, args, builtinSampleBackend(), out, err);
}

} // namespace

std::vector<std::string> flagNames() {
  std::vector<std::string> names;
  for (const Flag &flag : kFlags)
    names.push_back(flag.name);
  return names;
}

bool isTrainingFlag(const std::string &name) {
  for (const Flag &flag : kFlags)
    if (name == flag.name)
      return flag.mode == Mode::Train;
  return false;
}

int run(const std::vector<std::string> &args, std::ostream &out,
        std::ostream &err, const MpiJoin &joinMpi) {
  auto fail = [&](absl::string_view message) {
    err << "omnirun: " << message << "\n";
    return 1;
  };
  Options options;
  if (std::any_of(args.begin(), args.end(), [](const std::string &a) {
        return a == "--config" || absl::StartsWith(a, "--config=");
      })) {
    std::string path;
    if (std::optional<std::string> error = configPath(args, path))
      return fail(*error);
    if (std::optional<std::string> error = applyConfig(path, args, options))
      return fail(*error);
  }
  if (std::optional<std::string> error = parse(args, options))
    return fail(*error);
  if (options.help) {
    out << usage();
    return 0;
  }
  if (options.file.empty())
    return fail("no step.bin given (see --help)");
  if (std::optional<std::string> error = checkExportFlags(options.exporting))
    return fail(*error);
  const bool exporting = !options.exporting.dir.empty();
  if (exporting &&
      (options.list || options.function || options.train || options.serve))
    return fail(absl::StrCat(
        "--export writes a checkpoint as a diffusers folder and cannot be "
        "combined with ",
        options.list       ? "--list"
        : options.function ? "--function"
        : options.serve    ? "--serve"
                           : options.trainingOption));
  if (!options.serve && !options.serveFlag.empty())
    return fail(
        absl::StrCat(options.serveFlag, " goes with --serve HOST:PORT"));
  if (options.serve) {
    if (std::optional<std::string> error = checkServeOptions(options))
      return fail(*error);
  } else if (!options.list && !options.function && !options.train &&
             options.sampling.given.empty() && !exporting)
    return fail("give --function=<name> to run a function, --steps=<n> to "
                "train, --export=<dir> to export a checkpoint, or --list to "
                "list them");
  if (options.function && options.train)
    return fail(absl::StrCat(options.trainingOption,
                             " is a training option and cannot be combined "
                             "with --function"));
  if (!options.function &&
      (!options.stateIn.empty() || !options.stateOut.empty()))
    return fail(
        absl::StrCat(options.stateIn.empty() ? "--state-out" : "--state-in",
                     " goes with --function (training keeps its state "
                     "in checkpoints: --out, --resume, --init)"));
  if (options.training.resume && options.training.resumeDir.empty() &&
      options.training.outDir.empty())
    return fail("--resume needs a folder: --resume DIR, --out DIR or "
                "--checkpoint-dir DIR");
  if (options.gpus) {
    if (options.ranksGiven)
      return fail("--gpus and --ranks exclude each other: --gpus N runs N "
                  "ranks, one per GPU (--ranks N runs cpu ranks)");
    if (options.deviceGiven && options.device != "cuda")
      return fail(absl::StrCat("--gpus runs on the cuda driver but --device ",
                               options.device, " was given; drop --device"));
    if (options.function && options.gpus > 1)
      return fail(absl::StrCat("--gpus ", options.gpus,
                               " trains on several GPUs, but --function runs "
                               "on one: use --gpus 1"));
    options.device = "cuda";
  }

  // Slow start-up phases are named on stderr (runtime/base/PhaseTimer.h).
  absl::StatusOr<std::optional<int64_t>> afterMs =
      progressAfterMsFromEnvironment();
  if (!afterMs.ok())
    return fail(afterMs.status().message());
  PhaseTimerOptions phaseOptions;
  phaseOptions.tool = "omnirun";
  phaseOptions.afterMs = afterMs->value_or(2000);
  PhaseTimer phases(std::move(phaseOptions));
  options.training.phases = &phases;
  PhaseTimer::Scope loading;
  loading.start(&phases, "loading " + options.file);
  absl::StatusOr<std::shared_ptr<const loader::Program>> program =
      loader::Program::loadFile(options.file);
  loading.stop();
  if (!program.ok())
    return fail(program.status().message());
  if (options.list) {
    list(**program, out);
    return 0;
  }
  if (exporting) {
    absl::Status exported =
        exportDiffusers(**program, options.file, options.exporting, out);
    return exported.ok() ? 0 : fail(exported.message());
  }
  if (std::optional<std::string> error =
          checkTarget(**program, options.file, options))
    return fail(*error);
  if (options.serve)
    return serveProgram(*program, options, out, err);
  // A GPU run makes its first device before it reads inputs or joins
  // other ranks, so that a machine without a GPU says so in one line
  // first; later ranks' devices come from the factory.
  std::unique_ptr<hal::Device> firstDevice;
  int firstOrdinal = 0;
  if (options.device == "cuda") {
    if (options.gpus) {
      absl::StatusOr<int> ordinal = firstGpu(options.gpus);
      if (!ordinal.ok())
        return fail(ordinal.status().message());
      firstOrdinal = *ordinal;
    }
    hal::DeviceOptions first;
    first.ordinal = firstOrdinal;
    absl::StatusOr<std::unique_ptr<hal::Device>> device =
        hal::builtinDrivers().createDevice("cuda", first);
    if (!device.ok())
      return fail(device.status().message());
    firstDevice = std::move(*device);
  }
  if (!options.function &&
      train::sample::Sampler::isSamplingProgram(**program)) {
    hal::DeviceOptions deviceOptions;
    deviceOptions.threads = options.threads;
    absl::StatusOr<std::unique_ptr<hal::Device>> device =
        firstDevice
            ? std::move(firstDevice)
            : hal::builtinDrivers().createDevice(options.device, deviceOptions);
    if (!device.ok())
      return fail(device.status().message());
    return runSample(*program, options.file, **device, options.sampling,
                     options.training, options.trainFlags, out, err);
  }
  if (!options.sampling.given.empty())
    return fail(absl::StrCat(
        options.sampling.given, " goes with a sampling program, but ",
        options.file, options.function ? " runs --function" : " has no @sample",
        " (omnigen --program=sample writes one, docs/sampling.md)"));
  if (options.train) {
    train::TrainOptions &training = options.training;
    loading.start(&phases, "hashing " + options.file);
    absl::StatusOr<std::string> hash =
        checkpoint::fingerprintFile(options.file);
    loading.stop();
    if (!hash.ok())
      return fail(hash.status().message());
    training.programHash = *hash;
    // Ctrl-C / SIGTERM: finish the iteration, save, exit 128 + signal.
    train::InterruptHandler interrupts;
    training.stopRequested = [] { return train::InterruptHandler::pending(); };
    absl::StatusOr<std::optional<train::TestFault>> fault =
        train::testFaultFromEnvironment();
    if (!fault.ok())
      return fail(fault.status().message());
    const std::chrono::milliseconds timeout(
        options.collectiveTimeoutSeconds > 0
            ? std::max<int64_t>(
                  1, std::llround(options.collectiveTimeoutSeconds * 1000))
            : 0);
    // Under mpirun every process is one rank of the MPI world
    // (hal/mpi/MpiChannel.h); otherwise all --ranks are threads of this
    // process (train/driver/Ranks.h).
    std::unique_ptr<hal::ChannelProvider> provider, mpiWorld;
    std::vector<int> localRanks;
    train::RanksOptions ranks;
    if (options.gpus) {
      absl::StatusOr<GpuWorld> world =
          gpuWorld(**program, options.gpus, timeout, joinMpi);
      if (!world.ok())
        return fail(world.status().message());
      provider = std::move(world->provider);
      mpiWorld = std::move(world->mpi);
      localRanks = std::move(world->localRanks);
      ranks.how = std::move(world->how);
      ranks.createDevice =
          [&firstDevice, firstOrdinal](
              int, int local) -> absl::StatusOr<std::unique_ptr<hal::Device>> {
        if (local == 0 && firstDevice)
          return std::move(firstDevice);
        hal::DeviceOptions device;
        device.ordinal = firstOrdinal + local;
        return hal::builtinDrivers().createDevice("cuda", device);
      };
    } else if (hal::mpi::launchedByMpi()) {
      if (options.ranksGiven)
        return fail("--ranks and mpirun together: under mpirun every process "
                    "is one rank (mpirun -np N starts N); drop --ranks");
      if (!joinMpi)
        return fail("this omnirun was started by mpirun but built without "
                    "MPI (install libopenmpi-dev and rebuild, or use --ranks "
                    "N)");
      absl::StatusOr<MpiWorld> world = joinMpi(timeout);
      if (!world.ok())
        return fail(world.status().message());
      const int size = world->provider->size();
      if (absl::Status s = train::checkWorld(**program, size,
                                             absl::StrCat("mpirun -np ", size));
          !s.ok())
        return fail(s.message());
      if (world->broadcast) {
        absl::StatusOr<std::vector<train::InterruptHandler::Peer>> peers =
            peersOnThisHost(world->rank, size, world->broadcast);
        if (!peers.ok())
          return fail(peers.status().message());
        train::InterruptHandler::watchPeers(world->rank, *peers);
      }
      localRanks.push_back(world->rank);
      provider = std::move(world->provider);
    } else {
      provider = std::make_unique<hal::InProcessChannelProvider>(options.ranks,
                                                                 timeout);
      for (int r = 0; r < options.ranks; ++r)
        localRanks.push_back(r);
    }
    ranks.driver = options.device;
    ranks.threads = options.threads;
    ranks.fault = *fault;
    absl::Status trained =
        train::runRanks(*program, *provider, localRanks, ranks, training, out);
    if (trained.ok())
      return 0;
    fail(trained.message());
    int signal = train::InterruptHandler::pending();
    return absl::IsCancelled(trained) && signal ? 128 + signal : 1;
  }
  std::optional<uint32_t> function =
      (*program)->findFunction(*options.function);
  if (!function) {
    std::vector<std::string> names;
    for (uint32_t f = 0; f < (*program)->numFunctions(); ++f)
      names.push_back((*program)->step().functions()->Get(f)->name()->str());
    return fail(
        absl::StrCat(options.file, " has no function '", *options.function,
                     "' (functions: ", absl::StrJoin(names, ", "), ")"));
  }

  std::vector<HostTensor> inputs;
  for (size_t i = 0; i < options.inputs.size(); ++i) {
    absl::StatusOr<HostTensor> input = parseTensorArgument(options.inputs[i]);
    if (!input.ok())
      return fail(absl::StrCat("--input #", i, ": ", input.status().message()));
    inputs.push_back(std::move(*input));
  }
  const step::Function *fn = (*program)->step().functions()->Get(*function);
  size_t numOutputs = fn->outputs() ? fn->outputs()->size() : 0;
  if (!options.outputs.empty() && options.outputs.size() != numOutputs)
    return fail(absl::StrCat("@", *options.function, " returns ", numOutputs,
                             " results but ", options.outputs.size(),
                             " --output were given"));
  for (size_t i = 0; i < options.outputs.size(); ++i) {
    const std::string &target = options.outputs[i];
    if (target != "-" && !(target.size() > 1 && target[0] == '@'))
      return fail(absl::StrCat(
          "--output #", i, " must be @file.npy or -, found '", target, "'"));
  }

  hal::DeviceOptions deviceOptions;
  deviceOptions.threads = options.threads;
  absl::StatusOr<std::unique_ptr<hal::Device>> device =
      firstDevice
          ? std::move(firstDevice)
          : hal::builtinDrivers().createDevice(options.device, deviceOptions);
  if (!device.ok())
    return fail(device.status().message());
  executor::ExecutorOptions executorOptions;
  executorOptions.graphs = options.training.graphs;
  rewards::registerRewards(executorOptions.hostFunctions);
  loading.start(&phases, "loading the kernels");
  absl::StatusOr<std::unique_ptr<executor::Executor>> executor =
      executor::Executor::create(*program, **device,
                                 std::move(executorOptions));
  loading.stop();
  if (!executor.ok())
    return fail(executor.status().message());
  if (!options.stateIn.empty()) {
    absl::StatusOr<checkpoint::TypedSafetensorsContents> state =
        checkpoint::readSafetensorsTyped(options.stateIn);
    if (!state.ok())
      return fail(state.status().message());
    for (const checkpoint::NamedTypedTensor &t : state->tensors)
      if (absl::Status set = (*executor)->setState(t.name, t.tensor); !set.ok())
        return fail(
            absl::StrCat("--state-in ", options.stateIn, ": ", set.message()));
  }
  absl::StatusOr<std::vector<TypedTensor>> typed =
      (*executor)->run(*function, toTyped(inputs));
  if (!typed.ok())
    return fail(typed.status().message());
  std::optional<std::vector<HostTensor>> results = toHost(*typed);
  if (!options.stateOut.empty()) {
    std::vector<checkpoint::NamedTypedTensor> state;
    for (const std::string &name : (*executor)->stateNames()) {
      absl::StatusOr<TypedTensor> t = (*executor)->getState(name);
      if (!t.ok())
        return fail(t.status().message());
      state.push_back({name, std::move(*t)});
    }
    if (absl::Status written =
            checkpoint::writeSafetensorsTyped(options.stateOut, state);
        !written.ok())
      return fail(written.message());
  }

  for (size_t i = 0; i < results->size(); ++i) {
    const HostTensor &result = (*results)[i];
    std::string target = options.outputs.empty() ? "-" : options.outputs[i];
    if (target == "-") {
      int digits = result.dtype() == DType::F64 ? 17 : 9;
      out << "result[" << i << "]: " << formatTensor(result, digits) << "\n";
      continue;
    }
    absl::Status written = writeNpyFile(target.substr(1), result);
    if (!written.ok())
      return fail(written.message());
  }
  return 0;
}

} // namespace omni::omnirun
