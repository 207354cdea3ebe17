//===- VerifyImpl.h - The loader's semantic checks (internal) ---*- C++ -*-===//
//
// The ProgramVerifier class behind verifyProgram (Verify.h), shared by
// Verify.cpp (the root's tables, functions, the call graph),
// VerifyCommands.cpp (the rules of each command kind) and
// VerifyCollective.cpp (meshes, Collective and AxisIndex commands, state
// sharding). Internal to the
// loader.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_LOADER_VERIFYIMPL_H
#define OMNI_RUNTIME_LOADER_VERIFYIMPL_H

#include "runtime/base/CheckedMath.h"
#include "runtime/loader/Program.h"

#include "runtime/base/Status.h"

#include "absl/strings/str_cat.h"

#include <string>
#include <utility>
#include <vector>

namespace omni::loader::detail {

using flatbuffers::Offset;
using flatbuffers::Vector;

template <typename T> uint32_t sizeOf(const Vector<T> *v) {
  return v ? v->size() : 0;
}

inline std::string str(const flatbuffers::String *s) {
  return s ? s->str() : std::string();
}

using ::omni::int128String;

/// Whether a command reads or writes a tensor (writes to constants fail).
enum class Access { Read, Write };

/// An enclosing Loop while its body is checked.
struct LoopFrame {
  uint32_t iv;
  int64_t lower, upper, step;
  std::string path;
};

/// The function whose commands are being checked.
struct FunctionContext {
  uint32_t index = 0;
  std::string path; // "functions[0]"
  std::string name; // its name, for messages that quote it
  uint32_t numInputs = 0, numOutputs = 0;
  std::vector<LoopFrame> loops;
  /// Functions this one calls, with the path of one Call to each.
  std::vector<std::pair<uint32_t, std::string>> callees;
};

} // namespace omni::loader::detail

namespace omni::loader {

using detail::Access;
using detail::FunctionContext;
using detail::LoopFrame;
using detail::sizeOf;
using detail::str;
using flatbuffers::Offset;
using flatbuffers::Vector;

/// Checks one Program (see Verify.cpp for the order of the checks).
class ProgramVerifier {
public:
  ProgramVerifier(Program &program, const LoadOptions &options)
      : program_(program), step_(*program.step_), options_(options) {}

  absl::Status run() {
    OMNI_RETURN_IF_ERROR(checkRoot());
    OMNI_RETURN_IF_ERROR(checkState());
    OMNI_RETURN_IF_ERROR(checkTensors());
    OMNI_RETURN_IF_ERROR(checkExecutables());
    OMNI_RETURN_IF_ERROR(checkMeshes());
    OMNI_RETURN_IF_ERROR(checkStateSharding());
    OMNI_RETURN_IF_ERROR(checkFunctions());
    OMNI_RETURN_IF_ERROR(checkHyperParams());
    OMNI_RETURN_IF_ERROR(checkMetadata());
    return checkCallGraph();
  }

private:
  absl::Status fail(absl::string_view path, absl::string_view message) const {
    return absl::InvalidArgumentError(
        absl::StrCat(program_.name_, ": ", path, ": ", message));
  }

  uint32_t numTensors() const { return sizeOf(step_.tensors()); }
  uint32_t numScalars() const { return sizeOf(step_.scalars()); }
  uint32_t numFunctions() const { return sizeOf(step_.functions()); }

  std::string describe(uint32_t t) const {
    const TensorInfo &info = program_.tensors_[t];
    return absl::StrCat("tensors[", t, "] (", info.typeString(), ", ",
                        info.bytes, " bytes)");
  }
  std::string functionName(uint32_t f) const {
    return absl::StrCat("functions[", f, "] ('",
                        str(step_.functions()->Get(f)->name()), "')");
  }

  absl::Status checkRoot();
  /// Decodes dtype and shape; `path` is "tensors[3]" or "state[1]".
  absl::Status checkType(const std::string &path, step::DType dtype,
                         const Vector<int64_t> *shape, DType &outDType,
                         std::vector<int64_t> &outShape, int64_t &elements,
                         int64_t &bytes);
  absl::Status checkState();
  /// The hyper-parameter table: names unique and sorted, defaults inside
  /// their ranges, every function input of such a name a 0-D f64.
  absl::Status checkHyperParams();
  absl::Status checkMetadata();
  absl::Status checkTensors();
  absl::Status checkExecutables();
  /// Executable.gpu_kernels / ptx: present exactly for GPU code, one per
  /// kernel, every launch well formed (step.fbs GpuLaunch).
  absl::Status checkGpuKernels(const step::Executable *exe,
                               const std::string &path) const;
  absl::Status checkFunctions();
  absl::Status tensorInRange(const std::string &where, const std::string &field,
                             uint32_t t) const;
  absl::Status checkTensorRef(const FunctionContext &ctx,
                              const std::string &where,
                              const std::string &field, uint32_t t,
                              Access access) const;
  absl::Status checkTensorList(const FunctionContext &ctx,
                               const std::string &where, const char *field,
                               const Vector<uint32_t> *list,
                               Access access) const;
  absl::Status scalarInRange(const std::string &where, const std::string &field,
                             uint32_t s) const;
  absl::Status checkCommands(FunctionContext &ctx,
                             const Vector<Offset<step::Command>> *commands,
                             const std::string &prefix);
  absl::Status checkDispatch(FunctionContext &ctx, const std::string &where,
                             const step::Dispatch &d);
  absl::Status expectCount(const std::string &where, const char *field,
                           uint32_t have, uint32_t want,
                           absl::string_view names) const;
  /// The decoded tensor of operand `i` of a library call.
  const TensorInfo &lib(const step::LibraryCall &c, uint32_t i) const;
  absl::Status sameFloatDType(
      const std::string &where,
      const std::vector<std::pair<std::string, uint32_t>> &tensors) const;
  absl::Status expectRank(const std::string &where, const std::string &role,
                          const TensorInfo &info, size_t rank) const;
  absl::Status expectResult(const std::string &where, const TensorInfo &result,
                            const std::vector<int64_t> &shape,
                            absl::string_view how) const;
  /// A Dispatch that follows a LibraryCall marked `epilogue`: it reads
  /// the call's result by slices that tile it (step.fbs).
  absl::Status checkEpilogue(FunctionContext &ctx, const std::string &where,
                             const step::LibraryCall &call,
                             const step::Dispatch &d);
  absl::Status checkLibraryCall(FunctionContext &ctx, const std::string &at,
                                const step::LibraryCall &c);
  const LoopFrame *enclosingLoop(const FunctionContext &ctx,
                                 uint32_t scalar) const;
  absl::Status checkCopySide(const FunctionContext &ctx,
                             const std::string &where, const char *side,
                             uint32_t t, int64_t offset, int32_t scalar,
                             int64_t stride, int64_t bytes) const;
  absl::Status checkCopy(const FunctionContext &ctx, const std::string &where,
                         const step::Copy &c) const;
  absl::Status checkFill(const FunctionContext &ctx, const std::string &where,
                         const step::Fill &f) const;
  absl::Status checkRandom(const FunctionContext &ctx, const std::string &where,
                           const step::Random &r) const;
  absl::Status checkHostCall(const FunctionContext &ctx,
                             const std::string &where,
                             const step::HostCall &h) const;
  absl::Status checkScalarOp(const FunctionContext &ctx, const std::string &at,
                             const step::ScalarOp &op) const;
  absl::Status checkLoop(FunctionContext &ctx, const std::string &at,
                         const std::string &where, const step::Loop &loop);
  absl::Status checkCall(FunctionContext &ctx, const std::string &where,
                         const step::Call &call);
  /// Meshes and Collective commands (VerifyCollective.cpp).
  absl::Status checkMeshes();
  absl::Status checkCollective(const FunctionContext &ctx,
                               const std::string &at,
                               const step::Collective &c) const;
  /// `mesh` and `axes` of a Collective, AxisIndex or StateSharding: the
  /// mesh exists, the axes are its axes, non-empty and distinct; sets
  /// `outAxes` and the group size.
  absl::Status checkMeshAxes(const std::string &where, uint32_t meshIndex,
                             const Vector<uint32_t> *axes,
                             std::vector<uint32_t> &outAxes,
                             int64_t &groupSize) const;
  absl::Status checkAxisIndex(const FunctionContext &ctx,
                              const std::string &where,
                              const step::AxisIndex &a) const;
  /// Every StateSlot.sharding, after the meshes; fills StateInfo::sharding.
  absl::Status checkStateSharding();
  /// Rejects recursion (the arena plan gives every function's transients
  /// fixed offsets, so a function cannot be live twice) and call chains
  /// deeper than the limit.
  absl::Status checkCallGraph();

  static bool validRole(step::Role role) {
    return role >= step::Role::MIN && role <= step::Role::MAX;
  }

  Program &program_;
  const step::Step &step_;
  const LoadOptions &options_;
  std::vector<FunctionContext> contexts_;
};

} // namespace omni::loader

#endif // OMNI_RUNTIME_LOADER_VERIFYIMPL_H
