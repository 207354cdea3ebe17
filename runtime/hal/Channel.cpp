//===- Channel.cpp - Channel specs, providers, the in-process group -*- C++
//-*-===//

#include "runtime/hal/Channel.h"
#include "runtime/hal/InProcessGroup.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace omni::hal {

absl::string_view reduceOpName(ReduceOp op) {
  switch (op) {
  case ReduceOp::Sum:
    return "sum";
  case ReduceOp::Prod:
    return "prod";
  case ReduceOp::Min:
    return "min";
  case ReduceOp::Max:
    return "max";
  case ReduceOp::Mean:
    return "mean";
  }
  return "?";
}

absl::Status validateChannelSpec(const ChannelSpec &spec) {
  if (spec.size < 1)
    return absl::InvalidArgumentError(absl::StrCat(
        "channel spec: size = ", spec.size, " but a group has >= 1 ranks"));
  if (spec.rank < 0 || spec.rank >= spec.size)
    return absl::InvalidArgumentError(
        absl::StrCat("channel spec: rank = ", spec.rank, " but expected 0..",
                     spec.size - 1, " for a group of ", spec.size));
  if (!spec.bootstrap) {
    if (spec.size != 1)
      return absl::InvalidArgumentError(absl::StrCat(
          "channel spec: size = ", spec.size,
          " without a bootstrap; only a loopback channel (size 1) needs none"));
    return absl::OkStatus();
  }
  if (spec.bootstrap->size() != spec.size)
    return absl::InvalidArgumentError(absl::StrCat(
        "channel spec: size = ", spec.size, " but its ", spec.bootstrap->kind(),
        " group has ", spec.bootstrap->size(), " ranks"));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Channel>> Channel::split(int, int) {
  return absl::UnimplementedError("this channel cannot be split");
}

void Channel::abort(const absl::Status &) {}

absl::StatusOr<ChannelSpec> LoopbackChannelProvider::spec(int rank) const {
  if (rank != 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "rank ", rank, " of a loopback channel, which has only rank 0"));
  return ChannelSpec{};
}

InProcessChannelProvider::InProcessChannelProvider(
    int size, std::chrono::milliseconds timeout)
    : size_(size),
      group_(size >= 1 ? std::make_shared<InProcessGroup>(size, timeout)
                       : nullptr) {}

absl::StatusOr<ChannelSpec> InProcessChannelProvider::spec(int rank) const {
  if (size_ < 1)
    return absl::InvalidArgumentError(absl::StrCat(
        "an in-process group of ", size_, " ranks (expected >= 1)"));
  if (rank < 0 || rank >= size_)
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", rank, " of an in-process group of ", size_,
                     " ranks (expected 0..", size_ - 1, ")"));
  return ChannelSpec{rank, size_, group_};
}

//===----------------------------------------------------------------------===//
// InProcessGroup
//===----------------------------------------------------------------------===//

InProcessGroup::InProcessGroup(int size, std::chrono::milliseconds timeout)
    : size_(size), timeout_(timeout), joined_(size), left_(size), posted_(size),
      arrived_(size), published_(size) {}

absl::Status InProcessGroup::join(int rank) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (rank < 0 || rank >= size_)
    return absl::InvalidArgumentError(
        absl::StrCat("channel spec: rank = ", rank, " but expected 0..",
                     size_ - 1, " for a group of ", size_));
  if (joined_[rank])
    return absl::InvalidArgumentError(absl::StrCat(
        "channel spec: rank ", rank, " of this group already has a channel"));
  joined_[rank] = true;
  return absl::OkStatus();
}

void InProcessGroup::leave(int rank) {
  std::lock_guard<std::mutex> lock(mutex_);
  left_[rank] = true;
  bool all = true;
  for (int r = 0; r < size_; ++r)
    all &= left_[r] || !joined_[r];
  if (!all && aborted_.ok()) {
    aborted_ =
        absl::AbortedError(absl::StrCat("rank ", rank, " closed its channel"));
    changed_.notify_all();
  }
}

void InProcessGroup::abort(const absl::Status &reason) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!aborted_.ok() || reason.ok())
    return;
  aborted_ = reason.code() == absl::StatusCode::kDeadlineExceeded
                 ? reason
                 : absl::AbortedError(reason.message());
  changed_.notify_all();
}

absl::Status InProcessGroup::status() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return aborted_;
}

absl::StatusOr<std::vector<const void *>>
InProcessGroup::exchange(int rank, const void *value, absl::string_view what) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!aborted_.ok())
    return aborted_;
  posted_[rank] = value;
  arrived_[rank] = true;
  if (++arrivedCount_ == size_) {
    published_ = posted_;
    arrivedCount_ = 0;
    std::fill(arrived_.begin(), arrived_.end(), false);
    ++generation_;
    changed_.notify_all();
    return published_;
  }
  const uint64_t generation = generation_;
  auto done = [&] { return generation_ != generation || !aborted_.ok(); };
  if (timeout_.count() > 0) {
    if (!changed_.wait_for(lock, timeout_, done)) {
      std::vector<int> missing;
      for (int r = 0; r < size_; ++r)
        if (!arrived_[r])
          missing.push_back(r);
      aborted_ = absl::DeadlineExceededError(
          absl::StrCat("rank ", rank, " waited ", timeout_.count(), " ms in ",
                       what, " for rank", missing.size() == 1 ? " " : "s ",
                       absl::StrJoin(missing, ", "), " of ", size_));
      changed_.notify_all();
      return aborted_;
    }
  } else {
    changed_.wait(lock, done);
  }
  // A completed round wins over an abort that came after it.
  if (generation_ != generation)
    return published_;
  return aborted_;
}

absl::Status InProcessGroup::barrier(int rank, absl::string_view what) {
  return exchange(rank, nullptr, what).status();
}

} // namespace omni::hal
