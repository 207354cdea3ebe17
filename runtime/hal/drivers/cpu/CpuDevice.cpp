//===- CpuDevice.cpp - The host CPU as a hal Device -------------*- C++ -*-===//

#include "runtime/hal/drivers/cpu/CpuDevice.h"

#include "runtime/hal/drivers/cpu/CpuChannel.h"
#include "runtime/hal/drivers/cpu/CpuExecutable.h"
#include "runtime/hal/drivers/cpu/CpuStream.h"

#include "absl/strings/str_cat.h"

#include <cblas.h>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace omni::hal::cpu {
namespace {

int resolveThreads(int requested) {
  if (requested > 0)
    return requested;
  unsigned hw = std::thread::hardware_concurrency();
  return hw ? static_cast<int>(hw) : 1;
}

const std::string &cpuName() {
  static const std::string *name = new std::string("cpu");
  return *name;
}

} // namespace

CpuBuffer::CpuBuffer(CpuDevice &device, uint8_t *data, int64_t size)
    : device_(device), data_(data), size_(size) {}

CpuBuffer::~CpuBuffer() {
  std::free(data_);
  device_.allocated_.fetch_sub(size_, std::memory_order_relaxed);
}

Device &CpuBuffer::device() const { return device_; }

CpuDevice::CpuDevice(const DeviceOptions &options)
    : pool_(resolveThreads(options.threads)),
      memoryLimit_(options.memoryLimitBytes) {
  // One thread pool for kernels and library calls: the gemms run
  // single-threaded OpenBLAS / oneDNN on blocks from pool_ (Gemm.h), so
  // OpenBLAS's own threads stay idle (they spun in sched_yield between
  // calls: docs/performance.md, issue 15).
  openblas_set_num_threads(1);
}

CpuDevice::~CpuDevice() = default;

const std::string &CpuDevice::driverName() const { return cpuName(); }

std::string CpuDevice::description() const {
  return absl::StrCat("cpu (", pool_.size(), " threads)");
}

absl::StatusOr<std::unique_ptr<Buffer>> CpuDevice::allocate(int64_t bytes) {
  if (bytes < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("cannot allocate a buffer of ", bytes, " bytes"));
  int64_t before = allocated_.fetch_add(bytes, std::memory_order_relaxed);
  auto undo = [&] { allocated_.fetch_sub(bytes, std::memory_order_relaxed); };
  if (memoryLimit_ > 0 &&
      (bytes > memoryLimit_ || before > memoryLimit_ - bytes)) {
    undo();
    return absl::ResourceExhaustedError(absl::StrCat(
        "cannot allocate ", bytes, " bytes: the cpu device's limit is ",
        memoryLimit_, " bytes and ", before, " are in use"));
  }
  // Round up so that aligned_alloc's size rule holds; never zero bytes.
  int64_t rounded = bytes <= 0 ? 64 : (bytes + 63) / 64 * 64;
  if (rounded < bytes) {
    undo();
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", bytes, " bytes"));
  }
  void *data = std::aligned_alloc(64, static_cast<size_t>(rounded));
  if (!data) {
    undo();
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", bytes, " bytes of host memory"));
  }
  std::memset(data, 0, static_cast<size_t>(rounded));
  return std::unique_ptr<Buffer>(
      new CpuBuffer(*this, static_cast<uint8_t *>(data), bytes));
}

bool CpuDevice::supportsFormat(ExecutableFormat format) const {
  return format == ExecutableFormat::ElfSharedObject;
}

absl::StatusOr<std::unique_ptr<Executable>>
CpuDevice::loadExecutable(const ExecutableSpec &spec) {
  if (!supportsFormat(spec.format))
    return absl::InvalidArgumentError(absl::StrCat(
        "executable '", spec.name,
        "' is not an ELF shared object; the cpu device runs only those"));
  // The target check (ISA features of the host) happens in load().
  absl::StatusOr<std::unique_ptr<CpuExecutable>> exe =
      CpuExecutable::load(spec);
  if (!exe.ok())
    return exe.status();
  return std::unique_ptr<Executable>(std::move(*exe));
}

absl::StatusOr<std::unique_ptr<Stream>> CpuDevice::createStream() {
  return std::unique_ptr<Stream>(new CpuStream(*this));
}

bool CpuDevice::supportsLibrary(Library library, DType dtype) const {
  if (library == Library::AttentionBackward) // the fused kernel (bf16 widened)
    return dtype == DType::F32 || dtype == DType::BF16;
  // bf16: widened to f32 (CpuLibraries.cpp, docs/precision.md).
  return dtype == DType::F32 || dtype == DType::F64 || dtype == DType::BF16;
}

absl::StatusOr<std::unique_ptr<Channel>>
CpuDevice::createChannel(const ChannelSpec &spec) {
  return CpuChannel::create(*this, spec);
}

} // namespace omni::hal::cpu
