//===- Sampler.cpp - images from a sampling program's @sample -------------===//
//
// See Sampler.h and docs/sampling.md.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/sample/Sampler.h"

#include "runtime/train/checkpoint/Checkpoint.h"
#include "runtime/train/checkpoint/Json.h"
#include "runtime/train/checkpoint/Safetensors.h"
#include "runtime/train/driver/DiffusersInit.h"
#include "runtime/train/driver/TrainerSteps.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <sys/stat.h>
#include <tuple>

namespace omni::train::sample {
namespace {

constexpr const char *kSample = "sample";
constexpr const char *kNoise = "sample_noise";
constexpr const char *kInit = "init_state";
constexpr const char *kSteps = "sample_steps";

bool isFolder(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

int64_t product(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// The first `n` rows of `t` (dimension 0).
TypedTensor firstRows(const TypedTensor &t, int64_t n) {
  std::vector<int64_t> shape = t.shape();
  if (shape.empty() || shape[0] == n)
    return t;
  const int64_t rowBytes = t.byteSize() / shape[0];
  shape[0] = n;
  return TypedTensor::fromBytes(
      t.dtype(), shape,
      t.bytes().subspan(0, static_cast<size_t>(rowBytes * n)));
}

} // namespace

bool Sampler::isSamplingProgram(const loader::Program &program) {
  return program.findFunction(kSample) && !program.findFunction("train_step");
}

absl::StatusOr<std::unique_ptr<Sampler>>
Sampler::create(std::shared_ptr<const loader::Program> program,
                hal::Device &device, const WeightSource &weights,
                std::ostream &log, executor::ExecutorOptions::Graphs graphs) {
  const loader::Program &p = *program;
  std::optional<uint32_t> f = p.findFunction(kSample);
  if (!f)
    return absl::InvalidArgumentError(
        absl::StrCat(p.name(), " has no function @sample, expected a sampling "
                               "program (omnigen --program=sample)"));
  for (const char *other : {kNoise, kInit})
    if (!p.findFunction(other))
      return absl::InvalidArgumentError(
          absl::StrCat(p.name(), " has @sample but no @", other,
                       ", expected a program of omnigen --program=sample"));
  std::unique_ptr<Sampler> s(new Sampler());
  s->program_ = program;
  const step::Function *fn = p.step().functions()->Get(*f);
  const uint32_t numIn = fn->inputs() ? fn->inputs()->size() : 0;
  const uint32_t numOut = fn->outputs() ? fn->outputs()->size() : 0;
  auto in = [&](uint32_t i) -> const loader::TensorInfo & {
    return p.tensor(fn->inputs()->Get(i));
  };
  auto out = [&](uint32_t i) -> const loader::TensorInfo & {
    return p.tensor(fn->outputs()->Get(i));
  };
  auto wrong = [&](const std::string &what) {
    return absl::InvalidArgumentError(
        absl::StrCat(p.name(), ": @sample", p.functionSignature(*f), ": ", what,
                     " (expected the signature of omnigen --program=sample, "
                     "docs/sampling.md)"));
  };
  if (numIn < 1 || in(0).name != "seeds" || in(0).dtype != DType::I64 ||
      in(0).shape.size() != 1 || in(0).shape[0] < 1)
    return wrong("input 0 is not seeds i64 [B]");
  s->batch_ = in(0).shape[0];
  for (uint32_t i = 1; i < numIn; ++i) {
    const loader::TensorInfo &t = in(i);
    s->inputs_.push_back(t.name);
    bool batched =
        !t.shape.empty() && t.shape[0] == s->batch_ && t.dtype == DType::F32;
    if (t.name == detail::kEmbeds && batched && t.shape.size() == 3)
      s->promptShape_.assign(t.shape.begin() + 1, t.shape.end());
    else if (t.name == detail::kPooled && batched && t.shape.size() == 2)
      s->pooledShape_.assign(t.shape.begin() + 1, t.shape.end());
    else if (t.name == detail::kNegativeEmbeds && t.dtype == DType::F32 &&
             t.shape.size() == 3 && t.shape[0] == 1)
      s->negativeEmbeds_.assign(static_cast<size_t>(t.shape[1] * t.shape[2]),
                                0.0f);
    else if (t.name == detail::kNegativePooled && t.dtype == DType::F32 &&
             t.shape.size() == 2 && t.shape[0] == 1)
      s->negativePooled_.assign(static_cast<size_t>(t.shape[1]), 0.0f);
    else if (t.name == detail::kEmbedsMask && batched && t.shape.size() == 2)
      s->takesMask_ = true;
    else if (t.name == detail::kNegativeEmbedsMask && t.dtype == DType::F32 &&
             t.shape.size() == 2 && t.shape[0] == 1)
      s->negativeMask_.assign(static_cast<size_t>(t.shape[1]), 1.0f);
    else if (t.name == "guidance_scale" && p.findHyperParam(t.name))
      s->guidance_ = p.findHyperParam(t.name)->defaultValue;
    else
      return wrong(absl::StrCat("unexpected input ", i, " '", t.name, "' ",
                                t.typeString()));
  }
  if (numOut < 1 || numOut > 2 || out(0).name != "images" ||
      out(0).shape.size() != 4 || out(0).shape[0] != s->batch_ ||
      out(0).shape[1] != 3)
    return wrong("result 0 is not images [B, 3, H, W]");
  s->imageShape_.assign(out(0).shape.begin() + 1, out(0).shape.end());
  if (numOut == 2) {
    if (out(1).name != "log_probs" || out(1).shape.size() != 2 ||
        out(1).shape[0] != s->batch_)
      return wrong("result 1 is not log_probs [B, N]");
    s->logProbSteps_ = out(1).shape[1];
  }
  executor::ExecutorOptions options;
  options.graphs = graphs;
  absl::StatusOr<std::unique_ptr<executor::Executor>> executor =
      executor::Executor::create(program, device, std::move(options));
  if (!executor.ok())
    return executor.status();
  s->executor_ = std::move(*executor);
  s->steps_ = s->logProbSteps_;
  if (p.findFunction(kSteps)) {
    absl::StatusOr<std::vector<TypedTensor>> steps =
        s->executor_->run(kSteps, {});
    if (!steps.ok())
      return steps.status();
    if (steps->size() != 1 || (*steps)[0].dtype() != DType::I64 ||
        (*steps)[0].numElements() != 1 || (*steps)[0].doubleAt(0) < 1 ||
        (s->logProbSteps_ && (*steps)[0].doubleAt(0) != s->logProbSteps_))
      return absl::InvalidArgumentError(
          absl::StrCat(p.name(), ": @", kSteps,
                       " does not return one i64 step count >= 1 (matching the "
                       "log-probs' columns), expected the program of omnigen "
                       "--program=sample"));
    s->steps_ = static_cast<int64_t>((*steps)[0].doubleAt(0));
  }
  if (absl::Status loaded = s->loadWeights(weights, log); !loaded.ok())
    return loaded;
  return s;
}

absl::Status Sampler::loadWeights(const WeightSource &weights,
                                  std::ostream &log) {
  if (!weights.checkpoint.empty()) {
    if (!weights.inits.empty() || !weights.diffusers.empty())
      return absl::InvalidArgumentError(absl::StrCat(
          "--checkpoint and ",
          weights.inits.empty() ? "--init-diffusers" : "--init",
          " exclude each other: a checkpoint holds every weight the sampling "
          "program takes"));
    return loadCheckpoint(weights, log);
  }
  if (weights.ema)
    return absl::InvalidArgumentError(
        "--ema goes with --checkpoint (it takes the checkpoint's EMA weights)");
  absl::StatusOr<std::vector<TypedTensor>> init =
      executor_->run(kInit, {TypedTensor::scalarI64(weights.initSeed)});
  if (!init.ok())
    return init.status();
  if (weights.inits.empty() && weights.diffusers.empty()) {
    log << "weights: @init_state(" << weights.initSeed
        << ") (random; give --checkpoint or --init for trained ones)\n";
    return absl::OkStatus();
  }
  // The --init files go through the training driver's code, so that they
  // mean here what they mean for omnirun --init.
  detail::Signature sig;
  for (const loader::StateInfo &slot : program_->state())
    sig.state.push_back(&slot);
  absl::StatusOr<std::unique_ptr<ShardedState>> sharded = ShardedState::create(
      program_->meshes(), program_->state(), executor_->device(), nullptr);
  if (!sharded.ok())
    return sharded.status();
  if (!weights.diffusers.empty())
    if (absl::Status s = loadDiffusersFolder(
            weights.diffusers, defaultDiffusersParts(), sig.state,
            [&](const loader::StateInfo &slot, const TypedTensor &value) {
              return executor_->setState(slot.name, value);
            },
            log, weights.initSkip);
        !s.ok())
      return s;
  for (const InitFile &file : weights.inits)
    if (absl::Status s = detail::applyInit(*executor_, **sharded, file, sig,
                                           kSample, weights.initSkip, log);
        !s.ok())
      return s;
  return absl::OkStatus();
}

absl::Status Sampler::loadCheckpoint(const WeightSource &weights,
                                     std::ostream &log) {
  const std::string &from = weights.checkpoint;
  std::vector<checkpoint::NamedTypedTensor> tensors;
  std::string where = from;
  if (isFolder(from)) {
    absl::StatusOr<checkpoint::TypedCheckpoint> ckpt =
        checkpoint::loadLatestCheckpointTyped(from);
    if (!ckpt.ok())
      return absl::Status(
          ckpt.status().code(),
          absl::StrCat("--checkpoint ", from, ": ", ckpt.status().message()));
    where = checkpoint::checkpointPath(from, ckpt->step);
    tensors = std::move(ckpt->tensors);
  } else {
    absl::StatusOr<checkpoint::TypedSafetensorsContents> file =
        checkpoint::readSafetensorsTyped(from);
    if (!file.ok())
      return absl::Status(
          file.status().code(),
          absl::StrCat("--checkpoint ", from, ": ", file.status().message()));
    tensors = std::move(file->tensors);
  }
  std::map<std::string, const TypedTensor *> byName;
  for (const checkpoint::NamedTypedTensor &t : tensors)
    byName[t.name] = &t.tensor;
  // Every slot is checked before the first is written; the checkpoint's
  // other tensors (adamw.*, ref.*, ema.* without --ema) are not the
  // sampling program's.
  std::vector<std::pair<const loader::StateInfo *, const TypedTensor *>> writes;
  int64_t averaged = 0;
  for (const loader::StateInfo &slot : program_->state()) {
    std::string name = slot.name;
    auto it = byName.end();
    if (weights.ema)
      it = byName.find("ema." + slot.name);
    if (it != byName.end()) {
      name = it->first;
      ++averaged;
    } else {
      it = byName.find(slot.name);
    }
    if (it == byName.end())
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": no tensor ", checkpoint::json::quoted(slot.name),
          ", expected every weight of the sampling program (a checkpoint of "
          "the training program of the same model)"));
    const TypedTensor &t = *it->second;
    if (t.dtype() != slot.dtype || t.shape() != slot.shape)
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": tensor ", checkpoint::json::quoted(name), " is ",
          t.typeString(), ", expected ",
          loader::tensorTypeString(slot.dtype, slot.shape), " as state '",
          slot.name, "' is (another model config?)"));
    writes.push_back({&slot, &t});
  }
  if (weights.ema && averaged == 0)
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": --ema but the checkpoint has no tensor 'ema.*' of the "
               "sampling program's weights, expected a run trained with "
               "omnigen --opt=ema_decay=..."));
  for (const auto &[slot, value] : writes)
    if (absl::Status s = executor_->setState(slot->name, *value); !s.ok())
      return s;
  log << "weights: " << writes.size() << " tensors of " << where;
  if (weights.ema)
    log << " (" << averaged << " of them its EMA)";
  log << "\n";
  return absl::OkStatus();
}

absl::StatusOr<TypedTensor>
Sampler::seedsTensor(absl::Span<const int64_t> seeds, const char *what) const {
  const int64_t n = static_cast<int64_t>(seeds.size());
  if (n < 1 || n > batch_)
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", n, " seeds, expected 1 to ", batch_,
                     " (the program's batch, omnigen --opt=sample_batch)"));
  // Padding repeats the first seed: its images are dropped, and no sample
  // depends on another (Sampler.h).
  TypedTensor t(DType::I64, {batch_});
  absl::Span<int64_t> out = t.span<int64_t>();
  for (int64_t b = 0; b < batch_; ++b)
    out[b] = seeds[b < n ? b : 0];
  return t;
}

absl::StatusOr<SampleOutput> Sampler::sample(absl::Span<const int64_t> seeds,
                                             absl::Span<const float> prompts,
                                             absl::Span<const float> pooled,
                                             std::optional<double> guidance,
                                             absl::Span<const float> masks) {
  absl::StatusOr<TypedTensor> seedTensor = seedsTensor(seeds, "sample");
  if (!seedTensor.ok())
    return seedTensor.status();
  const int64_t n = static_cast<int64_t>(seeds.size());
  std::vector<TypedTensor> inputs{std::move(*seedTensor)};
  auto rows = [&](absl::Span<const float> given,
                  const std::vector<int64_t> &shape,
                  const char *name) -> absl::StatusOr<TypedTensor> {
    const int64_t row = product(shape);
    if (static_cast<int64_t>(given.size()) != n * row)
      return absl::InvalidArgumentError(absl::StrCat(
          "sample: ", name, " has ", given.size(), " floats, expected ", n,
          " x ", row, " for ", n, " samples"));
    std::vector<int64_t> full = shape;
    full.insert(full.begin(), batch_);
    TypedTensor t(DType::F32, full);
    absl::Span<float> out = t.span<float>();
    for (int64_t b = 0; b < batch_; ++b)
      std::memcpy(out.data() + b * row, given.data() + (b < n ? b : 0) * row,
                  static_cast<size_t>(row) * sizeof(float));
    return t;
  };
  if (!guidance_ && guidance && *guidance != 1)
    return absl::InvalidArgumentError(absl::StrCat(
        "sample: guidance_scale ", *guidance,
        " asked for, but the program has no CFG (compiled with "
        "guidance_scale = 1; omnigen --opt=guidance_scale=... makes one)"));
  for (const std::string &name : inputs_) {
    absl::StatusOr<TypedTensor> t;
    if (name == detail::kEmbeds) {
      t = rows(prompts, promptShape_, detail::kEmbeds);
    } else if (name == detail::kPooled) {
      t = rows(pooled, pooledShape_, detail::kPooled);
    } else if (name == detail::kEmbedsMask) {
      const int64_t l = promptShape_.empty() ? 0 : promptShape_[0];
      std::vector<float> ones;
      if (masks.empty()) {
        ones.assign(static_cast<size_t>(n * l), 1.0f);
        masks = ones;
      }
      for (size_t e = 0; e < masks.size(); ++e)
        if (masks[e] != 0.f && masks[e] != 1.f)
          return absl::InvalidArgumentError(absl::StrCat(
              "sample: ", detail::kEmbedsMask, " element ", e, " is ", masks[e],
              ", expected 0 (padding) or 1 (a token)"));
      t = rows(masks, {l}, detail::kEmbedsMask);
    } else if (name == detail::kNegativeEmbedsMask) {
      TypedTensor m(DType::F32,
                    {1, static_cast<int64_t>(negativeMask_.size())});
      std::memcpy(m.span<float>().data(), negativeMask_.data(),
                  negativeMask_.size() * sizeof(float));
      t = std::move(m);
    } else if (name == detail::kNegativeEmbeds ||
               name == detail::kNegativePooled) {
      const bool embeds = name == detail::kNegativeEmbeds;
      const std::vector<float> &row =
          embeds ? negativeEmbeds_ : negativePooled_;
      std::vector<int64_t> shape{1};
      const std::vector<int64_t> &rest = embeds ? promptShape_ : pooledShape_;
      shape.insert(shape.end(), rest.begin(), rest.end());
      TypedTensor n(DType::F32, shape);
      std::memcpy(n.span<float>().data(), row.data(),
                  row.size() * sizeof(float));
      t = std::move(n);
    } else {
      double g = guidance.value_or(*guidance_);
      const loader::HyperParamInfo *hp = program_->findHyperParam(name);
      if (hp && !hp->contains(g))
        return absl::InvalidArgumentError(absl::StrCat(
            "sample: guidance_scale ", g, " is outside ", hp->range));
      TypedTensor s(DType::F64, {});
      s.span<double>()[0] = g;
      t = std::move(s);
    }
    if (!t.ok())
      return t.status();
    inputs.push_back(std::move(*t));
  }
  if (promptShape_.empty() && !prompts.empty())
    return absl::InvalidArgumentError(
        "sample: prompt embeddings given, but the program takes none");
  absl::StatusOr<std::vector<TypedTensor>> results =
      executor_->run(kSample, inputs);
  if (!results.ok())
    return results.status();
  SampleOutput out;
  out.images = firstRows((*results)[0], n);
  if (results->size() == 2) {
    // log_probs: [B, N].
    out.logProbs = firstRows((*results)[1], n);
  }
  return out;
}

absl::Status Sampler::setNegatives(absl::Span<const float> prompt,
                                   absl::Span<const float> pooled) {
  if (!takesNegatives())
    return absl::InvalidArgumentError(
        "sample: negative prompt embeddings given, but @sample takes none "
        "(it has no CFG: omnigen --opt=guidance_scale=...)");
  for (auto [given, row, name] :
       {std::tuple{prompt, &negativeEmbeds_, detail::kNegativeEmbeds},
        {pooled, &negativePooled_, detail::kNegativePooled}})
    if (given.size() != row->size())
      return absl::InvalidArgumentError(
          absl::StrCat("sample: ", name, " has ", given.size(),
                       " floats, expected ", row->size()));
  negativeEmbeds_.assign(prompt.begin(), prompt.end());
  negativePooled_.assign(pooled.begin(), pooled.end());
  return absl::OkStatus();
}

absl::Status Sampler::setNegativeMask(absl::Span<const float> mask) {
  if (!takesNegativeMask())
    return absl::InvalidArgumentError(
        "sample: a negative prompt mask given, but @sample takes none");
  if (mask.size() != negativeMask_.size())
    return absl::InvalidArgumentError(
        absl::StrCat("sample: ", detail::kNegativeEmbedsMask, " has ",
                     mask.size(), " floats, expected ", negativeMask_.size()));
  negativeMask_.assign(mask.begin(), mask.end());
  return absl::OkStatus();
}

absl::StatusOr<TypedTensor>
Sampler::initialNoise(absl::Span<const int64_t> seeds) {
  absl::StatusOr<TypedTensor> seedTensor = seedsTensor(seeds, "sample_noise");
  if (!seedTensor.ok())
    return seedTensor.status();
  absl::StatusOr<std::vector<TypedTensor>> results =
      executor_->run(kNoise, {*seedTensor});
  if (!results.ok())
    return results.status();
  return firstRows((*results)[0], static_cast<int64_t>(seeds.size()));
}

} // namespace omni::train::sample
