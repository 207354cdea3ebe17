//===- SdeStep.h - One stochastic denoising step with log-prob --*- C++ -*-===//
//
// sde_step (docs/flowgrpo-math.md section 2): from x_i and the model velocity
// v, the Gaussian transition to x_{i+1} of the FlowGRPO SDE ("sde"), of the
// coefficients-preserving sampler ("cps"), or the deterministic Euler step
// ("ode", or any type with noise level 0), plus the per-row log-probability
// that the policy-gradient loss needs. Rollout supplies the noise and gets
// the next sample; training supplies the stored next sample and gets its
// log-probability under the current velocity.
//
// The sigma table is float32 (as the schedulers produce it); the arithmetic
// runs in T (float for the float32 evaluator and runtime semantics, double
// for the float64 oracle), following the operation order of flow_grpo's
// sde_step_with_logprob so that T = float matches PyTorch float32 closely.
// Tensors are row-major [batch, rowSize] and owned by the caller; results are
// returned by value. Thread-safe (no shared state). The templates are
// defined in SdeStep.cpp and instantiated there for float and double only.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_FLOWGRPO_SDESTEP_H
#define OMNI_RUNTIME_FLOWGRPO_SDESTEP_H

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

#include <cstdint>
#include <vector>

namespace omni::flowgrpo {

/// The transition family of sde_step.
enum class SdeType {
  /// FlowGRPO's SDE: std_dev = a sqrt(s / (1 - s)), q = std_dev sqrt(-dt).
  Sde,
  /// Coefficients-preserving sampling: q = s[i+1] sin(a pi / 2).
  Cps,
  /// Deterministic Euler step x + v dt; no log-probability.
  Ode,
};

/// Parses the dialect attribute spelling "sde", "cps" or "ode".
absl::StatusOr<SdeType> parseSdeType(absl::string_view name);

/// The attribute spelling of `type`.
absl::string_view sdeTypeName(SdeType type);

/// The attributes of sde_step.
struct SdeStepOptions {
  SdeType type = SdeType::Sde;
  /// The noise level a: 0.7 is flow_grpo's default for "sde", 0.8 is
  /// typical for "cps". Must be finite and >= 0; 0 means the Euler step.
  double noiseLevel = 0.7;
};

/// The per-step scalars of sde_step, exposed so that grpo_loss (the exact
/// KL form) and tests can use them without running a step.
template <typename T> struct SdeCoefficients {
  T sigma = 0;     ///< s[i]
  T sigmaNext = 0; ///< s[i+1]
  T dt = 0;        ///< s[i+1] - s[i], negative
  /// The std sde_step returns: std_dev (without sqrt(-dt)) for "sde", the
  /// transition std for "cps", 0 for the Euler step.
  T std = 0;
  /// q, the standard deviation of x' given x: std_dev sqrt(-dt) for "sde",
  /// std for "cps", 0 for the Euler step.
  T transitionStd = 0;
  /// True for type "ode" or noise level 0: x' = x + v dt, no log-prob.
  bool deterministic = false;
};

/// Computes the coefficients of step `step` (0 <= step < sigmas.size() - 1).
/// Fails if the step is out of range, the noise level is negative or not
/// finite, or the two sigmas the step uses are not 0 < s[i] <= 1 and
/// 0 <= s[i+1] < s[i] (and, for "sde" at s[i] == 1, s[1] < 1).
template <typename T>
absl::StatusOr<SdeCoefficients<T>>
sdeCoefficients(absl::Span<const float> sigmas, int64_t step,
                const SdeStepOptions &options);

/// The outputs of sde_step for a [batch, rowSize] input.
template <typename T> struct SdeStepResult {
  std::vector<T> next;    ///< x', [batch, rowSize]
  std::vector<T> mean;    ///< mu, [batch, rowSize]
  std::vector<T> logProb; ///< [batch]: the MEAN of the elementwise lp of a row
  T std = 0;              ///< as SdeCoefficients::std
  /// False for the Euler step, whose logProb is all zeros by convention
  /// (never NaN or inf); the program must not train on it.
  bool logProbDefined = true;
};

/// Rollout: x' = mu + q * noise. `x`, `v` and `noise` hold batch * rowSize
/// values with rowSize >= 1. The noise is ignored for the Euler step (but
/// must still have the right size, so a shape error never depends on a).
template <typename T>
absl::StatusOr<SdeStepResult<T>>
sdeStepWithNoise(absl::Span<const float> sigmas, int64_t step,
                 const SdeStepOptions &options, int64_t batch,
                 absl::Span<const T> x, absl::Span<const T> v,
                 absl::Span<const T> noise);

/// Training: log-probability of the given next sample `next` (returned
/// unchanged as SdeStepResult::next) under the transition from x with
/// velocity v.
template <typename T>
absl::StatusOr<SdeStepResult<T>>
sdeStepWithNext(absl::Span<const float> sigmas, int64_t step,
                const SdeStepOptions &options, int64_t batch,
                absl::Span<const T> x, absl::Span<const T> v,
                absl::Span<const T> next);

} // namespace omni::flowgrpo

#endif // OMNI_RUNTIME_FLOWGRPO_SDESTEP_H
