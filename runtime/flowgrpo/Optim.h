//===- Optim.h - AdamW and global gradient-norm clipping --------*- C++ -*-===//
//
// The update of docs/flowgrpo-math.md section 7 with PyTorch semantics, because
// the reference trainers use torch.optim.AdamW and
// torch.nn.utils.clip_grad_norm_ and omni must land on the same weights:
// decoupled weight decay applied before the moment update, bias correction
// with a 1-based step count, and clipping by max_norm / (norm + 1e-6). All
// arrays are caller-owned views updated in place; scalar hyper-parameter
// arithmetic runs in double (Python floats in torch), elementwise arithmetic
// in T.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_FLOWGRPO_OPTIM_H
#define OMNI_RUNTIME_FLOWGRPO_OPTIM_H

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

#include <cstdint>

namespace omni::flowgrpo {

/// AdamW hyper-parameters; the defaults are docs/flowgrpo-math.md's LoRA recipe
/// (torch's own defaults are lr 1e-3 and weight decay 1e-2).
struct AdamWOptions {
  double lr = 3e-4;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weightDecay = 1e-4;
};

/// One AdamW step on one parameter array, in place, as torch's
/// single-tensor AdamW (amsgrad off, maximize off):
///   p *= 1 - lr * wd
///   m = lerp(m, g, 1 - beta1);  v = v * beta2 + (1 - beta2) * g * g
///   p -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
/// `step` is t, the 1-based count of steps taken including this one. Fails
/// (and changes nothing) if the four arrays differ in length, step < 1, lr,
/// eps or weightDecay is negative or not finite, or a beta is outside [0, 1).
/// Instantiated for float and double.
template <typename T>
absl::Status adamwStep(absl::Span<T> param, absl::Span<const T> grad,
                       absl::Span<T> expAvg, absl::Span<T> expAvgSq,
                       int64_t step, const AdamWOptions &options);

/// What clipGradNorm measured and did.
template <typename T> struct ClipGradNormResult {
  /// The global L2 norm over all gradient arrays before clipping (the value
  /// torch returns); may be inf or NaN.
  T totalNorm = 0;
  /// The factor the gradients were multiplied by: 1 when not clipped, 0 when
  /// the norm is not finite.
  T scale = 1;
  /// False when totalNorm is inf or NaN: the gradients were zeroed and the
  /// caller must skip the optimizer update and report it.
  bool finite = true;
  /// True when the gradients were scaled down.
  bool clipped = false;
};

/// torch.nn.utils.clip_grad_norm_ over several arrays at once: the norm is
/// sqrt of the sum of squares of every element of every array (accumulated
/// in double), the factor is min(1, maxNorm / (norm + 1e-6)) in T and is
/// applied when it is below 1. Unlike torch, a non-finite norm zeroes the
/// gradients (docs/flowgrpo-math.md section 7). Fails if maxNorm is not
/// positive and finite. Instantiated for float and double.
template <typename T>
absl::StatusOr<ClipGradNormResult<T>>
clipGradNorm(absl::Span<const absl::Span<T>> grads, double maxNorm = 1.0);

} // namespace omni::flowgrpo

#endif // OMNI_RUNTIME_FLOWGRPO_OPTIM_H
