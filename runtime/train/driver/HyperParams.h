//===- HyperParams.h - a run's hyper-parameter values -------------*- C++
//-*-===//
//
// The runtime hyper-parameters of a training run (docs/recipes.md,
// "Runtime hyper-parameters"): the program's table (step.bin HyperParam,
// loader::HyperParamInfo: name, default, range), the --set overrides, and
// the learning-rate schedule (--lr-schedule constant|linear|cosine,
// --warmup, --lr-min over --steps). resolve() checks them (one-line errors
// naming the name and the accepted set or range); valueAt() is the value
// an iteration feeds; record() is what run.json and every checkpoint's
// metadata hold, compared on resume (firstDifference). Value type, no
// threads of its own. MLIR-free.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_TRAIN_DRIVER_HYPERPARAMS_H
#define OMNI_RUNTIME_TRAIN_DRIVER_HYPERPARAMS_H

#include "runtime/loader/Program.h"

#include "absl/status/statusor.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace omni::train {

/// The learning-rate schedule: linear warmup from 0 over `warmup`
/// iterations, then `kind` from the lr down to `lrMin` at iteration
/// `steps`:
///   it < warmup:  lr * it / warmup
///   constant:     lr
///   linear:       lr - (lr - lrMin) * p
///   cosine:       lrMin + (lr - lrMin) * (1 + cos(pi * p)) / 2
/// with p = (it - warmup) / (steps - warmup) (p = 0 when steps <= warmup).
struct LrSchedule {
  std::string kind = "constant";
  int64_t warmup = 0;
  double lrMin = 0;
  int64_t steps = 1;

  double at(double lr, int64_t iteration) const;
};

/// What the run's command line asks for.
struct HyperParamRequest {
  /// `name=value`, in order (a later one wins).
  std::vector<std::string> sets;
  /// "constant", "linear" or "cosine"; empty: constant.
  std::string lrSchedule;
  int64_t warmup = 0;
  std::optional<double> lrMin;
  int64_t steps = 1;
};

class HyperParams {
public:
  /// The values `program` is fed: its defaults, then `request`'s --set
  /// overrides (unknown name, value that is no number, out of range: an
  /// error naming the name and the accepted names or range), and the
  /// schedule (which needs a hyper-parameter named lr unless constant
  /// without warmup).
  static absl::StatusOr<HyperParams> resolve(const loader::Program &program,
                                             const HyperParamRequest &request);

  /// The value of `name` at `iteration` (the schedule applies to lr).
  double valueAt(const std::string &name, int64_t iteration) const;
  /// Whether the program has a hyper-parameter named lr.
  bool hasLr() const { return values_.count("lr") != 0; }
  bool empty() const { return values_.empty(); }

  /// (key, value) in a fixed order: `hparam.<name>` for every
  /// hyper-parameter (the value after --set, %.17g), then lr_schedule,
  /// lr_warmup, lr_min and lr_steps (lr_steps only for a schedule that
  /// decays). Checkpoint metadata holds these; a resume compares them.
  std::vector<std::pair<std::string, std::string>> record() const;

  /// The first entry of record() that `metadata` (a checkpoint's) records
  /// differently, as "lr is 0.0003 here but 0.001 in the checkpoint";
  /// nullopt when all agree. A checkpoint without hyper-parameter entries
  /// (written before they existed) agrees.
  std::optional<std::string>
  firstDifference(const std::map<std::string, std::string> &metadata) const;

  /// run.json: program hash, seed, steps, every hyper-parameter with its
  /// default, range and value, the overrides and the schedule.
  std::string runJson(const std::string &programHash, int64_t seed,
                      int64_t steps) const;

private:
  struct Entry {
    loader::HyperParamInfo info;
    double value = 0;
    bool overridden = false;
  };
  std::map<std::string, Entry> values_;
  LrSchedule schedule_;
  bool scheduled_ = false; // a schedule other than constant without warmup
};

/// The shortest of %.15g, %.16g and %.17g that reads back as the same
/// double ("0.0003", not "0.00029999999999999997").
std::string formatExact(double v);

} // namespace omni::train

#endif // OMNI_RUNTIME_TRAIN_DRIVER_HYPERPARAMS_H
