//===- CpuLibraries.h - Matmul, conv2d and attention on the CPU -*- C++ -*-===//
//
// The cpu driver's library routines on raw host pointers (the stream has
// checked every buffer range): matmul through Gemm.h (oneDNN sgemm /
// OpenBLAS dgemm, single-threaded on fixed blocks of the result; a shared
// rhs folds the batch into the rows), conv2d as the direct loop of
// CpuConv.h where it applies, else im2col tiles times the filter,
// attention either fused (CpuAttention.h, f32, over batch x heads x query
// tiles) or per (batch, head) as two gemms around a row softmax. f32 and
// f64. The device's one thread pool runs all of them.
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

/// How attention is computed: the score matrix materialized a block of
/// query rows at a time (two sgemm/dgemm around a row softmax), or the
/// fused online-softmax kernel of CpuAttention.h (f32 and bf16 only).
enum class AttentionPath { Auto, Materialized, Fused };

/// The path Auto takes for `p` (the rule and its measurements:
/// docs/performance.md, "CPU speed (issue 15): fused attention").
AttentionPath chooseAttentionPath(const AttentionParams &p);

/// `mask` is null when p.hasMask is false. `path` Fused for f64 runs the
/// materialized path (the fused kernel is f32).
absl::Status runAttention(const AttentionParams &p, const void *q,
                          const void *k, const void *v, const void *mask,
                          void *result, ThreadPool &pool,
                          AttentionPath path = AttentionPath::Auto);

} // namespace omni::hal::cpu

#endif // OMNI_RUNTIME_HAL_DRIVERS_CPU_CPULIBRARIES_H
