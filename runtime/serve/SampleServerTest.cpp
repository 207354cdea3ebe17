//===- SampleServerTest.cpp - The sampling server over loopback -----------===//
//
// A fake SampleBackend (images and log-probs a closed-form function of the
// seed, the prompt and the guidance; a gate that holds a run until the
// test opens it) behind the real server on 127.0.0.1 (a port the kernel
// picks), asked by a real HTTP client (httplib::Client). Batching, the
// full queue and shutdown are made deterministic with the gate and the
// server's queue count, never with timing; the waits have generous
// deadlines only so that a broken server fails instead of hanging.
//
//===----------------------------------------------------------------------===//

#include "runtime/serve/SampleServer.h"

#include "runtime/train/image/Png.h"

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "gtest/gtest.h"

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace omni::serve {
namespace {

using Json = nlohmann::json;

constexpr int64_t kL = 2, kD = 3, kDp = 2, kN = 4, kH = 5, kW = 6;

/// The pixel the fake draws at channel c, row y, column x, as an 8-bit
/// value: the test's independent formula.
int64_t expectedPixel(int64_t seed, float embed0, double guidance, int64_t c,
                      int64_t y, int64_t x) {
  int64_t v = seed * 31 + c * 7 + y * 3 + x +
              static_cast<int64_t>(std::lround(embed0 * 10)) +
              static_cast<int64_t>(std::lround(guidance * 100));
  return ((v % 256) + 256) % 256;
}

/// The fake's log-prob of step s.
double expectedLogprob(int64_t seed, int64_t s) {
  return -0.5 * static_cast<double>(seed) - 0.25 * static_cast<double>(s);
}

class FakeBackend : public SampleBackend {
public:
  FakeBackend() {
    info_.batch = 4;
    info_.takesEmbeds = true;
    info_.tokens = kL;
    info_.dim = kD;
    info_.takesPooled = true;
    info_.pooledDim = kDp;
    info_.steps = kN;
    info_.height = kH;
    info_.width = kW;
    info_.hasLogprobs = true;
    info_.takesGuidance = true;
    info_.defaultGuidance = 4.5;
  }
  const SampleInfo &info() const override { return info_; }

  absl::StatusOr<SampleOutput> run(const SampleBatch &batch) override {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ++calls_;
      entered_.notify_all();
      gateChanged_.wait(lock, [&] { return !closed_; });
      batches_.push_back(batch);
      if (!failWith_.empty()) {
        std::string message = failWith_;
        failWith_.clear();
        return absl::InternalError(message);
      }
    }
    const int64_t b = info_.batch;
    SampleOutput out;
    out.images = HostTensor(DType::F32, {b, 3, kH, kW});
    out.logprobs = HostTensor(DType::F32, {b, kN});
    for (int64_t r = 0; r < b; ++r) {
      int64_t seed = batch.seeds.ints()[r];
      float e0 = static_cast<float>(batch.promptEmbeds.floats()[r * kL * kD]);
      for (int64_t c = 0; c < 3; ++c)
        for (int64_t y = 0; y < kH; ++y)
          for (int64_t x = 0; x < kW; ++x)
            out.images.floats()[((r * 3 + c) * kH + y) * kW + x] =
                static_cast<double>(
                    expectedPixel(seed, e0, *batch.guidance, c, y, x)) /
                255.0;
      for (int64_t s = 0; s < kN; ++s)
        out.logprobs.floats()[r * kN + s] = expectedLogprob(seed, s);
    }
    return out;
  }

  int64_t promptCount() const override { return 3; }
  void promptEmbeddings(int64_t index, absl::Span<float> embeds,
                        absl::Span<float> pooled) const override {
    for (size_t i = 0; i < embeds.size(); ++i)
      embeds[i] = static_cast<float>(index) + 0.5f * static_cast<float>(i);
    for (size_t i = 0; i < pooled.size(); ++i)
      pooled[i] = -static_cast<float>(index);
  }
  std::string promptText(int64_t index) const override {
    return absl::StrCat("prompt number ", index);
  }
  /// Prompt 1's last token is padding (with info_.takesMask).
  void promptMask(int64_t index, absl::Span<float> mask) const override {
    if (index == 1)
      mask[mask.size() - 1] = 0.f;
  }

  /// Runs wait at the gate while it is closed.
  void closeGate() {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
  }
  void openGate() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      closed_ = false;
    }
    gateChanged_.notify_all();
  }
  /// Waits (60 s at most) until `n` runs have begun.
  bool waitForCalls(int n) {
    std::unique_lock<std::mutex> lock(mutex_);
    return entered_.wait_for(lock, std::chrono::seconds(60),
                             [&] { return calls_ >= n; });
  }
  void failNext(std::string message) {
    std::lock_guard<std::mutex> lock(mutex_);
    failWith_ = std::move(message);
  }
  int calls() {
    std::lock_guard<std::mutex> lock(mutex_);
    return calls_;
  }
  std::vector<SampleBatch> batches() {
    std::lock_guard<std::mutex> lock(mutex_);
    return batches_;
  }

  SampleInfo info_;

private:
  std::mutex mutex_;
  std::condition_variable entered_, gateChanged_;
  bool closed_ = false;
  int calls_ = 0;
  std::string failWith_;
  std::vector<SampleBatch> batches_;
};

/// A request body with prompt embeddings whose first value is `e0`.
Json embedsRequest(int64_t seed, float e0 = 0.25f) {
  Json embeds = Json::array();
  for (int64_t t = 0; t < kL; ++t) {
    Json row = Json::array();
    for (int64_t d = 0; d < kD; ++d)
      row.push_back(t == 0 && d == 0 ? e0 : 0.125 * (t + d));
    embeds.push_back(row);
  }
  return Json{{"prompt_embeds", embeds},
              {"pooled_prompt_embeds", {1.0, 2.0}},
              {"seed", seed}};
}

struct Reply {
  int status = 0; // 0: no answer
  std::string body;
  std::string retryAfter;
  Json json() const { return Json::parse(body, nullptr, false); }
  std::string error() const {
    Json j = json();
    return j.is_object() && j.contains("error") && j["error"].is_string()
               ? j["error"].get<std::string>()
               : "<no error field: " + body + ">";
  }
};

class SampleServerTest : public ::testing::Test {
protected:
  void startServer(ServeOptions options = {}) {
    absl::StatusOr<std::unique_ptr<SampleServer>> s =
        SampleServer::start(backend, options);
    ASSERT_TRUE(s.ok()) << s.status();
    server = std::move(*s);
  }
  Reply post(const std::string &body, const std::string &path = "/v1/sample") {
    httplib::Client client("127.0.0.1", server->port());
    client.set_read_timeout(120, 0);
    client.set_write_timeout(120, 0);
    Reply reply;
    if (auto res = client.Post(path.c_str(), body, "application/json")) {
      reply.status = res->status;
      reply.body = res->body;
      reply.retryAfter = res->get_header_value("Retry-After");
    }
    return reply;
  }
  Reply get(const std::string &path) {
    httplib::Client client("127.0.0.1", server->port());
    client.set_read_timeout(120, 0);
    Reply reply;
    if (auto res = client.Get(path.c_str())) {
      reply.status = res->status;
      reply.body = res->body;
    }
    return reply;
  }
  /// Waits (60 s at most) until `n` requests are queued.
  bool waitForQueued(int64_t n) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (server->queued() < n) {
      if (std::chrono::steady_clock::now() > deadline)
        return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return true;
  }
  /// Checks that `base64` is a PNG of kW x kH whose pixels are the fake's
  /// for `seed`, `e0` and `guidance`.
  void expectImage(const Json &base64, int64_t seed, float e0,
                   double guidance) {
    ASSERT_TRUE(base64.is_string());
    std::string png;
    ASSERT_TRUE(absl::Base64Unescape(base64.get<std::string>(), &png));
    // The signature, then the IHDR chunk: width and height big-endian.
    ASSERT_GE(png.size(), 24u);
    EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
    EXPECT_EQ(png.substr(12, 4), "IHDR");
    auto be32 = [&](size_t at) {
      return (uint32_t(uint8_t(png[at])) << 24) |
             (uint32_t(uint8_t(png[at + 1])) << 16) |
             (uint32_t(uint8_t(png[at + 2])) << 8) |
             uint32_t(uint8_t(png[at + 3]));
    };
    EXPECT_EQ(be32(16), uint32_t(kW));
    EXPECT_EQ(be32(20), uint32_t(kH));
    absl::StatusOr<image::RgbImage> rgb = image::decodePng(png);
    ASSERT_TRUE(rgb.ok()) << rgb.status();
    ASSERT_EQ(rgb->width, kW);
    ASSERT_EQ(rgb->height, kH);
    int wrong = 0;
    for (int64_t y = 0; y < kH; ++y)
      for (int64_t x = 0; x < kW; ++x)
        for (int64_t c = 0; c < 3; ++c)
          wrong += rgb->pixels[(y * kW + x) * 3 + c] !=
                   expectedPixel(seed, e0, guidance, c, y, x);
    EXPECT_EQ(wrong, 0) << "seed " << seed;
  }

  FakeBackend backend;
  std::unique_ptr<SampleServer> server;
};

TEST_F(SampleServerTest, InfoAndHealth) {
  ServeOptions options;
  options.maxQueue = 7;
  startServer(options);
  Reply r = get("/v1/info");
  ASSERT_EQ(r.status, 200) << r.body;
  Json info = r.json();
  EXPECT_EQ(info["batch"], 4);
  EXPECT_EQ(info["steps"], kN);
  EXPECT_EQ(info["height"], kH);
  EXPECT_EQ(info["width"], kW);
  EXPECT_EQ(info["logprobs"], true);
  EXPECT_EQ(info["prompts"], 3);
  EXPECT_EQ(info["max_queue"], 7);
  EXPECT_EQ(info["prompt_embeds"], Json::array({kL, kD}));
  EXPECT_EQ(info["pooled_prompt_embeds"], Json::array({kDp}));
  EXPECT_EQ(info["guidance"], 4.5);
  // 32 bytes a number plus 1 MiB.
  EXPECT_EQ(info["max_body_bytes"], 32 * (kL * kD + kDp) + (1 << 20));
  for (const char *path : {"/v1/health", "/healthz"}) {
    Reply h = get(path);
    EXPECT_EQ(h.status, 200) << path;
    EXPECT_EQ(h.json()["status"], "ok") << path;
  }
  Reply missing = get("/v1/nothing");
  EXPECT_EQ(missing.status, 404);
  EXPECT_TRUE(absl::StrContains(missing.error(), "GET /v1/nothing"))
      << missing.body;
}

TEST_F(SampleServerTest, SamplesFromEmbeddings) {
  startServer();
  Json request = embedsRequest(17, 0.75f);
  request["logprobs"] = true;
  request["steps"] = kN;
  request["guidance"] = 2.0;
  Reply r = post(request.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  Json answer = r.json();
  ASSERT_EQ(answer["images"].size(), 1u);
  expectImage(answer["images"][0], 17, 0.75f, 2.0);
  EXPECT_EQ(answer["seeds"], Json::array({17}));
  EXPECT_EQ(answer["guidance"], 2.0);
  EXPECT_EQ(answer["steps"], kN);
  EXPECT_EQ(answer["width"], kW);
  EXPECT_EQ(answer["height"], kH);
  ASSERT_EQ(answer["logprobs"].size(), 1u);
  ASSERT_EQ(answer["logprobs"][0].size(), size_t(kN));
  for (int64_t s = 0; s < kN; ++s)
    EXPECT_EQ(answer["logprobs"][0][s].get<double>(), expectedLogprob(17, s));
  EXPECT_FALSE(answer.contains("prompt"));

  // What the backend got: the seed and the embeddings as sent, padded to B
  // by repeating the row.
  std::vector<SampleBatch> batches = backend.batches();
  ASSERT_EQ(batches.size(), 1u);
  const SampleBatch &b = batches[0];
  EXPECT_EQ(b.used, 1);
  EXPECT_EQ(b.seeds.shape(), (std::vector<int64_t>{4}));
  for (int64_t r = 0; r < 4; ++r)
    EXPECT_EQ(b.seeds.ints()[r], 17);
  EXPECT_EQ(b.promptEmbeds.shape(), (std::vector<int64_t>{4, kL, kD}));
  EXPECT_EQ(b.promptEmbeds.floats()[0], 0.75);
  EXPECT_EQ(b.promptEmbeds.floats()[kL * kD - 1], 0.125 * (kL - 1 + kD - 1));
  EXPECT_EQ(b.pooledPromptEmbeds.floats()[3 * kDp + 1], 2.0);
  EXPECT_EQ(*b.guidance, 2.0);

  // Without logprobs and guidance: no log-probs, the default guidance.
  Reply plain = post(embedsRequest(5).dump());
  ASSERT_EQ(plain.status, 200) << plain.body;
  EXPECT_FALSE(plain.json().contains("logprobs"));
  EXPECT_EQ(plain.json()["guidance"], 4.5);
  expectImage(plain.json()["images"][0], 5, 0.25f, 4.5);
}

TEST_F(SampleServerTest, TextMaskFromTheRequestOrThePromptSet) {
  // A program with a text mask (Qwen-Image, docs/prompts.md): a request's
  // prompt_embeds_mask [L], else the prompt set's row, else all ones.
  backend.info_.takesMask = true;
  startServer();
  auto maskOf = [&](size_t call) {
    std::vector<SampleBatch> batches = backend.batches();
    EXPECT_GT(batches.size(), call);
    if (batches.size() <= call)
      return std::vector<double>();
    const HostTensor &m = batches[call].promptEmbedsMask;
    EXPECT_EQ(m.shape(), (std::vector<int64_t>{4, kL}));
    return std::vector<double>(m.floats().begin(), m.floats().end());
  };
  ASSERT_EQ(post(embedsRequest(1).dump()).status, 200);
  EXPECT_EQ(maskOf(0), std::vector<double>(4 * kL, 1.0));
  Json masked = embedsRequest(2);
  masked["prompt_embeds_mask"] = {1, 0};
  ASSERT_EQ(post(masked.dump()).status, 200);
  EXPECT_EQ(maskOf(1), (std::vector<double>{1, 0, 1, 0, 1, 0, 1, 0}));
  ASSERT_EQ(post(Json{{"prompt_index", 1}, {"seed", 3}}.dump()).status, 200);
  EXPECT_EQ(maskOf(2), (std::vector<double>{1, 0, 1, 0, 1, 0, 1, 0}));
  ASSERT_EQ(post(Json{{"prompt_index", 0}, {"seed", 3}}.dump()).status, 200);
  EXPECT_EQ(maskOf(3), std::vector<double>(4 * kL, 1.0));

  auto bad = [&](Json mask) {
    Json request = embedsRequest(4);
    request["prompt_embeds_mask"] = mask;
    Reply r = post(request.dump());
    EXPECT_EQ(r.status, 400) << r.body;
    return r.error();
  };
  EXPECT_EQ(
      bad({1, 0.5}),
      "prompt_embeds_mask[1] is 0.5, expected 0 (padding) or 1 (a token)");
  EXPECT_EQ(bad({0, 0}), "prompt_embeds_mask has no valid token (all 0), "
                         "expected at least one 1");
  EXPECT_TRUE(absl::StrContains(bad({1}), "prompt_embeds_mask")) << bad({1});
  EXPECT_EQ(backend.batches().size(), 4u);
}

TEST_F(SampleServerTest, AMaskForAProgramWithoutOneIs400) {
  startServer();
  Json request = embedsRequest(4);
  request["prompt_embeds_mask"] = {1, 1};
  Reply r = post(request.dump());
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.error(), "prompt_embeds_mask is given, but this program takes "
                       "no text mask");
}

TEST_F(SampleServerTest, SamplesAPromptIndexAndSeveralImages) {
  startServer();
  Json request = {{"prompt_index", 2}, {"seed", 100}, {"n", 3}};
  Reply r = post(request.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  Json answer = r.json();
  EXPECT_EQ(answer["prompt_index"], 2);
  EXPECT_EQ(answer["prompt"], "prompt number 2");
  EXPECT_EQ(answer["seeds"], Json::array({100, 101, 102}));
  ASSERT_EQ(answer["images"].size(), 3u);
  // Prompt 2's first embedding is 2 (FakeBackend::promptEmbeddings).
  for (int k = 0; k < 3; ++k)
    expectImage(answer["images"][k], 100 + k, 2.0f, 4.5);
  std::vector<SampleBatch> batches = backend.batches();
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(batches[0].used, 3);
  EXPECT_EQ(batches[0].pooledPromptEmbeds.floats()[0], -2.0);
  EXPECT_EQ(batches[0].promptEmbeds.floats()[kL * kD - 1],
            2.0 + 0.5 * (kL * kD - 1));
}

TEST_F(SampleServerTest, BatchesConcurrentRequests) {
  ServeOptions options;
  options.maxBatchWaitMs = 0;
  startServer(options);
  // The first request holds the worker at the gate; eight more queue up
  // behind it and run as two full batches of B = 4.
  backend.closeGate();
  std::vector<Reply> replies(9);
  std::vector<std::thread> clients;
  clients.emplace_back([&] { replies[0] = post(embedsRequest(1000).dump()); });
  ASSERT_TRUE(backend.waitForCalls(1));
  for (int i = 1; i < 9; ++i)
    clients.emplace_back(
        [&, i] { replies[i] = post(embedsRequest(1000 + i).dump()); });
  ASSERT_TRUE(waitForQueued(8));
  backend.openGate();
  for (std::thread &t : clients)
    t.join();
  for (int i = 0; i < 9; ++i) {
    ASSERT_EQ(replies[i].status, 200) << i << ": " << replies[i].body;
    EXPECT_EQ(replies[i].json()["seeds"], Json::array({1000 + i}));
    expectImage(replies[i].json()["images"][0], 1000 + i, 0.25f, 4.5);
  }
  EXPECT_EQ(backend.calls(), 3);
  std::vector<SampleBatch> batches = backend.batches();
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[0].used, 1);
  EXPECT_EQ(batches[1].used, 4);
  EXPECT_EQ(batches[2].used, 4);
  EXPECT_EQ(server->stats().requests, 9);
  EXPECT_EQ(server->stats().batches, 3);
}

TEST_F(SampleServerTest, BatchesOnlyTheSameGuidance) {
  ServeOptions options;
  options.maxBatchWaitMs = 0;
  startServer(options);
  backend.closeGate();
  std::vector<Reply> replies(5);
  std::vector<std::thread> clients;
  clients.emplace_back([&] { replies[0] = post(embedsRequest(1).dump()); });
  ASSERT_TRUE(backend.waitForCalls(1));
  // Queued in order: guidance 1, 2, 1, 2 (each waits for the previous to
  // queue, so the order is known).
  for (int i = 1; i < 5; ++i) {
    clients.emplace_back([&, i] {
      Json request = embedsRequest(i);
      request["guidance"] = i % 2 ? 1.0 : 2.0;
      replies[i] = post(request.dump());
    });
    ASSERT_TRUE(waitForQueued(i));
  }
  backend.openGate();
  for (std::thread &t : clients)
    t.join();
  for (int i = 1; i < 5; ++i) {
    ASSERT_EQ(replies[i].status, 200) << replies[i].body;
    expectImage(replies[i].json()["images"][0], i, 0.25f, i % 2 ? 1.0 : 2.0);
  }
  std::vector<SampleBatch> batches = backend.batches();
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(*batches[1].guidance, 1.0);
  EXPECT_EQ(batches[1].used, 2);
  EXPECT_EQ(batches[1].seeds.ints()[0], 1);
  EXPECT_EQ(batches[1].seeds.ints()[1], 3);
  EXPECT_EQ(*batches[2].guidance, 2.0);
  EXPECT_EQ(batches[2].used, 2);
  EXPECT_EQ(batches[2].seeds.ints()[0], 2);
  EXPECT_EQ(batches[2].seeds.ints()[1], 4);
}

TEST_F(SampleServerTest, FullQueueIs503) {
  ServeOptions options;
  options.maxQueue = 1;
  startServer(options);
  backend.closeGate();
  Reply first, second;
  std::thread a([&] { first = post(embedsRequest(1).dump()); });
  ASSERT_TRUE(backend.waitForCalls(1));
  std::thread b([&] { second = post(embedsRequest(2).dump()); });
  ASSERT_TRUE(waitForQueued(1));
  Reply third = post(embedsRequest(3).dump());
  EXPECT_EQ(third.status, 503) << third.body;
  EXPECT_EQ(third.retryAfter, "1");
  EXPECT_EQ(third.error(), "the queue is full (1 requests wait); retry later");
  backend.openGate();
  a.join();
  b.join();
  EXPECT_EQ(first.status, 200) << first.body;
  EXPECT_EQ(second.status, 200) << second.body;
  expectImage(second.json()["images"][0], 2, 0.25f, 4.5);
  EXPECT_EQ(server->stats().rejected, 1);
}

TEST_F(SampleServerTest, OversizedBodyIs413) {
  ServeOptions options;
  options.maxBodyBytes = 1000;
  startServer(options);
  Json request = embedsRequest(1);
  request["pad"] = std::string(2000, 'x');
  Reply r = post(request.dump());
  EXPECT_EQ(r.status, 413) << r.body;
  EXPECT_EQ(r.error(),
            "the request body is over the server's limit of 1000 bytes");
  // The server goes on.
  Reply ok = post(embedsRequest(2).dump());
  EXPECT_EQ(ok.status, 200) << ok.body;
}

TEST_F(SampleServerTest, BadRequestsAre400NamingTheField) {
  startServer();
  auto with = [](const std::function<void(Json &)> &edit) {
    Json request = embedsRequest(1);
    edit(request);
    return request.dump();
  };
  struct Case {
    std::string body;
    std::string error;
  };
  const std::string good = embedsRequest(1).dump();
  std::string nanBody = good;
  nanBody.replace(nanBody.find("0.25"), 4, "NaN");
  std::string infBody = good;
  infBody.replace(infBody.find("1.0"), 3, "-Infinity");
  const std::vector<Case> cases = {
      {"{\"seed\": 1,", "malformed JSON at byte 11: unexpected end of input; "
                        "expected string literal"},
      {"[1, 2]", "the request is an array of 2, expected a JSON object"},
      {with([](Json &r) { r["sead"] = 1; }),
       "unknown field 'sead' (fields: prompt_index, prompt_embeds, "
       "pooled_prompt_embeds, prompt_embeds_mask, seed, steps, guidance, "
       "logprobs, n)"},
      {with([](Json &r) { r.erase("seed"); }),
       "seed: missing (an integer; image k of the request uses seed + k)"},
      {with([](Json &r) { r["seed"] = "7"; }),
       "seed is a string, expected an integer"},
      {with([](Json &r) { r["seed"] = 1.5; }),
       "seed is 1.5, expected an integer"},
      {with([](Json &r) { r["seed"] = uint64_t(1) << 63; }),
       "seed is 9223372036854775808, beyond the int64 range"},
      {nanBody, "prompt_embeds[0][0] is NaN, expected a finite number"},
      {infBody,
       "pooled_prompt_embeds[0] is -Infinity, expected a finite number"},
      {with([](Json &r) { r["prompt_embeds"][1][2] = 1e300; }),
       "prompt_embeds[1][2] is 1e+300, expected a finite number (float32)"},
      {with([](Json &r) { r["prompt_embeds"][1][2] = "x"; }),
       "prompt_embeds[1][2] is a string, expected a number"},
      {with([](Json &r) { r["prompt_embeds"].erase(1); }),
       "prompt_embeds has 1 rows, expected L = 2"},
      {with([](Json &r) { r["prompt_embeds"][1].erase(0); }),
       "prompt_embeds[1] has 2 numbers, expected 3"},
      {with([](Json &r) { r["pooled_prompt_embeds"] = 3; }),
       "pooled_prompt_embeds is 3, expected an array of 2 numbers"},
      {with([](Json &r) { r.erase("pooled_prompt_embeds"); }),
       "pooled_prompt_embeds: missing (this program takes "
       "pooled_prompt_embeds [2], or send prompt_index)"},
      {with([](Json &r) { r["prompt_index"] = 0; }),
       "prompt_index and prompt_embeds are both given: expected one"},
      {Json{{"prompt_index", 3}, {"seed", 1}}.dump(),
       "prompt_index is 3, expected 0 to 2"},
      {Json{{"prompt_index", -1}, {"seed", 1}}.dump(),
       "prompt_index is -1, expected 0 to 2"},
      {Json{{"seed", 1}}.dump(), "prompt_embeds: missing (this program takes "
                                 "prompt_embeds [2, 3], or send prompt_index)"},
      {with([](Json &r) { r["steps"] = 10; }),
       "steps is 10, but this program was compiled for 4 steps (the step "
       "count is fixed at compile time)"},
      {with([](Json &r) { r["n"] = 5; }),
       "n is 5, expected 1 to the batch size 4"},
      {with([](Json &r) { r["n"] = 0; }),
       "n is 0, expected 1 to the batch size 4"},
      {with([](Json &r) { r["logprobs"] = 1; }),
       "logprobs is 1, expected true or false"},
      {with([](Json &r) { r["guidance"] = "high"; }),
       "guidance is a string, expected a number"},
      {with([](Json &r) {
         r["seed"] = std::numeric_limits<int64_t>::max();
         r["n"] = 2;
       }),
       "seed 9223372036854775807 + n - 1 is beyond the int64 range"},
  };
  for (const Case &c : cases) {
    Reply r = post(c.body);
    EXPECT_EQ(r.status, 400) << c.body;
    EXPECT_EQ(r.error(), c.error) << c.body;
  }
  EXPECT_EQ(backend.calls(), 0);
  EXPECT_EQ(server->stats().badRequests, int64_t(cases.size()));
  // The server goes on.
  Reply ok = post(good);
  EXPECT_EQ(ok.status, 200) << ok.body;
}

TEST_F(SampleServerTest, WhatTheProgramLacksIs400) {
  backend.info_.hasLogprobs = false;
  backend.info_.takesGuidance = false;
  startServer();
  Json request = embedsRequest(1);
  request["logprobs"] = true;
  Reply r = post(request.dump());
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.error(), "logprobs is true, but this program returns no "
                       "log-probabilities (they come with the SDE sampler)");
  request = embedsRequest(1);
  request["guidance"] = 3;
  r = post(request.dump());
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.error(), "guidance is given, but this program takes no guidance "
                       "scale (compile it with classifier-free guidance)");
}

TEST_F(SampleServerTest, BackendErrorIs500AndTheServerGoesOn) {
  startServer();
  backend.failNext("out of device memory");
  Reply r = post(embedsRequest(1).dump());
  EXPECT_EQ(r.status, 500) << r.body;
  EXPECT_EQ(r.error(), "sampling failed: out of device memory");
  Reply ok = post(embedsRequest(2).dump());
  ASSERT_EQ(ok.status, 200) << ok.body;
  expectImage(ok.json()["images"][0], 2, 0.25f, 4.5);
  EXPECT_EQ(server->stats().failed, 1);
  // A message that is not UTF-8 still makes a JSON answer.
  backend.failNext("bad \xff byte");
  r = post(embedsRequest(3).dump());
  EXPECT_EQ(r.status, 500) << r.body;
  EXPECT_EQ(r.error(), "sampling failed: bad \xef\xbf\xbd byte");
  EXPECT_EQ(post(embedsRequest(4).dump()).status, 200);
}

/// A backend that returns images of the wrong shape.
class WrongShapeBackend : public FakeBackend {
public:
  absl::StatusOr<SampleOutput> run(const SampleBatch &batch) override {
    absl::StatusOr<SampleOutput> out = FakeBackend::run(batch);
    out->images = HostTensor(DType::F32, {4, 3, kH, kW + 1});
    return out;
  }
};

TEST(SampleServer, WrongShapedOutputIs500) {
  WrongShapeBackend backend;
  absl::StatusOr<std::unique_ptr<SampleServer>> server =
      SampleServer::start(backend, {});
  ASSERT_TRUE(server.ok()) << server.status();
  httplib::Client client("127.0.0.1", (*server)->port());
  client.set_read_timeout(120, 0);
  auto res =
      client.Post("/v1/sample", embedsRequest(1).dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 500);
  EXPECT_EQ(Json::parse(res->body)["error"],
            "the sampling program returned images tensor<4x3x5x7xf32>, "
            "expected [4, 3, 5, 6] f32");
}

TEST_F(SampleServerTest, ShutdownAnswersTheRunningBatchAndRefusesTheQueue) {
  startServer();
  backend.closeGate();
  Reply running, queued;
  std::thread a([&] { running = post(embedsRequest(1).dump()); });
  ASSERT_TRUE(backend.waitForCalls(1));
  std::thread b([&] { queued = post(embedsRequest(2).dump()); });
  ASSERT_TRUE(waitForQueued(1));
  const int port = server->port();
  std::thread stopper([&] { server->shutdown(); });
  // The queued request is refused while the running batch still waits.
  b.join();
  EXPECT_EQ(queued.status, 503) << queued.body;
  EXPECT_EQ(queued.error(), "the server is shutting down");
  EXPECT_EQ(queued.retryAfter, "1");
  Reply health = get("/v1/health");
  EXPECT_EQ(health.status, 503);
  EXPECT_EQ(health.json()["status"], "shutting down");
  Reply late = post(embedsRequest(3).dump());
  EXPECT_EQ(late.status, 503);
  EXPECT_EQ(late.error(), "the server is shutting down");
  backend.openGate();
  a.join();
  stopper.join();
  ASSERT_EQ(running.status, 200) << running.body;
  expectImage(running.json()["images"][0], 1, 0.25f, 4.5);
  // Nothing listens any more.
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(5, 0);
  EXPECT_FALSE(client.Get("/v1/health"));
  server->shutdown(); // idempotent
}

TEST(SampleServer, StartErrors) {
  FakeBackend backend;
  backend.info_.batch = 0;
  absl::StatusOr<std::unique_ptr<SampleServer>> s =
      SampleServer::start(backend, {});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(),
            "the sampling program's batch size is 0, expected >= 1");

  FakeBackend good;
  absl::StatusOr<std::unique_ptr<SampleServer>> first =
      SampleServer::start(good, {});
  ASSERT_TRUE(first.ok()) << first.status();
  ServeOptions same;
  same.port = (*first)->port();
  absl::StatusOr<std::unique_ptr<SampleServer>> second =
      SampleServer::start(good, same);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().message(),
            absl::StrCat("cannot listen on 127.0.0.1:", same.port,
                         " (the address is in use, or not one of this "
                         "machine's)"));
  ServeOptions noQueue;
  noQueue.maxQueue = 0;
  EXPECT_EQ(SampleServer::start(good, noQueue).status().message(),
            "the queue size is 0, expected >= 1");
}

} // namespace
} // namespace omni::serve
