//===- Export.cpp - omnirun --export: a checkpoint as a diffusers folder --===//
//
// See Export.h and docs/export.md.
//
//===----------------------------------------------------------------------===//

#include "runtime/omnirun/Export.h"

#include "runtime/train/checkpoint/AtomicFile.h"
#include "runtime/train/checkpoint/Checkpoint.h"
#include "runtime/train/checkpoint/Json.h"
#include "runtime/train/checkpoint/Safetensors.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <system_error>

#include <unistd.h>

namespace omni::omnirun {
namespace {

namespace fs = std::filesystem;
using checkpoint::NamedTypedTensor;

constexpr absl::string_view kTransformer = "transformer.";
constexpr absl::string_view kEma = "ema.transformer.";
constexpr absl::string_view kVae = "vae.";

absl::Status error(absl::string_view message) {
  return absl::InvalidArgumentError(message);
}

bool isAdapter(absl::string_view name) {
  return absl::StrContains(name, ".lora_A.") ||
         absl::StrContains(name, ".lora_B.");
}

/// The shortest text that reads back as `v` (a JSON number).
std::string exactNumber(double v) {
  char text[32];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, v);
    if (std::strtod(text, nullptr) == v)
      break;
  }
  return text;
}

/// `t` as f32: f32 as is, f16 and bf16 widened (exactly); other dtypes are
/// not weights.
absl::StatusOr<TypedTensor> asF32(const NamedTypedTensor &t,
                                  const std::string &file) {
  if (t.tensor.dtype() == DType::F32)
    return t.tensor;
  if (t.tensor.dtype() != DType::F16 && t.tensor.dtype() != DType::BF16)
    return error(absl::StrCat(file, ": tensor '", t.name, "' is ",
                              t.tensor.typeString(),
                              "; expected f32, f16 or bf16 weights"));
  TypedTensor out(DType::F32, t.tensor.shape());
  absl::Span<float> values = out.span<float>();
  for (int64_t i = 0; i < out.numElements(); ++i)
    values[i] = static_cast<float>(t.tensor.doubleAt(i));
  return out;
}

struct LoadedCheckpoint {
  std::vector<NamedTypedTensor> tensors;
  /// The file the tensors came from (for messages).
  std::string file;
};

/// --checkpoint FILE, or RUNDIR's latest checkpoint.
absl::StatusOr<LoadedCheckpoint> loadCheckpoint(const std::string &path) {
  if (path.empty())
    return error("--export needs --checkpoint FILE|RUNDIR (a checkpoint "
                 "file or a run folder)");
  std::error_code ec;
  LoadedCheckpoint out;
  if (fs::is_directory(path, ec)) {
    if (!fs::exists(fs::path(path) / "latest", ec))
      return error(absl::StrCat("--checkpoint ", path,
                                ": the folder has no checkpoint (no "
                                "'latest'); expected a run folder or a "
                                "step-<n>.safetensors file"));
    absl::StatusOr<checkpoint::TypedCheckpoint> latest =
        checkpoint::loadLatestCheckpointTyped(path);
    if (!latest.ok())
      return latest.status();
    out.tensors = std::move(latest->tensors);
    out.file = checkpoint::checkpointPath(path, latest->step);
    return out;
  }
  if (!fs::exists(path, ec))
    return error(
        absl::StrCat("--checkpoint ", path, ": no such file or folder"));
  absl::StatusOr<checkpoint::TypedSafetensorsContents> contents =
      checkpoint::readSafetensorsTyped(path);
  if (!contents.ok())
    return contents.status();
  out.tensors = std::move(contents->tensors);
  out.file = path;
  return out;
}

/// The folder being written: a temporary sibling of the destination,
/// removed unless commit() renames it into place.
class StagingFolder {
public:
  explicit StagingFolder(fs::path dest) : dest_(std::move(dest)) {
    temp_ = dest_;
    temp_ += absl::StrCat(".tmp.", ::getpid());
  }
  ~StagingFolder() {
    std::error_code ec;
    if (!committed_)
      fs::remove_all(temp_, ec);
  }
  const fs::path &path() const { return temp_; }

  absl::Status create() {
    std::error_code ec;
    fs::remove_all(temp_, ec);
    if (dest_.has_parent_path())
      fs::create_directories(dest_.parent_path(), ec);
    if (!fs::create_directory(temp_, ec) || ec)
      return error(absl::StrCat("--export ", dest_.string(), ": cannot create ",
                                temp_.string(), ": ", ec.message()));
    return absl::OkStatus();
  }

  /// Replaces the destination (absent, empty or, with --force, anything)
  /// by the temporary folder.
  absl::Status commit() {
    std::error_code ec;
    fs::path old;
    if (fs::exists(dest_, ec)) {
      old = dest_;
      old += absl::StrCat(".old.", ::getpid());
      fs::remove_all(old, ec);
      fs::rename(dest_, old, ec);
      if (ec)
        return error(
            absl::StrCat("--export ", dest_.string(),
                         ": cannot move the old folder aside: ", ec.message()));
    }
    fs::rename(temp_, dest_, ec);
    if (ec)
      return error(absl::StrCat("--export ", dest_.string(), ": cannot rename ",
                                temp_.string(), " into place: ", ec.message()));
    committed_ = true;
    if (!old.empty())
      fs::remove_all(old, ec);
    return absl::OkStatus();
  }

private:
  fs::path dest_, temp_;
  bool committed_ = false;
};

absl::Status makeFolder(const fs::path &path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec)
    return error(
        absl::StrCat("cannot create ", path.string(), ": ", ec.message()));
  return absl::OkStatus();
}

absl::Status writeText(const fs::path &path, const std::string &text) {
  return checkpoint::writeFileAtomically(path.string(), text);
}

/// Copies `from` (a file or folder) to `to`, hard-linking files where the
/// file system allows it.
absl::Status copyTree(const fs::path &from, const fs::path &to) {
  std::error_code ec;
  const auto recursive = fs::copy_options::recursive;
  fs::copy(from, to, recursive | fs::copy_options::create_hard_links, ec);
  if (ec) {
    fs::remove_all(to, ec);
    ec.clear();
    fs::copy(from, to, recursive, ec);
  }
  if (ec)
    return error(absl::StrCat("--base-diffusers: cannot copy ", from.string(),
                              " to ", to.string(), ": ", ec.message()));
  return absl::OkStatus();
}

/// The LoRA adapter of module M: M.lora_A.weight and M.lora_B.weight.
struct Adapter {
  const TypedTensor *a = nullptr, *b = nullptr;
};

/// W + scale * B A in double, rounded once to f32.
TypedTensor merged(const TypedTensor &w, const TypedTensor &a,
                   const TypedTensor &b, double scale) {
  const int64_t out = w.shape()[0], in = w.shape()[1], r = a.shape()[0];
  TypedTensor result = w;
  absl::Span<float> dst = result.span<float>();
  absl::Span<const float> av = a.span<float>(), bv = b.span<float>(),
                          wv = w.span<float>();
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < in; ++i) {
      double sum = 0;
      for (int64_t k = 0; k < r; ++k)
        sum += static_cast<double>(bv[o * r + k]) * av[k * in + i];
      dst[o * in + i] = static_cast<float>(wv[o * in + i] + scale * sum);
    }
  return result;
}

} // namespace

std::optional<std::string> checkExportFlags(const ExportOptions &options) {
  if (options.dir.empty() && !options.firstFlag.empty())
    return absl::StrCat(options.firstFlag,
                        " goes with --export DIR (write a checkpoint as a "
                        "diffusers folder)");
  return std::nullopt;
}

absl::Status exportDiffusers(const loader::Program &program,
                             const std::string &programFile,
                             const ExportOptions &options, std::ostream &out) {
  // What the model is: step.bin's metadata (docs/backend.md, "Metadata").
  if (program.metadata().empty())
    return error(absl::StrCat(
        programFile,
        " has no metadata (it was compiled by an omnic before the "
        "metadata table, or not from omnigen's recipe): regenerate it with "
        "omnigen and omnic to export"));
  auto meta = [&](absl::string_view key) -> std::string {
    const std::string *v = program.findMetadata(key);
    return v ? *v : std::string();
  };
  const std::string model = meta("model");
  fs::path base;
  std::string transformerConfig;
  if (!options.baseDiffusers.empty()) {
    base = options.baseDiffusers;
    std::error_code ec;
    if (!fs::exists(base / "model_index.json", ec))
      return error(absl::StrCat("--base-diffusers ", options.baseDiffusers,
                                ": no model_index.json (expected a diffusers "
                                "folder)"));
    absl::StatusOr<std::string> text = checkpoint::readWholeFile(
        (base / "transformer" / "config.json").string(), 1 << 20);
    if (!text.ok())
      return error(absl::StrCat(
          "--base-diffusers ", options.baseDiffusers,
          ": cannot read transformer/config.json: ", text.status().message()));
    transformerConfig = *text;
  } else {
    transformerConfig = meta("diffusers_transformer_config");
    if (transformerConfig.empty())
      return error(absl::StrCat(
          programFile,
          ": the metadata has no diffusers_transformer_config "
          "(model '",
          model, "' has no diffusers class); give --base-diffusers SRC"));
    transformerConfig += "\n";
  }

  // The destination: absent, empty, or replaced with --force.
  if (options.dir.empty())
    return error("--export needs a folder");
  std::string destText = options.dir;
  while (destText.size() > 1 && destText.back() == '/')
    destText.pop_back();
  const fs::path dest(destText);
  {
    std::error_code ec;
    if (fs::exists(dest, ec)) {
      if (!fs::is_directory(dest, ec))
        return error(absl::StrCat("--export ", options.dir,
                                  ": exists and is not a folder"));
      if (!fs::is_empty(dest, ec) && !options.force)
        return error(absl::StrCat("--export ", options.dir,
                                  ": the folder exists and is not empty; "
                                  "give --force to replace it"));
    }
  }

  absl::StatusOr<LoadedCheckpoint> ckpt = loadCheckpoint(options.checkpoint);
  if (!ckpt.ok())
    return ckpt.status();
  std::map<std::string, const NamedTypedTensor *> byName;
  for (const NamedTypedTensor &t : ckpt->tensors)
    byName[t.name] = &t;
  // The checkpoint is this program's: its weights (transformer.*, vae.*,
  // ema.transformer.*) are exactly the program's state of those names, with
  // the same shapes. (A program without state, such as --program=velocity,
  // takes the weights as inputs and checks nothing here.)
  auto isWeight = [](absl::string_view name) {
    return absl::StartsWith(name, kTransformer) ||
           absl::StartsWith(name, kVae) || absl::StartsWith(name, kEma);
  };
  if (!program.state().empty()) {
    std::set<std::string> slots;
    for (const loader::StateInfo &slot : program.state()) {
      if (!isWeight(slot.name))
        continue;
      slots.insert(slot.name);
      auto it = byName.find(slot.name);
      if (it == byName.end())
        return error(absl::StrCat(ckpt->file, ": no tensor '", slot.name,
                                  "', which ", programFile,
                                  " has as state (a checkpoint of another "
                                  "program?)"));
      const std::vector<int64_t> &shape =
          slot.sharding ? slot.sharding->globalShape : slot.shape;
      if (it->second->tensor.shape() != shape)
        return error(absl::StrCat(ckpt->file, ": tensor '", slot.name, "' is ",
                                  it->second->tensor.typeString(), " but ",
                                  programFile, " has it as ",
                                  loader::tensorTypeString(slot.dtype, shape)));
    }
    for (const NamedTypedTensor &t : ckpt->tensors)
      if (isWeight(t.name) && !slots.count(t.name))
        return error(absl::StrCat(ckpt->file, ": tensor '", t.name,
                                  "' is not state of ", programFile,
                                  " (a checkpoint of another program?)"));
  }

  if (options.ema && std::none_of(ckpt->tensors.begin(), ckpt->tensors.end(),
                                  [](const NamedTypedTensor &t) {
                                    return absl::StartsWith(t.name, kEma);
                                  }))
    return error(absl::StrCat(
        ckpt->file,
        ": --ema, but the checkpoint has no EMA weights (ema.transformer.*); "
        "train with --opt=ema_decay=<d> or drop --ema"));

  // The transformer's weights (diffusers names) and LoRA adapters.
  std::map<std::string, TypedTensor> weights, adapters;
  for (const NamedTypedTensor &t : ckpt->tensors) {
    if (!absl::StartsWith(t.name, kTransformer))
      continue;
    std::string key = t.name.substr(kTransformer.size());
    const NamedTypedTensor *source = &t;
    if (options.ema) {
      auto it = byName.find(absl::StrCat(kEma, key));
      if (it != byName.end()) {
        source = it->second;
      } else if (isAdapter(key)) {
        return error(absl::StrCat(ckpt->file, ": no EMA of adapter '", t.name,
                                  "' (", kEma, key, ")"));
      }
    }
    absl::StatusOr<TypedTensor> f32 = asF32(*source, ckpt->file);
    if (!f32.ok())
      return f32.status();
    (isAdapter(key) ? adapters : weights)[key] = std::move(*f32);
  }
  if (weights.empty())
    return error(absl::StrCat(ckpt->file,
                              ": no transformer.* tensors; expected a "
                              "checkpoint of the FlowGRPO recipe"));

  // LoRA: group the adapters by module, check them against the metadata.
  std::map<std::string, Adapter> modules;
  for (const auto &[key, t] : adapters) {
    size_t at = key.find(".lora_");
    std::string module = key.substr(0, at);
    std::string part = key.substr(at + 1);
    if (part == "lora_A.weight")
      modules[module].a = &t;
    else if (part == "lora_B.weight")
      modules[module].b = &t;
    else
      return error(absl::StrCat(ckpt->file, ": tensor 'transformer.", key,
                                "': expected <module>.lora_A.weight or "
                                "<module>.lora_B.weight"));
  }
  int64_t rank = 0;
  double alpha = 0;
  if (!modules.empty()) {
    const std::string rankText = meta("lora_rank"),
                      alphaText = meta("lora_alpha");
    char *end = nullptr;
    alpha = std::strtod(alphaText.c_str(), &end);
    if (rankText.empty() || alphaText.empty() || *end != '\0')
      return error(absl::StrCat(
          ckpt->file, " has LoRA adapters but ", programFile,
          "'s metadata has no lora_rank and lora_alpha; export with the "
          "step.bin the run trained"));
    rank = std::strtoll(rankText.c_str(), nullptr, 10);
    for (const auto &[module, adapter] : modules) {
      auto w = weights.find(module + ".weight");
      if (!adapter.a || !adapter.b || w == weights.end() ||
          adapter.a->rank() != 2 || adapter.b->rank() != 2 ||
          w->second.rank() != 2 || adapter.a->shape()[0] != rank ||
          adapter.b->shape()[1] != rank ||
          adapter.a->shape()[1] != w->second.shape()[1] ||
          adapter.b->shape()[0] != w->second.shape()[0])
        return error(absl::StrCat(
            ckpt->file, ": the LoRA adapter of '", module, "' is not lora_A [",
            rank, ", in] and lora_B [out, ", rank,
            "] of its weight [out, in] (lora_rank ", rank, ")"));
    }
  }
  const double scale = rank > 0 ? alpha / static_cast<double>(rank) : 0;
  if (options.mergeLora) {
    if (modules.empty())
      return error(absl::StrCat("--merge-lora, but ", ckpt->file,
                                " has no LoRA adapters"));
    for (const auto &[module, adapter] : modules) {
      TypedTensor &w = weights[module + ".weight"];
      w = merged(w, *adapter.a, *adapter.b, scale);
    }
  }

  StagingFolder staging(dest);
  if (absl::Status s = staging.create(); !s.ok())
    return s;
  const fs::path root = staging.path();
  const std::map<std::string, std::string> ptFormat = {{"format", "pt"}};

  // transformer/
  {
    std::vector<NamedTypedTensor> tensors;
    for (auto &[key, t] : weights)
      tensors.push_back({key, std::move(t)});
    if (absl::Status s = makeFolder(root / "transformer"); !s.ok())
      return s;
    if (absl::Status s =
            writeText(root / "transformer" / "config.json", transformerConfig);
        !s.ok())
      return s;
    if (absl::Status s = checkpoint::writeSafetensorsTyped(
            (root / "transformer" / "diffusion_pytorch_model.safetensors")
                .string(),
            tensors, ptFormat);
        !s.ok())
      return s;
    out << "transformer/: " << tensors.size() << " tensors (f32) from "
        << ckpt->file << (options.ema ? ", EMA" : "")
        << (options.mergeLora ? absl::StrCat(", ", modules.size(),
                                             " LoRA adapters merged (scale ",
                                             exactNumber(scale), ")")
                              : "")
        << (base.empty() ? "" : ", config.json from --base-diffusers") << "\n";
  }

  // The LoRA adapter file diffusers' load_lora_weights reads: peft names
  // under "transformer.", the LoraConfig (r, lora_alpha, target_modules)
  // in the "lora_adapter_metadata" entry, so that the loaded scale is
  // alpha / r as omni's (docs/export.md).
  if (!modules.empty() && !options.mergeLora) {
    std::vector<NamedTypedTensor> tensors;
    std::string targets;
    for (const auto &[module, adapter] : modules) {
      tensors.push_back(
          {absl::StrCat(kTransformer, module, ".lora_A.weight"), *adapter.a});
      tensors.push_back(
          {absl::StrCat(kTransformer, module, ".lora_B.weight"), *adapter.b});
      if (!targets.empty())
        targets += ", ";
      checkpoint::json::appendJsonString(targets, module);
    }
    std::string config =
        absl::StrCat("{\"transformer.lora_alpha\": ", exactNumber(alpha),
                     ", \"transformer.r\": ", rank,
                     ", \"transformer.target_modules\": [", targets, "]}");
    std::map<std::string, std::string> metadata = ptFormat;
    metadata["lora_adapter_metadata"] = config;
    if (absl::Status s = checkpoint::writeSafetensorsTyped(
            (root / "pytorch_lora_weights.safetensors").string(), tensors,
            metadata);
        !s.ok())
      return s;
    out << "pytorch_lora_weights.safetensors: " << modules.size()
        << " LoRA adapters, rank " << rank << ", alpha " << exactNumber(alpha)
        << (options.ema ? ", EMA" : "") << "\n";
  }

  if (!base.empty()) {
    // Everything of SRC but its transformer.
    std::error_code ec;
    std::vector<std::string> copied;
    for (const fs::directory_entry &entry : fs::directory_iterator(base, ec)) {
      std::string name = entry.path().filename().string();
      if (name == "transformer" || fs::exists(root / name))
        continue;
      if (absl::Status s = copyTree(entry.path(), root / name); !s.ok())
        return s;
      copied.push_back(name);
    }
    if (ec)
      return error(absl::StrCat("--base-diffusers ", options.baseDiffusers,
                                ": ", ec.message()));
    std::sort(copied.begin(), copied.end());
    out << "from " << options.baseDiffusers << ": "
        << absl::StrJoin(copied, ", ") << "\n";
  } else {
    // The decoder, when the checkpoint has one and the metadata its
    // diffusers config, and a model_index.json of what is there.
    std::string vaeConfig = meta("diffusers_vae_config");
    std::vector<NamedTypedTensor> vae;
    for (const NamedTypedTensor &t : ckpt->tensors) {
      if (!absl::StartsWith(t.name, kVae))
        continue;
      absl::StatusOr<TypedTensor> f32 = asF32(t, ckpt->file);
      if (!f32.ok())
        return f32.status();
      vae.push_back({t.name.substr(kVae.size()), std::move(*f32)});
    }
    std::string index = "{\n  \"_class_name\": \"StableDiffusion3Pipeline\",\n"
                        "  \"_omni_export\": \"written by omnirun --export: "
                        "only the components listed here\",\n"
                        "  \"transformer\": [\"diffusers\", "
                        "\"SD3Transformer2DModel\"]";
    if (!vae.empty() && !vaeConfig.empty()) {
      if (absl::Status s = makeFolder(root / "vae"); !s.ok())
        return s;
      if (absl::Status s =
              writeText(root / "vae" / "config.json", vaeConfig + "\n");
          !s.ok())
        return s;
      if (absl::Status s = checkpoint::writeSafetensorsTyped(
              (root / "vae" / "diffusion_pytorch_model.safetensors").string(),
              vae, ptFormat);
          !s.ok())
        return s;
      index += ",\n  \"vae\": [\"diffusers\", \"AutoencoderKL\"]";
      out << "vae/: " << vae.size()
          << " tensors, decoder only (the encoder is missing: omni trains "
             "only the decoder; --base-diffusers SRC copies a whole VAE)\n";
    } else if (!vae.empty()) {
      out << "vae/: not written (" << programFile
          << "'s metadata has no diffusers_vae_config)\n";
    }
    index += "\n}\n";
    if (absl::Status s = writeText(root / "model_index.json", index); !s.ok())
      return s;
    out << "model_index.json: the transformer"
        << (index.find("\"vae\"") != std::string::npos ? " and the vae" : "")
        << " only (no text encoders, tokenizers or scheduler; give "
           "--base-diffusers SRC for a whole pipeline)\n";
  }

  if (absl::Status s = staging.commit(); !s.ok())
    return s;
  out << "exported to " << options.dir << "\n";
  return absl::OkStatus();
}

} // namespace omni::omnirun
