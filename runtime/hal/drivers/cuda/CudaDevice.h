//===- CudaDevice.h - One NVIDIA GPU as a hal Device ------------*- C++ -*-===//
//
// The cuda driver's Device, on the primary context of its ordinal (shared
// with anything else in the process that uses the runtime API on that GPU).
//
// Memory: buffers come from the device's default memory pool through the
// stream-ordered allocator (cuMemAllocAsync on a stream the device owns),
// zero-filled there, and the device waits for that stream before returning
// them, so a new buffer is ready for any stream. Freeing is
// cuMemFreeAsync on the same stream: the Buffer contract (hal/Buffer.h)
// already requires every command using the buffer to have completed. The
// pool keeps freed memory cached (release threshold: unlimited), so the
// executor's arenas and the drivers' temporaries do not return to the OS
// between steps. memoryLimitBytes bounds the bytes of live buffers, and
// bytesInUse reports them (omnirun --stats) with the graph memory pool's
// reserve; scratch buffers of executables count too, the library
// routines' temporaries do not.
//
// Helper kernels (kernels/HelperKernels.cu: random numbers, fills, im2col,
// softmax) are JIT-compiled from their embedded PTX once, at creation.
//
// Ownership: created by CudaDriver::createDevice; must outlive every
// Buffer, Executable, Stream and Channel it creates. Thread safety: every
// method may be called from any thread (each binds the context first).
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_HAL_DRIVERS_CUDA_CUDADEVICE_H
#define OMNI_RUNTIME_HAL_DRIVERS_CUDA_CUDADEVICE_H

#include "runtime/hal/Device.h"
#include "runtime/hal/Driver.h"
#include "runtime/hal/drivers/cuda/CudaApi.h"

#include <atomic>
#include <memory>
#include <string>
#include <utility>

namespace omni::hal::cuda {

class CudaDevice;

/// The embedded PTX of kernels/HelperKernels.cu (generated file).
const char *helperKernelsPtx();

/// The entry points of the helper module, in kHelperKernelNames' order.
enum class HelperKernel {
  RandomNormalF32,
  RandomNormalF64,
  RandomNormalF16,
  RandomNormalBF16,
  RandomUniformF32,
  RandomUniformF64,
  RandomUniformF16,
  RandomUniformBF16,
  FillBytes,
  Im2colB2,
  Im2colB4,
  Im2colB8,
  SoftmaxF32,
  SoftmaxF64,
  SoftmaxF16,
  SoftmaxBF16,
  FlashF16D64,
  FlashF16D128,
  FlashBF16D64,
  FlashBF16D128,
  GradScoresF32,
  GradScoresF64,
  GradScoresF16,
  GradScoresBF16,
  FlashRowsF16D64,
  FlashRowsF16D128,
  FlashRowsBF16D64,
  FlashRowsBF16D128,
  FlashKeysF16D64,
  FlashKeysF16D128,
  FlashKeysBF16D64,
  FlashKeysBF16D128,
  Count,
};

/// Which attention the device runs, forward and backward, for f16 / bf16
/// with head dimension 64 or 128 (others always run unfused):
/// `OMNI_CUDA_ATTENTION` = unfused (the default: cuBLASLt products around
/// a row kernel) or flash (kernels/FlashAttention.h,
/// FlashAttentionBackward.h). docs/backend-cuda.md, "Library routines".
enum class AttentionKernel { Unfused, Flash };
/// OMNI_CUDA_ATTENTION's choice; another value is a one-line error.
absl::StatusOr<AttentionKernel> attentionKernelFromEnvironment();

/// Device memory owned by a CudaDevice (no host mapping).
class CudaBuffer final : public Buffer {
public:
  CudaBuffer(CudaDevice &device, CUdeviceptr pointer, int64_t size);
  ~CudaBuffer() override;

  int64_t size() const override { return size_; }
  Device &device() const override;
  CUdeviceptr pointer() const { return pointer_; }

private:
  CudaDevice &device_;
  CUdeviceptr pointer_;
  int64_t size_;
};

class CudaDevice final : public Device {
public:
  /// Retains the primary context of `options.ordinal` (checked by the
  /// caller), creates the allocation stream and loads the helper kernels;
  /// `attention` is the caller's attentionKernelFromEnvironment().
  static absl::StatusOr<std::unique_ptr<CudaDevice>>
  create(std::shared_ptr<const CudaApi> api, const DeviceOptions &options,
         AttentionKernel attention);
  ~CudaDevice() override;

  const std::string &driverName() const override;
  /// "cuda:0 NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB)".
  std::string description() const override;
  absl::StatusOr<std::unique_ptr<Buffer>> allocate(int64_t bytes) override;
  bool supportsFormat(ExecutableFormat format) const override;
  absl::StatusOr<std::unique_ptr<Executable>>
  loadExecutable(const ExecutableSpec &spec) override;
  absl::StatusOr<std::unique_ptr<Stream>> createStream() override;
  /// Matmul, Conv2d, Attention and AttentionBackward of f32, f64, f16 and
  /// bf16.
  bool supportsLibrary(Library library, DType dtype) const override;
  /// True: a launch costs microseconds of host time, a graph launch one
  /// for all its nodes (CudaStream.h, Graphs).
  bool prefersGraphs() const override { return true; }
  /// The live buffers' bytes, plus what the device's graph memory pool
  /// holds for CUDA graphs' allocation nodes (reserved while any graph
  /// that uses it exists).
  int64_t bytesInUse() const override;
  /// The NCCL channel (NcclChannel.h).
  absl::StatusOr<std::unique_ptr<Channel>>
  createChannel(const ChannelSpec &spec) override;

  const CudaApi &api() const { return *api_; }
  int ordinal() const { return ordinal_; }
  CUcontext context() const { return context_; }
  /// Makes this device's context current on the calling thread.
  absl::Status bind() const;
  /// "sm_90" (compute capability 9.0).
  const std::string &arch() const { return arch_; }
  int computeMajor() const { return major_; }
  int computeMinor() const { return minor_; }
  int multiprocessors() const { return multiprocessors_; }
  CUfunction helper(HelperKernel kernel) const {
    return helpers_[static_cast<int>(kernel)];
  }
  AttentionKernel attentionKernel() const { return attentionKernel_; }
  /// The flash kernel of `dtype` (F16 or BF16) and head dimension `d`, or
  /// null: another dtype or dimension, or the device cannot give a block
  /// its shared memory (sm_86 and sm_89 for d = 128).
  CUfunction flashKernel(DType dtype, int64_t d) const;
  /// The flash backward's rows and keys kernels for `dtype` and `d`, as
  /// flashKernel (both null or both set).
  std::pair<CUfunction, CUfunction> flashBackwardKernels(DType dtype,
                                                         int64_t d) const;
  /// "cuda:0" for messages.
  std::string label() const;

private:
  friend class CudaBuffer;
  CudaDevice(std::shared_ptr<const CudaApi> api, const DeviceOptions &options);
  /// Returns the bytes of a destroyed buffer.
  void release(CUdeviceptr pointer, int64_t size);

  std::shared_ptr<const CudaApi> api_;
  int ordinal_;
  int64_t memoryLimit_;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  CUstream allocStream_ = nullptr;
  CUmodule helperModule_ = nullptr;
  CUfunction helpers_[static_cast<int>(HelperKernel::Count)] = {};
  /// Whether each flash kernel got its shared memory (FlashF16D64 first).
  bool flashUsable_[4] = {};
  /// The same for the backward's pairs of kernels.
  bool flashBackwardUsable_[4] = {};
  AttentionKernel attentionKernel_ = AttentionKernel::Unfused;
  std::string name_;
  std::string arch_;
  int major_ = 0, minor_ = 0, multiprocessors_ = 0;
  size_t totalMemory_ = 0;
  std::atomic<int64_t> allocated_{0};
};

} // namespace omni::hal::cuda

#endif // OMNI_RUNTIME_HAL_DRIVERS_CUDA_CUDADEVICE_H
