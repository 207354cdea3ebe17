//===- CudaApi.cpp - The CUDA driver API and cuBLASLt, loaded at run time -===//
//
// See CudaApi.h. The order of the checks decides which one-line error a
// user sees: the library, its loader entry, the stub library, the driver
// version, cuInit, the device count.
//
//===----------------------------------------------------------------------===//

#include "runtime/hal/drivers/cuda/CudaApi.h"

#include "absl/strings/str_cat.h"

#include <cstdlib>
#include <dlfcn.h>
#include <string>
#include <vector>

namespace omni::hal::cuda {
namespace {

using GetProcAddressFn = CUresult (*)(const char *, void **, int, cuuint64_t,
                                      CUdriverProcAddressQueryResult *);

std::string lastDlError() {
  const char *e = dlerror();
  return e ? e : "unknown dlopen error";
}

std::string versionString(int version) {
  return absl::StrCat(version / 1000, ".", (version % 1000) / 10);
}

} // namespace

const char *builtinCudaErrorName(int result) {
  switch (result) {
  case CUDA_SUCCESS:
    return "CUDA_SUCCESS";
  case CUDA_ERROR_INVALID_VALUE:
    return "CUDA_ERROR_INVALID_VALUE";
  case CUDA_ERROR_OUT_OF_MEMORY:
    return "CUDA_ERROR_OUT_OF_MEMORY";
  case CUDA_ERROR_NOT_INITIALIZED:
    return "CUDA_ERROR_NOT_INITIALIZED";
  case CUDA_ERROR_STUB_LIBRARY:
    return "CUDA_ERROR_STUB_LIBRARY";
  case CUDA_ERROR_NO_DEVICE:
    return "CUDA_ERROR_NO_DEVICE";
  case CUDA_ERROR_INVALID_DEVICE:
    return "CUDA_ERROR_INVALID_DEVICE";
  case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
    return "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH";
  case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE:
    return "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE";
  case CUDA_ERROR_NO_BINARY_FOR_GPU:
    return "CUDA_ERROR_NO_BINARY_FOR_GPU";
  case CUDA_ERROR_INVALID_PTX:
    return "CUDA_ERROR_INVALID_PTX";
  case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
    return "CUDA_ERROR_UNSUPPORTED_PTX_VERSION";
  case CUDA_ERROR_NOT_FOUND:
    return "CUDA_ERROR_NOT_FOUND";
  case CUDA_ERROR_ILLEGAL_ADDRESS:
    return "CUDA_ERROR_ILLEGAL_ADDRESS";
  case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES:
    return "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES";
  case CUDA_ERROR_LAUNCH_FAILED:
    return "CUDA_ERROR_LAUNCH_FAILED";
  case CUDA_ERROR_NOT_SUPPORTED:
    return "CUDA_ERROR_NOT_SUPPORTED";
  case CUDA_ERROR_UNKNOWN:
    return "CUDA_ERROR_UNKNOWN";
  default:
    return nullptr;
  }
}

absl::StatusOr<std::unique_ptr<CudaApi>>
CudaApi::load(const std::string &library) {
  std::string path = library;
  if (path.empty()) {
    const char *env = std::getenv("OMNI_CUDA_DRIVER_LIBRARY");
    path = env && *env ? env : "libcuda.so.1";
  }
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle)
    return absl::UnavailableError(
        absl::StrCat("cuda: no NVIDIA driver (", lastDlError(), ")"));
  auto getProcAddress =
      reinterpret_cast<GetProcAddressFn>(dlsym(handle, "cuGetProcAddress_v2"));
  if (!getProcAddress)
    return absl::UnavailableError(absl::StrCat(
        "cuda: no NVIDIA driver (", path,
        " has no cuGetProcAddress_v2; the driver must be 12.0 or newer)"));

  std::unique_ptr<CudaApi> api(new CudaApi());
  // cuDriverGetVersion first: it works before cuInit, and an old driver
  // must be reported as such rather than as a missing entry point.
  decltype(&::cuDriverGetVersion) driverGetVersion = nullptr;
  CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  CUresult r = getProcAddress(
      "cuDriverGetVersion", reinterpret_cast<void **>(&driverGetVersion),
      kMinDriverVersion, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &found);
  if (r == CUDA_ERROR_STUB_LIBRARY)
    return absl::UnavailableError(
        absl::StrCat("cuda: no NVIDIA driver (", path,
                     " is the CUDA toolkit's stub library, not a driver)"));
  if (r != CUDA_SUCCESS || !driverGetVersion)
    return absl::UnavailableError(absl::StrCat("cuda: no NVIDIA driver (", path,
                                               " has no cuDriverGetVersion)"));
  int version = 0;
  r = driverGetVersion(&version);
  if (r == CUDA_ERROR_STUB_LIBRARY)
    return absl::UnavailableError(
        absl::StrCat("cuda: no NVIDIA driver (", path,
                     " is the CUDA toolkit's stub library, not a driver)"));
  if (r != CUDA_SUCCESS)
    return absl::UnavailableError(absl::StrCat(
        "cuda: the driver does not say its version (cuDriverGetVersion: ",
        builtinCudaErrorName(r) ? builtinCudaErrorName(r)
                                : absl::StrCat("CUresult ", r).c_str(),
        ")"));
  if (version < kMinDriverVersion)
    return absl::UnavailableError(absl::StrCat(
        "cuda: driver version ", versionString(version), " is too old; need ",
        versionString(kMinDriverVersion), " or newer"));
  api->driverVersion_ = version;

#define OMNI_RESOLVE_ENTRY(name)                                               \
  {                                                                            \
    void *fn = nullptr;                                                        \
    CUdriverProcAddressQueryResult status =                                    \
        CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;                                  \
    if (getProcAddress(#name, &fn, kMinDriverVersion,                          \
                       CU_GET_PROC_ADDRESS_LEGACY_STREAM,                      \
                       &status) != CUDA_SUCCESS ||                             \
        !fn)                                                                   \
      return absl::UnavailableError(                                           \
          absl::StrCat("cuda: the NVIDIA driver ", versionString(version),     \
                       " (", path, ") has no entry point " #name));            \
    api->name = reinterpret_cast<decltype(api->name)>(fn);                     \
  }
  OMNI_CUDA_DRIVER_ENTRIES(OMNI_RESOLVE_ENTRY)
#undef OMNI_RESOLVE_ENTRY

  r = api->cuInit(0);
  if (r == CUDA_ERROR_NO_DEVICE)
    return absl::UnavailableError(
        "cuda: the driver has no devices (cuInit: CUDA_ERROR_NO_DEVICE)");
  if (r != CUDA_SUCCESS)
    return absl::UnavailableError(absl::StrCat(
        "cuda: the driver did not start (cuInit: ", api->errorName(r), ")"));
  int count = 0;
  r = api->cuDeviceGetCount(&count);
  if (r != CUDA_SUCCESS)
    return absl::UnavailableError(absl::StrCat(
        "cuda: the driver did not list its devices (cuDeviceGetCount: ",
        api->errorName(r), ")"));
  if (count <= 0)
    return absl::UnavailableError(
        "cuda: the driver has no devices (cuDeviceGetCount: 0)");
  api->deviceCount_ = count;
  return api;
}

absl::Status CudaApi::checkOrdinal(int ordinal) const {
  if (ordinal < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("cuda: device ", ordinal, " requested (expected >= 0)"));
  if (ordinal >= deviceCount_)
    return absl::UnavailableError(absl::StrCat("cuda: device ", ordinal,
                                               " requested but only ",
                                               deviceCount_, " present"));
  return absl::OkStatus();
}

std::string CudaApi::errorName(CUresult result) const {
  const char *name = nullptr;
  if (cuGetErrorName && cuGetErrorName(result, &name) == CUDA_SUCCESS && name)
    return name;
  if (const char *builtin = builtinCudaErrorName(result))
    return builtin;
  return absl::StrCat("CUresult ", static_cast<int>(result));
}

namespace {

/// Whether `result` is a kernel's fault that the context keeps: cuda.h
/// says of each that "any further CUDA work will return the same error".
/// A GPU finds it while the kernel runs, after its launch returned, so the
/// call that reports it is a later one: any call, on any stream.
bool isKernelFault(CUresult result) {
  switch (result) {
  case CUDA_ERROR_ILLEGAL_ADDRESS:
  case CUDA_ERROR_LAUNCH_TIMEOUT:
  case CUDA_ERROR_ASSERT:
  case CUDA_ERROR_HARDWARE_STACK_ERROR:
  case CUDA_ERROR_ILLEGAL_INSTRUCTION:
  case CUDA_ERROR_MISALIGNED_ADDRESS:
  case CUDA_ERROR_INVALID_ADDRESS_SPACE:
  case CUDA_ERROR_INVALID_PC:
  case CUDA_ERROR_LAUNCH_FAILED:
    return true;
  default:
    return false;
  }
}

} // namespace

absl::Status CudaApi::check(CUresult result, const std::string &what) const {
  if (result == CUDA_SUCCESS)
    return absl::OkStatus();
  std::string message = absl::StrCat(what, ": ", errorName(result));
  const char *description = nullptr;
  if (cuGetErrorString &&
      cuGetErrorString(result, &description) == CUDA_SUCCESS && description)
    absl::StrAppend(&message, " (", description, ")");
  // Under CUDA_LAUNCH_BLOCKING=1 each launch waits for its kernel and
  // reports its fault itself, so the caller can name the command.
  const char *blocking = std::getenv("CUDA_LAUNCH_BLOCKING");
  if (isKernelFault(result) && !(blocking && std::string(blocking) == "1"))
    absl::StrAppend(&message,
                    " (a fault of a kernel run before this call, reported "
                    "late; with CUDA_LAUNCH_BLOCKING=1 each launch reports "
                    "its own)");
  if (result == CUDA_ERROR_OUT_OF_MEMORY)
    return absl::ResourceExhaustedError(message);
  return absl::InternalError(message);
}

absl::StatusOr<const CublasLtApi *> CudaApi::cublasLt() const {
  std::call_once(cublasLtOnce_, [this] {
    void *handle = nullptr;
    std::string errors;
    std::vector<std::string> names = {"libcublasLt.so.13", "libcublasLt.so.12"};
    if (const char *env = std::getenv("OMNI_CUBLASLT_LIBRARY"); env && *env)
      names = {env};
    for (const std::string &name : names) {
      handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle)
        break;
      absl::StrAppend(&errors, errors.empty() ? "" : "; ", lastDlError());
    }
    if (!handle) {
      cublasLt_ = absl::UnavailableError(
          absl::StrCat("cuda: no cuBLASLt for matmuls (", errors, ")"));
      return;
    }
#define OMNI_RESOLVE_ENTRY(name)                                               \
  cublasLtTable_.name =                                                        \
      reinterpret_cast<decltype(cublasLtTable_.name)>(dlsym(handle, #name));   \
  if (!cublasLtTable_.name) {                                                  \
    cublasLt_ = absl::UnavailableError(                                        \
        "cuda: the cuBLASLt library has no entry point " #name);               \
    return;                                                                    \
  }
    OMNI_CUBLASLT_ENTRIES(OMNI_RESOLVE_ENTRY)
#undef OMNI_RESOLVE_ENTRY
    cublasLt_ = &cublasLtTable_;
  });
  return cublasLt_;
}

absl::StatusOr<const CudnnApi *> CudaApi::cudnn() const {
  std::call_once(cudnnOnce_, [this] {
    const char *env = std::getenv("OMNI_CUDNN_LIBRARY");
    void *handle =
        dlopen(env && *env ? env : "libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      cudnn_ = absl::UnavailableError(absl::StrCat(
          "cuda: no cuDNN for convolutions (", lastDlError(), ")"));
      return;
    }
#define OMNI_RESOLVE_ENTRY(name)                                               \
  cudnnTable_.name =                                                           \
      reinterpret_cast<decltype(cudnnTable_.name)>(dlsym(handle, #name));      \
  if (!cudnnTable_.name) {                                                     \
    cudnn_ = absl::UnavailableError(                                           \
        "cuda: the cuDNN library has no entry point " #name);                  \
    return;                                                                    \
  }
    OMNI_CUDNN_ENTRIES(OMNI_RESOLVE_ENTRY)
#undef OMNI_RESOLVE_ENTRY
    // The legacy convolution API is cuDNN 9's (it moved between 8 and 9).
    size_t version = cudnnTable_.cudnnGetVersion();
    if (version < 90000) {
      cudnn_ = absl::UnavailableError(absl::StrCat(
          "cuda: cuDNN ", version, " is too old for convolutions; need 9"));
      return;
    }
    cudnn_ = &cudnnTable_;
  });
  return cudnn_;
}

} // namespace omni::hal::cuda
