//===- Sample.cpp - omnirun's sampling mode -------------------------------===//
//
// See Sample.h and docs/sampling.md.
//
//===----------------------------------------------------------------------===//

#include "runtime/omnirun/Sample.h"

#include "runtime/io/Npy.h"
#include "runtime/train/checkpoint/AtomicFile.h"
#include "runtime/train/checkpoint/Checkpoint.h"
#include "runtime/train/checkpoint/Json.h"
#include "runtime/train/driver/HyperParams.h"
#include "runtime/train/image/Png.h"
#include "runtime/train/prompts/Prompts.h"
#include "runtime/train/sample/Sampler.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

#include <cstdio>

namespace omni::omnirun {
namespace {

/// One image to make: prompt `prompt` with seed `seed`.
struct Job {
  int64_t prompt = 0;
  int64_t seed = 0;
  std::string name; // p0003-s42
};

std::string jobName(int64_t prompt, int64_t seed) {
  char text[64];
  std::snprintf(text, sizeof text, "p%04lld-s%lld",
                static_cast<long long>(prompt), static_cast<long long>(seed));
  return text;
}

/// The caption of prompt `i` in the grid: its text when the prompts file
/// carries the texts (tools/encode-prompts, docs/prompts.md), else its
/// index.
std::string promptCaption(const train::PromptSet &prompts, int64_t i) {
  if (i < static_cast<int64_t>(prompts.texts().size()))
    return prompts.texts()[static_cast<size_t>(i)];
  return absl::StrCat("prompt ", i);
}

/// Row `b` of a [B, ...] tensor as a [1, ...] tensor.
TypedTensor row(const TypedTensor &t, int64_t b) {
  std::vector<int64_t> shape = t.shape();
  const int64_t bytes = t.byteSize() / shape[0];
  shape[0] = 1;
  return TypedTensor::fromBytes(
      t.dtype(), shape,
      t.bytes().subspan(static_cast<size_t>(b * bytes),
                        static_cast<size_t>(bytes)));
}

std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", v);
  return text;
}

} // namespace

bool isSamplingTrainFlag(const std::string &name) {
  for (const char *ok : {"--prompts", "--out", "--seed", "--set", "--init",
                         "--init-skip", "--init-diffusers"})
    if (name == ok)
      return true;
  return false;
}

train::sample::WeightSource
samplingWeights(const SampleFlags &flags, const train::TrainOptions &training) {
  train::sample::WeightSource weights;
  weights.checkpoint = flags.checkpoint;
  weights.ema = flags.ema;
  weights.inits = training.inits;
  weights.diffusers = training.initDiffusers;
  weights.initSkip = training.initSkip;
  return weights;
}

absl::StatusOr<std::optional<double>>
samplingGuidance(const loader::Program &program, const std::string &file,
                 const std::vector<std::string> &hparamSets) {
  // --set: only @sample's runtime hyper-parameters (guidance_scale).
  std::optional<double> guidance;
  for (const std::string &set : hparamSets) {
    size_t eq = set.find('=');
    std::string name = set.substr(0, eq);
    double value = 0;
    if (eq == std::string::npos ||
        !absl::SimpleAtod(set.substr(eq + 1), &value))
      return absl::InvalidArgumentError(
          absl::StrCat("--set expects <name>=<number>, found '", set, "'"));
    const loader::HyperParamInfo *hp = program.findHyperParam(name);
    if (name != "guidance_scale" || !hp)
      return absl::InvalidArgumentError(
          absl::StrCat("--set ", set, ": ", file,
                       " has no runtime hyper-parameter '", name, "'",
                       program.findHyperParam("guidance_scale")
                           ? " (it has guidance_scale)"
                           : " (without CFG it has none: omnigen "
                             "--opt=guidance_scale=... adds guidance_scale)"));
    if (!hp->contains(value))
      return absl::InvalidArgumentError(
          absl::StrCat("--set ", set, ": ", name, " must be in ", hp->range));
    guidance = value;
  }
  return guidance;
}

absl::StatusOr<std::optional<train::PromptSet>>
samplingPrompts(train::sample::Sampler &sampler, const std::string &promptsPath,
                const std::string &file, std::ostream &log) {
  train::PromptRequest request;
  request.function = "sample";
  request.perIteration = 1;
  if (!sampler.promptShape().empty()) {
    request.embeds = true;
    request.tokens = sampler.promptShape()[0];
    request.dim = sampler.promptShape()[1];
  }
  if (!sampler.pooledShape().empty()) {
    request.pooled = true;
    request.pooledDim = sampler.pooledShape()[0];
  }
  if (sampler.takesNegatives()) {
    request.negativeEmbeds = !sampler.promptShape().empty();
    request.negativePooled = !sampler.pooledShape().empty();
  }
  request.mask = sampler.takesMask();
  request.negativeMask = sampler.takesNegativeMask();
  const bool conditioned = request.embeds || request.pooled;
  if (!conditioned) {
    if (!promptsPath.empty())
      return absl::InvalidArgumentError(
          absl::StrCat("--prompts ", promptsPath, ": ", file,
                       " takes no prompt embeddings"));
    return std::optional<train::PromptSet>();
  }
  std::optional<train::PromptSet> prompts;
  if (!promptsPath.empty()) {
    absl::StatusOr<train::PromptSet> loaded =
        train::PromptSet::load(promptsPath, request);
    if (!loaded.ok())
      return loaded.status();
    prompts = std::move(*loaded);
  } else {
    prompts = train::PromptSet::synthetic(request);
  }
  // CFG's unconditional branch: the prompts file's negative prompt, else
  // zeros (as in training, docs/prompts.md).
  if (!sampler.takesNegatives())
    return prompts;
  if (!prompts->hasNegatives()) {
    log << "prompts: the unconditional (CFG) branch uses zeros ("
        << prompts->source()
        << " has no negative_prompt_embeds; tools/encode-prompts writes "
           "them)\n";
    return prompts;
  }
  std::vector<float> embeds, pooled;
  if (request.negativeEmbeds) {
    TypedTensor e = TypedTensor::fromHost(prompts->negativeEmbeds());
    embeds.assign(e.span<float>().begin(), e.span<float>().end());
  }
  if (request.negativePooled) {
    TypedTensor e = TypedTensor::fromHost(prompts->negativePooled());
    pooled.assign(e.span<float>().begin(), e.span<float>().end());
  }
  if (absl::Status set = sampler.setNegatives(embeds, pooled); !set.ok())
    return set;
  if (request.negativeMask) {
    TypedTensor m = TypedTensor::fromHost(prompts->negativeMask());
    std::vector<float> mask(m.span<float>().begin(), m.span<float>().end());
    if (absl::Status set = sampler.setNegativeMask(mask); !set.ok())
      return set;
  }
  log << "prompts: the unconditional (CFG) branch uses the negative prompt"
      << (prompts->negativeText() ? " '" + *prompts->negativeText() + "'"
                                  : std::string())
      << " from " << prompts->source() << "\n";
  return prompts;
}

int runSample(std::shared_ptr<const loader::Program> program,
              const std::string &file, hal::Device &device,
              const SampleFlags &flags, const train::TrainOptions &training,
              const std::vector<std::string> &trainFlags, std::ostream &out,
              std::ostream &err) {
  auto fail = [&](absl::string_view message) {
    err << "omnirun: " << message << "\n";
    return 1;
  };
  for (const std::string &flag : trainFlags)
    if (!isSamplingTrainFlag(flag))
      return fail(absl::StrCat(
          flag, " is a training option, but ", file,
          " is a sampling program (@sample, no @train_step); sampling takes "
          "--prompts, --out, --seed, --set guidance_scale=..., --init, "
          "--init-skip, --init-diffusers, --checkpoint, --ema, "
          "--images-per-prompt and "
          "--save-latents"));
  if (training.outDir.empty())
    return fail(absl::StrCat(file, " is a sampling program: give --out DIR "
                                   "for its images (docs/sampling.md)"));
  if (flags.imagesPerPrompt < 1)
    return fail(absl::StrCat("--images-per-prompt expects an integer >= 1, "
                             "found ",
                             flags.imagesPerPrompt));
  absl::StatusOr<std::optional<double>> guidance =
      samplingGuidance(*program, file, training.hparamSets);
  if (!guidance.ok())
    return fail(guidance.status().message());

  absl::StatusOr<std::unique_ptr<train::sample::Sampler>> made =
      train::sample::Sampler::create(program, device,
                                     samplingWeights(flags, training), out,
                                     training.graphs);
  if (!made.ok())
    return fail(made.status().message());
  train::sample::Sampler &sampler = **made;

  absl::StatusOr<std::optional<train::PromptSet>> loaded =
      samplingPrompts(sampler, training.promptsPath, file, out);
  if (!loaded.ok())
    return fail(loaded.status().message());
  std::optional<train::PromptSet> &prompts = *loaded;
  const int64_t numPrompts = prompts ? prompts->size() : 1;
  const int64_t firstSeed = training.seed.value_or(0);

  std::vector<Job> jobs;
  for (int64_t p = 0; p < numPrompts; ++p)
    for (int64_t k = 0; k < flags.imagesPerPrompt; ++k)
      jobs.push_back({p, firstSeed + k, jobName(p, firstSeed + k)});
  if (absl::Status made = checkpoint::makeDirectories(training.outDir);
      !made.ok())
    return fail(made.message());
  const std::string dir = training.outDir + "/";

  const std::vector<int64_t> &image = sampler.imageShape();
  TypedTensor all(DType::F32, {static_cast<int64_t>(jobs.size()), image[0],
                               image[1], image[2]});
  const int64_t imageFloats = image[0] * image[1] * image[2];
  std::string manifest;
  image::Captions captions;
  for (size_t first = 0; first < jobs.size();
       first += static_cast<size_t>(sampler.batch())) {
    size_t n =
        std::min(jobs.size() - first, static_cast<size_t>(sampler.batch()));
    std::vector<int64_t> seeds;
    std::vector<float> embeds, pooled, masks;
    for (size_t j = first; j < first + n; ++j) {
      seeds.push_back(jobs[j].seed);
      if (prompts && prompts->request().mask) {
        TypedTensor e = TypedTensor::fromHost(prompts->mask(jobs[j].prompt));
        masks.insert(masks.end(), e.span<float>().begin(),
                     e.span<float>().end());
      }
      if (prompts && prompts->request().embeds) {
        TypedTensor e = TypedTensor::fromHost(prompts->embeds(jobs[j].prompt));
        embeds.insert(embeds.end(), e.span<float>().begin(),
                      e.span<float>().end());
      }
      if (prompts && prompts->request().pooled) {
        TypedTensor e = TypedTensor::fromHost(prompts->pooled(jobs[j].prompt));
        pooled.insert(pooled.end(), e.span<float>().begin(),
                      e.span<float>().end());
      }
    }
    absl::StatusOr<train::sample::SampleOutput> got =
        sampler.sample(seeds, embeds, pooled, *guidance, masks);
    if (!got.ok())
      return fail(got.status().message());
    std::optional<TypedTensor> latents;
    if (flags.saveLatents) {
      absl::StatusOr<TypedTensor> noise = sampler.initialNoise(seeds);
      if (!noise.ok())
        return fail(noise.status().message());
      latents = std::move(*noise);
    }
    for (size_t i = 0; i < n; ++i) {
      const Job &job = jobs[first + i];
      TypedTensor one = row(got->images, static_cast<int64_t>(i));
      std::copy(one.span<float>().begin(), one.span<float>().end(),
                all.span<float>().begin() + (first + i) * imageFloats);
      absl::StatusOr<image::RgbImage> rgb =
          image::imageGrid(one.toHost(), /*gap=*/0);
      if (!rgb.ok())
        return fail(rgb.status().message());
      if (absl::Status s = image::writePng(dir + job.name + ".png", *rgb);
          !s.ok())
        return fail(s.message());
      std::string line = absl::StrCat("{\"file\": ");
      checkpoint::json::appendJsonString(line, job.name + ".png");
      absl::StrAppend(&line, ", \"prompt\": ", job.prompt,
                      ", \"seed\": ", job.seed);
      if (latents) {
        std::string path = job.name + ".latents.npy";
        if (absl::Status s = writeNpyFile(
                dir + path, row(*latents, static_cast<int64_t>(i)).toHost());
            !s.ok())
          return fail(s.message());
        absl::StrAppend(&line, ", \"latents\": ");
        checkpoint::json::appendJsonString(line, path);
      }
      if (got->logProbs) {
        TypedTensor lp = row(*got->logProbs, static_cast<int64_t>(i));
        absl::StrAppend(&line, ", \"log_probs\": [");
        for (int64_t s = 0; s < lp.numElements(); ++s)
          absl::StrAppend(&line, s ? ", " : "", number(lp.doubleAt(s)));
        absl::StrAppend(&line, "]");
      }
      manifest += line + "}\n";
      if (prompts)
        captions.push_back({promptCaption(*prompts, job.prompt),
                            absl::StrCat("seed ", job.seed)});
      else
        captions.push_back({absl::StrCat("seed ", job.seed)});
    }
  }
  absl::StatusOr<image::RgbImage> grid =
      image::imageGrid(all.toHost(), 2, captions);
  if (!grid.ok())
    return fail(grid.status().message());
  if (absl::Status s = image::writePng(dir + "grid.png", *grid); !s.ok())
    return fail(s.message());
  if (absl::Status s =
          checkpoint::writeFileAtomically(dir + "manifest.jsonl", manifest);
      !s.ok())
    return fail(s.message());
  out << "sample: " << jobs.size() << " images (" << numPrompts
      << (numPrompts == 1 ? " prompt" : " prompts") << " x "
      << flags.imagesPerPrompt
      << (flags.imagesPerPrompt == 1 ? " seed from " : " seeds from ")
      << firstSeed << ", " << sampler.batch() << " per call) in "
      << training.outDir
      << ": p<prompt>-s<seed>.png, grid.png, manifest.jsonl\n";
  return 0;
}

} // namespace omni::omnirun
