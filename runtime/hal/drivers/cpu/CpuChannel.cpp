//===- CpuChannel.cpp - Collectives between host threads --------*- C++ -*-===//

#include "runtime/hal/drivers/cpu/CpuChannel.h"

#include "runtime/base/CheckedMath.h"
#include "runtime/base/Status.h"
#include "runtime/hal/HostCollectives.h"
#include "runtime/hal/drivers/cpu/CpuDevice.h"

#include "absl/strings/str_cat.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

namespace omni::hal::cpu {

enum class CollectiveKind {
  AllReduce,
  AllGather,
  ReduceScatter,
  Broadcast,
  Split
};

/// What one rank submitted; the ranks read each other's posts between the
/// two rendezvous of a collective.
struct CpuChannel::Post {
  CollectiveKind kind;
  DType dtype = DType::F32;
  ReduceOp op = ReduceOp::Sum;
  int64_t sendBytes = 0, recvBytes = 0;
  int root = 0;
  int color = 0, key = 0;
  const uint8_t *data = nullptr;
};

namespace {

const char *kindName(CollectiveKind kind) {
  switch (kind) {
  case CollectiveKind::AllReduce:
    return "all_reduce";
  case CollectiveKind::AllGather:
    return "all_gather";
  case CollectiveKind::ReduceScatter:
    return "reduce_scatter";
  case CollectiveKind::Broadcast:
    return "broadcast";
  case CollectiveKind::Split:
    return "split";
  }
  return "?";
}

std::string describe(const CpuChannel::Post &p) {
  switch (p.kind) {
  case CollectiveKind::AllReduce:
  case CollectiveKind::ReduceScatter:
    return absl::StrCat(kindName(p.kind), " ", reduceOpName(p.op), " of ",
                        p.sendBytes, " bytes of ", dtypeName(p.dtype), " into ",
                        p.recvBytes);
  case CollectiveKind::AllGather:
    return absl::StrCat("all_gather of ", p.sendBytes, " bytes into ",
                        p.recvBytes);
  case CollectiveKind::Broadcast:
    return absl::StrCat("broadcast of ", p.sendBytes, " bytes from rank ",
                        p.root);
  case CollectiveKind::Split:
    return "split";
  }
  return "?";
}

bool samePost(const CpuChannel::Post &a, const CpuChannel::Post &b) {
  if (a.kind != b.kind)
    return false;
  switch (a.kind) {
  case CollectiveKind::Split:
    return true;
  case CollectiveKind::AllGather:
    return a.sendBytes == b.sendBytes && a.recvBytes == b.recvBytes;
  case CollectiveKind::Broadcast:
    return a.sendBytes == b.sendBytes && a.root == b.root;
  default:
    return a.dtype == b.dtype && a.op == b.op && a.sendBytes == b.sendBytes &&
           a.recvBytes == b.recvBytes;
  }
}

/// The bytes of `ref`, a range of a buffer of `device`.
absl::StatusOr<uint8_t *> resolveOn(const CpuDevice &device, BufferRef ref,
                                    const char *what) {
  if (!ref.buffer)
    return absl::InvalidArgumentError(absl::StrCat(what, " has no buffer"));
  if (&ref.buffer->device() != static_cast<const Device *>(&device))
    return absl::InvalidArgumentError(absl::StrCat(
        what, " is a buffer of another device than the channel's"));
  if (!rangeInside(ref.offset, ref.length, ref.buffer->size()))
    return absl::InvalidArgumentError(absl::StrCat(
        what, " range [", ref.offset, ", +", ref.length,
        ") is outside its buffer of ", ref.buffer->size(), " bytes"));
  return static_cast<CpuBuffer *>(ref.buffer)->data() + ref.offset;
}

} // namespace

absl::StatusOr<std::unique_ptr<Channel>>
CpuChannel::create(CpuDevice &device, const ChannelSpec &spec) {
  OMNI_RETURN_IF_ERROR(validateChannelSpec(spec));
  std::shared_ptr<InProcessGroup> group;
  if (!spec.bootstrap) {
    group = std::make_shared<InProcessGroup>(1, std::chrono::milliseconds(0));
  } else if (spec.bootstrap->kind() == InProcessGroup::kKind) {
    group = std::static_pointer_cast<InProcessGroup>(spec.bootstrap);
  } else if (auto *host = dynamic_cast<HostBootstrap *>(spec.bootstrap.get())) {
    // A bootstrap that moves the bytes itself (MPI, one rank per process);
    // the cpu buffers are host memory (hal/HostCollectives.h).
    HostAccess access;
    access.resolve = [&device](BufferRef ref, const char *what) {
      return resolveOn(device, ref, what);
    };
    access.parallelFor =
        [&device](int64_t n, int64_t grain,
                  const std::function<void(int64_t, int64_t)> &fn) {
          device.pool().parallelFor(n, grain, fn);
        };
    return host->createHostChannel(spec, std::move(access));
  } else {
    return absl::UnimplementedError(absl::StrCat(
        "the cpu device has no channels over a '", spec.bootstrap->kind(),
        "' bootstrap (it has in-process and mpi)"));
  }
  OMNI_RETURN_IF_ERROR(group->join(spec.rank));
  return std::unique_ptr<Channel>(
      new CpuChannel(device, std::move(group), spec.rank));
}

CpuChannel::~CpuChannel() { group_->leave(rank_); }

void CpuChannel::abort(const absl::Status &reason) {
  group_->abort(
      absl::AbortedError(absl::StrCat("the channel group was aborted by rank ",
                                      rank_, ": ", reason.message())));
}

absl::Status CpuChannel::failGroup(absl::string_view what,
                                   const absl::Status &status) {
  absl::Status mine(status.code(), absl::StrCat(what, ": ", status.message()));
  abort(mine);
  return mine;
}

absl::StatusOr<uint8_t *> CpuChannel::resolve(BufferRef ref,
                                              const char *what) const {
  return resolveOn(device_, ref, what);
}

absl::StatusOr<std::vector<const CpuChannel::Post *>>
CpuChannel::meet(const Post &post) {
  OMNI_ASSIGN_OR_RETURN(std::vector<const void *> values,
                        group_->exchange(rank_, &post, kindName(post.kind)));
  std::vector<const Post *> posts;
  for (const void *v : values)
    posts.push_back(static_cast<const Post *>(v));
  for (size_t r = 1; r < posts.size(); ++r)
    if (!samePost(*posts[0], *posts[r])) {
      // Every rank sees the same posts and reports the same mismatch.
      absl::Status status = absl::InvalidArgumentError(absl::StrCat(
          "the ranks submitted different collectives: rank 0 ",
          describe(*posts[0]), ", rank ", r, " ", describe(*posts[r])));
      // The posts live on the other ranks' stacks: no rank returns (and
      // drops its post) before every rank has described them (without
      // this a rank read a returned rank's post as 0 bytes).
      (void)group_->barrier(rank_, kindName(post.kind));
      (void)failGroup(kindName(post.kind), status);
      return status;
    }
  return posts;
}

absl::Status CpuChannel::reduce(const char *what, BufferRef send,
                                BufferRef recv, DType dtype, ReduceOp op,
                                bool scatter) {
  auto fail = [&](const absl::Status &s) { return failGroup(what, s); };
  absl::StatusOr<uint8_t *> in = resolve(send, "send");
  if (!in.ok())
    return fail(in.status());
  absl::StatusOr<uint8_t *> out = resolve(recv, "recv");
  if (!out.ok())
    return fail(out.status());
  if (absl::Status s = checkHostReduction(dtype, op); !s.ok())
    return fail(s);
  const int64_t size = this->size(), elem = dtypeSize(dtype);
  const __int128 want =
      static_cast<__int128>(recv.length) * (scatter ? size : 1);
  if (want != send.length || recv.length % elem != 0)
    return fail(absl::InvalidArgumentError(absl::StrCat(
        "send is ", send.length, " bytes and recv ", recv.length,
        " but expected send = ", scatter ? absl::StrCat(size, " x ") : "",
        "recv, a whole number of ", dtypeName(dtype), " elements")));
  Post post{scatter ? CollectiveKind::ReduceScatter : CollectiveKind::AllReduce,
            dtype, op, send.length, recv.length};
  post.data = *in;
  OMNI_ASSIGN_OR_RETURN(std::vector<const Post *> posts, meet(post));
  std::vector<const uint8_t *> src;
  for (const Post *p : posts)
    src.push_back(p->data);
  const int64_t count = recv.length / elem;
  const int64_t first = scatter ? count * rank_ : 0;
  std::vector<uint8_t> staging(static_cast<size_t>(recv.length));
  device_.pool().parallelFor(
      count, kHostReduceGrain, [&](int64_t begin, int64_t end) {
        reduceHostElements(dtype, op, src, first, staging.data(), begin, end);
      });
  // Nobody reads a send buffer after this: recv may overlap ours.
  OMNI_RETURN_IF_ERROR(group_->barrier(rank_, what));
  if (recv.length)
    std::memcpy(*out, staging.data(), staging.size());
  return absl::OkStatus();
}

absl::Status CpuChannel::allReduce(Stream &, BufferRef send, BufferRef recv,
                                   DType dtype, ReduceOp op) {
  return reduce("all_reduce", send, recv, dtype, op, /*scatter=*/false);
}

absl::Status CpuChannel::reduceScatter(Stream &, BufferRef send, BufferRef recv,
                                       DType dtype, ReduceOp op) {
  return reduce("reduce_scatter", send, recv, dtype, op, /*scatter=*/true);
}

absl::Status CpuChannel::allGather(Stream &, BufferRef send, BufferRef recv) {
  auto fail = [&](const absl::Status &s) { return failGroup("all_gather", s); };
  absl::StatusOr<uint8_t *> in = resolve(send, "send");
  if (!in.ok())
    return fail(in.status());
  absl::StatusOr<uint8_t *> out = resolve(recv, "recv");
  if (!out.ok())
    return fail(out.status());
  const int64_t size = this->size();
  if (static_cast<__int128>(send.length) * size != recv.length)
    return fail(absl::InvalidArgumentError(
        absl::StrCat("send is ", send.length, " bytes and recv ", recv.length,
                     " but expected recv = ", size, " x send")));
  Post post{CollectiveKind::AllGather};
  post.sendBytes = send.length;
  post.recvBytes = recv.length;
  post.data = *in;
  OMNI_ASSIGN_OR_RETURN(std::vector<const Post *> posts, meet(post));
  std::vector<uint8_t> staging(static_cast<size_t>(recv.length));
  if (send.length)
    for (int64_t r = 0; r < size; ++r)
      std::memcpy(staging.data() + r * send.length, posts[r]->data,
                  static_cast<size_t>(send.length));
  OMNI_RETURN_IF_ERROR(group_->barrier(rank_, "all_gather"));
  if (recv.length)
    std::memcpy(*out, staging.data(), staging.size());
  return absl::OkStatus();
}

absl::Status CpuChannel::broadcast(Stream &, BufferRef buffer, int root) {
  auto fail = [&](const absl::Status &s) { return failGroup("broadcast", s); };
  absl::StatusOr<uint8_t *> data = resolve(buffer, "buffer");
  if (!data.ok())
    return fail(data.status());
  if (root < 0 || root >= size())
    return fail(absl::InvalidArgumentError(absl::StrCat(
        "root = ", root, " but the channel has ranks 0..", size() - 1)));
  Post post{CollectiveKind::Broadcast};
  post.sendBytes = buffer.length;
  post.root = root;
  post.data = *data;
  OMNI_ASSIGN_OR_RETURN(std::vector<const Post *> posts, meet(post));
  if (rank_ != root && buffer.length && *data != posts[root]->data)
    std::memmove(*data, posts[root]->data, static_cast<size_t>(buffer.length));
  // The root must not change its buffer before every rank has copied it.
  return group_->barrier(rank_, "broadcast");
}

absl::StatusOr<std::unique_ptr<Channel>> CpuChannel::split(int color, int key) {
  if (color < 0)
    return failGroup("split", absl::InvalidArgumentError(absl::StrCat(
                                  "color = ", color, " but it must be >= 0")));
  Post post{CollectiveKind::Split};
  post.color = color;
  post.key = key;
  OMNI_ASSIGN_OR_RETURN(std::vector<const Post *> posts, meet(post));
  std::vector<int> members;
  for (int r = 0; r < size(); ++r)
    if (posts[r]->color == color)
      members.push_back(r);
  std::stable_sort(members.begin(), members.end(),
                   [&](int a, int b) { return posts[a]->key < posts[b]->key; });
  const int newRank = static_cast<int>(
      std::find(members.begin(), members.end(), rank_) - members.begin());
  const int leader = members[0];
  // The leader of each color makes the group and lends it to the members.
  std::shared_ptr<InProcessGroup> made;
  if (leader == rank_)
    made = std::make_shared<InProcessGroup>(static_cast<int>(members.size()),
                                            group_->timeout());
  OMNI_ASSIGN_OR_RETURN(
      std::vector<const void *> lent,
      group_->exchange(rank_, leader == rank_ ? &made : nullptr, "split"));
  std::shared_ptr<InProcessGroup> group =
      *static_cast<const std::shared_ptr<InProcessGroup> *>(lent[leader]);
  OMNI_RETURN_IF_ERROR(group_->barrier(rank_, "split"));
  OMNI_RETURN_IF_ERROR(group->join(newRank));
  return std::unique_ptr<Channel>(
      new CpuChannel(device_, std::move(group), newRank));
}

} // namespace omni::hal::cpu
