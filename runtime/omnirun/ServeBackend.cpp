//===- ServeBackend.cpp - omnirun --serve's backend over the Sampler ------===//
//
// See ServeBackend.h and docs/serving.md. The server hands run() exactly B
// rows (padding repeats the last real row), which is what @sample takes:
// all B go to Sampler::sample, whose samples do not depend on each other
// (Sampler.h), so the padding changes no real row's image.
//
//===----------------------------------------------------------------------===//

#include "runtime/omnirun/ServeBackend.h"

#include "runtime/hal/drivers/Drivers.h"
#include "runtime/omnirun/Sample.h"
#include "runtime/train/prompts/Prompts.h"

#include "absl/strings/str_cat.h"

#include <algorithm>
#include <optional>
#include <ostream>
#include <sstream>

namespace omni::omnirun {
namespace {

/// f32 values of a HostTensor (which holds them as doubles, exactly).
std::vector<float> toFloats(const HostTensor &t) {
  std::vector<float> out(t.floats().size());
  std::transform(t.floats().begin(), t.floats().end(), out.begin(),
                 [](double v) { return static_cast<float>(v); });
  return out;
}

class SamplerBackend : public serve::SampleBackend {
public:
  const serve::SampleInfo &info() const override { return info_; }

  absl::StatusOr<serve::SampleOutput>
  run(const serve::SampleBatch &batch) override {
    std::vector<float> embeds, pooled, masks;
    if (info_.takesEmbeds)
      embeds = toFloats(batch.promptEmbeds);
    if (info_.takesPooled)
      pooled = toFloats(batch.pooledPromptEmbeds);
    if (info_.takesMask)
      masks = toFloats(batch.promptEmbedsMask);
    absl::StatusOr<train::sample::SampleOutput> got = sampler_->sample(
        batch.seeds.ints(), embeds, pooled,
        info_.takesGuidance ? batch.guidance : std::nullopt, masks);
    if (!got.ok())
      return got.status();
    serve::SampleOutput out;
    out.images = got->images.toHost();
    if (info_.hasLogprobs && got->logProbs)
      out.logprobs = got->logProbs->toHost();
    return out;
  }

  int64_t promptCount() const override {
    return prompts_ ? prompts_->size() : 0;
  }

  void promptEmbeddings(int64_t index, absl::Span<float> embeds,
                        absl::Span<float> pooled) const override {
    // With perIteration = 1, iteration i is prompt i (Prompts.h).
    auto copy = [](const HostTensor &from, absl::Span<float> to) {
      const size_t n = std::min(to.size(), from.floats().size());
      std::transform(from.floats().begin(), from.floats().begin() + n,
                     to.begin(),
                     [](double v) { return static_cast<float>(v); });
    };
    if (info_.takesEmbeds)
      copy(prompts_->embeds(index), embeds);
    if (info_.takesPooled)
      copy(prompts_->pooled(index), pooled);
  }

  void promptMask(int64_t index, absl::Span<float> mask) const override {
    if (!info_.takesMask || !prompts_ || !prompts_->request().mask)
      return;
    HostTensor m = prompts_->mask(index);
    for (size_t j = 0; j < mask.size() && j < m.floats().size(); ++j)
      mask[j] = static_cast<float>(m.floats()[j]);
  }

  /// The prompt's text when the prompts file carries the texts
  /// (tools/encode-prompts, docs/prompts.md), else "".
  std::string promptText(int64_t index) const override {
    if (!prompts_ || index < 0 ||
        index >= static_cast<int64_t>(prompts_->texts().size()))
      return "";
    return prompts_->texts()[static_cast<size_t>(index)];
  }

  /// The device outlives the Sampler: members are destroyed in reverse.
  std::unique_ptr<hal::Device> device_;
  std::unique_ptr<train::sample::Sampler> sampler_;
  std::optional<train::PromptSet> prompts_;
  serve::SampleInfo info_;
};

} // namespace

absl::StatusOr<std::unique_ptr<serve::SampleBackend>>
makeSamplerBackend(const std::shared_ptr<const loader::Program> &program,
                   const ServeArgs &args) {
  if (!train::sample::Sampler::isSamplingProgram(*program))
    return absl::InvalidArgumentError(absl::StrCat(
        args.file,
        " has @sample and @train_step: --serve needs a sampling program "
        "(omnigen --program=sample, docs/sampling.md)"));
  absl::StatusOr<std::optional<double>> guidance =
      samplingGuidance(*program, args.file, args.hparamSets);
  if (!guidance.ok())
    return guidance.status();
  auto backend = std::make_unique<SamplerBackend>();
  hal::DeviceOptions deviceOptions;
  deviceOptions.threads = args.threads;
  absl::StatusOr<std::unique_ptr<hal::Device>> device =
      hal::builtinDrivers().createDevice(args.device, deviceOptions);
  if (!device.ok())
    return device.status();
  backend->device_ = std::move(*device);
  std::ostringstream discard;
  std::ostream &log = args.log ? *args.log : discard;
  absl::StatusOr<std::unique_ptr<train::sample::Sampler>> sampler =
      train::sample::Sampler::create(program, *backend->device_, args.weights,
                                     log, args.graphs);
  if (!sampler.ok())
    return sampler.status();
  backend->sampler_ = std::move(*sampler);
  train::sample::Sampler &s = *backend->sampler_;
  absl::StatusOr<std::optional<train::PromptSet>> prompts =
      samplingPrompts(s, args.promptsPath, args.file, log);
  if (!prompts.ok())
    return prompts.status();
  backend->prompts_ = std::move(*prompts);
  if (s.steps() < 1)
    return absl::InvalidArgumentError(absl::StrCat(
        args.file,
        " has no @sample_steps, which --serve reports as the step count: "
        "rebuild it with this omnigen --program=sample"));

  serve::SampleInfo &info = backend->info_;
  info.batch = s.batch();
  if (!s.promptShape().empty()) {
    info.takesEmbeds = true;
    info.tokens = s.promptShape()[0];
    info.dim = s.promptShape()[1];
  }
  info.takesMask = s.takesMask();
  if (!s.pooledShape().empty()) {
    info.takesPooled = true;
    info.pooledDim = s.pooledShape()[0];
  }
  info.steps = s.steps();
  info.height = s.imageShape()[1];
  info.width = s.imageShape()[2];
  info.hasLogprobs = s.logProbSteps() > 0;
  if (s.defaultGuidance()) {
    info.takesGuidance = true;
    info.defaultGuidance = guidance->value_or(*s.defaultGuidance());
  }
  if (absl::Status checked = serve::checkSampleInfo(info); !checked.ok())
    return checked;
  if (backend->prompts_)
    log << "prompts: " << backend->prompts_->size() << " ("
        << backend->prompts_->source() << ") for prompt_index\n";
  return std::unique_ptr<serve::SampleBackend>(std::move(backend));
}

} // namespace omni::omnirun
