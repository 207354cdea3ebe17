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

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <dirent.h>
#include <functional>
#include <limits>
#include <optional>
#include <sys/stat.h>
#include <unistd.h>

namespace omni::checkpoint {
namespace {

/// The step of a "step-<N>.safetensors" name (N: 1 to 18 digits).
std::optional<int64_t> stepOfName(absl::string_view name) {
  constexpr absl::string_view kPrefix = "step-", kSuffix = ".safetensors";
  if (name.size() <= kPrefix.size() + kSuffix.size() ||
      name.substr(0, kPrefix.size()) != kPrefix ||
      name.substr(name.size() - kSuffix.size()) != kSuffix)
    return std::nullopt;
  absl::string_view digits = name.substr(
      kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
  if (digits.size() > 18 ||
      digits.find_first_not_of("0123456789") != absl::string_view::npos)
    return std::nullopt;
  int64_t step = 0;
  for (char c : digits)
    step = step * 10 + (c - '0');
  return step;
}

} // namespace

std::string checkpointPath(const std::string &dir, int64_t step) {
  return absl::StrCat(dir, "/step-", step, ".safetensors");
}

namespace {

/// saveCheckpoint with `write` writing the step file.
absl::Status
saveWith(const std::string &dir, int64_t step,
         const std::function<absl::Status(const std::string &)> &write) {
  if (step < 0)
    return absl::InvalidArgumentError(absl::StrCat(
        dir, ": checkpoint step is ", step, ", expected a non-negative step"));
  if (absl::Status s = makeDirectories(dir); !s.ok())
    return s;
  if (absl::Status s = write(checkpointPath(dir, step)); !s.ok())
    return s;
  return writeFileAtomically(absl::StrCat(dir, "/latest"),
                             absl::StrCat(step, "\n"));
}

/// The step `<dir>/latest` names (loadLatestCheckpoint's errors).
absl::StatusOr<int64_t> latestStep(const std::string &dir) {
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
  return step;
}

/// A step file that is missing although `latest` names it is data loss.
absl::Status missingStepFile(const std::string &dir, int64_t step,
                             const absl::Status &status) {
  if (!absl::IsNotFound(status))
    return status;
  return absl::DataLossError(absl::StrCat(dir, "/latest: names step ", step,
                                          " but ", checkpointPath(dir, step),
                                          " does not exist"));
}

} // namespace

absl::Status
saveCheckpoint(const std::string &dir, int64_t step,
               const std::vector<NamedTensor> &tensors,
               const std::map<std::string, std::string> &metadata) {
  return saveWith(dir, step, [&](const std::string &path) {
    return writeSafetensors(path, tensors, metadata);
  });
}

absl::Status
saveCheckpointTyped(const std::string &dir, int64_t step,
                    const std::vector<NamedTypedTensor> &tensors,
                    const std::map<std::string, std::string> &metadata) {
  return saveWith(dir, step, [&](const std::string &path) {
    return writeSafetensorsTyped(path, tensors, metadata);
  });
}

absl::StatusOr<Checkpoint> loadLatestCheckpoint(const std::string &dir) {
  absl::StatusOr<int64_t> step = latestStep(dir);
  if (!step.ok())
    return step.status();
  absl::StatusOr<SafetensorsContents> contents =
      readSafetensorsWithMetadata(checkpointPath(dir, *step));
  if (!contents.ok())
    return missingStepFile(dir, *step, contents.status());
  Checkpoint checkpoint;
  checkpoint.step = *step;
  checkpoint.tensors = std::move(contents->tensors);
  checkpoint.metadata = std::move(contents->metadata);
  return checkpoint;
}

absl::StatusOr<TypedCheckpoint>
loadLatestCheckpointTyped(const std::string &dir) {
  absl::StatusOr<int64_t> step = latestStep(dir);
  if (!step.ok())
    return step.status();
  absl::StatusOr<TypedSafetensorsContents> contents =
      readSafetensorsTyped(checkpointPath(dir, *step));
  if (!contents.ok())
    return missingStepFile(dir, *step, contents.status());
  TypedCheckpoint checkpoint;
  checkpoint.step = *step;
  checkpoint.tensors = std::move(contents->tensors);
  checkpoint.metadata = std::move(contents->metadata);
  return checkpoint;
}

absl::StatusOr<std::vector<int64_t>> listCheckpoints(const std::string &dir) {
  std::vector<int64_t> steps;
  DIR *d = ::opendir(dir.c_str());
  if (!d) {
    if (errno == ENOENT)
      return steps;
    return absl::InternalError(
        absl::StrCat(dir, ": opendir failed: ", std::strerror(errno)));
  }
  while (struct dirent *entry = ::readdir(d))
    if (std::optional<int64_t> step = stepOfName(entry->d_name))
      steps.push_back(*step);
  ::closedir(d);
  std::sort(steps.begin(), steps.end());
  return steps;
}

absl::StatusOr<int> pruneCheckpoints(const std::string &dir, int64_t keepLast) {
  if (keepLast <= 0)
    return 0;
  absl::StatusOr<std::vector<int64_t>> steps = listCheckpoints(dir);
  if (!steps.ok())
    return steps.status();
  std::optional<int64_t> latest;
  if (absl::StatusOr<std::string> text =
          readWholeFile(absl::StrCat(dir, "/latest"), 64);
      text.ok()) {
    int64_t step = 0;
    std::string digits(absl::StripTrailingAsciiWhitespace(*text));
    if (absl::SimpleAtoi(digits, &step))
      latest = step;
  }
  int removed = 0;
  int64_t excess = static_cast<int64_t>(steps->size()) - keepLast;
  for (int64_t i = 0; i < excess; ++i) {
    int64_t step = (*steps)[static_cast<size_t>(i)];
    if (latest && step == *latest)
      continue;
    std::string path = checkpointPath(dir, step);
    if (::unlink(path.c_str()) != 0 && errno != ENOENT)
      return absl::InternalError(
          absl::StrCat(path, ": unlink failed: ", std::strerror(errno)));
    ++removed;
  }
  return removed;
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
    return absl::InvalidArgumentError(absl::StrCat(dir, ": expected a folder"));
  return absl::OkStatus();
}

} // namespace omni::checkpoint
