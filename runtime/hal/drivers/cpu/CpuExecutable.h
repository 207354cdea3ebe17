//===- CpuExecutable.h - ELF shared objects loaded from memory --*- C++ -*-===//
//
// step.bin embeds each CPU executable as the bytes of an ELF shared object.
// CpuExecutable writes them to an anonymous memory file (memfd_create, never
// the file system) and dlopens /proc/self/fd/N, then resolves every kernel
// symbol with dlsym. The memfd stays open for the executable's lifetime:
// glibc identifies loaded objects by path, so a live executable's fd number
// must not be reused by another one (load() also refuses a path glibc
// already knows). Before anything is loaded, the spec's target (the LLVM
// feature string the code was compiled for) is checked against the CPU's
// /proc/cpuinfo flags, so that code using an instruction the CPU lacks is a
// load error, not a SIGILL in the middle of a run.
//
// Ownership: owns the dlopen handle and the memfd (closed on destruction).
// Thread safety: immutable after load.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_HAL_DRIVERS_CPU_CPUEXECUTABLE_H
#define OMNI_RUNTIME_HAL_DRIVERS_CPU_CPUEXECUTABLE_H

#include "runtime/base/CpuFeatures.h"
#include "runtime/hal/Executable.h"

#include "absl/status/statusor.h"

#include <memory>

namespace omni::hal::cpu {

/// The kernel ABI of docs/backend.md.
using KernelFn = void (*)(int64_t begin, int64_t end, void **buffers,
                          const int64_t *scalars);

class CpuExecutable final : public Executable {
public:
  /// Checks the target, then loads the code and resolves every kernel.
  /// `cpu` is the CPU the code must run on (tests simulate others);
  /// nullptr means CpuFeatures::host().
  static absl::StatusOr<std::unique_ptr<CpuExecutable>>
  load(const ExecutableSpec &spec, const CpuFeatures *cpu = nullptr);

  /// Whether `cpu` has every instruction-set feature of `spec.target`:
  /// FailedPrecondition "executable 'k': needs avx2 (cpuinfo flag avx2),
  /// which this CPU lacks" otherwise.
  static absl::Status checkTarget(const ExecutableSpec &spec,
                                  const CpuFeatures &cpu);
  ~CpuExecutable() override;

  const std::string &name() const override { return name_; }
  int64_t numKernels() const override {
    return static_cast<int64_t>(kernels_.size());
  }
  const std::string &kernelName(int64_t kernel) const override {
    return kernelNames_[kernel];
  }
  KernelFn kernel(int64_t index) const { return kernels_[index]; }

private:
  CpuExecutable() = default;
  std::string name_;
  std::vector<std::string> kernelNames_;
  std::vector<KernelFn> kernels_;
  void *handle_ = nullptr;
  int fd_ = -1;
};

} // namespace omni::hal::cpu

#endif // OMNI_RUNTIME_HAL_DRIVERS_CPU_CPUEXECUTABLE_H
