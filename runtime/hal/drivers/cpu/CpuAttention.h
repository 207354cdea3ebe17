//===- CpuAttention.h - Fused flash-style attention on the CPU --*- C++ -*-===//
//
// softmax(q k^T * scale + mask) v in f32 without materializing the whole
// score matrix: each work item is one (batch, head, tile of query rows).
// Below head size kAttentionGemmMinHeadDim it walks the keys in blocks,
// computes a block of scores in registers, and keeps a running row max and
// sum (online softmax), rescaling its output accumulator when the max
// grows. From that head size on it computes its tile of scores (at most
// kAttentionScoreTileFloats, in L2) and each key block's p v with oneDNN's
// single-threaded sgemm (Gemm.h serialGemm) and the softmax over whole rows
// in between. The exp is a polynomial that vectorizes (attentionExp below;
// accuracy in docs/performance.md, "CPU speed (issue 15): fused
// attention").
//
// Arithmetic (docs/backend.md, "Reductions"): dot products q.k and the
// products p v of one key block (at most kAttentionMaxKeyBlock keys) in f32,
// as the sgemm of the materialized path does; the probability sum of one
// key block in W f32 lanes (at most block / W terms each, W the vector
// width), then in f64 across lanes and blocks, as is the output
// accumulator across key blocks; one division per row at the end. In
// registers a row's result depends only on its own inputs, the fixed key
// blocking and the ISA copy, never on the tile it falls in; the sgemm path
// fixes its tiles by the shape alone (an sgemm's bits may depend on its
// row count). Either way the bits are the same for any thread count.
//
// Vectorized with GCC/Clang vector extensions; on x86-64 a copy compiled
// for AVX-512 (16 lanes) or for AVX2+FMA (8 lanes) is chosen at run time
// when the CPU has it, otherwise the same code runs on the baseline ISA
// with 4 lanes (SSE2 on x86-64).
//
// Thread safety: the functions are reentrant; fusedAttention runs its work
// items on `pool`.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_HAL_DRIVERS_CPU_CPUATTENTION_H
#define OMNI_RUNTIME_HAL_DRIVERS_CPU_CPUATTENTION_H

#include "runtime/hal/Library.h"
#include "runtime/hal/drivers/cpu/ThreadPool.h"

#include <cstdint>

namespace omni::hal::cpu {

/// At most this many keys per block of the online softmax (the f32 partial
/// sums of p v span at most this many keys).
inline constexpr int64_t kAttentionMaxKeyBlock = 128;
/// At most this many query rows per work item (the kernel takes fewer, larger
/// tiles when there are enough (batch, head) pairs for the threads: every
/// tile transposes each key block once).
inline constexpr int64_t kAttentionMaxQueryTile = 512;
/// From this head size on, a work item computes its tile of scores and its
/// products p v with oneDNN's sgemm (Gemm.h serialGemm) instead of in
/// registers: faster from 32 on (small's [32, 8, 288, 32] 16.8 -> 15.2 ms
/// on 2 threads), slower below (tiny's [32, 4, 72, 16] 0.49 -> 1.04 ms).
inline constexpr int64_t kAttentionGemmMinHeadDim = 32;
/// Those tiles: at most this many query rows, and at most this many scores
/// (384 KiB; the backward keeps two such tiles, inside a 2 MiB L2 with the
/// sgemm's packed operands). One tile per (batch, head) of small's 288
/// tokens instead of two of 144: 3% faster forward and backward.
inline constexpr int64_t kAttentionGemmMaxQueryTile = 320;
inline constexpr int64_t kAttentionScoreTileFloats = 98304;

/// The key block for `seqK` keys: the fewest blocks of at most
/// kAttentionMaxKeyBlock keys, made equal and rounded up to 16 (72 keys:
/// one block of 80; 288: three of 96). A function of the shape only, so the
/// blocking (and the bits) never depends on the thread count.
int64_t attentionKeyBlock(int64_t seqK);

/// Which copy of the kernel runs: the best this CPU has (Avx512, else Avx2,
/// else Baseline), or one named copy (tests run each the CPU has).
enum class AttentionIsa { Best, Baseline, Avx2, Avx512 };

/// Whether this CPU (and build) runs `isa`'s copy; Best and Baseline always.
bool attentionIsaAvailable(AttentionIsa isa);

/// The fused kernel's exp, elementwise over n floats: relative error at
/// most 2^-22 for x in [-87.33, 88.37] (measured below 2 ulp), 0 below
/// -87.33 (where exp is subnormal or 0), +inf above, NaN for NaN. The same
/// code path (ISA) as fusedAttention uses.
void attentionExp(const float *x, float *y, int64_t n,
                  AttentionIsa isa = AttentionIsa::Best);

/// The copy fusedAttention and attentionExp run for `isa` on this CPU
/// ("avx512", "avx2" or "baseline"; a copy the CPU lacks runs the
/// baseline), for reports.
const char *attentionIsa(AttentionIsa isa = AttentionIsa::Best);

/// result = softmax(q k^T * scale + mask) v, f32, layouts of
/// AttentionParams; `mask` null when p.hasMask is false. Rows whose every
/// score is -inf come out NaN, as the materialized path's do; no keys
/// (seqK = 0) gives zeros, as it does there.
void fusedAttention(const AttentionParams &p, const float *q, const float *k,
                    const float *v, const float *mask, float *out,
                    ThreadPool &pool, AttentionIsa isa = AttentionIsa::Best);

/// The cotangents of fusedAttention: given q, k, v, the mask (null when
/// p.hasMask is false), the forward's output o and its cotangent dO,
/// dq = scale dS k, dk = scale dS^T q, dv = P^T dO with P the softmax and
/// dS = P (dO v^T - rowsum(dO o)). One work item per (batch, head); the
/// bits are the same for any thread count. Below kAttentionGemmMinHeadDim,
/// flash-attention-2 style: one pass over the keys recomputes each row's
/// max and sum, a second recomputes P block by block and accumulates dq
/// (f64 across key blocks, as the forward's output), dk and dv (f32 over
/// the rows, as sgemm sums) without materializing any seqQ x seqK matrix.
/// From that head size on, per query tile of the forward's size: S and
/// dP = dO v^T materialized, P and dS in place, then dv, dk (f32 over the
/// tile's rows, f64 across tiles) and dq (f32 per key block, f64 across
/// blocks), each product one sgemm. A mask is added to each row of scores
/// where the forward adds it (so an all-zero mask gives the bits of none).
void fusedAttentionBackward(const AttentionParams &p, const float *q,
                            const float *k, const float *v, const float *mask,
                            const float *o, const float *dO, float *dq,
                            float *dk, float *dv, ThreadPool &pool,
                            AttentionIsa isa = AttentionIsa::Best);

} // namespace omni::hal::cpu

#endif // OMNI_RUNTIME_HAL_DRIVERS_CPU_CPUATTENTION_H
