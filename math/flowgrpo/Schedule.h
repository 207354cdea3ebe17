//===- Schedule.h - FlowGRPO sigma schedules --------------------*- C++ -*-===//
//
// The sigma table s[0..N] (float32, decreasing from 1 to 0) drives every
// denoising step, and the reference implementations build it with a specific
// mix of float32 and float64 operations (diffusers' FlowMatchEuler
// scheduler). A one-ulp difference in a sigma changes every later sample, so
// these functions reproduce that arithmetic operation by operation
// (docs/flowgrpo-math.md section 1) instead of evaluating the formulas in one
// precision. omni.flow_schedule folds with them (dialects/omni) and the
// reference evaluator evaluates them; the library lives outside runtime/ and
// dialects/ so that both sides can use it without including the other.
// MLIR-free.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_MATH_FLOWGRPO_SCHEDULE_H
#define OMNI_MATH_FLOWGRPO_SCHEDULE_H

#include "absl/status/statusor.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace omni::flowgrpo {

/// The number of training timesteps T of the SD3 / Qwen-Image schedulers;
/// timestep = T * sigma.
inline constexpr int64_t kNumTrainTimesteps = 1000;

/// Sigmas of the static (SD3 / SD3.5) shift schedule: N + 1 float32 values,
/// s[0] = 1, s[N] = 0. Fails if numSteps < 1 or shift is not a positive
/// finite number.
absl::StatusOr<std::vector<float>> staticShiftSigmas(int64_t numSteps,
                                                     double shift = 3.0);

/// Parameters of the resolution-dependent shift (Qwen-Image style); the
/// defaults are docs/flowgrpo-math.md's.
struct DynamicShiftOptions {
  double baseShift = 0.5;
  double maxShift = 0.9;
  int64_t baseSeqLen = 256;
  int64_t maxSeqLen = 8192;
  /// When set, the schedule is stretched so that its last non-zero sigma is
  /// this value (diffusers' stretch_shift_to_terminal); must be in (0, 1).
  std::optional<double> shiftTerminal;
};

/// The shift exponent mu = m * imageSeqLen + b of the dynamic schedule, in
/// float64 (diffusers' calculate_shift). Assumes options that
/// dynamicShiftSigmas accepts.
double dynamicShiftMu(int64_t imageSeqLen, const DynamicShiftOptions &options);

/// Sigmas of the dynamic shift schedule for an image of `imageSeqLen` latent
/// tokens: N + 1 float32 values ending in 0. Fails if numSteps < 1,
/// imageSeqLen < 1, baseSeqLen == maxSeqLen, a shift is not finite, e^mu
/// overflows float32, or shiftTerminal is outside (0, 1) or set with
/// numSteps < 2 (a one-step schedule has nothing to stretch).
absl::StatusOr<std::vector<float>>
dynamicShiftSigmas(int64_t numSteps, int64_t imageSeqLen,
                   const DynamicShiftOptions &options = {});

/// Timesteps t[i] = float32(1000 * s[i]) for the N steps of a sigma table of
/// N + 1 entries (the appended terminal 0 gets no timestep). Returns an empty
/// vector for a table with fewer than two entries.
std::vector<float> timestepsFromSigmas(const std::vector<float> &sigmas);

} // namespace omni::flowgrpo

#endif // OMNI_MATH_FLOWGRPO_SCHEDULE_H
