//===- CpuLibraries.h - Matmul, conv2d and attention on the CPU -*- C++ -*-===//
//
// The cpu driver's library routines on raw host pointers (the stream has
// checked every buffer range): matmul through Gemm.h (oneDNN sgemm /
// OpenBLAS dgemm, single-threaded on fixed blocks of the result; a shared
// rhs folds the batch into the rows), conv2d as the direct loop of
// CpuConv.h where it applies, else im2col tiles times the filter,
// attention per (batch, head) as two gemms around a row softmax. f32 and
// f64. The device's one thread pool runs the gemm blocks, the direct
// convolution, im2col and the softmax rows.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_HAL_DRIVERS_CPU_CPULIBRARIES_H
#define OMNI_RUNTIME_HAL_DRIVERS_CPU_CPULIBRARIES_H

#include "runtime/hal/Library.h"
#include "runtime/hal/drivers/cpu/ThreadPool.h"

#include "absl/status/status.h"

namespace omni::hal::cpu {

absl::Status runMatmul(const MatmulParams &p, const void *lhs, const void *rhs,
                       void *result, ThreadPool &pool);

absl::Status runConv2d(const Conv2dParams &p, const void *input,
                       const void *filter, void *result, ThreadPool &pool);

/// `mask` is null when p.hasMask is false.
absl::Status runAttention(const AttentionParams &p, const void *q,
                          const void *k, const void *v, const void *mask,
                          void *result, ThreadPool &pool);

} // namespace omni::hal::cpu

#endif // OMNI_RUNTIME_HAL_DRIVERS_CPU_CPULIBRARIES_H
