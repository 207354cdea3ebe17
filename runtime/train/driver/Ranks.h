//===- Ranks.h - Training on several ranks (omnirun --ranks N) --*- C++ -*-===//
//
// A sharded program (one with an omni.mesh) runs as one rank per mesh
// position; every rank runs train() (Trainer.h) with the same options and
// inputs (prompts, seed, iterations: the compiled program splits the batch
// itself), on its own device and with its own channel of one group.
// runRanks() runs the ranks of this process:
// - in-process (omnirun --ranks N): every rank is local, a thread of its own
//   with a cpu device and its share of the worker threads, and the channels
//   come from a hal::InProcessChannelProvider;
// - across processes (MPI, the seam for runtime/hal/mpi): the provider is
//   the MPI world's and `localRanks` is this process's one rank. Nothing
//   else changes: the program, the checks and train() are the same;
// - on GPUs (omnirun --gpus N, also under mpirun: N local ranks per
//   process): RanksOptions::createDevice gives local rank i the cuda device
//   of ordinal i, and the provider is an NCCL group
//   (hal/drivers/cuda/NcclChannel.h).
// Only rank 0 prints and writes files. The world must equal the program's
// mesh (checkWorld). Failures: a rank whose run fails aborts the channel
// with a reason naming it, so no rank waits for it; a rank that hangs or
// dies is caught by the channel's timeout, whose message names the ranks
// that did not arrive. runRanks returns the first failure (the root
// cause), or rank 0's status.
//
// Test hook: OMNI_TEST_FAULT="rank=R,iteration=I,mode=fail|hang|die" (parsed by
// parseTestFault) makes rank R fail, hang until another local rank has
// failed, or die (SIGKILL its process: under mpirun only) before its
// iteration I. Only tests set it. (With one local rank,
// as under MPI, a hanging rank hangs until its process is killed.)
//
// Thread safety: runRanks blocks until every local rank has finished.
// MLIR-free.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_TRAIN_DRIVER_RANKS_H
#define OMNI_RUNTIME_TRAIN_DRIVER_RANKS_H

#include "runtime/hal/Channel.h"
#include "runtime/loader/Program.h"
#include "runtime/train/driver/Trainer.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace omni::train {

/// OMNI_TEST_FAULT: rank `rank` fails, hangs or kills its own process
/// (SIGKILL; only with one rank per process, as under mpirun) before
/// iteration `iteration`.
struct TestFault {
  enum class Mode { Fail, Hang, Die };
  int rank = 0;
  int64_t iteration = 0;
  Mode mode = Mode::Fail;
};

/// Parses "rank=R,iteration=I,mode=fail|hang|die" (one-line errors).
absl::StatusOr<TestFault> parseTestFault(const std::string &text);

/// The environment's OMNI_TEST_FAULT: none when unset, else parsed.
absl::StatusOr<std::optional<TestFault>> testFaultFromEnvironment();

/// Checks that `program`'s meshes have `worldSize` ranks (a program without
/// a mesh runs on one rank). `how` says where the count came from
/// ("--ranks 2"): "step.bin's mesh 'mesh' (dp=2 x fsdp=2) has 4 ranks but
/// omnirun runs 2 (--ranks 2)".
absl::Status checkWorld(const loader::Program &program, int worldSize,
                        const std::string &how);

/// Makes the device of global rank `rank`, the `localIndex`-th local rank
/// of this process (a cuda device of ordinal localIndex, say).
using DeviceFactory =
    std::function<absl::StatusOr<std::unique_ptr<hal::Device>>(int rank,
                                                               int localIndex)>;

struct RanksOptions {
  /// The hal driver of every rank's device (when createDevice is empty).
  std::string driver = "cpu";
  /// Worker threads of all local ranks together (0: one per core); each
  /// rank's device gets threads / localRanks, at least 1.
  int threads = 0;
  /// When set, makes every local rank's device instead of `driver` and
  /// `threads` (omnirun --gpus: ordinal = local index).
  DeviceFactory createDevice;
  /// Where the world size came from, for checkWorld's message ("--ranks 2",
  /// "--gpus 8", "mpirun -np 2"); empty: "--ranks <size>".
  std::string how;
  std::optional<TestFault> fault;
};

/// Trains `program` on the ranks `localRanks` of the group `provider`
/// describes (each in [0, provider.size())), one thread per local rank (the
/// calling thread when there is one). `training` is every rank's options;
/// its channel is set per rank. Progress goes to `log` (rank 0's).
absl::Status runRanks(std::shared_ptr<const loader::Program> program,
                      const hal::ChannelProvider &provider,
                      const std::vector<int> &localRanks,
                      const RanksOptions &options, const TrainOptions &training,
                      std::ostream &log);

} // namespace omni::train

#endif // OMNI_RUNTIME_TRAIN_DRIVER_RANKS_H
