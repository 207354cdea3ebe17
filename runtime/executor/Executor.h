//===- Executor.h - Runs a step.bin's functions on a Device -----*- C++ -*-===//
//
// The executor is the interpreter of step.bin command lists (docs/backend.md,
// "Execution model"). create() prepares everything a run needs, once: it
// loads every executable on the device (resolving every kernel), checks that
// the device supports every library call's dtype and knows every host
// function, allocates the arena (one buffer for all transients of the
// program), uploads the constants and allocates the state slots (zero-filled
// until the training driver sets them). A run then only submits commands:
// Dispatch, LibraryCall, Copy (with offsets scaled by index registers,
// range-checked when they are computed), Fill, Random, HostCall, ScalarOp,
// Loop, Call, Collective (on ExecutorOptions.channel) and AxisIndex (this
// rank's group rank, from the channel's rank), on one hal::Stream.
//
// A HostCall of a function its registry marks concurrent runs
// asynchronously (docs/backend.md, "Asynchronous host calls"): the copies of
// its operands to the host are submitted at the call (in stream order, not
// waited for), the function runs on a worker thread once they are done,
// and the executor goes on with the next commands; it waits for the call,
// and writes its results to the device, at the first command whose buffers
// overlap the results' byte ranges, at the next concurrent HostCall (one is
// in flight at a time), or at the end of the run. Errors of the call
// surface there with the HostCall's own place.
//
// Every function invocation (the top-level run and each Call) has its own
// index register file (all of the program's scalars, zero at entry) and
// binds its Argument tensors to the caller's buffers: the function's inputs
// then its outputs' result buffers. When a function returns, each output
// tensor that is not already its result buffer is copied into it.
//
// Errors name the command: "functions[0].commands[2].body[1] (Copy): ...".
//
// Host tensors are TypedTensors (the dtype's own bytes), so a host<->device
// move is one copy. Every such move goes through toDevice/toHost, which
// count the bytes (transfers(): run inputs and outputs, HostCall operands
// and results, scalar reads and writes, state access, constants); the
// training driver reports them per iteration (omnirun --stats).
//
// Ownership: the executor shares the Program (shared_ptr) and owns its
// buffers, executables, stream and the worker thread of a pending host call
// (joined before a run returns); the Device must outlive it. Thread
// safety: one call at a time (runs, state access); distinct executors may
// run concurrently on one device.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_EXECUTOR_EXECUTOR_H
#define OMNI_RUNTIME_EXECUTOR_EXECUTOR_H

#include "runtime/hal/Device.h"
#include "runtime/hal/Executable.h"
#include "runtime/hal/Library.h"
#include "runtime/hostfn/HostFunctions.h"
#include "runtime/io/HostTensor.h"
#include "runtime/io/TypedTensor.h"
#include "runtime/loader/Program.h"

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace omni::executor {

class Profile;

struct ExecutorOptions {
  /// Host functions HostCall may name. Empty by default: the caller
  /// registers what its programs call (rewards::registerRewards for the
  /// rewards); the executor knows no function itself.
  HostFunctionRegistry hostFunctions;
  /// Fail a run with ResourceExhausted after this many commands (Loop
  /// iterations count their body's commands); 0 means no limit. Lets tools
  /// and fuzzers bound a run of an untrusted file.
  int64_t commandBudget = 0;
  /// This rank's channel, for programs with Collective commands (not
  /// owned; it must outlive the executor). Its size must be the rank count
  /// of every mesh the collectives use. create() splits it into the
  /// sub-groups the collectives' mesh axes form, which is collective: every
  /// rank creates its executor for the same program at the same time. A
  /// failed command, or a failed create(), aborts the channel so that no
  /// other rank waits for this one. Null: the program must have none.
  hal::Channel *channel = nullptr;
  /// Run the HostCalls of concurrent host functions asynchronously (see the
  /// file comment); false runs every HostCall where it stands.
  bool asyncHostCalls = true;
  /// Graph capture (docs/backend.md, "Graphs"): a Loop whose body only
  /// enqueues device work, and a run of at least 8 such commands of a
  /// function body, is captured into a hal::Graph the first time it runs
  /// and replayed as one submission afterwards. Auto: where the device
  /// prefers graphs (hal::Device::prefersGraphs, the cuda driver); On:
  /// wherever the stream can capture (the cpu driver too, for tests); Off:
  /// never.
  enum class Graphs { Auto, On, Off };
  Graphs graphs = Graphs::Auto;
};

/// What graph capture did since the executor was created.
struct GraphStats {
  /// Graphs captured, and graph launches (each capture is launched too).
  int64_t captures = 0;
  int64_t launches = 0;
  /// Loops and runs of commands run command by command although capture is
  /// on: refused ones, those over the budget, those over the limit of
  /// graphs per region.
  int64_t uncaptured = 0;
  /// Graphs held now (each holds device memory on a GPU), and graphs of
  /// loops dropped because a run of commands holding the loop was captured
  /// (the run's graph replays the loop; the loop's own would go unused).
  int64_t held = 0;
  int64_t released = 0;
  /// One line per loop or run that is never captured, with the reason:
  /// "functions[2].commands[363] (Loop): body[5] is a ScalarOp FromTensor
  /// (it reads the device)".
  std::vector<std::string> refused;
};

/// Bytes moved between the host and the device by an executor since it was
/// created (preparation included).
struct TransferStats {
  int64_t hostToDevice = 0;
  int64_t deviceToHost = 0;
};

/// What a device needs to load executable `index` of a step.bin: its code,
/// kernels and, for GPU code, each kernel's launches (the views point into
/// `exe`).
hal::ExecutableSpec executableSpec(const step::Executable &exe, uint32_t index);

/// The shapes of Matmul library call `c` of `program` (checked by the
/// loader).
hal::MatmulParams matmulParams(const loader::Program &program,
                               const step::LibraryCall &c);

class Executor {
public:
  static absl::StatusOr<std::unique_ptr<Executor>>
  create(std::shared_ptr<const loader::Program> program, hal::Device &device,
         ExecutorOptions options = {});
  ~Executor();

  const loader::Program &program() const { return *program_; }
  hal::Device &device() const { return device_; }
  hal::Stream &stream() const { return *stream_; }

  /// Runs `function` on host tensors: checks their number, dtypes and
  /// shapes against the function's inputs (InvalidArgument, one line),
  /// copies them to the device, runs, and returns the outputs. State slots
  /// the function reads or writes stay on the device.
  absl::StatusOr<std::vector<TypedTensor>>
  run(absl::string_view function, absl::Span<const TypedTensor> inputs);
  absl::StatusOr<std::vector<TypedTensor>>
  run(uint32_t function, absl::Span<const TypedTensor> inputs);

  /// Runs `function` on device buffers without host copies: `inputs[i]`
  /// and `results[k]` must be exactly as large as the function's input i
  /// and output k. Results are complete when the stream is synchronized.
  absl::Status runOnDevice(uint32_t function,
                           absl::Span<const hal::BufferRef> inputs,
                           absl::Span<const hal::BufferRef> results);

  /// Seconds spent in each phase (step.fbs Command.phase; "" for commands
  /// without one) by the top-level commands of the runs since the last
  /// call, in order of first appearance; the stream is synchronized where
  /// the phase of consecutive top-level commands changes (a phase's time
  /// runs from its first command's submission to that synchronization).
  void setPhaseTiming(bool enabled) { timePhases_ = enabled; }
  std::vector<std::pair<std::string, double>> takePhaseTimes();

  /// Times every command of the runs from now on into `profile` (not
  /// owned; null stops), synchronizing the stream after each (Profile.h,
  /// omnirun --profile). With phase timing on, the profile also sums each
  /// phase's top-level seconds.
  void setProfile(Profile *profile) { profile_ = profile; }

  /// Whether this executor captures loops (ExecutorOptions::graphs), and
  /// what that did so far.
  bool graphsEnabled() const { return graphs_; }
  const GraphStats &graphStats() const { return graphStats_; }

  /// Host<->device bytes so far (see the file comment).
  TransferStats transfers() const { return transfers_; }
  /// The most device memory in use (hal::Device::bytesInUse, sampled when
  /// a run has allocated its buffers) since the last call, then restarts
  /// from the memory in use now; -1 when the device does not count.
  int64_t takePeakDeviceBytes();

  //===--- Persistent state (parameters, optimizer state) ----------------===//

  /// The state slots' names, in step.bin order.
  std::vector<std::string> stateNames() const;
  /// The slot's type as step.bin declares it.
  absl::StatusOr<const loader::StateInfo *>
  stateInfo(absl::string_view name) const;
  absl::StatusOr<TypedTensor> getState(absl::string_view name);
  /// `value` must have the slot's dtype and shape.
  absl::Status setState(absl::string_view name, const TypedTensor &value);
  /// The slot's device buffer, for drivers that move state without the host.
  absl::StatusOr<hal::BufferRef> stateBuffer(absl::string_view name) const;

private:
  struct Frame;
  struct Path;
  struct PendingHostCall;
  Executor(std::shared_ptr<const loader::Program> program, hal::Device &device,
           ExecutorOptions options);

  absl::Status prepare();
  absl::Status prepareCommands(
      const flatbuffers::Vector<flatbuffers::Offset<step::Command>> *commands,
      const Path &parent);
  absl::StatusOr<uint32_t> stateIndex(absl::string_view name) const;

  /// runFunction for a run's entry, then the wait for its host call.
  absl::Status runTopLevel(uint32_t function,
                           absl::Span<const hal::BufferRef> args);
  absl::Status runFunction(uint32_t function,
                           absl::Span<const hal::BufferRef> args,
                           const Path *caller);
  absl::Status runCommands(
      Frame &frame,
      const flatbuffers::Vector<flatbuffers::Offset<step::Command>> *commands,
      const Path &parent, const char *field, bool timePhases = false);
  /// `epilogue`: the Dispatch command after a LibraryCall marked epilogue
  /// (step.fbs), run with it (null: none).
  absl::Status runCommand(Frame &frame, const step::Command &command,
                          const Path &path,
                          const step::Command *epilogue = nullptr);
  /// runCommand for a leaf command, timed into profile_ (Profile.cpp); a
  /// matmul and its epilogue are one row. The stream is synchronized after
  /// the command, so an asynchronous failure is named by its command.
  absl::Status runProfiled(Frame &frame, const step::Command &command,
                           const Path &path,
                           const step::Command *epilogue = nullptr);
  /// A Dispatch's buffers (operands, then results) and index registers.
  void dispatchArgs(const Frame &frame, const step::Dispatch &d,
                    std::vector<hal::BufferRef> &buffers,
                    std::vector<int64_t> &scalars) const;
  absl::Status runDispatch(Frame &frame, const step::Dispatch &d);
  absl::Status runLibraryCall(Frame &frame, const step::LibraryCall &c,
                              const step::Dispatch *epilogue = nullptr);
  absl::Status runCopy(Frame &frame, const step::Copy &c);
  absl::Status runRandom(Frame &frame, const step::Random &r);
  absl::Status runHostCall(Frame &frame, const step::Command &command,
                           const Path &path);
  /// Checks and writes a host function's results to their buffers.
  absl::Status writeHostResults(const step::HostCall &h,
                                std::vector<HostTensor> &values,
                                absl::Span<const hal::BufferRef> buffers);
  /// Every tensor a leaf command reads or writes (none for Loop and Call).
  static std::vector<uint32_t> commandTensors(const step::Command &command);
  /// Waits for the pending host call if `command` touches its results or
  /// is a concurrent HostCall itself.
  absl::Status waitForHostCallBefore(const Frame &frame,
                                     const step::Command &command);
  /// Whether `ref` overlaps a result buffer of the pending host call.
  bool touchesPendingHostCall(const hal::BufferRef &ref) const;
  /// Joins the pending host call (if any) and writes its results; its
  /// error carries the HostCall's place.
  absl::Status finishHostCall();
  /// Joins the pending host call (if any) and drops its results (a run
  /// that failed).
  void abandonHostCall();
  /// "step.bin: functions[0].commands[2] (HostCall, loc) called from ...",
  /// the prefix of a command's errors.
  std::string describeCommand(const Frame &frame, const step::Command &command,
                              const Path &path) const;
  absl::Status runScalarOp(Frame &frame, const step::ScalarOp &op);
  absl::Status runLoop(Frame &frame, const step::Loop &loop, const Path &path);
  /// The iterations of `loop`, command by command.
  absl::Status runLoopIterations(Frame &frame, const step::Loop &loop,
                                 const Path &path);
  // Graphs (ExecutorGraphs.cpp).
  struct Region;
  struct CapturedGraph;
  struct RegionGraphs;
  /// Runs `loop` by launching its graph, capturing it first if this frame
  /// has none yet; false when it must run command by command instead.
  absl::StatusOr<bool> runLoopAsGraph(Frame &frame, const step::Loop &loop,
                                      const Path &path);
  /// The same for commands [begin, end) of a function body (one of
  /// commandRuns()).
  absl::StatusOr<bool> runCommandsAsGraph(
      Frame &frame,
      const flatbuffers::Vector<flatbuffers::Offset<step::Command>> *commands,
      uint32_t begin, uint32_t end, const Path &parent, const char *field);
  /// Drops the graphs of the loops in [begin, end) of `commands` (nested
  /// loops included): a graph of the run replays them now.
  void releaseLoopGraphs(
      const flatbuffers::Vector<flatbuffers::Offset<step::Command>> *commands,
      uint32_t begin, uint32_t end);
  /// Both: `run` runs the region command by command (to capture it);
  /// `where` names it in messages.
  absl::StatusOr<bool> runAsGraph(Frame &frame, const Region &region,
                                  const std::string &where,
                                  absl::FunctionRef<absl::Status()> run);
  /// The runs of a function body's commands that are captured: each
  /// [begin, end) at least kMinRunCommands long, of one phase, every
  /// command capturable (computed once per body).
  const std::vector<std::pair<uint32_t, uint32_t>> &commandRuns(
      const flatbuffers::Vector<flatbuffers::Offset<step::Command>> *commands);
  /// Whether a command in [begin, end) of `commands` (nested loops
  /// included) touches the pending host call's results.
  bool rangeTouchesPendingHostCall(
      const Frame &frame,
      const flatbuffers::Vector<flatbuffers::Offset<step::Command>> *commands,
      uint32_t begin, uint32_t end) const;
  /// The input and output buffers of run(function): reused from the last
  /// run of the function when graphs are on, since a graph names buffers.
  absl::StatusOr<std::vector<hal::BufferRef>>
  runBuffers(uint32_t function,
             std::vector<std::unique_ptr<hal::Buffer>> &owned);
  absl::Status runCall(Frame &frame, const step::Call &call, const Path &path);
  // Collectives (ExecutorCommands.cpp).
  absl::Status prepareCollectives();
  absl::Status runCollective(Frame &frame, const step::Collective &c);
  absl::Status runAxisIndex(Frame &frame, const step::AxisIndex &a);
  void abortChannels(const absl::Status &reason);

  hal::BufferRef resolve(const Frame &frame, uint32_t tensor) const;
  absl::StatusOr<HostTensor> readTensor(const Frame &frame, uint32_t tensor);
  /// The only host<->device copies of the executor; they count transfers_.
  absl::Status toDevice(const void *host, hal::BufferRef dst);
  absl::Status toHost(hal::BufferRef src, void *host);
  void notePeakDeviceBytes();

  std::shared_ptr<const loader::Program> program_;
  hal::Device &device_;
  ExecutorOptions options_;
  HostFunctionRegistry hostFunctions_;
  std::unique_ptr<hal::Stream> stream_;
  std::unique_ptr<hal::Buffer> arena_;
  std::vector<std::unique_ptr<hal::Buffer>> constants_;
  std::vector<std::unique_ptr<hal::Buffer>> state_;
  bool timePhases_ = false;
  std::vector<std::pair<std::string, double>> phaseTimes_;
  Profile *profile_ = nullptr;
  /// The phase the profiled commands belong to (the innermost enclosing
  /// command's with one).
  std::string profilePhase_;
  std::vector<std::unique_ptr<hal::Executable>> executables_;
  int64_t commandsRun_ = 0;
  /// The channel of each Collective command (options_.channel or one of
  /// subChannels_), and staging for gathers and scatters along an inner
  /// dimension.
  std::unordered_map<const step::Collective *, hal::Channel *>
      collectiveChannels_;
  std::vector<std::unique_ptr<hal::Channel>> subChannels_;
  std::unique_ptr<hal::Buffer> collectiveScratch_;
  /// The value of each AxisIndex command on this rank (prepareCollectives).
  std::unordered_map<const step::AxisIndex *, int64_t> axisIndices_;
  TransferStats transfers_;
  int64_t peakDeviceBytes_ = -1;
  /// The asynchronous host call in flight, or null.
  std::unique_ptr<PendingHostCall> pending_;
  bool graphs_ = false;
  /// True while a loop is being captured.
  bool capturing_ = false;
  GraphStats graphStats_;
  /// run()'s buffers per function, kept when graphs are on.
  std::unordered_map<uint32_t, std::vector<std::unique_ptr<hal::Buffer>>>
      runBuffers_;
  /// commandRuns() of each function body seen with graphs on.
  std::unordered_map<
      const flatbuffers::Vector<flatbuffers::Offset<step::Command>> *,
      std::vector<std::pair<uint32_t, uint32_t>>>
      commandRuns_;
  /// The graphs of each captured region, by its Loop or its first Command.
  /// Last: destroyed before the buffers and executables their commands
  /// name.
  std::unordered_map<const void *, std::unique_ptr<RegionGraphs>> regionGraphs_;
};

/// One line for logs: "graphs: 1 captured, 3 launches; not captured:
/// functions[2].commands[363] (Loop): body[5] is a ScalarOp FromTensor
/// (it reads the device)".
std::string describeGraphs(const GraphStats &stats);

/// Executor::run for callers that speak HostTensor (omnirun --function,
/// the differential tests against the reference evaluator): converts the
/// inputs and the results.
absl::StatusOr<std::vector<HostTensor>>
runHostTensors(Executor &executor, absl::string_view function,
               absl::Span<const HostTensor> inputs);

} // namespace omni::executor

#endif // OMNI_RUNTIME_EXECUTOR_EXECUTOR_H
