//===- CudaStream.cpp - A CUDA stream as a hal Stream -----------*- C++ -*-===//

#include "runtime/hal/drivers/cuda/CudaStream.h"

#include "runtime/base/CheckedMath.h"
#include "runtime/base/Status.h"
#include "runtime/hal/drivers/cuda/CudaExecutable.h"

#include "absl/strings/str_cat.h"

#include <algorithm>
#include <cstring>

namespace omni::hal::cuda {
namespace {

/// An event recorded on a CudaStream.
class CudaEvent final : public Event {
public:
  CudaEvent(const CudaDevice &device, CUevent event)
      : device_(device), event_(event) {}
  ~CudaEvent() override {
    if (device_.bind().ok())
      (void)device_.api().cuEventDestroy(event_);
  }
  absl::Status wait() override {
    OMNI_RETURN_IF_ERROR(device_.bind());
    return device_.api().check(
        device_.api().cuEventSynchronize(event_),
        absl::StrCat(device_.label(), ": a command before the event failed"));
  }
  bool isComplete() const override {
    if (!device_.bind().ok())
      return true;
    // Anything but "not ready" means complete (an error is reported by
    // wait()).
    return device_.api().cuEventQuery(event_) != CUDA_ERROR_NOT_READY;
  }
  CUevent handle() const { return event_; }

private:
  const CudaDevice &device_;
  CUevent event_;
};

/// A captured graph and its executable instance.
class CudaGraph final : public Graph {
public:
  CudaGraph(const CudaDevice &device, CUgraph graph, CUgraphExec exec,
            int64_t commands)
      : device_(device), graph_(graph), exec_(exec), commands_(commands) {}
  ~CudaGraph() override {
    // A launch still in flight completes first (cuGraphExecDestroy frees
    // an executing graph when it finishes).
    if (!device_.bind().ok())
      return;
    (void)device_.api().cuGraphExecDestroy(exec_);
    (void)device_.api().cuGraphDestroy(graph_);
  }
  int64_t numCommands() const override { return commands_; }
  const CudaDevice &device() const { return device_; }
  CUgraphExec exec() const { return exec_; }

private:
  const CudaDevice &device_;
  CUgraph graph_;
  CUgraphExec exec_;
  int64_t commands_;
};

/// Bytes of `count` elements, or -1 on overflow / negative counts.
int64_t bytesOf(std::initializer_list<int64_t> dims, DType dtype) {
  std::optional<int64_t> n = checkedNumElements(std::vector<int64_t>(dims));
  std::optional<int64_t> b =
      n ? checkedMul(*n, dtypeSize(dtype)) : std::nullopt;
  return b ? *b : -1;
}

/// readBuffer's host function: copies the staging bytes out.
struct HostCopy {
  void *dst;
  const void *src;
  size_t bytes;
};

void CUDA_CB copyToHost(void *data) {
  auto *copy = static_cast<HostCopy *>(data);
  std::memcpy(copy->dst, copy->src, copy->bytes);
  delete copy;
}

} // namespace

absl::StatusOr<std::unique_ptr<CudaStream>>
CudaStream::create(CudaDevice &device) {
  OMNI_RETURN_IF_ERROR(device.bind());
  std::unique_ptr<CudaStream> stream(new CudaStream(device));
  OMNI_RETURN_IF_ERROR(device.api().check(
      device.api().cuStreamCreate(&stream->stream_, CU_STREAM_NON_BLOCKING),
      absl::StrCat(device.label(), ": cuStreamCreate")));
  return stream;
}

CudaStream::~CudaStream() {
  // No stream was made (cuStreamCreate failed): nothing to wait for or
  // free, and a null handle would name the legacy default stream.
  if (!stream_ || !device_.bind().ok())
    return;
  const CudaApi &api = device_.api();
  if (capture_) {
    // Leave capture mode first: synchronizing a capturing stream is an
    // error, and the capture's graph would leak. Its memory nodes never
    // ran, so there is nothing of the capture's to free.
    CUgraph graph = nullptr;
    (void)api.cuStreamEndCapture(stream_, &graph);
    if (graph)
      (void)api.cuGraphDestroy(graph);
    capture_.reset();
  }
  (void)api.cuStreamSynchronize(stream_);
  for (auto &s : staging_) {
    if (s->done)
      (void)api.cuEventDestroy(s->done);
    (void)api.cuMemFreeHost(s->host);
  }
  if (ltHandle_)
    (void)lt_->cublasLtDestroy(ltHandle_);
  if (dnnHandle_)
    (void)dnn_->cudnnDestroy(dnnHandle_);
  if (workspace_)
    (void)api.cuMemFreeAsync(workspace_, stream_);
  (void)api.cuStreamSynchronize(stream_);
  (void)api.cuStreamDestroy(stream_);
}

absl::Status CudaStream::begin() {
  OMNI_RETURN_IF_ERROR(failed_);
  return device_.bind();
}

absl::Status CudaStream::fail(CUresult result, const std::string &what) {
  absl::Status status =
      device_.api().check(result, absl::StrCat(device_.label(), ": ", what));
  // Out of memory at submission leaves the stream usable; anything else
  // (a launch or asynchronous failure) poisons the context anyway. While
  // capturing, nothing runs: a failure is the capture's (command() records
  // it), and the stream works again after endCapture.
  if (result != CUDA_ERROR_OUT_OF_MEMORY && failed_.ok() && !capture_)
    failed_ = status;
  return status;
}

template <typename Enqueue>
absl::Status CudaStream::command(Enqueue &&enqueue) {
  if (!capture_)
    return enqueue();
  if (!capture_->failure.ok())
    return capture_->failure;
  absl::Status status = enqueue();
  if (status.ok())
    ++capture_->commands;
  else
    capture_->failure = status;
  return status;
}

absl::Status CudaStream::refuseWhileCapturing(const char *what) {
  absl::Status refused = absl::FailedPreconditionError(
      absl::StrCat(what, " while the stream captures a graph"));
  if (capture_ && capture_->failure.ok())
    capture_->failure = refused;
  return refused;
}

absl::StatusOr<CUdeviceptr> CudaStream::resolve(BufferRef ref,
                                                const char *what) const {
  if (!ref.buffer)
    return absl::InvalidArgumentError(absl::StrCat(what, " has no buffer"));
  if (&ref.buffer->device() != static_cast<const Device *>(&device_))
    return absl::InvalidArgumentError(
        absl::StrCat(what, " is a buffer of another device"));
  if (!rangeInside(ref.offset, ref.length, ref.buffer->size()))
    return absl::InvalidArgumentError(absl::StrCat(
        what, " range [", ref.offset, ", +", ref.length,
        ") is outside its buffer of ", ref.buffer->size(), " bytes"));
  // Every buffer of this device is a CudaBuffer.
  return static_cast<CudaBuffer *>(ref.buffer)->pointer() +
         static_cast<CUdeviceptr>(ref.offset);
}

absl::StatusOr<CUdeviceptr>
CudaStream::resolveSized(BufferRef ref, int64_t bytes, const char *what) const {
  OMNI_ASSIGN_OR_RETURN(CUdeviceptr p, resolve(ref, what));
  if (ref.length != bytes)
    return absl::InvalidArgumentError(absl::StrCat(
        what, " is ", ref.length, " bytes but the command needs ", bytes));
  return p;
}

//===----------------------------------------------------------------------===//
// Staging and temporaries
//===----------------------------------------------------------------------===//

absl::StatusOr<CudaStream::Staging *> CudaStream::acquireStaging(size_t bytes) {
  const CudaApi &api = device_.api();
  Staging *best = nullptr;
  for (auto &s : staging_) {
    if (s->busy && api.cuEventQuery(s->done) != CUDA_ERROR_NOT_READY)
      s->busy = false;
    if (!s->busy && s->capacity >= bytes &&
        (!best || s->capacity < best->capacity))
      best = s.get();
  }
  if (best) {
    best->busy = true;
    return best;
  }
  auto s = std::make_unique<Staging>();
  s->capacity = std::max<size_t>(bytes, size_t(1) << 20);
  CUresult r = api.cuMemHostAlloc(&s->host, s->capacity, 0);
  if (r != CUDA_SUCCESS)
    return api.check(r,
                     absl::StrCat(device_.label(), ": cannot pin ", s->capacity,
                                  " bytes of host memory for a transfer"));
  r = api.cuEventCreate(&s->done, CU_EVENT_DISABLE_TIMING);
  if (r != CUDA_SUCCESS) {
    (void)api.cuMemFreeHost(s->host);
    return api.check(r, absl::StrCat(device_.label(), ": cuEventCreate"));
  }
  s->busy = true;
  staging_.push_back(std::move(s));
  return staging_.back().get();
}

absl::Status CudaStream::releaseStagingAfterPending(Staging *staging) {
  // The block stays busy until the event passes (acquireStaging checks).
  return check(device_.api().cuEventRecord(staging->done, stream_),
               "cuEventRecord");
}

void CudaStream::trimStaging() {
  const CudaApi &api = device_.api();
  size_t idle = 0;
  // Keep the smallest idle blocks up to the cache size.
  std::sort(staging_.begin(), staging_.end(), [](const auto &a, const auto &b) {
    return a->capacity < b->capacity;
  });
  for (auto it = staging_.begin(); it != staging_.end();) {
    Staging &s = **it;
    if (s.busy && api.cuEventQuery(s.done) != CUDA_ERROR_NOT_READY)
      s.busy = false;
    if (!s.busy) {
      idle += s.capacity;
      if (idle > kStagingCacheBytes) {
        (void)api.cuEventDestroy(s.done);
        (void)api.cuMemFreeHost(s.host);
        it = staging_.erase(it);
        continue;
      }
    }
    ++it;
  }
}

absl::StatusOr<CUdeviceptr> CudaStream::allocTemp(int64_t bytes) {
  CUdeviceptr p = 0;
  CUresult r = device_.api().cuMemAllocAsync(
      &p, static_cast<size_t>(std::max<int64_t>(bytes, 1)), stream_);
  if (r != CUDA_SUCCESS)
    return fail(r, absl::StrCat("cannot allocate ", bytes,
                                " bytes of temporary memory"));
  return p;
}

void CudaStream::freeTemp(CUdeviceptr pointer) {
  (void)device_.api().cuMemFreeAsync(pointer, stream_);
}

absl::Status CudaStream::launchHelper(HelperKernel kernel, int64_t count,
                                      std::vector<void *> params, int64_t rows,
                                      unsigned block, unsigned shared) {
  unsigned grid = 0;
  if (rows > 0) {
    grid = static_cast<unsigned>(std::min<int64_t>(rows, 65535 * 32));
  } else {
    if (count <= 0)
      return absl::OkStatus();
    int64_t blocks = (count + block - 1) / block;
    // A grid-stride loop: a few waves of blocks is enough.
    int64_t cap = int64_t(std::max(device_.multiprocessors(), 1)) * 32;
    grid = static_cast<unsigned>(std::min(blocks, cap));
  }
  return check(device_.api().cuLaunchKernel(device_.helper(kernel), grid, 1, 1,
                                            block, 1, 1, shared, stream_,
                                            params.data(), nullptr),
               "launching a helper kernel");
}

//===----------------------------------------------------------------------===//
// Transfers
//===----------------------------------------------------------------------===//

absl::Status CudaStream::writeBuffer(const void *host, BufferRef dst) {
  return command([&] { return enqueueWrite(host, dst); });
}

absl::Status CudaStream::enqueueWrite(const void *host, BufferRef dst) {
  OMNI_ASSIGN_OR_RETURN(CUdeviceptr d, resolve(dst, "writeBuffer destination"));
  OMNI_RETURN_IF_ERROR(begin());
  if (dst.length == 0)
    return absl::OkStatus();
  if (capture_) {
    // A staging block is reused once an event recorded after its copy
    // passes; a graph's copy runs at every launch, long after. The bytes
    // go into the graph itself instead, as the pattern of a fill that
    // covers exactly `dst`: a memset node's value or the omni_fill_bytes
    // kernel's by-value parameters, both copied when captured.
    if (dst.length > kMaxCapturedWriteBytes)
      return absl::UnimplementedError(absl::StrCat(
          "writeBuffer of ", dst.length, " bytes cannot be captured (at most ",
          kMaxCapturedWriteBytes, ")"));
    return enqueueFill(dst,
                       absl::MakeConstSpan(static_cast<const uint8_t *>(host),
                                           static_cast<size_t>(dst.length)));
  }
  const size_t bytes = static_cast<size_t>(dst.length);
  OMNI_ASSIGN_OR_RETURN(Staging * staging, acquireStaging(bytes));
  std::memcpy(staging->host, host, bytes);
  OMNI_RETURN_IF_ERROR(
      check(device_.api().cuMemcpyHtoDAsync(d, staging->host, bytes, stream_),
            "cuMemcpyHtoDAsync"));
  return releaseStagingAfterPending(staging);
}

absl::Status CudaStream::readBuffer(BufferRef src, void *host) {
  // Its host function would run at each launch, and its staging block's
  // event would be queried by the host: neither belongs in a graph.
  if (capture_)
    return refuseWhileCapturing("readBuffer");
  OMNI_ASSIGN_OR_RETURN(CUdeviceptr s, resolve(src, "readBuffer source"));
  OMNI_RETURN_IF_ERROR(begin());
  if (src.length == 0)
    return absl::OkStatus();
  const size_t bytes = static_cast<size_t>(src.length);
  OMNI_ASSIGN_OR_RETURN(Staging * staging, acquireStaging(bytes));
  OMNI_RETURN_IF_ERROR(
      check(device_.api().cuMemcpyDtoHAsync(staging->host, s, bytes, stream_),
            "cuMemcpyDtoHAsync"));
  auto *payload = new HostCopy{host, staging->host, bytes};
  CUresult r = device_.api().cuLaunchHostFunc(stream_, copyToHost, payload);
  if (r != CUDA_SUCCESS) {
    delete payload;
    OMNI_RETURN_IF_ERROR(check(r, "cuLaunchHostFunc"));
  }
  return releaseStagingAfterPending(staging);
}

absl::Status CudaStream::copy(BufferRef src, BufferRef dst) {
  return command([&] { return enqueueCopy(src, dst); });
}

absl::Status CudaStream::enqueueCopy(BufferRef src, BufferRef dst) {
  OMNI_ASSIGN_OR_RETURN(CUdeviceptr s, resolve(src, "copy source"));
  OMNI_ASSIGN_OR_RETURN(CUdeviceptr d, resolve(dst, "copy destination"));
  if (src.length != dst.length)
    return absl::InvalidArgumentError(
        absl::StrCat("copy of ", src.length, " bytes into ", dst.length));
  OMNI_RETURN_IF_ERROR(begin());
  if (src.length == 0 || s == d)
    return absl::OkStatus();
  const size_t bytes = static_cast<size_t>(src.length);
  const CudaApi &api = device_.api();
  bool overlap = s < d + bytes && d < s + bytes;
  if (!overlap)
    return check(api.cuMemcpyDtoDAsync(d, s, bytes, stream_),
                 "cuMemcpyDtoDAsync");
  // memmove semantics through a temporary (while capturing, an allocation
  // and a free node of the graph).
  OMNI_ASSIGN_OR_RETURN(CUdeviceptr temp, allocTemp(src.length));
  absl::Status status = check(api.cuMemcpyDtoDAsync(temp, s, bytes, stream_),
                              "cuMemcpyDtoDAsync");
  if (status.ok())
    status = check(api.cuMemcpyDtoDAsync(d, temp, bytes, stream_),
                   "cuMemcpyDtoDAsync");
  freeTemp(temp);
  return status;
}

absl::Status CudaStream::fill(BufferRef dst,
                              absl::Span<const uint8_t> pattern) {
  return command([&] { return enqueueFill(dst, pattern); });
}

absl::Status CudaStream::enqueueFill(BufferRef dst,
                                     absl::Span<const uint8_t> pattern) {
  OMNI_ASSIGN_OR_RETURN(CUdeviceptr d, resolve(dst, "fill destination"));
  const int64_t size = static_cast<int64_t>(pattern.size());
  if (size == 0 || dst.length % size != 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "fill of ", dst.length, " bytes with a pattern of ", size, " bytes"));
  OMNI_RETURN_IF_ERROR(begin());
  if (dst.length == 0)
    return absl::OkStatus();
  const CudaApi &api = device_.api();
  const size_t bytes = static_cast<size_t>(dst.length);
  bool uniform = true;
  for (uint8_t b : pattern)
    uniform &= b == pattern[0];
  if (uniform)
    return check(api.cuMemsetD8Async(d, pattern[0], bytes, stream_),
                 "cuMemsetD8Async");
  if (size == 2 && d % 2 == 0) {
    uint16_t v;
    std::memcpy(&v, pattern.data(), 2);
    return check(api.cuMemsetD16Async(d, v, bytes / 2, stream_),
                 "cuMemsetD16Async");
  }
  if (size == 4 && d % 4 == 0) {
    uint32_t v;
    std::memcpy(&v, pattern.data(), 4);
    return check(api.cuMemsetD32Async(d, v, bytes / 4, stream_),
                 "cuMemsetD32Async");
  }
  if (size <= 16) {
    uint64_t words[2] = {0, 0};
    std::memcpy(words, pattern.data(), pattern.size());
    int64_t n = dst.length, patternSize = size;
    return launchHelper(HelperKernel::FillBytes, n,
                        {&d, &n, &words[0], &words[1], &patternSize});
  }
  // Longer patterns: write one copy in pieces of up to 16 bytes (fills
  // again, so that no staging is involved and a capture takes it), then
  // double the filled prefix with disjoint device copies.
  for (int64_t at = 0; at < size; at += 16) {
    const int64_t piece = std::min<int64_t>(16, size - at);
    OMNI_RETURN_IF_ERROR(enqueueFill(
        {dst.buffer, dst.offset + at, piece},
        pattern.subspan(static_cast<size_t>(at), static_cast<size_t>(piece))));
  }
  int64_t filled = size;
  while (filled < dst.length) {
    int64_t n = std::min(filled, dst.length - filled);
    OMNI_RETURN_IF_ERROR(
        check(api.cuMemcpyDtoDAsync(d + static_cast<CUdeviceptr>(filled), d,
                                    static_cast<size_t>(n), stream_),
              "cuMemcpyDtoDAsync"));
    filled += n;
  }
  return absl::OkStatus();
}

//===----------------------------------------------------------------------===//
// Compute
//===----------------------------------------------------------------------===//

absl::Status CudaStream::dispatch(const Executable &executable, int64_t kernel,
                                  int64_t grid,
                                  absl::Span<const BufferRef> buffers,
                                  absl::Span<const int64_t> scalars) {
  (void)grid; // cuda kernels carry their grids in GpuLaunchSpec.
  return command(
      [&] { return enqueueDispatch(executable, kernel, buffers, scalars); });
}

absl::Status CudaStream::enqueueDispatch(const Executable &executable,
                                         int64_t kernel,
                                         absl::Span<const BufferRef> buffers,
                                         absl::Span<const int64_t> scalars) {
  const auto *exe = dynamic_cast<const CudaExecutable *>(&executable);
  if (!exe || &exe->device() != &device_)
    return absl::InvalidArgumentError(
        absl::StrCat("dispatch of executable '", executable.name(),
                     "', which was not loaded on ", device_.label()));
  if (kernel < 0 || kernel >= exe->numKernels())
    return absl::InvalidArgumentError(
        absl::StrCat("kernel ", kernel, " of executable '", exe->name(),
                     "', which has ", exe->numKernels()));
  const CudaExecutable::Kernel &k = exe->kernel(kernel);
  std::vector<CUdeviceptr> pointers;
  pointers.reserve(buffers.size() + k.scratchPointers.size());
  for (const BufferRef &ref : buffers) {
    OMNI_ASSIGN_OR_RETURN(CUdeviceptr p, resolve(ref, "dispatch buffer"));
    pointers.push_back(p);
  }
  pointers.insert(pointers.end(), k.scratchPointers.begin(),
                  k.scratchPointers.end());
  std::vector<int64_t> values(scalars.begin(), scalars.end());
  // Check every launch before enqueueing any.
  for (const CudaExecutable::Launch &launch : k.launches)
    for (uint32_t arg : launch.spec->args)
      if (arg >= pointers.size())
        return absl::InvalidArgumentError(absl::StrCat(
            "kernel '", exe->kernelName(kernel), "' of executable '",
            exe->name(), "': launch '", launch.spec->entry, "' uses buffer ",
            arg, " but the dispatch has ", buffers.size(), " buffers and ",
            k.scratchPointers.size(), " scratch buffers"));
  OMNI_RETURN_IF_ERROR(begin());
  // cuLaunchKernel copies the parameters (into the kernel node while
  // capturing): `pointers` and `values` may go when it returns.
  std::vector<void *> params;
  for (const CudaExecutable::Launch &launch : k.launches) {
    const GpuLaunchSpec &s = *launch.spec;
    params.clear();
    for (uint32_t arg : s.args)
      params.push_back(&pointers[arg]);
    for (int64_t &v : values)
      params.push_back(&v);
    OMNI_RETURN_IF_ERROR(check(
        device_.api().cuLaunchKernel(launch.function, s.grid[0], s.grid[1],
                                     s.grid[2], s.block[0], s.block[1],
                                     s.block[2], s.sharedBytes, stream_,
                                     params.data(), nullptr),
        absl::StrCat("launching '", s.entry, "' of executable '", exe->name(),
                     "'")));
  }
  return absl::OkStatus();
}

absl::Status CudaStream::random(Distribution distribution, DType dtype,
                                int64_t count, BufferRef key, BufferRef counter,
                                BufferRef offset, BufferRef result) {
  return command([&] {
    return enqueueRandom(distribution, dtype, count, key, counter, offset,
                         result);
  });
}

absl::Status CudaStream::enqueueRandom(Distribution distribution, DType dtype,
                                       int64_t count, BufferRef key,
                                       BufferRef counter, BufferRef offset,
                                       BufferRef result) {
  if (!isFloatDType(dtype))
    return absl::InvalidArgumentError(absl::StrCat(
        "random numbers of ", dtypeName(dtype), " (expected a float type)"));
  OMNI_ASSIGN_OR_RETURN(CUdeviceptr keyPtr, resolveSized(key, 8, "random key"));
  OMNI_ASSIGN_OR_RETURN(CUdeviceptr counterPtr,
                        resolveSized(counter, 8, "random counter"));
  OMNI_ASSIGN_OR_RETURN(CUdeviceptr offsetPtr,
                        resolveSized(offset, 8, "random offset"));
  int64_t bytes = bytesOf({count}, dtype);
  if (bytes < 0)
    return absl::InvalidArgumentError(absl::StrCat("random count ", count));
  OMNI_ASSIGN_OR_RETURN(CUdeviceptr out,
                        resolveSized(result, bytes, "random result"));
  bool normal = distribution == Distribution::Normal;
  HelperKernel kernel;
  switch (dtype) {
  case DType::F32:
    kernel =
        normal ? HelperKernel::RandomNormalF32 : HelperKernel::RandomUniformF32;
    break;
  case DType::F64:
    kernel =
        normal ? HelperKernel::RandomNormalF64 : HelperKernel::RandomUniformF64;
    break;
  case DType::F16:
    kernel =
        normal ? HelperKernel::RandomNormalF16 : HelperKernel::RandomUniformF16;
    break;
  case DType::BF16:
    kernel = normal ? HelperKernel::RandomNormalBF16
                    : HelperKernel::RandomUniformBF16;
    break;
  default:
    return absl::InvalidArgumentError(absl::StrCat(
        "random numbers of ", dtypeName(dtype), " (expected a float type)"));
  }
  OMNI_RETURN_IF_ERROR(begin());
  return launchHelper(kernel, count,
                      {&keyPtr, &counterPtr, &offsetPtr, &out, &count});
}

absl::Status CudaStream::matmul(const MatmulParams &params, BufferRef lhs,
                                BufferRef rhs, BufferRef result) {
  return command([&] { return enqueueMatmul(params, lhs, rhs, result); });
}

absl::Status CudaStream::conv2d(const Conv2dParams &params, BufferRef input,
                                BufferRef filter, BufferRef result) {
  return command([&] { return enqueueConv2d(params, input, filter, result); });
}

absl::Status CudaStream::attention(const AttentionParams &params, BufferRef q,
                                   BufferRef k, BufferRef v, BufferRef mask,
                                   BufferRef result) {
  return command(
      [&] { return enqueueAttention(params, q, k, v, mask, result); });
}

absl::Status CudaStream::attentionBackward(const AttentionParams &params,
                                           BufferRef q, BufferRef k,
                                           BufferRef v, BufferRef mask,
                                           BufferRef o, BufferRef dO,
                                           BufferRef dq, BufferRef dk,
                                           BufferRef dv) {
  return command([&] {
    return enqueueAttentionBackward(params, q, k, v, mask, o, dO, dq, dk, dv);
  });
}

//===----------------------------------------------------------------------===//
// Synchronization
//===----------------------------------------------------------------------===//

// While capturing, an event recorded on the stream would belong to the
// capture (the host may not query or wait for it), and a wait on an event
// of an earlier submission is not a node of the graph: both are refused,
// as is synchronize (cuStreamSynchronize would invalidate the capture).

absl::StatusOr<std::shared_ptr<Event>> CudaStream::recordEvent() {
  if (capture_)
    return refuseWhileCapturing("recordEvent");
  OMNI_RETURN_IF_ERROR(begin());
  const CudaApi &api = device_.api();
  CUevent event = nullptr;
  OMNI_RETURN_IF_ERROR(check(api.cuEventCreate(&event, CU_EVENT_DISABLE_TIMING),
                             "cuEventCreate"));
  auto wrapped = std::make_shared<CudaEvent>(device_, event);
  OMNI_RETURN_IF_ERROR(
      check(api.cuEventRecord(event, stream_), "cuEventRecord"));
  return std::shared_ptr<Event>(std::move(wrapped));
}

absl::Status CudaStream::waitEvent(const std::shared_ptr<Event> &event) {
  if (capture_)
    return refuseWhileCapturing("waitEvent");
  if (!event)
    return absl::OkStatus();
  const auto *cudaEvent = dynamic_cast<const CudaEvent *>(event.get());
  if (!cudaEvent)
    // An event of another driver: wait on the host.
    return event->wait();
  OMNI_RETURN_IF_ERROR(begin());
  return check(device_.api().cuStreamWaitEvent(stream_, cudaEvent->handle(), 0),
               "cuStreamWaitEvent");
}

absl::Status CudaStream::synchronize() {
  if (capture_)
    return refuseWhileCapturing("synchronize");
  OMNI_RETURN_IF_ERROR(begin());
  OMNI_RETURN_IF_ERROR(check(device_.api().cuStreamSynchronize(stream_),
                             "a command on the stream failed"));
  trimStaging();
  return absl::OkStatus();
}

//===----------------------------------------------------------------------===//
// Graphs
//===----------------------------------------------------------------------===//

absl::Status CudaStream::beginCapture() {
  if (capture_)
    return absl::FailedPreconditionError("the stream is already capturing");
  OMNI_RETURN_IF_ERROR(begin());
  // Relaxed mode: the calls made on this thread during the capture that
  // are not stream commands must keep working, and are not captured:
  // Device::allocate and a buffer's release (on the device's own stream),
  // cuBLASLt's and cuDNN's handle creation at their first use (which may
  // allocate device memory synchronously). The global and thread-local
  // modes would refuse those as "potentially unsafe" and invalidate the
  // capture. What truly conflicts with capturing (querying or waiting for
  // an event recorded in it, synchronizing the stream) the stream refuses
  // itself. Relaxed mode also lets endCapture (or the destructor) run on
  // another thread than beginCapture.
  // The library handles are made now if they are not yet, so that their
  // set-up (which may allocate and synchronize) never runs inside a
  // capture; a library that fails here fails again, and says why, where a
  // command uses it.
  (void)ensureCublasLt();
  (void)ensureCudnn();
  const CudaApi &api = device_.api();
  OMNI_RETURN_IF_ERROR(api.check(
      api.cuStreamBeginCapture(stream_, CU_STREAM_CAPTURE_MODE_RELAXED),
      absl::StrCat(device_.label(), ": cuStreamBeginCapture")));
  capture_.emplace();
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Graph>> CudaStream::endCapture() {
  if (!capture_)
    return absl::FailedPreconditionError("the stream is not capturing");
  OMNI_RETURN_IF_ERROR(device_.bind());
  Capture capture = std::move(*capture_);
  capture_.reset();
  const CudaApi &api = device_.api();
  // The graph frees the workspace it allocated: its last node.
  if (capture.workspace)
    freeTemp(capture.workspace);
  // Always: the stream leaves capture mode even when the capture failed.
  CUgraph graph = nullptr;
  CUresult r = api.cuStreamEndCapture(stream_, &graph);
  if (!capture.failure.ok()) {
    if (graph)
      (void)api.cuGraphDestroy(graph);
    return absl::FailedPreconditionError(
        absl::StrCat("the capture failed: ", capture.failure.message()));
  }
  if (r != CUDA_SUCCESS || !graph) {
    if (graph)
      (void)api.cuGraphDestroy(graph);
    // No graph and no error: the capture was invalidated.
    return api.check(r != CUDA_SUCCESS ? r
                                       : CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
                     absl::StrCat(device_.label(), ": capture failed"));
  }
  // Flags 0: every allocation node of the graph has its free node in it
  // (temporaries and the workspace), so a launch never finds memory of the
  // previous one unfreed (no CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH).
  CUgraphExec exec = nullptr;
  r = api.cuGraphInstantiateWithFlags(&exec, graph, 0);
  if (r != CUDA_SUCCESS) {
    (void)api.cuGraphDestroy(graph);
    return api.check(
        r, absl::StrCat(device_.label(), ": cuGraphInstantiateWithFlags"));
  }
  return std::unique_ptr<Graph>(
      std::make_unique<CudaGraph>(device_, graph, exec, capture.commands));
}

absl::Status CudaStream::launchGraph(const Graph &graph) {
  if (capture_)
    return refuseWhileCapturing("launchGraph");
  const auto *g = dynamic_cast<const CudaGraph *>(&graph);
  if (!g || &g->device() != &device_)
    return absl::InvalidArgumentError(absl::StrCat(
        "launchGraph: the graph was not captured on ", device_.label()));
  OMNI_RETURN_IF_ERROR(begin());
  return check(device_.api().cuGraphLaunch(g->exec(), stream_),
               "cuGraphLaunch");
}

} // namespace omni::hal::cuda
