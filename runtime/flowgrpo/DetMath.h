//===- DetMath.h - Deterministic log and cos --------------------*- C++ -*-===//
//
// The counter-based normal sampler (Philox.h) turns two uniforms into a
// normal with the Box-Muller transform, which needs log and cos. The C
// library's versions differ between glibc, musl, MSVC and CUDA's libdevice in
// the last bit, and a last-bit difference in double can flip the float32
// rounding of the sample, so omni's random numbers would depend on the
// platform. These two functions are omni's own: range reduction plus fixed
// polynomials, using only IEEE-754 double +, -, *, / and sqrt (correctly
// rounded everywhere), evaluated in a fixed order. Compiled with
// -ffp-contract=off (no fused multiply-add) they return the same bits on any
// IEEE-754 platform; a CUDA port compiles the same operations with
// --fmad=false. docs/rng.md lists every constant and the evaluation order.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_FLOWGRPO_DETMATH_H
#define OMNI_RUNTIME_FLOWGRPO_DETMATH_H

namespace omni::flowgrpo {

/// Natural logarithm of `x`, within a few ulp of the exact value (about
/// 1e-16 relative) for every positive finite double, subnormals included.
/// Returns -inf for +-0, +inf for +inf and NaN for negative or NaN input.
/// Bit-reproducible across IEEE-754 platforms (see docs/rng.md).
double detLog(double x);

/// Cosine of `x` (radians), within a few ulp of the exact value for
/// |x| <= 2^20 (the Box-Muller argument lies in [0, 2*pi)); the three-part
/// Cody-Waite reduction is exact there, so accuracy holds relative to the
/// result even next to the zeros of cos. Returns NaN outside that domain
/// (including for infinities and NaN) rather than a silently inaccurate value.
/// Bit-reproducible across IEEE-754 platforms (see docs/rng.md).
double detCos(double x);

} // namespace omni::flowgrpo

#endif // OMNI_RUNTIME_FLOWGRPO_DETMATH_H
