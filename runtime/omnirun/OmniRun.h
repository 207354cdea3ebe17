//===- OmniRun.h - The omnirun tool as a library ----------------*- C++ -*-===//
//
// omnirun runs compiled step.bin programs (like iree-run-module): `--list`
// prints every function with its input and output types and the state
// slots; `--function f --input=... --output=...` runs one function on
// inputs given exactly as omni-eval takes them (`@a.npy` or
// `2x3xf32=1,2,...`), writing results to .npy files or printing them with 9
// (f32) or 17 (f64) significant digits. `--steps N` (or any training
// option, or `--train`) trains a program that follows the convention of
// runtime/train/driver/Trainer.h instead: `--out DIR` for checkpoints,
// metrics.jsonl and sample grids, `--resume [DIR]`, `--prompts`, `--init`,
// `--reward`, ... (see --help), or from `--config omni.toml`'s [run]
// section (docs/config.md); `--ranks N` trains a program with a mesh
// on N in-process ranks (runtime/train/driver/Ranks.h), and `--gpus N` on
// N GPUs joined by NCCL (one thread each; under mpirun N per process).
// The main in
// omnirun.cpp only forwards argv
// here, so tests run the tool in-process.
//
// Every user-facing error (bad arguments, a bad step.bin, inputs of the
// wrong count or type, a failing run) is one line "omnirun: ..." on `err`
// and exit code 1. Training handles SIGINT and SIGTERM while it runs
// (runtime/train/driver/Interrupt.h): the current iteration finishes, a
// checkpoint is saved, the line says where, and the exit code is 130 or
// 143. MLIR- and LLVM-free.
//
// Under an MPI launcher (`mpirun -np N omnirun ...`, detected by
// hal::mpi::launchedByMpi) training runs this process's one rank of the MPI
// world, joined through `joinMpi` (the omnirun main passes one when built
// with MPI; without one, or with --ranks, the launch is an error).
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_OMNIRUN_OMNIRUN_H
#define OMNI_RUNTIME_OMNIRUN_OMNIRUN_H

#include "runtime/hal/Channel.h"

#include "absl/status/statusor.h"

#include <chrono>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace omni::omnirun {

/// This process's part of an MPI job.
struct MpiWorld {
  /// Describes the world; makes the spec of `rank` only.
  std::unique_ptr<hal::ChannelProvider> provider;
  /// This process's rank.
  int rank = 0;
  /// Collective: `size` bytes at `bytes` become rank `root`'s on every
  /// process (MPI_Bcast; the ncclUniqueId of --gpus under mpirun). Empty:
  /// not available.
  std::function<absl::Status(void *bytes, int64_t size, int root)> broadcast;
};

/// Joins the MPI job this process was launched in; collectives that wait
/// longer than `timeout` (0: forever) end the job.
using MpiJoin =
    std::function<absl::StatusOr<MpiWorld>(std::chrono::milliseconds timeout)>;

/// Runs omnirun with `args` (argv without the program name). Returns the
/// exit code: 0 on success, 1 on any error, 128 + the signal when training
/// was interrupted.
int run(const std::vector<std::string> &args, std::ostream &out,
        std::ostream &err, const MpiJoin &joinMpi = nullptr);

/// The names of omnirun's flags (`--steps`, ...), and whether one is a
/// training flag: for the test that checks the config file's [run] keys
/// (runtime/base/ConfigFile.h) against them.
std::vector<std::string> flagNames();
bool isTrainingFlag(const std::string &name);

} // namespace omni::omnirun

#endif // OMNI_RUNTIME_OMNIRUN_OMNIRUN_H
