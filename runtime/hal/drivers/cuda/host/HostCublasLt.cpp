//===- HostCublasLt.cpp - cuBLASLt's matmul modelled on the CPU -----------===//
//
// The cuBLASLt entry points the cuda driver uses (CudaApi.h's
// OMNI_CUBLASLT_ENTRIES), for HostModel.h's model. It accepts what the
// driver asks for and refuses the rest, as cuBLASLt would:
// - descriptor attributes: the transposes; layouts: batch count and
//   strided batch offset; preferences: workspace size and the four minimum
//   alignments. Anything else (an epilogue, say) is INVALID_VALUE, so a
//   driver change that needs more of cuBLASLt needs the model to learn it;
// - type combinations: f32, f64, and f16/bf16 inputs with an f16/bf16 or
//   f32 result, computing in f32 (COMPUTE_32F, f32 scale); f64 with
//   COMPUTE_64F;
// - a pointer less aligned than the preference promised the heuristic
//   (the algorithm was chosen for that alignment) is INVALID_VALUE, an
//   operand outside device memory EXECUTION_FAILED.
// D = alpha op(A) op(B) + beta C in column-major order, accumulated in
// double and rounded once to D's type (beta 0: C is not read).
//
//===----------------------------------------------------------------------===//

#include "runtime/hal/drivers/cuda/host/HostModel.h"

#include <cublasLt.h>

#include <cstring>
#include <memory>

namespace omni::hal::cuda::host {
namespace {

struct Desc {
  cublasComputeType_t compute;
  cudaDataType_t scale;
  cublasOperation_t transA = CUBLAS_OP_N, transB = CUBLAS_OP_N;
};

struct Layout {
  cudaDataType_t type;
  uint64_t rows, cols;
  int64_t ld;
  int32_t batch = 1;
  int64_t stride = 0;
};

struct Preference {
  uint64_t workspace = 0;
  uint32_t align[4] = {256, 256, 256, 256}; // A, B, C, D
};

constexpr std::pair<cudaDataType_t, DType> kTypes[] = {
    {CUDA_R_64F, DType::F64},
    {CUDA_R_32F, DType::F32},
    {CUDA_R_16F, DType::F16},
    {CUDA_R_16BF, DType::BF16}};

/// The element type of a cuBLASLt type (F32 for one the model lacks:
/// layouts of those are refused).
DType dtypeOf(cudaDataType_t t) {
  return dtypeIn(t, kTypes).value_or(DType::F32);
}

bool known(cudaDataType_t t) { return dtypeIn(t, kTypes).has_value(); }

int64_t sizeOf(cudaDataType_t t) { return dtypeSize(dtypeOf(t)); }

double load(cudaDataType_t t, const unsigned char *p) {
  return loadElement(dtypeOf(t), p);
}

void store(cudaDataType_t t, unsigned char *p, double value) {
  storeElement(dtypeOf(t), p, value);
}

bool supported(const Desc &d, const Layout &a, const Layout &b, const Layout &c,
               const Layout &dd) {
  if (a.type != b.type || c.type != dd.type)
    return false;
  if (a.type == CUDA_R_64F)
    return d.compute == CUBLAS_COMPUTE_64F && d.scale == CUDA_R_64F &&
           c.type == CUDA_R_64F;
  if (d.compute != CUBLAS_COMPUTE_32F || d.scale != CUDA_R_32F)
    return false;
  if (a.type == CUDA_R_32F)
    return c.type == CUDA_R_32F;
  return (a.type == CUDA_R_16F || a.type == CUDA_R_16BF) &&
         (c.type == a.type || c.type == CUDA_R_32F);
}

/// op(X)'s rows and columns.
std::pair<uint64_t, uint64_t> opShape(const Layout &l, cublasOperation_t op) {
  return op == CUBLAS_OP_N ? std::make_pair(l.rows, l.cols)
                           : std::make_pair(l.cols, l.rows);
}

bool shapesAgree(const Desc &d, const Layout &a, const Layout &b,
                 const Layout &c, const Layout &dd) {
  auto [m, k] = opShape(a, d.transA);
  auto [k2, n] = opShape(b, d.transB);
  return k == k2 && c.rows == m && c.cols == n && dd.rows == m &&
         dd.cols == n && a.batch == b.batch && a.batch == c.batch &&
         a.batch == dd.batch;
}

/// Bytes a layout's batches span.
int64_t extent(const Layout &l) {
  if (l.rows == 0 || l.cols == 0)
    return 0;
  int64_t one = (int64_t(l.cols) - 1) * l.ld + int64_t(l.rows);
  return ((l.batch - 1) * l.stride + one) * sizeOf(l.type);
}

bool aligned(const void *p, const Layout &l, uint32_t alignment) {
  const uint64_t bits = reinterpret_cast<uintptr_t>(p) |
                        (l.batch > 1 ? uint64_t(l.stride * sizeOf(l.type)) : 0);
  return bits % alignment == 0;
}

} // namespace
} // namespace omni::hal::cuda::host

using namespace omni::hal::cuda::host;

struct cublasLtContext {};

extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t *handle) {
  *handle = new cublasLtContext();
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

const char *cublasLtGetStatusString(cublasStatus_t status) {
  switch (status) {
  case CUBLAS_STATUS_SUCCESS:
    return "CUBLAS_STATUS_SUCCESS";
  case CUBLAS_STATUS_INVALID_VALUE:
    return "CUBLAS_STATUS_INVALID_VALUE (host model)";
  case CUBLAS_STATUS_NOT_SUPPORTED:
    return "CUBLAS_STATUS_NOT_SUPPORTED (host model)";
  case CUBLAS_STATUS_EXECUTION_FAILED:
    return "CUBLAS_STATUS_EXECUTION_FAILED (host model)";
  default:
    return "cuBLASLt status (host model)";
  }
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *desc,
                                        cublasComputeType_t compute,
                                        cudaDataType_t scale) {
  *desc = reinterpret_cast<cublasLtMatmulDesc_t>(new Desc{compute, scale});
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete reinterpret_cast<Desc *>(desc);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t
cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                               cublasLtMatmulDescAttributes_t attribute,
                               const void *buffer, size_t size) {
  auto *d = reinterpret_cast<Desc *>(desc);
  if ((attribute != CUBLASLT_MATMUL_DESC_TRANSA &&
       attribute != CUBLASLT_MATMUL_DESC_TRANSB) ||
      size != sizeof(cublasOperation_t))
    return CUBLAS_STATUS_INVALID_VALUE;
  cublasOperation_t op;
  std::memcpy(&op, buffer, size);
  if (op != CUBLAS_OP_N && op != CUBLAS_OP_T)
    return CUBLAS_STATUS_INVALID_VALUE;
  (attribute == CUBLASLT_MATMUL_DESC_TRANSA ? d->transA : d->transB) = op;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *layout,
                                          cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  if (!known(type) || ld < static_cast<int64_t>(rows) || ld < 1)
    return CUBLAS_STATUS_INVALID_VALUE;
  *layout = reinterpret_cast<cublasLtMatrixLayout_t>(
      new Layout{type, rows, cols, ld});
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete reinterpret_cast<Layout *>(layout);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t
cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout,
                                 cublasLtMatrixLayoutAttribute_t attribute,
                                 const void *buffer, size_t size) {
  auto *l = reinterpret_cast<Layout *>(layout);
  if (attribute == CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT && size == 4) {
    std::memcpy(&l->batch, buffer, 4);
    return l->batch >= 1 ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
  }
  if (attribute == CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET && size == 8) {
    std::memcpy(&l->stride, buffer, 8);
    return CUBLAS_STATUS_SUCCESS;
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t
cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *preference) {
  *preference = reinterpret_cast<cublasLtMatmulPreference_t>(new Preference());
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t
cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t preference) {
  delete reinterpret_cast<Preference *>(preference);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(
    cublasLtMatmulPreference_t preference,
    cublasLtMatmulPreferenceAttributes_t attribute, const void *buffer,
    size_t size) {
  auto *p = reinterpret_cast<Preference *>(preference);
  if (attribute == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES && size == 8) {
    std::memcpy(&p->workspace, buffer, 8);
    return CUBLAS_STATUS_SUCCESS;
  }
  int which = attribute == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES   ? 0
              : attribute == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES ? 1
              : attribute == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES ? 2
              : attribute == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES ? 3
                                                                        : -1;
  if (which < 0 || size != 4)
    return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(&p->align[which], buffer, 4);
  const uint32_t a = p->align[which];
  return a && (a & (a - 1)) == 0 ? CUBLAS_STATUS_SUCCESS
                                 : CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t a,
    cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
    cublasLtMatrixLayout_t d, cublasLtMatmulPreference_t preference,
    int requested, cublasLtMatmulHeuristicResult_t *results, int *found) {
  const Desc &dd = *reinterpret_cast<Desc *>(desc);
  const Layout &la = *reinterpret_cast<Layout *>(a),
               &lb = *reinterpret_cast<Layout *>(b),
               &lc = *reinterpret_cast<Layout *>(c),
               &ld = *reinterpret_cast<Layout *>(d);
  const Preference &p = *reinterpret_cast<Preference *>(preference);
  *found = 0;
  if (requested < 1)
    return CUBLAS_STATUS_INVALID_VALUE;
  if (!shapesAgree(dd, la, lb, lc, ld))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (!supported(dd, la, lb, lc, ld))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  // The one "algorithm" remembers the alignments it was chosen for.
  std::memset(&results[0], 0, sizeof(results[0]));
  for (int i = 0; i < 4; ++i)
    results[0].algo.data[i] = p.align[i];
  results[0].state = CUBLAS_STATUS_SUCCESS;
  results[0].wavesCount = 1;
  *found = 1;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t, cublasLtMatmulDesc_t desc,
                              const void *alpha, const void *A,
                              cublasLtMatrixLayout_t a, const void *B,
                              cublasLtMatrixLayout_t b, const void *beta,
                              const void *C, cublasLtMatrixLayout_t c, void *D,
                              cublasLtMatrixLayout_t d,
                              const cublasLtMatmulAlgo_t *algo, void *workspace,
                              size_t workspaceBytes, cudaStream_t stream) {
  OMNI_HOST_LOCK;
  const Desc dd = *reinterpret_cast<Desc *>(desc);
  const Layout la = *reinterpret_cast<Layout *>(a),
               lb = *reinterpret_cast<Layout *>(b),
               lc = *reinterpret_cast<Layout *>(c),
               ld = *reinterpret_cast<Layout *>(d);
  if (!algo || !shapesAgree(dd, la, lb, lc, ld) ||
      !supported(dd, la, lb, lc, ld))
    return CUBLAS_STATUS_INVALID_VALUE;
  const void *pointers[4] = {A, B, C, D};
  const Layout *layouts[4] = {&la, &lb, &lc, &ld};
  for (int i = 0; i < 4; ++i)
    if (!aligned(pointers[i], *layouts[i],
                 static_cast<uint32_t>(algo->data[i])))
      return CUBLAS_STATUS_INVALID_VALUE;
  // Alpha and beta are read now (host pointers), in the scale type.
  double alphaValue, betaValue;
  if (dd.scale == CUDA_R_64F) {
    std::memcpy(&alphaValue, alpha, 8);
    std::memcpy(&betaValue, beta, 8);
  } else {
    float a32, b32;
    std::memcpy(&a32, alpha, 4);
    std::memcpy(&b32, beta, 4);
    alphaValue = a32;
    betaValue = b32;
  }
  for (int i = 0; i < 4; ++i)
    if ((i != 2 || betaValue != 0) &&
        !isDeviceRange(reinterpret_cast<uintptr_t>(pointers[i]),
                       static_cast<size_t>(extent(*layouts[i]))))
      return CUBLAS_STATUS_EXECUTION_FAILED;
  if (workspaceBytes &&
      !isDeviceRange(reinterpret_cast<uintptr_t>(workspace), workspaceBytes))
    return CUBLAS_STATUS_EXECUTION_FAILED;
  CUresult r = submit(reinterpret_cast<CUstream>(stream), [=] {
    // Run late (the deferred schedule): the operands must still be device
    // memory.
    const std::pair<const void *, const Layout *> operands[] = {
        {A, &la}, {B, &lb}, {C, &lc}, {D, &ld}};
    for (int i = 0; i < 4; ++i)
      if ((i != 2 || betaValue != 0) &&
          !isDeviceRange(reinterpret_cast<uintptr_t>(operands[i].first),
                         static_cast<size_t>(extent(*operands[i].second))))
        return CUDA_ERROR_ILLEGAL_ADDRESS;
    auto at = [](const void *base, const Layout &l, int64_t batch, uint64_t row,
                 uint64_t col) {
      return static_cast<const unsigned char *>(base) +
             (batch * l.stride + int64_t(col) * l.ld + int64_t(row)) *
                 sizeOf(l.type);
    };
    auto [m, k] = opShape(la, dd.transA);
    const uint64_t n = ld.cols;
    for (int32_t batch = 0; batch < la.batch; ++batch)
      for (uint64_t j = 0; j < n; ++j)
        for (uint64_t i = 0; i < m; ++i) {
          double sum = 0;
          for (uint64_t x = 0; x < k; ++x) {
            const double av = dd.transA == CUBLAS_OP_N
                                  ? load(la.type, at(A, la, batch, i, x))
                                  : load(la.type, at(A, la, batch, x, i));
            const double bv = dd.transB == CUBLAS_OP_N
                                  ? load(lb.type, at(B, lb, batch, x, j))
                                  : load(lb.type, at(B, lb, batch, j, x));
            sum += av * bv;
          }
          double value = alphaValue * sum;
          if (betaValue != 0)
            value += betaValue * load(lc.type, at(C, lc, batch, i, j));
          store(ld.type, const_cast<unsigned char *>(at(D, ld, batch, i, j)),
                value);
        }
    return CUDA_SUCCESS;
  });
  return r == CUDA_SUCCESS ? CUBLAS_STATUS_SUCCESS
                           : CUBLAS_STATUS_EXECUTION_FAILED;
}

} // extern "C"
