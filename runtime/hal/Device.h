//===- Device.h - One accelerator (or the host CPU) -------------*- C++ -*-===//
//
// A Device is what the executor runs a program on: it allocates device
// memory (Buffer), loads native code (Executable), creates command queues
// (Stream) and, optionally, collective channels (Channel): each rank of a
// group passes its ChannelSpec (from a ChannelProvider, Channel.h) to its
// own device's createChannel. The executor sees
// only this interface, never a concrete driver; a driver (hal/drivers/<name>)
// implements it and a Driver creates it (Driver.h, DriverRegistry.h).
//
// Ownership: created by Driver::createDevice as a unique_ptr. The Device
// must outlive every Buffer, Executable, Stream and Channel it created.
// Thread safety: every method may be called concurrently.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_HAL_DEVICE_H
#define OMNI_RUNTIME_HAL_DEVICE_H

#include "runtime/hal/Buffer.h"
#include "runtime/hal/Channel.h"
#include "runtime/hal/Executable.h"
#include "runtime/hal/Library.h"
#include "runtime/hal/Stream.h"

#include "absl/status/statusor.h"

#include <memory>
#include <string>

namespace omni::hal {

class Device {
public:
  virtual ~Device() = default;

  /// The driver's name ("cpu", "cuda") and a description for humans.
  virtual const std::string &driverName() const = 0;
  virtual std::string description() const = 0;

  /// A zero-filled buffer of `bytes` bytes (>= 0). Fails with
  /// ResourceExhausted when the memory (or the device's limit) runs out.
  virtual absl::StatusOr<std::unique_ptr<Buffer>> allocate(int64_t bytes) = 0;

  /// Whether loadExecutable accepts `format`.
  virtual bool supportsFormat(ExecutableFormat format) const = 0;

  /// Loads `spec.code` and resolves every kernel of `spec.kernels`.
  virtual absl::StatusOr<std::unique_ptr<Executable>>
  loadExecutable(const ExecutableSpec &spec) = 0;

  virtual absl::StatusOr<std::unique_ptr<Stream>> createStream() = 0;

  /// Optional: whether Stream's `library` routine supports `dtype`.
  /// Default: false.
  virtual bool supportsLibrary(Library library, DType dtype) const;

  /// Optional: whether replaying a captured Graph (Stream::beginCapture)
  /// is worth its capture on this device, because submitting commands one
  /// by one costs more than running them (a GPU's launch latency). The
  /// executor captures loops by default only where this is true.
  /// Default: false.
  virtual bool prefersGraphs() const;

  /// Optional: the bytes of this device's buffers that are allocated and
  /// not yet freed (what `allocate` counts against its limit), for
  /// reporting (omnirun --stats). Default: -1, not counted.
  virtual int64_t bytesInUse() const;

  /// Optional: this rank's channel of the group `spec` describes
  /// (Channel.h). Fails with InvalidArgument for a spec that
  /// validateChannelSpec refuses or whose rank already has a channel, and
  /// Unimplemented for a bootstrap kind the driver does not support.
  /// Default: Unimplemented.
  virtual absl::StatusOr<std::unique_ptr<Channel>>
  createChannel(const ChannelSpec &spec);
};

} // namespace omni::hal

#endif // OMNI_RUNTIME_HAL_DEVICE_H
