//===- CpuChannel.cpp - A single-rank channel -------------------*- C++ -*-===//

#include "runtime/hal/drivers/cpu/CpuChannel.h"

#include "absl/strings/str_cat.h"

namespace omni::hal::cpu {
namespace {

absl::Status copyOneRank(Stream &stream, BufferRef send, BufferRef recv,
                         const char *what) {
  if (send.length != recv.length)
    return absl::InvalidArgumentError(
        absl::StrCat(what,
                     " over 1 rank needs send and recv of equal size, "
                     "found ",
                     send.length, " and ", recv.length, " bytes"));
  if (send == recv)
    return absl::OkStatus();
  return stream.copy(send, recv);
}

} // namespace

absl::Status CpuChannel::allReduce(Stream &stream, BufferRef send,
                                   BufferRef recv, DType, ReduceOp) {
  return copyOneRank(stream, send, recv, "all_reduce");
}

absl::Status CpuChannel::allGather(Stream &stream, BufferRef send,
                                   BufferRef recv) {
  return copyOneRank(stream, send, recv, "all_gather");
}

absl::Status CpuChannel::reduceScatter(Stream &stream, BufferRef send,
                                       BufferRef recv, DType, ReduceOp) {
  return copyOneRank(stream, send, recv, "reduce_scatter");
}

absl::Status CpuChannel::broadcast(Stream &, BufferRef, int root) {
  if (root != 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "broadcast from rank ", root, " but the channel has 1 rank"));
  return absl::OkStatus();
}

} // namespace omni::hal::cpu
