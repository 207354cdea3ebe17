//===- SampleServer.cpp - Sampling images over HTTP -------------*- C++ -*-===//
//
// The protocol is docs/serving.md. cpp-httplib (Debian libcpp-httplib-dev)
// does the HTTP and nlohmann-json (Debian nlohmann-json3-dev) the JSON. A
// request is parsed and checked on its HTTP thread (400 with the field's
// name), queued as a Pending and answered through its promise: by the
// worker (200 or 500) or by shutdown (503). PNG encoding happens back on
// the HTTP thread, so the worker only runs the backend.
//
//===----------------------------------------------------------------------===//

#include "runtime/serve/SampleServer.h"
#include "runtime/base/JsonNonFinite.h"

#include "runtime/train/image/Png.h"

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <future>
#include <limits>
#include <mutex>
#include <thread>

#include <sys/socket.h>

namespace omni::serve {

using Json = nlohmann::json;

SampleBackend::~SampleBackend() = default;

absl::Status checkSampleInfo(const SampleInfo &info) {
  auto bad = [](absl::string_view what, int64_t value) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the sampling program's ", what, " is ", value, ", expected >= 1"));
  };
  if (info.batch < 1)
    return bad("batch size", info.batch);
  if (info.steps < 1)
    return bad("step count", info.steps);
  if (info.height < 1 || info.width < 1)
    return bad("image size", std::min(info.height, info.width));
  if (info.takesEmbeds && (info.tokens < 1 || info.dim < 1))
    return bad("prompt_embeds size", std::min(info.tokens, info.dim));
  if (info.takesPooled && info.pooledDim < 1)
    return bad("pooled_prompt_embeds size", info.pooledDim);
  if (info.takesGuidance && !std::isfinite(info.defaultGuidance))
    return absl::InvalidArgumentError(
        "the sampling program's default guidance scale is not finite");
  return absl::OkStatus();
}

namespace {

/// The fields of a POST /v1/sample body.
constexpr const char *kFields[] = {
    "prompt_index",       "prompt_embeds", "pooled_prompt_embeds",
    "prompt_embeds_mask", "seed",          "steps",
    "guidance",           "logprobs",      "n"};

/// What a worker run gives one request.
struct Answer {
  /// 200, 500 or 503.
  int status = 200;
  std::string error;
  /// f32 [n, 3, H, W] and [n, N] (empty unless asked).
  HostTensor images;
  HostTensor logprobs;
};

/// One checked request, queued.
struct Pending {
  int64_t rows = 1; // n
  int64_t seed = 0;
  std::vector<float> embeds; // L * D
  std::vector<float> pooled; // Dp
  std::vector<float> mask;   // L (info().takesMask)
  double guidance = 0;
  bool logprobs = false;
  std::optional<int64_t> promptIndex;
  std::promise<Answer> answer;
};

/// A request error: one line naming the field, for a 400.
struct BadRequest {
  std::string message;
};

std::string kindName(const Json &v) {
  switch (v.type()) {
  case Json::value_t::null:
    return "null";
  case Json::value_t::boolean:
    return v.get<bool>() ? "true" : "false";
  case Json::value_t::string:
    return absl::StrCat("a string");
  case Json::value_t::array:
    return absl::StrCat("an array of ", v.size());
  case Json::value_t::object:
    return "an object";
  default:
    return v.dump();
  }
}

std::string detailOf(const Json::exception &e) {
  absl::string_view what = e.what();
  // "[json.exception.parse_error.101] parse error at line 1, column 2:
  // syntax error ... - invalid literal; last read: 'x'": keep the reason.
  if (size_t dash = what.rfind("; last read"); dash != absl::string_view::npos)
    what = what.substr(0, dash);
  if (size_t dash = what.find(" - "); dash != absl::string_view::npos)
    what.remove_prefix(dash + 3);
  else if (size_t bracket = what.find("] "); bracket != absl::string_view::npos)
    what.remove_prefix(bracket + 2);
  return std::string(what);
}

Json parseBody(absl::string_view body) {
  try {
    return Json::parse(body.begin(), body.end());
  } catch (const Json::parse_error &e) {
    if (std::optional<std::string> quoted = quoteNonFinite(body)) {
      try {
        return Json::parse(*quoted);
      } catch (const Json::exception &) {
      }
    }
    throw BadRequest{absl::StrCat("malformed JSON at byte ",
                                  e.byte > 0 ? e.byte - 1 : 0, ": ",
                                  detailOf(e))};
  } catch (const Json::exception &e) {
    // out_of_range.406: a number beyond double's range.
    throw BadRequest{absl::StrCat("malformed JSON: ", detailOf(e))};
  }
}

/// `v` (named `what`) as a finite f32.
float readFloat(const Json &v, const std::string &what) {
  if (v.is_string() &&
      absl::StartsWith(v.get_ref<const std::string &>(), kNonFinite))
    throw BadRequest{
        absl::StrCat(what, " is ",
                     v.get_ref<const std::string &>().substr(kNonFinite.size()),
                     ", expected a finite number")};
  if (!v.is_number())
    throw BadRequest{
        absl::StrCat(what, " is ", kindName(v), ", expected a number")};
  double d = v.get<double>();
  if (!std::isfinite(d) || std::fabs(d) > std::numeric_limits<float>::max())
    throw BadRequest{absl::StrCat(what, " is ", v.dump(),
                                  ", expected a finite number (float32)")};
  return static_cast<float>(d);
}

/// `v` (named `what`) as an int64.
int64_t readInt(const Json &v, absl::string_view what) {
  if (v.is_number_unsigned() &&
      v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
    throw BadRequest{
        absl::StrCat(what, " is ", v.dump(), ", beyond the int64 range")};
  if (!v.is_number_integer())
    throw BadRequest{absl::StrCat(what, " is ",
                                  v.is_number() ? v.dump() : kindName(v),
                                  ", expected an integer")};
  return v.get<int64_t>();
}

/// `list` as `count` finite floats appended to `out`.
void readFloats(const Json &list, const std::string &what, int64_t count,
                absl::string_view each, std::vector<float> &out) {
  if (!list.is_array())
    throw BadRequest{absl::StrCat(what, " is ", kindName(list),
                                  ", expected an array of ", count, " ", each)};
  if (static_cast<int64_t>(list.size()) != count)
    throw BadRequest{absl::StrCat(what, " has ", list.size(), " ", each,
                                  ", expected ", count)};
  for (int64_t i = 0; i < count; ++i)
    out.push_back(readFloat(list[i], absl::StrCat(what, "[", i, "]")));
}

/// Parses and checks a POST /v1/sample body.
std::unique_ptr<Pending> parseRequest(absl::string_view body,
                                      const SampleBackend &backend) {
  const SampleInfo &info = backend.info();
  Json doc = parseBody(body);
  if (!doc.is_object())
    throw BadRequest{absl::StrCat("the request is ", kindName(doc),
                                  ", expected a JSON object")};
  for (const auto &item : doc.items())
    if (std::find_if(std::begin(kFields), std::end(kFields),
                     [&](const char *f) { return item.key() == f; }) ==
        std::end(kFields))
      throw BadRequest{absl::StrCat("unknown field '", item.key(),
                                    "' (fields: ", absl::StrJoin(kFields, ", "),
                                    ")")};
  auto pending = std::make_unique<Pending>();
  if (!doc.contains("seed"))
    throw BadRequest{"seed: missing (an integer; image k of the request uses "
                     "seed + k)"};
  pending->seed = readInt(doc["seed"], "seed");
  if (doc.contains("n")) {
    pending->rows = readInt(doc["n"], "n");
    if (pending->rows < 1 || pending->rows > info.batch)
      throw BadRequest{absl::StrCat("n is ", pending->rows,
                                    ", expected 1 to the batch size ",
                                    info.batch)};
  }
  if (pending->seed > std::numeric_limits<int64_t>::max() - (pending->rows - 1))
    throw BadRequest{absl::StrCat("seed ", pending->seed,
                                  " + n - 1 is beyond "
                                  "the int64 range")};
  if (doc.contains("steps")) {
    int64_t steps = readInt(doc["steps"], "steps");
    if (steps != info.steps)
      throw BadRequest{absl::StrCat(
          "steps is ", steps, ", but this program was compiled for ",
          info.steps, " steps (the step count is fixed at compile time)")};
  }
  pending->guidance = info.defaultGuidance;
  if (doc.contains("guidance")) {
    if (!info.takesGuidance)
      throw BadRequest{"guidance is given, but this program takes no guidance "
                       "scale (compile it with classifier-free guidance)"};
    const Json &g = doc["guidance"];
    if (!g.is_number() &&
        !(g.is_string() &&
          absl::StartsWith(g.get_ref<const std::string &>(), kNonFinite)))
      throw BadRequest{
          absl::StrCat("guidance is ", kindName(g), ", expected a number")};
    pending->guidance = readFloat(g, "guidance");
  }
  if (doc.contains("logprobs")) {
    const Json &l = doc["logprobs"];
    if (!l.is_boolean())
      throw BadRequest{absl::StrCat("logprobs is ",
                                    l.is_number() ? l.dump() : kindName(l),
                                    ", expected true or false")};
    pending->logprobs = l.get<bool>();
    if (pending->logprobs && !info.hasLogprobs)
      throw BadRequest{"logprobs is true, but this program returns no "
                       "log-probabilities (they come with the SDE sampler)"};
  }

  const bool takesPrompt = info.takesEmbeds || info.takesPooled;
  const bool byIndex = doc.contains("prompt_index");
  const bool byEmbeds =
      doc.contains("prompt_embeds") || doc.contains("pooled_prompt_embeds");
  if (!takesPrompt && (byIndex || byEmbeds))
    throw BadRequest{absl::StrCat(byIndex ? "prompt_index" : "prompt_embeds",
                                  " is given, but this program takes no "
                                  "prompt")};
  if (!takesPrompt)
    return pending;
  if (!info.takesMask && doc.contains("prompt_embeds_mask"))
    throw BadRequest{"prompt_embeds_mask is given, but this program takes "
                     "no text mask"};
  if (info.takesMask)
    pending->mask.assign(info.tokens, 1.f);
  if (byIndex && byEmbeds)
    throw BadRequest{"prompt_index and prompt_embeds are both given: expected "
                     "one"};
  if (byIndex) {
    int64_t index = readInt(doc["prompt_index"], "prompt_index");
    int64_t count = backend.promptCount();
    if (count == 0)
      throw BadRequest{"prompt_index is given, but the server has no prompt "
                       "set (start it with --prompts FILE, or send "
                       "prompt_embeds)"};
    if (index < 0 || index >= count)
      throw BadRequest{absl::StrCat("prompt_index is ", index,
                                    ", expected 0 to ", count - 1)};
    pending->promptIndex = index;
    pending->embeds.assign(info.takesEmbeds ? info.tokens * info.dim : 0, 0.f);
    pending->pooled.assign(info.takesPooled ? info.pooledDim : 0, 0.f);
    backend.promptEmbeddings(index, absl::MakeSpan(pending->embeds),
                             absl::MakeSpan(pending->pooled));
    if (info.takesMask)
      backend.promptMask(index, absl::MakeSpan(pending->mask));
    return pending;
  }
  auto need = [&](const char *field, bool taken, const std::string &shape) {
    if (taken && !doc.contains(field))
      throw BadRequest{absl::StrCat(field, ": missing (this program takes ",
                                    shape, ", or send prompt_index)")};
    if (!taken && doc.contains(field))
      throw BadRequest{
          absl::StrCat(field, " is given, but this program does not take it")};
  };
  need("prompt_embeds", info.takesEmbeds,
       absl::StrCat("prompt_embeds [", info.tokens, ", ", info.dim, "]"));
  need("pooled_prompt_embeds", info.takesPooled,
       absl::StrCat("pooled_prompt_embeds [", info.pooledDim, "]"));
  if (info.takesEmbeds) {
    const Json &rows = doc["prompt_embeds"];
    if (!rows.is_array())
      throw BadRequest{absl::StrCat("prompt_embeds is ", kindName(rows),
                                    ", expected ", info.tokens, " rows of ",
                                    info.dim, " numbers")};
    if (static_cast<int64_t>(rows.size()) != info.tokens)
      throw BadRequest{absl::StrCat("prompt_embeds has ", rows.size(),
                                    " rows, expected L = ", info.tokens)};
    pending->embeds.reserve(info.tokens * info.dim);
    for (int64_t t = 0; t < info.tokens; ++t)
      readFloats(rows[t], absl::StrCat("prompt_embeds[", t, "]"), info.dim,
                 "numbers", pending->embeds);
  }
  if (info.takesPooled)
    readFloats(doc["pooled_prompt_embeds"], "pooled_prompt_embeds",
               info.pooledDim, "numbers", pending->pooled);
  if (info.takesMask && doc.contains("prompt_embeds_mask")) {
    pending->mask.clear();
    readFloats(doc["prompt_embeds_mask"], "prompt_embeds_mask", info.tokens,
               "numbers (0 or 1)", pending->mask);
    bool any = false;
    for (size_t j = 0; j < pending->mask.size(); ++j) {
      float v = pending->mask[j];
      if (v != 0.f && v != 1.f)
        throw BadRequest{absl::StrCat("prompt_embeds_mask[", j, "] is ", v,
                                      ", expected 0 (padding) or 1 (a token)")};
      any = any || v == 1.f;
    }
    if (!any)
      throw BadRequest{"prompt_embeds_mask has no valid token (all 0), "
                       "expected at least one 1"};
  }
  return pending;
}

/// `doc` as JSON text; bytes that are not UTF-8 (a backend's message or
/// prompt text) become U+FFFD instead of throwing.
std::string dumpJson(const Json &doc) {
  return doc.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string errorBody(absl::string_view message) {
  return dumpJson(Json{{"error", std::string(message)}});
}

} // namespace

//===----------------------------------------------------------------------===//
// The server
//===----------------------------------------------------------------------===//

struct SampleServer::Impl {
  SampleBackend *backend = nullptr;
  ServeOptions options;
  httplib::Server http;
  int port = 0;
  std::thread listener, worker;
  std::atomic<bool> listenEnded{false};

  mutable std::mutex mutex;
  std::condition_variable changed;
  std::deque<std::shared_ptr<Pending>> queue;
  bool stopping = false;
  bool stopped = false;
  ServeStats stats;

  void count(int64_t ServeStats::*field) {
    std::lock_guard<std::mutex> lock(mutex);
    ++(stats.*field);
  }

  void sample(const httplib::Request &req, httplib::Response &res);
  void info(httplib::Response &res) const;
  void runWorker();
  /// Rows of queued requests that could join a batch led by the head.
  int64_t compatibleRows() const;
  /// Runs one batch of `batch` and answers it.
  void runBatch(std::vector<std::shared_ptr<Pending>> batch);
};

int64_t SampleServer::Impl::compatibleRows() const {
  if (queue.empty())
    return 0;
  int64_t rows = 0;
  for (const auto &p : queue)
    if (p->guidance == queue.front()->guidance)
      rows += p->rows;
  return rows;
}

void SampleServer::Impl::info(httplib::Response &res) const {
  const SampleInfo &i = backend->info();
  Json doc = {{"batch", i.batch},
              {"steps", i.steps},
              {"height", i.height},
              {"width", i.width},
              {"logprobs", i.hasLogprobs},
              {"prompts", backend->promptCount()},
              {"max_queue", options.maxQueue},
              {"max_body_bytes", options.maxBodyBytes}};
  doc["prompt_embeds"] =
      i.takesEmbeds ? Json::array({i.tokens, i.dim}) : Json(nullptr);
  doc["pooled_prompt_embeds"] =
      i.takesPooled ? Json::array({i.pooledDim}) : Json(nullptr);
  doc["guidance"] = i.takesGuidance ? Json(i.defaultGuidance) : Json(nullptr);
  res.set_content(dumpJson(doc), "application/json");
}

void SampleServer::Impl::sample(const httplib::Request &req,
                                httplib::Response &res) {
  std::shared_ptr<Pending> pending;
  try {
    pending = parseRequest(req.body, *backend);
  } catch (const BadRequest &bad) {
    count(&ServeStats::badRequests);
    res.status = 400;
    res.set_content(errorBody(bad.message), "application/json");
    return;
  }
  std::future<Answer> future = pending->answer.get_future();
  {
    std::lock_guard<std::mutex> lock(mutex);
    std::string refused;
    if (stopping)
      refused = "the server is shutting down";
    else if (static_cast<int64_t>(queue.size()) >= options.maxQueue)
      refused = absl::StrCat("the queue is full (", options.maxQueue,
                             " requests wait); retry later");
    if (!refused.empty()) {
      ++stats.rejected;
      res.status = 503;
      res.set_header("Retry-After", "1");
      res.set_content(errorBody(refused), "application/json");
      return;
    }
    queue.push_back(pending);
  }
  changed.notify_all();
  Answer answer = future.get();
  if (answer.status != 200) {
    res.status = answer.status;
    if (answer.status == 503)
      res.set_header("Retry-After", "1");
    res.set_content(errorBody(answer.error), "application/json");
    return;
  }
  const SampleInfo &info = backend->info();
  Json doc;
  Json images = Json::array(), seeds = Json::array();
  const int64_t pixels = 3 * info.height * info.width;
  for (int64_t k = 0; k < pending->rows; ++k) {
    HostTensor one(DType::F32, {1, 3, info.height, info.width});
    std::copy_n(answer.images.floats().begin() + k * pixels, pixels,
                one.floats().begin());
    absl::StatusOr<image::RgbImage> rgb = image::imageGrid(one, 0);
    absl::StatusOr<std::string> png =
        rgb.ok() ? image::encodePng(*rgb) : rgb.status();
    if (!png.ok()) {
      count(&ServeStats::failed);
      res.status = 500;
      res.set_content(errorBody(png.status().message()), "application/json");
      return;
    }
    images.push_back(absl::Base64Escape(*png));
    seeds.push_back(pending->seed + k);
  }
  doc["images"] = std::move(images);
  doc["seeds"] = std::move(seeds);
  doc["height"] = info.height;
  doc["width"] = info.width;
  doc["steps"] = info.steps;
  if (info.takesGuidance)
    doc["guidance"] = pending->guidance;
  if (pending->promptIndex) {
    doc["prompt_index"] = *pending->promptIndex;
    std::string text = backend->promptText(*pending->promptIndex);
    if (!text.empty())
      doc["prompt"] = text;
  }
  if (pending->logprobs) {
    Json rows = Json::array();
    for (int64_t k = 0; k < pending->rows; ++k) {
      Json row = Json::array();
      for (int64_t s = 0; s < info.steps; ++s)
        row.push_back(answer.logprobs.floats()[k * info.steps + s]);
      rows.push_back(std::move(row));
    }
    doc["logprobs"] = std::move(rows);
  }
  count(&ServeStats::requests);
  res.set_content(dumpJson(doc), "application/json");
}

void SampleServer::Impl::runWorker() {
  const int64_t batchRows = backend->info().batch;
  std::unique_lock<std::mutex> lock(mutex);
  while (true) {
    changed.wait(lock, [&] { return stopping || !queue.empty(); });
    if (stopping)
      return;
    // Once one request is there, wait a little for the batch to fill.
    auto deadline = std::chrono::steady_clock::now() +
                    std::chrono::milliseconds(options.maxBatchWaitMs);
    changed.wait_until(lock, deadline, [&] {
      return stopping || compatibleRows() >= batchRows;
    });
    if (stopping)
      return;
    // The head and the requests after it with its guidance that fit.
    std::vector<std::shared_ptr<Pending>> batch;
    int64_t rows = 0;
    const double guidance = queue.front()->guidance;
    for (auto it = queue.begin(); it != queue.end() && rows < batchRows;) {
      if ((*it)->guidance == guidance && rows + (*it)->rows <= batchRows) {
        rows += (*it)->rows;
        batch.push_back(std::move(*it));
        it = queue.erase(it);
      } else {
        ++it;
      }
    }
    ++stats.batches;
    lock.unlock();
    runBatch(std::move(batch));
    lock.lock();
  }
}

void SampleServer::Impl::runBatch(std::vector<std::shared_ptr<Pending>> batch) {
  const SampleInfo &info = backend->info();
  const int64_t b = info.batch;
  SampleBatch in;
  in.seeds = HostTensor(DType::I64, {b});
  if (info.takesEmbeds)
    in.promptEmbeds = HostTensor(DType::F32, {b, info.tokens, info.dim});
  if (info.takesPooled)
    in.pooledPromptEmbeds = HostTensor(DType::F32, {b, info.pooledDim});
  if (info.takesMask)
    in.promptEmbedsMask = HostTensor(DType::F32, {b, info.tokens});
  if (info.takesGuidance)
    in.guidance = batch.front()->guidance;
  // Row r comes from request owner[r]; the rows after `used` repeat the
  // last one.
  std::vector<const Pending *> owner;
  std::vector<int64_t> seeds;
  for (const auto &p : batch)
    for (int64_t k = 0; k < p->rows; ++k) {
      owner.push_back(p.get());
      seeds.push_back(p->seed + k);
    }
  in.used = static_cast<int64_t>(owner.size());
  const int64_t embedSize = info.tokens * info.dim;
  for (int64_t r = 0; r < b; ++r) {
    int64_t from = std::min(r, in.used - 1);
    const Pending &p = *owner[from];
    in.seeds.ints()[r] = seeds[from];
    if (info.takesEmbeds)
      std::copy(p.embeds.begin(), p.embeds.end(),
                in.promptEmbeds.floats().begin() + r * embedSize);
    if (info.takesPooled)
      std::copy(p.pooled.begin(), p.pooled.end(),
                in.pooledPromptEmbeds.floats().begin() + r * info.pooledDim);
    if (info.takesMask)
      std::copy(p.mask.begin(), p.mask.end(),
                in.promptEmbedsMask.floats().begin() + r * info.tokens);
  }

  auto failAll = [&](int status, const std::string &message) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stats.failed += static_cast<int64_t>(batch.size());
    }
    for (const auto &p : batch) {
      Answer a;
      a.status = status;
      a.error = message;
      p->answer.set_value(std::move(a));
    }
  };
  absl::StatusOr<SampleOutput> out;
  try {
    out = backend->run(in);
  } catch (const std::exception &e) {
    out = absl::InternalError(e.what());
  }
  if (!out.ok())
    return failAll(500,
                   absl::StrCat("sampling failed: ", out.status().message()));
  const std::vector<int64_t> imageShape = {b, 3, info.height, info.width};
  if (out->images.dtype() != DType::F32 || out->images.shape() != imageShape)
    return failAll(500, absl::StrCat("the sampling program returned images ",
                                     out->images.typeString(), ", expected [",
                                     absl::StrJoin(imageShape, ", "), "] f32"));
  const std::vector<int64_t> logShape = {b, info.steps};
  if (info.hasLogprobs && out->logprobs.shape() != logShape)
    return failAll(500, absl::StrCat("the sampling program returned log-probs ",
                                     out->logprobs.typeString(), ", expected [",
                                     b, ", ", info.steps, "]"));
  const int64_t pixels = 3 * info.height * info.width;
  int64_t row = 0;
  for (const auto &p : batch) {
    Answer a;
    a.images = HostTensor(DType::F32, {p->rows, 3, info.height, info.width});
    std::copy_n(out->images.floats().begin() + row * pixels, p->rows * pixels,
                a.images.floats().begin());
    if (p->logprobs) {
      a.logprobs = HostTensor(DType::F32, {p->rows, info.steps});
      std::copy_n(out->logprobs.floats().begin() + row * info.steps,
                  p->rows * info.steps, a.logprobs.floats().begin());
    }
    row += p->rows;
    p->answer.set_value(std::move(a));
  }
}

SampleServer::SampleServer(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}

SampleServer::~SampleServer() { shutdown(); }

int SampleServer::port() const { return impl_->port; }

absl::StatusOr<std::unique_ptr<SampleServer>>
SampleServer::start(SampleBackend &backend, const ServeOptions &options) {
  const SampleInfo &info = backend.info();
  if (absl::Status s = checkSampleInfo(info); !s.ok())
    return s;
  if (options.maxQueue < 1)
    return absl::InvalidArgumentError(absl::StrCat(
        "the queue size is ", options.maxQueue, ", expected >= 1"));
  if (options.maxBatchWaitMs < 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "the batch wait is ", options.maxBatchWaitMs, " ms, expected >= 0"));
  auto impl = std::make_unique<Impl>();
  impl->backend = &backend;
  impl->options = options;
  if (impl->options.maxBodyBytes <= 0) {
    int64_t numbers = (info.takesEmbeds ? info.tokens * info.dim : 0) +
                      (info.takesPooled ? info.pooledDim : 0);
    impl->options.maxBodyBytes = 32 * numbers + (int64_t(1) << 20);
  }
  int threads = options.threads;
  if (threads <= 0)
    threads = static_cast<int>(
        std::min<int64_t>(64, options.maxQueue + info.batch + 4));
  Impl *self = impl.get();
  httplib::Server &http = impl->http;
  http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http.set_payload_max_length(static_cast<size_t>(impl->options.maxBodyBytes));
  // Idle keep-alive connections hold an HTTP thread: let them go soon.
  http.set_keep_alive_timeout(2);
  http.Post("/v1/sample",
            [self](const httplib::Request &req, httplib::Response &res) {
              self->sample(req, res);
            });
  http.Get("/v1/info", [self](const httplib::Request &,
                              httplib::Response &res) { self->info(res); });
  auto health = [self](const httplib::Request &, httplib::Response &res) {
    bool stopping;
    {
      std::lock_guard<std::mutex> lock(self->mutex);
      stopping = self->stopping;
    }
    if (stopping)
      res.status = 503;
    res.set_content(Json{{"status", stopping ? "shutting down" : "ok"}}.dump(),
                    "application/json");
  };
  http.Get("/v1/health", health);
  http.Get("/healthz", health);
  // Errors cpp-httplib answers itself (413, 404, ...) get a JSON body too.
  http.set_error_handler(httplib::Server::Handler(
      [self](const httplib::Request &req, httplib::Response &res) {
        // cpp-httplib calls this for every status >= 400, also those the
        // handlers answered.
        if (!res.body.empty())
          return;
        std::string message;
        if (res.status == 413) {
          self->count(&ServeStats::badRequests);
          message = absl::StrCat("the request body is over the server's limit "
                                 "of ",
                                 self->options.maxBodyBytes, " bytes");
        } else if (res.status == 404) {
          message = absl::StrCat("no endpoint ", req.method, " ", req.path,
                                 " (endpoints: POST /v1/sample, GET "
                                 "/v1/info, GET /v1/health)");
        } else {
          message = absl::StrCat("HTTP status ", res.status);
        }
        res.set_content(errorBody(message), "application/json");
      }));
  http.set_exception_handler([](const httplib::Request &,
                                httplib::Response &res, std::exception_ptr e) {
    std::string message = "internal error";
    try {
      if (e)
        std::rethrow_exception(e);
    } catch (const std::exception &x) {
      message = absl::StrCat("internal error: ", x.what());
    } catch (...) {
    }
    res.status = 500;
    res.set_content(errorBody(message), "application/json");
  });
  // cpp-httplib's default also sets SO_REUSEPORT, with which a second
  // server binds the same port and shares its connections: only
  // SO_REUSEADDR (a restarted server rebinds at once).
  http.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  int port =
      options.port == 0
          ? http.bind_to_any_port(options.host)
          : (http.bind_to_port(options.host, options.port) ? options.port : -1);
  if (port <= 0)
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options.host, ":", options.port,
                     " (the address is in use, or not one of this machine's)"));
  impl->port = port;
  impl->listener = std::thread([self] {
    self->http.listen_after_bind();
    self->listenEnded = true;
  });
  // stop() only ends a listen that has begun: wait for it (the socket
  // already accepts connections since the bind).
  while (!http.is_running() && !impl->listenEnded)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  impl->worker = std::thread([self] { self->runWorker(); });
  return std::unique_ptr<SampleServer>(new SampleServer(std::move(impl)));
}

void SampleServer::shutdown() {
  std::deque<std::shared_ptr<Pending>> refused;
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    if (impl_->stopped)
      return;
    impl_->stopped = impl_->stopping = true;
    refused.swap(impl_->queue);
    impl_->stats.rejected += static_cast<int64_t>(refused.size());
  }
  impl_->changed.notify_all();
  for (const auto &p : refused) {
    Answer a;
    a.status = 503;
    a.error = "the server is shutting down";
    p->answer.set_value(std::move(a));
  }
  // The batch that runs finishes and is answered.
  if (impl_->worker.joinable())
    impl_->worker.join();
  impl_->http.stop();
  if (impl_->listener.joinable())
    impl_->listener.join();
}

ServeStats SampleServer::stats() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->stats;
}

int64_t SampleServer::queued() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return static_cast<int64_t>(impl_->queue.size());
}

} // namespace omni::serve
