//===- DiffusersInit.h - state slots from a diffusers folder ----*- C++ -*-===//
//
// `omnirun --init-diffusers DIR` (docs/diffusers.md): the weights of a
// diffusers pipeline folder into the program's state slots. Each part
// names a state prefix and the folder's subfolder that holds its weights
// (transformer -> transformer/, vae -> vae/): the subfolder's
// diffusion_pytorch_model.safetensors, or the shards its
// diffusion_pytorch_model.safetensors.index.json maps (weight_map). Tensor X
// sets state `prefix.X`, and `ref.prefix.X` and `ema.prefix.X` where the
// state has them, as --init does; f16/bf16 widen exactly to f32 state.
//
// Memory: the files' headers are read and every name, dtype and shape is
// checked before any element is read; then one tensor at a time is read
// (pread, SafetensorsReader), widened, checked to be finite and set, so
// the host holds at most one tensor (and its widened copy) beyond the
// state. A non-finite tensor is found only when it is read: the slots set
// before it keep their new values, and the run stops with the error.
// Errors are one line naming the file and the tensor. MLIR-free;
// thread-compatible.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_TRAIN_DRIVER_DIFFUSERSINIT_H
#define OMNI_RUNTIME_TRAIN_DRIVER_DIFFUSERSINIT_H

#include "runtime/io/TypedTensor.h"
#include "runtime/loader/Program.h"

#include "absl/status/status.h"

#include <functional>
#include <ostream>
#include <string>
#include <vector>

namespace omni::train {

/// One component of the folder.
struct DiffusersPart {
  /// State prefix (`transformer`) and subfolder (`transformer`).
  std::string prefix, subfolder;
  /// File tensors to ignore: exact names, or a prefix with a trailing `*`.
  std::vector<std::string> skip;
};

/// (transformer, transformer/) without SD3's positional table buffer
/// `pos_embed.pos_embed` (the program computes it), and (vae, vae/)
/// without the encoder (`encoder.*`, `quant_conv.*`: the program has only
/// the decoder).
std::vector<DiffusersPart> defaultDiffusersParts();

/// Sets a state slot from a whole tensor of its checkpointShape (the
/// trainer scatters a sharded slot's block).
using SetStateSlot = std::function<absl::Status(const loader::StateInfo &slot,
                                                const TypedTensor &value)>;

/// Loads `dir`'s parts into `state` (the program's slots) through `set`.
/// A part whose prefix no slot has is skipped (said on `log`: a program
/// without a decoder ignores vae/); every other part's subfolder must give
/// every non-LoRA slot under its prefix, and only those. `extraSkip` adds
/// to every part's skip list (--init-skip). Says what it loaded on `log`.
absl::Status
loadDiffusersFolder(const std::string &dir,
                    const std::vector<DiffusersPart> &parts,
                    const std::vector<const loader::StateInfo *> &state,
                    const SetStateSlot &set, std::ostream &log,
                    const std::vector<std::string> &extraSkip = {});

} // namespace omni::train

#endif // OMNI_RUNTIME_TRAIN_DRIVER_DIFFUSERSINIT_H
