//===- CudaExecutable.cpp - A loaded CUDA module ----------------*- C++ -*-===//

#include "runtime/hal/drivers/cuda/CudaExecutable.h"

#include "runtime/base/Status.h"
#include "runtime/hal/drivers/cuda/CudaDevice.h"

#include "absl/strings/str_cat.h"

#include <cstring>

namespace omni::hal::cuda {
namespace {

constexpr uint32_t kDefaultSharedLimit = 48 * 1024;

/// The first line of a JIT log, without trailing blanks.
std::string firstLine(const char *log) {
  std::string line(log);
  size_t end = line.find('\n');
  if (end != std::string::npos)
    line.resize(end);
  while (!line.empty() && (line.back() == ' ' || line.back() == '\r'))
    line.pop_back();
  return line;
}

} // namespace

absl::StatusOr<CUmodule> loadModule(const CudaDevice &device, const void *image,
                                    const std::string &what) {
  const CudaApi &api = device.api();
  char errorLog[4096] = {};
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER,
                            CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *values[] = {errorLog, reinterpret_cast<void *>(sizeof(errorLog) - 1)};
  CUmodule module = nullptr;
  CUresult r = api.cuModuleLoadDataEx(&module, image, 2, options, values);
  if (r == CUDA_SUCCESS)
    return module;
  std::string message =
      absl::StrCat("cuda: ", what, " does not load on ", device.label(), " (",
                   device.arch(), "): ", api.errorName(r));
  std::string log = firstLine(errorLog);
  if (!log.empty())
    absl::StrAppend(&message, ": ", log);
  if (r == CUDA_ERROR_OUT_OF_MEMORY)
    return absl::ResourceExhaustedError(message);
  return absl::InvalidArgumentError(message);
}

bool cubinRunsOn(const std::string &target, int major, int minor) {
  // "sm_" digits, then an optional feature suffix: "a" (arch-specific,
  // exactly that device) or "f" (family: same major, same or later minor).
  if (target.size() < 5 || target.compare(0, 3, "sm_") != 0)
    return false;
  std::string digits = target.substr(3);
  char suffix = 0;
  if (!digits.empty() && (digits.back() == 'a' || digits.back() == 'f')) {
    suffix = digits.back();
    digits.pop_back();
  }
  if (digits.size() < 2)
    return false;
  for (char c : digits)
    if (c < '0' || c > '9')
      return false;
  int targetMinor = digits.back() - '0';
  int targetMajor = std::stoi(digits.substr(0, digits.size() - 1));
  if (suffix == 'a')
    return major == targetMajor && minor == targetMinor;
  return major == targetMajor && minor >= targetMinor;
}

absl::StatusOr<std::unique_ptr<CudaExecutable>>
CudaExecutable::load(CudaDevice &device, const ExecutableSpec &spec) {
  const std::string what = absl::StrCat("executable '", spec.name, "'");
  if (spec.format != ExecutableFormat::Ptx &&
      spec.format != ExecutableFormat::Cubin)
    return absl::InvalidArgumentError(
        absl::StrCat("cuda: ", what,
                     " is not PTX or a cubin (the cuda driver loads only "
                     "those)"));
  if (spec.gpuKernels.size() != spec.kernels.size())
    return absl::InvalidArgumentError(absl::StrCat(
        "cuda: ", what, " has ", spec.kernels.size(), " kernels but ",
        spec.gpuKernels.size(), " launch descriptions"));
  if (spec.code.empty())
    return absl::InvalidArgumentError(
        absl::StrCat("cuda: ", what, " has no code"));

  // Choose the image: a cubin the device runs, else PTX to JIT.
  std::string ptx;
  const void *image = nullptr;
  std::string imageWhat = what;
  if (spec.format == ExecutableFormat::Cubin &&
      cubinRunsOn(spec.target, device.computeMajor(), device.computeMinor())) {
    image = spec.code.data();
  } else {
    absl::Span<const uint8_t> text =
        spec.format == ExecutableFormat::Ptx ? spec.code : spec.ptx;
    if (text.empty())
      return absl::FailedPreconditionError(absl::StrCat(
          "cuda: ", what, " is a cubin for ",
          spec.target.empty() ? "an unnamed architecture" : spec.target,
          " but ", device.label(), " is ", device.arch(),
          ", and it has no PTX to compile for it"));
    // The JIT needs a NUL-terminated string.
    ptx.assign(reinterpret_cast<const char *>(text.data()), text.size());
    ptx.resize(std::strlen(ptx.c_str()));
    image = ptx.c_str();
    if (spec.format == ExecutableFormat::Cubin)
      imageWhat =
          absl::StrCat(what, " (its PTX, compiled for ", device.arch(), ")");
  }

  std::unique_ptr<CudaExecutable> exe(new CudaExecutable(device));
  exe->name_ = spec.name;
  exe->kernelNames_ = spec.kernels;
  exe->specs_ = spec.gpuKernels;
  OMNI_ASSIGN_OR_RETURN(exe->module_, loadModule(device, image, imageWhat));

  const CudaApi &api = device.api();
  exe->kernels_.resize(exe->specs_.size());
  for (size_t k = 0; k < exe->specs_.size(); ++k) {
    const GpuKernelSpec &kernelSpec = exe->specs_[k];
    Kernel &kernel = exe->kernels_[k];
    const std::string kernelWhat =
        absl::StrCat("cuda: ", what, " kernel '", spec.kernels[k], "'");
    if (kernelSpec.launches.empty())
      return absl::InvalidArgumentError(
          absl::StrCat(kernelWhat, " has no launches"));
    for (const GpuLaunchSpec &launch : kernelSpec.launches) {
      uint64_t threads = uint64_t(launch.block[0]) * launch.block[1] *
                         uint64_t(launch.block[2]);
      if (threads == 0 || threads > 1024 || launch.grid[0] == 0 ||
          launch.grid[1] == 0 || launch.grid[2] == 0)
        return absl::InvalidArgumentError(absl::StrCat(
            kernelWhat, " launches '", launch.entry, "' with grid [",
            launch.grid[0], ", ", launch.grid[1], ", ", launch.grid[2],
            "] and block [", launch.block[0], ", ", launch.block[1], ", ",
            launch.block[2], "] (expected non-empty, at most 1024 threads)"));
      CUfunction function = nullptr;
      CUresult r = api.cuModuleGetFunction(&function, exe->module_,
                                           launch.entry.c_str());
      if (r == CUDA_ERROR_NOT_FOUND)
        return absl::InvalidArgumentError(
            absl::StrCat("cuda: ", what, " has no entry point '", launch.entry,
                         "' (kernel '", spec.kernels[k], "')"));
      OMNI_RETURN_IF_ERROR(
          api.check(r, absl::StrCat(kernelWhat, ": cuModuleGetFunction('",
                                    launch.entry, "')")));
      if (launch.sharedBytes > kDefaultSharedLimit)
        OMNI_RETURN_IF_ERROR(api.check(
            api.cuFuncSetAttribute(
                function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                static_cast<int>(launch.sharedBytes)),
            absl::StrCat(kernelWhat, ": '", launch.entry, "' asks for ",
                         launch.sharedBytes, " bytes of shared memory")));
      kernel.launches.push_back(Launch{function, &launch});
    }
    for (int64_t bytes : kernelSpec.scratch) {
      OMNI_ASSIGN_OR_RETURN(std::unique_ptr<Buffer> buffer,
                            device.allocate(bytes));
      kernel.scratchPointers.push_back(
          static_cast<CudaBuffer *>(buffer.get())->pointer());
      kernel.scratch.push_back(std::move(buffer));
    }
  }
  return exe;
}

CudaExecutable::~CudaExecutable() {
  kernels_.clear();
  if (module_ && device_.bind().ok())
    (void)device_.api().cuModuleUnload(module_);
}

} // namespace omni::hal::cuda
