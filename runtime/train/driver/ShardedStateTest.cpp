//===- ShardedStateTest.cpp - blocks, padding, gathers on 1/2/4 ranks -----===//
//
// blockOf/assembleBlocks against rows computed here from the rule of
// ShardedState.h (block k = rows [k*c, (k+1)*c) of dim, c = ceil(D/G),
// zero padding); then ShardedState on 1, 2 and 4 in-process ranks with cpu
// devices: every rank's block gathers back to the whole tensor, also for a
// group smaller than the world (fsdp of a dp x fsdp mesh), and scatter
// gives each rank the block of its group rank.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/driver/ShardedState.h"

#include "runtime/hal/drivers/Drivers.h"

#include "gtest/gtest.h"

#include <functional>
#include <thread>

namespace omni::train {
namespace {

/// A sharded f32 slot of global `global`, split on `dim` over `axes` of
/// mesh 0 into `groupSize` blocks.
loader::StateInfo shardedSlot(std::vector<int64_t> global, int64_t dim,
                              int64_t groupSize,
                              std::vector<uint32_t> axes = {0}) {
  loader::StateInfo slot;
  slot.name = "w";
  slot.dtype = DType::F32;
  slot.shape = global;
  slot.shape[dim] = (global[dim] + groupSize - 1) / groupSize;
  slot.numElements = 1;
  for (int64_t d : slot.shape)
    slot.numElements *= d;
  slot.bytes = slot.numElements * 4;
  slot.sharding = loader::StateInfo::Sharding{0, std::move(axes), dim,
                                              std::move(global), groupSize};
  return slot;
}

/// Element i of a tensor of `shape`: i + 1, so that zero padding shows.
TypedTensor iota(const std::vector<int64_t> &shape) {
  TypedTensor t(DType::F32, shape);
  for (int64_t i = 0; i < t.numElements(); ++i)
    t.span<float>()[i] = static_cast<float>(i + 1);
  return t;
}

TEST(ShardedState, BlocksOfDimZeroPadTheLastBlock) {
  // [5, 2] over 2 ranks: c = 3, block 1 = rows 3, 4 and a zero row.
  loader::StateInfo slot = shardedSlot({5, 2}, 0, 2);
  TypedTensor global = iota({5, 2});
  auto b0 = blockOf(slot, global, 0);
  auto b1 = blockOf(slot, global, 1);
  ASSERT_TRUE(b0.ok() && b1.ok());
  EXPECT_EQ(b0->shape(), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(
      std::vector<float>(b0->span<float>().begin(), b0->span<float>().end()),
      (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(
      std::vector<float>(b1->span<float>().begin(), b1->span<float>().end()),
      (std::vector<float>{7, 8, 9, 10, 0, 0}));
  std::vector<uint8_t> blocks(b0->bytes().begin(), b0->bytes().end());
  blocks.insert(blocks.end(), b1->bytes().begin(), b1->bytes().end());
  auto back = assembleBlocks(slot, blocks);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, global);
}

TEST(ShardedState, BlocksOfAnInnerDimOverFourRanks) {
  // [2, 5, 3] split on dim 1 over 4: c = 2; block 2 holds row 4 and
  // padding, block 3 is all padding.
  loader::StateInfo slot = shardedSlot({2, 5, 3}, 1, 4);
  TypedTensor global = iota({2, 5, 3});
  std::vector<uint8_t> blocks;
  for (int64_t k = 0; k < 4; ++k) {
    auto block = blockOf(slot, global, k);
    ASSERT_TRUE(block.ok()) << block.status();
    ASSERT_EQ(block->shape(), (std::vector<int64_t>{2, 2, 3}));
    for (int64_t o = 0; o < 2; ++o)
      for (int64_t j = 0; j < 2; ++j)
        for (int64_t x = 0; x < 3; ++x) {
          int64_t row = k * 2 + j;
          float want =
              row < 5 ? static_cast<float>((o * 5 + row) * 3 + x + 1) : 0.0f;
          EXPECT_EQ(block->span<float>()[(o * 2 + j) * 3 + x], want)
              << "block " << k << " (" << o << ", " << j << ", " << x << ")";
        }
    blocks.insert(blocks.end(), block->bytes().begin(), block->bytes().end());
  }
  auto back = assembleBlocks(slot, blocks);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, global);
}

TEST(ShardedState, RefusesTensorsOfAnotherShape) {
  loader::StateInfo slot = shardedSlot({5, 2}, 0, 2);
  auto wrong = blockOf(slot, iota({4, 2}), 0);
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().message(),
            "state 'w' is tensor<4x2xf32>, expected tensor<5x2xf32>");
  auto out = blockOf(slot, iota({5, 2}), 2);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(), "block 2 of state 'w', expected 0..1");
  auto few = assembleBlocks(slot, std::vector<uint8_t>(8));
  EXPECT_FALSE(few.ok());
}

/// Runs fn(rank, device, channel) on n in-process ranks.
void onRanks(
    int n, const std::function<void(int, hal::Device &, hal::Channel *)> &fn) {
  hal::InProcessChannelProvider provider(n, std::chrono::seconds(60));
  std::vector<std::unique_ptr<hal::Device>> devices;
  std::vector<std::unique_ptr<hal::Channel>> channels;
  for (int r = 0; r < n; ++r) {
    hal::DeviceOptions options;
    options.threads = 1;
    devices.push_back(*hal::builtinDrivers().createDevice("cpu", options));
    auto channel = devices.back()->createChannel(*provider.spec(r));
    ASSERT_TRUE(channel.ok()) << channel.status();
    channels.push_back(std::move(*channel));
  }
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back(
        [&, r] { fn(r, *devices[r], n == 1 ? nullptr : channels[r].get()); });
  for (std::thread &t : threads)
    t.join();
}

loader::MeshInfo mesh(std::vector<std::string> axes,
                      std::vector<int64_t> shape) {
  loader::MeshInfo m;
  m.name = "mesh";
  m.axes = std::move(axes);
  m.shape = std::move(shape);
  m.numRanks = 1;
  for (int64_t s : m.shape)
    m.numRanks *= s;
  return m;
}

/// Every rank scatters the whole tensor, keeps its block, gathers it back.
void roundTrip(int n, const loader::MeshInfo &m, loader::StateInfo slot,
               std::function<int64_t(int)> expectedBlock) {
  TypedTensor global = iota(slot.sharding->globalShape);
  std::vector<loader::StateInfo> state = {slot};
  onRanks(n, [&](int r, hal::Device &device, hal::Channel *channel) {
    auto sharded = ShardedState::create({m}, state, device, channel);
    ASSERT_TRUE(sharded.ok()) << sharded.status();
    EXPECT_EQ((*sharded)->groupRank(slot), expectedBlock(r)) << "rank " << r;
    auto local = (*sharded)->scatter(slot, global);
    ASSERT_TRUE(local.ok()) << local.status();
    auto want = blockOf(slot, global, expectedBlock(r));
    ASSERT_TRUE(want.ok());
    EXPECT_EQ(*local, *want) << "rank " << r;
    auto whole = (*sharded)->gather(slot, *local);
    ASSERT_TRUE(whole.ok()) << whole.status();
    EXPECT_EQ(*whole, global) << "rank " << r;
    auto agreed = maxOverRanks(device, channel, r * 3 + 1);
    ASSERT_TRUE(agreed.ok()) << agreed.status();
    EXPECT_EQ(*agreed, (n - 1) * 3 + 1);
  });
}

TEST(ShardedState, OneRank) {
  roundTrip(1, mesh({"fsdp"}, {1}), shardedSlot({5, 2}, 0, 1),
            [](int) { return 0; });
}

TEST(ShardedState, TwoRanks) {
  roundTrip(2, mesh({"fsdp"}, {2}), shardedSlot({5, 2}, 0, 2),
            [](int r) { return r; });
}

TEST(ShardedState, FourRanksOverTheWholeMesh) {
  roundTrip(4, mesh({"dp", "fsdp"}, {2, 2}), shardedSlot({3, 7}, 1, 4, {0, 1}),
            [](int r) { return r; });
}

TEST(ShardedState, FourRanksOverFsdpOfATwoByTwoMesh) {
  // The group of rank r is its dp row; its block is its fsdp coordinate.
  roundTrip(4, mesh({"dp", "fsdp"}, {2, 2}), shardedSlot({5, 2}, 0, 2, {1}),
            [](int r) { return r % 2; });
}

TEST(ShardedState, ASlotShardedOverMoreRanksThanTheRun) {
  hal::DeviceOptions options;
  auto device = *hal::builtinDrivers().createDevice("cpu", options);
  std::vector<loader::StateInfo> state = {shardedSlot({5, 2}, 0, 2)};
  auto sharded =
      ShardedState::create({mesh({"fsdp"}, {2})}, state, *device, nullptr);
  ASSERT_FALSE(sharded.ok());
  EXPECT_EQ(sharded.status().message(),
            "state 'w' is sharded over 2 ranks of mesh #0 but this run has 1 "
            "rank");
}

} // namespace
} // namespace omni::train
