//===- ServeTest.cpp - omnirun --serve ------------------------------------===//
//
// The --serve flags and their one-line errors through omnirun::run, and
// serve() with a fake backend factory on loopback: it answers, and SIGTERM
// or SIGINT stop it with 143 or 130.
//
//===----------------------------------------------------------------------===//

#include "runtime/omnirun/Serve.h"

#include "runtime/omnirun/OmniRun.h"
#include "runtime/omnirun/testing/SamplePrograms.h"

#include "absl/strings/match.h"

#include <httplib.h>

#include "gtest/gtest.h"

#include <condition_variable>
#include <csignal>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>
#include <unistd.h>

namespace omni::omnirun {
namespace {

namespace sd = omni::step;

struct Result {
  int code;
  std::string out, err;
};

Result omnirun(std::vector<std::string> args) {
  std::ostringstream out, err;
  int code = run(args, out, err);
  return {code, out.str(), err.str()};
}

std::string writeTemp(const std::string &name, const std::string &bytes) {
  std::string path =
      ::testing::TempDir() + "/" + std::to_string(::getpid()) + "." + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

/// A program with a function named sample (a copy; the fake backend does
/// not run it).
std::string sampleProgram() {
  omni::testing::StepBuilder b;
  uint32_t a = b.argument(sd::DType::F32, {2}, 0, "a");
  uint32_t c = b.arena(sd::DType::F32, {2}, "c");
  b.function("sample", {a}, {c}, {b.copy(a, c)});
  return b.finish();
}

TEST(OmniRunServe, FlagErrors) {
  const std::string matmul = writeTemp("serve_mm.bin", samples::matmul());
  Result r = omnirun({matmul, "--serve", "127.0.0.1:0"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "omnirun: " + matmul +
                       " has no @sample: --serve needs a program with @sample "
                       "(omnigen --program=sample)\n");
  const std::string sample = writeTemp("serve_sample.bin", sampleProgram());
  r = omnirun({sample, "--serve=127.0.0.1:0"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "omnirun: --serve needs a program with @sample, and this "
                   "omnirun cannot run @sample yet (no sampling backend is "
                   "built in)\n");
  struct Case {
    std::vector<std::string> args;
    std::string err;
  };
  const std::vector<Case> cases = {
      {{"--serve", "localhost"},
       "--serve 'localhost': no port, expected HOST:PORT (e.g. "
       "127.0.0.1:8000; port 0 picks one)"},
      {{"--serve", ":80"},
       "--serve ':80': no host, expected HOST:PORT (e.g. "
       "127.0.0.1:8000; port 0 picks one)"},
      {{"--serve", "127.0.0.1:70000"},
       "--serve '127.0.0.1:70000': port '70000' is not from 0 to 65535, "
       "expected HOST:PORT (e.g. 127.0.0.1:8000; port 0 picks one)"},
      {{"--serve", "127.0.0.1:+1"},
       "--serve '127.0.0.1:+1': port '+1' is not from 0 to 65535, expected "
       "HOST:PORT (e.g. 127.0.0.1:8000; port 0 picks one)"},
      {{"--max-queue", "4"}, "--max-queue goes with --serve HOST:PORT"},
      {{"--max-batch-wait-ms=2"},
       "--max-batch-wait-ms goes with --serve HOST:PORT"},
      {{"--serve", "127.0.0.1:0", "--max-queue", "0"},
       "--max-queue expects an integer from 1 to 1000000, found '0'"},
      {{"--serve", "127.0.0.1:0", "--max-batch-wait-ms", "-1"},
       "--max-batch-wait-ms expects an integer from 0 to 60000, found '-1'"},
      {{"--serve", "127.0.0.1:0", "--list"},
       "--list and --serve exclude each other"},
      {{"--serve", "127.0.0.1:0", "--function", "sample"},
       "--function and --serve exclude each other"},
      {{"--serve", "127.0.0.1:0", "--steps", "3"},
       "--steps is a training option and cannot be combined with --serve"},
  };
  for (const Case &c : cases) {
    std::vector<std::string> args = {sample};
    args.insert(args.end(), c.args.begin(), c.args.end());
    r = omnirun(args);
    EXPECT_EQ(r.code, 1) << c.args[0];
    EXPECT_EQ(r.err, "omnirun: " + c.err + "\n") << c.args[0];
  }
  // --prompts goes with --serve (the set prompt_index names).
  r = omnirun({sample, "--serve", "127.0.0.1:0", "--prompts", "p.safetensors"});
  EXPECT_FALSE(absl::StrContains(r.err, "training option")) << r.err;
}

/// One 1x1 image per row, its value the seed's parity.
class TinyBackend : public serve::SampleBackend {
public:
  TinyBackend() { info_.batch = 2; }
  const serve::SampleInfo &info() const override { return info_; }
  absl::StatusOr<serve::SampleOutput>
  run(const serve::SampleBatch &batch) override {
    serve::SampleOutput out;
    out.images = HostTensor(DType::F32, {2, 3, 1, 1});
    for (int64_t i = 0; i < 6; ++i)
      out.images.floats()[i] = double(batch.seeds.ints()[i / 3] % 2);
    return out;
  }
  serve::SampleInfo info_;
};

/// serve() in a thread until `signal`; returns its exit code and output.
Result serveUntil(int signal, const std::string &file) {
  ServeArgs args;
  args.file = file;
  args.host = "127.0.0.1";
  args.port = 0;
  std::mutex mutex;
  std::condition_variable listening;
  int port = 0;
  args.onListening = [&](int p) {
    std::lock_guard<std::mutex> lock(mutex);
    port = p;
    listening.notify_all();
  };
  std::string passedFile;
  SampleBackendFactory factory =
      [&](const std::shared_ptr<const loader::Program> &, const ServeArgs &a)
      -> absl::StatusOr<std::unique_ptr<serve::SampleBackend>> {
    passedFile = a.file;
    return std::make_unique<TinyBackend>();
  };
  absl::StatusOr<std::shared_ptr<const loader::Program>> program =
      loader::Program::loadFile(file);
  EXPECT_TRUE(program.ok()) << program.status();
  std::ostringstream out, err;
  int code = -1;
  std::thread server([&] { code = serve(*program, args, factory, out, err); });
  {
    std::unique_lock<std::mutex> lock(mutex);
    EXPECT_TRUE(listening.wait_for(lock, std::chrono::seconds(60),
                                   [&] { return port != 0; }));
  }
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(120, 0);
  auto res = client.Post("/v1/sample", "{\"seed\": 3}", "application/json");
  EXPECT_TRUE(res);
  if (res) {
    EXPECT_EQ(res->status, 200) << res->body;
    EXPECT_TRUE(absl::StrContains(res->body, "\"seeds\":[3]")) << res->body;
  }
  EXPECT_EQ(::kill(::getpid(), signal), 0);
  server.join();
  EXPECT_EQ(passedFile, file);
  return {code, out.str(), err.str()};
}

TEST(OmniRunServe, ServesUntilASignal) {
  const std::string sample = writeTemp("serve_signal.bin", sampleProgram());
  Result r = serveUntil(SIGTERM, sample);
  EXPECT_EQ(r.code, 143) << r.err;
  EXPECT_TRUE(absl::StartsWith(r.out, "omnirun: serving " + sample +
                                          " on http://127.0.0.1:"))
      << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "(batch 2, 1 steps, 1x1 images; POST "
                                       "/v1/sample, GET /v1/info, GET "
                                       "/v1/health)\n"))
      << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "omnirun: stopped serving: 1 requests "
                                       "in 1 batches, 0 refused, 0 failed, 0 "
                                       "bad\n"))
      << r.out;
  r = serveUntil(SIGINT, sample);
  EXPECT_EQ(r.code, 130) << r.err;
}

} // namespace
} // namespace omni::omnirun
