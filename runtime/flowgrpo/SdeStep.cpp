//===- SdeStep.cpp - One denoising step with log-prob -----------*- C++ -*-===//
//
// The arithmetic mirrors flow_grpo's sde_step_with_logprob expression by
// expression (including where Python scalars enter as float32 constants) so
// that the float instantiation tracks PyTorch float32. Two deliberate
// departures, both from docs/flowgrpo-math.md: the step is given by its integer
// index, never found by comparing float timesteps, and the Euler step (type
// "ode" or noise level 0) reports zero log-probabilities instead of the NaN
// that -0/0 would produce. Row means accumulate in double so the reduction
// order does not matter at the tolerances the tests use.
//
//===----------------------------------------------------------------------===//

#include "runtime/flowgrpo/SdeStep.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

#include <cmath>

namespace omni::flowgrpo {
namespace {

constexpr double kPi = 3.14159265358979323846;

/// Checks that x, v and the third operand (noise or next) describe
/// [batch, rowSize] tensors with rowSize >= 1, and returns rowSize.
template <typename T>
absl::StatusOr<int64_t>
checkShapes(int64_t batch, absl::Span<const T> x, absl::Span<const T> v,
            absl::Span<const T> third, absl::string_view thirdName) {
  if (batch < 1)
    return absl::InvalidArgumentError(
        absl::StrCat("batch must be >= 1 but is ", batch));
  int64_t size = static_cast<int64_t>(x.size());
  if (size == 0 || size % batch != 0)
    return absl::InvalidArgumentError(
        absl::StrCat("x has ", size, " elements but a batch of ", batch,
                     " needs a positive multiple of ", batch));
  if (v.size() != x.size())
    return absl::InvalidArgumentError(
        absl::StrCat("v has ", v.size(), " elements but x has ", x.size()));
  if (third.size() != x.size())
    return absl::InvalidArgumentError(absl::StrCat(
        thirdName, " has ", third.size(), " elements but x has ", x.size()));
  return size / batch;
}

/// The shared body of both entry points. `input` is the noise when
/// `inputIsNoise`, otherwise the given next sample.
template <typename T>
absl::StatusOr<SdeStepResult<T>>
runStep(absl::Span<const float> sigmas, int64_t step,
        const SdeStepOptions &options, int64_t batch, absl::Span<const T> x,
        absl::Span<const T> v, absl::Span<const T> input, bool inputIsNoise) {
  absl::StatusOr<SdeCoefficients<T>> coeffsOr =
      sdeCoefficients<T>(sigmas, step, options);
  if (!coeffsOr.ok())
    return coeffsOr.status();
  absl::StatusOr<int64_t> rowSizeOr =
      checkShapes<T>(batch, x, v, input, inputIsNoise ? "noise" : "next");
  if (!rowSizeOr.ok())
    return rowSizeOr.status();
  const SdeCoefficients<T> &c = *coeffsOr;
  const int64_t rowSize = *rowSizeOr;
  const size_t n = x.size();

  SdeStepResult<T> result;
  result.next.resize(n);
  result.mean.resize(n);
  result.logProb.assign(static_cast<size_t>(batch), T(0));
  result.std = c.std;

  if (c.deterministic) {
    for (size_t k = 0; k < n; ++k) {
      result.mean[k] = x[k] + v[k] * c.dt;
      result.next[k] = inputIsNoise ? result.mean[k] : input[k];
    }
    result.logProbDefined = false;
    return result;
  }

  // Per-step scalars; the elementwise expressions below keep torch's
  // left-to-right evaluation order.
  const T one(1), two(2);
  const T s = c.sigma;
  const T q = c.transitionStd;
  // sde
  const T variance = c.std * c.std;
  const T xCoeff = one + variance / (two * s) * c.dt;
  const T vCoeff = one + variance * (one - s) / (two * s);
  const T twoQSquared = two * (q * q);
  // cps may have q == 0 (its last step) and never needs log q.
  const T logQ = options.type == SdeType::Sde ? std::log(q) : T(0);
  const T logSqrt2Pi = std::log(std::sqrt(two * static_cast<T>(kPi)));
  // cps (for "sde" the radicand would use std_dev and may be negative)
  const T x0Coeff = one - c.sigmaNext;
  const T x1Coeff = options.type == SdeType::Cps
                        ? std::sqrt(c.sigmaNext * c.sigmaNext - c.std * c.std)
                        : T(0);

  for (int64_t b = 0; b < batch; ++b) {
    double rowSum = 0.0;
    for (int64_t j = 0; j < rowSize; ++j) {
      size_t k = static_cast<size_t>(b * rowSize + j);
      T mu;
      if (options.type == SdeType::Sde) {
        mu = x[k] * xCoeff + v[k] * vCoeff * c.dt;
      } else {
        T x0 = x[k] - s * v[k];
        T x1 = x[k] + v[k] * (one - s);
        mu = x0 * x0Coeff + x1 * x1Coeff;
      }
      T next = inputIsNoise ? mu + q * input[k] : input[k];
      T diff = next - mu;
      T lp = options.type == SdeType::Sde
                 ? -(diff * diff) / twoQSquared - logQ - logSqrt2Pi
                 : -(diff * diff);
      result.mean[k] = mu;
      result.next[k] = next;
      rowSum += static_cast<double>(lp);
    }
    result.logProb[b] = static_cast<T>(rowSum / static_cast<double>(rowSize));
  }
  return result;
}

} // namespace

absl::StatusOr<SdeType> parseSdeType(absl::string_view name) {
  if (name == "sde")
    return SdeType::Sde;
  if (name == "cps")
    return SdeType::Cps;
  if (name == "ode")
    return SdeType::Ode;
  return absl::InvalidArgumentError(absl::StrCat(
      "sde type must be one of sde, cps, ode but is '", name, "'"));
}

absl::string_view sdeTypeName(SdeType type) {
  switch (type) {
  case SdeType::Sde:
    return "sde";
  case SdeType::Cps:
    return "cps";
  case SdeType::Ode:
    return "ode";
  }
  return "unknown";
}

template <typename T>
absl::StatusOr<SdeCoefficients<T>>
sdeCoefficients(absl::Span<const float> sigmas, int64_t step,
                const SdeStepOptions &options) {
  if (sigmas.size() < 2)
    return absl::InvalidArgumentError(absl::StrCat(
        "sigma table must have at least 2 entries but has ", sigmas.size()));
  const int64_t numSteps = static_cast<int64_t>(sigmas.size()) - 1;
  if (step < 0 || step >= numSteps)
    return absl::InvalidArgumentError(
        absl::StrCat("step must be in [0, ", numSteps, ") for ", numSteps + 1,
                     " sigmas but is ", step));
  const double a = options.noiseLevel;
  if (!(std::isfinite(a) && a >= 0.0))
    return absl::InvalidArgumentError(
        absl::StrCat("noise_level must be a finite number >= 0 but is ", a));
  const float sigma = sigmas[step];
  const float sigmaNext = sigmas[step + 1];
  if (!(sigma > 0.0f && sigma <= 1.0f))
    return absl::InvalidArgumentError(
        absl::StrCat("sigma s[", step, "] must be in (0, 1] but is ", sigma));
  if (!(sigmaNext >= 0.0f && sigmaNext < sigma))
    return absl::InvalidArgumentError(
        absl::StrCat("sigma s[", step + 1, "] must be in [0, s[", step,
                     "] = ", sigma, ") but is ", sigmaNext));

  SdeCoefficients<T> c;
  c.sigma = static_cast<T>(sigma);
  c.sigmaNext = static_cast<T>(sigmaNext);
  c.dt = c.sigmaNext - c.sigma;
  if (options.type == SdeType::Ode || a == 0.0) {
    c.deterministic = true;
    return c;
  }

  if (options.type == SdeType::Sde) {
    // At s == 1 the variance-exploding factor s / (1 - s) is infinite;
    // flow_grpo substitutes s[1] in the denominator (docs/flowgrpo-math.md
    // section 2).
    float denominatorSigma = sigma;
    if (sigma == 1.0f) {
      denominatorSigma = sigmas[1];
      if (!(denominatorSigma < 1.0f))
        return absl::InvalidArgumentError(
            absl::StrCat("an sde step at sigma 1 needs s[1] < 1 but s[1] is ",
                         denominatorSigma));
    }
    T stdDev = std::sqrt(c.sigma / (T(1) - static_cast<T>(denominatorSigma))) *
               static_cast<T>(a);
    c.std = stdDev;
    c.transitionStd = stdDev * std::sqrt(-c.dt);
  } else {
    // math.sin in Python float64, then one float32 rounding when it meets
    // the float32 sigma tensor.
    c.std = c.sigmaNext * static_cast<T>(std::sin(a * kPi / 2.0));
    c.transitionStd = c.std;
  }
  return c;
}

template <typename T>
absl::StatusOr<SdeStepResult<T>>
sdeStepWithNoise(absl::Span<const float> sigmas, int64_t step,
                 const SdeStepOptions &options, int64_t batch,
                 absl::Span<const T> x, absl::Span<const T> v,
                 absl::Span<const T> noise) {
  return runStep<T>(sigmas, step, options, batch, x, v, noise,
                    /*inputIsNoise=*/true);
}

template <typename T>
absl::StatusOr<SdeStepResult<T>>
sdeStepWithNext(absl::Span<const float> sigmas, int64_t step,
                const SdeStepOptions &options, int64_t batch,
                absl::Span<const T> x, absl::Span<const T> v,
                absl::Span<const T> next) {
  return runStep<T>(sigmas, step, options, batch, x, v, next,
                    /*inputIsNoise=*/false);
}

#define OMNI_INSTANTIATE_SDE_STEP(T)                                           \
  template absl::StatusOr<SdeCoefficients<T>> sdeCoefficients<T>(              \
      absl::Span<const float>, int64_t, const SdeStepOptions &);               \
  template absl::StatusOr<SdeStepResult<T>> sdeStepWithNoise<T>(               \
      absl::Span<const float>, int64_t, const SdeStepOptions &, int64_t,       \
      absl::Span<const T>, absl::Span<const T>, absl::Span<const T>);          \
  template absl::StatusOr<SdeStepResult<T>> sdeStepWithNext<T>(                \
      absl::Span<const float>, int64_t, const SdeStepOptions &, int64_t,       \
      absl::Span<const T>, absl::Span<const T>, absl::Span<const T>);

OMNI_INSTANTIATE_SDE_STEP(float)
OMNI_INSTANTIATE_SDE_STEP(double)
#undef OMNI_INSTANTIATE_SDE_STEP

} // namespace omni::flowgrpo
