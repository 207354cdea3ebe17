//===- Executor.cpp - Runs a step.bin's functions on a Device ---*- C++ -*-===//
//
// Preparation (executables, library and host-function support, the arena,
// constants and state), the host- and device-facing entry points, and the
// state accessors. The commands themselves run in ExecutorCommands.cpp.
//
//===----------------------------------------------------------------------===//

#include "runtime/executor/Executor.h"
#include "runtime/executor/ExecutorImpl.h"

#include "runtime/base/Logging.h"
#include "runtime/base/Status.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace omni::executor {

using detail::sizeOf;
using flatbuffers::Offset;
using flatbuffers::Vector;
using loader::TensorInfo;

namespace {

hal::ExecutableFormat toHal(step::ExecutableFormat format) {
  switch (format) {
  case step::ExecutableFormat::Ptx:
    return hal::ExecutableFormat::Ptx;
  case step::ExecutableFormat::Cubin:
    return hal::ExecutableFormat::Cubin;
  default:
    return hal::ExecutableFormat::ElfSharedObject;
  }
}

hal::Library toHal(step::Library library) {
  switch (library) {
  case step::Library::Conv2d:
    return hal::Library::Conv2d;
  case step::Library::Attention:
    return hal::Library::Attention;
  case step::Library::AttentionBackward:
    return hal::Library::AttentionBackward;
  default:
    return hal::Library::Matmul;
  }
}

} // namespace

hal::ExecutableSpec executableSpec(const step::Executable &exe,
                                   uint32_t index) {
  hal::ExecutableSpec spec;
  spec.name = exe.name() ? exe.name()->str() : absl::StrCat("#", index);
  spec.format = toHal(exe.format());
  if (exe.data())
    spec.code = absl::MakeConstSpan(exe.data()->data(), exe.data()->size());
  spec.target = exe.target() ? exe.target()->str() : "";
  for (uint32_t k = 0; k < sizeOf(exe.kernels()); ++k)
    spec.kernels.push_back(exe.kernels()->Get(k)->str());
  // GPU code: how each kernel launches (the loader checked the counts and
  // the launch shapes), and the PTX beside a cubin.
  for (uint32_t k = 0; k < sizeOf(exe.gpu_kernels()); ++k) {
    const step::GpuKernel *kernel = exe.gpu_kernels()->Get(k);
    hal::GpuKernelSpec &gk = spec.gpuKernels.emplace_back();
    for (uint32_t s = 0; s < sizeOf(kernel->scratch()); ++s)
      gk.scratch.push_back(kernel->scratch()->Get(s));
    for (uint32_t l = 0; l < sizeOf(kernel->launches()); ++l) {
      const step::GpuLaunch *launch = kernel->launches()->Get(l);
      hal::GpuLaunchSpec &gl = gk.launches.emplace_back();
      gl.entry = launch->entry() ? launch->entry()->str() : "";
      for (uint32_t d = 0; d < 3 && d < sizeOf(launch->grid()); ++d)
        gl.grid[d] = launch->grid()->Get(d);
      for (uint32_t d = 0; d < 3 && d < sizeOf(launch->block()); ++d)
        gl.block[d] = launch->block()->Get(d);
      gl.sharedBytes = launch->shared_bytes();
      for (uint32_t a = 0; a < sizeOf(launch->args()); ++a)
        gl.args.push_back(launch->args()->Get(a));
    }
  }
  if (exe.ptx())
    spec.ptx = absl::MakeConstSpan(exe.ptx()->data(), exe.ptx()->size());
  return spec;
}

Executor::Executor(std::shared_ptr<const loader::Program> program,
                   hal::Device &device, ExecutorOptions options)
    : program_(std::move(program)), device_(device),
      options_(std::move(options)) {
  hostFunctions_ = options_.hostFunctions;
}

Executor::~Executor() {
  // A run joins its host call before it returns; this is for safety only.
  abandonHostCall();
  // Buffers and executables may be in use by submitted commands.
  if (stream_)
    (void)stream_->synchronize();
}

absl::StatusOr<std::unique_ptr<Executor>>
Executor::create(std::shared_ptr<const loader::Program> program,
                 hal::Device &device, ExecutorOptions options) {
  std::unique_ptr<Executor> executor(
      new Executor(std::move(program), device, std::move(options)));
  if (absl::Status status = executor->prepare(); !status.ok()) {
    executor->abortChannels(status);
    return status;
  }
  return executor;
}

absl::Status Executor::prepare() {
  const loader::Program &p = *program_;
  const step::Step &s = p.step();
  auto fail = [&](absl::string_view path, const absl::Status &status) {
    return absl::Status(status.code(), absl::StrCat(p.name(), ": ", path, ": ",
                                                    status.message()));
  };
  if (const step::Target *target = s.target()) {
    std::string kind = target->kind() ? target->kind()->str() : "";
    if (!kind.empty() && kind != device_.driverName())
      return absl::InvalidArgumentError(
          absl::StrCat(p.name(), ": target.kind = '", kind,
                       "' but the device is ", device_.description()));
  }
  OMNI_ASSIGN_OR_RETURN(stream_, device_.createStream());
  graphs_ = options_.graphs == ExecutorOptions::Graphs::On ||
            (options_.graphs == ExecutorOptions::Graphs::Auto &&
             device_.prefersGraphs());
  OMNI_RETURN_IF_ERROR(prepareCollectives());

  for (uint32_t e = 0; e < sizeOf(s.executables()); ++e) {
    const step::Executable *exe = s.executables()->Get(e);
    hal::ExecutableSpec spec = executableSpec(*exe, e);
    std::string path = absl::StrCat("executables[", e, "]");
    if (!device_.supportsFormat(spec.format))
      return fail(path,
                  absl::InvalidArgumentError(absl::StrCat(
                      "format ", step::EnumNameExecutableFormat(exe->format()),
                      " cannot run on the ", device_.driverName(), " device")));
    absl::StatusOr<std::unique_ptr<hal::Executable>> loaded =
        device_.loadExecutable(spec);
    if (!loaded.ok())
      return fail(path, loaded.status());
    executables_.push_back(std::move(*loaded));
    logMessage(LogLevel::Info,
               absl::StrCat("loaded executable '", spec.name, "' with ",
                            spec.kernels.size(), " kernels"));
  }

  for (uint32_t f = 0; f < p.numFunctions(); ++f) {
    Path root{nullptr, "functions", f};
    OMNI_RETURN_IF_ERROR(
        prepareCommands(s.functions()->Get(f)->commands(), root));
  }

  auto allocate = [&](int64_t bytes, const std::string &what)
      -> absl::StatusOr<std::unique_ptr<hal::Buffer>> {
    absl::StatusOr<std::unique_ptr<hal::Buffer>> buffer =
        device_.allocate(bytes);
    if (!buffer.ok())
      return fail(what, buffer.status());
    return buffer;
  };
  OMNI_ASSIGN_OR_RETURN(arena_, allocate(p.arenaSize(), "arena_size"));
  for (uint32_t c = 0; c < sizeOf(s.constants()); ++c) {
    const step::Constant *constant = s.constants()->Get(c);
    const Vector<uint8_t> *data = constant->data();
    // The loader checked repeat >= 1 and data * repeat against the tensor.
    int64_t bytes = sizeOf(data) * constant->repeat();
    OMNI_ASSIGN_OR_RETURN(auto buffer,
                          allocate(bytes, absl::StrCat("constants[", c, "]")));
    if (bytes && constant->repeat() == 1)
      OMNI_RETURN_IF_ERROR(
          toDevice(data->data(), hal::BufferRef::all(*buffer)));
    else if (bytes)
      OMNI_RETURN_IF_ERROR(
          stream_->fill(hal::BufferRef::all(*buffer),
                        absl::MakeConstSpan(data->data(), sizeOf(data))));
    constants_.push_back(std::move(buffer));
  }
  for (size_t i = 0; i < p.state().size(); ++i) {
    OMNI_ASSIGN_OR_RETURN(
        auto buffer,
        allocate(p.state()[i].bytes, absl::StrCat("state[", i, "]")));
    state_.push_back(std::move(buffer));
  }
  peakDeviceBytes_ = device_.bytesInUse();
  return stream_->synchronize();
}

absl::Status
Executor::prepareCommands(const Vector<Offset<step::Command>> *commands,
                          const Path &parent) {
  const loader::Program &p = *program_;
  for (uint32_t i = 0; i < sizeOf(commands); ++i) {
    const step::Command *command = commands->Get(i);
    Path path{&parent, parent.parent ? "body" : "commands", i};
    std::string where = absl::StrCat(p.name(), ": ", path.render(), " (",
                                     loader::commandLabel(*command), ")");
    switch (command->kind_type()) {
    case step::CommandKind::LibraryCall: {
      const step::LibraryCall *c = command->kind_as_LibraryCall();
      DType dtype = p.tensor(c->results()->Get(0)).dtype;
      if (!device_.supportsLibrary(toHal(c->library()), dtype))
        return absl::UnimplementedError(absl::StrCat(
            where, ": the ", device_.driverName(), " device has no ",
            step::EnumNameLibrary(c->library()), " for ", dtypeName(dtype)));
      break;
    }
    case step::CommandKind::HostCall: {
      std::string name = command->kind_as_HostCall()->name()->str();
      if (!hostFunctions_.lookup(name))
        return absl::NotFoundError(absl::StrCat(
            where, ": unknown host function '", name, "' (registered: ",
            hostFunctions_.names().empty()
                ? "none"
                : absl::StrJoin(hostFunctions_.names(), ", "),
            ")"));
      break;
    }
    case step::CommandKind::Loop:
      OMNI_RETURN_IF_ERROR(
          prepareCommands(command->kind_as_Loop()->body(), path));
      break;
    default:
      break;
    }
  }
  return absl::OkStatus();
}

//===----------------------------------------------------------------------===//
// Host-facing entry points
//===----------------------------------------------------------------------===//

absl::StatusOr<std::vector<TypedTensor>>
Executor::run(absl::string_view function,
              absl::Span<const TypedTensor> inputs) {
  std::optional<uint32_t> index = program_->findFunction(function);
  if (!index) {
    std::vector<std::string> names;
    for (uint32_t f = 0; f < program_->numFunctions(); ++f)
      names.push_back(program_->step().functions()->Get(f)->name()->str());
    return absl::NotFoundError(
        absl::StrCat(program_->name(), " has no function '", function,
                     "' (functions: ", absl::StrJoin(names, ", "), ")"));
  }
  return run(*index, inputs);
}

absl::StatusOr<std::vector<TypedTensor>>
Executor::run(uint32_t function, absl::Span<const TypedTensor> inputs) {
  if (function >= program_->numFunctions())
    return absl::InvalidArgumentError(
        absl::StrCat("function index ", function, " but ", program_->name(),
                     " has ", program_->numFunctions(), " functions"));
  const step::Function *fn = program_->step().functions()->Get(function);
  const std::string name = fn->name()->str();
  const uint32_t numInputs = sizeOf(fn->inputs());
  const uint32_t numOutputs = sizeOf(fn->outputs());
  if (inputs.size() != numInputs)
    return absl::InvalidArgumentError(
        absl::StrCat("@", name, " takes ", numInputs, " inputs but ",
                     inputs.size(), " were given"));
  for (uint32_t i = 0; i < numInputs; ++i) {
    const TensorInfo &info = program_->tensor(fn->inputs()->Get(i));
    const TypedTensor &input = inputs[i];
    if (input.dtype() != info.dtype || input.shape() != info.shape)
      return absl::InvalidArgumentError(
          absl::StrCat("input ", i, " of @", name, " is ", info.typeString(),
                       " but the argument is ",
                       loader::tensorTypeString(input.dtype(), input.shape())));
  }
  std::vector<std::unique_ptr<hal::Buffer>> buffers;
  OMNI_ASSIGN_OR_RETURN(std::vector<hal::BufferRef> refs,
                        runBuffers(function, buffers));
  for (uint32_t i = 0; i < numInputs; ++i)
    OMNI_RETURN_IF_ERROR(toDevice(inputs[i].bytes().data(), refs[i]));
  notePeakDeviceBytes();
  commandsRun_ = 0;
  OMNI_RETURN_IF_ERROR(runTopLevel(function, refs));

  std::vector<TypedTensor> results;
  for (uint32_t k = 0; k < numOutputs; ++k) {
    const TensorInfo &info = program_->tensor(fn->outputs()->Get(k));
    results.emplace_back(info.dtype, info.shape);
    OMNI_RETURN_IF_ERROR(
        toHost(refs[numInputs + k], results.back().bytes().data()));
  }
  OMNI_RETURN_IF_ERROR(stream_->synchronize());
  return results;
}

absl::Status Executor::runOnDevice(uint32_t function,
                                   absl::Span<const hal::BufferRef> inputs,
                                   absl::Span<const hal::BufferRef> results) {
  if (function >= program_->numFunctions())
    return absl::InvalidArgumentError(
        absl::StrCat("function index ", function, " but ", program_->name(),
                     " has ", program_->numFunctions(), " functions"));
  const step::Function *fn = program_->step().functions()->Get(function);
  const std::string name = fn->name()->str();
  if (inputs.size() != sizeOf(fn->inputs()) ||
      results.size() != sizeOf(fn->outputs()))
    return absl::InvalidArgumentError(
        absl::StrCat("@", name, " takes ", sizeOf(fn->inputs()), " inputs and ",
                     sizeOf(fn->outputs()), " results but ", inputs.size(),
                     " and ", results.size(), " buffers were given"));
  std::vector<hal::BufferRef> args(inputs.begin(), inputs.end());
  args.insert(args.end(), results.begin(), results.end());
  for (size_t i = 0; i < args.size(); ++i) {
    bool isInput = i < inputs.size();
    uint32_t t =
        isInput ? fn->inputs()->Get(static_cast<uint32_t>(i))
                : fn->outputs()->Get(static_cast<uint32_t>(i - inputs.size()));
    const TensorInfo &info = program_->tensor(t);
    if (!args[i].buffer || args[i].length != info.bytes)
      return absl::InvalidArgumentError(absl::StrCat(
          isInput ? "input " : "result ", isInput ? i : i - inputs.size(),
          " of @", name, " is ", info.typeString(), " (", info.bytes,
          " bytes) but the buffer has ", args[i].buffer ? args[i].length : 0,
          " bytes"));
  }
  notePeakDeviceBytes();
  commandsRun_ = 0;
  return runTopLevel(function, args);
}

absl::Status Executor::runTopLevel(uint32_t function,
                                   absl::Span<const hal::BufferRef> args) {
  absl::Status status = runFunction(function, args, nullptr);
  if (!status.ok()) {
    // The failed command's error is the run's; a pending host call is
    // joined so that nothing runs after the run returns.
    abandonHostCall();
    return status;
  }
  // The end of the run waits for the host call still in flight.
  if (absl::Status waited = finishHostCall(); !waited.ok()) {
    abortChannels(waited);
    return waited;
  }
  return absl::OkStatus();
}

//===----------------------------------------------------------------------===//
// Transfers and memory
//===----------------------------------------------------------------------===//

absl::Status Executor::toDevice(const void *host, hal::BufferRef dst) {
  OMNI_RETURN_IF_ERROR(stream_->writeBuffer(host, dst));
  transfers_.hostToDevice += dst.length;
  return absl::OkStatus();
}

absl::Status Executor::toHost(hal::BufferRef src, void *host) {
  OMNI_RETURN_IF_ERROR(stream_->readBuffer(src, host));
  transfers_.deviceToHost += src.length;
  return absl::OkStatus();
}

void Executor::notePeakDeviceBytes() {
  int64_t now = device_.bytesInUse();
  if (now >= 0)
    peakDeviceBytes_ = std::max(peakDeviceBytes_, now);
}

int64_t Executor::takePeakDeviceBytes() {
  int64_t peak = peakDeviceBytes_;
  peakDeviceBytes_ = device_.bytesInUse();
  return std::max(peak, peakDeviceBytes_);
}

//===----------------------------------------------------------------------===//
// State
//===----------------------------------------------------------------------===//

std::vector<std::string> Executor::stateNames() const {
  std::vector<std::string> names;
  for (const loader::StateInfo &slot : program_->state())
    names.push_back(slot.name);
  return names;
}

absl::StatusOr<uint32_t> Executor::stateIndex(absl::string_view name) const {
  std::optional<uint32_t> index = program_->findState(name);
  if (!index)
    return absl::NotFoundError(
        absl::StrCat(program_->name(), " has no state slot '", name,
                     "' (slots: ", absl::StrJoin(stateNames(), ", "), ")"));
  return *index;
}

absl::StatusOr<const loader::StateInfo *>
Executor::stateInfo(absl::string_view name) const {
  OMNI_ASSIGN_OR_RETURN(uint32_t index, stateIndex(name));
  return &program_->state()[index];
}

absl::StatusOr<TypedTensor> Executor::getState(absl::string_view name) {
  OMNI_ASSIGN_OR_RETURN(uint32_t index, stateIndex(name));
  const loader::StateInfo &slot = program_->state()[index];
  TypedTensor value(slot.dtype, slot.shape);
  OMNI_RETURN_IF_ERROR(
      toHost(hal::BufferRef::all(*state_[index]), value.bytes().data()));
  OMNI_RETURN_IF_ERROR(stream_->synchronize());
  return value;
}

absl::Status Executor::setState(absl::string_view name,
                                const TypedTensor &value) {
  OMNI_ASSIGN_OR_RETURN(uint32_t index, stateIndex(name));
  const loader::StateInfo &slot = program_->state()[index];
  if (value.dtype() != slot.dtype || value.shape() != slot.shape)
    return absl::InvalidArgumentError(absl::StrCat(
        "state slot '", name, "' is ",
        loader::tensorTypeString(slot.dtype, slot.shape), " but the value is ",
        loader::tensorTypeString(value.dtype(), value.shape())));
  OMNI_RETURN_IF_ERROR(
      toDevice(value.bytes().data(), hal::BufferRef::all(*state_[index])));
  return stream_->synchronize();
}

absl::StatusOr<hal::BufferRef>
Executor::stateBuffer(absl::string_view name) const {
  OMNI_ASSIGN_OR_RETURN(uint32_t index, stateIndex(name));
  return hal::BufferRef::all(*state_[index]);
}

absl::StatusOr<std::vector<HostTensor>>
runHostTensors(Executor &executor, absl::string_view function,
               absl::Span<const HostTensor> inputs) {
  OMNI_ASSIGN_OR_RETURN(std::vector<TypedTensor> results,
                        executor.run(function, toTyped(inputs)));
  return toHost(results);
}

} // namespace omni::executor
