//===- ExecutorCommands.cpp - Running the commands --------------*- C++ -*-===//
//
// The interpreter loop of the executor: resolving tensor slots to buffer
// ranges in a frame, and one function per command kind. The loader has
// checked every index, size and static range, so these index the file's
// vectors directly; what they still check is what only exists at run time:
// offsets computed from index registers, the command budget, and host
// functions' results. Errors of leaf commands gain the command's path;
// Loop and Call pass their bodies' errors through.
//
//===----------------------------------------------------------------------===//

#include "runtime/executor/ExecutorImpl.h"
#include "runtime/executor/Profile.h"

#include "runtime/base/Logging.h"
#include "runtime/base/Status.h"
#include "runtime/executor/TensorBytes.h"

#include "absl/strings/str_cat.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>
#include <utility>

namespace omni::executor {

using detail::epilogueOf;
using detail::int128String;
using detail::sizeOf;
using flatbuffers::Offset;
using flatbuffers::Vector;
using loader::TensorInfo;

hal::BufferRef Executor::resolve(const Frame &frame, uint32_t tensor) const {
  const TensorInfo &info = program_->tensor(tensor);
  switch (info.storage) {
  case step::Storage::Argument: {
    const hal::BufferRef &arg = frame.args[static_cast<size_t>(info.index)];
    return hal::BufferRef{arg.buffer, arg.offset, info.bytes};
  }
  case step::Storage::Constant:
    return hal::BufferRef{constants_[static_cast<size_t>(info.index)].get(), 0,
                          info.bytes};
  case step::Storage::State:
    return hal::BufferRef{state_[static_cast<size_t>(info.index)].get(), 0,
                          info.bytes};
  default:
    return hal::BufferRef{arena_.get(), info.index, info.bytes};
  }
}

absl::StatusOr<HostTensor> Executor::readTensor(const Frame &frame,
                                                uint32_t tensor) {
  const TensorInfo &info = program_->tensor(tensor);
  std::vector<uint8_t> bytes(static_cast<size_t>(info.bytes));
  OMNI_RETURN_IF_ERROR(toHost(resolve(frame, tensor), bytes.data()));
  OMNI_RETURN_IF_ERROR(stream_->synchronize());
  return unpackTensor(info.dtype, info.shape, bytes);
}

absl::Status Executor::runFunction(uint32_t function,
                                   absl::Span<const hal::BufferRef> args,
                                   const Path *caller) {
  const step::Function *fn = program_->step().functions()->Get(function);
  Frame frame{function, args, std::vector<int64_t>(program_->numScalars(), 0),
              caller};
  Path root{nullptr, "functions", function};
  OMNI_RETURN_IF_ERROR(runCommands(frame, fn->commands(), root, "commands",
                                   /*timePhases=*/timePhases_ && !caller));
  const uint32_t numInputs = sizeOf(fn->inputs());
  for (uint32_t k = 0; k < sizeOf(fn->outputs()); ++k) {
    hal::BufferRef src = resolve(frame, fn->outputs()->Get(k));
    const hal::BufferRef &dst = args[numInputs + k];
    if (src == dst)
      continue;
    if (touchesPendingHostCall(src) || touchesPendingHostCall(dst))
      if (absl::Status waited = finishHostCall(); !waited.ok()) {
        abortChannels(waited);
        return waited;
      }
    auto begin = std::chrono::steady_clock::now();
    OMNI_RETURN_IF_ERROR(stream_->copy(src, dst));
    // A called function's copies are in its Call's phase; the top-level
    // run's are outside every phase's time, so not in the profile.
    if (profile_ && caller) {
      OMNI_RETURN_IF_ERROR(stream_->synchronize());
      profile_->add(profilePhase_, "copy", "function outputs", "",
                    std::chrono::duration<double>(
                        std::chrono::steady_clock::now() - begin)
                        .count(),
                    2 * src.length, 0);
    }
  }
  return absl::OkStatus();
}

std::vector<std::pair<std::string, double>> Executor::takePhaseTimes() {
  return std::exchange(phaseTimes_, {});
}

absl::Status
Executor::runCommands(Frame &frame,
                      const Vector<Offset<step::Command>> *commands,
                      const Path &parent, const char *field, bool timePhases) {
  // Phase times: the stream is synchronized where the phase changes and at
  // the end, not after every command, so that a GPU's queue stays full
  // within a phase. A phase's time runs from the submission of its first
  // command to the synchronization that ends it (on the cpu, whose commands
  // run as they are submitted, the same as timing each command).
  std::optional<std::string> open;
  std::chrono::steady_clock::time_point opened;
  auto closePhase = [&]() -> absl::Status {
    if (!open)
      return absl::OkStatus();
    OMNI_RETURN_IF_ERROR(stream_->synchronize());
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - opened)
            .count();
    auto it = std::find_if(phaseTimes_.begin(), phaseTimes_.end(),
                           [&](const auto &p) { return p.first == *open; });
    if (it == phaseTimes_.end())
      phaseTimes_.push_back({*open, seconds});
    else
      it->second += seconds;
    if (profile_)
      profile_->addPhase(*open, seconds);
    open.reset();
    return absl::OkStatus();
  };
  // Runs of a function body's commands that are captured as graphs.
  const std::vector<std::pair<uint32_t, uint32_t>> *runs =
      graphs_ && !capturing_ && !profile_ &&
              std::string_view(field) == "commands"
          ? &commandRuns(commands)
          : nullptr;
  size_t nextRun = 0;
  for (uint32_t i = 0; i < sizeOf(commands); ++i) {
    Path path{&parent, field, i};
    const step::Command &command = *commands->Get(i);
    const uint32_t first = i;
    // A matmul's epilogue runs with it.
    const step::Command *epilogue = epilogueOf(commands, i);
    if (epilogue)
      ++i;
    if (timePhases) {
      std::string phase = command.phase() ? command.phase()->str() : "";
      if (open && *open != phase)
        OMNI_RETURN_IF_ERROR(closePhase());
      if (!open) {
        open = std::move(phase);
        opened = std::chrono::steady_clock::now();
      }
    }
    // (graphs_ turns off when the stream turns out unable to capture.)
    if (runs && graphs_ && nextRun < runs->size() &&
        (*runs)[nextRun].first == first) {
      const uint32_t end = (*runs)[nextRun++].second;
      OMNI_ASSIGN_OR_RETURN(
          bool launched,
          runCommandsAsGraph(frame, commands, first, end, parent, field));
      if (launched) {
        i = end - 1;
        continue;
      }
    }
    if (profile_) {
      OMNI_RETURN_IF_ERROR(runProfiled(frame, command, path, epilogue));
    } else {
      OMNI_RETURN_IF_ERROR(runCommand(frame, command, path, epilogue));
    }
  }
  return closePhase();
}

absl::Status Executor::runCommand(Frame &frame, const step::Command &command,
                                  const Path &path,
                                  const step::Command *epilogue) {
  const step::CommandKind kind = command.kind_type();
  commandsRun_ += epilogue ? 1 : 0;
  if (options_.commandBudget > 0 && ++commandsRun_ > options_.commandBudget) {
    absl::Status exceeded = absl::ResourceExhaustedError(absl::StrCat(
        program_->name(), ": ", path.render(), " (",
        loader::commandKindName(kind), "): the run exceeded its budget of ",
        options_.commandBudget, " commands"));
    abortChannels(exceeded);
    return exceeded;
  }
  if (pending_ && kind != step::CommandKind::Loop &&
      kind != step::CommandKind::Call)
    for (const step::Command *c : {&command, epilogue})
      if (c)
        if (absl::Status waited = waitForHostCallBefore(frame, *c);
            !waited.ok()) {
          // The error is the host call's, with its place.
          abortChannels(waited);
          return waited;
        }
  TraceScope trace(step::EnumNameCommandKind(kind));
  absl::Status status;
  switch (kind) {
  case step::CommandKind::Loop:
    // Body commands report their own paths.
    return runLoop(frame, *command.kind_as_Loop(), path);
  case step::CommandKind::Call:
    return runCall(frame, *command.kind_as_Call(), path);
  case step::CommandKind::Dispatch:
    status = runDispatch(frame, *command.kind_as_Dispatch());
    break;
  case step::CommandKind::LibraryCall:
    status = runLibraryCall(frame, *command.kind_as_LibraryCall(),
                            epilogue ? epilogue->kind_as_Dispatch() : nullptr);
    break;
  case step::CommandKind::Copy:
    status = runCopy(frame, *command.kind_as_Copy());
    break;
  case step::CommandKind::Fill: {
    const step::Fill *f = command.kind_as_Fill();
    status = stream_->fill(
        resolve(frame, f->dest()),
        absl::MakeConstSpan(f->pattern()->data(), f->pattern()->size()));
    break;
  }
  case step::CommandKind::Random:
    status = runRandom(frame, *command.kind_as_Random());
    break;
  case step::CommandKind::HostCall:
    status = runHostCall(frame, command, path);
    break;
  case step::CommandKind::ScalarOp:
    status = runScalarOp(frame, *command.kind_as_ScalarOp());
    break;
  case step::CommandKind::Collective:
    status = runCollective(frame, *command.kind_as_Collective());
    break;
  case step::CommandKind::AxisIndex:
    status = runAxisIndex(frame, *command.kind_as_AxisIndex());
    break;
  default:
    status = absl::InternalError("unverified command kind");
    break;
  }
  if (status.ok())
    return status;
  absl::Status failed(status.code(),
                      absl::StrCat(describeCommand(frame, command, path), ": ",
                                   status.message()));
  // The other ranks would wait for this one's next collective forever.
  abortChannels(failed);
  return failed;
}

std::string Executor::describeCommand(const Frame &frame,
                                      const step::Command &command,
                                      const Path &path) const {
  std::string where = absl::StrCat(program_->name(), ": ", path.render(), " (",
                                   loader::commandLabel(command));
  // A Dispatch by its kernel: what a GPU tool (compute-sanitizer, the
  // profile) and --emit=kernels name. The loader checked both indices.
  if (const step::Dispatch *d = command.kind_as_Dispatch())
    absl::StrAppend(&where, " ",
                    program_->step()
                        .executables()
                        ->Get(d->executable())
                        ->kernels()
                        ->Get(d->kernel())
                        ->str());
  if (command.location() && command.location()->size())
    absl::StrAppend(&where, ", ", command.location()->str());
  absl::StrAppend(&where, ")");
  if (frame.caller)
    absl::StrAppend(&where, " called from ", frame.caller->render());
  return where;
}

void Executor::dispatchArgs(const Frame &frame, const step::Dispatch &d,
                            std::vector<hal::BufferRef> &buffers,
                            std::vector<int64_t> &scalars) const {
  for (uint32_t i = 0; i < sizeOf(d.operands()); ++i)
    buffers.push_back(resolve(frame, d.operands()->Get(i)));
  for (uint32_t i = 0; i < sizeOf(d.results()); ++i)
    buffers.push_back(resolve(frame, d.results()->Get(i)));
  for (uint32_t i = 0; i < sizeOf(d.scalars()); ++i)
    scalars.push_back(frame.scalars[d.scalars()->Get(i)]);
}

absl::Status Executor::runDispatch(Frame &frame, const step::Dispatch &d) {
  std::vector<hal::BufferRef> buffers;
  std::vector<int64_t> scalars;
  dispatchArgs(frame, d, buffers, scalars);
  return stream_->dispatch(*executables_[d.executable()], d.kernel(), d.grid(),
                           buffers, scalars);
}

hal::MatmulParams matmulParams(const loader::Program &program,
                               const step::LibraryCall &c) {
  // Attribute order (step.fbs): transpose_lhs, transpose_rhs.
  const TensorInfo &lhs = program.tensor(c.operands()->Get(0));
  const TensorInfo &rhs = program.tensor(c.operands()->Get(1));
  const TensorInfo &result = program.tensor(c.results()->Get(0));
  hal::MatmulParams p;
  p.dtype = result.dtype;
  p.transposeLhs = c.int_attrs()->Get(0) != 0;
  p.transposeRhs = c.int_attrs()->Get(1) != 0;
  size_t rank = lhs.shape.size();
  p.m = result.shape[rank - 2];
  p.n = result.shape[rank - 1];
  p.k = p.transposeLhs ? lhs.shape[rank - 2] : lhs.shape[rank - 1];
  p.batch = 1;
  for (size_t d = 0; d + 2 < rank; ++d)
    p.batch *= lhs.shape[d];
  p.rhsShared = rhs.shape.size() == 2;
  return p;
}

absl::Status Executor::runLibraryCall(Frame &frame, const step::LibraryCall &c,
                                      const step::Dispatch *epilogue) {
  auto operand = [&](uint32_t i) -> const TensorInfo & {
    return program_->tensor(c.operands()->Get(i));
  };
  auto ref = [&](uint32_t i) { return resolve(frame, c.operands()->Get(i)); };
  const TensorInfo &result = program_->tensor(c.results()->Get(0));
  hal::BufferRef out = resolve(frame, c.results()->Get(0));
  // Attention and AttentionBackward: shapes from query, key and value;
  // float_attrs: [scale] (absent: 1/sqrt(head size)).
  auto attentionParams = [&] {
    const TensorInfo &q = operand(0), &k = operand(1), &v = operand(2);
    hal::AttentionParams p;
    p.dtype = result.dtype;
    p.batch = q.shape[0];
    p.heads = q.shape[1];
    p.seqQ = q.shape[2];
    p.headDim = q.shape[3];
    p.seqK = k.shape[2];
    p.valueDim = v.shape[3];
    p.scale = sizeOf(c.float_attrs())
                  ? c.float_attrs()->Get(0)
                  : (p.headDim > 0 ? 1.0 / std::sqrt(double(p.headDim)) : 1.0);
    return p;
  };
  switch (c.library()) {
  case step::Library::Matmul: {
    const hal::MatmulParams p = matmulParams(*program_, c);
    if (!epilogue)
      return stream_->matmul(p, ref(0), ref(1), out);
    // The loader checked the epilogue (checkEpilogue): its kernel's
    // signature has item_bytes, and it reads the result by slices.
    const step::KernelSignature &sig = *program_->step()
                                            .executables()
                                            ->Get(epilogue->executable())
                                            ->signatures()
                                            ->Get(epilogue->kernel());
    std::vector<hal::BufferRef> buffers;
    std::vector<int64_t> scalars;
    dispatchArgs(frame, *epilogue, buffers, scalars);
    std::vector<int64_t> itemBytes(sig.item_bytes()->begin(),
                                   sig.item_bytes()->end());
    hal::Stream::Epilogue e;
    for (uint32_t i = 0; i < sizeOf(epilogue->operands()); ++i)
      if (program_->sameBuffer(epilogue->operands()->Get(i),
                               c.results()->Get(0)))
        e.resultItemBytes = itemBytes[i];
    e.executable = executables_[epilogue->executable()].get();
    e.kernel = epilogue->kernel();
    e.grid = epilogue->grid();
    e.buffers = buffers;
    e.numOperands = sizeOf(epilogue->operands());
    e.scalars = scalars;
    e.itemBytes = itemBytes;
    return stream_->matmulWithEpilogue(p, ref(0), ref(1), out, e);
  }
  case step::Library::Conv2d: {
    // Attribute order (step.fbs): stride_h, stride_w, padding_h, padding_w,
    // dilation_h, dilation_w.
    const TensorInfo &input = operand(0), &filter = operand(1);
    hal::Conv2dParams p;
    p.dtype = result.dtype;
    p.n = input.shape[0];
    p.c = input.shape[1];
    p.h = input.shape[2];
    p.w = input.shape[3];
    p.o = filter.shape[0];
    p.kh = filter.shape[2];
    p.kw = filter.shape[3];
    p.strideH = c.int_attrs()->Get(0);
    p.strideW = c.int_attrs()->Get(1);
    p.padH = c.int_attrs()->Get(2);
    p.padW = c.int_attrs()->Get(3);
    p.dilationH = c.int_attrs()->Get(4);
    p.dilationW = c.int_attrs()->Get(5);
    p.outH = result.shape[2];
    p.outW = result.shape[3];
    return stream_->conv2d(p, ref(0), ref(1), out);
  }
  case step::Library::Attention: {
    // int_attrs: has_mask.
    hal::AttentionParams p = attentionParams();
    p.hasMask = c.int_attrs()->Get(0) != 0;
    hal::BufferRef mask;
    if (p.hasMask) {
      const TensorInfo &m = operand(3);
      p.maskBatchShared = m.shape[0] == 1 && p.batch != 1;
      p.maskHeadShared = m.shape[1] == 1 && p.heads != 1;
      mask = ref(3);
    }
    return stream_->attention(p, ref(0), ref(1), ref(2), mask, out);
  }
  case step::Library::AttentionBackward: {
    // operands: query, key, value, output, d_output (, mask); results:
    // d_query, d_key, d_value.
    hal::AttentionParams p = attentionParams();
    hal::BufferRef mask;
    if (sizeOf(c.operands()) == 6) {
      const TensorInfo &m = operand(5);
      p.hasMask = true;
      p.maskBatchShared = m.shape[0] == 1 && p.batch != 1;
      p.maskHeadShared = m.shape[1] == 1 && p.heads != 1;
      mask = ref(5);
    }
    return stream_->attentionBackward(p, ref(0), ref(1), ref(2), mask, ref(3),
                                      ref(4), out,
                                      resolve(frame, c.results()->Get(1)),
                                      resolve(frame, c.results()->Get(2)));
  }
  }
  return absl::InternalError("unverified library");
}

absl::Status Executor::runCopy(Frame &frame, const step::Copy &c) {
  const TensorInfo &src = program_->tensor(c.source());
  const TensorInfo &dst = program_->tensor(c.dest());
  const int64_t bytes = c.bytes() ? c.bytes() : std::min(src.bytes, dst.bytes);
  struct Side {
    const char *name;
    uint32_t tensor;
    const TensorInfo &info;
    int64_t offset;
    int32_t scalar;
    int64_t stride;
  };
  const Side sides[2] = {{"source", c.source(), src, c.source_offset(),
                          c.source_offset_scalar(), c.source_offset_stride()},
                         {"dest", c.dest(), dst, c.dest_offset(),
                          c.dest_offset_scalar(), c.dest_offset_stride()}};
  hal::BufferRef refs[2];
  for (int i = 0; i < 2; ++i) {
    const Side &side = sides[i];
    __int128 offset = side.offset;
    if (side.scalar >= 0)
      offset += static_cast<__int128>(frame.scalars[side.scalar]) * side.stride;
    if (offset < 0 || offset + bytes > side.info.bytes) {
      std::string scalar = side.scalar >= 0
                               ? absl::StrCat(" (scalar ", side.scalar, " = ",
                                              frame.scalars[side.scalar], ")")
                               : "";
      return absl::OutOfRangeError(
          absl::StrCat(side.name, " range [", int128String(offset), ", ",
                       int128String(offset + bytes), ") is outside tensors[",
                       side.tensor, "] (", side.info.typeString(), ", ",
                       side.info.bytes, " bytes)", scalar));
    }
    hal::BufferRef whole = resolve(frame, side.tensor);
    refs[i] = hal::BufferRef{
        whole.buffer, whole.offset + static_cast<int64_t>(offset), bytes};
  }
  return stream_->copy(refs[0], refs[1]);
}

absl::Status Executor::runRandom(Frame &frame, const step::Random &r) {
  const TensorInfo &result = program_->tensor(r.result());
  hal::Distribution distribution =
      r.distribution() == step::Distribution::Uniform
          ? hal::Distribution::Uniform
          : hal::Distribution::Normal;
  return stream_->random(distribution, result.dtype, result.numElements,
                         resolve(frame, r.key()), resolve(frame, r.counter()),
                         resolve(frame, r.offset()),
                         resolve(frame, r.result()));
}

absl::Status Executor::runHostCall(Frame &frame, const step::Command &command,
                                   const Path &path) {
  const step::HostCall &h = *command.kind_as_HostCall();
  const std::string name = h.name()->str();
  const HostFunction *fn = hostFunctions_.lookup(name);
  if (!fn)
    return absl::NotFoundError(
        absl::StrCat("unknown host function '", name, "'"));
  std::vector<hal::BufferRef> buffers;
  for (uint32_t i = 0; i < sizeOf(h.results()); ++i)
    buffers.push_back(resolve(frame, h.results()->Get(i)));
  if (!options_.asyncHostCalls || !hostFunctions_.isConcurrent(name)) {
    // The operands are read now (the stream is synchronized), so the call
    // never sees a later command's writes to them.
    std::vector<HostTensor> args;
    for (uint32_t i = 0; i < sizeOf(h.operands()); ++i) {
      OMNI_ASSIGN_OR_RETURN(HostTensor arg,
                            readTensor(frame, h.operands()->Get(i)));
      args.push_back(std::move(arg));
    }
    absl::StatusOr<std::vector<HostTensor>> results = (*fn)(args);
    if (!results.ok())
      return results.status();
    return writeHostResults(h, *results, buffers);
  }
  // waitForHostCallBefore finished the previous concurrent call; should one
  // still be pending, it is finished here rather than overwritten.
  if (pending_)
    OMNI_RETURN_IF_ERROR(finishHostCall());
  // The operands' copies to the host are submitted now, in stream order (so
  // the call never sees a later command's writes to them), without waiting
  // for them: the worker waits for an event recorded after the copies, and
  // the executor goes on submitting the commands after the call while the
  // device finishes the ones before it (a GPU decodes a rollout chunk while
  // the next chunk is submitted).
  struct Operand {
    DType dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
  };
  std::vector<Operand> operands;
  for (uint32_t i = 0; i < sizeOf(h.operands()); ++i) {
    const TensorInfo &info = program_->tensor(h.operands()->Get(i));
    operands.push_back({info.dtype, info.shape,
                        std::vector<uint8_t>(static_cast<size_t>(info.bytes))});
  }
  absl::Status submitted = absl::OkStatus();
  for (uint32_t i = 0; i < operands.size() && submitted.ok(); ++i)
    submitted =
        toHost(resolve(frame, h.operands()->Get(i)), operands[i].bytes.data());
  absl::StatusOr<std::shared_ptr<hal::Event>> copied =
      submitted.ok() ? stream_->recordEvent()
                     : absl::StatusOr<std::shared_ptr<hal::Event>>(submitted);
  if (!copied.ok()) {
    // Copies already submitted write into `operands`: let them land first.
    (void)stream_->synchronize();
    return copied.status();
  }
  auto pending = std::make_unique<PendingHostCall>();
  pending->call = &h;
  pending->where = describeCommand(frame, command, path);
  pending->results = std::move(buffers);
  pending->values = absl::UnknownError("the host call did not run");
  PendingHostCall *p = pending.get();
  p->worker = std::thread([p, fn, operands = std::move(operands),
                           copied = *std::move(copied)]() mutable {
    if (absl::Status ready = copied->wait(); !ready.ok()) {
      p->values = ready;
      return;
    }
    std::vector<HostTensor> args;
    for (Operand &o : operands)
      args.push_back(unpackTensor(o.dtype, o.shape, o.bytes));
    p->values = (*fn)(args);
  });
  pending_ = std::move(pending);
  return absl::OkStatus();
}

absl::Status
Executor::writeHostResults(const step::HostCall &h,
                           std::vector<HostTensor> &values,
                           absl::Span<const hal::BufferRef> buffers) {
  const std::string name = h.name()->str();
  const uint32_t numResults = sizeOf(h.results());
  if (values.size() != numResults)
    return absl::InvalidArgumentError(
        absl::StrCat("host function '", name, "' returned ", values.size(),
                     " results but the command has ", numResults));
  for (uint32_t i = 0; i < numResults; ++i) {
    HostTensor &value = values[i];
    const TensorInfo &info = program_->tensor(h.results()->Get(i));
    bool sameKind = value.isFloat() == isFloatDType(info.dtype);
    if (!sameKind || value.shape() != info.shape)
      return absl::InvalidArgumentError(absl::StrCat(
          "host function '", name, "' returned ", value.typeString(),
          " for results[", i, "], which is ", info.typeString()));
    if (value.dtype() != info.dtype)
      value.retype(info.dtype);
    std::vector<uint8_t> bytes = packTensor(value);
    OMNI_RETURN_IF_ERROR(toDevice(bytes.data(), buffers[i]));
  }
  return absl::OkStatus();
}

bool Executor::touchesPendingHostCall(const hal::BufferRef &ref) const {
  if (!pending_ || ref.length <= 0)
    return false;
  for (const hal::BufferRef &r : pending_->results)
    if (r.buffer == ref.buffer && r.length > 0 &&
        ref.offset < r.offset + r.length && r.offset < ref.offset + ref.length)
      return true;
  return false;
}

std::vector<uint32_t> Executor::commandTensors(const step::Command &command) {
  // Whole tensors: a Copy's range computed from index registers lies inside
  // its tensors.
  std::vector<uint32_t> tensors;
  auto add = [&](const Vector<uint32_t> *v) {
    for (uint32_t i = 0; i < sizeOf(v); ++i)
      tensors.push_back(v->Get(i));
  };
  switch (command.kind_type()) {
  case step::CommandKind::Dispatch:
    add(command.kind_as_Dispatch()->operands());
    add(command.kind_as_Dispatch()->results());
    break;
  case step::CommandKind::LibraryCall:
    add(command.kind_as_LibraryCall()->operands());
    add(command.kind_as_LibraryCall()->results());
    break;
  case step::CommandKind::Copy:
    tensors = {command.kind_as_Copy()->source(),
               command.kind_as_Copy()->dest()};
    break;
  case step::CommandKind::Fill:
    tensors = {command.kind_as_Fill()->dest()};
    break;
  case step::CommandKind::Random: {
    const step::Random *r = command.kind_as_Random();
    tensors = {r->key(), r->counter(), r->offset(), r->result()};
    break;
  }
  case step::CommandKind::HostCall:
    add(command.kind_as_HostCall()->operands());
    add(command.kind_as_HostCall()->results());
    break;
  case step::CommandKind::ScalarOp: {
    const step::ScalarOp *op = command.kind_as_ScalarOp();
    if (op->kind() == step::ScalarOpKind::FromTensor)
      tensors = {op->a()};
    else if (op->kind() == step::ScalarOpKind::ToTensor)
      tensors = {op->dest()};
    break;
  }
  case step::CommandKind::Collective:
    tensors = {command.kind_as_Collective()->operand(),
               command.kind_as_Collective()->result()};
    break;
  case step::CommandKind::AxisIndex:
    tensors = {command.kind_as_AxisIndex()->result()};
    break;
  default:
    // Loop and Call: their bodies' commands are checked one by one.
    break;
  }
  return tensors;
}

absl::Status Executor::waitForHostCallBefore(const Frame &frame,
                                             const step::Command &command) {
  // One concurrent call in flight at a time: the next one waits (a mix of
  // rewards scores one batch at a time, RewardMix.h).
  if (const step::HostCall *h = command.kind_as_HostCall())
    if (options_.asyncHostCalls &&
        hostFunctions_.isConcurrent(h->name()->str()))
      return finishHostCall();
  for (uint32_t t : commandTensors(command))
    if (touchesPendingHostCall(resolve(frame, t)))
      return finishHostCall();
  return absl::OkStatus();
}

absl::Status Executor::finishHostCall() {
  if (!pending_)
    return absl::OkStatus();
  std::unique_ptr<PendingHostCall> p = std::move(pending_);
  p->worker.join();
  absl::Status status = p->values.ok()
                            ? writeHostResults(*p->call, *p->values, p->results)
                            : p->values.status();
  if (status.ok())
    return status;
  return absl::Status(status.code(),
                      absl::StrCat(p->where, ": ", status.message()));
}

void Executor::abandonHostCall() {
  if (!pending_)
    return;
  pending_->worker.join();
  pending_.reset();
}

absl::Status Executor::runScalarOp(Frame &frame, const step::ScalarOp &op) {
  std::vector<int64_t> &regs = frame.scalars;
  // Index arithmetic wraps like two's-complement hardware.
  auto wrap = [](uint64_t v) { return static_cast<int64_t>(v); };
  switch (op.kind()) {
  case step::ScalarOpKind::Const:
    regs[op.dest()] = op.value();
    return absl::OkStatus();
  case step::ScalarOpKind::Add:
    regs[op.dest()] = wrap(uint64_t(regs[op.a()]) + uint64_t(regs[op.b()]));
    return absl::OkStatus();
  case step::ScalarOpKind::Sub:
    regs[op.dest()] = wrap(uint64_t(regs[op.a()]) - uint64_t(regs[op.b()]));
    return absl::OkStatus();
  case step::ScalarOpKind::Mul:
    regs[op.dest()] = wrap(uint64_t(regs[op.a()]) * uint64_t(regs[op.b()]));
    return absl::OkStatus();
  case step::ScalarOpKind::FromTensor: {
    const TensorInfo &info = program_->tensor(op.a());
    hal::BufferRef whole = resolve(frame, op.a());
    int64_t size = loader::dtypeSize(info.dtype);
    uint8_t bytes[8] = {};
    OMNI_RETURN_IF_ERROR(
        toHost(hal::BufferRef{whole.buffer, whole.offset, size}, bytes));
    OMNI_RETURN_IF_ERROR(stream_->synchronize());
    regs[op.dest()] =
        unpackTensor(info.dtype, {}, absl::MakeConstSpan(bytes, size))
            .ints()[0];
    return absl::OkStatus();
  }
  case step::ScalarOpKind::ToTensor: {
    const TensorInfo &info = program_->tensor(op.dest());
    HostTensor value =
        HostTensor::fromInts(info.dtype, info.shape, {regs[op.a()]});
    std::vector<uint8_t> bytes = packTensor(value);
    return toDevice(bytes.data(), resolve(frame, op.dest()));
  }
  }
  return absl::InternalError("unverified scalar op");
}

absl::Status Executor::runLoop(Frame &frame, const step::Loop &loop,
                               const Path &path) {
  if (graphs_ && !capturing_ && !profile_) {
    OMNI_ASSIGN_OR_RETURN(bool launched, runLoopAsGraph(frame, loop, path));
    if (launched)
      return absl::OkStatus();
  }
  return runLoopIterations(frame, loop, path);
}

absl::Status Executor::runLoopIterations(Frame &frame, const step::Loop &loop,
                                         const Path &path) {
  for (__int128 iv = loop.lower(); iv < loop.upper(); iv += loop.step()) {
    // An iteration counts against the budget even if its body is empty.
    if (options_.commandBudget > 0 && ++commandsRun_ > options_.commandBudget) {
      absl::Status exceeded = absl::ResourceExhaustedError(
          absl::StrCat(program_->name(), ": ", path.render(),
                       " (Loop): the run exceeded its budget of ",
                       options_.commandBudget, " commands"));
      abortChannels(exceeded);
      return exceeded;
    }
    frame.scalars[loop.iv()] = static_cast<int64_t>(iv);
    OMNI_RETURN_IF_ERROR(runCommands(frame, loop.body(), path, "body"));
  }
  return absl::OkStatus();
}

absl::Status Executor::runCall(Frame &frame, const step::Call &call,
                               const Path &path) {
  std::vector<hal::BufferRef> args;
  for (uint32_t i = 0; i < sizeOf(call.operands()); ++i)
    args.push_back(resolve(frame, call.operands()->Get(i)));
  for (uint32_t i = 0; i < sizeOf(call.results()); ++i)
    args.push_back(resolve(frame, call.results()->Get(i)));
  return runFunction(call.function(), args, &path);
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

namespace {

hal::ReduceOp toHal(step::ReduceOp op) {
  switch (op) {
  case step::ReduceOp::Prod:
    return hal::ReduceOp::Prod;
  case step::ReduceOp::Min:
    return hal::ReduceOp::Min;
  case step::ReduceOp::Max:
    return hal::ReduceOp::Max;
  case step::ReduceOp::Mean:
    return hal::ReduceOp::Mean;
  default:
    return hal::ReduceOp::Sum;
  }
}

/// The product of the dimensions before `dim`: how many separate chunks
/// each rank's slice of a gather or scatter along `dim` is made of.
int64_t outerCount(const TensorInfo &info, int64_t dim) {
  int64_t n = 1;
  for (int64_t d = 0; d < dim; ++d)
    n *= info.shape[static_cast<size_t>(d)];
  return n;
}

/// Every Collective and AxisIndex under `commands` (Loop bodies
/// included), in order, with its path.
void collectCollectives(
    const Vector<Offset<step::Command>> *commands, const std::string &prefix,
    std::vector<std::pair<const step::Collective *, std::string>> &out,
    std::vector<std::pair<const step::AxisIndex *, std::string>> &indices) {
  for (uint32_t i = 0; i < sizeOf(commands); ++i) {
    const step::Command *command = commands->Get(i);
    std::string at = absl::StrCat(prefix, "[", i, "]");
    if (const step::Collective *c = command->kind_as_Collective())
      out.emplace_back(
          c, absl::StrCat(at, " (", loader::commandLabel(*command), ")"));
    else if (const step::AxisIndex *a = command->kind_as_AxisIndex())
      indices.emplace_back(
          a, absl::StrCat(at, " (", loader::commandLabel(*command), ")"));
    else if (const step::Loop *loop = command->kind_as_Loop())
      collectCollectives(loop->body(), at + ".body", out, indices);
  }
}

} // namespace

void Executor::abortChannels(const absl::Status &reason) {
  // Only a multi-rank program has other ranks that could wait for us.
  if (program_->meshes().empty())
    return;
  for (auto &channel : subChannels_)
    channel->abort(reason);
  if (options_.channel)
    options_.channel->abort(reason);
}

absl::Status Executor::prepareCollectives() {
  const loader::Program &p = *program_;
  std::vector<std::pair<const step::Collective *, std::string>> collectives;
  std::vector<std::pair<const step::AxisIndex *, std::string>> indices;
  for (uint32_t f = 0; f < p.numFunctions(); ++f)
    collectCollectives(p.step().functions()->Get(f)->commands(),
                       absl::StrCat("functions[", f, "].commands"), collectives,
                       indices);
  hal::Channel *channel = options_.channel;
  // One channel per distinct (mesh, axes), split in program order: every
  // rank runs the same program, so every rank splits the same way.
  std::map<std::pair<uint32_t, std::vector<uint32_t>>, hal::Channel *> groups;
  int64_t scratch = 0;
  for (const auto &[c, where] : collectives) {
    const loader::MeshInfo &mesh = p.meshes()[c->mesh()];
    std::string at = absl::StrCat(p.name(), ": ", where, ": ");
    if (!channel)
      return absl::FailedPreconditionError(absl::StrCat(
          at, "the program runs on mesh ", mesh.describe(), " of ",
          mesh.numRanks, " ranks but the executor has no channel"));
    if (mesh.numRanks != channel->size())
      return absl::InvalidArgumentError(
          absl::StrCat(at, "mesh ", mesh.describe(), " has ", mesh.numRanks,
                       " ranks but the channel has ", channel->size()));
    std::vector<uint32_t> axes(c->axes()->begin(), c->axes()->end());
    auto [it, inserted] = groups.emplace(std::pair{c->mesh(), axes}, nullptr);
    if (inserted) {
      std::vector<uint32_t> all(mesh.axes.size());
      std::iota(all.begin(), all.end(), 0u);
      if (axes == all) {
        it->second = channel; // the group is every rank, in rank order
      } else {
        loader::MeshInfo::Group group = mesh.groupOf(axes, channel->rank());
        absl::StatusOr<std::unique_ptr<hal::Channel>> sub = channel->split(
            static_cast<int>(group.color), static_cast<int>(group.rank));
        if (!sub.ok())
          return absl::Status(sub.status().code(),
                              absl::StrCat(at, "the group over ",
                                           mesh.axisNames(axes), ": ",
                                           sub.status().message()));
        it->second = sub->get();
        subChannels_.push_back(std::move(*sub));
      }
    }
    collectiveChannels_[c] = it->second;
    // Gathers and scatters along an inner dimension stage through scratch.
    const TensorInfo &in = p.tensor(c->operand());
    const TensorInfo &out = p.tensor(c->result());
    if (c->kind() == step::CollectiveKind::AllGather &&
        outerCount(in, c->dim()) > 1)
      scratch = std::max(scratch, out.bytes);
    if (c->kind() == step::CollectiveKind::ReduceScatter &&
        outerCount(in, c->dim()) > 1)
      scratch = std::max(scratch, in.bytes);
  }
  if (scratch > 0) {
    absl::StatusOr<std::unique_ptr<hal::Buffer>> buffer =
        device_.allocate(scratch);
    if (!buffer.ok())
      return absl::Status(buffer.status().code(),
                          absl::StrCat(p.name(), ": collective staging: ",
                                       buffer.status().message()));
    collectiveScratch_ = std::move(*buffer);
  }
  // An AxisIndex is this rank's group rank: the rank is the channel's, or
  // 0 without one, which only a mesh of one rank allows.
  for (const auto &[a, where] : indices) {
    const loader::MeshInfo &mesh = p.meshes()[a->mesh()];
    std::string at = absl::StrCat(p.name(), ": ", where, ": ");
    if (!channel && mesh.numRanks > 1)
      return absl::FailedPreconditionError(absl::StrCat(
          at, "the program runs on mesh ", mesh.describe(), " of ",
          mesh.numRanks, " ranks but the executor has no channel"));
    if (channel && mesh.numRanks != channel->size())
      return absl::InvalidArgumentError(
          absl::StrCat(at, "mesh ", mesh.describe(), " has ", mesh.numRanks,
                       " ranks but the channel has ", channel->size()));
    std::vector<uint32_t> axes(a->axes()->begin(), a->axes()->end());
    axisIndices_[a] = mesh.groupOf(axes, channel ? channel->rank() : 0).rank;
  }
  return absl::OkStatus();
}

absl::Status Executor::runAxisIndex(Frame &frame, const step::AxisIndex &a) {
  const int64_t value = axisIndices_.at(&a);
  return toDevice(&value, resolve(frame, a.result()));
}

absl::Status Executor::runCollective(Frame &frame, const step::Collective &c) {
  hal::Channel &channel = *collectiveChannels_.at(&c);
  const TensorInfo &in = program_->tensor(c.operand());
  const TensorInfo &out = program_->tensor(c.result());
  hal::BufferRef src = resolve(frame, c.operand());
  hal::BufferRef dst = resolve(frame, c.result());
  const int64_t group = channel.size();
  switch (c.kind()) {
  case step::CollectiveKind::AllReduce:
    return channel.allReduce(*stream_, src, dst, in.dtype,
                             toHal(c.reduce_op()));
  case step::CollectiveKind::Broadcast:
    if (src != dst)
      OMNI_RETURN_IF_ERROR(stream_->copy(src, dst));
    return channel.broadcast(*stream_, dst, static_cast<int>(c.root()));
  case step::CollectiveKind::AllGather: {
    const int64_t outer = outerCount(in, c.dim());
    if (outer <= 1 || in.bytes == 0)
      return channel.allGather(*stream_, src, dst);
    // Gather whole operands ([rank][outer][chunk]), then interleave them
    // into the result ([outer][rank][chunk]).
    hal::BufferRef staged{collectiveScratch_.get(), 0, out.bytes};
    OMNI_RETURN_IF_ERROR(channel.allGather(*stream_, src, staged));
    const int64_t chunk = in.bytes / outer;
    for (int64_t g = 0; g < group; ++g)
      for (int64_t o = 0; o < outer; ++o)
        OMNI_RETURN_IF_ERROR(stream_->copy(
            {staged.buffer, (g * outer + o) * chunk, chunk},
            {dst.buffer, dst.offset + (o * group + g) * chunk, chunk}));
    return absl::OkStatus();
  }
  case step::CollectiveKind::ReduceScatter: {
    const int64_t outer = outerCount(in, c.dim());
    if (outer <= 1 || out.bytes == 0)
      return channel.reduceScatter(*stream_, src, dst, in.dtype,
                                   toHal(c.reduce_op()));
    // Regroup the operand ([outer][rank][chunk]) so that each rank's slice
    // is contiguous ([rank][outer][chunk]), then reduce-scatter it.
    hal::BufferRef staged{collectiveScratch_.get(), 0, in.bytes};
    const int64_t chunk = out.bytes / outer;
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t g = 0; g < group; ++g)
        OMNI_RETURN_IF_ERROR(stream_->copy(
            {src.buffer, src.offset + (o * group + g) * chunk, chunk},
            {staged.buffer, (g * outer + o) * chunk, chunk}));
    return channel.reduceScatter(*stream_, staged, dst, in.dtype,
                                 toHal(c.reduce_op()));
  }
  }
  return absl::InternalError("unverified collective kind");
}

} // namespace omni::executor
