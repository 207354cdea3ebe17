//===- HostLibcuda.cpp - The CUDA driver API modelled on the CPU ----------===//
//
// The entry points the cuda driver resolves through cuGetProcAddress_v2
// (CudaApi.h's OMNI_CUDA_DRIVER_ENTRIES), for HostModel.h's model: one
// device (more with $OMNI_HOST_CUDA_DEVICES), sm_90, host memory, streams
// and their schedules, events, stream capture. Modules and launches are
// HostModules.cpp's.
//
//===----------------------------------------------------------------------===//

#include "runtime/hal/drivers/cuda/host/HostModel.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

// The handles cuda.h leaves opaque.
struct CUctx_st {
  int device = 0;
};
struct CUmemPoolHandle_st {};
struct CUevent_st {
  /// Whether the commands before its last record have run (shared with
  /// the queued record, which may outlive the event).
  std::shared_ptr<bool> done = std::make_shared<bool>(true);
  /// The stream of its last record (valid while not done).
  struct CUstream_st *stream = nullptr;
  /// A query found it not done once (the next query lets it finish).
  bool asked = false;
};

/// The allocations a capture made: the graph owns them (freed when the
/// last of the graph and its instances goes).
struct GraphMemory {
  std::vector<uintptr_t> allocations;
  ~GraphMemory();
};

struct CUgraph_st {
  std::shared_ptr<std::vector<std::function<CUresult()>>> ops =
      std::make_shared<std::vector<std::function<CUresult()>>>();
  std::shared_ptr<GraphMemory> memory = std::make_shared<GraphMemory>();
};
struct CUgraphExec_st {
  std::shared_ptr<std::vector<std::function<CUresult()>>> ops;
  std::shared_ptr<GraphMemory> memory;
};

struct CUstream_st {
  /// The graph being captured, or null.
  std::unique_ptr<CUgraph_st> capture;
  /// A command the capture cannot hold happened (the capture fails).
  bool invalidated = false;
  /// Commands enqueued and not yet run (the deferred schedule).
  std::deque<std::function<CUresult()>> pending;
  /// The first failure of a command that ran late: the stream's commands
  /// after it are dropped and every later synchronization reports it, as
  /// a GPU's asynchronous errors are.
  CUresult failure = CUDA_SUCCESS;
  /// The device of the context current when it was created.
  int device = 0;
};

namespace omni::hal::cuda::host {
namespace {

constexpr size_t kTotalMemory = size_t(80) << 30;
constexpr size_t kAlignment = 256;

/// A live allocation: its size and the device whose memory it is.
struct Allocation {
  size_t bytes;
  int device;
};

/// Live allocations by start.
std::map<uintptr_t, Allocation> &allocations() {
  static auto *live = new std::map<uintptr_t, Allocation>();
  return *live;
}

/// The allocation holding [address, address + bytes), or null.
const Allocation *holding(uintptr_t address, size_t bytes) {
  auto &live = allocations();
  auto it = live.upper_bound(address);
  if (it == live.begin())
    return nullptr;
  --it;
  const size_t size = it->second.bytes;
  if (address - it->first > size || bytes > size - (address - it->first))
    return nullptr;
  return &it->second;
}

/// This thread's current context (cuCtxSetCurrent), and the device whose
/// stream's commands it is running (-1: none).
thread_local CUctx_st *current = nullptr;
thread_local int running = -1;

/// Sets the running device for a scope.
struct Running {
  explicit Running(int device) : saved(running) { running = device; }
  ~Running() { running = saved; }
  int saved;
};
/// Bytes of live allocations owned by graphs.
size_t graphBytes = 0;

/// Every live stream (to run what they hold before a module goes).
std::set<CUstream> &streams() {
  static auto *live = new std::set<CUstream>();
  return *live;
}

/// Whether commands wait in their stream until something needs them
/// (OMNI_HOST_CUDA_SCHEDULE=deferred, the default) or run when enqueued
/// (eager, and under CUDA_LAUNCH_BLOCKING=1 as on a GPU: then a command's
/// failure is also the answer of the call that enqueued it).
bool deferred() {
  static const bool value = [] {
    const char *v = std::getenv("OMNI_HOST_CUDA_SCHEDULE");
    const char *blocking = std::getenv("CUDA_LAUNCH_BLOCKING");
    return !(v && std::string(v) == "eager") &&
           !(blocking && std::string(blocking) == "1");
  }();
  return value;
}

/// Runs what `stream` holds, in order, up to a command that must wait for
/// other ranks (kParked, left at the front); its sticky failure, or
/// kParked.
CUresult flush(CUstream stream) {
  while (!stream->pending.empty()) {
    std::function<CUresult()> op = std::move(stream->pending.front());
    stream->pending.pop_front();
    if (stream->failure != CUDA_SUCCESS)
      continue;
    Running on(stream->device);
    CUresult r = op();
    if (r == kParked) {
      stream->pending.push_front(std::move(op));
      return kParked;
    }
    if (r != CUDA_SUCCESS)
      stream->failure = r;
  }
  return stream->failure;
}

std::condition_variable_any &progress() {
  static auto *cv = new std::condition_variable_any();
  return *cv;
}

/// Blocks until `done()`: runs `stream`'s work (null: every stream's),
/// then, while something waits for other ranks, every stream's work (the
/// GPU makes progress on its own), and waits for other threads to enqueue
/// theirs. `lock` holds the model's mutex once.
template <typename Done>
void runUntil(std::unique_lock<std::recursive_mutex> &lock, CUstream stream,
              Done done) {
  while (true) {
    if (stream)
      (void)flush(stream);
    if (done())
      return;
    for (CUstream s : streams())
      (void)flush(s);
    if (done())
      return;
    progress().wait_for(lock, std::chrono::milliseconds(1));
  }
}

/// `event`'s state without waiting: its stream runs as far as it can.
CUresult poll(CUevent event) {
  if (*event->done)
    return CUDA_SUCCESS;
  CUresult r = flush(event->stream);
  if (*event->done)
    return CUDA_SUCCESS;
  return r == kParked || r == CUDA_SUCCESS ? CUDA_ERROR_NOT_READY : r;
}

CUmemPoolHandle_st thePool;

/// The host's GPUs this process sees, by ordinal (physicalDevice).
const std::vector<int> &visibleDevices() {
  static const std::vector<int> *visible = [] {
    const char *v = std::getenv("OMNI_HOST_CUDA_DEVICES");
    const int host = v && *v ? std::atoi(v) : 1;
    auto *list = new std::vector<int>();
    const char *only = std::getenv("CUDA_VISIBLE_DEVICES");
    if (!only) {
      for (int d = 0; d < host; ++d)
        list->push_back(d);
      return list;
    }
    std::stringstream entries(only);
    for (std::string entry; std::getline(entries, entry, ',');) {
      char *end = nullptr;
      long d = std::strtol(entry.c_str(), &end, 10);
      if (entry.empty() || *end != '\0' || d < 0 || d >= host)
        break;
      list->push_back(static_cast<int>(d));
    }
    return list;
  }();
  return *visible;
}

int deviceCount() { return static_cast<int>(visibleDevices().size()); }

/// Each device's primary context.
constexpr int kMaxDevices = 64;
CUctx_st *primaryContexts() {
  static auto *all = [] {
    auto *c = new CUctx_st[kMaxDevices];
    for (int d = 0; d < kMaxDevices; ++d)
      c[d].device = d;
    return c;
  }();
  return all;
}

CUresult allocate(size_t bytes, uintptr_t *out, int device) {
  if (bytes == 0)
    return CUDA_ERROR_INVALID_VALUE;
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void *p = std::aligned_alloc(kAlignment, rounded);
  if (!p)
    return CUDA_ERROR_OUT_OF_MEMORY;
  // Fresh device memory holds whatever was there: bytes that read as NaN
  // in every float type, so a result built on unwritten memory shows.
  std::memset(p, 0xFF, rounded);
  *out = reinterpret_cast<uintptr_t>(p);
  allocations()[*out] = {bytes, device};
  return CUDA_SUCCESS;
}

void release(uintptr_t p) {
  allocations().erase(p);
  std::free(reinterpret_cast<void *>(p));
}

void releaseGraphAllocation(uintptr_t p) {
  graphBytes -= allocations()[p].bytes;
  release(p);
}

//===----------------------------------------------------------------------===//
// Initialization, devices, contexts
//===----------------------------------------------------------------------===//

CUresult host_cuGetErrorName(CUresult error, const char **name) {
  switch (error) {
#define OMNI_NAME(e)                                                           \
  case e:                                                                      \
    *name = #e;                                                                \
    return CUDA_SUCCESS;
    OMNI_NAME(CUDA_SUCCESS)
    OMNI_NAME(CUDA_ERROR_INVALID_VALUE)
    OMNI_NAME(CUDA_ERROR_OUT_OF_MEMORY)
    OMNI_NAME(CUDA_ERROR_INVALID_DEVICE)
    OMNI_NAME(CUDA_ERROR_INVALID_CONTEXT)
    OMNI_NAME(CUDA_ERROR_LAUNCH_FAILED)
    OMNI_NAME(CUDA_ERROR_INVALID_IMAGE)
    OMNI_NAME(CUDA_ERROR_INVALID_HANDLE)
    OMNI_NAME(CUDA_ERROR_NOT_FOUND)
    OMNI_NAME(CUDA_ERROR_NOT_READY)
    OMNI_NAME(CUDA_ERROR_ILLEGAL_ADDRESS)
    OMNI_NAME(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)
    OMNI_NAME(CUDA_ERROR_NOT_SUPPORTED)
    OMNI_NAME(CUDA_ERROR_ILLEGAL_STATE)
    OMNI_NAME(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)
    OMNI_NAME(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
#undef OMNI_NAME
  default:
    *name = nullptr;
    return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult host_cuGetErrorString(CUresult error, const char **text) {
  const char *name = nullptr;
  if (host_cuGetErrorName(error, &name) != CUDA_SUCCESS)
    return CUDA_ERROR_INVALID_VALUE;
  *text = "reported by the host model of libcuda";
  return CUDA_SUCCESS;
}

CUresult host_cuDriverGetVersion(int *version) {
  *version = 13000;
  return CUDA_SUCCESS;
}

CUresult host_cuInit(unsigned) { return CUDA_SUCCESS; }

CUresult host_cuDeviceGetCount(int *count) {
  *count = deviceCount();
  return CUDA_SUCCESS;
}

CUresult host_cuDeviceGet(CUdevice *device, int ordinal) {
  if (ordinal < 0 || ordinal >= deviceCount())
    return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult host_cuDeviceGetName(char *name, int length, CUdevice) {
  std::strncpy(name, "host model of an sm_90 GPU", static_cast<size_t>(length));
  return CUDA_SUCCESS;
}

CUresult host_cuDeviceGetAttribute(int *value, CUdevice_attribute attribute,
                                   CUdevice) {
  switch (attribute) {
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
    *value = 9;
    return CUDA_SUCCESS;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
    *value = 0;
    return CUDA_SUCCESS;
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
    // Few, so that the helper kernels' grid-stride loops take several
    // strides on the model's small tests too.
    *value = 2;
    return CUDA_SUCCESS;
  case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
    *value = 1;
    return CUDA_SUCCESS;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
    *value = kSharedOptIn;
    return CUDA_SUCCESS;
  default:
    return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult host_cuDeviceTotalMem(size_t *bytes, CUdevice) {
  *bytes = kTotalMemory;
  return CUDA_SUCCESS;
}

CUresult host_cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice) {
  *pool = &thePool;
  return CUDA_SUCCESS;
}

CUresult host_cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute,
                                    void *) {
  return pool == &thePool ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult host_cuDevicePrimaryCtxRetain(CUcontext *context, CUdevice device) {
  if (device < 0 || device >= std::min(deviceCount(), kMaxDevices))
    return CUDA_ERROR_INVALID_DEVICE;
  *context = &primaryContexts()[device];
  return CUDA_SUCCESS;
}

CUresult host_cuDevicePrimaryCtxRelease(CUdevice) { return CUDA_SUCCESS; }

CUresult host_cuCtxSetCurrent(CUcontext context) {
  if (context && (context < primaryContexts() ||
                  context >= primaryContexts() + kMaxDevices))
    return CUDA_ERROR_INVALID_CONTEXT;
  current = context;
  return CUDA_SUCCESS;
}

//===----------------------------------------------------------------------===//
// Streams and events
//===----------------------------------------------------------------------===//

CUresult host_cuStreamCreate(CUstream *stream, unsigned) {
  OMNI_HOST_LOCK;
  // In the context current on this thread.
  if (!current)
    return CUDA_ERROR_INVALID_CONTEXT;
  *stream = new CUstream_st();
  (*stream)->device = current->device;
  streams().insert(*stream);
  return CUDA_SUCCESS;
}

CUresult host_cuStreamDestroy(CUstream stream) {
  std::unique_lock<std::recursive_mutex> lock(modelMutex());
  if (!stream || !streams().count(stream))
    return CUDA_ERROR_INVALID_HANDLE;
  if (stream->capture)
    return CUDA_ERROR_ILLEGAL_STATE;
  // Its work completes (cuStreamDestroy does not wait for it, the GPU does).
  runUntil(lock, stream, [&] {
    return stream->pending.empty() || stream->failure != CUDA_SUCCESS;
  });
  streams().erase(stream);
  // Kept, emptied, for the process's lifetime: an event recorded on it
  // still names it (a failed stream drops its events' records).
  stream->pending.clear();
  static auto *retired = new std::vector<std::unique_ptr<CUstream_st>>();
  retired->emplace_back(stream);
  return CUDA_SUCCESS;
}

CUresult host_cuStreamSynchronize(CUstream stream) {
  std::unique_lock<std::recursive_mutex> lock(modelMutex());
  if (!stream)
    return CUDA_SUCCESS;
  if (stream->capture) {
    stream->invalidated = true;
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  runUntil(lock, stream, [&] {
    return stream->pending.empty() || stream->failure != CUDA_SUCCESS;
  });
  return stream->failure;
}

CUresult host_cuStreamWaitEvent(CUstream stream, CUevent event, unsigned) {
  OMNI_HOST_LOCK;
  if (!event)
    return CUDA_ERROR_INVALID_HANDLE;
  // The waiting stream's later commands run after the event's: the
  // event's stream runs as far as it can now, and the waiting stream
  // holds at the wait until the event is done.
  if (poll(event) == CUDA_SUCCESS || !stream)
    return CUDA_SUCCESS;
  return submit(
      stream, [done = event->done] { return *done ? CUDA_SUCCESS : kParked; });
}

CUresult host_cuEventCreate(CUevent *event, unsigned) {
  *event = new CUevent_st();
  return CUDA_SUCCESS;
}

CUresult host_cuEventDestroy(CUevent event) {
  OMNI_HOST_LOCK;
  delete event;
  return CUDA_SUCCESS;
}

CUresult host_cuEventRecord(CUevent event, CUstream stream) {
  OMNI_HOST_LOCK;
  if (!event)
    return CUDA_ERROR_INVALID_HANDLE;
  if (!stream || stream->capture)
    return CUDA_SUCCESS; // the legacy stream has run everything already
  event->done = std::make_shared<bool>(false);
  event->stream = stream;
  event->asked = false;
  return submit(stream, [done = event->done] {
    *done = true;
    return CUDA_SUCCESS;
  });
}

CUresult host_cuEventQuery(CUevent event) {
  OMNI_HOST_LOCK;
  if (!event)
    return CUDA_ERROR_INVALID_HANDLE;
  if (*event->done)
    return CUDA_SUCCESS;
  // Not ready the first time it is asked; then the stream gets as far as
  // it can.
  if (!event->asked) {
    event->asked = true;
    return CUDA_ERROR_NOT_READY;
  }
  return poll(event);
}

CUresult host_cuEventSynchronize(CUevent event) {
  std::unique_lock<std::recursive_mutex> lock(modelMutex());
  if (!event)
    return CUDA_ERROR_INVALID_HANDLE;
  CUstream stream = *event->done ? nullptr : event->stream;
  runUntil(lock, stream,
           [&] { return *event->done || stream->failure != CUDA_SUCCESS; });
  return *event->done ? CUDA_SUCCESS : stream->failure;
}

CUresult host_cuLaunchHostFunc(CUstream stream, CUhostFn fn, void *data) {
  OMNI_HOST_LOCK;
  return submit(stream, [fn, data] {
    fn(data);
    return CUDA_SUCCESS;
  });
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

CUresult host_cuMemAllocAsync(CUdeviceptr *pointer, size_t bytes,
                              CUstream stream) {
  OMNI_HOST_LOCK;
  uintptr_t p = 0;
  const int device = streamDevice(stream);
  if (device < 0)
    return CUDA_ERROR_INVALID_CONTEXT;
  CUresult r = allocate(bytes, &p, device);
  if (r != CUDA_SUCCESS)
    return r;
  if (stream && stream->capture) {
    // An allocation node: the graph owns the memory.
    stream->capture->memory->allocations.push_back(p);
    graphBytes += bytes;
  }
  *pointer = static_cast<CUdeviceptr>(p);
  return CUDA_SUCCESS;
}

CUresult host_cuMemFreeAsync(CUdeviceptr pointer, CUstream stream) {
  OMNI_HOST_LOCK;
  const uintptr_t p = static_cast<uintptr_t>(pointer);
  if (!allocations().count(p))
    return CUDA_ERROR_INVALID_VALUE;
  if (stream && stream->capture) {
    // A free node: only of memory the same capture allocated (the graph
    // then frees it with itself).
    const auto &mine = stream->capture->memory->allocations;
    if (std::find(mine.begin(), mine.end(), p) == mine.end()) {
      stream->invalidated = true;
      return CUDA_ERROR_NOT_SUPPORTED;
    }
    return CUDA_SUCCESS;
  }
  // Stream-ordered: the memory goes when the stream gets there.
  return submit(stream, [p] {
    if (!allocations().count(p))
      return CUDA_ERROR_INVALID_VALUE;
    release(p);
    return CUDA_SUCCESS;
  });
}

CUresult host_cuMemHostAlloc(void **pointer, size_t bytes, unsigned) {
  *pointer = std::malloc(bytes ? bytes : 1);
  return *pointer ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult host_cuMemFreeHost(void *pointer) {
  OMNI_HOST_LOCK;
  // cuMemFreeHost waits for the device, whose queued copies may read it.
  // The model runs every device's runnable work (more than a GPU waits
  // for, which changes nothing), but not work that waits for other ranks:
  // that may wait for this thread's next collective.
  runRunnable();
  std::free(pointer);
  return CUDA_SUCCESS;
}

CUresult host_cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t bytes,
                                CUstream stream) {
  OMNI_HOST_LOCK;
  if (!isAnyDeviceRange(dst, bytes))
    return CUDA_ERROR_INVALID_VALUE;
  return submit(stream, [dst, src, bytes] {
    if (!isAnyDeviceRange(dst, bytes))
      return CUDA_ERROR_ILLEGAL_ADDRESS;
    std::memcpy(reinterpret_cast<void *>(dst), src, bytes);
    return CUDA_SUCCESS;
  });
}

CUresult host_cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t bytes,
                                CUstream stream) {
  OMNI_HOST_LOCK;
  if (!isAnyDeviceRange(src, bytes))
    return CUDA_ERROR_INVALID_VALUE;
  return submit(stream, [dst, src, bytes] {
    if (!isAnyDeviceRange(src, bytes))
      return CUDA_ERROR_ILLEGAL_ADDRESS;
    std::memcpy(dst, reinterpret_cast<const void *>(src), bytes);
    return CUDA_SUCCESS;
  });
}

CUresult host_cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                                CUstream stream) {
  OMNI_HOST_LOCK;
  if (!isAnyDeviceRange(dst, bytes) || !isAnyDeviceRange(src, bytes))
    return CUDA_ERROR_INVALID_VALUE;
  // Overlapping ranges are undefined for cuMemcpy: the driver must not
  // issue them (CudaStream::copy goes through a temporary).
  if (bytes && src < dst + bytes && dst < src + bytes && src != dst)
    return CUDA_ERROR_INVALID_VALUE;
  return submit(stream, [dst, src, bytes] {
    if (!isAnyDeviceRange(dst, bytes) || !isAnyDeviceRange(src, bytes))
      return CUDA_ERROR_ILLEGAL_ADDRESS;
    std::memmove(reinterpret_cast<void *>(dst),
                 reinterpret_cast<const void *>(src), bytes);
    return CUDA_SUCCESS;
  });
}

// Copies and memsets may name another GPU's memory (unified addressing
// copies between GPUs): any device's.
template <typename T>
CUresult memsetAsync(CUdeviceptr dst, T value, size_t count, CUstream stream) {
  OMNI_HOST_LOCK;
  if (dst % sizeof(T) != 0 || !isAnyDeviceRange(dst, count * sizeof(T)))
    return CUDA_ERROR_INVALID_VALUE;
  return submit(stream, [dst, value, count] {
    if (!isAnyDeviceRange(dst, count * sizeof(T)))
      return CUDA_ERROR_ILLEGAL_ADDRESS;
    T *p = reinterpret_cast<T *>(dst);
    for (size_t i = 0; i < count; ++i)
      p[i] = value;
    return CUDA_SUCCESS;
  });
}

CUresult host_cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t n,
                              CUstream stream) {
  return memsetAsync<unsigned char>(dst, value, n, stream);
}
CUresult host_cuMemsetD16Async(CUdeviceptr dst, unsigned short value, size_t n,
                               CUstream stream) {
  return memsetAsync<unsigned short>(dst, value, n, stream);
}
CUresult host_cuMemsetD32Async(CUdeviceptr dst, unsigned value, size_t n,
                               CUstream stream) {
  return memsetAsync<unsigned>(dst, value, n, stream);
}

//===----------------------------------------------------------------------===//
// Graphs
//===----------------------------------------------------------------------===//

CUresult host_cuStreamBeginCapture(CUstream stream, CUstreamCaptureMode) {
  OMNI_HOST_LOCK;
  if (!stream || stream->capture)
    return CUDA_ERROR_ILLEGAL_STATE;
  stream->capture = std::make_unique<CUgraph_st>();
  stream->invalidated = false;
  return CUDA_SUCCESS;
}

CUresult host_cuStreamEndCapture(CUstream stream, CUgraph *graph) {
  OMNI_HOST_LOCK;
  *graph = nullptr;
  if (!stream || !stream->capture)
    return CUDA_ERROR_ILLEGAL_STATE;
  std::unique_ptr<CUgraph_st> captured = std::move(stream->capture);
  if (stream->invalidated)
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  *graph = captured.release();
  return CUDA_SUCCESS;
}

CUresult host_cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph graph,
                                          unsigned long long flags) {
  if (flags != 0)
    return CUDA_ERROR_INVALID_VALUE;
  *exec = new CUgraphExec_st{graph->ops, graph->memory};
  return CUDA_SUCCESS;
}

CUresult host_cuGraphLaunch(CUgraphExec exec, CUstream stream) {
  OMNI_HOST_LOCK;
  auto ops = exec->ops;
  return submit(stream, [ops] {
    for (auto &op : *ops)
      if (CUresult r = op(); r != CUDA_SUCCESS)
        // A graph cannot hold a command that waits for other ranks.
        return r == kParked ? CUDA_ERROR_NOT_SUPPORTED : r;
    return CUDA_SUCCESS;
  });
}

CUresult host_cuGraphExecDestroy(CUgraphExec exec) {
  OMNI_HOST_LOCK;
  delete exec;
  return CUDA_SUCCESS;
}

CUresult host_cuGraphDestroy(CUgraph graph) {
  OMNI_HOST_LOCK;
  delete graph;
  return CUDA_SUCCESS;
}

CUresult host_cuDeviceGetGraphMemAttribute(CUdevice, CUgraphMem_attribute attr,
                                           void *value) {
  OMNI_HOST_LOCK;
  if (attr != CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT &&
      attr != CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT)
    return CUDA_ERROR_INVALID_VALUE;
  *static_cast<cuuint64_t *>(value) = graphBytes;
  return CUDA_SUCCESS;
}

//===----------------------------------------------------------------------===//
// cuGetProcAddress
//===----------------------------------------------------------------------===//

const ProcEntry kEntries[] = {
    OMNI_HOST_ENTRY(cuGetErrorName),
    OMNI_HOST_ENTRY(cuGetErrorString),
    OMNI_HOST_ENTRY(cuDriverGetVersion),
    OMNI_HOST_ENTRY(cuInit),
    OMNI_HOST_ENTRY(cuDeviceGetCount),
    OMNI_HOST_ENTRY(cuDeviceGet),
    OMNI_HOST_ENTRY(cuDeviceGetName),
    OMNI_HOST_ENTRY(cuDeviceGetAttribute),
    OMNI_HOST_ENTRY(cuDeviceTotalMem),
    OMNI_HOST_ENTRY(cuDeviceGetDefaultMemPool),
    OMNI_HOST_ENTRY(cuMemPoolSetAttribute),
    OMNI_HOST_ENTRY(cuDevicePrimaryCtxRetain),
    OMNI_HOST_ENTRY(cuDevicePrimaryCtxRelease),
    OMNI_HOST_ENTRY(cuCtxSetCurrent),
    OMNI_HOST_ENTRY(cuStreamCreate),
    OMNI_HOST_ENTRY(cuStreamDestroy),
    OMNI_HOST_ENTRY(cuStreamSynchronize),
    OMNI_HOST_ENTRY(cuStreamWaitEvent),
    OMNI_HOST_ENTRY(cuEventCreate),
    OMNI_HOST_ENTRY(cuEventDestroy),
    OMNI_HOST_ENTRY(cuEventRecord),
    OMNI_HOST_ENTRY(cuEventQuery),
    OMNI_HOST_ENTRY(cuEventSynchronize),
    OMNI_HOST_ENTRY(cuMemAllocAsync),
    OMNI_HOST_ENTRY(cuMemFreeAsync),
    OMNI_HOST_ENTRY(cuMemHostAlloc),
    OMNI_HOST_ENTRY(cuMemFreeHost),
    OMNI_HOST_ENTRY(cuMemcpyHtoDAsync),
    OMNI_HOST_ENTRY(cuMemcpyDtoHAsync),
    OMNI_HOST_ENTRY(cuMemcpyDtoDAsync),
    OMNI_HOST_ENTRY(cuMemsetD8Async),
    OMNI_HOST_ENTRY(cuMemsetD16Async),
    OMNI_HOST_ENTRY(cuMemsetD32Async),
    OMNI_HOST_ENTRY(cuLaunchHostFunc),
    OMNI_HOST_ENTRY(cuStreamBeginCapture),
    OMNI_HOST_ENTRY(cuStreamEndCapture),
    OMNI_HOST_ENTRY(cuGraphInstantiateWithFlags),
    OMNI_HOST_ENTRY(cuGraphLaunch),
    OMNI_HOST_ENTRY(cuGraphExecDestroy),
    OMNI_HOST_ENTRY(cuGraphDestroy),
    OMNI_HOST_ENTRY(cuDeviceGetGraphMemAttribute),
};

} // namespace

void runRunnable() {
  OMNI_HOST_LOCK;
  for (CUstream s : streams())
    (void)flush(s);
}

std::recursive_mutex &modelMutex() {
  static auto *mutex = new std::recursive_mutex();
  return *mutex;
}

bool isAnyDeviceRange(uintptr_t address, size_t bytes) {
  OMNI_HOST_LOCK;
  return holding(address, bytes) != nullptr;
}

bool isDeviceRange(uintptr_t address, size_t bytes) {
  OMNI_HOST_LOCK;
  const Allocation *a = holding(address, bytes);
  return a && (running < 0 || a->device == running);
}

int currentDevice() { return current ? current->device : -1; }

int physicalDevice(int ordinal) {
  const std::vector<int> &visible = visibleDevices();
  return ordinal >= 0 && ordinal < static_cast<int>(visible.size())
             ? visible[ordinal]
             : -1;
}

std::string hostName() {
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  return name;
}

int runningDevice() { return running; }

int streamDevice(CUstream stream) {
  return stream ? stream->device : currentDevice();
}

int allocationDevice(uintptr_t address) {
  OMNI_HOST_LOCK;
  const Allocation *a = holding(address, 1);
  return a ? a->device : -1;
}

CUresult submit(CUstream stream, std::function<CUresult()> op) {
  OMNI_HOST_LOCK;
  if (stream && stream->capture) {
    stream->capture->ops->push_back(std::move(op));
    return CUDA_SUCCESS;
  }
  if (stream && (deferred() || !stream->pending.empty())) {
    stream->pending.push_back(std::move(op));
    progress().notify_all();
    return stream->failure;
  }
  // A failed stream runs nothing more (its queued commands are dropped by
  // flush the same way).
  if (stream && stream->failure != CUDA_SUCCESS)
    return stream->failure;
  CUresult r = [&] {
    Running on(streamDevice(stream));
    return op();
  }();
  if (r == kParked && stream) {
    // It waits for other ranks: the stream holds it, and what follows.
    stream->pending.push_back(std::move(op));
    return CUDA_SUCCESS;
  }
  // A command that failed as it ran fails the stream for good, as it
  // would on a GPU.
  if (r != CUDA_SUCCESS && stream)
    stream->failure = r;
  return r;
}

void notifyProgress() { progress().notify_all(); }

} // namespace omni::hal::cuda::host

GraphMemory::~GraphMemory() {
  std::lock_guard<std::recursive_mutex> lock(
      omni::hal::cuda::host::modelMutex());
  for (uintptr_t p : allocations)
    omni::hal::cuda::host::releaseGraphAllocation(p);
}

extern "C" __attribute__((visibility("default"))) CUresult
cuGetProcAddress_v2(const char *symbol, void **function, int, cuuint64_t,
                    CUdriverProcAddressQueryResult *status) {
  using namespace omni::hal::cuda::host;
  *function = moduleEntry(symbol);
  for (const auto &entry : kEntries)
    if (std::strcmp(entry.name, symbol) == 0)
      *function = entry.function;
  if (*function) {
    if (status)
      *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
  }
  if (status)
    *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return CUDA_ERROR_NOT_FOUND;
}
