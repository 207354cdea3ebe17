//===- MpiChannel.h - Channels between MPI processes ------------*- C++ -*-===//
//
// `mpirun -np N omnirun step.bin` runs one rank per process; this provider
// describes that group. Its specs carry a Bootstrap of kind "mpi"
// (kMpiBootstrapKind, hal/HostCollectives.h) that a driver whose buffers
// are host memory - the cpu driver - turns into a channel over a duplicate
// of MPI_COMM_WORLD (split() makes sub-communicators, MPI_Comm_split).
//
// Results: every collective first exchanges a small descriptor of what each
// rank submitted (a mismatch, or a rank whose buffer was bad, fails every
// rank with the same one line, as the in-process channel does), then moves
// the operands with MPI and reduces them here, in rank order 0..size-1,
// with the reduction the cpu channel uses (reduceHostElements): identical
// bits on every rank and equal to the in-process channel's. MPI's own
// reduction operators are not used (MPI fixes neither their order nor
// their accumulation type). One call moves at most INT_MAX bytes per rank.
//
// Failure (docs/backend.md, "MPI"): MPI errors return (MPI_ERRORS_RETURN)
// and become one-line statuses naming the rank and the operation. A rank
// that waits longer than the provider's timeout for the others prints
// "rank <r>: <operation> waited longer than ..." to stderr and calls
// MPI_Abort, which ends every process of the job. abort() does the same
// with its reason ("rank <r>: <reason>; aborting the MPI job"): an MPI
// group cannot be failed and kept alive, since a rank that gave up would
// leave the others waiting. When a process dies, mpirun ends the job.
//
// MPI is initialized once per process (MPI_Init_thread, MPI_THREAD_MULTIPLE
// requested) by the first provider, and finalized at exit.
//
// Ownership: the provider shares its bootstrap with the specs; a channel
// owns its communicator. Thread safety: as hal::Channel; providers may be
// created from any thread.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_HAL_MPI_MPICHANNEL_H
#define OMNI_RUNTIME_HAL_MPI_MPICHANNEL_H

#include "runtime/hal/Channel.h"

#include "absl/status/statusor.h"

#include <chrono>
#include <cstdlib>
#include <memory>

namespace omni::hal::mpi {

/// True when an MPI launcher started this process (OMPI_COMM_WORLD_SIZE,
/// PMIX_RANK or PMI_RANK is set). Inline: callers use it whether or not
/// MPI was built, to refuse an MPI launch they cannot serve.
inline bool launchedByMpi() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMIX_RANK") ||
         std::getenv("PMI_RANK");
}

/// This process's number among the job's processes on its host (0, 1, ...
/// in rank order), as its launcher says (OpenMPI's mpirun, MPICH's Hydra,
/// SLURM's srun), or -1 when none does.
inline int launcherLocalRank() {
  for (const char *name :
       {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"})
    if (const char *v = std::getenv(name); v && *v)
      return std::atoi(v);
  return -1;
}

class MpiChannelProvider final : public ChannelProvider {
public:
  /// A collective that waits longer than this fails the job.
  static constexpr std::chrono::milliseconds kDefaultTimeout =
      std::chrono::seconds(60);

  /// Initializes MPI for this process if nothing has (once; MPI_Finalize
  /// runs at exit) and describes MPI_COMM_WORLD. A timeout of 0 waits
  /// forever.
  static absl::StatusOr<std::unique_ptr<MpiChannelProvider>>
  create(std::chrono::milliseconds timeout = kDefaultTimeout);

  /// The world size.
  int size() const override { return size_; }
  /// This process's world rank.
  int rank() const { return rank_; }
  /// The spec of this process's rank; InvalidArgument for any other (each
  /// process makes only its own channel).
  absl::StatusOr<ChannelSpec> spec(int rank) const override;

  /// Collective over MPI_COMM_WORLD (every process calls it once, in the
  /// same order): `size` bytes at `bytes` become root's (MPI_Bcast). For
  /// what other channels need agreed first, such as the ncclUniqueId of
  /// `mpirun ... omnirun --gpus 8` (hal/drivers/cuda/NcclChannel.h).
  absl::Status broadcast(void *bytes, int64_t size, int root) const;

private:
  MpiChannelProvider(int rank, int size, std::shared_ptr<Bootstrap> bootstrap)
      : rank_(rank), size_(size), bootstrap_(std::move(bootstrap)) {}

  int rank_, size_;
  std::shared_ptr<Bootstrap> bootstrap_;
};

} // namespace omni::hal::mpi

#endif // OMNI_RUNTIME_HAL_MPI_MPICHANNEL_H
