//===- Buffer.h - Device memory ---------------------------------*- C++ -*-===//
//
// A Buffer is memory owned by a Device, distinct from host memory: host code
// reads and writes it only through a Stream (Stream::readBuffer /
// writeBuffer), or, where the device's memory is host-visible (the cpu
// driver), through the optional map(). Commands name byte ranges of buffers
// with BufferRef, so one allocation (the executor's arena) holds many
// tensors.
//
// Ownership: the creator owns a Buffer through the unique_ptr that
// Device::allocate returns; the Device must outlive its buffers. A BufferRef
// does not own anything. Lifetime: a buffer must stay alive until every
// submitted command that uses it has completed (Stream::synchronize or an
// Event). Thread safety: the methods are safe to call concurrently; the
// contents are not synchronized (ordering comes from streams).
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_HAL_BUFFER_H
#define OMNI_RUNTIME_HAL_BUFFER_H

#include "absl/status/statusor.h"

#include <cstdint>

namespace omni::hal {

class Device;

class Buffer {
public:
  virtual ~Buffer() = default;

  /// Size in bytes.
  virtual int64_t size() const = 0;

  /// The device that allocated it.
  virtual Device &device() const = 0;

  /// Optional: a host pointer to the bytes, for devices whose memory the
  /// host can address (cpu). The pointer is valid for the buffer's
  /// lifetime; accesses must be ordered with the stream's commands by the
  /// caller (synchronize first). Default: Unimplemented.
  virtual absl::StatusOr<void *> map();
};

/// A byte range [offset, offset + length) of a buffer. Non-owning. A
/// default BufferRef (null buffer) means "absent" where a command allows it.
struct BufferRef {
  Buffer *buffer = nullptr;
  int64_t offset = 0;
  int64_t length = 0;

  /// The whole of `buffer`.
  static BufferRef all(Buffer &buffer) {
    return BufferRef{&buffer, 0, buffer.size()};
  }
  bool operator==(const BufferRef &o) const {
    return buffer == o.buffer && offset == o.offset && length == o.length;
  }
  bool operator!=(const BufferRef &o) const { return !(*this == o); }
};

} // namespace omni::hal

#endif // OMNI_RUNTIME_HAL_BUFFER_H
