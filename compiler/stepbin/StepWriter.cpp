//===- StepWriter.cpp - lower a compiled module to step.bin ---------------===//
//
// The tables of step.bin: each public function (its inputs, outputs and
// command list, from WriterCommands.cpp's emitters), the executables and
// kernel signatures from the CodegenResult, the tensor table, the target,
// the state table and the checksums. Arguments and results with
// `omni.state` (omni-resident-state) are not inputs and outputs: they read
// the slot and are stored into it on return (emitReturn). Values map to
// tensor slots and index registers in WriterValues.cpp. The module's
// omni.mesh ops become the meshes table, and state values with
// `omni.sharding` and `omni.global_type` (omni-shard) sharded state slots.
//
//===----------------------------------------------------------------------===//

#include "compiler/stepbin/StepWriter.h"
#include "compiler/stepbin/WriterImpl.h"

#include "dialects/omni/OmniOps.h"
#include "runtime/loader/Program.h"
#include "runtime/schema/Integrity.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/MathExtras.h"

namespace mlir::omni::stepbin {

/// Optimizer state: a name under an optimizer's prefix (`adamw.m.<p>`) or
/// a step counter (`step`, `<prefix>.step`); everything else is a
/// parameter (model weights, frozen copies, LoRA adapters).
st::Role stateRole(StringRef name) {
  for (StringRef prefix : {"adamw.", "adam.", "sgd.", "lion.", "optimizer."})
    if (name.starts_with(prefix))
      return st::Role::OptimizerState;
  if (name == "step" || name.ends_with(".step"))
    return st::Role::OptimizerState;
  return st::Role::Parameter;
}

/// The meshes table: every `omni.mesh` of the module, in order. The
/// dialect verifier has checked axes and sizes (OmniOps.td).
LogicalResult Writer::collectMeshes() {
  for (auto mesh : module.getOps<MeshOp>()) {
    MeshEntry e;
    e.name = mesh.getSymName().str();
    for (Attribute a : mesh.getAxes())
      e.axes.push_back(cast<StringAttr>(a).str());
    e.shape.assign(mesh.getShape().begin(), mesh.getShape().end());
    meshIndex[e.name] = meshes.size();
    meshes.push_back(std::move(e));
  }
  return success();
}

LogicalResult Writer::meshAxes(Operation *op, StringRef mesh, ArrayAttr axes,
                               uint32_t &meshAt,
                               std::vector<uint32_t> &axisIndices) {
  auto it = meshIndex.find(mesh);
  if (it == meshIndex.end())
    return op->emitOpError("names mesh @")
           << mesh << " but the module has no omni.mesh of that name";
  meshAt = it->second;
  const MeshEntry &m = meshes[meshAt];
  axisIndices.clear();
  for (Attribute a : axes) {
    auto name = dyn_cast<StringAttr>(a);
    auto at = name ? llvm::find(m.axes, name.getValue().str()) : m.axes.end();
    if (at == m.axes.end())
      return op->emitOpError("names axis ")
             << a << " but mesh @" << mesh << " has no such axis";
    axisIndices.push_back(at - m.axes.begin());
  }
  return success();
}

/// A sharded state value (docs/backend.md, "Sharded state"): the
/// `omni.sharding` of omni-shard with one split dimension at most, and the
/// unsharded `omni.global_type`, whose split dimension is
/// ceil(global / G) on this rank and whose other dimensions are the local
/// ones.
FailureOr<std::optional<StateShardingEntry>>
Writer::stateSharding(func::FuncOp fn, const std::string &what,
                      Attribute shardingAttr, Attribute globalAttr,
                      RankedTensorType type) {
  auto error = [&]() {
    InFlightDiagnostic d = emitError(fn.getLoc());
    d << "@" << fn.getSymName() << ": " << what;
    return d;
  };
  if (!shardingAttr) {
    if (globalAttr)
      return error() << " has omni.global_type but no omni.sharding; "
                        "expected both or neither";
    return std::optional<StateShardingEntry>();
  }
  auto sharding = dyn_cast<ShardingAttr>(shardingAttr);
  if (!sharding)
    return error() << " has omni.sharding = " << shardingAttr
                   << "; expected an #omni.sharding";
  if (static_cast<int64_t>(sharding.getDims().size()) != type.getRank())
    return error() << " of type " << type << " has omni.sharding " << sharding
                   << " with " << sharding.getDims().size()
                   << " entries; expected one per dimension (" << type.getRank()
                   << ")";
  int64_t dim = -1;
  for (int64_t d = 0; d < type.getRank(); ++d) {
    if (sharding.getAxes(d).empty())
      continue;
    if (dim >= 0)
      return error() << " has omni.sharding " << sharding
                     << " that splits dimensions " << dim << " and " << d
                     << "; expected at most one split dimension";
    dim = d;
  }
  StringRef meshName = sharding.getMesh().getValue();
  auto mesh = meshIndex.find(meshName);
  if (mesh == meshIndex.end())
    return error() << " has omni.sharding over @" << meshName
                   << " but the module has no omni.mesh of that name";
  auto globalType = dyn_cast_if_present<TypeAttr>(globalAttr);
  auto global = globalType ? dyn_cast<RankedTensorType>(globalType.getValue())
                           : RankedTensorType();
  if (dim < 0) {
    // Replicated: the global type, if given, is the local one.
    if (global && global != type)
      return error() << " is " << type << " and replicated but has "
                     << "omni.global_type " << global
                     << "; expected the same type";
    return std::optional<StateShardingEntry>();
  }
  if (!global)
    return error() << " has omni.sharding " << sharding
                   << " but no omni.global_type tensor type; expected the "
                      "unsharded type";
  StateShardingEntry e;
  e.mesh = mesh->second;
  const MeshEntry &m = meshes[e.mesh];
  int64_t groupSize = 1;
  for (StringRef axis : sharding.getAxes(dim)) {
    auto at = llvm::find(m.axes, axis.str());
    if (at == m.axes.end())
      return error() << " has omni.sharding " << sharding << " over axis '"
                     << axis << "' but mesh @" << meshName
                     << " has no such axis";
    e.axes.push_back(at - m.axes.begin());
    groupSize *= m.shape[at - m.axes.begin()];
  }
  e.dim = dim;
  e.globalShape.assign(global.getShape().begin(), global.getShape().end());
  SmallVector<int64_t> want(global.getShape());
  bool ok = global.getElementType() == type.getElementType() &&
            global.getRank() == type.getRank() && global.hasStaticShape();
  if (ok) {
    want[dim] = llvm::divideCeil(want[dim], groupSize);
    ok = llvm::equal(want, type.getShape());
  }
  if (!ok)
    return error() << " is " << type << " but omni.global_type " << global
                   << " split along dimension " << dim << " over " << groupSize
                   << " ranks gives "
                   << (global.getRank() == type.getRank()
                           ? Type(RankedTensorType::get(
                                 want, global.getElementType()))
                           : Type(global))
                   << "; expected the local type to be ceil(global / "
                      "ranks) on the split dimension and equal elsewhere";
  return std::optional<StateShardingEntry>(std::move(e));
}

/// The state table: every `omni.state` name of the public functions, in
/// order of first appearance, with its sharding (stateSharding).
/// omni-resident-state has checked the names and types; a module that did
/// not run it gets the same checks here.
LogicalResult Writer::collectState() {
  for (auto fn : module.getOps<func::FuncOp>()) {
    if (fn.isExternal() || fn.isPrivate())
      continue;
    auto visit = [&](Attribute a, Type t, Attribute shardingAttr,
                     Attribute globalAttr,
                     const std::string &position) -> LogicalResult {
      if (!a) {
        // Everything but state is replicated at the function boundary.
        if (shardingAttr)
          if (auto sharding = dyn_cast<ShardingAttr>(shardingAttr))
            for (unsigned d = 0; d < sharding.getDims().size(); ++d)
              if (!sharding.getAxes(d).empty())
                return emitError(fn.getLoc())
                       << "@" << fn.getSymName() << ": " << position
                       << " has omni.sharding " << sharding
                       << " but is not state; expected inputs and outputs "
                          "to be replicated";
        return success();
      }
      auto name = dyn_cast<StringAttr>(a);
      auto type = dyn_cast<RankedTensorType>(t);
      if (!name || name.getValue().empty() || !type ||
          failed(dtypeOf(type.getElementType())))
        return fn.emitOpError("has omni.state = ")
               << a << " on a value of type " << t
               << "; expected a non-empty name on a tensor step.bin can hold";
      FailureOr<std::optional<StateShardingEntry>> sharding = stateSharding(
          fn, "state '" + name.str() + "'", shardingAttr, globalAttr, type);
      if (failed(sharding))
        return failure();
      auto [it, inserted] =
          stateIndex.try_emplace(name.getValue(), state.size());
      if (inserted)
        state.push_back(
            {name.str(), type, stateRole(name.getValue()), *sharding});
      else if (state[it->second].type != type)
        return fn.emitOpError("has state '")
               << name.getValue() << "' of type " << t
               << " but another function has it as " << state[it->second].type;
      else if (state[it->second].sharding != *sharding)
        return emitError(fn.getLoc())
               << "@" << fn.getSymName() << ": state '" << name.getValue()
               << "' is sharded differently here than in an earlier use; "
                  "expected one sharding per state slot";
      return success();
    };
    for (unsigned i = 0; i < fn.getNumArguments(); ++i)
      if (failed(visit(fn.getArgAttr(i, "omni.state"), fn.getArgumentTypes()[i],
                       fn.getArgAttr(i, "omni.sharding"),
                       fn.getArgAttr(i, "omni.global_type"),
                       "argument #" + std::to_string(i))))
        return failure();
    for (unsigned i = 0; i < fn.getNumResults(); ++i)
      if (failed(visit(fn.getResultAttr(i, "omni.state"),
                       fn.getResultTypes()[i],
                       fn.getResultAttr(i, "omni.sharding"),
                       fn.getResultAttr(i, "omni.global_type"),
                       "result #" + std::to_string(i))))
        return failure();
  }
  return success();
}

/// `omni.hparam = {default = <f64>, range = "<interval>"}` on an argument
/// named by `omni.name` of type tensor<f64>: one table row per name, the
/// same default and range wherever the name appears.
LogicalResult Writer::collectHyperParams() {
  for (auto fn : module.getOps<func::FuncOp>()) {
    if (fn.isExternal() || fn.isPrivate())
      continue;
    for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
      Attribute a = fn.getArgAttr(i, "omni.hparam");
      if (!a)
        continue;
      auto error = [&]() {
        return emitError(fn.getLoc())
               << "@" << fn.getSymName() << ": argument #" << i << " ";
      };
      auto dict = dyn_cast<DictionaryAttr>(a);
      auto name = fn.getArgAttrOfType<StringAttr>(i, "omni.name");
      auto type = dyn_cast<RankedTensorType>(fn.getArgumentTypes()[i]);
      auto value = dict ? dict.getAs<FloatAttr>("default") : FloatAttr();
      auto range = dict ? dict.getAs<StringAttr>("range") : StringAttr();
      if (!dict || !value || !range || dict.size() != 2)
        return error()
               << "has omni.hparam = " << a
               << "; expected {default = <f64>, range = \"<interval>\"}";
      if (!name || name.getValue().empty() || !type || type.getRank() != 0 ||
          !type.getElementType().isF64() || fn.getArgAttr(i, "omni.state"))
        return error() << "has omni.hparam but is " << fn.getArgumentTypes()[i]
                       << (name ? " named '" + name.str() + "'"
                                : std::string(" without omni.name"))
                       << "; expected a named tensor<f64> input (not state)";
      // The loader's own reading of the range (runtime/loader/Program.h).
      ::omni::loader::HyperParamInfo probe;
      if (!::omni::loader::parseRange(range.str(), probe))
        return error() << "has omni.hparam range \"" << range.getValue()
                       << "\"; expected an interval such as \"[0, inf)\"";
      if (!probe.contains(value.getValueAsDouble()))
        return error() << "has omni.hparam default " << value.getValueAsDouble()
                       << " outside its range " << range.getValue();
      auto entry = std::make_pair(value.getValueAsDouble(), range.str());
      auto [it, inserted] = hyperParams.try_emplace(name.str(), entry);
      if (!inserted && it->second != entry)
        return error() << "has hyper-parameter '" << name.getValue()
                       << "' with default " << entry.first << " and range "
                       << entry.second << " but another argument has "
                       << it->second.first << " and " << it->second.second
                       << "; expected one default and range per name";
    }
  }
  return success();
}

/// `omni.metadata = {key = "value", ...}` on the module: the metadata table
/// (docs/backend.md, "Metadata"), string values only. A DictionaryAttr is
/// sorted by key with unique keys, as the table must be.
LogicalResult Writer::collectMetadata() {
  Attribute a = module->getAttr("omni.metadata");
  if (!a)
    return success();
  auto dict = dyn_cast<DictionaryAttr>(a);
  if (!dict)
    return emitError(module.getLoc())
           << "omni.metadata = " << a
           << "; expected a dictionary of strings {key = \"value\", ...}";
  for (NamedAttribute entry : dict) {
    auto value = dyn_cast<StringAttr>(entry.getValue());
    if (!value)
      return emitError(module.getLoc())
             << "omni.metadata key '" << entry.getName().getValue()
             << "' has value " << entry.getValue() << "; expected a string";
    if (entry.getName().getValue().empty())
      return emitError(module.getLoc())
             << "omni.metadata has an empty key; expected non-empty keys";
    metadata.emplace_back(entry.getName().str(), value.str());
  }
  return success();
}

LogicalResult Writer::writeFunction(func::FuncOp fn) {
  tensorOf.clear();
  scalarOf.clear();
  resultArgument.clear();
  auto arena = fn->getAttrOfType<IntegerAttr>("omni.arena_size");
  if (!arena)
    return fn.emitOpError("has no memory plan (run omni-plan-memory first)");
  functionArena = 0;
  extraTop = llvm::alignTo(arena.getInt(), 64);
  arenaSize = std::max(arenaSize, extraTop);
  std::vector<uint32_t> inputs, outputs;
  argumentTensor.clear();
  Block &entry = fn.getBody().front();
  for (auto [i, arg] : llvm::enumerate(entry.getArguments())) {
    if (!isa<RankedTensorType>(arg.getType()))
      return fn.emitOpError("argument #")
             << i << " has type " << arg.getType()
             << "; public functions are entry points and take tensors only "
                "(make helpers private so they are inlined)";
    // A state argument reads its slot; the other arguments are the inputs,
    // numbered without the state.
    auto stateName = fn.getArgAttrOfType<StringAttr>(i, "omni.state");
    uint32_t slotIndex =
        stateName ? stateIndex.lookup(stateName.getValue()) : 0;
    FailureOr<uint32_t> t = stateName
                                ? newTensor(arg, st::Storage::State, slotIndex,
                                            state[slotIndex].role)
                                : newTensor(arg, st::Storage::Argument,
                                            inputs.size(), st::Role::Input);
    if (failed(t))
      return failure();
    // State is named by its slot, inputs by `omni.name`.
    if (stateName) {
      tensors[*t].name = stateName.str();
    } else {
      if (auto name = fn.getArgAttrOfType<StringAttr>(i, "omni.name"))
        tensors[*t].name = name.str();
      inputs.push_back(*t);
    }
    argumentTensor.push_back(*t);
  }
  // A value returned once as an output (not stored into a state slot), and
  // computed in the function body, is written directly into its result
  // buffer: no copy on return.
  auto ret = cast<func::ReturnOp>(entry.getTerminator());
  DenseMap<Value, int> uses;
  for (Value v : ret.getOperands())
    ++uses[v];
  int64_t numOutputs = 0;
  for (auto [k, v] : llvm::enumerate(ret.getOperands())) {
    if (fn.getResultAttr(k, "omni.state"))
      continue;
    if (Operation *def = v.getDefiningOp();
        def && uses[v] == 1 && def->getBlock() == &entry &&
        def->getAttrOfType<DenseI64ArrayAttr>("omni.offsets"))
      resultArgument[v] = inputs.size() + numOutputs;
    ++numOutputs;
  }
  std::vector<fb::Offset<st::Command>> commands;
  if (failed(emitBlock(entry, commands)) ||
      failed(emitReturn(fn, ret, inputs.size(), outputs, commands)))
    return failure();
  functions.push_back(
      st::CreateFunction(fbb, fbb.CreateString(fn.getSymName().str()),
                         fbb.CreateVector(inputs), fbb.CreateVector(outputs),
                         fbb.CreateVector(commands), scalarNames.size()));
  return success();
}

/// The end of a function: its outputs, then the stores into state slots.
/// A store whose value already is its slot (computed into it by donation,
/// or the slot's unchanged read) costs nothing; the others are Copies into
/// the slot, after every command of the body, so every read in the body
/// saw the old value. The Copies must not clobber what is still to be
/// read: an output that reads a slot a Copy overwrites is copied into its
/// result buffer first, and a store whose value is such a slot (a swap)
/// goes through scratch space.
LogicalResult Writer::emitReturn(func::FuncOp fn, func::ReturnOp ret,
                                 uint32_t numInputs,
                                 std::vector<uint32_t> &outputs,
                                 std::vector<fb::Offset<st::Command>> &out) {
  struct Store {
    uint32_t source, slot;
    RankedTensorType type;
  };
  SmallVector<Store> stores;
  DenseSet<int64_t> overwritten;
  SmallVector<uint32_t> values;
  for (auto [k, v] : llvm::enumerate(ret.getOperands())) {
    FailureOr<uint32_t> s = slot(ret, v);
    if (failed(s))
      return failure();
    values.push_back(*s);
    auto name = fn.getResultAttrOfType<StringAttr>(k, "omni.state");
    if (!name)
      continue;
    uint32_t index = stateIndex.lookup(name.getValue());
    if (tensors[*s].storage == st::Storage::State && tensors[*s].index == index)
      continue;
    stores.push_back({*s, index, cast<RankedTensorType>(v.getType())});
    overwritten.insert(index);
  }
  auto readsOverwritten = [&](uint32_t t) {
    return tensors[t].storage == st::Storage::State &&
           overwritten.contains(tensors[t].index);
  };
  for (auto [k, v] : llvm::enumerate(ret.getOperands())) {
    if (fn.getResultAttr(k, "omni.state"))
      continue;
    uint32_t t = values[k];
    auto type = cast<RankedTensorType>(v.getType());
    auto name = fn.getResultAttrOfType<StringAttr>(k, "omni.name");
    if (readsOverwritten(t)) {
      FailureOr<uint32_t> buffer =
          newTensor(Value(), st::Storage::Argument, numInputs + outputs.size(),
                    st::Role::Output, type);
      if (failed(buffer))
        return failure();
      (void)copyRange(ret, t, *buffer, 0, 0, -1, 0, 0, -1, 0, out);
      t = *buffer;
    } else if (name && tensors[t].storage == st::Storage::State) {
      // An output named apart from the slot it reads: an alias entry.
      TensorEntry e = tensors[t];
      FailureOr<uint32_t> alias =
          newTensor(Value(), e.storage, e.index, e.role, type);
      if (failed(alias))
        return failure();
      t = *alias;
    }
    if (name)
      tensors[t].name = name.str();
    outputs.push_back(t);
  }
  for (Store &store : stores) {
    if (!readsOverwritten(store.source))
      continue;
    int64_t bytes =
        store.type.getNumElements() * elementBytes(store.type.getElementType());
    FailureOr<uint32_t> tmp = newTensor(Value(), st::Storage::Arena,
                                        functionArena + extraBytes(bytes),
                                        st::Role::Transient, store.type);
    if (failed(tmp))
      return failure();
    (void)copyRange(ret, store.source, *tmp, 0, 0, -1, 0, 0, -1, 0, out);
    store.source = *tmp;
  }
  for (const Store &store : stores) {
    FailureOr<uint32_t> slotTensor =
        newTensor(Value(), st::Storage::State, store.slot,
                  state[store.slot].role, store.type);
    if (failed(slotTensor))
      return failure();
    tensors[*slotTensor].name = state[store.slot].name;
    (void)copyRange(ret, store.source, *slotTensor, 0, 0, -1, 0, 0, -1, 0, out);
  }
  return success();
}

FailureOr<std::vector<uint8_t>> Writer::write(StringRef producer) {
  if (failed(collectMeshes()) || failed(collectState()) ||
      failed(collectHyperParams()) || failed(collectMetadata()))
    return failure();
  for (auto fn : module.getOps<func::FuncOp>()) {
    if (fn.isExternal() || fn.isPrivate())
      continue;
    if (failed(writeFunction(fn)))
      return failure();
  }
  // Executables.
  FailureOr<fb::Offset<fb::Vector<fb::Offset<st::Executable>>>> executables =
      this->executables();
  if (failed(executables))
    return failure();
  // Tensor table and scalars.
  std::vector<fb::Offset<st::Tensor>> tensorOffsets;
  for (const TensorEntry &t : tensors)
    tensorOffsets.push_back(st::CreateTensor(fbb, fbb.CreateString(t.name),
                                             t.dtype, fbb.CreateVector(t.shape),
                                             t.storage, t.index, t.role));
  std::vector<fb::Offset<st::StateSlot>> stateSlots;
  for (const StateEntry &e : state) {
    fb::Offset<st::StateSharding> sharding;
    if (e.sharding)
      sharding = st::CreateStateSharding(
          fbb, e.sharding->mesh, fbb.CreateVector(e.sharding->axes),
          e.sharding->dim, fbb.CreateVector(e.sharding->globalShape));
    stateSlots.push_back(st::CreateStateSlot(
        fbb, fbb.CreateString(e.name), *dtypeOf(e.type.getElementType()),
        fbb.CreateVector(std::vector<int64_t>(e.type.getShape())), e.role,
        sharding));
  }
  // Meshes (none: a single-rank program, the field stays absent).
  fb::Offset<fb::Vector<fb::Offset<st::Mesh>>> meshTables;
  if (!meshes.empty()) {
    std::vector<fb::Offset<st::Mesh>> tables;
    for (const MeshEntry &m : meshes)
      tables.push_back(st::CreateMesh(fbb, fbb.CreateString(m.name),
                                      fbb.CreateVectorOfStrings(m.axes),
                                      fbb.CreateVector(m.shape)));
    meshTables = fbb.CreateVector(tables);
  }
  // Hyper-parameters (none: the field stays absent).
  fb::Offset<fb::Vector<fb::Offset<st::HyperParam>>> hparamTables;
  if (!hyperParams.empty()) {
    std::vector<fb::Offset<st::HyperParam>> tables;
    for (const auto &[name, entry] : hyperParams)
      tables.push_back(st::CreateHyperParam(fbb, fbb.CreateString(name),
                                            entry.first,
                                            fbb.CreateString(entry.second)));
    hparamTables = fbb.CreateVector(tables);
  }
  // Metadata (none: the field stays absent).
  fb::Offset<fb::Vector<fb::Offset<st::MetadataEntry>>> metadataTables;
  if (!metadata.empty()) {
    std::vector<fb::Offset<st::MetadataEntry>> tables;
    for (const auto &[key, value] : metadata)
      tables.push_back(st::CreateMetadataEntry(fbb, fbb.CreateString(key),
                                               fbb.CreateString(value)));
    metadataTables = fbb.CreateVector(tables);
  }
  std::vector<fb::Offset<st::Scalar>> scalars;
  for (const std::string &s : scalarNames)
    scalars.push_back(st::CreateScalar(fbb, fbb.CreateString(s)));
  // The program's target: what its executables were compiled for.
  fb::Offset<st::Target> target;
  if (!codegen.executables.empty()) {
    const CodeTarget &t = codegen.executables.front().target;
    target = st::CreateTarget(fbb, fbb.CreateString(t.kind),
                              fbb.CreateString(t.arch),
                              fbb.CreateString(t.features));
  }
  // Checksums (Integrity.h): zeros here, filled in once the bytes are final.
  st::Crc32c noChecksum(0);
  auto integrity = st::CreateIntegrity(
      fbb, &noChecksum,
      fbb.CreateVector(std::vector<uint32_t>(codegen.executables.size(), 0)),
      fbb.CreateVector(std::vector<uint32_t>(constants.size(), 0)));
  auto root = st::CreateStep(
      fbb, /*version=*/1, fbb.CreateString(producer.str()), target,
      fbb.CreateVector(tensorOffsets), fbb.CreateVector(scalars), arenaSize,
      *executables, fbb.CreateVector(constants), fbb.CreateVector(stateSlots),
      fbb.CreateVector(functions), integrity, meshTables, hparamTables,
      metadataTables);
  st::FinishStepBuffer(fbb, root);
  std::vector<uint8_t> bytes(fbb.GetBufferPointer(),
                             fbb.GetBufferPointer() + fbb.GetSize());
  if (!st::sealStepBin(bytes.data(), bytes.size()))
    return emitError(module.getLoc(),
                     "internal error: cannot fill in step.bin's checksums");
  return bytes;
}

st::ExecutableFormat toSchema(CodeFormat format) {
  switch (format) {
  case CodeFormat::ElfSharedObject:
    return st::ExecutableFormat::ElfSharedObject;
  case CodeFormat::Ptx:
    return st::ExecutableFormat::Ptx;
  case CodeFormat::Cubin:
    return st::ExecutableFormat::Cubin;
  }
  llvm_unreachable("unknown code format");
}

/// Every executable of the codegen result with its code, kernel symbols
/// and one signature per kernel (step.fbs KernelSignature): the buffers it
/// was compiled for and its launch's grid.
FailureOr<fb::Offset<fb::Vector<fb::Offset<st::Executable>>>>
Writer::executables() {
  auto buffers = [&](const std::vector<RankedTensorType> &types,
                     std::vector<st::KernelBuffer> &out) -> LogicalResult {
    for (RankedTensorType type : types) {
      FailureOr<st::DType> dtype = dtypeOf(type.getElementType());
      if (failed(dtype))
        return emitError(module.getLoc(), "a kernel buffer of type ")
               << type << " cannot be held by step.bin";
      out.emplace_back(
          type.getNumElements() * elementBytes(type.getElementType()), *dtype);
    }
    return success();
  };
  std::vector<fb::Offset<st::Executable>> tables;
  for (const CompiledExecutable &exe : codegen.executables) {
    std::vector<fb::Offset<fb::String>> kernels;
    std::vector<fb::Offset<st::KernelSignature>> signatures;
    for (const CompiledKernel &k : exe.kernels) {
      kernels.push_back(fbb.CreateString(k.symbol));
      std::vector<st::KernelBuffer> operands, results;
      if (failed(buffers(k.operands, operands)) ||
          failed(buffers(k.results, results)))
        return failure();
      const std::vector<int64_t> &itemBytes = itemBytesOf(k.launch);
      signatures.push_back(st::CreateKernelSignature(
          fbb, fbb.CreateVectorOfStructs(operands),
          fbb.CreateVectorOfStructs(results), dispatchGrid(k.launch),
          /*num_scalars=*/0,
          itemBytes.empty() ? 0 : fbb.CreateVector(itemBytes)));
    }
    // GPU code: each kernel's launches and scratch buffers, and the PTX
    // beside a cubin (step.fbs GpuKernel, Executable.ptx).
    bool gpu = exe.format != CodeFormat::ElfSharedObject;
    fb::Offset<fb::Vector<fb::Offset<st::GpuKernel>>> gpuKernels;
    fb::Offset<fb::Vector<uint8_t>> ptx;
    if (gpu) {
      std::vector<fb::Offset<st::GpuKernel>> gpuTables;
      for (const CompiledKernel &k : exe.kernels) {
        const auto *launches = std::get_if<GpuLaunches>(&k.launch);
        if (!launches)
          return emitError(module.getLoc(), "internal error: GPU kernel ")
                 << k.symbol << " has no GPU launches";
        std::vector<fb::Offset<st::GpuLaunch>> launchTables;
        for (const GpuLaunch &l : launches->launches)
          launchTables.push_back(st::CreateGpuLaunch(
              fbb, fbb.CreateString(l.entry),
              fbb.CreateVector(std::vector<uint32_t>(l.grid, l.grid + 3)),
              fbb.CreateVector(std::vector<uint32_t>(l.block, l.block + 3)),
              l.sharedBytes, fbb.CreateVector(l.args)));
        gpuTables.push_back(
            st::CreateGpuKernel(fbb, fbb.CreateVector(launchTables),
                                fbb.CreateVector(launches->scratch),
                                fbb.CreateVector(launches->inPlace)));
      }
      gpuKernels = fbb.CreateVector(gpuTables);
      if (!exe.ptx.empty())
        ptx = fbb.CreateVector(
            reinterpret_cast<const uint8_t *>(exe.ptx.data()), exe.ptx.size());
    }
    fbb.ForceVectorAlignment(exe.code.size(), 1, 32);
    auto data = fbb.CreateVector(
        reinterpret_cast<const uint8_t *>(exe.code.data()), exe.code.size());
    // Executable.target: the cpu's feature string, a GPU's SM architecture.
    tables.push_back(st::CreateExecutable(
        fbb, fbb.CreateString(exe.name), toSchema(exe.format),
        fbb.CreateString(gpu ? exe.target.arch : exe.target.features), data,
        fbb.CreateVector(kernels), fbb.CreateVector(signatures), gpuKernels,
        ptx));
  }
  return fbb.CreateVector(tables);
}

} // namespace mlir::omni::stepbin

mlir::FailureOr<std::vector<uint8_t>>
mlir::omni::writeStepBin(mlir::ModuleOp module, const CodegenResult &codegen,
                         mlir::StringRef producer,
                         const StepWriterOptions &options) {
  stepbin::Writer writer(module, codegen, options);
  return writer.write(producer);
}
