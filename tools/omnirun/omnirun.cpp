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

int main(int argc, char **argv) {
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
