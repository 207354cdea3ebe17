//===- Checkpoint.h - Training checkpoints on disk --------------*- C++ -*-===//
//
// The training driver's checkpoint folder: one `step-<N>.safetensors` per
// saved step plus a `latest` text file holding the newest step number. Both
// are replaced atomically, and `latest` is written only after its step file
// is durable, so a crash at any point leaves `latest` naming a complete
// checkpoint (the previous one or the new one). MLIR-free; thread-compatible.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_TRAIN_CHECKPOINT_CHECKPOINT_H
#define OMNI_RUNTIME_TRAIN_CHECKPOINT_CHECKPOINT_H

#include "runtime/train/checkpoint/Safetensors.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace omni::checkpoint {

/// A loaded checkpoint. Owns its tensors.
struct Checkpoint {
  int64_t step = 0;
  /// Sorted by name.
  std::vector<NamedTensor> tensors;
  std::map<std::string, std::string> metadata;
};

/// The path of step `step`'s file in `dir`: "<dir>/step-<step>.safetensors".
std::string checkpointPath(const std::string &dir, int64_t step);

/// Writes `<dir>/step-<step>.safetensors` and then points `<dir>/latest` at
/// it, both atomically. Creates `dir` when missing. `step` must be
/// non-negative.
absl::Status
saveCheckpoint(const std::string &dir, int64_t step,
               const std::vector<NamedTensor> &tensors,
               const std::map<std::string, std::string> &metadata = {});

/// Loads the checkpoint `<dir>/latest` names. NotFound when `dir` or
/// `latest` does not exist (nothing saved yet); InvalidArgument when
/// `latest` is malformed; DataLoss when the step file it names is missing;
/// the safetensors errors when that file is invalid.
absl::StatusOr<Checkpoint> loadLatestCheckpoint(const std::string &dir);

/// The typed twins of Checkpoint, saveCheckpoint and loadLatestCheckpoint:
/// tensors as their dtype's bytes (no widening to doubles), so saving or
/// loading the training state holds one host copy of it. Same files, same
/// errors.
struct TypedCheckpoint {
  int64_t step = 0;
  /// Sorted by name.
  std::vector<NamedTypedTensor> tensors;
  std::map<std::string, std::string> metadata;
};
absl::Status
saveCheckpointTyped(const std::string &dir, int64_t step,
                    const std::vector<NamedTypedTensor> &tensors,
                    const std::map<std::string, std::string> &metadata = {});
absl::StatusOr<TypedCheckpoint>
loadLatestCheckpointTyped(const std::string &dir);

/// The steps of the `step-<N>.safetensors` files in `dir`, ascending (none
/// when `dir` is missing).
absl::StatusOr<std::vector<int64_t>> listCheckpoints(const std::string &dir);

/// Removes all but the `keepLast` newest step files of `dir` (by step
/// number), never the one `latest` names. keepLast <= 0 keeps all. Returns
/// how many were removed.
absl::StatusOr<int> pruneCheckpoints(const std::string &dir, int64_t keepLast);

/// mkdir -p `dir`; an existing non-folder at the path is an error
/// ("<dir>: expected a folder").
absl::Status makeDirectories(const std::string &dir);

} // namespace omni::checkpoint

#endif // OMNI_RUNTIME_TRAIN_CHECKPOINT_CHECKPOINT_H
