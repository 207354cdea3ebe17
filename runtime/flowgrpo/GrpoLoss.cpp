//===- GrpoLoss.cpp - Clipped GRPO policy loss ------------------*- C++ -*-===//
//
// Mirrors flow_grpo's train loop expression by expression: Python-float
// bounds (1 - eps_c, 1 + eps_c, +-adv_clip_max) become T constants before
// they meet the tensors, and torch.maximum propagates NaN, which std::max
// would not. A NaN log-probability therefore shows up in the loss instead of
// being silently clipped away.
//
//===----------------------------------------------------------------------===//

#include "runtime/flowgrpo/GrpoLoss.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace omni::flowgrpo {
namespace {

/// torch.maximum: NaN if either operand is NaN.
template <typename T> T nanMaximum(T a, T b) {
  if (std::isnan(a) || std::isnan(b))
    return std::numeric_limits<T>::quiet_NaN();
  return a > b ? a : b;
}

absl::Status checkOption(absl::string_view name, double value) {
  if (std::isfinite(value) && value >= 0.0)
    return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(name, " must be a finite number >= 0 but is ", value));
}

} // namespace

absl::StatusOr<KlForm> parseKlForm(absl::string_view name) {
  if (name == "reference")
    return KlForm::Reference;
  if (name == "exact")
    return KlForm::Exact;
  return absl::InvalidArgumentError(absl::StrCat(
      "kl_form must be one of reference, exact but is '", name, "'"));
}

template <typename T>
absl::StatusOr<GrpoLossResult<T>> grpoLoss(const GrpoLossInputs<T> &inputs,
                                           const GrpoLossOptions &options) {
  const size_t batch = inputs.logProb.size();
  if (batch == 0)
    return absl::InvalidArgumentError(
        "log_prob must have at least one sample but is empty");
  if (inputs.oldLogProb.size() != batch)
    return absl::InvalidArgumentError(
        absl::StrCat("old_log_prob has ", inputs.oldLogProb.size(),
                     " samples but log_prob has ", batch));
  if (inputs.advantages.size() != batch)
    return absl::InvalidArgumentError(
        absl::StrCat("advantages has ", inputs.advantages.size(),
                     " samples but log_prob has ", batch));
  if (absl::Status status = checkOption("clip_range", options.clipRange);
      !status.ok())
    return status;
  if (absl::Status status = checkOption("adv_clip_max", options.advClipMax);
      !status.ok())
    return status;
  if (absl::Status status = checkOption("beta", options.beta); !status.ok())
    return status;

  // The KL operands come as a group; a partial group is a wiring bug in the
  // program, not a request to skip the KL.
  const bool hasMean = !inputs.mean.empty();
  const bool hasRefMean = !inputs.refMean.empty();
  const bool hasStd = inputs.std.has_value();
  const bool hasKl = hasMean || hasRefMean || hasStd;
  if (hasKl && !(hasMean && hasRefMean && hasStd)) {
    std::vector<absl::string_view> missing;
    if (!hasMean)
      missing.push_back("mean");
    if (!hasRefMean)
      missing.push_back("ref_mean");
    if (!hasStd)
      missing.push_back("std");
    return absl::InvalidArgumentError(absl::StrCat(
        "kl operands mean, ref_mean and std must be given together but ",
        absl::StrJoin(missing, ", "), missing.size() == 1 ? " is" : " are",
        " missing"));
  }
  if (options.beta > 0.0 && !hasKl)
    return absl::InvalidArgumentError(absl::StrCat(
        "beta is ", options.beta,
        " but the kl operands mean, ref_mean and std are missing"));
  int64_t rowSize = 0;
  T klDenominator(0);
  if (hasKl) {
    if (inputs.mean.size() % batch != 0)
      return absl::InvalidArgumentError(absl::StrCat(
          "mean has ", inputs.mean.size(), " elements but a batch of ", batch,
          " needs a positive multiple of ", batch));
    if (inputs.refMean.size() != inputs.mean.size())
      return absl::InvalidArgumentError(
          absl::StrCat("ref_mean has ", inputs.refMean.size(),
                       " elements but mean has ", inputs.mean.size()));
    rowSize = static_cast<int64_t>(inputs.mean.size() / batch);
    const T std = *inputs.std;
    if (!(std::isfinite(std) && std > T(0)))
      return absl::InvalidArgumentError(
          absl::StrCat("std must be positive and finite but is ", std));
    T scale = std;
    if (options.klForm == KlForm::Exact && options.sdeType == SdeType::Ode)
      return absl::InvalidArgumentError(
          "kl_form exact needs sde_type sde or cps but is ode");
    if (options.klForm == KlForm::Exact && options.sdeType == SdeType::Cps &&
        inputs.dt.has_value())
      return absl::InvalidArgumentError(
          "kl_form exact of a cps step takes no dt (its std is the "
          "transition std) but dt is given");
    if (options.klForm == KlForm::Exact && options.sdeType == SdeType::Sde) {
      if (!inputs.dt.has_value())
        return absl::InvalidArgumentError(
            "kl_form exact needs dt but dt is missing");
      const T dt = *inputs.dt;
      if (!(std::isfinite(dt) && dt < T(0)))
        return absl::InvalidArgumentError(
            absl::StrCat("dt must be negative and finite but is ", dt));
      scale = std * std::sqrt(-dt);
    }
    klDenominator = T(2) * (scale * scale);
  }

  const T clipLow = static_cast<T>(1.0 - options.clipRange);
  const T clipHigh = static_cast<T>(1.0 + options.clipRange);
  const T clipRange = static_cast<T>(options.clipRange);
  const T advMax = static_cast<T>(options.advClipMax);

  GrpoLossResult<T> result;
  result.policyTerms.resize(batch);
  result.ratio.resize(batch);
  double policySum = 0.0, squaredDiffSum = 0.0, klSum = 0.0;
  int64_t clipped = 0;
  for (size_t b = 0; b < batch; ++b) {
    T diff = inputs.logProb[b] - inputs.oldLogProb[b];
    T ratio = std::exp(diff);
    T advantage = std::clamp(inputs.advantages[b], -advMax, advMax);
    T unclippedTerm = -advantage * ratio;
    T clippedTerm = -advantage * std::clamp(ratio, clipLow, clipHigh);
    T term = nanMaximum(unclippedTerm, clippedTerm);
    result.ratio[b] = ratio;
    result.policyTerms[b] = term;
    policySum += static_cast<double>(term);
    squaredDiffSum += static_cast<double>(diff * diff);
    if (std::abs(ratio - T(1)) > clipRange)
      ++clipped;
    if (hasKl) {
      double rowSum = 0.0;
      for (int64_t j = 0; j < rowSize; ++j) {
        size_t k = b * static_cast<size_t>(rowSize) + static_cast<size_t>(j);
        T d = inputs.mean[k] - inputs.refMean[k];
        rowSum += static_cast<double>(d * d);
      }
      T rowMean = static_cast<T>(rowSum / static_cast<double>(rowSize));
      klSum += static_cast<double>(rowMean / klDenominator);
    }
  }
  const double n = static_cast<double>(batch);
  result.policyLoss = static_cast<T>(policySum / n);
  result.approxKl = static_cast<T>(0.5 * (squaredDiffSum / n));
  result.clipFrac = static_cast<T>(static_cast<double>(clipped) / n);
  result.kl = hasKl ? static_cast<T>(klSum / n) : T(0);
  result.loss = result.policyLoss + static_cast<T>(options.beta) * result.kl;
  return result;
}

template absl::StatusOr<GrpoLossResult<float>>
grpoLoss<float>(const GrpoLossInputs<float> &, const GrpoLossOptions &);
template absl::StatusOr<GrpoLossResult<double>>
grpoLoss<double>(const GrpoLossInputs<double> &, const GrpoLossOptions &);

} // namespace omni::flowgrpo
