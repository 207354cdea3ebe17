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
#include "absl/types/span.h"

#include <functional>

namespace omni::hal::cpu {

/// The kernel that runs after a matmul on its result (Stream::Epilogue on
/// host pointers): `run(begin, end)` runs its work items [begin, end) of
/// [0, grid); item w reads bytes [w * resultItemBytes, (w + 1) *
/// resultItemBytes) of the result and nothing else of it. `perBlock`: the
/// caller has checked that no item writes what a gemm block still reads
/// (CpuStream::matmulWithEpilogue); false runs it after the whole matmul.
struct MatmulEpilogue {
  std::function<void(int64_t, int64_t)> run;
  int64_t grid = 0;
  int64_t resultItemBytes = 0;
  bool perBlock = false;
};

/// With an epilogue, its items run right after the gemm block that computes
/// the rows they read, on the same thread, while those rows are in cache,
/// where the blocking allows (f32 and f64, blocks of rows whose bounds fall
/// on item bounds); else after the whole matmul. The results are the same
/// either way: each item computes what it would in a separate dispatch.
absl::Status runMatmul(const MatmulParams &p, const void *lhs, const void *rhs,
                       void *result, ThreadPool &pool,
                       const MatmulEpilogue *epilogue = nullptr);

/// Bytes [data, data + length) of host memory.
struct ByteRange {
  const void *data = nullptr;
  int64_t length = 0;
};

/// Whether an epilogue over `buffers` (the first `numOperands` read, the
/// rest written; item w touching bytes [w * itemBytes[i], ...) of buffer i,
/// 0: all of it) may run per gemm block of a matmul of lhs, rhs -> result:
/// no buffer it writes overlaps lhs or rhs, and every buffer that overlaps
/// the result is the result itself, touched by the same slices as
/// `resultItemBytes`. Else an item could read rows a block has not
/// computed yet, or write over what a block still reads.
bool epilogueMayRunPerBlock(ByteRange lhs, ByteRange rhs, ByteRange result,
                            absl::Span<const ByteRange> buffers,
                            size_t numOperands,
                            absl::Span<const int64_t> itemBytes,
                            int64_t resultItemBytes);

/// Whether runMatmul runs `epilogue`'s items per gemm block for `p` (a
/// function of the shapes alone).
bool epilogueRunsPerBlock(const MatmulParams &p,
                          const MatmulEpilogue &epilogue);

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
/// Attention's cotangents (fusedAttentionBackward in CpuAttention.h), f32
/// or bf16 (widened, each cotangent rounded once); `mask` null when
/// p.hasMask is false.
absl::Status runAttentionBackward(const AttentionParams &p, const void *q,
                                  const void *k, const void *v,
                                  const void *mask, const void *o,
                                  const void *dO, void *dq, void *dk, void *dv,
                                  ThreadPool &pool);

} // namespace omni::hal::cpu

#endif // OMNI_RUNTIME_HAL_DRIVERS_CPU_CPULIBRARIES_H
