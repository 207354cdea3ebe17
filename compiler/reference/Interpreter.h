//===- Interpreter.h - The reference evaluator's machinery ------*- C++ -*-===//
//
// Private to compiler/reference. The Interpreter walks a function's blocks,
// keeps the value of every SSA value in a per-call frame, and dispatches each
// op to a handler looked up by the op's TypeID. Handlers are grouped by op
// family in the Eval*.cpp files, each of which contributes its handlers
// through a register*Handlers function; supporting a new op means adding
// one handler there, never touching the driver.
//
// The driver, not the handlers, owns the invariants every result must meet:
// after a handler returns, each result is checked against its declared type
// (shape, float vs integer) and conformed to it (floats rounded to their
// element type in float32 mode, integers wrapped to their width).
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_COMPILER_REFERENCE_INTERPRETER_H
#define OMNI_COMPILER_REFERENCE_INTERPRETER_H

#include "compiler/reference/Evaluator.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Operation.h"
#include "mlir/Support/TypeID.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/Twine.h"

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace omni::reference::detail {

/// The results of one op, in result order.
using Results = std::vector<HostTensor>;

class Interpreter;

/// Evaluates one op whose operands the interpreter holds.
using OpHandler =
    std::function<absl::StatusOr<Results>(mlir::Operation *, Interpreter &)>;
using HandlerTable = llvm::DenseMap<mlir::TypeID, OpHandler>;

/// Registers `fn`, callable as fn(OpT, Interpreter &), for every OpT.
template <typename... OpTs, typename F>
void addHandler(HandlerTable &table, F fn) {
  (table.try_emplace(mlir::TypeID::get<OpTs>(),
                     [fn](mlir::Operation *op, Interpreter &interp) {
                       return fn(llvm::cast<OpTs>(op), interp);
                     }),
   ...);
}

/// Registers `fn`, callable as fn(Operation *, Interpreter &), for every
/// OpT (for families whose ops share one generic implementation).
template <typename... OpTs>
void addGenericHandler(HandlerTable &table, const OpHandler &fn) {
  (table.try_emplace(mlir::TypeID::get<OpTs>(), fn), ...);
}

void registerStructuredHandlers(HandlerTable &table); // func, scf, tensor
void registerArithHandlers(HandlerTable &table);
void registerElementwiseHandlers(HandlerTable &table);
void registerShapeHandlers(HandlerTable &table);
void registerContractionHandlers(HandlerTable &table);
void registerCompositeHandlers(HandlerTable &table);
void registerDiffusionHandlers(HandlerTable &table);
void registerStructureHandlers(HandlerTable &table); // fusion, host_call, ...

/// "file.mlir:3:10" for a location with a file position, otherwise the
/// location as MLIR prints it.
std::string locationString(mlir::Location loc);

/// InvalidArgument "<location>: '<op name>' <message>".
absl::Status opError(mlir::Operation *op, const llvm::Twine &message);

/// The same, with the message of a status from a library (runtime/flowgrpo,
/// a host function); keeps the status code.
absl::Status opError(mlir::Operation *op, const absl::Status &status);

/// The element type and shape of a value's type: a static ranked tensor,
/// or a scalar integer, index (as i64) or float type (rank 0).
struct ValueType {
  DType dtype;
  std::vector<int64_t> shape;
};
absl::StatusOr<ValueType> valueTypeOf(mlir::Type type);

/// The MLIR spelling of a type, for messages.
std::string typeString(mlir::Type type);

/// The value of a constant attribute (IntegerAttr, FloatAttr, or an
/// ElementsAttr of APInt/APFloat elements) as a tensor of `type`.
absl::StatusOr<HostTensor>
attributeValue(mlir::Operation *op, mlir::Attribute attr, mlir::Type type);

/// Float-to-integer conversion of arith.fptosi/fptoui and omni.cast:
/// truncation toward zero, saturating at the bounds of a `width`-bit signed
/// (or unsigned) integer; NaN converts to 0.
int64_t saturatingFloatToInt(double x, unsigned width, bool isUnsigned);

/// Row-major strides of `shape` (in elements).
std::vector<int64_t> stridesOf(llvm::ArrayRef<int64_t> shape);

/// Copies element `from` of `src` into element `to` of `dst`; both tensors
/// are float or both are integer.
inline void copyElement(const HostTensor &src, int64_t from, HostTensor &dst,
                        int64_t to) {
  if (dst.isFloat())
    dst.floats()[to] = src.floats()[from];
  else
    dst.ints()[to] = src.ints()[from];
}

/// Calls fn(index, position) for every multi-index of `shape` in row-major
/// order, with position its row-major offset.
template <typename F> void forEachIndex(llvm::ArrayRef<int64_t> shape, F fn) {
  int64_t count = 1;
  for (int64_t d : shape)
    count *= d;
  std::vector<int64_t> index(shape.size(), 0);
  for (int64_t position = 0; position < count; ++position) {
    fn(llvm::ArrayRef<int64_t>(index), position);
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
      if (++index[d] < shape[d])
        break;
      index[d] = 0;
    }
  }
}

//===----------------------------------------------------------------------===//
// SPMD: the simulated world (Spmd.cpp)
//===----------------------------------------------------------------------===//

/// A mesh's axes and sizes, and the groups its axes form (the same ranking
/// as the loader's MeshInfo::groupOf, docs/backend.md "Channels and the
/// mesh"): rank r has row-major coordinates over `shape`; a group over
/// `axes` ranks its members row-major over those axes in the listed order.
struct MeshGroups {
  std::vector<std::string> axes;
  std::vector<int64_t> shape;

  /// Product of the axis sizes.
  int64_t numRanks() const;
  /// The world ranks of `rank`'s group over `groupAxes`, in group rank
  /// order; `groupRank` receives `rank`'s position. Axes must be axes of
  /// the mesh.
  std::vector<int64_t> groupOf(llvm::ArrayRef<std::string> groupAxes,
                               int64_t rank, int64_t *groupRank) const;
};

/// The mesh `meshRef` names (an omni.mesh of `op`'s module), or a one-line
/// error located at `op`.
absl::StatusOr<MeshGroups> meshOf(mlir::Operation *op,
                                  mlir::FlatSymbolRefAttr meshRef);

/// The axis names of a collective's `axes` attribute.
std::vector<std::string> axisList(mlir::ArrayAttr axes);

/// The rendezvous of N simulated ranks (threads). A collective posts its
/// operand on the channel of its group (the list of world ranks) and waits
/// until every member has posted the same collective; each then computes
/// its own result from the posts, in group rank order. Nothing hangs: a
/// rank that fails aborts the world (every waiting and later collective
/// fails with that rank's message), and a wait that can never complete
/// (a member returned, or the ranks wait on different groups) aborts it
/// too. Thread safety: every method may be called from any rank's thread.
class World {
public:
  explicit World(int64_t numRanks);

  int64_t size() const { return numRanks; }

  /// Posts `value` for `op` by world rank `rank`, position `groupRank` of
  /// `members`, and returns the members' posts in group rank order.
  absl::StatusOr<std::vector<HostTensor>>
  exchange(mlir::Operation *op, int64_t rank,
           const std::vector<int64_t> &members, int64_t groupRank,
           const HostTensor &value);

  /// Rank `rank`'s evaluation failed with `status`: aborts the world (the
  /// first failure is the one reported).
  void fail(int64_t rank, const absl::Status &status);
  /// Rank `rank` returned; collectives still waiting for it fail.
  void finish(int64_t rank);

  /// The failure of the lowest rank that failed on its own ("rank r:
  /// ..."), else the abort's reason (a stuck collective), or OK.
  absl::Status failure() const;

private:
  struct Round {
    std::vector<std::shared_ptr<const HostTensor>> posts;
    std::vector<mlir::Operation *> ops;
    int64_t posted = 0, read = 0, blocked = 0;
  };
  struct Channel {
    std::vector<int64_t> nextRound; // per group rank
    std::map<int64_t, Round> rounds;
  };

  /// Aborts with `message` (lock held) unless already aborted.
  void abortLocked(std::string message);
  /// Aborts when some wait can never complete (lock held).
  void checkStuckLocked();

  const int64_t numRanks;
  mutable std::mutex mutex;
  std::condition_variable changed;
  std::map<std::vector<int64_t>, Channel> channels;
  std::vector<bool> finished;
  std::vector<mlir::Operation *> waitingOn; // per rank, null when running
  int64_t numFinished = 0, numBlocked = 0;
  bool aborted = false;
  std::string abortMessage;
  // The lowest rank that failed on its own (not by the abort), so that the
  // reported failure does not depend on thread timing when several fail.
  int64_t rootRank = -1;
  std::string rootMessage;
};

/// The values of the ops that carry an `omni.trace` id, recorded in
/// evaluation order (an op in a loop or a called function records one
/// occurrence per evaluation).
struct TraceLog {
  struct Entry {
    int64_t id;
    mlir::Operation *op;
    Results values;
  };
  std::vector<Entry> entries;
};

/// The attributes compareSharded reads (docs/reference-evaluator.md).
inline constexpr llvm::StringLiteral kTraceAttr = "omni.trace";
inline constexpr llvm::StringLiteral kResultShardingsAttr =
    "omni.result_shardings";

/// Checks `args` against the signature of @name of `module` (what
/// evaluateFunction checks) and returns the function.
absl::StatusOr<mlir::func::FuncOp>
checkedFunction(mlir::ModuleOp module, llvm::StringRef name,
                llvm::ArrayRef<HostTensor> args);

/// evaluateSpmd with a TraceLog per rank (null `logs` records nothing; else
/// it is resized to numRanks). The unsharded program is the 1-rank case.
absl::StatusOr<std::vector<Results>>
evaluateSpmdTraced(mlir::ModuleOp module, llvm::StringRef name,
                   int64_t numRanks, llvm::ArrayRef<Results> perRankArgs,
                   const EvalOptions &options, std::vector<TraceLog> *logs);

/// Walks functions and regions and evaluates ops. One instance per
/// evaluateFunction call (per rank for evaluateSpmd); not thread-safe.
class Interpreter {
public:
  Interpreter(mlir::ModuleOp module, const EvalOptions &options);

  /// Calls `fn` (which must have a body) on `args` in a fresh frame.
  /// `caller` (null for the entry call) locates argument errors.
  absl::StatusOr<Results> callFunction(mlir::func::FuncOp fn,
                                       llvm::ArrayRef<HostTensor> args,
                                       mlir::Operation *caller);

  /// Binds `args` to the block's arguments, evaluates its ops in order and
  /// returns the values its terminator (func.return, scf.yield or
  /// omni.yield) passes on. `owner` is the op owning the region.
  absl::StatusOr<Results> runBlock(mlir::Block &block,
                                   llvm::ArrayRef<HostTensor> args,
                                   mlir::Operation *owner);

  /// The value of an operand of the op being evaluated. The driver checks
  /// that every operand has a value before calling a handler, and frames
  /// keep references stable while regions run.
  const HostTensor &get(mlir::Value value) const;

  /// A zero tensor of result `index`'s type.
  HostTensor zerosForResult(mlir::Operation *op, unsigned index) const;

  /// Whether an op whose float element type is `dtype` runs the double
  /// instances of runtime/flowgrpo (float64 mode, or f64 tensors).
  bool usesDouble(DType dtype) const {
    return options.precision == Precision::F64 || dtype == DType::F64;
  }

  Precision precision() const { return options.precision; }

  /// Makes this interpreter rank `rank` of `world` (null: a single-process
  /// evaluation, where only 1-rank groups exist).
  void setRank(World *world, int64_t rank) {
    this->world = world;
    this->rank = rank;
  }
  World *getWorld() const { return world; }
  int64_t getRank() const { return rank; }
  /// Records the results of ops with an omni.trace id into `log`.
  void setTraceLog(TraceLog *log) { traceLog = log; }
  const HostFunctionRegistry &hostFunctions() const { return *hostFns; }
  mlir::ModuleOp getModule() const { return module; }

private:
  /// Evaluates one op and binds its results.
  absl::Status runOp(mlir::Operation *op);

  /// Checks `tensor` against `value`'s type, conforms it (rounding, integer
  /// wrapping) and stores it in the current frame.
  absl::Status bind(mlir::Value value, HostTensor tensor,
                    mlir::Operation *owner, const llvm::Twine &what);

  struct ValueHash {
    size_t operator()(mlir::Value v) const {
      return std::hash<const void *>()(v.getAsOpaquePointer());
    }
  };
  /// The values of one function call. unordered_map keeps references to
  /// its elements valid while more values are inserted.
  using Frame = std::unordered_map<mlir::Value, HostTensor, ValueHash>;

  mlir::ModuleOp module;
  const EvalOptions &options;
  HostFunctionRegistry noHostFns; // empty: EvalOptions names none
  const HostFunctionRegistry *hostFns;
  HandlerTable handlers;
  std::vector<std::unique_ptr<Frame>> frames;
  World *world = nullptr;
  int64_t rank = 0;
  TraceLog *traceLog = nullptr;
};

} // namespace omni::reference::detail

#endif // OMNI_COMPILER_REFERENCE_INTERPRETER_H
