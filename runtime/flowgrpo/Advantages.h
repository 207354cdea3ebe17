//===- Advantages.h - GRPO group-normalized advantages ----------*- C++ -*-===//
//
// group_advantages (docs/flowgrpo-math.md section 5): GRPO replaces a value
// function by comparing each image's reward with the other images generated for
// the same prompt. Groups are consecutive runs of group_size samples of the
// GLOBAL batch (data-parallel ranks gather rewards before calling this).
// Everything runs in double, like flow_grpo's numpy float64 tracker (two-pass
// mean and std, centering, division); only the advantage is rounded to T.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_FLOWGRPO_ADVANTAGES_H
#define OMNI_RUNTIME_FLOWGRPO_ADVANTAGES_H

#include "absl/status/statusor.h"
#include "absl/types/span.h"

#include <cstdint>
#include <vector>

namespace omni::flowgrpo {

/// The attributes of group_advantages.
struct AdvantageOptions {
  /// Samples per prompt; required (>= 1), and must divide the batch.
  int64_t groupSize = 0;
  /// Normalize by the std of the whole batch (flow_grpo's default) instead of
  /// the std of the sample's group.
  bool globalStd = true;
  /// Delta degrees of freedom of the std: 0 (numpy, flow_grpo) or 1
  /// (torch's unbiased std).
  int64_t ddof = 0;
  /// Added to the std; must be finite and >= 0.
  double eps = 1e-4;
  /// false: A = r - mean, no division.
  bool normByStd = true;
};

/// A_i = (r_i - mean_group(i)) / (std + eps), or r_i - mean_group(i) without
/// normByStd. Conventions where the formula is undefined: a std over n <=
/// ddof values is 0 (so a one-sample group under ddof 1 gets A = 0 rather
/// than NaN), and a zero denominator (std + eps == 0) gives A = 0. An empty
/// batch gives an empty result. Fails for groupSize < 1, a batch size not
/// divisible by groupSize, ddof not 0 or 1, or eps negative or not finite.
/// Instantiated for float and double.
template <typename T>
absl::StatusOr<std::vector<T>> groupAdvantages(absl::Span<const T> rewards,
                                               const AdvantageOptions &options);

} // namespace omni::flowgrpo

#endif // OMNI_RUNTIME_FLOWGRPO_ADVANTAGES_H
