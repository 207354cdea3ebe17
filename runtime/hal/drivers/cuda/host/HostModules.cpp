//===- HostModules.cpp - CUDA modules and launches modelled on the CPU ----===//
//
// HostModel.h's modules: PTX whose `.entry` names are HostKernels.cpp's
// kernels (the driver's helpers, CudaDriverTest's PTX), or the x86-64
// shared object of omnic --cuda-host-kernels in place of a cubin; and
// cuLaunchKernel, which checks a launch and queues it on its stream.
//
//===----------------------------------------------------------------------===//

#include "runtime/hal/drivers/cuda/host/HostModel.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <elf.h>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

/// A launch of omnic --cuda-host-kernels: a function with the cpu kernel
/// ABI (docs/backend.md) and the launch it was compiled for.
struct CompiledLaunch {
  void (*run)(int64_t begin, int64_t end, void **buffers,
              const int64_t *scalars) = nullptr;
  unsigned grid = 0, block = 0;
  std::vector<size_t> bufferBytes;
};

struct CUfunc_st {
  std::string name;
  int device = 0;
  const omni::hal::cuda::host::HostKernel *kernel = nullptr;
  const CompiledLaunch *compiled = nullptr;
  int maxDynamicShared = 48 * 1024;
};
struct CUmod_st {
  /// The device of the context current when it was loaded: its functions
  /// launch on that device's streams only.
  int device = 0;
  std::set<std::string> entries;
  /// The functions asked for, which live as long as the module.
  std::map<std::string, std::unique_ptr<CUfunc_st>> functions;
  /// A shared object of host kernels (dlopen handle) and its launches.
  void *library = nullptr;
  std::map<std::string, CompiledLaunch> compiled;
  ~CUmod_st() {
    if (library)
      dlclose(library);
  }
};

namespace omni::hal::cuda::host {
namespace {
//===----------------------------------------------------------------------===//
// Modules and launches
//===----------------------------------------------------------------------===//

/// The `.entry` names of a PTX module's text.
std::set<std::string> ptxEntries(const char *text) {
  std::set<std::string> names;
  const std::string ptx(text);
  for (size_t at = ptx.find(".entry"); at != std::string::npos;
       at = ptx.find(".entry", at + 6)) {
    size_t begin = ptx.find_first_not_of(" \t\n", at + 6);
    size_t end = ptx.find_first_of(" \t\n(", begin);
    if (begin != std::string::npos && end != std::string::npos)
      names.insert(ptx.substr(begin, end - begin));
  }
  return names;
}

/// A shared object of omnic --cuda-host-kernels (an x86-64 ELF image in
/// place of the cubin) as a module: its launches from the
/// `omni_host_kernels` manifest.
CUresult loadHostKernels(const Elf64_Ehdr &header, CUmodule *module) {
  // The image comes without its size: ELF puts the section headers last.
  const size_t bytes =
      header.e_shoff + size_t(header.e_shnum) * header.e_shentsize;
  // dlopen needs a file: an anonymous one, opened through /proc.
  const int fd = memfd_create("omni-host-kernels", MFD_CLOEXEC);
  if (fd < 0)
    return CUDA_ERROR_OUT_OF_MEMORY;
  const bool written = write(fd, &header, bytes) == static_cast<ssize_t>(bytes);
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  void *library =
      written ? dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL) : nullptr;
  close(fd);
  if (!library)
    return CUDA_ERROR_INVALID_IMAGE;
  auto m = std::make_unique<CUmod_st>();
  m->device = currentDevice();
  m->library = library;
  const auto *manifest =
      static_cast<const char *>(dlsym(library, "omni_host_kernels"));
  if (!manifest)
    return CUDA_ERROR_INVALID_IMAGE;
  std::istringstream lines(manifest);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream fields(line);
    std::string name;
    CompiledLaunch launch;
    fields >> name >> launch.grid >> launch.block;
    for (size_t b; fields >> b;)
      launch.bufferBytes.push_back(b);
    launch.run =
        reinterpret_cast<decltype(launch.run)>(dlsym(library, name.c_str()));
    if (!launch.run)
      return CUDA_ERROR_INVALID_IMAGE;
    m->entries.insert(name);
    m->compiled[name] = std::move(launch);
  }
  *module = m.release();
  return CUDA_SUCCESS;
}

CUresult host_cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned,
                                 CUjit_option *, void **) {
  OMNI_HOST_LOCK;
  // A module loads into the context current on this thread.
  if (currentDevice() < 0)
    return CUDA_ERROR_INVALID_CONTEXT;
  const char *text = static_cast<const char *>(image);
  if (std::memcmp(text, ELFMAG, SELFMAG) == 0) {
    const auto *header = static_cast<const Elf64_Ehdr *>(image);
    if (header->e_machine == EM_X86_64 && header->e_type == ET_DYN)
      return loadHostKernels(*header, module);
    return CUDA_ERROR_NOT_SUPPORTED; // a cubin: the model runs no SASS
  }
  if (!std::strstr(text, ".version") || !std::strstr(text, ".target"))
    return CUDA_ERROR_INVALID_IMAGE;
  auto m = std::make_unique<CUmod_st>();
  m->device = currentDevice();
  m->entries = ptxEntries(text);
  *module = m.release();
  return CUDA_SUCCESS;
}

CUresult host_cuModuleUnload(CUmodule module) {
  OMNI_HOST_LOCK;
  // Queued launches of its functions run first.
  runRunnable();
  delete module;
  return CUDA_SUCCESS;
}

CUresult host_cuModuleGetFunction(CUfunction *function, CUmodule module,
                                  const char *name) {
  if (!module->entries.count(name))
    return CUDA_ERROR_NOT_FOUND;
  std::unique_ptr<CUfunc_st> &f = module->functions[name];
  if (!f) {
    f = std::make_unique<CUfunc_st>();
    f->name = name;
    f->device = module->device;
    f->kernel = findKernel(name);
    auto compiled = module->compiled.find(name);
    if (compiled != module->compiled.end())
      f->compiled = &compiled->second;
  }
  *function = f.get();
  return CUDA_SUCCESS;
}

CUresult host_cuFuncSetAttribute(CUfunction function,
                                 CUfunction_attribute attribute, int value) {
  if (attribute != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)
    return CUDA_ERROR_INVALID_VALUE;
  if (value < 0 || value > kSharedOptIn)
    return CUDA_ERROR_INVALID_VALUE;
  function->maxDynamicShared = value;
  return CUDA_SUCCESS;
}

/// Whether the compiled kernel about to run faults: the N-th such run in
/// the process (counting graph replays) when OMNI_HOST_CUDA_FAULT=N, as a
/// GPU kernel that touches a wrong address; for tests of how such an
/// asynchronous error reaches the user.
bool faultNow() {
  static const int64_t at = [] {
    const char *v = std::getenv("OMNI_HOST_CUDA_FAULT");
    return v ? std::atoll(v) : 0;
  }();
  static std::atomic<int64_t> runs{0};
  return at > 0 && ++runs == at;
}

CUresult host_cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy,
                             unsigned gz, unsigned bx, unsigned by, unsigned bz,
                             unsigned shared, CUstream stream, void **params,
                             void **extra) {
  OMNI_HOST_LOCK;
  if (extra || !params)
    return CUDA_ERROR_INVALID_VALUE;
  if (!gx || !gy || !gz || !bx || !by || !bz || gy > 65535 || gz > 65535 ||
      bz > 64 || uint64_t(bx) * by * bz > 1024)
    return CUDA_ERROR_INVALID_VALUE;
  if (shared > static_cast<unsigned>(f->maxDynamicShared))
    return CUDA_ERROR_INVALID_VALUE;
  // A function of another context's module is no handle here.
  if (f->device != streamDevice(stream))
    return CUDA_ERROR_INVALID_HANDLE;
  if (const CompiledLaunch *c = f->compiled) {
    // The launch the kernel was compiled for, its buffers inside device
    // memory; the parameters are the buffers' pointers (omnic's kernels
    // take no scalars).
    if (gx != c->grid || bx != c->block || gy != 1 || gz != 1 || by != 1 ||
        bz != 1)
      return CUDA_ERROR_INVALID_VALUE;
    auto buffers = std::make_shared<std::vector<void *>>();
    for (size_t i = 0; i < c->bufferBytes.size(); ++i) {
      void *p = *static_cast<void **>(params[i]);
      if (!isDeviceRange(reinterpret_cast<uintptr_t>(p), c->bufferBytes[i]))
        return CUDA_ERROR_ILLEGAL_ADDRESS;
      buffers->push_back(p);
    }
    return submit(stream, [c, buffers] {
      for (size_t i = 0; i < buffers->size(); ++i)
        if (!isDeviceRange(reinterpret_cast<uintptr_t>((*buffers)[i]),
                           c->bufferBytes[i]))
          return CUDA_ERROR_ILLEGAL_ADDRESS;
      if (faultNow())
        return CUDA_ERROR_ILLEGAL_ADDRESS;
      c->run(0, 1, buffers->data(), nullptr);
      return CUDA_SUCCESS;
    });
  }
  if (!f->kernel)
    return CUDA_ERROR_NOT_SUPPORTED; // compiled kernels need a GPU
  // The parameters are copied now, as cuLaunchKernel does.
  const std::vector<size_t> &sizes = f->kernel->paramSizes;
  auto bytes = std::make_shared<std::vector<std::vector<unsigned char>>>();
  for (size_t i = 0; i < sizes.size(); ++i) {
    const auto *p = static_cast<const unsigned char *>(params[i]);
    bytes->emplace_back(p, p + sizes[i]);
  }
  const LaunchDims dims{{gx, gy, gz}, {bx, by, bz}, shared};
  const HostKernel *kernel = f->kernel;
  return submit(stream, [kernel, dims, bytes] {
    std::vector<void *> args;
    for (auto &b : *bytes)
      args.push_back(b.data());
    return kernel->run(dims, args.data());
  });
}

const ProcEntry kModuleEntries[] = {
    OMNI_HOST_ENTRY(cuModuleLoadDataEx),  OMNI_HOST_ENTRY(cuModuleUnload),
    OMNI_HOST_ENTRY(cuModuleGetFunction), OMNI_HOST_ENTRY(cuFuncSetAttribute),
    OMNI_HOST_ENTRY(cuLaunchKernel),
};

} // namespace

void *moduleEntry(const char *name) {
  for (const ProcEntry &entry : kModuleEntries)
    if (std::strcmp(entry.name, name) == 0)
      return entry.function;
  return nullptr;
}

} // namespace omni::hal::cuda::host
