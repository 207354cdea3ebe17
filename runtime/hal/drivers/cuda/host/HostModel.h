//===- HostModel.h - CUDA libraries modelled on the CPU --------*- C++ -*-===//
//
// A shared library (OmniHostCuda) that the cuda driver loads in place of
// libcuda.so.1 ($OMNI_CUDA_DRIVER_LIBRARY), cuBLASLt
// ($OMNI_CUBLASLT_LIBRARY), cuDNN's convolution ($OMNI_CUDNN_LIBRARY;
// HostCudnn.cpp) and NCCL ($OMNI_NCCL_LIBRARY; HostNccl.cpp),
// so that the driver's own code (CudaDevice,
// CudaStream, CudaLibraries, CudaExecutable: allocation, staging, fills,
// copies, events, graphs, the gemm plans, the attention and convolution
// paths) runs in every CI job on a machine without a GPU. It is a model,
// not an emulator:
// - "device" memory is host memory; every pointer a command names must lie
//   inside one live allocation, or the call fails as a driver would
//   (CUDA_ERROR_INVALID_VALUE), so an offset bug is an error, not a silent
//   write past a buffer;
// - each device has a primary context, each thread a current one; streams,
//   modules and allocations belong to a device, and kernels and library
//   calls touch only their stream's device's memory (copies any);
// - a stream holds its commands until something needs them: a
//   synchronization of the stream or of an event recorded on it, a wait
//   of another stream on such an event (the second time an event is
//   queried), cuMemFreeHost, a module's unloading, the stream's
//   destruction (OMNI_HOST_CUDA_SCHEDULE=deferred, the default). So a
//   missing synchronization reads stale bytes, and a buffer freed while
//   queued work uses it fails that work. With =eager each command runs
//   when it is enqueued. Both are orders a GPU could choose. A failed
//   command's error is sticky: the stream drops what follows and reports
//   it at each synchronization, as a GPU's asynchronous errors are. While
//   a stream captures, commands are recorded instead (their kernel
//   parameters and memset values copied, as the driver copies them) and
//   run at each cuGraphLaunch;
// - kernels are host functions found by entry name (HostKernels.cpp): the
//   driver's helper kernels (Philox, fills, im2col, softmax, the
//   attention's dS, and the flash kernels through their own host model,
//   kernels/FlashAttentionHostModel.h) and the CudaGpuTest PTX kernel. A
//   module's other entries load but fail at launch: compiled programs'
//   kernels (omnic --target=cuda) need a GPU;
// - cuBLASLt's matmul is a loop in double, rounded once to the output
//   type; it refuses descriptor attributes the driver does not set and
//   pointers less aligned than the plan promised.
// Everything is behind one mutex: the model is for correctness, not speed.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_HAL_DRIVERS_CUDA_HOST_HOSTMODEL_H
#define OMNI_RUNTIME_HAL_DRIVERS_CUDA_HOST_HOSTMODEL_H

#include "runtime/io/DType.h"

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace omni::hal::cuda::host {

using omni::DType;

/// A launch's shape.
struct LaunchDims {
  unsigned grid[3];
  unsigned block[3];
  unsigned sharedBytes;
};

/// A kernel the model runs: its parameters' sizes (to copy them when a
/// launch is captured) and the host function, given pointers to each
/// parameter as cuLaunchKernel's kernelParams.
struct HostKernel {
  std::vector<size_t> paramSizes;
  std::function<CUresult(const LaunchDims &, void **)> run;
};

/// The kernel named `entry`, or null when the model has none.
const HostKernel *findKernel(const std::string &entry);

/// Runs `op` on `stream` now, or records it while the stream captures (a
/// recorded op runs at each launch of the graph). Returns op's result, or
/// CUDA_SUCCESS when recorded. A null stream is the legacy default
/// stream, which never captures.
CUresult submit(CUstream stream, std::function<CUresult()> op);

/// sm_90's opt-in limit of dynamic shared memory per block.
constexpr int kSharedOptIn = 227 * 1024;

/// One entry point of cuGetProcAddress_v2's table. OMNI_HOST_ENTRY(cuX)
/// names host_cuX, checked against cuda.h's declaration of cuX (the
/// static_cast fails to compile on a signature mismatch).
struct ProcEntry {
  const char *name;
  void *function;
};
#define OMNI_HOST_ENTRY(name)                                                  \
  ::omni::hal::cuda::host::ProcEntry {                                         \
    #name,                                                                     \
        reinterpret_cast<void *>(static_cast<decltype(&::name)>(&host_##name)) \
  }

/// HostModules.cpp's entry points (modules, functions, launches), or null.
void *moduleEntry(const char *name);

/// Runs every stream's queued work up to what waits for other ranks.
void runRunnable();

/// Takes the model's lock for the scope.
#define OMNI_HOST_LOCK                                                         \
  std::lock_guard<std::recursive_mutex> lock(                                  \
      ::omni::hal::cuda::host::modelMutex())

/// What a queued command returns while it waits for other ranks (a
/// collective of the NCCL model): the stream keeps it at its front and
/// runs it again later.
constexpr CUresult kParked = CUDA_ERROR_NOT_READY;

/// Wakes threads blocked in a synchronization (a collective completed).
void notifyProgress();

/// An element of `dtype` at `p` as a double (exact), and `value` rounded
/// once to `dtype` (nearest even; integers truncate) and stored at `p`:
/// how the cuBLASLt and NCCL models read and write (HostKernels.cpp).
double loadElement(DType dtype, const void *p);
void storeElement(DType dtype, void *p, double value);

/// The element type a library's type enum `value` names in `table`, or
/// none (a type the model lacks).
template <typename Enum, size_t N>
std::optional<DType> dtypeIn(Enum value,
                             const std::pair<Enum, DType> (&table)[N]) {
  for (const auto &[e, dtype] : table)
    if (e == value)
      return dtype;
  return std::nullopt;
}

/// The device of the context current on this thread (cuCtxSetCurrent),
/// or -1 when none is.
int currentDevice();

/// The GPU of the host behind this process's device `ordinal`: the
/// ordinal itself, or under CUDA_VISIBLE_DEVICES its entry there. The
/// host has OMNI_HOST_CUDA_DEVICES GPUs (default 1); a process sees those
/// CUDA_VISIBLE_DEVICES lists, as CUDA's driver does (decimal indices up
/// to the first that is not one, or not below the host's count).
int physicalDevice(int ordinal);

/// This host's name (gethostname): GPUs of one host are one physical set.
std::string hostName();

/// The device whose work this thread runs: a stream's while its queued
/// commands run, else -1 (any: the checks made when a command is
/// enqueued accept any GPU's memory; the command checks again when it
/// runs).
int runningDevice();

/// The device a stream belongs to (a null stream: the current context's).
int streamDevice(CUstream stream);

/// The device of the allocation holding `address`, or -1.
int allocationDevice(uintptr_t address);

/// Whether [address, address + bytes) lies inside one live allocation of
/// runningDevice() (of any device when that is -1): kernels and library
/// calls read and write only their own GPU's memory (no peer access).
/// Copies take isAnyDeviceRange: they may cross GPUs.
bool isDeviceRange(uintptr_t address, size_t bytes);
bool isAnyDeviceRange(uintptr_t address, size_t bytes);

/// The lock every entry point of the model takes (kernels run under it;
/// the flash kernels' host threads never call the model).
std::recursive_mutex &modelMutex();

} // namespace omni::hal::cuda::host

#endif // OMNI_RUNTIME_HAL_DRIVERS_CUDA_HOST_HOSTMODEL_H
