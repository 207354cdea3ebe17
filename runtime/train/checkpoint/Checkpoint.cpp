//===- Checkpoint.cpp - Training checkpoints on disk ------------*- C++ -*-===//
//
// Save order is what makes resuming safe: the step file is made durable
// (AtomicFile) before `latest` is replaced, so `latest` never names a file
// that is missing or partially written. The `latest` file is parsed as
// strictly as the safetensors header: decimal digits, an optional newline.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/checkpoint/Checkpoint.h"

#include "runtime/train/checkpoint/AtomicFile.h"

#include "absl/strings/str_cat.h"

#include <cerrno>
#include <cstring>
#include <limits>
#include <sys/stat.h>

namespace omni::checkpoint {
namespace {


} // namespace

std::string checkpointPath(const std::string &dir, int64_t step) {
  return absl::StrCat(dir, "/step-", step, ".safetensors");
}

absl::Status
saveCheckpoint(const std::string &dir, int64_t step,
               const std::vector<NamedTensor> &tensors,
               const std::map<std::string, std::string> &metadata) {
  if (step < 0)
    return absl::InvalidArgumentError(absl::StrCat(
        dir, ": checkpoint step is ", step, ", expected a non-negative step"));
  if (absl::Status s = makeDirectories(dir); !s.ok())
    return s;
  if (absl::Status s =
          writeSafetensors(checkpointPath(dir, step), tensors, metadata);
      !s.ok())
    return s;
  return writeFileAtomically(absl::StrCat(dir, "/latest"),
                             absl::StrCat(step, "\n"));
}

absl::StatusOr<Checkpoint> loadLatestCheckpoint(const std::string &dir) {
  std::string latestPath = absl::StrCat(dir, "/latest");
  absl::StatusOr<std::string> text = readWholeFile(latestPath, 64);
  if (!text.ok()) {
    if (absl::IsNotFound(text.status()))
      return absl::NotFoundError(
          absl::StrCat(dir, ": no checkpoint (no 'latest' file)"));
    return text.status();
  }
  absl::string_view digits = *text;
  if (!digits.empty() && digits.back() == '\n')
    digits.remove_suffix(1);
  // At most 18 digits, so the value always fits int64.
  bool valid =
      !digits.empty() && digits.size() <= 18 &&
      digits.find_first_not_of("0123456789") == absl::string_view::npos;
  if (!valid) {
    std::string found;
    for (char c : text->substr(0, 32)) {
      unsigned char u = static_cast<unsigned char>(c);
      if (u >= 0x20 && u < 0x7f)
        found += c;
      else
        absl::StrAppend(&found, "\\x", absl::Hex(u, absl::kZeroPad2));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        latestPath, ": expected a step number, found '", found, "'"));
  }
  int64_t step = 0;
  for (char c : digits)
    step = step * 10 + (c - '0');

  std::string path = checkpointPath(dir, step);
  absl::StatusOr<SafetensorsContents> contents =
      readSafetensorsWithMetadata(path);
  if (!contents.ok()) {
    if (absl::IsNotFound(contents.status()))
      return absl::DataLossError(absl::StrCat(
          latestPath, ": names step ", step, " but ", path, " does not exist"));
    return contents.status();
  }
  Checkpoint checkpoint;
  checkpoint.step = step;
  checkpoint.tensors = std::move(contents->tensors);
  checkpoint.metadata = std::move(contents->metadata);
  return checkpoint;
}

absl::Status makeDirectories(const std::string &dir) {
  if (dir.empty())
    return absl::InvalidArgumentError("checkpoint folder name is empty");
  for (size_t i = 1; i <= dir.size(); ++i) {
    if (i != dir.size() && dir[i] != '/')
      continue;
    std::string prefix = dir.substr(0, i);
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST)
      return absl::InternalError(
          absl::StrCat(prefix, ": mkdir failed: ", std::strerror(errno)));
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return absl::InvalidArgumentError(
        absl::StrCat(dir, ": expected a folder"));
  return absl::OkStatus();
}

} // namespace omni::checkpoint
