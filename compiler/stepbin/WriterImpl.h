//===- WriterImpl.h - the state of one step.bin being written ---*- C++ -*-===//
//
// Internal to compiler/stepbin. The Writer walks each public function once,
// in program order; StepWriter.cpp holds the tables (functions, executables,
// the root), WriterValues.cpp the mapping of values to tensor slots and
// index registers, WriterCommands.cpp one emitter per op kind and the
// table that picks it.
//
// Ownership: the Writer borrows the module and the codegen result for its
// lifetime. Thread safety: none (one per write).
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_COMPILER_STEPBIN_WRITERIMPL_H
#define OMNI_COMPILER_STEPBIN_WRITERIMPL_H

#include "compiler/codegen/CodegenResult.h"
#include "compiler/stepbin/StepWriter.h"

#include "runtime/schema/step_generated.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringMap.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mlir::omni::stepbin {

namespace fb = ::flatbuffers;
namespace st = ::omni::step;

int64_t elementBytes(Type e);
FailureOr<st::DType> dtypeOf(Type e);
std::string locationString(Location loc);
/// The outermost name of a location: a call site's caller before its
/// callee (inlined model code belongs to the phase that called it), the
/// first named part of a fused location.
std::string phaseOf(Location loc);

struct TensorEntry {
  std::string name;
  st::DType dtype;
  std::vector<int64_t> shape;
  st::Storage storage;
  int64_t index;
  st::Role role;
};

/// How a sharded program splits a state slot (step.fbs StateSharding):
/// the slot holds block k of dimension `dim` of `globalShape` on group
/// rank k of the group `axes` of mesh `mesh` form.
struct StateShardingEntry {
  uint32_t mesh = 0;
  std::vector<uint32_t> axes;
  int64_t dim = 0;
  std::vector<int64_t> globalShape;
  bool operator==(const StateShardingEntry &o) const {
    return mesh == o.mesh && axes == o.axes && dim == o.dim &&
           globalShape == o.globalShape;
  }
  bool operator!=(const StateShardingEntry &o) const { return !(*this == o); }
};

/// A persistent state slot: every `omni.state` name of the module. `type`
/// is this rank's (local) type.
struct StateEntry {
  std::string name;
  RankedTensorType type;
  st::Role role;
  std::optional<StateShardingEntry> sharding;
};

/// An `omni.mesh` of the module (step.fbs Mesh).
struct MeshEntry {
  std::string name;
  std::vector<std::string> axes;
  std::vector<int64_t> shape;
};

using Commands = std::vector<fb::Offset<st::Command>>;

/// The state of one step.bin being written.
class Writer {
public:
  Writer(ModuleOp module, const CodegenResult &codegen,
         const StepWriterOptions &options)
      : module(module), codegen(codegen), options(options) {}
  FailureOr<std::vector<uint8_t>> write(StringRef producer);

  /// An emitter turns one op into zero or more commands appended to `out`
  /// (WriterCommands.cpp); it emits an error at the op on failure.
  using Emitter = LogicalResult (Writer::*)(Operation *op, Commands &out);

private:
  /// A row of the emitter table: the first row whose `matches` holds writes
  /// the op.
  struct EmitterRow {
    bool (*matches)(Operation *op);
    Emitter emit;
  };
  static ArrayRef<EmitterRow> emitters();

  LogicalResult collectMeshes();
  LogicalResult collectState();
  /// The runtime hyper-parameters: every `omni.hparam` argument of the
  /// public functions (docs/recipes.md, "Runtime hyper-parameters").
  LogicalResult collectHyperParams();
  /// The module's `omni.metadata` dictionary (docs/backend.md, "Metadata").
  LogicalResult collectMetadata();
  /// The sharding of state value `what` of `fn` from its `omni.sharding`
  /// and `omni.global_type` attributes (`sharding` null: none), checked
  /// against its local `type`.
  FailureOr<std::optional<StateShardingEntry>>
  stateSharding(func::FuncOp fn, const std::string &what, Attribute sharding,
                Attribute globalType, RankedTensorType type);
  /// The mesh index and axis indices a collective or axis_index names.
  LogicalResult meshAxes(Operation *op, StringRef mesh, ArrayAttr axes,
                         uint32_t &meshIndex,
                         std::vector<uint32_t> &axisIndices);
  LogicalResult writeFunction(func::FuncOp fn);
  LogicalResult emitReturn(func::FuncOp fn, func::ReturnOp ret,
                           uint32_t numInputs, std::vector<uint32_t> &outputs,
                           Commands &out);
  FailureOr<fb::Offset<fb::Vector<fb::Offset<st::Executable>>>> executables();
  LogicalResult emitBlock(Block &block, Commands &out);
  LogicalResult emitOp(Operation *op, Commands &out);

  // One emitter per op kind (WriterCommands.cpp).
  LogicalResult emitScalarConstant(Operation *op, Commands &out);
  LogicalResult emitTensorConstant(Operation *op, Commands &out);
  LogicalResult emitDispatch(Operation *op, Commands &out);
  LogicalResult emitLibraryCall(Operation *op, Commands &out);
  LogicalResult emitRandom(Operation *op, Commands &out);
  LogicalResult emitHostCall(Operation *op, Commands &out);
  LogicalResult emitAlias(Operation *op, Commands &out);
  LogicalResult emitScalarArith(Operation *op, Commands &out);
  LogicalResult emitIndexCast(Operation *op, Commands &out);
  LogicalResult emitFromElements(Operation *op, Commands &out);
  LogicalResult emitExtract(Operation *op, Commands &out);
  LogicalResult emitExtractSlice(Operation *op, Commands &out);
  LogicalResult emitInsertSlice(Operation *op, Commands &out);
  LogicalResult emitLoop(Operation *op, Commands &out);
  LogicalResult emitCollective(Operation *op, Commands &out);
  LogicalResult emitAxisIndex(Operation *op, Commands &out);
  LogicalResult emitEmpty(Operation *op, Commands &out);
  LogicalResult emitNothing(Operation *op, Commands &out);
  /// Whether the op after matmul `op` is a fusion whose kernel reads the
  /// matmul's result by slices, so that its Dispatch can be the
  /// LibraryCall's epilogue (step.fbs LibraryCall.epilogue).
  bool hasEpilogue(Operation *op) const;

  // Values to slots and registers (WriterValues.cpp).
  FailureOr<uint32_t> newTensor(Value v, st::Storage storage, int64_t index,
                                st::Role role, RankedTensorType type = {});
  FailureOr<uint32_t> arenaResult(Operation *op, unsigned i);
  FailureOr<uint32_t> slot(Operation *user, Value v);
  FailureOr<uint32_t> scalar(Operation *user, Value v);
  uint32_t newScalar(Value v);
  int64_t extraBytes(int64_t bytes);
  bool sameBytes(uint32_t a, uint32_t b) const;
  fb::Offset<st::Command> command(Operation *op, st::CommandKind kind,
                                  fb::Offset<void> body);
  fb::Offset<fb::Vector<uint32_t>> slots(Operation *op, ValueRange values,
                                         bool &ok);
  /// A whole-tensor copy is `bytes` 0 with no offsets.
  LogicalResult copyRange(Operation *op, uint32_t src, uint32_t dst,
                          int64_t bytes, int64_t srcOffset, int srcScalar,
                          int64_t srcStride, int64_t dstOffset, int dstScalar,
                          int64_t dstStride, Commands &out);

  ModuleOp module;
  const CodegenResult &codegen;
  StepWriterOptions options;
  fb::FlatBufferBuilder fbb{1 << 16};
  std::vector<TensorEntry> tensors;
  std::vector<std::string> scalarNames;
  std::vector<fb::Offset<st::Constant>> constants;
  std::vector<fb::Offset<st::Function>> functions;
  std::vector<StateEntry> state;
  llvm::StringMap<uint32_t> stateIndex;
  std::vector<MeshEntry> meshes;
  llvm::StringMap<uint32_t> meshIndex;
  /// name -> (default, range), sorted by name.
  std::map<std::string, std::pair<double, std::string>> hyperParams;
  /// key -> value, sorted by key (omni.metadata).
  std::vector<std::pair<std::string, std::string>> metadata;
  int64_t arenaSize = 0;

  // Per function.
  DenseMap<Value, uint32_t> tensorOf;
  DenseMap<Value, uint32_t> scalarOf;
  /// Returned values an op may write straight into the caller's result
  /// buffer (argument numInputs + k) instead of the arena.
  DenseMap<Value, int64_t> resultArgument;
  /// The tensor of each argument (an input or a state slot), by position.
  std::vector<uint32_t> argumentTensor;
  int64_t functionArena = 0;
  int64_t extraTop = 0;
};

} // namespace mlir::omni::stepbin

#endif // OMNI_COMPILER_STEPBIN_WRITERIMPL_H
