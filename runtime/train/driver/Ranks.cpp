//===- Ranks.cpp - Training on several ranks (omnirun --ranks N) ----------===//

#include "runtime/train/driver/Ranks.h"

#include "runtime/hal/drivers/Drivers.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

#include <algorithm>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace omni::train {

absl::StatusOr<TestFault> parseTestFault(const std::string &text) {
  TestFault fault;
  bool rank = false, iteration = false, mode = false;
  auto bad = [&](const std::string &why) {
    return absl::InvalidArgumentError(
        absl::StrCat("OMNI_TEST_FAULT='", text, "': ", why,
                     ", expected rank=R,iteration=I,mode=fail|hang|die"));
  };
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    std::pair<std::string, std::string> kv = absl::StrSplit(part, '=');
    if (kv.first == "rank" && absl::SimpleAtoi(kv.second, &fault.rank) &&
        fault.rank >= 0)
      rank = true;
    else if (kv.first == "iteration" &&
             absl::SimpleAtoi(kv.second, &fault.iteration) &&
             fault.iteration >= 0)
      iteration = true;
    else if (kv.first == "mode" &&
             (kv.second == "fail" || kv.second == "hang" || kv.second == "die"))
      mode = true, fault.mode = kv.second == "fail"   ? TestFault::Mode::Fail
                                : kv.second == "hang" ? TestFault::Mode::Hang
                                                      : TestFault::Mode::Die;
    else
      return bad(absl::StrCat("cannot use '", part, "'"));
  }
  if (!rank || !iteration || !mode)
    return bad("missing a field");
  return fault;
}

absl::StatusOr<std::optional<TestFault>> testFaultFromEnvironment() {
  const char *text = std::getenv("OMNI_TEST_FAULT");
  if (!text || !*text)
    return std::optional<TestFault>();
  absl::StatusOr<TestFault> fault = parseTestFault(text);
  if (!fault.ok())
    return fault.status();
  return std::optional<TestFault>(*fault);
}

absl::Status checkWorld(const loader::Program &program, int worldSize,
                        const std::string &how) {
  if (program.meshes().empty()) {
    if (worldSize == 1)
      return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat(program.name(),
                     " has no mesh, so it runs on 1 rank, but "
                     "omnirun runs ",
                     worldSize, " (", how, ")"));
  }
  for (const loader::MeshInfo &mesh : program.meshes())
    if (mesh.numRanks != worldSize)
      return absl::InvalidArgumentError(
          absl::StrCat(program.name(), "'s mesh ", mesh.describe(), " has ",
                       mesh.numRanks, mesh.numRanks == 1 ? " rank" : " ranks",
                       " but omnirun runs ", worldSize, " (", how, ")"));
  return absl::OkStatus();
}

namespace {

/// What the local ranks share: the first failure and the release of a
/// hanging test fault.
class Outcome {
public:
  /// Records `status` of `rank`, `own` being its message before the rank
  /// was named (the first non-Cancelled failure wins: a stop request is
  /// agreed, so every rank is Cancelled together).
  void finish(int rank, const absl::Status &status, const absl::Status &own) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (rank == 0) {
      lead_ = status;
      leadOwn_ = own;
    }
    if (!status.ok() && !absl::IsCancelled(status)) {
      if (!failed_) {
        first_ = status;
        firstOwn_ = own;
      }
      failed_ = true;
      changed_.notify_all();
    }
  }
  /// Blocks until a rank has failed.
  void waitForFailure() {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return failed_; });
  }
  /// The first failure, else rank 0's status when it is local, else
  /// `own` (this process's rank's).
  absl::Status result(bool hasLead, const absl::Status &own) {
    std::lock_guard<std::mutex> lock(mutex_);
    // Every rank failing alike (a bad --init file) reports rank 0.
    if (failed_)
      return hasLead && leadOwn_ == firstOwn_ ? lead_ : first_;
    return hasLead ? lead_ : own;
  }

private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool failed_ = false;
  absl::Status first_, lead_, firstOwn_, leadOwn_;
};

/// "rank <r>: <message>", unless the message names a rank already or is
/// an agreed stop (every rank's, rank 0's reported).
absl::Status naming(int rank, const absl::Status &status) {
  if (status.ok() || absl::IsCancelled(status) ||
      absl::StartsWith(status.message(), "rank "))
    return status;
  return absl::Status(status.code(),
                      absl::StrCat("rank ", rank, ": ", status.message()));
}

} // namespace

absl::Status runRanks(std::shared_ptr<const loader::Program> program,
                      const hal::ChannelProvider &provider,
                      const std::vector<int> &localRanks,
                      const RanksOptions &options, const TrainOptions &training,
                      std::ostream &log) {
  const int worldSize = provider.size();
  if (absl::Status s =
          checkWorld(*program, worldSize,
                     options.how.empty() ? absl::StrCat("--ranks ", worldSize)
                                         : options.how);
      !s.ok())
    return s;
  if (localRanks.empty())
    return absl::InvalidArgumentError("runRanks: no local rank");
  if (options.fault && options.fault->rank >= worldSize)
    return absl::InvalidArgumentError(
        absl::StrCat("OMNI_TEST_FAULT names rank ", options.fault->rank,
                     " but the run has ", worldSize));
  if (options.fault && options.fault->mode == TestFault::Mode::Die &&
      localRanks.size() > 1)
    return absl::InvalidArgumentError(absl::StrCat(
        "OMNI_TEST_FAULT mode=die kills rank ", options.fault->rank,
        "'s process, which holds all ", localRanks.size(),
        " ranks here: it needs one rank per process (mpirun -np N)"));
  // Devices and channels first (not collective), so that a failure here
  // leaves no rank waiting.
  int threads = options.threads > 0
                    ? options.threads
                    : static_cast<int>(std::thread::hardware_concurrency());
  hal::DeviceOptions deviceOptions;
  deviceOptions.threads =
      std::max(1, threads / static_cast<int>(localRanks.size()));
  const bool needsChannel = !program->meshes().empty();
  std::vector<std::unique_ptr<hal::Device>> devices;
  std::vector<std::unique_ptr<hal::Channel>> channels;
  for (size_t i = 0; i < localRanks.size(); ++i) {
    const int rank = localRanks[i];
    absl::StatusOr<std::unique_ptr<hal::Device>> device =
        options.createDevice
            ? options.createDevice(rank, static_cast<int>(i))
            : hal::builtinDrivers().createDevice(options.driver, deviceOptions);
    if (!device.ok())
      return device.status();
    std::unique_ptr<hal::Channel> channel;
    if (needsChannel) {
      absl::StatusOr<hal::ChannelSpec> spec = provider.spec(rank);
      if (!spec.ok())
        return spec.status();
      absl::StatusOr<std::unique_ptr<hal::Channel>> created =
          (*device)->createChannel(*spec);
      if (!created.ok())
        return created.status();
      channel = std::move(*created);
    }
    devices.push_back(std::move(*device));
    channels.push_back(std::move(channel));
  }

  Outcome outcome;
  std::vector<absl::Status> statuses(localRanks.size());
  auto runRank = [&](size_t i) {
    const int rank = localRanks[i];
    TrainOptions mine = training;
    mine.channel = channels[i].get();
    if (options.fault && options.fault->rank == rank) {
      TestFault fault = *options.fault;
      mine.beforeIteration = [fault, &outcome](int64_t it) -> absl::Status {
        if (it != fault.iteration)
          return absl::OkStatus();
        if (fault.mode == TestFault::Mode::Fail)
          return absl::InternalError(
              "failed on purpose (OMNI_TEST_FAULT, mode=fail)");
        // A process killed from outside (the OOM killer, a node lost):
        // under mpirun, mpirun ends the job and the others say who died
        // (Interrupt.h, InterruptHandler::watchPeers).
        if (fault.mode == TestFault::Mode::Die)
          ::raise(SIGKILL);
        // A rank stuck before its collectives: the others' timeout must
        // catch it. Released once a rank has given up, so the thread ends.
        outcome.waitForFailure();
        return absl::AbortedError(
            "hung on purpose (OMNI_TEST_FAULT, mode=hang) until another rank "
            "gave up");
      };
    }
    const absl::Status own = train(program, *devices[i], mine, log);
    const absl::Status status = worldSize > 1 ? naming(rank, own) : own;
    // Record before aborting, so the root cause is recorded first.
    outcome.finish(rank, status, own);
    statuses[i] = status;
    if (!status.ok() && !absl::IsCancelled(status) && channels[i])
      channels[i]->abort(status);
  };
  if (localRanks.size() == 1) {
    runRank(0);
  } else {
    std::vector<std::thread> workers;
    for (size_t i = 0; i < localRanks.size(); ++i)
      workers.emplace_back(runRank, i);
    for (std::thread &t : workers)
      t.join();
  }
  bool hasLead =
      std::find(localRanks.begin(), localRanks.end(), 0) != localRanks.end();
  return outcome.result(hasLead, statuses[0]);
}

} // namespace omni::train
