//===- VerifyCommands.cpp - The loader's rules per command kind -*- C++ -*-===//
//
// The half of ProgramVerifier that checks commands (VerifyImpl.h): every
// operand index, every shape rule of a library call (the attribute orders
// are documented in step.fbs), copy ranges including those scaled by an
// enclosing Loop's induction variable, index-register writes, Loop nesting
// and Call signatures.
//
//===----------------------------------------------------------------------===//

#include "runtime/loader/VerifyImpl.h"

#include "absl/strings/str_join.h"

#include <cmath>
#include <tuple>

namespace omni::loader {

using namespace detail;

absl::Status
ProgramVerifier::checkCommands(FunctionContext &ctx,
                               const Vector<Offset<step::Command>> *commands,
                               const std::string &prefix) {
  for (uint32_t i = 0; i < sizeOf(commands); ++i) {
    const step::Command *command = commands->Get(i);
    std::string at = absl::StrCat(prefix, "[", i, "]");
    step::CommandKind kind = command->kind_type();
    if (kind == step::CommandKind::NONE)
      return fail(at, "kind is NONE but every command needs a kind");
    if (kind > step::CommandKind::MAX)
      return fail(at, absl::StrCat("kind = ", static_cast<int>(kind),
                                   " but valid kinds are 1..11 (Dispatch, "
                                   "LibraryCall, Copy, Fill, Random, "
                                   "HostCall, ScalarOp, Loop, Call, "
                                   "Collective, AxisIndex)"));
    std::string where = absl::StrCat(at, " (", commandKindName(kind), ")");
    if (!command->kind())
      return fail(where, "the command's table is missing");
    switch (kind) {
    case step::CommandKind::Dispatch:
      OMNI_RETURN_IF_ERROR(
          checkDispatch(ctx, where, *command->kind_as_Dispatch()));
      if (i > 0)
        if (const step::LibraryCall *call =
                commands->Get(i - 1)->kind_as_LibraryCall();
            call && call->epilogue())
          OMNI_RETURN_IF_ERROR(
              checkEpilogue(ctx, where, *call, *command->kind_as_Dispatch()));
      break;
    case step::CommandKind::LibraryCall: {
      const step::LibraryCall &call = *command->kind_as_LibraryCall();
      OMNI_RETURN_IF_ERROR(checkLibraryCall(ctx, at, call));
      if (!call.epilogue())
        break;
      if (call.library() != step::Library::Matmul)
        return fail(where, absl::StrCat("has an epilogue but is ",
                                        step::EnumNameLibrary(call.library()),
                                        "; only a Matmul takes one"));
      if (i + 1 >= sizeOf(commands) ||
          commands->Get(i + 1)->kind_type() != step::CommandKind::Dispatch)
        return fail(where, "has an epilogue but the next command of its list "
                           "is not a Dispatch");
      break;
    }
    case step::CommandKind::Copy:
      OMNI_RETURN_IF_ERROR(checkCopy(ctx, where, *command->kind_as_Copy()));
      break;
    case step::CommandKind::Fill:
      OMNI_RETURN_IF_ERROR(checkFill(ctx, where, *command->kind_as_Fill()));
      break;
    case step::CommandKind::Random:
      OMNI_RETURN_IF_ERROR(checkRandom(ctx, where, *command->kind_as_Random()));
      break;
    case step::CommandKind::HostCall:
      OMNI_RETURN_IF_ERROR(
          checkHostCall(ctx, where, *command->kind_as_HostCall()));
      break;
    case step::CommandKind::ScalarOp:
      OMNI_RETURN_IF_ERROR(
          checkScalarOp(ctx, at, *command->kind_as_ScalarOp()));
      break;
    case step::CommandKind::Loop:
      OMNI_RETURN_IF_ERROR(checkLoop(ctx, at, where, *command->kind_as_Loop()));
      break;
    case step::CommandKind::Call:
      OMNI_RETURN_IF_ERROR(checkCall(ctx, where, *command->kind_as_Call()));
      break;
    case step::CommandKind::Collective:
      OMNI_RETURN_IF_ERROR(
          checkCollective(ctx, at, *command->kind_as_Collective()));
      break;
    case step::CommandKind::AxisIndex:
      OMNI_RETURN_IF_ERROR(
          checkAxisIndex(ctx, where, *command->kind_as_AxisIndex()));
      break;
    default:
      break;
    }
  }
  return absl::OkStatus();
}

namespace {

enum class Overlap { Apart, Same, Partial };

/// How the bytes of two tensors of one Dispatch relate, as far as step.bin
/// says: arena ranges, and the same state slot or argument (whose aliases
/// have its bytes).
Overlap overlapOf(const TensorInfo &x, const TensorInfo &y) {
  if (x.storage != y.storage || x.bytes == 0 || y.bytes == 0)
    return Overlap::Apart;
  if (x.storage == step::Storage::Arena) {
    if (x.index + x.bytes <= y.index || y.index + y.bytes <= x.index)
      return Overlap::Apart;
    return x.index == y.index && x.bytes == y.bytes ? Overlap::Same
                                                    : Overlap::Partial;
  }
  if (x.index != y.index)
    return Overlap::Apart;
  return x.bytes == y.bytes ? Overlap::Same : Overlap::Partial;
}

bool pairListed(const flatbuffers::Vector<uint32_t> &pairs, uint32_t operand,
                uint32_t result) {
  for (uint32_t p = 0; p + 1 < pairs.size(); p += 2)
    if (pairs.Get(p) == operand && pairs.Get(p + 1) == result)
      return true;
  return false;
}

} // namespace

absl::Status ProgramVerifier::checkDispatch(FunctionContext &ctx,
                                            const std::string &where,
                                            const step::Dispatch &d) {
  uint32_t numExecutables = sizeOf(step_.executables());
  if (d.executable() >= numExecutables)
    return fail(where,
                absl::StrCat("executable = ", d.executable(), " but there are ",
                             numExecutables, " executables"));
  const step::Executable *exe = step_.executables()->Get(d.executable());
  uint32_t numKernels = sizeOf(exe->kernels());
  if (d.kernel() >= numKernels)
    return fail(where,
                absl::StrCat("kernel = ", d.kernel(), " but executables[",
                             d.executable(), "] ('", str(exe->name()),
                             "') exports ", numKernels, " kernels"));
  if (d.grid() < 0)
    return fail(where,
                absl::StrCat("grid = ", d.grid(), " but it must be >= 0"));
  OMNI_RETURN_IF_ERROR(
      checkTensorList(ctx, where, "operands", d.operands(), Access::Read));
  OMNI_RETURN_IF_ERROR(
      checkTensorList(ctx, where, "results", d.results(), Access::Write));
  for (uint32_t i = 0; i < sizeOf(d.scalars()); ++i)
    OMNI_RETURN_IF_ERROR(scalarInRange(where, absl::StrCat("scalars[", i, "]"),
                                       d.scalars()->Get(i)));
  // The kernel's signature (checkExecutables checked there is one per
  // kernel): native code runs only against the buffers it was compiled for.
  const step::KernelSignature &sig = *exe->signatures()->Get(d.kernel());
  std::string at = absl::StrCat(where, " in '", ctx.name, "'");
  std::string kernel =
      absl::StrCat("kernel '", str(exe->kernels()->Get(d.kernel())), "'");
  if (d.grid() != sig.grid())
    return fail(at, sig.grid() < 0
                        ? absl::StrCat("dispatches ", kernel,
                                       ", which its signature marks as never "
                                       "run (grid -1)")
                        : absl::StrCat("grid = ", d.grid(), " but ", kernel,
                                       " was compiled for grid ", sig.grid()));
  for (auto [field, list, expected, verb] :
       {std::tuple{"operands", d.operands(), sig.operands(), "reads"},
        std::tuple{"results", d.results(), sig.results(), "writes"}}) {
    if (sizeOf(list) != sizeOf(expected))
      return fail(at, absl::StrCat(field, " has ", sizeOf(list),
                                   " entries but ", kernel, " ", verb, " ",
                                   sizeOf(expected), " buffers"));
    for (uint32_t i = 0; i < sizeOf(list); ++i) {
      const TensorInfo &info = program_.tensors_[list->Get(i)];
      const step::KernelBuffer &want = *expected->Get(i);
      DType dtype = toDType(want.dtype());
      if (info.dtype != dtype || info.bytes != want.bytes())
        return fail(at, absl::StrCat(field, "[", i, "] is ",
                                     describe(list->Get(i)), " but ", kernel,
                                     " ", verb, " ", dtypeName(dtype), " x ",
                                     want.bytes(), " bytes there"));
    }
  }
  if (sizeOf(d.scalars()) != sig.num_scalars())
    return fail(at, absl::StrCat("scalars has ", sizeOf(d.scalars()),
                                 " entries but ", kernel, " reads ",
                                 sig.num_scalars(), " index registers"));
  // A kernel writes each result apart from its other buffers, or over one
  // operand whole (the memory plan's in-place rule); GPU code only over
  // the operands it was compiled for, its other parameters being noalias.
  const step::GpuKernel *gpu =
      exe->gpu_kernels() ? exe->gpu_kernels()->Get(d.kernel()) : nullptr;
  uint32_t numOperands = sizeOf(d.operands());
  for (uint32_t r = 0; r < sizeOf(d.results()); ++r) {
    uint32_t result = d.results()->Get(r);
    for (uint32_t j = 0; j < numOperands + r; ++j) {
      bool operand = j < numOperands;
      uint32_t other =
          operand ? d.operands()->Get(j) : d.results()->Get(j - numOperands);
      Overlap o =
          overlapOf(program_.tensors_[result], program_.tensors_[other]);
      if (o == Overlap::Apart)
        continue;
      std::string name = operand
                             ? absl::StrCat("operands[", j, "]")
                             : absl::StrCat("results[", j - numOperands, "]");
      if (o == Overlap::Partial || !operand)
        return fail(
            at, absl::StrCat("results[", r, "] (", describe(result), ") and ",
                             name, " (", describe(other), ") share ",
                             o == Overlap::Partial ? "some" : "all their",
                             " bytes, but a kernel writes a result apart from "
                             "its other buffers or over one operand whole"));
      if (gpu && gpu->in_place() && !pairListed(*gpu->in_place(), j, r))
        return fail(at, absl::StrCat("results[", r, "] is written over ", name,
                                     " (", describe(other), ") but ", kernel,
                                     " was compiled with them apart "
                                     "(in_place does not pair them)"));
    }
  }
  return absl::OkStatus();
}

absl::Status ProgramVerifier::checkEpilogue(FunctionContext &ctx,
                                            const std::string &where,
                                            const step::LibraryCall &call,
                                            const step::Dispatch &d) {
  // checkDispatch has checked the indices and the signature.
  const step::Executable *exe = step_.executables()->Get(d.executable());
  const step::KernelSignature &sig = *exe->signatures()->Get(d.kernel());
  std::string at = absl::StrCat(where, " in '", ctx.name, "'");
  std::string kernel =
      absl::StrCat("kernel '", str(exe->kernels()->Get(d.kernel())), "'");
  if (!sig.item_bytes())
    return fail(at, absl::StrCat("is the epilogue of the Matmul before it but ",
                                 kernel, " has no item_bytes"));
  const uint32_t result = call.results()->Get(0);
  const int64_t bytes = program_.tensors_[result].bytes;
  bool reads = false;
  for (uint32_t i = 0; i < sizeOf(d.operands()); ++i) {
    // The result or a view of it (a reshape: the same bytes).
    if (!program_.sameBuffer(d.operands()->Get(i), result))
      continue;
    reads = true;
    // Item w reads bytes [w b, (w + 1) b) of the result: the items must
    // tile it, the last one ending in it.
    const int64_t b = sig.item_bytes()->Get(i);
    if (b == 0 || b > bytes || (bytes + b - 1) / b != d.grid())
      return fail(at,
                  absl::StrCat("is the epilogue of the Matmul before it "
                               "but reads its result (",
                               describe(result), ") as operands[", i,
                               "] with item_bytes ", b, " over grid ", d.grid(),
                               ", which are not slices that tile it"));
  }
  if (!reads)
    return fail(at, absl::StrCat("is the epilogue of the Matmul before it but "
                                 "does not read its result (",
                                 describe(result), ")"));
  return absl::OkStatus();
}

absl::Status ProgramVerifier::expectCount(const std::string &where,
                                          const char *field, uint32_t have,
                                          uint32_t want,
                                          absl::string_view names) const {
  if (have != want)
    return fail(where,
                absl::StrCat(field, " has ", have, " entries but expected ",
                             want, names.empty() ? "" : " (", names,
                             names.empty() ? "" : ")"));
  return absl::OkStatus();
}

const TensorInfo &ProgramVerifier::lib(const step::LibraryCall &c,
                                       uint32_t i) const {
  return program_.tensors_[c.operands()->Get(i)];
}

absl::Status ProgramVerifier::sameFloatDType(
    const std::string &where,
    const std::vector<std::pair<std::string, uint32_t>> &tensors) const {
  const TensorInfo &first = program_.tensors_[tensors[0].second];
  if (!isFloatDType(first.dtype))
    return fail(where,
                absl::StrCat(tensors[0].first, " is ", first.typeString(),
                             " but expected a float tensor"));
  for (size_t i = 1; i < tensors.size(); ++i) {
    const TensorInfo &info = program_.tensors_[tensors[i].second];
    if (info.dtype != first.dtype)
      return fail(where, absl::StrCat(
                             tensors[i].first, " is ", info.typeString(),
                             " but ", tensors[0].first, " is ",
                             first.typeString(), ": element types must match"));
  }
  return absl::OkStatus();
}

absl::Status ProgramVerifier::expectRank(const std::string &where,
                                         const std::string &role,
                                         const TensorInfo &info,
                                         size_t rank) const {
  if (info.shape.size() != rank)
    return fail(where, absl::StrCat(role, " is ", info.typeString(),
                                    " but expected rank ", rank));
  return absl::OkStatus();
}

absl::Status ProgramVerifier::expectResult(const std::string &where,
                                           const TensorInfo &result,
                                           const std::vector<int64_t> &shape,
                                           absl::string_view how) const {
  if (result.shape != shape)
    return fail(where,
                absl::StrCat("result is ", result.typeString(), " but ", how,
                             " gives ", tensorTypeString(result.dtype, shape)));
  return absl::OkStatus();
}

absl::Status ProgramVerifier::checkLibraryCall(FunctionContext &ctx,
                                               const std::string &at,
                                               const step::LibraryCall &c) {
  step::Library library = c.library();
  if (library < step::Library::MIN || library > step::Library::MAX) {
    std::string where = at + " (LibraryCall)";
    return fail(where, absl::StrCat("library = ", static_cast<int>(library),
                                    " but valid libraries are 0..3 (Matmul, "
                                    "Conv2d, Attention, AttentionBackward)"));
  }
  std::string where =
      absl::StrCat(at, " (LibraryCall ", step::EnumNameLibrary(library), ")");
  OMNI_RETURN_IF_ERROR(
      checkTensorList(ctx, where, "operands", c.operands(), Access::Read));
  OMNI_RETURN_IF_ERROR(
      checkTensorList(ctx, where, "results", c.results(), Access::Write));
  const bool backward = library == step::Library::AttentionBackward;
  OMNI_RETURN_IF_ERROR(
      expectCount(where, "results", sizeOf(c.results()), backward ? 3 : 1,
                  backward ? "d_query, d_key, d_value" : "result"));
  const TensorInfo &result = program_.tensors_[c.results()->Get(0)];
  uint32_t numInt = sizeOf(c.int_attrs());
  uint32_t numFloat = sizeOf(c.float_attrs());
  auto intAttr = [&](uint32_t i) { return c.int_attrs()->Get(i); };
  auto flag = [&](uint32_t i, const char *name) -> absl::Status {
    if (intAttr(i) != 0 && intAttr(i) != 1)
      return fail(where, absl::StrCat("int_attrs[", i, "] (", name, ") = ",
                                      intAttr(i), " but expected 0 or 1"));
    return absl::OkStatus();
  };

  // Attention's and AttentionBackward's float_attrs: [] or [scale > 0].
  auto optionalScale = [&]() -> absl::Status {
    if (numFloat > 1)
      return fail(where, absl::StrCat("float_attrs has ", numFloat,
                                      " entries but expected 0 or 1 "
                                      "(scale)"));
    if (numFloat == 1) {
      double scale = c.float_attrs()->Get(0);
      if (!(scale > 0) || !std::isfinite(scale))
        return fail(where, absl::StrCat("float_attrs[0] (scale) = ", scale,
                                        " but expected a finite value > 0"));
    }
    return absl::OkStatus();
  };

  // Attention's and AttentionBackward's mask, operand `i`: [B|1, H|1, Sq,
  // Sk] for query q and key k.
  auto checkMask = [&](uint32_t i, const TensorInfo &q,
                       const TensorInfo &k) -> absl::Status {
    const TensorInfo &mask = lib(c, i);
    OMNI_RETURN_IF_ERROR(expectRank(where, "mask", mask, 4));
    bool ok = (mask.shape[0] == q.shape[0] || mask.shape[0] == 1) &&
              (mask.shape[1] == q.shape[1] || mask.shape[1] == 1) &&
              mask.shape[2] == q.shape[2] && mask.shape[3] == k.shape[2];
    if (!ok)
      return fail(where,
                  absl::StrCat("mask is ", mask.typeString(), " but expected [",
                               q.shape[0], "|1, ", q.shape[1], "|1, ",
                               q.shape[2], ", ", k.shape[2], "]"));
    return absl::OkStatus();
  };

  switch (library) {
  case step::Library::Matmul: {
    OMNI_RETURN_IF_ERROR(
        expectCount(where, "operands", sizeOf(c.operands()), 2, "lhs, rhs"));
    OMNI_RETURN_IF_ERROR(expectCount(where, "int_attrs", numInt, 2,
                                     "transpose_lhs, transpose_rhs"));
    OMNI_RETURN_IF_ERROR(expectCount(where, "float_attrs", numFloat, 0, ""));
    OMNI_RETURN_IF_ERROR(flag(0, "transpose_lhs"));
    OMNI_RETURN_IF_ERROR(flag(1, "transpose_rhs"));
    OMNI_RETURN_IF_ERROR(
        sameFloatDType(where, {{"lhs", c.operands()->Get(0)},
                               {"rhs", c.operands()->Get(1)},
                               {"result", c.results()->Get(0)}}));
    const TensorInfo &lhs = lib(c, 0), &rhs = lib(c, 1);
    size_t rank = lhs.shape.size();
    if (rank < 2)
      return fail(where, absl::StrCat("lhs is ", lhs.typeString(),
                                      " but expected rank >= 2"));
    if (rhs.shape.size() != 2 && rhs.shape.size() != rank)
      return fail(where,
                  absl::StrCat("rhs is ", rhs.typeString(),
                               " but expected rank 2 (shared by every batch) "
                               "or rank ",
                               rank, " (the rank of lhs)"));
    for (size_t d = 0; rhs.shape.size() == rank && d + 2 < rank; ++d)
      if (rhs.shape[d] != lhs.shape[d])
        return fail(where, absl::StrCat("rhs is ", rhs.typeString(),
                                        " and lhs is ", lhs.typeString(),
                                        ": batch dimension ", d, " differs"));
    bool tl = intAttr(0), tr = intAttr(1);
    const int64_t *l = lhs.shape.data() + rank - 2;
    const int64_t *r = rhs.shape.data() + rhs.shape.size() - 2;
    int64_t m = tl ? l[1] : l[0], kl = tl ? l[0] : l[1];
    int64_t kr = tr ? r[1] : r[0], n = tr ? r[0] : r[1];
    if (kl != kr)
      return fail(where,
                  absl::StrCat("lhs is ", lhs.typeString(), " and rhs is ",
                               rhs.typeString(), ": contraction sizes ", kl,
                               " and ", kr, " differ"));
    std::vector<int64_t> shape(lhs.shape.begin(), lhs.shape.end() - 2);
    shape.push_back(m);
    shape.push_back(n);
    return expectResult(where, result, shape, "lhs x rhs");
  }
  case step::Library::Conv2d: {
    OMNI_RETURN_IF_ERROR(expectCount(where, "operands", sizeOf(c.operands()), 2,
                                     "input, filter"));
    OMNI_RETURN_IF_ERROR(expectCount(
        where, "int_attrs", numInt, 6,
        "stride_h, stride_w, padding_h, padding_w, dilation_h, dilation_w"));
    OMNI_RETURN_IF_ERROR(expectCount(where, "float_attrs", numFloat, 0, ""));
    static const char *names[] = {"stride_h",  "stride_w",   "padding_h",
                                  "padding_w", "dilation_h", "dilation_w"};
    for (uint32_t i = 0; i < 6; ++i) {
      int64_t min = (i == 2 || i == 3) ? 0 : 1;
      if (intAttr(i) < min)
        return fail(where,
                    absl::StrCat("int_attrs[", i, "] (", names[i],
                                 ") = ", intAttr(i), " but expected >= ", min));
    }
    OMNI_RETURN_IF_ERROR(
        sameFloatDType(where, {{"input", c.operands()->Get(0)},
                               {"filter", c.operands()->Get(1)},
                               {"result", c.results()->Get(0)}}));
    const TensorInfo &input = lib(c, 0), &filter = lib(c, 1);
    OMNI_RETURN_IF_ERROR(expectRank(where, "input", input, 4));
    OMNI_RETURN_IF_ERROR(expectRank(where, "filter", filter, 4));
    if (filter.shape[1] != input.shape[1])
      return fail(where, absl::StrCat("filter is ", filter.typeString(),
                                      " but the input ", input.typeString(),
                                      " has ", input.shape[1], " channels"));
    std::vector<int64_t> shape = {input.shape[0], filter.shape[0]};
    for (int d = 0; d < 2; ++d) {
      __int128 size = input.shape[2 + d], kernel = filter.shape[2 + d];
      __int128 stride = intAttr(d), pad = intAttr(2 + d),
               dilation = intAttr(4 + d);
      __int128 span = size + 2 * pad - dilation * (kernel - 1) - 1;
      if (span < 0 || kernel == 0)
        return fail(where,
                    absl::StrCat("the output would be empty along ",
                                 d ? "W" : "H", ": input ", input.typeString(),
                                 ", filter ", filter.typeString(), ", padding ",
                                 int128String(pad), ", dilation ",
                                 int128String(dilation)));
      shape.push_back(static_cast<int64_t>(span / stride + 1));
    }
    return expectResult(where, result, shape, "the convolution");
  }
  case step::Library::Attention: {
    uint32_t numOperands = sizeOf(c.operands());
    if (numOperands != 3 && numOperands != 4)
      return fail(where, absl::StrCat("operands has ", numOperands,
                                      " entries but expected 3 (query, key, "
                                      "value) or 4 (and mask)"));
    OMNI_RETURN_IF_ERROR(
        expectCount(where, "int_attrs", numInt, 1, "has_mask"));
    OMNI_RETURN_IF_ERROR(flag(0, "has_mask"));
    if (intAttr(0) != numOperands - 3)
      return fail(where,
                  absl::StrCat("int_attrs[0] (has_mask) = ", intAttr(0),
                               " but there are ", numOperands, " operands"));
    OMNI_RETURN_IF_ERROR(optionalScale());
    std::vector<std::pair<std::string, uint32_t>> all = {
        {"query", c.operands()->Get(0)},
        {"key", c.operands()->Get(1)},
        {"value", c.operands()->Get(2)},
        {"result", c.results()->Get(0)}};
    if (numOperands == 4)
      all.push_back({"mask", c.operands()->Get(3)});
    OMNI_RETURN_IF_ERROR(sameFloatDType(where, all));
    const TensorInfo &q = lib(c, 0), &k = lib(c, 1), &v = lib(c, 2);
    OMNI_RETURN_IF_ERROR(expectRank(where, "query", q, 4));
    OMNI_RETURN_IF_ERROR(expectRank(where, "key", k, 4));
    OMNI_RETURN_IF_ERROR(expectRank(where, "value", v, 4));
    if (k.shape[0] != q.shape[0] || k.shape[1] != q.shape[1] ||
        k.shape[3] != q.shape[3])
      return fail(where, absl::StrCat("key is ", k.typeString(),
                                      " but query is ", q.typeString(),
                                      ": batch, heads and head size must "
                                      "match"));
    if (v.shape[0] != q.shape[0] || v.shape[1] != q.shape[1] ||
        v.shape[2] != k.shape[2])
      return fail(where, absl::StrCat("value is ", v.typeString(),
                                      " but key is ", k.typeString(),
                                      ": batch, heads and sequence length "
                                      "must match"));
    if (numOperands == 4)
      OMNI_RETURN_IF_ERROR(checkMask(3, q, k));
    return expectResult(where, result,
                        {q.shape[0], q.shape[1], q.shape[2], v.shape[3]},
                        "attention");
  }
  case step::Library::AttentionBackward: {
    uint32_t numOperands = sizeOf(c.operands());
    if (numOperands != 5 && numOperands != 6)
      return fail(where, absl::StrCat("operands has ", numOperands,
                                      " entries but expected 5 (query, key, "
                                      "value, output, d_output) or 6 (and "
                                      "mask)"));
    OMNI_RETURN_IF_ERROR(expectCount(where, "int_attrs", numInt, 0, ""));
    OMNI_RETURN_IF_ERROR(optionalScale());
    static const char *names[] = {"query", "key", "value", "output",
                                  "d_output"};
    std::vector<std::pair<std::string, uint32_t>> all;
    for (uint32_t i = 0; i < 5; ++i)
      all.push_back({names[i], c.operands()->Get(i)});
    if (numOperands == 6)
      all.push_back({"mask", c.operands()->Get(5)});
    all.push_back({"d_query", c.results()->Get(0)});
    all.push_back({"d_key", c.results()->Get(1)});
    all.push_back({"d_value", c.results()->Get(2)});
    OMNI_RETURN_IF_ERROR(sameFloatDType(where, all));
    for (uint32_t i = 0; i < 5; ++i)
      OMNI_RETURN_IF_ERROR(expectRank(where, names[i], lib(c, i), 4));
    const TensorInfo &q = lib(c, 0), &k = lib(c, 1), &v = lib(c, 2);
    if (k.shape[0] != q.shape[0] || k.shape[1] != q.shape[1] ||
        k.shape[3] != q.shape[3] || v.shape[0] != q.shape[0] ||
        v.shape[1] != q.shape[1] || v.shape[2] != k.shape[2])
      return fail(where, absl::StrCat("query ", q.typeString(), ", key ",
                                      k.typeString(), " and value ",
                                      v.typeString(), " do not agree"));
    if (numOperands == 6)
      OMNI_RETURN_IF_ERROR(checkMask(5, q, k));
    std::vector<int64_t> out = {q.shape[0], q.shape[1], q.shape[2], v.shape[3]};
    for (uint32_t i = 3; i < 5; ++i)
      if (lib(c, i).shape != out)
        return fail(where,
                    absl::StrCat(names[i], " is ", lib(c, i).typeString(),
                                 " but expected ",
                                 tensorTypeString(q.dtype, out)));
    const TensorInfo *grads[] = {&q, &k, &v};
    static const char *gradNames[] = {"d_query", "d_key", "d_value"};
    for (uint32_t i = 0; i < 3; ++i) {
      const TensorInfo &g = program_.tensors_[c.results()->Get(i)];
      if (g.shape != grads[i]->shape)
        return fail(where,
                    absl::StrCat(gradNames[i], " is ", g.typeString(),
                                 " but expected ", grads[i]->typeString()));
    }
    return absl::OkStatus();
  }
  }
  return absl::OkStatus();
}

const LoopFrame *ProgramVerifier::enclosingLoop(const FunctionContext &ctx,
                                                uint32_t scalar) const {
  for (auto it = ctx.loops.rbegin(); it != ctx.loops.rend(); ++it)
    if (it->iv == scalar)
      return &*it;
  return nullptr;
}

absl::Status ProgramVerifier::checkCopySide(const FunctionContext &ctx,
                                            const std::string &where,
                                            const char *side, uint32_t t,
                                            int64_t offset, int32_t scalar,
                                            int64_t stride,
                                            int64_t bytes) const {
  const TensorInfo &info = program_.tensors_[t];
  if (offset < 0)
    return fail(where, absl::StrCat(side, "_offset = ", offset,
                                    " but it must be >= 0"));
  auto outside = [&](__int128 begin, const std::string &when) {
    return fail(where, absl::StrCat(when, side, " range [", int128String(begin),
                                    ", ", int128String(begin + bytes),
                                    ") is outside ", describe(t)));
  };
  auto inside = [&](__int128 begin) {
    return begin >= 0 && begin + bytes <= info.bytes;
  };
  if (scalar == -1) {
    if (!inside(offset))
      return outside(offset, "");
    return absl::OkStatus();
  }
  if (scalar < -1 || static_cast<uint32_t>(scalar) >= numScalars())
    return fail(where, absl::StrCat(side, "_offset_scalar = ", scalar,
                                    " but expected -1 (none) or one of the ",
                                    numScalars(), " scalars"));
  const LoopFrame *loop = enclosingLoop(ctx, static_cast<uint32_t>(scalar));
  if (!loop)
    return absl::OkStatus(); // checked by the executor when it runs
  __int128 span = static_cast<__int128>(loop->upper) - loop->lower;
  if (span <= 0)
    return absl::OkStatus(); // the body never runs
  __int128 trips = (span + loop->step - 1) / loop->step;
  __int128 first = loop->lower;
  __int128 last = first + (trips - 1) * loop->step;
  for (__int128 iv : {first, last}) {
    __int128 begin = offset + iv * stride;
    if (!inside(begin))
      return outside(
          begin, absl::StrCat("with scalar ", scalar, " = ", int128String(iv),
                              " (the ", iv == first ? "first" : "last",
                              " iteration of the Loop ", loop->path, ") the "));
  }
  return absl::OkStatus();
}

absl::Status ProgramVerifier::checkCopy(const FunctionContext &ctx,
                                        const std::string &where,
                                        const step::Copy &c) const {
  OMNI_RETURN_IF_ERROR(
      checkTensorRef(ctx, where, "source", c.source(), Access::Read));
  OMNI_RETURN_IF_ERROR(
      checkTensorRef(ctx, where, "dest", c.dest(), Access::Write));
  if (c.bytes() < 0)
    return fail(where,
                absl::StrCat("bytes = ", c.bytes(), " but it must be >= 0"));
  int64_t bytes = c.bytes();
  if (bytes == 0)
    bytes = std::min(program_.tensors_[c.source()].bytes,
                     program_.tensors_[c.dest()].bytes);
  OMNI_RETURN_IF_ERROR(
      checkCopySide(ctx, where, "source", c.source(), c.source_offset(),
                    c.source_offset_scalar(), c.source_offset_stride(), bytes));
  return checkCopySide(ctx, where, "dest", c.dest(), c.dest_offset(),
                       c.dest_offset_scalar(), c.dest_offset_stride(), bytes);
}

absl::Status ProgramVerifier::checkFill(const FunctionContext &ctx,
                                        const std::string &where,
                                        const step::Fill &f) const {
  OMNI_RETURN_IF_ERROR(
      checkTensorRef(ctx, where, "dest", f.dest(), Access::Write));
  uint32_t pattern = sizeOf(f.pattern());
  if (pattern == 0)
    return fail(where, "pattern is empty but expected at least one byte");
  if (program_.tensors_[f.dest()].bytes % pattern != 0)
    return fail(where,
                absl::StrCat("pattern has ", pattern, " bytes but dest ",
                             describe(f.dest()), " is not a multiple of it"));
  return absl::OkStatus();
}

absl::Status ProgramVerifier::checkRandom(const FunctionContext &ctx,
                                          const std::string &where,
                                          const step::Random &r) const {
  if (r.distribution() < step::Distribution::MIN ||
      r.distribution() > step::Distribution::MAX)
    return fail(where, absl::StrCat("distribution = ",
                                    static_cast<int>(r.distribution()),
                                    " but valid distributions are 0..1 "
                                    "(Normal, Uniform)"));
  const std::pair<const char *, uint32_t> counters[] = {
      {"key", r.key()}, {"counter", r.counter()}, {"offset", r.offset()}};
  for (auto [field, t] : counters) {
    OMNI_RETURN_IF_ERROR(checkTensorRef(ctx, where, field, t, Access::Read));
    const TensorInfo &info = program_.tensors_[t];
    if (info.dtype != DType::I64 || !info.shape.empty())
      return fail(where,
                  absl::StrCat(field, " is tensors[", t, "] of type ",
                               info.typeString(), " but expected tensor<i64>"));
  }
  OMNI_RETURN_IF_ERROR(
      checkTensorRef(ctx, where, "result", r.result(), Access::Write));
  const TensorInfo &result = program_.tensors_[r.result()];
  if (!isFloatDType(result.dtype))
    return fail(where, absl::StrCat("result is tensors[", r.result(),
                                    "] of type ", result.typeString(),
                                    " but expected a float tensor"));
  return absl::OkStatus();
}

absl::Status ProgramVerifier::checkHostCall(const FunctionContext &ctx,
                                            const std::string &where,
                                            const step::HostCall &h) const {
  if (!h.name() || h.name()->size() == 0)
    return fail(where, "name is empty but host functions are called by name");
  OMNI_RETURN_IF_ERROR(
      checkTensorList(ctx, where, "operands", h.operands(), Access::Read));
  return checkTensorList(ctx, where, "results", h.results(), Access::Write);
}

absl::Status ProgramVerifier::checkScalarOp(const FunctionContext &ctx,
                                            const std::string &at,
                                            const step::ScalarOp &op) const {
  step::ScalarOpKind kind = op.kind();
  if (kind < step::ScalarOpKind::MIN || kind > step::ScalarOpKind::MAX)
    return fail(at + " (ScalarOp)",
                absl::StrCat("kind = ", static_cast<int>(kind),
                             " but valid kinds are 0..5 (Const, Add, Sub, "
                             "Mul, FromTensor, ToTensor)"));
  std::string where =
      absl::StrCat(at, " (ScalarOp ", step::EnumNameScalarOpKind(kind), ")");
  auto integerTensor = [&](const char *field, uint32_t t,
                           bool exactlyOne) -> absl::Status {
    const TensorInfo &info = program_.tensors_[t];
    bool ok = !isFloatDType(info.dtype) &&
              (exactlyOne ? info.numElements == 1 : info.numElements >= 1);
    if (!ok)
      return fail(where,
                  absl::StrCat(field, " is tensors[", t, "] of type ",
                               info.typeString(),
                               exactlyOne ? " but expected an integer tensor "
                                            "with one element"
                                          : " but expected an integer tensor "
                                            "with at least one element"));
    return absl::OkStatus();
  };
  if (kind == step::ScalarOpKind::ToTensor) {
    OMNI_RETURN_IF_ERROR(
        checkTensorRef(ctx, where, "dest", op.dest(), Access::Write));
    OMNI_RETURN_IF_ERROR(integerTensor("dest", op.dest(), true));
    return scalarInRange(where, "a", op.a());
  }
  OMNI_RETURN_IF_ERROR(scalarInRange(where, "dest", op.dest()));
  if (const LoopFrame *loop = enclosingLoop(ctx, op.dest()))
    return fail(where,
                absl::StrCat("dest = ", op.dest(),
                             " is the induction variable of the "
                             "enclosing Loop ",
                             loop->path, ", which only the Loop may write"));
  switch (kind) {
  case step::ScalarOpKind::Add:
  case step::ScalarOpKind::Sub:
  case step::ScalarOpKind::Mul:
    OMNI_RETURN_IF_ERROR(scalarInRange(where, "a", op.a()));
    return scalarInRange(where, "b", op.b());
  case step::ScalarOpKind::FromTensor:
    OMNI_RETURN_IF_ERROR(checkTensorRef(ctx, where, "a", op.a(), Access::Read));
    return integerTensor("a", op.a(), false);
  default:
    return absl::OkStatus();
  }
}

absl::Status ProgramVerifier::checkLoop(FunctionContext &ctx,
                                        const std::string &at,
                                        const std::string &where,
                                        const step::Loop &loop) {
  OMNI_RETURN_IF_ERROR(scalarInRange(where, "iv", loop.iv()));
  if (const LoopFrame *outer = enclosingLoop(ctx, loop.iv()))
    return fail(where, absl::StrCat("iv = ", loop.iv(),
                                    " is already the induction variable of "
                                    "the enclosing Loop ",
                                    outer->path));
  if (loop.step() < 1)
    return fail(where,
                absl::StrCat("step = ", loop.step(), " but it must be >= 1"));
  if (static_cast<int>(ctx.loops.size()) + 1 > options_.maxLoopDepth)
    return fail(where,
                absl::StrCat("Loops nest ", ctx.loops.size() + 1,
                             " deep but the limit is ", options_.maxLoopDepth));
  ctx.loops.push_back(
      LoopFrame{loop.iv(), loop.lower(), loop.upper(), loop.step(), at});
  absl::Status status = checkCommands(ctx, loop.body(), at + ".body");
  ctx.loops.pop_back();
  return status;
}

absl::Status ProgramVerifier::checkCall(FunctionContext &ctx,
                                        const std::string &where,
                                        const step::Call &call) {
  if (call.function() >= numFunctions())
    return fail(where,
                absl::StrCat("function = ", call.function(), " but there are ",
                             numFunctions(), " functions"));
  const step::Function *callee = step_.functions()->Get(call.function());
  std::string calleeName = functionName(call.function());
  const std::pair<const char *,
                  std::pair<const Vector<uint32_t> *, const Vector<uint32_t> *>>
      lists[] = {{"operands", {call.operands(), callee->inputs()}},
                 {"results", {call.results(), callee->outputs()}}};
  for (auto [field, pair] : lists) {
    auto [mine, theirs] = pair;
    bool operands = std::string(field) == "operands";
    OMNI_RETURN_IF_ERROR(checkTensorList(
        ctx, where, field, mine, operands ? Access::Read : Access::Write));
    if (sizeOf(mine) != sizeOf(theirs))
      return fail(where,
                  absl::StrCat(field, " has ", sizeOf(mine), " entries but ",
                               calleeName, " has ", sizeOf(theirs),
                               operands ? " inputs" : " outputs"));
    for (uint32_t i = 0; i < sizeOf(mine); ++i) {
      uint32_t t = theirs->Get(i);
      if (t >= numTensors())
        continue; // reported when the callee is checked
      const TensorInfo &a = program_.tensors_[mine->Get(i)];
      const TensorInfo &b = program_.tensors_[t];
      if (a.dtype != b.dtype || a.shape != b.shape)
        return fail(where,
                    absl::StrCat(field, "[", i, "] is tensors[", mine->Get(i),
                                 "] of type ", a.typeString(), " but ",
                                 calleeName, operands ? " input " : " output ",
                                 i, " is ", b.typeString()));
    }
  }
  ctx.callees.emplace_back(call.function(), where);
  return absl::OkStatus();
}

} // namespace omni::loader
