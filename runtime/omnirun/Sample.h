//===- Sample.h - omnirun's sampling mode -----------------------*- C++ -*-===//
//
// `omnirun sample.bin --prompts FILE --out DIR [--checkpoint FILE|RUNDIR
// [--ema]] [--init [PREFIX=]FILE] [--seed S] [--images-per-prompt K]
// [--set guidance_scale=G] [--save-latents]`: for a program with @sample
// and no @train_step (omnigen --program=sample, docs/sampling.md), K
// images per prompt with seeds S..S+K-1, B per @sample call
// (runtime/train/sample/Sampler.h), written as DIR/p<prompt>-s<seed>.png,
// a captioned DIR/grid.png and DIR/manifest.jsonl. OmniRun.cpp parses the
// flags and dispatches here. MLIR-free.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_OMNIRUN_SAMPLE_H
#define OMNI_RUNTIME_OMNIRUN_SAMPLE_H

#include "runtime/hal/Device.h"
#include "runtime/loader/Program.h"
#include "runtime/train/driver/Trainer.h"

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

namespace omni::omnirun {

/// The sampling mode's own flags (the others are training flags it
/// shares: --prompts, --out, --seed, --set, --init, --init-skip).
struct SampleFlags {
  /// The first sampling flag given ("" for none).
  std::string given;
  std::string checkpoint;
  bool ema = false;
  int64_t imagesPerPrompt = 1;
  /// Also write each image's initial latents (p<i>-s<seed>.latents.npy).
  bool saveLatents = false;
};

/// The training flags sampling takes (any other is an error).
bool isSamplingTrainFlag(const std::string &name);

/// Runs the sampling mode of `program` (file `file`) on `device`;
/// `trainFlags`: the training flags given, by name. Returns the exit code,
/// after one line on `err` for an error.
int runSample(std::shared_ptr<const loader::Program> program,
              const std::string &file, hal::Device &device,
              const SampleFlags &flags, const train::TrainOptions &training,
              const std::vector<std::string> &trainFlags, std::ostream &out,
              std::ostream &err);

} // namespace omni::omnirun

#endif // OMNI_RUNTIME_OMNIRUN_SAMPLE_H
