//===- InitialState.cpp - the state slots at the start of a run -----------===//
//
// Step 2 of train(). Resuming: the latest checkpoint's tensors go into the
// state slots by name (every slot must be there with its dtype and shape;
// seed, iteration and program hash are checked). Otherwise the init
// function runs on the seed (writing the slots on the device) and each
// --init file then overwrites the slots under its prefix (and the KL
// reference copies `ref.<prefix>.*` and the EMA `ema.<prefix>.*`, which
// start at the initial weights), with setState (--init-diffusers first:
// DiffusersInit.h); --init-from-ema takes a
// checkpoint's `ema.<prefix>.*` instead. Either way the state is
// on the host only while it is being loaded. Both hold whole tensors: a
// sharded slot (ShardedState.h) is checked against its global shape and
// gets this rank's block.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/driver/TrainerSteps.h"

#include "runtime/train/checkpoint/Checkpoint.h"
#include "runtime/train/checkpoint/Json.h"
#include "runtime/train/driver/DiffusersInit.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sys/stat.h>

namespace omni::train::detail {
namespace {

bool isLoraName(const std::string &name) {
  return absl::StrContains(name, ".lora_A.") ||
         absl::StrContains(name, ".lora_B.");
}

/// The type a checkpoint or --init file holds for `slot` (its global type
/// when sharded).
std::string slotType(const loader::StateInfo &slot) {
  return loader::tensorTypeString(slot.dtype, checkpointShape(slot));
}

/// Sets `slot` from the whole tensor `value`: this rank's block of it.
absl::Status setWhole(executor::Executor &executor, const ShardedState &sharded,
                      const loader::StateInfo &slot, const TypedTensor &value) {
  if (!slot.sharding)
    return executor.setState(slot.name, value);
  absl::StatusOr<TypedTensor> block = sharded.scatter(slot, value);
  if (!block.ok())
    return block.status();
  return executor.setState(slot.name, *block);
}

/// A half-precision tensor (diffusers ships fp16/bf16) widened exactly to
/// f32.
TypedTensor widenToF32(const TypedTensor &t) {
  TypedTensor wide(DType::F32, t.shape());
  absl::Span<float> out = wide.span<float>();
  for (int64_t i = 0; i < t.numElements(); ++i)
    out[i] = static_cast<float>(t.doubleAt(i));
  return wide;
}

/// One tensor an --init file gives: `name` (X) sets state `prefix.X`;
/// `fileName` is what the file calls it (`ema.prefix.X` from the EMA).
struct InitTensor {
  std::string fileName, name;
  const TypedTensor *tensor;
};

/// The tensors of `file` that `init` applies, by the name X they set
/// `prefix.X` from: every tensor; with fromEma a checkpoint's
/// `ema.<prefix>.X`, and its `<prefix>.X` where there is no EMA of X (LoRA's
/// frozen base), and no other. `averaged`: how many come from the EMA.
absl::StatusOr<std::vector<InitTensor>>
initTensors(const InitFile &init,
            const checkpoint::TypedSafetensorsContents &file,
            int64_t &averaged) {
  std::vector<InitTensor> out;
  averaged = 0;
  if (!init.fromEma) {
    for (const checkpoint::NamedTypedTensor &t : file.tensors)
      out.push_back({t.name, t.name, &t.tensor});
    return out;
  }
  const std::string prefix = init.prefix + ".", ema = "ema." + prefix;
  std::set<std::string> fromEma;
  for (const checkpoint::NamedTypedTensor &t : file.tensors)
    if (absl::StartsWith(t.name, ema)) {
      out.push_back({t.name, t.name.substr(ema.size()), &t.tensor});
      fromEma.insert(out.back().name);
    }
  averaged = static_cast<int64_t>(out.size());
  if (out.empty())
    return absl::InvalidArgumentError(absl::StrCat(
        "--init-from-ema ", init.prefix, "=", init.path, ": no tensor '", ema,
        "*' in the file, expected a checkpoint of a program with an EMA of "
        "its weights (omnigen --opt=ema_decay=...)"));
  for (const checkpoint::NamedTypedTensor &t : file.tensors)
    if (absl::StartsWith(t.name, prefix) &&
        !fromEma.count(t.name.substr(prefix.size())))
      out.push_back({t.name, t.name.substr(prefix.size()), &t.tensor});
  return out;
}

} // namespace

/// Applies one --init file to the state slots (TrainerSteps.h).
absl::Status applyInit(executor::Executor &executor,
                       const ShardedState &sharded, const InitFile &init,
                       const Signature &sig, const std::string &stepName,
                       const std::vector<std::string> &skip,
                       std::ostream &log) {
  const std::string prefix = init.prefix + ".";
  const char *flag = init.fromEma ? "--init-from-ema" : "--init";
  std::vector<std::string> names;
  bool anyUnderPrefix = false;
  for (const loader::StateInfo *s : sig.state) {
    names.push_back(s->name);
    anyUnderPrefix |= absl::StartsWith(s->name, prefix);
  }
  if (!anyUnderPrefix)
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " ", init.prefix, "=", init.path, ": @", stepName,
        " has no state named '", prefix, "*' (state: ",
        absl::StrJoin(names.begin(),
                      names.begin() + std::min<size_t>(names.size(), 6), ", "),
        names.size() > 6 ? ", ..." : "", ")"));
  absl::StatusOr<checkpoint::TypedSafetensorsContents> file =
      checkpoint::readSafetensorsTyped(init.path);
  if (!file.ok())
    return file.status();
  int64_t averaged = 0;
  absl::StatusOr<std::vector<InitTensor>> tensors =
      initTensors(init, *file, averaged);
  if (!tensors.ok())
    return tensors.status();
  // Everything is checked before the first slot is written.
  std::vector<std::pair<const loader::StateInfo *, const TypedTensor *>> writes;
  std::vector<TypedTensor> widened;
  widened.reserve(tensors->size());
  std::set<std::string> given;
  int64_t refs = 0, emas = 0, skipped = 0;
  for (const InitTensor &t : *tensors) {
    if (std::any_of(skip.begin(), skip.end(), [&](const std::string &p) {
          return p == t.name ||
                 (!p.empty() && p.back() == '*' &&
                  absl::StartsWith(t.name, p.substr(0, p.size() - 1)));
        })) {
      ++skipped;
      continue;
    }
    std::string target = prefix + t.name;
    const loader::StateInfo *want = sig.findState(target);
    if (!want)
      return absl::InvalidArgumentError(absl::StrCat(
          init.path, ": tensor ", checkpoint::json::quoted(t.fileName),
          " would set state '", target, "', which @", stepName,
          " does not have (--init-skip=", t.name,
          " ignores a buffer the program computes)"));
    const TypedTensor *value = t.tensor;
    if ((value->dtype() == DType::F16 || value->dtype() == DType::BF16) &&
        want->dtype == DType::F32 && value->shape() == checkpointShape(*want)) {
      widened.push_back(widenToF32(*value));
      value = &widened.back();
    }
    if (value->dtype() != want->dtype ||
        value->shape() != checkpointShape(*want))
      return absl::InvalidArgumentError(absl::StrCat(
          init.path, ": tensor '", t.fileName, "' is ", t.tensor->typeString(),
          ", expected ", slotType(*want), " as state '", target, "' is"));
    // Non-finite weights would make every update skip (or, in a decoder,
    // every reward meaningless) without a word.
    if (value->isFloat())
      for (int64_t i = 0; i < value->numElements(); ++i) {
        double x = value->doubleAt(i);
        if (std::isfinite(x))
          continue;
        return absl::InvalidArgumentError(
            absl::StrCat(init.path, ": tensor ",
                         checkpoint::json::quoted(t.fileName), " has ",
                         std::isnan(x) ? "NaN"
                         : x > 0       ? "+inf"
                                       : "-inf",
                         " at element ", i, " of ", value->numElements(),
                         ", expected finite initial weights"));
      }
    writes.push_back({want, value});
    given.insert(target);
    // The copies that start at the initial weights: the KL reference and
    // the EMA (docs/recipes.md section 2).
    for (auto [copy, count] : {std::pair{"ref.", &refs}, {"ema.", &emas}}) {
      const loader::StateInfo *r = sig.findState(copy + target);
      if (!r)
        continue;
      if (r->dtype != want->dtype ||
          checkpointShape(*r) != checkpointShape(*want))
        return absl::InvalidArgumentError(
            absl::StrCat(init.path, ": tensor '", t.fileName, "' is ",
                         t.tensor->typeString(), ", expected ", slotType(*r),
                         " as state '", copy, target, "' is"));
      writes.push_back({r, value});
      ++*count;
    }
  }
  for (const std::string &n : names)
    if (absl::StartsWith(n, prefix) && !isLoraName(n) && !given.count(n))
      return absl::InvalidArgumentError(absl::StrCat(
          init.path, ": no tensor '", n.substr(prefix.size()), "' for state '",
          n, "', expected every parameter under '", prefix,
          "' except LoRA adapters"));
  for (const auto &[slot, value] : writes)
    if (absl::Status s = setWhole(executor, sharded, *slot, *value); !s.ok())
      return s;
  log << "init: " << tensors->size() - skipped << " tensors of " << init.path;
  if (init.fromEma)
    log << " (" << averaged << " of them its EMA)";
  log << " into " << prefix << "*";
  if (refs)
    log << " (and " << refs << " into ref." << prefix << "*)";
  if (emas)
    log << " (and " << emas << " into ema." << prefix << "*)";
  if (skipped)
    log << ", " << skipped << " skipped";
  log << "\n";
  return absl::OkStatus();
}

namespace {

/// Resumes from `ckpt`: checks its metadata, sets every slot.
absl::StatusOr<Start>
restore(executor::Executor &executor, const ShardedState &sharded,
        const Signature &sig, const TrainOptions &options,
        const HyperParams &hparams, const std::string &resumeFrom,
        const checkpoint::TypedCheckpoint &ckpt, std::ostream &log) {
  Start start;
  std::string where = checkpoint::checkpointPath(resumeFrom, ckpt.step);
  auto recordedSeed = ckpt.metadata.find("seed");
  if (recordedSeed == ckpt.metadata.end())
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": the checkpoint records no seed (metadata 'seed'), "
               "expected the seed it was trained with"));
  int64_t trainedSeed = 0;
  if (!absl::SimpleAtoi(recordedSeed->second, &trainedSeed))
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": metadata 'seed' is '", recordedSeed->second,
                     "', expected an integer"));
  if (options.seed && *options.seed != trainedSeed)
    return absl::InvalidArgumentError(
        absl::StrCat(resumeFrom, ": the checkpoint was trained with seed ",
                     recordedSeed->second, " but --seed is ", *options.seed));
  start.seed = trainedSeed;
  auto iteration = ckpt.metadata.find("iteration");
  if (iteration != ckpt.metadata.end() &&
      iteration->second != std::to_string(ckpt.step))
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": metadata 'iteration' is '", iteration->second,
                     "', expected ", ckpt.step, " as the file's step"));
  auto hash = ckpt.metadata.find("program_hash");
  bool otherProgram = hash != ckpt.metadata.end() &&
                      !options.programHash.empty() &&
                      hash->second != options.programHash;
  if (otherProgram && !options.allowProgramChange)
    return absl::FailedPreconditionError(
        absl::StrCat(where, ": written by another step.bin (program_hash ",
                     hash->second, ", this one is ", options.programHash,
                     "); resume with the step.bin that wrote it, or pass "
                     "--allow-program-change"));
  std::optional<std::string> changed = hparams.firstDifference(ckpt.metadata);
  if (changed && !options.allowHparamChange)
    return absl::FailedPreconditionError(
        absl::StrCat(where, ": hyper-parameter ", *changed,
                     "; resume with the values it was trained with, or pass "
                     "--allow-hparam-change"));
  std::map<std::string, const TypedTensor *> byName;
  for (const checkpoint::NamedTypedTensor &t : ckpt.tensors)
    byName[t.name] = &t.tensor;
  // Every slot is checked before the first is written.
  for (const loader::StateInfo *slot : sig.state) {
    auto it = byName.find(slot->name);
    if (it == byName.end())
      return absl::InvalidArgumentError(
          absl::StrCat(resumeFrom, ": the checkpoint of step ", ckpt.step,
                       " has no tensor '", slot->name, "'"));
    const TypedTensor &t = *it->second;
    if (t.dtype() != slot->dtype || t.shape() != checkpointShape(*slot))
      return absl::InvalidArgumentError(absl::StrCat(
          resumeFrom, ": state '", slot->name, "' is ", t.typeString(),
          " but the step takes ", slotType(*slot)));
  }
  for (const loader::StateInfo *slot : sig.state)
    if (absl::Status s =
            setWhole(executor, sharded, *slot, *byName[slot->name]);
        !s.ok())
      return s;
  start.iteration = ckpt.step;
  start.resumed = true;
  log << "resumed from " << resumeFrom << " at iteration " << start.iteration;
  if (!options.seed)
    log << ", seed " << start.seed << " from the checkpoint";
  if (!options.inits.empty() || !options.initDiffusers.empty())
    log << " (--init not applied: the checkpoint has the weights)";
  log << "\n";
  if (otherProgram)
    log << "note: " << where << " was written by another step.bin ("
        << hash->second << "); continuing with this one ("
        << options.programHash << ", --allow-program-change)\n";
  if (changed)
    log << "note: " << where << ": hyper-parameter " << *changed
        << "; continuing with the new values (--allow-hparam-change)\n";
  return start;
}

} // namespace

absl::StatusOr<Start>
initialState(executor::Executor &executor, const ShardedState &sharded,
             const Signature &sig, const TrainOptions &options,
             const HyperParams &hparams, bool resume,
             const std::string &resumeFrom, std::ostream &log) {
  if (resume) {
    absl::StatusOr<checkpoint::TypedCheckpoint> ckpt =
        checkpoint::loadLatestCheckpointTyped(resumeFrom);
    if (ckpt.ok())
      return restore(executor, sharded, sig, options, hparams, resumeFrom,
                     *ckpt, log);
    if (!absl::IsNotFound(ckpt.status()))
      return ckpt.status();
    if (!options.resumeIfPresent) {
      struct stat st;
      bool folder = ::stat(resumeFrom.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
      return absl::NotFoundError(absl::StrCat(
          "--resume ", resumeFrom, ": ",
          folder ? "no checkpoint there (no 'latest' file)" : "no such folder",
          ", expected a run folder with a checkpoint (--resume-if-present "
          "starts from @",
          options.initFunction, " when there is none)"));
    }
    log << "no checkpoint in " << resumeFrom << "; starting from @"
        << options.initFunction << "\n";
  }
  Start start;
  start.seed = options.seed.value_or(0);
  // The init function writes the state slots; results it returns besides
  // are not the training state.
  absl::StatusOr<std::vector<TypedTensor>> init =
      executor.run(options.initFunction, {TypedTensor::scalarI64(start.seed)});
  if (!init.ok())
    return init.status();
  if (!options.initDiffusers.empty())
    if (absl::Status s = loadDiffusersFolder(
            options.initDiffusers, defaultDiffusersParts(), sig.state,
            [&](const loader::StateInfo &slot, const TypedTensor &value) {
              return setWhole(executor, sharded, slot, value);
            },
            log, options.initSkip);
        !s.ok())
      return s;
  for (const InitFile &file : options.inits)
    if (absl::Status s = applyInit(executor, sharded, file, sig,
                                   options.stepFunction, options.initSkip, log);
        !s.ok())
      return s;
  return start;
}

} // namespace omni::train::detail
