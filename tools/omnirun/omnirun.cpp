//===- omnirun.cpp - Run a compiled omni program ----------------*- C++ -*-===//
//
// The omnirun executable: forwards its arguments to omni::omnirun::run
// (OmniRun.h), which does everything, so tests can run the tool in-process.
// Built with MPI, it also hands run() the way to join an MPI job
// (`mpirun -np N omnirun`, hal/mpi/MpiChannel.h).
//
//===----------------------------------------------------------------------===//

#include "runtime/omnirun/OmniRun.h"

#ifdef OMNI_HAVE_MPI
#include "runtime/hal/mpi/MpiChannel.h"
#endif

#include <iostream>

#include <malloc.h>

int main(int argc, char **argv) {
  // The compiled kernels and the libraries allocate their scratch (a fused
  // kernel's intermediates, up to a few MB per work item) on every call.
  // glibc's default thresholds map such blocks fresh or hand freed memory
  // back to the system, so each iteration faulted in and zeroed the same
  // pages again: about 4400 page faults per iteration of the tiny recipe
  // (17 MB), 200 000 of the small one (800 MB). Blocks up to 32 MiB
  // (glibc's largest mmap threshold) now come from the heap, and freed
  // memory stays there for the next call: no page faults after the first
  // iteration. Measured on tiny (8 iterations, 5 paired runs): system time
  // 0.33 -> 0.25 s, wall time unchanged within noise.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
  std::vector<std::string> args(argv + 1, argv + argc);
  omni::omnirun::MpiJoin joinMpi;
#ifdef OMNI_HAVE_MPI
  joinMpi = [](std::chrono::milliseconds timeout)
      -> absl::StatusOr<omni::omnirun::MpiWorld> {
    auto provider = omni::hal::mpi::MpiChannelProvider::create(timeout);
    if (!provider.ok())
      return provider.status();
    const int rank = (*provider)->rank();
    omni::omnirun::MpiWorld world;
    const omni::hal::mpi::MpiChannelProvider *mpi = provider->get();
    world.broadcast = [mpi](void *bytes, int64_t size, int root) {
      return mpi->broadcast(bytes, size, root);
    };
    world.provider = std::move(*provider);
    world.rank = rank;
    return world;
  };
#endif
  return omni::omnirun::run(args, std::cout, std::cerr, joinMpi);
}
