//===- CudaDevice.cpp - One NVIDIA GPU as a hal Device ----------*- C++ -*-===//

#include "runtime/hal/drivers/cuda/CudaDevice.h"

#include "runtime/base/Status.h"
#include "runtime/hal/drivers/cuda/CudaExecutable.h"
#include "runtime/hal/drivers/cuda/CudaStream.h"
#include "runtime/hal/drivers/cuda/NcclChannel.h"
#include "runtime/hal/drivers/cuda/kernels/FlashAttentionBackward.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include <cstdint>
#include <cstdlib>
#include <string_view>

namespace omni::hal::cuda {
namespace {

const char *const kHelperKernelNames[] = {
    "omni_random_normal_f32",
    "omni_random_normal_f64",
    "omni_random_normal_f16",
    "omni_random_normal_bf16",
    "omni_random_uniform_f32",
    "omni_random_uniform_f64",
    "omni_random_uniform_f16",
    "omni_random_uniform_bf16",
    "omni_fill_bytes",
    "omni_im2col_b2",
    "omni_im2col_b4",
    "omni_im2col_b8",
    "omni_softmax_f32",
    "omni_softmax_f64",
    "omni_softmax_f16",
    "omni_softmax_bf16",
    "omni_flash_attention_f16_d64",
    "omni_flash_attention_f16_d128",
    "omni_flash_attention_bf16_d64",
    "omni_flash_attention_bf16_d128",
    "omni_attention_grad_scores_f32",
    "omni_attention_grad_scores_f64",
    "omni_attention_grad_scores_f16",
    "omni_attention_grad_scores_bf16",
    "omni_flash_attention_rows_f16_d64",
    "omni_flash_attention_rows_f16_d128",
    "omni_flash_attention_rows_bf16_d64",
    "omni_flash_attention_rows_bf16_d128",
    "omni_flash_attention_keys_f16_d64",
    "omni_flash_attention_keys_f16_d128",
    "omni_flash_attention_keys_bf16_d64",
    "omni_flash_attention_keys_bf16_d128",
};
static_assert(sizeof(kHelperKernelNames) / sizeof(kHelperKernelNames[0]) ==
                  static_cast<size_t>(HelperKernel::Count),
              "one name per HelperKernel");

} // namespace

absl::StatusOr<AttentionKernel> attentionKernelFromEnvironment() {
  const char *value = std::getenv("OMNI_CUDA_ATTENTION");
  if (!value || std::string_view(value) == "unfused")
    return AttentionKernel::Unfused;
  if (std::string_view(value) == "flash")
    return AttentionKernel::Flash;
  return absl::InvalidArgumentError(absl::StrCat(
      "cuda: OMNI_CUDA_ATTENTION must be unfused or flash, found '", value,
      "'"));
}

namespace {

const std::string &cudaName() {
  static const std::string *name = new std::string("cuda");
  return *name;
}

} // namespace

namespace {
/// The index of (dtype, d) among the flash kernels (F16 d64 first), or -1.
int flashIndex(DType dtype, int64_t d) {
  if ((dtype != DType::F16 && dtype != DType::BF16) || (d != 64 && d != 128))
    return -1;
  return (dtype == DType::BF16 ? 2 : 0) + (d == 128 ? 1 : 0);
}
} // namespace

CUfunction CudaDevice::flashKernel(DType dtype, int64_t d) const {
  const int i = flashIndex(dtype, d);
  return i >= 0 && flashUsable_[i]
             ? helpers_[static_cast<int>(HelperKernel::FlashF16D64) + i]
             : nullptr;
}

std::pair<CUfunction, CUfunction>
CudaDevice::flashBackwardKernels(DType dtype, int64_t d) const {
  const int i = flashIndex(dtype, d);
  if (i < 0 || !flashBackwardUsable_[i])
    return {nullptr, nullptr};
  return {helpers_[static_cast<int>(HelperKernel::FlashRowsF16D64) + i],
          helpers_[static_cast<int>(HelperKernel::FlashKeysF16D64) + i]};
}

CudaBuffer::CudaBuffer(CudaDevice &device, CUdeviceptr pointer, int64_t size)
    : device_(device), pointer_(pointer), size_(size) {}

CudaBuffer::~CudaBuffer() { device_.release(pointer_, size_); }

Device &CudaBuffer::device() const { return device_; }

CudaDevice::CudaDevice(std::shared_ptr<const CudaApi> api,
                       const DeviceOptions &options)
    : api_(std::move(api)), ordinal_(options.ordinal),
      memoryLimit_(options.memoryLimitBytes) {}

absl::StatusOr<std::unique_ptr<CudaDevice>>
CudaDevice::create(std::shared_ptr<const CudaApi> api,
                   const DeviceOptions &options, AttentionKernel attention) {
  if (options.memoryLimitBytes < 0)
    return absl::InvalidArgumentError(absl::StrCat("cuda: memory limit ",
                                                   options.memoryLimitBytes,
                                                   " bytes (expected >= 0)"));
  std::unique_ptr<CudaDevice> d(new CudaDevice(std::move(api), options));
  const CudaApi &a = *d->api_;
  const std::string where = d->label();
  OMNI_RETURN_IF_ERROR(a.check(a.cuDeviceGet(&d->device_, d->ordinal_),
                               absl::StrCat(where, ": cuDeviceGet")));
  char name[256] = {};
  OMNI_RETURN_IF_ERROR(
      a.check(a.cuDeviceGetName(name, sizeof(name) - 1, d->device_),
              absl::StrCat(where, ": cuDeviceGetName")));
  d->name_ = name;
  OMNI_RETURN_IF_ERROR(a.check(
      a.cuDeviceGetAttribute(
          &d->major_, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, d->device_),
      absl::StrCat(where, ": cuDeviceGetAttribute")));
  OMNI_RETURN_IF_ERROR(a.check(
      a.cuDeviceGetAttribute(
          &d->minor_, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, d->device_),
      absl::StrCat(where, ": cuDeviceGetAttribute")));
  OMNI_RETURN_IF_ERROR(
      a.check(a.cuDeviceGetAttribute(&d->multiprocessors_,
                                     CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                                     d->device_),
              absl::StrCat(where, ": cuDeviceGetAttribute")));
  OMNI_RETURN_IF_ERROR(a.check(a.cuDeviceTotalMem(&d->totalMemory_, d->device_),
                               absl::StrCat(where, ": cuDeviceTotalMem")));
  d->arch_ = absl::StrCat("sm_", d->major_, d->minor_);
  if (d->major_ < 8)
    return absl::UnavailableError(
        absl::StrCat("cuda: device ", d->ordinal_, " (", d->name_, ", ",
                     d->arch_, ") is too old; omni needs sm_80 or newer"));
  int pools = 0;
  OMNI_RETURN_IF_ERROR(a.check(
      a.cuDeviceGetAttribute(&pools, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED,
                             d->device_),
      absl::StrCat(where, ": cuDeviceGetAttribute")));
  if (!pools)
    return absl::UnavailableError(
        absl::StrCat("cuda: device ", d->ordinal_, " (", d->name_,
                     ") has no stream-ordered memory pools, which omni needs"));

  OMNI_RETURN_IF_ERROR(
      a.check(a.cuDevicePrimaryCtxRetain(&d->context_, d->device_),
              absl::StrCat(where, ": cuDevicePrimaryCtxRetain")));
  OMNI_RETURN_IF_ERROR(d->bind());
  OMNI_RETURN_IF_ERROR(
      a.check(a.cuStreamCreate(&d->allocStream_, CU_STREAM_NON_BLOCKING),
              absl::StrCat(where, ": cuStreamCreate")));
  // Keep freed memory in the pool instead of returning it at every
  // synchronization (the pool's default threshold is 0).
  CUmemoryPool pool = nullptr;
  OMNI_RETURN_IF_ERROR(
      a.check(a.cuDeviceGetDefaultMemPool(&pool, d->device_),
              absl::StrCat(where, ": cuDeviceGetDefaultMemPool")));
  cuuint64_t threshold = UINT64_MAX;
  OMNI_RETURN_IF_ERROR(
      a.check(a.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                                      &threshold),
              absl::StrCat(where, ": cuMemPoolSetAttribute")));

  OMNI_ASSIGN_OR_RETURN(
      d->helperModule_,
      loadModule(*d, helperKernelsPtx(), "the driver's helper kernels"));
  for (int i = 0; i < static_cast<int>(HelperKernel::Count); ++i)
    OMNI_RETURN_IF_ERROR(a.check(
        a.cuModuleGetFunction(&d->helpers_[i], d->helperModule_,
                              kHelperKernelNames[i]),
        absl::StrCat(where, ": helper kernel ", kHelperKernelNames[i])));
  // The flash kernels' blocks need more than the default 48 KiB of shared
  // memory; a device that cannot give it runs that shape unfused.
  auto giveShared = [&](HelperKernel first, int i, size_t bytes) {
    return a.cuFuncSetAttribute(d->helpers_[static_cast<int>(first) + i],
                                CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                static_cast<int>(bytes)) == CUDA_SUCCESS;
  };
  for (int i = 0; i < 4; ++i) {
    const int dim = i % 2 == 0 ? 64 : 128;
    d->flashUsable_[i] =
        giveShared(HelperKernel::FlashF16D64, i, flash::sharedBytes(dim, 2));
    d->flashBackwardUsable_[i] = giveShared(HelperKernel::FlashRowsF16D64, i,
                                            flash::rowsSharedBytes(dim, 2)) &&
                                 giveShared(HelperKernel::FlashKeysF16D64, i,
                                            flash::keysSharedBytes(dim, 2));
  }
  d->attentionKernel_ = attention;
  return d;
}

CudaDevice::~CudaDevice() {
  if (!context_)
    return;
  (void)bind();
  if (allocStream_) {
    (void)api_->cuStreamSynchronize(allocStream_);
    (void)api_->cuStreamDestroy(allocStream_);
  }
  if (helperModule_)
    (void)api_->cuModuleUnload(helperModule_);
  (void)api_->cuDevicePrimaryCtxRelease(device_);
}

std::string CudaDevice::label() const {
  return absl::StrCat("cuda:", ordinal_);
}

absl::Status CudaDevice::bind() const {
  return api_->check(api_->cuCtxSetCurrent(context_),
                     absl::StrCat(label(), ": cuCtxSetCurrent"));
}

const std::string &CudaDevice::driverName() const { return cudaName(); }

std::string CudaDevice::description() const {
  return absl::StrFormat("%s %s (%s, %d SMs, %.1f GiB)", label(), name_, arch_,
                         multiprocessors_,
                         static_cast<double>(totalMemory_) / (1ull << 30));
}

absl::StatusOr<std::unique_ptr<Buffer>> CudaDevice::allocate(int64_t bytes) {
  if (bytes < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("cannot allocate a buffer of ", bytes, " bytes"));
  int64_t before = allocated_.fetch_add(bytes, std::memory_order_relaxed);
  auto undo = [&] { allocated_.fetch_sub(bytes, std::memory_order_relaxed); };
  if (memoryLimit_ > 0 &&
      (bytes > memoryLimit_ || before > memoryLimit_ - bytes)) {
    undo();
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot allocate ", bytes, " bytes: the ", label(),
                     " device's limit is ", memoryLimit_, " bytes and ", before,
                     " are in use"));
  }
  CUdeviceptr pointer = 0;
  if (bytes > 0) {
    absl::Status status = bind();
    if (status.ok())
      status = api_->check(
          api_->cuMemAllocAsync(&pointer, static_cast<size_t>(bytes),
                                allocStream_),
          absl::StrCat("cannot allocate ", bytes, " bytes on ", label()));
    if (status.ok())
      status =
          api_->check(api_->cuMemsetD8Async(
                          pointer, 0, static_cast<size_t>(bytes), allocStream_),
                      absl::StrCat(label(), ": zero-filling a buffer"));
    // Ready for every stream (the pool's memory is ordered on allocStream_).
    if (status.ok())
      status = api_->check(
          api_->cuStreamSynchronize(allocStream_),
          absl::StrCat("cannot allocate ", bytes, " bytes on ", label()));
    if (!status.ok()) {
      if (pointer)
        (void)api_->cuMemFreeAsync(pointer, allocStream_);
      undo();
      if (status.code() == absl::StatusCode::kResourceExhausted ||
          absl::StrContains(status.message(), "OUT_OF_MEMORY"))
        return absl::ResourceExhaustedError(status.message());
      return status;
    }
  }
  return std::unique_ptr<Buffer>(new CudaBuffer(*this, pointer, bytes));
}

void CudaDevice::release(CUdeviceptr pointer, int64_t size) {
  if (pointer && bind().ok())
    (void)api_->cuMemFreeAsync(pointer, allocStream_);
  allocated_.fetch_sub(size, std::memory_order_relaxed);
}

bool CudaDevice::supportsFormat(ExecutableFormat format) const {
  return format == ExecutableFormat::Ptx || format == ExecutableFormat::Cubin;
}

int64_t CudaDevice::bytesInUse() const {
  int64_t bytes = allocated_.load(std::memory_order_relaxed);
  cuuint64_t graphs = 0;
  if (api_->cuDeviceGetGraphMemAttribute(device_,
                                         CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT,
                                         &graphs) == CUDA_SUCCESS)
    bytes += static_cast<int64_t>(graphs);
  return bytes;
}

absl::StatusOr<std::unique_ptr<Executable>>
CudaDevice::loadExecutable(const ExecutableSpec &spec) {
  OMNI_RETURN_IF_ERROR(bind());
  OMNI_ASSIGN_OR_RETURN(std::unique_ptr<CudaExecutable> exe,
                        CudaExecutable::load(*this, spec));
  return std::unique_ptr<Executable>(std::move(exe));
}

absl::StatusOr<std::unique_ptr<Stream>> CudaDevice::createStream() {
  OMNI_ASSIGN_OR_RETURN(std::unique_ptr<CudaStream> stream,
                        CudaStream::create(*this));
  return std::unique_ptr<Stream>(std::move(stream));
}

bool CudaDevice::supportsLibrary(Library, DType dtype) const {
  return dtype == DType::F32 || dtype == DType::F64 || dtype == DType::F16 ||
         dtype == DType::BF16;
}

absl::StatusOr<std::unique_ptr<Channel>>
CudaDevice::createChannel(const ChannelSpec &spec) {
  OMNI_RETURN_IF_ERROR(validateChannelSpec(spec));
  OMNI_RETURN_IF_ERROR(bind());
  NcclDeviceContext context;
  context.api = api_.get();
  context.ordinal = ordinal_;
  context.context = context_;
  return createNcclChannel(context, spec);
}

} // namespace omni::hal::cuda
