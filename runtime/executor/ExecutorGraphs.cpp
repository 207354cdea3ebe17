//===- ExecutorGraphs.cpp - Loops captured into hal graphs ------*- C++ -*-===//
//
// With ExecutorOptions::graphs on, a Loop whose body only enqueues device
// work is captured into a hal::Graph (Stream::beginCapture ... endCapture)
// the first time it runs, and each later run of it launches the graph: one
// submission instead of one per command and iteration (a CUDA graph for the
// rollout's denoise loop; docs/backend.md, "Graphs").
//
// A graph fixes what the commands were given when it was captured: buffer
// ranges (Copy offsets computed from index registers included), kernel
// scalars, and the bytes of a ScalarOp ToTensor. Those all follow from the
// frame's argument buffers and the registers the body reads before it
// writes them (the body's own scalar arithmetic is deterministic), so a
// graph is kept per (loop, arguments, values of those registers) and
// launched only when a run enters the loop with the same ones; the
// registers the loop writes are set from the capture. The buffers a graph names
// stay alive: the arena, constants and state live as long as the executor, and
// run() keeps its input and output buffers per function while graphs are on.
//
// A host call in flight (asynchronous rewards) is finished before the loop
// when the body touches its results, and goes on beside the graph when not.
//
// A loop is refused once, with the reason kept in graphStats(), when its
// body (nested loops included) has a command that needs the host in the
// middle: HostCall, ScalarOp FromTensor, Call, Collective or AxisIndex; or
// when a capture fails (the stream refused a command): the loop then runs
// command by command, which also reports a real error with its path.
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

/// At most this many graphs per loop (distinct arguments or values of the
/// registers it reads at its entry); beyond, the loop runs command by
/// command.
constexpr size_t kMaxGraphsPerLoop = 4;

/// Why `body` cannot be captured ("" if it can): the first command that
/// needs the host while the loop runs.
std::string uncapturable(const Vector<Offset<step::Command>> *body,
                         const std::string &prefix) {
  for (uint32_t i = 0; i < sizeOf(body); ++i) {
    const step::Command &command = *body->Get(i);
    std::string at = absl::StrCat(prefix, "[", i, "]");
    switch (command.kind_type()) {
    case step::CommandKind::Dispatch:
    case step::CommandKind::LibraryCall:
    case step::CommandKind::Copy:
    case step::CommandKind::Fill:
    case step::CommandKind::Random:
      break;
    case step::CommandKind::ScalarOp:
      if (command.kind_as_ScalarOp()->kind() == step::ScalarOpKind::FromTensor)
        return at + " is a ScalarOp FromTensor (it reads the device)";
      break;
    case step::CommandKind::Loop: {
      std::string inner =
          uncapturable(command.kind_as_Loop()->body(), at + ".body");
      if (!inner.empty())
        return inner;
      break;
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
  return "";
}

/// The registers of `body` (a capturable one: no FromTensor, Call, ...)
/// read before the body surely wrote them, into `reads`, and every
/// register it may write, into `writes`; `written` holds those written for
/// sure so far. A nested loop may run no trip: its writes are not sure.
void registerUse(const Vector<Offset<step::Command>> *body,
                 std::set<uint32_t> &written, std::set<uint32_t> &reads,
                 std::set<uint32_t> &writes) {
  auto read = [&](int64_t r) {
    if (r >= 0 && !written.count(static_cast<uint32_t>(r)))
      reads.insert(static_cast<uint32_t>(r));
  };
  auto write = [&](uint32_t r) {
    written.insert(r);
    writes.insert(r);
  };
  for (uint32_t i = 0; i < sizeOf(body); ++i) {
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
      registerUse(loop->body(), inner, reads, writes);
    }
  }
}

} // namespace

bool Executor::bodyTouchesPendingHostCall(
    const Frame &frame, const Vector<Offset<step::Command>> *body) const {
  for (uint32_t i = 0; i < sizeOf(body); ++i) {
    const step::Command &command = *body->Get(i);
    if (const step::Loop *inner = command.kind_as_Loop()) {
      if (bodyTouchesPendingHostCall(frame, inner->body()))
        return true;
      continue;
    }
    for (uint32_t t : commandTensors(command))
      if (touchesPendingHostCall(resolve(frame, t)))
        return true;
  }
  return false;
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

absl::StatusOr<bool> Executor::runLoopAsGraph(Frame &frame,
                                              const step::Loop &loop,
                                              const Path &path) {
  std::unique_ptr<LoopGraphs> &slot = loopGraphs_[&loop];
  if (!slot) {
    slot = std::make_unique<LoopGraphs>();
    slot->refused = uncapturable(loop.body(), "body");
    if (!slot->refused.empty())
      graphStats_.refused.push_back(
          absl::StrCat(path.render(), " (Loop): ", slot->refused));
    std::set<uint32_t> written = {loop.iv()}, reads, writes = {loop.iv()};
    registerUse(loop.body(), written, reads, writes);
    slot->reads.assign(reads.begin(), reads.end());
    slot->writes.assign(writes.begin(), writes.end());
  }
  LoopGraphs &loopGraphs = *slot;
  if (!loopGraphs.refused.empty()) {
    ++graphStats_.uncaptured;
    return false;
  }
  // A host call in flight (a reward scoring the previous rollout chunk)
  // goes on while the graph runs unless the body touches its results: then
  // it is finished first, where the first such command would have waited.
  if (pending_ && bodyTouchesPendingHostCall(frame, loop.body()))
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
  const std::vector<int64_t> entry = values(loopGraphs.reads);
  auto matches = [&](const LoopGraph &g) {
    return g.readValues == entry &&
           std::equal(g.args.begin(), g.args.end(), frame.args.begin(),
                      frame.args.end());
  };
  for (const LoopGraph &g : loopGraphs.graphs) {
    if (!matches(g))
      continue;
    // Over the budget: command by command, for the error's place.
    if (options_.commandBudget > 0 &&
        commandsRun_ + g.commands > options_.commandBudget) {
      ++graphStats_.uncaptured;
      return false;
    }
    OMNI_RETURN_IF_ERROR(stream_->launchGraph(*g.graph));
    for (size_t k = 0; k < loopGraphs.writes.size(); ++k)
      frame.scalars[loopGraphs.writes[k]] = g.writeValues[k];
    commandsRun_ += g.commands;
    ++graphStats_.launches;
    return true;
  }
  if (loopGraphs.graphs.size() >= kMaxGraphsPerLoop) {
    ++graphStats_.uncaptured;
    return false;
  }

  LoopGraph g;
  g.args.assign(frame.args.begin(), frame.args.end());
  g.readValues = entry;
  const std::vector<int64_t> scalarsBefore = frame.scalars;
  const int64_t commandsBefore = commandsRun_;
  const TransferStats transfersBefore = transfers_;
  if (absl::Status begun = stream_->beginCapture(); !begun.ok()) {
    // A stream that cannot capture: every loop runs command by command.
    graphs_ = false;
    graphStats_.refused.push_back(
        absl::StrCat("the stream cannot capture: ", begun.message()));
    ++graphStats_.uncaptured;
    return false;
  }
  capturing_ = true;
  absl::Status ran = runLoopIterations(frame, loop, path);
  capturing_ = false;
  absl::StatusOr<std::unique_ptr<hal::Graph>> graph = stream_->endCapture();
  if (!ran.ok() || !graph.ok()) {
    // Nothing ran: the loop starts over command by command, from the same
    // registers, and never again as a graph.
    frame.scalars = scalarsBefore;
    commandsRun_ = commandsBefore;
    transfers_ = transfersBefore;
    // endCapture's error says that the capture failed itself.
    loopGraphs.refused =
        ran.ok() ? std::string(graph.status().message())
                 : absl::StrCat("the capture failed: ", ran.message());
    graphStats_.refused.push_back(
        absl::StrCat(path.render(), " (Loop): ", loopGraphs.refused));
    logMessage(LogLevel::Info, graphStats_.refused.back());
    ++graphStats_.uncaptured;
    return false;
  }
  g.writeValues = values(loopGraphs.writes);
  g.commands = commandsRun_ - commandsBefore;
  g.graph = std::move(*graph);
  ++graphStats_.captures;
  logMessage(LogLevel::Info,
             absl::StrCat(path.render(), " (Loop): captured ",
                          g.graph->numCommands(), " commands into a graph"));
  OMNI_RETURN_IF_ERROR(stream_->launchGraph(*g.graph));
  ++graphStats_.launches;
  loopGraphs.graphs.push_back(std::move(g));
  return true;
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
