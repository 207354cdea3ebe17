//===- SideOutputs.cpp - progress, metrics.jsonl, sample grids -----------===//
//
// What an iteration leaves besides the state: one progress line on the log,
// one metrics.jsonl line, and now and then a PNG grid of the images, each
// captioned with its prompt and reward (image/Caption.h). Only
// the step function's results are read here; they are the host copies the
// iteration made (metrics, images), never the state.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/driver/TrainerSteps.h"

#include "runtime/train/checkpoint/AtomicFile.h"
#include "runtime/train/checkpoint/Checkpoint.h"
#include "runtime/train/checkpoint/Json.h"
#include "runtime/train/image/Png.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

namespace omni::train::detail {

std::string format(const char *spec, double v) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), spec, v);
  return buf;
}

double seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

int64_t nonFiniteImages(const TypedTensor &images) {
  int64_t batch = images.shape().empty() ? 1 : images.shape()[0];
  if (batch <= 0)
    return 0;
  int64_t per = images.numElements() / batch, bad = 0;
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t k = 0; k < per; ++k)
      if (!std::isfinite(images.doubleAt(n * per + k))) {
        ++bad;
        break;
      }
  return bad;
}

namespace {

/// A metric for the console: integers exactly, floats with 6 digits.
std::string consoleValue(const TypedTensor &t) {
  if (!t.isFloat())
    return absl::StrCat(t.numElements() ? t.intAt(0) : 0);
  return format("%.6g", t.numElements() ? t.doubleAt(0) : 0.0);
}

/// A metric for JSON: integers exactly, floats round-trip (float32 needs 9
/// digits); non-finite values as Python's json module writes them.
std::string jsonValue(const TypedTensor &t) {
  if (!t.isFloat())
    return absl::StrCat(t.numElements() ? t.intAt(0) : 0);
  double v = t.numElements() ? t.doubleAt(0) : 0.0;
  if (std::isnan(v))
    return "NaN";
  if (std::isinf(v))
    return v > 0 ? "Infinity" : "-Infinity";
  return format(t.dtype() == DType::F64 ? "%.17g" : "%.9g", v);
}

/// "512 B", "1.5 KiB", "3.25 MiB", "1.02 GiB".
std::string byteCount(int64_t bytes) {
  if (bytes < 1024)
    return absl::StrCat(bytes, " B");
  const char *units[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = -1;
  while (v >= 1024 && u < 3) {
    v /= 1024;
    ++u;
  }
  return absl::StrCat(format("%.3g", v), " ", units[u]);
}

/// The console order: these first (reward_mean/reward_std as "reward m ±
/// s"), then every other metric in the program's order.
constexpr const char *kConsoleOrder[] = {"loss", "approx_kl", "clipfrac",
                                         "kl",   "grad_norm", "skipped"};

} // namespace

std::string progressLine(int64_t steps, const Signature &sig,
                         const IterationResult &r, const std::string &clock) {
  const std::vector<TypedTensor> &outs = r.outputs;
  std::map<std::string, const TypedTensor *> byName;
  for (const auto &[index, name] : sig.metrics)
    byName.emplace(name, &outs[index]);
  std::set<std::string> shown;
  std::string line = absl::StrCat("iter ", r.iteration + 1, "/", steps);
  auto mean = byName.find("reward_mean"), stdev = byName.find("reward_std");
  if (mean != byName.end()) {
    absl::StrAppend(&line, "  reward ", consoleValue(*mean->second));
    shown.insert("reward_mean");
    if (stdev != byName.end()) {
      absl::StrAppend(&line, " \u00b1 ", consoleValue(*stdev->second));
      shown.insert("reward_std");
    }
  }
  for (const char *name : kConsoleOrder)
    if (auto m = byName.find(name); m != byName.end()) {
      absl::StrAppend(&line, "  ", name, " ", consoleValue(*m->second));
      shown.insert(name);
    }
  for (const auto &[index, name] : sig.metrics)
    if (shown.insert(name).second)
      absl::StrAppend(&line, "  ", name, " ", consoleValue(outs[index]));
  if (r.badImages)
    absl::StrAppend(&line, "  nonfinite_images ", r.badImages, "/",
                    r.numImages);
  std::string phaseText;
  for (const auto &[name, secs] : r.phases)
    absl::StrAppend(&phaseText, phaseText.empty() ? "" : ", ",
                    name.empty() ? "other" : name, " ", format("%.3g", secs),
                    " s");
  absl::StrAppend(&line, "  time ", format("%.3g", r.totalSeconds), " s (",
                  phaseText, ")");
  if (r.transfers) {
    absl::StrAppend(&line, "  to device ", byteCount(r.transfers->hostToDevice),
                    ", from device ", byteCount(r.transfers->deviceToHost));
    if (r.peakDeviceBytes >= 0)
      absl::StrAppend(&line, ", device memory ", byteCount(r.peakDeviceBytes));
  }
  if (!clock.empty())
    absl::StrAppend(&line, "  ", clock);
  return line;
}

std::string metricsLine(const Signature &sig, const IterationResult &r) {
  std::string json = absl::StrCat("{\"iteration\": ", r.iteration);
  for (const auto &[index, name] : sig.metrics) {
    absl::StrAppend(&json, ", ");
    checkpoint::json::appendJsonString(json, name);
    absl::StrAppend(&json, ": ", jsonValue(r.outputs[index]));
  }
  if (sig.images)
    absl::StrAppend(&json, ", \"nonfinite_images\": ", r.badImages);
  // The --reward mix's components and sub-scores (always finite).
  for (const auto &[name, mean] : r.rewardMeans) {
    absl::StrAppend(&json, ", ");
    checkpoint::json::appendJsonString(json, name);
    absl::StrAppend(&json, ": ", format("%.9g", mean));
  }
  if (r.lr)
    absl::StrAppend(&json, ", \"lr\": ", formatExact(*r.lr));
  // The iteration's prompts by text, when the prompt set has texts
  // (docs/prompts.md).
  if (!r.promptTexts.empty()) {
    absl::StrAppend(&json, ", \"prompts\": [");
    for (size_t p = 0; p < r.promptTexts.size(); ++p) {
      absl::StrAppend(&json, p ? ", " : "");
      checkpoint::json::appendJsonString(json, r.promptTexts[p]);
    }
    absl::StrAppend(&json, "]");
  }
  absl::StrAppend(&json, ", \"time_s\": ", format("%.6g", r.totalSeconds),
                  ", \"reward_time_s\": ", format("%.6g", r.rewardSeconds),
                  ", \"compute_time_s\": ", format("%.6g", r.computeSeconds));
  if (r.namedPhases) {
    absl::StrAppend(&json, ", \"phase_time_s\": {");
    for (size_t p = 0; p < r.phases.size(); ++p) {
      absl::StrAppend(&json, p ? ", " : "");
      checkpoint::json::appendJsonString(
          json, r.phases[p].first.empty() ? "other" : r.phases[p].first);
      absl::StrAppend(&json, ": ", format("%.6g", r.phases[p].second));
    }
    absl::StrAppend(&json, "}");
  }
  if (r.transfers) {
    absl::StrAppend(&json,
                    ", \"host_to_device_bytes\": ", r.transfers->hostToDevice,
                    ", \"device_to_host_bytes\": ", r.transfers->deviceToHost);
    if (r.peakDeviceBytes >= 0)
      absl::StrAppend(&json, ", \"device_bytes\": ", r.peakDeviceBytes);
  }
  absl::StrAppend(&json, "}\n");
  return json;
}

image::Captions sampleCaptions(const IterationResult &r,
                               const std::vector<std::string> &promptTexts) {
  image::Captions captions(static_cast<size_t>(r.numImages));
  for (size_t n = 0; n < captions.size(); ++n) {
    if (n < r.samplePrompts.size()) {
      int64_t p = r.samplePrompts[n];
      captions[n].push_back(p >= 0 &&
                                    static_cast<size_t>(p) < promptTexts.size()
                                ? promptTexts[p]
                                : absl::StrCat("prompt ", p));
    } else {
      captions[n].push_back(absl::StrCat("sample ", n));
    }
    if (n < r.sampleRewards.size())
      captions[n].push_back("reward " + format("%.4g", r.sampleRewards[n]));
  }
  return captions;
}

absl::Status writeSampleGrid(const std::string &outDir,
                             const TypedTensor &images, int64_t iteration,
                             const image::Captions &captions) {
  std::string folder = outDir + "/samples";
  if (absl::Status s = checkpoint::makeDirectories(folder); !s.ok())
    return s;
  absl::StatusOr<image::RgbImage> grid =
      image::imageGrid(images.toHost(), 2, captions);
  if (!grid.ok())
    return grid.status();
  return image::writePng(absl::StrCat(folder, "/iter-", iteration, ".png"),
                         *grid);
}

//===----------------------------------------------------------------------===//
// The metrics file
//===----------------------------------------------------------------------===//

MetricsFile::~MetricsFile() {
  if (fd_ >= 0)
    ::close(fd_);
}

absl::Status MetricsFile::open(const std::string &path) {
  path_ = path;
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot open ", path, " for appending: ", std::strerror(errno)));
  return absl::OkStatus();
}

absl::Status MetricsFile::append(const std::string &line) {
  struct stat st;
  bool regular = ::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode);
  const char *p = line.data();
  size_t left = line.size();
  while (left > 0) {
    ssize_t n = ::write(fd_, p, left);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      int err = n < 0 ? errno : EIO;
      if (regular && left != line.size())
        (void)!::ftruncate(fd_, st.st_size);
      return absl::ResourceExhaustedError(
          absl::StrCat(path_, ": write failed: ", std::strerror(err)));
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

namespace {

/// The iteration of a metrics line `{"iteration": N, ...`, if it is one.
std::optional<int64_t> lineIteration(absl::string_view line) {
  constexpr absl::string_view kHead = "{\"iteration\": ";
  if (!absl::StartsWith(line, kHead))
    return std::nullopt;
  line.remove_prefix(kHead.size());
  size_t end = line.find_first_not_of("0123456789");
  int64_t it = 0;
  if (end == 0 || !absl::SimpleAtoi(line.substr(0, end), &it))
    return std::nullopt;
  return it;
}

} // namespace

absl::Status cutMetrics(const std::string &path, int64_t start,
                        std::ostream &log) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
    return absl::OkStatus();
  absl::StatusOr<std::string> text = checkpoint::readWholeFile(path);
  if (!text.ok())
    return text.status();
  std::string kept;
  int64_t dropped = 0;
  bool partial = false;
  size_t pos = 0;
  while (pos < text->size()) {
    size_t nl = text->find('\n', pos);
    if (nl == std::string::npos) {
      partial = true;
      break;
    }
    absl::string_view line(text->data() + pos, nl + 1 - pos);
    std::optional<int64_t> it = lineIteration(line);
    if (it && *it >= start)
      ++dropped;
    else
      kept.append(line.data(), line.size());
    pos = nl + 1;
  }
  if (dropped == 0 && !partial)
    return absl::OkStatus();
  if (absl::Status s = checkpoint::writeFileAtomically(path, kept); !s.ok())
    return s;
  log << "metrics: cut " << path << " back to iteration " << start << " (";
  if (dropped)
    log << dropped << " line" << (dropped == 1 ? "" : "s")
        << " of iterations the checkpoint does not have"
        << (partial ? " and " : "");
  if (partial)
    log << "a partial last line";
  log << ")\n";
  return absl::OkStatus();
}

} // namespace omni::train::detail
