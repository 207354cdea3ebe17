//===- TensorText.h - Tensors as command-line text --------------*- C++ -*-===//
//
// The text forms of HostTensor that tools read and print, following
// iree-run-module: an argument is either `@path.npy` or an inline literal
// `2x3xf32=1,2,3,4,5,6` (a scalar is `f32=1.5` or `i64=7`), and a result is
// printed as `tensor<2x3xf32>=[[1 2 3][4 5 6]]` with a chosen number of
// significant digits so that lit tests can FileCheck numbers. MLIR-free.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_IO_TENSORTEXT_H
#define OMNI_RUNTIME_IO_TENSORTEXT_H

#include "runtime/io/HostTensor.h"

#include "absl/status/statusor.h"

#include "absl/strings/string_view.h"
#include <string>

namespace omni {

/// Parses `[DIMxDIMx...]DTYPE=VALUES`: dimensions are non-negative decimal
/// integers, DTYPE is an MLIR element type spelling (dtypeName), and VALUES
/// lists exactly the row-major elements, separated by commas and/or spaces
/// (square brackets are ignored, so `[[1,2],[3,4]]` works). Float values
/// accept decimal and exponent notation, `inf` and `nan`, and are rounded to
/// the dtype; integer values must be integers in the dtype's range (parsed
/// exactly, never through a double); i1 values are 0, 1, true or false.
absl::StatusOr<HostTensor> parseInlineTensor(absl::string_view text);

/// A tool argument: `@path` reads a .npy file (readNpyFile), anything else
/// is parseInlineTensor.
absl::StatusOr<HostTensor> parseTensorArgument(absl::string_view text);

/// The elements nested by dimension, `[[1 2 3][4 5 6]]`, or the bare value
/// for a scalar. Floats use printf's %.<digits>g (9 digits identify a
/// float32, 17 a float64); integers print exactly; i1 prints 0 or 1.
std::string formatValues(const HostTensor &tensor, int digits);

/// `tensor<2x3xf32>=` followed by formatValues.
std::string formatTensor(const HostTensor &tensor, int digits);

} // namespace omni

#endif // OMNI_RUNTIME_IO_TENSORTEXT_H
