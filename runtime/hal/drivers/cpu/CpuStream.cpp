//===- CpuStream.cpp - Eager command execution on the host ------*- C++ -*-===//

#include "runtime/hal/drivers/cpu/CpuStream.h"

#include "runtime/hal/drivers/cpu/CpuAttention.h"

#include "runtime/base/CheckedMath.h"
#include "runtime/base/Status.h"
#include "runtime/flowgrpo/Philox.h"
#include "runtime/hal/drivers/cpu/CpuDevice.h"
#include "runtime/hal/drivers/cpu/CpuExecutable.h"
#include "runtime/hal/drivers/cpu/CpuLibraries.h"
#include "runtime/io/ElementCodec.h"

#include "absl/strings/str_cat.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

namespace omni::hal::cpu {
namespace {

class CompleteEvent final : public Event {
public:
  absl::Status wait() override { return absl::OkStatus(); }
  bool isComplete() const override { return true; }
};

} // namespace

/// The commands of one capture, in order.
struct CpuStream::Capture {
  std::vector<Recorded> commands;
  /// The first command that could not be captured.
  absl::Status failure;
};

namespace {

class CpuGraph final : public Graph {
public:
  CpuGraph(const CpuDevice &device,
           std::vector<std::function<absl::Status(CpuStream &)>> commands)
      : device(device), commands(std::move(commands)) {}
  int64_t numCommands() const override {
    return static_cast<int64_t>(commands.size());
  }
  const CpuDevice &device;
  const std::vector<std::function<absl::Status(CpuStream &)>> commands;
};

/// Bytes of `count` elements, or -1 on overflow / negative counts.
int64_t bytesOf(std::initializer_list<int64_t> dims, DType dtype) {
  std::optional<int64_t> n = checkedNumElements(std::vector<int64_t>(dims));
  std::optional<int64_t> b =
      n ? checkedMul(*n, dtypeSize(dtype)) : std::nullopt;
  return b ? *b : -1;
}

} // namespace

CpuStream::CpuStream(CpuDevice &device) : device_(device) {}

CpuStream::~CpuStream() = default;

absl::StatusOr<uint8_t *> CpuStream::resolve(BufferRef ref,
                                             const char *what) const {
  if (!ref.buffer)
    return absl::InvalidArgumentError(absl::StrCat(what, " has no buffer"));
  if (&ref.buffer->device() != static_cast<const Device *>(&device_))
    return absl::InvalidArgumentError(
        absl::StrCat(what, " is a buffer of another device"));
  if (!rangeInside(ref.offset, ref.length, ref.buffer->size()))
    return absl::InvalidArgumentError(absl::StrCat(
        what, " range [", ref.offset, ", +", ref.length,
        ") is outside its buffer of ", ref.buffer->size(), " bytes"));
  // Every buffer of this device is a CpuBuffer.
  return static_cast<CpuBuffer *>(ref.buffer)->data() + ref.offset;
}

absl::StatusOr<uint8_t *> CpuStream::resolveSized(BufferRef ref, int64_t bytes,
                                                  const char *what) const {
  OMNI_ASSIGN_OR_RETURN(uint8_t *p, resolve(ref, what));
  if (ref.length != bytes)
    return absl::InvalidArgumentError(absl::StrCat(
        what, " is ", ref.length, " bytes but the command needs ", bytes));
  return p;
}

absl::Status CpuStream::writeBuffer(const void *host, BufferRef dst) {
  if (capture_) {
    // The bytes are taken now: every launch writes these.
    const auto *h = static_cast<const uint8_t *>(host);
    std::vector<uint8_t> bytes(h, h + std::max<int64_t>(dst.length, 0));
    return record(
        [bytes = std::move(bytes), dst](CpuStream &s) {
          return s.writeBuffer(bytes.data(), dst);
        },
        {dst});
  }
  OMNI_ASSIGN_OR_RETURN(uint8_t *d, resolve(dst, "writeBuffer destination"));
  if (dst.length)
    std::memcpy(d, host, static_cast<size_t>(dst.length));
  return absl::OkStatus();
}

absl::Status CpuStream::readBuffer(BufferRef src, void *host) {
  if (capture_)
    return refuseWhileCapturing("readBuffer");
  OMNI_ASSIGN_OR_RETURN(uint8_t *s, resolve(src, "readBuffer source"));
  if (src.length)
    std::memcpy(host, s, static_cast<size_t>(src.length));
  return absl::OkStatus();
}

namespace {

absl::Status checkCopy(BufferRef src, BufferRef dst) {
  if (src.length != dst.length)
    return absl::InvalidArgumentError(
        absl::StrCat("copy of ", src.length, " bytes into ", dst.length));
  return absl::OkStatus();
}

absl::Status checkFill(BufferRef dst, absl::Span<const uint8_t> pattern) {
  const int64_t size = static_cast<int64_t>(pattern.size());
  if (size == 0 || dst.length % size != 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "fill of ", dst.length, " bytes with a pattern of ", size, " bytes"));
  return absl::OkStatus();
}

} // namespace

absl::Status CpuStream::copy(BufferRef src, BufferRef dst) {
  if (capture_)
    return record([=](CpuStream &s) { return s.copy(src, dst); }, {src, dst},
                  {}, checkCopy(src, dst));
  OMNI_ASSIGN_OR_RETURN(uint8_t *s, resolve(src, "copy source"));
  OMNI_ASSIGN_OR_RETURN(uint8_t *d, resolve(dst, "copy destination"));
  OMNI_RETURN_IF_ERROR(checkCopy(src, dst));
  if (src.length && s != d)
    std::memmove(d, s, static_cast<size_t>(src.length));
  return absl::OkStatus();
}

absl::Status CpuStream::fill(BufferRef dst, absl::Span<const uint8_t> pattern) {
  if (capture_)
    return record(
        [dst, p = std::vector<uint8_t>(pattern.begin(), pattern.end())](
            CpuStream &s) { return s.fill(dst, p); },
        {dst}, {}, checkFill(dst, pattern));
  OMNI_ASSIGN_OR_RETURN(uint8_t *d, resolve(dst, "fill destination"));
  OMNI_RETURN_IF_ERROR(checkFill(dst, pattern));
  const int64_t size = static_cast<int64_t>(pattern.size());
  if (dst.length == 0)
    return absl::OkStatus();
  bool uniform = true;
  for (uint8_t b : pattern)
    uniform &= b == pattern[0];
  if (uniform) {
    std::memset(d, pattern[0], static_cast<size_t>(dst.length));
    return absl::OkStatus();
  }
  // Write the pattern once, then double the filled prefix.
  std::memcpy(d, pattern.data(), pattern.size());
  int64_t filled = size;
  while (filled < dst.length) {
    int64_t n = std::min(filled, dst.length - filled);
    std::memcpy(d + filled, d, static_cast<size_t>(n));
    filled += n;
  }
  return absl::OkStatus();
}

absl::StatusOr<CpuStream::KernelCall>
CpuStream::prepareKernel(const Executable &executable, int64_t kernel,
                         int64_t grid, absl::Span<const BufferRef> buffers,
                         absl::Span<const int64_t> scalars) const {
  // Executables of this device are CpuExecutables.
  const auto &exe = static_cast<const CpuExecutable &>(executable);
  if (kernel < 0 || kernel >= exe.numKernels())
    return absl::InvalidArgumentError(
        absl::StrCat("kernel ", kernel, " of executable '", exe.name(),
                     "', which has ", exe.numKernels()));
  if (grid < 0)
    return absl::InvalidArgumentError(absl::StrCat("grid = ", grid));
  KernelCall call;
  call.fn = exe.kernel(kernel);
  call.pointers.reserve(buffers.size());
  for (const BufferRef &ref : buffers) {
    OMNI_ASSIGN_OR_RETURN(uint8_t *p, resolve(ref, "dispatch buffer"));
    call.pointers.push_back(p);
  }
  call.scalars.assign(scalars.begin(), scalars.end());
  return call;
}

absl::Status CpuStream::dispatch(const Executable &executable, int64_t kernel,
                                 int64_t grid,
                                 absl::Span<const BufferRef> buffers,
                                 absl::Span<const int64_t> scalars) {
  if (capture_)
    return record(
        [&executable, kernel, grid,
         b = std::vector<BufferRef>(buffers.begin(), buffers.end()),
         sc = std::vector<int64_t>(scalars.begin(), scalars.end())](
            CpuStream &s) {
          return s.dispatch(executable, kernel, grid, b, sc);
        },
        {}, buffers,
        prepareKernel(executable, kernel, grid, buffers, scalars).status());
  OMNI_ASSIGN_OR_RETURN(KernelCall call, prepareKernel(executable, kernel, grid,
                                                       buffers, scalars));
  device_.pool().parallelFor(
      grid, [&](int64_t begin, int64_t end) { call.run(begin, end); });
  return absl::OkStatus();
}

absl::StatusOr<CpuStream::RandomBuffers>
CpuStream::resolveRandom(DType dtype, int64_t count, BufferRef key,
                         BufferRef counter, BufferRef offset,
                         BufferRef result) const {
  if (!isFloatDType(dtype))
    return absl::InvalidArgumentError(absl::StrCat(
        "random numbers of ", dtypeName(dtype), " (expected a float type)"));
  RandomBuffers r;
  const std::pair<const char *, BufferRef> inputs[] = {
      {"random key", key},
      {"random counter", counter},
      {"random offset", offset}};
  for (int i = 0; i < 3; ++i) {
    OMNI_ASSIGN_OR_RETURN(r.words[i],
                          resolveSized(inputs[i].second, 8, inputs[i].first));
  }
  int64_t bytes = bytesOf({count}, dtype);
  if (bytes < 0)
    return absl::InvalidArgumentError(absl::StrCat("random count ", count));
  OMNI_ASSIGN_OR_RETURN(r.result, resolveSized(result, bytes, "random result"));
  return r;
}

absl::Status CpuStream::random(Distribution distribution, DType dtype,
                               int64_t count, BufferRef key, BufferRef counter,
                               BufferRef offset, BufferRef result) {
  if (capture_)
    return record(
        [=](CpuStream &s) {
          return s.random(distribution, dtype, count, key, counter, offset,
                          result);
        },
        {key, counter, offset, result}, {},
        resolveRandom(dtype, count, key, counter, offset, result).status());
  OMNI_ASSIGN_OR_RETURN(
      RandomBuffers r,
      resolveRandom(dtype, count, key, counter, offset, result));
  int64_t words[3];
  for (int i = 0; i < 3; ++i)
    std::memcpy(&words[i], r.words[i], 8);
  uint8_t *out = r.result;
  const int64_t seed = words[0], stream = words[1], first = words[2];
  auto generate = [&](int64_t begin, float *values, int64_t n) {
    // Positions wrap modulo 2^64 (docs/rng.md): add as unsigned.
    int64_t position = static_cast<int64_t>(static_cast<uint64_t>(first) +
                                            static_cast<uint64_t>(begin));
    if (distribution == Distribution::Normal)
      flowgrpo::philoxNormal(seed, stream, position, values, n);
    else
      flowgrpo::philoxUniform(seed, stream, position, values, n);
  };
  device_.pool().parallelFor(count, 4096, [&](int64_t begin, int64_t end) {
    if (dtype == DType::F32) {
      generate(begin, reinterpret_cast<float *>(out) + begin, end - begin);
      return;
    }
    constexpr int64_t kBlock = 1024;
    float values[kBlock];
    for (int64_t b = begin; b < end; b += kBlock) {
      int64_t n = std::min(kBlock, end - b);
      generate(b, values, n);
      for (int64_t i = 0; i < n; ++i) {
        int64_t j = b + i;
        if (dtype == DType::F64) {
          double v = values[i];
          std::memcpy(out + 8 * j, &v, 8);
        } else {
          uint16_t bits = dtype == DType::F16 ? halfBitsFromDouble(values[i])
                                              : bf16BitsFromDouble(values[i]);
          std::memcpy(out + 2 * j, &bits, 2);
        }
      }
    }
  });
  return absl::OkStatus();
}

absl::StatusOr<CpuStream::MatmulBuffers>
CpuStream::resolveMatmul(const MatmulParams &p, BufferRef lhs, BufferRef rhs,
                         BufferRef result) const {
  if (!device_.supportsLibrary(Library::Matmul, p.dtype))
    return absl::UnimplementedError(absl::StrCat(
        "the cpu Matmul supports f32, f64 and bf16, not ", dtypeName(p.dtype)));
  int64_t lhsRows = p.transposeLhs ? p.k : p.m,
          lhsCols = p.transposeLhs ? p.m : p.k;
  int64_t rhsRows = p.transposeRhs ? p.n : p.k,
          rhsCols = p.transposeRhs ? p.k : p.n;
  MatmulBuffers m;
  OMNI_ASSIGN_OR_RETURN(
      m.a,
      resolveSized(lhs, bytesOf({p.batch, lhsRows, lhsCols}, p.dtype), "lhs"));
  OMNI_ASSIGN_OR_RETURN(
      m.b,
      resolveSized(
          rhs, bytesOf({p.rhsShared ? 1 : p.batch, rhsRows, rhsCols}, p.dtype),
          "rhs"));
  OMNI_ASSIGN_OR_RETURN(
      m.c,
      resolveSized(result, bytesOf({p.batch, p.m, p.n}, p.dtype), "result"));
  return m;
}

absl::Status CpuStream::matmul(const MatmulParams &p, BufferRef lhs,
                               BufferRef rhs, BufferRef result) {
  if (capture_)
    return record([=](CpuStream &s) { return s.matmul(p, lhs, rhs, result); },
                  {lhs, rhs, result}, {},
                  resolveMatmul(p, lhs, rhs, result).status());
  OMNI_ASSIGN_OR_RETURN(MatmulBuffers m, resolveMatmul(p, lhs, rhs, result));
  return runMatmul(p, m.a, m.b, m.c, device_.pool());
}

absl::Status CpuStream::checkEpilogue(const MatmulParams &p, BufferRef lhs,
                                      BufferRef rhs, BufferRef result,
                                      const Epilogue &e) const {
  OMNI_RETURN_IF_ERROR(resolveMatmul(p, lhs, rhs, result).status());
  if (e.itemBytes.size() != e.buffers.size() ||
      e.numOperands > e.buffers.size())
    return absl::InvalidArgumentError(absl::StrCat(
        "the epilogue has ", e.buffers.size(), " buffers, ", e.numOperands,
        " operands and ", e.itemBytes.size(), " item sizes"));
  return prepareKernel(*e.executable, e.kernel, e.grid, e.buffers, e.scalars)
      .status();
}

absl::Status CpuStream::matmulWithEpilogue(const MatmulParams &p, BufferRef lhs,
                                           BufferRef rhs, BufferRef result,
                                           const Epilogue &e) {
  if (capture_) {
    // The epilogue's spans are copied; the closure points a copy of it at
    // them when it runs.
    struct Saved {
      Epilogue e;
      std::vector<BufferRef> buffers;
      std::vector<int64_t> scalars, itemBytes;
    };
    auto saved = std::make_shared<Saved>(
        Saved{e,
              {e.buffers.begin(), e.buffers.end()},
              {e.scalars.begin(), e.scalars.end()},
              {e.itemBytes.begin(), e.itemBytes.end()}});
    return record(
        [=](CpuStream &s) {
          Epilogue copy = saved->e;
          copy.buffers = saved->buffers;
          copy.scalars = saved->scalars;
          copy.itemBytes = saved->itemBytes;
          return s.matmulWithEpilogue(p, lhs, rhs, result, copy);
        },
        {lhs, rhs, result}, e.buffers, checkEpilogue(p, lhs, rhs, result, e));
  }
  OMNI_RETURN_IF_ERROR(checkEpilogue(p, lhs, rhs, result, e));
  OMNI_ASSIGN_OR_RETURN(MatmulBuffers m, resolveMatmul(p, lhs, rhs, result));
  OMNI_ASSIGN_OR_RETURN(
      KernelCall call,
      prepareKernel(*e.executable, e.kernel, e.grid, e.buffers, e.scalars));
  std::vector<ByteRange> ranges;
  for (size_t i = 0; i < e.buffers.size(); ++i)
    ranges.push_back({call.pointers[i], e.buffers[i].length});
  MatmulEpilogue epilogue;
  epilogue.run = [&](int64_t begin, int64_t end) {
    if (begin < end)
      call.run(begin, end);
  };
  epilogue.grid = e.grid;
  epilogue.resultItemBytes = e.resultItemBytes;
  epilogue.perBlock = epilogueMayRunPerBlock(
      {m.a, lhs.length}, {m.b, rhs.length}, {m.c, result.length}, ranges,
      e.numOperands, e.itemBytes, e.resultItemBytes);
  return runMatmul(p, m.a, m.b, m.c, device_.pool(), &epilogue);
}

absl::Status CpuStream::conv2d(const Conv2dParams &p, BufferRef input,
                               BufferRef filter, BufferRef result) {
  if (capture_)
    return record(
        [=](CpuStream &s) { return s.conv2d(p, input, filter, result); },
        {input, filter, result});
  if (!device_.supportsLibrary(Library::Conv2d, p.dtype))
    return absl::UnimplementedError(absl::StrCat(
        "the cpu Conv2d supports f32, f64 and bf16, not ", dtypeName(p.dtype)));
  OMNI_ASSIGN_OR_RETURN(
      uint8_t *x,
      resolveSized(input, bytesOf({p.n, p.c, p.h, p.w}, p.dtype), "input"));
  OMNI_ASSIGN_OR_RETURN(
      uint8_t *w,
      resolveSized(filter, bytesOf({p.o, p.c, p.kh, p.kw}, p.dtype), "filter"));
  OMNI_ASSIGN_OR_RETURN(
      uint8_t *y,
      resolveSized(result, bytesOf({p.n, p.o, p.outH, p.outW}, p.dtype),
                   "result"));
  return runConv2d(p, x, w, y, device_.pool());
}

absl::Status CpuStream::attention(const AttentionParams &p, BufferRef q,
                                  BufferRef k, BufferRef v, BufferRef mask,
                                  BufferRef result) {
  if (capture_)
    return record(
        [=](CpuStream &s) { return s.attention(p, q, k, v, mask, result); },
        {q, k, v, mask, result});
  if (!device_.supportsLibrary(Library::Attention, p.dtype))
    return absl::UnimplementedError(
        absl::StrCat("the cpu Attention supports f32, f64 and bf16, not ",
                     dtypeName(p.dtype)));
  OMNI_ASSIGN_OR_RETURN(
      uint8_t *qp,
      resolveSized(q, bytesOf({p.batch, p.heads, p.seqQ, p.headDim}, p.dtype),
                   "query"));
  OMNI_ASSIGN_OR_RETURN(
      uint8_t *kp,
      resolveSized(k, bytesOf({p.batch, p.heads, p.seqK, p.headDim}, p.dtype),
                   "key"));
  OMNI_ASSIGN_OR_RETURN(
      uint8_t *vp,
      resolveSized(v, bytesOf({p.batch, p.heads, p.seqK, p.valueDim}, p.dtype),
                   "value"));
  uint8_t *mp = nullptr;
  if (p.hasMask) {
    OMNI_ASSIGN_OR_RETURN(mp,
                          resolveSized(mask, attentionMaskBytes(p), "mask"));
  }
  OMNI_ASSIGN_OR_RETURN(
      uint8_t *out,
      resolveSized(result,
                   bytesOf({p.batch, p.heads, p.seqQ, p.valueDim}, p.dtype),
                   "result"));
  return runAttention(p, qp, kp, vp, mp, out, device_.pool());
}

absl::Status CpuStream::attentionBackward(const AttentionParams &p, BufferRef q,
                                          BufferRef k, BufferRef v,
                                          BufferRef mask, BufferRef o,
                                          BufferRef dO, BufferRef dq,
                                          BufferRef dk, BufferRef dv) {
  if (capture_)
    return record(
        [=](CpuStream &s) {
          return s.attentionBackward(p, q, k, v, mask, o, dO, dq, dk, dv);
        },
        {q, k, v, mask, o, dO, dq, dk, dv});
  if (!device_.supportsLibrary(Library::AttentionBackward, p.dtype))
    return absl::UnimplementedError(
        absl::StrCat("the cpu AttentionBackward supports f32 and bf16, not ",
                     dtypeName(p.dtype)));
  const int64_t qs = bytesOf({p.batch, p.heads, p.seqQ, p.headDim}, p.dtype),
                ks = bytesOf({p.batch, p.heads, p.seqK, p.headDim}, p.dtype),
                vs = bytesOf({p.batch, p.heads, p.seqK, p.valueDim}, p.dtype),
                os = bytesOf({p.batch, p.heads, p.seqQ, p.valueDim}, p.dtype);
  OMNI_ASSIGN_OR_RETURN(uint8_t *qp, resolveSized(q, qs, "query"));
  OMNI_ASSIGN_OR_RETURN(uint8_t *kp, resolveSized(k, ks, "key"));
  OMNI_ASSIGN_OR_RETURN(uint8_t *vp, resolveSized(v, vs, "value"));
  OMNI_ASSIGN_OR_RETURN(uint8_t *op, resolveSized(o, os, "output"));
  OMNI_ASSIGN_OR_RETURN(uint8_t *dop, resolveSized(dO, os, "d_output"));
  OMNI_ASSIGN_OR_RETURN(uint8_t *dqp, resolveSized(dq, qs, "d_query"));
  OMNI_ASSIGN_OR_RETURN(uint8_t *dkp, resolveSized(dk, ks, "d_key"));
  OMNI_ASSIGN_OR_RETURN(uint8_t *dvp, resolveSized(dv, vs, "d_value"));
  uint8_t *mp = nullptr;
  if (p.hasMask) {
    OMNI_ASSIGN_OR_RETURN(mp,
                          resolveSized(mask, attentionMaskBytes(p), "mask"));
  }
  return runAttentionBackward(p, qp, kp, vp, mp, op, dop, dqp, dkp, dvp,
                              device_.pool());
}

absl::StatusOr<std::shared_ptr<Event>> CpuStream::recordEvent() {
  if (capture_)
    return refuseWhileCapturing("recordEvent");
  return std::shared_ptr<Event>(std::make_shared<CompleteEvent>());
}

absl::Status CpuStream::waitEvent(const std::shared_ptr<Event> &event) {
  if (capture_)
    return refuseWhileCapturing("waitEvent");
  // Another stream of this device ran its commands eagerly too; waiting only
  // collects its status.
  return event ? event->wait() : absl::OkStatus();
}

absl::Status CpuStream::synchronize() {
  if (capture_)
    return refuseWhileCapturing("synchronize");
  return absl::OkStatus();
}

//===----------------------------------------------------------------------===//
// Graphs
//===----------------------------------------------------------------------===//

absl::Status CpuStream::record(Recorded command,
                               std::initializer_list<BufferRef> refs,
                               absl::Span<const BufferRef> more,
                               absl::Status checked) {
  if (!capture_->failure.ok())
    return capture_->failure;
  const absl::Span<const BufferRef> lists[] = {
      absl::MakeConstSpan(refs.begin(), refs.size()), more};
  for (absl::Span<const BufferRef> list : lists)
    for (const BufferRef &ref : list) {
      if (!ref.buffer)
        continue;
      if (absl::StatusOr<uint8_t *> p = resolve(ref, "captured buffer");
          !p.ok()) {
        capture_->failure = p.status();
        return p.status();
      }
    }
  if (!checked.ok()) {
    capture_->failure = checked;
    return checked;
  }
  capture_->commands.push_back(std::move(command));
  return absl::OkStatus();
}

absl::Status CpuStream::refuseWhileCapturing(const char *what) {
  absl::Status refused = absl::FailedPreconditionError(
      absl::StrCat(what, " while the stream captures a graph"));
  if (capture_->failure.ok())
    capture_->failure = refused;
  return refused;
}

absl::Status CpuStream::beginCapture() {
  if (capture_)
    return absl::FailedPreconditionError("the stream is already capturing");
  capture_ = std::make_unique<Capture>();
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Graph>> CpuStream::endCapture() {
  if (!capture_)
    return absl::FailedPreconditionError("the stream is not capturing");
  std::unique_ptr<Capture> capture = std::move(capture_);
  if (!capture->failure.ok())
    return absl::FailedPreconditionError(
        absl::StrCat("the capture failed: ", capture->failure.message()));
  return std::unique_ptr<Graph>(
      std::make_unique<CpuGraph>(device_, std::move(capture->commands)));
}

absl::Status CpuStream::launchGraph(const Graph &graph) {
  if (capture_)
    return refuseWhileCapturing("launchGraph");
  const auto *g = dynamic_cast<const CpuGraph *>(&graph);
  if (!g || &g->device != &device_)
    return absl::InvalidArgumentError(
        "launchGraph: the graph was not captured on this device");
  for (size_t i = 0; i < g->commands.size(); ++i)
    if (absl::Status done = g->commands[i](*this); !done.ok())
      return absl::Status(done.code(), absl::StrCat("graph command ", i, " of ",
                                                    g->commands.size(), ": ",
                                                    done.message()));
  return absl::OkStatus();
}

} // namespace omni::hal::cpu
