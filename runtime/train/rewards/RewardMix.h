//===- RewardMix.h - A weighted sum of rewards ------------------*- C++ -*-===//
//
// `omnirun --reward SPEC` (repeatable) replaces the reward a program calls
// with a weighted sum of rewards, each a built-in (Rewards.h) or a server
// (HttpReward.h): `--reward jpeg_compressibility:0.5 --reward
// http://127.0.0.1:8000:0.5`. The weight is the last `:<number>` of a spec
// (default 1); the mix is sum_i weight_i * reward_i per image. It also
// keeps the means the metrics log: reward/<spec> per component (when there
// are several) and reward/<name> per sub-score a server returns
// (docs/rewards.md).
//
// Thread safety: score() may run on any thread, but one at a time per mix
// (the training driver's executor runs at most one concurrent host call at
// a time, on a worker thread, and waits for it before the next one);
// setContext and takeMeans are safe to call between iterations from the
// driver's thread, under the mix's lock.
// MLIR-free.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_TRAIN_REWARDS_REWARDMIX_H
#define OMNI_RUNTIME_TRAIN_REWARDS_REWARDMIX_H

#include "runtime/train/rewards/HttpReward.h"
#include "runtime/train/rewards/Rewards.h"

#include "absl/status/statusor.h"

#include "absl/strings/string_view.h"
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace omni::rewards {

/// One term of a mix.
struct RewardComponent {
  /// The spec without its weight: a registered reward's name or a URL.
  std::string source;
  double weight = 1;
  /// Set for a server.
  std::optional<HttpEndpoint> http;
};

/// Parses one --reward spec: `NAME[:WEIGHT]` (NAME a registered reward) or
/// `http://HOST:PORT[/PATH][:WEIGHT]`. WEIGHT is a finite decimal number
/// (negative weights subtract). One-line errors that start with
/// "--reward SPEC: ".
absl::StatusOr<RewardComponent> parseRewardComponent(absl::string_view spec);

class RewardMix {
public:
  /// The mix of `specs` (at least one; a source given twice is an error).
  static absl::StatusOr<std::shared_ptr<RewardMix>>
  create(const std::vector<std::string> &specs,
         const HttpRewardOptions &httpOptions);

  /// Scores a validated batch: sum_i weight_i * reward_i per image, summed
  /// in double and rounded to float once (one built-in with weight 1 gives
  /// its values unchanged). Errors name the component.
  absl::StatusOr<std::vector<float>> score(const ImageBatch &batch);

  /// What the servers are told about the next batches (the iteration, the
  /// seed, the prompts). With context.batchSize = B > 0, a scored batch of
  /// fewer than B images is taken as the next part of the iteration's batch
  /// (the rollout chunks, scored in order): its first image is the number
  /// of images scored since setContext, modulo B; a batch of B images is
  /// the whole one.
  void setContext(ScoreContext context);

  /// The means since the last call, in a fixed order, and a reset:
  /// reward/<source> per component when there are several, reward/<name>
  /// per server sub-score.
  std::vector<std::pair<std::string, double>> takeMeans();

  /// "jpeg_compressibility" or "0.5 * jpeg_compressibility + 0.5 *
  /// http://127.0.0.1:8000/score".
  std::string describe() const;

  const std::vector<RewardComponent> &components() const { return components_; }

private:
  struct Mean {
    double sum = 0;
    int64_t count = 0;
  };
  void add(const std::string &key, const std::vector<float> &values);

  std::vector<RewardComponent> components_;
  std::vector<std::unique_ptr<HttpReward>> servers_; // per component or null
  std::mutex mutex_;
  ScoreContext context_;
  int64_t scored_ = 0; // images scored since setContext
  std::vector<std::string> order_;
  std::map<std::string, Mean> means_;
};

} // namespace omni::rewards

#endif // OMNI_RUNTIME_TRAIN_REWARDS_REWARDMIX_H
