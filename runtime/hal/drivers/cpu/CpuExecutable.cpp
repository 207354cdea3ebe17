//===- CpuExecutable.cpp - ELF shared objects loaded from memory ----------===//

#include "runtime/hal/drivers/cpu/CpuExecutable.h"

#include "absl/strings/str_cat.h"

#include <cerrno>
#include <cstring>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

namespace omni::hal::cpu {
namespace {

std::string fdPath(int fd) { return absl::StrCat("/proc/self/fd/", fd); }

absl::Status writeAll(int fd, absl::Span<const uint8_t> bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return absl::InternalError(
          absl::StrCat("write to a memfd failed: ", std::strerror(errno)));
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

} // namespace

absl::Status CpuExecutable::checkTarget(const ExecutableSpec &spec,
                                        const CpuFeatures &cpu) {
  absl::Status features = checkLlvmFeatures(spec.target, cpu);
  if (features.ok())
    return features;
  return absl::Status(features.code(), absl::StrCat("executable '", spec.name,
                                                    "': ", features.message()));
}

absl::StatusOr<std::unique_ptr<CpuExecutable>>
CpuExecutable::load(const ExecutableSpec &spec, const CpuFeatures *cpu) {
  absl::Status target = checkTarget(spec, cpu ? *cpu : CpuFeatures::host());
  if (!target.ok())
    return target;
  std::unique_ptr<CpuExecutable> exe(new CpuExecutable());
  exe->name_ = spec.name;
  auto fail = [&](absl::string_view message) {
    return absl::InvalidArgumentError(
        absl::StrCat("executable '", spec.name, "': ", message));
  };
  exe->fd_ = ::memfd_create("omni-executable", MFD_CLOEXEC);
  if (exe->fd_ < 0)
    return fail(absl::StrCat("memfd_create failed: ", std::strerror(errno)));
  absl::Status written = writeAll(exe->fd_, spec.code);
  if (!written.ok())
    return fail(written.message());

  // glibc would hand back a stale handle for a path it has loaded before
  // (an executable whose dlclose did not unload it); take another fd number.
  std::string path = fdPath(exe->fd_);
  for (int attempt = 0; attempt < 8; ++attempt) {
    void *stale = ::dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
    if (!stale)
      break;
    ::dlclose(stale);
    int fd = ::fcntl(exe->fd_, F_DUPFD_CLOEXEC, exe->fd_ + 1);
    if (fd < 0)
      return fail(absl::StrCat("dup failed: ", std::strerror(errno)));
    ::close(exe->fd_);
    exe->fd_ = fd;
    path = fdPath(fd);
  }
  exe->handle_ = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!exe->handle_) {
    const char *error = ::dlerror();
    return fail(absl::StrCat("cannot load the shared object: ",
                             error ? error : "dlopen failed"));
  }
  for (const std::string &kernel : spec.kernels) {
    ::dlerror();
    void *symbol = ::dlsym(exe->handle_, kernel.c_str());
    if (!symbol)
      return fail(absl::StrCat("kernel '", kernel,
                               "' is not exported by the shared object"));
    exe->kernelNames_.push_back(kernel);
    exe->kernels_.push_back(reinterpret_cast<KernelFn>(symbol));
  }
  return exe;
}

CpuExecutable::~CpuExecutable() {
  if (handle_)
    ::dlclose(handle_);
  if (fd_ >= 0)
    ::close(fd_);
}

} // namespace omni::hal::cpu
