//===- Schedule.cpp - FlowGRPO sigma schedules ------------------*- C++ -*-===//
//
// Reproduces diffusers' FlowMatchEulerDiscreteScheduler sigma tables (the
// ones flow_grpo and the Qwen-Image pipelines sample with) to the last float32
// bit. The precision of each operation follows the Python it mirrors: torch
// float32 tensors round every operation to float32, numpy float64 arrays to
// float64, and a Python float mixed with a float32 array is first rounded to
// float32 (numpy >= 2, NEP 50). The file is compiled with -ffp-contract=off
// because numpy never fuses a multiply and an add.
//
//===----------------------------------------------------------------------===//

#include "math/flowgrpo/Schedule.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

#include <cmath>

namespace omni::flowgrpo {
namespace {

/// numpy.linspace(start, stop, num) (endpoint=True) in float64, operation by
/// operation: step = (stop - start) / (num - 1), y[i] = i * step + start,
/// then y[num - 1] = stop exactly; a single sample is `start`.
std::vector<double> linspace(double start, double stop, int64_t num) {
  std::vector<double> y(static_cast<size_t>(num));
  if (num == 1) {
    y[0] = start;
    return y;
  }
  double delta = stop - start;
  double div = static_cast<double>(num - 1);
  double step = delta / div;
  for (int64_t i = 0; i < num; ++i) {
    double fi = static_cast<double>(i);
    // numpy's branch for a step that underflows to zero (gh-5437).
    y[i] = step == 0.0 ? fi / div * delta + start : fi * step + start;
  }
  y[num - 1] = stop;
  return y;
}

/// The SD3 shift f(s) = shift * s / (1 + (shift - 1) * s) on a float32
/// tensor, as torch evaluates it: the Python scalars become float32 and
/// every operation rounds to float32.
float shiftFloat32(double shift, float s) {
  float numerator = static_cast<float>(shift) * s;
  float denominator = 1.0f + static_cast<float>(shift - 1.0) * s;
  return numerator / denominator;
}

absl::Status checkNumSteps(int64_t numSteps) {
  if (numSteps < 1)
    return absl::InvalidArgumentError(
        absl::StrCat("num_steps must be >= 1 but is ", numSteps));
  return absl::OkStatus();
}

} // namespace

absl::StatusOr<std::vector<float>> staticShiftSigmas(int64_t numSteps,
                                                     double shift) {
  if (absl::Status status = checkNumSteps(numSteps); !status.ok())
    return status;
  if (!(std::isfinite(shift) && shift > 0.0))
    return absl::InvalidArgumentError(
        absl::StrCat("shift must be a positive finite number but is ", shift));

  // 1. The training table is k / 1000 for k = 1000..1 in float32, shifted in
  //    float32; only its ends s_max (k = 1000) and s_min (k = 1) are used.
  const float trainTimesteps = static_cast<float>(kNumTrainTimesteps);
  float sigmaMax = shiftFloat32(shift, trainTimesteps / trainTimesteps);
  float sigmaMin = shiftFloat32(shift, 1.0f / trainTimesteps);

  // 2. Timesteps linspace(s_max * T, s_min * T, N) in float64 (the scalars
  //    leave torch through .item(), i.e. as exact doubles), back to sigmas,
  //    shifted again in float64, rounded to float32 once.
  const double t = static_cast<double>(kNumTrainTimesteps);
  std::vector<double> timesteps =
      linspace(static_cast<double>(sigmaMax) * t,
               static_cast<double>(sigmaMin) * t, numSteps);
  std::vector<float> sigmas;
  sigmas.reserve(static_cast<size_t>(numSteps) + 1);
  for (double timestep : timesteps) {
    double s = timestep / t;
    double shifted = shift * s / (1.0 + (shift - 1.0) * s);
    sigmas.push_back(static_cast<float>(shifted));
  }
  // 3. The terminal sigma.
  sigmas.push_back(0.0f);
  return sigmas;
}

double dynamicShiftMu(int64_t imageSeqLen, const DynamicShiftOptions &options) {
  // calculate_shift: Python floats; max_len - base_len is an integer.
  double m = (options.maxShift - options.baseShift) /
             static_cast<double>(options.maxSeqLen - options.baseSeqLen);
  double b = options.baseShift - m * static_cast<double>(options.baseSeqLen);
  return static_cast<double>(imageSeqLen) * m + b;
}

// Derivation of the dynamic schedule from the code docs/flowgrpo-math.md
// section 1 paraphrases (diffusers QwenImagePipeline.__call__ and
// FlowMatchEulerDiscreteScheduler.set_timesteps with use_dynamic_shifting and
// time_shift_type "exponential"):
//   sigmas = np.linspace(1.0, 1 / N, N)            float64
//   set_timesteps(sigmas=sigmas, mu=mu):
//     sigmas = np.array(sigmas).astype(np.float32)  -> float32 from here on
//     sigmas = math.exp(mu) / (math.exp(mu) + (1 / sigmas - 1) ** 1.0)
//       numpy rounds the Python float e^mu to float32 once, then
//       a = 1 / s (f32), a - 1 (f32), ** 1.0 (identity), E + (f32), E / (f32);
//       this is docs/flowgrpo-math.md's sigma <- e^mu / (e^mu + (1/sigma - 1)).
//     if shift_terminal z:  (stretch_shift_to_terminal)
//       one_minus_z = 1 - sigmas                    (f32)
//       scale = one_minus_z[-1] / (1 - z)           np.float32 / Python float:
//         float32 under NEP 50, with 1 - z rounded to float32 first
//       sigmas = 1 - one_minus_z / scale            (f32)
//       this is docs/flowgrpo-math.md's u / (u_last / (1 - z)); the last sigma
//       becomes z (up to rounding).
//     sigmas = torch.from_numpy(sigmas).float(); cat([sigmas, 0])
// numpy < 2 computes `scale` in float64 and rounds it to float32 only in the
// division; the two agree except when the float64 quotient rounds
// differently, which moves a sigma by at most one ulp. We follow numpy >= 2.
// ScheduleTest.cpp checks this against values computed independently with
// numpy and against the float64 formula.
absl::StatusOr<std::vector<float>>
dynamicShiftSigmas(int64_t numSteps, int64_t imageSeqLen,
                   const DynamicShiftOptions &options) {
  if (absl::Status status = checkNumSteps(numSteps); !status.ok())
    return status;
  if (imageSeqLen < 1)
    return absl::InvalidArgumentError(
        absl::StrCat("image_seq_len must be >= 1 but is ", imageSeqLen));
  if (options.maxSeqLen == options.baseSeqLen)
    return absl::InvalidArgumentError(
        absl::StrCat("max_seq_len must differ from base_seq_len but both are ",
                     options.baseSeqLen));
  if (!std::isfinite(options.baseShift) || !std::isfinite(options.maxShift))
    return absl::InvalidArgumentError(
        absl::StrCat("base_shift and max_shift must be finite but are ",
                     options.baseShift, " and ", options.maxShift));
  if (options.shiftTerminal) {
    double z = *options.shiftTerminal;
    if (!(z > 0.0 && z < 1.0))
      return absl::InvalidArgumentError(
          absl::StrCat("shift_terminal must be in (0, 1) but is ", z));
    if (numSteps < 2)
      return absl::InvalidArgumentError(absl::StrCat(
          "shift_terminal needs num_steps >= 2 but num_steps is ", numSteps));
  }

  double mu = dynamicShiftMu(imageSeqLen, options);
  float expMu = static_cast<float>(std::exp(mu));
  if (!std::isfinite(expMu) || expMu == 0.0f)
    return absl::InvalidArgumentError(absl::StrCat(
        "shift exponent mu = ", mu,
        " is out of range: expected e^mu to be a positive finite float32"));

  std::vector<double> base =
      linspace(1.0, 1.0 / static_cast<double>(numSteps), numSteps);
  std::vector<float> sigmas;
  sigmas.reserve(static_cast<size_t>(numSteps) + 1);
  for (double value : base) {
    float s = static_cast<float>(value);
    float odds = 1.0f / s - 1.0f;
    sigmas.push_back(expMu / (expMu + odds));
  }

  if (options.shiftTerminal) {
    float oneMinusLast = 1.0f - sigmas.back();
    // A huge mu rounds every shifted sigma to 1 and leaves nothing to
    // stretch (the division below would be 0 / 0).
    if (oneMinusLast == 0.0f)
      return absl::InvalidArgumentError(absl::StrCat(
          "shift exponent mu = ", mu,
          " is too large for shift_terminal: expected the last sigma below 1 "
          "but it rounds to 1"));
    float scale =
        oneMinusLast / static_cast<float>(1.0 - *options.shiftTerminal);
    for (float &s : sigmas) {
      float oneMinus = 1.0f - s;
      s = 1.0f - oneMinus / scale;
    }
  }
  sigmas.push_back(0.0f);
  return sigmas;
}

std::vector<float> timestepsFromSigmas(const std::vector<float> &sigmas) {
  std::vector<float> timesteps;
  if (sigmas.size() < 2)
    return timesteps;
  timesteps.reserve(sigmas.size() - 1);
  const float t = static_cast<float>(kNumTrainTimesteps);
  for (size_t i = 0; i + 1 < sigmas.size(); ++i)
    timesteps.push_back(sigmas[i] * t);
  return timesteps;
}

} // namespace omni::flowgrpo
