//===- MpiFailTest.cpp - MPI jobs whose ranks fail --------------*- C++ -*-===//
//
// Run by MpiFailTest.sh under mpirun -np 2; argv[1] says how rank 1 fails
// after one all_reduce that both ranks complete:
//   kill     rank 1 raises SIGKILL on itself; rank 0 waits in the next
//            all_reduce until mpirun ends the job.
//   timeout  the channel's timeout is 2 s and rank 1 sleeps for 30 s before
//            the next all_reduce; rank 0 gives up, prints why and aborts.
//   abort    rank 1 calls abort() on its channel (a run that failed).
// Every mode must end the job non-zero well before 60 s; "finished" is
// printed only if it did not.
//
//===----------------------------------------------------------------------===//

#include "runtime/hal/drivers/Drivers.h"
#include "runtime/hal/mpi/MpiChannel.h"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <thread>

using namespace omni;
using namespace omni::hal;

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  auto timeout = std::strcmp(mode, "timeout") == 0
                     ? std::chrono::milliseconds(2000)
                     : mpi::MpiChannelProvider::kDefaultTimeout;
  auto provider = mpi::MpiChannelProvider::create(timeout);
  if (!provider.ok()) {
    std::fprintf(stderr, "%s\n", provider.status().ToString().c_str());
    return 2;
  }
  const int rank = (*provider)->rank();
  auto device = *builtinDrivers().createDevice("cpu", {});
  auto stream = *device->createStream();
  auto channel = device->createChannel(*(*provider)->spec(rank));
  if (!channel.ok()) {
    std::fprintf(stderr, "%s\n", channel.status().ToString().c_str());
    return 2;
  }
  auto buffer = *device->allocate(4);
  float one = 1.0f;
  (void)stream->writeBuffer(&one, BufferRef::all(*buffer));
  auto allReduce = [&] {
    return (*channel)->allReduce(*stream, BufferRef::all(*buffer),
                                 BufferRef::all(*buffer), DType::F32,
                                 ReduceOp::Sum);
  };
  if (absl::Status s = allReduce(); !s.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, s.ToString().c_str());
    return 2;
  }
  std::printf("rank %d: the first all_reduce passed\n", rank);
  std::fflush(stdout);
  if (rank == 1) {
    if (std::strcmp(mode, "kill") == 0)
      std::raise(SIGKILL);
    else if (std::strcmp(mode, "timeout") == 0)
      std::this_thread::sleep_for(std::chrono::seconds(30));
    else if (std::strcmp(mode, "abort") == 0)
      (*channel)->abort(absl::InternalError("the reward server is down"));
  }
  absl::Status s = allReduce();
  std::printf("rank %d: finished: %s\n", rank, s.ToString().c_str());
  return 0;
}
