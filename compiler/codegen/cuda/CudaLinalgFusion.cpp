//===- CudaLinalgFusion.cpp - step 2's elementwise fusion -----------------===//
//
// Before bufferization, the cuda lowering fuses a kernel's linalg ops as
// upstream's linalg-fuse-elementwise-ops does (a producer with one reader),
// and further where that keeps a value out of a scratch buffer: a cheap
// producer is recomputed in its few readers (fuseProducer), and a value
// read only by slices is computed per slice (sliceProducers). A value
// stored in scratch is written once and read back by each reader; the
// GPU's time in these kernels is their memory traffic (docs/backend-cuda.md,
// "Lowering", step 2).
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/cuda/CudaLowering.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

using namespace mlir;

namespace {

/// The bytes of a ranked tensor value.
int64_t tensorBytes(Value v) {
  auto t = cast<RankedTensorType>(v.getType());
  return t.getNumElements() *
         static_cast<int64_t>(t.getElementTypeBitWidth() / 8);
}

/// The most readers a producer is recomputed for (fuseElementwise).
constexpr unsigned kMaxRecomputeReaders = 4;

/// Whether elementwise fusion should fuse the producer of `fused` into its
/// reader although the producer has other readers: each reader then
/// computes it again from the producer's inputs. Stored, the producer's
/// value is written once and read back by each reader, through a scratch
/// buffer; recomputed, each reader reads the producer's inputs instead. So
/// with k readers, recomputing moves fewer bytes when k times the inputs'
/// bytes are at most k + 1 times the value's: a bf16 query projection
/// widened to f32 with its bias added and transposed, read by the per-head
/// RMS norm's sum of squares and by its normalization (SD3.5-Medium: 12.6
/// MB of f32 scratch written and read twice per call, 740 calls per
/// rollout); a layer norm's centered rows, x minus the row means, read by
/// the variance and the normalization (12.6 MB, 490 calls). Not when the
/// producer reads an argument that a result may be written over
/// (`overwritten`): a reader after that result's store would read the new
/// value.
bool fuseProducer(OpOperand *fused, const DenseSet<Value> &overwritten) {
  auto producer = fused->get().getDefiningOp<linalg::GenericOp>();
  if (!producer)
    return false;
  if (producer->hasOneUse())
    return true; // upstream's rule
  if (producer->getNumResults() != 1 || producer.getNumReductionLoops() != 0 ||
      producer.payloadUsesValueFromOperand(producer.getDpsInitOperand(0)))
    return false;
  Value value = producer->getResult(0);
  unsigned readers = 0;
  for (Operation *user : value.getUsers()) {
    // A kernel result is written anyway.
    if (user->hasTrait<OpTrait::IsTerminator>() ||
        ++readers > kMaxRecomputeReaders)
      return false;
  }
  if (!isa<RankedTensorType>(value.getType()))
    return false;
  int64_t inputs = 0;
  for (OpOperand *in : producer.getDpsInputOperands()) {
    if (!isa<RankedTensorType>(in->get().getType()) ||
        overwritten.contains(in->get()))
      return false;
    inputs += tensorBytes(in->get());
  }
  return inputs * readers <= tensorBytes(value) * (readers + 1);
}

} // namespace

/// Step 2, first: linalg-fuse-elementwise-ops, with producers recomputed
/// where that moves fewer bytes (fuseProducer). `overwritten`: the kernel
/// arguments that some result may be written over.
LogicalResult
mlir::omni::cuda::fuseElementwise(ModuleOp kernels,
                                  const DenseSet<Value> &overwritten) {
  MLIRContext *ctx = kernels.getContext();
  RewritePatternSet patterns(ctx);
  linalg::populateElementwiseOpsFusionPatterns(patterns, [&](OpOperand *fused) {
    return fuseProducer(fused, overwritten);
  });
  linalg::GenericOp::getCanonicalizationPatterns(patterns, ctx);
  return applyPatternsGreedily(kernels, std::move(patterns));
}

/// Step 2, between two elementwise fusions: a static slice of a parallel
/// linalg.generic read only by slices becomes, for each slice, a copy of
/// the generic over the slice's elements, reading slices of its inputs
/// (a slice of an input made by another such generic is then rewritten
/// the same way). Stored, the whole value goes through a scratch buffer
/// that the slices read back; sliced, each part is computed where it is
/// read, and the second fusion fuses it into its reader: the attention's
/// output, widened and transposed to [B, S, H, D] f32, sliced into its
/// image and text tokens and rounded to bf16 for their out projections
/// (SD3.5-Medium: a 16.7 MB scratch buffer written and read per call, 230
/// calls per rollout). Only where every input is read through a projected
/// permutation (a transpose, a broadcast), so that the slice of the value
/// is a slice of each input; not for a generic that reads an argument a
/// result is written over (as in fuseProducer), nor one whose body reads
/// its indices (linalg.index).
void mlir::omni::cuda::sliceProducers(ModuleOp kernels,
                                      const DenseSet<Value> &overwritten) {
  SmallVector<tensor::ExtractSliceOp> work;
  kernels.walk([&](tensor::ExtractSliceOp s) { work.push_back(s); });
  while (!work.empty()) {
    tensor::ExtractSliceOp slice = work.pop_back_val();
    auto producer = slice.getSource().getDefiningOp<linalg::GenericOp>();
    if (!producer || producer->getNumResults() != 1 ||
        producer.getNumReductionLoops() != 0)
      continue;
    OpOperand *init = producer.getDpsInitOperand(0);
    auto type = dyn_cast<RankedTensorType>(slice.getType());
    if (!type || !type.hasStaticShape() ||
        type.getRank() != slice.getSourceType().getRank() ||
        !producer.getMatchingIndexingMap(init).isIdentity() ||
        producer.payloadUsesValueFromOperand(init) ||
        !llvm::all_of(producer->getUsers(),
                      llvm::IsaPred<tensor::ExtractSliceOp>) ||
        !producer.getBody()->getOps<linalg::IndexOp>().empty())
      continue;
    ArrayRef<int64_t> offsets = slice.getStaticOffsets();
    ArrayRef<int64_t> strides = slice.getStaticStrides();
    if (llvm::any_of(offsets, ShapedType::isDynamic) ||
        llvm::any_of(strides, ShapedType::isDynamic))
      continue;
    bool sliceable = true;
    for (OpOperand *in : producer.getDpsInputOperands()) {
      auto inType = dyn_cast<RankedTensorType>(in->get().getType());
      sliceable = sliceable && inType && inType.hasStaticShape() &&
                  !overwritten.contains(in->get()) &&
                  producer.getMatchingIndexingMap(in).isProjectedPermutation(
                      /*allowZeroInResults=*/true);
    }
    if (!sliceable)
      continue;
    OpBuilder b(slice);
    Location loc = slice.getLoc();
    SmallVector<Value> inputs;
    for (OpOperand *in : producer.getDpsInputOperands()) {
      // Input dim j read at loop dim d: the slice's range of d; at a
      // constant (a broadcast size-1 dim): the whole dim.
      auto inType = cast<RankedTensorType>(in->get().getType());
      AffineMap map = producer.getMatchingIndexingMap(in);
      SmallVector<int64_t> inOffsets, inSizes, inStrides;
      for (auto [j, expr] : llvm::enumerate(map.getResults())) {
        if (auto dim = dyn_cast<AffineDimExpr>(expr)) {
          unsigned d = dim.getPosition();
          inOffsets.push_back(offsets[d]);
          inSizes.push_back(type.getDimSize(d));
          inStrides.push_back(strides[d]);
        } else {
          inOffsets.push_back(0);
          inSizes.push_back(inType.getDimSize(j));
          inStrides.push_back(1);
        }
      }
      if (inSizes == inType.getShape()) {
        inputs.push_back(in->get());
        continue;
      }
      auto cut = tensor::ExtractSliceOp::create(
          b, loc, RankedTensorType::get(inSizes, inType.getElementType()),
          in->get(), ValueRange{}, ValueRange{}, ValueRange{}, inOffsets,
          inSizes, inStrides);
      inputs.push_back(cut);
      work.push_back(cut);
    }
    Value empty =
        tensor::EmptyOp::create(b, loc, type.getShape(), type.getElementType());
    auto part = linalg::GenericOp::create(
        b, loc, TypeRange{type}, inputs, ValueRange{empty},
        producer.getIndexingMapsArray(), producer.getIteratorTypesArray());
    IRMapping mapping;
    producer.getRegion().cloneInto(&part.getRegion(), mapping);
    slice.getResult().replaceAllUsesWith(part.getResult(0));
    slice.erase();
    if (producer->use_empty())
      producer.erase();
  }
}
