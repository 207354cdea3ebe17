//===- TensorBytes.h - HostTensor <-> device bytes --------------*- C++ -*-===//
//
// Device buffers hold tensors as dense little-endian elements of their dtype
// (i1 as one byte, 0 or 1); HostTensor holds them as doubles or int64s.
// These two functions convert with the element codec
// (runtime/io/ElementCodec.h), exactly: a HostTensor's elements are already
// representable in its dtype (a float64-evaluated one is rounded once).
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_EXECUTOR_TENSORBYTES_H
#define OMNI_RUNTIME_EXECUTOR_TENSORBYTES_H

#include "runtime/io/HostTensor.h"

#include "absl/types/span.h"

#include <cstdint>
#include <vector>

namespace omni::executor {

/// The bytes of `tensor` in its dtype's device layout.
std::vector<uint8_t> packTensor(const HostTensor &tensor);

/// A HostTensor from device-layout bytes; `bytes` holds exactly the
/// elements of `shape` in `dtype`.
HostTensor unpackTensor(DType dtype, std::vector<int64_t> shape,
                        absl::Span<const uint8_t> bytes);

} // namespace omni::executor

#endif // OMNI_RUNTIME_EXECUTOR_TENSORBYTES_H
