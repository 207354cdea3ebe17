//===- Library.h - Tuned library routines a stream can run ------*- C++ -*-===//
//
// The parameters of step.bin's LibraryCall routines, decoded from the
// tensors' shapes and the call's attributes (runtime/executor does that,
// once for every driver). Every tensor is dense and row-major; sizes are
// element counts. Drivers implement the routines with their vendor
// libraries (cpu: OpenBLAS and the runtime's own kernels; cuda: cuBLASLt
// and cuDNN) and say which element types they support with
// Device::supportsLibrary.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_HAL_LIBRARY_H
#define OMNI_RUNTIME_HAL_LIBRARY_H

#include "runtime/base/CheckedMath.h"
#include "runtime/io/HostTensor.h"

#include <cstdint>

namespace omni::hal {

/// The routines of step.bin's Library enum.
enum class Library { Matmul, Conv2d, Attention, AttentionBackward };

/// result[b] = op(lhs[b]) x op(rhs[b or shared]) for b in [0, batch):
/// lhs[b] is m x k (k x m when transposeLhs), rhs k x n (n x k when
/// transposeRhs), result[b] m x n.
struct MatmulParams {
  DType dtype = DType::F32;
  int64_t batch = 1, m = 0, n = 0, k = 0;
  bool transposeLhs = false, transposeRhs = false;
  /// rhs is one matrix shared by every batch (rank 2 in the program).
  bool rhsShared = false;
};

/// Cross-correlation as torch.nn.functional.conv2d with groups = 1: input
/// [n, c, h, w], filter [o, c, kh, kw], result [n, o, outH, outW].
struct Conv2dParams {
  DType dtype = DType::F32;
  int64_t n = 0, c = 0, h = 0, w = 0;
  int64_t o = 0, kh = 0, kw = 0;
  int64_t strideH = 1, strideW = 1, padH = 0, padW = 0;
  int64_t dilationH = 1, dilationW = 1;
  int64_t outH = 0, outW = 0;
};

/// Attention, and its backward: given q, k, v, the mask, the
/// forward's result o and its cotangent dO ([batch, heads, seqQ,
/// valueDim]), dq, dk and dv of the shapes of q, k, v.
///
/// result = softmax(q k^T * scale + mask) v per (batch, head): q [batch,
/// heads, seqQ, headDim], k [batch, heads, seqK, headDim], v [batch, heads,
/// seqK, valueDim], optional additive mask [batch|1, heads|1, seqQ, seqK],
/// result [batch, heads, seqQ, valueDim].
struct AttentionParams {
  DType dtype = DType::F32;
  int64_t batch = 0, heads = 0, seqQ = 0, seqK = 0, headDim = 0, valueDim = 0;
  double scale = 1.0;
  bool hasMask = false;
  /// The mask's batch / head dimension is 1 (broadcast).
  bool maskBatchShared = false, maskHeadShared = false;
};

/// An attention mask's strides, in elements, for the batch and head
/// dimensions of the scores (0 where the mask broadcasts).
struct AttentionMaskStrides {
  int64_t batch = 0, head = 0;
};
inline AttentionMaskStrides attentionMaskStrides(const AttentionParams &p) {
  const int64_t plane = p.seqQ * p.seqK;
  return {p.maskBatchShared ? 0 : (p.maskHeadShared ? 1 : p.heads) * plane,
          p.maskHeadShared ? 0 : plane};
}

/// The bytes of an attention call's mask, [batch|1, heads|1, seqQ, seqK]
/// (-1 when they overflow).
inline int64_t attentionMaskBytes(const AttentionParams &p) {
  std::optional<int64_t> n =
      checkedNumElements({p.maskBatchShared ? 1 : p.batch,
                          p.maskHeadShared ? 1 : p.heads, p.seqQ, p.seqK});
  std::optional<int64_t> b =
      n ? checkedMul(*n, dtypeSize(p.dtype)) : std::nullopt;
  return b ? *b : -1;
}

} // namespace omni::hal

#endif // OMNI_RUNTIME_HAL_LIBRARY_H
