//===- DiffusersConfig.h - configs from a diffusers folder -----*- C++ -*-===//
//
// `omnigen --from-diffusers DIR` (docs/diffusers.md): the configs of the
// registered models `sd3` and `autoencoder_kl` for exactly the model a
// diffusers StableDiffusion3Pipeline folder holds, read from
//   DIR/model_index.json        the pipeline class and its components;
//   DIR/transformer/config.json SD3Transformer2DModel's config;
//   DIR/vae/config.json         AutoencoderKL's config;
//   DIR/tokenizer/tokenizer_config.json (optional) the CLIP prompt length.
// The keys keep diffusers' names (our configs use them). What the models
// cannot build, a key this file does not know and a missing key are
// one-line errors naming the file and the key. Pure functions; no state.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_FRONTENDS_MODELS_DIFFUSERSCONFIG_H
#define OMNI_FRONTENDS_MODELS_DIFFUSERSCONFIG_H

#include "frontends/builder/Model.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace omni::fe::diffusers {

/// The CLIP tokenizers' length when the folder has no tokenizer config
/// (diffusers' StableDiffusion3Pipeline default) and the T5 part of the
/// prompt (the pipeline's default max_sequence_length).
constexpr int64_t kDefaultClipTokens = 77;
constexpr int64_t kT5Tokens = 256;

/// The configs of one folder, every key of the presets set.
struct FolderConfigs {
  Config transformer; // model sd3
  Config vae;         // decoder autoencoder_kl
  /// How text_tokens was found, for the program's header comment.
  std::string textTokensFrom;
};

/// SD3Transformer2DModel config.json text -> sd3 Config (latent_size =
/// sample_size; text_tokens = `textTokens`). `file` names it in errors.
llvm::Expected<Config> sd3ConfigFromJson(llvm::StringRef json,
                                         llvm::StringRef file,
                                         int64_t textTokens);

/// AutoencoderKL config.json text -> autoencoder_kl Config with
/// `latentSize` (the transformer's).
llvm::Expected<Config> vaeConfigFromJson(llvm::StringRef json,
                                         llvm::StringRef file,
                                         int64_t latentSize);

/// Checks model_index.json (a StableDiffusion3Pipeline with the diffusers
/// classes SD3Transformer2DModel and AutoencoderKL) and returns whether it
/// names a CLIP tokenizer (`tokenizer` not null).
llvm::Expected<bool> checkModelIndex(llvm::StringRef json,
                                     llvm::StringRef file);

/// Reads the folder `dir`.
llvm::Expected<FolderConfigs> readFolder(llvm::StringRef dir);

/// `key=value` for each of `config`'s keys (omnigen's overrides).
std::vector<std::string> assignments(const Config &config);

} // namespace omni::fe::diffusers

#endif // OMNI_FRONTENDS_MODELS_DIFFUSERSCONFIG_H
