//===- Npy.h - NumPy .npy files ---------------------------------*- C++ -*-===//
//
// Reads and writes the NumPy array format (format versions 1.0 and 2.0), the
// interchange format of omni-eval and omnirun (`--input=@a.npy`,
// `--output=@out.npy`), so that any tensor can be produced and checked from
// Python. Supported dtypes: '<f4', '<f8', '<f2', '<i4', '<i8' and '|b1', C
// order. Files are never trusted: every header field and the data size are
// checked, and each rejection is one line naming what was expected and what
// was found. MLIR-free.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_IO_NPY_H
#define OMNI_RUNTIME_IO_NPY_H

#include "runtime/io/HostTensor.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "absl/strings/string_view.h"
#include <string>

namespace omni {

/// Decodes the bytes of a .npy file. '<f4' gives F32, '<f8' F64, '<f2' F16,
/// '<i4' I32, '<i8' I64 and '|b1' I1 (any non-zero byte is true). Fails
/// with InvalidArgument for a bad magic string, a format version other than
/// 1.0 or 2.0, a malformed header, big-endian or unsupported dtypes,
/// fortran_order True, and data that is shorter or longer than the shape
/// needs.
absl::StatusOr<HostTensor> parseNpy(absl::string_view bytes);

/// Encodes `tensor` as a .npy file (version 1.0, or 2.0 when the header
/// needs it; header padded to a multiple of 64 bytes as NumPy does). BF16
/// has no NumPy dtype and is written as '<f4', which holds it exactly.
std::string serializeNpy(const HostTensor &tensor);

/// parseNpy on the contents of `path`; errors are prefixed with the path.
absl::StatusOr<HostTensor> readNpyFile(const std::string &path);

/// Writes serializeNpy(tensor) to `path` (replacing it).
absl::Status writeNpyFile(const std::string &path, const HostTensor &tensor);

} // namespace omni

#endif // OMNI_RUNTIME_IO_NPY_H
