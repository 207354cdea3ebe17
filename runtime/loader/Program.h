//===- Program.h - A loaded, verified step.bin ------------------*- C++ -*-===//
//
// The loader turns the bytes of a step.bin into a Program that the executor
// can run without re-checking anything: it maps the file, runs the
// FlatBuffers verifier (file identifier "OMN1", every offset and length
// inside the buffer), checks the version, and then runs the semantic checks
// of Verify.cpp, which never trust the file: every cross-reference index is
// in range, every size and offset is computed with overflow checks, every
// command's operands have the dtypes and shapes its kind needs, nesting and
// calls are bounded and acyclic, and meshes and collectives are consistent
// (VerifyCollective.cpp), and the metadata table's keys are unique and
// sorted (docs/backend.md, "Metadata"). What an executable needs of the device
// (its CPU features, later its SM architecture) is checked by the driver that
// loads it (hal Device::loadExecutable), not here. Every rejection is one line,
// "<file>: <field path>: <expected and found>", for example
//   step.bin: functions[0].commands[3] (Dispatch): operands[1] = 57 but
//   there are 12 tensors
//
// What the loader cannot check: the native code of executables is trusted
// once its driver accepts it (a kernel that writes past its buffers, or a
// Dispatch grid larger than the kernel's iteration space, is outside what
// metadata can prove), and offsets computed from index registers at run time
// are checked by the executor when they are used.
//
// Ownership: a Program owns the mapping (or the aligned copy) of the file
// and everything derived from it; `step()` and all views returned stay
// valid for the Program's lifetime. Thread safety: immutable after load;
// any number of threads may read it.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_LOADER_PROGRAM_H
#define OMNI_RUNTIME_LOADER_PROGRAM_H

#include "runtime/io/HostTensor.h"
#include "runtime/schema/step_generated.h"

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace omni::loader {

/// The step.bin version this runtime reads.
inline constexpr uint32_t kSupportedVersion = 1;

/// The runtime element type of a schema dtype (the caller has checked that
/// `dtype` is a valid enumerator; Program's tensors always are).
DType toDType(step::DType dtype);

using ::omni::dtypeSize;

/// "tensor<2x3xf32>" ("tensor<f32>" for rank 0).
std::string tensorTypeString(DType dtype, absl::Span<const int64_t> shape);

/// The command kind's name ("Dispatch", ...), "NONE" or "kind 17".
std::string commandKindName(step::CommandKind kind);

/// What messages call a command: its kind's name, with the library or the
/// scalar op for those kinds ("LibraryCall Matmul", "ScalarOp Add").
std::string commandLabel(const step::Command &command);

/// A tensor slot, decoded and checked.
struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  int64_t numElements = 0;
  /// numElements * dtypeSize(dtype); never overflows.
  int64_t bytes = 0;
  step::Storage storage = step::Storage::Arena;
  /// Arena byte offset, or argument / constant / state index.
  int64_t index = 0;
  step::Role role = step::Role::Transient;

  std::string typeString() const { return tensorTypeString(dtype, shape); }
};

/// A persistent state slot, decoded and checked.
struct StateInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  int64_t numElements = 0;
  int64_t bytes = 0;
  step::Role role = step::Role::Parameter;
  /// How a sharded program splits the slot over its ranks (step.fbs
  /// StateSharding); absent when every rank holds the whole tensor.
  struct Sharding {
    /// Index into Program::meshes().
    uint32_t mesh = 0;
    /// Indices into the mesh's axes, distinct, non-empty.
    std::vector<uint32_t> axes;
    /// The split dimension, 0 <= dim < rank.
    int64_t dim = 0;
    /// The unsharded shape; shape[dim] = ceil(globalShape[dim] / G).
    std::vector<int64_t> globalShape;
    /// G: the product of the axes' sizes.
    int64_t groupSize = 1;
  };
  std::optional<Sharding> sharding;
};

/// A mesh (step.fbs Mesh), decoded and checked. Rank r of the program has
/// the row-major coordinates of r over `shape`.
struct MeshInfo {
  std::string name;
  std::vector<std::string> axes;
  std::vector<int64_t> shape;
  /// product(shape): the number of ranks the program runs on (< 2^31).
  int64_t numRanks = 1;

  /// The group of ranks that a collective over `axes` (indices into this
  /// mesh's axes, distinct) forms around `rank`: the ranks whose
  /// coordinates differ from rank's only on `axes`. `color` numbers the
  /// groups (row-major over the other axes, in mesh order), `rank` is the
  /// position in the group (row-major over `axes` in the order given),
  /// `size` the product of their sizes.
  struct Group {
    int64_t color = 0, rank = 0, size = 1;
  };
  Group groupOf(absl::Span<const uint32_t> axes, int64_t rank) const;
  /// "'mesh' (dp=2 x tp=2)".
  std::string describe() const;
  /// "'dp', 'tp'" for the given axes.
  std::string axisNames(absl::Span<const uint32_t> axes) const;
};

/// A runtime hyper-parameter (step.fbs HyperParam), decoded and checked:
/// a 0-D f64 input named `name` of the functions that use it.
struct HyperParamInfo {
  std::string name;
  double defaultValue = 0;
  /// The accepted interval as written ("[0, inf)") and its bounds.
  std::string range;
  double lo = 0, hi = 0;
  bool loOpen = false, hiOpen = false;

  /// Whether `v` (finite or not) lies in the range.
  bool contains(double v) const;
};

/// Parses interval notation "[a, b]", "(a, b)", "[a, b)", ...: a and b are
/// numbers or -inf / inf, a <= b. Fills lo, hi and the open flags of `info`;
/// false when `text` is not such an interval.
bool parseRange(absl::string_view text, HyperParamInfo &info);

/// Knobs of the checks. The defaults are what omnirun uses.
struct LoadOptions {
  /// The name messages start with; empty means the path (loadFile) or
  /// "step.bin" (loadBytes).
  std::string name;
  /// Deepest Loop nesting inside one function.
  int maxLoopDepth = 16;
  /// Longest chain of Calls (a function that calls nothing has depth 1).
  int maxCallDepth = 32;
};

class Program {
public:
  /// Maps `path` read-only and loads it. Fails with NotFound /
  /// PermissionDenied (the OS error) or InvalidArgument (a check).
  static absl::StatusOr<std::shared_ptr<const Program>>
  loadFile(const std::string &path, const LoadOptions &options = {});

  /// Loads a copy of `bytes` (kept in 64-byte aligned memory, as the
  /// schema's force_align needs).
  static absl::StatusOr<std::shared_ptr<const Program>>
  loadBytes(absl::string_view bytes, const LoadOptions &options = {});

  ~Program();
  Program(const Program &) = delete;
  Program &operator=(const Program &) = delete;

  /// The verified root table.
  const step::Step &step() const { return *step_; }
  /// The name messages use.
  const std::string &name() const { return name_; }

  absl::Span<const TensorInfo> tensors() const { return tensors_; }
  /// Whether tensors a and b are the same bytes (an alias such as a
  /// reshape has its own entry over the same storage).
  bool sameBuffer(uint32_t a, uint32_t b) const {
    const TensorInfo &x = tensors_[a], &y = tensors_[b];
    return a == b ||
           (x.storage == y.storage && x.index == y.index && x.bytes == y.bytes);
  }
  const TensorInfo &tensor(uint32_t index) const { return tensors_[index]; }
  absl::Span<const StateInfo> state() const { return state_; }
  /// The meshes Collective commands refer to; empty for a single-rank
  /// program.
  absl::Span<const MeshInfo> meshes() const { return meshes_; }
  /// The runtime hyper-parameters, sorted by name; empty when everything
  /// is compiled in.
  absl::Span<const HyperParamInfo> hyperParams() const { return hparams_; }
  /// The hyper-parameter named `name`, if any.
  const HyperParamInfo *findHyperParam(absl::string_view name) const;
  /// The metadata table (docs/backend.md, "Metadata"): what the producer
  /// recorded about the program (model, configs), sorted by key; empty
  /// when it recorded nothing.
  const std::map<std::string, std::string, std::less<>> &metadata() const {
    return metadata_;
  }
  /// The metadata value of `key`, if any.
  const std::string *findMetadata(absl::string_view key) const;
  int64_t arenaSize() const { return step_->arena_size(); }
  uint32_t numScalars() const;
  uint32_t numFunctions() const;

  /// The function named `name`, if any.
  std::optional<uint32_t> findFunction(absl::string_view name) const;
  /// The state slot named `name`, if any.
  std::optional<uint32_t> findState(absl::string_view name) const;
  /// "(tensor<2x3xf32>, tensor<i64>) -> (tensor<f32>)" for --list.
  std::string functionSignature(uint32_t function) const;

private:
  struct Storage;
  Program(std::unique_ptr<Storage> storage, std::string name);
  static absl::StatusOr<std::shared_ptr<const Program>>
  load(std::unique_ptr<Storage> storage, std::string name,
       const LoadOptions &options);

  std::unique_ptr<Storage> storage_;
  std::string name_;
  const step::Step *step_ = nullptr;
  std::vector<TensorInfo> tensors_;
  std::vector<StateInfo> state_;
  std::vector<MeshInfo> meshes_;
  std::vector<HyperParamInfo> hparams_;
  std::map<std::string, std::string, std::less<>> metadata_;
  std::map<std::string, uint32_t, std::less<>> functionsByName_;
  std::map<std::string, uint32_t, std::less<>> stateByName_;

  friend class ProgramVerifier;
};

} // namespace omni::loader

#endif // OMNI_RUNTIME_LOADER_PROGRAM_H
