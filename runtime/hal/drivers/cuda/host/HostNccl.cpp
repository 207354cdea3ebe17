//===- HostNccl.cpp - NCCL's collectives modelled on the CPU --------------===//
//
// The NCCL entry points the cuda driver's channel uses (NcclChannel.cpp's
// NcclLibrary), for HostModel.h's model, loaded through OMNI_NCCL_LIBRARY:
// the ranks of one process (omnirun --gpus N, OMNI_HOST_CUDA_DEVICES >= N)
// or of several (mpirun -np P omnirun --gpus N on one machine).
// - A unique id names a directory, $TMPDIR/omni-host-nccl-<pid>-<n>-<time>.
//   A communicator registers there (member.r<rank>, holding its pid, host
//   and GPU: physicalDevice of its device) and is in progress, as a
//   non-blocking one is, until every rank has. Then the group knows
//   whether all its ranks are in this process, and two ranks on one GPU
//   of one host fail the init as NCCL's "Duplicate GPU detected". As NCCL
//   asks of non-blocking communicators, a collective or split on one
//   that ncclCommGetAsyncError has not yet called ready is refused
//   (ncclInvalidUsage).
// - ncclCommSplit groups the ranks of a color by (key, rank) once every
//   rank of the parent has asked (until then ncclCommGetAsyncError says
//   ncclInProgress).
// - A collective is a command of the rank's stream. When it reaches the
//   front of its stream it meets the other ranks' n-th collective and
//   waits there (HostModel.h's kParked) until all have come. In one
//   process it leaves its buffers in memory and the last rank computes
//   every result; across processes it leaves its send buffer in a file of
//   the group's directory (c<n>.r<rank>, written whole and renamed) and
//   each rank computes its own result from all the files. Either way
//   sums are in double, in rank order, rounded once to the element type,
//   so both give the same bits. A mismatched collective (kind, count,
//   type, op, root) fails each rank with ncclInvalidUsage's
//   CUDA_ERROR_LAUNCH_FAILED.
// - ncclCommAbort releases the waiting collectives of its process's ranks
//   without writing their results (as an aborted NCCL kernel leaves
//   garbage); ranks in other processes wait for their watchdog, as with
//   NCCL. The last member to leave removes the directory.
//
//===----------------------------------------------------------------------===//

#include "runtime/hal/drivers/cuda/host/HostModel.h"

#include <nccl.h>

#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
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
  /// The unique id's name; the group's files are in dir() (empty for the
  /// children of a split of ranks that are all in this process).
  std::string name;
  bool aborted = false;
  /// Every rank has registered; `local`: all of them in this process.
  bool complete = false, local = true;
  /// Two ranks on one GPU of one host (NCCL refuses that): why, else empty.
  std::string duplicate;
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
  static constexpr std::pair<ncclDataType_t, DType> kTypes[] = {
      {ncclFloat16, DType::F16}, {ncclBfloat16, DType::BF16},
      {ncclFloat32, DType::F32}, {ncclFloat64, DType::F64},
      {ncclInt32, DType::I32},   {ncclInt64, DType::I64}};
  return dtypeIn(t, kTypes).value_or(DType::I1);
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

/// An integer sum or product as NCCL's: two's complement, wrapping.
int64_t reduceInteger(int op, int64_t a, int64_t b) {
  switch (op) {
  case ncclProd:
    return static_cast<int64_t>(static_cast<uint64_t>(a) *
                                static_cast<uint64_t>(b));
  case ncclMax:
    return std::max(a, b);
  case ncclMin:
    return std::min(a, b);
  default: // sum (avg is refused for integers by the channel)
    return static_cast<int64_t>(static_cast<uint64_t>(a) +
                                static_cast<uint64_t>(b));
  }
}

bool isInteger(ncclDataType_t t) { return t == ncclInt32 || t == ncclInt64; }

/// Element i of an integer reduction (the type's width, wrapping) of every
/// rank's send buffer starting at element `first`.
int64_t reducedInteger(const Meeting &m, size_t first, size_t i) {
  const size_t es = sizeOf(m.type);
  int64_t acc = 0;
  for (size_t r = 0; r < m.send.size(); ++r) {
    const auto *p =
        static_cast<const unsigned char *>(m.send[r]) + (first + i) * es;
    int64_t v = 0;
    if (m.type == ncclInt32) {
      int32_t v32;
      std::memcpy(&v32, p, 4);
      v = v32;
    } else {
      std::memcpy(&v, p, 8);
    }
    acc = r == 0 ? v : reduceInteger(m.op, acc, v);
    if (m.type == ncclInt32) // wraps at 32 bits, as the GPU's adds do
      acc = static_cast<int32_t>(static_cast<uint32_t>(acc));
  }
  return acc;
}

/// Reduces element i of `count` of every rank's send buffer starting at
/// element `first` (floats: in double, in rank order).
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

/// Rank r's result.
std::vector<unsigned char> result(const Meeting &m, size_t r) {
  const size_t es = sizeOf(m.type), n = m.send.size();
  std::vector<unsigned char> out;
  switch (m.kind) {
  case Kind::AllReduce:
  case Kind::ReduceScatter: {
    const size_t first = m.kind == Kind::ReduceScatter ? r * m.count : 0;
    out.resize(m.count * es);
    for (size_t i = 0; i < m.count; ++i) {
      if (isInteger(m.type)) {
        const int64_t v = reducedInteger(m, first, i);
        const int32_t v32 = static_cast<int32_t>(v);
        std::memcpy(out.data() + i * es,
                    es == 4 ? static_cast<const void *>(&v32) : &v, es);
        continue;
      }
      store(m.type, out.data() + i * es, reduced(m, first, i));
    }
    break;
  }
  case Kind::AllGather:
    out.resize(n * m.count * es);
    for (size_t q = 0; q < n; ++q)
      std::memcpy(out.data() + q * m.count * es, m.send[q], m.count * es);
    break;
  case Kind::Broadcast:
    out.assign(static_cast<const unsigned char *>(m.send[m.op]),
               static_cast<const unsigned char *>(m.send[m.op]) + m.count * es);
    break;
  }
  return out;
}

/// Every rank's result, computed before any is written (send and recv may
/// be the same buffer).
void compute(Meeting &m) {
  std::vector<std::vector<unsigned char>> out;
  for (size_t r = 0; r < m.send.size(); ++r)
    out.push_back(result(m, r));
  for (size_t r = 0; r < m.send.size(); ++r)
    std::memcpy(m.recv[r], out[r].data(), out[r].size());
}

//===----------------------------------------------------------------------===//
// Files: the rendezvous of ranks in several processes
//===----------------------------------------------------------------------===//

constexpr char kIdMagic[] = "omni-host-nccl:";
constexpr size_t kIdName = 16; // where the name starts in the id

std::string dirOf(const Group &g) {
  const char *tmp = std::getenv("TMPDIR");
  return std::string(tmp && *tmp ? tmp : "/tmp") + "/omni-host-nccl-" + g.name;
}

std::string fileOf(const Group &g, const std::string &what, int rank) {
  return dirOf(g) + "/" + what + ".r" + std::to_string(rank);
}

/// Writes `bytes` to `path` whole: other processes see all or nothing.
bool writeWhole(const std::string &path, const std::string &bytes) {
  const std::string temp = path + ".tmp";
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out.flush())
      return false;
  }
  return std::rename(temp.c_str(), path.c_str()) == 0;
}

std::optional<std::string> readWhole(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return std::nullopt;
  return std::string(std::istreambuf_iterator<char>(in),
                     std::istreambuf_iterator<char>());
}

/// Registers `rank` of `g` in its directory: its pid, host and GPU (the
/// host's, of this process's `device`).
bool registerRank(const Group &g, int rank, int device) {
  if (::mkdir(dirOf(g).c_str(), 0700) != 0 && errno != EEXIST)
    return false;
  return writeWhole(fileOf(g, "member", rank),
                    std::to_string(::getpid()) + " " + hostName() + " " +
                        std::to_string(physicalDevice(device)));
}

/// Whether every rank of `g` has registered (and so whether all are in
/// this process, and whether two share a GPU).
bool completes(Group &g) {
  if (g.complete)
    return true;
  bool local = true;
  std::map<std::pair<std::string, int>, int> gpus; // (host, GPU) -> rank
  for (int r = 0; r < g.size; ++r) {
    std::optional<std::string> member = readWhole(fileOf(g, "member", r));
    if (!member)
      return false;
    std::istringstream fields(*member);
    long pid = 0;
    std::string host;
    int gpu = -1;
    fields >> pid >> host >> gpu;
    local = local && pid == ::getpid();
    auto [at, added] = gpus.insert({{host, gpu}, r});
    if (!added && g.duplicate.empty())
      g.duplicate = "Duplicate GPU detected : rank " + std::to_string(r) +
                    " and rank " + std::to_string(at->second) +
                    " both on CUDA device " + std::to_string(gpu) +
                    " of host " + host + " (host model)";
  }
  g.complete = true;
  g.local = local;
  return true;
}

/// `rank` leaves `g`: the last member removes the directory.
void leave(const Group &g, int rank) {
  if (g.name.empty())
    return;
  const std::string dir = dirOf(g);
  std::remove(fileOf(g, "member", rank).c_str());
  DIR *d = ::opendir(dir.c_str());
  if (!d)
    return;
  std::vector<std::string> files;
  bool members = false;
  while (dirent *e = ::readdir(d)) {
    const std::string file = e->d_name;
    if (file == "." || file == "..")
      continue;
    members = members || file.rfind("member.", 0) == 0;
    files.push_back(dir + "/" + file);
  }
  ::closedir(d);
  if (members)
    return;
  for (const std::string &f : files)
    std::remove(f.c_str());
  ::rmdir(dir.c_str());
}

/// What a collective's file starts with.
struct FileHeader {
  int64_t kind, count, type, op;
};

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
  /// A split's child until its split completes: of ranks in one process
  /// (`pending`), or in several (`parent`: the parent group, whose files
  /// say each rank's color and key).
  std::shared_ptr<Split> pending;
  std::shared_ptr<Group> parent;
  int64_t split = 0;
  int parentRank = 0, color = 0;
  /// ncclCommGetAsyncError has said ncclSuccess: a non-blocking
  /// communicator takes no other call before.
  bool confirmed = false;
  /// The GPU: the current context's at creation (NCCL takes the current
  /// device), a split's parent's. Its streams and buffers must be there.
  int device = 0;
};

namespace {

/// The group named `name` in this process, made if new.
std::shared_ptr<Group> groupNamed(const std::string &name, int size) {
  std::shared_ptr<Group> &group = groups()[name];
  if (!group) {
    group = std::make_shared<Group>();
    group->size = size;
    group->name = name;
  }
  return group;
}

/// Whether `comm` is made: its split has completed and every rank of its
/// group has registered. A child of a split across processes learns its
/// group from the parent's files and registers here.
bool ready(ncclComm *comm) {
  if (comm->pending)
    return false;
  if (comm->parent) {
    const Group &parent = *comm->parent;
    const std::string what = "split" + std::to_string(comm->split);
    std::vector<std::pair<int, int>> members; // (key, parent rank)
    for (int r = 0; r < parent.size; ++r) {
      std::optional<std::string> entry = readWhole(fileOf(parent, what, r));
      if (!entry)
        return false;
      int color = 0, key = 0;
      if (std::sscanf(entry->c_str(), "%d %d", &color, &key) != 2)
        return false;
      if (color == comm->color)
        members.push_back({key, r});
    }
    std::sort(members.begin(), members.end());
    int rank = 0;
    while (members[rank].second != comm->parentRank)
      ++rank;
    comm->group = groupNamed(parent.name + ".s" + std::to_string(comm->split) +
                                 "c" + std::to_string(comm->color),
                             static_cast<int>(members.size()));
    comm->rank = rank;
    comm->parent.reset();
    if (!registerRank(*comm->group, rank, comm->device))
      return false;
  }
  return comm->group && completes(*comm->group);
}

} // namespace

namespace {

/// `rank`'s part of the group's collective `seq` across processes: its
/// send buffer goes to its file (once: `joined`), then it waits until
/// every rank's file is there and computes its own result from them.
CUresult meetInFiles(const Group &group, int64_t seq, int rank, bool &joined,
                     Kind kind, const void *send, void *recv, size_t count,
                     ncclDataType_t type, int op) {
  const size_t es = sizeOf(type), n = static_cast<size_t>(group.size);
  const size_t sendBytes = (kind == Kind::ReduceScatter ? n : 1) * count * es;
  const FileHeader header{static_cast<int64_t>(kind),
                          static_cast<int64_t>(count),
                          static_cast<int64_t>(type), op};
  const std::string what = "c" + std::to_string(seq);
  if (!joined) {
    std::string bytes(reinterpret_cast<const char *>(&header), sizeof header);
    bytes.append(static_cast<const char *>(send), sendBytes);
    if (!writeWhole(fileOf(group, what, rank), bytes))
      return CUDA_ERROR_LAUNCH_FAILED;
    joined = true;
  }
  for (int q = 0; q < group.size; ++q)
    if (::access(fileOf(group, what, q).c_str(), F_OK) != 0)
      return kParked;
  Meeting m{kind, count, type, op, {}, {}};
  std::vector<std::string> files;
  for (int q = 0; q < group.size; ++q) {
    std::optional<std::string> file = readWhole(fileOf(group, what, q));
    FileHeader theirs{};
    if (file && file->size() >= sizeof theirs)
      std::memcpy(&theirs, file->data(), sizeof theirs);
    if (!file || std::memcmp(&theirs, &header, sizeof header) != 0 ||
        file->size() != sizeof header + sendBytes)
      m.mismatch = true;
    files.push_back(file ? std::move(*file) : std::string());
  }
  // Every rank has come to this collective, so all have read the previous
  // one's files: this rank's can go.
  std::remove(fileOf(group, "c" + std::to_string(seq - 1), rank).c_str());
  if (m.mismatch)
    return CUDA_ERROR_LAUNCH_FAILED;
  for (const std::string &file : files)
    m.send.push_back(file.data() + sizeof header);
  std::vector<unsigned char> out = result(m, static_cast<size_t>(rank));
  std::memcpy(recv, out.data(), out.size());
  return CUDA_SUCCESS;
}

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
      !isDeviceRange(reinterpret_cast<uintptr_t>(recv), recvBytes) ||
      allocationDevice(reinterpret_cast<uintptr_t>(send)) != comm->device ||
      allocationDevice(reinterpret_cast<uintptr_t>(recv)) != comm->device)
    return ncclInvalidArgument;
  if (streamDevice(reinterpret_cast<CUstream>(stream)) != comm->device)
    return ncclInvalidUsage;
  if (!comm->confirmed)
    return ncclInvalidUsage;
  std::shared_ptr<Group> group = comm->group;
  const int64_t seq = comm->collectives++;
  const int rank = comm->rank;
  bool joined = false;
  if (!group->local) {
    CUresult r =
        submit(reinterpret_cast<CUstream>(stream), [=]() mutable -> CUresult {
          if (group->aborted)
            return CUDA_SUCCESS;
          return meetInFiles(*group, seq, rank, joined, kind, send, recv, count,
                             type, op);
        });
    return r == CUDA_SUCCESS ? ncclSuccess : ncclUnhandledCudaError;
  }
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
  const std::string name =
      std::to_string(::getpid()) + "-" + std::to_string(++next) + "-" +
      std::to_string(
          std::chrono::system_clock::now().time_since_epoch().count());
  std::memcpy(id->internal, kIdMagic, sizeof kIdMagic - 1);
  std::memcpy(id->internal + kIdName, name.data(), name.size());
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks,
                                    ncclUniqueId id, int rank, ncclConfig_t *) {
  OMNI_HOST_LOCK;
  if (nranks < 1 || rank < 0 || rank >= nranks ||
      std::memcmp(id.internal, kIdMagic, sizeof kIdMagic - 1) != 0 ||
      id.internal[sizeof id.internal - 1] != 0)
    return ncclInvalidArgument;
  std::shared_ptr<Group> group =
      groupNamed(std::string(id.internal + kIdName), nranks);
  if (group->size != nranks)
    return ncclInvalidUsage;
  if (currentDevice() < 0)
    return ncclUnhandledCudaError; // no current context
  if (!registerRank(*group, rank, currentDevice()))
    return ncclSystemError;
  auto *c = new ncclComm();
  c->group = group;
  c->rank = rank;
  c->device = currentDevice();
  *comm = c;
  return ncclInProgress;
}

ncclResult_t ncclCommSplit(ncclComm_t comm, int color, int key,
                           ncclComm_t *newcomm, ncclConfig_t *) {
  OMNI_HOST_LOCK;
  if (!comm)
    return ncclInvalidArgument;
  if (!comm->confirmed)
    return ncclInvalidUsage;
  Group &group = *comm->group;
  if (!group.local) {
    // Across processes: this rank's color and key go to a file; the child
    // is made when every rank's is there (ready()).
    if (!writeWhole(
            fileOf(group, "split" + std::to_string(comm->splits), comm->rank),
            std::to_string(color) + " " + std::to_string(key)))
      return ncclSystemError;
    auto *child = new ncclComm();
    child->device = comm->device;
    child->parent = comm->group;
    child->split = comm->splits++;
    child->parentRank = comm->rank;
    child->color = color;
    *newcomm = child;
    return ncclInProgress;
  }
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
  child->device = comm->device;
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
      g->complete = true; // its ranks are all here
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
    leave(*comm->group, comm->rank);
  }
  // A split that never completed keeps its pointer to this child.
  if (!comm->pending)
    delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *state) {
  OMNI_HOST_LOCK;
  comm->confirmed = ready(comm);
  // NCCL's init fails when two ranks share a GPU.
  if (comm->confirmed && !comm->group->duplicate.empty()) {
    comm->confirmed = false;
    *state = ncclInvalidUsage;
    return ncclSuccess;
  }
  *state = comm->confirmed ? ncclSuccess : ncclInProgress;
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

const char *ncclGetLastError(ncclComm_t comm) {
  OMNI_HOST_LOCK;
  if (comm && comm->group && !comm->group->duplicate.empty())
    return comm->group->duplicate.c_str();
  return "the host model of NCCL";
}

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
