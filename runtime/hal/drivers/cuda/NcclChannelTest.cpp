//===- NcclChannelTest.cpp - The NCCL provider and channel without a GPU --===//
//
// What holds on any machine: the provider's specs (local ranks only, a
// group of 1 needs no NCCL, the unique id made once and shared), the
// refusal of other bootstrap kinds, the loopback channel (on a cpu stream:
// it only copies), and the one-line error when libnccl.so.2 is missing
// (ctest runs MissingLibrary again with OMNI_NCCL_LIBRARY naming a file
// that does not exist). Collectives between GPUs need GPUs: run.sh of
// tools/gpu-check and the cuda-gpu lit tests.
//
//===----------------------------------------------------------------------===//

#include "runtime/hal/drivers/cuda/NcclChannel.h"

#include "runtime/hal/InProcessGroup.h"
#include "runtime/hal/drivers/Drivers.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

#include <cstdlib>
#include <cstring>

namespace omni::hal::cuda {
namespace {

TEST(NcclChannelProvider, ServesItsLocalRanksOnly) {
  NcclChannelProvider provider(2, std::chrono::seconds(1));
  EXPECT_EQ(provider.size(), 2);
  absl::StatusOr<ChannelSpec> bad = provider.spec(2);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "rank 2 is not a rank of this process's "
                                    "NCCL group (0..1 of 2)");
  absl::StatusOr<ChannelSpec> spec = provider.spec(1);
  if (!loadNccl().ok()) {
    ASSERT_FALSE(spec.ok());
    EXPECT_TRUE(absl::StartsWith(spec.status().message(), "nccl: "))
        << spec.status();
    GTEST_SKIP() << "no NCCL here: " << loadNccl().status();
  }
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->rank, 1);
  EXPECT_EQ(spec->size, 2);
  ASSERT_TRUE(spec->bootstrap);
  EXPECT_EQ(spec->bootstrap->kind(), kNcclBootstrapKind);
  EXPECT_EQ(spec->bootstrap->size(), 2);
  EXPECT_TRUE(validateChannelSpec(*spec).ok());
  // One group: both ranks get the same bootstrap (one unique id).
  absl::StatusOr<ChannelSpec> other = provider.spec(0);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->bootstrap, spec->bootstrap);
}

TEST(NcclChannelProvider, AGroupOfOneNeedsNoNccl) {
  NcclChannelProvider provider(1, std::chrono::seconds(1));
  absl::StatusOr<ChannelSpec> spec = provider.spec(0);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_FALSE(spec->bootstrap);
  EXPECT_EQ(spec->size, 1);
}

TEST(NcclChannelProvider, APartOfAWorldServesItsGlobalRanks) {
  // The second node of `mpirun -np 2 omnirun --gpus 8`: ranks 8..15 of 16,
  // with the id MPI rank 0 made.
  NcclUniqueId id{};
  std::memcpy(id.data(), "unique", 6);
  NcclChannelProvider provider(16, id, {8, 9, 10, 11, 12, 13, 14, 15},
                               std::chrono::seconds(1));
  absl::StatusOr<ChannelSpec> bad = provider.spec(7);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "rank 7 is not a rank of this process's "
                                    "NCCL group (8..15 of 16)");
  absl::StatusOr<ChannelSpec> spec = provider.spec(12);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->rank, 12);
  EXPECT_EQ(spec->size, 16);
  EXPECT_EQ(spec->bootstrap->kind(), kNcclBootstrapKind);
}

TEST(NcclChannel, RefusesOtherBootstraps) {
  InProcessChannelProvider group(2, std::chrono::seconds(1));
  absl::StatusOr<std::unique_ptr<Channel>> channel =
      createNcclChannel(NcclDeviceContext{}, *group.spec(0));
  ASSERT_FALSE(channel.ok());
  EXPECT_EQ(channel.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(channel.status().message(),
            "cuda: cannot make a channel of a 'in-process' group (expected "
            "'nccl': omnirun --gpus N, or mpirun ... omnirun --gpus N)");
}

TEST(NcclChannel, TheLoopbackCopies) {
  // A group of one: all_reduce and all_gather are stream copies, which a
  // cpu stream runs as well as a cuda one.
  absl::StatusOr<std::unique_ptr<Channel>> channel =
      createNcclChannel(NcclDeviceContext{}, ChannelSpec{});
  ASSERT_TRUE(channel.ok()) << channel.status();
  EXPECT_EQ((*channel)->size(), 1);
  auto device = *builtinDrivers().createDevice("cpu", {});
  auto stream = *device->createStream();
  auto send = *device->allocate(16), recv = *device->allocate(16);
  const float values[4] = {1.5f, -2, 3, 4};
  ASSERT_TRUE(stream->writeBuffer(values, BufferRef::all(*send)).ok());
  ASSERT_TRUE((*channel)
                  ->allReduce(*stream, BufferRef::all(*send),
                              BufferRef::all(*recv), DType::F32, ReduceOp::Mean)
                  .ok());
  float out[4] = {};
  ASSERT_TRUE(stream->readBuffer(BufferRef::all(*recv), out).ok());
  ASSERT_TRUE(stream->synchronize().ok());
  EXPECT_EQ(std::memcmp(out, values, sizeof(out)), 0);
  absl::Status i1 =
      (*channel)->allReduce(*stream, BufferRef::all(*send),
                            BufferRef::all(*recv), DType::I1, ReduceOp::Sum);
  EXPECT_FALSE(i1.ok());
  EXPECT_FALSE((*channel)->broadcast(*stream, BufferRef::all(*send), 1).ok());
  EXPECT_TRUE((*channel)->broadcast(*stream, BufferRef::all(*send), 0).ok());
}

TEST(NcclLibrary, MissingLibrary) {
  const char *named = std::getenv("OMNI_NCCL_LIBRARY");
  if (!named || !absl::StrContains(named, "does-not-exist"))
    GTEST_SKIP() << "run with OMNI_NCCL_LIBRARY=/does-not-exist/libnccl.so.2";
  absl::StatusOr<int> loaded = loadNccl();
  ASSERT_FALSE(loaded.ok());
  EXPECT_TRUE(absl::StartsWith(loaded.status().message(),
                               absl::StrCat("nccl: ", named, " not found (")))
      << loaded.status();
  EXPECT_TRUE(absl::EndsWith(loaded.status().message(),
                             "); install NCCL 2.18 or newer, or name it with "
                             "OMNI_NCCL_LIBRARY"))
      << loaded.status();
  EXPECT_EQ(loaded.status().message().find('\n'), absl::string_view::npos);
  // The provider of a real group reports it at its first spec.
  NcclChannelProvider provider(2, std::chrono::seconds(1));
  EXPECT_EQ(provider.spec(0).status().message(), loaded.status().message());
}

} // namespace
} // namespace omni::hal::cuda
