//===- DType.h - Element types of omni tensors ------------------*- C++ -*-===//
//
// The element types every layer names (step.bin, device buffers, host
// tensors, files) and their properties: spelling, size, category. How an
// element of each type is coded as bytes, and how values round between the
// float types, is runtime/io/ElementCodec.h. MLIR-free.
//
// Thread safety: pure functions.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_IO_DTYPE_H
#define OMNI_RUNTIME_IO_DTYPE_H

#include "absl/strings/string_view.h"

#include <cstdint>
#include <optional>

namespace omni {

/// Element types of omni tensors.
enum class DType { F32, F64, F16, BF16, I1, I32, I64 };

/// The MLIR spelling of `dtype`: "f32", "f64", "f16", "bf16", "i1", "i32",
/// "i64".
absl::string_view dtypeName(DType dtype);

/// Parses an MLIR element type spelling (the inverse of dtypeName).
std::optional<DType> parseDType(absl::string_view name);

/// True for F32, F64, F16 and BF16.
bool isFloatDType(DType dtype);

/// Bytes per element as tensors are stored in step.bin, .npy files and
/// device buffers: 4 (f32, i32), 8 (f64, i64), 2 (f16, bf16), 1 (i1, one
/// byte holding 0 or 1).
int64_t dtypeSize(DType dtype);

/// The bit width of an integer dtype (1, 32 or 64); 0 for float dtypes.
unsigned intBitWidth(DType dtype);

} // namespace omni

#endif // OMNI_RUNTIME_IO_DTYPE_H
