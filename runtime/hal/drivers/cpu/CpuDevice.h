//===- CpuDevice.h - The host CPU as a hal Device ---------------*- C++ -*-===//
//
// The cpu driver's Device: buffers are 64-byte aligned host allocations
// (CpuBuffer, mappable), executables are ELF shared objects loaded from
// memory (CpuExecutable), streams execute each command eagerly on the
// device's thread pool (CpuStream), matmuls go to OpenBLAS, and channels
// connect ranks that are threads of this process (CpuChannel; a loopback
// for a group of one). Only hal/drivers/Drivers.cpp names this
// class; everything else sees hal::Device.
//
// Ownership: the CpuDevice owns the thread pool; it must outlive everything
// it creates. Thread safety: as hal::Device.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_HAL_DRIVERS_CPU_CPUDEVICE_H
#define OMNI_RUNTIME_HAL_DRIVERS_CPU_CPUDEVICE_H

#include "runtime/hal/Device.h"
#include "runtime/hal/Driver.h"
#include "runtime/hal/drivers/cpu/ThreadPool.h"

#include <atomic>
#include <memory>

namespace omni::hal::cpu {

class CpuDevice;

/// Host memory owned by a CpuDevice.
class CpuBuffer final : public Buffer {
public:
  CpuBuffer(CpuDevice &device, uint8_t *data, int64_t size);
  ~CpuBuffer() override;

  int64_t size() const override { return size_; }
  Device &device() const override;
  absl::StatusOr<void *> map() override { return data_; }

  uint8_t *data() const { return data_; }

private:
  CpuDevice &device_;
  uint8_t *data_;
  int64_t size_;
};

class CpuDevice final : public Device {
public:
  /// options.threads = 0 uses std::thread::hardware_concurrency().
  explicit CpuDevice(const DeviceOptions &options);
  ~CpuDevice() override;

  const std::string &driverName() const override;
  std::string description() const override;
  absl::StatusOr<std::unique_ptr<Buffer>> allocate(int64_t bytes) override;
  bool supportsFormat(ExecutableFormat format) const override;
  absl::StatusOr<std::unique_ptr<Executable>>
  loadExecutable(const ExecutableSpec &spec) override;
  absl::StatusOr<std::unique_ptr<Stream>> createStream() override;
  bool supportsLibrary(Library library, DType dtype) const override;
  int64_t bytesInUse() const override {
    return allocated_.load(std::memory_order_relaxed);
  }
  absl::StatusOr<std::unique_ptr<Channel>>
  createChannel(const ChannelSpec &spec) override;

  ThreadPool &pool() { return pool_; }

private:
  friend class CpuBuffer;
  ThreadPool pool_;
  const int64_t memoryLimit_;
  std::atomic<int64_t> allocated_{0};
};

} // namespace omni::hal::cpu

#endif // OMNI_RUNTIME_HAL_DRIVERS_CPU_CPUDEVICE_H
