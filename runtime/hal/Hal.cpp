//===- Hal.cpp - Defaults of the optional hal methods -----------*- C++ -*-===//

#include "runtime/hal/Buffer.h"
#include "runtime/hal/Device.h"
#include "runtime/hal/DriverRegistry.h"
#include "runtime/hal/Stream.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace omni::hal {

absl::StatusOr<void *> Buffer::map() {
  return absl::UnimplementedError(absl::StrCat(
      "buffers of the ", device().driverName(), " device cannot be mapped"));
}

absl::Status Stream::matmul(const MatmulParams &, BufferRef, BufferRef,
                            BufferRef) {
  return absl::UnimplementedError("this stream has no Matmul routine");
}

absl::Status Stream::matmulWithEpilogue(const MatmulParams &params,
                                        BufferRef lhs, BufferRef rhs,
                                        BufferRef result,
                                        const Epilogue &epilogue) {
  if (absl::Status done = matmul(params, lhs, rhs, result); !done.ok())
    return done;
  return dispatch(*epilogue.executable, epilogue.kernel, epilogue.grid,
                  epilogue.buffers, epilogue.scalars);
}

absl::Status Stream::conv2d(const Conv2dParams &, BufferRef, BufferRef,
                            BufferRef) {
  return absl::UnimplementedError("this stream has no Conv2d routine");
}

absl::Status Stream::attention(const AttentionParams &, BufferRef, BufferRef,
                               BufferRef, BufferRef, BufferRef) {
  return absl::UnimplementedError("this stream has no Attention routine");
}

absl::Status Stream::attentionBackward(const AttentionParams &, BufferRef,
                                       BufferRef, BufferRef, BufferRef,
                                       BufferRef, BufferRef, BufferRef,
                                       BufferRef, BufferRef) {
  return absl::UnimplementedError(
      "this stream has no AttentionBackward routine");
}

absl::Status Stream::beginCapture() {
  return absl::UnimplementedError("this stream cannot capture graphs");
}

absl::StatusOr<std::unique_ptr<Graph>> Stream::endCapture() {
  return absl::UnimplementedError("this stream cannot capture graphs");
}

absl::Status Stream::launchGraph(const Graph &) {
  return absl::UnimplementedError("this stream cannot launch graphs");
}

bool Device::supportsLibrary(Library, DType) const { return false; }

bool Device::prefersGraphs() const { return false; }

int64_t Device::bytesInUse() const { return -1; }

absl::StatusOr<std::unique_ptr<Channel>>
Device::createChannel(const ChannelSpec &) {
  return absl::UnimplementedError(
      absl::StrCat("the ", driverName(), " device has no collective channels"));
}

absl::Status DriverRegistry::add(std::unique_ptr<Driver> driver) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string name = driver->name();
  if (drivers_.count(name))
    return absl::AlreadyExistsError(
        absl::StrCat("a driver named '", name, "' is already registered"));
  drivers_.emplace(std::move(name), std::move(driver));
  return absl::OkStatus();
}

std::vector<std::string> DriverRegistry::names() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::string> out;
  for (const auto &entry : drivers_)
    out.push_back(entry.first);
  return out;
}

Driver *DriverRegistry::find(absl::string_view name) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = drivers_.find(name);
  return it == drivers_.end() ? nullptr : it->second.get();
}

absl::StatusOr<std::unique_ptr<Device>>
DriverRegistry::createDevice(absl::string_view name,
                             const DeviceOptions &options) const {
  Driver *driver = find(name);
  if (!driver)
    return absl::NotFoundError(
        absl::StrCat("no driver named '", name,
                     "' (available: ", absl::StrJoin(names(), ", "), ")"));
  return driver->createDevice(options);
}

} // namespace omni::hal
