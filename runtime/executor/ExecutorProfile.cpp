//===- ExecutorProfile.cpp - Timing commands into a Profile -----*- C++ -*-===//
//
// Executor::runProfiled: runs one command through runCommand, synchronizes
// the stream, and adds the command's seconds, bytes and FLOPs to its row of
// the profile (Profile.h says what the kinds, symbols, bytes and FLOPs
// are). Loop and Call are not rows themselves: their bodies' commands are,
// in the phase the Loop or Call passes down.
//
//===----------------------------------------------------------------------===//

#include "runtime/executor/ExecutorImpl.h"
#include "runtime/executor/Profile.h"

#include "runtime/base/Status.h"

#include "absl/strings/str_cat.h"

#include <chrono>
#include <utility>

namespace omni::executor {

using detail::sizeOf;
using flatbuffers::Vector;
using loader::TensorInfo;

namespace {

/// What a command is in a profile.
struct Described {
  const char *kind = "";
  std::string symbol;
  int64_t bytes = 0;
  int64_t flops = 0;
};

Described describeLibraryCall(const loader::Program &program,
                              const step::LibraryCall &c) {
  auto operand = [&](uint32_t i) -> const TensorInfo & {
    return program.tensor(c.operands()->Get(i));
  };
  const TensorInfo &result = program.tensor(c.results()->Get(0));
  Described d;
  switch (c.library()) {
  case step::Library::Matmul: {
    // As runLibraryCall reads them (step.fbs attribute order).
    const TensorInfo &lhs = operand(0);
    const bool tl = c.int_attrs()->Get(0) != 0, tr = c.int_attrs()->Get(1) != 0;
    const size_t rank = lhs.shape.size();
    const int64_t m = result.shape[rank - 2], n = result.shape[rank - 1];
    const int64_t k = tl ? lhs.shape[rank - 2] : lhs.shape[rank - 1];
    int64_t batch = 1;
    for (size_t i = 0; i + 2 < rank; ++i)
      batch *= lhs.shape[i];
    d.kind = "matmul";
    d.symbol = absl::StrCat("matmul ", batch, "x", m, "x", n, "x", k, " ",
                            tl ? "t" : "n", tr ? "t" : "n");
    d.flops = 2 * batch * m * n * k;
    break;
  }
  case step::Library::Conv2d: {
    const TensorInfo &input = operand(0), &filter = operand(1);
    const int64_t n = input.shape[0], ch = input.shape[1];
    const int64_t o = filter.shape[0], kh = filter.shape[2],
                  kw = filter.shape[3];
    const int64_t oh = result.shape[2], ow = result.shape[3];
    d.kind = "conv2d";
    d.symbol = absl::StrCat("conv2d ", n, "x", ch, "x", input.shape[2], "x",
                            input.shape[3], " -> ", o, "x", oh, "x", ow, " k",
                            kh, "x", kw, " s", c.int_attrs()->Get(0));
    d.flops = 2 * n * o * oh * ow * ch * kh * kw;
    break;
  }
  case step::Library::Attention: {
    const TensorInfo &q = operand(0), &k = operand(1), &v = operand(2);
    const int64_t b = q.shape[0], h = q.shape[1], sq = q.shape[2],
                  dh = q.shape[3], sk = k.shape[2], dv = v.shape[3];
    d.kind = "attention";
    d.symbol = absl::StrCat("attention ", b, "x", h, " q", sq, " k", sk, " d",
                            dh, c.int_attrs()->Get(0) ? " mask" : "");
    // Q K^T and P V, plus the softmax and scaling (Profile.h).
    d.flops = 2 * b * h * sq * sk * dh + 2 * b * h * sq * sk * dv +
              5 * b * h * sq * sk;
    break;
  }
  case step::Library::AttentionBackward: {
    const TensorInfo &q = operand(0), &k = operand(1), &v = operand(2);
    const int64_t b = q.shape[0], h = q.shape[1], sq = q.shape[2],
                  dh = q.shape[3], sk = k.shape[2], dv = v.shape[3];
    d.kind = "attention";
    d.symbol = absl::StrCat("attention backward ", b, "x", h, " q", sq, " k",
                            sk, " d", dh);
    // The backward's products as the decomposed VJP counts them: Q K^T
    // again, dO V^T, P^T dO, dS K, dS^T Q, and its elementwise work.
    d.flops = 2 * b * h * sq * sk * (3 * dh + 2 * dv) + 8 * b * h * sq * sk;
    break;
  }
  }
  return d;
}

} // namespace

absl::Status Executor::runProfiled(Frame &frame, const step::Command &command,
                                   const Path &path,
                                   const step::Command *epilogue) {
  using Clock = std::chrono::steady_clock;
  auto since = [](Clock::time_point begin) {
    return std::chrono::duration<double>(Clock::now() - begin).count();
  };
  const step::CommandKind kind = command.kind_type();
  const bool hasPhase = command.phase() && command.phase()->size();
  std::string outer;
  if (hasPhase)
    outer = std::exchange(profilePhase_, command.phase()->str());
  struct Restore {
    Executor &e;
    bool active;
    std::string &outer;
    ~Restore() {
      if (active)
        e.profilePhase_ = std::move(outer);
    }
  } restore{*this, hasPhase, outer};
  if (kind == step::CommandKind::Loop || kind == step::CommandKind::Call)
    return runCommand(frame, command, path);

  // A wait for an asynchronous host call is its own row (runCommand would
  // wait the same way; after this it finds nothing to wait for).
  if (pending_) {
    const std::string name = pending_->call->name()->str();
    const Clock::time_point begin = Clock::now();
    if (absl::Status waited = waitForHostCallBefore(frame, command);
        !waited.ok()) {
      abortChannels(waited);
      return waited;
    }
    if (!pending_)
      profile_->add(profilePhase_, "host call wait", name, "", since(begin), 0,
                    0);
  }

  const Clock::time_point begin = Clock::now();
  OMNI_RETURN_IF_ERROR(runCommand(frame, command, path, epilogue));
  // An asynchronous failure (a GPU kernel's bad address) is this command's.
  if (absl::Status synced = stream_->synchronize(); !synced.ok()) {
    absl::Status failed(synced.code(),
                        absl::StrCat(describeCommand(frame, command, path),
                                     ": ", synced.message()));
    abortChannels(failed);
    return failed;
  }
  const double seconds = since(begin);

  auto tensorBytes = [&](const Vector<uint32_t> *v) {
    int64_t bytes = 0;
    for (uint32_t i = 0; i < sizeOf(v); ++i)
      bytes += program_->tensor(v->Get(i)).bytes;
    return bytes;
  };
  auto kernelName = [&](const step::Dispatch &x) {
    return program_->step()
        .executables()
        ->Get(x.executable())
        ->kernels()
        ->Get(x.kernel())
        ->str();
  };
  Described d;
  switch (kind) {
  case step::CommandKind::Dispatch: {
    const step::Dispatch *x = command.kind_as_Dispatch();
    d.kind = "fused kernel";
    d.symbol = kernelName(*x);
    d.bytes = tensorBytes(x->operands()) + tensorBytes(x->results());
    break;
  }
  case step::CommandKind::LibraryCall: {
    const step::LibraryCall *x = command.kind_as_LibraryCall();
    d = describeLibraryCall(*program_, *x);
    d.bytes = tensorBytes(x->operands()) + tensorBytes(x->results());
    if (epilogue) {
      // "matmul ... + omni_kernel_7": the epilogue's time is in the row.
      const step::Dispatch *e = epilogue->kind_as_Dispatch();
      absl::StrAppend(&d.symbol, " + ", kernelName(*e));
      d.bytes += tensorBytes(e->operands()) + tensorBytes(e->results());
    }
    break;
  }
  case step::CommandKind::Copy: {
    const step::Copy *x = command.kind_as_Copy();
    d.kind = "copy";
    d.symbol = "copy";
    d.bytes = 2 * (x->bytes() ? x->bytes()
                              : std::min(program_->tensor(x->source()).bytes,
                                         program_->tensor(x->dest()).bytes));
    break;
  }
  case step::CommandKind::Fill:
    d.kind = "fill";
    d.symbol = "fill";
    d.bytes = program_->tensor(command.kind_as_Fill()->dest()).bytes;
    break;
  case step::CommandKind::Random:
    d.kind = "random";
    d.symbol = "random";
    d.bytes = program_->tensor(command.kind_as_Random()->result()).bytes;
    break;
  case step::CommandKind::HostCall: {
    const step::HostCall *x = command.kind_as_HostCall();
    d.kind = "host call";
    d.symbol = x->name()->str();
    d.bytes = tensorBytes(x->operands()) + tensorBytes(x->results());
    break;
  }
  case step::CommandKind::Collective: {
    const step::Collective *x = command.kind_as_Collective();
    d.kind = "collective";
    d.symbol = step::EnumNameCollectiveKind(x->kind());
    d.bytes = program_->tensor(x->operand()).bytes +
              program_->tensor(x->result()).bytes;
    break;
  }
  default: // ScalarOp, AxisIndex
    d.kind = "scalar";
    d.symbol = "scalar";
    break;
  }
  profile_->add(profilePhase_, d.kind, d.symbol,
                command.location()
                    ? absl::string_view(command.location()->c_str(),
                                        command.location()->size())
                    : absl::string_view(),
                seconds, d.bytes, d.flops);
  return absl::OkStatus();
}

} // namespace omni::executor
