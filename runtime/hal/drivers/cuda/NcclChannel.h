//===- NcclChannel.h - Collectives between GPUs through NCCL ----*- C++ -*-===//
//
// The cuda driver's channel: the ranks' GPUs joined by an NCCL communicator
// (libnccl.so.2 is dlopen'ed, never linked; nccl.h from the toolkit gives
// the types). CudaDevice::createChannel hands the spec and its own context
// to createNcclChannel; collectives run on the CudaStream they are
// submitted on (CudaStream::handle(), reached with a dynamic_cast from
// hal::Stream), so they are ordered with its other commands. The channel's
// semantics are hal::Channel's (hal/Channel.h) with the differences below
// (docs/backend-cuda.md, "NCCL").
//
// Groups (ChannelSpec::bootstrap):
//  - none (size 1): a loopback; every collective is a stream copy (or
//    nothing), NCCL is not loaded.
//  - kind "nccl" (kNcclBootstrapKind), made by NcclChannelProvider: an
//    ncclUniqueId, the world size and the collective timeout. In one
//    process (`omnirun --gpus N`) rank 0's ncclGetUniqueId is shared by the
//    N threads; across processes (`mpirun -np NODES omnirun --gpus 8`)
//    MPI rank 0 makes it and broadcasts it (runtime/hal/mpi), and each
//    process's provider serves its local ranks node*8 .. node*8+7.
//    Communicators are created non-blocking (ncclConfig_t.blocking = 0),
//    so the ranks of one process may create their channels one after the
//    other on one thread without deadlock; the first collective waits for
//    the communicator to be ready.
//  - any other kind: Unimplemented.
//
// Dtypes and ops: bf16, f16, f32, f64, i32, i64 reduce (Mean -> ncclAvg,
// float dtypes only; i1 never reduces, as checkHostReduction says);
// all_gather and broadcast move bytes of any dtype. Unlike the host
// channels, NCCL fixes neither the order in which it combines the ranks
// nor (for f16/bf16) an f32 accumulator across ranks: results are the
// same on every rank and run to run on one topology, but need not equal
// the cpu channel's bits.
//
// Failure and timeouts: NCCL errors are one line with ncclGetErrorString
// and ncclGetLastError ("rank 1: nccl all_reduce: unhandled cuda error
// (...)"). A watchdog thread per channel records an event after each
// collective; one that has not completed within the group's timeout
// (omnirun --collective-timeout) aborts the group: every local rank's
// communicator is ncclCommAbort'ed (its kernels end) and every local
// rank's later collectives fail with the same DeadlineExceeded line.
// abort() and a destroyed channel fail the group the same way. A rank of
// another process sees the failure only through its own watchdog.
// An aborted collective that had already been submitted leaves garbage in
// its result buffers; the stream itself does not fail, so the error
// reaches the rank at its next collective.
//
// Ownership: the returned channel borrows `context.api` and the device's
// CUcontext; the CudaDevice must outlive it. Thread safety: as
// hal::Channel (abort() from any thread); providers are thread-safe.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_HAL_DRIVERS_CUDA_NCCLCHANNEL_H
#define OMNI_RUNTIME_HAL_DRIVERS_CUDA_NCCLCHANNEL_H

#include "runtime/hal/Channel.h"

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include <array>
#include <chrono>
#include <memory>
#include <mutex>
#include <vector>

namespace omni::hal::cuda {

class CudaApi;

/// What a channel needs from the device that creates it.
struct NcclDeviceContext {
  /// The driver API table of the device (CudaApi.h); never null.
  const CudaApi *api = nullptr;
  /// The CUDA device ordinal.
  int ordinal = 0;
  /// The device's primary context (a CUcontext).
  void *context = nullptr;
};

/// Creates this rank's NCCL channel for `spec` (validated by the caller
/// with validateChannelSpec). One-line errors.
absl::StatusOr<std::unique_ptr<Channel>>
createNcclChannel(const NcclDeviceContext &context, const ChannelSpec &spec);

/// The Bootstrap kind of NCCL groups.
inline constexpr absl::string_view kNcclBootstrapKind = "nccl";

/// An ncclUniqueId's bytes (NCCL_UNIQUE_ID_BYTES).
using NcclUniqueId = std::array<char, 128>;

/// Loads libnccl.so.2 (once; the environment variable OMNI_NCCL_LIBRARY
/// names another file) and checks its version (2.18 or newer: non-blocking
/// communicators and ncclCommSplit). "nccl: libnccl.so.2 not found (...)"
/// when it cannot be loaded. Returns the version code (22809 for 2.28.9).
absl::StatusOr<int> loadNccl();

/// ncclGetUniqueId (loads NCCL first).
absl::StatusOr<NcclUniqueId> makeNcclUniqueId();

/// The groups of NCCL channels whose ranks are threads of this process,
/// or a part of a world that spans processes.
class NcclChannelProvider final : public ChannelProvider {
public:
  /// `size` ranks, all threads of this process (omnirun --gpus N). The
  /// unique id is made at the first spec(), so that a missing GPU is
  /// reported by the device before a missing NCCL is. A collective that
  /// takes longer than `timeout` aborts the group (0: never).
  NcclChannelProvider(int size, std::chrono::milliseconds timeout);

  /// This process's ranks `localRanks` of a world of `size` ranks whose
  /// unique id `id` every process got from the same ncclGetUniqueId (MPI
  /// rank 0's, broadcast).
  NcclChannelProvider(int size, const NcclUniqueId &id,
                      std::vector<int> localRanks,
                      std::chrono::milliseconds timeout);

  int size() const override { return size_; }
  /// The spec of a local rank; InvalidArgument for any other, and the
  /// error of loadNccl / ncclGetUniqueId.
  absl::StatusOr<ChannelSpec> spec(int rank) const override;

private:
  int size_;
  std::vector<int> localRanks_;
  std::chrono::milliseconds timeout_;
  mutable std::mutex mutex_;
  mutable std::shared_ptr<Bootstrap> bootstrap_;
  bool hasId_ = false;
  NcclUniqueId id_{};
};

} // namespace omni::hal::cuda

#endif // OMNI_RUNTIME_HAL_DRIVERS_CUDA_NCCLCHANNEL_H
