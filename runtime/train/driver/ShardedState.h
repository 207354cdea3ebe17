//===- ShardedState.h - State slots split over ranks, and back --*- C++ -*-===//
//
// A sharded program (step.fbs StateSharding, loader StateInfo::sharding)
// keeps only a block of some state slots on each rank: the slot of group
// rank k holds rows [k*c, (k+1)*c) of dimension `dim` of the global tensor,
// c = ceil(globalShape[dim] / G), where the group is the ranks that differ
// only on the sharding's mesh axes (loader MeshInfo::groupOf). Rows past
// the global size are padding: zero at init, dropped from checkpoints.
// Checkpoints are always unsharded (the tensors a 1-rank run writes, under
// the same diffusers names), so a run resumes on any number of ranks:
// - save: every rank's block is gathered over its group (Channel::
//   allGather) and the padding dropped; rank 0 writes the whole tensor;
// - resume and --init: every rank reads the whole tensor and keeps its
//   block (no communication).
// Memory: during a checkpoint every rank but 0 holds one whole tensor at a
// time (the gathered blocks of the slot being saved) besides its own
// blocks on the device; rank 0 keeps every whole tensor until the file is
// written, the whole unsharded state, as a 1-rank run does (the
// safetensors writer takes them at once; a streaming writer would bring it
// down to one tensor). Resume and --init read the whole file on every rank.
//
// The helpers below also agree on one number per iteration (maxOverRanks:
// the stop request of omnirun --ranks, docs/backend.md "Channels and the
// mesh").
//
// Ownership: a ShardedState borrows the device and the world channel (both
// must outlive it) and owns the sub-channels it splits off for sharding
// groups smaller than the world. Thread safety: one thread per rank; the
// collective methods must be called by every rank in the same order.
// MLIR-free.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_TRAIN_DRIVER_SHARDEDSTATE_H
#define OMNI_RUNTIME_TRAIN_DRIVER_SHARDEDSTATE_H

#include "runtime/hal/Device.h"
#include "runtime/io/TypedTensor.h"
#include "runtime/loader/Program.h"

#include "absl/status/statusor.h"
#include "absl/types/span.h"

#include <map>
#include <memory>
#include <vector>

namespace omni::train {

/// The shape a checkpoint stores for `slot`: its global shape when it is
/// sharded, else its own.
const std::vector<int64_t> &checkpointShape(const loader::StateInfo &slot);

/// Block `k` (0 <= k < G) of `global` (of checkpointShape(slot)) as
/// `slot` holds it on group rank k: rows [k*c, (k+1)*c) of the sharded
/// dimension, zero where they pass the global size. An unsharded slot's
/// block is `global` itself. InvalidArgument for a tensor of another dtype
/// or shape.
absl::StatusOr<TypedTensor> blockOf(const loader::StateInfo &slot,
                                    const TypedTensor &global, int64_t k);

/// The global tensor from the G blocks of `slot` (each of slot.shape) laid
/// end to end in group-rank order, as Channel::allGather returns them; the
/// padding rows are dropped.
absl::StatusOr<TypedTensor> assembleBlocks(const loader::StateInfo &slot,
                                           absl::Span<const uint8_t> blocks);

/// Moves sharded state between this rank's blocks and whole tensors.
class ShardedState {
public:
  /// `world` is this rank's channel over all the meshes' ranks (null: one
  /// rank, where no slot may be sharded over more than one). Collective:
  /// splits `world` into one channel per distinct sharding group smaller
  /// than the world, in slot order.
  static absl::StatusOr<std::unique_ptr<ShardedState>>
  create(absl::Span<const loader::MeshInfo> meshes,
         absl::Span<const loader::StateInfo> state, hal::Device &device,
         hal::Channel *world);

  /// This rank (0 without a world channel).
  int rank() const { return rank_; }
  /// This rank's block index k of `slot` (0 when unsharded).
  int64_t groupRank(const loader::StateInfo &slot) const;

  /// The whole tensor of `slot` from this rank's block `local`: collective
  /// over the slot's group for a sharded slot, `local` itself otherwise.
  absl::StatusOr<TypedTensor> gather(const loader::StateInfo &slot,
                                     TypedTensor local);
  /// This rank's block of the whole tensor `global` (no communication).
  absl::StatusOr<TypedTensor> scatter(const loader::StateInfo &slot,
                                      const TypedTensor &global) const;

private:
  ShardedState(absl::Span<const loader::MeshInfo> meshes, hal::Device &device,
               hal::Channel *world);
  /// The channel of `slot`'s group.
  hal::Channel *groupChannel(const loader::StateInfo &slot) const;

  std::vector<loader::MeshInfo> meshes_;
  hal::Device &device_;
  hal::Channel *world_;
  int rank_ = 0;
  /// Keyed by (mesh, axes).
  std::map<std::pair<uint32_t, std::vector<uint32_t>>,
           std::unique_ptr<hal::Channel>>
      groups_;
};

/// The maximum of every rank's `value` (collective over `channel`; `value`
/// itself when `channel` is null).
absl::StatusOr<int64_t> maxOverRanks(hal::Device &device, hal::Channel *channel,
                                     int64_t value);

/// recv = every rank's `send` bytes (equal lengths) end to end in rank
/// order, through device buffers (collective over `channel`).
absl::StatusOr<std::vector<uint8_t>>
allGatherBytes(hal::Device &device, hal::Channel &channel,
               absl::Span<const uint8_t> send);

} // namespace omni::train

#endif // OMNI_RUNTIME_TRAIN_DRIVER_SHARDEDSTATE_H
