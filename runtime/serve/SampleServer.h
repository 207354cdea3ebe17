//===- SampleServer.h - Sampling images over HTTP ---------------*- C++ -*-===//
//
// The sampling server of `omnirun sample.bin --serve HOST:PORT` (the role
// vLLM-Omni's HTTP server plays for verl-omni; docs/serving.md is the
// protocol). A SampleBackend runs the compiled @sample function on one
// batch of B rows (per-sample seeds, prompt embeddings, one guidance scale)
// and returns images f32 [B, 3, H, W] in [0, 1] and, for the SDE sampler,
// the log-probability of each of the N steps [B, N]. The server answers
// `POST /v1/sample`, `GET /v1/info` and `GET /v1/health` (cpp-httplib, JSON
// with nlohmann-json): HTTP threads parse and check a request, queue it
// (bounded: 503 when full) and wait; one worker thread takes the queued
// requests that fit one batch (the same guidance, at most B images in all;
// waiting at most maxBatchWaitMs for more once one is there), pads the
// batch to B, runs the backend once and answers each request with its own
// images as base64 PNG. Every bad request is a 400 with one line naming the
// field; a backend error is a 500 with its message for the requests of that
// batch, and the server keeps serving.
//
// Thread safety: the backend is called from the worker thread only, one
// batch at a time (it needs no locking of its own); info() and the prompt
// methods are called from any HTTP thread and must be safe to call
// concurrently (they are const reads). SampleServer's methods are
// thread-safe. MLIR-free.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_SERVE_SAMPLESERVER_H
#define OMNI_RUNTIME_SERVE_SAMPLESERVER_H

#include "runtime/io/HostTensor.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace omni::serve {

/// What a compiled @sample takes and returns; fixed when it was compiled.
struct SampleInfo {
  /// B: the rows of one run.
  int64_t batch = 1;
  /// prompt_embeds [B, L, D], if @sample takes it.
  bool takesEmbeds = false;
  int64_t tokens = 0; // L
  int64_t dim = 0;    // D
  /// pooled_prompt_embeds [B, Dp], if @sample takes it.
  bool takesPooled = false;
  int64_t pooledDim = 0; // Dp
  /// prompt_embeds_mask [B, L] (a model with a text mask), if @sample
  /// takes it; a request without one gets all ones.
  bool takesMask = false;
  /// N: the sampler's steps (compile-time).
  int64_t steps = 1;
  /// The images' size.
  int64_t height = 1;
  int64_t width = 1;
  /// Whether @sample returns log-probs [B, N] (the SDE sampler).
  bool hasLogprobs = false;
  /// Whether @sample takes a guidance_scale (f64 scalar), and its value
  /// when a request gives none.
  bool takesGuidance = false;
  double defaultGuidance = 1.0;
};

/// One run of @sample: exactly `info().batch` rows, the first `used` of
/// them from requests (the rest repeat the last used row and are thrown
/// away).
struct SampleBatch {
  /// i64 [B].
  HostTensor seeds;
  /// f32 [B, L, D]; empty unless info().takesEmbeds.
  HostTensor promptEmbeds;
  /// f32 [B, Dp]; empty unless info().takesPooled.
  HostTensor pooledPromptEmbeds;
  /// f32 [B, L] of 0/1; empty unless info().takesMask.
  HostTensor promptEmbedsMask;
  /// Only when info().takesGuidance.
  std::optional<double> guidance;
  int64_t used = 0;
};

/// What @sample returned for a batch.
struct SampleOutput {
  /// f32 [B, 3, H, W], values in [0, 1] (quantized as the rewards see
  /// them, Png.h).
  HostTensor images;
  /// f32 [B, N]; empty unless info().hasLogprobs.
  HostTensor logprobs;
};

/// Runs @sample (the lead's adapter over the sampling program; a fake in
/// the tests).
class SampleBackend {
public:
  virtual ~SampleBackend();

  virtual const SampleInfo &info() const = 0;

  /// Runs one batch. An error fails that batch's requests (HTTP 500 with
  /// the message); the server goes on with the next batch.
  virtual absl::StatusOr<SampleOutput> run(const SampleBatch &batch) = 0;

  /// The prompt set requests may name by `prompt_index` (omnirun
  /// --prompts): its size (0: none).
  virtual int64_t promptCount() const { return 0; }
  /// Prompt `index` (0 <= index < promptCount()): its embeddings into
  /// `embeds` (L * D floats, when info().takesEmbeds) and `pooled` (Dp,
  /// when info().takesPooled).
  virtual void promptEmbeddings(int64_t index, absl::Span<float> embeds,
                                absl::Span<float> pooled) const {
    (void)index;
    (void)embeds;
    (void)pooled;
  }
  /// Prompt `index`'s text mask into `mask` (L floats, when
  /// info().takesMask; left all ones by default).
  virtual void promptMask(int64_t index, absl::Span<float> mask) const {
    (void)index;
    (void)mask;
  }
  /// Prompt `index`'s text, "" when the set has none.
  virtual std::string promptText(int64_t index) const {
    (void)index;
    return "";
  }
};

struct ServeOptions {
  /// Where to listen; port 0 takes a free port (SampleServer::port()).
  std::string host = "127.0.0.1";
  int port = 0;
  /// Requests waiting for the worker (not counting the batch it runs);
  /// one more is answered 503 with Retry-After.
  int64_t maxQueue = 64;
  /// How long the worker waits for more requests once one is queued and
  /// the batch is not full, in milliseconds.
  int64_t maxBatchWaitMs = 5;
  /// The largest request body; a larger one is answered 413. 0: room for
  /// one request's embeddings written out as JSON (32 bytes a number)
  /// plus 1 MiB.
  int64_t maxBodyBytes = 0;
  /// HTTP threads; 0: maxQueue + B + 4, at most 64 (further connections
  /// wait for a thread; they are not refused).
  int threads = 0;
};

/// How many requests and batches the server has seen (for tests and the
/// shutdown line).
struct ServeStats {
  int64_t requests = 0;    // answered 200
  int64_t batches = 0;     // backend runs
  int64_t rejected = 0;    // 503 (queue full or shutting down)
  int64_t failed = 0;      // 500 (backend errors)
  int64_t badRequests = 0; // 400 and 413
};

class SampleServer {
public:
  /// Checks `backend.info()`, binds `options.host:options.port` and starts
  /// serving (the HTTP threads and the worker). `backend` must outlive
  /// the server. One line for a bad info or an address it cannot bind.
  static absl::StatusOr<std::unique_ptr<SampleServer>>
  start(SampleBackend &backend, const ServeOptions &options);

  /// shutdown().
  ~SampleServer();

  SampleServer(const SampleServer &) = delete;
  SampleServer &operator=(const SampleServer &) = delete;

  /// The port it listens on.
  int port() const;

  /// Stops serving: new requests and the queued ones are answered 503
  /// ("the server is shutting down"), the batch that runs finishes and is
  /// answered, then the listener closes and the threads end. Idempotent.
  void shutdown();

  ServeStats stats() const;
  /// Requests waiting in the queue now (for tests).
  int64_t queued() const;

  struct Impl;

private:
  explicit SampleServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// Checks a SampleInfo (B, L, D, Dp, N, H, W >= 1 where used); one line.
absl::Status checkSampleInfo(const SampleInfo &info);

} // namespace omni::serve

#endif // OMNI_RUNTIME_SERVE_SAMPLESERVER_H
