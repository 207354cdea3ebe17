//===- DetMath.cpp - Deterministic log and cos ------------------*- C++ -*-===//
//
// Implements detLog and detCos with nothing but IEEE-754 double arithmetic in
// a fixed order, so that the CPU runtime, the reference evaluator and the
// CUDA kernels draw bit-identical normals. The code is in PhiloxCore.h,
// shared with the CUDA kernels; every constant there is written as a
// hexadecimal literal (the exact double, no decimal-to-binary conversion left
// to the compiler) and docs/rng.md repeats them. This file must be compiled
// with -ffp-contract=off: a contracted a*b+c rounds once instead of twice and
// changes the bits.
//
//===----------------------------------------------------------------------===//

#include "runtime/flowgrpo/DetMath.h"

#include "runtime/flowgrpo/PhiloxCore.h"

#include <cfloat>

// x87 arithmetic keeps extra precision in registers and -ffast-math reorders
// and contracts freely; either breaks the bit-for-bit contract.
#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD != 0
#error "DetMath.cpp needs FLT_EVAL_METHOD == 0 (SSE2 or equivalent)"
#endif
#ifdef __FAST_MATH__
#error "DetMath.cpp must not be compiled with -ffast-math"
#endif

namespace omni::flowgrpo {

double detLog(double x) { return core::detLog(x); }

double detCos(double x) { return core::detCos(x); }

} // namespace omni::flowgrpo
