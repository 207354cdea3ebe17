//===- CudaCodegen.cpp - the cuda target: kernels to PTX and a cubin ------===//
//
// docs/backend-cuda.md describes the result; the steps:
// 1. The kernel set (compiler/codegen/KernelSet.h) holds each distinct
//    kernel as a func.func on tensors named `<kernel>_impl`. Flat elementwise
//    kernels (1-D dynamic tensors on the cpu, where the runtime splits them
//    into chunks) get their static element count back: a GPU kernel always
//    runs over the whole buffer.
// 2. Elementwise fusion, a producer recomputed in its few readers where
//    that moves fewer bytes than a scratch buffer and per slice where only
//    slices read it (CudaLinalgFusion.cpp), then
//    bufferization as on the cpu (function boundaries, results turned into
//    out-parameters), without deallocation: every remaining memref.alloc
//    becomes a scratch buffer of the kernel (GpuLaunches::scratch), passed as
//    a trailing function argument, allocated by the runtime.
// 3. Reductions iterate their parallel dimensions outermost (linalg
//    interchange), then convert-linalg-to-parallel-loops: each top-level
//    scf.parallel becomes one gpu.launch over its iteration space collapsed
//    to 1-D in row-major order (consecutive threads, consecutive output
//    elements): blocks of 256 threads on a 1-D grid, the tail guarded.
//    Reduction dimensions stay scf.for loops inside a thread, accumulating
//    in memory as KernelBuilder wrote them (f64 for float sums). A full
//    reduction to one element of at least 1024 elements runs on many
//    blocks, and a partial one with few outputs or a long extent on chunks
//    of each output (register partials, then an ordered fold:
//    CudaReductions.cpp). Parallel loops over one space then fuse where no
//    iteration can tell (CudaLoopFusion.cpp: a reduction's fill, fold and
//    rounding become one launch), and large loop-free ones run 4
//    iterations per thread, their loads first. Other top-level
//    work that is not a parallel loop (0-d results, small full reductions)
//    runs in a one-thread launch (CudaLaunches.cpp). Side-effect-free ops
//    (constants, index arithmetic, view ops) are cloned into every launch that
//    uses them, so each launch's parameters are function arguments only.
// 4. gpu-kernel-outlining; each gpu.launch_func, in order, becomes a
//    GpuLaunch (entry, grid, block, the function argument of each kernel
//    parameter), and all kernels move into one gpu.module; a parameter
//    that no result is written over (and that is no result written over
//    an input) is noalias.
// 5. NVVM: nvvm-attach-target (the SM architecture, +ptx81, libdevice for
//    math functions), convert-gpu-to-nvvm with bare-pointer kernel
//    parameters, gpu-module-to-binary format=isa -> PTX text.
// 6. ptxas (the CUDA toolkit's, or $OMNI_PTXAS) assembles the PTX into a
//    cubin in a temporary folder.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/cuda/CudaCodegen.h"
#include "compiler/codegen/cuda/CudaEmulation.h"
#include "compiler/codegen/cuda/CudaLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <mutex>

using namespace mlir;
using namespace mlir::omni;

#ifndef OMNI_PTXAS_PATH
#define OMNI_PTXAS_PATH "/usr/local/cuda/bin/ptxas"
#endif
#ifndef OMNI_LIBDEVICE_PATH
#define OMNI_LIBDEVICE_PATH "/usr/local/cuda/nvvm/libdevice/libdevice.10.bc"
#endif

namespace mlir::omni::cuda {

int64_t elementBytes(Type t) {
  // i1 is stored one per byte, as on the cpu (docs/backend.md).
  return t.isInteger(1) ? 1 : (t.getIntOrFloatBitWidth() + 7) / 8;
}

/// A new scratch buffer of `type` for `fn`: a trailing argument whose size
/// in bytes is appended to `scratch` (the runtime allocates it).
FailureOr<Value> addScratch(func::FuncOp fn, MemRefType type, Location loc,
                            std::vector<int64_t> &scratch) {
  unsigned index = fn.getNumArguments();
  if (failed(fn.insertArgument(index, type, {}, loc)))
    return failure();
  scratch.push_back(type.getNumElements() *
                    elementBytes(type.getElementType()));
  return fn.getArgument(index);
}

Value indexConst(OpBuilder &b, Location loc, Type t, int64_t v) {
  return arith::ConstantOp::create(b, loc, t, b.getIntegerAttr(t, v));
}

} // namespace mlir::omni::cuda

using namespace mlir::omni::cuda;

namespace {

/// The PTX ISA version the kernels are written in (docs/backend-cuda.md):
/// 8.0 is the first with sm_90a (LLVM's default is too old for sm_90), 8.1
/// the first whose kernels may take 32764 bytes of parameters instead of
/// 4352 (a launch of the SD3.5-Medium program takes 1824 buffers).
constexpr llvm::StringLiteral kPtxFeatures = "+ptx81";
/// The most pointer parameters a launch may have under that limit.
constexpr size_t kMaxLaunchBuffers = 32764 / 8;

/// Step 1: a flat kernel `(tensor<?xT>...) -> (tensor<?xT>...)` becomes
/// `(tensor<nxT>...) -> (tensor<nxT>...)` with casts to the dynamic types
/// that canonicalization folds away.
void makeFlatKernelStatic(func::FuncOp fn, int64_t elements) {
  Block &entry = fn.front();
  OpBuilder b = OpBuilder::atBlockBegin(&entry);
  auto staticType = [&](Type t) {
    return RankedTensorType::get({elements},
                                 cast<RankedTensorType>(t).getElementType());
  };
  SmallVector<Type> inputs, results;
  for (BlockArgument arg : entry.getArguments()) {
    Type dynamic = arg.getType();
    arg.setType(staticType(dynamic));
    auto toDynamic = tensor::CastOp::create(b, fn.getLoc(), dynamic, arg);
    arg.replaceAllUsesExcept(toDynamic, toDynamic);
    inputs.push_back(arg.getType());
  }
  for (Type t : fn.getResultTypes())
    results.push_back(staticType(t));
  fn.walk([&](func::ReturnOp ret) {
    OpBuilder rb(ret);
    for (OpOperand &operand : ret->getOpOperands())
      operand.set(tensor::CastOp::create(rb, ret.getLoc(),
                                         staticType(operand.get().getType()),
                                         operand.get()));
  });
  fn.setFunctionType(b.getFunctionType(inputs, results));
}

void registerPassesOnce() {
  static std::once_flag registered;
  std::call_once(registered, [] { registerAllPasses(); });
}

LogicalResult runPipeline(ModuleOp module, StringRef pipeline) {
  PassManager pm(module.getContext(), ModuleOp::getOperationName());
  if (failed(parsePassPipeline(pipeline, pm)))
    return failure();
  return pm.run(module);
}

/// Step 2.
LogicalResult bufferize(ModuleOp kernels, const DenseSet<Value> &overwritten) {
  if (failed(runPipeline(kernels, "func.func(canonicalize)")) ||
      failed(fuseElementwise(kernels, overwritten)))
    return failure();
  sliceProducers(kernels, overwritten);
  if (failed(fuseElementwise(kernels, overwritten)))
    return failure();
  if (failed(runPipeline(
          kernels, "func.func(canonicalize,linalg-fuse-elementwise-ops),"
                   "one-shot-bufferize{bufferize-function-boundaries "
                   "function-boundary-type-conversion=identity-layout-map},"
                   "buffer-results-to-out-params{hoist-static-allocs "
                   "modify-public-functions},"
                   "convert-bufferization-to-memref,canonicalize")))
    return failure();
  canonicalizeConstantGlobals(kernels);
  copiesToLinalg(kernels);
  return success();
}

/// Step 2, scratch: every memref.alloc of `fn` becomes a trailing argument
/// whose size in bytes is appended to `scratch`.
LogicalResult allocsToArguments(func::FuncOp fn, StringRef symbol,
                                std::vector<int64_t> &scratch) {
  fn.walk([](memref::DeallocOp d) { d.erase(); });
  SmallVector<Operation *> allocs;
  fn.walk([&](Operation *op) {
    if (isa<memref::AllocOp, memref::AllocaOp>(op))
      allocs.push_back(op);
  });
  for (Operation *alloc : allocs) {
    auto type = cast<MemRefType>(alloc->getResult(0).getType());
    if (alloc->getParentOp() != fn.getOperation() || !type.hasStaticShape() ||
        !type.getLayout().isIdentity() || alloc->getNumOperands() != 0)
      return fn.emitError(symbol)
             << ": a temporary buffer of type " << type
             << " (dynamic, strided or inside a loop) cannot be a cuda "
                "scratch buffer";
    FailureOr<Value> argument = addScratch(fn, type, alloc->getLoc(), scratch);
    if (failed(argument))
      return failure();
    alloc->getResult(0).replaceAllUsesWith(*argument);
    alloc->erase();
  }
  return success();
}

/// Step 3: parallel dimensions outermost in every linalg.generic, so that
/// convert-linalg-to-parallel-loops makes one scf.parallel over the output
/// with the reduction loops inside it.
void parallelDimsFirst(ModuleOp kernels) {
  SmallVector<linalg::GenericOp> generics;
  kernels.walk([&](linalg::GenericOp g) { generics.push_back(g); });
  IRRewriter rewriter(kernels.getContext());
  for (linalg::GenericOp g : generics) {
    SmallVector<unsigned> parallel, reduction;
    for (auto [i, it] : llvm::enumerate(g.getIteratorTypesArray()))
      (it == utils::IteratorType::parallel ? parallel : reduction)
          .push_back(static_cast<unsigned>(i));
    SmallVector<unsigned> order(parallel);
    order.append(reduction);
    if (llvm::equal(order, llvm::seq<unsigned>(0, order.size())))
      continue;
    rewriter.setInsertionPoint(g);
    (void)linalg::interchangeGenericOp(rewriter, g, order);
  }
}

/// Step 4: one kernel's launches, in order, renamed `<symbol>_<k>` and
/// moved into `merged`.
LogicalResult collectLaunches(func::FuncOp fn, StringRef symbol,
                              gpu::GPUModuleOp merged, GpuLaunches &out,
                              SameBuffers sameBuffers) {
  SmallVector<gpu::LaunchFuncOp> calls;
  fn.walk([&](gpu::LaunchFuncOp call) { calls.push_back(call); });
  for (gpu::LaunchFuncOp call : calls) {
    GpuLaunch &launch = out.launches.emplace_back();
    launch.entry = symbol.str() + "_" + std::to_string(out.launches.size() - 1);
    Value sizes[6] = {call.getGridSizeX(),  call.getGridSizeY(),
                      call.getGridSizeZ(),  call.getBlockSizeX(),
                      call.getBlockSizeY(), call.getBlockSizeZ()};
    for (int i = 0; i < 6; ++i) {
      std::optional<int64_t> v = getConstantIntValue(sizes[i]);
      if (!v || *v < 1)
        return emitError(call.getLoc(), symbol)
               << ": a cuda launch without constant sizes";
      (i < 3 ? launch.grid[i] : launch.block[i - 3]) =
          static_cast<uint32_t>(*v);
    }
    if (call.getKernelOperands().size() > kMaxLaunchBuffers)
      return emitError(call.getLoc(), symbol)
             << ": a cuda launch of " << call.getKernelOperands().size()
             << " buffers; CUDA allows at most " << kMaxLaunchBuffers;
    for (Value operand : call.getKernelOperands()) {
      auto arg = dyn_cast<BlockArgument>(operand);
      if (!arg || arg.getOwner() != &fn.front() ||
          !isa<MemRefType>(arg.getType()))
        return emitError(call.getLoc(), symbol)
               << ": a cuda kernel parameter of type " << operand.getType()
               << " is not one of the kernel's buffers";
      launch.args.push_back(arg.getArgNumber());
    }
    auto module = SymbolTable::lookupNearestSymbolFrom<gpu::GPUModuleOp>(
        call, FlatSymbolRefAttr::get(call.getKernelModuleName()));
    auto kernel = module.lookupSymbol<gpu::GPUFuncOp>(call.getKernelName());
    if (!module || !kernel)
      return emitError(call.getLoc(), symbol) << ": an outlined kernel is lost";
    // Globals (constants) the kernel uses come along; another kernel's copy
    // of the same program global may be there already.
    for (Operation &op : llvm::make_early_inc_range(*module.getBody())) {
      auto sym = dyn_cast<SymbolOpInterface>(&op);
      if (&op == kernel.getOperation() || !sym ||
          merged.lookupSymbol(sym.getNameAttr()))
        continue;
      op.moveBefore(merged.getBody(), merged.getBody()->end());
    }
    // A parameter in no in-place pair, passed once, shares no byte with
    // another, which lets the GPU compiler move loads ahead of stores and
    // read through the non-coherent cache.
    for (auto [i, arg] : llvm::enumerate(launch.args)) {
      bool paired = llvm::any_of(sameBuffers, [&, arg = arg](auto pair) {
        return pair.first == arg || pair.second == arg;
      });
      if (!paired && llvm::count(launch.args, arg) == 1 &&
          isa<MemRefType>(kernel.getArgument(i).getType()))
        kernel.setArgAttr(i, LLVM::LLVMDialect::getNoAliasAttrName(),
                          UnitAttr::get(kernel.getContext()));
    }
    kernel.setName(launch.entry);
    kernel->moveBefore(merged.getBody(), merged.getBody()->end());
    module.erase();
  }
  return success();
}

/// Step 5: square roots correctly rounded, as on the cpu. libdevice's
/// __nv_sqrtf is sqrt.approx.f32 unless __CUDA_PREC_SQRT is reflected as 1,
/// which MLIR's NVVM target does not do, and convert-gpu-to-nvvm refuses
/// LLVM's sqrt intrinsic; so rsqrt first becomes 1 / sqrt (div.rn, as the
/// cpu's math-to-llvm expands it), and after the conversion the libdevice
/// sqrt calls become the intrinsic, which NVPTX emits as sqrt.rn.
void rsqrtToDivSqrt(gpu::GPUModuleOp module) {
  SmallVector<math::RsqrtOp> ops;
  module.walk([&](math::RsqrtOp op) {
    if (isa<FloatType>(op.getType()))
      ops.push_back(op);
  });
  for (math::RsqrtOp op : ops) {
    OpBuilder b(op);
    Location loc = op.getLoc();
    Type t = op.getType();
    Value root = math::SqrtOp::create(b, loc, op.getOperand());
    Value one = arith::ConstantOp::create(b, loc, t, b.getFloatAttr(t, 1.0));
    op.replaceAllUsesWith(arith::DivFOp::create(b, loc, one, root).getResult());
    op.erase();
  }
}

void libdeviceSqrtToIntrinsic(gpu::GPUModuleOp module) {
  SmallVector<LLVM::CallOp> calls;
  module.walk([&](LLVM::CallOp call) {
    std::optional<StringRef> callee = call.getCallee();
    if (callee && (*callee == "__nv_sqrtf" || *callee == "__nv_sqrt") &&
        call.getNumOperands() == 1 && call.getNumResults() == 1)
      calls.push_back(call);
  });
  for (LLVM::CallOp call : calls) {
    OpBuilder b(call);
    Value root = LLVM::SqrtOp::create(
        b, call.getLoc(), call.getResult().getType(), call.getOperand(0));
    call.getResult().replaceAllUsesWith(root);
    call.erase();
  }
}

/// Step 6: the cubin ptxas assembles from `ptx` for `arch`.
FailureOr<std::vector<char>> assemble(Location loc, StringRef ptx,
                                      StringRef arch) {
  std::string ptxas = ptxasPath();
  if (!llvm::sys::fs::can_execute(ptxas))
    return emitError(loc, "cannot assemble the cuda kernels: no ptxas at '")
           << ptxas
           << "' (install the CUDA toolkit or set OMNI_PTXAS to its ptxas)";
  SmallString<128> dir;
  if (llvm::sys::fs::createUniqueDirectory("omni-ptxas", dir))
    return emitError(loc, "cannot create a temporary folder for ptxas");
  SmallString<128> in(dir), out(dir), log(dir);
  llvm::sys::path::append(in, "kernels.ptx");
  llvm::sys::path::append(out, "kernels.cubin");
  llvm::sys::path::append(log, "ptxas.log");
  auto cleanup = [&] {
    for (const auto &p : {in, out, log})
      llvm::sys::fs::remove(p);
    llvm::sys::fs::remove(dir);
  };
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(in, ec);
    if (ec) {
      cleanup();
      return emitError(loc, "cannot write the PTX for ptxas: ") << ec.message();
    }
    os << ptx;
  }
  std::string archFlag = ("-arch=" + arch).str();
  SmallVector<StringRef> argv = {ptxas, archFlag, in, "-o", out};
  std::optional<StringRef> redirects[3] = {std::nullopt, StringRef(log),
                                           StringRef(log)};
  std::string errMsg;
  int rc = llvm::sys::ExecuteAndWait(ptxas, argv, std::nullopt, redirects, 0, 0,
                                     &errMsg);
  if (rc != 0) {
    std::string first = errMsg;
    if (auto text = llvm::MemoryBuffer::getFile(log); text && first.empty())
      first = (*text)->getBuffer().split('\n').first.str();
    cleanup();
    return emitError(loc, "ptxas failed for ")
           << arch << " (exit " << rc << "): " << first;
  }
  auto cubin = llvm::MemoryBuffer::getFile(out);
  if (!cubin) {
    cleanup();
    return emitError(loc, "cannot read the cubin ptxas wrote");
  }
  std::vector<char> bytes((*cubin)->getBufferStart(), (*cubin)->getBufferEnd());
  cleanup();
  return bytes;
}

} // namespace

std::string mlir::omni::ptxasPath() {
  if (const char *env = std::getenv("OMNI_PTXAS"); env && *env)
    return env;
  return OMNI_PTXAS_PATH;
}

std::string mlir::omni::checkCudaArch(llvm::StringRef arch) {
  for (llvm::StringRef ok : {"sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"})
    if (arch == ok)
      return "";
  return ("--cuda-arch=" + arch +
          ": unknown SM architecture; expected sm_80, sm_86, sm_89, sm_90 or "
          "sm_90a")
      .str();
}

FailureOr<CompiledExecutable>
mlir::omni::lowerKernelSetForCuda(KernelSet &set, const CodegenOptions &options,
                                  std::string *ptxDump) {
  registerPassesOnce();
  ModuleOp kernels = *set.module;
  Location loc = kernels.getLoc();
  const std::string &arch = options.cuda.arch;
  if (std::string bad = checkCudaArch(arch); !bad.empty())
    return emitError(loc, bad);
  CompiledExecutable exe;
  exe.name = "kernels";
  exe.format = CodeFormat::Cubin;
  exe.target = {"cuda", arch, kPtxFeatures.str()};

  SmallVector<func::FuncOp> fns;
  for (const KernelDef &def : set.kernels) {
    auto fn = kernels.lookupSymbol<func::FuncOp>(def.symbol + "_impl");
    if (!fn)
      return emitError(loc, "kernel ") << def.symbol << " has no body";
    if (def.flat)
      makeFlatKernelStatic(fn, def.elements);
    fns.push_back(fn);
  }
  // The arguments a result may be written over (the memory plan's
  // in-place pairs), which no launch may read after that result's store.
  DenseSet<Value> overwritten;
  for (auto [k, def] : llvm::enumerate(set.kernels))
    for (const std::vector<int64_t> &pattern : def.overwrites)
      for (auto [operand, result] : llvm::enumerate(pattern))
        if (result >= 0)
          overwritten.insert(fns[k].getArgument(operand));
  if (failed(bufferize(kernels, overwritten)))
    return emitError(loc, "bufferizing the cuda kernels failed");
  std::vector<GpuLaunches> launches(set.kernels.size());
  for (auto [k, def] : llvm::enumerate(set.kernels))
    if (failed(allocsToArguments(fns[k], def.symbol, launches[k].scratch)))
      return failure();
  parallelDimsFirst(kernels);
  if (failed(runPipeline(kernels, "func.func(convert-linalg-to-parallel-loops,"
                                  "canonicalize)")))
    return emitError(loc, "lowering the cuda kernels to loops failed");
  // Each kernel's in-place pairs (the memory plan writes the result over
  // the operand in some dispatch): as function arguments for the lowering,
  // as (operand, result) indices for step.bin.
  std::vector<std::vector<std::pair<unsigned, unsigned>>> sameBuffers;
  for (auto [k, def] : llvm::enumerate(set.kernels)) {
    auto &pairs = sameBuffers.emplace_back();
    for (const std::vector<int64_t> &pattern : def.overwrites)
      for (auto [operand, result] : llvm::enumerate(pattern)) {
        std::pair<unsigned, unsigned> pair(
            static_cast<unsigned>(operand),
            static_cast<unsigned>(pattern.size() + result));
        if (result < 0 || llvm::is_contained(pairs, pair))
          continue;
        pairs.push_back(pair);
        launches[k].inPlace.push_back(static_cast<uint32_t>(operand));
        launches[k].inPlace.push_back(static_cast<uint32_t>(result));
      }
  }
  for (auto [k, def] : llvm::enumerate(set.kernels))
    if (failed(mapToLaunches(fns[k], def.symbol, launches[k].scratch,
                             sameBuffers[k], options.cuda.rowLaunches,
                             options.cuda.mergeLaunches)))
      return failure();
  if (failed(runPipeline(kernels, "gpu-kernel-outlining")))
    return emitError(loc, "outlining the cuda kernels failed");

  OpBuilder b = OpBuilder::atBlockEnd(kernels.getBody());
  auto merged = gpu::GPUModuleOp::create(b, loc, "omni_kernels");
  for (auto [k, def] : llvm::enumerate(set.kernels))
    if (failed(collectLaunches(fns[k], def.symbol, merged, launches[k],
                               sameBuffers[k])))
      return failure();
  // The kernels' buffers (operands, results, scratch), for --cuda-emulate.
  SmallVector<SmallVector<Type>> argTypes;
  for (func::FuncOp fn : fns)
    argTypes.emplace_back(fn.getArgumentTypes());
  // The host functions and globals have served their purpose.
  for (Operation &op : llvm::make_early_inc_range(*kernels.getBody()))
    if (&op != merged.getOperation())
      op.erase();
  if (options.cuda.emulate)
    return emulateCudaLaunches(kernels, merged, set.kernels, launches, argTypes,
                               options, ptxDump);
  // The step.bin's kernels: each with its launches.
  auto withKernels = [&]() -> FailureOr<CompiledExecutable> {
    for (auto [k, def] : llvm::enumerate(set.kernels)) {
      CompiledKernel &kernel = exe.kernels.emplace_back();
      kernel.symbol = def.symbol;
      kernel.operands = def.operands;
      kernel.results = def.results;
      kernel.launch = std::move(launches[k]);
    }
    return std::move(exe);
  };
  if (options.cuda.hostKernels) {
    FailureOr<std::vector<char>> code = compileHostKernels(
        kernels, merged, launches, argTypes, options, ptxDump);
    if (failed(code))
      return failure();
    exe.code = std::move(*code);
    return withKernels();
  }

  rsqrtToDivSqrt(merged);
  std::string toNvvm =
      "nvvm-attach-target{chip=" + arch + " features=" + kPtxFeatures.str() +
      " O=" + std::to_string(options.optLevel) +
      " l=" OMNI_LIBDEVICE_PATH
      "},gpu.module(expand-strided-metadata,lower-affine,convert-scf-to-cf,"
      "convert-gpu-to-nvvm{use-bare-ptr-memref-call-conv=1},canonicalize,"
      "reconcile-unrealized-casts)";
  if (failed(runPipeline(kernels, toNvvm)))
    return emitError(loc, "lowering the cuda kernels to NVVM failed");
  libdeviceSqrtToIntrinsic(merged);
  if (failed(runPipeline(kernels, "gpu-module-to-binary{format=isa}")))
    return emitError(loc, "compiling the cuda kernels to PTX failed");
  std::string ptx;
  for (auto binary : kernels.getOps<gpu::BinaryOp>())
    for (Attribute object : binary.getObjects())
      ptx = cast<gpu::ObjectAttr>(object).getObject().getValue().str();
  if (ptx.empty())
    return emitError(loc, "the NVPTX backend produced no PTX");
  if (ptxDump)
    *ptxDump = ptx;

  FailureOr<std::vector<char>> cubin = assemble(loc, ptx, arch);
  if (failed(cubin))
    return failure();
  exe.code = std::move(*cubin);
  exe.ptx.assign(ptx.begin(), ptx.end());
  exe.ptx.push_back('\0');
  return withKernels();
}
