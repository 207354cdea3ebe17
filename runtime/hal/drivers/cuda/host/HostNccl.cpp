//===- HostNccl.cpp - NCCL's collectives modelled on the CPU --------------===//
//
// The NCCL entry points the cuda driver's channel uses (NcclChannel.cpp's
// NcclLibrary), for HostModel.h's model, loaded through OMNI_NCCL_LIBRARY:
// the ranks of one process (omnirun --gpus N, OMNI_HOST_CUDA_DEVICES >= N)
// in one address space.
// - A communicator joins the group of its unique id; ncclCommSplit groups
//   the ranks of a color by (key, rank) once every rank of the parent has
//   asked (until then ncclCommGetAsyncError says ncclInProgress, as a
//   non-blocking communicator's does).
// - A collective is a command of the rank's stream. When it reaches the
//   front of its stream it leaves its buffers with the group's n-th
//   collective and waits there (HostModel.h's kParked) until every rank's
//   has; the last one computes every rank's result (sums in double,
//   rounded once to the element type, in rank order) and they all go on.
//   A mismatched collective (kind, count, type, op, root) fails each rank
//   with ncclInvalidUsage's CUDA_ERROR_LAUNCH_FAILED.
// - ncclCommAbort releases the group's waiting collectives without
//   writing their results (as an aborted NCCL kernel leaves garbage).
//
//===----------------------------------------------------------------------===//

#include "runtime/hal/drivers/cuda/host/HostModel.h"

#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace omni::hal::cuda::host {
namespace {

enum class Kind { AllReduce, AllGather, ReduceScatter, Broadcast };

/// One collective of a group: what each rank left.
struct Meeting {
  Kind kind;
  size_t count;
  ncclDataType_t type;
  int op = 0; // the reduction, or the root
  std::vector<const void *> send;
  std::vector<void *> recv;
  int arrived = 0, left = 0;
  bool done = false, mismatch = false;
};

struct Split;

struct Group {
  int size;
  bool aborted = false;
  std::map<int64_t, Meeting> meetings;
  std::map<int64_t, std::shared_ptr<Split>> splits;
};

/// One ncclCommSplit of a group: each rank's color and key, and the
/// children made when every rank has asked.
struct Split {
  std::vector<int> color, key;
  int asked = 0;
  std::vector<ncclComm *> children;
};

/// The element type of an NCCL type (bytes move as I1, one each).
DType dtypeOf(ncclDataType_t t) {
  switch (t) {
  case ncclFloat16:
    return DType::F16;
  case ncclBfloat16:
    return DType::BF16;
  case ncclFloat32:
    return DType::F32;
  case ncclFloat64:
    return DType::F64;
  case ncclInt32:
    return DType::I32;
  case ncclInt64:
    return DType::I64;
  default:
    return DType::I1;
  }
}

size_t sizeOf(ncclDataType_t t) {
  return static_cast<size_t>(dtypeSize(dtypeOf(t)));
}

double load(ncclDataType_t t, const unsigned char *p) {
  return loadElement(dtypeOf(t), p);
}

void store(ncclDataType_t t, unsigned char *p, double value) {
  storeElement(dtypeOf(t), p, value);
}

double reduce(int op, double a, double b) {
  switch (op) {
  case ncclProd:
    return a * b;
  case ncclMax:
    return a != a || b != b ? a + b : std::max(a, b);
  case ncclMin:
    return a != a || b != b ? a + b : std::min(a, b);
  default: // sum, avg
    return a + b;
  }
}

/// Reduces element i of `count` of every rank's send buffer starting at
/// element `first`.
double reduced(const Meeting &m, size_t first, size_t i) {
  const size_t es = sizeOf(m.type);
  double acc = 0;
  for (size_t r = 0; r < m.send.size(); ++r) {
    double v = load(m.type, static_cast<const unsigned char *>(m.send[r]) +
                                (first + i) * es);
    acc = r == 0 ? v : reduce(m.op, acc, v);
  }
  if (m.op == ncclAvg)
    acc /= static_cast<double>(m.send.size());
  return acc;
}

/// Every rank's result, computed before any is written (send and recv may
/// be the same buffer).
void compute(Meeting &m) {
  const size_t es = sizeOf(m.type), n = m.send.size();
  std::vector<std::vector<unsigned char>> out(n);
  for (size_t r = 0; r < n; ++r) {
    switch (m.kind) {
    case Kind::AllReduce:
      out[r].resize(m.count * es);
      for (size_t i = 0; i < m.count; ++i)
        store(m.type, out[r].data() + i * es, reduced(m, 0, i));
      break;
    case Kind::ReduceScatter:
      out[r].resize(m.count * es);
      for (size_t i = 0; i < m.count; ++i)
        store(m.type, out[r].data() + i * es, reduced(m, r * m.count, i));
      break;
    case Kind::AllGather:
      out[r].resize(n * m.count * es);
      for (size_t q = 0; q < n; ++q)
        std::memcpy(out[r].data() + q * m.count * es, m.send[q], m.count * es);
      break;
    case Kind::Broadcast:
      out[r].assign(static_cast<const unsigned char *>(m.send[m.op]),
                    static_cast<const unsigned char *>(m.send[m.op]) +
                        m.count * es);
      break;
    }
  }
  for (size_t r = 0; r < n; ++r)
    std::memcpy(m.recv[r], out[r].data(), out[r].size());
}

/// Groups by unique id.
std::map<std::string, std::shared_ptr<Group>> &groups() {
  static auto *all = new std::map<std::string, std::shared_ptr<Group>>();
  return *all;
}

} // namespace
} // namespace omni::hal::cuda::host

using namespace omni::hal::cuda::host;

struct ncclComm {
  std::shared_ptr<Group> group;
  int rank = 0;
  int64_t collectives = 0, splits = 0;
  /// A split's child until its split completes.
  std::shared_ptr<Split> pending;
};

namespace {

/// Enqueues `rank`'s part of the group's next collective on `stream`.
ncclResult_t collective(ncclComm *comm, Kind kind, const void *send, void *recv,
                        size_t count, ncclDataType_t type, int op,
                        cudaStream_t stream) {
  OMNI_HOST_LOCK;
  if (!comm || !comm->group || comm->pending)
    return ncclInvalidArgument;
  const size_t es = sizeOf(type);
  const size_t n = static_cast<size_t>(comm->group->size);
  const size_t sendBytes = (kind == Kind::ReduceScatter ? n : 1) * count * es;
  const size_t recvBytes = (kind == Kind::AllGather ? n : 1) * count * es;
  if (!isDeviceRange(reinterpret_cast<uintptr_t>(send), sendBytes) ||
      !isDeviceRange(reinterpret_cast<uintptr_t>(recv), recvBytes))
    return ncclInvalidArgument;
  std::shared_ptr<Group> group = comm->group;
  const int64_t seq = comm->collectives++;
  const int rank = comm->rank;
  bool joined = false;
  CUresult r =
      submit(reinterpret_cast<CUstream>(stream), [=]() mutable -> CUresult {
        if (group->aborted)
          return CUDA_SUCCESS; // an aborted kernel's garbage
        Meeting &m = group->meetings
                         .try_emplace(seq, Meeting{kind, count, type, op,
                                                   std::vector<const void *>(n),
                                                   std::vector<void *>(n)})
                         .first->second;
        if (!joined) {
          joined = true;
          if (m.kind != kind || m.count != count || m.type != type ||
              m.op != op)
            m.mismatch = true;
          m.send[rank] = send;
          m.recv[rank] = recv;
          if (++m.arrived == group->size) {
            if (!m.mismatch)
              compute(m);
            m.done = true;
            notifyProgress();
          }
        }
        if (!m.done)
          return kParked;
        const bool failed = m.mismatch;
        if (++m.left == group->size)
          group->meetings.erase(seq);
        return failed ? CUDA_ERROR_LAUNCH_FAILED : CUDA_SUCCESS;
      });
  return r == CUDA_SUCCESS ? ncclSuccess : ncclUnhandledCudaError;
}

} // namespace

extern "C" {

ncclResult_t ncclGetVersion(int *version) {
  *version = 22000;
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  OMNI_HOST_LOCK;
  static uint64_t next = 0;
  std::memset(id, 0, sizeof(*id));
  const uint64_t value = ++next;
  std::memcpy(id->internal, "omni-host-nccl", 14);
  std::memcpy(id->internal + 16, &value, sizeof(value));
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks,
                                    ncclUniqueId id, int rank, ncclConfig_t *) {
  OMNI_HOST_LOCK;
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return ncclInvalidArgument;
  std::shared_ptr<Group> &group =
      groups()[std::string(id.internal, sizeof(id.internal))];
  if (!group) {
    group = std::make_shared<Group>();
    group->size = nranks;
  }
  if (group->size != nranks)
    return ncclInvalidUsage;
  auto *c = new ncclComm();
  c->group = group;
  c->rank = rank;
  *comm = c;
  return ncclSuccess;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key,
                           ncclComm_t *newcomm, ncclConfig_t *) {
  OMNI_HOST_LOCK;
  if (!comm || comm->pending)
    return ncclInvalidArgument;
  Group &group = *comm->group;
  std::shared_ptr<Split> &split = group.splits[comm->splits++];
  if (!split) {
    split = std::make_shared<Split>();
    split->color.assign(group.size, -1);
    split->key.assign(group.size, 0);
    split->children.assign(group.size, nullptr);
  }
  split->color[comm->rank] = color;
  split->key[comm->rank] = key;
  auto *child = new ncclComm();
  child->pending = split;
  split->children[comm->rank] = child;
  *newcomm = child;
  if (++split->asked == group.size) {
    // Every rank asked: one group per color, ranked by (key, rank).
    std::map<int, std::vector<std::pair<int, int>>> byColor;
    for (int r = 0; r < group.size; ++r)
      byColor[split->color[r]].push_back({split->key[r], r});
    for (auto &[c, members] : byColor) {
      std::sort(members.begin(), members.end());
      auto g = std::make_shared<Group>();
      g->size = static_cast<int>(members.size());
      for (size_t i = 0; i < members.size(); ++i) {
        ncclComm *m = split->children[members[i].second];
        m->group = g;
        m->rank = static_cast<int>(i);
        m->pending.reset();
      }
    }
  }
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  OMNI_HOST_LOCK;
  if (!comm)
    return ncclSuccess;
  if (comm->group) {
    comm->group->aborted = true;
    notifyProgress();
  }
  // A split that never completed keeps its pointer to this child.
  if (!comm->pending)
    delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *state) {
  OMNI_HOST_LOCK;
  *state = comm->pending ? ncclInProgress : ncclSuccess;
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count) {
  OMNI_HOST_LOCK;
  if (!comm->group)
    return ncclInvalidUsage;
  *count = comm->group->size;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank) {
  *rank = comm->rank;
  return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t result) {
  switch (result) {
  case ncclSuccess:
    return "no error";
  case ncclInvalidArgument:
    return "invalid argument (host model)";
  case ncclInvalidUsage:
    return "invalid usage (host model)";
  case ncclInProgress:
    return "operation in progress";
  default:
    return "error (host model)";
  }
}

const char *ncclGetLastError(ncclComm_t) { return "the host model of NCCL"; }

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count,
                           ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  return collective(comm, Kind::AllReduce, send, recv, count, type, op, stream);
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t count,
                           ncclDataType_t type, ncclComm_t comm,
                           cudaStream_t stream) {
  return collective(comm, Kind::AllGather, send, recv, count, type, 0, stream);
}

ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t count,
                               ncclDataType_t type, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t stream) {
  return collective(comm, Kind::ReduceScatter, send, recv, count, type, op,
                    stream);
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count,
                           ncclDataType_t type, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  return collective(comm, Kind::Broadcast, send, recv, count, type, root,
                    stream);
}

} // extern "C"
