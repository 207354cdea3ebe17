//===- Trainer.cpp - the training loop of omnirun --steps -----------------===//
//
// 1. Check the step function against the convention of Trainer.h: state,
//    seed, iteration, data inputs; state, metrics, images results.
// 2. Host functions: every registered reward, timed, and rebound to
//    --reward's when given.
// 3. Initial state: the latest checkpoint when resuming (matched by name,
//    dtype and shape, seed checked), otherwise the init function on the seed
//    followed by the --init files.
// 4. For each iteration: run the step function on (state, seed, iteration,
//    prompts), keep the updated state, print and log the metrics, save
//    samples and checkpoints when due.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/driver/Trainer.h"

#include "runtime/executor/Executor.h"
#include "runtime/hostfn/HostFunctions.h"
#include "runtime/train/checkpoint/AtomicFile.h"
#include "runtime/train/checkpoint/Checkpoint.h"
#include "runtime/train/checkpoint/Json.h"
#include "runtime/train/driver/Interrupt.h"
#include "runtime/train/image/Png.h"
#include "runtime/train/prompts/Prompts.h"
#include "runtime/train/rewards/RewardFunctions.h"
#include "runtime/train/rewards/Rewards.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <optional>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

namespace omni::train {
namespace {

constexpr const char *kEmbeds = "prompt_embeds";
constexpr const char *kPooled = "pooled_prompt_embeds";
constexpr const char *kImages = "images";

//===----------------------------------------------------------------------===//
// 1. The step function's signature
//===----------------------------------------------------------------------===//

struct Signature {
  uint32_t function = 0;
  std::vector<std::string> stateNames;
  std::vector<const loader::TensorInfo *> state;
  /// The data inputs in the function's order (kEmbeds / kPooled).
  std::vector<std::string> data;
  PromptRequest prompts;
  /// Scalar metrics: output index and name, in the function's order.
  std::vector<std::pair<size_t, std::string>> metrics;
  std::optional<size_t> images;
};

std::string describeInput(const loader::TensorInfo *t, uint32_t i) {
  return absl::StrCat("input #", i,
                      t->name.empty() ? "" : absl::StrCat(" '", t->name, "'"),
                      " (", t->typeString(), ")");
}

absl::StatusOr<Signature> checkStep(const loader::Program &program,
                                    const std::string &name) {
  std::optional<uint32_t> f = program.findFunction(name);
  if (!f)
    return absl::NotFoundError(absl::StrCat(
        program.name(), ": no function @", name,
        " (the training step; see omnirun --list)"));
  const step::Function *fn = program.step().functions()->Get(*f);
  uint32_t numIn = fn->inputs() ? fn->inputs()->size() : 0;
  uint32_t numOut = fn->outputs() ? fn->outputs()->size() : 0;
  auto in = [&](uint32_t i) { return &program.tensor(fn->inputs()->Get(i)); };
  auto out = [&](uint32_t i) {
    return &program.tensor(fn->outputs()->Get(i));
  };
  auto isI64Scalar = [](const loader::TensorInfo *t) {
    return t->dtype == DType::I64 && t->shape.empty();
  };
  auto isData = [](const std::string &n) { return n == kEmbeds || n == kPooled; };

  // Trailing data inputs, then seed and iteration.
  uint32_t numData = 0;
  while (numData < numIn && isData(in(numIn - 1 - numData)->name))
    ++numData;
  uint32_t k = numIn - numData; // seed and iteration are k-2, k-1
  if (k < 2 || !isI64Scalar(in(k - 2)) || !isI64Scalar(in(k - 1))) {
    for (int64_t s = static_cast<int64_t>(k) - 3; s >= 0; --s)
      if (isI64Scalar(in(s)) && isI64Scalar(in(s + 1)))
        return absl::InvalidArgumentError(absl::StrCat(
            "@", name, ": ", describeInput(in(s + 2), s + 2),
            " follows seed and iteration but is not a data input: expected "
            "omni.name \"",
            kEmbeds, "\" or \"", kPooled, "\""));
    return absl::InvalidArgumentError(absl::StrCat(
        "@", name, program.functionSignature(*f),
        ": expected the state, then seed and iteration as tensor<i64>, then "
        "the data inputs (",
        kEmbeds, ", ", kPooled, ")"));
  }
  k -= 2;
  if (numOut < k)
    return absl::InvalidArgumentError(absl::StrCat(
        "@", name, " returns ", numOut, " values but takes ", k,
        " state tensors; it must return the updated state first"));
  Signature sig;
  sig.function = *f;
  sig.prompts.function = name;
  for (uint32_t i = 0; i < k; ++i) {
    const loader::TensorInfo *a = in(i), *r = out(i);
    if (a->dtype != r->dtype || a->shape != r->shape)
      return absl::InvalidArgumentError(absl::StrCat(
          "@", name, ": state #", i, " is ", a->typeString(), " but result #",
          i, " is ", r->typeString()));
    sig.state.push_back(a);
    sig.stateNames.push_back(a->name.empty() ? absl::StrCat("state.", i)
                                             : a->name);
  }

  // Data inputs.
  std::optional<int64_t> prompts;
  for (uint32_t i = k + 2; i < numIn; ++i) {
    const loader::TensorInfo *t = in(i);
    if (std::find(sig.data.begin(), sig.data.end(), t->name) != sig.data.end())
      return absl::InvalidArgumentError(
          absl::StrCat("@", name, ": ", describeInput(t, i), ": data input '",
                       t->name, "' is taken twice, expected once"));
    bool embeds = t->name == kEmbeds;
    size_t rank = embeds ? 3 : 2;
    bool positive = std::all_of(t->shape.begin(), t->shape.end(),
                                [](int64_t d) { return d > 0; });
    if (t->dtype != DType::F32 || t->shape.size() != rank || !positive)
      return absl::InvalidArgumentError(absl::StrCat(
          "@", name, ": ", describeInput(t, i), ": expected f32 ",
          embeds ? "[P, L, D]" : "[P, Dp]", " with every dimension >= 1"));
    if (prompts && *prompts != t->shape[0])
      return absl::InvalidArgumentError(absl::StrCat(
          "@", name, ": ", describeInput(t, i), " takes ", t->shape[0],
          " prompts, expected ", *prompts, " as the other data input takes"));
    prompts = t->shape[0];
    sig.prompts.perIteration = t->shape[0];
    if (embeds) {
      sig.prompts.embeds = true;
      sig.prompts.tokens = t->shape[1];
      sig.prompts.dim = t->shape[2];
    } else {
      sig.prompts.pooled = true;
      sig.prompts.pooledDim = t->shape[1];
    }
    sig.data.push_back(t->name);
  }

  // Results after the state.
  for (uint32_t j = k; j < numOut; ++j) {
    const loader::TensorInfo *r = out(j);
    if (r->name == kImages) {
      const std::vector<int64_t> &s = r->shape;
      if (!isFloatDType(r->dtype) || s.size() != 4 || s[1] != 3 || s[0] < 1 ||
          s[2] < 1 || s[3] < 1)
        return absl::InvalidArgumentError(absl::StrCat(
            "@", name, ": result #", j, " 'images' is ", r->typeString(),
            ", expected a float tensor [B, 3, H, W]"));
      sig.images = j;
    } else if (r->numElements == 1) {
      sig.metrics.push_back(
          {j, r->name.empty() ? absl::StrCat("metric.", j - k) : r->name});
    }
  }
  return sig;
}

absl::Status checkState(const Signature &sig,
                        const std::vector<HostTensor> &state,
                        const std::string &from) {
  if (state.size() != sig.state.size())
    return absl::InvalidArgumentError(absl::StrCat(
        from, " gives ", state.size(), " state tensors but the step takes ",
        sig.state.size()));
  for (size_t i = 0; i < state.size(); ++i)
    if (state[i].dtype() != sig.state[i]->dtype ||
        state[i].shape() != sig.state[i]->shape)
      return absl::InvalidArgumentError(absl::StrCat(
          from, ": state '", sig.stateNames[i], "' is ",
          loader::tensorTypeString(state[i].dtype(), state[i].shape()),
          " but the step takes ", sig.state[i]->typeString()));
  return absl::OkStatus();
}

//===----------------------------------------------------------------------===//
// 2. Host functions: timed rewards, rebound by --reward
//===----------------------------------------------------------------------===//

/// The host functions `function` calls, directly or through Calls.
void collectHostCalls(const loader::Program &program, uint32_t function,
                      std::set<uint32_t> &visited,
                      std::set<std::string> &names) {
  if (!visited.insert(function).second)
    return;
  std::vector<const flatbuffers::Vector<flatbuffers::Offset<step::Command>> *>
      lists = {program.step().functions()->Get(function)->commands()};
  while (!lists.empty()) {
    auto *commands = lists.back();
    lists.pop_back();
    if (!commands)
      continue;
    for (const step::Command *c : *commands) {
      if (c->kind_type() == step::CommandKind::HostCall)
        names.insert(c->kind_as_HostCall()->name()->str());
      else if (c->kind_type() == step::CommandKind::Loop)
        lists.push_back(c->kind_as_Loop()->body());
      else if (c->kind_type() == step::CommandKind::Call)
        collectHostCalls(program, c->kind_as_Call()->function(), visited,
                         names);
    }
  }
}

/// The executor's host functions: every registered one, timed into
/// `nanos`; with `reward`, every reward runs `reward` (and the step must
/// call at least one).
absl::StatusOr<HostFunctionRegistry>
trainingHostFunctions(const loader::Program &program, uint32_t step,
                      const std::string &stepName, const std::string &reward,
                      std::shared_ptr<std::atomic<int64_t>> nanos,
                      std::ostream &log) {
  HostFunctionRegistry base = rewards::rewardHostFunctions();
  std::vector<std::string> known = rewards::registeredRewards();
  auto isReward = [&](const std::string &n) {
    return std::find(known.begin(), known.end(), n) != known.end();
  };
  if (!reward.empty()) {
    if (!isReward(reward) || !base.lookup(reward))
      return absl::InvalidArgumentError(
          absl::StrCat("--reward: unknown reward '", reward,
                       "' (known rewards: ", absl::StrJoin(known, ", "), ")"));
    std::set<std::string> callees;
    std::set<uint32_t> visited;
    collectHostCalls(program, step, visited, callees);
    std::vector<std::string> rebound;
    for (const std::string &c : callees)
      if (isReward(c))
        rebound.push_back(c);
    if (rebound.empty())
      return absl::InvalidArgumentError(absl::StrCat(
          "--reward ", reward, ": @", stepName,
          " calls no reward to rebind (its host calls: ",
          callees.empty() ? "none" : absl::StrJoin(callees, ", "),
          "; known rewards: ", absl::StrJoin(known, ", "), ")"));
    log << "reward: " << absl::StrJoin(rebound, ", ") << " -> " << reward
        << "\n";
  }
  HostFunctionRegistry registry;
  for (const std::string &name : base.names()) {
    const std::string &target =
        !reward.empty() && isReward(name) ? reward : name;
    HostFunction fn = *base.lookup(target);
    registry.add(name, [fn, nanos](absl::Span<const HostTensor> args) {
      auto start = std::chrono::steady_clock::now();
      absl::StatusOr<std::vector<HostTensor>> results = fn(args);
      *nanos += std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::steady_clock::now() - start)
                    .count();
      return results;
    });
  }
  return registry;
}

//===----------------------------------------------------------------------===//
// 3. Initial state
//===----------------------------------------------------------------------===//

bool isLoraName(const std::string &name) {
  return absl::StrContains(name, ".lora_A.") ||
         absl::StrContains(name, ".lora_B.");
}

/// Applies one --init file to `state`.
absl::Status applyInit(const InitFile &init, const Signature &sig,
                       const std::string &stepName,
                       const std::vector<std::string> &skip,
                       std::vector<HostTensor> &state, std::ostream &log) {
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < sig.stateNames.size(); ++i)
    index[sig.stateNames[i]] = i;
  const std::string prefix = init.prefix + ".";
  bool anyUnderPrefix = false;
  for (const std::string &n : sig.stateNames)
    anyUnderPrefix |= absl::StartsWith(n, prefix);
  if (!anyUnderPrefix)
    return absl::InvalidArgumentError(absl::StrCat(
        "--init ", init.prefix, "=", init.path, ": @", stepName,
        " has no state named '", prefix, "*' (state: ",
        absl::StrJoin(sig.stateNames.begin(),
                      sig.stateNames.begin() +
                          std::min<size_t>(sig.stateNames.size(), 6),
                      ", "),
        sig.stateNames.size() > 6 ? ", ..." : "", ")"));
  absl::StatusOr<std::vector<checkpoint::NamedTensor>> tensors =
      checkpoint::readSafetensors(init.path);
  if (!tensors.ok())
    return tensors.status();
  std::set<std::string> given;
  int64_t refs = 0, skipped = 0;
  for (checkpoint::NamedTensor &t : *tensors) {
    if (std::any_of(skip.begin(), skip.end(), [&](const std::string &p) {
          return p == t.name || (!p.empty() && p.back() == '*' &&
                                 absl::StartsWith(t.name, p.substr(
                                                              0, p.size() - 1)));
        })) {
      ++skipped;
      continue;
    }
    std::string target = prefix + t.name;
    auto it = index.find(target);
    if (it == index.end())
      return absl::InvalidArgumentError(absl::StrCat(
          init.path, ": tensor ", checkpoint::json::quoted(t.name),
          " would set state '", target, "', which @", stepName,
          " does not have (--init-skip=", t.name,
          " ignores a buffer the program computes)"));
    const loader::TensorInfo *want = sig.state[it->second];
    // Half-precision checkpoints (diffusers ships fp16/bf16) widen exactly.
    if ((t.tensor.dtype() == DType::F16 || t.tensor.dtype() == DType::BF16) &&
        want->dtype == DType::F32 && t.tensor.shape() == want->shape)
      t.tensor = HostTensor::fromDoubles(
          DType::F32, t.tensor.shape(),
          std::vector<double>(t.tensor.floats().begin(),
                              t.tensor.floats().end()));
    if (t.tensor.dtype() != want->dtype || t.tensor.shape() != want->shape)
      return absl::InvalidArgumentError(absl::StrCat(
          init.path, ": tensor '", t.name, "' is ", t.tensor.typeString(),
          ", expected ", want->typeString(), " as state '", target, "' is"));
    // Non-finite weights would make every update skip (or, in a decoder,
    // every reward meaningless) without a word.
    if (t.tensor.isFloat()) {
      absl::Span<const double> v = t.tensor.floats();
      auto bad = std::find_if(v.begin(), v.end(),
                              [](double x) { return !std::isfinite(x); });
      if (bad != v.end())
        return absl::InvalidArgumentError(absl::StrCat(
            init.path, ": tensor ", checkpoint::json::quoted(t.name), " has ",
            std::isnan(*bad) ? "NaN" : *bad > 0 ? "+inf" : "-inf",
            " at element ", bad - v.begin(), " of ", v.size(),
            ", expected finite initial weights"));
    }
    state[it->second] = t.tensor;
    given.insert(target);
    auto ref = index.find("ref." + target);
    if (ref != index.end()) {
      const loader::TensorInfo *r = sig.state[ref->second];
      if (r->dtype != want->dtype || r->shape != want->shape)
        return absl::InvalidArgumentError(absl::StrCat(
            init.path, ": tensor '", t.name, "' is ", t.tensor.typeString(),
            ", expected ", r->typeString(), " as state 'ref.", target, "' is"));
      state[ref->second] = t.tensor;
      ++refs;
    }
  }
  for (const std::string &n : sig.stateNames)
    if (absl::StartsWith(n, prefix) && !isLoraName(n) && !given.count(n))
      return absl::InvalidArgumentError(absl::StrCat(
          init.path, ": no tensor '", n.substr(prefix.size()),
          "' for state '", n, "', expected every parameter under '", prefix,
          "' except LoRA adapters"));
  log << "init: " << tensors->size() - skipped << " tensors of " << init.path
      << " into " << prefix << "*";
  if (refs)
    log << " (and " << refs << " into ref." << prefix << "*)";
  if (skipped)
    log << ", " << skipped << " skipped";
  log << "\n";
  return absl::OkStatus();
}

//===----------------------------------------------------------------------===//
// 4. Progress, metrics and samples
//===----------------------------------------------------------------------===//

double scalarValue(const HostTensor &t) {
  if (t.isFloat())
    return t.floats().empty() ? 0.0 : t.floats()[0];
  return t.ints().empty() ? 0.0 : static_cast<double>(t.ints()[0]);
}

std::string format(const char *spec, double v) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), spec, v);
  return buf;
}

/// A metric for the console: integers exactly, floats with 6 digits.
std::string consoleValue(const HostTensor &t) {
  if (!t.isFloat())
    return absl::StrCat(t.ints().empty() ? 0 : t.ints()[0]);
  return format("%.6g", scalarValue(t));
}

/// A metric for JSON: integers exactly, floats round-trip (float32 needs 9
/// digits); non-finite values as Python's json module writes them.
std::string jsonValue(const HostTensor &t) {
  if (!t.isFloat())
    return absl::StrCat(t.ints().empty() ? 0 : t.ints()[0]);
  double v = scalarValue(t);
  if (std::isnan(v))
    return "NaN";
  if (std::isinf(v))
    return v > 0 ? "Infinity" : "-Infinity";
  return format(t.dtype() == DType::F64 ? "%.17g" : "%.9g", v);
}

/// The console order: these first (reward_mean/reward_std as "reward m ±
/// s"), then every other metric in the program's order.
constexpr const char *kConsoleOrder[] = {"loss",      "approx_kl", "clipfrac",
                                         "kl",        "grad_norm", "skipped"};

std::string progressLine(int64_t it, int64_t steps, const Signature &sig,
                         const std::vector<HostTensor> &outs) {
  std::map<std::string, const HostTensor *> byName;
  for (const auto &[index, name] : sig.metrics)
    byName.emplace(name, &outs[index]);
  std::set<std::string> shown;
  std::string line = absl::StrCat("iter ", it + 1, "/", steps);
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
  return line;
}


double seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

/// The images of `images` ([B, ...]) with a non-finite element.
int64_t nonFiniteImages(const HostTensor &images) {
  int64_t batch = images.shape().empty() ? 1 : images.shape()[0];
  if (batch <= 0)
    return 0;
  int64_t per = images.numElements() / batch, bad = 0;
  absl::Span<const double> v = images.floats();
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t k = 0; k < per; ++k)
      if (!std::isfinite(v[static_cast<size_t>(n * per + k)])) {
        ++bad;
        break;
      }
  return bad;
}

//===----------------------------------------------------------------------===//
// 5. The metrics file
//===----------------------------------------------------------------------===//

/// metrics.jsonl, appended one whole line per write: a failed write is cut
/// off again, so the file never ends in half a JSON line (where the file
/// can be truncated at all).
class MetricsFile {
public:
  MetricsFile() = default;
  MetricsFile(const MetricsFile &) = delete;
  MetricsFile &operator=(const MetricsFile &) = delete;
  ~MetricsFile() {
    if (fd_ >= 0)
      ::close(fd_);
  }

  bool isOpen() const { return fd_ >= 0; }

  absl::Status open(const std::string &path) {
    path_ = path;
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
                 0644);
    if (fd_ < 0)
      return absl::InvalidArgumentError(
          absl::StrCat("cannot open ", path, " for appending: ",
                       std::strerror(errno)));
    return absl::OkStatus();
  }

  absl::Status append(const std::string &line) {
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
        return absl::ResourceExhaustedError(absl::StrCat(
            path_, ": write failed: ", std::strerror(err)));
      }
      p += n;
      left -= static_cast<size_t>(n);
    }
    return absl::OkStatus();
  }

private:
  std::string path_;
  int fd_ = -1;
};

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

/// A resumed run repeats the iterations after its checkpoint: drop their
/// lines (written by the run that was interrupted) and a partial last line,
/// so every iteration appears once. Only regular files are cut.
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

} // namespace

absl::Status train(std::shared_ptr<const loader::Program> program,
                   hal::Device &device, const TrainOptions &options,
                   std::ostream &log) {
  absl::StatusOr<Signature> sig = checkStep(*program, options.stepFunction);
  if (!sig.ok())
    return sig.status();
  const std::string &stepName = options.stepFunction;
  if (options.steps < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("--steps must be >= 0, found ", options.steps));
  if (options.saveEvery < 0 || options.sampleEvery < 0)
    return absl::InvalidArgumentError(absl::StrCat(
        "--save-every and --sample-every must be >= 0, found ",
        options.saveEvery, " and ", options.sampleEvery));
  if (options.keepLast < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("--keep-last must be >= 0, found ", options.keepLast));
  const bool resume = options.resume || options.resumeIfPresent;
  const std::string out =
      options.outDir.empty() ? options.resumeDir : options.outDir;
  const std::string resumeFrom =
      options.resumeDir.empty() ? out : options.resumeDir;
  if (resume && resumeFrom.empty())
    return absl::InvalidArgumentError(
        "--resume needs a folder: --resume DIR, --out DIR or "
        "--checkpoint-dir DIR");
  const std::string metricsPath =
      !options.metricsPath.empty() ? options.metricsPath
      : out.empty()                ? std::string()
                                   : out + "/metrics.jsonl";
  const int64_t sampleEvery = options.sampleEvery > 0 ? options.sampleEvery
                              : options.saveEvery > 0 ? options.saveEvery
                                                      : 10;
  // A run that keeps nothing says so before it spends the time.
  if (out.empty()) {
    if (metricsPath.empty())
      log << "no --out: this run saves nothing (no checkpoints, metrics or "
             "samples)\n";
    else
      log << "no --out: this run saves no checkpoints or samples (metrics go "
             "to "
          << metricsPath << ")\n";
  }

  // 2. Host functions and the executor.
  auto rewardNanos = std::make_shared<std::atomic<int64_t>>(0);
  absl::StatusOr<HostFunctionRegistry> hostFunctions =
      trainingHostFunctions(*program, sig->function, stepName, options.reward,
                            rewardNanos, log);
  if (!hostFunctions.ok())
    return hostFunctions.status();
  executor::ExecutorOptions executorOptions;
  executorOptions.hostFunctions = std::move(*hostFunctions);
  absl::StatusOr<std::unique_ptr<executor::Executor>> created =
      executor::Executor::create(program, device, std::move(executorOptions));
  if (!created.ok())
    return created.status();
  executor::Executor &executor = **created;
  executor.setPhaseTiming(true);

  // The prompt set.
  std::optional<PromptSet> prompts;
  if (!options.promptsPath.empty()) {
    absl::StatusOr<PromptSet> loaded =
        PromptSet::load(options.promptsPath, sig->prompts);
    if (!loaded.ok())
      return loaded.status();
    prompts = std::move(*loaded);
  } else if (sig->prompts.embeds || sig->prompts.pooled) {
    prompts = PromptSet::synthetic(sig->prompts);
  }
  if (prompts)
    log << "prompts: " << prompts->size() << " from " << prompts->source()
        << ", " << sig->prompts.perIteration << " per iteration\n";

  // 3. Initial state.
  std::vector<HostTensor> state;
  int64_t start = 0;
  int64_t seed = options.seed.value_or(0);
  bool resumed = false;
  if (resume) {
    absl::StatusOr<checkpoint::Checkpoint> ckpt =
        checkpoint::loadLatestCheckpoint(resumeFrom);
    if (ckpt.ok()) {
      std::string where = checkpoint::checkpointPath(resumeFrom, ckpt->step);
      auto recordedSeed = ckpt->metadata.find("seed");
      if (recordedSeed == ckpt->metadata.end())
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": the checkpoint records no seed (metadata 'seed'), "
                   "expected the seed it was trained with"));
      int64_t trainedSeed = 0;
      if (!absl::SimpleAtoi(recordedSeed->second, &trainedSeed))
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": metadata 'seed' is '", recordedSeed->second,
                         "', expected an integer"));
      if (options.seed && *options.seed != trainedSeed)
        return absl::InvalidArgumentError(absl::StrCat(
            resumeFrom, ": the checkpoint was trained with seed ",
            recordedSeed->second, " but --seed is ", *options.seed));
      seed = trainedSeed;
      auto iteration = ckpt->metadata.find("iteration");
      if (iteration != ckpt->metadata.end() &&
          iteration->second != std::to_string(ckpt->step))
        return absl::InvalidArgumentError(
            absl::StrCat(where, ": metadata 'iteration' is '",
                         iteration->second, "', expected ", ckpt->step,
                         " as the file's step"));
      auto hash = ckpt->metadata.find("program_hash");
      bool otherProgram = hash != ckpt->metadata.end() &&
                          !options.programHash.empty() &&
                          hash->second != options.programHash;
      if (otherProgram && !options.allowProgramChange)
        return absl::FailedPreconditionError(absl::StrCat(
            where, ": written by another step.bin (program_hash ",
            hash->second, ", this one is ", options.programHash,
            "); resume with the step.bin that wrote it, or pass "
            "--allow-program-change"));
      std::map<std::string, const HostTensor *> byName;
      for (const checkpoint::NamedTensor &t : ckpt->tensors)
        byName[t.name] = &t.tensor;
      for (const std::string &name : sig->stateNames) {
        auto it = byName.find(name);
        if (it == byName.end())
          return absl::InvalidArgumentError(absl::StrCat(
              resumeFrom, ": the checkpoint of step ", ckpt->step,
              " has no tensor '", name, "'"));
        state.push_back(*it->second);
      }
      if (absl::Status s = checkState(*sig, state, resumeFrom); !s.ok())
        return s;
      start = ckpt->step;
      resumed = true;
      log << "resumed from " << resumeFrom << " at iteration " << start;
      if (!options.seed)
        log << ", seed " << seed << " from the checkpoint";
      if (!options.inits.empty())
        log << " (--init not applied: the checkpoint has the weights)";
      log << "\n";
      if (otherProgram)
        log << "note: " << where << " was written by another step.bin ("
            << hash->second << "); continuing with this one ("
            << options.programHash << ", --allow-program-change)\n";
    } else if (!absl::IsNotFound(ckpt.status())) {
      return ckpt.status();
    } else if (!options.resumeIfPresent) {
      struct stat st;
      bool folder =
          ::stat(resumeFrom.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
      return absl::NotFoundError(absl::StrCat(
          "--resume ", resumeFrom, ": ",
          folder ? "no checkpoint there (no 'latest' file)"
                 : "no such folder",
          ", expected a run folder with a checkpoint (--resume-if-present "
          "starts from @",
          options.initFunction, " when there is none)"));
    } else {
      log << "no checkpoint in " << resumeFrom << "; starting from @"
          << options.initFunction << "\n";
    }
  }
  if (!resumed) {
    absl::StatusOr<std::vector<HostTensor>> init = executor.run(
        options.initFunction, {HostTensor::scalarInt(DType::I64, seed)});
    if (!init.ok())
      return init.status();
    state = std::move(*init);
    if (absl::Status s =
            checkState(*sig, state, absl::StrCat("@", options.initFunction));
        !s.ok())
      return s;
    for (const InitFile &init : options.inits)
      if (absl::Status s =
              applyInit(init, *sig, stepName, options.initSkip, state, log);
          !s.ok())
        return s;
  }

  if (!out.empty()) {
    if (absl::Status s = checkpoint::makeDirectories(out); !s.ok())
      return s;
    // What a run killed while writing left behind.
    int stale = 0;
    for (const std::string &folder : {out, out + "/samples"}) {
      absl::StatusOr<int> removed = checkpoint::removeStaleTemporaries(folder);
      if (!removed.ok())
        return removed.status();
      stale += *removed;
    }
    if (stale)
      log << "removed " << stale << " temporary file" << (stale == 1 ? "" : "s")
          << " of writes an earlier run did not finish in " << out << "\n";
  }
  // A resumed run redoes the iterations after its checkpoint (all of them
  // when there was none).
  if (resume && !metricsPath.empty())
    if (absl::Status s = cutMetrics(metricsPath, start, log); !s.ok())
      return s;
  MetricsFile metrics;
  if (!metricsPath.empty())
    if (absl::Status s = metrics.open(metricsPath); !s.ok())
      return s;

  // Checkpoints. `saved` is the step whose state is on disk in `out`.
  int64_t saved = resumed && resumeFrom == out ? start : -1;
  auto save = [&](int64_t step) -> absl::Status {
    std::vector<checkpoint::NamedTensor> named;
    for (size_t i = 0; i < state.size(); ++i)
      named.push_back({sig->stateNames[i], state[i]});
    // The RNG is keyed on (seed, iteration): the next iteration is `step`.
    std::map<std::string, std::string> metadata = {
        {"seed", std::to_string(seed)},
        {"iteration", std::to_string(step)},
        {"step_function", stepName}};
    if (!options.programHash.empty())
      metadata["program_hash"] = options.programHash;
    if (absl::Status s = checkpoint::saveCheckpoint(out, step, named, metadata);
        !s.ok())
      return s;
    saved = step;
    absl::StatusOr<int> pruned =
        checkpoint::pruneCheckpoints(out, options.keepLast);
    return pruned.status();
  };
  // After a failure: the state of `step` onto disk, and where it went.
  auto keepState = [&](int64_t step) -> std::string {
    if (out.empty())
      return " (no --out: the training state is not saved)";
    if (saved != step)
      if (absl::Status s = save(step); !s.ok())
        return absl::StrCat(" (saving the training state failed too: ",
                            s.message(), ")");
    return absl::StrCat(" (training state of iteration ", step, " saved in ",
                        checkpoint::checkpointPath(out, step), ")");
  };

  executor.takePhaseTimes(); // not @init_state's
  // --steps 0: the initial state (after --init) as a checkpoint, for other
  // implementations to start from (bench/torch/parity_iteration.py).
  if (options.steps == 0 && start == 0 && !out.empty())
    if (absl::Status s = save(0); !s.ok())
      return s;
  // 4. Iterations.
  bool warnedImages = false;
  for (int64_t it = start; it < options.steps; ++it) {
    if (int signal = options.stopRequested ? options.stopRequested() : 0) {
      std::string what = absl::StrCat("interrupted by ", signalName(signal),
                                      " after iteration ", it, " of ",
                                      options.steps);
      if (out.empty())
        return absl::CancelledError(
            absl::StrCat(what, "; nothing saved (no --out)"));
      if (saved != it)
        if (absl::Status s = save(it); !s.ok())
          return absl::Status(s.code(), absl::StrCat(what, "; saving failed: ",
                                                     s.message()));
      return absl::CancelledError(absl::StrCat(
          what, ": saved ", checkpoint::checkpointPath(out, it),
          "; continue with --resume ", out));
    }
    auto begin = std::chrono::steady_clock::now();
    std::vector<HostTensor> inputs = state;
    inputs.push_back(HostTensor::scalarInt(DType::I64, seed));
    inputs.push_back(HostTensor::scalarInt(DType::I64, it));
    for (const std::string &d : sig->data)
      inputs.push_back(d == kEmbeds ? prompts->embeds(it)
                                    : prompts->pooled(it));
    *rewardNanos = 0;
    absl::StatusOr<std::vector<HostTensor>> outs =
        executor.run(sig->function, inputs);
    if (!outs.ok())
      return absl::Status(outs.status().code(),
                          absl::StrCat("iteration ", it, ": ",
                                       outs.status().message(),
                                       keepState(it)));
    double total = seconds(std::chrono::steady_clock::now() - begin);
    double reward = static_cast<double>(rewardNanos->load()) * 1e-9;
    double compute = std::max(0.0, total - reward);
    state.assign(outs->begin(), outs->begin() + sig->state.size());
    // Phases of the program (omnigen's recipe names rollout, reward, loss,
    // update, metrics); a program without names reports reward host calls
    // and the rest.
    std::vector<std::pair<std::string, double>> phases =
        executor.takePhaseTimes();
    bool named = std::any_of(phases.begin(), phases.end(),
                             [](const auto &p) { return !p.first.empty(); });
    if (!named)
      phases = {{"reward", reward}, {"compute", compute}};
    std::string phaseText;
    for (const auto &[name, secs] : phases)
      absl::StrAppend(&phaseText, phaseText.empty() ? "" : ", ",
                      name.empty() ? "other" : name, " ", format("%.3g", secs),
                      " s");
    // Decoded images that are not finite get meaningless rewards: counted
    // like the skipped updates of non-finite gradients.
    int64_t badImages = 0, numImages = 0;
    if (sig->images) {
      const HostTensor &images = (*outs)[*sig->images];
      numImages = images.shape()[0];
      badImages = nonFiniteImages(images);
    }
    if (badImages && !warnedImages) {
      log << "warning: iteration " << it << ": " << badImages << " of "
          << numImages
          << " images are not finite, so their rewards mean nothing "
             "(nonfinite_images counts them)\n";
      warnedImages = true;
    }

    log << progressLine(it, options.steps, *sig, *outs)
        << (badImages ? absl::StrCat("  nonfinite_images ", badImages, "/",
                                     numImages)
                      : std::string())
        << "  time " << format("%.3g", total) << " s (" << phaseText << ")"
        << std::endl;
    // Side outputs: a failure stops the run, but only after the state is
    // saved.
    absl::Status side;
    if (metrics.isOpen()) {
      std::string json = absl::StrCat("{\"iteration\": ", it);
      for (const auto &[index, name] : sig->metrics) {
        absl::StrAppend(&json, ", ");
        checkpoint::json::appendJsonString(json, name);
        absl::StrAppend(&json, ": ", jsonValue((*outs)[index]));
      }
      if (sig->images)
        absl::StrAppend(&json, ", \"nonfinite_images\": ", badImages);
      absl::StrAppend(&json, ", \"time_s\": ", format("%.6g", total),
                      ", \"reward_time_s\": ", format("%.6g", reward),
                      ", \"compute_time_s\": ", format("%.6g", compute));
      if (named) {
        absl::StrAppend(&json, ", \"phase_time_s\": {");
        for (size_t p = 0; p < phases.size(); ++p) {
          absl::StrAppend(&json, p ? ", " : "");
          checkpoint::json::appendJsonString(
              json, phases[p].first.empty() ? "other" : phases[p].first);
          absl::StrAppend(&json, ": ", format("%.6g", phases[p].second));
        }
        absl::StrAppend(&json, "}");
      }
      absl::StrAppend(&json, "}\n");
      side = metrics.append(json);
    }

    bool last = it + 1 == options.steps;
    if (side.ok() && !out.empty() && sig->images &&
        (last || (it + 1) % sampleEvery == 0)) {
      std::string folder = out + "/samples";
      side = checkpoint::makeDirectories(folder);
      if (side.ok()) {
        absl::StatusOr<image::RgbImage> grid =
            image::imageGrid((*outs)[*sig->images]);
        side = grid.ok() ? image::writePng(
                               absl::StrCat(folder, "/iter-", it + 1, ".png"),
                               *grid)
                         : grid.status();
      }
    }
    if (!side.ok())
      return absl::Status(side.code(),
                          absl::StrCat(side.message(), keepState(it + 1)));
    bool due = options.saveEvery > 0 && (it + 1) % options.saveEvery == 0;
    if (!out.empty() && (last || due))
      if (absl::Status s = save(it + 1); !s.ok())
        return s;
  }
  return absl::OkStatus();
}

} // namespace omni::train
