//===- CudaApi.h - The CUDA driver API and cuBLASLt, loaded at run time ---===//
//
// omni never links libcuda or the CUDA libraries (docs/backend.md): the
// runtime must build, link and run on machines without them. CudaApi
// dlopen()s libcuda.so.1 (or $OMNI_CUDA_DRIVER_LIBRARY, for tests), takes
// cuGetProcAddress_v2 with dlsym and resolves every driver entry point the
// cuda driver uses through it, asking for the CUDA 12.0 ABI of each (the
// oldest driver omni accepts; none of the entries below changed signature
// since). cuBLASLt (libcublasLt.so.13, then .12, or $OMNI_CUBLASLT_LIBRARY)
// and cuDNN (libcudnn.so.9, or $OMNI_CUDNN_LIBRARY) are opened, their
// entries found by dlsym, when a stream first needs them. The three
// variables are for tests: host/ is a model of libcuda, cuBLASLt and NCCL
// on the CPU that the cuda driver's tests run against where no GPU is at
// hand.
// The toolkit headers give the types only.
//
// Errors are one line, meant for users: no driver library, a library
// without the entry points, the toolkit's stub library, a driver older
// than 12.0, no device, an ordinal past the last device. They are
// Unavailable ("no usable GPU"), so callers and tests can tell a machine
// without a GPU from a real failure.
//
// Ownership: CudaApi::load returns an owned table; the library handles stay
// open for the process's lifetime (unloading libcuda while any context
// lives is unsafe). Thread safety: immutable after load, except the lazy
// cuBLASLt and cuDNN tables, each initialized once under a std::once_flag.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_HAL_DRIVERS_CUDA_CUDAAPI_H
#define OMNI_RUNTIME_HAL_DRIVERS_CUDA_CUDAAPI_H

#include <cublasLt.h>
#include <cuda.h>
#include <cudnn.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include <memory>
#include <mutex>
#include <string>

namespace omni::hal::cuda {

// The driver entry points, by the names cuGetProcAddress knows (cuda.h maps
// some names to their _v2 versions with macros; the member and the call
// sites go through the same macro, the string does not). At the 12.0 ABI:
// cuStreamBeginCapture is cuStreamBeginCapture_v2 (with a capture mode,
// since 10.1), cuGraphInstantiateWithFlags and cuDeviceGetGraphMemAttribute
// exist since 11.4, the other graph entries since 10.0, all unchanged up to
// 13.0 (cuda.h).
#define OMNI_CUDA_DRIVER_ENTRIES(X)                                            \
  X(cuGetErrorName)                                                            \
  X(cuGetErrorString)                                                          \
  X(cuInit)                                                                    \
  X(cuDeviceGetCount)                                                          \
  X(cuDeviceGet)                                                               \
  X(cuDeviceGetName)                                                           \
  X(cuDeviceGetAttribute)                                                      \
  X(cuDeviceTotalMem)                                                          \
  X(cuDeviceGetDefaultMemPool)                                                 \
  X(cuMemPoolSetAttribute)                                                     \
  X(cuDevicePrimaryCtxRetain)                                                  \
  X(cuDevicePrimaryCtxRelease)                                                 \
  X(cuCtxSetCurrent)                                                           \
  X(cuStreamCreate)                                                            \
  X(cuStreamDestroy)                                                           \
  X(cuStreamSynchronize)                                                       \
  X(cuStreamWaitEvent)                                                         \
  X(cuEventCreate)                                                             \
  X(cuEventDestroy)                                                            \
  X(cuEventRecord)                                                             \
  X(cuEventQuery)                                                              \
  X(cuEventSynchronize)                                                        \
  X(cuMemAllocAsync)                                                           \
  X(cuMemFreeAsync)                                                            \
  X(cuMemHostAlloc)                                                            \
  X(cuMemFreeHost)                                                             \
  X(cuMemcpyHtoDAsync)                                                         \
  X(cuMemcpyDtoHAsync)                                                         \
  X(cuMemcpyDtoDAsync)                                                         \
  X(cuMemsetD8Async)                                                           \
  X(cuMemsetD16Async)                                                          \
  X(cuMemsetD32Async)                                                          \
  X(cuLaunchHostFunc)                                                          \
  X(cuModuleLoadDataEx)                                                        \
  X(cuModuleUnload)                                                            \
  X(cuModuleGetFunction)                                                       \
  X(cuFuncSetAttribute)                                                        \
  X(cuLaunchKernel)                                                            \
  X(cuStreamBeginCapture)                                                      \
  X(cuStreamEndCapture)                                                        \
  X(cuGraphInstantiateWithFlags)                                               \
  X(cuGraphLaunch)                                                             \
  X(cuGraphExecDestroy)                                                        \
  X(cuGraphDestroy)                                                            \
  X(cuDeviceGetGraphMemAttribute)

#define OMNI_CUBLASLT_ENTRIES(X)                                               \
  X(cublasLtCreate)                                                            \
  X(cublasLtDestroy)                                                           \
  X(cublasLtGetStatusString)                                                   \
  X(cublasLtMatmulDescCreate)                                                  \
  X(cublasLtMatmulDescDestroy)                                                 \
  X(cublasLtMatmulDescSetAttribute)                                            \
  X(cublasLtMatrixLayoutCreate)                                                \
  X(cublasLtMatrixLayoutDestroy)                                               \
  X(cublasLtMatrixLayoutSetAttribute)                                          \
  X(cublasLtMatmulPreferenceCreate)                                            \
  X(cublasLtMatmulPreferenceDestroy)                                           \
  X(cublasLtMatmulPreferenceSetAttribute)                                      \
  X(cublasLtMatmulAlgoGetHeuristic)                                            \
  X(cublasLtMatmul)

#define OMNI_CUDNN_ENTRIES(X)                                                  \
  X(cudnnGetVersion)                                                           \
  X(cudnnGetErrorString)                                                       \
  X(cudnnCreate)                                                               \
  X(cudnnDestroy)                                                              \
  X(cudnnSetStream)                                                            \
  X(cudnnCreateTensorDescriptor)                                               \
  X(cudnnSetTensor4dDescriptor)                                                \
  X(cudnnDestroyTensorDescriptor)                                              \
  X(cudnnCreateFilterDescriptor)                                               \
  X(cudnnSetFilter4dDescriptor)                                                \
  X(cudnnDestroyFilterDescriptor)                                              \
  X(cudnnCreateConvolutionDescriptor)                                          \
  X(cudnnSetConvolution2dDescriptor)                                           \
  X(cudnnSetConvolutionMathType)                                               \
  X(cudnnGetConvolution2dForwardOutputDim)                                     \
  X(cudnnDestroyConvolutionDescriptor)                                         \
  X(cudnnGetConvolutionForwardAlgorithm_v7)                                    \
  X(cudnnConvolutionForward)

/// cuDNN's entry points (the legacy convolution API of cuDNN 9).
struct CudnnApi {
#define OMNI_DECLARE_ENTRY(name) decltype(&::name) name = nullptr;
  OMNI_CUDNN_ENTRIES(OMNI_DECLARE_ENTRY)
#undef OMNI_DECLARE_ENTRY
};

/// cuBLASLt's entry points.
struct CublasLtApi {
#define OMNI_DECLARE_ENTRY(name) decltype(&::name) name = nullptr;
  OMNI_CUBLASLT_ENTRIES(OMNI_DECLARE_ENTRY)
#undef OMNI_DECLARE_ENTRY
};

class CudaApi {
public:
  /// The oldest driver accepted (cuDriverGetVersion's encoding).
  static constexpr int kMinDriverVersion = 12000;

  /// Opens `library` (empty: $OMNI_CUDA_DRIVER_LIBRARY if set, else
  /// "libcuda.so.1"), resolves every entry point, checks the version and
  /// runs cuInit(0). Unavailable with the one-line reasons above.
  static absl::StatusOr<std::unique_ptr<CudaApi>>
  load(const std::string &library = "");

  /// The number of devices (>= 1 after a successful load).
  int deviceCount() const { return deviceCount_; }
  /// cuDriverGetVersion's value (12040 is 12.4).
  int driverVersion() const { return driverVersion_; }

  /// OK, or Unavailable "cuda: device 3 requested but only 1 present"
  /// (InvalidArgument for a negative ordinal).
  absl::Status checkOrdinal(int ordinal) const;

  /// cuBLASLt, opened on first use; Unavailable (one line) when missing.
  absl::StatusOr<const CublasLtApi *> cublasLt() const;
  /// cuDNN 9 (libcudnn.so.9), opened on first use; Unavailable when
  /// missing (conv2d then uses im2col + cuBLASLt).
  absl::StatusOr<const CudnnApi *> cudnn() const;

  /// "CUDA_ERROR_NO_DEVICE" for a CUresult (the driver's name when it
  /// knows it, else a built-in table, else "CUresult <n>").
  std::string errorName(CUresult result) const;
  /// "<what>: <NAME> (<driver's description>)" as an Internal status, or
  /// OK for CUDA_SUCCESS. Out-of-memory results are ResourceExhausted.
  absl::Status check(CUresult result, const std::string &what) const;

#define OMNI_DECLARE_ENTRY(name) decltype(&::name) name = nullptr;
  OMNI_CUDA_DRIVER_ENTRIES(OMNI_DECLARE_ENTRY)
#undef OMNI_DECLARE_ENTRY

private:
  CudaApi() = default;
  int deviceCount_ = 0;
  int driverVersion_ = 0;
  mutable std::once_flag cublasLtOnce_;
  mutable absl::StatusOr<const CublasLtApi *> cublasLt_ =
      absl::UnknownError("not loaded");
  mutable CublasLtApi cublasLtTable_;
  mutable std::once_flag cudnnOnce_;
  mutable absl::StatusOr<const CudnnApi *> cudnn_ =
      absl::UnknownError("not loaded");
  mutable CudnnApi cudnnTable_;
};

/// A name for CUresult values the driver might not be able to name (its
/// own cuGetErrorName is not available before the library loads).
const char *builtinCudaErrorName(int result);

} // namespace omni::hal::cuda

#endif // OMNI_RUNTIME_HAL_DRIVERS_CUDA_CUDAAPI_H
