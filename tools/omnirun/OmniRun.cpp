//===- OmniRun.cpp - The omnirun tool as a library --------------*- C++ -*-===//

#include "tools/omnirun/OmniRun.h"

#include "runtime/executor/Executor.h"
#include "runtime/train/checkpoint/AtomicFile.h"
#include "runtime/train/driver/Interrupt.h"
#include "runtime/train/driver/Trainer.h"
#include "runtime/hal/drivers/Drivers.h"
#include "runtime/hal/drivers/cpu/CpuDriver.h"
#include "runtime/io/Npy.h"
#include "runtime/io/TensorText.h"
#include "runtime/loader/Program.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include <algorithm>
#include <optional>
#include <sys/stat.h>

namespace omni::omnirun {
namespace {

constexpr const char *kUsage = R"(usage: omnirun <step.bin> [options]

Runs a function of a compiled omni program (step.bin). A step.bin
contains native code that omnirun loads and executes: run only step.bin
files you would run as programs.

  --list                 print the functions (with their input and output
                         types) and the state slots, then exit
  --function=<name>      the function to run
  --input=<tensor>       an argument, in order: @file.npy or an inline
                         literal such as 2x3xf32=1,2,3,4,5,6 or i64=7
  --output=<target>      where result i goes, in order: @file.npy, or - to
                         print it (the default when no --output is given)
  --threads=<n>          worker threads of the cpu device, at most 1024
                         (default: one per core)
  --device=<driver>      the hal driver (default: cpu)
  --help                 print this help

Training (the program follows the convention of runtime/train/driver/
Trainer.h: @init_state(seed) and @train_step(state..., seed, iteration,
[prompt_embeds], [pooled_prompt_embeds]), the state in omni.state slots;
any of these options trains):
  --steps=<n>            iterations to reach (default 1); 0 with --out
                         writes the initial state as step-0.safetensors
  --seed=<n>             the run's seed (default 0; a resumed run takes the
                         checkpoint's, and a different --seed is an error)
  --out=<dir>            the run's folder: step-<n>.safetensors checkpoints,
                         metrics.jsonl, samples/iter-<n>.png
  --save-every=<k>       also save a checkpoint every k iterations (default:
                         at the end only; Ctrl-C or SIGTERM saves too, then
                         exits with 130 or 143; a second signal exits at
                         once)
  --keep-last=<n>        keep only the n newest checkpoints (default: all)
  --resume[=<dir>]       continue from the latest checkpoint in <dir> (also
                         --resume <dir>; default: --out); --out defaults
                         to <dir>; no checkpoint there is an error. Cuts
                         metrics.jsonl back to the checkpoint's iteration
  --resume-if-present[=<dir>]
                         --resume when <dir> has a checkpoint, else start
                         from @init_state
  --allow-program-change resume a checkpoint that another step.bin wrote
                         (checkpoints record the program's fingerprint)
  --stats                per iteration, the bytes copied to and from the
                         device and the device memory in use (progress
                         line and metrics.jsonl)
  --sample-every=<k>     write the step's `images` every k iterations
                         (default: --save-every, or 10)
  --prompts=<file>       the prompt set: a safetensors file with
                         prompt_embeds [N, L, D] and pooled_prompt_embeds
                         [N, Dp] (default: 16 synthetic prompts)
  --init=[<prefix>=]<file>
                         after @init_state, set state <prefix>.X (and
                         ref.<prefix>.X) from each tensor X of the
                         safetensors file (prefix default: transformer;
                         f16/bf16 widen to f32); repeatable
  --init-skip=<name>     ignore tensor <name> of the --init files (a
                         buffer the program computes, e.g. SD3's
                         pos_embed.pos_embed; a trailing * matches a
                         prefix, e.g. encoder.*); repeatable
  --reward=<name>        run this reward wherever the program calls one
  --metrics=<file>       append the JSON metrics lines here instead
  --train                train with the defaults above
  --checkpoint-dir=<d>, --checkpoint-every=<k>: old names of --out and
                         --save-every
)";

struct Options {
  std::string file;
  bool list = false;
  std::optional<std::string> function;
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
  int threads = 0;
  std::string device = "cpu";
  bool help = false;
  /// Training mode: --train or any training option (the first one seen).
  bool train = false;
  std::string trainingOption;

  train::TrainOptions training;
};

/// Parses a non-negative integer flag value.
std::optional<std::string> parseCount(const std::string &name,
                                      const std::string &value, int64_t &out) {
  if (!absl::SimpleAtoi(value, &out) || out < 0)
    return absl::StrCat(name, " expects a non-negative integer, found '",
                        value, "'");
  return std::nullopt;
}

/// Parses an --init value: FILE or PREFIX=FILE (a PREFIX has no '/').
std::optional<std::string> parseInit(const std::string &value,
                                     train::InitFile &out) {
  size_t eq = value.find('=');
  if (eq != std::string::npos && value.substr(0, eq).find('/') ==
                                     std::string::npos) {
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

/// Parses `args`; returns an error line on failure.
std::optional<std::string> parse(const std::vector<std::string> &args,
                                 Options &options) {
  // Options that take a value accept both --name=value and --name value.
  const char *valued[] = {
      "--function",     "--input",          "--output",       "--threads",
      "--device",       "--steps",          "--seed",         "--out",
      "--checkpoint-dir", "--save-every",   "--checkpoint-every",
      "--metrics",      "--sample-every",   "--prompts",      "--init",
      "--init-skip",    "--reward",         "--keep-last"};
  const std::string training[] = {
      "--steps",        "--seed",         "--out",     "--checkpoint-dir",
      "--save-every",   "--checkpoint-every", "--metrics", "--sample-every",
      "--prompts",      "--init",         "--init-skip", "--reward",
      "--resume",       "--train",        "--keep-last",
      "--resume-if-present", "--allow-program-change", "--stats"};
  auto trainingOption = [&](const std::string &name) {
    if (std::find(std::begin(training), std::end(training), name) ==
        std::end(training))
      return;
    options.train = true;
    if (options.trainingOption.empty())
      options.trainingOption = name;
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &arg = args[i];
    if (arg == "--list") {
      options.list = true;
      continue;
    }
    if (arg == "--help" || arg == "-h") {
      options.help = true;
      continue;
    }
    if (arg == "--train" || arg == "--allow-program-change" ||
        arg == "--stats") {
      trainingOption(arg);
      if (arg == "--allow-program-change")
        options.training.allowProgramChange = true;
      if (arg == "--stats")
        options.training.stats = true;
      continue;
    }
    // --resume, --resume=DIR, or --resume DIR (DIR taken when the step.bin
    // came first or DIR is an existing folder); --resume-if-present alike.
    std::string resumeFlag;
    if (arg == "--resume" || absl::StartsWith(arg, "--resume="))
      resumeFlag = "--resume";
    else if (arg == "--resume-if-present" ||
             absl::StartsWith(arg, "--resume-if-present="))
      resumeFlag = "--resume-if-present";
    if (!resumeFlag.empty()) {
      trainingOption(resumeFlag);
      train::TrainOptions &t = options.training;
      (resumeFlag == "--resume" ? t.resume : t.resumeIfPresent) = true;
      if (t.resume && t.resumeIfPresent)
        return std::string("--resume and --resume-if-present exclude each "
                           "other, expected one of them");
      std::string dir;
      if (arg != resumeFlag) {
        dir = arg.substr(resumeFlag.size() + 1);
        if (dir.empty())
          return absl::StrCat(resumeFlag, "= needs a folder");
      } else if (i + 1 < args.size() && !absl::StartsWith(args[i + 1], "-") &&
                 (!options.file.empty() || isFolder(args[i + 1]))) {
        dir = args[++i];
      }
      if (!dir.empty())
        t.resumeDir = dir;
      continue;
    }
    if (!absl::StartsWith(arg, "-") || arg == "-") {
      if (!options.file.empty())
        return absl::StrCat("expected one step.bin but found '", options.file,
                            "' and '", arg, "'");
      options.file = arg;
      continue;
    }
    std::string name = arg, value;
    bool found = false;
    for (const char *option : valued) {
      if (arg == option) {
        if (i + 1 == args.size())
          return absl::StrCat(option, " needs a value");
        name = option;
        value = args[++i];
        found = true;
        break;
      }
      if (absl::StartsWith(arg, absl::StrCat(option, "="))) {
        name = option;
        value = arg.substr(std::string(option).size() + 1);
        found = true;
        break;
      }
    }
    if (!found)
      return absl::StrCat("unknown option '", arg, "' (see --help)");
    trainingOption(name);
    train::TrainOptions &t = options.training;
    if (name == "--function")
      options.function = value;
    else if (name == "--input")
      options.inputs.push_back(value);
    else if (name == "--output")
      options.outputs.push_back(value);
    else if (name == "--device")
      options.device = value;
    else if (name == "--out" || name == "--checkpoint-dir")
      t.outDir = value;
    else if (name == "--metrics")
      t.metricsPath = value;
    else if (name == "--prompts")
      t.promptsPath = value;
    else if (name == "--reward")
      t.reward = value;
    else if (name == "--init-skip")
      t.initSkip.push_back(value);
    else if (name == "--init") {
      train::InitFile init;
      if (std::optional<std::string> error = parseInit(value, init))
        return error;
      t.inits.push_back(init);
    } else if (name == "--seed") {
      int64_t seed = 0;
      if (std::optional<std::string> error = parseCount(name, value, seed))
        return error;
      t.seed = seed;
    } else if (name == "--steps" || name == "--save-every" ||
               name == "--checkpoint-every" || name == "--sample-every" ||
               name == "--keep-last") {
      int64_t &target = name == "--steps"          ? t.steps
                        : name == "--sample-every" ? t.sampleEvery
                        : name == "--keep-last"    ? t.keepLast
                                                   : t.saveEvery;
      if (std::optional<std::string> error = parseCount(name, value, target))
        return error;
    } else if (name == "--threads") {
      if (!absl::SimpleAtoi(value, &options.threads) || options.threads < 0 ||
          options.threads > hal::cpu::kMaxThreads)
        return absl::StrCat("--threads expects an integer from 0 to ",
                            hal::cpu::kMaxThreads, ", found '", value, "'");
    }
  }
  return std::nullopt;
}

void list(const loader::Program &program, std::ostream &out) {
  for (uint32_t f = 0; f < program.numFunctions(); ++f)
    out << "@" << program.step().functions()->Get(f)->name()->str()
        << program.functionSignature(f) << "\n";
  for (const loader::StateInfo &slot : program.state())
    out << "state '" << slot.name
        << "': " << loader::tensorTypeString(slot.dtype, slot.shape) << " ("
        << step::EnumNameRole(slot.role) << ")\n";
}

} // namespace

int run(const std::vector<std::string> &args, std::ostream &out,
        std::ostream &err) {
  auto fail = [&](absl::string_view message) {
    err << "omnirun: " << message << "\n";
    return 1;
  };
  Options options;
  if (std::optional<std::string> error = parse(args, options))
    return fail(*error);
  if (options.help) {
    out << kUsage;
    return 0;
  }
  if (options.file.empty())
    return fail("no step.bin given (see --help)");
  if (!options.list && !options.function && !options.train)
    return fail("give --function=<name> to run a function, --steps=<n> to "
                "train, or --list to list them");
  if (options.function && options.train)
    return fail(absl::StrCat(options.trainingOption,
                             " is a training option and cannot be combined "
                             "with --function"));
  if (options.training.resume && options.training.resumeDir.empty() &&
      options.training.outDir.empty())
    return fail("--resume needs a folder: --resume DIR, --out DIR or "
                "--checkpoint-dir DIR");

  absl::StatusOr<std::shared_ptr<const loader::Program>> program =
      loader::Program::loadFile(options.file);
  if (!program.ok())
    return fail(program.status().message());
  if (options.list) {
    list(**program, out);
    return 0;
  }
  if (options.train) {
    hal::DeviceOptions deviceOptions;
    deviceOptions.threads = options.threads;
    absl::StatusOr<std::unique_ptr<hal::Device>> device =
        hal::builtinDrivers().createDevice(options.device, deviceOptions);
    if (!device.ok())
      return fail(device.status().message());
    train::TrainOptions &training = options.training;
    absl::StatusOr<std::string> hash =
        checkpoint::fingerprintFile(options.file);
    if (!hash.ok())
      return fail(hash.status().message());
    training.programHash = *hash;
    // Ctrl-C / SIGTERM: finish the iteration, save, exit 128 + signal.
    train::InterruptHandler interrupts;
    training.stopRequested = [] { return train::InterruptHandler::pending(); };
    absl::Status trained = train::train(*program, **device, training, out);
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
      hal::builtinDrivers().createDevice(options.device, deviceOptions);
  if (!device.ok())
    return fail(device.status().message());
  absl::StatusOr<std::unique_ptr<executor::Executor>> executor =
      executor::Executor::create(*program, **device);
  if (!executor.ok())
    return fail(executor.status().message());
  absl::StatusOr<std::vector<TypedTensor>> typed =
      (*executor)->run(*function, toTyped(inputs));
  if (!typed.ok())
    return fail(typed.status().message());
  std::optional<std::vector<HostTensor>> results = toHost(*typed);

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
