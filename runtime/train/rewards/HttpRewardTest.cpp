//===- HttpRewardTest.cpp - reward servers and mixes ------------*- C++ -*-===//
//
// The request body, the answer's parser, the URL and --reward spec parsers,
// and the client against a cpp-httplib server in this process on loopback
// (a port the kernel picks), including every one-line error of
// docs/rewards.md.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/rewards/HttpReward.h"
#include "runtime/train/rewards/RewardMix.h"

#include "runtime/train/image/Png.h"

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

namespace omni::rewards {
namespace {

//===--- parsers ----------------------------------------------------------===//

TEST(HttpEndpointTest, ParsesHostPortAndPath) {
  absl::StatusOr<HttpEndpoint> e = parseHttpEndpoint("http://127.0.0.1:8000");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->host, "127.0.0.1");
  EXPECT_EQ(e->port, 8000);
  EXPECT_EQ(e->path, "/score");
  e = parseHttpEndpoint("http://localhost:1/v1/reward");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->url(), "http://localhost:1/v1/reward");
}

TEST(HttpEndpointTest, ParsesUnixSockets) {
  absl::StatusOr<HttpEndpoint> e = parseHttpEndpoint("unix:/tmp/r.sock");
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->socket, "/tmp/r.sock");
  EXPECT_EQ(e->path, "/score");
  EXPECT_EQ(e->url(), "unix:/tmp/r.sock");
  EXPECT_EQ(parseHttpEndpoint("unix:").status().message(),
            "reward socket 'unix:': no file, expected unix:SOCKET_FILE");
  EXPECT_TRUE(absl::StrContains(
      parseHttpEndpoint("unix:/" + std::string(200, 'a')).status().message(),
      "a path over 107 bytes"));
}

TEST(HttpEndpointTest, RefusesWhatIsNotHostPortPath) {
  auto message = [](absl::string_view url) {
    return std::string(parseHttpEndpoint(url).status().message());
  };
  EXPECT_EQ(message("http://127.0.0.1"),
            "reward URL 'http://127.0.0.1': no port, expected "
            "http://HOST:PORT[/PATH]");
  EXPECT_EQ(message("http://127.0.0.1:99999/x"),
            "reward URL 'http://127.0.0.1:99999/x': port '99999' is not a "
            "number from 1 to 65535, expected http://HOST:PORT[/PATH]");
  EXPECT_EQ(message("http://:80"), "reward URL 'http://:80': no host, "
                                   "expected http://HOST:PORT[/PATH]");
  EXPECT_TRUE(absl::StrContains(message("https://a:1"), "not an http:// URL"));
  EXPECT_TRUE(absl::StrContains(message("http://a:+1"), "port '+1'"));
  EXPECT_TRUE(absl::StrContains(message("http://a:1/x?y=1"), "a query"));
}

TEST(RewardComponentTest, WeightIsTheLastNumberAfterAColon) {
  auto parse = [](absl::string_view spec) {
    absl::StatusOr<RewardComponent> c = parseRewardComponent(spec);
    EXPECT_TRUE(c.ok()) << spec << ": " << c.status();
    return c.ok() ? *c : RewardComponent();
  };
  RewardComponent c = parse("jpeg_compressibility:0.5");
  EXPECT_EQ(c.source, "jpeg_compressibility");
  EXPECT_EQ(c.weight, 0.5);
  EXPECT_FALSE(c.http);
  c = parse("brightness");
  EXPECT_EQ(c.weight, 1);
  c = parse("brightness:-2e-1");
  EXPECT_EQ(c.weight, -0.2);
  // The port is not a weight...
  c = parse("http://127.0.0.1:8000");
  EXPECT_EQ(c.source, "http://127.0.0.1:8000");
  EXPECT_EQ(c.weight, 1);
  ASSERT_TRUE(c.http);
  EXPECT_EQ(c.http->port, 8000);
  // ...the number after it is.
  c = parse("http://127.0.0.1:8000:0.25");
  EXPECT_EQ(c.source, "http://127.0.0.1:8000");
  EXPECT_EQ(c.weight, 0.25);
  c = parse("http://127.0.0.1:8000/v1/score:3");
  EXPECT_EQ(c.http->path, "/v1/score");
  EXPECT_EQ(c.weight, 3);
  c = parse("unix:/tmp/r.sock");
  EXPECT_EQ(c.http->socket, "/tmp/r.sock");
  EXPECT_EQ(c.weight, 1);
  c = parse("unix:/tmp/r.sock:0.5");
  EXPECT_EQ(c.http->socket, "/tmp/r.sock");
  EXPECT_EQ(c.weight, 0.5);
}

TEST(RewardComponentTest, BadSpecsSayWhy) {
  auto message = [](absl::string_view spec) {
    return std::string(parseRewardComponent(spec).status().message());
  };
  EXPECT_EQ(message("nope"),
            "--reward: unknown reward 'nope' (known rewards: brightness, "
            "jpeg_compressibility, jpeg_incompressibility; or a server: "
            "http://HOST:PORT[/PATH] or unix:SOCKET)");
  EXPECT_EQ(message("brightness:abc"),
            "--reward brightness:abc: weight 'abc' is not a finite number, "
            "expected NAME[:WEIGHT] or http://HOST:PORT[/PATH][:WEIGHT]");
  EXPECT_TRUE(absl::StrContains(message("brightness:inf"), "weight 'inf'"));
  EXPECT_TRUE(absl::StrContains(message("brightness:"), "weight ''"));
  EXPECT_EQ(message("http://127.0.0.1"),
            "--reward http://127.0.0.1: reward URL 'http://127.0.0.1': no "
            "port, expected http://HOST:PORT[/PATH]");
  EXPECT_TRUE(absl::StrContains(message("http://127.0.0.1:8000:x"),
                                "weight 'x' is not a finite number"));
  EXPECT_TRUE(absl::StrContains(message(""), "--reward: empty"));
}

TEST(RewardMixTest, SameSourceTwiceIsRefused) {
  absl::StatusOr<std::shared_ptr<RewardMix>> mix =
      RewardMix::create({"brightness:0.5", "brightness:0.5"}, {});
  EXPECT_EQ(mix.status().message(),
            "--reward brightness:0.5: brightness is already in the mix (give "
            "each reward once, with the sum of its weights)");
}

TEST(ScoreResponseTest, ReadsScoresAndSubScores) {
  absl::StatusOr<Scores> s = parseScoreResponse(
      R"({"scores": [0.5, -1e-3, 2], "other": {"x": [true, null]},
          "sub_scores": {"clip": [1, 2, 3], "ocr": [0, 0.25, -0]}})",
      3);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->scores, (std::vector<float>{0.5f, -1e-3f, 2.0f}));
  ASSERT_EQ(s->subScores.size(), 2u);
  EXPECT_EQ(s->subScores[0].first, "clip");
  EXPECT_EQ(s->subScores[1].first, "ocr");
  EXPECT_EQ(s->subScores[1].second, (std::vector<float>{0, 0.25f, 0}));
  // The float32 rounding of a double written with 17 digits.
  s = parseScoreResponse(R"({"scores": [-0.0012340000000000001]})", 1);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->scores[0], static_cast<float>(-0.0012340000000000001));
  s = parseScoreResponse(R"({"scores": [], "sub_scores": null})", 0);
  EXPECT_TRUE(s.ok()) << s.status();
}

TEST(ScoreResponseTest, NonsenseGetsOneLine) {
  auto message = [](absl::string_view body, size_t n) {
    return std::string(parseScoreResponse(body, n).status().message());
  };
  EXPECT_EQ(message("", 1),
            "malformed JSON at byte 0: unexpected end of input; expected "
            "'[', '{', or a literal");
  EXPECT_EQ(message("<html>", 1),
            "malformed JSON at byte 0: invalid literal; last read: '<'");
  EXPECT_EQ(message(R"({"scores": [1, 2,]})", 3),
            "malformed JSON at byte 17: unexpected ']'; expected '[', '{', "
            "or a literal");
  EXPECT_EQ(message(R"({"scores": [1] } x)", 1),
            "malformed JSON at byte 17: invalid literal; last read: "
            "'1] } x'; expected end of input");
  EXPECT_EQ(message(R"({"scores": [01]})", 1),
            "malformed JSON at byte 13: unexpected number literal; expected "
            "']'");
  EXPECT_EQ(message("[1, 2]", 2), "the answer is an array, expected an "
                                  "object {\"scores\": [...]}");
  EXPECT_EQ(message(R"({"score": [1]})", 1),
            "the answer has no \"scores\", expected {\"scores\": [...]}");
  EXPECT_EQ(message(R"({"scores": [1, 2, 3]})", 4),
            "3 scores for 4 images in scores");
  EXPECT_EQ(message(R"({"scores": 1})", 1),
            "scores is a number, expected an array of 1 numbers");
  EXPECT_EQ(message(R"({"scores": [1, NaN]})", 2),
            "scores[1] is NaN, expected a finite number (float32)");
  EXPECT_EQ(message(R"({"scores": [-Infinity]})", 1),
            "scores[0] is -Infinity, expected a finite number (float32)");
  EXPECT_EQ(message(R"({"scores": [1e39]})", 1),
            "scores[0] is 1e+39, expected a finite number (float32)");
  EXPECT_EQ(message(R"({"scores": [1e999]})", 1),
            "malformed JSON: number overflow parsing '1e999'");
  EXPECT_EQ(message(R"({"scores": ["1"]})", 1),
            "scores[0] is a string, expected a finite number");
  EXPECT_EQ(message(R"({"scores": [1], "sub_scores": {"a": [1, 2]}})", 1),
            "2 values for 1 image in sub_scores 'a'");
  EXPECT_EQ(message(R"({"scores": [1], "sub_scores": [1]})", 1),
            "sub_scores is an array, expected an object {\"name\": [...]}");
  // Hostile nesting ends in an error, not a stack overflow (nlohmann-json
  // parses and destroys without recursion).
  EXPECT_EQ(message(std::string(100000, '['), 1),
            "malformed JSON at byte 100000: unexpected end of input; "
            "expected '[', '{', or a literal");
  EXPECT_EQ(message(std::string(100000, '[') + std::string(100000, ']'), 1),
            "the answer is an array, expected an object {\"scores\": [...]}");
  // NaN and Infinity inside strings are text.
  EXPECT_EQ(message(R"({"scores": ["NaN"]})", 1),
            "scores[0] is a string, expected a finite number");
}

//===--- the request ------------------------------------------------------===//

/// A 2-image 3x2 batch whose pixels are known.
struct TestBatch {
  std::vector<float> pixels;
  ImageBatch batch;
  TestBatch() {
    const int64_t n = 2, h = 3, w = 2;
    pixels.resize(n * 3 * h * w);
    for (size_t i = 0; i < pixels.size(); ++i)
      pixels[i] = static_cast<float>((i * 37) % 256) / 255.0f;
    pixels[5] = 1.7f; // clamped like the built-in rewards clamp it
    batch.data = pixels.data();
    batch.shape = {n, 3, h, w};
  }
};

TEST(ScoreRequestTest, CarriesThePixelsAndTheMetadata) {
  TestBatch t;
  ScoreContext context;
  context.iteration = 3;
  context.seed = 7;
  context.promptsPerIteration = 1;
  context.promptCount = 5;
  for (ImageEncoding encoding : {ImageEncoding::Png, ImageEncoding::Raw}) {
    absl::StatusOr<std::string> body =
        scoreRequestBody(t.batch, context, encoding);
    ASSERT_TRUE(body.ok()) << body.status();
    // Check it with the answer's own reader: a request is valid JSON.
    EXPECT_TRUE(
        parseScoreResponse(
            absl::StrCat(R"({"scores": [1, 2], "request": )", *body, "}"), 2)
            .ok());
    EXPECT_TRUE(absl::StrContains(
        *body, absl::StrCat("{\"protocol\": 1, \"count\": 2, \"height\": 3, "
                            "\"width\": 2, \"channels\": 3, \"format\": \"",
                            encoding == ImageEncoding::Png ? "png" : "raw",
                            "\", \"iteration\": 3, \"seed\": 7, ")))
        << *body;
    // Prompt row (3 * 1 + 0) mod 5 = 3, the group's 2 samples.
    EXPECT_TRUE(absl::StrContains(
        *body, R"("metadata": [{"prompt_index": 3, "sample_index": 0, )"
               R"("prompt": null}, {"prompt_index": 3, "sample_index": 1, )"
               R"("prompt": null}])"))
        << *body;
    // The second image's bytes are imageToHwcU8's.
    size_t second = body->rfind(", \"") + 3;
    std::string encoded = body->substr(second, body->size() - second - 3);
    std::string bytes;
    ASSERT_TRUE(absl::Base64Unescape(encoded, &bytes));
    absl::StatusOr<std::vector<uint8_t>> hwc = imageToHwcU8(t.batch, 1);
    ASSERT_TRUE(hwc.ok());
    if (encoding == ImageEncoding::Png) {
      absl::StatusOr<image::RgbImage> png = image::decodePng(bytes);
      ASSERT_TRUE(png.ok()) << png.status();
      EXPECT_EQ(png->width, 2);
      EXPECT_EQ(png->height, 3);
      bytes.assign(png->pixels.begin(), png->pixels.end());
    }
    EXPECT_EQ(bytes, std::string(hwc->begin(), hwc->end()));
  }
  // Without prompts (or a batch P does not divide) the indices are null.
  context.promptsPerIteration = 0;
  absl::StatusOr<std::string> body =
      scoreRequestBody(t.batch, context, ImageEncoding::Raw);
  ASSERT_TRUE(body.ok());
  EXPECT_TRUE(absl::StrContains(
      *body, R"({"prompt_index": null, "sample_index": null, )"));
}

TEST(ScoreRequestTest, APartOfTheBatchHasTheWholeBatchsMetadata) {
  // A rollout chunk: the 2 images are images 4 and 5 of an iteration of
  // B = 8 with P = 2 prompts (G = 4), so both are samples of the second
  // prompt, row (3 * 2 + 1) mod 5 = 2, at sample indices 0 and 1.
  TestBatch t;
  ScoreContext context;
  context.iteration = 3;
  context.promptsPerIteration = 2;
  context.promptCount = 5;
  context.batchSize = 8;
  context.first = 4;
  absl::StatusOr<std::string> body =
      scoreRequestBody(t.batch, context, ImageEncoding::Raw);
  ASSERT_TRUE(body.ok()) << body.status();
  EXPECT_TRUE(absl::StrContains(
      *body, R"("metadata": [{"prompt_index": 2, "sample_index": 0, )"
             R"("prompt": null}, {"prompt_index": 2, "sample_index": 1, )"
             R"("prompt": null}])"))
      << *body;
  // Without the whole batch, the 2 images would read as P = 2 groups of 1.
  // A part that does not fit in the batch has null indices.
  context.first = 7;
  body = scoreRequestBody(t.batch, context, ImageEncoding::Raw);
  ASSERT_TRUE(body.ok());
  EXPECT_TRUE(absl::StrContains(
      *body, R"({"prompt_index": null, "sample_index": null, )"));
}

//===--- the client against a server --------------------------------------===//

/// A cpp-httplib server on 127.0.0.1 (a free port) answering POST /score
/// with `answer`, in a thread of this process.
class TestServer {
public:
  using Handler =
      std::function<void(const httplib::Request &, httplib::Response &)>;
  explicit TestServer(Handler handler) {
    server_.Post("/score", [this, handler](const httplib::Request &req,
                                           httplib::Response &res) {
      ++requests;
      handler(req, res);
    });
    port = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // The socket listens from bind_to_any_port on; is_running() says the
    // accept loop has started, after which stop() ends it.
    while (!server_.is_running())
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~TestServer() { stop(); }
  void stop() {
    if (thread_.joinable()) {
      server_.stop();
      thread_.join();
    }
  }
  HttpEndpoint endpoint() const {
    HttpEndpoint e;
    e.host = "127.0.0.1";
    e.port = port;
    return e;
  }
  int port = 0;
  std::atomic<int> requests{0};

private:
  httplib::Server server_;
  std::thread thread_;
};

HttpRewardOptions fastOptions() {
  HttpRewardOptions o;
  o.timeoutSeconds = 5;
  o.attempts = 3;
  o.backoffSeconds = 0.01;
  return o;
}

TEST(HttpRewardTest, ScoresABatch) {
  std::string seen;
  TestServer server([&](const httplib::Request &req, httplib::Response &res) {
    seen = req.body;
    res.set_content(R"({"scores": [0.25, -4], "sub_scores": {"a": [1, 3]}})",
                    "application/json");
  });
  TestBatch t;
  HttpReward reward(server.endpoint(), fastOptions());
  absl::StatusOr<Scores> s = reward.score(t.batch, ScoreContext());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->scores, (std::vector<float>{0.25f, -4.0f}));
  ASSERT_EQ(s->subScores.size(), 1u);
  EXPECT_EQ(s->subScores[0].second, (std::vector<float>{1, 3}));
  absl::StatusOr<std::string> body =
      scoreRequestBody(t.batch, ScoreContext(), ImageEncoding::Png);
  ASSERT_TRUE(body.ok());
  EXPECT_EQ(seen, *body);
}

TEST(HttpRewardTest, BadAnswersAreNotRetried) {
  std::string status = "500", answer;
  TestServer server([&](const httplib::Request &, httplib::Response &res) {
    res.status = std::stoi(status);
    res.set_content(answer, "text/plain");
  });
  TestBatch t;
  HttpReward reward(server.endpoint(), fastOptions());
  std::string url = server.endpoint().url();
  answer = "Traceback (most recent call last):\n  File ...";
  EXPECT_EQ(reward.score(t.batch, {}).status().message(),
            "reward server " + url +
                ": HTTP status 500, expected 200: 'Traceback (most recent "
                "call last):'");
  status = "200";
  answer = R"({"scores": [1]})";
  EXPECT_EQ(reward.score(t.batch, {}).status().message(),
            "reward server " + url + ": 1 scores for 2 images in scores");
  answer = "nonsense";
  EXPECT_EQ(reward.score(t.batch, {}).status().message(),
            "reward server " + url +
                ": malformed JSON at byte 1: invalid literal; last read: "
                "'no'");
  answer = R"({"scores": [NaN, 1]})";
  EXPECT_EQ(reward.score(t.batch, {}).status().message(),
            "reward server " + url +
                ": scores[0] is NaN, expected a finite number (float32)");
  EXPECT_EQ(server.requests.load(), 4);
}

TEST(HttpRewardTest, ServerDownIsRetriedThenSaid) {
  int port = 0;
  {
    TestServer gone([](const httplib::Request &, httplib::Response &) {});
    port = gone.port;
  } // closed: connecting to the port is refused
  HttpEndpoint e;
  e.host = "127.0.0.1";
  e.port = port;
  TestBatch t;
  HttpReward reward(e, fastOptions());
  absl::Status s = reward.score(t.batch, {}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "reward server " + e.url() +
                             ": cannot connect (3 tries): is the server "
                             "running?");
}

TEST(HttpRewardTest, AServerThatHangsUpWhileTheBatchIsSentIsSaid) {
  // A listener that reads the start of the request and resets the
  // connection; the batch (16 MiB of base64) is far more than the socket
  // buffers take, so the client is still writing when the reset arrives.
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr *>(&addr), sizeof addr),
            0);
  ASSERT_EQ(listen(listener, 1), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(getsockname(listener, reinterpret_cast<sockaddr *>(&addr), &len),
            0);
  std::thread hangUp([listener] {
    int c = accept(listener, nullptr, nullptr);
    if (c < 0)
      return;
    char buf[4096];
    (void)!read(c, buf, sizeof buf);
    linger reset{1, 0};
    setsockopt(c, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
    close(c);
  });
  std::vector<float> pixels(3 * 2048 * 2048, 0.5f);
  ImageBatch batch;
  batch.data = pixels.data();
  batch.shape = {1, 3, 2048, 2048};
  HttpEndpoint e;
  e.host = "127.0.0.1";
  e.port = ntohs(addr.sin_port);
  HttpRewardOptions o = fastOptions();
  o.encoding = ImageEncoding::Raw;
  absl::Status s = HttpReward(e, o).score(batch, {}).status();
  hangUp.join();
  close(listener);
  EXPECT_EQ(s.message(), "reward server " + e.url() +
                             ": the connection closed while the batch was "
                             "sent");
}

TEST(HttpRewardTest, ASlowServerTimesOut) {
  // The server answers only after the client has given up (no race: it
  // waits for the test to say so).
  std::promise<void> gaveUp;
  std::shared_future<void> released = gaveUp.get_future().share();
  TestServer server(
      [released](const httplib::Request &, httplib::Response &res) {
        released.wait();
        res.set_content(R"({"scores": [1, 2]})", "application/json");
      });
  TestBatch t;
  HttpRewardOptions o = fastOptions();
  o.timeoutSeconds = 0.3;
  HttpReward reward(server.endpoint(), o);
  absl::Status s = reward.score(t.batch, {}).status();
  gaveUp.set_value();
  EXPECT_EQ(s.message(), "reward server " + server.endpoint().url() +
                             ": no answer (the connection closed or 0.3 s "
                             "passed, --reward-timeout)");
  EXPECT_EQ(server.requests.load(), 1); // not retried
}

//===--- mixes ------------------------------------------------------------===//

TEST(RewardMixTest, WeightedSumPerImageAndComponentMeans) {
  TestServer server([](const httplib::Request &, httplib::Response &res) {
    res.set_content(R"({"scores": [10, 20], "sub_scores": {"a": [1, 2]}})",
                    "application/json");
  });
  TestBatch t;
  absl::StatusOr<std::shared_ptr<RewardMix>> mix = RewardMix::create(
      {"brightness:2", server.endpoint().url() + ":0.5"}, fastOptions());
  ASSERT_TRUE(mix.ok()) << mix.status();
  EXPECT_EQ((*mix)->describe(),
            "2 * brightness + 0.5 * " + server.endpoint().url());
  absl::StatusOr<std::vector<float>> values = (*mix)->score(t.batch);
  ASSERT_TRUE(values.ok()) << values.status();
  absl::StatusOr<std::vector<float>> bright =
      computeReward("brightness", t.batch);
  ASSERT_TRUE(bright.ok());
  ASSERT_EQ(values->size(), 2u);
  EXPECT_EQ((*values)[0], static_cast<float>(2.0 * (*bright)[0] + 5.0));
  EXPECT_EQ((*values)[1], static_cast<float>(2.0 * (*bright)[1] + 10.0));
  auto means = (*mix)->takeMeans();
  ASSERT_EQ(means.size(), 3u);
  EXPECT_EQ(means[0].first, "reward/brightness");
  EXPECT_DOUBLE_EQ(means[0].second,
                   (double((*bright)[0]) + double((*bright)[1])) / 2);
  EXPECT_EQ(means[1].first, "reward/" + server.endpoint().url());
  EXPECT_EQ(means[1].second, 15);
  EXPECT_EQ(means[2].first, "reward/a");
  EXPECT_EQ(means[2].second, 1.5);
  EXPECT_TRUE((*mix)->takeMeans().empty()); // reset
}

TEST(RewardMixTest, PartsOfTheBatchAreScoredInOrder) {
  // An iteration of B = 4 images scored in two chunks of 2 (rollout_chunks
  // = 2) with P = 2 prompts: the first chunk is the first prompt's group,
  // the second the second's; a new context starts over.
  std::vector<std::string> metadata;
  std::mutex mutex;
  TestServer server([&](const httplib::Request &req, httplib::Response &res) {
    size_t at = req.body.find("\"metadata\": ");
    size_t end = req.body.find("], \"images\"");
    std::lock_guard<std::mutex> lock(mutex);
    metadata.push_back(req.body.substr(at, end - at + 1));
    res.set_content(R"({"scores": [1, 2]})", "application/json");
  });
  TestBatch t;
  absl::StatusOr<std::shared_ptr<RewardMix>> mix =
      RewardMix::create({server.endpoint().url()}, fastOptions());
  ASSERT_TRUE(mix.ok()) << mix.status();
  ScoreContext context;
  context.iteration = 0;
  context.promptsPerIteration = 2;
  context.promptCount = 3;
  context.batchSize = 4;
  for (int iteration = 0; iteration < 2; ++iteration) {
    (*mix)->setContext(context);
    ASSERT_TRUE((*mix)->score(t.batch).ok());
    ASSERT_TRUE((*mix)->score(t.batch).ok());
  }
  auto group = [](int prompt) {
    return absl::StrCat(R"("metadata": [{"prompt_index": )", prompt,
                        R"(, "sample_index": 0, "prompt": null}, )",
                        R"({"prompt_index": )", prompt,
                        R"(, "sample_index": 1, "prompt": null}])");
  };
  EXPECT_EQ(metadata,
            (std::vector<std::string>{group(0), group(1), group(0), group(1)}));
}

TEST(RewardMixTest, OneBuiltinIsItselfAndLogsNothing) {
  TestBatch t;
  absl::StatusOr<std::shared_ptr<RewardMix>> mix =
      RewardMix::create({"jpeg_compressibility"}, {});
  ASSERT_TRUE(mix.ok());
  EXPECT_EQ((*mix)->describe(), "jpeg_compressibility");
  EXPECT_EQ(*(*mix)->score(t.batch),
            *computeReward("jpeg_compressibility", t.batch));
  EXPECT_TRUE((*mix)->takeMeans().empty());
}

} // namespace
} // namespace omni::rewards
