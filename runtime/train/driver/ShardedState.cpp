//===- ShardedState.cpp - State slots split over ranks, and back ----------===//
//
// Blocks are cut and joined as bytes: a tensor of shape [..., D, ...] split
// on `dim` is `outer` = prod(shape[:dim]) runs of D rows of `inner` =
// prod(shape[dim+1:]) * element-size bytes each.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/driver/ShardedState.h"

#include "runtime/base/Status.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include <algorithm>
#include <cstring>

namespace omni::train {
namespace {

/// The byte layout of a split: outer runs, rows per run, bytes per row.
struct Split {
  int64_t outer = 1, rows = 1, rowBytes = 0;
};

Split splitOf(DType dtype, const std::vector<int64_t> &shape, int64_t dim) {
  Split s;
  s.rowBytes = dtypeSize(dtype);
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (d < dim)
      s.outer *= shape[d];
    else if (d == dim)
      s.rows = shape[d];
    else
      s.rowBytes *= shape[d];
  }
  return s;
}

std::string typeOf(DType dtype, const std::vector<int64_t> &shape) {
  return loader::tensorTypeString(dtype, shape);
}

} // namespace

const std::vector<int64_t> &checkpointShape(const loader::StateInfo &slot) {
  return slot.sharding ? slot.sharding->globalShape : slot.shape;
}

absl::StatusOr<TypedTensor> blockOf(const loader::StateInfo &slot,
                                    const TypedTensor &global, int64_t k) {
  const std::vector<int64_t> &want = checkpointShape(slot);
  if (global.dtype() != slot.dtype || global.shape() != want)
    return absl::InvalidArgumentError(
        absl::StrCat("state '", slot.name, "' is ", global.typeString(),
                     ", expected ", typeOf(slot.dtype, want)));
  if (!slot.sharding)
    return global;
  const loader::StateInfo::Sharding &sh = *slot.sharding;
  if (k < 0 || k >= sh.groupSize)
    return absl::InvalidArgumentError(absl::StrCat("block ", k, " of state '",
                                                   slot.name, "', expected 0..",
                                                   sh.groupSize - 1));
  Split g = splitOf(slot.dtype, want, sh.dim);
  Split l = splitOf(slot.dtype, slot.shape, sh.dim);
  TypedTensor block(slot.dtype, slot.shape); // zero padding
  int64_t first = k * l.rows;
  int64_t count = std::max<int64_t>(0, std::min(l.rows, g.rows - first));
  for (int64_t o = 0; o < g.outer && count > 0; ++o)
    std::memcpy(block.bytes().data() + o * l.rows * l.rowBytes,
                global.bytes().data() + (o * g.rows + first) * g.rowBytes,
                static_cast<size_t>(count * g.rowBytes));
  return block;
}

absl::StatusOr<TypedTensor> assembleBlocks(const loader::StateInfo &slot,
                                           absl::Span<const uint8_t> blocks) {
  int64_t groupSize = slot.sharding ? slot.sharding->groupSize : 1;
  if (static_cast<int64_t>(blocks.size()) != groupSize * slot.bytes)
    return absl::InvalidArgumentError(absl::StrCat(
        "state '", slot.name, "': ", blocks.size(),
        " bytes of blocks, expected ", groupSize, " x ", slot.bytes));
  if (!slot.sharding)
    return TypedTensor::fromBytes(slot.dtype, slot.shape, blocks);
  const loader::StateInfo::Sharding &sh = *slot.sharding;
  Split g = splitOf(slot.dtype, sh.globalShape, sh.dim);
  Split l = splitOf(slot.dtype, slot.shape, sh.dim);
  TypedTensor global(slot.dtype, sh.globalShape);
  for (int64_t k = 0; k < groupSize; ++k) {
    int64_t first = k * l.rows;
    int64_t count = std::max<int64_t>(0, std::min(l.rows, g.rows - first));
    const uint8_t *block = blocks.data() + k * slot.bytes;
    for (int64_t o = 0; o < g.outer && count > 0; ++o)
      std::memcpy(global.bytes().data() + (o * g.rows + first) * g.rowBytes,
                  block + o * l.rows * l.rowBytes,
                  static_cast<size_t>(count * g.rowBytes));
  }
  return global;
}

//===----------------------------------------------------------------------===//
// Collectives on host data
//===----------------------------------------------------------------------===//

absl::StatusOr<std::vector<uint8_t>>
allGatherBytes(hal::Device &device, hal::Channel &channel,
               absl::Span<const uint8_t> send) {
  const int64_t n = static_cast<int64_t>(send.size());
  std::vector<uint8_t> out(static_cast<size_t>(n * channel.size()));
  OMNI_ASSIGN_OR_RETURN(std::unique_ptr<hal::Buffer> sendBuffer,
                        device.allocate(n));
  OMNI_ASSIGN_OR_RETURN(std::unique_ptr<hal::Buffer> recvBuffer,
                        device.allocate(n * channel.size()));
  OMNI_ASSIGN_OR_RETURN(std::unique_ptr<hal::Stream> stream,
                        device.createStream());
  hal::BufferRef sendRef = hal::BufferRef::all(*sendBuffer);
  hal::BufferRef recvRef = hal::BufferRef::all(*recvBuffer);
  if (n > 0)
    OMNI_RETURN_IF_ERROR(stream->writeBuffer(send.data(), sendRef));
  OMNI_RETURN_IF_ERROR(channel.allGather(*stream, sendRef, recvRef));
  if (n > 0)
    OMNI_RETURN_IF_ERROR(stream->readBuffer(recvRef, out.data()));
  OMNI_RETURN_IF_ERROR(stream->synchronize());
  return out;
}

absl::StatusOr<int64_t> maxOverRanks(hal::Device &device, hal::Channel *channel,
                                     int64_t value) {
  if (!channel || channel->size() == 1)
    return value;
  OMNI_ASSIGN_OR_RETURN(std::unique_ptr<hal::Buffer> buffer,
                        device.allocate(sizeof(int64_t)));
  OMNI_ASSIGN_OR_RETURN(std::unique_ptr<hal::Stream> stream,
                        device.createStream());
  hal::BufferRef ref = hal::BufferRef::all(*buffer);
  OMNI_RETURN_IF_ERROR(stream->writeBuffer(&value, ref));
  OMNI_RETURN_IF_ERROR(
      channel->allReduce(*stream, ref, ref, DType::I64, hal::ReduceOp::Max));
  int64_t result = 0;
  OMNI_RETURN_IF_ERROR(stream->readBuffer(ref, &result));
  OMNI_RETURN_IF_ERROR(stream->synchronize());
  return result;
}

//===----------------------------------------------------------------------===//
// ShardedState
//===----------------------------------------------------------------------===//

ShardedState::ShardedState(absl::Span<const loader::MeshInfo> meshes,
                           hal::Device &device, hal::Channel *world)
    : meshes_(meshes.begin(), meshes.end()), device_(device), world_(world),
      rank_(world ? world->rank() : 0) {}

absl::StatusOr<std::unique_ptr<ShardedState>>
ShardedState::create(absl::Span<const loader::MeshInfo> meshes,
                     absl::Span<const loader::StateInfo> state,
                     hal::Device &device, hal::Channel *world) {
  std::unique_ptr<ShardedState> s(new ShardedState(meshes, device, world));
  const int worldSize = world ? world->size() : 1;
  for (const loader::StateInfo &slot : state) {
    if (!slot.sharding || slot.sharding->groupSize == 1)
      continue;
    const loader::StateInfo::Sharding &sh = *slot.sharding;
    if (sh.mesh >= s->meshes_.size() ||
        s->meshes_[sh.mesh].numRanks != worldSize)
      return absl::InvalidArgumentError(
          absl::StrCat("state '", slot.name, "' is sharded over ", sh.groupSize,
                       " ranks of mesh #", sh.mesh, " but this run has ",
                       worldSize, worldSize == 1 ? " rank" : " ranks"));
    auto key = std::make_pair(sh.mesh, sh.axes);
    if (sh.groupSize == worldSize || s->groups_.count(key))
      continue;
    loader::MeshInfo::Group group =
        s->meshes_[sh.mesh].groupOf(sh.axes, s->rank_);
    OMNI_ASSIGN_OR_RETURN(std::unique_ptr<hal::Channel> channel,
                          world->split(static_cast<int>(group.color),
                                       static_cast<int>(group.rank)));
    s->groups_[key] = std::move(channel);
  }
  return s;
}

int64_t ShardedState::groupRank(const loader::StateInfo &slot) const {
  if (!slot.sharding || slot.sharding->mesh >= meshes_.size())
    return 0;
  return meshes_[slot.sharding->mesh].groupOf(slot.sharding->axes, rank_).rank;
}

hal::Channel *ShardedState::groupChannel(const loader::StateInfo &slot) const {
  auto it = groups_.find({slot.sharding->mesh, slot.sharding->axes});
  return it != groups_.end() ? it->second.get() : world_;
}

absl::StatusOr<TypedTensor> ShardedState::gather(const loader::StateInfo &slot,
                                                 TypedTensor local) {
  if (local.dtype() != slot.dtype || local.shape() != slot.shape)
    return absl::InvalidArgumentError(absl::StrCat(
        "state '", slot.name, "' on rank ", rank_, " is ", local.typeString(),
        ", expected ", typeOf(slot.dtype, slot.shape)));
  if (!slot.sharding)
    return local;
  if (slot.sharding->groupSize == 1)
    return assembleBlocks(slot, local.bytes());
  hal::Channel *channel = groupChannel(slot);
  OMNI_ASSIGN_OR_RETURN(std::vector<uint8_t> blocks,
                        allGatherBytes(device_, *channel, local.bytes()));
  return assembleBlocks(slot, blocks);
}

absl::StatusOr<TypedTensor>
ShardedState::scatter(const loader::StateInfo &slot,
                      const TypedTensor &global) const {
  return blockOf(slot, global, groupRank(slot));
}

} // namespace omni::train
