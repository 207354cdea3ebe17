//===- CpuCodegen.cpp - the cpu target: kernels to an x86-64 .so ----------===//
//
// 1. The kernel set (compiler/codegen/KernelSet.h) holds each distinct
//    kernel as a func.func on tensors named `<kernel>_impl`.
// 2. Upstream MLIR fuses the linalg ops (also copy-like producers with
//    several uses: fuseElementwise), bufferizes (function boundaries,
//    results turned into out-parameters, temporaries freed), lowers to
//    loops and to the LLVM dialect.
// 3. The module is translated to LLVM IR; each kernel gets an exported
//    wrapper with the runtime's ABI that builds the memref arguments from
//    the raw buffer pointers. Elementwise kernels over one shape are built
//    on 1-D dynamic memrefs and split into chunks of elements (the kernel's
//    CpuLaunch grid) that the runtime spreads over its threads; the others
//    are built for one block of rows of their leading dimension (a work
//    item, KernelBuilder.h RowSplit) when their ops keep rows apart and
//    there is enough work, otherwise they run whole as one work item.
// 4. LLVM optimizes (-O level) for the target CPU and emits an object file in
//    process; ld.lld links it into a shared object.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/cpu/CpuCodegen.h"

#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/Verifier.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/Bitcode/BitcodeWriter.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/IntrinsicInst.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/Transforms/IPO/AlwaysInliner.h"
#include "llvm/Transforms/Utils/SplitModule.h"

#include <atomic>
#include <thread>

using namespace mlir;
using namespace mlir::omni;

#ifndef OMNI_LLD_PATH
#define OMNI_LLD_PATH "ld.lld"
#endif

namespace {

/// Step 2b (docs/backend.md "Transcendental functions"): the f32 math ops
/// whose libm calls would keep LLVM from vectorizing the loops around them
/// (exp, expm1, log, log1p, log2, tanh, erf) become branch-free polynomial
/// code: MLIR's approximations, with three corrections applied first. sin and
/// cos stay libm calls: MLIR's range reduction loses accuracy for the large
/// arguments of timestep embeddings (|x| up to 1000), and they only run on
/// tiny tensors. f64 ops stay libm calls (the patterns match f32 only).
/// Accuracy per function: docs/precision.md, tested by CpuMathTest.cpp.
LogicalResult approximateMath(ModuleOp kernels) {
  MLIRContext *ctx = kernels.getContext();
  auto isF32 = [](Value v) { return getElementTypeOrSelf(v).isF32(); };
  // MLIR's tanh and erf are rational approximations with errors up to 4.7
  // ulps near 1. Away from 0, 1 - 2 / (exp(2|x|) + 1) and 1 - erfc(|x|)
  // are the small correction to 1 computed to a few ulps of itself, so
  // their results round almost correctly; MLIR's forms stay near 0.
  SmallVector<Operation *> nearOne;
  kernels.walk([&](Operation *op) {
    if (isa<math::TanhOp, math::ErfOp>(op) && isF32(op->getOperand(0)))
      nearOne.push_back(op);
  });
  for (Operation *op : nearOne) {
    OpBuilder b(op);
    Location loc = op->getLoc();
    Type t = op->getResult(0).getType();
    Value x = op->getOperand(0);
    auto cst = [&](double v) -> Value {
      return arith::ConstantOp::create(b, loc, t, b.getFloatAttr(t, v));
    };
    Value a = math::AbsFOp::create(b, loc, x);
    Value far;
    double threshold;
    if (isa<math::TanhOp>(op)) {
      Value e =
          math::ExpOp::create(b, loc, arith::AddFOp::create(b, loc, a, a));
      far = arith::SubFOp::create(
          b, loc, cst(1),
          arith::DivFOp::create(b, loc, cst(2),
                                arith::AddFOp::create(b, loc, e, cst(1))));
      threshold = 0.625;
    } else {
      far = arith::SubFOp::create(b, loc, cst(1),
                                  math::ErfcOp::create(b, loc, a));
      threshold = 0.8;
    }
    Value near = b.clone(*op)->getResult(0);
    Value isNear = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, a,
                                         cst(threshold));
    op->getResult(0).replaceAllUsesWith(
        arith::SelectOp::create(b, loc, isNear, near,
                                math::CopySignOp::create(b, loc, far, x))
            .getResult());
    op->erase();
  }
  // MLIR's log clamps its argument to the smallest normal float, so
  // log(subnormal) would be log(2^-126) = -87.3: scale subnormals by 2^24
  // and subtract 24 log(2) from their logarithm instead.
  SmallVector<math::LogOp> logs;
  kernels.walk([&](math::LogOp op) {
    if (isF32(op.getOperand()))
      logs.push_back(op);
  });
  for (math::LogOp op : logs) {
    OpBuilder b(op);
    Location loc = op.getLoc();
    Type t = op.getType();
    Value x = op.getOperand();
    auto cst = [&](double v) -> Value {
      return arith::ConstantOp::create(b, loc, t, b.getFloatAttr(t, v));
    };
    Value subnormal =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT,
                              math::AbsFOp::create(b, loc, x), cst(0x1p-126));
    Value scaled = arith::SelectOp::create(
        b, loc, subnormal, arith::MulFOp::create(b, loc, x, cst(0x1p24)), x);
    Value log = math::LogOp::create(b, loc, scaled);
    Value shifted =
        arith::SubFOp::create(b, loc, log, cst(24 * 0.6931471805599453));
    op.replaceAllUsesWith(
        arith::SelectOp::create(b, loc, subnormal, shifted, log).getResult());
    op.erase();
  }
  // MLIR's exp clamps n = round(x / log 2) to 127, so above x = 88.38 its
  // polynomial runs outside the reduced range (4.8 ulps at 88.7): there,
  // exp(x) = exp(x - 1) * e instead (x - 1 is exact for x in [65, 128);
  // e as a sum of two floats, so the product rounds once). It also converts
  // n to an integer, which is poison for NaN: keep NaN explicitly.
  SmallVector<math::ExpOp> exps;
  kernels.walk([&](math::ExpOp op) {
    if (isF32(op.getOperand()))
      exps.push_back(op);
  });
  for (math::ExpOp op : exps) {
    OpBuilder b(op);
    Location loc = op.getLoc();
    Type t = op.getType();
    Value x = op.getOperand();
    auto cst = [&](double v) -> Value {
      return arith::ConstantOp::create(b, loc, t, b.getFloatAttr(t, v));
    };
    constexpr float kEHigh = 2.71828183f;
    const double kELow = 2.718281828459045 - static_cast<double>(kEHigh);
    Value large =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, x, cst(88));
    Value reduced = arith::SelectOp::create(
        b, loc, large, arith::SubFOp::create(b, loc, x, cst(1)), x);
    Value y = math::ExpOp::create(b, loc, reduced);
    Value timesE = math::FmaOp::create(
        b, loc, y, cst(kEHigh), arith::MulFOp::create(b, loc, y, cst(kELow)));
    Value isNan =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNO, x, x);
    Value r = arith::SelectOp::create(b, loc, large, timesE, y);
    op.replaceAllUsesWith(
        arith::SelectOp::create(b, loc, isNan, x, r).getResult());
    op.erase();
  }
  RewritePatternSet patterns(ctx);
  populateMathPolynomialApproximationPatterns(patterns, [](StringRef name) {
    return llvm::is_contained(
        {math::ExpOp::getOperationName(), math::ExpM1Op::getOperationName(),
         math::LogOp::getOperationName(), math::Log1pOp::getOperationName(),
         math::Log2Op::getOperationName(), math::TanhOp::getOperationName(),
         math::ErfOp::getOperationName(), math::ErfcOp::getOperationName()},
        name);
  });
  return applyPatternsGreedily(kernels, std::move(patterns));
}

/// Whether `op` only copies its one input (a transpose, a broadcast or a
/// plain copy): every iterator parallel, the body yields the input element.
bool isCopyLike(linalg::GenericOp op) {
  if (op.getNumDpsInputs() != 1 || op.getNumDpsInits() != 1 ||
      op.getNumReductionLoops() != 0)
    return false;
  Block &body = op.getRegion().front();
  auto yield = cast<linalg::YieldOp>(body.getTerminator());
  return body.getOperations().size() == 1 && yield.getNumOperands() == 1 &&
         yield.getOperand(0) == body.getArgument(0);
}

/// Elementwise fusion of the linalg ops of every kernel, as upstream's
/// linalg-fuse-elementwise-ops fuses them (a producer with one use), and
/// also a copy-like producer with several uses: each consumer then reads
/// the producer's input through the copy's index map instead of a
/// temporary that bufferization would materialize (malloc, a scalar copy
/// loop and free per work item). The RMS norm of small's attention heads
/// ([256, 8, 32] -> [8, 256, 32] and three uses of it) 1.3 -> 0.8 ms per
/// call (docs/performance.md, "CPU speed (issue 15): fourth pass").
LogicalResult fuseElementwise(ModuleOp kernels) {
  MLIRContext *ctx = kernels.getContext();
  RewritePatternSet patterns(ctx);
  linalg::populateElementwiseOpsFusionPatterns(patterns, [](OpOperand *fused) {
    auto producer = fused->get().getDefiningOp<linalg::GenericOp>();
    if (!producer)
      return false;
    if (producer->hasOneUse())
      return true;
    // A copy that is also a result of the kernel is written anyway; its
    // consumers read it contiguously rather than through a transposed
    // index map.
    return isCopyLike(producer) &&
           llvm::none_of(producer->getUsers(), [](Operation *user) {
             return user->hasTrait<OpTrait::IsTerminator>();
           });
  });
  linalg::GenericOp::getCanonicalizationPatterns(patterns, ctx);
  return applyPatternsGreedily(kernels, std::move(patterns));
}

/// Makes a part of a concatenation compute straight into its slice of the
/// result: `insert_slice (linalg op with an empty init) into %dest` becomes
/// `insert_slice (linalg op into extract_slice %dest) into %dest`, which
/// one-shot bufferization writes in place. Otherwise each part is computed
/// into a temporary (malloc per work item) and copied: the joint
/// attention's [B, H, S, D] heads of the text and image tokens. MLIR's
/// eliminate-empty-tensors would do this, but MLIR 22 crashes after it on
/// these kernels (docs/performance.md, "fourth pass"). Runs after
/// linalg-fuse-elementwise-ops, which turns every init a payload does not
/// read back into a tensor.empty.
void writePartsInPlace(ModuleOp kernels) {
  kernels.walk([](tensor::InsertSliceOp insert) {
    auto part = insert.getSource().getDefiningOp<linalg::LinalgOp>();
    if (!part || part->getNumResults() != 1 || part.getNumDpsInits() != 1 ||
        !insert.getSource().hasOneUse() ||
        part->getBlock() != insert->getBlock())
      return;
    OpOperand *init = part.getDpsInitOperand(0);
    auto empty = init->get().getDefiningOp<tensor::EmptyOp>();
    if (!empty || !empty->hasOneUse() || part.payloadUsesValueFromOperand(init))
      return;
    // The part moves down to just before the insert (its operands are
    // above it already, its one reader is the insert), below %dest.
    OpBuilder b(insert);
    auto slice = tensor::ExtractSliceOp::create(
        b, insert.getLoc(), insert.getSourceType(), insert.getDest(),
        insert.getMixedOffsets(), insert.getMixedSizes(),
        insert.getMixedStrides());
    part->moveBefore(insert);
    init->set(slice);
    empty->erase();
  });
}

/// Steps 2 of the file comment, split where memref.copy becomes linalg.copy
/// (so nothing needs MLIR's C runner utilities at run time).
///
/// Results are computed straight into the out-parameters, static and
/// dynamic shapes alike (`hoist-*-allocs`): without hoist-dynamic-allocs a
/// flat kernel (1-D dynamic memrefs) wrote each chunk into a malloc'ed
/// temporary, copied it to the result and freed it, one more pass over the
/// bytes per call. The wrapper passes every result's descriptor with the
/// sizes the kernel computes, so the out-parameter can stand in for the
/// allocation.
LogicalResult lowerToLLVMDialect(ModuleOp kernels) {
  static std::once_flag registered;
  std::call_once(registered, [] { registerAllPasses(); });
  MLIRContext *ctx = kernels.getContext();
  // The kernel builders' output is checked before anything folds it: an op
  // they built wrong (an f64 -> f64 arith.extf once) would otherwise be
  // folded away or lowered silently.
  if (failed(verify(kernels)))
    return failure();
  // The upstream pass below still runs for its other patterns (reshape
  // folding, constant folding); what fuseElementwise fused, it leaves.
  if (failed(fuseElementwise(kernels)))
    return failure();
  PassManager upstreamFusion(ctx, ModuleOp::getOperationName());
  if (failed(parsePassPipeline("func.func(linalg-fuse-elementwise-ops)",
                               upstreamFusion)) ||
      failed(upstreamFusion.run(kernels)))
    return failure();
  writePartsInPlace(kernels);
  PassManager bufferize(ctx, ModuleOp::getOperationName());
  if (failed(parsePassPipeline(
          "one-shot-bufferize{bufferize-function-boundaries "
          "function-boundary-type-conversion=identity-layout-map},"
          "buffer-results-to-out-params{hoist-static-allocs "
          "hoist-dynamic-allocs modify-public-functions},"
          "buffer-deallocation-pipeline,convert-bufferization-to-memref,"
          "canonicalize",
          bufferize)) ||
      failed(bufferize.run(kernels)))
    return failure();
  canonicalizeConstantGlobals(kernels);
  copiesToLinalg(kernels);
  // bf16 (docs/precision.md): arithmetic on bf16 runs in f32 and rounds its
  // result (per op, as the reference evaluator does), and f32<->bf16
  // conversions become integer code (round to nearest even). Left to LLVM,
  // x86 rounds through the __truncsfbf2 libcall, which the kernels' shared
  // object cannot resolve.
  PassManager bf16(ctx, ModuleOp::getOperationName());
  if (failed(parsePassPipeline(
          "math-extend-to-supported-types,"
          "arith-emulate-unsupported-floats{source-types=bf16 target-type=f32}",
          bf16)) ||
      failed(bf16.run(kernels)))
    return failure();
  RewritePatternSet expandBf16(ctx);
  arith::populateExpandBFloat16Patterns(expandBf16);
  if (failed(applyPatternsGreedily(kernels, std::move(expandBf16))))
    return failure();
  if (failed(approximateMath(kernels)))
    return failure();
  PassManager lower(ctx, ModuleOp::getOperationName());
  if (failed(parsePassPipeline(
          "func.func(convert-linalg-to-loops),"
          "expand-strided-metadata,lower-affine,convert-math-to-llvm,"
          "convert-math-to-libm,convert-scf-to-cf,finalize-memref-to-llvm,"
          "convert-arith-to-llvm,convert-cf-to-llvm,convert-func-to-llvm,"
          "convert-index-to-llvm,reconcile-unrealized-casts",
          lower)) ||
      failed(lower.run(kernels)))
    return failure();
  return success();
}

/// Elements per work item of a flat elementwise kernel: large enough to
/// amortize the call, small enough to spread a 1M-element tensor over many
/// threads.
constexpr int64_t kFlatChunk = 16384;

/// Bytes of one element of a flat kernel's buffer (i1 takes one byte).
int64_t flatElementBytes(RankedTensorType t) {
  Type e = t.getElementType();
  return e.isInteger(1) ? 1 : e.getIntOrFloatBitWidth() / 8;
}

/// Whether `impl` computes enough per element to be vectorized with the
/// widest vectors the target has (LLVM keeps 256-bit vectors on AVX-512
/// CPUs unless told otherwise): an expanded exp (its llvm.floor) or a
/// division. Such loops are bound by their arithmetic; copies, transposes
/// and light elementwise kernels are bound by memory and ran slower with
/// 512-bit vectors (docs/performance.md, "CPU speed (issue 15): third
/// pass"; the gain: "fourth pass").
bool preferWideVectors(llvm::Function &impl) {
  for (llvm::Instruction &inst : llvm::instructions(impl)) {
    if (inst.getOpcode() == llvm::Instruction::FDiv)
      return true;
    if (auto *call = llvm::dyn_cast<llvm::IntrinsicInst>(&inst))
      if (call->getIntrinsicID() == llvm::Intrinsic::floor)
        return true;
  }
  return false;
}

/// Step 3: `void name(i64 begin, i64 end, ptr buffers, ptr scalars)` calls
/// `name_impl` with one expanded memref descriptor per buffer
/// (docs/backend.md, "Kernel ABI").
///
/// `flat` kernels take 1-D dynamic memrefs: work items [begin, end) are the
/// elements [begin * kFlatChunk, min(end * kFlatChunk, n)) of every buffer,
/// passed as the descriptor's offset and size, in one call. Other kernels
/// take static memrefs of one work item (`rows`, KernelBuilder.h RowSplit;
/// the buffers' own types when they run whole, grid 1): the wrapper calls
/// the impl once per work item w, each split buffer's pointer advanced by
/// w times its item bytes.
///
/// In place (`overwrites`, KernelDef): for each pattern whose buffers are
/// the same at run time, a call in which the overwritten operand's
/// descriptor is built from its result's pointer value, the impl inlined.
/// LLVM then sees one pointer where it would otherwise check at run time
/// that the loads and stores do not overlap, fail that check (they are the
/// same bytes) and run the scalar loop. Any other combination takes the
/// general call.
void addAbiWrapper(llvm::Module &module, StringRef name,
                   ArrayRef<RankedTensorType> buffers, size_t numOperands,
                   bool flat, const RowSplit &rows,
                   ArrayRef<std::vector<int64_t>> overwrites) {
  llvm::LLVMContext &ctx = module.getContext();
  llvm::Function *impl = module.getFunction((name + "_impl").str());
  impl->setLinkage(llvm::GlobalValue::InternalLinkage);
  if (!overwrites.empty()) {
    impl->removeFnAttr(llvm::Attribute::NoInline);
    impl->addFnAttr(llvm::Attribute::AlwaysInline);
  }
  auto *i64 = llvm::Type::getInt64Ty(ctx);
  auto *ptr = llvm::PointerType::get(ctx, 0);
  auto *fnType = llvm::FunctionType::get(llvm::Type::getVoidTy(ctx),
                                         {i64, i64, ptr, ptr}, false);
  auto *fn = llvm::Function::Create(fnType, llvm::GlobalValue::ExternalLinkage,
                                    name, module);
  fn->setVisibility(llvm::GlobalValue::DefaultVisibility);
  auto *entry = llvm::BasicBlock::Create(ctx, "entry", fn);
  auto *done = llvm::BasicBlock::Create(ctx, "done", fn);
  llvm::IRBuilder<> b(entry);
  llvm::Value *begin = fn->getArg(0);
  llvm::Value *end = fn->getArg(1);
  // Each buffer's pointer, read once.
  SmallVector<llvm::Value *> base;
  for (size_t i = 0; i < buffers.size(); ++i)
    base.push_back(
        b.CreateLoad(ptr, b.CreateGEP(ptr, fn->getArg(2),
                                      b.getInt64(static_cast<int64_t>(i)))));

  // Calls the impl on work items [begin, end) with buffer i at `bufs[i]`,
  // then branches to `done`; `b` is in the block to start in.
  auto emitCalls = [&](ArrayRef<llvm::Value *> bufs) {
    llvm::BasicBlock *here = b.GetInsertBlock();
    auto *run = llvm::BasicBlock::Create(ctx, "run", fn);
    SmallVector<llvm::Value *> args;
    if (flat) {
      int64_t n = buffers.front().getNumElements();
      llvm::Value *start = b.CreateMul(begin, b.getInt64(kFlatChunk));
      llvm::Value *stop = b.CreateMul(end, b.getInt64(kFlatChunk));
      stop = b.CreateSelect(b.CreateICmpSLT(stop, b.getInt64(n)), stop,
                            b.getInt64(n));
      b.CreateCondBr(b.CreateICmpSLT(start, stop), run, done);
      b.SetInsertPoint(run);
      llvm::Value *count = b.CreateSub(stop, start);
      for (auto [i, t] : llvm::enumerate(buffers)) {
        // Identity-layout memrefs have a static zero offset: advance the
        // pointer instead.
        llvm::Value *q =
            b.CreateGEP(b.getInt8Ty(), bufs[i],
                        b.CreateMul(start, b.getInt64(flatElementBytes(t))));
        args.append({q, q, b.getInt64(0), count, b.getInt64(1)});
      }
      b.CreateCall(impl, args);
      b.CreateBr(done);
      return;
    }
    // for (w = begin; w < end; ++w) impl(item w of every buffer).
    ArrayRef<RankedTensorType> itemTypes =
        rows.itemTypes.empty() ? buffers : ArrayRef(rows.itemTypes);
    b.CreateCondBr(b.CreateICmpSLT(begin, end), run, done);
    b.SetInsertPoint(run);
    llvm::PHINode *w = b.CreatePHI(i64, 2, "w");
    w->addIncoming(begin, here);
    for (auto [i, t] : llvm::enumerate(itemTypes)) {
      llvm::Value *p = bufs[i];
      int64_t itemBytes = rows.itemBytes.empty() ? 0 : rows.itemBytes[i];
      if (itemBytes != 0)
        p = b.CreateGEP(b.getInt8Ty(), p,
                        b.CreateMul(w, b.getInt64(itemBytes)));
      args.push_back(p);
      args.push_back(p);
      args.push_back(b.getInt64(0));
      for (int64_t d : t.getShape())
        args.push_back(b.getInt64(d));
      int64_t stride = 1;
      SmallVector<int64_t> strides(t.getRank());
      for (int64_t d = t.getRank() - 1; d >= 0; --d) {
        strides[d] = stride;
        stride *= t.getDimSize(d);
      }
      for (int64_t s : strides)
        args.push_back(b.getInt64(s));
    }
    b.CreateCall(impl, args);
    llvm::Value *next = b.CreateAdd(w, b.getInt64(1));
    w->addIncoming(next, b.GetInsertBlock());
    b.CreateCondBr(b.CreateICmpSLT(next, end), run, done);
  };

  for (ArrayRef<int64_t> pattern : overwrites) {
    // if (every overwritten operand's pointer is its result's) the call
    // with those operands built from the results' pointers.
    llvm::Value *same = b.getTrue();
    SmallVector<llvm::Value *> bufs(base);
    for (auto [i, r] : llvm::enumerate(pattern)) {
      if (r < 0)
        continue;
      llvm::Value *result = base[numOperands + r];
      same = b.CreateAnd(same, b.CreateICmpEQ(base[i], result));
      bufs[i] = result;
    }
    auto *then = llvm::BasicBlock::Create(ctx, "in_place", fn);
    auto *other = llvm::BasicBlock::Create(ctx, "other", fn);
    b.CreateCondBr(same, then, other);
    b.SetInsertPoint(then);
    emitCalls(bufs);
    b.SetInsertPoint(other);
  }
  emitCalls(base);
  b.SetInsertPoint(done);
  b.CreateRetVoid();
}

/// The native LLVM target (initialized once), or null with `error` set.
const llvm::Target *nativeTarget(const llvm::Triple &triple,
                                 std::string &error) {
  static std::once_flag llvmInit;
  std::call_once(llvmInit, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
  std::string lookupError;
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, lookupError);
  if (!target)
    error = "no LLVM target for " + triple.str() + ": " + lookupError;
  return target;
}

/// The LLVM feature string of `cpu`: the host's detected features for the
/// host, otherwise every feature the named CPU implies (none for x86-64).
/// Only what the code may use; sorted so the string is reproducible.
std::string featureString(const llvm::Target &llvmTarget,
                          const llvm::Triple &triple, bool host,
                          llvm::StringRef cpu) {
  std::vector<std::string> enabled;
  if (host) {
    for (const auto &f : llvm::sys::getHostCPUFeatures())
      if (f.second)
        enabled.push_back("+" + f.first().str());
  } else if (cpu != "x86-64") {
    std::unique_ptr<llvm::MCSubtargetInfo> info(
        llvmTarget.createMCSubtargetInfo(triple, cpu, ""));
    for (const llvm::SubtargetFeatureKV &kv : info->getAllProcessorFeatures())
      if (info->getFeatureBits().test(kv.Value))
        enabled.push_back("+" + std::string(kv.Key));
  }
  llvm::sort(enabled);
  std::string features;
  for (const std::string &f : enabled)
    features += (features.empty() ? "" : ",") + f;
  return features;
}

/// Step 4b: ld.lld -shared over the partitions' objects. Returns the .so
/// bytes.
FailureOr<std::vector<char>>
linkSharedObject(Location loc, ArrayRef<SmallVector<char>> objects) {
  SmallVector<SmallString<128>> objPaths;
  auto removeObjects = [&] {
    for (const auto &path : objPaths)
      llvm::sys::fs::remove(path);
  };
  for (const SmallVector<char> &object : objects) {
    int fd;
    if (llvm::sys::fs::createTemporaryFile("omni-kernels", "o", fd,
                                           objPaths.emplace_back())) {
      objPaths.pop_back();
      removeObjects();
      return emitError(loc, "cannot create a temporary object file");
    }
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os.write(object.data(), object.size());
  }
  SmallString<128> soPath;
  if (llvm::sys::fs::createTemporaryFile("omni-kernels", "so", soPath)) {
    removeObjects();
    return emitError(loc, "cannot create a temporary shared object");
  }
  std::string errMsg;
  SmallVector<llvm::StringRef> argv = {OMNI_LLD_PATH, "-shared",
                                       "--no-undefined-version", "-o", soPath};
  for (const auto &path : objPaths)
    argv.push_back(path);
  int rc = llvm::sys::ExecuteAndWait(OMNI_LLD_PATH, argv, std::nullopt, {}, 0,
                                     0, &errMsg);
  removeObjects();
  if (rc != 0) {
    llvm::sys::fs::remove(soPath);
    return emitError(loc, "linking kernels with " OMNI_LLD_PATH " failed (")
           << rc << "): " << errMsg;
  }
  auto buffer = llvm::MemoryBuffer::getFile(soPath);
  llvm::sys::fs::remove(soPath);
  if (!buffer)
    return emitError(loc, "cannot read the linked shared object");
  return std::vector<char>((*buffer)->getBufferStart(),
                           (*buffer)->getBufferEnd());
}

/// Step 4a for one module: the optimization pipeline, then an object file.
/// Returns an error message, or "" on success.
/// `printIR` (optional) receives the optimized module's text.
std::string optimizeAndEmit(llvm::Module &module, llvm::TargetMachine &machine,
                            unsigned optLevel, SmallVector<char> &object,
                            std::string *printIR = nullptr) {
  module.setDataLayout(machine.createDataLayout());
  module.setTargetTriple(machine.getTargetTriple());
  if (llvm::Error err =
          makeOptimizingTransformer(optLevel, 0, &machine)(&module))
    return "optimizing the kernels failed: " + llvm::toString(std::move(err));
  if (printIR) {
    llvm::raw_string_ostream irOs(*printIR);
    module.print(irOs, nullptr);
  }
  llvm::raw_svector_ostream os(object);
  llvm::legacy::PassManager emit;
  if (machine.addPassesToEmitFile(emit, os, nullptr,
                                  llvm::CodeGenFileType::ObjectFile))
    return "the target cannot emit object files";
  emit.run(module);
  return "";
}

/// The kernels are split into this many partitions (when there are enough
/// of them), each optimized and compiled on its own thread in its own
/// LLVMContext. A fixed count, not the machine's, keeps step.bin the same
/// on every machine.
constexpr unsigned kPartitions = 4;
constexpr unsigned kMinFunctionsToSplit = 16;

} // namespace

FailureOr<CompiledExecutable>
mlir::omni::lowerKernelSetForCpu(KernelSet &set, const CodegenOptions &options,
                                 std::string *llvmIR) {
  ModuleOp kernels = *set.module;
  CompiledExecutable exe;
  exe.name = "kernels";
  exe.format = CodeFormat::ElfSharedObject;
  exe.target.kind = "cpu";
  for (const KernelDef &def : set.kernels) {
    CompiledKernel &k = exe.kernels.emplace_back();
    k.symbol = def.symbol;
    k.operands = def.operands;
    k.results = def.results;
    CpuLaunch launch{def.rows.grid, {}};
    if (def.flat) {
      // Every buffer has the same elements: item w is the chunk w of each.
      launch.grid =
          std::max<int64_t>(1, (def.elements + kFlatChunk - 1) / kFlatChunk);
      for (const auto &list : {def.operands, def.results})
        for (RankedTensorType t : list)
          launch.itemBytes.push_back(
              launch.grid > 1 ? kFlatChunk * flatElementBytes(t) : 0);
    } else if (!def.rows.itemBytes.empty()) {
      launch.itemBytes = def.rows.itemBytes;
    } else {
      launch.itemBytes.assign(def.operands.size() + def.results.size(), 0);
    }
    k.launch = std::move(launch);
  }
  SmallVector<CpuKernelAbi> abis;
  for (const KernelDef &def : set.kernels) {
    CpuKernelAbi &abi = abis.emplace_back();
    abi.symbol = def.symbol;
    abi.buffers.assign(def.operands.begin(), def.operands.end());
    abi.buffers.append(def.results.begin(), def.results.end());
    abi.numOperands = def.operands.size();
    abi.flat = def.flat;
    abi.rows = def.rows;
    abi.overwrites = def.overwrites;
  }
  if (failed(compileCpuKernels(kernels, abis, options, exe, llvmIR)))
    return failure();
  return exe;
}

LogicalResult mlir::omni::compileCpuKernels(ModuleOp kernels,
                                            ArrayRef<CpuKernelAbi> abis,
                                            const CodegenOptions &options,
                                            CompiledExecutable &exe,
                                            std::string *llvmIR) {
  Location loc = kernels.getLoc();
  if (failed(lowerToLLVMDialect(kernels)))
    return emitError(loc, "lowering the kernels to LLVM failed");

  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> module =
      translateModuleToLLVMIR(kernels, llvmContext, "omni_kernels");
  if (!module) {
    if (getenv("OMNI_DEBUG_KERNELS"))
      kernels.print(llvm::errs());
    return emitError(loc, "translating the kernels to LLVM IR failed");
  }
  for (const CpuKernelAbi &abi : abis) {
    bool wide = preferWideVectors(*module->getFunction(abi.symbol + "_impl"));
    addAbiWrapper(*module, abi.symbol, abi.buffers, abi.numOperands, abi.flat,
                  abi.rows, abi.overwrites);
    if (wide)
      for (const std::string &name : {abi.symbol + "_impl", abi.symbol})
        module->getFunction(name)->addFnAttr("prefer-vector-width", "512");
  }
  // The in-place wrappers' impls are inlined here, before the module is
  // split into partitions: SplitModule may put an impl and its wrapper in
  // different partitions (it externalizes locals), where the optimizer can
  // no longer inline it, and the in-place call then runs the scalar loop
  // behind the failed overlap check after all.
  {
    llvm::legacy::PassManager inliner;
    inliner.add(llvm::createAlwaysInlinerLegacyPass());
    inliner.run(*module);
  }

  llvm::Triple triple(llvm::sys::getDefaultTargetTriple());
  std::string error;
  const llvm::Target *llvmTarget = nativeTarget(triple, error);
  if (!llvmTarget)
    return emitError(loc, error);
  const std::string &cpu = options.cpu.cpu;
  if (std::string bad = checkTargetCpu(cpu); !bad.empty())
    return emitError(loc, bad);
  bool host = cpu == "host";
  exe.target.arch = host ? llvm::sys::getHostCPUName().str() : cpu;
  exe.target.features =
      featureString(*llvmTarget, triple, host, exe.target.arch);
  int optLevel = options.optLevel;
  auto makeMachine = [&] {
    return std::unique_ptr<llvm::TargetMachine>(llvmTarget->createTargetMachine(
        triple, exe.target.arch, exe.target.features, llvm::TargetOptions(),
        llvm::Reloc::PIC_, std::nullopt,
        optLevel >= 3   ? llvm::CodeGenOptLevel::Aggressive
        : optLevel == 0 ? llvm::CodeGenOptLevel::None
                        : llvm::CodeGenOptLevel::Default));
  };
  module->setTargetTriple(triple);
  SmallVector<SmallVector<char>> objects;
  size_t definitions =
      llvm::count_if(module->functions(),
                     [](llvm::Function &f) { return !f.isDeclaration(); });
  if (llvmIR || definitions < kMinFunctionsToSplit) {
    // One module (also what --emit=llvm prints, optimized).
    std::unique_ptr<llvm::TargetMachine> machine = makeMachine();
    std::string error = optimizeAndEmit(*module, *machine, optLevel,
                                        objects.emplace_back(), llvmIR);
    if (!error.empty())
      return emitError(loc, error);
  } else {
    // Partitions travel as bitcode into fresh contexts: an LLVMContext is
    // not thread-safe.
    SmallVector<SmallVector<char>> bitcode;
    llvm::SplitModule(
        *module, kPartitions,
        [&](std::unique_ptr<llvm::Module> part) {
          llvm::raw_svector_ostream os(bitcode.emplace_back());
          llvm::WriteBitcodeToFile(*part, os);
        },
        /*PreserveLocals=*/false);
    objects.resize(bitcode.size());
    SmallVector<std::string> errors(bitcode.size());
    auto compilePart = [&](size_t i) {
      llvm::LLVMContext partContext;
      auto part = llvm::parseBitcodeFile(
          llvm::MemoryBufferRef(
              llvm::StringRef(bitcode[i].data(), bitcode[i].size()), "part"),
          partContext);
      if (!part) {
        errors[i] = "reading a kernel partition failed: " +
                    llvm::toString(part.takeError());
        return;
      }
      std::unique_ptr<llvm::TargetMachine> machine = makeMachine();
      errors[i] = optimizeAndEmit(**part, *machine, optLevel, objects[i]);
    };
    unsigned workers =
        std::max(1u, std::min<unsigned>(bitcode.size(),
                                        std::thread::hardware_concurrency()));
    std::atomic<size_t> next{0};
    std::vector<std::thread> threads;
    for (unsigned w = 1; w < workers; ++w)
      threads.emplace_back([&] {
        for (size_t i; (i = next++) < bitcode.size();)
          compilePart(i);
      });
    for (size_t i; (i = next++) < bitcode.size();)
      compilePart(i);
    for (std::thread &t : threads)
      t.join();
    for (const std::string &error : errors)
      if (!error.empty())
        return emitError(loc, error);
  }
  FailureOr<std::vector<char>> so = linkSharedObject(loc, objects);
  if (failed(so))
    return failure();
  exe.code = std::move(*so);
  return success();
}

std::string mlir::omni::checkTargetCpu(llvm::StringRef cpu) {
  if (cpu == "host" || cpu == "x86-64")
    return "";
  llvm::Triple triple(llvm::sys::getDefaultTargetTriple());
  std::string error;
  const llvm::Target *llvmTarget = nativeTarget(triple, error);
  if (!llvmTarget)
    return error;
  // A generic subtarget answers: one made for an unknown CPU warns on stderr.
  std::unique_ptr<llvm::MCSubtargetInfo> info(
      llvmTarget->createMCSubtargetInfo(triple, "", ""));
  if (info && info->isCPUStringValid(cpu))
    return "";
  return ("--target-cpu=" + cpu +
          ": unknown CPU; expected host, x86-64 or an LLVM x86 CPU name "
          "(haswell, x86-64-v3, skylake-avx512, znver4, ...)")
      .str();
}
