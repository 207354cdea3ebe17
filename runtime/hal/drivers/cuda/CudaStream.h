//===- CudaStream.h - A CUDA stream as a hal Stream -------------*- C++ -*-===//
//
// The cuda driver's Stream: one non-blocking CUstream of the device's
// primary context; every command is enqueued and the call returns.
//
// Transfers (hal/Stream.h's contract, met without blocking the host):
//  - writeBuffer copies the host bytes into pinned staging memory before it
//    returns (so `host` may be reused at once), then enqueues the
//    host-to-device copy from there;
//  - readBuffer enqueues the device-to-host copy into pinned staging memory
//    and then a host function (cuLaunchHostFunc) that copies the staging
//    bytes to `host`, in stream order: `host` holds the bytes once the
//    stream reaches that point, i.e. after synchronize() or an event
//    recorded later completes;
//  - staging blocks are reused once the event recorded after their copy
//    has completed (at most kStagingCacheBytes stay cached when idle).
// copy is cuMemcpyDtoDAsync, through a temporary when the ranges overlap
// (memmove semantics); fill is cuMemsetD8/D16/D32Async for uniform bytes
// and aligned 2- and 4-byte patterns, the omni_fill_bytes kernel for other
// patterns up to 16 bytes; a longer pattern's first copy is written by
// those in 16-byte pieces (no staging), then doubled by copies. dispatch
// launches each GpuLaunchSpec of the kernel in order with the pointers its
// `args` name (the dispatch's buffers, then the kernel's scratch buffers)
// followed by every scalar as an i64; `grid` is ignored (1 for cuda
// kernels). random runs the Philox kernels (bit-identical to the cpu
// driver), reading key, counter and offset on the device. The library
// routines are in CudaLibraries.cpp (cuBLASLt; conv2d through cuDNN, or
// im2col + cuBLASLt without it; attention as two cuBLASLt matmuls around a
// softmax kernel).
//
// Errors: a malformed command fails at once (InvalidArgument, as the cpu
// driver's); an asynchronous failure (an illegal address in a kernel) is
// reported by the next synchronize() or Event::wait() in one line, and the
// stream stays failed: later commands and synchronizes return that error.
//
// Graphs (hal/Graph.h): beginCapture is cuStreamBeginCapture in relaxed
// mode, endCapture cuStreamEndCapture + cuGraphInstantiateWithFlags,
// launchGraph cuGraphLaunch. While capturing, nothing may record an event
// the host later polls or make the host wait: readBuffer (its host
// function and staging event), recordEvent, waitEvent, synchronize and
// collectives are refused (FailedPrecondition), and writeBuffer puts its
// bytes into the graph as a fill (at most kMaxCapturedWriteBytes) instead
// of staging them. Stream-ordered temporaries become the graph's memory
// nodes, each freed inside it; gemms use a cuBLASLt workspace the graph
// allocates and frees itself, so a graph depends on no stream's memory. A
// command that fails while capturing fails the capture (it is counted
// against the capture, never as the stream's sticky error), and later
// commands return that failure until endCapture.
//
// Ownership: created by CudaDevice::createStream; the device must outlive
// it. The destructor ends a capture in progress (discarding it), then
// synchronizes. Thread safety: one thread at a time (hal::Stream);
// handle() may be used by the NCCL channel on that thread.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_HAL_DRIVERS_CUDA_CUDASTREAM_H
#define OMNI_RUNTIME_HAL_DRIVERS_CUDA_CUDASTREAM_H

#include "runtime/hal/Stream.h"
#include "runtime/hal/drivers/cuda/CudaApi.h"
#include "runtime/hal/drivers/cuda/CudaDevice.h"

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

namespace omni::hal::cuda {

/// How a row-major result[m, n] = op(lhs)[m, k] op(rhs)[k, n] is asked of
/// column-major cuBLASLt: D = op(A) op(B) with A the rhs and B the lhs
/// (C^T = op(rhs)^T op(lhs)^T), each a rows x cols column-major matrix with
/// leading dimension ld, and C n x m with ld n.
struct GemmPlan {
  bool transposeA = false, transposeB = false;
  uint64_t aRows = 0, aCols = 0, bRows = 0, bCols = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
};
GemmPlan planGemm(int64_t m, int64_t n, int64_t k, bool transposeLhs,
                  bool transposeRhs);

class CudaStream final : public Stream {
public:
  static absl::StatusOr<std::unique_ptr<CudaStream>> create(CudaDevice &device);
  ~CudaStream() override;

  /// The CUDA stream (for NCCL collectives, which run on it).
  CUstream handle() const { return stream_; }
  CudaDevice &device() const { return device_; }

  absl::Status writeBuffer(const void *host, BufferRef dst) override;
  absl::Status readBuffer(BufferRef src, void *host) override;
  absl::Status copy(BufferRef src, BufferRef dst) override;
  absl::Status fill(BufferRef dst, absl::Span<const uint8_t> pattern) override;
  absl::Status dispatch(const Executable &executable, int64_t kernel,
                        int64_t grid, absl::Span<const BufferRef> buffers,
                        absl::Span<const int64_t> scalars) override;
  absl::Status random(Distribution distribution, DType dtype, int64_t count,
                      BufferRef key, BufferRef counter, BufferRef offset,
                      BufferRef result) override;
  absl::Status matmul(const MatmulParams &params, BufferRef lhs, BufferRef rhs,
                      BufferRef result) override;
  absl::Status conv2d(const Conv2dParams &params, BufferRef input,
                      BufferRef filter, BufferRef result) override;
  absl::Status attention(const AttentionParams &params, BufferRef q,
                         BufferRef k, BufferRef v, BufferRef mask,
                         BufferRef result) override;
  absl::Status attentionBackward(const AttentionParams &params, BufferRef q,
                                 BufferRef k, BufferRef v, BufferRef mask,
                                 BufferRef o, BufferRef dO, BufferRef dq,
                                 BufferRef dk, BufferRef dv) override;
  absl::StatusOr<std::shared_ptr<Event>> recordEvent() override;
  absl::Status waitEvent(const std::shared_ptr<Event> &event) override;
  absl::Status synchronize() override;
  absl::Status beginCapture() override;
  absl::StatusOr<std::unique_ptr<Graph>> endCapture() override;
  absl::Status launchGraph(const Graph &graph) override;

  /// Whether the stream is between beginCapture and endCapture.
  bool capturing() const { return capture_.has_value(); }
  /// While capturing: `what` ("readBuffer") cannot be captured; fails the
  /// capture and returns FailedPrecondition "<what> while the stream
  /// captures a graph" (public for the NCCL channel's collectives).
  absl::Status refuseWhileCapturing(const char *what);

  /// Idle staging memory kept for reuse.
  static constexpr size_t kStagingCacheBytes = size_t(256) << 20;
  /// The largest writeBuffer a capture takes (a fill pattern's limit).
  static constexpr int64_t kMaxCapturedWriteBytes = 16;

private:
  struct Staging {
    void *host = nullptr;
    size_t capacity = 0;
    CUevent done = nullptr;
    bool busy = false;
  };
  /// A matrix operand of gemm: row-major rows x cols before `transpose`.
  struct GemmOperand {
    CUdeviceptr pointer = 0;
    bool transpose = false;
    int64_t batchStride = 0;
  };

  /// Between beginCapture and endCapture.
  struct Capture {
    /// The first command that failed (the capture then fails).
    absl::Status failure;
    /// Commands submitted (Graph::numCommands).
    int64_t commands = 0;
    /// The graph's own cuBLASLt workspace (a memory node), allocated at the
    /// first gemm and freed by endCapture as the graph's last node.
    CUdeviceptr workspace = 0;
  };

  explicit CudaStream(CudaDevice &device) : device_(device) {}
  /// Runs `enqueue` (a command) and, while capturing, fails the capture
  /// with its error or counts it; after a failure it returns that failure
  /// without enqueueing.
  template <typename Enqueue> absl::Status command(Enqueue &&enqueue);
  // The commands, without the capture bookkeeping of command().
  absl::Status enqueueWrite(const void *host, BufferRef dst);
  absl::Status enqueueCopy(BufferRef src, BufferRef dst);
  absl::Status enqueueFill(BufferRef dst, absl::Span<const uint8_t> pattern);
  absl::Status enqueueDispatch(const Executable &executable, int64_t kernel,
                               absl::Span<const BufferRef> buffers,
                               absl::Span<const int64_t> scalars);
  absl::Status enqueueRandom(Distribution distribution, DType dtype,
                             int64_t count, BufferRef key, BufferRef counter,
                             BufferRef offset, BufferRef result);
  // CudaLibraries.cpp.
  absl::Status enqueueMatmul(const MatmulParams &params, BufferRef lhs,
                             BufferRef rhs, BufferRef result);
  absl::Status enqueueConv2d(const Conv2dParams &params, BufferRef input,
                             BufferRef filter, BufferRef result);
  absl::Status enqueueAttention(const AttentionParams &params, BufferRef q,
                                BufferRef k, BufferRef v, BufferRef mask,
                                BufferRef result);
  absl::Status enqueueAttentionBackward(const AttentionParams &params,
                                        BufferRef q, BufferRef k, BufferRef v,
                                        BufferRef mask, BufferRef o,
                                        BufferRef dO, BufferRef dq,
                                        BufferRef dk, BufferRef dv);
  /// Binds the context and returns the stream's sticky error, if any.
  absl::Status begin();
  /// Records a CUDA failure of `what` (submission or asynchronous) as the
  /// stream's sticky error and returns it.
  absl::Status fail(CUresult result, const std::string &what);
  absl::Status check(CUresult result, const std::string &what) {
    return result == CUDA_SUCCESS ? absl::OkStatus() : fail(result, what);
  }
  /// The device address of `ref` after checking it (as the cpu driver).
  absl::StatusOr<CUdeviceptr> resolve(BufferRef ref, const char *what) const;
  absl::StatusOr<CUdeviceptr> resolveSized(BufferRef ref, int64_t bytes,
                                           const char *what) const;
  /// A pinned block of at least `bytes`, not in use by a pending copy.
  absl::StatusOr<Staging *> acquireStaging(size_t bytes);
  /// Marks `staging` busy until the commands enqueued so far complete.
  absl::Status releaseStagingAfterPending(Staging *staging);
  /// Frees idle blocks beyond kStagingCacheBytes.
  void trimStaging();
  /// Launches a helper kernel over `count` elements with a grid-stride
  /// grid, or one block per row (`rows` > 0) with `shared` bytes.
  absl::Status launchHelper(HelperKernel kernel, int64_t count,
                            std::vector<void *> params, int64_t rows = 0,
                            unsigned block = 256, unsigned shared = 0);
  /// Temporary device memory in stream order (freed with freeTemp, also in
  /// stream order).
  absl::StatusOr<CUdeviceptr> allocTemp(int64_t bytes);
  void freeTemp(CUdeviceptr pointer);

  // CudaLibraries.cpp.
  /// result[b] = alpha op(lhs[b]) op(rhs[b]) for row-major matrices, lhs m
  /// x k, rhs k x n after their transposes; inType for lhs and rhs,
  /// outType for result.
  absl::Status gemm(DType inType, DType outType, int64_t batch, int64_t m,
                    int64_t n, int64_t k, GemmOperand lhs, GemmOperand rhs,
                    CUdeviceptr result, int64_t resultStride, double alpha);
  absl::Status ensureCublasLt();
  /// The unfused attention's temporaries: scores (f32; f64 for f64) and
  /// probabilities (the input type) for `chunk` (batch, head) pairs at a
  /// time, within kAttentionTempBytes.
  struct ScoreTemps {
    DType scoreType = DType::F32;
    int64_t chunk = 0;
    CUdeviceptr scores = 0, probs = 0;
  };
  absl::StatusOr<ScoreTemps> allocScoreTemps(const AttentionParams &params);
  void freeScoreTemps(const ScoreTemps &temps);
  /// Launches a flash kernel (flash::kThreads threads a block, `shared`
  /// bytes of dynamic shared memory) over `blocks` blocks; the kernels
  /// loop over blocks past the grid's.
  absl::Status launchFlash(CUfunction kernel, int64_t blocks, size_t shared,
                           void **params, const char *what);
  /// The omni_softmax kernel over `rows` rows of scores into probs; rows
  /// start at pair `bh0`; `mask` is 0 without one.
  absl::Status rowSoftmax(const AttentionParams &params, const ScoreTemps &t,
                          int64_t rows, int64_t bh0, CUdeviceptr mask);
  /// The cuDNN handle on this stream, made at the first use (Unimplemented,
  /// and remembered, when cuDNN is missing or will not start).
  absl::Status ensureCudnn();
  /// The cuBLASLt workspace (kWorkspaceBytes): the stream's, allocated at
  /// first use, or while capturing the capture's own.
  absl::StatusOr<CUdeviceptr> gemmWorkspace();
  /// conv2d through cuDNN; Unimplemented when cuDNN is missing or has no
  /// algorithm for the case (the caller then uses im2col + gemm).
  absl::Status cudnnConv2d(const Conv2dParams &p, CUdeviceptr x, CUdeviceptr w,
                           CUdeviceptr y);

  CudaDevice &device_;
  CUstream stream_ = nullptr;
  absl::Status failed_;
  std::vector<std::unique_ptr<Staging>> staging_;
  /// Set between beginCapture and endCapture.
  std::optional<Capture> capture_;
  // cuBLASLt, created at the first library call (its workspace at the first
  // gemm outside a capture).
  const CublasLtApi *lt_ = nullptr;
  cublasLtHandle_t ltHandle_ = nullptr;
  CUdeviceptr workspace_ = 0;
  /// A gemm's cuBLASLt descriptors and algorithm, made at the first gemm of
  /// their shape (CudaLibraries.cpp): the heuristic query costs tens of
  /// microseconds of host time, more than many of the matmuls it picks for.
  /// Keyed by dtypes, sizes, transposes, batch strides and alignments.
  struct CachedGemm;
  absl::Status
  makeGemmPlan(CachedGemm &cached, DType inType, DType outType, int64_t batch,
               int64_t m, int64_t n, int64_t k, const GemmOperand &lhs,
               const GemmOperand &rhs, int64_t resultStride, uint32_t alignA,
               uint32_t alignB, uint32_t alignC, const std::string &what,
               const std::function<absl::Status(cublasStatus_t)> &ok);
  std::map<std::array<int64_t, 14>, std::shared_ptr<CachedGemm>> gemmPlans_;
  // cuDNN, created at the first conv2d (dnnMissing_: not available).
  const CudnnApi *dnn_ = nullptr;
  cudnnHandle_t dnnHandle_ = nullptr;
  bool dnnMissing_ = false;
};

} // namespace omni::hal::cuda

#endif // OMNI_RUNTIME_HAL_DRIVERS_CUDA_CUDASTREAM_H
