//===- Trainer.h - the training loop of omnirun --train --------*- C++ -*-===//
//
// Runs a compiled FlowGRPO program's training iterations. The program
// follows one convention (examples/flowgrpo-toy/toy.mlir):
//   @init_state(seed: tensor<i64>) -> (state_0, ..., state_{K-1})
//   @train_step(state_0, ..., state_{K-1}, seed: tensor<i64>,
//               iteration: tensor<i64>)
//       -> (state'_0, ..., state'_{K-1}, metric_0, ..., metric_{M-1})
// State (parameters, optimizer moments, step count) is named by the
// program's `omni.name` argument attributes, metrics by its result
// attributes. Every iteration's random numbers are keyed on (seed,
// iteration), so a run resumed from a checkpoint continues bit for bit.
// MLIR-free.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_TRAIN_DRIVER_TRAINER_H
#define OMNI_RUNTIME_TRAIN_DRIVER_TRAINER_H

#include "runtime/executor/Executor.h"

#include "absl/status/status.h"

#include <ostream>
#include <string>

namespace omni::train {

struct TrainOptions {
  /// Iterations to reach (a resumed run continues up to this count).
  int64_t steps = 1;
  int64_t seed = 0;
  std::string initFunction = "init_state";
  std::string stepFunction = "train_step";
  /// Where checkpoints go (`step-<N>.safetensors`, `latest`); empty: none.
  std::string checkpointDir;
  /// Save every N iterations (and always after the last); 0: only at the end.
  int64_t checkpointEvery = 0;
  /// Continue from the latest checkpoint in checkpointDir, if there is one.
  bool resume = false;
  /// Append one JSON object per iteration (metrics) to this file; empty:
  /// none.
  std::string metricsPath;
};

/// Trains: initial state from `initFunction` (or the latest checkpoint),
/// then `stepFunction` once per iteration, printing one line of metrics per
/// iteration to `log`. Errors are one line naming what is wrong.
absl::Status train(executor::Executor &executor, const TrainOptions &options,
                   std::ostream &log);

} // namespace omni::train

#endif // OMNI_RUNTIME_TRAIN_DRIVER_TRAINER_H
