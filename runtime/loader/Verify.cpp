//===- Verify.cpp - Semantic checks of a step.bin ---------------*- C++ -*-===//
//
// Runs after the FlatBuffers verifier, so every accessor is memory-safe, but
// nothing the file says is believed yet. The checks go bottom-up: the
// root's scalars (arena size, target), state slots, tensor slots (dtype,
// shape, storage and the byte range each storage class implies), executables
// (format, code, kernels, signatures; the target is checked by the driver
// that loads them), then every function and, recursively, its commands, and
// finally the call graph (no recursion, bounded depth). The
// tables decoded on the way (TensorInfo, StateInfo) become the Program's,
// so the executor never decodes or checks a field again. This file holds
// the tables, the functions and the call graph; VerifyCommands.cpp the rules
// of each command kind.
//
// Index registers: scalar indices refer to the root `scalars` table; every
// function invocation gets a register file of that size of its own, so a
// callee cannot clobber its caller's loop variables. Within one function a
// Loop's induction variable is written only by the Loop (checked), which is
// what makes the static range check of iv-scaled Copy offsets sound.
//
//===----------------------------------------------------------------------===//

#include "runtime/loader/Verify.h"
#include "runtime/loader/VerifyImpl.h"

#include "runtime/base/CheckedMath.h"

#include <algorithm>

namespace omni::loader {

using namespace detail;

absl::Status ProgramVerifier::checkRoot() {
  if (step_.arena_size() < 0)
    return fail("arena_size",
                absl::StrCat("= ", step_.arena_size(), " but it must be >= 0"));
  if (const step::Target *target = step_.target()) {
    std::string kind = str(target->kind());
    if (!kind.empty() && kind != "cpu" && kind != "cuda")
      return fail("target.kind", absl::StrCat("= '", kind,
                                              "' but omnirun knows 'cpu' and "
                                              "'cuda'"));
  }
  return absl::OkStatus();
}

absl::Status ProgramVerifier::checkType(const std::string &path,
                                        step::DType dtype,
                                        const Vector<int64_t> *shape,
                                        DType &outDType,
                                        std::vector<int64_t> &outShape,
                                        int64_t &elements, int64_t &bytes) {
  if (dtype < step::DType::MIN || dtype > step::DType::MAX)
    return fail(path + ".dtype",
                absl::StrCat("= ", static_cast<int>(dtype),
                             " but valid dtypes are 0..6 (f32, f64, f16, "
                             "bf16, i1, i32, i64)"));
  outDType = toDType(dtype);
  outShape.clear();
  for (uint32_t d = 0; d < sizeOf(shape); ++d) {
    int64_t dim = shape->Get(d);
    if (dim < 0)
      return fail(absl::StrCat(path, ".shape[", d, "]"),
                  absl::StrCat("= ", dim, " but dimensions must be >= 0"));
    outShape.push_back(dim);
  }
  std::optional<int64_t> n = checkedNumElements(outShape);
  std::optional<int64_t> b =
      n ? checkedMul(*n, dtypeSize(outDType)) : std::nullopt;
  if (!b)
    return fail(path + ".shape",
                absl::StrCat(tensorTypeString(outDType, outShape),
                             " has more bytes than int64 can count"));
  elements = *n;
  bytes = *b;
  return absl::OkStatus();
}

absl::Status ProgramVerifier::checkState() {
  for (uint32_t s = 0; s < sizeOf(step_.state()); ++s) {
    const step::StateSlot *slot = step_.state()->Get(s);
    std::string path = absl::StrCat("state[", s, "]");
    StateInfo info;
    info.name = str(slot->name());
    OMNI_RETURN_IF_ERROR(checkType(path, slot->dtype(), slot->shape(),
                                   info.dtype, info.shape, info.numElements,
                                   info.bytes));
    if (!validRole(slot->role()))
      return fail(path + ".role",
                  absl::StrCat("= ", static_cast<int>(slot->role()),
                               " but valid roles are 0..5"));
    info.role = slot->role();
    if (info.name.empty())
      return fail(path + ".name",
                  "is empty but state slots are looked up by name");
    auto [it, inserted] = program_.stateByName_.emplace(info.name, s);
    if (!inserted)
      return fail(path + ".name",
                  absl::StrCat("'", info.name, "' duplicates state[",
                               it->second, "].name"));
    program_.state_.push_back(std::move(info));
  }
  return absl::OkStatus();
}

absl::Status ProgramVerifier::checkHyperParams() {
  for (uint32_t h = 0; h < sizeOf(step_.hparams()); ++h) {
    const step::HyperParam *hp = step_.hparams()->Get(h);
    std::string path = absl::StrCat("hparams[", h, "]");
    HyperParamInfo info;
    info.name = str(hp->name());
    info.defaultValue = hp->default_value();
    info.range = str(hp->range());
    if (info.name.empty())
      return fail(path + ".name",
                  "is empty but hyper-parameters are set by name");
    if (!program_.hparams_.empty() &&
        program_.hparams_.back().name >= info.name)
      return fail(path + ".name",
                  absl::StrCat("'", info.name, "' follows '",
                               program_.hparams_.back().name,
                               "'; expected unique names in sorted order"));
    if (!parseRange(info.range, info))
      return fail(path + ".range",
                  absl::StrCat("is '", info.range,
                               "'; expected an interval such as [0, inf)"));
    if (!info.contains(info.defaultValue))
      return fail(path + ".default_value",
                  absl::StrCat("= ", info.defaultValue,
                               " is outside its range ", info.range));
    program_.hparams_.push_back(std::move(info));
  }
  for (uint32_t f = 0; f < numFunctions(); ++f) {
    const step::Function *fn = step_.functions()->Get(f);
    for (uint32_t i = 0; i < sizeOf(fn->inputs()); ++i) {
      const TensorInfo &t = program_.tensors_[fn->inputs()->Get(i)];
      if (program_.findHyperParam(t.name) &&
          (t.dtype != DType::F64 || !t.shape.empty()))
        return fail(absl::StrCat("functions[", f, "].inputs[", i, "]"),
                    absl::StrCat("is hyper-parameter '", t.name, "' of type ",
                                 t.typeString(), "; expected tensor<f64>"));
    }
  }
  return absl::OkStatus();
}

absl::Status ProgramVerifier::checkMetadata() {
  const std::string *last = nullptr;
  for (uint32_t m = 0; m < sizeOf(step_.metadata()); ++m) {
    const step::MetadataEntry *entry = step_.metadata()->Get(m);
    std::string path = absl::StrCat("metadata[", m, "]");
    if (!entry->key() || entry->key()->size() == 0)
      return fail(path + ".key", "is empty; expected a non-empty key");
    if (!entry->value())
      return fail(path + ".value", "is missing; expected a string");
    std::string key = entry->key()->str();
    if (last && *last >= key)
      return fail(path + ".key",
                  absl::StrCat("'", key, "' follows '", *last,
                               "'; expected unique keys in sorted order"));
    auto it = program_.metadata_.emplace(key, entry->value()->str()).first;
    last = &it->first;
  }
  return absl::OkStatus();
}

absl::Status ProgramVerifier::checkTensors() {
  const int64_t arenaSize = step_.arena_size();
  const uint32_t numConstants = sizeOf(step_.constants());
  const uint32_t numState = sizeOf(step_.state());
  // Every constant, referenced or not, is materialized at load time.
  for (uint32_t c = 0; c < numConstants; ++c) {
    const step::Constant *constant = step_.constants()->Get(c);
    int64_t stored = sizeOf(constant->data()), total = 0;
    if (constant->repeat() < 1 || (constant->repeat() > 1 && stored == 0) ||
        __builtin_mul_overflow(stored, constant->repeat(), &total))
      return fail(absl::StrCat("constants[", c, "].repeat"),
                  absl::StrCat("= ", constant->repeat(), " with ", stored,
                               " bytes of data, but it must be >= 1 (and "
                               "the data non-empty when > 1)"));
  }
  for (uint32_t t = 0; t < numTensors(); ++t) {
    const step::Tensor *tensor = step_.tensors()->Get(t);
    std::string path = absl::StrCat("tensors[", t, "]");
    TensorInfo info;
    info.name = str(tensor->name());
    OMNI_RETURN_IF_ERROR(checkType(path, tensor->dtype(), tensor->shape(),
                                   info.dtype, info.shape, info.numElements,
                                   info.bytes));
    if (!validRole(tensor->role()))
      return fail(path + ".role",
                  absl::StrCat("= ", static_cast<int>(tensor->role()),
                               " but valid roles are 0..5"));
    info.role = tensor->role();
    info.storage = tensor->storage();
    info.index = tensor->index();
    const int64_t index = info.index;
    switch (info.storage) {
    case step::Storage::Arena: {
      if (index < 0)
        return fail(path + ".index", absl::StrCat("(arena offset) = ", index,
                                                  " but it must be >= 0"));
      if (!rangeInside(index, info.bytes, arenaSize))
        return fail(path,
                    absl::StrCat(
                        "arena range [", index, ", ",
                        int128String(static_cast<__int128>(index) + info.bytes),
                        ") of ", info.typeString(),
                        " is outside arena_size = ", arenaSize));
      int64_t align = dtypeSize(info.dtype);
      if (index % align != 0)
        return fail(path + ".index",
                    absl::StrCat("(arena offset) = ", index,
                                 " is not a multiple of ", align,
                                 ", the size of ", dtypeName(info.dtype)));
      break;
    }
    case step::Storage::Argument:
      // The argument count is a property of the function that uses the
      // slot; checkTensorRef compares it there.
      if (index < 0)
        return fail(path + ".index", absl::StrCat("(argument) = ", index,
                                                  " but it must be >= 0"));
      break;
    case step::Storage::Constant: {
      if (index < 0 || index >= numConstants)
        return fail(path + ".index",
                    absl::StrCat("(constant) = ", index, " but there are ",
                                 numConstants, " constants"));
      const step::Constant *c =
          step_.constants()->Get(static_cast<uint32_t>(index));
      int64_t stored = sizeOf(c->data());
      int64_t have = stored * c->repeat(); // checked above
      if (have != info.bytes)
        return fail(absl::StrCat("constants[", index, "]"),
                    absl::StrCat("has ", stored, " bytes x repeat ",
                                 c->repeat(), " but ", path, " (",
                                 info.typeString(), ") needs ", info.bytes));
      break;
    }
    case step::Storage::State: {
      if (index < 0 || index >= numState)
        return fail(path + ".index",
                    absl::StrCat("(state) = ", index, " but there are ",
                                 numState, " state slots"));
      const StateInfo &slot = program_.state_[index];
      if (slot.dtype != info.dtype || slot.numElements != info.numElements)
        return fail(path,
                    absl::StrCat(info.typeString(), " aliases state[", index,
                                 "] '", slot.name, "' of type ",
                                 tensorTypeString(slot.dtype, slot.shape),
                                 " (dtype and element count must match)"));
      break;
    }
    default:
      return fail(path + ".storage",
                  absl::StrCat("= ", static_cast<int>(info.storage),
                               " but valid storages are 0..3 (Arena, "
                               "Argument, Constant, State)"));
    }
    program_.tensors_.push_back(std::move(info));
  }
  return absl::OkStatus();
}

absl::Status ProgramVerifier::checkExecutables() {
  for (uint32_t e = 0; e < sizeOf(step_.executables()); ++e) {
    const step::Executable *exe = step_.executables()->Get(e);
    std::string path = absl::StrCat("executables[", e, "]");
    step::ExecutableFormat format = exe->format();
    if (format < step::ExecutableFormat::MIN ||
        format > step::ExecutableFormat::MAX)
      return fail(path + ".format",
                  absl::StrCat("= ", static_cast<int>(format),
                               " but valid formats are 0..2 "
                               "(ElfSharedObject, Ptx, Cubin)"));
    for (uint32_t k = 0; k < sizeOf(exe->kernels()); ++k)
      if (exe->kernels()->Get(k)->size() == 0)
        return fail(absl::StrCat(path, ".kernels[", k, "]"),
                    "is empty but kernels are looked up by symbol name");
    // One signature per kernel, each well formed: checkDispatch compares
    // every Dispatch against it.
    uint32_t numKernels = sizeOf(exe->kernels());
    uint32_t numSignatures = sizeOf(exe->signatures());
    if (numSignatures != numKernels)
      return fail(path + ".signatures",
                  absl::StrCat("has ", numSignatures, " entries but expected ",
                               numKernels, " (one per kernel)"));
    for (uint32_t k = 0; k < numSignatures; ++k) {
      const step::KernelSignature *sig = exe->signatures()->Get(k);
      std::string at = absl::StrCat(path, ".signatures[", k, "]");
      if (sig->grid() < -1)
        return fail(at + ".grid",
                    absl::StrCat("= ", sig->grid(),
                                 " but it must be >= 0 (or -1: never run)"));
      for (auto [field, list] : {std::pair{"operands", sig->operands()},
                                 std::pair{"results", sig->results()}})
        for (uint32_t b = 0; b < sizeOf(list); ++b) {
          const step::KernelBuffer *buffer = list->Get(b);
          if (buffer->dtype() < step::DType::MIN ||
              buffer->dtype() > step::DType::MAX)
            return fail(absl::StrCat(at, ".", field, "[", b, "].dtype"),
                        absl::StrCat("= ", static_cast<int>(buffer->dtype()),
                                     " but valid dtypes are 0..6 (f32, f64, "
                                     "f16, bf16, i1, i32, i64)"));
          if (buffer->bytes() < 0)
            return fail(
                absl::StrCat(at, ".", field, "[", b, "].bytes"),
                absl::StrCat("= ", buffer->bytes(), " but it must be >= 0"));
        }
      if (const Vector<int64_t> *items = sig->item_bytes()) {
        const uint32_t buffers =
            sizeOf(sig->operands()) + sizeOf(sig->results());
        if (items->size() != buffers)
          return fail(at + ".item_bytes",
                      absl::StrCat("has ", items->size(),
                                   " entries but expected ", buffers,
                                   " (one per operand and result)"));
        for (uint32_t b = 0; b < items->size(); ++b)
          if (items->Get(b) < 0)
            return fail(
                absl::StrCat(at, ".item_bytes[", b, "]"),
                absl::StrCat("= ", items->Get(b), " but it must be >= 0"));
      }
    }
    if (absl::Status status = checkGpuKernels(exe, path); !status.ok())
      return status;
    if (format != step::ExecutableFormat::ElfSharedObject)
      continue;
    const Vector<uint8_t> *data = exe->data();
    if (sizeOf(data) < 4 || data->Get(0) != 0x7f || data->Get(1) != 'E' ||
        data->Get(2) != 'L' || data->Get(3) != 'F')
      return fail(path + ".data",
                  absl::StrCat("has ", sizeOf(data),
                               " bytes that do not start with the ELF magic "
                               "(7f 45 4c 46)"));
    // exe->target (CPU features, SM architecture) is the driver's to check
    // when it loads the executable (hal Device::loadExecutable).
  }
  return absl::OkStatus();
}

absl::Status ProgramVerifier::checkGpuKernels(const step::Executable *exe,
                                              const std::string &path) const {
  bool gpu = exe->format() != step::ExecutableFormat::ElfSharedObject;
  uint32_t numKernels = sizeOf(exe->kernels());
  const auto *gpuKernels = exe->gpu_kernels();
  if (!gpu) {
    if (gpuKernels)
      return fail(path + ".gpu_kernels",
                  "is present but the executable is not GPU code (format "
                  "ElfSharedObject)");
    if (exe->ptx())
      return fail(path + ".ptx", "is present but the executable is not a "
                                 "cubin (format ElfSharedObject)");
    return absl::OkStatus();
  }
  if (sizeOf(gpuKernels) != numKernels)
    return fail(path + ".gpu_kernels",
                absl::StrCat("has ", sizeOf(gpuKernels),
                             " entries but expected ", numKernels,
                             " (one per kernel of GPU code)"));
  for (uint32_t k = 0; k < numKernels; ++k) {
    const step::GpuKernel *kernel = gpuKernels->Get(k);
    const step::KernelSignature *sig = exe->signatures()->Get(k);
    std::string at = absl::StrCat(path, ".gpu_kernels[", k, "]");
    uint32_t numScratch = sizeOf(kernel->scratch());
    for (uint32_t s = 0; s < numScratch; ++s)
      if (kernel->scratch()->Get(s) < 0)
        return fail(absl::StrCat(at, ".scratch[", s, "]"),
                    absl::StrCat("= ", kernel->scratch()->Get(s),
                                 " but it must be >= 0"));
    uint64_t numBuffers =
        uint64_t{sizeOf(sig->operands())} + sizeOf(sig->results()) + numScratch;
    // In-place pairs: an operand and a result of one size.
    uint32_t numInPlace = sizeOf(kernel->in_place());
    if (numInPlace % 2 != 0)
      return fail(at + ".in_place",
                  absl::StrCat("has ", numInPlace,
                               " entries but it holds (operand, result) "
                               "pairs"));
    for (uint32_t p = 0; p < numInPlace; p += 2) {
      uint32_t operand = kernel->in_place()->Get(p);
      uint32_t result = kernel->in_place()->Get(p + 1);
      if (operand >= sizeOf(sig->operands()) ||
          result >= sizeOf(sig->results()) ||
          sig->operands()->Get(operand)->bytes() !=
              sig->results()->Get(result)->bytes())
        return fail(absl::StrCat(at, ".in_place[", p, "]"),
                    absl::StrCat("pairs operand ", operand, " with result ",
                                 result, " but the kernel has ",
                                 sizeOf(sig->operands()), " operands and ",
                                 sizeOf(sig->results()),
                                 " results, and a pair is one size"));
    }
    for (uint32_t l = 0; l < sizeOf(kernel->launches()); ++l) {
      const step::GpuLaunch *launch = kernel->launches()->Get(l);
      std::string lat = absl::StrCat(at, ".launches[", l, "]");
      if (!launch->entry() || launch->entry()->size() == 0)
        return fail(lat + ".entry",
                    "is empty but launches look up their entry by name");
      uint64_t threads = 1;
      for (auto [field, dims] : {std::pair{"grid", launch->grid()},
                                 std::pair{"block", launch->block()}}) {
        if (sizeOf(dims) != 3)
          return fail(
              absl::StrCat(lat, ".", field),
              absl::StrCat("has ", sizeOf(dims), " dimensions but expected 3"));
        for (uint32_t d = 0; d < 3; ++d) {
          if (dims->Get(d) < 1)
            return fail(absl::StrCat(lat, ".", field, "[", d, "]"),
                        "= 0 but every dimension must be >= 1");
          if (std::string_view(field) == "block")
            threads *= dims->Get(d);
        }
      }
      if (threads > 1024)
        return fail(lat + ".block",
                    absl::StrCat("has ", threads,
                                 " threads but a block has at most 1024"));
      for (uint32_t a = 0; a < sizeOf(launch->args()); ++a)
        if (launch->args()->Get(a) >= numBuffers)
          return fail(absl::StrCat(lat, ".args[", a, "]"),
                      absl::StrCat("= ", launch->args()->Get(a),
                                   " but the kernel has ", numBuffers,
                                   " buffers (operands, results, scratch)"));
    }
  }
  if (exe->ptx() && exe->format() != step::ExecutableFormat::Cubin)
    return fail(path + ".ptx", "is present but the executable is not a cubin");
  return absl::OkStatus();
}

absl::Status ProgramVerifier::checkFunctions() {
  const uint32_t n = numFunctions();
  contexts_.resize(n);
  for (uint32_t f = 0; f < n; ++f) {
    const step::Function *fn = step_.functions()->Get(f);
    FunctionContext &ctx = contexts_[f];
    ctx.index = f;
    ctx.path = absl::StrCat("functions[", f, "]");
    std::string name = str(fn->name());
    ctx.name = name;
    if (name.empty())
      return fail(ctx.path + ".name",
                  "is empty but functions are called by name");
    auto [it, inserted] = program_.functionsByName_.emplace(name, f);
    if (!inserted)
      return fail(ctx.path + ".name",
                  absl::StrCat("'", name, "' duplicates functions[", it->second,
                               "].name"));
    if (fn->num_scalars() > numScalars())
      return fail(ctx.path + ".num_scalars",
                  absl::StrCat("= ", fn->num_scalars(), " but there are ",
                               numScalars(), " scalars"));
    ctx.numInputs = sizeOf(fn->inputs());
    ctx.numOutputs = sizeOf(fn->outputs());
    // Range first: argument aliases compare against these tensors.
    for (uint32_t i = 0; i < ctx.numInputs; ++i)
      OMNI_RETURN_IF_ERROR(tensorInRange(
          ctx.path, absl::StrCat("inputs[", i, "]"), fn->inputs()->Get(i)));
    for (uint32_t i = 0; i < ctx.numOutputs; ++i)
      OMNI_RETURN_IF_ERROR(tensorInRange(
          ctx.path, absl::StrCat("outputs[", i, "]"), fn->outputs()->Get(i)));
    for (uint32_t i = 0; i < ctx.numInputs; ++i) {
      uint32_t t = fn->inputs()->Get(i);
      const TensorInfo &info = program_.tensors_[t];
      if (info.storage != step::Storage::Argument || info.index != i)
        return fail(ctx.path, absl::StrCat("inputs[", i, "] is tensors[", t,
                                           "] with storage ",
                                           step::EnumNameStorage(info.storage),
                                           " ", info.index, " but input ", i,
                                           " must be Argument ", i));
    }
    for (uint32_t i = 0; i < ctx.numOutputs; ++i) {
      uint32_t t = fn->outputs()->Get(i);
      OMNI_RETURN_IF_ERROR(checkTensorRef(
          ctx, ctx.path, absl::StrCat("outputs[", i, "]"), t, Access::Read));
      // Output i may be written in place into its own result buffer
      // (argument numInputs + i) but not into another output's: the
      // copies into result buffers on return would then overwrite each
      // other.
      const TensorInfo &info = program_.tensors_[t];
      if (info.storage == step::Storage::Argument &&
          info.index >= ctx.numInputs && info.index != ctx.numInputs + i)
        return fail(ctx.path,
                    absl::StrCat("outputs[", i, "] is tensors[", t,
                                 "], argument ", info.index,
                                 ", the result buffer of output ",
                                 info.index - ctx.numInputs,
                                 "; expected argument ", ctx.numInputs + i,
                                 " or a tensor that is not a result buffer"));
    }
    OMNI_RETURN_IF_ERROR(
        checkCommands(ctx, fn->commands(), ctx.path + ".commands"));
  }
  return absl::OkStatus();
}

absl::Status ProgramVerifier::tensorInRange(const std::string &where,
                                            const std::string &field,
                                            uint32_t t) const {
  if (t >= numTensors())
    return fail(where, absl::StrCat(field, " = ", t, " but there are ",
                                    numTensors(), " tensors"));
  return absl::OkStatus();
}

absl::Status ProgramVerifier::checkTensorRef(const FunctionContext &ctx,
                                             const std::string &where,
                                             const std::string &field,
                                             uint32_t t, Access access) const {
  OMNI_RETURN_IF_ERROR(tensorInRange(where, field, t));
  const TensorInfo &info = program_.tensors_[t];
  if (info.storage == step::Storage::Argument) {
    uint64_t arg = static_cast<uint64_t>(info.index);
    if (arg >= uint64_t(ctx.numInputs) + ctx.numOutputs)
      return fail(where, absl::StrCat(field, " is tensors[", t, "], argument ",
                                      info.index, ", but ", ctx.path, " has ",
                                      ctx.numInputs, " inputs and ",
                                      ctx.numOutputs, " outputs"));
    const step::Function *fn = step_.functions()->Get(ctx.index);
    uint32_t bound =
        arg < ctx.numInputs
            ? fn->inputs()->Get(static_cast<uint32_t>(arg))
            : fn->outputs()->Get(static_cast<uint32_t>(arg - ctx.numInputs));
    const TensorInfo &argInfo = program_.tensors_[bound];
    if (argInfo.bytes != info.bytes)
      return fail(where,
                  absl::StrCat(field, " is ", describe(t),
                               ", an alias of argument ", info.index, " of ",
                               ctx.path, " which is ", describe(bound)));
  }
  if (access == Access::Write && info.storage == step::Storage::Constant)
    return fail(where, absl::StrCat(field, " is tensors[", t,
                                    "], a Constant (read-only)"));
  return absl::OkStatus();
}

absl::Status ProgramVerifier::checkTensorList(const FunctionContext &ctx,
                                              const std::string &where,
                                              const char *field,
                                              const Vector<uint32_t> *list,
                                              Access access) const {
  for (uint32_t i = 0; i < sizeOf(list); ++i)
    OMNI_RETURN_IF_ERROR(checkTensorRef(
        ctx, where, absl::StrCat(field, "[", i, "]"), list->Get(i), access));
  return absl::OkStatus();
}

absl::Status ProgramVerifier::scalarInRange(const std::string &where,
                                            const std::string &field,
                                            uint32_t s) const {
  if (s >= numScalars())
    return fail(where, absl::StrCat(field, " = ", s, " but there are ",
                                    numScalars(), " scalars"));
  return absl::OkStatus();
}

absl::Status ProgramVerifier::checkCallGraph() {
  const uint32_t n = numFunctions();
  enum State : uint8_t { Unvisited, Active, Done };
  std::vector<State> state(n, Unvisited);
  std::vector<int> depth(n, 1);
  std::vector<uint32_t> stack;
  // Iterative DFS so that a deep call chain cannot overflow our stack.
  std::vector<std::pair<uint32_t, size_t>> work;
  for (uint32_t root = 0; root < n; ++root) {
    if (state[root] != Unvisited)
      continue;
    work.push_back({root, 0});
    state[root] = Active;
    stack.push_back(root);
    while (!work.empty()) {
      auto &[f, next] = work.back();
      const auto &callees = contexts_[f].callees;
      if (next < callees.size()) {
        auto [g, where] = callees[next++];
        if (state[g] == Active) {
          std::string cycle;
          auto it = std::find(stack.begin(), stack.end(), g);
          for (; it != stack.end(); ++it)
            absl::StrAppend(&cycle, functionName(*it), " -> ");
          absl::StrAppend(&cycle, functionName(g));
          return fail(where,
                      absl::StrCat("recursion is not supported (", cycle, ")"));
        }
        if (state[g] == Unvisited) {
          state[g] = Active;
          stack.push_back(g);
          work.push_back({g, 0});
        }
        continue;
      }
      int d = 1;
      for (const auto &[g, where] : callees)
        d = std::max(d, depth[g] + 1);
      depth[f] = d;
      if (d > options_.maxCallDepth)
        return fail(contexts_[f].path,
                    absl::StrCat("calls nest ", d, " deep but the limit is ",
                                 options_.maxCallDepth));
      state[f] = Done;
      stack.pop_back();
      work.pop_back();
    }
  }
  return absl::OkStatus();
}

absl::Status verifyProgram(Program &program, const LoadOptions &options) {
  return ProgramVerifier(program, options).run();
}

} // namespace omni::loader
