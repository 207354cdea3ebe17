//===- NcclChannel.cpp - Collectives between GPUs through NCCL --*- C++ -*-===//
//
// libnccl.so.2 through a dlsym table (never linked), non-blocking
// communicators polled with ncclCommGetAsyncError, and one watchdog thread
// per channel that aborts the group when a collective outlives the
// timeout (NcclChannel.h).
//
//===----------------------------------------------------------------------===//

#include "runtime/hal/drivers/cuda/NcclChannel.h"

#include "runtime/hal/HostCollectives.h"
#include "runtime/hal/drivers/cuda/NcclCuda.h"

#include "absl/strings/str_cat.h"

#include <nccl.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <dlfcn.h>
#include <map>
#include <thread>

namespace omni::hal::cuda {
namespace {

static_assert(sizeof(ncclUniqueId) == sizeof(NcclUniqueId),
              "NcclUniqueId holds an ncclUniqueId");

//===----------------------------------------------------------------------===//
// The library
//===----------------------------------------------------------------------===//

/// The NCCL entry points omni calls, resolved with dlsym.
struct NcclLibrary {
  int version = 0;
  ncclResult_t (*getVersion)(int *) = nullptr;
  ncclResult_t (*getUniqueId)(ncclUniqueId *) = nullptr;
  ncclResult_t (*commInitRankConfig)(ncclComm_t *, int, ncclUniqueId, int,
                                     ncclConfig_t *) = nullptr;
  ncclResult_t (*commSplit)(ncclComm_t, int, int, ncclComm_t *,
                            ncclConfig_t *) = nullptr;
  ncclResult_t (*commAbort)(ncclComm_t) = nullptr;
  ncclResult_t (*commGetAsyncError)(ncclComm_t, ncclResult_t *) = nullptr;
  ncclResult_t (*commCount)(const ncclComm_t, int *) = nullptr;
  ncclResult_t (*commUserRank)(const ncclComm_t, int *) = nullptr;
  const char *(*getErrorString)(ncclResult_t) = nullptr;
  const char *(*getLastError)(ncclComm_t) = nullptr;
  ncclResult_t (*allReduce)(const void *, void *, size_t, ncclDataType_t,
                            ncclRedOp_t, ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*allGather)(const void *, void *, size_t, ncclDataType_t,
                            ncclComm_t, cudaStream_t) = nullptr;
  ncclResult_t (*reduceScatter)(const void *, void *, size_t, ncclDataType_t,
                                ncclRedOp_t, ncclComm_t,
                                cudaStream_t) = nullptr;
  ncclResult_t (*broadcast)(const void *, void *, size_t, ncclDataType_t, int,
                            ncclComm_t, cudaStream_t) = nullptr;
};

/// 2.18: ncclCommSplit; non-blocking communicators are 2.14.
constexpr int kMinVersion = 21800;

absl::StatusOr<const NcclLibrary *> library() {
  static absl::StatusOr<const NcclLibrary *> loaded =
      []() -> absl::StatusOr<const NcclLibrary *> {
    const char *override = std::getenv("OMNI_NCCL_LIBRARY");
    const char *name = override && *override ? override : "libnccl.so.2";
    void *handle = ::dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char *why = ::dlerror();
      return absl::FailedPreconditionError(absl::StrCat(
          "nccl: ", name, " not found (", why ? why : "dlopen failed",
          "); install NCCL 2.18 or newer, or name it with OMNI_NCCL_LIBRARY"));
    }
    auto *lib = new NcclLibrary;
    std::string missing;
    auto get = [&](auto &fn, const char *symbol) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(
          ::dlsym(handle, symbol));
      if (!fn && missing.empty())
        missing = symbol;
    };
    get(lib->getVersion, "ncclGetVersion");
    get(lib->getUniqueId, "ncclGetUniqueId");
    get(lib->commInitRankConfig, "ncclCommInitRankConfig");
    get(lib->commSplit, "ncclCommSplit");
    get(lib->commAbort, "ncclCommAbort");
    get(lib->commGetAsyncError, "ncclCommGetAsyncError");
    get(lib->commCount, "ncclCommCount");
    get(lib->commUserRank, "ncclCommUserRank");
    get(lib->getErrorString, "ncclGetErrorString");
    get(lib->getLastError, "ncclGetLastError");
    get(lib->allReduce, "ncclAllReduce");
    get(lib->allGather, "ncclAllGather");
    get(lib->reduceScatter, "ncclReduceScatter");
    get(lib->broadcast, "ncclBroadcast");
    if (!missing.empty()) {
      delete lib;
      return absl::FailedPreconditionError(
          absl::StrCat("nccl: ", name, " has no ", missing,
                       " (omni needs NCCL 2.18 or newer)"));
    }
    if (lib->getVersion(&lib->version) != ncclSuccess ||
        lib->version < kMinVersion) {
      int version = lib->version;
      delete lib;
      return absl::FailedPreconditionError(
          absl::StrCat("nccl: ", name, " is version ", version,
                       " but omni needs 2.18 or newer (", kMinVersion, ")"));
    }
    return lib;
  }();
  return loaded;
}

/// "<what>: <error string> (<last error>)".
absl::Status ncclError(const NcclLibrary &nccl, ncclResult_t result,
                       ncclComm_t comm, const std::string &what) {
  const char *text = nccl.getErrorString(result);
  const char *last = nccl.getLastError(comm);
  std::string detail = last && *last ? absl::StrCat(" (", last, ")") : "";
  // NCCL's last error may span lines: keep the message one line.
  for (char &c : detail)
    if (c == '\n' || c == '\r')
      c = ' ';
  return absl::InternalError(absl::StrCat(
      what, ": ", text ? text : absl::StrCat("error ", result), detail));
}

std::string formatTimeout(std::chrono::milliseconds t) {
  if (t.count() % 1000 == 0)
    return absl::StrCat(t.count() / 1000, " s");
  return absl::StrCat(t.count(), " ms");
}

//===----------------------------------------------------------------------===//
// Groups
//===----------------------------------------------------------------------===//

class NcclChannel;

/// What the local ranks of one communicator share: the abort status and
/// the channels to abort, and the groups their splits make.
class LocalGroup {
public:
  /// OK, or the status every local rank's collectives now return.
  absl::Status status() {
    std::lock_guard<std::mutex> lock(mutex_);
    return status_;
  }
  void join(NcclChannel *channel) {
    std::lock_guard<std::mutex> lock(mutex_);
    members_.push_back(channel);
  }
  /// Removes `channel`; returns whether others remain.
  bool leave(NcclChannel *channel) {
    std::lock_guard<std::mutex> lock(mutex_);
    members_.erase(std::remove(members_.begin(), members_.end(), channel),
                   members_.end());
    return !members_.empty();
  }
  /// Fails the group (the first reason wins) and aborts every member's
  /// communicator.
  void abort(const absl::Status &reason);
  /// The local group of the `round`-th split's `color`.
  std::shared_ptr<LocalGroup> child(int64_t round, int color) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::shared_ptr<LocalGroup> &group = children_[{round, color}];
    if (!group)
      group = std::make_shared<LocalGroup>();
    return group;
  }

private:
  std::mutex mutex_;
  absl::Status status_;
  std::vector<NcclChannel *> members_;
  std::map<std::pair<int64_t, int>, std::shared_ptr<LocalGroup>> children_;
};

class NcclBootstrap final : public Bootstrap {
public:
  NcclBootstrap(int size, const ncclUniqueId &id,
                std::chrono::milliseconds timeout)
      : size_(size), id_(id), timeout_(timeout),
        group_(std::make_shared<LocalGroup>()) {}
  absl::string_view kind() const override { return kNcclBootstrapKind; }
  int size() const override { return size_; }
  const ncclUniqueId &id() const { return id_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  const std::shared_ptr<LocalGroup> &group() const { return group_; }

private:
  int size_;
  ncclUniqueId id_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<LocalGroup> group_;
};

absl::StatusOr<ncclDataType_t> ncclType(DType dtype) {
  switch (dtype) {
  case DType::BF16:
    return ncclBfloat16;
  case DType::F16:
    return ncclFloat16;
  case DType::F32:
    return ncclFloat32;
  case DType::F64:
    return ncclFloat64;
  case DType::I32:
    return ncclInt32;
  case DType::I64:
    return ncclInt64;
  default:
    return absl::InvalidArgumentError(
        absl::StrCat("nccl: cannot reduce ", dtypeName(dtype),
                     " (expected bf16, f16, f32, f64, i32 or i64)"));
  }
}

ncclRedOp_t ncclOp(ReduceOp op) {
  switch (op) {
  case ReduceOp::Sum:
    return ncclSum;
  case ReduceOp::Prod:
    return ncclProd;
  case ReduceOp::Min:
    return ncclMin;
  case ReduceOp::Max:
    return ncclMax;
  case ReduceOp::Mean:
    return ncclAvg;
  }
  return ncclSum;
}

//===----------------------------------------------------------------------===//
// The channel
//===----------------------------------------------------------------------===//

class NcclChannel final : public Channel {
public:
  NcclChannel(const NcclLibrary &nccl, const NcclDeviceContext &device,
              ncclComm_t comm, int rank, int size,
              std::shared_ptr<LocalGroup> group,
              std::chrono::milliseconds timeout)
      : nccl_(nccl), device_(device), rank_(rank), size_(size),
        group_(std::move(group)), timeout_(timeout), comm_(comm) {
    group_->join(this);
    watchdog_ = std::thread([this] { watch(); });
  }

  ~NcclChannel() override {
    // Let what was submitted finish (bounded by the timeout), then leave:
    // the others' later collectives fail (hal/Channel.h).
    {
      std::unique_lock<std::mutex> lock(mutex_);
      idle_.wait(lock, [&] { return pending_.empty() || !comm_; });
      stopping_ = true;
      changed_.notify_all();
    }
    watchdog_.join();
    if (group_->leave(this))
      group_->abort(absl::AbortedError(
          absl::StrCat("rank ", rank_, " closed its channel")));
    abortCommunicator();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  absl::Status allReduce(Stream &stream, BufferRef send, BufferRef recv,
                         DType dtype, ReduceOp op) override {
    if (absl::Status s = checkHostReduction(dtype, op); !s.ok())
      return named(s);
    absl::StatusOr<ncclDataType_t> type = ncclType(dtype);
    if (!type.ok())
      return named(type.status());
    const int64_t element = dtypeSize(dtype);
    if (send.length != recv.length || send.length % element != 0)
      return named(absl::InvalidArgumentError(absl::StrCat(
          "all_reduce of ", send.length, " bytes into ", recv.length,
          " (expected equal lengths, whole ", dtypeName(dtype), " elements)")));
    const size_t count = static_cast<size_t>(send.length / element);
    return submit("all_reduce", stream, send, recv,
                  [&](const void *s, void *r, cudaStream_t st) {
                    return nccl_.allReduce(s, r, count, *type, ncclOp(op),
                                           comm_, st);
                  });
  }

  absl::Status allGather(Stream &stream, BufferRef send,
                         BufferRef recv) override {
    if (recv.length != size_ * send.length)
      return named(absl::InvalidArgumentError(
          absl::StrCat("all_gather of ", send.length, " bytes into ",
                       recv.length, " (expected ", size_ * send.length, " = ",
                       size_, " ranks x ", send.length, ")")));
    const size_t count = static_cast<size_t>(send.length);
    return submit("all_gather", stream, send, recv,
                  [&](const void *s, void *r, cudaStream_t st) {
                    return nccl_.allGather(s, r, count, ncclUint8, comm_, st);
                  });
  }

  absl::Status reduceScatter(Stream &stream, BufferRef send, BufferRef recv,
                             DType dtype, ReduceOp op) override {
    if (absl::Status s = checkHostReduction(dtype, op); !s.ok())
      return named(s);
    absl::StatusOr<ncclDataType_t> type = ncclType(dtype);
    if (!type.ok())
      return named(type.status());
    const int64_t element = dtypeSize(dtype);
    if (send.length != size_ * recv.length || recv.length % element != 0)
      return named(absl::InvalidArgumentError(absl::StrCat(
          "reduce_scatter of ", send.length, " bytes into ", recv.length,
          " (expected ", size_, " ranks x ", recv.length, " = ",
          size_ * recv.length, ", whole ", dtypeName(dtype), " elements)")));
    const size_t count = static_cast<size_t>(recv.length / element);
    return submit("reduce_scatter", stream, send, recv,
                  [&](const void *s, void *r, cudaStream_t st) {
                    return nccl_.reduceScatter(s, r, count, *type, ncclOp(op),
                                               comm_, st);
                  });
  }

  absl::Status broadcast(Stream &stream, BufferRef buffer, int root) override {
    if (root < 0 || root >= size_)
      return named(absl::InvalidArgumentError(
          absl::StrCat("broadcast: root = ", root,
                       " but the channel has ranks 0..", size_ - 1)));
    const size_t count = static_cast<size_t>(buffer.length);
    return submit("broadcast", stream, buffer, buffer,
                  [&](const void *s, void *r, cudaStream_t st) {
                    return nccl_.broadcast(s, r, count, ncclUint8, root, comm_,
                                           st);
                  });
  }

  absl::StatusOr<std::unique_ptr<Channel>> split(int color, int key) override {
    if (color < 0)
      return named(absl::InvalidArgumentError(
          absl::StrCat("split color ", color, " (expected >= 0)")));
    if (absl::Status s = usable(); !s.ok())
      return s;
    if (absl::Status s = setCurrentContext(device_); !s.ok())
      return named(s);
    // A non-blocking communicator takes no call until its creation (or
    // previous call) is through, as for collectives.
    if (absl::Status s = waitReady("split"); !s.ok())
      return s;
    const int64_t round = splits_++;
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t child = nullptr;
    absl::Status error;
    bool aborted = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!comm_)
        aborted = true;
      else if (ncclResult_t result =
                   nccl_.commSplit(comm_, color, key, &child, &config);
               result != ncclSuccess && result != ncclInProgress)
        error = named(ncclError(nccl_, result, comm_, "nccl split"));
    }
    if (aborted)
      return usable();
    if (!error.ok()) {
      group_->abort(error);
      return error;
    }
    if (absl::Status s = waitReady("split"); !s.ok())
      return s;
    auto fail = [&](const absl::Status &s) {
      if (child)
        nccl_.commAbort(child);
      return s;
    };
    if (absl::Status s = waitComm(child, "split"); !s.ok())
      return fail(s);
    int childRank = 0, childSize = 0;
    if (ncclResult_t r = nccl_.commUserRank(child, &childRank);
        r != ncclSuccess)
      return fail(named(ncclError(nccl_, r, child, "nccl split")));
    if (ncclResult_t r = nccl_.commCount(child, &childSize); r != ncclSuccess)
      return fail(named(ncclError(nccl_, r, child, "nccl split")));
    return std::unique_ptr<Channel>(
        new NcclChannel(nccl_, device_, child, childRank, childSize,
                        group_->child(round, color), timeout_));
  }

  void abort(const absl::Status &reason) override {
    if (reason.ok())
      return;
    group_->abort(reason);
  }

  /// Called by LocalGroup::abort: ends the communicator's kernels and
  /// frees it; later calls return the group's status.
  void abortCommunicator() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!comm_)
      return;
    // Any thread may abort the group: the context current on this one is
    // left as it is (ncclCommAbort selects the communicator's device and
    // restores the caller's; events are destroyed by handle).
    nccl_.commAbort(comm_);
    comm_ = nullptr;
    for (Pending &p : pending_)
      destroyEvent(device_, p.event);
    pending_.clear();
    idle_.notify_all();
  }

private:
  struct Pending {
    void *event;
    std::chrono::steady_clock::time_point deadline;
    const char *what;
  };

  absl::Status named(const absl::Status &status) const {
    return absl::Status(status.code(),
                        absl::StrCat("rank ", rank_, ": ", status.message()));
  }

  /// The group's failure, if any.
  absl::Status usable() {
    absl::Status s = group_->status();
    if (!s.ok())
      return s;
    std::lock_guard<std::mutex> lock(mutex_);
    if (!comm_)
      return absl::AbortedError(
          absl::StrCat("rank ", rank_, ": the NCCL communicator was aborted"));
    return absl::OkStatus();
  }

  /// Polls `comm` until its last call completed (a non-blocking
  /// communicator), failing with the group's status, an NCCL error, or a
  /// DeadlineExceeded that aborts the group.
  absl::Status waitComm(ncclComm_t comm, const char *what, bool owned = false) {
    const auto start = std::chrono::steady_clock::now();
    for (int spins = 0;; ++spins) {
      if (absl::Status s = group_->status(); !s.ok())
        return s;
      ncclResult_t state = ncclSuccess;
      bool gone = false;
      {
        // Only this thread creates `comm` (ours or a split's child), and
        // only an abort under mutex_ frees ours.
        std::lock_guard<std::mutex> lock(mutex_);
        if (owned && !comm_)
          gone = true;
        else if (ncclResult_t r = nccl_.commGetAsyncError(comm, &state);
                 r != ncclSuccess)
          state = r;
      }
      if (gone)
        return usable();
      if (state == ncclSuccess)
        return absl::OkStatus();
      if (state != ncclInProgress) {
        absl::Status error =
            named(ncclError(nccl_, state, comm, absl::StrCat("nccl ", what)));
        group_->abort(error);
        return error;
      }
      if (timeout_.count() > 0 &&
          std::chrono::steady_clock::now() - start > timeout_) {
        absl::Status late = absl::DeadlineExceededError(
            absl::StrCat("rank ", rank_, ": nccl ", what,
                         " did not complete within ", formatTimeout(timeout_),
                         " (a rank did not arrive; --collective-timeout)"));
        group_->abort(late);
        return late;
      }
      if (spins < 1000)
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  }
  absl::Status waitReady(const char *what) {
    ncclComm_t comm;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      comm = comm_;
    }
    if (!comm)
      return usable();
    return waitComm(comm, what, /*owned=*/true);
  }

  /// Enqueues one collective on `stream` and hands its completion event to
  /// the watchdog.
  template <typename Call>
  absl::Status submit(const char *what, Stream &stream, BufferRef send,
                      BufferRef recv, Call call) {
    if (absl::Status s = usable(); !s.ok())
      return s;
    absl::StatusOr<void *> cuStream = streamHandle(stream);
    if (!cuStream.ok())
      return named(cuStream.status());
    absl::StatusOr<void *> sendPtr = devicePointer(send, "send");
    if (!sendPtr.ok())
      return named(sendPtr.status());
    absl::StatusOr<void *> recvPtr = devicePointer(recv, "recv");
    if (!recvPtr.ok())
      return named(recvPtr.status());
    if (absl::Status s = setCurrentContext(device_); !s.ok())
      return named(s);
    // The communicator finishes its creation (or the previous call) first.
    if (absl::Status s = waitReady(what); !s.ok())
      return s;
    absl::Status error;
    bool aborted = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!comm_) {
        aborted = true;
      } else if (ncclResult_t result = call(
                     *sendPtr, *recvPtr, static_cast<cudaStream_t>(*cuStream));
                 result != ncclSuccess && result != ncclInProgress) {
        error =
            named(ncclError(nccl_, result, comm_, absl::StrCat("nccl ", what)));
      }
    }
    if (aborted)
      return usable();
    if (!error.ok()) {
      group_->abort(error);
      return error;
    }
    if (absl::Status s = waitReady(what); !s.ok())
      return s;
    if (timeout_.count() == 0)
      return absl::OkStatus();
    absl::StatusOr<void *> event = recordEvent(device_, *cuStream);
    if (!event.ok())
      return named(event.status());
    std::lock_guard<std::mutex> lock(mutex_);
    pending_.push_back(
        {*event, std::chrono::steady_clock::now() + timeout_, what});
    changed_.notify_all();
    return absl::OkStatus();
  }

  /// The watchdog: completes pending events in order, aborts the group
  /// when one is late.
  void watch() {
    bool current = false;
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      changed_.wait(lock, [&] { return stopping_ || !pending_.empty(); });
      if (pending_.empty()) {
        if (stopping_)
          return;
        continue;
      }
      if (!current) {
        current = true;
        (void)setCurrentContext(device_);
      }
      Pending &p = pending_.front();
      absl::StatusOr<bool> done = queryEvent(device_, p.event);
      if (!done.ok() || *done) {
        destroyEvent(device_, p.event);
        pending_.pop_front();
        if (pending_.empty())
          idle_.notify_all();
        continue;
      }
      if (std::chrono::steady_clock::now() > p.deadline) {
        absl::Status late = absl::DeadlineExceededError(absl::StrCat(
            "rank ", rank_, ": nccl ", p.what, " did not complete within ",
            formatTimeout(timeout_),
            " (a rank did not arrive or died; --collective-timeout)"));
        lock.unlock();
        group_->abort(late);
        lock.lock();
        current = false;
        continue;
      }
      changed_.wait_for(lock, std::chrono::milliseconds(2));
    }
  }

  const NcclLibrary &nccl_;
  const NcclDeviceContext device_;
  int rank_, size_;
  std::shared_ptr<LocalGroup> group_;
  const std::chrono::milliseconds timeout_;
  int64_t splits_ = 0;

  /// Guards comm_ (null once aborted) and pending_.
  std::mutex mutex_;
  std::condition_variable changed_, idle_;
  ncclComm_t comm_;
  std::deque<Pending> pending_;
  bool stopping_ = false;
  std::thread watchdog_;
};

void LocalGroup::abort(const absl::Status &reason) {
  // Under mutex_ throughout, so that no member leaves (and is freed)
  // meanwhile; the order is always group, then channel.
  std::lock_guard<std::mutex> lock(mutex_);
  if (!status_.ok() || reason.ok())
    return;
  status_ = reason.code() == absl::StatusCode::kDeadlineExceeded
                ? reason
                : absl::AbortedError(reason.message());
  for (NcclChannel *channel : members_)
    channel->abortCommunicator();
}

//===----------------------------------------------------------------------===//
// Loopback
//===----------------------------------------------------------------------===//

/// A group of one: every collective is the identity.
class LoopbackChannel final : public Channel {
public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  absl::Status allReduce(Stream &stream, BufferRef send, BufferRef recv,
                         DType dtype, ReduceOp op) override {
    if (absl::Status s = checkHostReduction(dtype, op); !s.ok())
      return s;
    if (send.length != recv.length)
      return absl::InvalidArgumentError(
          absl::StrCat("all_reduce of ", send.length, " bytes into ",
                       recv.length, " (expected equal lengths)"));
    return copy(stream, send, recv);
  }
  absl::Status allGather(Stream &stream, BufferRef send,
                         BufferRef recv) override {
    if (send.length != recv.length)
      return absl::InvalidArgumentError(absl::StrCat(
          "all_gather of ", send.length, " bytes into ", recv.length,
          " (expected ", send.length, " = 1 rank x ", send.length, ")"));
    return copy(stream, send, recv);
  }
  absl::Status reduceScatter(Stream &stream, BufferRef send, BufferRef recv,
                             DType dtype, ReduceOp op) override {
    return allReduce(stream, send, recv, dtype, op);
  }
  absl::Status broadcast(Stream &, BufferRef, int root) override {
    if (root != 0)
      return absl::InvalidArgumentError(absl::StrCat(
          "broadcast: root = ", root, " but the channel has ranks 0..0"));
    return absl::OkStatus();
  }
  absl::StatusOr<std::unique_ptr<Channel>> split(int color, int) override {
    if (color < 0)
      return absl::InvalidArgumentError(
          absl::StrCat("split color ", color, " (expected >= 0)"));
    return std::unique_ptr<Channel>(new LoopbackChannel);
  }

private:
  static absl::Status copy(Stream &stream, BufferRef send, BufferRef recv) {
    if (send == recv)
      return absl::OkStatus();
    return stream.copy(send, recv);
  }
};

} // namespace

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

absl::StatusOr<int> loadNccl() {
  absl::StatusOr<const NcclLibrary *> nccl = library();
  if (!nccl.ok())
    return nccl.status();
  return (*nccl)->version;
}

absl::StatusOr<NcclUniqueId> makeNcclUniqueId() {
  absl::StatusOr<const NcclLibrary *> nccl = library();
  if (!nccl.ok())
    return nccl.status();
  ncclUniqueId id;
  if (ncclResult_t r = (*nccl)->getUniqueId(&id); r != ncclSuccess)
    return ncclError(**nccl, r, nullptr, "nccl: ncclGetUniqueId");
  NcclUniqueId out;
  std::memcpy(out.data(), &id, sizeof(id));
  return out;
}

absl::StatusOr<std::unique_ptr<Channel>>
createNcclChannel(const NcclDeviceContext &context, const ChannelSpec &spec) {
  if (!spec.bootstrap)
    return std::unique_ptr<Channel>(new LoopbackChannel);
  auto *bootstrap = dynamic_cast<NcclBootstrap *>(spec.bootstrap.get());
  if (!bootstrap)
    return absl::UnimplementedError(absl::StrCat(
        "cuda: cannot make a channel of a '", spec.bootstrap->kind(),
        "' group (expected 'nccl': omnirun --gpus N, or mpirun ... omnirun "
        "--gpus N)"));
  absl::StatusOr<const NcclLibrary *> nccl = library();
  if (!nccl.ok())
    return nccl.status();
  if (absl::Status s = setCurrentContext(context); !s.ok())
    return s;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  // Non-blocking: returns at once, so one thread may create the channels
  // of every local rank in turn; the first collective waits.
  config.blocking = 0;
  // A library older than the header reads the fields it knows.
  config.version = std::min<unsigned>(config.version, (*nccl)->version);
  ncclComm_t comm = nullptr;
  ncclResult_t r = (*nccl)->commInitRankConfig(
      &comm, spec.size, bootstrap->id(), spec.rank, &config);
  if (r != ncclSuccess && r != ncclInProgress)
    return ncclError(**nccl, r, comm,
                     absl::StrCat("rank ", spec.rank, ": nccl init"));
  return std::unique_ptr<Channel>(
      new NcclChannel(**nccl, context, comm, spec.rank, spec.size,
                      bootstrap->group(), bootstrap->timeout()));
}

NcclChannelProvider::NcclChannelProvider(int size,
                                         std::chrono::milliseconds timeout)
    : size_(size), timeout_(timeout) {
  for (int r = 0; r < size; ++r)
    localRanks_.push_back(r);
}

NcclChannelProvider::NcclChannelProvider(int size, const NcclUniqueId &id,
                                         std::vector<int> localRanks,
                                         std::chrono::milliseconds timeout)
    : size_(size), localRanks_(std::move(localRanks)), timeout_(timeout),
      hasId_(true), id_(id) {}

absl::StatusOr<ChannelSpec> NcclChannelProvider::spec(int rank) const {
  if (size_ < 1)
    return absl::InvalidArgumentError(
        absl::StrCat("an NCCL group of ", size_, " ranks (expected >= 1)"));
  if (std::find(localRanks_.begin(), localRanks_.end(), rank) ==
      localRanks_.end())
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", rank, " is not a rank of this process's NCCL group (",
        localRanks_.empty()
            ? std::string("none")
            : absl::StrCat(localRanks_.front(), "..", localRanks_.back()),
        " of ", size_, ")"));
  if (size_ == 1)
    return ChannelSpec{};
  std::lock_guard<std::mutex> lock(mutex_);
  if (!bootstrap_) {
    ncclUniqueId id;
    if (hasId_) {
      std::memcpy(&id, id_.data(), sizeof(id));
    } else {
      absl::StatusOr<NcclUniqueId> made = makeNcclUniqueId();
      if (!made.ok())
        return made.status();
      std::memcpy(&id, made->data(), sizeof(id));
    }
    bootstrap_ = std::make_shared<NcclBootstrap>(size_, id, timeout_);
  }
  return ChannelSpec{rank, size_, bootstrap_};
}

} // namespace omni::hal::cuda
