//===- ChannelConformanceTest.cpp - Collectives of every driver --*- C++
//-*-===//
//
// The four collectives (hal/Channel.h) for groups of 1, 2, 3 and 4 ranks
// that run as threads of this process, each rank with its own device, for
// every dtype and reduce op and for uneven per-rank element counts (1, 7,
// 1000). Expected values are computed here from the inputs: the inputs are
// small multiples of 1/4, so every sum and product is exact in the
// accumulation type and the expected element is the exact result rounded
// once to the dtype. Then: f16/bf16 accumulate in f32 (a case that differs
// from per-step rounding), integer wrap-around, NaN in min/max, in-place
// calls, split(), one shared device, the spec errors, and groups that fail
// (abort, a mismatch, a bad buffer, a closed channel, a timeout) without
// any rank hanging. A driver without channels skips. The cuda driver's
// groups are NCCL's, one GPU per rank: they need 4 GPUs (the host model's
// in ctest's OmniHostCuda.Channels) and skip the failure tests, since an
// NCCL group fails asynchronously: two tests of the NCCL form (an abort, a
// timeout) take their place.
//
//===----------------------------------------------------------------------===//

#include "runtime/hal/InProcessGroup.h"
#include "runtime/hal/drivers/Drivers.h"
#ifdef OMNI_CTS_HAS_NCCL
#include "runtime/hal/drivers/cuda/NcclChannel.h"
#endif

#include "gtest/gtest.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <thread>

namespace omni::hal {
namespace {

/// A test that waits longer than this for a collective is broken, not
/// slow: the group fails instead of hanging the test.
constexpr std::chrono::milliseconds kTestTimeout = std::chrono::seconds(60);

/// Little-endian bytes of `values` in `dtype` (floats rounded to it).
std::vector<uint8_t> encode(DType dtype, const std::vector<double> &values) {
  std::vector<uint8_t> out(values.size() * size_t(dtypeSize(dtype)));
  for (size_t i = 0; i < values.size(); ++i) {
    uint8_t *p = out.data() + i * size_t(dtypeSize(dtype));
    double v = values[i];
    switch (dtype) {
    case DType::F32: {
      float f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
      break;
    }
    case DType::F64:
      std::memcpy(p, &v, 8);
      break;
    case DType::F16: {
      uint16_t h = halfBitsFromDouble(v);
      std::memcpy(p, &h, 2);
      break;
    }
    case DType::BF16: {
      float f = static_cast<float>(roundToDType(v, DType::BF16));
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      uint16_t h = static_cast<uint16_t>(bits >> 16);
      std::memcpy(p, &h, 2);
      break;
    }
    case DType::I1:
      *p = v != 0;
      break;
    case DType::I32: {
      int32_t x = static_cast<int32_t>(v);
      std::memcpy(p, &x, 4);
      break;
    }
    case DType::I64: {
      int64_t x = static_cast<int64_t>(v);
      std::memcpy(p, &x, 8);
      break;
    }
    }
  }
  return out;
}

/// Element i of `rank`'s input: small multiples of 1/4 in [-2, 2] for
/// floats, integers in [-100, 100], 0/1 for i1.
double inputValue(DType dtype, int rank, int64_t i) {
  int64_t k = (rank * 7 + i * 3 + 5) % 17 - 8; // -8..8
  if (isFloatDType(dtype))
    return k * 0.25;
  if (dtype == DType::I1)
    return (rank + i) % 2;
  return static_cast<double>((rank * 37 + i * 11) % 201 - 100);
}

std::vector<double> inputs(DType dtype, int rank, int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[size_t(i)] = inputValue(dtype, rank, i);
  return v;
}

/// The reduction of element i over `ranks` ranks, exactly, then rounded.
double expectedReduction(DType dtype, ReduceOp op, int ranks, int64_t i) {
  double acc = inputValue(dtype, 0, i);
  for (int r = 1; r < ranks; ++r) {
    double v = inputValue(dtype, r, i);
    switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Mean:
      acc += v;
      break;
    case ReduceOp::Prod:
      acc *= v;
      break;
    case ReduceOp::Min:
      acc = std::min(acc, v);
      break;
    case ReduceOp::Max:
      acc = std::max(acc, v);
      break;
    }
  }
  if (op == ReduceOp::Mean) {
    // The quotient is rounded in the accumulation type, then to the dtype.
    if (dtype == DType::F64)
      acc = acc / ranks;
    else
      acc = static_cast<float>(acc) / static_cast<float>(ranks);
  }
  return acc;
}

/// One rank: its device, stream and channel.
struct Rank {
  std::unique_ptr<Device> device;
  std::unique_ptr<Stream> stream;
  std::unique_ptr<Channel> channel;

  std::unique_ptr<Buffer> upload(const std::vector<uint8_t> &bytes) {
    auto buffer = device->allocate(int64_t(bytes.size()));
    EXPECT_TRUE(buffer.ok()) << buffer.status();
    EXPECT_TRUE(
        stream->writeBuffer(bytes.data(), BufferRef::all(**buffer)).ok());
    return std::move(*buffer);
  }
  std::vector<uint8_t> download(Buffer &buffer) {
    std::vector<uint8_t> bytes(static_cast<size_t>(buffer.size()));
    EXPECT_TRUE(stream->readBuffer(BufferRef::all(buffer), bytes.data()).ok());
    EXPECT_TRUE(stream->synchronize().ok());
    return bytes;
  }
};

class ChannelTest : public ::testing::TestWithParam<std::string> {
public:
  void SetUp() override {
    auto device = builtinDrivers().createDevice(GetParam(), {});
    if (!device.ok() &&
        device.status().code() == absl::StatusCode::kUnavailable)
      GTEST_SKIP() << "no GPU: " << device.status().message();
    ASSERT_TRUE(device.ok()) << device.status();
    // The cuda driver's channels are NCCL groups of one GPU per rank
    // (hal/drivers/cuda/NcclChannel.h): makeRanks gives rank r GPU r, so
    // the suite needs a GPU per rank (the host model has as many as
    // OMNI_HOST_CUDA_DEVICES says; ctest runs it with 4).
    if (nccl()) {
#ifndef OMNI_CTS_HAS_NCCL
      GTEST_SKIP() << "built without the cuda driver's NCCL channel";
#endif
      auto count = builtinDrivers().find(GetParam())->deviceCount();
      if (!count.ok() || *count < kMaxRanks)
        GTEST_SKIP() << "NCCL groups need a GPU per rank: " << kMaxRanks
                     << " GPUs, this machine has " << (count.ok() ? *count : 0);
    }
    auto channel = (*device)->createChannel(ChannelSpec{});
    if (!channel.ok()) {
      EXPECT_EQ(channel.status().code(), absl::StatusCode::kUnimplemented);
      GTEST_SKIP() << "no channels: " << channel.status();
    }
  }

  /// The most ranks a test groups.
  static constexpr int kMaxRanks = 4;

  /// Whether the driver's groups are NCCL's (cuda).
  bool nccl() const { return GetParam() == "cuda"; }

  /// The provider of `n` ranks of this process: an in-process group, or
  /// for cuda an NCCL group.
  std::unique_ptr<ChannelProvider>
  provider(int n, std::chrono::milliseconds timeout) const {
#ifdef OMNI_CTS_HAS_NCCL
    if (nccl())
      return std::make_unique<cuda::NcclChannelProvider>(n, timeout);
#endif
    return std::make_unique<InProcessChannelProvider>(n, timeout);
  }

  /// `n` ranks with their own devices (rank r on ordinal r for cuda) over
  /// one group.
  std::vector<Rank>
  makeRanks(int n, std::chrono::milliseconds timeout = kTestTimeout) {
    std::unique_ptr<ChannelProvider> group = provider(n, timeout);
    std::vector<Rank> ranks(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) {
      DeviceOptions options;
      options.threads = 2;
      if (nccl())
        options.ordinal = r;
      auto device = builtinDrivers().createDevice(GetParam(), options);
      EXPECT_TRUE(device.ok()) << device.status();
      Rank &rank = ranks[size_t(r)];
      rank.device = std::move(*device);
      rank.stream = *rank.device->createStream();
      auto spec = group->spec(r);
      EXPECT_TRUE(spec.ok()) << spec.status();
      auto channel = rank.device->createChannel(*spec);
      EXPECT_TRUE(channel.ok()) << channel.status();
      rank.channel = std::move(*channel);
      EXPECT_EQ(rank.channel->rank(), r);
      EXPECT_EQ(rank.channel->size(), n);
    }
    return ranks;
  }

  /// Runs fn(rank) on one thread per rank and joins them.
  static void onEveryRank(std::vector<Rank> &ranks,
                          const std::function<void(int, Rank &)> &fn) {
    std::vector<std::thread> threads;
    for (size_t r = 0; r < ranks.size(); ++r)
      threads.emplace_back([&, r] { fn(static_cast<int>(r), ranks[r]); });
    for (std::thread &t : threads)
      t.join();
  }
};

const DType kReducible[] = {DType::F32,  DType::F64, DType::F16,
                            DType::BF16, DType::I32, DType::I64};
const DType kAll[] = {DType::F32, DType::F64, DType::F16, DType::BF16,
                      DType::I1,  DType::I32, DType::I64};
const int64_t kCounts[] = {1, 7, 1000};

std::vector<ReduceOp> opsFor(DType dtype) {
  std::vector<ReduceOp> ops = {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Min,
                               ReduceOp::Max};
  if (isFloatDType(dtype))
    ops.push_back(ReduceOp::Mean);
  return ops;
}

std::string label(const char *what, DType dtype, ReduceOp op, int ranks,
                  int64_t n) {
  return absl::StrCat(what, " ", reduceOpName(op), " ", dtypeName(dtype), " ",
                      ranks, " ranks x ", n);
}

TEST_P(ChannelTest, AllReduceEveryDTypeAndOp) {
  for (int n = 1; n <= 4; ++n) {
    std::vector<Rank> ranks = makeRanks(n);
    for (DType dtype : kReducible)
      for (ReduceOp op : opsFor(dtype))
        for (int64_t count : kCounts) {
          std::vector<double> want(static_cast<size_t>(count));
          for (int64_t i = 0; i < count; ++i)
            want[size_t(i)] = expectedReduction(dtype, op, n, i);
          std::vector<uint8_t> wantBytes = encode(dtype, want);
          onEveryRank(ranks, [&](int r, Rank &rank) {
            auto send = rank.upload(encode(dtype, inputs(dtype, r, count)));
            auto recv = rank.upload(std::vector<uint8_t>(send->size()));
            absl::Status s =
                rank.channel->allReduce(*rank.stream, BufferRef::all(*send),
                                        BufferRef::all(*recv), dtype, op);
            ASSERT_TRUE(s.ok()) << s;
            EXPECT_EQ(rank.download(*recv), wantBytes)
                << label("all_reduce", dtype, op, n, count) << " rank " << r;
          });
        }
  }
}

TEST_P(ChannelTest, ReduceScatterEveryDTypeAndOp) {
  for (int n = 1; n <= 4; ++n) {
    std::vector<Rank> ranks = makeRanks(n);
    for (DType dtype : kReducible)
      for (ReduceOp op : opsFor(dtype))
        for (int64_t count : kCounts) {
          // Each rank sends n chunks of `count` and keeps chunk `rank`.
          onEveryRank(ranks, [&](int r, Rank &rank) {
            auto send = rank.upload(encode(dtype, inputs(dtype, r, n * count)));
            auto recv = rank.upload(
                std::vector<uint8_t>(size_t(count * dtypeSize(dtype))));
            absl::Status s =
                rank.channel->reduceScatter(*rank.stream, BufferRef::all(*send),
                                            BufferRef::all(*recv), dtype, op);
            ASSERT_TRUE(s.ok()) << s;
            std::vector<double> want(static_cast<size_t>(count));
            for (int64_t i = 0; i < count; ++i)
              want[size_t(i)] = expectedReduction(dtype, op, n, r * count + i);
            EXPECT_EQ(rank.download(*recv), encode(dtype, want))
                << label("reduce_scatter", dtype, op, n, count) << " rank "
                << r;
          });
        }
  }
}

TEST_P(ChannelTest, AllGatherEveryDType) {
  for (int n = 1; n <= 4; ++n) {
    std::vector<Rank> ranks = makeRanks(n);
    for (DType dtype : kAll)
      for (int64_t count : kCounts) {
        std::vector<double> want;
        for (int r = 0; r < n; ++r)
          for (double v : inputs(dtype, r, count))
            want.push_back(v);
        onEveryRank(ranks, [&](int r, Rank &rank) {
          auto send = rank.upload(encode(dtype, inputs(dtype, r, count)));
          auto recv =
              rank.upload(std::vector<uint8_t>(size_t(send->size() * n)));
          absl::Status s = rank.channel->allGather(
              *rank.stream, BufferRef::all(*send), BufferRef::all(*recv));
          ASSERT_TRUE(s.ok()) << s;
          EXPECT_EQ(rank.download(*recv), encode(dtype, want))
              << "all_gather " << dtypeName(dtype) << " " << n << " ranks x "
              << count << " rank " << r;
        });
      }
  }
}

TEST_P(ChannelTest, BroadcastFromEveryRoot) {
  for (int n = 1; n <= 4; ++n) {
    std::vector<Rank> ranks = makeRanks(n);
    for (DType dtype : kAll)
      for (int64_t count : kCounts)
        for (int root = 0; root < n; ++root)
          onEveryRank(ranks, [&](int r, Rank &rank) {
            auto buffer = rank.upload(encode(dtype, inputs(dtype, r, count)));
            absl::Status s = rank.channel->broadcast(
                *rank.stream, BufferRef::all(*buffer), root);
            ASSERT_TRUE(s.ok()) << s;
            EXPECT_EQ(rank.download(*buffer),
                      encode(dtype, inputs(dtype, root, count)))
                << "broadcast " << dtypeName(dtype) << " from " << root
                << " of " << n << " rank " << r;
          });
  }
}

TEST_P(ChannelTest, HalfPrecisionSumsAccumulateInF32) {
  // 256 + 1 + 1 + 1: rounding to bf16 after every step stays at 256; an
  // f32 accumulator gives 259, which rounds (to even) to bf16 260. The f16
  // case: 2048 + 1 + 1 + 1 = 2051 -> f16 2052 (per step: 2048).
  std::vector<Rank> ranks = makeRanks(4);
  for (auto [dtype, big, want] : {std::tuple{DType::BF16, 256.0, 260.0},
                                  std::tuple{DType::F16, 2048.0, 2052.0}})
    onEveryRank(ranks, [&, dtype = dtype, big = big, want = want](int r,
                                                                  Rank &rank) {
      auto buffer = rank.upload(encode(dtype, {r == 0 ? big : 1.0}));
      ASSERT_TRUE(rank.channel
                      ->allReduce(*rank.stream, BufferRef::all(*buffer),
                                  BufferRef::all(*buffer), dtype, ReduceOp::Sum)
                      .ok());
      EXPECT_EQ(rank.download(*buffer), encode(dtype, {want}))
          << dtypeName(dtype);
    });
}

TEST_P(ChannelTest, IntegerSumsAndProductsWrap) {
  std::vector<Rank> ranks = makeRanks(4);
  onEveryRank(ranks, [&](int r, Rank &rank) {
    // i32: 4 x 2^30 = 2^32 wraps to 0; (2^31 - 1) + 1 + 0 + 0 to -2^31;
    // 65536^2 = 2^32 wraps to 0. i64: (2^63 - 1) + 1 wraps to -2^63.
    const int32_t maxI32 = std::numeric_limits<int32_t>::max();
    std::vector<int32_t> i32 = {1 << 30,
                                r == 0   ? maxI32
                                : r == 1 ? 1
                                         : 0,
                                r < 2 ? 65536 : 1};
    std::vector<uint8_t> bytes(12);
    std::memcpy(bytes.data(), i32.data(), 12);
    auto a = rank.upload(bytes);
    ASSERT_TRUE(rank.channel
                    ->allReduce(*rank.stream, BufferRef{a.get(), 0, 8},
                                BufferRef{a.get(), 0, 8}, DType::I32,
                                ReduceOp::Sum)
                    .ok());
    ASSERT_TRUE(rank.channel
                    ->allReduce(*rank.stream, BufferRef{a.get(), 8, 4},
                                BufferRef{a.get(), 8, 4}, DType::I32,
                                ReduceOp::Prod)
                    .ok());
    std::vector<uint8_t> got = rank.download(*a);
    int32_t out[3];
    std::memcpy(out, got.data(), 12);
    EXPECT_EQ(out[0], 0);
    EXPECT_EQ(out[1], std::numeric_limits<int32_t>::min());
    EXPECT_EQ(out[2], 0);
    int64_t v = r == 0 ? std::numeric_limits<int64_t>::max() : r == 1 ? 1 : 0;
    std::vector<uint8_t> b8(8);
    std::memcpy(b8.data(), &v, 8);
    auto b = rank.upload(b8);
    ASSERT_TRUE(rank.channel
                    ->allReduce(*rank.stream, BufferRef::all(*b),
                                BufferRef::all(*b), DType::I64, ReduceOp::Sum)
                    .ok());
    got = rank.download(*b);
    std::memcpy(&v, got.data(), 8);
    EXPECT_EQ(v, std::numeric_limits<int64_t>::min());
  });
}

TEST_P(ChannelTest, MinAndMaxPropagateNaN) {
  std::vector<Rank> ranks = makeRanks(3);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (ReduceOp op : {ReduceOp::Min, ReduceOp::Max})
    onEveryRank(ranks, [&](int r, Rank &rank) {
      // Element 0 is NaN on rank 1 only; element 1 never.
      auto buffer =
          rank.upload(encode(DType::F32, {r == 1 ? nan : r, -r * 1.0}));
      ASSERT_TRUE(rank.channel
                      ->allReduce(*rank.stream, BufferRef::all(*buffer),
                                  BufferRef::all(*buffer), DType::F32, op)
                      .ok());
      std::vector<uint8_t> got = rank.download(*buffer);
      float out[2];
      std::memcpy(out, got.data(), 8);
      EXPECT_TRUE(std::isnan(out[0])) << reduceOpName(op);
      EXPECT_EQ(out[1], op == ReduceOp::Min ? -2.0f : 0.0f);
    });
}

TEST_P(ChannelTest, InPlaceAndOffsetRanges) {
  // send and recv overlap on every rank: the result is still the reduction
  // of the inputs, not of partly written outputs.
  std::vector<Rank> ranks = makeRanks(3);
  onEveryRank(ranks, [&](int r, Rank &rank) {
    std::vector<double> v = inputs(DType::F32, r, 9);
    auto buffer = rank.upload(encode(DType::F32, v));
    // all_gather of elements [6, 9) into [0, 9) (recv covers send).
    ASSERT_TRUE(rank.channel
                    ->allGather(*rank.stream, BufferRef{buffer.get(), 24, 12},
                                BufferRef::all(*buffer))
                    .ok());
    std::vector<double> want;
    for (int q = 0; q < 3; ++q)
      for (int i = 6; i < 9; ++i)
        want.push_back(inputValue(DType::F32, q, i));
    EXPECT_EQ(rank.download(*buffer), encode(DType::F32, want));
  });
}

TEST_P(ChannelTest, SplitMakesSubgroupsRankedByKey) {
  std::vector<Rank> ranks = makeRanks(4);
  onEveryRank(ranks, [&](int r, Rank &rank) {
    // Colors {0, 2} and {1, 3}; keys reverse the order inside each.
    auto sub = rank.channel->split(r % 2, -r);
    ASSERT_TRUE(sub.ok()) << sub.status();
    EXPECT_EQ((*sub)->size(), 2);
    EXPECT_EQ((*sub)->rank(), r < 2 ? 1 : 0);
    auto send = rank.upload(encode(DType::I32, {double(r)}));
    auto recv = rank.upload(std::vector<uint8_t>(8));
    ASSERT_TRUE((*sub)
                    ->allGather(*rank.stream, BufferRef::all(*send),
                                BufferRef::all(*recv))
                    .ok());
    EXPECT_EQ(rank.download(*recv),
              encode(DType::I32, {double(r % 2 + 2), double(r % 2)}));
    // The parent still works after the split.
    ASSERT_TRUE(rank.channel
                    ->allReduce(*rank.stream, BufferRef::all(*send),
                                BufferRef::all(*send), DType::I32,
                                ReduceOp::Sum)
                    .ok());
    EXPECT_EQ(rank.download(*send), encode(DType::I32, {6}));
  });
}

TEST_P(ChannelTest, RanksMayShareOneDevice) {
  if (nccl())
    GTEST_SKIP() << "NCCL refuses two ranks on one GPU";
  auto device = builtinDrivers().createDevice(GetParam(), {});
  ASSERT_TRUE(device.ok());
  InProcessChannelProvider provider(2, kTestTimeout);
  std::vector<Rank> ranks(2);
  for (int r = 0; r < 2; ++r) {
    ranks[r].stream = *(*device)->createStream();
    ranks[r].channel = *(*device)->createChannel(*provider.spec(r));
  }
  std::vector<std::unique_ptr<Buffer>> buffers(2);
  onEveryRank(ranks, [&](int r, Rank &rank) {
    auto buffer = (*device)->allocate(4);
    float v = r + 1.5f;
    ASSERT_TRUE(rank.stream->writeBuffer(&v, BufferRef::all(**buffer)).ok());
    ASSERT_TRUE(rank.channel
                    ->allReduce(*rank.stream, BufferRef::all(**buffer),
                                BufferRef::all(**buffer), DType::F32,
                                ReduceOp::Sum)
                    .ok());
    ASSERT_TRUE(rank.stream->readBuffer(BufferRef::all(**buffer), &v).ok());
    EXPECT_EQ(v, 4.0f);
    buffers[r] = std::move(*buffer);
  });
}

//===--- Specs ------------------------------------------------------------===//

TEST_P(ChannelTest, SpecErrorsAreOneLine) {
  if (nccl())
    GTEST_SKIP() << "the in-process group's specs (NcclChannelTest checks "
                    "the NCCL provider's)";
  auto device = *builtinDrivers().createDevice(GetParam(), {});
  auto error = [&](const ChannelSpec &spec) {
    auto channel = device->createChannel(spec);
    EXPECT_FALSE(channel.ok());
    return std::string(channel.status().message());
  };
  InProcessChannelProvider three(3, kTestTimeout);
  ChannelSpec spec = *three.spec(1);
  spec.size = 0;
  EXPECT_EQ(error(spec), "channel spec: size = 0 but a group has >= 1 ranks");
  spec = *three.spec(1);
  spec.rank = 3;
  EXPECT_EQ(error(spec),
            "channel spec: rank = 3 but expected 0..2 for a group of 3");
  spec.rank = -1;
  EXPECT_EQ(error(spec),
            "channel spec: rank = -1 but expected 0..2 for a group of 3");
  spec = *three.spec(1);
  spec.size = 2;
  EXPECT_EQ(error(spec),
            "channel spec: size = 2 but its in-process group has 3 ranks");
  EXPECT_EQ(error(ChannelSpec{0, 2, nullptr}),
            "channel spec: size = 2 without a bootstrap; only a loopback "
            "channel (size 1) needs none");
  auto first = device->createChannel(*three.spec(2));
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(error(*three.spec(2)),
            "channel spec: rank 2 of this group already has a channel");

  struct Foreign final : Bootstrap {
    absl::string_view kind() const override { return "mpi"; }
    int size() const override { return 1; }
  };
  auto foreign =
      device->createChannel(ChannelSpec{0, 1, std::make_shared<Foreign>()});
  EXPECT_EQ(foreign.status().code(), absl::StatusCode::kUnimplemented);

  EXPECT_EQ(three.spec(3).status().message(),
            "rank 3 of an in-process group of 3 ranks (expected 0..2)");
  EXPECT_EQ(LoopbackChannelProvider().spec(1).status().message(),
            "rank 1 of a loopback channel, which has only rank 0");
  EXPECT_FALSE(InProcessChannelProvider(0).spec(0).ok());
}

TEST_P(ChannelTest, LoopbackIsAGroupOfOne) {
  auto device = *builtinDrivers().createDevice(GetParam(), {});
  auto stream = *device->createStream();
  auto channel = device->createChannel(*LoopbackChannelProvider().spec(0));
  ASSERT_TRUE(channel.ok());
  EXPECT_EQ((*channel)->rank(), 0);
  EXPECT_EQ((*channel)->size(), 1);
  auto buffer = *device->allocate(8);
  auto other = *device->allocate(8);
  float v[2] = {1.5f, -2};
  ASSERT_TRUE(stream->writeBuffer(v, BufferRef::all(*buffer)).ok());
  ASSERT_TRUE((*channel)
                  ->reduceScatter(*stream, BufferRef::all(*buffer),
                                  BufferRef::all(*other), DType::F32,
                                  ReduceOp::Mean)
                  .ok());
  float out[2];
  ASSERT_TRUE(stream->readBuffer(BufferRef::all(*other), out).ok());
  // (A GPU's stream copies back asynchronously: Stream.h.)
  ASSERT_TRUE(stream->synchronize().ok());
  EXPECT_EQ(out[0], 1.5f);
  EXPECT_EQ(out[1], -2.0f);
  absl::Status s = (*channel)->broadcast(*stream, BufferRef::all(*buffer), 1);
  EXPECT_EQ(s.message(), "broadcast: root = 1 but the channel has ranks 0..0");
}

//===--- Failures: every rank returns, none hangs -------------------------===//
// These check the in-process group's errors, which a collective call
// returns. An NCCL group fails asynchronously, with its own messages
// (NcclChannel.h: the watchdog, ncclCommAbort); the cuda instances skip
// them, and test/omnic/cuda-host-*.test check NCCL's failures whole.

#define SKIP_FOR_NCCL()                                                        \
  if (nccl())                                                                  \
  GTEST_SKIP() << "an NCCL group fails asynchronously (NcclChannel.h)"

TEST_P(ChannelTest, AbortFailsTheOtherRanks) {
  SKIP_FOR_NCCL();
  std::vector<Rank> ranks = makeRanks(3);
  std::vector<absl::Status> results(3);
  onEveryRank(ranks, [&](int r, Rank &rank) {
    auto buffer = rank.upload(std::vector<uint8_t>(4));
    if (r == 1) {
      rank.channel->abort(absl::InternalError("the reward server is down"));
      return;
    }
    results[r] = rank.channel->allReduce(*rank.stream, BufferRef::all(*buffer),
                                         BufferRef::all(*buffer), DType::F32,
                                         ReduceOp::Sum);
  });
  for (int r : {0, 2}) {
    EXPECT_EQ(results[r].code(), absl::StatusCode::kAborted);
    EXPECT_EQ(results[r].message(), "the channel group was aborted by rank 1: "
                                    "the reward server is down");
  }
}

TEST_P(ChannelTest, MismatchedCollectivesFailEveryRank) {
  SKIP_FOR_NCCL();
  std::vector<Rank> ranks = makeRanks(2);
  std::vector<absl::Status> results(2);
  onEveryRank(ranks, [&](int r, Rank &rank) {
    auto buffer = rank.upload(std::vector<uint8_t>(16));
    BufferRef ref{buffer.get(), 0, r == 0 ? 16 : 12};
    results[r] = rank.channel->allReduce(*rank.stream, ref, ref, DType::F32,
                                         ReduceOp::Sum);
  });
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(results[r].message(),
              "the ranks submitted different collectives: rank 0 all_reduce "
              "sum of 16 bytes of f32 into 16, rank 1 all_reduce sum of 12 "
              "bytes of f32 into 12")
        << r;
}

TEST_P(ChannelTest, ABadBufferOnOneRankFailsEveryRank) {
  SKIP_FOR_NCCL();
  std::vector<Rank> ranks = makeRanks(2);
  std::vector<absl::Status> results(2);
  onEveryRank(ranks, [&](int r, Rank &rank) {
    auto send = rank.upload(std::vector<uint8_t>(8));
    auto recv = rank.upload(std::vector<uint8_t>(r == 0 ? 4 : 16));
    results[r] = rank.channel->allGather(*rank.stream, BufferRef::all(*send),
                                         BufferRef::all(*recv));
  });
  EXPECT_EQ(results[0].code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(results[0].message(), "all_gather: send is 8 bytes and recv 4 but "
                                  "expected recv = 2 x send");
  EXPECT_EQ(results[1].code(), absl::StatusCode::kAborted);
  EXPECT_EQ(results[1].message(),
            "the channel group was aborted by rank 0: all_gather: send is 8 "
            "bytes and recv 4 but expected recv = 2 x send");
}

TEST_P(ChannelTest, ReductionsRefuseI1AndIntegerMeans) {
  SKIP_FOR_NCCL();
  // Each error fails its group; a fresh group per case.
  for (auto [dtype, op, message] :
       {std::tuple{DType::I1, ReduceOp::Max,
                   "all_reduce: i1 tensors cannot be reduced (only gathered "
                   "and broadcast)"},
        std::tuple{DType::I32, ReduceOp::Mean,
                   "all_reduce: mean of i32 (expected a float dtype)"}}) {
    std::vector<Rank> ranks = makeRanks(1);
    Rank &rank = ranks[0];
    auto buffer = rank.upload(std::vector<uint8_t>(8));
    BufferRef ref = BufferRef::all(*buffer);
    EXPECT_EQ(
        rank.channel->allReduce(*rank.stream, ref, ref, dtype, op).message(),
        message);
  }
}

TEST_P(ChannelTest, AClosedChannelFailsTheOthers) {
  std::vector<Rank> ranks = makeRanks(2);
  ranks[1].channel.reset();
  auto buffer = ranks[0].upload(std::vector<uint8_t>(4));
  absl::Status s =
      ranks[0].channel->broadcast(*ranks[0].stream, BufferRef::all(*buffer), 0);
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(s.message(), "rank 1 closed its channel");
}

TEST_P(ChannelTest, ARankThatNeverComesTimesOut) {
  SKIP_FOR_NCCL();
  // Rank 1 never submits: rank 0 gives up after the group's timeout and
  // the group stays failed for rank 1 too. (The outcome does not depend
  // on timing: rank 1 never arrives.)
  std::vector<Rank> ranks = makeRanks(2, std::chrono::milliseconds(50));
  auto buffer = ranks[0].upload(std::vector<uint8_t>(4));
  absl::Status s = ranks[0].channel->allReduce(
      *ranks[0].stream, BufferRef::all(*buffer), BufferRef::all(*buffer),
      DType::F32, ReduceOp::Sum);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(s.message(), "rank 0 waited 50 ms in all_reduce for rank 1 of 2");
  auto other = ranks[1].upload(std::vector<uint8_t>(4));
  absl::Status late =
      ranks[1].channel->broadcast(*ranks[1].stream, BufferRef::all(*other), 0);
  EXPECT_EQ(late.message(), s.message());
}

//===--- Failures of an NCCL group ----------------------------------------===//
// NcclChannel.h: an abort or a collective past the group's timeout fails
// the group; a collective already submitted leaves its result undefined
// and the stream does not fail, so the failure reaches every local rank
// at its next collective, with the same line.

#define ONLY_FOR_NCCL()                                                        \
  if (!nccl())                                                                 \
  GTEST_SKIP() << "the NCCL group's form of a test above"

TEST_P(ChannelTest, AnAbortFailsTheNcclGroupsNextCollectives) {
  ONLY_FOR_NCCL();
  std::vector<Rank> ranks = makeRanks(3);
  ranks[1].channel->abort(absl::InternalError("the reward server is down"));
  onEveryRank(ranks, [&](int r, Rank &rank) {
    auto buffer = rank.upload(std::vector<uint8_t>(4));
    absl::Status s = rank.channel->allReduce(
        *rank.stream, BufferRef::all(*buffer), BufferRef::all(*buffer),
        DType::F32, ReduceOp::Sum);
    EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << r;
    EXPECT_EQ(s.message(), "the reward server is down") << r;
    // The stream still works.
    EXPECT_EQ(rank.download(*buffer), std::vector<uint8_t>(4)) << r;
  });
}

TEST_P(ChannelTest, AnNcclCollectiveThatNobodyJoinsTimesOut) {
  ONLY_FOR_NCCL();
  // Rank 1 never submits: rank 0's collective is submitted, waits on its
  // GPU, and the watchdog aborts the group after 50 ms; the stream's
  // synchronization returns once the abort ended the collective, and every
  // later collective fails. (The outcome does not depend on timing: rank 1
  // never arrives.)
  std::vector<Rank> ranks = makeRanks(2, std::chrono::milliseconds(50));
  auto buffer = ranks[0].upload(std::vector<uint8_t>(4));
  ASSERT_TRUE(ranks[0]
                  .channel
                  ->allReduce(*ranks[0].stream, BufferRef::all(*buffer),
                              BufferRef::all(*buffer), DType::F32,
                              ReduceOp::Sum)
                  .ok());
  EXPECT_TRUE(ranks[0].stream->synchronize().ok());
  const std::string line = "rank 0: nccl all_reduce did not complete within "
                           "50 ms (a rank did not arrive or died; "
                           "--collective-timeout)";
  for (int r = 0; r < 2; ++r) {
    absl::Status s = ranks[r].channel->broadcast(*ranks[r].stream,
                                                 BufferRef::all(*buffer), 0);
    EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << r;
    EXPECT_EQ(s.message(), line) << r;
  }
}

std::string driverName(const ::testing::TestParamInfo<std::string> &info) {
  return info.param;
}

INSTANTIATE_TEST_SUITE_P(Drivers, ChannelTest,
                         ::testing::ValuesIn(builtinDrivers().names()),
                         driverName);

} // namespace
} // namespace omni::hal
