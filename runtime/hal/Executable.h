//===- Executable.h - Loaded native kernels ---------------------*- C++ -*-===//
//
// An Executable is a step.bin executable (an ELF shared object for the cpu
// driver, PTX or a cubin for cuda) loaded onto a Device, with every kernel
// it exports resolved by name at load time, so that a missing symbol is a
// load error, never a crash at the first Dispatch. Kernels are referred to
// by their index in ExecutableSpec::kernels. Target checks (CPU features,
// SM architecture) belong to the driver's loadExecutable, which knows its
// device.
//
// Ownership: returned by Device::loadExecutable as a unique_ptr; the Device
// must outlive it, and it must outlive every submitted Dispatch that uses it.
// Thread safety: immutable after load.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_HAL_EXECUTABLE_H
#define OMNI_RUNTIME_HAL_EXECUTABLE_H

#include "absl/types/span.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace omni::hal {

/// The formats of step.bin's ExecutableFormat.
enum class ExecutableFormat { ElfSharedObject, Ptx, Cubin };

/// One GPU kernel launch (step.fbs GpuLaunch): `args` index the kernel's
/// buffers (the dispatch's buffers, then the scratch buffers); the entry
/// takes those pointers, then every dispatch scalar as an i64.
struct GpuLaunchSpec {
  std::string entry;
  uint32_t grid[3] = {1, 1, 1};
  uint32_t block[3] = {1, 1, 1};
  uint32_t sharedBytes = 0;
  std::vector<uint32_t> args;
};

/// How one kernel of a Ptx/Cubin executable runs (step.fbs GpuKernel).
struct GpuKernelSpec {
  std::vector<GpuLaunchSpec> launches;
  /// Bytes of each scratch buffer.
  std::vector<int64_t> scratch;
};

/// What Device::loadExecutable needs. Non-owning: `code` must stay valid
/// for the duration of the call only.
struct ExecutableSpec {
  /// For messages.
  std::string name;
  ExecutableFormat format = ExecutableFormat::ElfSharedObject;
  absl::Span<const uint8_t> code;
  /// What the code needs of the device (step.fbs Executable.target): for
  /// ElfSharedObject the LLVM feature string ("+avx2,+fma"), for Ptx/Cubin
  /// the SM architecture. The driver checks it in loadExecutable and refuses
  /// code its device cannot run; the loader does not interpret it.
  std::string target;
  /// The exported kernel symbols, in Dispatch's index order.
  std::vector<std::string> kernels;
  /// Ptx/Cubin: one per kernel, how it launches (empty for other formats).
  std::vector<GpuKernelSpec> gpuKernels;
  /// Cubin: the PTX it was assembled from (the fallback for a device of
  /// another architecture); empty when absent.
  absl::Span<const uint8_t> ptx;
};

class Executable {
public:
  virtual ~Executable() = default;

  virtual const std::string &name() const = 0;
  virtual int64_t numKernels() const = 0;
  virtual const std::string &kernelName(int64_t kernel) const = 0;

  /// The index of the kernel called `name`, if exported.
  std::optional<int64_t> findKernel(const std::string &name) const {
    for (int64_t k = 0; k < numKernels(); ++k)
      if (kernelName(k) == name)
        return k;
    return std::nullopt;
  }
};

} // namespace omni::hal

#endif // OMNI_RUNTIME_HAL_EXECUTABLE_H
