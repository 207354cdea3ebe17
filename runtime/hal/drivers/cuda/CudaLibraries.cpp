//===- CudaLibraries.cpp - Matmul, conv2d and attention on a GPU -*- C++
//-*-===//
//
// The library routines of CudaStream (hal/Library.h):
//  - matmul: one cuBLASLt matmul (strided batches; a shared rhs folds the
//    batch into m when lhs is not transposed, else one call per batch).
//    f32 computes with CUBLAS_COMPUTE_32F (no TF32), f64 with 64F, f16 and
//    bf16 inputs accumulate in f32 and round the result once.
//  - conv2d: cuDNN's cudnnConvolutionForward (NCHW, cross-correlation; f32
//    with CUDNN_FMA_MATH and FMA algorithms only, i.e. no TF32; f16/bf16
//    accumulate in f32; the algorithm from
//    cudnnGetConvolutionForwardAlgorithm_v7, workspace up to
//    kConvWorkspaceBytes). Without cuDNN, or when it offers no algorithm:
//    per image, im2col (the omni_im2col kernel; skipped for 1x1 stride-1
//    unpadded filters) into a stream-ordered temporary, then a cuBLASLt
//    matmul filter[o, c*kh*kw] x col[c*kh*kw, outH*outW].
//  - attention: per chunk of (batch, head) pairs (temporaries up to
//    kAttentionTempBytes), scores = scale q k^T by cuBLASLt into f32 (f64
//    for f64), the omni_softmax kernel (mask added, broadcast by strides)
//    writing the probabilities in the input type, and p v by cuBLASLt.
//    For f16/bf16 the probabilities are rounded to the input type before
//    the second matmul, as fused attention kernels do. With
//    OMNI_CUDA_ATTENTION=flash, f16/bf16 attention of head dimension 64 or
//    128 is instead one launch of the flash kernel (kernels/
//    FlashAttention.h): no scores in global memory.
//  - attention backward: per chunk of pairs, S = q k^T scale and P =
//    softmax(S + mask) as above, dv = P^T dO, dP = dO v^T (into S's memory),
//    the omni_attention_grad_scores kernel turning P into dS = P (dP -
//    rowsum(dO o)) in place (rounded to the input type, as P), then dq =
//    dS k scale and dk = dS^T q scale: seven launches. With
//    OMNI_CUDA_ATTENTION=flash, f16/bf16 of head dimension 64 or 128 is
//    instead the two kernels of kernels/FlashAttentionBackward.h (one per
//    query tile for dq and each row's logsumexp and rowsum(dO o), one per
//    key tile for dk and dv), no atomics.
// The row-major matrices are handed to column-major cuBLASLt as their
// transposes: C^T = op(B)^T op(A)^T, so "A" is rhs and "B" is lhs.
// While the stream captures a graph, every temporary is an allocation and
// a free node of the graph and the gemms use the capture's own workspace
// (gemmWorkspace). The cuBLASLt and cuDNN handles are made at their first
// use, or by beginCapture before a capture starts, so their set-up never
// runs inside one.
//
//===----------------------------------------------------------------------===//

#include "runtime/base/CheckedMath.h"
#include "runtime/base/Status.h"
#include "runtime/hal/drivers/cuda/CudaStream.h"
#include "runtime/hal/drivers/cuda/kernels/FlashAttentionBackward.h"

#include "absl/strings/str_cat.h"

#include <algorithm>
#include <cstdlib>

namespace omni::hal::cuda {
namespace {

constexpr size_t kWorkspaceBytes = size_t(32) << 20;
constexpr int64_t kAttentionTempBytes = int64_t(1) << 30;
constexpr size_t kConvWorkspaceBytes = size_t(256) << 20;

cudnnDataType_t cudnnTypeOf(DType dtype) {
  switch (dtype) {
  case DType::F64:
    return CUDNN_DATA_DOUBLE;
  case DType::F16:
    return CUDNN_DATA_HALF;
  case DType::BF16:
    return CUDNN_DATA_BFLOAT16;
  default:
    return CUDNN_DATA_FLOAT;
  }
}

/// Destroys cuDNN descriptors at scope exit.
struct DnnObjects {
  const CudnnApi &dnn;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  ~DnnObjects() {
    if (conv)
      dnn.cudnnDestroyConvolutionDescriptor(conv);
    if (w)
      dnn.cudnnDestroyFilterDescriptor(w);
    for (cudnnTensorDescriptor_t t : {x, y})
      if (t)
        dnn.cudnnDestroyTensorDescriptor(t);
  }
};

int64_t bytesOf(std::initializer_list<int64_t> dims, DType dtype) {
  std::optional<int64_t> n = checkedNumElements(std::vector<int64_t>(dims));
  std::optional<int64_t> b =
      n ? checkedMul(*n, dtypeSize(dtype)) : std::nullopt;
  return b ? *b : -1;
}

cudaDataType_t cudaTypeOf(DType dtype) {
  switch (dtype) {
  case DType::F64:
    return CUDA_R_64F;
  case DType::F16:
    return CUDA_R_16F;
  case DType::BF16:
    return CUDA_R_16BF;
  default:
    return CUDA_R_32F;
  }
}

/// The alignment cuBLASLt may assume of an operand whose batches start at
/// `pointer` + b * `strideBytes`: the largest power of two dividing both,
/// at most 256 (cuBLASLt's default assumption, which the executor's arena
/// offsets do not always meet).
uint32_t alignmentOf(CUdeviceptr pointer, int64_t strideBytes) {
  uint64_t bits = pointer | static_cast<uint64_t>(strideBytes) | 256u;
  return static_cast<uint32_t>(bits & (~bits + 1));
}

/// Destroys cuBLASLt descriptors at scope exit.
struct LtObjects {
  const CublasLtApi &lt;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  ~LtObjects() {
    if (preference)
      lt.cublasLtMatmulPreferenceDestroy(preference);
    for (cublasLtMatrixLayout_t l : {a, b, c})
      if (l)
        lt.cublasLtMatrixLayoutDestroy(l);
    if (desc)
      lt.cublasLtMatmulDescDestroy(desc);
  }
};

} // namespace

GemmPlan planGemm(int64_t m, int64_t n, int64_t k, bool transposeLhs,
                  bool transposeRhs) {
  GemmPlan plan;
  // rhs, row-major k x n (n x k when transposed), is the column-major
  // n x k (k x n) matrix with the same bytes.
  plan.transposeA = transposeRhs;
  plan.aRows = static_cast<uint64_t>(transposeRhs ? k : n);
  plan.aCols = static_cast<uint64_t>(transposeRhs ? n : k);
  plan.lda = static_cast<int64_t>(plan.aRows);
  // lhs, row-major m x k (k x m), is the column-major k x m (m x k).
  plan.transposeB = transposeLhs;
  plan.bRows = static_cast<uint64_t>(transposeLhs ? m : k);
  plan.bCols = static_cast<uint64_t>(transposeLhs ? k : m);
  plan.ldb = static_cast<int64_t>(plan.bRows);
  plan.ldc = n;
  return plan;
}

absl::Status CudaStream::ensureCublasLt() {
  if (ltHandle_)
    return absl::OkStatus();
  OMNI_ASSIGN_OR_RETURN(lt_, device_.api().cublasLt());
  cublasStatus_t s = lt_->cublasLtCreate(&ltHandle_);
  if (s != CUBLAS_STATUS_SUCCESS) {
    ltHandle_ = nullptr;
    return absl::InternalError(
        absl::StrCat(device_.label(),
                     ": cublasLtCreate: ", lt_->cublasLtGetStatusString(s)));
  }
  return absl::OkStatus();
}

absl::StatusOr<CUdeviceptr> CudaStream::gemmWorkspace() {
  if (capture_) {
    // The stream's workspace would tie the graph to this stream (freed
    // with it, shared with its later gemms while a launch on another
    // stream runs, and, allocated inside a capture, owned by the graph):
    // the graph allocates its own, endCapture frees it as the last node.
    if (!capture_->workspace) {
      OMNI_ASSIGN_OR_RETURN(capture_->workspace,
                            allocTemp(static_cast<int64_t>(kWorkspaceBytes)));
    }
    return capture_->workspace;
  }
  if (!workspace_) {
    OMNI_ASSIGN_OR_RETURN(workspace_,
                          allocTemp(static_cast<int64_t>(kWorkspaceBytes)));
  }
  return workspace_;
}

struct CudaStream::CachedGemm {
  explicit CachedGemm(const CublasLtApi &lt) : objects{lt} {}
  LtObjects objects;
  cublasLtMatmulAlgo_t algo = {};
};

/// Makes `cached`'s descriptors and asks cuBLASLt's heuristic for the
/// algorithm of one gemm (CudaStream::gemm's arguments; `what` names it in
/// errors, `ok` turns a cuBLASLt status into the gemm's error).
absl::Status CudaStream::makeGemmPlan(
    CachedGemm &cached, DType inType, DType outType, int64_t batch, int64_t m,
    int64_t n, int64_t k, const GemmOperand &lhs, const GemmOperand &rhs,
    int64_t resultStride, uint32_t alignA, uint32_t alignB, uint32_t alignC,
    const std::string &what,
    const std::function<absl::Status(cublasStatus_t)> &ok) {
  const CublasLtApi &lt = *lt_;
  const bool f64 = inType == DType::F64;
  const cublasComputeType_t compute =
      f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
  const cudaDataType_t scaleType = f64 ? CUDA_R_64F : CUDA_R_32F;
  LtObjects &o = cached.objects;
  OMNI_RETURN_IF_ERROR(
      ok(lt.cublasLtMatmulDescCreate(&o.desc, compute, scaleType)));
  const GemmPlan plan = planGemm(m, n, k, lhs.transpose, rhs.transpose);
  cublasOperation_t opA = plan.transposeA ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opB = plan.transposeB ? CUBLAS_OP_T : CUBLAS_OP_N;
  OMNI_RETURN_IF_ERROR(ok(lt.cublasLtMatmulDescSetAttribute(
      o.desc, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof(opA))));
  OMNI_RETURN_IF_ERROR(ok(lt.cublasLtMatmulDescSetAttribute(
      o.desc, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof(opB))));
  // Column-major views: A = rhs^T-view, B = lhs^T-view, C = result^T.
  const cudaDataType_t in = cudaTypeOf(inType), out = cudaTypeOf(outType);
  OMNI_RETURN_IF_ERROR(ok(lt.cublasLtMatrixLayoutCreate(&o.a, in, plan.aRows,
                                                        plan.aCols, plan.lda)));
  OMNI_RETURN_IF_ERROR(ok(lt.cublasLtMatrixLayoutCreate(&o.b, in, plan.bRows,
                                                        plan.bCols, plan.ldb)));
  OMNI_RETURN_IF_ERROR(
      ok(lt.cublasLtMatrixLayoutCreate(&o.c, out, static_cast<uint64_t>(n),
                                       static_cast<uint64_t>(m), plan.ldc)));
  if (batch > 1) {
    int32_t count = static_cast<int32_t>(batch);
    const std::pair<cublasLtMatrixLayout_t, int64_t> layouts[] = {
        {o.a, rhs.batchStride}, {o.b, lhs.batchStride}, {o.c, resultStride}};
    for (const auto &[layout, stride] : layouts) {
      OMNI_RETURN_IF_ERROR(ok(lt.cublasLtMatrixLayoutSetAttribute(
          layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count))));
      OMNI_RETURN_IF_ERROR(ok(lt.cublasLtMatrixLayoutSetAttribute(
          layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
          sizeof(stride))));
    }
  }
  OMNI_RETURN_IF_ERROR(ok(lt.cublasLtMatmulPreferenceCreate(&o.preference)));
  uint64_t workspace = kWorkspaceBytes;
  OMNI_RETURN_IF_ERROR(ok(lt.cublasLtMatmulPreferenceSetAttribute(
      o.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
      sizeof(workspace))));
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> alignments[] =
      {{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignA},
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignB},
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, alignC},
       {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, alignC}};
  for (const auto &[attribute, bytes] : alignments)
    OMNI_RETURN_IF_ERROR(ok(lt.cublasLtMatmulPreferenceSetAttribute(
        o.preference, attribute, &bytes, sizeof(bytes))));
  cublasLtMatmulHeuristicResult_t heuristic = {};
  int found = 0;
  OMNI_RETURN_IF_ERROR(ok(
      lt.cublasLtMatmulAlgoGetHeuristic(ltHandle_, o.desc, o.a, o.b, o.c, o.c,
                                        o.preference, 1, &heuristic, &found)));
  if (found == 0)
    return absl::UnimplementedError(
        absl::StrCat(what, ": cuBLASLt has no algorithm for it"));
  cached.algo = heuristic.algo;
  return absl::OkStatus();
}

absl::Status CudaStream::gemm(DType inType, DType outType, int64_t batch,
                              int64_t m, int64_t n, int64_t k, GemmOperand lhs,
                              GemmOperand rhs, CUdeviceptr result,
                              int64_t resultStride, double alpha) {
  if (batch == 0 || m == 0 || n == 0)
    return absl::OkStatus();
  const int64_t outSize = dtypeSize(outType), inSize = dtypeSize(inType);
  if (k == 0) {
    // An empty sum: zeros (every caller's results are contiguous).
    return check(
        device_.api().cuMemsetD8Async(
            result, 0, static_cast<size_t>(batch * m * n * outSize), stream_),
        "cuMemsetD8Async");
  }
  if (batch > 1 &&
      (lhs.batchStride == 0 || rhs.batchStride == 0 || batch > 65535)) {
    if (rhs.batchStride == 0 && !lhs.transpose && lhs.batchStride == m * k &&
        resultStride == m * n)
      // One shared rhs: the batches are rows of one taller lhs.
      return gemm(inType, outType, 1, batch * m, n, k, lhs, rhs, result,
                  resultStride, alpha);
    for (int64_t b = 0; b < batch; ++b) {
      GemmOperand l = lhs, r = rhs;
      l.pointer += static_cast<CUdeviceptr>(b * lhs.batchStride * inSize);
      r.pointer += static_cast<CUdeviceptr>(b * rhs.batchStride * inSize);
      OMNI_RETURN_IF_ERROR(
          gemm(inType, outType, 1, m, n, k, l, r,
               result + static_cast<CUdeviceptr>(b * resultStride * outSize),
               resultStride, alpha));
    }
    return absl::OkStatus();
  }
  OMNI_RETURN_IF_ERROR(ensureCublasLt());
  OMNI_ASSIGN_OR_RETURN(CUdeviceptr workspacePointer, gemmWorkspace());
  const CublasLtApi &lt = *lt_;
  const std::string what = absl::StrCat(
      device_.label(), ": cuBLASLt ", dtypeName(inType), " matmul (batch ",
      batch, ", m ", m, ", n ", n, ", k ", k, ")");
  auto ok = [&](cublasStatus_t s) -> absl::Status {
    if (s == CUBLAS_STATUS_SUCCESS)
      return absl::OkStatus();
    return absl::InternalError(
        absl::StrCat(what, ": ", lt.cublasLtGetStatusString(s)));
  };

  const bool f64 = inType == DType::F64;
  const int64_t batched = batch > 1 ? 1 : 0;
  const uint32_t alignA =
      alignmentOf(rhs.pointer, batched * rhs.batchStride * inSize);
  const uint32_t alignB =
      alignmentOf(lhs.pointer, batched * lhs.batchStride * inSize);
  const uint32_t alignC = alignmentOf(result, batched * resultStride * outSize);
  const std::array<int64_t, 14> key = {static_cast<int64_t>(inType),
                                       static_cast<int64_t>(outType),
                                       batch,
                                       m,
                                       n,
                                       k,
                                       lhs.transpose,
                                       rhs.transpose,
                                       lhs.batchStride,
                                       rhs.batchStride,
                                       resultStride,
                                       alignA,
                                       alignB,
                                       alignC};
  std::shared_ptr<CachedGemm> &plan = gemmPlans_[key];
  if (!plan) {
    auto made = std::make_shared<CachedGemm>(lt);
    OMNI_RETURN_IF_ERROR(makeGemmPlan(*made, inType, outType, batch, m, n, k,
                                      lhs, rhs, resultStride, alignA, alignB,
                                      alignC, what, ok));
    plan = std::move(made);
  }
  const LtObjects &o = plan->objects;
  float alpha32 = static_cast<float>(alpha), beta32 = 0;
  double beta64 = 0;
  const void *alphaPtr = f64 ? static_cast<const void *>(&alpha)
                             : static_cast<const void *>(&alpha32);
  const void *betaPtr = f64 ? static_cast<const void *>(&beta64)
                            : static_cast<const void *>(&beta32);
  return ok(lt.cublasLtMatmul(
      ltHandle_, o.desc, alphaPtr, reinterpret_cast<const void *>(rhs.pointer),
      o.a, reinterpret_cast<const void *>(lhs.pointer), o.b, betaPtr,
      reinterpret_cast<const void *>(result), o.c,
      reinterpret_cast<void *>(result), o.c, &plan->algo,
      reinterpret_cast<void *>(workspacePointer), kWorkspaceBytes, stream_));
}

absl::Status CudaStream::enqueueMatmul(const MatmulParams &p, BufferRef lhs,
                                       BufferRef rhs, BufferRef result) {
  if (!device_.supportsLibrary(Library::Matmul, p.dtype))
    return absl::UnimplementedError(
        absl::StrCat("the cuda Matmul supports f32, f64, f16 and bf16, not ",
                     dtypeName(p.dtype)));
  int64_t lhsRows = p.transposeLhs ? p.k : p.m,
          lhsCols = p.transposeLhs ? p.m : p.k;
  int64_t rhsRows = p.transposeRhs ? p.n : p.k,
          rhsCols = p.transposeRhs ? p.k : p.n;
  OMNI_ASSIGN_OR_RETURN(
      CUdeviceptr a,
      resolveSized(lhs, bytesOf({p.batch, lhsRows, lhsCols}, p.dtype), "lhs"));
  OMNI_ASSIGN_OR_RETURN(
      CUdeviceptr b,
      resolveSized(
          rhs, bytesOf({p.rhsShared ? 1 : p.batch, rhsRows, rhsCols}, p.dtype),
          "rhs"));
  OMNI_ASSIGN_OR_RETURN(
      CUdeviceptr c,
      resolveSized(result, bytesOf({p.batch, p.m, p.n}, p.dtype), "result"));
  OMNI_RETURN_IF_ERROR(begin());
  return gemm(p.dtype, p.dtype, p.batch, p.m, p.n, p.k,
              GemmOperand{a, p.transposeLhs, p.m * p.k},
              GemmOperand{b, p.transposeRhs, p.rhsShared ? 0 : p.k * p.n}, c,
              p.m * p.n, 1.0);
}

absl::Status CudaStream::ensureCudnn() {
  if (dnnMissing_)
    return absl::UnimplementedError("no cuDNN");
  if (!dnnHandle_) {
    absl::StatusOr<const CudnnApi *> dnn = device_.api().cudnn();
    if (!dnn.ok()) {
      dnnMissing_ = true;
      return absl::UnimplementedError(dnn.status().message());
    }
    dnn_ = *dnn;
    if (dnn_->cudnnCreate(&dnnHandle_) != CUDNN_STATUS_SUCCESS ||
        dnn_->cudnnSetStream(dnnHandle_, stream_) != CUDNN_STATUS_SUCCESS) {
      if (dnnHandle_)
        dnn_->cudnnDestroy(dnnHandle_);
      dnnHandle_ = nullptr;
      dnnMissing_ = true;
      return absl::UnimplementedError("cudnnCreate failed");
    }
  }
  return absl::OkStatus();
}

absl::Status CudaStream::cudnnConv2d(const Conv2dParams &p, CUdeviceptr x,
                                     CUdeviceptr w, CUdeviceptr y) {
  OMNI_RETURN_IF_ERROR(ensureCudnn());
  // cuDNN's legacy API takes int dimensions.
  for (int64_t d : {p.n, p.c, p.h, p.w, p.o, p.kh, p.kw, p.strideH, p.strideW,
                    p.padH, p.padW, p.dilationH, p.dilationW, p.outH, p.outW})
    if (d > INT32_MAX)
      return absl::UnimplementedError("dimension too large for cuDNN");
  const CudnnApi &dnn = *dnn_;
  DnnObjects o{dnn};
  const cudnnDataType_t type = cudnnTypeOf(p.dtype);
  const cudnnDataType_t compute =
      p.dtype == DType::F64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
  auto setup = [](cudnnStatus_t s) { return s == CUDNN_STATUS_SUCCESS; };
  if (!setup(dnn.cudnnCreateTensorDescriptor(&o.x)) ||
      !setup(dnn.cudnnCreateTensorDescriptor(&o.y)) ||
      !setup(dnn.cudnnCreateFilterDescriptor(&o.w)) ||
      !setup(dnn.cudnnCreateConvolutionDescriptor(&o.conv)) ||
      !setup(dnn.cudnnSetTensor4dDescriptor(o.x, CUDNN_TENSOR_NCHW, type,
                                            int(p.n), int(p.c), int(p.h),
                                            int(p.w))) ||
      !setup(dnn.cudnnSetTensor4dDescriptor(o.y, CUDNN_TENSOR_NCHW, type,
                                            int(p.n), int(p.o), int(p.outH),
                                            int(p.outW))) ||
      !setup(dnn.cudnnSetFilter4dDescriptor(o.w, type, CUDNN_TENSOR_NCHW,
                                            int(p.o), int(p.c), int(p.kh),
                                            int(p.kw))) ||
      !setup(dnn.cudnnSetConvolution2dDescriptor(
          o.conv, int(p.padH), int(p.padW), int(p.strideH), int(p.strideW),
          int(p.dilationH), int(p.dilationW), CUDNN_CROSS_CORRELATION,
          compute)))
    return absl::UnimplementedError("cuDNN refuses the descriptors");
  // f32 without TF32 (results match the cpu within 1e-5); tensor cores
  // for the 16-bit types.
  const bool sixteen = p.dtype == DType::F16 || p.dtype == DType::BF16;
  const cudnnMathType_t math = p.dtype == DType::F32 ? CUDNN_FMA_MATH
                               : sixteen             ? CUDNN_TENSOR_OP_MATH
                                                     : CUDNN_DEFAULT_MATH;
  if (!setup(dnn.cudnnSetConvolutionMathType(o.conv, math)))
    return absl::UnimplementedError("cuDNN refuses the math type");
  int on = 0, oc = 0, oh = 0, ow = 0;
  if (!setup(dnn.cudnnGetConvolution2dForwardOutputDim(o.conv, o.x, o.w, &on,
                                                       &oc, &oh, &ow)) ||
      on != p.n || oc != p.o || oh != p.outH || ow != p.outW)
    return absl::UnimplementedError("cuDNN computes another output shape");
  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT] = {};
  int returned = 0;
  if (!setup(dnn.cudnnGetConvolutionForwardAlgorithm_v7(
          dnnHandle_, o.x, o.w, o.conv, o.y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT,
          &returned, perf)))
    return absl::UnimplementedError("cuDNN has no algorithm list");
  const cudnnConvolutionFwdAlgoPerf_t *chosen = nullptr;
  for (int i = 0; i < returned && !chosen; ++i) {
    const cudnnConvolutionFwdAlgoPerf_t &candidate = perf[i];
    if (candidate.status != CUDNN_STATUS_SUCCESS ||
        candidate.memory > kConvWorkspaceBytes)
      continue;
    // Never TF32 for f32: CUDNN_DEFAULT_MATH permits it on sm_80 and
    // later, so only an FMA algorithm will do.
    if (p.dtype == DType::F32 && candidate.mathType != CUDNN_FMA_MATH)
      continue;
    chosen = &candidate;
  }
  if (!chosen)
    return absl::UnimplementedError("cuDNN has no algorithm for the case");
  if (!setup(dnn.cudnnSetConvolutionMathType(o.conv, chosen->mathType)))
    return absl::UnimplementedError("cuDNN refuses the algorithm's math");

  CUdeviceptr workspace = 0;
  if (chosen->memory > 0) {
    OMNI_ASSIGN_OR_RETURN(workspace,
                          allocTemp(static_cast<int64_t>(chosen->memory)));
  }
  float alpha32 = 1, beta32 = 0;
  double alpha64 = 1, beta64 = 0;
  const bool f64 = p.dtype == DType::F64;
  cudnnStatus_t s = dnn.cudnnConvolutionForward(
      dnnHandle_,
      f64 ? static_cast<const void *>(&alpha64)
          : static_cast<const void *>(&alpha32),
      o.x, reinterpret_cast<const void *>(x), o.w,
      reinterpret_cast<const void *>(w), o.conv, chosen->algo,
      reinterpret_cast<void *>(workspace), chosen->memory,
      f64 ? static_cast<const void *>(&beta64)
          : static_cast<const void *>(&beta32),
      o.y, reinterpret_cast<void *>(y));
  if (workspace)
    freeTemp(workspace);
  if (s != CUDNN_STATUS_SUCCESS)
    return absl::InternalError(absl::StrCat(
        device_.label(), ": cuDNN ", dtypeName(p.dtype), " conv2d (algorithm ",
        static_cast<int>(chosen->algo), "): ", dnn.cudnnGetErrorString(s)));
  return absl::OkStatus();
}

absl::Status CudaStream::enqueueConv2d(const Conv2dParams &p, BufferRef input,
                                       BufferRef filter, BufferRef result) {
  if (!device_.supportsLibrary(Library::Conv2d, p.dtype))
    return absl::UnimplementedError(
        absl::StrCat("the cuda Conv2d supports f32, f64, f16 and bf16, not ",
                     dtypeName(p.dtype)));
  OMNI_ASSIGN_OR_RETURN(
      CUdeviceptr x,
      resolveSized(input, bytesOf({p.n, p.c, p.h, p.w}, p.dtype), "input"));
  OMNI_ASSIGN_OR_RETURN(
      CUdeviceptr w,
      resolveSized(filter, bytesOf({p.o, p.c, p.kh, p.kw}, p.dtype), "filter"));
  OMNI_ASSIGN_OR_RETURN(
      CUdeviceptr y,
      resolveSized(result, bytesOf({p.n, p.o, p.outH, p.outW}, p.dtype),
                   "result"));
  OMNI_RETURN_IF_ERROR(begin());
  const int64_t es = dtypeSize(p.dtype);
  const int64_t spatial = p.outH * p.outW, rows = p.c * p.kh * p.kw;
  if (p.n == 0 || p.o == 0 || spatial == 0)
    return absl::OkStatus();
  if (rows > 0 && !std::getenv("OMNI_CUDA_CONV_IM2COL")) {
    absl::Status viaCudnn = cudnnConv2d(p, x, w, y);
    if (viaCudnn.code() != absl::StatusCode::kUnimplemented)
      return viaCudnn;
    // No cuDNN, or no algorithm for this case: im2col + cuBLASLt.
  }
  const bool direct = p.kh == 1 && p.kw == 1 && p.strideH == 1 &&
                      p.strideW == 1 && p.padH == 0 && p.padW == 0 &&
                      p.outH == p.h && p.outW == p.w;
  CUdeviceptr col = 0;
  if (!direct && rows > 0) {
    std::optional<int64_t> colBytes = checkedMul(rows * es, spatial);
    if (!colBytes)
      return absl::InvalidArgumentError("conv2d im2col size overflows");
    OMNI_ASSIGN_OR_RETURN(col, allocTemp(*colBytes));
  }
  HelperKernel im2col = es == 2   ? HelperKernel::Im2colB2
                        : es == 4 ? HelperKernel::Im2colB4
                                  : HelperKernel::Im2colB8;
  absl::Status status;
  for (int64_t i = 0; i < p.n && status.ok(); ++i) {
    CUdeviceptr image = x + static_cast<CUdeviceptr>(i * p.c * p.h * p.w * es);
    CUdeviceptr operand = direct ? image : col;
    if (!direct && rows > 0) {
      int64_t one = 1, c = p.c, h = p.h, wd = p.w, kh = p.kh, kw = p.kw,
              sh = p.strideH, sw = p.strideW, ph = p.padH, pw = p.padW,
              dh = p.dilationH, dw = p.dilationW, oh = p.outH, ow = p.outW;
      status = launchHelper(im2col, rows * spatial,
                            {&image, &col, &one, &c, &h, &wd, &kh, &kw, &sh,
                             &sw, &ph, &pw, &dh, &dw, &oh, &ow});
      if (!status.ok())
        break;
    }
    status = gemm(p.dtype, p.dtype, 1, p.o, spatial, rows,
                  GemmOperand{w, false, 0}, GemmOperand{operand, false, 0},
                  y + static_cast<CUdeviceptr>(i * p.o * spatial * es),
                  p.o * spatial, 1.0);
  }
  if (col)
    freeTemp(col);
  return status;
}

absl::Status CudaStream::enqueueAttention(const AttentionParams &p, BufferRef q,
                                          BufferRef k, BufferRef v,
                                          BufferRef mask, BufferRef result) {
  if (!device_.supportsLibrary(Library::Attention, p.dtype))
    return absl::UnimplementedError(
        absl::StrCat("the cuda Attention supports f32, f64, f16 and bf16, not ",
                     dtypeName(p.dtype)));
  OMNI_ASSIGN_OR_RETURN(
      CUdeviceptr qp,
      resolveSized(q, bytesOf({p.batch, p.heads, p.seqQ, p.headDim}, p.dtype),
                   "query"));
  OMNI_ASSIGN_OR_RETURN(
      CUdeviceptr kp,
      resolveSized(k, bytesOf({p.batch, p.heads, p.seqK, p.headDim}, p.dtype),
                   "key"));
  OMNI_ASSIGN_OR_RETURN(
      CUdeviceptr vp,
      resolveSized(v, bytesOf({p.batch, p.heads, p.seqK, p.valueDim}, p.dtype),
                   "value"));
  CUdeviceptr mp = 0;
  if (p.hasMask) {
    OMNI_ASSIGN_OR_RETURN(mp,
                          resolveSized(mask, attentionMaskBytes(p), "mask"));
  }
  OMNI_ASSIGN_OR_RETURN(
      CUdeviceptr out,
      resolveSized(result,
                   bytesOf({p.batch, p.heads, p.seqQ, p.valueDim}, p.dtype),
                   "result"));
  OMNI_RETURN_IF_ERROR(begin());
  const int64_t pairs = p.batch * p.heads;
  if (pairs == 0 || p.seqQ == 0 || p.valueDim == 0)
    return absl::OkStatus();
  const AttentionMaskStrides strides = attentionMaskStrides(p);
  int64_t maskBatchStride = strides.batch, maskHeadStride = strides.head;
  int64_t hasMask = p.hasMask ? 1 : 0;
  // The flash kernel (kernels/FlashAttention.h), where chosen and it
  // applies: f16 / bf16, head and value dimensions both 64 or 128, keys.
  CUfunction flashKernel =
      device_.attentionKernel() == AttentionKernel::Flash &&
              p.headDim == p.valueDim && p.seqK > 0
          ? device_.flashKernel(p.dtype, p.headDim)
          : nullptr;
  if (flashKernel) {
    int64_t blocks = flash::blocksFor(pairs, p.seqQ), seqQ = p.seqQ,
            seqK = p.seqK, heads = p.heads;
    float scale = static_cast<float>(p.scale);
    CUdeviceptr maskArg = mp;
    void *params[] = {&qp,
                      &kp,
                      &vp,
                      &maskArg,
                      &out,
                      &blocks,
                      &seqQ,
                      &seqK,
                      &heads,
                      &maskBatchStride,
                      &maskHeadStride,
                      &hasMask,
                      &scale};
    return launchFlash(flashKernel, blocks, flash::sharedBytes(p.headDim, 2),
                       params, "launching the flash attention kernel");
  }
  const int64_t es = dtypeSize(p.dtype);
  const int64_t square = p.seqQ * p.seqK;
  OMNI_ASSIGN_OR_RETURN(ScoreTemps t, allocScoreTemps(p));
  absl::Status status;
  for (int64_t b0 = 0; b0 < pairs && status.ok(); b0 += t.chunk) {
    int64_t nb = std::min(t.chunk, pairs - b0);
    CUdeviceptr outChunk =
        out + static_cast<CUdeviceptr>(b0 * p.seqQ * p.valueDim * es);
    if (square == 0) {
      // No keys: every output row is an empty sum.
      status = gemm(p.dtype, p.dtype, nb, p.seqQ, p.valueDim, 0, {}, {},
                    outChunk, p.seqQ * p.valueDim, 1.0);
      continue;
    }
    status = gemm(
        p.dtype, t.scoreType, nb, p.seqQ, p.seqK, p.headDim,
        GemmOperand{qp + static_cast<CUdeviceptr>(b0 * p.seqQ * p.headDim * es),
                    false, p.seqQ * p.headDim},
        GemmOperand{kp + static_cast<CUdeviceptr>(b0 * p.seqK * p.headDim * es),
                    true, p.seqK * p.headDim},
        t.scores, square, p.scale);
    if (status.ok())
      status = rowSoftmax(p, t, nb * p.seqQ, b0, mp);
    if (status.ok())
      status = gemm(p.dtype, p.dtype, nb, p.seqQ, p.valueDim, p.seqK,
                    GemmOperand{t.probs, false, square},
                    GemmOperand{vp + static_cast<CUdeviceptr>(b0 * p.seqK *
                                                              p.valueDim * es),
                                false, p.seqK * p.valueDim},
                    outChunk, p.seqQ * p.valueDim, 1.0);
  }
  freeScoreTemps(t);
  return status;
}

absl::StatusOr<CudaStream::ScoreTemps>
CudaStream::allocScoreTemps(const AttentionParams &p) {
  ScoreTemps t;
  t.scoreType = p.dtype == DType::F64 ? DType::F64 : DType::F32;
  const int64_t square = p.seqQ * p.seqK;
  const int64_t perPair = std::max<int64_t>(
      square * (dtypeSize(t.scoreType) + dtypeSize(p.dtype)), 1);
  t.chunk = std::max<int64_t>(
      1, std::min(p.batch * p.heads, kAttentionTempBytes / perPair));
  if (square == 0)
    return t;
  OMNI_ASSIGN_OR_RETURN(t.scores,
                        allocTemp(t.chunk * square * dtypeSize(t.scoreType)));
  absl::StatusOr<CUdeviceptr> probs =
      allocTemp(t.chunk * square * dtypeSize(p.dtype));
  if (!probs.ok()) {
    freeTemp(t.scores);
    return probs.status();
  }
  t.probs = *probs;
  return t;
}

void CudaStream::freeScoreTemps(const ScoreTemps &t) {
  if (t.scores)
    freeTemp(t.scores);
  if (t.probs)
    freeTemp(t.probs);
}

absl::Status CudaStream::launchFlash(CUfunction kernel, int64_t blocks,
                                     size_t shared, void **params,
                                     const char *what) {
  const unsigned grid =
      static_cast<unsigned>(std::min<int64_t>(blocks, int64_t(1) << 30));
  return check(device_.api().cuLaunchKernel(kernel, grid, 1, 1, flash::kThreads,
                                            1, 1, static_cast<unsigned>(shared),
                                            stream_, params, nullptr),
               what);
}

absl::Status CudaStream::rowSoftmax(const AttentionParams &p,
                                    const ScoreTemps &t, int64_t rows,
                                    int64_t bh0, CUdeviceptr mask) {
  const HelperKernel softmax =
      p.dtype == DType::F32   ? HelperKernel::SoftmaxF32
      : p.dtype == DType::F64 ? HelperKernel::SoftmaxF64
      : p.dtype == DType::F16 ? HelperKernel::SoftmaxF16
                              : HelperKernel::SoftmaxBF16;
  const AttentionMaskStrides strides = attentionMaskStrides(p);
  int64_t maskBatchStride = strides.batch, maskHeadStride = strides.head;
  int64_t hasMask = mask ? 1 : 0, seqQ = p.seqQ, seqK = p.seqK, heads = p.heads;
  CUdeviceptr scores = t.scores, probs = t.probs;
  constexpr unsigned kBlock = 256;
  return launchHelper(softmax, 0,
                      {&scores, &mask, &probs, &rows, &seqQ, &seqK, &heads,
                       &bh0, &maskBatchStride, &maskHeadStride, &hasMask},
                      rows, kBlock, kBlock * sizeof(double));
}

absl::Status CudaStream::enqueueAttentionBackward(const AttentionParams &p,
                                                  BufferRef q, BufferRef k,
                                                  BufferRef v, BufferRef mask,
                                                  BufferRef o, BufferRef dO,
                                                  BufferRef dq, BufferRef dk,
                                                  BufferRef dv) {
  if (!device_.supportsLibrary(Library::AttentionBackward, p.dtype))
    return absl::UnimplementedError(absl::StrCat(
        "the cuda AttentionBackward supports f32, f64, f16 and bf16, not ",
        dtypeName(p.dtype)));
  const int64_t qs = bytesOf({p.batch, p.heads, p.seqQ, p.headDim}, p.dtype),
                ks = bytesOf({p.batch, p.heads, p.seqK, p.headDim}, p.dtype),
                vs = bytesOf({p.batch, p.heads, p.seqK, p.valueDim}, p.dtype),
                os = bytesOf({p.batch, p.heads, p.seqQ, p.valueDim}, p.dtype);
  OMNI_ASSIGN_OR_RETURN(CUdeviceptr qp, resolveSized(q, qs, "query"));
  OMNI_ASSIGN_OR_RETURN(CUdeviceptr kp, resolveSized(k, ks, "key"));
  OMNI_ASSIGN_OR_RETURN(CUdeviceptr vp, resolveSized(v, vs, "value"));
  OMNI_ASSIGN_OR_RETURN(CUdeviceptr op, resolveSized(o, os, "output"));
  OMNI_ASSIGN_OR_RETURN(CUdeviceptr dop, resolveSized(dO, os, "d_output"));
  OMNI_ASSIGN_OR_RETURN(CUdeviceptr dqp, resolveSized(dq, qs, "d_query"));
  OMNI_ASSIGN_OR_RETURN(CUdeviceptr dkp, resolveSized(dk, ks, "d_key"));
  OMNI_ASSIGN_OR_RETURN(CUdeviceptr dvp, resolveSized(dv, vs, "d_value"));
  CUdeviceptr mp = 0;
  if (p.hasMask) {
    OMNI_ASSIGN_OR_RETURN(mp,
                          resolveSized(mask, attentionMaskBytes(p), "mask"));
  }
  OMNI_RETURN_IF_ERROR(begin());
  const CudaApi &api = device_.api();
  const int64_t pairs = p.batch * p.heads;
  if (p.seqQ == 0 || p.seqK == 0) {
    // No keys: dq is an empty sum; no queries: dk and dv are.
    for (auto [pointer, bytes] :
         {std::pair{dqp, qs}, std::pair{dkp, ks}, std::pair{dvp, vs}})
      if (bytes > 0)
        OMNI_RETURN_IF_ERROR(
            check(api.cuMemsetD8Async(pointer, 0, static_cast<size_t>(bytes),
                                      stream_),
                  "cuMemsetD8Async"));
    return absl::OkStatus();
  }
  const int64_t es = dtypeSize(p.dtype);
  // The flash kernels (kernels/FlashAttentionBackward.h), where chosen and
  // they apply: f16 / bf16, head and value dimensions both 64 or 128.
  auto [rowsKernel, keysKernel] =
      device_.attentionKernel() == AttentionKernel::Flash &&
              p.headDim == p.valueDim
          ? device_.flashBackwardKernels(p.dtype, p.headDim)
          : std::pair<CUfunction, CUfunction>{nullptr, nullptr};
  if (rowsKernel) {
    // Each row's L = logsumexp(S scale) and Delta = rowsum(dO o), f32.
    OMNI_ASSIGN_OR_RETURN(CUdeviceptr lse, allocTemp(2 * pairs * p.seqQ *
                                                     int64_t(sizeof(float))));
    CUdeviceptr delta =
        lse + static_cast<CUdeviceptr>(pairs * p.seqQ * sizeof(float));
    int64_t seqQ = p.seqQ, seqK = p.seqK, heads = p.heads;
    const AttentionMaskStrides strides = attentionMaskStrides(p);
    int64_t maskBatchStride = strides.batch, maskHeadStride = strides.head;
    float scale = static_cast<float>(p.scale);
    int64_t rowBlocks = flash::blocksFor(pairs, p.seqQ);
    void *rowsParams[] = {&qp,
                          &kp,
                          &vp,
                          &op,
                          &dop,
                          &mp,
                          &heads,
                          &maskBatchStride,
                          &maskHeadStride,
                          &dqp,
                          &lse,
                          &delta,
                          &rowBlocks,
                          &seqQ,
                          &seqK,
                          &scale};
    absl::Status status = launchFlash(
        rowsKernel, rowBlocks, flash::rowsSharedBytes(p.headDim, 2), rowsParams,
        "launching the flash attention backward (rows)");
    if (status.ok()) {
      int64_t keyBlocks = flash::keyBlocksFor(pairs, p.seqK);
      void *keysParams[] = {&qp,
                            &kp,
                            &vp,
                            &dop,
                            &mp,
                            &heads,
                            &maskBatchStride,
                            &maskHeadStride,
                            &lse,
                            &delta,
                            &dkp,
                            &dvp,
                            &keyBlocks,
                            &seqQ,
                            &seqK,
                            &scale};
      status = launchFlash(keysKernel, keyBlocks,
                           flash::keysSharedBytes(p.headDim, 2), keysParams,
                           "launching the flash attention backward (keys)");
    }
    freeTemp(lse);
    return status;
  }

  // Unfused, per chunk of pairs: S = q k^T scale, P = softmax(S) (rounded
  // to the input type), dv = P^T dO, dP = dO v^T (over S), dS = P (dP -
  // rowsum(dO o)) (over P), dq = dS k scale, dk = dS^T q scale.
  const HelperKernel gradScores =
      p.dtype == DType::F32   ? HelperKernel::GradScoresF32
      : p.dtype == DType::F64 ? HelperKernel::GradScoresF64
      : p.dtype == DType::F16 ? HelperKernel::GradScoresF16
                              : HelperKernel::GradScoresBF16;
  const int64_t square = p.seqQ * p.seqK;
  OMNI_ASSIGN_OR_RETURN(ScoreTemps t, allocScoreTemps(p));
  auto at = [&](CUdeviceptr base, int64_t b0, int64_t rows, int64_t cols) {
    return base + static_cast<CUdeviceptr>(b0 * rows * cols * es);
  };
  absl::Status status;
  for (int64_t b0 = 0; b0 < pairs && status.ok(); b0 += t.chunk) {
    const int64_t nb = std::min(t.chunk, pairs - b0);
    const int64_t qStride = p.seqQ * p.headDim, kStride = p.seqK * p.headDim,
                  vStride = p.seqK * p.valueDim, oStride = p.seqQ * p.valueDim;
    const GemmOperand qChunk{at(qp, b0, p.seqQ, p.headDim), false, qStride};
    const GemmOperand kChunk{at(kp, b0, p.seqK, p.headDim), false, kStride};
    const GemmOperand dOChunk{at(dop, b0, p.seqQ, p.valueDim), false, oStride};
    status = gemm(p.dtype, t.scoreType, nb, p.seqQ, p.seqK, p.headDim, qChunk,
                  GemmOperand{kChunk.pointer, true, kStride}, t.scores, square,
                  p.scale);
    if (status.ok())
      status = rowSoftmax(p, t, nb * p.seqQ, b0, mp);
    if (status.ok())
      status = gemm(p.dtype, p.dtype, nb, p.seqK, p.valueDim, p.seqQ,
                    GemmOperand{t.probs, true, square}, dOChunk,
                    at(dvp, b0, p.seqK, p.valueDim), vStride, 1.0);
    if (status.ok())
      status =
          gemm(p.dtype, t.scoreType, nb, p.seqQ, p.seqK, p.valueDim, dOChunk,
               GemmOperand{at(vp, b0, p.seqK, p.valueDim), true, vStride},
               t.scores, square, 1.0);
    if (status.ok()) {
      CUdeviceptr scores = t.scores, probs = t.probs, dOp = dOChunk.pointer,
                  oChunk = at(op, b0, p.seqQ, p.valueDim);
      int64_t rows = nb * p.seqQ, seqK = p.seqK, valueDim = p.valueDim;
      constexpr unsigned kBlock = 256;
      status = launchHelper(
          gradScores, 0,
          {&scores, &probs, &dOp, &oChunk, &rows, &seqK, &valueDim}, rows,
          kBlock, kBlock * sizeof(double));
    }
    if (status.ok())
      status = gemm(p.dtype, p.dtype, nb, p.seqQ, p.headDim, p.seqK,
                    GemmOperand{t.probs, false, square}, kChunk,
                    at(dqp, b0, p.seqQ, p.headDim), qStride, p.scale);
    if (status.ok())
      status = gemm(p.dtype, p.dtype, nb, p.seqK, p.headDim, p.seqQ,
                    GemmOperand{t.probs, true, square}, qChunk,
                    at(dkp, b0, p.seqK, p.headDim), kStride, p.scale);
  }
  freeScoreTemps(t);
  return status;
}

} // namespace omni::hal::cuda
