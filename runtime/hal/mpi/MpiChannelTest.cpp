//===- MpiChannelTest.cpp - The MPI channel, one rank a process -*- C++ -*-===//
//
// Runs under `mpirun -np N` (ctest: N = 2 and 4); every process is one rank
// with its own cpu device. Checks each collective against values computed
// here from the inputs (small multiples of 1/4, so sums and products are
// exact and the expected element is the exact result rounded once), that
// the results equal the in-process cpu channel's bit for bit on inputs
// whose sums do round (this process replays all N ranks as threads), split
// groups, and that errors (a mismatch, a bad buffer on one rank, i1
// reductions, another rank's spec) fail every rank with one line and hang
// none.
//
//===----------------------------------------------------------------------===//

#include "runtime/hal/mpi/MpiChannel.h"

#include "runtime/hal/InProcessGroup.h"
#include "runtime/hal/drivers/Drivers.h"
#include "runtime/io/ElementCodec.h"

#include "gtest/gtest.h"

#include <array>
#include <cmath>
#include <cstring>
#include <thread>

namespace omni::hal::mpi {
namespace {

MpiChannelProvider &provider() {
  static MpiChannelProvider *p = [] {
    auto made = MpiChannelProvider::create();
    if (!made.ok()) {
      ADD_FAILURE() << made.status();
      std::abort();
    }
    return made->release();
  }();
  return *p;
}

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

/// Element i of `rank`'s exact input.
double inputValue(DType dtype, int rank, int64_t i) {
  int64_t k = (rank * 5 + i * 3 + 2) % 13 - 6; // -6..6
  if (isFloatDType(dtype))
    return k * 0.25;
  if (dtype == DType::I1)
    return (rank + i) % 2;
  return static_cast<double>((rank * 31 + i * 7) % 151 - 75);
}

std::vector<double> inputs(DType dtype, int rank, int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[size_t(i)] = inputValue(dtype, rank, i);
  return v;
}

double expected(DType dtype, ReduceOp op, int ranks, int64_t i) {
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
  if (op == ReduceOp::Mean)
    acc = dtype == DType::F64 ? acc / ranks
                              : static_cast<float>(acc) / float(ranks);
  return acc;
}

/// One rank: a cpu device, its stream and a channel.
struct Rank {
  std::unique_ptr<Device> device;
  std::unique_ptr<Stream> stream;
  std::unique_ptr<Channel> channel;

  explicit Rank(const ChannelSpec &spec) {
    DeviceOptions options;
    options.threads = 1;
    device = *builtinDrivers().createDevice("cpu", options);
    stream = *device->createStream();
    auto made = device->createChannel(spec);
    EXPECT_TRUE(made.ok()) << made.status();
    if (made.ok())
      channel = std::move(*made);
  }
  std::unique_ptr<Buffer> upload(const std::vector<uint8_t> &bytes) {
    auto buffer = *device->allocate(int64_t(bytes.size()));
    EXPECT_TRUE(
        stream->writeBuffer(bytes.data(), BufferRef::all(*buffer)).ok());
    return buffer;
  }
  std::vector<uint8_t> download(Buffer &buffer) {
    std::vector<uint8_t> bytes(static_cast<size_t>(buffer.size()));
    EXPECT_TRUE(stream->readBuffer(BufferRef::all(buffer), bytes.data()).ok());
    return bytes;
  }
};

Rank mpiRank() { return Rank(*provider().spec(provider().rank())); }

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

TEST(MpiChannel, ProviderDescribesTheWorld) {
  MpiChannelProvider &p = provider();
  EXPECT_GE(p.size(), 2);
  EXPECT_EQ(std::to_string(p.size()),
            std::string(std::getenv("OMPI_COMM_WORLD_SIZE")));
  EXPECT_EQ(std::to_string(p.rank()),
            std::string(std::getenv("OMPI_COMM_WORLD_RANK")));
  EXPECT_TRUE(launchedByMpi());
  Rank rank = mpiRank();
  ASSERT_TRUE(rank.channel);
  EXPECT_EQ(rank.channel->rank(), p.rank());
  EXPECT_EQ(rank.channel->size(), p.size());
}

TEST(MpiChannel, AllReduceEveryDTypeAndOp) {
  Rank rank = mpiRank();
  const int n = provider().size(), r = provider().rank();
  for (DType dtype : kReducible)
    for (ReduceOp op : opsFor(dtype))
      for (int64_t count : kCounts) {
        std::vector<double> want(static_cast<size_t>(count));
        for (int64_t i = 0; i < count; ++i)
          want[size_t(i)] = expected(dtype, op, n, i);
        auto send = rank.upload(encode(dtype, inputs(dtype, r, count)));
        auto recv = rank.upload(std::vector<uint8_t>(send->size()));
        absl::Status s =
            rank.channel->allReduce(*rank.stream, BufferRef::all(*send),
                                    BufferRef::all(*recv), dtype, op);
        ASSERT_TRUE(s.ok()) << s;
        EXPECT_EQ(rank.download(*recv), encode(dtype, want))
            << reduceOpName(op) << " " << dtypeName(dtype) << " x " << count;
      }
}

TEST(MpiChannel, ReduceScatterEveryDTypeAndOp) {
  Rank rank = mpiRank();
  const int n = provider().size(), r = provider().rank();
  for (DType dtype : kReducible)
    for (ReduceOp op : opsFor(dtype))
      for (int64_t count : kCounts) {
        auto send = rank.upload(encode(dtype, inputs(dtype, r, n * count)));
        auto recv =
            rank.upload(std::vector<uint8_t>(size_t(count * dtypeSize(dtype))));
        absl::Status s =
            rank.channel->reduceScatter(*rank.stream, BufferRef::all(*send),
                                        BufferRef::all(*recv), dtype, op);
        ASSERT_TRUE(s.ok()) << s;
        std::vector<double> want(static_cast<size_t>(count));
        for (int64_t i = 0; i < count; ++i)
          want[size_t(i)] = expected(dtype, op, n, r * count + i);
        EXPECT_EQ(rank.download(*recv), encode(dtype, want))
            << reduceOpName(op) << " " << dtypeName(dtype) << " x " << count;
      }
}

TEST(MpiChannel, AllGatherEveryDType) {
  Rank rank = mpiRank();
  const int n = provider().size(), r = provider().rank();
  for (DType dtype : kAll)
    for (int64_t count : kCounts) {
      std::vector<double> want;
      for (int q = 0; q < n; ++q)
        for (double v : inputs(dtype, q, count))
          want.push_back(v);
      auto send = rank.upload(encode(dtype, inputs(dtype, r, count)));
      auto recv = rank.upload(std::vector<uint8_t>(size_t(send->size() * n)));
      absl::Status s = rank.channel->allGather(
          *rank.stream, BufferRef::all(*send), BufferRef::all(*recv));
      ASSERT_TRUE(s.ok()) << s;
      EXPECT_EQ(rank.download(*recv), encode(dtype, want))
          << dtypeName(dtype) << " x " << count;
    }
}

TEST(MpiChannel, BroadcastFromEveryRoot) {
  Rank rank = mpiRank();
  const int n = provider().size(), r = provider().rank();
  for (DType dtype : kAll)
    for (int root = 0; root < n; ++root) {
      auto buffer = rank.upload(encode(dtype, inputs(dtype, r, 7)));
      absl::Status s =
          rank.channel->broadcast(*rank.stream, BufferRef::all(*buffer), root);
      ASSERT_TRUE(s.ok()) << s;
      EXPECT_EQ(rank.download(*buffer), encode(dtype, inputs(dtype, root, 7)))
          << dtypeName(dtype) << " from " << root;
    }
}

TEST(MpiChannel, InPlaceCalls) {
  Rank rank = mpiRank();
  const int n = provider().size(), r = provider().rank();
  // all_reduce with send == recv.
  auto buffer = rank.upload(encode(DType::F32, inputs(DType::F32, r, 5)));
  ASSERT_TRUE(rank.channel
                  ->allReduce(*rank.stream, BufferRef::all(*buffer),
                              BufferRef::all(*buffer), DType::F32,
                              ReduceOp::Sum)
                  .ok());
  std::vector<double> want;
  for (int64_t i = 0; i < 5; ++i)
    want.push_back(expected(DType::F32, ReduceOp::Sum, n, i));
  EXPECT_EQ(rank.download(*buffer), encode(DType::F32, want));
  // all_gather of this rank's slot of recv (send inside recv).
  std::vector<double> mine(size_t(3 * n), -1.0);
  for (int i = 0; i < 3; ++i)
    mine[size_t(r * 3 + i)] = inputValue(DType::F32, r, i);
  auto gather = rank.upload(encode(DType::F32, mine));
  ASSERT_TRUE(rank.channel
                  ->allGather(*rank.stream,
                              BufferRef{gather.get(), int64_t(r) * 12, 12},
                              BufferRef::all(*gather))
                  .ok());
  want.clear();
  for (int q = 0; q < n; ++q)
    for (int i = 0; i < 3; ++i)
      want.push_back(inputValue(DType::F32, q, i));
  EXPECT_EQ(rank.download(*gather), encode(DType::F32, want));
}

/// Inputs whose sums and means round: the order and type of accumulation
/// show in the bits.
std::vector<double> roundingInputs(int rank, int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[size_t(i)] = std::sin(double(rank * 1009 + i) * 0.37) *
                   std::pow(10.0, double((rank + i) % 7) - 3.0);
  return v;
}

TEST(MpiChannel, EqualsTheInProcessChannelBitForBit) {
  Rank rank = mpiRank();
  const int n = provider().size(), me = provider().rank();
  const int64_t count = 3001; // several reduction chunks, uneven
  for (DType dtype : {DType::F32, DType::F64, DType::F16, DType::BF16})
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Prod})
      for (bool scatter : {false, true}) {
        const int64_t sendCount = scatter ? n * count : count;
        const int64_t recvBytes = count * dtypeSize(dtype);
        auto run = [&](Rank &who, int r) {
          auto send = who.upload(encode(dtype, roundingInputs(r, sendCount)));
          auto recv = who.upload(std::vector<uint8_t>(size_t(recvBytes)));
          absl::Status s =
              scatter
                  ? who.channel->reduceScatter(*who.stream,
                                               BufferRef::all(*send),
                                               BufferRef::all(*recv), dtype, op)
                  : who.channel->allReduce(*who.stream, BufferRef::all(*send),
                                           BufferRef::all(*recv), dtype, op);
          EXPECT_TRUE(s.ok()) << s;
          return who.download(*recv);
        };
        std::vector<uint8_t> viaMpi = run(rank, me);
        // The same collective among n threads of this process.
        InProcessChannelProvider local(n, std::chrono::seconds(60));
        std::vector<std::unique_ptr<Rank>> threads;
        for (int r = 0; r < n; ++r)
          threads.push_back(std::make_unique<Rank>(*local.spec(r)));
        std::vector<std::vector<uint8_t>> viaThreads(static_cast<size_t>(n));
        std::vector<std::thread> workers;
        for (int r = 0; r < n; ++r)
          workers.emplace_back(
              [&, r] { viaThreads[size_t(r)] = run(*threads[size_t(r)], r); });
        for (std::thread &t : workers)
          t.join();
        EXPECT_EQ(viaMpi, viaThreads[size_t(me)])
            << (scatter ? "reduce_scatter " : "all_reduce ") << reduceOpName(op)
            << " " << dtypeName(dtype);
      }
}

TEST(MpiChannel, SplitMakesSubgroupsRankedByKey) {
  Rank rank = mpiRank();
  const int n = provider().size(), r = provider().rank();
  // Colors by parity; keys reverse the order inside each color.
  auto sub = rank.channel->split(r % 2, -r);
  ASSERT_TRUE(sub.ok()) << sub.status();
  std::vector<int> members;
  for (int q = n - 1; q >= 0; --q)
    if (q % 2 == r % 2)
      members.push_back(q);
  ASSERT_EQ((*sub)->size(), int(members.size()));
  EXPECT_EQ(members[size_t((*sub)->rank())], r);
  auto send = rank.upload(encode(DType::I32, {double(r)}));
  auto recv = rank.upload(std::vector<uint8_t>(4 * members.size()));
  ASSERT_TRUE((*sub)
                  ->allGather(*rank.stream, BufferRef::all(*send),
                              BufferRef::all(*recv))
                  .ok());
  std::vector<double> want(members.begin(), members.end());
  EXPECT_EQ(rank.download(*recv), encode(DType::I32, want));
  // The parent still works after the split: the sum of 0..n-1.
  ASSERT_TRUE(rank.channel
                  ->allReduce(*rank.stream, BufferRef::all(*send),
                              BufferRef::all(*send), DType::I32, ReduceOp::Sum)
                  .ok());
  EXPECT_EQ(rank.download(*send),
            encode(DType::I32, {double(n * (n - 1) / 2)}));
  // A negative color fails every rank of the parent.
  auto bad = rank.channel->split(r == 0 ? -1 : 0, 0);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            r == 0 ? "split: color = -1 but it must be >= 0"
                   : "the channel group was aborted by rank 0: split: color "
                     "= -1 but it must be >= 0");
}

TEST(MpiChannel, MismatchedCollectivesFailEveryRank) {
  Rank rank = mpiRank();
  const int r = provider().rank();
  auto buffer = rank.upload(std::vector<uint8_t>(16));
  BufferRef ref{buffer.get(), 0, r == 0 ? 16 : 12};
  absl::Status s = rank.channel->allReduce(*rank.stream, ref, ref, DType::F32,
                                           ReduceOp::Sum);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "the ranks submitted different collectives: rank 0 all_reduce "
            "sum of 16 bytes of f32 into 16, rank 1 all_reduce sum of 12 "
            "bytes of f32 into 12");
  // The channel stays failed; nobody waits for a collective.
  absl::Status again = rank.channel->broadcast(*rank.stream, ref, 0);
  EXPECT_EQ(again, s);
}

TEST(MpiChannel, ABadBufferOnOneRankFailsEveryRank) {
  Rank rank = mpiRank();
  const int n = provider().size(), r = provider().rank();
  auto send = rank.upload(std::vector<uint8_t>(8));
  auto recv = rank.upload(std::vector<uint8_t>(r == 1 ? 4 : size_t(8 * n)));
  absl::Status s = rank.channel->allGather(*rank.stream, BufferRef::all(*send),
                                           BufferRef::all(*recv));
  const std::string why = absl::StrCat(
      "all_gather: send is 8 bytes and recv 4 but expected recv = ", n,
      " x send");
  if (r == 1) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(), why);
  } else {
    EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
    EXPECT_EQ(s.message(), "the channel group was aborted by rank 1: " + why);
  }
}

TEST(MpiChannel, ReductionsRefuseI1AndIntegerMeans) {
  for (auto [dtype, op, message] :
       {std::tuple{DType::I1, ReduceOp::Max,
                   "all_reduce: i1 tensors cannot be reduced (only gathered "
                   "and broadcast)"},
        std::tuple{DType::I32, ReduceOp::Mean,
                   "all_reduce: mean of i32 (expected a float dtype)"}}) {
    Rank rank = mpiRank();
    auto buffer = rank.upload(std::vector<uint8_t>(8));
    absl::Status s =
        rank.channel->allReduce(*rank.stream, BufferRef::all(*buffer),
                                BufferRef::all(*buffer), dtype, op);
    // Every rank fails itself (the lowest rank's reason is the others').
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(), message);
  }
}

TEST(MpiChannel, SpecsAreThisProcesssOnly) {
  MpiChannelProvider &p = provider();
  const int other = (p.rank() + 1) % p.size();
  auto spec = p.spec(other);
  ASSERT_FALSE(spec.ok());
  EXPECT_EQ(spec.status().message(),
            absl::StrCat("rank ", other, " of an MPI group of ", p.size(),
                         ": this process is rank ", p.rank(),
                         " and makes only its own channel spec"));
  // A spec of another rank is refused by the bootstrap too.
  ChannelSpec forged = *p.spec(p.rank());
  forged.rank = other;
  auto device = *builtinDrivers().createDevice("cpu", {});
  auto channel = device->createChannel(forged);
  ASSERT_FALSE(channel.ok());
  EXPECT_EQ(channel.status().message(),
            absl::StrCat("a channel for MPI rank ", other,
                         " in the process of rank ", p.rank(),
                         " (each process makes only its own rank's channel)"));
}

TEST(MpiChannel, BroadcastGivesEveryProcessTheRootsBytes) {
  // How `mpirun ... omnirun --gpus 8` agrees on one ncclUniqueId: the
  // root's 128 bytes reach every process, whatever each held before.
  const MpiChannelProvider &p = provider();
  for (int root = 0; root < p.size(); ++root) {
    std::array<char, 128> bytes;
    for (size_t i = 0; i < bytes.size(); ++i)
      bytes[i] = static_cast<char>(p.rank() * 31 + i);
    ASSERT_TRUE(p.broadcast(bytes.data(), bytes.size(), root).ok());
    for (size_t i = 0; i < bytes.size(); ++i)
      ASSERT_EQ(bytes[i], static_cast<char>(root * 31 + i)) << i;
  }
  EXPECT_EQ(p.broadcast(nullptr, 0, p.size()).message(),
            absl::StrCat("rank ", p.rank(),
                         ": MPI broadcast of 0 bytes from "
                         "rank ",
                         p.size(),
                         " (expected at most 2147483647 "
                         "bytes from a rank in 0..",
                         p.size() - 1, ")"));
}

} // namespace
} // namespace omni::hal::mpi
