//===- EvalDiffusion.cpp - diffusion RL ops and random numbers --*- C++ -*-===//
//
// The diffusion RL ops delegate to runtime/flowgrpo, the normative FlowGRPO
// math, so the evaluator and the runtime compute these ops with the same
// code: the float instances in float32 mode (matching PyTorch float32 op by
// op) and the double instances in float64 mode or on f64 tensors. Random
// numbers come from flowgrpo's Philox4x32-10: element j of a result is a
// function of (key, counter, offset + j) only, so any split of a batch
// reproduces the whole. Library errors (a step index out of range, a
// malformed sigma table) are reported with the op's location.
//
//===----------------------------------------------------------------------===//

#include "compiler/reference/Interpreter.h"

#include "dialects/omni/OmniOps.h"
#include "math/flowgrpo/Schedule.h"
#include "runtime/flowgrpo/Advantages.h"
#include "runtime/flowgrpo/GrpoLoss.h"
#include "runtime/flowgrpo/Optim.h"
#include "runtime/flowgrpo/Philox.h"
#include "runtime/flowgrpo/SdeStep.h"

using namespace mlir;
namespace om = mlir::omni;
namespace fg = ::omni::flowgrpo;

namespace omni::reference::detail {
namespace {

template <typename T> std::vector<T> valuesAs(const HostTensor &t) {
  return std::vector<T>(t.floats().begin(), t.floats().end());
}

template <typename T>
HostTensor tensorFrom(DType dtype, std::vector<int64_t> shape,
                      const std::vector<T> &values) {
  HostTensor t(dtype, std::move(shape));
  for (size_t i = 0; i < values.size(); ++i)
    t.floats()[i] = static_cast<double>(values[i]);
  return t;
}

template <typename T> HostTensor scalarFrom(DType dtype, T value) {
  HostTensor t(dtype, {});
  t.floats()[0] = static_cast<double>(value);
  return t;
}

//===----------------------------------------------------------------------===//
// Random numbers
//===----------------------------------------------------------------------===//

template <bool Normal>
absl::StatusOr<Results> evalRandom(Operation *op, Interpreter &interp) {
  int64_t key = interp.get(op->getOperand(0)).ints()[0];
  int64_t counter = interp.get(op->getOperand(1)).ints()[0];
  int64_t offset = interp.get(op->getOperand(2)).ints()[0];
  HostTensor out = interp.zerosForResult(op, 0);
  std::vector<float> values(static_cast<size_t>(out.numElements()));
  if (Normal)
    fg::philoxNormal(key, counter, offset, values.data(), out.numElements());
  else
    fg::philoxUniform(key, counter, offset, values.data(), out.numElements());
  for (size_t i = 0; i < values.size(); ++i)
    out.floats()[i] = values[i];
  return Results{std::move(out)};
}

//===----------------------------------------------------------------------===//
// Schedule and sampler step
//===----------------------------------------------------------------------===//

absl::StatusOr<Results> evalFlowSchedule(om::FlowScheduleOp op,
                                         Interpreter &interp) {
  int64_t steps = static_cast<int64_t>(op.getNumSteps());
  absl::StatusOr<std::vector<float>> sigmas;
  if (op.getKind() == om::ScheduleKind::static_shift) {
    sigmas = fg::staticShiftSigmas(steps, op.getShift().convertToDouble());
  } else {
    if (!op.getImageSeqLen())
      return opError(op, "dynamic_shift needs image_seq_len");
    fg::DynamicShiftOptions options;
    options.baseShift = op.getBaseShift().convertToDouble();
    options.maxShift = op.getMaxShift().convertToDouble();
    options.baseSeqLen = static_cast<int64_t>(op.getBaseSeqLen());
    options.maxSeqLen = static_cast<int64_t>(op.getMaxSeqLen());
    if (std::optional<APFloat> z = op.getShiftTerminal())
      options.shiftTerminal = z->convertToDouble();
    sigmas = fg::dynamicShiftSigmas(
        steps, static_cast<int64_t>(*op.getImageSeqLen()), options);
  }
  if (!sigmas.ok())
    return opError(op, sigmas.status());
  std::vector<float> timesteps = fg::timestepsFromSigmas(*sigmas);
  Results results;
  results.push_back(
      tensorFrom(DType::F32, {static_cast<int64_t>(sigmas->size())}, *sigmas));
  results.push_back(tensorFrom(
      DType::F32, {static_cast<int64_t>(timesteps.size())}, timesteps));
  return results;
}

fg::SdeType sdeTypeOf(om::SdeType type) {
  switch (type) {
  case om::SdeType::sde:
    return fg::SdeType::Sde;
  case om::SdeType::cps:
    return fg::SdeType::Cps;
  case om::SdeType::ode:
    return fg::SdeType::Ode;
  }
  return fg::SdeType::Sde;
}

/// The value of a runtime hyper-parameter operand (0-D f64) when given,
/// else the attribute it replaces (docs/recipes.md section 11).
double hyperParam(Interpreter &interp, Value operand,
                  const llvm::APFloat &attr) {
  return operand ? interp.get(operand).floats()[0] : attr.convertToDouble();
}

template <typename T>
absl::StatusOr<Results> runSdeStep(om::SdeStepOp op, Interpreter &interp) {
  const HostTensor &x = interp.get(op.getX());
  const HostTensor &sigmaTable = interp.get(op.getSigmas());
  int64_t step = interp.get(op.getStep()).ints()[0];
  std::vector<float> sigmas = valuesAs<float>(sigmaTable);
  fg::SdeStepOptions options;
  options.type = sdeTypeOf(op.getType());
  options.noiseLevel =
      hyperParam(interp, op.getNoiseLevelValue(), op.getNoiseLevel());
  // An operand's 0 is no Euler step (the op's documentation): refuse it
  // rather than agree with a decomposition that divides by 0.
  if (op.getNoiseLevelValue() && !(options.noiseLevel > 0))
    return opError(op, "the noise_level operand must be > 0, found " +
                           std::to_string(options.noiseLevel));
  int64_t batch = x.shape()[0];
  std::vector<T> xs = valuesAs<T>(x);
  std::vector<T> vs = valuesAs<T>(interp.get(op.getV()));
  absl::StatusOr<fg::SdeStepResult<T>> result;
  if (op.getNoise()) {
    std::vector<T> noise = valuesAs<T>(interp.get(op.getNoise()));
    result =
        fg::sdeStepWithNoise<T>(sigmas, step, options, batch, xs, vs, noise);
  } else {
    std::vector<T> next = valuesAs<T>(interp.get(op.getNext()));
    result = fg::sdeStepWithNext<T>(sigmas, step, options, batch, xs, vs, next);
  }
  if (!result.ok())
    return opError(op, result.status());
  Results results;
  results.push_back(tensorFrom(x.dtype(), x.shape(), result->next));
  results.push_back(tensorFrom(x.dtype(), {batch}, result->logProb));
  results.push_back(tensorFrom(x.dtype(), x.shape(), result->mean));
  results.push_back(scalarFrom(x.dtype(), result->std));
  return results;
}

absl::StatusOr<Results> evalSdeStep(om::SdeStepOp op, Interpreter &interp) {
  const HostTensor &x = interp.get(op.getX());
  if (x.rank() < 1 || x.shape()[0] < 1)
    return opError(op, "x must have a non-empty batch dimension, found " +
                           x.typeString());
  return interp.usesDouble(x.dtype()) ? runSdeStep<double>(op, interp)
                                      : runSdeStep<float>(op, interp);
}

absl::StatusOr<Results> evalCfgCombine(om::CfgCombineOp op,
                                       Interpreter &interp) {
  const HostTensor &in = interp.get(op.getOperand());
  HostTensor out = interp.zerosForResult(op, 0);
  if (in.numElements() != 2 * out.numElements())
    return opError(op, "operand " + in.typeString() + " is not twice " +
                           out.typeString());
  double g =
      hyperParam(interp, op.getGuidanceScaleValue(), op.getGuidanceScale());
  int64_t half = out.numElements();
  for (int64_t i = 0; i < half; ++i) {
    double u = in.floats()[i], c = in.floats()[half + i];
    out.floats()[i] = u + g * (c - u);
  }
  return Results{std::move(out)};
}

//===----------------------------------------------------------------------===//
// Advantages and loss
//===----------------------------------------------------------------------===//

template <typename T>
absl::StatusOr<Results> runAdvantages(om::GroupAdvantagesOp op,
                                      Interpreter &interp) {
  const HostTensor &rewards = interp.get(op.getRewards());
  fg::AdvantageOptions options;
  options.groupSize = static_cast<int64_t>(op.getGroupSize());
  options.globalStd = op.getGlobalStd();
  options.ddof = static_cast<int64_t>(op.getDdof());
  options.eps = op.getEps().convertToDouble();
  options.normByStd = op.getNormByStd();
  std::vector<T> r = valuesAs<T>(rewards);
  absl::StatusOr<std::vector<T>> a = fg::groupAdvantages<T>(r, options);
  if (!a.ok())
    return opError(op, a.status());
  return Results{tensorFrom(rewards.dtype(), rewards.shape(), *a)};
}

template <typename T>
absl::StatusOr<Results> runGrpoLoss(om::GrpoLossOp op, Interpreter &interp) {
  const HostTensor &lpT = interp.get(op.getLogProb());
  std::vector<T> lp = valuesAs<T>(lpT);
  std::vector<T> old = valuesAs<T>(interp.get(op.getOldLogProb()));
  std::vector<T> adv = valuesAs<T>(interp.get(op.getAdvantages()));
  std::vector<T> mean, refMean;
  fg::GrpoLossInputs<T> inputs;
  inputs.logProb = lp;
  inputs.oldLogProb = old;
  inputs.advantages = adv;
  if (op.getMean()) {
    mean = valuesAs<T>(interp.get(op.getMean()));
    refMean = valuesAs<T>(interp.get(op.getRefMean()));
    inputs.mean = mean;
    inputs.refMean = refMean;
    inputs.std = static_cast<T>(interp.get(op.getStd()).floats()[0]);
  }
  if (op.getDt())
    inputs.dt = static_cast<T>(interp.get(op.getDt()).floats()[0]);
  fg::GrpoLossOptions options;
  options.clipRange =
      hyperParam(interp, op.getClipRangeValue(), op.getClipRange());
  options.advClipMax =
      hyperParam(interp, op.getAdvClipMaxValue(), op.getAdvClipMax());
  options.beta = hyperParam(interp, op.getBetaValue(), op.getBeta());
  options.klForm = op.getKlForm() == om::KlForm::exact ? fg::KlForm::Exact
                                                       : fg::KlForm::Reference;
  options.sdeType = sdeTypeOf(op.getSdeType());
  absl::StatusOr<fg::GrpoLossResult<T>> r = fg::grpoLoss<T>(inputs, options);
  if (!r.ok())
    return opError(op, r.status());
  DType dtype = lpT.dtype();
  return Results{scalarFrom(dtype, r->loss), scalarFrom(dtype, r->approxKl),
                 scalarFrom(dtype, r->clipFrac), scalarFrom(dtype, r->kl)};
}

//===----------------------------------------------------------------------===//
// Update
//===----------------------------------------------------------------------===//

template <typename T>
absl::StatusOr<Results> runAdamW(om::AdamWOp op, Interpreter &interp) {
  const HostTensor &paramT = interp.get(op.getParam());
  std::vector<T> param = valuesAs<T>(paramT);
  std::vector<T> grad = valuesAs<T>(interp.get(op.getGrad()));
  std::vector<T> m = valuesAs<T>(interp.get(op.getM()));
  std::vector<T> v = valuesAs<T>(interp.get(op.getV()));
  int64_t step = interp.get(op.getStep()).ints()[0];
  fg::AdamWOptions options;
  options.lr = op.getLr().convertToDouble();
  options.beta1 = op.getBeta1().convertToDouble();
  options.beta2 = op.getBeta2().convertToDouble();
  options.eps = op.getEps().convertToDouble();
  options.weightDecay = op.getWeightDecay().convertToDouble();
  absl::Status status =
      fg::adamwStep<T>(absl::MakeSpan(param), grad, absl::MakeSpan(m),
                       absl::MakeSpan(v), step, options);
  if (!status.ok())
    return opError(op, status);
  DType dtype = paramT.dtype();
  return Results{tensorFrom(dtype, paramT.shape(), param),
                 tensorFrom(dtype, paramT.shape(), m),
                 tensorFrom(dtype, paramT.shape(), v)};
}

template <typename T>
absl::StatusOr<Results> runClipGradNorm(om::ClipGradNormOp op,
                                        Interpreter &interp) {
  std::vector<std::vector<T>> grads;
  for (Value g : op.getGrads())
    grads.push_back(valuesAs<T>(interp.get(g)));
  std::vector<absl::Span<T>> spans;
  for (std::vector<T> &g : grads)
    spans.push_back(absl::MakeSpan(g));
  absl::StatusOr<fg::ClipGradNormResult<T>> r =
      fg::clipGradNorm<T>(spans, op.getMaxNorm().convertToDouble());
  if (!r.ok())
    return opError(op, r.status());
  Results results;
  for (auto [i, g] : llvm::enumerate(op.getGrads())) {
    const HostTensor &in = interp.get(g);
    results.push_back(tensorFrom(in.dtype(), in.shape(), grads[i]));
  }
  results.push_back(scalarFrom(DType::F32, r->totalNorm));
  return results;
}

/// Picks the float or double instance by the op's first operand.
template <typename OpT, absl::StatusOr<Results> (*F32)(OpT, Interpreter &),
          absl::StatusOr<Results> (*F64)(OpT, Interpreter &)>
absl::StatusOr<Results> byPrecision(OpT op, Interpreter &interp) {
  if (op->getNumOperands() == 0)
    return opError(op, "needs at least one operand");
  DType dtype = interp.get(op->getOperand(0)).dtype();
  return interp.usesDouble(dtype) ? F64(op, interp) : F32(op, interp);
}

} // namespace

void registerDiffusionHandlers(HandlerTable &table) {
  addGenericHandler<om::RandomNormalOp>(table, evalRandom<true>);
  addGenericHandler<om::RandomUniformOp>(table, evalRandom<false>);
  addHandler<om::FlowScheduleOp>(table, evalFlowSchedule);
  addHandler<om::SdeStepOp>(table, evalSdeStep);
  addHandler<om::CfgCombineOp>(table, evalCfgCombine);
  addHandler<om::GroupAdvantagesOp>(
      table, byPrecision<om::GroupAdvantagesOp, runAdvantages<float>,
                         runAdvantages<double>>);
  addHandler<om::GrpoLossOp>(
      table,
      byPrecision<om::GrpoLossOp, runGrpoLoss<float>, runGrpoLoss<double>>);
  addHandler<om::AdamWOp>(
      table, byPrecision<om::AdamWOp, runAdamW<float>, runAdamW<double>>);
  addHandler<om::ClipGradNormOp>(
      table, byPrecision<om::ClipGradNormOp, runClipGradNorm<float>,
                         runClipGradNorm<double>>);
}

} // namespace omni::reference::detail
