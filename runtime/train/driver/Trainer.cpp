//===- Trainer.cpp - the training loop of omnirun --train -----------------===//
//
// 1. Check the step function against the convention of Trainer.h and read
//    the state and metric names from its tensors.
// 2. Initial state: the latest checkpoint when resuming (matched by name,
//    dtype and shape), otherwise the init function on the seed.
// 3. For each iteration: run the step function on (state, seed, iteration),
//    keep the updated state, print and log the metrics, checkpoint when due.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/driver/Trainer.h"

#include "runtime/train/checkpoint/Checkpoint.h"

#include "absl/strings/str_cat.h"

#include <cstdio>
#include <fstream>
#include <map>

namespace omni::train {
namespace {

struct Signature {
  uint32_t function;
  std::vector<std::string> stateNames, metricNames;
  std::vector<const loader::TensorInfo *> state, metrics;
};

absl::StatusOr<Signature> checkStep(const loader::Program &program,
                                    const std::string &name) {
  std::optional<uint32_t> f = program.findFunction(name);
  if (!f)
    return absl::NotFoundError(absl::StrCat(
        program.name(), ": no function @", name,
        " (the training step; see omnirun --list)"));
  const step::Function *fn = program.step().functions()->Get(*f);
  uint32_t numIn = fn->inputs() ? fn->inputs()->size() : 0;
  uint32_t numOut = fn->outputs() ? fn->outputs()->size() : 0;
  auto info = [&](const flatbuffers::Vector<uint32_t> *v, uint32_t i) {
    return &program.tensor(v->Get(i));
  };
  auto isI64Scalar = [](const loader::TensorInfo *t) {
    return t->dtype == DType::I64 && t->shape.empty();
  };
  if (numIn < 2 || !isI64Scalar(info(fn->inputs(), numIn - 2)) ||
      !isI64Scalar(info(fn->inputs(), numIn - 1)))
    return absl::InvalidArgumentError(absl::StrCat(
        "@", name, program.functionSignature(*f),
        ": expected the state, then seed and iteration as tensor<i64>"));
  uint32_t k = numIn - 2;
  if (numOut < k)
    return absl::InvalidArgumentError(absl::StrCat(
        "@", name, " returns ", numOut, " values but takes ", k,
        " state tensors; it must return the updated state first"));
  Signature sig{*f, {}, {}, {}, {}};
  for (uint32_t i = 0; i < k; ++i) {
    const loader::TensorInfo *in = info(fn->inputs(), i);
    const loader::TensorInfo *out = info(fn->outputs(), i);
    if (in->dtype != out->dtype || in->shape != out->shape)
      return absl::InvalidArgumentError(absl::StrCat(
          "@", name, ": state #", i, " is ", in->typeString(),
          " but result #", i, " is ", out->typeString()));
    sig.state.push_back(in);
    sig.stateNames.push_back(in->name.empty() ? absl::StrCat("state.", i)
                                              : in->name);
  }
  for (uint32_t j = k; j < numOut; ++j) {
    const loader::TensorInfo *out = info(fn->outputs(), j);
    sig.metrics.push_back(out);
    sig.metricNames.push_back(out->name.empty()
                                  ? absl::StrCat("metric.", j - k)
                                  : out->name);
  }
  return sig;
}

absl::Status checkState(const Signature &sig,
                        const std::vector<HostTensor> &state,
                        const std::string &from) {
  if (state.size() != sig.state.size())
    return absl::InvalidArgumentError(absl::StrCat(
        from, " gives ", state.size(), " state tensors but the step takes ",
        sig.state.size()));
  for (size_t i = 0; i < state.size(); ++i)
    if (state[i].dtype() != sig.state[i]->dtype ||
        state[i].shape() != sig.state[i]->shape)
      return absl::InvalidArgumentError(absl::StrCat(
          from, ": state '", sig.stateNames[i], "' is ",
          loader::tensorTypeString(state[i].dtype(), state[i].shape()),
          " but the step takes ", sig.state[i]->typeString()));
  return absl::OkStatus();
}

double scalarValue(const HostTensor &t) {
  if (t.isFloat())
    return t.floats().empty() ? 0.0 : t.floats()[0];
  return t.ints().empty() ? 0.0 : static_cast<double>(t.ints()[0]);
}

std::string formatValue(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

} // namespace

absl::Status train(executor::Executor &executor, const TrainOptions &options,
                   std::ostream &log) {
  const loader::Program &program = executor.program();
  absl::StatusOr<Signature> sig = checkStep(program, options.stepFunction);
  if (!sig.ok())
    return sig.status();
  if (options.steps < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("--steps must be >= 0, found ", options.steps));

  // 2. Initial state.
  std::vector<HostTensor> state;
  int64_t start = 0;
  bool resumed = false;
  if (options.resume && !options.checkpointDir.empty()) {
    absl::StatusOr<checkpoint::Checkpoint> ckpt =
        checkpoint::loadLatestCheckpoint(options.checkpointDir);
    if (ckpt.ok()) {
      auto seed = ckpt->metadata.find("seed");
      if (seed != ckpt->metadata.end() &&
          seed->second != std::to_string(options.seed))
        return absl::InvalidArgumentError(absl::StrCat(
            options.checkpointDir, ": the checkpoint was trained with seed ",
            seed->second, " but --seed is ", options.seed));
      std::map<std::string, const HostTensor *> byName;
      for (const checkpoint::NamedTensor &t : ckpt->tensors)
        byName[t.name] = &t.tensor;
      for (const std::string &name : sig->stateNames) {
        auto it = byName.find(name);
        if (it == byName.end())
          return absl::InvalidArgumentError(absl::StrCat(
              options.checkpointDir, ": the checkpoint of step ", ckpt->step,
              " has no tensor '", name, "'"));
        state.push_back(*it->second);
      }
      if (absl::Status s = checkState(*sig, state, options.checkpointDir);
          !s.ok())
        return s;
      start = ckpt->step;
      resumed = true;
      log << "resumed from " << options.checkpointDir << " at iteration "
          << start << "\n";
    } else if (!absl::IsNotFound(ckpt.status())) {
      return ckpt.status();
    }
  }
  if (!resumed) {
    absl::StatusOr<std::vector<HostTensor>> init = executor.run(
        options.initFunction, {HostTensor::scalarInt(DType::I64, options.seed)});
    if (!init.ok())
      return init.status();
    state = std::move(*init);
    if (absl::Status s =
            checkState(*sig, state, absl::StrCat("@", options.initFunction));
        !s.ok())
      return s;
  }

  std::ofstream metrics;
  if (!options.metricsPath.empty()) {
    metrics.open(options.metricsPath, std::ios::app);
    if (!metrics)
      return absl::InvalidArgumentError(
          absl::StrCat("cannot open ", options.metricsPath, " for appending"));
  }
  auto save = [&](int64_t step) -> absl::Status {
    std::vector<checkpoint::NamedTensor> named;
    for (size_t i = 0; i < state.size(); ++i)
      named.push_back({sig->stateNames[i], state[i]});
    return checkpoint::saveCheckpoint(options.checkpointDir, step, named,
                                      {{"seed", std::to_string(options.seed)}});
  };

  // 3. Iterations.
  for (int64_t it = start; it < options.steps; ++it) {
    std::vector<HostTensor> inputs = state;
    inputs.push_back(HostTensor::scalarInt(DType::I64, options.seed));
    inputs.push_back(HostTensor::scalarInt(DType::I64, it));
    absl::StatusOr<std::vector<HostTensor>> outs =
        executor.run(sig->function, inputs);
    if (!outs.ok())
      return absl::Status(outs.status().code(),
                          absl::StrCat("iteration ", it, ": ",
                                       outs.status().message()));
    state.assign(outs->begin(), outs->begin() + sig->state.size());
    std::string line = absl::StrCat("iteration ", it);
    std::string json = absl::StrCat("{\"iteration\": ", it);
    for (size_t j = 0; j < sig->metrics.size(); ++j) {
      std::string v = formatValue(scalarValue((*outs)[sig->state.size() + j]));
      absl::StrAppend(&line, "  ", sig->metricNames[j], " ", v);
      absl::StrAppend(&json, ", \"", sig->metricNames[j], "\": ", v);
    }
    log << line << "\n";
    if (metrics.is_open())
      metrics << json << "}\n";
    bool last = it + 1 == options.steps;
    bool due = options.checkpointEvery > 0 &&
               (it + 1) % options.checkpointEvery == 0;
    if (!options.checkpointDir.empty() && (last || due))
      if (absl::Status s = save(it + 1); !s.ok())
        return s;
  }
  return absl::OkStatus();
}

} // namespace omni::train
