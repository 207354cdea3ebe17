//===- Indexing.h - Index arithmetic of the helper kernels ------*- C++ -*-===//
//
// The element addressing of HelperKernels.cu's im2col and softmax, as
// host-and-device functions so that CudaDriverTest checks them on the host
// (against naive convolution and attention loops) where no GPU is at hand.
// Pure integer arithmetic.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_HAL_DRIVERS_CUDA_KERNELS_INDEXING_H
#define OMNI_RUNTIME_HAL_DRIVERS_CUDA_KERNELS_INDEXING_H

#include <stdint.h>

#ifdef __CUDACC__
#define OMNI_INDEX_HD __host__ __device__ inline
#else
#define OMNI_INDEX_HD inline
#endif

namespace omni::hal::cuda {

/// The shape of one im2col (row-major input [images, c, h, w], col
/// [images, c*kh*kw, oh*ow]).
struct Im2colShape {
  int64_t c, h, w, kh, kw, sh, sw, ph, pw, dh, dw, oh, ow;
};

/// The input element that col element `i` copies, or -1 where it reads the
/// zero padding.
OMNI_INDEX_HD int64_t im2colSource(const Im2colShape &s, int64_t i) {
  const int64_t spatial = s.oh * s.ow, rows = s.c * s.kh * s.kw;
  int64_t pos = i % spatial, row = (i / spatial) % rows,
          img = i / (spatial * rows);
  int64_t ox = pos % s.ow, oy = pos / s.ow;
  int64_t kj = row % s.kw, ki = (row / s.kw) % s.kh, ci = row / (s.kw * s.kh);
  int64_t y = oy * s.sh - s.ph + ki * s.dh, x = ox * s.sw - s.pw + kj * s.dw;
  if (y < 0 || y >= s.h || x < 0 || x >= s.w)
    return -1;
  return ((img * s.c + ci) * s.h + y) * s.w + x;
}

/// The first mask element of score row `row` of a chunk whose first
/// (batch, head) pair is `bh0`: rows are (pair - bh0) * seqQ + query; the
/// mask's batch and head strides are 0 where it broadcasts.
OMNI_INDEX_HD int64_t maskRowOffset(int64_t row, int64_t bh0, int64_t seqQ,
                                    int64_t seqK, int64_t heads,
                                    int64_t maskBatchStride,
                                    int64_t maskHeadStride) {
  int64_t bh = bh0 + row / seqQ, q = row % seqQ;
  return (bh / heads) * maskBatchStride + (bh % heads) * maskHeadStride +
         q * seqK;
}

} // namespace omni::hal::cuda

#endif // OMNI_RUNTIME_HAL_DRIVERS_CUDA_KERNELS_INDEXING_H
