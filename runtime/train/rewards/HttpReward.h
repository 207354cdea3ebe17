//===- HttpReward.h - Rewards computed by a server over HTTP ----*- C++ -*-===//
//
// Real FlowGRPO runs score images with models that live in Python (PickScore,
// OCR, VLM judges), usually in another process on another GPU. An
// HttpReward posts a batch of images to such a server on loopback and reads
// one score per image back, plus optional named sub-scores; docs/rewards.md
// is the protocol (POST <path> with a JSON body, a JSON answer). This header
// also has the pure halves (the request body, the answer's parser, the URL
// parser), exposed for tests.
//
// Errors are one line: what failed, which server, what was expected and
// what was found. Connection failures (nothing listening, a reset before an
// answer) are retried with exponential backoff; an answer that is wrong
// (HTTP status != 200, malformed JSON, a wrong number of scores, a
// non-finite score) is not, because asking again would get the same answer.
// Thread safety: an HttpReward is immutable after construction and score()
// may be called from several threads (each call opens its own connection).
// MLIR-free.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_TRAIN_REWARDS_HTTPREWARD_H
#define OMNI_RUNTIME_TRAIN_REWARDS_HTTPREWARD_H

#include "runtime/train/rewards/Rewards.h"

#include "absl/status/statusor.h"

#include "absl/strings/string_view.h"
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace omni::rewards {

/// Where a reward server listens: `http://HOST:PORT[/PATH]` (TCP), or
/// `unix:SOCKET` (a Unix domain socket's file; the path is /score). The
/// port is required (so that a mix weight after it, `...:8000:0.5`, cannot
/// be read as the port); PATH defaults to /score.
struct HttpEndpoint {
  std::string host;
  int port = 0;
  std::string path = "/score";
  /// Set for a Unix domain socket (host and port are then unused).
  std::string socket;

  /// "http://HOST:PORT/PATH" or "unix:SOCKET", for messages.
  std::string url() const;
};

/// Parses `http://HOST:PORT[/PATH]` or `unix:SOCKET`. One-line errors
/// naming the part that is wrong.
absl::StatusOr<HttpEndpoint> parseHttpEndpoint(absl::string_view url);

/// How the images travel: PNG files or raw interleaved RGB bytes (HWC,
/// uint8), both base64 in the JSON body. Both carry the pixels exactly as
/// quantizePixel makes them, so a server sees what the built-in rewards see.
enum class ImageEncoding { Png, Raw };

/// What the server is told about the batch besides the pixels.
struct ScoreContext {
  /// The training iteration and the run's seed; -1: unknown (null).
  int64_t iteration = -1;
  int64_t seed = -1;
  /// P, the prompts per iteration, and Np, the size of the prompt set; when
  /// both are positive and P divides the batch (prompt-major: image
  /// b = p * G + g), each image gets its prompt_index ((iteration * P + p)
  /// mod Np, the row of the prompt set) and sample_index (g); otherwise
  /// they are null.
  int64_t promptsPerIteration = 0;
  int64_t promptCount = 0;
  /// The iteration's whole batch B when the batch scored is a part of it
  /// (a rollout chunk, recipe option rollout_chunks), and the index in it of
  /// the part's first image; 0 and 0: the batch scored is the whole one.
  /// The prompt-major layout is then the whole batch's: image b of the part
  /// is image first + b of the iteration (G = B / P).
  int64_t batchSize = 0;
  int64_t first = 0;
  /// The prompts' texts by prompt_index, when known (empty: null).
  std::vector<std::string> promptTexts;
};

/// A server's answer.
struct Scores {
  std::vector<float> scores;
  /// Named sub-scores in the answer's order, each with one value per image.
  std::vector<std::pair<std::string, std::vector<float>>> subScores;
};

/// The JSON body of POST /score for `batch` (validated first).
absl::StatusOr<std::string> scoreRequestBody(const ImageBatch &batch,
                                             const ScoreContext &context,
                                             ImageEncoding encoding);

/// Parses an answer for `count` images: {"scores": [...], "sub_scores":
/// {"name": [...], ...}} (other keys are ignored). Every value must be a
/// finite number (Python's NaN and Infinity are read, then refused as not
/// finite); a sub-score list must have `count` values too. The error says
/// what is wrong ("malformed JSON at byte 12: ...", "3 scores for 4
/// images", "score 2 is NaN, expected a finite number").
absl::StatusOr<Scores> parseScoreResponse(absl::string_view body, size_t count);

struct HttpRewardOptions {
  /// The longest wait for a connection and for the answer, in seconds.
  double timeoutSeconds = 60;
  /// Tries when the connection fails; the waits in between start at
  /// backoffSeconds and double.
  int attempts = 5;
  double backoffSeconds = 0.25;
  ImageEncoding encoding = ImageEncoding::Png;
};

/// A reward computed by the server at `endpoint`.
class HttpReward {
public:
  HttpReward(HttpEndpoint endpoint, HttpRewardOptions options);

  /// Scores `batch`: one request, one answer (retried only when the
  /// connection fails). Errors start with "reward server <url>: ".
  absl::StatusOr<Scores> score(const ImageBatch &batch,
                               const ScoreContext &context) const;

  const HttpEndpoint &endpoint() const { return endpoint_; }

private:
  HttpEndpoint endpoint_;
  HttpRewardOptions options_;
};

} // namespace omni::rewards

#endif // OMNI_RUNTIME_TRAIN_REWARDS_HTTPREWARD_H
