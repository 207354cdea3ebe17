//===- GrpoLoss.h - Clipped GRPO policy loss --------------------*- C++ -*-===//
//
// grpo_loss (docs/flowgrpo-math.md section 6): the PPO-style clipped ratio
// objective on per-sample step log-probabilities, an optional KL penalty
// towards the frozen reference model measured on the sde_step means, and the
// metrics the training driver logs. The 1 / (micro-batches * trained steps)
// scaling that turns accumulated gradients into a mean is the program's job,
// not this function's. Inputs are views owned by the caller; per-sample
// reductions accumulate in double and are returned in T (float or double).
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_FLOWGRPO_GRPOLOSS_H
#define OMNI_RUNTIME_FLOWGRPO_GRPOLOSS_H

#include "runtime/flowgrpo/SdeStep.h"

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace omni::flowgrpo {

/// How the KL penalty normalizes the squared mean difference.
enum class KlForm {
  /// Divide by 2 std^2 with std as sde_step returns it (flow_grpo; default).
  Reference,
  /// Divide by 2 q^2 with q the transition std, the KL between the two
  /// Gaussian transitions: q = std * sqrt(-dt) for an "sde" step, q = std
  /// for a "cps" step (whose std already is the transition std).
  Exact,
};

/// Parses the attribute spelling "reference" or "exact".
absl::StatusOr<KlForm> parseKlForm(absl::string_view name);

/// The attributes of grpo_loss.
struct GrpoLossOptions {
  /// eps_c: the ratio is clipped to [1 - eps_c, 1 + eps_c]; finite, >= 0.
  double clipRange = 1e-4;
  /// Advantages are clamped to [-advClipMax, advClipMax]; finite, >= 0.
  double advClipMax = 5.0;
  /// Weight of the KL penalty; finite, >= 0. With beta > 0 the KL inputs are
  /// required.
  double beta = 0.0;
  KlForm klForm = KlForm::Reference;
  /// The step type of the sde_step that produced mean and std; only
  /// KlForm::Exact reads it (Sde or Cps).
  SdeType sdeType = SdeType::Sde;
};

/// The operands of grpo_loss. logProb, oldLogProb and advantages hold one
/// value per sample (batch >= 1). The KL operands are optional as a group:
/// mean and refMean ([batch, rowSize], the sde_step means under the policy
/// and the reference model) and std (sde_step's std, > 0); dt (s[i+1] - s[i],
/// < 0) is needed only for KlForm::Exact of an Sde step.
template <typename T> struct GrpoLossInputs {
  absl::Span<const T> logProb;
  absl::Span<const T> oldLogProb;
  absl::Span<const T> advantages;
  absl::Span<const T> mean;
  absl::Span<const T> refMean;
  std::optional<T> std;
  std::optional<T> dt;
};

/// The outputs of grpo_loss.
template <typename T> struct GrpoLossResult {
  /// L = L_pg + beta * L_kl.
  T loss = 0;
  /// L_pg = mean_b max(-A r, -A clamp(r, 1 - eps_c, 1 + eps_c)).
  T policyLoss = 0;
  /// L_kl; 0 when no KL inputs were given.
  T kl = 0;
  /// mean((lp - old_lp)^2) / 2.
  T approxKl = 0;
  /// Fraction of samples with |r - 1| > eps_c.
  T clipFrac = 0;
  /// The per-sample policy terms max(-A r, -A clamp(r, ...)), [batch].
  std::vector<T> policyTerms;
  /// The ratios r = exp(lp - old_lp), [batch].
  std::vector<T> ratio;
};

/// Evaluates grpo_loss. Fails when the per-sample operands are empty or
/// differ in length, an option is negative or not finite, only part of the
/// KL operands is given, mean/refMean are not [batch, rowSize] with
/// rowSize >= 1, std is not positive, beta > 0 without KL operands, or the
/// exact form of an Sde step lacks a negative dt (or of a Cps step has one,
/// or is asked for an Ode step). Instantiated for float and double.
template <typename T>
absl::StatusOr<GrpoLossResult<T>> grpoLoss(const GrpoLossInputs<T> &inputs,
                                           const GrpoLossOptions &options);

} // namespace omni::flowgrpo

#endif // OMNI_RUNTIME_FLOWGRPO_GRPOLOSS_H
