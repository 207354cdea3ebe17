//===- Serve.h - omnirun --serve: the sampling server mode ------*- C++ -*-===//
//
// `omnirun sample.bin --serve HOST:PORT [--max-queue N]
// [--max-batch-wait-ms M]` serves the program's @sample over HTTP
// (runtime/serve/SampleServer.h, docs/serving.md) until SIGINT or SIGTERM:
// then the queued requests are answered 503, the batch that runs finishes
// and is answered, and the exit code is 128 + the signal (130, 143); a
// second signal exits at once. The SampleBackend comes from a factory, so
// that the tool does not depend on how @sample is run: builtinSampleBackend()
// is the one omnirun uses. MLIR-free.
//
// Thread safety: serve() installs process-wide SIGINT/SIGTERM handlers while
// it runs; one serve() per process at a time.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_OMNIRUN_SERVE_H
#define OMNI_RUNTIME_OMNIRUN_SERVE_H

#include "runtime/loader/Program.h"
#include "runtime/serve/SampleServer.h"
#include "runtime/train/sample/Sampler.h"

#include "absl/status/statusor.h"

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace omni::omnirun {

/// What omnirun's flags say about serving.
struct ServeArgs {
  /// The step.bin, for messages.
  std::string file;
  /// --serve HOST:PORT, parsed (port 0: a free port).
  std::string host;
  int port = 0;
  int64_t maxQueue = 64;
  int64_t maxBatchWaitMs = 5;
  /// --device, --threads and --prompts, for the backend.
  std::string device = "cpu";
  int threads = 0;
  std::string promptsPath;
  /// --graphs.
  executor::ExecutorOptions::Graphs graphs =
      executor::ExecutorOptions::Graphs::Auto;
  /// The weights (--checkpoint, --ema, --init, --init-skip; Sample.h's
  /// samplingWeights) and the --set values (guidance_scale: the default
  /// of requests that give none).
  train::sample::WeightSource weights;
  std::vector<std::string> hparamSets;
  /// Where the backend says what it loaded (stdout in the tool); null: not
  /// said.
  std::ostream *log = nullptr;
  /// Called once the server listens, with its port (tests; port 0).
  std::function<void(int port)> onListening;
};

/// Makes the backend that runs `program`'s @sample.
using SampleBackendFactory =
    std::function<absl::StatusOr<std::unique_ptr<serve::SampleBackend>>(
        const std::shared_ptr<const loader::Program> &program,
        const ServeArgs &args)>;

/// The factory omnirun uses: a backend over train::sample::Sampler on
/// --device (ServeBackend.h). A factory may be nullptr (then --serve says
/// in one line that this omnirun cannot run @sample).
SampleBackendFactory builtinSampleBackend();

/// Parses a --serve value HOST:PORT (PORT 0 to 65535); one line naming
/// the value otherwise.
absl::Status parseServeAddress(const std::string &value, ServeArgs &args);

/// Serves `program` with the backend `factory` makes: prints where it
/// listens on `out`, errors as one line "omnirun: ..." on `err`. Returns
/// the exit code: 1 on an error, 128 + the signal that stopped it.
int serve(const std::shared_ptr<const loader::Program> &program,
          const ServeArgs &args, const SampleBackendFactory &factory,
          std::ostream &out, std::ostream &err);

} // namespace omni::omnirun

#endif // OMNI_RUNTIME_OMNIRUN_SERVE_H
