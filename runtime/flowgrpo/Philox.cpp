//===- Philox.cpp - Counter-based random numbers ----------------*- C++ -*-===//
//
// Reference implementation of docs/rng.md. The arithmetic lives in
// PhiloxCore.h, which the CUDA kernels compile too (one copy of the
// algorithm). The block function is integer arithmetic and portable as is;
// the normal transform is double arithmetic with detLog/detCos and must be
// compiled with -ffp-contract=off so that sqrt(-2 log u1) * cos(2 pi u2)
// rounds exactly as the specification says.
//
//===----------------------------------------------------------------------===//

#include "runtime/flowgrpo/Philox.h"

#include "runtime/flowgrpo/PhiloxCore.h"

namespace omni::flowgrpo {
namespace {

using core::blockAt;
using core::normalFromBlock;
using core::uniformFromBlock;

std::array<uint32_t, 4> toArray(const core::Words4 &b) {
  return {b.w[0], b.w[1], b.w[2], b.w[3]};
}

} // namespace

std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> ctr,
                                      std::array<uint32_t, 2> key) {
  return toArray(core::philox4x32_10(
      core::Words4{{ctr[0], ctr[1], ctr[2], ctr[3]}}, key[0], key[1]));
}

std::array<uint32_t, 4> philoxBlockAt(int64_t seed, int64_t counter,
                                      int64_t position) {
  return toArray(blockAt(static_cast<uint64_t>(seed),
                         static_cast<uint64_t>(counter),
                         static_cast<uint64_t>(position)));
}

float philoxUniformAt(int64_t seed, int64_t counter, int64_t position) {
  return uniformFromBlock(blockAt(static_cast<uint64_t>(seed),
                                  static_cast<uint64_t>(counter),
                                  static_cast<uint64_t>(position)));
}

float philoxNormalAt(int64_t seed, int64_t counter, int64_t position) {
  return normalFromBlock(blockAt(static_cast<uint64_t>(seed),
                                 static_cast<uint64_t>(counter),
                                 static_cast<uint64_t>(position)));
}

// Positions are computed in uint64 so that offset + j wraps modulo 2^64 as
// the specification says, without signed overflow.
void philoxUniform(int64_t seed, int64_t counter, int64_t offset, float *out,
                   int64_t n) {
  for (int64_t j = 0; j < n; ++j)
    out[j] = uniformFromBlock(
        blockAt(static_cast<uint64_t>(seed), static_cast<uint64_t>(counter),
                static_cast<uint64_t>(offset) + static_cast<uint64_t>(j)));
}

void philoxNormal(int64_t seed, int64_t counter, int64_t offset, float *out,
                  int64_t n) {
  for (int64_t j = 0; j < n; ++j)
    out[j] = normalFromBlock(
        blockAt(static_cast<uint64_t>(seed), static_cast<uint64_t>(counter),
                static_cast<uint64_t>(offset) + static_cast<uint64_t>(j)));
}

} // namespace omni::flowgrpo
