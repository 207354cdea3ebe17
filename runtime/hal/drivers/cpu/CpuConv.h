//===- CpuConv.h - Direct f32 convolution on the CPU ------------*- C++ -*-===//
//
// conv2d without im2col for stride 1, dilation 1 and up to 256 input
// channels (the 3x3 convolutions with padding 1 of the autoencoder_kl
// decoder), f32, on CPUs with AVX2 and FMA. Register-blocked: each inner step
// multiplies one input row segment of 16 pixels by 4 output channels' weights,
// the accumulators stay in registers over the whole (channel, ky, kx) sum. The
// input is copied into zero-padded bands of rows, a block of channels at a
// time, so the inner loop never tests a border. docs/performance.md
// ("CPU speed (issue 15): convolutions and the decode phase") has the
// measurements against im2col + OpenBLAS and oneDNN.
//
// Work is split over the ThreadPool by (image, band of output rows); every
// output element is summed by one work item in one fixed order (input
// channel ascending, then ky, kx), so the result has the same bits for any
// thread count. f32 products accumulate in f32 (fused multiply-add), like
// the sgemm of the im2col path: the error of an element is at most
// gamma_K * sum |w x| with K = channels x taps (tested in CpuConvTest).
//
// Thread safety: the functions keep no state; concurrent calls are fine
// (the pool runs one loop at a time).
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_HAL_DRIVERS_CPU_CPUCONV_H
#define OMNI_RUNTIME_HAL_DRIVERS_CPU_CPUCONV_H

#include "runtime/hal/Library.h"
#include "runtime/hal/drivers/cpu/ThreadPool.h"

namespace omni::hal::cpu {

/// True when conv2dDirect computes `p`: stride 1, dilation 1, the output
/// size that stride 1 gives, at most 256 input channels (im2col + sgemm is
/// faster above), not an unpadded 1x1 (that is one sgemm on the input as
/// it is), and a CPU with AVX2 and FMA. p.dtype is not looked at: the
/// caller passes f32 data.
bool conv2dDirectApplies(const Conv2dParams &p);

/// y = conv2d(x, w) as Conv2dParams describes, for a `p` that
/// conv2dDirectApplies accepts; x [n, c, h, w], w [o, c, kh, kw], y [n, o,
/// outH, outW], all f32.
void conv2dDirect(const Conv2dParams &p, const float *x, const float *w,
                  float *y, ThreadPool &pool);

} // namespace omni::hal::cpu

#endif // OMNI_RUNTIME_HAL_DRIVERS_CPU_CPUCONV_H
