//===- ElementCodec.h - The one element codec of every dtype ----*- C++ -*-===//
//
// Every conversion between an element's value and its bytes, and between the
// float formats, goes through this file: .npy and safetensors files, the
// executor's host<->device copies, the cpu driver's Random in narrow types
// and the reference evaluator's rounding. Before it, each of those had its
// own copy with its own NaN handling; now a NaN, an infinity or a subnormal
// comes out of every path as the same bits.
//
// Values are held on the host as double (float dtypes) or int64_t (integer
// dtypes, i1); bytes are the dense little-endian elements of the dtype, as
// in device buffers, step.bin and files. The rules (docs/backend.md,
// "Element types and their bytes"):
//
//  - Rounding: double -> f32/f16/bf16 rounds once, directly from double, to
//    nearest with ties to even (never through float, so never twice).
//    Results beyond the largest finite value become +-inf; results below
//    the smallest normal become subnormals (gradual underflow, no flush to
//    zero); the sign of zero is kept. Widening to double is exact.
//  - NaN: a NaN stays a NaN with its sign, and it is quiet. Its payload
//    travels top-aligned: narrowing keeps the payload's leading bits that
//    fit (the rest are dropped), widening puts them back at the top. So a
//    quiet NaN of any format comes back bit-exact after a trip through
//    double; a signaling f32/f16/bf16 NaN comes back quieted (its quiet bit
//    set), as x86 and Arm conversions do. f64 <-> double is no conversion:
//    its bits are copied, signaling NaNs included.
//  - Infinities map to infinities of the same sign.
//  - Integers: encoding keeps the low bits (two's complement, wrapToDType).
//    i1 is one byte holding 0 or 1; encoding writes the value's low bit.
//    Decoding any other byte is an error (decodeInts says which element and
//    byte), so a file reader rejects it rather than guess: NumPy would read
//    byte 2 as true, a kernel (LLVM's i1 load) as false. The element still
//    decodes to the byte's low bit, what a kernel sees; device buffers hold
//    only 0 or 1 by construction (kernels, encodeInts), so the executor
//    decodes them without a check.
//
// The bit manipulation is integer-only, so the results do not depend on the
// host's floating-point environment (rounding mode, flush-to-zero).
// MLIR-free.
//
// Thread safety: pure functions.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_IO_ELEMENTCODEC_H
#define OMNI_RUNTIME_IO_ELEMENTCODEC_H

#include "runtime/io/DType.h"

#include "absl/status/status.h"
#include "absl/types/span.h"

#include <cstdint>

namespace omni {

//===----------------------------------------------------------------------===//
// Float formats
//===----------------------------------------------------------------------===//

/// IEEE binary32 bits of `value` rounded to single precision, and back.
uint32_t f32BitsFromDouble(double value);
double doubleFromF32Bits(uint32_t bits);

/// IEEE binary16 bits of `value` rounded to half precision, and back.
uint16_t halfBitsFromDouble(double value);
double doubleFromHalfBits(uint16_t bits);

/// bfloat16 bits (the top half of a binary32) of `value` rounded to
/// bfloat16, and back.
uint16_t bf16BitsFromDouble(double value);
double doubleFromBf16Bits(uint16_t bits);

/// Rounds `value` to the nearest value of a float dtype: the value its bits
/// decode to (so NaN follows the NaN rule above). F64 and integer dtypes
/// return `value` unchanged.
double roundToDType(double value, DType dtype);

/// Reduces `value` to the range of an integer dtype the way two's-complement
/// hardware does: I32 keeps the low 32 bits (sign-extended), I1 keeps the
/// low bit (stored as 0 or 1). I64 and float dtypes return `value`.
int64_t wrapToDType(int64_t value, DType dtype);

//===----------------------------------------------------------------------===//
// Elements <-> little-endian bytes
//===----------------------------------------------------------------------===//

/// Writes `values` as elements of the float dtype `dtype` (rounded as
/// above). `out` holds exactly values.size() * dtypeSize(dtype) bytes.
void encodeFloats(DType dtype, absl::Span<const double> values,
                  absl::Span<uint8_t> out);

/// Reads elements of the float dtype `dtype` from `in`, which holds exactly
/// values.size() * dtypeSize(dtype) bytes.
void decodeFloats(DType dtype, absl::Span<const uint8_t> in,
                  absl::Span<double> values);

/// Writes `values` as elements of the integer dtype `dtype` (low bits
/// kept). `out` holds exactly values.size() * dtypeSize(dtype) bytes.
void encodeInts(DType dtype, absl::Span<const int64_t> values,
                absl::Span<uint8_t> out);

/// Reads elements of the integer dtype `dtype` (i32 sign-extended) from
/// `in`, which holds exactly values.size() * dtypeSize(dtype) bytes. An i1
/// byte other than 0 or 1 gives InvalidArgument "element 3 of i1 is byte 2,
/// expected 0 or 1" (the first such element; every element is still
/// decoded, see the file comment).
/// OK when every byte of `in` is 0 or 1 (valid i1 elements); otherwise
/// InvalidArgument naming the first other byte, as decodeInts does.
absl::Status checkI1Bytes(absl::Span<const uint8_t> in);

absl::Status decodeInts(DType dtype, absl::Span<const uint8_t> in,
                        absl::Span<int64_t> values);

} // namespace omni

#endif // OMNI_RUNTIME_IO_ELEMENTCODEC_H
