//===- CudaExecutable.h - A loaded CUDA module ------------------*- C++ -*-===//
//
// A step.bin executable of format Cubin or Ptx on one CudaDevice. Which
// image loads: a cubin when the device can run it (ExecutableSpec.target
// "sm_90a" runs only on compute capability 9.0; a plain "sm_86" on 8.6 and
// later minors of major 8), otherwise the executable's PTX, compiled by the
// driver's JIT for the device; with neither, a one-line error naming both
// architectures. Every launch entry of every kernel (GpuKernelSpec) is
// resolved with cuModuleGetFunction at load, and launches asking for more
// than 48 KiB of dynamic shared memory get the function attribute that
// allows it, so a bad executable fails here and not at its first dispatch.
//
// Scratch: each kernel's scratch buffers (GpuKernelSpec.scratch) are
// allocated once per executable at load, zero-filled, counted in the
// device's bytesInUse. Dispatches of one executable on two streams at once
// would share them, so the executor must not run the same executable
// concurrently on several streams (it does not: one stream per rank).
//
// Ownership: returned by CudaDevice::loadExecutable; the device must outlive
// it. Thread safety: immutable after load.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_HAL_DRIVERS_CUDA_CUDAEXECUTABLE_H
#define OMNI_RUNTIME_HAL_DRIVERS_CUDA_CUDAEXECUTABLE_H

#include "runtime/hal/Buffer.h"
#include "runtime/hal/Executable.h"
#include "runtime/hal/drivers/cuda/CudaApi.h"

#include "absl/status/statusor.h"

#include <memory>
#include <string>
#include <vector>

namespace omni::hal::cuda {

class CudaDevice;

/// Loads a PTX (NUL-terminated) or cubin image into the device's context
/// (bound by the caller), with the JIT's error log in the one-line error.
/// `what` names the image.
absl::StatusOr<CUmodule> loadModule(const CudaDevice &device, const void *image,
                                    const std::string &what);

/// Whether a cubin built for `target` ("sm_90a", "sm_80") runs on a device
/// of compute capability major.minor.
bool cubinRunsOn(const std::string &target, int major, int minor);

class CudaExecutable final : public Executable {
public:
  struct Launch {
    CUfunction function = nullptr;
    const GpuLaunchSpec *spec = nullptr;
  };
  struct Kernel {
    std::vector<Launch> launches;
    std::vector<std::unique_ptr<Buffer>> scratch;
    std::vector<CUdeviceptr> scratchPointers;
  };

  static absl::StatusOr<std::unique_ptr<CudaExecutable>>
  load(CudaDevice &device, const ExecutableSpec &spec);
  ~CudaExecutable() override;

  const std::string &name() const override { return name_; }
  int64_t numKernels() const override {
    return static_cast<int64_t>(kernelNames_.size());
  }
  const std::string &kernelName(int64_t kernel) const override {
    return kernelNames_[static_cast<size_t>(kernel)];
  }
  const Kernel &kernel(int64_t index) const {
    return kernels_[static_cast<size_t>(index)];
  }
  const CudaDevice &device() const { return device_; }

private:
  explicit CudaExecutable(CudaDevice &device) : device_(device) {}
  CudaDevice &device_;
  std::string name_;
  std::vector<std::string> kernelNames_;
  std::vector<GpuKernelSpec> specs_;
  std::vector<Kernel> kernels_;
  CUmodule module_ = nullptr;
};

} // namespace omni::hal::cuda

#endif // OMNI_RUNTIME_HAL_DRIVERS_CUDA_CUDAEXECUTABLE_H
