//===- Philox.h - Counter-based random numbers ------------------*- C++ -*-===//
//
// omni's random_uniform / random_normal ops and everything built on them
// (initial noise, per-step SDE noise, the SDE window start, LoRA init) draw
// from Philox4x32-10, a counter-based generator: each value is a pure
// function of (seed, stream counter, element position), with no state carried
// between calls. That is what lets the CPU runtime, the CUDA kernels, the
// reference evaluator and any sharding of a batch over ranks produce the same
// numbers bit for bit. docs/rng.md is the specification; this file is its
// reference implementation, and the CPU and CUDA kernels must match it
// exactly (checked by the known-answer vectors in PhiloxTest.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_FLOWGRPO_PHILOX_H
#define OMNI_RUNTIME_FLOWGRPO_PHILOX_H

#include <array>
#include <cstdint>

namespace omni::flowgrpo {

/// One Philox4x32-10 block (Salmon et al., SC'11; Random123's
/// philox4x32_R(10, ctr, key)): ten rounds with multipliers 0xD2511F53 and
/// 0xCD9E8D57 and key bumps 0x9E3779B9 and 0xBB67AE85.
std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> ctr,
                                      std::array<uint32_t, 2> key);

/// The Philox counter and key of one element: key = (lo32(seed),
/// hi32(seed)), counter = (lo32(position), hi32(position), lo32(counter),
/// hi32(counter)), all int64 values taken as two's-complement 64-bit words.
std::array<uint32_t, 4> philoxBlockAt(int64_t seed, int64_t counter,
                                      int64_t position);

/// The uniform value of one element: float((out[0] >> 8) * 2^-24), in
/// [0, 1 - 2^-24], exact in float32.
float philoxUniformAt(int64_t seed, int64_t counter, int64_t position);

/// The standard normal value of one element: Box-Muller on
/// u1 = ((out[0] >> 8) + 1) * 2^-24 in (0, 1] and u2 = (out[1] >> 8) * 2^-24,
/// z = sqrt(-2 detLog(u1)) * detCos(2 pi u2) in double, rounded to float32.
/// Always finite: |z| <= sqrt(2 * 24 ln 2) ~ 5.77.
float philoxNormalAt(int64_t seed, int64_t counter, int64_t position);

/// Fills out[j] = philoxUniformAt(seed, counter, offset + j) for j in
/// [0, n). Element j of a row-major tensor sits at position offset + j, so
/// generating a slice of a tensor with offset = (index of its first element)
/// reproduces the whole tensor's values. Positions wrap modulo 2^64. Does
/// nothing for n <= 0. `out` must hold n floats.
void philoxUniform(int64_t seed, int64_t counter, int64_t offset, float *out,
                   int64_t n);

/// Fills out[j] = philoxNormalAt(seed, counter, offset + j) for j in [0, n);
/// same layout rules as philoxUniform.
void philoxNormal(int64_t seed, int64_t counter, int64_t offset, float *out,
                  int64_t n);

} // namespace omni::flowgrpo

#endif // OMNI_RUNTIME_FLOWGRPO_PHILOX_H
