//===- Signature.cpp - the step function against the convention ----------===//
//
// Step 1 of train(): the step function's inputs are seed, iteration and the
// data inputs; its results are metrics, images and anything else; the
// training state is the program's state slots (omnic's omni-resident-state
// pass makes them of the convention's leading state arguments and
// results). Also the host functions the executor gets: every registered
// reward, timed, and rebound by --reward (to a mix, RewardMix.h).
//
//===----------------------------------------------------------------------===//

#include "runtime/train/driver/TrainerSteps.h"

#include "runtime/train/rewards/RewardFunctions.h"
#include "runtime/train/rewards/Rewards.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include <algorithm>
#include <mutex>
#include <set>

namespace omni::train::detail {

void CapturedRewards::record(const HostTensor &values) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!values.isFloat() || values.shape().size() != 1) {
    unusable_ = true;
    return;
  }
  values_.insert(values_.end(), values.floats().begin(), values.floats().end());
}

std::vector<double> CapturedRewards::take() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<double> v =
      unusable_ ? std::vector<double>() : std::move(values_);
  unusable_ = false;
  values_.clear();
  return v;
}

const loader::StateInfo *Signature::findState(const std::string &name) const {
  for (const loader::StateInfo *s : state)
    if (s->name == name)
      return s;
  return nullptr;
}

namespace {

std::string describeInput(const loader::TensorInfo *t, uint32_t i) {
  return absl::StrCat("input #", i,
                      t->name.empty() ? "" : absl::StrCat(" '", t->name, "'"),
                      " (", t->typeString(), ")");
}

} // namespace

absl::StatusOr<Signature> checkStep(const loader::Program &program,
                                    const std::string &name) {
  std::optional<uint32_t> f = program.findFunction(name);
  if (!f)
    return absl::NotFoundError(
        absl::StrCat(program.name(), ": no function @", name,
                     " (the training step; see omnirun --list)"));
  const step::Function *fn = program.step().functions()->Get(*f);
  uint32_t numIn = fn->inputs() ? fn->inputs()->size() : 0;
  uint32_t numOut = fn->outputs() ? fn->outputs()->size() : 0;
  auto in = [&](uint32_t i) { return &program.tensor(fn->inputs()->Get(i)); };
  auto out = [&](uint32_t i) { return &program.tensor(fn->outputs()->Get(i)); };
  auto isI64Scalar = [](const loader::TensorInfo *t) {
    return t->dtype == DType::I64 && t->shape.empty();
  };
  auto isData = [](const std::string &n) {
    return n == kEmbeds || n == kPooled || n == kNegativeEmbeds ||
           n == kNegativePooled || n == kEmbedsMask || n == kNegativeEmbedsMask;
  };
  // A runtime hyper-parameter (the loader checked it is a 0-D f64).
  auto isHyperParam = [&](const loader::TensorInfo *t) {
    return program.findHyperParam(t->name) != nullptr;
  };

  // Seed and iteration first, then only data inputs. A function that
  // still takes its state as arguments is outside the convention omnic
  // turns into state slots; when that is because of an input after seed
  // and iteration, that input is the error.
  if (numIn < 2 || !isI64Scalar(in(0)) || !isI64Scalar(in(1))) {
    // The last pair of i64 scalars before the trailing data inputs.
    uint32_t numData = 0;
    while (numData < numIn && (isData(in(numIn - 1 - numData)->name) ||
                               isHyperParam(in(numIn - 1 - numData))))
      ++numData;
    for (uint32_t k = numIn - numData; k-- > 2;)
      if (isI64Scalar(in(k - 2)) && isI64Scalar(in(k - 1)))
        return absl::InvalidArgumentError(absl::StrCat(
            "@", name, ": ", describeInput(in(k), k),
            " follows seed and iteration but is not a data input: expected "
            "omni.name \"",
            kEmbeds, "\" or \"", kPooled, "\""));
    return absl::InvalidArgumentError(absl::StrCat(
        "@", name, program.functionSignature(*f),
        ": expected seed and iteration as tensor<i64>, then the data inputs (",
        kEmbeds, ", ", kPooled,
        "), with the training state in state slots (omni.state)"));
  }
  for (uint32_t i = 2; i < numIn; ++i)
    if (!isData(in(i)->name) && !isHyperParam(in(i)))
      return absl::InvalidArgumentError(absl::StrCat(
          "@", name, ": ", describeInput(in(i), i),
          " follows seed and iteration but is not a data input: expected "
          "omni.name \"",
          kEmbeds, "\" or \"", kPooled,
          "\", or a runtime hyper-parameter of the step.bin table"));
  if (program.state().empty())
    return absl::InvalidArgumentError(absl::StrCat(
        "@", name, program.functionSignature(*f), ": ", program.name(),
        " has no state slots, expected the training state (parameters, "
        "optimizer state) as omni.state slots"));
  Signature sig;
  sig.function = *f;
  sig.prompts.function = name;
  for (const loader::StateInfo &slot : program.state())
    sig.state.push_back(&slot);

  // Data inputs and hyper-parameters.
  std::optional<int64_t> prompts;
  std::vector<std::pair<const loader::TensorInfo *, uint32_t>> negatives, masks;
  for (uint32_t i = 2; i < numIn; ++i) {
    const loader::TensorInfo *t = in(i);
    sig.inputs.push_back(t->name);
    if (isHyperParam(t))
      continue;
    if (std::find(sig.data.begin(), sig.data.end(), t->name) != sig.data.end())
      return absl::InvalidArgumentError(
          absl::StrCat("@", name, ": ", describeInput(t, i), ": data input '",
                       t->name, "' is taken twice, expected once"));
    if (t->name == kEmbedsMask || t->name == kNegativeEmbedsMask) {
      // A text mask [P, L] / [1, L]; checked against prompt_embeds below.
      masks.push_back({t, i});
      sig.data.push_back(t->name);
      if (t->name == kEmbedsMask)
        sig.prompts.mask = true;
      else
        sig.prompts.negativeMask = true;
      continue;
    }
    bool negative = t->name == kNegativeEmbeds || t->name == kNegativePooled;
    bool embeds = t->name == kEmbeds || t->name == kNegativeEmbeds;
    size_t rank = embeds ? 3 : 2;
    bool positive = std::all_of(t->shape.begin(), t->shape.end(),
                                [](int64_t d) { return d > 0; });
    if (t->dtype != DType::F32 || t->shape.size() != rank || !positive)
      return absl::InvalidArgumentError(absl::StrCat(
          "@", name, ": ", describeInput(t, i), ": expected f32 ",
          embeds ? "[P, L, D]" : "[P, Dp]", " with every dimension >= 1"));
    if (negative) {
      // One negative prompt for the whole batch; its L, D (Dp) are checked
      // against the prompts' below.
      if (t->shape[0] != 1)
        return absl::InvalidArgumentError(
            absl::StrCat("@", name, ": ", describeInput(t, i),
                         ": expected f32 ", embeds ? "[1, L, D]" : "[1, Dp]",
                         " (one negative prompt for the batch)"));
      (embeds ? sig.prompts.negativeEmbeds : sig.prompts.negativePooled) = true;
      negatives.push_back({t, i});
      sig.data.push_back(t->name);
      continue;
    }
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
  // The negatives have the prompts' L, D and Dp.
  for (auto [t, i] : negatives) {
    bool embeds = t->name == kNegativeEmbeds;
    bool taken = embeds ? sig.prompts.embeds : sig.prompts.pooled;
    std::vector<int64_t> want =
        embeds ? std::vector<int64_t>{1, sig.prompts.tokens, sig.prompts.dim}
               : std::vector<int64_t>{1, sig.prompts.pooledDim};
    if (!taken || t->shape != want)
      return absl::InvalidArgumentError(absl::StrCat(
          "@", name, ": ", describeInput(t, i), ": expected ",
          taken ? absl::StrCat("f32 [", absl::StrJoin(want, ", "), "] as ",
                               embeds ? kEmbeds : kPooled, " takes")
                : absl::StrCat("it only with ", embeds ? kEmbeds : kPooled)));
  }

  // The text masks have prompt_embeds' P (or 1) and L.
  for (auto [t, i] : masks) {
    bool negative = t->name == kNegativeEmbedsMask;
    const char *needs = negative ? kNegativeEmbeds : kEmbeds;
    bool taken = negative ? sig.prompts.negativeEmbeds : sig.prompts.embeds;
    std::vector<int64_t> want{negative ? 1 : sig.prompts.perIteration,
                              sig.prompts.tokens};
    if (!taken || t->dtype != DType::F32 || t->shape != want)
      return absl::InvalidArgumentError(
          absl::StrCat("@", name, ": ", describeInput(t, i), ": expected ",
                       taken ? absl::StrCat("f32 [", absl::StrJoin(want, ", "),
                                            "] as ", needs, " takes")
                             : absl::StrCat("it only with ", needs)));
  }

  // Results: metrics and images.
  for (uint32_t j = 0; j < numOut; ++j) {
    const loader::TensorInfo *r = out(j);
    if (r->name == kImages) {
      const std::vector<int64_t> &s = r->shape;
      if (!isFloatDType(r->dtype) || s.size() != 4 || s[1] != 3 || s[0] < 1 ||
          s[2] < 1 || s[3] < 1)
        return absl::InvalidArgumentError(absl::StrCat(
            "@", name, ": result #", j, " 'images' is ", r->typeString(),
            ", expected a float tensor [B, 3, H, W]"));
      sig.images = j;
    } else if (r->name == kRewards && isFloatDType(r->dtype) &&
               r->shape.size() == 1) {
      sig.rewards = j;
    } else if (r->numElements == 1) {
      sig.metrics.push_back(
          {j, r->name.empty() ? absl::StrCat("metric.", j) : r->name});
    }
  }
  // Per-image rewards caption the sample grid: one per image.
  if (sig.rewards && sig.images &&
      out(*sig.rewards)->shape[0] != out(*sig.images)->shape[0])
    return absl::InvalidArgumentError(absl::StrCat(
        "@", name, ": result #", *sig.rewards, " 'rewards' is ",
        out(*sig.rewards)->typeString(), ", expected one reward per image (",
        out(*sig.images)->shape[0], ", as 'images' has)"));
  return sig;
}

//===----------------------------------------------------------------------===//
// Host functions: timed rewards, rebound by --reward
//===----------------------------------------------------------------------===//

namespace {

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

/// The mix as a host function (one NCHW float operand, one [N] f32 result,
/// like rewards::registerRewards' functions).
HostFunction mixFunction(std::shared_ptr<rewards::RewardMix> mix) {
  return [mix](absl::Span<const HostTensor> args)
             -> absl::StatusOr<std::vector<HostTensor>> {
    if (args.size() != 1)
      return absl::InvalidArgumentError(absl::StrCat(
          "reward ", mix->describe(), " takes 1 image batch, found ",
          args.size(), " operands"));
    const HostTensor &images = args[0];
    if (!images.isFloat())
      return absl::InvalidArgumentError(
          absl::StrCat("reward ", mix->describe(),
                       " takes float images, found ", images.typeString()));
    std::vector<float> pixels(images.floats().begin(), images.floats().end());
    rewards::ImageBatch batch;
    batch.data = pixels.data();
    batch.shape = images.shape();
    absl::StatusOr<std::vector<float>> values = mix->score(batch);
    if (!values.ok())
      return values.status();
    HostTensor result(DType::F32, {static_cast<int64_t>(values->size())});
    for (size_t i = 0; i < values->size(); ++i)
      result.floats()[i] = (*values)[i];
    return std::vector<HostTensor>{std::move(result)};
  };
}

} // namespace

absl::StatusOr<HostFunctionRegistry> trainingHostFunctions(
    const loader::Program &program, uint32_t step, const std::string &stepName,
    std::shared_ptr<rewards::RewardMix> mix,
    std::shared_ptr<std::atomic<int64_t>> nanos,
    std::shared_ptr<CapturedRewards> captured, std::ostream &log) {
  HostFunctionRegistry base = rewards::rewardHostFunctions();
  std::vector<std::string> known = rewards::registeredRewards();
  auto isReward = [&](const std::string &n) {
    return std::find(known.begin(), known.end(), n) != known.end();
  };
  const std::string reward = mix ? mix->describe() : std::string();
  if (mix) {
    std::set<std::string> callees;
    std::set<uint32_t> visited;
    collectHostCalls(program, step, visited, callees);
    std::vector<std::string> rebound;
    for (const std::string &c : callees)
      if (isReward(c))
        rebound.push_back(c);
    if (rebound.empty())
      return absl::InvalidArgumentError(
          absl::StrCat("--reward ", reward, ": @", stepName,
                       " calls no reward to rebind (its host calls: ",
                       callees.empty() ? "none" : absl::StrJoin(callees, ", "),
                       "; known rewards: ", absl::StrJoin(known, ", "), ")"));
    log << "reward: " << absl::StrJoin(rebound, ", ") << " -> " << reward
        << "\n";
  }
  HostFunctionRegistry registry;
  HostFunction mixed = mix ? mixFunction(mix) : HostFunction();
  for (const std::string &name : base.names()) {
    HostFunction fn = mix && isReward(name) ? mixed : *base.lookup(name);
    bool reward = isReward(name);
    registry.add(
        name,
        [fn, nanos, reward, captured](absl::Span<const HostTensor> args) {
          auto start = std::chrono::steady_clock::now();
          absl::StatusOr<std::vector<HostTensor>> results = fn(args);
          *nanos += std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::steady_clock::now() - start)
                        .count();
          if (reward && captured && results.ok() && !results->empty())
            captured->record((*results)[0]);
          return results;
        },
        base.isConcurrent(name));
  }
  return registry;
}

} // namespace omni::train::detail
