//===- Stream.h - Ordered asynchronous command submission -------*- C++ -*-===//
//
// A Stream is an in-order queue of device commands (a CUDA stream, an IREE
// command buffer submitted to a queue): each call submits one command and
// returns; commands run in submission order; the host observes their effects
// only after synchronize() or an Event recorded after them completes. A
// driver may execute each command before the call returns (the cpu driver
// does, on its thread pool), but callers must not rely on that: that is what
// lets the same executor drive a GPU.
//
// Errors: a call fails immediately for a malformed command (a BufferRef
// outside its buffer, a buffer of another device, an unsupported dtype);
// errors that happen while a command runs asynchronously are reported by
// the next synchronize() or Event::wait(), and the stream stays failed.
//
// Ownership: created by Device::createStream; the Device must outlive it.
// Buffers and executables a command uses must stay alive until it completes.
// Thread safety: a Stream is used by one thread at a time; different
// streams may be used concurrently.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_HAL_STREAM_H
#define OMNI_RUNTIME_HAL_STREAM_H

#include "runtime/hal/Buffer.h"
#include "runtime/hal/Event.h"
#include "runtime/hal/Executable.h"
#include "runtime/hal/Graph.h"
#include "runtime/hal/Library.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

#include <memory>

namespace omni::hal {

/// The distributions of step.bin's Random command (docs/rng.md).
enum class Distribution { Normal, Uniform };

class Stream {
public:
  virtual ~Stream() = default;

  //===--- Transfers ------------------------------------------------------===//

  /// Copies dst.length bytes from host memory into `dst`. The bytes are
  /// taken (staged) before the call returns, so `host` may be reused at
  /// once.
  virtual absl::Status writeBuffer(const void *host, BufferRef dst) = 0;

  /// Copies `src` into host memory (src.length bytes). `host` is written
  /// when the command completes: synchronize before reading it, and keep it
  /// alive until then.
  virtual absl::Status readBuffer(BufferRef src, void *host) = 0;

  /// Copies src.length bytes from `src` to `dst` (equal lengths; the ranges
  /// may overlap, with memmove semantics).
  virtual absl::Status copy(BufferRef src, BufferRef dst) = 0;

  /// Fills `dst` with `pattern` repeated (dst.length must be a multiple of
  /// the pattern's non-zero size). The pattern is copied at submission.
  virtual absl::Status fill(BufferRef dst,
                            absl::Span<const uint8_t> pattern) = 0;

  //===--- Compute --------------------------------------------------------===//

  /// Runs kernel `kernel` of `executable` over work items [0, grid) with
  /// the ABI `void k(int64_t begin, int64_t end, void **buffers, const
  /// int64_t *scalars)`; `buffers` and `scalars` are copied at submission.
  virtual absl::Status dispatch(const Executable &executable, int64_t kernel,
                                int64_t grid,
                                absl::Span<const BufferRef> buffers,
                                absl::Span<const int64_t> scalars) = 0;

  /// Fills `result` (`count` elements of the float dtype `dtype`) with
  /// Philox random numbers (docs/rng.md) of the seed, counter and offset
  /// read from the 0-D i64 tensors `key`, `counter` and `offset`, bit for
  /// bit as runtime/flowgrpo's philoxNormal / philoxUniform, rounded to
  /// `dtype` once.
  virtual absl::Status random(Distribution distribution, DType dtype,
                              int64_t count, BufferRef key, BufferRef counter,
                              BufferRef offset, BufferRef result) = 0;

  /// Optional (Device::supportsLibrary says which dtypes): the library
  /// routines of Library.h. Default: Unimplemented.
  virtual absl::Status matmul(const MatmulParams &params, BufferRef lhs,
                              BufferRef rhs, BufferRef result);

  /// A kernel launch that reads a matmul's result by slices: work item w
  /// reads bytes [w * resultItemBytes, (w + 1) * resultItemBytes) of it
  /// (the last item may stop at its end); `itemBytes` has the same for
  /// every buffer (0: the whole buffer), `numOperands` of `buffers` are
  /// read and the rest written (step.fbs LibraryCall.epilogue).
  struct Epilogue {
    const Executable *executable = nullptr;
    int64_t kernel = 0;
    int64_t grid = 0;
    absl::Span<const BufferRef> buffers;
    size_t numOperands = 0;
    absl::Span<const int64_t> scalars;
    absl::Span<const int64_t> itemBytes;
    int64_t resultItemBytes = 0;
  };
  /// matmul() then dispatch() of the epilogue, with the same effect as the
  /// two calls; a driver may run each work item of the epilogue as soon as
  /// the rows it reads are computed. Default: the two calls.
  virtual absl::Status matmulWithEpilogue(const MatmulParams &params,
                                          BufferRef lhs, BufferRef rhs,
                                          BufferRef result,
                                          const Epilogue &epilogue);
  virtual absl::Status conv2d(const Conv2dParams &params, BufferRef input,
                              BufferRef filter, BufferRef result);
  /// `mask` has a null buffer when params.hasMask is false.
  virtual absl::Status attention(const AttentionParams &params, BufferRef q,
                                 BufferRef k, BufferRef v, BufferRef mask,
                                 BufferRef result);
  /// Attention's cotangents of q, k and v: dq, dk, dv from q, k, v, the
  /// mask (a null buffer when params.hasMask is false), the forward's
  /// result o and its cotangent dO.
  virtual absl::Status attentionBackward(const AttentionParams &params,
                                         BufferRef q, BufferRef k, BufferRef v,
                                         BufferRef mask, BufferRef o,
                                         BufferRef dO, BufferRef dq,
                                         BufferRef dk, BufferRef dv);

  //===--- Synchronization ------------------------------------------------===//

  /// An event that completes when every command submitted so far has.
  virtual absl::StatusOr<std::shared_ptr<Event>> recordEvent() = 0;

  /// Commands submitted after this call wait for `event` (which may come
  /// from another stream of the same device).
  virtual absl::Status waitEvent(const std::shared_ptr<Event> &event) = 0;

  /// Blocks until every submitted command has finished; returns the first
  /// asynchronous error, if any.
  virtual absl::Status synchronize() = 0;

  //===--- Graphs (optional, Graph.h) -------------------------------------===//

  /// Starts capturing: until endCapture(), the commands submitted to this
  /// stream are recorded into a graph and do not run. While capturing,
  /// readBuffer, recordEvent, waitEvent, synchronize and launchGraph fail
  /// with FailedPrecondition; writeBuffer records the bytes it is given now
  /// (a driver may refuse large ones with Unimplemented). A Channel's
  /// collectives are not commands of the stream: do not run them on a
  /// device whose stream captures (the cuda driver refuses them, the cpu
  /// driver's run at once and are not captured). A command that fails
  /// while capturing makes endCapture fail. Fails with FailedPrecondition
  /// when already capturing. Default: Unimplemented (no graphs).
  virtual absl::Status beginCapture();

  /// Ends the capture begun by beginCapture() and returns its graph; the
  /// stream runs commands again. Fails, discarding what was captured, when
  /// a command failed during the capture (the first such error, in the
  /// message) or when the stream was not capturing.
  virtual absl::StatusOr<std::unique_ptr<Graph>> endCapture();

  /// Runs `graph`'s commands, in their order, after every command
  /// submitted before, as one submission. `graph` comes from a capture on
  /// a stream of this stream's device and must stay alive until the launch
  /// completes.
  virtual absl::Status launchGraph(const Graph &graph);
};

} // namespace omni::hal

#endif // OMNI_RUNTIME_HAL_STREAM_H
