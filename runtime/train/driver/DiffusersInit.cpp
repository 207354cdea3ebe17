//===- DiffusersInit.cpp - state slots from a diffusers folder ------------===//
//
// Three passes per part: find the files (one file, or the shards of the
// index), open them header-only and map every tensor name to its file;
// check every name, dtype and shape against the state (and that every
// slot is given); then read, widen, check and set one tensor at a time.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/driver/DiffusersInit.h"

#include "runtime/base/Status.h"
#include "runtime/train/checkpoint/AtomicFile.h"
#include "runtime/train/checkpoint/Json.h"
#include "runtime/train/checkpoint/Safetensors.h"
#include "runtime/train/driver/ShardedState.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <sys/stat.h>

namespace omni::train {
namespace {

using checkpoint::SafetensorsReader;
using checkpoint::json::quoted;

constexpr const char *kWeights = "diffusion_pytorch_model.safetensors";
constexpr const char *kIndex = "diffusion_pytorch_model.safetensors.index.json";

bool exists(const std::string &path, bool folder) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 &&
         (folder ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode));
}

bool isLoraName(const std::string &name) {
  return absl::StrContains(name, ".lora_A.") ||
         absl::StrContains(name, ".lora_B.");
}

bool skipped(const std::vector<std::string> &skip, const std::string &name) {
  return std::any_of(skip.begin(), skip.end(), [&](const std::string &p) {
    return p == name || (!p.empty() && p.back() == '*' &&
                         absl::StartsWith(name, p.substr(0, p.size() - 1)));
  });
}

std::string slotType(const loader::StateInfo &slot) {
  return loader::tensorTypeString(slot.dtype, checkpointShape(slot));
}

/// The shard file names of an index.json's weight_map, by tensor.
absl::StatusOr<std::map<std::string, std::string>>
readIndex(const std::string &path) {
  OMNI_ASSIGN_OR_RETURN(std::string text, checkpoint::readWholeFile(path));
  checkpoint::json::JsonValue root;
  std::string error;
  if (!checkpoint::json::parseJson(text, root, error))
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a safetensors index: ", error));
  using Kind = checkpoint::json::JsonValue::Kind;
  const checkpoint::json::JsonValue *map = nullptr;
  if (root.kind == Kind::Object)
    for (const checkpoint::json::JsonMember &m : root.members)
      if (m.key == "weight_map")
        map = &m.value;
  if (!map || map->kind != Kind::Object)
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": no object 'weight_map', expected {\"weight_map\": {tensor: "
              "shard file}}"));
  std::map<std::string, std::string> out;
  for (const checkpoint::json::JsonMember &m : map->members) {
    if (m.value.kind != Kind::String)
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": weight_map entry ", quoted(m.key), " is ",
                       checkpoint::json::kindName(m.value.kind),
                       ", expected a shard file name"));
    const std::string &shard = m.value.text;
    if (shard.empty() || absl::StrContains(shard, "/") || shard == "." ||
        shard == "..")
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": weight_map entry ", quoted(m.key), " names shard ",
          quoted(shard), ", expected a file name in the index's folder"));
    if (!out.emplace(m.key, shard).second)
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": weight_map has tensor ", quoted(m.key),
                       " twice, expected each tensor once"));
  }
  return out;
}

/// One tensor of a part: the file that holds it and its header entry.
struct FileTensor {
  const SafetensorsReader *file;
  const SafetensorsReader::TensorInfo *info;
};

/// A part's files, opened header-only, and its tensors by name.
struct PartFiles {
  std::string where; // DIR/sub, for the log
  std::vector<std::unique_ptr<SafetensorsReader>> files;
  std::map<std::string, FileTensor> tensors;
};

absl::StatusOr<PartFiles> openPart(const std::string &dir,
                                   const DiffusersPart &part) {
  PartFiles out;
  out.where = absl::StrCat(dir, "/", part.subfolder);
  if (!exists(out.where, /*folder=*/true))
    return absl::NotFoundError(absl::StrCat(
        "--init-diffusers ", dir, ": no folder ", part.subfolder,
        "/, expected the weights of state '", part.prefix, ".*' there"));
  std::string single = absl::StrCat(out.where, "/", kWeights);
  std::string index = absl::StrCat(out.where, "/", kIndex);
  if (exists(index, false)) {
    OMNI_ASSIGN_OR_RETURN(auto map, readIndex(index));
    std::map<std::string, const SafetensorsReader *> shards;
    for (const auto &[tensor, shard] : map) {
      if (shards.count(shard))
        continue;
      std::string path = absl::StrCat(out.where, "/", shard);
      if (!exists(path, false))
        return absl::NotFoundError(absl::StrCat(
            index, ": weight_map names shard ", quoted(shard), " (for tensor ",
            quoted(tensor), "), which is not in ", out.where));
      OMNI_ASSIGN_OR_RETURN(SafetensorsReader reader,
                            SafetensorsReader::open(path));
      out.files.push_back(
          std::make_unique<SafetensorsReader>(std::move(reader)));
      shards[shard] = out.files.back().get();
    }
    for (const auto &[tensor, shard] : map) {
      const SafetensorsReader *file = shards[shard];
      const SafetensorsReader::TensorInfo *info = file->find(tensor);
      if (!info)
        return absl::InvalidArgumentError(
            absl::StrCat(index, ": weight_map puts tensor ", quoted(tensor),
                         " in ", shard, ", which does not have it"));
      out.tensors[tensor] = {file, info};
    }
    // A shard's tensors the index does not list would be dropped silently.
    for (const auto &file : out.files)
      for (const SafetensorsReader::TensorInfo &t : file->tensors())
        if (!map.count(t.name))
          return absl::InvalidArgumentError(absl::StrCat(
              file->path(), ": tensor ", quoted(t.name), " is not in ", kIndex,
              "'s weight_map, expected the index to list every tensor"));
    return out;
  }
  if (!exists(single, false))
    return absl::NotFoundError(absl::StrCat(
        "--init-diffusers ", dir, ": ", part.subfolder, "/ has neither ",
        kWeights, " nor ", kIndex,
        " (variant files such as diffusion_pytorch_model.fp16.safetensors "
        "are not read)"));
  OMNI_ASSIGN_OR_RETURN(SafetensorsReader reader,
                        SafetensorsReader::open(single));
  out.files.push_back(std::make_unique<SafetensorsReader>(std::move(reader)));
  for (const SafetensorsReader::TensorInfo &t : out.files[0]->tensors())
    out.tensors[t.name] = {out.files[0].get(), &t};
  return out;
}

/// A tensor checked against its slots: the slot and its copies.
struct Planned {
  std::string name;
  FileTensor source;
  std::vector<const loader::StateInfo *> slots;
};

bool widens(DType file, const loader::StateInfo &slot) {
  return (file == DType::F16 || file == DType::BF16) &&
         slot.dtype == DType::F32;
}

} // namespace

std::vector<DiffusersPart> defaultDiffusersParts() {
  return {{"transformer", "transformer", {"pos_embed.pos_embed"}},
          {"vae", "vae", {"encoder.*", "quant_conv.*"}}};
}

absl::Status
loadDiffusersFolder(const std::string &dir,
                    const std::vector<DiffusersPart> &parts,
                    const std::vector<const loader::StateInfo *> &state,
                    const SetStateSlot &set, std::ostream &log,
                    const std::vector<std::string> &extraSkip) {
  std::map<std::string, const loader::StateInfo *> byName;
  for (const loader::StateInfo *s : state)
    byName[s->name] = s;
  for (const DiffusersPart &part : parts) {
    const std::string prefix = part.prefix + ".";
    bool any = std::any_of(state.begin(), state.end(), [&](const auto *s) {
      return absl::StartsWith(s->name, prefix);
    });
    if (!any) {
      log << "init: " << dir << "/" << part.subfolder
          << " not read (the program has no state " << prefix << "*)\n";
      continue;
    }
    OMNI_ASSIGN_OR_RETURN(PartFiles files, openPart(dir, part));

    // Names, dtypes and shapes, before any element is read.
    std::vector<Planned> plan;
    std::set<std::string> given;
    int64_t skips = 0, refs = 0, emas = 0;
    for (const auto &[name, source] : files.tensors) {
      if (skipped(part.skip, name) || skipped(extraSkip, name)) {
        ++skips;
        continue;
      }
      const std::string &path = source.file->path();
      std::string target = prefix + name;
      auto it = byName.find(target);
      if (it == byName.end())
        return absl::InvalidArgumentError(absl::StrCat(
            path, ": tensor ", quoted(name), " would set state '", target,
            "', which the program does not have (--init-skip=", name,
            " ignores it)"));
      Planned p{name, source, {it->second}};
      for (auto [copy, count] : {std::pair{"ref.", &refs}, {"ema.", &emas}}) {
        auto c = byName.find(copy + target);
        if (c == byName.end())
          continue;
        p.slots.push_back(c->second);
        ++*count;
      }
      const SafetensorsReader::TensorInfo &info = *source.info;
      std::string found = loader::tensorTypeString(info.dtype, info.shape);
      for (const loader::StateInfo *slot : p.slots)
        if (info.shape != checkpointShape(*slot) ||
            (info.dtype != slot->dtype && !widens(info.dtype, *slot)))
          return absl::InvalidArgumentError(absl::StrCat(
              path, ": tensor ", quoted(name), " is ", found, ", expected ",
              slotType(*slot), " as state '", slot->name, "' is"));
      given.insert(target);
      plan.push_back(std::move(p));
    }
    for (const loader::StateInfo *s : state)
      if (absl::StartsWith(s->name, prefix) && !isLoraName(s->name) &&
          !given.count(s->name))
        return absl::InvalidArgumentError(absl::StrCat(
            files.where, ": no tensor '", s->name.substr(prefix.size()),
            "' for state '", s->name, "' in ",
            files.files.size() == 1
                ? files.files[0]->path()
                : absl::StrCat(files.files.size(), " shards of ", kIndex),
            ", expected every parameter under '", prefix,
            "' except LoRA adapters"));

    // One tensor at a time.
    for (const Planned &p : plan) {
      OMNI_ASSIGN_OR_RETURN(TypedTensor value,
                            p.source.file->read(*p.source.info));
      if (widens(value.dtype(), *p.slots[0])) {
        TypedTensor wide(DType::F32, value.shape());
        absl::Span<float> out = wide.span<float>();
        for (int64_t i = 0; i < value.numElements(); ++i)
          out[i] = static_cast<float>(value.doubleAt(i));
        value = std::move(wide);
      }
      if (value.isFloat())
        for (int64_t i = 0; i < value.numElements(); ++i) {
          double x = value.doubleAt(i);
          if (std::isfinite(x))
            continue;
          return absl::InvalidArgumentError(absl::StrCat(
              p.source.file->path(), ": tensor ", quoted(p.name), " has ",
              std::isnan(x) ? "NaN"
              : x > 0       ? "+inf"
                            : "-inf",
              " at element ", i, " of ", value.numElements(),
              ", expected finite initial weights"));
        }
      for (const loader::StateInfo *slot : p.slots)
        OMNI_RETURN_IF_ERROR(set(*slot, value));
    }
    log << "init: " << plan.size() << " tensors of " << files.where << " ("
        << files.files.size() << (files.files.size() == 1 ? " file" : " shards")
        << ") into " << prefix << "*";
    if (refs)
      log << " (and " << refs << " into ref." << prefix << "*)";
    if (emas)
      log << " (and " << emas << " into ema." << prefix << "*)";
    if (skips)
      log << ", " << skips << " skipped";
    log << "\n";
  }
  return absl::OkStatus();
}

} // namespace omni::train
