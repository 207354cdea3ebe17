//===- Export.h - omnirun --export: a checkpoint as a diffusers folder -*- C++
//-*-===//
//
// `omnirun step.bin --export DIR --checkpoint FILE|RUNDIR [--ema]
// [--base-diffusers SRC] [--merge-lora] [--force]` (docs/export.md) writes
// the transformer of a trained checkpoint as a diffusers folder:
// transformer/diffusion_pytorch_model.safetensors (the checkpoint's
// transformer.* tensors under their diffusers names, f32) and
// transformer/config.json (from step.bin's metadata, or SRC's); the other
// components copied (hard-linked where possible) from SRC, or, without
// SRC, a model_index.json naming only what is there and vae/ from the
// checkpoint's decoder weights (decoder only). A LoRA run's adapters go to
// pytorch_lora_weights.safetensors in the format diffusers'
// load_lora_weights reads (or, with --merge-lora, into the weights).
//
// The folder is written under a temporary sibling and renamed into place at
// the end, so DIR is either absent/old or complete. MLIR-free; not
// thread-safe (one export per process at a time).
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_OMNIRUN_EXPORT_H
#define OMNI_RUNTIME_OMNIRUN_EXPORT_H

#include "runtime/loader/Program.h"

#include "absl/status/status.h"

#include <optional>
#include <ostream>
#include <string>

namespace omni::omnirun {

/// The export flags of omnirun's command line.
struct ExportOptions {
  /// --export DIR (empty: not exporting).
  std::string dir;
  /// --checkpoint FILE|RUNDIR (a run folder means its latest checkpoint).
  std::string checkpoint;
  /// --ema: the EMA of the trained weights (ema.transformer.*).
  bool ema = false;
  /// --base-diffusers SRC: the folder the other components come from.
  std::string baseDiffusers;
  /// --merge-lora: W + (alpha / r) B A instead of an adapter file.
  bool mergeLora = false;
  /// --force: replace an existing non-empty DIR.
  bool force = false;
  /// The first export-only flag given (for "goes with --export").
  std::string firstFlag;
};

/// An error line when export-only flags are given without --export.
std::optional<std::string> checkExportFlags(const ExportOptions &options);

/// Writes the export; `programFile` names the step.bin in messages. Prints
/// one line per component written to `out`. Errors are one line.
absl::Status exportDiffusers(const loader::Program &program,
                             const std::string &programFile,
                             const ExportOptions &options, std::ostream &out);

} // namespace omni::omnirun

#endif // OMNI_RUNTIME_OMNIRUN_EXPORT_H
