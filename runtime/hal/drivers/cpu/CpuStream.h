//===- CpuStream.h - Eager command execution on the host --------*- C++ -*-===//
//
// The cpu driver's Stream runs each command before the submitting call
// returns (on the device's thread pool where the command parallelizes), so
// its events are complete when recorded and synchronize() has nothing to
// wait for; it keeps the asynchronous interface so that the executor is the
// same for every driver. Every BufferRef is checked (this device's buffer,
// range inside it) before any byte is touched.
//
// Graphs: while capturing, each command is checked (its buffer ranges) and
// recorded as a call to make again; launchGraph makes the calls in order.
// That saves nothing on the host, which is why the device does not prefer
// graphs, but it gives the cpu driver the capture semantics of Graph.h, so
// the executor's capture and replay are tested on every machine. What is
// checked at capture: every buffer range, copy and fill sizes, a
// dispatch's kernel and grid, random's dtype and sizes, a matmul's dtype
// and sizes; conv2d's and attention's other checks wait for launchGraph.
//
// Ownership: created by CpuDevice::createStream; the device must outlive it.
// Thread safety: one thread at a time (hal::Stream).
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_HAL_DRIVERS_CPU_CPUSTREAM_H
#define OMNI_RUNTIME_HAL_DRIVERS_CPU_CPUSTREAM_H

#include "runtime/hal/Stream.h"
#include "runtime/hal/drivers/cpu/CpuExecutable.h"

#include <functional>
#include <vector>

namespace omni::hal::cpu {

class CpuDevice;

class CpuStream final : public Stream {
public:
  explicit CpuStream(CpuDevice &device);
  ~CpuStream() override;

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
  /// The epilogue's items run after the gemm blocks that compute their
  /// rows (runMatmul) unless a buffer it writes overlaps lhs or rhs, or a
  /// buffer overlaps the result other than as the result itself read or
  /// written by the same slices: then after the whole matmul.
  absl::Status matmulWithEpilogue(const MatmulParams &params, BufferRef lhs,
                                  BufferRef rhs, BufferRef result,
                                  const Epilogue &epilogue) override;
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

private:
  /// A captured command: the call to make again on the launching stream.
  using Recorded = std::function<absl::Status(CpuStream &)>;
  struct Capture;
  /// While capturing: checks `refs` (null buffers are skipped), takes
  /// `checked` (the command's own checks, run by the caller) and appends
  /// `command`; the first error fails the capture.
  absl::Status record(Recorded command, std::initializer_list<BufferRef> refs,
                      absl::Span<const BufferRef> more = {},
                      absl::Status checked = absl::OkStatus());
  /// While capturing: a call that cannot be captured (`what`) fails it.
  absl::Status refuseWhileCapturing(const char *what);

  /// The host address of `ref` after checking it; `what` names it in errors.
  absl::StatusOr<uint8_t *> resolve(BufferRef ref, const char *what) const;
  /// resolve() plus a check that ref.length == bytes.
  absl::StatusOr<uint8_t *> resolveSized(BufferRef ref, int64_t bytes,
                                         const char *what) const;

  /// A kernel of a CpuExecutable with its arguments resolved: what
  /// dispatch() and a matmul's epilogue run.
  struct KernelCall {
    KernelFn fn = nullptr;
    std::vector<void *> pointers;
    std::vector<int64_t> scalars;
    void run(int64_t begin, int64_t end) {
      fn(begin, end, pointers.data(), scalars.data());
    }
  };
  /// Checks a kernel launch's kernel index and grid and resolves its
  /// buffers.
  absl::StatusOr<KernelCall>
  prepareKernel(const Executable &executable, int64_t kernel, int64_t grid,
                absl::Span<const BufferRef> buffers,
                absl::Span<const int64_t> scalars) const;
  struct MatmulBuffers {
    uint8_t *a = nullptr, *b = nullptr, *c = nullptr;
  };
  struct RandomBuffers {
    uint8_t *words[3] = {}; // key, counter, offset
    uint8_t *result = nullptr;
  };
  /// The host addresses of random()'s buffers after checking the dtype and
  /// their sizes.
  absl::StatusOr<RandomBuffers> resolveRandom(DType dtype, int64_t count,
                                              BufferRef key, BufferRef counter,
                                              BufferRef offset,
                                              BufferRef result) const;
  /// Every check of matmulWithEpilogue: the matmul's, the epilogue's sizes
  /// and its kernel launch.
  absl::Status checkEpilogue(const MatmulParams &params, BufferRef lhs,
                             BufferRef rhs, BufferRef result,
                             const Epilogue &epilogue) const;
  /// The host addresses of a matmul's buffers after checking their sizes.
  absl::StatusOr<MatmulBuffers> resolveMatmul(const MatmulParams &params,
                                              BufferRef lhs, BufferRef rhs,
                                              BufferRef result) const;

  CpuDevice &device_;
  /// Non-null between beginCapture and endCapture.
  std::unique_ptr<Capture> capture_;
};

} // namespace omni::hal::cpu

#endif // OMNI_RUNTIME_HAL_DRIVERS_CPU_CPUSTREAM_H
