//===- ExecutorGraphs.cpp - Loops and command runs captured into graphs ---===//
//
// With ExecutorOptions::graphs on, two kinds of regions are captured into a
// hal::Graph (Stream::beginCapture ... endCapture) the first time they run,
// and each later run of them launches the graph: one submission instead of
// one per command (and iteration):
// - a Loop whose body only enqueues device work (the rollout's denoise
//   loop, all its steps);
// - a run of at least kMinRunCommands consecutive commands of a function
//   body, of one phase, that only enqueue device work (the train phase's
//   forward, backward and optimizer update between two reads of the
//   device), from its second entry on; docs/backend.md, "Graphs".
//
// A graph fixes what the commands were given when it was captured: buffer
// ranges (Copy offsets computed from index registers included), kernel
// scalars, and the bytes of a ScalarOp ToTensor. Those all follow from the
// frame's argument buffers and the registers the region reads before it
// writes them (its own scalar arithmetic is deterministic), so a graph is
// kept per (region, arguments, values of those registers) and launched only
// when a run enters the region with the same ones; the registers the region
// writes are set from the capture. The buffers a graph names stay alive:
// the arena, constants and state live as long as the executor, and run()
// keeps its input and output buffers per function while graphs are on.
//
// A host call in flight (asynchronous rewards) is finished before the
// region when it touches its results, and goes on beside the graph when not.
//
// A loop is refused once, with the reason kept in graphStats(), when its
// body (nested loops included) has a command that needs the host in the
// middle: HostCall, ScalarOp FromTensor, Call, Collective or AxisIndex (a
// run of commands ends at such a command). A region whose capture fails
// (the stream refused a command) is refused too: it then runs command by
// command, which also reports a real error with its path.
//
//===----------------------------------------------------------------------===//

#include "runtime/executor/ExecutorImpl.h"

#include "runtime/base/Logging.h"
#include "runtime/base/Status.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include <algorithm>
#include <set>

namespace omni::executor {

using detail::sizeOf;
using flatbuffers::Offset;
using flatbuffers::Vector;

namespace {

/// At most this many graphs per region (distinct arguments or values of the
/// registers it reads at its entry); beyond, the region runs command by
/// command.
constexpr size_t kMaxGraphsPerRegion = 4;

/// A run of a function's commands shorter than this is not captured: its
/// commands cost little to submit one by one, and a graph holds memory.
constexpr uint32_t kMinRunCommands = 8;

/// Why `command` (at `at`) cannot be captured ("" if it can): it, or the
/// first command of its body, needs the host while the region runs.
std::string uncapturable(const step::Command &command, const std::string &at) {
  switch (command.kind_type()) {
  case step::CommandKind::Dispatch:
  case step::CommandKind::LibraryCall:
  case step::CommandKind::Copy:
  case step::CommandKind::Fill:
  case step::CommandKind::Random:
    return "";
  case step::CommandKind::ScalarOp:
    if (command.kind_as_ScalarOp()->kind() == step::ScalarOpKind::FromTensor)
      return at + " is a ScalarOp FromTensor (it reads the device)";
    return "";
  case step::CommandKind::Loop: {
    const Vector<Offset<step::Command>> *body = command.kind_as_Loop()->body();
    for (uint32_t i = 0; i < sizeOf(body); ++i) {
      std::string inner =
          uncapturable(*body->Get(i), absl::StrCat(at, ".body[", i, "]"));
      if (!inner.empty())
        return inner;
    }
    return "";
  }
  case step::CommandKind::HostCall:
    return at + " is a HostCall (it runs on the host)";
  case step::CommandKind::Call:
    return at + " is a Call";
  case step::CommandKind::Collective:
    return at + " is a Collective";
  case step::CommandKind::AxisIndex:
    return at + " is an AxisIndex";
  default:
    return absl::StrCat(at, " is a ", loader::commandLabel(command));
  }
}

std::string_view phaseOf(const step::Command &command) {
  return command.phase() ? command.phase()->string_view() : std::string_view();
}

/// The registers of commands [begin, end) of `body` (capturable ones: no
/// FromTensor, Call, ...) read before they surely wrote them, into `reads`,
/// and every register they may write, into `writes`; `written` holds those
/// written for sure so far. A nested loop may run no trip: its writes are
/// not sure.
void registerUse(const Vector<Offset<step::Command>> *body, uint32_t begin,
                 uint32_t end, std::set<uint32_t> &written,
                 std::set<uint32_t> &reads, std::set<uint32_t> &writes) {
  auto read = [&](int64_t r) {
    if (r >= 0 && !written.count(static_cast<uint32_t>(r)))
      reads.insert(static_cast<uint32_t>(r));
  };
  auto write = [&](uint32_t r) {
    written.insert(r);
    writes.insert(r);
  };
  for (uint32_t i = begin; i < end; ++i) {
    const step::Command &command = *body->Get(i);
    if (const step::Dispatch *d = command.kind_as_Dispatch()) {
      for (uint32_t s = 0; s < sizeOf(d->scalars()); ++s)
        read(d->scalars()->Get(s));
    } else if (const step::Copy *c = command.kind_as_Copy()) {
      read(c->source_offset_scalar());
      read(c->dest_offset_scalar());
    } else if (const step::ScalarOp *op = command.kind_as_ScalarOp()) {
      switch (op->kind()) {
      case step::ScalarOpKind::Add:
      case step::ScalarOpKind::Sub:
      case step::ScalarOpKind::Mul:
        read(op->a());
        read(op->b());
        write(op->dest());
        break;
      case step::ScalarOpKind::Const:
        write(op->dest());
        break;
      case step::ScalarOpKind::ToTensor:
        read(op->a());
        break;
      default:
        break;
      }
    } else if (const step::Loop *loop = command.kind_as_Loop()) {
      std::set<uint32_t> inner = written;
      inner.insert(loop->iv());
      writes.insert(loop->iv());
      registerUse(loop->body(), 0, sizeOf(loop->body()), inner, reads, writes);
    }
  }
}

} // namespace

bool Executor::rangeTouchesPendingHostCall(
    const Frame &frame, const Vector<Offset<step::Command>> *commands,
    uint32_t begin, uint32_t end) const {
  for (uint32_t i = begin; i < end; ++i) {
    const step::Command &command = *commands->Get(i);
    if (const step::Loop *inner = command.kind_as_Loop()) {
      if (rangeTouchesPendingHostCall(frame, inner->body(), 0,
                                      sizeOf(inner->body())))
        return true;
      continue;
    }
    for (uint32_t t : commandTensors(command))
      if (touchesPendingHostCall(resolve(frame, t)))
        return true;
  }
  return false;
}

const std::vector<std::pair<uint32_t, uint32_t>> &
Executor::commandRuns(const Vector<Offset<step::Command>> *commands) {
  auto [it, inserted] = commandRuns_.try_emplace(commands);
  std::vector<std::pair<uint32_t, uint32_t>> &runs = it->second;
  if (!inserted)
    return runs;
  const uint32_t n = sizeOf(commands);
  uint32_t begin = 0;
  auto close = [&](uint32_t end) {
    if (end >= begin + kMinRunCommands)
      runs.push_back({begin, end});
  };
  for (uint32_t i = 0; i < n; ++i) {
    const step::Command &command = *commands->Get(i);
    if (!uncapturable(command, "").empty()) {
      close(i);
      begin = i + 1;
      continue;
    }
    if (i > begin && phaseOf(command) != phaseOf(*commands->Get(begin))) {
      close(i);
      begin = i;
    }
    // A matmul's epilogue runs with it.
    if (detail::epilogueOf(commands, i))
      ++i;
  }
  close(n);
  return runs;
}

absl::StatusOr<bool> Executor::runLoopAsGraph(Frame &frame,
                                              const step::Loop &loop,
                                              const Path &path) {
  Region region{loop.body(), 0, sizeOf(loop.body()), &loop};
  return runAsGraph(frame, region, path.render() + " (Loop)",
                    [&] { return runLoopIterations(frame, loop, path); });
}

absl::StatusOr<bool> Executor::runCommandsAsGraph(
    Frame &frame, const Vector<Offset<step::Command>> *commands, uint32_t begin,
    uint32_t end, const Path &parent, const char *field) {
  Region region{commands, begin, end, nullptr};
  return runAsGraph(
      frame, region,
      absl::StrCat(parent.render(), ".", field, "[", begin, "..", end - 1, "]"),
      [&]() -> absl::Status {
        for (uint32_t i = begin; i < end; ++i) {
          Path path{&parent, field, i};
          const step::Command *epilogue = detail::epilogueOf(commands, i);
          OMNI_RETURN_IF_ERROR(
              runCommand(frame, *commands->Get(i), path, epilogue));
          if (epilogue)
            ++i;
        }
        return absl::OkStatus();
      });
}

absl::StatusOr<bool>
Executor::runAsGraph(Frame &frame, const Region &region,
                     const std::string &where,
                     absl::FunctionRef<absl::Status()> run) {
  const void *key = region.loop ? static_cast<const void *>(region.loop)
                                : region.commands->Get(region.begin);
  std::unique_ptr<RegionGraphs> &slot = regionGraphs_[key];
  if (!slot) {
    slot = std::make_unique<RegionGraphs>();
    std::set<uint32_t> written, reads, writes;
    if (region.loop) {
      for (uint32_t i = region.begin; i < region.end && slot->refused.empty();
           ++i)
        slot->refused = uncapturable(*region.commands->Get(i),
                                     absl::StrCat("body[", i, "]"));
      if (!slot->refused.empty())
        graphStats_.refused.push_back(absl::StrCat(where, ": ", slot->refused));
      written.insert(region.loop->iv());
      writes.insert(region.loop->iv());
    }
    registerUse(region.commands, region.begin, region.end, written, reads,
                writes);
    slot->reads.assign(reads.begin(), reads.end());
    slot->writes.assign(writes.begin(), writes.end());
  }
  RegionGraphs &graphs = *slot;
  // A run of commands is captured from its second entry on: a function that
  // runs once (init_state) is not worth a capture and the memory a graph
  // holds. A loop's first run already repeats its body.
  if (!graphs.refused.empty() || (!region.loop && graphs.entries++ == 0)) {
    ++graphStats_.uncaptured;
    return false;
  }
  // A host call in flight (a reward scoring the previous rollout chunk)
  // goes on while the graph runs unless the region touches its results:
  // then it is finished first, where the first such command would have
  // waited.
  if (pending_ && rangeTouchesPendingHostCall(frame, region.commands,
                                              region.begin, region.end))
    if (absl::Status waited = finishHostCall(); !waited.ok()) {
      abortChannels(waited);
      return waited;
    }
  auto values = [&](const std::vector<uint32_t> &registers) {
    std::vector<int64_t> v;
    for (uint32_t r : registers)
      v.push_back(frame.scalars[r]);
    return v;
  };
  const std::vector<int64_t> entry = values(graphs.reads);
  // A failed launch (under CUDA_LAUNCH_BLOCKING=1, a command of the graph
  // that failed) is the region's: its commands have no place of their own.
  auto launch = [&](const hal::Graph &graph) -> absl::Status {
    absl::Status launched = stream_->launchGraph(graph);
    if (launched.ok())
      return launched;
    absl::Status failed(
        launched.code(),
        absl::StrCat(program_->name(), ": ", where,
                     ", run as a graph: ", launched.message(),
                     " (--graphs off runs its commands one by one)"));
    abortChannels(failed);
    return failed;
  };
  auto matches = [&](const CapturedGraph &g) {
    return g.readValues == entry &&
           std::equal(g.args.begin(), g.args.end(), frame.args.begin(),
                      frame.args.end());
  };
  for (const CapturedGraph &g : graphs.graphs) {
    if (!matches(g))
      continue;
    // Over the budget: command by command, for the error's place.
    if (options_.commandBudget > 0 &&
        commandsRun_ + g.commands > options_.commandBudget) {
      ++graphStats_.uncaptured;
      return false;
    }
    OMNI_RETURN_IF_ERROR(launch(*g.graph));
    for (size_t k = 0; k < graphs.writes.size(); ++k)
      frame.scalars[graphs.writes[k]] = g.writeValues[k];
    commandsRun_ += g.commands;
    ++graphStats_.launches;
    return true;
  }
  if (graphs.graphs.size() >= kMaxGraphsPerRegion) {
    ++graphStats_.uncaptured;
    return false;
  }

  CapturedGraph g;
  g.args.assign(frame.args.begin(), frame.args.end());
  g.readValues = entry;
  const std::vector<int64_t> scalarsBefore = frame.scalars;
  const int64_t commandsBefore = commandsRun_;
  const TransferStats transfersBefore = transfers_;
  if (absl::Status begun = stream_->beginCapture(); !begun.ok()) {
    // A stream that cannot capture: every region runs command by command.
    graphs_ = false;
    graphStats_.refused.push_back(
        absl::StrCat("the stream cannot capture: ", begun.message()));
    ++graphStats_.uncaptured;
    return false;
  }
  capturing_ = true;
  absl::Status ran = run();
  capturing_ = false;
  absl::StatusOr<std::unique_ptr<hal::Graph>> graph = stream_->endCapture();
  if (!ran.ok() || !graph.ok()) {
    // Nothing ran: the region starts over command by command, from the same
    // registers, and never again as a graph.
    frame.scalars = scalarsBefore;
    commandsRun_ = commandsBefore;
    transfers_ = transfersBefore;
    // endCapture's error says that the capture failed itself.
    graphs.refused = ran.ok()
                         ? std::string(graph.status().message())
                         : absl::StrCat("the capture failed: ", ran.message());
    graphStats_.refused.push_back(absl::StrCat(where, ": ", graphs.refused));
    logMessage(LogLevel::Info, graphStats_.refused.back());
    ++graphStats_.uncaptured;
    return false;
  }
  g.writeValues = values(graphs.writes);
  g.commands = commandsRun_ - commandsBefore;
  g.graph = std::move(*graph);
  ++graphStats_.captures;
  logMessage(LogLevel::Info,
             absl::StrCat(where, ": captured ", g.graph->numCommands(),
                          " commands into a graph"));
  OMNI_RETURN_IF_ERROR(launch(*g.graph));
  ++graphStats_.launches;
  graphs.graphs.push_back(std::move(g));
  ++graphStats_.held;
  if (!region.loop)
    releaseLoopGraphs(region.commands, region.begin, region.end);
  return true;
}

void Executor::releaseLoopGraphs(const Vector<Offset<step::Command>> *commands,
                                 uint32_t begin, uint32_t end) {
  for (uint32_t i = begin; i < end; ++i) {
    const step::Loop *loop = commands->Get(i)->kind_as_Loop();
    if (!loop)
      continue;
    releaseLoopGraphs(loop->body(), 0, sizeOf(loop->body()));
    auto it = regionGraphs_.find(loop);
    if (it == regionGraphs_.end())
      continue;
    std::vector<CapturedGraph> &graphs = it->second->graphs;
    graphStats_.held -= static_cast<int64_t>(graphs.size());
    graphStats_.released += static_cast<int64_t>(graphs.size());
    graphs.clear();
  }
}

absl::StatusOr<std::vector<hal::BufferRef>>
Executor::runBuffers(uint32_t function,
                     std::vector<std::unique_ptr<hal::Buffer>> &owned) {
  const step::Function *fn = program_->step().functions()->Get(function);
  std::vector<hal::BufferRef> refs;
  auto kept = runBuffers_.find(function);
  if (kept != runBuffers_.end()) {
    for (const auto &buffer : kept->second)
      refs.push_back(hal::BufferRef::all(*buffer));
    return refs;
  }
  for (const Vector<uint32_t> *tensors : {fn->inputs(), fn->outputs()})
    for (uint32_t i = 0; i < sizeOf(tensors); ++i) {
      OMNI_ASSIGN_OR_RETURN(
          auto buffer,
          device_.allocate(program_->tensor(tensors->Get(i)).bytes));
      refs.push_back(hal::BufferRef::all(*buffer));
      owned.push_back(std::move(buffer));
    }
  if (graphs_)
    runBuffers_[function] = std::move(owned);
  return refs;
}

std::string describeGraphs(const GraphStats &stats) {
  std::string line =
      absl::StrCat("graphs: ", stats.captures, " captured, ", stats.launches,
                   stats.launches == 1 ? " launch" : " launches");
  if (!stats.refused.empty())
    absl::StrAppend(&line,
                    "; not captured: ", absl::StrJoin(stats.refused, "; "));
  return line;
}

} // namespace omni::executor
