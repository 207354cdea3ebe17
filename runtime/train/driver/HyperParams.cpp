//===- HyperParams.cpp - a run's hyper-parameter values -------------------===//
//
// HyperParams.h says what this is; docs/recipes.md ("Runtime
// hyper-parameters") documents the flags and the schedule's formula.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/driver/HyperParams.h"

#include "runtime/train/checkpoint/Json.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace omni::train {

std::string formatExact(double v) {
  char buffer[40];
  for (int digits : {15, 16, 17}) {
    std::snprintf(buffer, sizeof buffer, "%.*g", digits, v);
    if (std::strtod(buffer, nullptr) == v)
      break;
  }
  return buffer;
}

double LrSchedule::at(double lr, int64_t iteration) const {
  if (iteration < warmup)
    return lr * static_cast<double>(iteration) / static_cast<double>(warmup);
  if (kind == "constant" || steps <= warmup)
    return lr;
  double p = static_cast<double>(iteration - warmup) /
             static_cast<double>(steps - warmup);
  if (kind == "linear")
    return lr - (lr - lrMin) * p;
  return lrMin + (lr - lrMin) * (1.0 + std::cos(M_PI * p)) / 2.0;
}

namespace {

std::string names(const std::map<std::string, int> &known) {
  std::vector<std::string> out;
  for (const auto &[name, unused] : known)
    out.push_back(name);
  return absl::StrJoin(out, ", ");
}

} // namespace

absl::StatusOr<HyperParams>
HyperParams::resolve(const loader::Program &program,
                     const HyperParamRequest &request) {
  HyperParams hp;
  std::map<std::string, int> known;
  for (const loader::HyperParamInfo &info : program.hyperParams()) {
    hp.values_[info.name] = Entry{info, info.defaultValue, false};
    known[info.name] = 0;
  }
  for (const std::string &set : request.sets) {
    size_t eq = set.find('=');
    if (eq == std::string::npos || eq == 0)
      return absl::InvalidArgumentError(
          absl::StrCat("--set expects <name>=<value>, found '", set, "'"));
    std::string name = set.substr(0, eq), text = set.substr(eq + 1);
    auto it = hp.values_.find(name);
    if (it == hp.values_.end())
      return absl::InvalidArgumentError(absl::StrCat(
          "--set ", name, ": ", program.name(),
          " has no runtime hyper-parameter '", name, "' (",
          known.empty()
              ? std::string("it has none; every option is compiled in")
              : "runtime: " + names(known),
          "; other recipe options are compile-time: omnigen --opt)"));
    double value = 0;
    if (!absl::SimpleAtod(text, &value) || !std::isfinite(value))
      return absl::InvalidArgumentError(
          absl::StrCat("--set ", name, ": expected a finite number in ",
                       it->second.info.range, ", found '", text, "'"));
    const loader::HyperParamInfo &info = it->second.info;
    if (info.lo == info.hi && !info.loOpen && !info.hiOpen &&
        !info.contains(value))
      // "[d, d]": the compiled value shapes the program (docs/recipes.md
      // section 11: beta = 0 has no KL reference, guidance_scale = 1 no
      // CFG forward, noise_level = 0 only Euler steps).
      return absl::InvalidArgumentError(absl::StrCat(
          "--set ", name, "=", text, ": ", program.name(),
          " was compiled with ", name, " = ", formatExact(info.lo),
          ", which fixes it (it decides the program's structure); recompile "
          "with omnigen --opt ",
          name, "=", text, " to train with it"));
    if (!info.contains(value))
      return absl::InvalidArgumentError(
          absl::StrCat("--set ", name, "=", text, ": out of range, expected ",
                       name, " in ", it->second.info.range));
    it->second.value = value;
    it->second.overridden = true;
  }
  const std::string &kind =
      request.lrSchedule.empty() ? std::string("constant") : request.lrSchedule;
  if (kind != "constant" && kind != "linear" && kind != "cosine")
    return absl::InvalidArgumentError(
        absl::StrCat("--lr-schedule: expected constant, linear or cosine, "
                     "found '",
                     kind, "'"));
  if (request.warmup < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("--warmup must be >= 0, found ", request.warmup));
  hp.schedule_.kind = kind;
  hp.schedule_.warmup = request.warmup;
  hp.schedule_.steps = request.steps;
  hp.scheduled_ = kind != "constant" || request.warmup > 0 || request.lrMin;
  if (hp.scheduled_ && !hp.hasLr())
    return absl::InvalidArgumentError(
        absl::StrCat("--lr-schedule/--warmup/--lr-min: ", program.name(),
                     " has no runtime hyper-parameter 'lr' (runtime: ",
                     known.empty() ? std::string("none") : names(known), ")"));
  if (request.lrMin) {
    double lr = hp.hasLr() ? hp.values_["lr"].value : 0;
    if (!std::isfinite(*request.lrMin) || *request.lrMin < 0 ||
        *request.lrMin > lr)
      return absl::InvalidArgumentError(absl::StrCat(
          "--lr-min: expected a number in [0, lr] = [0, ", formatExact(lr),
          "], found ", formatExact(*request.lrMin)));
    hp.schedule_.lrMin = *request.lrMin;
  }
  return hp;
}

double HyperParams::valueAt(const std::string &name, int64_t iteration) const {
  const Entry &e = values_.at(name);
  return name == "lr" ? schedule_.at(e.value, iteration) : e.value;
}

std::vector<std::pair<std::string, std::string>> HyperParams::record() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto &[name, e] : values_)
    out.push_back({"hparam." + name, formatExact(e.value)});
  if (hasLr()) {
    out.push_back({"lr_schedule", schedule_.kind});
    out.push_back({"lr_warmup", std::to_string(schedule_.warmup)});
    out.push_back({"lr_min", formatExact(schedule_.lrMin)});
    if (schedule_.kind != "constant")
      out.push_back({"lr_steps", std::to_string(schedule_.steps)});
  }
  return out;
}

std::optional<std::string> HyperParams::firstDifference(
    const std::map<std::string, std::string> &metadata) const {
  bool any = false;
  for (const auto &[key, value] : metadata)
    any |= key.rfind("hparam.", 0) == 0 || key == "lr_schedule";
  if (!any)
    return std::nullopt;
  for (const auto &[key, value] : record()) {
    auto it = metadata.find(key);
    std::string name = key.rfind("hparam.", 0) == 0 ? key.substr(7) : key;
    if (it == metadata.end())
      return absl::StrCat(name, " is ", value,
                          " here but the checkpoint does not record it");
    if (it->second != value)
      return absl::StrCat(name, " is ", value, " here but ", it->second,
                          " in the checkpoint");
  }
  return std::nullopt;
}

std::string HyperParams::runJson(const std::string &programHash, int64_t seed,
                                 int64_t steps) const {
  using checkpoint::json::appendJsonString;
  std::string j = "{\n  \"program_hash\": ";
  appendJsonString(j, programHash);
  absl::StrAppend(&j, ",\n  \"seed\": ", seed, ",\n  \"steps\": ", steps,
                  ",\n  \"hparams\": {");
  bool first = true;
  for (const auto &[name, e] : values_) {
    absl::StrAppend(&j, first ? "\n    " : ",\n    ");
    first = false;
    appendJsonString(j, name);
    absl::StrAppend(&j, ": {\"value\": ", formatExact(e.value),
                    ", \"default\": ", formatExact(e.info.defaultValue),
                    ", \"range\": ");
    appendJsonString(j, e.info.range);
    absl::StrAppend(&j, ", \"set\": ", e.overridden ? "true" : "false", "}");
  }
  absl::StrAppend(&j, first ? "}" : "\n  }");
  if (hasLr()) {
    absl::StrAppend(&j, ",\n  \"lr_schedule\": {\"kind\": ");
    appendJsonString(j, schedule_.kind);
    absl::StrAppend(&j, ", \"warmup\": ", schedule_.warmup,
                    ", \"lr_min\": ", formatExact(schedule_.lrMin),
                    ", \"steps\": ", schedule_.steps, "}");
  }
  absl::StrAppend(&j, "\n}\n");
  return j;
}

} // namespace omni::train
