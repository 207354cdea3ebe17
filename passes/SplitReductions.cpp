//===- SplitReductions.cpp - Sums over the leading dims in two stages -----===//
//
// omni-split-reductions rewrites a large float sum over the leading
// dimensions of its operand (a bias gradient: a [2048, 256] gradient summed
// over its rows; an RMS norm's weight gradient: [8, 8, 256, 32] summed over
// its first three dimensions) into two sums:
//
//   stage 1: the rows cut into G groups, each group summed in f64
//            -> G partial sums, kept in f64;
//   stage 2: the G partial sums summed (in f64) and rounded once.
//
// A kernel runs on several threads (or GPU blocks) only where its work can
// be cut along the leading dimension of every value (docs/backend.md,
// "Kernel ABI"); a sum over that dimension cannot, so before this pass such
// a kernel, with every elementwise op fused into it, ran on one thread.
// Stage 1 keeps the groups as its leading dimension, so it and everything
// fused with it split like any row-wise kernel; stage 2 is a small kernel
// of its own (omni-fuse never fuses a reduction of a reduced value).
//
// The result is the same sum in another fixed order: G is fixed by the
// shape, never by a thread count, so the bits stay reproducible, and the
// accuracy rule of float sums (docs/backend.md, "Reductions": accumulate in
// f64, round once) holds because the partial sums stay in f64 (in f32 a
// partial sum of 2^24 and a thousand ones would lose them all).
//
//===----------------------------------------------------------------------===//

#include "dialects/omni/OmniEmitter.h"
#include "dialects/omni/OmniOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#define DEBUG_TYPE "omni-split-reductions"

namespace mlir::omni {
#define GEN_PASS_DEF_OMNISPLITREDUCTIONSPASS
#include "passes/Passes.h.inc"
} // namespace mlir::omni

using namespace mlir;
using namespace mlir::omni;

namespace {

/// Below this many operand elements a sum is one work item anyway (twice
/// the CPU kernels' smallest item, kMinRowWork = 16384 elements, and then
/// some: a [256, 256] sum takes 30 us on one core).
constexpr int64_t kMinElements = int64_t(1) << 17;
/// The most partial sums: enough work items for 64 threads, and the partial
/// sums ([G, kept] f64) stay a few KiB to a few hundred KiB.
constexpr int64_t kMaxPartials = 64;
/// A leading dimension this large is the groups as it is (no reshape).
constexpr int64_t kMinPartials = 8;
/// The fewest operand rows (elements per kept element) a group sums.
constexpr int64_t kMinGroupRows = 8;
/// The rows a group sums when the rows are regrouped: the partial sums (f64)
/// are 1/64 of an f32 operand's bytes and shrink with it, so a micro-batch's
/// arena shrinks with the micro-batch (test/train/microbatch-memory*.test).
constexpr int64_t kRowsPerGroup = 128;

/// The largest divisor of n that is at most `limit`.
int64_t largestDivisorAtMost(int64_t n, int64_t limit) {
  for (int64_t g = std::min(n, limit); g > 1; --g)
    if (n % g == 0)
      return g;
  return 1;
}

/// Rewrites `red` into the two stages when it qualifies; returns whether it
/// did.
bool splitReduction(ReduceOp red) {
  if (red.getKind() != ReduceKind::sum)
    return false;
  RankedTensorType in = red.getOperand().getType(), out = red.getType();
  Type elt = in.getElementType();
  if (!isa<FloatType>(elt) || !in.hasStaticShape() ||
      in.getNumElements() < kMinElements)
    return false;
  // A full reduction (to one element) is left alone: its result has no
  // rows to split either way, and omni-fuse groups the grad norm's sums by
  // their scalar results (docs/fusion.md, rule 7).
  if (out.getNumElements() <= 1)
    return false;
  // The leading run of dimensions that are reduced or of size 1: the rows
  // a kernel cannot cut. Without a reduced one among them the sum already
  // keeps its leading dimension.
  ArrayRef<int64_t> dims = red.getDims();
  ArrayRef<int64_t> shape = in.getShape();
  int64_t prefix = 0, rows = 1;
  bool reducesLead = false;
  while (prefix < in.getRank() &&
         (llvm::is_contained(dims, prefix) || shape[prefix] == 1)) {
    reducesLead =
        reducesLead || (llvm::is_contained(dims, prefix) && shape[prefix] != 1);
    rows *= shape[prefix];
    ++prefix;
  }
  if (!reducesLead)
    return false;

  // The groups: [G, rest...] when the leading dimension is reduced, is a
  // good G alone and each group still sums kMinGroupRows rows; else
  // [rows, rest...] as [G, rows / G, rest...] with about kRowsPerGroup rows
  // per group. Either way the partial sums are a small fraction of the
  // operand and G grows with the rows (up to kMaxPartials).
  int64_t groups = 0;
  bool reshape = false;
  SmallVector<int64_t> stage1Dims; // of the (reshaped) operand
  int64_t restReduced = 1;
  for (int64_t d : dims)
    if (d >= 1)
      restReduced *= shape[d];
  if (dims.front() == 0 && shape[0] >= kMinPartials &&
      shape[0] <= kMaxPartials && restReduced >= kMinGroupRows) {
    groups = shape[0];
    for (int64_t d : dims)
      if (d != 0)
        stage1Dims.push_back(d);
  } else {
    groups = largestDivisorAtMost(rows,
                                  std::min(kMaxPartials, rows / kRowsPerGroup));
    if (groups < 2)
      return false;
    reshape = true;
    stage1Dims.push_back(1);
    for (int64_t d : dims)
      if (d >= prefix)
        stage1Dims.push_back(d - prefix + 2);
  }

  OpBuilder b(red);
  Location loc = red.getLoc();
  Type f64 = b.getF64Type();
  Value x = red.getOperand();
  if (reshape) {
    SmallVector<int64_t> grouped = {groups, rows / groups};
    llvm::append_range(grouped, shape.drop_front(prefix));
    x = ReshapeOp::create(b, loc, in.clone(grouped), x);
  }
  auto xType = cast<RankedTensorType>(x.getType());
  if (elt != f64)
    x = CastOp::create(b, loc, xType.clone(f64), x);
  Emitter e(b, loc);
  Value partial = e.reduce(ReduceKind::sum, x, stage1Dims);
  Value total = e.reduce(ReduceKind::sum, partial, {0});
  auto totalType = cast<RankedTensorType>(total.getType());
  if (elt != f64)
    total = CastOp::create(b, loc, totalType.clone(elt), total);
  // The unit dimensions of the prefix that the sum kept.
  if (cast<RankedTensorType>(total.getType()).getShape() != out.getShape())
    total = ReshapeOp::create(b, loc, out, total);
  red.getResult().replaceAllUsesWith(total);
  red.erase();
  return true;
}

struct OmniSplitReductionsPass
    : omni::impl::OmniSplitReductionsPassBase<OmniSplitReductionsPass> {
  void runOnOperation() override {
    SmallVector<ReduceOp> reductions;
    getOperation().walk([&](ReduceOp red) {
      // Not inside a fusion a frontend wrote: its kernel is as written.
      if (!red->getParentOfType<FusionOp>())
        reductions.push_back(red);
    });
    for (ReduceOp red : reductions)
      splitReduction(red);
  }
};

} // namespace
