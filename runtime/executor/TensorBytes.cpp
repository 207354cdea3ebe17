//===- TensorBytes.cpp - HostTensor <-> device bytes ------------*- C++ -*-===//
//
// A thin layer over the element codec (runtime/io/ElementCodec.h), which
// owns every rule (rounding, NaN, i1 bytes).
//
//===----------------------------------------------------------------------===//

#include "runtime/executor/TensorBytes.h"

#include "runtime/io/ElementCodec.h"

#include <cassert>

namespace omni::executor {

std::vector<uint8_t> packTensor(const HostTensor &tensor) {
  std::vector<uint8_t> bytes(
      static_cast<size_t>(tensor.numElements() * dtypeSize(tensor.dtype())));
  if (tensor.isFloat())
    encodeFloats(tensor.dtype(), tensor.floats(), absl::MakeSpan(bytes));
  else
    encodeInts(tensor.dtype(), tensor.ints(), absl::MakeSpan(bytes));
  return bytes;
}

HostTensor unpackTensor(DType dtype, std::vector<int64_t> shape,
                        absl::Span<const uint8_t> bytes) {
  HostTensor tensor(dtype, std::move(shape));
  assert(static_cast<int64_t>(bytes.size()) ==
         tensor.numElements() * dtypeSize(dtype));
  if (tensor.isFloat())
    decodeFloats(dtype, bytes, tensor.floats());
  else
    // Device i1 bytes are 0 or 1 by construction (ElementCodec.h); were one
    // not, the element would read as its low bit, as a kernel reads it.
    decodeInts(dtype, bytes, tensor.ints()).IgnoreError();
  return tensor;
}

} // namespace omni::executor
