//===- HostCudnn.cpp - cuDNN's convolution modelled on the CPU ------------===//
//
// The cuDNN entry points the cuda driver uses (CudaApi.h's
// OMNI_CUDNN_ENTRIES: the legacy convolution API), for HostModel.h's model,
// loaded through OMNI_CUDNN_LIBRARY. It accepts what cuDNN would and
// refuses the rest:
// - 4-d NCHW tensors and filters, 2-d convolutions in either mode (a
//   CUDNN_CONVOLUTION flips the filter), one group; x, w and y of one type
//   with f32 compute for f32/f16/bf16 and f64 compute for f64, y of the
//   shape cudnnGetConvolution2dForwardOutputDim gives;
// - the algorithm list of cudnnGetConvolutionForwardAlgorithm_v7 is one a
//   heuristic could give, chosen to test the caller's choice: first FFT
//   with a workspace of 1 GiB, then Winograd (not supported), then
//   implicit precomputed GEMM in the default math (which permits TF32 for
//   f32) and in the descriptor's math with a workspace, then implicit GEMM
//   without one;
// - cudnnConvolutionForward runs an algorithm of that list with at least
//   its workspace, which it writes (its index table), so a workspace
//   freed before the convolution runs fails it. f32 data with a math type
//   other than CUDNN_FMA_MATH is computed as TF32 does it (x and w rounded
//   to 10 mantissa bits first): on an A100 or H100 that is what cuDNN may
//   do. Products are summed in double and rounded once to y's type:
//   y = alpha conv(x, w) + beta y (beta 0: y is not read). Alpha and beta
//   are doubles for f64 data, floats otherwise.
// Descriptors are copied into the queued work (the driver destroys them
// right after the call, as cuDNN allows).
//
//===----------------------------------------------------------------------===//

#include "runtime/hal/drivers/cuda/host/HostModel.h"

#include <cudnn.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

struct cudnnContext {
  cudaStream_t stream = nullptr;
};

struct cudnnTensorStruct {
  bool set = false;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  std::array<int, 4> dims{}; // n, c, h, w
};

struct cudnnFilterStruct {
  bool set = false;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  std::array<int, 4> dims{}; // k, c, r, s
};

struct cudnnConvolutionStruct {
  bool set = false;
  int padH = 0, padW = 0, strideH = 1, strideW = 1, dilationH = 1,
      dilationW = 1;
  cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};

namespace omni::hal::cuda::host {
namespace {

constexpr std::pair<cudnnDataType_t, DType> kTypes[] = {
    {CUDNN_DATA_DOUBLE, DType::F64},
    {CUDNN_DATA_FLOAT, DType::F32},
    {CUDNN_DATA_HALF, DType::F16},
    {CUDNN_DATA_BFLOAT16, DType::BF16}};

DType dtypeOf(cudnnDataType_t t) {
  return dtypeIn(t, kTypes).value_or(DType::F32);
}

bool modelled(cudnnDataType_t t) { return dtypeIn(t, kTypes).has_value(); }

/// The output shape of cudnnGetConvolution2dForwardOutputDim.
std::array<int, 4> outputDims(const cudnnConvolutionStruct &c,
                              const cudnnTensorStruct &x,
                              const cudnnFilterStruct &w) {
  auto out = [](int in, int pad, int k, int dilation, int stride) {
    return 1 + (in + 2 * pad - ((k - 1) * dilation + 1)) / stride;
  };
  return {x.dims[0], w.dims[0],
          out(x.dims[2], c.padH, w.dims[2], c.dilationH, c.strideH),
          out(x.dims[3], c.padW, w.dims[3], c.dilationW, c.strideW)};
}

/// Whether the four descriptors describe one convolution cuDNN runs.
bool consistent(const cudnnTensorStruct &x, const cudnnFilterStruct &w,
                const cudnnConvolutionStruct &c, const cudnnTensorStruct &y) {
  if (!x.set || !w.set || !c.set || !y.set)
    return false;
  if (x.type != w.type || x.type != y.type || x.dims[1] != w.dims[1])
    return false;
  const cudnnDataType_t compute =
      x.type == CUDNN_DATA_DOUBLE ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
  if (c.compute != compute)
    return false;
  std::array<int, 4> o = outputDims(c, x, w);
  return o[2] > 0 && o[3] > 0 && o == y.dims;
}

int64_t count(const std::array<int, 4> &d) {
  return int64_t(d[0]) * d[1] * d[2] * d[3];
}

/// The model's heuristic list for a convolution whose descriptor asks for
/// `math`.
std::array<cudnnConvolutionFwdAlgoPerf_t, 5>
algorithms(const cudnnFilterStruct &w, const cudnnConvolutionStruct &c,
           const cudnnTensorStruct &y) {
  auto perf = [](cudnnConvolutionFwdAlgo_t algo, cudnnStatus_t status,
                 size_t memory, cudnnMathType_t math) {
    cudnnConvolutionFwdAlgoPerf_t p{};
    p.algo = algo;
    p.status = status;
    p.memory = memory;
    p.determinism = CUDNN_DETERMINISTIC;
    p.mathType = math;
    return p;
  };
  // The index table: one int per (filter tap, output pixel) of an image.
  const size_t table = sizeof(int) * size_t(w.dims[2]) * size_t(w.dims[3]) *
                       size_t(y.dims[2]) * size_t(y.dims[3]);
  return {perf(CUDNN_CONVOLUTION_FWD_ALGO_FFT, CUDNN_STATUS_SUCCESS,
               size_t(1) << 30, c.math),
          perf(CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED,
               CUDNN_STATUS_NOT_SUPPORTED, 0, c.math),
          perf(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
               CUDNN_STATUS_SUCCESS, table, CUDNN_DEFAULT_MATH),
          perf(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM,
               CUDNN_STATUS_SUCCESS, table, c.math),
          perf(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, CUDNN_STATUS_SUCCESS,
               0, c.math)};
}

/// `v` rounded to TF32 (10 mantissa bits, nearest even), as tensor cores
/// read f32 operands.
double tf32(double v) {
  float f = static_cast<float>(v);
  if (!std::isfinite(f))
    return f;
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  bits += 0xfffu + ((bits >> 13) & 1u);
  bits &= ~0x1fffu;
  std::memcpy(&f, &bits, 4);
  return f;
}

} // namespace
} // namespace omni::hal::cuda::host

using namespace omni::hal::cuda::host;

#define OMNI_CHECK_SET(d)                                                      \
  if (!(d))                                                                    \
    return CUDNN_STATUS_BAD_PARAM;

extern "C" {

size_t cudnnGetVersion() { return CUDNN_VERSION; }

const char *cudnnGetErrorString(cudnnStatus_t status) {
  switch (status) {
  case CUDNN_STATUS_SUCCESS:
    return "CUDNN_STATUS_SUCCESS";
  case CUDNN_STATUS_BAD_PARAM:
    return "CUDNN_STATUS_BAD_PARAM (host model)";
  case CUDNN_STATUS_NOT_SUPPORTED:
    return "CUDNN_STATUS_NOT_SUPPORTED (host model)";
  case CUDNN_STATUS_EXECUTION_FAILED:
    return "CUDNN_STATUS_EXECUTION_FAILED (host model)";
  default:
    return "CUDNN_STATUS_INTERNAL_ERROR (host model)";
  }
}

cudnnStatus_t cudnnCreate(cudnnHandle_t *handle) {
  OMNI_CHECK_SET(handle);
  *handle = new cudnnContext();
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroy(cudnnHandle_t handle) {
  delete handle;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetStream(cudnnHandle_t handle, cudaStream_t stream) {
  OMNI_CHECK_SET(handle);
  handle->stream = stream;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t *d) {
  OMNI_CHECK_SET(d);
  *d = new cudnnTensorStruct();
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetTensor4dDescriptor(cudnnTensorDescriptor_t d,
                                         cudnnTensorFormat_t format,
                                         cudnnDataType_t type, int n, int c,
                                         int h, int w) {
  OMNI_CHECK_SET(d);
  if (format != CUDNN_TENSOR_NCHW || !modelled(type))
    return CUDNN_STATUS_NOT_SUPPORTED;
  if (n <= 0 || c <= 0 || h <= 0 || w <= 0)
    return CUDNN_STATUS_BAD_PARAM;
  *d = cudnnTensorStruct{true, type, {n, c, h, w}};
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t d) {
  delete d;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t *d) {
  OMNI_CHECK_SET(d);
  *d = new cudnnFilterStruct();
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t d,
                                         cudnnDataType_t type,
                                         cudnnTensorFormat_t format, int k,
                                         int c, int h, int w) {
  OMNI_CHECK_SET(d);
  if (format != CUDNN_TENSOR_NCHW || !modelled(type))
    return CUDNN_STATUS_NOT_SUPPORTED;
  if (k <= 0 || c <= 0 || h <= 0 || w <= 0)
    return CUDNN_STATUS_BAD_PARAM;
  *d = cudnnFilterStruct{true, type, {k, c, h, w}};
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t d) {
  delete d;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t
cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t *d) {
  OMNI_CHECK_SET(d);
  *d = new cudnnConvolutionStruct();
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t d,
                                              int padH, int padW, int strideH,
                                              int strideW, int dilationH,
                                              int dilationW,
                                              cudnnConvolutionMode_t mode,
                                              cudnnDataType_t compute) {
  OMNI_CHECK_SET(d);
  if (padH < 0 || padW < 0 || strideH <= 0 || strideW <= 0 || dilationH <= 0 ||
      dilationW <= 0 ||
      (mode != CUDNN_CONVOLUTION && mode != CUDNN_CROSS_CORRELATION))
    return CUDNN_STATUS_BAD_PARAM;
  if (compute != CUDNN_DATA_FLOAT && compute != CUDNN_DATA_DOUBLE)
    return CUDNN_STATUS_NOT_SUPPORTED;
  const cudnnMathType_t math = d->math;
  *d = cudnnConvolutionStruct{true,      padH,      padW, strideH, strideW,
                              dilationH, dilationW, mode, compute, math};
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t d,
                                          cudnnMathType_t math) {
  OMNI_CHECK_SET(d);
  if (math != CUDNN_DEFAULT_MATH && math != CUDNN_TENSOR_OP_MATH &&
      math != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION && math != CUDNN_FMA_MATH)
    return CUDNN_STATUS_BAD_PARAM;
  d->math = math;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolution2dForwardOutputDim(
    const cudnnConvolutionDescriptor_t c, const cudnnTensorDescriptor_t x,
    const cudnnFilterDescriptor_t w, int *n, int *k, int *h, int *wOut) {
  OMNI_CHECK_SET(c && x && w && c->set && x->set && w->set);
  if (x->dims[1] != w->dims[1])
    return CUDNN_STATUS_BAD_PARAM;
  std::array<int, 4> o = outputDims(*c, *x, *w);
  if (o[2] <= 0 || o[3] <= 0)
    return CUDNN_STATUS_BAD_PARAM;
  *n = o[0], *k = o[1], *h = o[2], *wOut = o[3];
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t
cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t d) {
  delete d;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnGetConvolutionForwardAlgorithm_v7(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t x,
    const cudnnFilterDescriptor_t w, const cudnnConvolutionDescriptor_t c,
    const cudnnTensorDescriptor_t y, const int requested, int *returned,
    cudnnConvolutionFwdAlgoPerf_t *perf) {
  OMNI_CHECK_SET(handle && x && w && c && y && returned && perf);
  if (requested <= 0 || !consistent(*x, *w, *c, *y))
    return CUDNN_STATUS_BAD_PARAM;
  auto list = algorithms(*w, *c, *y);
  *returned = std::min<int>(requested, static_cast<int>(list.size()));
  std::copy(list.begin(), list.begin() + *returned, perf);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t cudnnConvolutionForward(
    cudnnHandle_t handle, const void *alpha, const cudnnTensorDescriptor_t xd,
    const void *x, const cudnnFilterDescriptor_t wd, const void *w,
    const cudnnConvolutionDescriptor_t cd, cudnnConvolutionFwdAlgo_t algo,
    void *workspace, size_t workspaceBytes, const void *beta,
    const cudnnTensorDescriptor_t yd, void *y) {
  OMNI_HOST_LOCK;
  OMNI_CHECK_SET(handle && alpha && beta && xd && wd && cd && yd);
  if (!consistent(*xd, *wd, *cd, *yd))
    return CUDNN_STATUS_BAD_PARAM;
  // The algorithm must be one the heuristic offers for this convolution,
  // given at least its workspace.
  const cudnnConvolutionFwdAlgoPerf_t *offered = nullptr;
  auto list = algorithms(*wd, *cd, *yd);
  for (const cudnnConvolutionFwdAlgoPerf_t &p : list)
    if (p.algo == algo && p.status == CUDNN_STATUS_SUCCESS && !offered)
      offered = &p;
  if (!offered)
    return CUDNN_STATUS_NOT_SUPPORTED;
  if (workspaceBytes < offered->memory)
    return CUDNN_STATUS_BAD_PARAM;
  const size_t tableBytes = offered->memory;

  const cudnnTensorStruct xs = *xd, ys = *yd;
  const cudnnFilterStruct ws = *wd;
  const cudnnConvolutionStruct cs = *cd;
  const DType dtype = dtypeOf(xs.type);
  const size_t es = static_cast<size_t>(dtypeSize(dtype));
  double alphaValue, betaValue;
  if (dtype == DType::F64) {
    std::memcpy(&alphaValue, alpha, 8);
    std::memcpy(&betaValue, beta, 8);
  } else {
    float a32, b32;
    std::memcpy(&a32, alpha, 4);
    std::memcpy(&b32, beta, 4);
    alphaValue = a32, betaValue = b32;
  }
  const bool asTf32 = dtype == DType::F32 && cs.math != CUDNN_FMA_MATH;
  // By value: it runs again when the queued work does.
  auto inDevice = [=] {
    return isDeviceRange(reinterpret_cast<uintptr_t>(x), count(xs.dims) * es) &&
           isDeviceRange(reinterpret_cast<uintptr_t>(w), count(ws.dims) * es) &&
           isDeviceRange(reinterpret_cast<uintptr_t>(y), count(ys.dims) * es) &&
           (tableBytes == 0 ||
            isDeviceRange(reinterpret_cast<uintptr_t>(workspace), tableBytes));
  };
  if (!inDevice())
    return CUDNN_STATUS_EXECUTION_FAILED;
  CUresult r = submit(reinterpret_cast<CUstream>(handle->stream), [=]() {
    if (!inDevice())
      return CUDA_ERROR_ILLEGAL_ADDRESS;
    const int n = xs.dims[0], c = xs.dims[1], h = xs.dims[2], wi = xs.dims[3];
    const int k = ws.dims[0], r = ws.dims[2], s = ws.dims[3];
    const int oh = ys.dims[2], ow = ys.dims[3];
    // The index table, written as the algorithm would.
    if (tableBytes)
      std::memset(workspace, 0, tableBytes);
    auto *xb = static_cast<const unsigned char *>(x);
    auto *wb = static_cast<const unsigned char *>(w);
    auto *yb = static_cast<unsigned char *>(y);
    auto operand = [&](const unsigned char *p) {
      double v = loadElement(dtype, p);
      return asTf32 ? tf32(v) : v;
    };
    for (int b = 0; b < n; ++b)
      for (int o = 0; o < k; ++o)
        for (int i = 0; i < oh; ++i)
          for (int j = 0; j < ow; ++j) {
            double acc = 0;
            for (int ci = 0; ci < c; ++ci)
              for (int ki = 0; ki < r; ++ki)
                for (int kj = 0; kj < s; ++kj) {
                  const int yy = i * cs.strideH - cs.padH + ki * cs.dilationH;
                  const int xx = j * cs.strideW - cs.padW + kj * cs.dilationW;
                  if (yy < 0 || yy >= h || xx < 0 || xx >= wi)
                    continue;
                  const int fi = cs.mode == CUDNN_CONVOLUTION ? r - 1 - ki : ki;
                  const int fj = cs.mode == CUDNN_CONVOLUTION ? s - 1 - kj : kj;
                  acc +=
                      operand(xb +
                              ((size_t(b) * c + ci) * h + yy) * size_t(wi) *
                                  es +
                              size_t(xx) * es) *
                      operand(wb +
                              ((size_t(o) * c + ci) * r + fi) * size_t(s) * es +
                              size_t(fj) * es);
                }
            unsigned char *out =
                yb + ((size_t(b) * k + o) * oh + i) * size_t(ow) * es +
                size_t(j) * es;
            double value = alphaValue * acc;
            if (betaValue != 0)
              value += betaValue * loadElement(dtype, out);
            storeElement(dtype, out, value);
          }
    return CUDA_SUCCESS;
  });
  return r == CUDA_SUCCESS ? CUDNN_STATUS_SUCCESS
                           : CUDNN_STATUS_EXECUTION_FAILED;
}

} // extern "C"
