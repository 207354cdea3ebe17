//===- MpiChannel.cpp - Channels between MPI processes ----------*- C++ -*-===//

#include "runtime/hal/mpi/MpiChannel.h"

#include "runtime/base/Status.h"
#include "runtime/hal/HostCollectives.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

// The C API only: no C++ bindings (OpenMPI and MPICH would pull them in).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>

namespace omni::hal::mpi {
namespace {

enum class Kind : int32_t {
  AllReduce,
  AllGather,
  ReduceScatter,
  Broadcast,
  Split
};

const char *kindName(Kind kind) {
  switch (kind) {
  case Kind::AllReduce:
    return "all_reduce";
  case Kind::AllGather:
    return "all_gather";
  case Kind::ReduceScatter:
    return "reduce_scatter";
  case Kind::Broadcast:
    return "broadcast";
  case Kind::Split:
    return "split";
  }
  return "?";
}

/// What one rank submitted, exchanged (MPI_Iallgather of the bytes) before
/// every collective. `error` is this rank's one-line failure, empty when
/// its side of the call is valid.
struct Post {
  Kind kind = Kind::AllReduce;
  int32_t dtype = 0, op = 0, root = 0, color = 0, key = 0;
  int32_t code = 0, unused = 0;
  int64_t sendBytes = 0, recvBytes = 0;
  char error[208] = {};
};
static_assert(sizeof(Post) == 256, "a post is 256 bytes on every rank");

std::string describe(const Post &p) {
  switch (p.kind) {
  case Kind::AllReduce:
  case Kind::ReduceScatter:
    return absl::StrCat(
        kindName(p.kind), " ", reduceOpName(static_cast<ReduceOp>(p.op)),
        " of ", p.sendBytes, " bytes of ",
        dtypeName(static_cast<DType>(p.dtype)), " into ", p.recvBytes);
  case Kind::AllGather:
    return absl::StrCat("all_gather of ", p.sendBytes, " bytes into ",
                        p.recvBytes);
  case Kind::Broadcast:
    return absl::StrCat("broadcast of ", p.sendBytes, " bytes from rank ",
                        p.root);
  case Kind::Split:
    return "split";
  }
  return "?";
}

bool samePost(const Post &a, const Post &b) {
  if (a.kind != b.kind)
    return false;
  switch (a.kind) {
  case Kind::Split:
    return true;
  case Kind::AllGather:
    return a.sendBytes == b.sendBytes && a.recvBytes == b.recvBytes;
  case Kind::Broadcast:
    return a.sendBytes == b.sendBytes && a.root == b.root;
  default:
    return a.dtype == b.dtype && a.op == b.op && a.sendBytes == b.sendBytes &&
           a.recvBytes == b.recvBytes;
  }
}

std::string mpiErrorString(int error) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(error, text, &length) != MPI_SUCCESS)
    return absl::StrCat("MPI error ", error);
  return std::string(text, static_cast<size_t>(length));
}

std::string formatTimeout(std::chrono::milliseconds t) {
  if (t.count() % 1000 == 0)
    return absl::StrCat(t.count() / 1000, " s");
  return absl::StrCat(t.count(), " ms");
}

void finalizeAtExit() {
  int finalized = 0;
  if (MPI_Finalized(&finalized) == MPI_SUCCESS && !finalized)
    MPI_Finalize();
}

/// MPI_Init_thread once per process (unless the program initialized MPI
/// itself), MPI_Finalize at exit; errors on MPI_COMM_WORLD return.
absl::Status initializeMpi() {
  static std::once_flag once;
  static absl::Status status;
  std::call_once(once, [] {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (!initialized) {
      int provided = 0;
      int error =
          MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
      if (error != MPI_SUCCESS) {
        status = absl::InternalError(
            absl::StrCat("MPI_Init_thread failed: ", mpiErrorString(error)));
        return;
      }
      std::atexit(finalizeAtExit);
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  });
  return status;
}

int worldRank() {
  int rank = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

/// Prints `message` and ends every process of the job.
[[noreturn]] void abortJob(const std::string &message) {
  std::fprintf(stderr, "%s\n", message.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1); // MPI_Abort does not return; this is for the compiler
}

/// Waits for `request`; the MPI error code of a failed test, else 0. After
/// `timeout` (0: never) prints "rank <r>: <what> waited longer than ..."
/// and aborts the job.
int waitRequest(MPI_Request &request, std::chrono::milliseconds timeout,
                int groupSize, const char *what) {
  const auto start = std::chrono::steady_clock::now();
  auto nap = std::chrono::microseconds(10);
  for (int polls = 0;; ++polls) {
    int done = 0;
    if (int error = MPI_Test(&request, &done, MPI_STATUS_IGNORE))
      return error;
    if (done)
      return 0;
    if (timeout.count() > 0 &&
        std::chrono::steady_clock::now() - start > timeout)
      abortJob(absl::StrCat("rank ", worldRank(), ": ", what,
                            " waited longer than ", formatTimeout(timeout),
                            " for the other ranks of its group of ", groupSize,
                            "; aborting the MPI job"));
    // Poll eagerly for short waits, then back off to at most 1 ms so that
    // a rank waiting for a slow peer leaves the cores to it.
    if (polls < 64) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(nap);
      nap = std::min(nap * 2, std::chrono::microseconds(1000));
    }
  }
}

class MpiChannel final : public Channel {
public:
  MpiChannel(MPI_Comm comm, std::chrono::milliseconds timeout,
             HostAccess access)
      : comm_(comm), timeout_(timeout), access_(std::move(access)) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
  }
  ~MpiChannel() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized)
      MPI_Comm_free(&comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  absl::Status allReduce(Stream &, BufferRef send, BufferRef recv, DType dtype,
                         ReduceOp op) override {
    return reduce(Kind::AllReduce, send, recv, dtype, op);
  }
  absl::Status reduceScatter(Stream &, BufferRef send, BufferRef recv,
                             DType dtype, ReduceOp op) override {
    return reduce(Kind::ReduceScatter, send, recv, dtype, op);
  }
  absl::Status allGather(Stream &, BufferRef send, BufferRef recv) override;
  absl::Status broadcast(Stream &, BufferRef buffer, int root) override;
  absl::StatusOr<std::unique_ptr<Channel>> split(int color, int key) override;

  void abort(const absl::Status &reason) override {
    // "rank 1: <reason>; aborting the MPI job" (once "rank 1: " even when
    // the reason names the rank already).
    const std::string me = absl::StrCat("rank ", worldRank(), ": ");
    abortJob(absl::StrCat(absl::StartsWith(reason.message(), me) ? "" : me,
                          reason.message(), "; aborting the MPI job"));
  }

private:
  /// Waits for `request` up to the timeout (then the job is aborted).
  absl::Status wait(MPI_Request &request, const char *what);
  /// A failed MPI call: "rank <r>: <what>: <call> failed: <MPI's text>";
  /// the channel fails from now on.
  absl::Status mpiFailed(int error, const char *call, const char *what);
  /// Exchanges `post` (with `local`, this rank's own error, when any) and
  /// checks that every rank posted the same valid collective.
  absl::StatusOr<std::vector<Post>> meet(Post post, const absl::Status &local);
  absl::StatusOr<uint8_t *> resolve(BufferRef ref, const char *what) {
    return access_.resolve(ref, what);
  }
  absl::Status checkCount(int64_t bytes, const char *what) const;
  absl::Status reduce(Kind kind, BufferRef send, BufferRef recv, DType dtype,
                      ReduceOp op);

  MPI_Comm comm_;
  int rank_ = 0, size_ = 1;
  std::chrono::milliseconds timeout_;
  HostAccess access_;
  /// OK until a collective failed; then what every later one returns.
  absl::Status failed_;
};

absl::Status MpiChannel::mpiFailed(int error, const char *call,
                                   const char *what) {
  failed_ =
      absl::InternalError(absl::StrCat("rank ", rank_, ": ", what, ": ", call,
                                       " failed: ", mpiErrorString(error)));
  return failed_;
}

absl::Status MpiChannel::wait(MPI_Request &request, const char *what) {
  int error = waitRequest(request, timeout_, size_, what);
  return error ? mpiFailed(error, "MPI_Test", what) : absl::OkStatus();
}

absl::StatusOr<std::vector<Post>> MpiChannel::meet(Post post,
                                                   const absl::Status &local) {
  const char *what = kindName(post.kind);
  if (!failed_.ok())
    return failed_;
  std::string mine;
  if (!local.ok()) {
    mine = absl::StrCat(what, ": ", local.message());
    post.code = static_cast<int32_t>(local.code());
    std::snprintf(post.error, sizeof(post.error), "%s", mine.c_str());
  }
  std::vector<Post> posts(static_cast<size_t>(size_));
  MPI_Request request;
  if (int error = MPI_Iallgather(&post, sizeof(Post), MPI_BYTE, posts.data(),
                                 sizeof(Post), MPI_BYTE, comm_, &request))
    return mpiFailed(error, "MPI_Iallgather", what);
  OMNI_RETURN_IF_ERROR(wait(request, what));
  // Every rank sees the same posts and fails the same way.
  if (!local.ok()) {
    failed_ = absl::Status(local.code(), mine);
    return failed_;
  }
  for (int r = 0; r < size_; ++r) {
    const Post &p = posts[size_t(r)];
    if (p.error[0]) {
      failed_ = absl::AbortedError(absl::StrCat(
          "the channel group was aborted by rank ", r, ": ",
          std::string(p.error, strnlen(p.error, sizeof(p.error)))));
      return failed_;
    }
  }
  for (int r = 1; r < size_; ++r)
    if (!samePost(posts[0], posts[size_t(r)])) {
      failed_ = absl::InvalidArgumentError(absl::StrCat(
          "the ranks submitted different collectives: rank 0 ",
          describe(posts[0]), ", rank ", r, " ", describe(posts[size_t(r)])));
      return failed_;
    }
  return posts;
}

absl::Status MpiChannel::checkCount(int64_t bytes, const char *what) const {
  if (bytes > INT_MAX)
    return absl::InvalidArgumentError(absl::StrCat(
        what, " is ", bytes, " bytes but the MPI channel moves at ", "most ",
        INT_MAX, " bytes per rank and call"));
  return absl::OkStatus();
}

absl::Status MpiChannel::reduce(Kind kind, BufferRef send, BufferRef recv,
                                DType dtype, ReduceOp op) {
  const bool scatter = kind == Kind::ReduceScatter;
  Post post;
  post.kind = kind;
  post.dtype = static_cast<int32_t>(dtype);
  post.op = static_cast<int32_t>(op);
  post.sendBytes = send.length;
  post.recvBytes = recv.length;
  uint8_t *in = nullptr, *out = nullptr;
  absl::Status local = [&]() -> absl::Status {
    OMNI_ASSIGN_OR_RETURN(in, resolve(send, "send"));
    OMNI_ASSIGN_OR_RETURN(out, resolve(recv, "recv"));
    OMNI_RETURN_IF_ERROR(checkHostReduction(dtype, op));
    const int64_t elem = dtypeSize(dtype);
    const __int128 want =
        static_cast<__int128>(recv.length) * (scatter ? size_ : 1);
    if (want != send.length || recv.length % elem != 0)
      return absl::InvalidArgumentError(absl::StrCat(
          "send is ", send.length, " bytes and recv ", recv.length,
          " but expected send = ", scatter ? absl::StrCat(size_, " x ") : "",
          "recv, a whole number of ", dtypeName(dtype), " elements"));
    return checkCount(recv.length, scatter ? "recv" : "send");
  }();
  OMNI_RETURN_IF_ERROR(meet(post, local).status());
  const char *what = kindName(kind);
  const int64_t chunk = recv.length; // bytes each rank contributes
  if (chunk == 0)
    return absl::OkStatus();
  // Every rank's operand (reduce_scatter: every rank's chunk rank_), in
  // rank order; then the reduction of the in-process channel.
  std::vector<uint8_t> gathered(static_cast<size_t>(chunk * size_));
  MPI_Request request;
  const int count = static_cast<int>(chunk);
  int error = scatter ? MPI_Ialltoall(in, count, MPI_BYTE, gathered.data(),
                                      count, MPI_BYTE, comm_, &request)
                      : MPI_Iallgather(in, count, MPI_BYTE, gathered.data(),
                                       count, MPI_BYTE, comm_, &request);
  if (error)
    return mpiFailed(error, scatter ? "MPI_Ialltoall" : "MPI_Iallgather", what);
  OMNI_RETURN_IF_ERROR(wait(request, what));
  std::vector<const uint8_t *> src;
  for (int r = 0; r < size_; ++r)
    src.push_back(gathered.data() + r * chunk);
  const int64_t elements = chunk / dtypeSize(dtype);
  auto body = [&](int64_t begin, int64_t end) {
    reduceHostElements(dtype, op, src, /*first=*/0, out, begin, end);
  };
  if (access_.parallelFor)
    access_.parallelFor(elements, kHostReduceGrain, body);
  else
    body(0, elements);
  return absl::OkStatus();
}

absl::Status MpiChannel::allGather(Stream &, BufferRef send, BufferRef recv) {
  Post post;
  post.kind = Kind::AllGather;
  post.sendBytes = send.length;
  post.recvBytes = recv.length;
  uint8_t *in = nullptr, *out = nullptr;
  absl::Status local = [&]() -> absl::Status {
    OMNI_ASSIGN_OR_RETURN(in, resolve(send, "send"));
    OMNI_ASSIGN_OR_RETURN(out, resolve(recv, "recv"));
    if (static_cast<__int128>(send.length) * size_ != recv.length)
      return absl::InvalidArgumentError(
          absl::StrCat("send is ", send.length, " bytes and recv ", recv.length,
                       " but expected recv = ", size_, " x send"));
    return checkCount(send.length, "send");
  }();
  OMNI_RETURN_IF_ERROR(meet(post, local).status());
  if (send.length == 0)
    return absl::OkStatus();
  // MPI forbids aliased send and receive buffers: stage an overlapping call.
  const bool overlap = in < out + recv.length && out < in + send.length;
  std::vector<uint8_t> staging(overlap ? size_t(recv.length) : 0);
  uint8_t *target = overlap ? staging.data() : out;
  MPI_Request request;
  const int count = static_cast<int>(send.length);
  if (int error = MPI_Iallgather(in, count, MPI_BYTE, target, count, MPI_BYTE,
                                 comm_, &request))
    return mpiFailed(error, "MPI_Iallgather", "all_gather");
  OMNI_RETURN_IF_ERROR(wait(request, "all_gather"));
  if (overlap)
    std::memcpy(out, staging.data(), staging.size());
  return absl::OkStatus();
}

absl::Status MpiChannel::broadcast(Stream &, BufferRef buffer, int root) {
  Post post;
  post.kind = Kind::Broadcast;
  post.sendBytes = buffer.length;
  post.root = root;
  uint8_t *data = nullptr;
  absl::Status local = [&]() -> absl::Status {
    OMNI_ASSIGN_OR_RETURN(data, resolve(buffer, "buffer"));
    if (root < 0 || root >= size_)
      return absl::InvalidArgumentError(absl::StrCat(
          "root = ", root, " but the channel has ranks 0..", size_ - 1));
    return checkCount(buffer.length, "buffer");
  }();
  OMNI_RETURN_IF_ERROR(meet(post, local).status());
  if (buffer.length == 0)
    return absl::OkStatus();
  MPI_Request request;
  if (int error = MPI_Ibcast(data, static_cast<int>(buffer.length), MPI_BYTE,
                             root, comm_, &request))
    return mpiFailed(error, "MPI_Ibcast", "broadcast");
  return wait(request, "broadcast");
}

absl::StatusOr<std::unique_ptr<Channel>> MpiChannel::split(int color, int key) {
  Post post;
  post.kind = Kind::Split;
  post.color = color;
  post.key = key;
  absl::Status local =
      color < 0 ? absl::InvalidArgumentError(
                      absl::StrCat("color = ", color, " but it must be >= 0"))
                : absl::OkStatus();
  OMNI_RETURN_IF_ERROR(meet(post, local).status());
  // Every rank has arrived (meet), so the blocking split cannot hang.
  MPI_Comm comm;
  if (int error = MPI_Comm_split(comm_, color, key, &comm))
    return mpiFailed(error, "MPI_Comm_split", "split");
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  return std::unique_ptr<Channel>(new MpiChannel(comm, timeout_, access_));
}

/// The bootstrap of MPI_COMM_WORLD: each channel duplicates it.
class MpiBootstrap final : public HostBootstrap {
public:
  MpiBootstrap(int rank, int size, std::chrono::milliseconds timeout)
      : rank_(rank), size_(size), timeout_(timeout) {}

  absl::string_view kind() const override { return kMpiBootstrapKind; }
  int size() const override { return size_; }

  absl::StatusOr<std::unique_ptr<Channel>>
  createHostChannel(const ChannelSpec &spec, HostAccess access) override {
    if (spec.rank != rank_)
      return absl::InvalidArgumentError(absl::StrCat(
          "a channel for MPI rank ", spec.rank, " in the process of rank ",
          rank_, " (each process makes only its own rank's channel)"));
    if (!access.resolve)
      return absl::InvalidArgumentError(
          "an MPI channel needs the driver's host access (resolve)");
    // MPI_Comm_idup so that a rank whose peers never come times out.
    MPI_Comm comm;
    MPI_Request request;
    if (int error = MPI_Comm_idup(MPI_COMM_WORLD, &comm, &request))
      return absl::InternalError(absl::StrCat(
          "rank ", rank_, ": MPI_Comm_idup failed: ", mpiErrorString(error)));
    if (int error =
            waitRequest(request, timeout_, size_, "creating the channel"))
      return absl::InternalError(absl::StrCat(
          "rank ", rank_,
          ": creating the channel: MPI_Test failed: ", mpiErrorString(error)));
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    return std::unique_ptr<Channel>(
        new MpiChannel(comm, timeout_, std::move(access)));
  }

private:
  int rank_, size_;
  std::chrono::milliseconds timeout_;
};

} // namespace

absl::StatusOr<std::unique_ptr<MpiChannelProvider>>
MpiChannelProvider::create(std::chrono::milliseconds timeout) {
  OMNI_RETURN_IF_ERROR(initializeMpi());
  int rank = 0, size = 0;
  if (int error = MPI_Comm_rank(MPI_COMM_WORLD, &rank))
    return absl::InternalError(
        absl::StrCat("MPI_Comm_rank failed: ", mpiErrorString(error)));
  if (int error = MPI_Comm_size(MPI_COMM_WORLD, &size))
    return absl::InternalError(
        absl::StrCat("MPI_Comm_size failed: ", mpiErrorString(error)));
  return std::unique_ptr<MpiChannelProvider>(new MpiChannelProvider(
      rank, size, std::make_shared<MpiBootstrap>(rank, size, timeout)));
}

absl::StatusOr<ChannelSpec> MpiChannelProvider::spec(int rank) const {
  if (rank != rank_)
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", rank, " of an MPI group of ", size_, ": this process is rank ",
        rank_, " and makes only its own channel spec"));
  return ChannelSpec{rank_, size_, bootstrap_};
}

absl::Status MpiChannelProvider::broadcast(void *bytes, int64_t size,
                                           int root) const {
  if (size < 0 || size > INT_MAX || root < 0 || root >= size_)
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank_, ": MPI broadcast of ", size,
                     " bytes from rank ", root, " (expected at most ", INT_MAX,
                     " bytes from a rank in 0..", size_ - 1, ")"));
  if (int error = MPI_Bcast(bytes, static_cast<int>(size), MPI_BYTE, root,
                            MPI_COMM_WORLD))
    return absl::InternalError(absl::StrCat(
        "rank ", rank_, ": MPI_Bcast failed: ", mpiErrorString(error)));
  return absl::OkStatus();
}

} // namespace omni::hal::mpi
