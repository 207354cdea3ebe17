//===- Optim.cpp - AdamW and global gradient-norm clipping ------*- C++ -*-===//
//
// Follows torch/optim/adamw.py (_single_tensor_adamw, torch >= 2.0) and
// torch/nn/utils/clip_grad.py operation by operation, including torch's lerp
// formula for the first moment and the operand order of addcmul/addcdiv, so
// the float instantiation tracks PyTorch float32 to an ulp or so.
//
//===----------------------------------------------------------------------===//

#include "runtime/flowgrpo/Optim.h"

#include "absl/strings/str_cat.h"

#include <cmath>

namespace omni::flowgrpo {
namespace {

/// torch.lerp(start, end, weight): two formulas, picked by the weight, that
/// keep the result exact at both ends.
template <typename T> T torchLerp(T start, T end, T weight) {
  return weight < T(0.5) ? start + weight * (end - start)
                         : end - (end - start) * (T(1) - weight);
}

absl::Status checkNonNegative(absl::string_view name, double value) {
  if (std::isfinite(value) && value >= 0.0)
    return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(name, " must be a finite number >= 0 but is ", value));
}

absl::Status checkBeta(absl::string_view name, double value) {
  if (value >= 0.0 && value < 1.0)
    return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(name, " must be in [0, 1) but is ", value));
}

} // namespace

template <typename T>
absl::Status adamwStep(absl::Span<T> param, absl::Span<const T> grad,
                       absl::Span<T> expAvg, absl::Span<T> expAvgSq,
                       int64_t step, const AdamWOptions &options) {
  const size_t n = param.size();
  if (grad.size() != n)
    return absl::InvalidArgumentError(
        absl::StrCat("grad has ", grad.size(), " elements but param has ", n));
  if (expAvg.size() != n)
    return absl::InvalidArgumentError(absl::StrCat(
        "exp_avg has ", expAvg.size(), " elements but param has ", n));
  if (expAvgSq.size() != n)
    return absl::InvalidArgumentError(absl::StrCat(
        "exp_avg_sq has ", expAvgSq.size(), " elements but param has ", n));
  if (step < 1)
    return absl::InvalidArgumentError(
        absl::StrCat("step must be >= 1 (1-based) but is ", step));
  for (absl::Status status :
       {checkNonNegative("lr", options.lr),
        checkNonNegative("eps", options.eps),
        checkNonNegative("weight_decay", options.weightDecay),
        checkBeta("beta1", options.beta1), checkBeta("beta2", options.beta2)})
    if (!status.ok())
      return status;

  // Scalars in double, as Python floats in torch; each becomes a T constant
  // where it meets a tensor.
  const double t = static_cast<double>(step);
  const T decay = static_cast<T>(1.0 - options.lr * options.weightDecay);
  const T weight1 = static_cast<T>(1.0 - options.beta1);
  const T beta2 = static_cast<T>(options.beta2);
  const T weight2 = static_cast<T>(1.0 - options.beta2);
  const double biasCorrection1 = 1.0 - std::pow(options.beta1, t);
  const double biasCorrection2 = 1.0 - std::pow(options.beta2, t);
  const T negStepSize = static_cast<T>(-(options.lr / biasCorrection1));
  const T biasCorrection2Sqrt = static_cast<T>(std::sqrt(biasCorrection2));
  const T eps = static_cast<T>(options.eps);

  for (size_t k = 0; k < n; ++k) {
    const T g = grad[k];
    param[k] = param[k] * decay;
    expAvg[k] = torchLerp(expAvg[k], g, weight1);
    expAvgSq[k] = expAvgSq[k] * beta2 + weight2 * g * g;
    const T denom = std::sqrt(expAvgSq[k]) / biasCorrection2Sqrt + eps;
    param[k] = param[k] + negStepSize * expAvg[k] / denom;
  }
  return absl::OkStatus();
}

template <typename T>
absl::StatusOr<ClipGradNormResult<T>>
clipGradNorm(absl::Span<const absl::Span<T>> grads, double maxNorm) {
  if (!(std::isfinite(maxNorm) && maxNorm > 0.0))
    return absl::InvalidArgumentError(absl::StrCat(
        "max_norm must be a positive finite number but is ", maxNorm));

  double sumSquares = 0.0;
  for (absl::Span<T> grad : grads)
    for (T g : grad)
      sumSquares += static_cast<double>(g) * static_cast<double>(g);

  ClipGradNormResult<T> result;
  result.totalNorm = static_cast<T>(std::sqrt(sumSquares));
  if (!std::isfinite(result.totalNorm)) {
    // One bad micro-batch must not poison the weights or the optimizer
    // moments: drop its gradient entirely.
    result.finite = false;
    result.scale = T(0);
    for (absl::Span<T> grad : grads)
      for (T &g : grad)
        g = T(0);
    return result;
  }
  const T coefficient =
      static_cast<T>(maxNorm) / (result.totalNorm + static_cast<T>(1e-6));
  if (coefficient < T(1)) {
    result.scale = coefficient;
    result.clipped = true;
    for (absl::Span<T> grad : grads)
      for (T &g : grad)
        g = g * coefficient;
  }
  return result;
}

template absl::Status adamwStep<float>(absl::Span<float>,
                                       absl::Span<const float>,
                                       absl::Span<float>, absl::Span<float>,
                                       int64_t, const AdamWOptions &);
template absl::Status adamwStep<double>(absl::Span<double>,
                                        absl::Span<const double>,
                                        absl::Span<double>, absl::Span<double>,
                                        int64_t, const AdamWOptions &);
template absl::StatusOr<ClipGradNormResult<float>>
clipGradNorm<float>(absl::Span<const absl::Span<float>>, double);
template absl::StatusOr<ClipGradNormResult<double>>
clipGradNorm<double>(absl::Span<const absl::Span<double>>, double);

} // namespace omni::flowgrpo
