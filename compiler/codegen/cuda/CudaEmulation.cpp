//===- CudaEmulation.cpp - the cuda target's launches run on the cpu ------===//
//
// See CudaEmulation.h. For each kernel:
//
//   func.func @<symbol>_impl(<operands>, <results>) {
//     %scratch_i = memref.alloc()                       // the GPU's scratch
//     for each launch: scf.for %block in [0, grid.x)
//                        scf.for %thread in [0, block.x)  (per segment)
//                          <the outlined gpu.func's body, with
//                           gpu.block_id x = %block, gpu.thread_id x =
//                           %thread, y and z = 0, gpu.block_dim and
//                           gpu.grid_dim their launch sizes>
//   }
//
// The launches are the cuda lowering's (mapToLaunches, CudaLaunches.cpp):
// 1-D grids (y and z are 1), static shared memory, barriers (of the block,
// or of a warp: nvvm.bar.warp.sync) only at the top level of a body (a row
// launch's, CudaRowLaunches.cpp). A barrier ends a segment of the body:
// each segment is its own loop over the threads.
// A kernel body with anything else is refused in one line.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/cuda/CudaEmulation.h"

#include "compiler/codegen/cpu/CpuCodegen.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::omni;

namespace {

/// The value of a gpu.thread_id/block_id/block_dim/grid_dim op in one
/// emulated thread, or null for another op.
Value idValue(OpBuilder &b, Operation *op, Value block, Value thread,
              const GpuLaunch &launch) {
  auto constant = [&](int64_t v) -> Value {
    return arith::ConstantIndexOp::create(b, op->getLoc(), v);
  };
  auto index = [](gpu::Dimension d) { return static_cast<int>(d); };
  if (auto id = dyn_cast<gpu::ThreadIdOp>(op))
    return id.getDimension() == gpu::Dimension::x ? thread : constant(0);
  if (auto id = dyn_cast<gpu::BlockIdOp>(op))
    return id.getDimension() == gpu::Dimension::x ? block : constant(0);
  if (auto dim = dyn_cast<gpu::BlockDimOp>(op))
    return constant(launch.block[index(dim.getDimension())]);
  if (auto dim = dyn_cast<gpu::GridDimOp>(op))
    return constant(launch.grid[index(dim.getDimension())]);
  return nullptr;
}

/// Appends the loops that run `kernel` as `launch` does, its parameters
/// bound to `buffers[launch.args[i]]`, at `b`'s insertion point. Threads
/// run one after another, so a barrier (at the top level of the body; the
/// cuda lowering puts none elsewhere) ends a segment that all threads of
/// the block run before any runs the next; a value used across a barrier
/// must be recomputable (ids, constants, index arithmetic). Workgroup
/// memory is one buffer that the blocks, run in turn, share.
LogicalResult emitLaunch(OpBuilder &b, gpu::GPUFuncOp kernel,
                         const GpuLaunch &launch, ArrayRef<Value> buffers) {
  Location loc = kernel.getLoc();
  if (launch.grid[1] != 1 || launch.grid[2] != 1 || launch.block[1] != 1 ||
      launch.block[2] != 1 || launch.sharedBytes != 0 ||
      kernel.getNumPrivateAttributions() != 0)
    return emitError(loc, launch.entry)
           << ": --cuda-emulate runs 1-D launches without dynamic shared or "
              "private memory";
  if (!kernel.getBody().hasOneBlock())
    return emitError(loc, launch.entry)
           << ": --cuda-emulate needs a kernel body of one block";
  Block &body = kernel.getBody().front();
  Operation *unsupported = nullptr;
  // Barriers of the block or of a warp; running threads one after
  // another, both end a segment.
  auto isBarrier = [](Operation *op) {
    return isa<gpu::BarrierOp, NVVM::SyncWarpOp>(op);
  };
  kernel.walk([&](Operation *op) {
    bool topBarrier = isBarrier(op) && op->getBlock() == &body;
    if (op != kernel.getOperation() && !topBarrier &&
        (op->getDialect() == kernel->getDialect() ||
         isa<NVVM::NVVMDialect>(op->getDialect())) &&
        !isa<gpu::ThreadIdOp, gpu::BlockIdOp, gpu::BlockDimOp, gpu::GridDimOp,
             gpu::ReturnOp>(op))
      unsupported = op;
  });
  if (unsupported)
    return emitError(unsupported->getLoc(), launch.entry)
           << ": --cuda-emulate cannot run " << unsupported->getName()
           << (isBarrier(unsupported) ? " inside control flow" : "");

  IRMapping shared;
  for (unsigned i = 0; i < kernel.getNumArguments(); ++i)
    shared.map(kernel.getArgument(i), buffers[launch.args[i]]);
  for (BlockArgument memory : kernel.getWorkgroupAttributions()) {
    auto type = cast<MemRefType>(memory.getType());
    shared.map(
        memory,
        memref::AllocaOp::create(
            b, loc, MemRefType::get(type.getShape(), type.getElementType())));
  }
  SmallVector<SmallVector<Operation *>> segments(1);
  for (Operation &op : body.without_terminator()) {
    if (isBarrier(&op))
      segments.emplace_back();
    else
      segments.back().push_back(&op);
  }

  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  Value blocks = arith::ConstantIndexOp::create(b, loc, launch.grid[0]);
  Value threads = arith::ConstantIndexOp::create(b, loc, launch.block[0]);
  auto blockLoop = scf::ForOp::create(b, loc, zero, blocks, one);
  SmallVector<Operation *> earlier;
  for (ArrayRef<Operation *> segment : segments) {
    b.setInsertionPoint(blockLoop.getBody()->getTerminator());
    auto threadLoop = scf::ForOp::create(b, loc, zero, threads, one);
    b.setInsertionPointToStart(threadLoop.getBody());
    IRMapping map = shared;
    // What earlier segments computed without side effects, again (unused
    // copies fold away).
    for (Operation *op : earlier)
      b.clone(*op, map);
    for (Operation *op : segment) {
      b.clone(*op, map);
      if (op->getNumRegions() == 0 && isMemoryEffectFree(op))
        earlier.push_back(op);
    }
    // Ids nested in regions too (an index computed inside an scf.if).
    SmallVector<Operation *> ids;
    Operation *crossing = nullptr;
    threadLoop.getBody()->walk([&](Operation *op) {
      if (isa<gpu::ThreadIdOp, gpu::BlockIdOp, gpu::BlockDimOp, gpu::GridDimOp>(
              op))
        ids.push_back(op);
      for (Value v : op->getOperands())
        if (kernel->isAncestor(v.getParentRegion()->getParentOp()))
          crossing = op;
    });
    if (crossing)
      return emitError(crossing->getLoc(), launch.entry)
             << ": --cuda-emulate: a value with side effects is used after "
                "a barrier";
    for (Operation *op : ids) {
      OpBuilder at(op);
      op->getResult(0).replaceAllUsesWith(
          idValue(at, op, blockLoop.getInductionVar(),
                  threadLoop.getInductionVar(), launch));
      op->erase();
    }
  }
  b.setInsertionPointAfter(blockLoop);
  return success();
}

/// Moves the kernels' constants back to the top of `kernels`, once each.
void hoistConstants(ModuleOp kernels, gpu::GPUModuleOp merged) {
  for (Operation &op : llvm::make_early_inc_range(*merged.getBody()))
    if (auto global = dyn_cast<memref::GlobalOp>(op)) {
      if (kernels.lookupSymbol(global.getSymName()))
        global.erase();
      else
        global->moveBefore(merged);
    }
}

/// The cpu kernel ABI of a function over `types` (memrefs), run whole.
CpuKernelAbi wholeKernelAbi(StringRef symbol, ArrayRef<Type> types,
                            size_t numOperands) {
  CpuKernelAbi abi;
  abi.symbol = symbol.str();
  for (Type t : types) {
    auto m = cast<MemRefType>(t);
    abi.buffers.push_back(
        RankedTensorType::get(m.getShape(), m.getElementType()));
  }
  abi.numOperands = numOperands;
  return abi;
}

} // namespace

FailureOr<CompiledExecutable> mlir::omni::emulateCudaLaunches(
    ModuleOp kernels, gpu::GPUModuleOp merged, ArrayRef<KernelDef> defs,
    ArrayRef<GpuLaunches> launches, ArrayRef<SmallVector<Type>> argTypes,
    const CodegenOptions &options, std::string *llvmIR) {
  Location loc = kernels.getLoc();
  OpBuilder b = OpBuilder::atBlockEnd(kernels.getBody());
  hoistConstants(kernels, merged);

  CompiledExecutable exe;
  exe.name = "kernels";
  exe.format = CodeFormat::ElfSharedObject;
  exe.target.kind = "cpu";
  SmallVector<CpuKernelAbi> abis;
  for (auto [k, def] : llvm::enumerate(defs)) {
    const size_t numBuffers = def.operands.size() + def.results.size();
    ArrayRef<Type> types = argTypes[k];
    auto fn = func::FuncOp::create(
        b, loc, def.symbol + "_impl",
        b.getFunctionType(types.take_front(numBuffers), {}));
    OpBuilder body = OpBuilder::atBlockEnd(fn.addEntryBlock());
    SmallVector<Value> buffers(fn.getArguments().begin(),
                               fn.getArguments().end());
    for (Type scratch : types.drop_front(numBuffers))
      buffers.push_back(
          memref::AllocOp::create(body, loc, cast<MemRefType>(scratch)));
    for (const GpuLaunch &launch : launches[k].launches) {
      auto kernel = merged.lookupSymbol<gpu::GPUFuncOp>(launch.entry);
      if (!kernel)
        return emitError(loc, def.symbol)
               << ": launch " << launch.entry << " has no kernel";
      if (failed(emitLaunch(body, kernel, launch, buffers)))
        return failure();
    }
    func::ReturnOp::create(body, loc);

    abis.push_back(wholeKernelAbi(def.symbol, types.take_front(numBuffers),
                                  def.operands.size()));
    CompiledKernel &kernel = exe.kernels.emplace_back();
    kernel.symbol = def.symbol;
    kernel.operands = def.operands;
    kernel.results = def.results;
    kernel.launch = CpuLaunch{1, std::vector<int64_t>(numBuffers, 0)};
  }
  merged.erase();
  if (failed(compileCpuKernels(kernels, abis, options, exe, llvmIR)))
    return failure();
  return exe;
}

FailureOr<std::vector<char>> mlir::omni::compileHostKernels(
    ModuleOp kernels, gpu::GPUModuleOp merged, ArrayRef<GpuLaunches> launches,
    ArrayRef<SmallVector<Type>> argTypes, const CodegenOptions &options,
    std::string *llvmIR) {
  Location loc = kernels.getLoc();
  OpBuilder b = OpBuilder::atBlockEnd(kernels.getBody());
  hoistConstants(kernels, merged);
  SmallVector<CpuKernelAbi> abis;
  std::string manifest;
  for (auto [k, kernelLaunches] : llvm::enumerate(launches))
    for (const GpuLaunch &launch : kernelLaunches.launches) {
      auto kernel = merged.lookupSymbol<gpu::GPUFuncOp>(launch.entry);
      if (!kernel)
        return emitError(loc, launch.entry) << ": the launch has no kernel";
      SmallVector<Type> types;
      for (uint32_t arg : launch.args)
        types.push_back(argTypes[k][arg]);
      auto fn = func::FuncOp::create(b, loc, launch.entry + "_impl",
                                     b.getFunctionType(types, {}));
      OpBuilder body = OpBuilder::atBlockEnd(fn.addEntryBlock());
      // emitLaunch binds parameter i to buffers[launch.args[i]].
      SmallVector<Value> buffers(argTypes[k].size());
      for (auto [i, arg] : llvm::enumerate(launch.args))
        buffers[arg] = fn.getArgument(i);
      if (failed(emitLaunch(body, kernel, launch, buffers)))
        return failure();
      func::ReturnOp::create(body, loc);
      abis.push_back(wholeKernelAbi(launch.entry, types, types.size()));
      manifest += launch.entry + " " + std::to_string(launch.grid[0]) + " " +
                  std::to_string(launch.block[0]);
      for (Type t : types) {
        auto m = cast<MemRefType>(t);
        const int64_t bytes = (m.getElementTypeBitWidth() + 7) / 8;
        manifest += " " + std::to_string(m.getNumElements() * bytes);
      }
      manifest += "\n";
    }
  merged.erase();
  // The manifest, as an exported C string.
  b.setInsertionPointToEnd(kernels.getBody());
  auto type = LLVM::LLVMArrayType::get(b.getI8Type(), manifest.size() + 1);
  LLVM::GlobalOp::create(b, loc, type, /*isConstant=*/true,
                         LLVM::Linkage::External, "omni_host_kernels",
                         b.getStringAttr(manifest + std::string(1, '\0')));
  CompiledExecutable exe;
  if (failed(compileCpuKernels(kernels, abis, options, exe, llvmIR)))
    return failure();
  return std::move(exe.code);
}
