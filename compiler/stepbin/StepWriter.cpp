//===- StepWriter.cpp - lower a compiled module to step.bin ---------------===//
//
// The tables of step.bin: each public function (its inputs, outputs and
// command list, from WriterCommands.cpp's emitters), the executables and
// kernel signatures from the CodegenResult, the tensor table, the target,
// and the checksums. Values map to tensor slots and index registers in
// WriterValues.cpp.
//
//===----------------------------------------------------------------------===//

#include "compiler/stepbin/StepWriter.h"
#include "compiler/stepbin/WriterImpl.h"

#include "runtime/schema/Integrity.h"

#include "llvm/Support/MathExtras.h"

namespace mlir::omni::stepbin {

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
  Block &entry = fn.getBody().front();
  for (auto [i, arg] : llvm::enumerate(entry.getArguments())) {
    if (!isa<RankedTensorType>(arg.getType()))
      return fn.emitOpError("argument #")
             << i << " has type " << arg.getType()
             << "; public functions are entry points and take tensors only "
                "(make helpers private so they are inlined)";
    FailureOr<uint32_t> t =
        newTensor(arg, st::Storage::Argument, i, st::Role::Input);
    if (failed(t))
      return failure();
    // `omni.name` names state for checkpoints (diffusers parameter names).
    if (auto name = fn.getArgAttrOfType<StringAttr>(i, "omni.name"))
      tensors[*t].name = name.str();
    inputs.push_back(*t);
  }
  // A value returned once, and computed in the function body, is written
  // directly into its result buffer: no copy on return.
  auto ret = cast<func::ReturnOp>(entry.getTerminator());
  DenseMap<Value, int> uses;
  for (Value v : ret.getOperands())
    ++uses[v];
  for (auto [k, v] : llvm::enumerate(ret.getOperands()))
    if (Operation *def = v.getDefiningOp();
        def && uses[v] == 1 && def->getBlock() == &entry &&
        def->getAttrOfType<DenseI64ArrayAttr>("omni.offsets"))
      resultArgument[v] = entry.getNumArguments() + k;
  std::vector<fb::Offset<st::Command>> commands;
  if (failed(emitBlock(entry, commands)))
    return failure();
  for (auto [k, v] : llvm::enumerate(ret.getOperands())) {
    FailureOr<uint32_t> s = slot(ret, v);
    if (failed(s))
      return failure();
    if (auto name = fn.getResultAttrOfType<StringAttr>(k, "omni.name"))
      tensors[*s].name = name.str();
    outputs.push_back(*s);
  }
  functions.push_back(
      st::CreateFunction(fbb, fbb.CreateString(fn.getSymName().str()),
                         fbb.CreateVector(inputs), fbb.CreateVector(outputs),
                         fbb.CreateVector(commands), scalarNames.size()));
  return success();
}

FailureOr<std::vector<uint8_t>> Writer::write(StringRef producer) {
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
      *executables, fbb.CreateVector(constants),
      fbb.CreateVector(std::vector<fb::Offset<st::StateSlot>>{}),
      fbb.CreateVector(functions), integrity);
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
      signatures.push_back(st::CreateKernelSignature(
          fbb, fbb.CreateVectorOfStructs(operands),
          fbb.CreateVectorOfStructs(results), dispatchGrid(k.launch),
          /*num_scalars=*/0));
    }
    fbb.ForceVectorAlignment(exe.code.size(), 1, 32);
    auto data = fbb.CreateVector(
        reinterpret_cast<const uint8_t *>(exe.code.data()), exe.code.size());
    tables.push_back(st::CreateExecutable(
        fbb, fbb.CreateString(exe.name), toSchema(exe.format),
        fbb.CreateString(exe.target.features), data, fbb.CreateVector(kernels),
        fbb.CreateVector(signatures)));
  }
  return fbb.CreateVector(tables);
}

} // namespace mlir::omni::stepbin

mlir::FailureOr<std::vector<uint8_t>>
mlir::omni::writeStepBin(mlir::ModuleOp module, const CodegenResult &codegen,
                         mlir::StringRef producer) {
  stepbin::Writer writer(module, codegen);
  return writer.write(producer);
}
