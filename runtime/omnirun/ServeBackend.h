//===- ServeBackend.h - omnirun --serve's Sampler backend -------*- C++ -*-===//
//
// The SampleBackend (runtime/serve/SampleServer.h) that `omnirun sample.bin
// --serve HOST:PORT` serves: a train::sample::Sampler (Sampler.h) on
// --device with --threads, its weights from --checkpoint [--ema] or
// @init_state and --init, as the sampling mode loads them (Sample.h), and
// the prompt set `prompt_index` names: --prompts, else the built-in
// synthetic set, as the sampling mode's (so a request for prompt i and
// seed s gets the image `omnirun sample.bin --out DIR` writes as
// p<i>-s<s>.png). docs/serving.md.
//
// Thread safety: as SampleBackend requires, run() from one thread at a
// time (the server's worker) and info() and the prompt methods from any
// (they read what create() made). MLIR-free.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_OMNIRUN_SERVEBACKEND_H
#define OMNI_RUNTIME_OMNIRUN_SERVEBACKEND_H

#include "runtime/omnirun/Serve.h"

namespace omni::omnirun {

/// Makes the device and the Sampler of `program`, loads the weights and
/// the prompts `args` name; one-line errors (a program that is not a
/// sampling program, weights or prompts that do not fit it, a bad --set).
absl::StatusOr<std::unique_ptr<serve::SampleBackend>>
makeSamplerBackend(const std::shared_ptr<const loader::Program> &program,
                   const ServeArgs &args);

} // namespace omni::omnirun

#endif // OMNI_RUNTIME_OMNIRUN_SERVEBACKEND_H
