//===- HostCollectives.h - Collectives over host memory ---------*- C++ -*-===//
//
// What the channels whose buffers are host memory share, so that every one
// of them gives the same bits (hal/Channel.h, "Results are deterministic";
// docs/backend.md, "Channels and the mesh"):
//  - the reduction of the ranks' operands in rank order 0..size-1 with the
//    accumulation rules of Channel.h (reduceHostElements), and the check of
//    which (dtype, op) pairs reduce at all (checkHostReduction). The cpu
//    driver's in-process channel (CpuChannel) and the MPI channel
//    (hal/mpi/MpiChannel.h) both reduce with these; an MPI channel gathers
//    the operands first and reduces locally instead of calling MPI's own
//    reductions, whose order and accumulation MPI does not fix.
//  - HostBootstrap: a Bootstrap that makes channels itself for a driver
//    whose buffers are host memory. The driver recognizes one by
//    dynamic_cast and lends it HostAccess (how to find a BufferRef's bytes,
//    its thread pool). The MPI bootstrap (kind kMpiBootstrapKind, "mpi") is
//    one; this header does not depend on MPI, so a driver accepts it
//    whether or not MPI was built.
//
// Thread safety: the functions are pure; reduceHostElements may run on
// disjoint [begin, end) ranges concurrently.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_HAL_HOSTCOLLECTIVES_H
#define OMNI_RUNTIME_HAL_HOSTCOLLECTIVES_H

#include "runtime/hal/Channel.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace omni::hal {

/// OK when `dtype` elements reduce with `op`; otherwise a one-line
/// InvalidArgument (i1 never reduces; mean only of float dtypes).
absl::Status checkHostReduction(DType dtype, ReduceOp op);

/// out[i] = op over r = 0..src.size()-1 of element (first + i) of src[r],
/// for i in [begin, end), accumulated per Channel.h (f16/bf16 in f32,
/// integers wrap, NaN wins min/max, mean = sum / src.size()). `out` may
/// not overlap any src range it writes before reading. The pair must pass
/// checkHostReduction.
void reduceHostElements(DType dtype, ReduceOp op,
                        const std::vector<const uint8_t *> &src, int64_t first,
                        uint8_t *out, int64_t begin, int64_t end);

/// Elements per parallel chunk of a host reduction.
inline constexpr int64_t kHostReduceGrain = 16384;

/// What a driver whose buffers are host memory lends a channel that a
/// HostBootstrap makes.
struct HostAccess {
  /// The host address of `ref`'s bytes after checking that `ref` is a
  /// buffer of the driver's device and inside it; `what` ("send") names
  /// it in the one-line error.
  std::function<absl::StatusOr<uint8_t *>(BufferRef ref, const char *what)>
      resolve;
  /// Runs fn(begin, end) over chunks covering [0, n) of at least `grain`
  /// items, possibly in parallel; null runs fn(0, n) on the caller.
  std::function<void(int64_t n, int64_t grain,
                     const std::function<void(int64_t, int64_t)> &fn)>
      parallelFor;
};

/// The kind of the MPI bootstrap (hal/mpi/MpiChannel.h).
inline constexpr absl::string_view kMpiBootstrapKind = "mpi";

/// A bootstrap that makes the channel of one rank over host memory.
class HostBootstrap : public Bootstrap {
public:
  /// The channel of `spec.rank` (a spec this bootstrap's provider made).
  /// The driver's stream must be eager (a submitted command has run), as
  /// the cpu driver's is: the channel reads and writes the bytes at once.
  virtual absl::StatusOr<std::unique_ptr<Channel>>
  createHostChannel(const ChannelSpec &spec, HostAccess access) = 0;
};

} // namespace omni::hal

#endif // OMNI_RUNTIME_HAL_HOSTCOLLECTIVES_H
