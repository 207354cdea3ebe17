//===- FlowGrpoTest.cpp - the FlowGRPO recipe's program, end to end -------===//
//
// Checks the training program buildProgram emits (docs/recipes.md,
// docs/flowgrpo-math.md) on a small `dit` without a decoder:
//
// - Layout: @init_state, @train_step's state arguments and results, the
//   metrics, @velocity's and @loss's parameters agree by name and order.
// - Compiled: one @train_step through omnic's pipeline and the CPU executor
//   equals the float32 reference evaluator.
// - Math: against a rollout rebuilt in this file from @velocity and
//   runtime/flowgrpo (Philox noise, the schedule, sde_step), the rewards of
//   runtime/train/rewards and the formulas of docs/flowgrpo-math.md: the
//   images, the SDE window, reward/advantage metrics and the on-policy loss.
// - Gradients: the value_and_grad of @loss @train_step calls equals central
//   finite differences (float64), with and without KL, with LoRA.
// - A non-finite gradient norm skips the update bit for bit.
// - CFG: @velocity with guidance g is v_u + g (v_c - v_u).
//
// The evaluator runs the module after omni-autodiff (it cannot evaluate
// omni.value_and_grad itself); omnic's pipeline starts from the module as
// emitted.
//
//===----------------------------------------------------------------------===//

#include "frontends/recipes/flowgrpo/FlowGrpo.h"

#include "compiler/codegen/Codegen.h"
#include "compiler/reference/Evaluator.h"
#include "compiler/stepbin/StepWriter.h"
#include "dialects/omni/OmniOps.h"
#include "frontends/builder/testing/TestUtil.h"
#include "math/flowgrpo/Schedule.h"
#include "passes/Passes.h"
#include "runtime/executor/Executor.h"
#include "runtime/flowgrpo/Advantages.h"
#include "runtime/flowgrpo/Philox.h"
#include "runtime/flowgrpo/SdeStep.h"
#include "runtime/hal/drivers/Drivers.h"
#include "runtime/loader/Program.h"
#include "runtime/train/rewards/RewardFunctions.h"
#include "runtime/train/rewards/Rewards.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>

using namespace mlir;
using ::omni::DType;
using ::omni::HostTensor;
using ::omni::fe::Shape;
namespace fg = ::omni::fe::flowgrpo;
namespace fgr = ::omni::flowgrpo;
namespace reference = ::omni::reference;
using ::omni::fe::testing::randomF32;
using ::omni::fe::testing::relativeError;
using ::omni::fe::testing::valuesOf;

namespace {

/// Assigns the value of an absl::StatusOr or llvm::Expected, or fails.
#define ASSERT_OK_AND_ASSIGN(lhs, expr)                                        \
  auto lhs##OrError = (expr);                                                  \
  ASSERT_TRUE(lhs##OrError.ok()) << lhs##OrError.status();                     \
  auto lhs = std::move(*lhs##OrError)

const std::vector<std::string> kMetrics = {
    "loss",       "approx_kl",      "clipfrac",  "kl",     "reward_mean",
    "reward_std", "advantage_mean", "grad_norm", "skipped"};
constexpr int64_t kSeed = 7;

//===----------------------------------------------------------------------===//
// The fixture: programs from options, evaluation by name
//===----------------------------------------------------------------------===//

std::string num(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

/// One recipe request: a small dit (C x S x S latents, pooled text),
/// `--decoder=none`, and the recipe options the tests vary.
struct Recipe {
  int64_t prompts = 2, group = 2, steps = 3, window = 1, windowLo = 0,
          windowHi = 2, loraRank = 0;
  double noiseLevel = 0.7, guidance = 1.0, beta = 0.0, clipRange = 1e-4;
  std::string reward = "jpeg_compressibility";
  std::vector<std::string> extra; // more key=value options
  std::string mesh;               // --mesh (empty: none)
  int64_t channels = 4, size = 8, pooledDim = 8;
  /// qwen_image tiny (one block, size x size latents of 16 channels,
  /// `textTokens` x 32 text embeddings, no pooled text) instead of the dit.
  bool qwen = false;
  int64_t textTokens = 2;

  int64_t batch() const { return prompts * group; }
  Shape latent() const { return {channels, size, size}; }
  int64_t sampleElements() const { return channels * size * size; }

  fg::RecipeRequest request() const {
    fg::RecipeRequest r;
    r.model = "dit";
    r.modelConfig = "tiny";
    r.modelOverrides = {"sample_size=" + std::to_string(size),
                        "in_channels=" + std::to_string(channels),
                        "num_layers=1",
                        "attention_head_dim=8",
                        "num_attention_heads=2",
                        "pooled_projection_dim=" + std::to_string(pooledDim)};
    if (qwen)
      r.model = "qwen_image",
      r.modelOverrides = {"latent_size=" + std::to_string(size), "num_layers=1",
                          "text_tokens=" + std::to_string(textTokens)};
    r.decoder = "";
    r.options = {"prompts_per_iteration=" + std::to_string(prompts),
                 "group_size=" + std::to_string(group),
                 "steps=" + std::to_string(steps),
                 "window=" + std::to_string(window),
                 "window_lo=" + std::to_string(windowLo),
                 "window_hi=" + std::to_string(windowHi),
                 "lora_rank=" + std::to_string(loraRank),
                 "noise_level=" + num(noiseLevel),
                 "guidance_scale=" + num(guidance),
                 "beta=" + num(beta),
                 "clip_range=" + num(clipRange),
                 "reward=" + reward};
    r.options.insert(r.options.end(), extra.begin(), extra.end());
    if (!mesh.empty())
      r.mesh = mesh;
    return r;
  }
};

/// One MLIRContext for every test (the compiled fixture keeps its program
/// across tests).
MLIRContext &sharedContext() {
  static MLIRContext *context = [] {
    DialectRegistry registry;
    mlir::omni::registerOmniDialects(registry);
    mlir::omni::registerCodegenDialects(registry);
    auto *c = new MLIRContext(registry);
    c->loadAllAvailableDialects();
    return c;
  }();
  return *context;
}

struct Program {
  Recipe setup;
  /// As buildProgram emits it (what omnic compiles).
  OwningOpRef<ModuleOp> module;
  /// After omni-autodiff: what the reference evaluator runs.
  OwningOpRef<ModuleOp> expanded;

  func::FuncOp fn(StringRef name) const {
    return expanded.get().lookupSymbol<func::FuncOp>(name);
  }
  func::FuncOp emitted(StringRef name) const {
    return module.get().lookupSymbol<func::FuncOp>(name);
  }
  /// The number of state tensors (@init_state's results).
  size_t numState() const { return fn("init_state").getNumResults(); }
};

absl::StatusOr<Program> buildProgram(const Recipe &setup) {
  Program p;
  p.setup = setup;
  auto built = fg::buildProgram(sharedContext(), setup.request());
  if (!built)
    return absl::InvalidArgumentError(llvm::toString(built.takeError()));
  p.module = std::move(*built);
  p.expanded = p.module->clone();
  PassManager pm(&sharedContext());
  pm.addPass(mlir::omni::createOmniAutodiffPass());
  if (failed(pm.run(*p.expanded)))
    return absl::InternalError("omni-autodiff failed on the recipe's program");
  return p;
}

std::vector<std::string> argNames(func::FuncOp f) {
  std::vector<std::string> out;
  for (unsigned i = 0; i < f.getNumArguments(); ++i) {
    auto a = f.getArgAttrOfType<StringAttr>(i, "omni.name");
    out.push_back(a ? a.str() : "");
  }
  return out;
}

std::vector<std::string> resultNames(func::FuncOp f) {
  std::vector<std::string> out;
  for (unsigned i = 0; i < f.getNumResults(); ++i) {
    auto a = f.getResultAttrOfType<StringAttr>(i, "omni.name");
    out.push_back(a ? a.str() : "");
  }
  return out;
}

using Named = std::map<std::string, HostTensor>;

/// Results of `f` by their omni.name.
Named byName(func::FuncOp f, const std::vector<HostTensor> &results) {
  Named out;
  std::vector<std::string> names = resultNames(f);
  for (size_t i = 0; i < results.size() && i < names.size(); ++i)
    out[names[i]] = results[i];
  return out;
}

/// True for CFG's unconditional conditioning arguments (negative_prompt,
/// negative_pooled, negative_prompt_embeds, negative_pooled_prompt_embeds).
bool isNegative(const std::string &name) {
  return name.rfind("negative_", 0) == 0;
}

/// Zeros of argument `i` of `f`: the unconditional conditioning omnirun
/// feeds when the prompt set has no negatives (docs/prompts.md).
HostTensor zerosOf(func::FuncOp f, unsigned i) {
  auto type = cast<RankedTensorType>(f.getArgumentTypes()[i]);
  return HostTensor(DType::F32, Shape(type.getShape()));
}

/// A text mask argument (prompt_mask, negative_prompt_embeds_mask, ...):
/// omnirun feeds all ones when the prompt set has none (docs/prompts.md).
bool isMask(const std::string &name) {
  return name.size() >= 5 && name.compare(name.size() - 5, 5, "_mask") == 0;
}

HostTensor onesOf(func::FuncOp f, unsigned i) {
  auto type = cast<RankedTensorType>(f.getArgumentTypes()[i]);
  Shape shape(type.getShape());
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return HostTensor::fromDoubles(DType::F32, shape,
                                 std::vector<double>(n, 1.0));
}

/// `args` followed by the defaults of `f`'s runtime hyper-parameter
/// arguments (omni.hparam) that `args` does not reach: the values omnirun
/// feeds without --set; CFG's negatives it does not reach are zeros, text
/// masks all ones.
std::vector<HostTensor> withHyperParams(func::FuncOp f,
                                        std::vector<HostTensor> args) {
  for (unsigned i = args.size(); i < f.getNumArguments(); ++i) {
    if (auto hp = f.getArgAttrOfType<DictionaryAttr>(i, "omni.hparam"))
      args.push_back(HostTensor::fromDoubles(
          DType::F64, {}, {hp.getAs<FloatAttr>("default").getValueAsDouble()}));
    else if (auto name = f.getArgAttrOfType<StringAttr>(i, "omni.name");
             name && isMask(name.str()))
      args.push_back(onesOf(f, i));
    else if (name && isNegative(name.str()))
      args.push_back(zerosOf(f, i));
  }
  return args;
}

absl::StatusOr<std::vector<HostTensor>>
evaluate(const Program &p, StringRef name, std::vector<HostTensor> args,
         reference::Precision precision = reference::Precision::F64) {
  args = withHyperParams(p.fn(name), std::move(args));
  static const ::omni::HostFunctionRegistry rewardFns =
      ::omni::rewards::rewardHostFunctions();
  reference::EvalOptions options;
  options.precision = precision;
  options.hostFunctions = &rewardFns;
  return reference::evaluateFunction(*p.expanded, name, args, options);
}

/// The default @train_step records for the runtime hyper-parameter `name`
/// (its omni.hparam), if it has one.
std::optional<double> hparamDefault(func::FuncOp f, const std::string &name) {
  auto step =
      f->getParentOfType<ModuleOp>().lookupSymbol<func::FuncOp>("train_step");
  if (!step)
    return std::nullopt;
  std::vector<std::string> names = argNames(step);
  for (unsigned i = 0; i < names.size(); ++i)
    if (names[i] == name)
      if (auto hp = step.getArgAttrOfType<DictionaryAttr>(i, "omni.hparam"))
        return hp.getAs<FloatAttr>("default").getValueAsDouble();
  return std::nullopt;
}

/// `f`'s arguments from `leading` followed by the named tensors of `named`
/// for the remaining (named) arguments; a runtime hyper-parameter missing
/// from `named` is its recorded default.
absl::StatusOr<std::vector<HostTensor>>
argsByName(func::FuncOp f, std::vector<HostTensor> leading,
           const Named &named) {
  std::vector<std::string> names = argNames(f);
  for (size_t i = leading.size(); i < names.size(); ++i) {
    auto it = named.find(names[i]);
    if (it == named.end())
      if (std::optional<double> d = hparamDefault(f, names[i])) {
        leading.push_back(HostTensor::fromDoubles(DType::F64, {}, {*d}));
        continue;
      }
    if (it == named.end() && isMask(names[i])) {
      leading.push_back(onesOf(f, i));
      continue;
    }
    if (it == named.end() && isNegative(names[i])) {
      leading.push_back(zerosOf(f, i));
      continue;
    }
    if (it == named.end())
      return absl::NotFoundError("no tensor for argument #" +
                                 std::to_string(i) + " '" + names[i] +
                                 "' of @" + f.getSymName().str());
    leading.push_back(it->second);
  }
  return leading;
}

/// A float32-typed tensor holding `values` unrounded (the float64
/// evaluator carries doubles in f32 tensors).
HostTensor f32Exact(const Shape &shape, std::vector<double> values) {
  HostTensor t = HostTensor::fromDoubles(DType::F64, shape, std::move(values));
  t.relabel(DType::F32);
  return t;
}

HostTensor i64(int64_t v) { return HostTensor::scalarInt(DType::I64, v); }

/// Per-prompt pooled embeddings [P, Dp].
HostTensor promptsOf(const Recipe &s, uint64_t seed = 11) {
  return randomF32({s.prompts, s.pooledDim}, seed);
}

/// Repeats each prompt row G times: [P*G, Dp].
HostTensor repeatGroups(const Recipe &s, const HostTensor &prompts) {
  std::vector<double> v;
  for (int64_t p = 0; p < s.prompts; ++p)
    for (int64_t g = 0; g < s.group; ++g)
      for (int64_t d = 0; d < s.pooledDim; ++d)
        v.push_back(prompts.doubleAt(p * s.pooledDim + d));
  return f32Exact({s.batch(), s.pooledDim}, v);
}

std::vector<HostTensor> trainArgs(const std::vector<HostTensor> &state,
                                  int64_t iteration,
                                  const HostTensor &prompts) {
  std::vector<HostTensor> args = state;
  args.push_back(i64(kSeed));
  args.push_back(i64(iteration));
  args.push_back(prompts);
  return args;
}

double scalar(const Named &n, const std::string &name) {
  auto it = n.find(name);
  EXPECT_TRUE(it != n.end()) << "no result '" << name << "'";
  return it == n.end() ? NAN : it->second.doubleAt(0);
}

/// Same dtype, shape and bits (as the tensor's own dtype stores them).
bool bitEqual(const HostTensor &a, const HostTensor &b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape())
    return false;
  if (!a.isFloat())
    return std::equal(a.ints().begin(), a.ints().end(), b.ints().begin());
  for (int64_t i = 0; i < a.numElements(); ++i) {
    if (a.dtype() == DType::F32) {
      float x = static_cast<float>(a.floats()[i]),
            y = static_cast<float>(b.floats()[i]);
      if (std::memcmp(&x, &y, sizeof x))
        return false;
    } else if (std::memcmp(&a.floats()[i], &b.floats()[i], sizeof(double))) {
      return false;
    }
  }
  return true;
}

//===----------------------------------------------------------------------===//
// An independent rollout (docs/flowgrpo-math.md section 3, docs/recipes.md
// section 4)
//===----------------------------------------------------------------------===//

/// The window start the recipe draws: lo + floor(u (hi - W - lo + 1)),
/// u = uniform(seed, n (N+2) + N + 1); 0 without a window.
int64_t windowStart(const Recipe &s, int64_t iteration) {
  if (s.window == 0)
    return 0;
  float u =
      fgr::philoxUniformAt(kSeed, iteration * (s.steps + 2) + s.steps + 1, 0);
  int64_t choices = s.windowHi - s.window - s.windowLo + 1;
  int64_t pick = std::min<int64_t>(
      static_cast<int64_t>(std::floor(static_cast<double>(u) * choices)),
      choices - 1);
  return s.windowLo + pick;
}

struct Rollout {
  int64_t start = 0, end = 0;
  std::vector<double> xs;     // [N+1, B, C, H, W]
  std::vector<double> lps;    // [N, B], zero outside the window
  std::vector<double> images; // [B, 3, H, W]
};

/// Samples with @velocity (float64 evaluator) and runtime/flowgrpo's
/// sde_step: SDE with `noiseLevel` at steps [start, start + W) (all but the
/// last with W = 0), Euler elsewhere; images = logistic(x_N[:, :3]).
absl::StatusOr<Rollout> rollout(const Program &p, const Named &state,
                                const HostTensor &prompts, int64_t iteration,
                                int64_t start) {
  const Recipe &s = p.setup;
  int64_t B = s.batch(), n = s.sampleElements(), N = s.steps;
  Rollout r;
  r.start = start;
  r.end = s.window > 0 ? start + s.window : N - 1;
  absl::StatusOr<std::vector<float>> sigmas = fgr::staticShiftSigmas(N, 3.0);
  if (!sigmas.ok())
    return sigmas.status();
  std::vector<float> timesteps = fgr::timestepsFromSigmas(*sigmas);
  int64_t base = iteration * (N + 2);
  std::vector<float> draw(B * n);
  fgr::philoxNormal(kSeed, base, 0, draw.data(), B * n);
  std::vector<double> x(draw.begin(), draw.end());
  r.lps.assign(N * B, 0.0);
  HostTensor pooled = repeatGroups(s, prompts);
  Shape xShape = s.latent();
  xShape.insert(xShape.begin(), B);
  for (int64_t i = 0; i < N; ++i) {
    r.xs.insert(r.xs.end(), x.begin(), x.end());
    absl::StatusOr<std::vector<HostTensor>> args = argsByName(
        p.fn("velocity"),
        {f32Exact(xShape, x),
         f32Exact({B}, std::vector<double>(B, timesteps[i])), pooled},
        state);
    if (!args.ok())
      return args.status();
    absl::StatusOr<std::vector<HostTensor>> v = evaluate(p, "velocity", *args);
    if (!v.ok())
      return v.status();
    fgr::philoxNormal(kSeed, base + 1 + i, 0, draw.data(), B * n);
    std::vector<double> noise(draw.begin(), draw.end());
    bool inWindow = i >= r.start && i < r.end;
    fgr::SdeStepOptions o;
    o.type = fgr::SdeType::Sde;
    o.noiseLevel = inWindow ? s.noiseLevel : 0.0;
    std::vector<double> vv = valuesOf((*v)[0]);
    auto step = fgr::sdeStepWithNoise<double>(*sigmas, i, o, B, x, vv, noise);
    if (!step.ok())
      return step.status();
    x = step->next;
    if (inWindow)
      for (int64_t b = 0; b < B; ++b)
        r.lps[i * B + b] = step->logProb[b];
  }
  r.xs.insert(r.xs.end(), x.begin(), x.end());
  int64_t hw = s.size * s.size;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t k = 0; k < hw; ++k)
        r.images.push_back(1.0 /
                           (1.0 + std::exp(-x[(b * s.channels + c) * hw + k])));
  return r;
}

/// @loss's arguments: the named state, then the rollout's tensors.
absl::StatusOr<std::vector<HostTensor>>
lossArgs(const Program &p, const Named &state, const Rollout &r,
         const std::vector<double> &oldLps, const std::vector<double> &adv,
         const HostTensor &prompts) {
  const Recipe &s = p.setup;
  Named named = state;
  Shape xs = s.latent();
  xs.insert(xs.begin(), {s.steps + 1, s.batch()});
  named["xs"] = f32Exact(xs, r.xs);
  named["old_log_probs"] = f32Exact({s.steps, s.batch()}, oldLps);
  named["advantages"] = f32Exact({s.batch()}, adv);
  named["window_start"] = i64(r.start);
  named["pooled"] = repeatGroups(s, prompts);
  return argsByName(p.fn("loss"), {}, named);
}

class RecipeTest : public ::testing::Test {
protected:
  /// @init_state(seed 7) in float64, as a list and by name.
  static void init(const Program &p, std::vector<HostTensor> &state,
                   Named &named,
                   reference::Precision precision = reference::Precision::F64) {
    ASSERT_OK_AND_ASSIGN(out,
                         evaluate(p, "init_state", {i64(kSeed)}, precision));
    state = out;
    named = byName(p.fn("init_state"), out);
  }
};

//===----------------------------------------------------------------------===//
// 1. The state layout
//===----------------------------------------------------------------------===//

bool isAdapter(const std::string &name) {
  return name.find(".lora_A.") != std::string::npos ||
         name.find(".lora_B.") != std::string::npos;
}

TEST_F(RecipeTest, StateLayoutAgreesAcrossFunctions) {
  for (auto [beta, lora, ema] :
       std::vector<std::tuple<double, int64_t, bool>>{{0.0, 0, false},
                                                      {0.04, 0, false},
                                                      {0.04, 2, false},
                                                      {0.04, 0, true},
                                                      {0.0, 2, true}}) {
    SCOPED_TRACE("beta " + num(beta) + ", lora_rank " + std::to_string(lora) +
                 (ema ? ", ema" : ""));
    Recipe s;
    s.beta = beta;
    s.loraRank = lora;
    if (ema)
      s.extra = {"ema_decay=0.9", "ema_every=2"};
    ASSERT_OK_AND_ASSIGN(p, buildProgram(s));
    func::FuncOp init = p.emitted("init_state"), step = p.emitted("train_step"),
                 velocity = p.emitted("velocity"), loss = p.emitted("loss");
    ASSERT_TRUE(init && step && velocity && loss);
    EXPECT_TRUE(init.isPublic() && step.isPublic());
    EXPECT_TRUE(velocity.isPrivate() && loss.isPrivate());

    std::vector<std::string> state = resultNames(init);
    size_t K = state.size();
    std::vector<std::string> args = argNames(step), results = resultNames(step);
    ASSERT_EQ(args.size(), K + 3 + 11);
    ASSERT_EQ(results.size(), K + kMetrics.size() + 1);
    for (size_t i = 0; i < K; ++i) {
      EXPECT_EQ(args[i], state[i]) << "argument " << i;
      EXPECT_EQ(results[i], state[i]) << "result " << i;
      EXPECT_TRUE(step.getArgumentTypes()[i] == init.getResultTypes()[i]) << i;
      EXPECT_TRUE(step.getResultTypes()[i] == init.getResultTypes()[i]) << i;
    }
    EXPECT_EQ(
        std::vector<std::string>(args.begin() + K, args.end()),
        (std::vector<std::string>{
            "seed", "iteration", "pooled_prompt_embeds", "lr", "weight_decay",
            "beta1", "beta2", "adam_eps", "max_grad_norm", "beta", "clip_range",
            "adv_clip_max", "noise_level", "guidance_scale"}));
    Builder b(&sharedContext());
    EXPECT_TRUE(
        step.getArgumentTypes()[K + 2] ==
        RankedTensorType::get({s.prompts, s.pooledDim}, b.getF32Type()));
    // The runtime hyper-parameters: 0-D f64 with the recipe's option as
    // the default and the range omnirun --set accepts (step.bin's table).
    ::omni::fe::Config defaults = fg::defaultOptions();
    // beta = 0 and guidance_scale = 1 decide the structure: fixed.
    const char *ranges[] = {"[0, inf)",
                            "[0, inf)",
                            "[0, 1)",
                            "[0, 1)",
                            "(0, inf)",
                            "(0, inf)",
                            beta > 0 ? "[0, inf)" : "[0, 0]",
                            "[0, inf)",
                            "(0, inf)",
                            "(0, inf)",
                            "[1, 1]"};
    defaults.set("beta", num(beta));
    for (size_t h = 0; h < 11; ++h) {
      unsigned i = static_cast<unsigned>(K + 3 + h);
      EXPECT_TRUE(step.getArgumentTypes()[i] ==
                  RankedTensorType::get({}, b.getF64Type()))
          << args[i];
      auto hp = step.getArgAttrOfType<DictionaryAttr>(i, "omni.hparam");
      ASSERT_TRUE(hp) << args[i];
      EXPECT_EQ(hp.getAs<FloatAttr>("default").getValueAsDouble(),
                std::stod(defaults.values().at(args[i])))
          << args[i];
      EXPECT_EQ(hp.getAs<StringAttr>("range").str(), ranges[h]) << args[i];
    }
    EXPECT_EQ(fg::runtimeOptions(),
              std::vector<std::string>(args.begin() + K + 3, args.end()));
    for (size_t m = 0; m < kMetrics.size(); ++m) {
      EXPECT_EQ(results[K + m], kMetrics[m]);
      EXPECT_TRUE(step.getResultTypes()[K + m] ==
                  RankedTensorType::get({}, b.getF32Type()))
          << kMetrics[m];
    }
    EXPECT_EQ(results.back(), "images");
    EXPECT_TRUE(
        step.getResultTypes().back() ==
        RankedTensorType::get({s.batch(), 3, s.size, s.size}, b.getF32Type()));

    // The blocks: parameters, [ref], m, v, step, [ema].
    std::vector<std::string> params, trainable;
    size_t i = 0;
    for (; i < K && state[i].rfind("transformer.", 0) == 0; ++i) {
      params.push_back(state[i]);
      if (!lora || isAdapter(state[i]))
        trainable.push_back(state[i]);
    }
    ASSERT_FALSE(trainable.empty());
    std::vector<std::string> want = params;
    if (beta > 0 && !lora)
      for (const std::string &t : trainable)
        want.push_back("ref." + t);
    for (const char *moment : {"adamw.m.", "adamw.v."})
      for (const std::string &t : trainable)
        want.push_back(moment + t);
    want.push_back("adamw.step");
    size_t stepAt = want.size() - 1;
    if (ema)
      for (const std::string &t : trainable)
        want.push_back("ema." + t);
    EXPECT_EQ(state, want);
    EXPECT_TRUE(init.getResultTypes()[stepAt] ==
                RankedTensorType::get({}, b.getI64Type()));
    // An EMA tensor has its parameter's type.
    for (size_t e = stepAt + 1; e < K; ++e) {
      size_t at = std::find(state.begin(), state.end(), state[e].substr(4)) -
                  state.begin();
      ASSERT_LT(at, K) << state[e];
      EXPECT_TRUE(init.getResultTypes()[e] == init.getResultTypes()[at])
          << state[e];
    }

    if (lora) {
      // Adapters on the four attention projections of the one block, right
      // after their layer's weight and bias; no optimizer state (so no
      // gradient) for any base weight.
      EXPECT_EQ(trainable.size(), 8u);
      for (const char *layer : {"to_q", "to_k", "to_v", "to_out.0"}) {
        std::string path =
            std::string("transformer.transformer_blocks.0.attn.") + layer;
        size_t at = std::find(state.begin(), state.end(), path + ".bias") -
                    state.begin();
        ASSERT_LT(at + 2, K) << path;
        EXPECT_EQ(state[at + 1], path + ".lora_A.weight");
        EXPECT_EQ(state[at + 2], path + ".lora_B.weight");
        EXPECT_EQ(std::count(state.begin(), state.end(),
                             "adamw.m." + path + ".weight"),
                  0);
      }
    }

    // @velocity takes every model parameter in state order; @loss the
    // trainable ones first, then the frozen ones, then the reference copy.
    std::vector<std::string> vArgs = argNames(velocity);
    EXPECT_EQ(std::vector<std::string>(vArgs.begin() + 3, vArgs.end()), params);
    std::vector<std::string> wantLoss = trainable;
    for (const std::string &q : params)
      if (lora && !isAdapter(q))
        wantLoss.push_back(q);
    if (beta > 0 && !lora)
      for (const std::string &t : trainable)
        wantLoss.push_back("ref." + t);
    for (const char *a : {"xs", "old_log_probs", "advantages", "window_start",
                          "pooled", "clip_range", "adv_clip_max"})
      wantLoss.push_back(a);
    if (beta > 0)
      wantLoss.push_back("beta");
    wantLoss.push_back("noise_level");
    EXPECT_EQ(argNames(loss), wantLoss);
  }
}

TEST_F(RecipeTest, BadOptionsAreOneLineErrors) {
  auto error = [](const Recipe &s) {
    auto built = fg::buildProgram(sharedContext(), s.request());
    if (built)
      return std::string("(built)");
    return llvm::toString(built.takeError());
  };
  Recipe s;
  s.windowHi = 3; // the last step (N-1 = 2) would be trainable
  EXPECT_NE(error(s).find("window_lo/window_hi"), std::string::npos)
      << error(s);
  s = Recipe();
  s.guidance = 0.5;
  EXPECT_NE(error(s).find("guidance_scale"), std::string::npos) << error(s);
  s = Recipe();
  s.extra = {"windw=3"};
  EXPECT_NE(error(s).find("unknown key 'windw'"), std::string::npos)
      << error(s);
  s = Recipe();
  s.channels = 2; // no decoder: the image is the first 3 channels
  EXPECT_NE(error(s).find("first 3 channels"), std::string::npos) << error(s);
  s = Recipe();
  s.mesh = "dp=3"; // a batch of 4 over 3 ranks
  EXPECT_EQ(error(s), "--mesh=dp=3: the rollout batch prompts_per_iteration * "
                      "group_size = 4 must be divisible by the mesh's 3 ranks");
  s.mesh = "dp=2,tp=2";
  EXPECT_EQ(error(s), "--mesh=dp=2,tp=2: unknown axis 'tp': expected dp or "
                      "fsdp");
  // The EMA's decay and interval.
  s = Recipe();
  s.extra = {"ema_decay=1"};
  EXPECT_EQ(error(s), "flowgrpo option ema_decay: expected in [0, 1) (0: no "
                      "EMA) (found 1)");
  s.extra = {"ema_decay=-0.25"};
  EXPECT_EQ(error(s), "flowgrpo option ema_decay: expected in [0, 1) (0: no "
                      "EMA) (found -0.25)");
  s.extra = {"ema_decay=0.9", "ema_every=0"};
  EXPECT_EQ(error(s), "flowgrpo option ema_every: expected >= 1 (optimizer "
                      "steps) (found 0)");
  s.extra = {"ema_decay=high"};
  EXPECT_NE(error(s).find("ema_decay"), std::string::npos) << error(s);
  EXPECT_EQ(error(s).find('\n'), std::string::npos) << error(s);
  s = Recipe();
  for (const char *chunks : {"3", "0", "-2"}) {
    s.extra = {std::string("rollout_chunks=") + chunks};
    EXPECT_EQ(error(s), std::string("flowgrpo option rollout_chunks: expected "
                                    "an integer >= 1 that divides "
                                    "prompts_per_iteration * group_size "
                                    "(found ") +
                            chunks + " for a batch of 4)");
  }
  s.extra = {"rollout_chunks=2"};
  s.mesh = "dp=2";
  EXPECT_EQ(error(s), "--mesh=dp=2: rollout_chunks = 2 is not supported with "
                      "a mesh yet: expected rollout_chunks = 1");
}

/// The omni.host_call ops of `f` and their result lengths.
std::vector<int64_t> hostCallBatches(func::FuncOp f) {
  std::vector<int64_t> out;
  f.walk([&](mlir::omni::HostCallOp op) {
    out.push_back(
        cast<RankedTensorType>(op->getResult(0).getType()).getDimSize(0));
  });
  return out;
}

TEST_F(RecipeTest, RolloutChunksGiveTheUnchunkedIteration) {
  // rollout_chunks = C samples the batch of 4 in C chunks, each with its
  // own denoising loop, decode and reward call: every chunk draws its
  // samples' elements of the same random streams and every per-sample
  // computation is the same, so the evaluator (float64 and float32) gives
  // the same bits as C = 1, for the state, every metric and the images.
  Recipe plain;
  plain.window = 2;
  ASSERT_OK_AND_ASSIGN(p1, buildProgram(plain));
  EXPECT_EQ(hostCallBatches(p1.emitted("train_step")),
            (std::vector<int64_t>{4}));
  EXPECT_FALSE(p1.module->lookupSymbol("velocity_chunk"));
  std::vector<HostTensor> state;
  Named named;
  ASSERT_NO_FATAL_FAILURE(init(p1, state, named));
  for (int64_t chunks : {2, 4}) {
    Recipe chunked = plain;
    chunked.extra = {"rollout_chunks=" + std::to_string(chunks)};
    ASSERT_OK_AND_ASSIGN(pc, buildProgram(chunked));
    EXPECT_EQ(hostCallBatches(pc.emitted("train_step")),
              std::vector<int64_t>(chunks, 4 / chunks));
    EXPECT_TRUE(pc.module->lookupSymbol("velocity_chunk"));
    // The chunked program has the same signature.
    EXPECT_EQ(argNames(pc.fn("train_step")), argNames(p1.fn("train_step")));
    EXPECT_EQ(resultNames(pc.fn("train_step")),
              resultNames(p1.fn("train_step")));
    for (auto precision :
         {reference::Precision::F64, reference::Precision::F32}) {
      for (int64_t iteration : {0, 3}) {
        std::vector<HostTensor> args =
            trainArgs(state, iteration, promptsOf(plain));
        ASSERT_OK_AND_ASSIGN(a, evaluate(p1, "train_step", args, precision));
        ASSERT_OK_AND_ASSIGN(b, evaluate(pc, "train_step", args, precision));
        ASSERT_EQ(a.size(), b.size());
        Named w = byName(p1.fn("train_step"), a);
        EXPECT_GT(scalar(w, "reward_std"), 0.0); // not a vacuous comparison
        std::vector<std::string> names = resultNames(p1.fn("train_step"));
        for (size_t i = 0; i < a.size(); ++i)
          EXPECT_TRUE(bitEqual(a[i], b[i]))
              << "C = " << chunks << ", iteration " << iteration << ", result '"
              << names[i] << "'";
      }
    }
  }
}

/// The sharding `omnigen --mesh` gives a state tensor of `type`: dimension
/// 0 over fsdp, replicated when 0-D (docs/sharding.md section 1).
Attribute fsdpSharding(Type type) {
  auto t = cast<RankedTensorType>(type);
  if (t.getRank() == 0)
    return {};
  MLIRContext *ctx = &sharedContext();
  Builder b(ctx);
  SmallVector<Attribute> dims{b.getStrArrayAttr({"fsdp"})};
  dims.resize(t.getRank(), b.getArrayAttr({}));
  return mlir::omni::ShardingAttr::get(ctx, FlatSymbolRefAttr::get(ctx, "mesh"),
                                       b.getArrayAttr(dims));
}

TEST_F(RecipeTest, MeshAnnotatesStateAndBatchWithoutChangingValues) {
  Recipe plain, meshed;
  meshed.mesh = "dp=2,fsdp=2"; // 4 ranks, the batch of 4
  meshed.extra = {"gather=per-step"};
  ASSERT_OK_AND_ASSIGN(pp, buildProgram(plain));
  ASSERT_OK_AND_ASSIGN(pm, buildProgram(meshed));
  auto mesh = pm.module->lookupSymbol<mlir::omni::MeshOp>("mesh");
  ASSERT_TRUE(mesh);
  EXPECT_EQ(mesh.getShape(), ArrayRef<int64_t>({2, 2}));
  ASSERT_EQ(mesh.getAxes().size(), 2u);
  EXPECT_EQ(cast<StringAttr>(mesh.getAxes()[0]).getValue(), "dp");
  EXPECT_EQ(cast<StringAttr>(mesh.getAxes()[1]).getValue(), "fsdp");
  auto gather = pm.module.get()->getAttrOfType<StringAttr>("omni.shard_gather");
  ASSERT_TRUE(gather);
  EXPECT_EQ(gather.getValue(), "per-step");
  EXPECT_FALSE(pp.module->lookupSymbol("mesh"));
  EXPECT_FALSE(pp.module.get()->hasAttr("omni.shard_gather"));

  // Every state tensor but the 0-D step is split over fsdp, alike in
  // @init_state's results and @train_step's arguments and results; the
  // rest of @train_step's signature is replicated.
  func::FuncOp initFn = pm.emitted("init_state"),
               step = pm.emitted("train_step");
  size_t K = initFn.getNumResults(), sharded = 0;
  for (size_t i = 0; i < K; ++i) {
    Attribute want = fsdpSharding(initFn.getResultTypes()[i]);
    sharded += want ? 1 : 0;
    EXPECT_EQ(initFn.getResultAttr(i, "omni.sharding"), want) << i;
    EXPECT_EQ(step.getArgAttr(i, "omni.sharding"), want) << i;
    EXPECT_EQ(step.getResultAttr(i, "omni.sharding"), want) << i;
  }
  EXPECT_EQ(sharded, K - 1); // all but adamw.step
  EXPECT_EQ(resultNames(initFn).back(), "adamw.step");
  for (size_t i = K; i < step.getNumArguments(); ++i)
    EXPECT_FALSE(step.getArgAttr(i, "omni.sharding")) << i;
  for (size_t i = K; i < step.getNumResults(); ++i)
    EXPECT_FALSE(step.getResultAttr(i, "omni.sharding")) << i;

  // The batch: the repeated pooled embeddings [4, Dp] and x0 [4, C, S, S],
  // dimension 0 over dp then fsdp.
  std::vector<Shape> shardedBatch;
  step.walk([&](mlir::omni::ShardOp op) {
    auto dims = op.getSharding().getDims();
    EXPECT_EQ(op.getSharding().getAxes(0),
              (SmallVector<StringRef>{"dp", "fsdp"}));
    for (unsigned d = 1; d < dims.size(); ++d)
      EXPECT_TRUE(op.getSharding().getAxes(d).empty());
    shardedBatch.push_back(
        cast<RankedTensorType>(op.getType()).getShape().vec());
  });
  Shape x0 = plain.latent();
  x0.insert(x0.begin(), plain.batch());
  EXPECT_EQ(shardedBatch,
            (std::vector<Shape>{{plain.batch(), plain.pooledDim}, x0}));

  // The annotations are only annotations: one iteration on the same state
  // gives the same bits.
  std::vector<HostTensor> state;
  Named named;
  ASSERT_NO_FATAL_FAILURE(init(pp, state, named));
  std::vector<HostTensor> args = trainArgs(state, 0, promptsOf(plain));
  ASSERT_OK_AND_ASSIGN(a, evaluate(pp, "train_step", args));
  ASSERT_OK_AND_ASSIGN(b, evaluate(pm, "train_step", args));
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    EXPECT_TRUE(bitEqual(a[i], b[i])) << "result " << i;
}

/// The oracle of docs/sharding.md section 3 on a whole training step:
/// omnic's pipeline up to omni-decompose, then omni-shard once with
/// `trace` (the SPMD program) and once with `trace-only` (the same ids on
/// the unsharded program); the reference evaluator runs both, the sharded
/// one on simulated ranks, and compareSharded reassembles every traced
/// value (blocks, padding, partial sums) and compares it with the
/// unsharded one. In float64 the two orders of summation differ by about
/// 1e-15 relative, so 1e-9 leaves no room for a wrong block, a missing
/// collective or a gradient summed twice.
TEST_F(RecipeTest, ShardedTrainStepAgreesOpByOpWithTheUnsharded) {
  Recipe plain;
  plain.reward = "brightness"; // smooth: small changes stay small
  ASSERT_OK_AND_ASSIGN(pp, buildProgram(plain));
  std::vector<HostTensor> state;
  Named named;
  ASSERT_NO_FATAL_FAILURE(init(pp, state, named));
  std::vector<HostTensor> args = trainArgs(state, 0, promptsOf(plain));

  for (auto [mesh, ranks] : std::vector<std::pair<std::string, int64_t>>{
           {"fsdp=2", 2}, {"dp=2,fsdp=2", 4}, {"dp=2", 2}}) {
    SCOPED_TRACE("--mesh=" + mesh);
    Recipe meshed = plain;
    meshed.mesh = mesh;
    ASSERT_OK_AND_ASSIGN(p, buildProgram(meshed));
    OwningOpRef<ModuleOp> unsharded = p.module.get().clone();
    PassManager front(&sharedContext(), ModuleOp::getOperationName());
    mlir::omni::buildOmniPipeline(front, mlir::omni::PipelineStage::Decompose);
    ASSERT_TRUE(succeeded(front.run(*unsharded)));
    OwningOpRef<ModuleOp> sharded = unsharded->clone();
    PassManager traceOnly(&sharedContext(), ModuleOp::getOperationName());
    traceOnly.addPass(mlir::omni::createOmniShardPass({/*trace=*/false,
                                                       /*traceOnly=*/true}));
    ASSERT_TRUE(succeeded(traceOnly.run(*unsharded)));
    PassManager shard(&sharedContext(), ModuleOp::getOperationName());
    shard.addPass(mlir::omni::createOmniShardPass({/*trace=*/true,
                                                   /*traceOnly=*/false}));
    ASSERT_TRUE(succeeded(shard.run(*sharded)));

    static const ::omni::HostFunctionRegistry rewardFns =
        ::omni::rewards::rewardHostFunctions();
    reference::EvalOptions options;
    options.precision = reference::Precision::F64;
    options.hostFunctions = &rewardFns;
    absl::StatusOr<reference::ShardedComparison> got =
        reference::compareSharded(*unsharded, *sharded, "train_step", ranks,
                                  withHyperParams(p.fn("train_step"), args),
                                  1e-9, options);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_FALSE(got->mismatch) << got->summary();
    // Every op of the step is traced (1902 values here): the rollout's
    // loop body per step, the loss, the gradients and the update of every
    // parameter.
    EXPECT_GT(got->valuesCompared, 1000) << got->summary();

    // And it can fail: the first sum over the ranks made a mean (a
    // gradient or reward statistic off by the group size) is caught.
    mlir::omni::AllReduceOp first;
    sharded->walk([&](mlir::omni::AllReduceOp op) {
      if (!first && op.getKind() == mlir::omni::ReduceKind::sum)
        first = op;
    });
    ASSERT_TRUE(first);
    first.setKindAttr(mlir::omni::ReduceKindAttr::get(
        &sharedContext(), mlir::omni::ReduceKind::mean));
    got = reference::compareSharded(*unsharded, *sharded, "train_step", ranks,
                                    withHyperParams(p.fn("train_step"), args),
                                    1e-9, options);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(got->mismatch) << got->summary();
  }
}

//===----------------------------------------------------------------------===//
// 2. Compiled (omnic's pipeline, CPU executor) vs the evaluator, and
// 5. the non-finite skip on both
//===----------------------------------------------------------------------===//

/// `p` through omnic's pipeline, the CPU codegen and the step.bin writer,
/// loaded into an executor on `device` with the rewards registered.
absl::StatusOr<std::unique_ptr<::omni::executor::Executor>>
compileRecipe(const Program &p, ::omni::hal::Device &device) {
  OwningOpRef<ModuleOp> copy = p.module.get().clone();
  PassManager pm(&sharedContext(), ModuleOp::getOperationName());
  mlir::omni::buildOmniPipeline(pm);
  if (failed(pm.run(*copy)))
    return absl::InternalError("omni-pipeline failed");
  FailureOr<mlir::omni::CodegenResult> exe = mlir::omni::compileFusions(*copy);
  if (failed(exe))
    return absl::InternalError("CPU codegen failed");
  FailureOr<std::vector<uint8_t>> bytes =
      mlir::omni::writeStepBin(*copy, *exe, "FlowGrpoTest");
  if (failed(bytes))
    return absl::InternalError("writing step.bin failed");
  auto loaded = ::omni::loader::Program::loadBytes(absl::string_view(
      reinterpret_cast<const char *>(bytes->data()), bytes->size()));
  if (!loaded.ok())
    return loaded.status();
  ::omni::executor::ExecutorOptions options;
  ::omni::rewards::registerRewards(options.hostFunctions);
  return ::omni::executor::Executor::create(*loaded, device, options);
}

/// The compiled program keeps the training state in its state slots
/// (omni-resident-state): @init_state fills them, @train_step takes only
/// seed, iteration and prompts. This runs the compiled @train_step with the
/// evaluator's convention, the state passed in and returned as values (in
/// the order of @init_state's results), so both can be compared.
absl::StatusOr<std::vector<HostTensor>>
runCompiledStep(::omni::executor::Executor &executor, const Program &p,
                const std::vector<HostTensor> &args) {
  std::vector<std::string> names = resultNames(p.fn("init_state"));
  if (args.size() < names.size())
    return absl::InvalidArgumentError("fewer arguments than state");
  for (size_t i = 0; i < names.size(); ++i)
    if (absl::Status s = executor.setState(names[i], args[i]); !s.ok())
      return s;
  std::vector<HostTensor> rest = withHyperParams(
      p.fn("train_step"), std::vector<HostTensor>(args.begin(), args.end()));
  rest.erase(rest.begin(), rest.begin() + names.size());
  absl::StatusOr<std::vector<HostTensor>> results =
      ::omni::executor::runHostTensors(executor, "train_step", rest);
  if (!results.ok())
    return results.status();
  std::vector<HostTensor> out;
  for (const std::string &name : names) {
    absl::StatusOr<::omni::TypedTensor> t = executor.getState(name);
    if (!t.ok())
      return t.status();
    out.push_back(t->toHost());
  }
  out.insert(out.end(), results->begin(), results->end());
  return out;
}

class CompiledRecipeTest : public RecipeTest {
protected:
  /// beta > 0 so the reference copy and the KL path are compiled too; the
  /// brightness reward so the rewards do not hinge on how the last bits of
  /// the images round to u8 (the JPEG host call is compared bit for bit in
  /// compiler/driver/DifferentialTest.cpp); an EMA updated every step so
  /// its update is compiled, compared and skipped with the rest.
  static Recipe setup() {
    Recipe s;
    s.beta = 0.04;
    s.reward = "brightness";
    s.extra = {"ema_decay=0.9", "ema_every=1"};
    return s;
  }

  static void SetUpTestSuite() {
    auto built = buildProgram(setup());
    if (!built.ok()) {
      *error = built.status().ToString();
      return;
    }
    program = new Program(std::move(*built));
    auto created = ::omni::hal::builtinDrivers().createDevice("cpu", {});
    if (!created.ok()) {
      *error = created.status().ToString();
      return;
    }
    device = created->release();
    auto made = compileRecipe(*program, *device);
    if (!made.ok()) {
      *error = made.status().ToString();
      return;
    }
    executor = made->release();
  }

  static void TearDownTestSuite() {
    delete executor;
    delete device;
    delete program;
    executor = nullptr;
    device = nullptr;
    program = nullptr;
  }

  void SetUp() override {
    ASSERT_TRUE(executor) << "compiling the recipe's program: " << *error;
  }

  /// The state slots as values (runCompiledStep's convention).
  static absl::StatusOr<std::vector<HostTensor>> stateOfSlots() {
    std::vector<HostTensor> state;
    for (const std::string &name : resultNames(program->fn("init_state"))) {
      absl::StatusOr<::omni::TypedTensor> t = executor->getState(name);
      if (!t.ok())
        return t.status();
      state.push_back(t->toHost());
    }
    return state;
  }
  static absl::StatusOr<std::vector<HostTensor>> compiledInit(int64_t seed) {
    absl::StatusOr<std::vector<HostTensor>> out =
        ::omni::executor::runHostTensors(*executor, "init_state", {i64(seed)});
    if (!out.ok())
      return out.status();
    if (!out->empty())
      return absl::InternalError("@init_state returned more than the state");
    return stateOfSlots();
  }
  static absl::StatusOr<std::vector<HostTensor>>
  compiledStep(const std::vector<HostTensor> &args) {
    return runCompiledStep(*executor, *program, args);
  }

  static inline Program *program = nullptr;
  static inline ::omni::hal::Device *device = nullptr;
  static inline ::omni::executor::Executor *executor = nullptr;
  static inline std::string *error = new std::string("not compiled");
};

TEST_F(CompiledRecipeTest, OneIterationMatchesTheFloat32Evaluator) {
  const Program &p = *program;
  std::vector<HostTensor> state;
  Named named;
  ASSERT_NO_FATAL_FAILURE(init(p, state, named, reference::Precision::F32));
  // Random numbers: the initial state is bit-identical.
  ASSERT_OK_AND_ASSIGN(compiled, compiledInit(kSeed));
  ASSERT_EQ(compiled.size(), state.size());
  for (size_t i = 0; i < state.size(); ++i)
    EXPECT_TRUE(bitEqual(compiled[i], state[i])) << "state " << i;

  std::vector<HostTensor> args = trainArgs(state, 0, promptsOf(p.setup));
  ASSERT_OK_AND_ASSIGN(
      want, evaluate(p, "train_step", args, reference::Precision::F32));
  ASSERT_OK_AND_ASSIGN(got, compiledStep(args));
  ASSERT_EQ(got.size(), want.size());
  std::vector<std::string> names = resultNames(p.fn("train_step"));
  Named w = byName(p.fn("train_step"), want);
  // Not a vacuous comparison: an update happened, with a KL reference.
  EXPECT_EQ(scalar(w, "skipped"), 0.0);
  EXPECT_EQ(w["adamw.step"].intAt(0), 1);
  EXPECT_GT(scalar(w, "grad_norm"), 0.0);
  EXPECT_GT(scalar(w, "reward_std"), 0.0);
  // A gradient that is zero in exact arithmetic is rounding noise on both
  // sides: the bias of to_k (softmax over the keys ignores a shift shared
  // by every key), about 1e-10 of the largest gradient here where every
  // other parameter's is above 1e-3 of it. AdamW's first step turns any
  // nonzero noise into +-lr, so there the parameters may differ by 2 lr
  // (their EMA by (1 - d) 2 lr, d = min(0.9, 2/11) after the first step)
  // and the moments are not compared.
  auto maxAbs = [](const HostTensor &t) {
    double m = 0;
    for (double v : t.floats())
      m = std::max(m, std::abs(v));
    return m;
  };
  double gScale = 0;
  for (size_t r = 0; r < want.size(); ++r)
    if (names[r].rfind("adamw.m.", 0) == 0)
      gScale = std::max(gScale, maxAbs(want[r]));
  std::set<std::string> noise;
  for (size_t r = 0; r < want.size(); ++r)
    if (names[r].rfind("adamw.m.", 0) == 0 &&
        maxAbs(want[r]) <= 1e-6 * gScale) {
      noise.insert(names[r].substr(8));
      EXPECT_LE(maxAbs(got[r]), 1e-6 * gScale) << names[r];
    }
  EXPECT_EQ(noise, (std::set<std::string>{
                       "transformer.transformer_blocks.0.attn.to_k.bias"}));
  const double lr = 1e-3;
  // Elsewhere elementwise |got - want| <= 1e-4 |want| + 1e-6 (rollout,
  // loss and gradient are float32 chains rounded in another order); the
  // moments relative to their tensor's scale.
  for (size_t r = 0; r < want.size(); ++r) {
    SCOPED_TRACE("result " + std::to_string(r) + " '" + names[r] + "'");
    ASSERT_EQ(got[r].shape(), want[r].shape());
    ASSERT_EQ(got[r].dtype(), want[r].dtype());
    if (!want[r].isFloat()) {
      EXPECT_TRUE(bitEqual(got[r], want[r]));
      continue;
    }
    bool isMoment = names[r].rfind("adamw.", 0) == 0,
         isEma = names[r].rfind("ema.", 0) == 0;
    std::string param = isMoment ? names[r].substr(8)
                        : isEma  ? names[r].substr(4)
                                 : names[r];
    if (noise.count(param)) {
      if (!isMoment) {
        EXPECT_LE(relativeError(got[r], valuesOf(want[r])) * maxAbs(want[r]),
                  (isEma ? 9.0 / 11.0 : 1.0) * 2 * lr * (1 + 1e-3));
      }
      continue;
    }
    if (isMoment) {
      EXPECT_LE(relativeError(got[r], valuesOf(want[r])), 1e-4);
      continue;
    }
    int bad = 0;
    for (int64_t i = 0; i < want[r].numElements(); ++i) {
      double g = got[r].floats()[i], x = want[r].floats()[i];
      if (!(std::abs(g - x) <= 1e-4 * std::abs(x) + 1e-6) && bad++ < 3)
        ADD_FAILURE() << "element " << i << ": compiled " << g << ", evaluator "
                      << x;
    }
    EXPECT_EQ(bad, 0);
  }
}

TEST_F(CompiledRecipeTest, RolloutChunksCompileToTheUnchunkedIteration) {
  // Compiled for the CPU and run by the executor, each chunk's reward host
  // call asynchronous (overlapping the next chunk's rollout): two chunks
  // give the unchunked iteration up to float32 rounding. Not bit for bit,
  // unlike the evaluator (RolloutChunksGiveTheUnchunkedIteration): the
  // compiled kernels at batch 2 and at batch 4 may sum a reduction in
  // another order (blocking that follows the shape), which moves a value by
  // an ulp or so; measured: the images by at most 2 ulps of 1 (1.2e-7),
  // reward_mean/reward_std/grad_norm by 1 ulp. The bounds below allow 8
  // ulps of the images' [0, 1] range and a relative 1e-5 for the metrics,
  // chains of a few float32 roundings of those images. The parameters
  // follow AdamW's first step, which turns any gradient difference where
  // the gradient is rounding noise into up to 2 lr (the evaluator test's
  // argument), so they are bounded by 2 lr, the moments relatively.
  Recipe chunked = setup();
  chunked.extra.push_back("rollout_chunks=2");
  ASSERT_OK_AND_ASSIGN(pc, buildProgram(chunked));
  ASSERT_OK_AND_ASSIGN(chunkedExecutor, compileRecipe(pc, *device));
  std::vector<HostTensor> state;
  Named named;
  ASSERT_NO_FATAL_FAILURE(
      init(*program, state, named, reference::Precision::F32));
  std::vector<std::string> names = resultNames(program->fn("train_step"));
  const double lr = 1e-3;
  for (int64_t iteration : {0, 1}) {
    std::vector<HostTensor> args =
        trainArgs(state, iteration, promptsOf(program->setup));
    ASSERT_OK_AND_ASSIGN(a, compiledStep(args));
    ASSERT_OK_AND_ASSIGN(b, runCompiledStep(*chunkedExecutor, pc, args));
    ASSERT_EQ(a.size(), b.size());
    Named w = byName(program->fn("train_step"), a);
    EXPECT_GT(scalar(w, "reward_std"), 0.0);
    EXPECT_EQ(scalar(w, "skipped"), 0.0);
    // The moments relative to the largest of their kind (a zero-in-exact-
    // arithmetic gradient's moments are rounding noise, see above).
    std::map<std::string, double> momentScale;
    for (size_t i = 0; i < a.size(); ++i)
      if (names[i].rfind("adamw.", 0) == 0 && a[i].isFloat())
        for (double v : a[i].floats())
          momentScale[names[i].substr(0, 8)] =
              std::max(momentScale[names[i].substr(0, 8)], std::abs(v));
    for (size_t i = 0; i < a.size(); ++i) {
      SCOPED_TRACE("iteration " + std::to_string(iteration) + ", result '" +
                   names[i] + "'");
      ASSERT_EQ(a[i].shape(), b[i].shape());
      if (!a[i].isFloat()) {
        EXPECT_TRUE(bitEqual(a[i], b[i]));
        continue;
      }
      double scale = 0, diff = 0;
      for (int64_t k = 0; k < a[i].numElements(); ++k) {
        scale = std::max(scale, std::abs(a[i].floats()[k]));
        diff = std::max(diff, std::abs(a[i].floats()[k] - b[i].floats()[k]));
      }
      const std::string &n = names[i];
      if (n == "images")
        EXPECT_LE(diff, 8 * 0x1p-23);
      else if (n.rfind("adamw.", 0) == 0)
        EXPECT_LE(diff, 1e-4 * momentScale[n.substr(0, 8)]);
      else if (std::find(kMetrics.begin(), kMetrics.end(), n) != kMetrics.end())
        EXPECT_LE(diff, 1e-5 * std::max(scale, 1e-3));
      else
        EXPECT_LE(diff, 2 * lr * (1 + 1e-3));
    }
  }
}

TEST_F(CompiledRecipeTest, NonFiniteGradientNormSkipsTheUpdate) {
  const Program &p = *program;
  size_t K = p.numState();
  std::vector<HostTensor> state0;
  Named named;
  ASSERT_NO_FATAL_FAILURE(init(p, state0, named, reference::Precision::F32));
  HostTensor prompts = promptsOf(p.setup);
  // One ordinary update first, so the moments and the step are not zero.
  ASSERT_OK_AND_ASSIGN(first,
                       evaluate(p, "train_step", trainArgs(state0, 0, prompts),
                                reference::Precision::F32));
  std::vector<HostTensor> state1(first.begin(), first.begin() + K);
  ASSERT_EQ(byName(p.fn("train_step"), first)["adamw.step"].intAt(0), 1);

  std::vector<std::string> names = resultNames(p.fn("init_state"));
  auto indexOf = [&](const std::string &name) {
    return std::find(names.begin(), names.end(), name) - names.begin();
  };
  // A NaN or an infinity in the frozen KL reference: the rollout (hence
  // the images and the reward) is untouched, the KL term and with it the
  // gradient are not finite.
  size_t ref = indexOf("ref.transformer.proj_out.bias");
  ASSERT_LT(ref, K);
  // A NaN or infinity in a trained weight: the rollout's images are not
  // finite either; the recipe zeroes them for the reward so the iteration
  // completes, and the loss and gradient are not finite.
  size_t trained = indexOf("transformer.proj_out.bias");
  ASSERT_LT(trained, K);
  using Run = std::function<absl::StatusOr<std::vector<HostTensor>>(
      const std::vector<HostTensor> &)>;
  std::vector<std::pair<std::string, Run>> runners = {
      {"evaluator",
       [&](const std::vector<HostTensor> &a) {
         return evaluate(p, "train_step", a, reference::Precision::F32);
       }},
      {"compiled",
       [&](const std::vector<HostTensor> &a) { return compiledStep(a); }}};
  for (size_t target : {ref, trained})
    for (double poison : {std::numeric_limits<double>::quiet_NaN(),
                          std::numeric_limits<double>::infinity()}) {
      std::vector<HostTensor> bad = state1;
      bad[target].floats()[1] = poison;
      for (auto &[runner, run] : runners) {
        SCOPED_TRACE(runner + ", poison " + num(poison) + " in " +
                     names[target]);
        ASSERT_OK_AND_ASSIGN(out, run(trainArgs(bad, 1, prompts)));
        Named n = byName(p.fn("train_step"), out);
        EXPECT_EQ(scalar(n, "skipped"), 1.0);
        EXPECT_FALSE(std::isfinite(scalar(n, "grad_norm")));
        if (target == ref)
          EXPECT_FALSE(std::isfinite(scalar(n, "kl")));
        else
          EXPECT_FALSE(std::isfinite(scalar(n, "loss")));
        for (double v : n["images"].floats())
          ASSERT_TRUE(std::isfinite(v));
        for (size_t i = 0; i < K; ++i)
          EXPECT_TRUE(bitEqual(out[i], bad[i])) << "state '" << names[i] << "'";
      }
    }
  // The control: the same state without the poison is updated.
  for (auto &[runner, run] : runners) {
    SCOPED_TRACE(runner);
    ASSERT_OK_AND_ASSIGN(out, run(trainArgs(state1, 1, prompts)));
    Named n = byName(p.fn("train_step"), out);
    EXPECT_EQ(scalar(n, "skipped"), 0.0);
    EXPECT_EQ(n["adamw.step"].intAt(0), 2);
    EXPECT_FALSE(bitEqual(n["transformer.proj_out.weight"],
                          state1[indexOf("transformer.proj_out.weight")]));
    EXPECT_FALSE(bitEqual(n["ema.transformer.proj_out.weight"],
                          state1[indexOf("ema.transformer.proj_out.weight")]));
  }
}

//===----------------------------------------------------------------------===//
// 3. The math, in float64, against the rebuilt rollout
//===----------------------------------------------------------------------===//

/// Runs @train_step (float64) and checks it against `rollout` and the
/// formulas; returns its named results.
void checkIteration(const Program &p, const std::vector<HostTensor> &state,
                    const Named &named, int64_t iteration, Named &results) {
  const Recipe &s = p.setup;
  HostTensor prompts = promptsOf(s);
  ASSERT_OK_AND_ASSIGN(
      out, evaluate(p, "train_step", trainArgs(state, iteration, prompts)));
  results = byName(p.fn("train_step"), out);
  const HostTensor &images = results["images"];

  // The images are the rebuilt rollout's with the drawn window start.
  int64_t start = windowStart(s, iteration);
  ASSERT_OK_AND_ASSIGN(r, rollout(p, named, prompts, iteration, start));
  EXPECT_LE(relativeError(images, r.images), 1e-12);

  // Rewards: the registered reward on the images, then docs/flowgrpo-math.md 5.
  std::vector<float> pixels(images.floats().begin(), images.floats().end());
  ::omni::rewards::ImageBatch batch{pixels.data(), images.shape()};
  ASSERT_OK_AND_ASSIGN(rewards,
                       ::omni::rewards::computeReward(s.reward, batch));
  std::vector<double> rw(rewards.begin(), rewards.end());
  double mean = std::accumulate(rw.begin(), rw.end(), 0.0) / rw.size(), var = 0;
  for (double x : rw)
    var += (x - mean) * (x - mean) / rw.size();
  EXPECT_NEAR(scalar(results, "reward_mean"), mean, 1e-12 * std::abs(mean));
  EXPECT_NEAR(scalar(results, "reward_std"), std::sqrt(var),
              1e-9 * std::sqrt(var) + 1e-15);
  fgr::AdvantageOptions ao;
  ao.groupSize = s.group;
  ASSERT_OK_AND_ASSIGN(adv, fgr::groupAdvantages<double>(rw, ao));
  double advMean = 0, clampedMean = 0, advScale = 1e-30;
  for (double a : adv) {
    advMean += a / adv.size();
    clampedMean += std::clamp(a, -5.0, 5.0) / adv.size();
    advScale = std::max(advScale, std::abs(a));
  }
  EXPECT_NEAR(scalar(results, "advantage_mean"), advMean, 1e-9 * advScale);
  // On-policy (one update per rollout, same weights): r == 1.
  EXPECT_NEAR(scalar(results, "loss"), -clampedMean, 1e-9 * advScale);
  EXPECT_NEAR(scalar(results, "loss"), -scalar(results, "advantage_mean"),
              1e-9 * advScale);
  EXPECT_LE(scalar(results, "approx_kl"), 1e-24);
  EXPECT_EQ(scalar(results, "clipfrac"), 0.0);
  EXPECT_EQ(scalar(results, "kl"), 0.0);
  EXPECT_EQ(scalar(results, "skipped"), 0.0);
  EXPECT_TRUE(std::isfinite(scalar(results, "grad_norm")));
}

TEST_F(RecipeTest, OnPolicyIterationMatchesTheFormulas) {
  Recipe s; // N = 3, W = 1 in [0, 2), jpeg_compressibility
  ASSERT_OK_AND_ASSIGN(p, buildProgram(s));
  std::vector<HostTensor> state;
  Named named;
  ASSERT_NO_FATAL_FAILURE(init(p, state, named));
  Named results;
  ASSERT_NO_FATAL_FAILURE(checkIteration(p, state, named, 0, results));
  EXPECT_GT(scalar(results, "reward_std"), 0.0)
      << "the images should get different JPEG sizes";
  EXPECT_GT(scalar(results, "grad_norm"), 0.0);

  // @loss on the rebuilt rollout with the rollout's own log-probs and
  // advantages that do not average to 0: L = -mean(clamp(A, +-5)).
  HostTensor prompts = promptsOf(s);
  ASSERT_OK_AND_ASSIGN(r, rollout(p, named, prompts, 0, windowStart(s, 0)));
  std::vector<double> adv = {1.0, -2.0, 6.0, 0.5};
  ASSERT_OK_AND_ASSIGN(args, lossArgs(p, named, r, r.lps, adv, prompts));
  ASSERT_OK_AND_ASSIGN(loss, evaluate(p, "loss", args));
  EXPECT_NEAR(loss[0].doubleAt(0), -(1.0 - 2.0 + 5.0 + 0.5) / 4, 1e-12);
  EXPECT_LE(loss[1].doubleAt(0), 1e-24);
  EXPECT_EQ(loss[2].doubleAt(0), 0.0);
  EXPECT_EQ(loss[3].doubleAt(0), 0.0);
  // The window's log-probs are real (not the Euler step's zeros), so
  // shifting the old ones moves the ratio: every sample leaves the clip
  // range of 1e-4.
  std::vector<double> shifted = r.lps;
  for (double &v : shifted)
    v -= 1e-3;
  ASSERT_OK_AND_ASSIGN(args2, lossArgs(p, named, r, shifted, adv, prompts));
  ASSERT_OK_AND_ASSIGN(loss2, evaluate(p, "loss", args2));
  EXPECT_EQ(loss2[2].doubleAt(0), 1.0);
  EXPECT_NEAR(loss2[1].doubleAt(0), 0.5e-6, 1e-12);
  for (int64_t b = 0; b < s.batch(); ++b)
    EXPECT_NE(r.lps[r.start * s.batch() + b], 0.0);
}

/// flow_grpo's EMAModuleWrapper.step(params, n) after the n-th optimizer
/// step (docs/flowgrpo-math.md section 7): with ema_decay 0.2 and
/// ema_every 1, d = min(0.2, (1 + n) / (10 + n)) is 2/11 at n = 1 and the
/// cap 0.2 at n = 2 and 3; with 0.9 and 2, n = 1 and 3 update (d = 2/11,
/// 4/13) and n = 2 leaves the EMA as it was, bit for bit.
TEST_F(RecipeTest, EmaFollowsTheFlowGrpoFormula) {
  for (auto [decay, every] :
       std::vector<std::pair<double, int64_t>>{{0.2, 1}, {0.9, 2}}) {
    SCOPED_TRACE("ema_decay " + num(decay) + ", ema_every " +
                 std::to_string(every));
    Recipe s;
    s.extra = {"ema_decay=" + num(decay), "ema_every=" + std::to_string(every)};
    ASSERT_OK_AND_ASSIGN(p, buildProgram(s));
    std::vector<HostTensor> state;
    Named named;
    ASSERT_NO_FATAL_FAILURE(init(p, state, named));
    // The EMA starts at the initial weights, one per trained parameter
    // (full fine-tuning: every transformer parameter).
    std::vector<std::string> emas;
    size_t params = 0;
    for (const auto &[name, t] : named) {
      params += name.rfind("transformer.", 0) == 0;
      if (name.rfind("ema.", 0) != 0)
        continue;
      emas.push_back(name);
      EXPECT_TRUE(bitEqual(t, named.at(name.substr(4)))) << name;
    }
    ASSERT_EQ(emas.size(), params);
    HostTensor prompts = promptsOf(s);
    int updates = 0;
    for (int64_t it = 0; it < 3; ++it) {
      ASSERT_OK_AND_ASSIGN(
          out, evaluate(p, "train_step", trainArgs(state, it, prompts)));
      Named next = byName(p.fn("train_step"), out);
      int64_t n = next.at("adamw.step").intAt(0);
      ASSERT_EQ(n, it + 1);
      bool due = (n + 1) % every == 0;
      updates += due;
      double d = std::min(decay, (1.0 + n) / (10.0 + n));
      for (const std::string &e : emas) {
        SCOPED_TRACE(e + " after step " + std::to_string(n));
        const HostTensor &was = named.at(e), &now = next.at(e),
                         &param = next.at(e.substr(4));
        if (!due) {
          EXPECT_TRUE(bitEqual(now, was));
          continue;
        }
        std::vector<double> want;
        for (int64_t i = 0; i < was.numElements(); ++i)
          want.push_back(was.doubleAt(i) +
                         (1 - d) * (param.doubleAt(i) - was.doubleAt(i)));
        EXPECT_LE(relativeError(now, want), 1e-13);
        EXPECT_FALSE(bitEqual(now, was)); // it moved
      }
      state.assign(out.begin(), out.begin() + p.numState());
      named = std::move(next);
    }
    EXPECT_EQ(updates, every == 1 ? 3 : 2);
  }
}

/// ema_decay = 0 (the default) emits nothing for the EMA, whatever
/// ema_every says: the program is the one without the options.
TEST_F(RecipeTest, EmaOffIsTheProgramWithoutIt) {
  Recipe plain, off, on;
  off.extra = {"ema_decay=0", "ema_every=3"};
  on.extra = {"ema_decay=0.5", "ema_every=3"};
  ASSERT_OK_AND_ASSIGN(pp, buildProgram(plain));
  ASSERT_OK_AND_ASSIGN(po, buildProgram(off));
  ASSERT_OK_AND_ASSIGN(pe, buildProgram(on));
  auto text = [](ModuleOp m) {
    std::string out;
    llvm::raw_string_ostream os(out);
    m.print(os, OpPrintingFlags().enableDebugInfo());
    return out;
  };
  EXPECT_EQ(text(*pp.module), text(*po.module));
  EXPECT_NE(text(*pp.module), text(*pe.module));
  for (const std::string &n : resultNames(pp.emitted("init_state")))
    EXPECT_NE(n.rfind("ema.", 0), 0u) << n;
}

/// With --mesh=fsdp=2 an EMA tensor is split over fsdp like its parameter.
TEST_F(RecipeTest, EmaShardsLikeTheParameters) {
  Recipe s;
  s.mesh = "fsdp=2";
  s.extra = {"ema_decay=0.9"};
  ASSERT_OK_AND_ASSIGN(p, buildProgram(s));
  func::FuncOp initFn = p.emitted("init_state"), step = p.emitted("train_step");
  std::vector<std::string> names = resultNames(initFn);
  size_t emas = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i].rfind("ema.", 0) != 0)
      continue;
    ++emas;
    size_t at = std::find(names.begin(), names.end(), names[i].substr(4)) -
                names.begin();
    ASSERT_LT(at, names.size()) << names[i];
    Attribute want = initFn.getResultAttr(at, "omni.sharding");
    EXPECT_TRUE(want) << names[at];
    EXPECT_EQ(initFn.getResultAttr(i, "omni.sharding"), want) << names[i];
    EXPECT_EQ(step.getArgAttr(i, "omni.sharding"), want) << names[i];
    EXPECT_EQ(step.getResultAttr(i, "omni.sharding"), want) << names[i];
  }
  EXPECT_GT(emas, 0u);
}

TEST_F(RecipeTest, WindowStartIsDrawnInRangeAndSeenInTheImages) {
  // N = 4, W = 1, starts 1..2: for each iteration, the images match
  // exactly one candidate window among 0..3, the drawn one.
  Recipe s;
  s.steps = 4;
  s.windowLo = 1;
  s.windowHi = 3;
  ASSERT_OK_AND_ASSIGN(p, buildProgram(s));
  std::vector<HostTensor> state;
  Named named;
  ASSERT_NO_FATAL_FAILURE(init(p, state, named));
  HostTensor prompts = promptsOf(s);
  std::set<int64_t> seen;
  for (int64_t iteration = 0; iteration < 6; ++iteration) {
    SCOPED_TRACE("iteration " + std::to_string(iteration));
    ASSERT_OK_AND_ASSIGN(
        out, evaluate(p, "train_step", trainArgs(state, iteration, prompts)));
    Named n = byName(p.fn("train_step"), out);
    const HostTensor &images = n["images"];
    std::vector<int64_t> matches;
    for (int64_t start = 0; start + s.window <= s.steps; ++start) {
      ASSERT_OK_AND_ASSIGN(r, rollout(p, named, prompts, iteration, start));
      if (relativeError(images, r.images) <= 1e-12)
        matches.push_back(start);
    }
    ASSERT_EQ(matches.size(), 1u);
    EXPECT_EQ(matches[0], windowStart(s, iteration));
    // @rollout_noise replays exactly the draws of this iteration.
    ASSERT_OK_AND_ASSIGN(
        drawn, evaluate(p, "rollout_noise",
                        {HostTensor::scalarInt(DType::I64, kSeed),
                         HostTensor::scalarInt(DType::I64, iteration)}));
    ASSERT_EQ(drawn.size(), 3u);
    EXPECT_EQ(drawn[2].intAt(0), matches[0]);
    int64_t B = s.batch(), elems = s.sampleElements();
    int64_t base = iteration * (s.steps + 2);
    std::vector<float> draw(B * elems);
    fgr::philoxNormal(kSeed, base, 0, draw.data(), B * elems);
    ASSERT_EQ(drawn[0].floats().size(), draw.size());
    for (int64_t j = 0; j < B * elems; ++j)
      ASSERT_EQ(drawn[0].floats()[j], static_cast<double>(draw[j])) << j;
    ASSERT_EQ(drawn[1].floats().size(),
              static_cast<size_t>(s.steps * B * elems));
    for (int64_t i = 0; i < s.steps; ++i) {
      fgr::philoxNormal(kSeed, base + 1 + i, 0, draw.data(), B * elems);
      for (int64_t j = 0; j < B * elems; ++j)
        ASSERT_EQ(drawn[1].floats()[i * B * elems + j],
                  static_cast<double>(draw[j]))
            << "step " << i << ", element " << j;
    }
    EXPECT_GE(matches[0], s.windowLo);
    EXPECT_LE(matches[0], s.windowHi - s.window);
    seen.insert(matches[0]);
  }
  EXPECT_EQ(seen.size(), 2u) << "both starts should occur in 6 iterations";
}

TEST_F(RecipeTest, WindowZeroTrainsEveryStepButTheLast) {
  Recipe s;
  s.window = 0;
  s.steps = 3;
  ASSERT_OK_AND_ASSIGN(p, buildProgram(s));
  std::vector<HostTensor> state;
  Named named;
  ASSERT_NO_FATAL_FAILURE(init(p, state, named));
  Named results;
  ASSERT_NO_FATAL_FAILURE(checkIteration(p, state, named, 1, results));
  // Both trained steps enter the loss: dropping either one's old log-prob
  // by 1e-3 gives approx_kl = (1e-6 / 2) / 2.
  HostTensor prompts = promptsOf(s);
  ASSERT_OK_AND_ASSIGN(r, rollout(p, named, prompts, 0, 0));
  EXPECT_EQ(r.end, 2);
  for (int64_t j = 0; j < 2; ++j) {
    std::vector<double> old = r.lps;
    for (int64_t b = 0; b < s.batch(); ++b)
      old[j * s.batch() + b] -= 1e-3;
    ASSERT_OK_AND_ASSIGN(args, lossArgs(p, named, r, old,
                                        std::vector<double>(s.batch(), 1.0),
                                        prompts));
    ASSERT_OK_AND_ASSIGN(loss, evaluate(p, "loss", args));
    EXPECT_NEAR(loss[1].doubleAt(0), 0.25e-6, 1e-12) << "step " << j;
    EXPECT_EQ(loss[2].doubleAt(0), 0.5) << "step " << j;
  }
}

TEST_F(RecipeTest, NoiseLevelZeroIsDeterministicWithZeroLogProbs) {
  Recipe s;
  s.noiseLevel = 0.0;
  ASSERT_OK_AND_ASSIGN(p, buildProgram(s));
  std::vector<HostTensor> state;
  Named named;
  ASSERT_NO_FATAL_FAILURE(init(p, state, named));
  Named results;
  // checkIteration compares with the all-Euler rollout (a = 0 in the
  // window too).
  ASSERT_NO_FATAL_FAILURE(checkIteration(p, state, named, 0, results));
  // No log-probability: nothing to differentiate, and no NaN either.
  EXPECT_EQ(scalar(results, "grad_norm"), 0.0);
  HostTensor prompts = promptsOf(s);
  // @loss recomputes log-probs of exactly 0 (old ones 0): r = 1.
  ASSERT_OK_AND_ASSIGN(r, rollout(p, named, prompts, 0, windowStart(s, 0)));
  ASSERT_OK_AND_ASSIGN(args, lossArgs(p, named, r,
                                      std::vector<double>(r.lps.size(), 0.0),
                                      {1.0, -2.0, 6.0, 0.5}, prompts));
  ASSERT_OK_AND_ASSIGN(loss, evaluate(p, "loss", args));
  EXPECT_EQ(loss[0].doubleAt(0), -1.125);
  EXPECT_EQ(loss[1].doubleAt(0), 0.0);
  EXPECT_EQ(loss[2].doubleAt(0), 0.0);
  // The images do not depend on the step noise or the window: the
  // program with W = 0 (every step but the last in the window) samples
  // the same images from the same x_0.
  Recipe all = s;
  all.window = 0;
  ASSERT_OK_AND_ASSIGN(pa, buildProgram(all));
  ASSERT_OK_AND_ASSIGN(
      out, evaluate(pa, "train_step", trainArgs(state, 0, prompts)));
  EXPECT_TRUE(byName(pa.fn("train_step"), out)["images"] == results["images"]);
  EXPECT_EQ(scalar(byName(pa.fn("train_step"), out), "grad_norm"), 0.0);
}

//===----------------------------------------------------------------------===//
// 4. Gradients against finite differences
//===----------------------------------------------------------------------===//

/// @loss's four results by docs/flowgrpo-math.md section 6, from @velocity and
/// runtime/flowgrpo's sde_step: (loss, approx_kl, clipfrac, kl). The KL
/// reference is `ref.<name>` where the state has it, else the weights with
/// every lora_B zero.
absl::StatusOr<std::array<double, 4>>
lossByFormula(const Program &p, const Named &state, const Rollout &r,
              const std::vector<double> &old, const std::vector<double> &adv,
              const HostTensor &prompts, bool exactKl) {
  const Recipe &s = p.setup;
  int64_t B = s.batch(), n = s.sampleElements();
  int64_t T = s.window > 0 ? s.window : s.steps - 1;
  absl::StatusOr<std::vector<float>> sigmas = fgr::staticShiftSigmas(s.steps);
  if (!sigmas.ok())
    return sigmas.status();
  std::vector<float> timesteps = fgr::timestepsFromSigmas(*sigmas);
  Named ref = state;
  for (auto &[name, t] : ref) {
    auto copy = state.find("ref." + name);
    if (copy != state.end())
      t = copy->second;
    else if (name.find(".lora_B.") != std::string::npos)
      t = HostTensor(t.dtype(), t.shape());
  }
  Shape xShape = s.latent();
  xShape.insert(xShape.begin(), B);
  HostTensor pooled = repeatGroups(s, prompts);
  std::array<double, 4> sum = {0, 0, 0, 0};
  for (int64_t k = 0; k < T; ++k) {
    int64_t j = r.start + k;
    std::vector<double> x(r.xs.begin() + j * B * n,
                          r.xs.begin() + (j + 1) * B * n),
        next(r.xs.begin() + (j + 1) * B * n, r.xs.begin() + (j + 2) * B * n);
    fgr::SdeStepOptions o;
    o.noiseLevel = s.noiseLevel;
    std::vector<std::vector<double>> means;
    std::vector<double> lp;
    double stdv = 0;
    for (const Named *weights : std::array<const Named *, 2>{&state, &ref}) {
      auto args = argsByName(
          p.fn("velocity"),
          {f32Exact(xShape, x),
           f32Exact({B}, std::vector<double>(B, timesteps[j])), pooled},
          *weights);
      if (!args.ok())
        return args.status();
      auto v = evaluate(p, "velocity", *args);
      if (!v.ok())
        return v.status();
      auto step = fgr::sdeStepWithNext<double>(*sigmas, j, o, B, x,
                                               valuesOf((*v)[0]), next);
      if (!step.ok())
        return step.status();
      means.push_back(step->mean);
      if (weights == &state) {
        lp = step->logProb;
        stdv = step->std;
      }
    }
    double dt = double((*sigmas)[j + 1]) - double((*sigmas)[j]);
    double pg = 0, akl = 0, cf = 0, kl = 0;
    for (int64_t b = 0; b < B; ++b) {
      double ratio = std::exp(lp[b] - old[j * B + b]);
      double a = std::clamp(adv[b], -5.0, 5.0), c = s.clipRange;
      pg += std::max(-a * ratio, -a * std::clamp(ratio, 1 - c, 1 + c)) / B;
      akl += (lp[b] - old[j * B + b]) * (lp[b] - old[j * B + b]) / 2 / B;
      cf += (std::abs(ratio - 1) > c ? 1.0 : 0.0) / B;
      double sq = 0;
      for (int64_t e = 0; e < n; ++e) {
        double d = means[0][b * n + e] - means[1][b * n + e];
        sq += d * d / n;
      }
      kl += sq / (2 * stdv * stdv * (exactKl ? -dt : 1.0)) / B;
    }
    if (s.beta == 0)
      kl = 0;
    sum[0] += (pg + s.beta * kl) / T;
    sum[1] += akl / T;
    sum[2] += cf / T;
    sum[3] += kl / T;
  }
  return sum;
}

struct GradientCase {
  std::string name;
  double beta;
  int64_t loraRank;
  std::vector<std::string> params; // checked trainable parameters
  std::string klForm = "reference";
};

void PrintTo(const GradientCase &c, std::ostream *os) { *os << c.name; }

class GradientTest : public RecipeTest,
                     public ::testing::WithParamInterface<GradientCase> {};

TEST_P(GradientTest, LossGradientMatchesFiniteDifferences) {
  const GradientCase &c = GetParam();
  Recipe s;
  s.beta = c.beta;
  s.loraRank = c.loraRank;
  s.clipRange = 0.2;
  s.extra = {"kl_form=" + c.klForm};
  ASSERT_OK_AND_ASSIGN(p, buildProgram(s));
  std::vector<HostTensor> state;
  Named named;
  ASSERT_NO_FATAL_FAILURE(init(p, state, named));
  // Move away from init so every term has a gradient: LoRA's B (0 at
  // init) and the KL reference (equal to the weights at init).
  uint64_t salt = 100;
  for (auto &[name, t] : named) {
    bool loraB = name.find(".lora_B.") != std::string::npos;
    bool ref = name.rfind("ref.", 0) == 0;
    if (!loraB && !ref)
      continue;
    HostTensor d = randomF32(t.shape(), ++salt, -0.1, 0.1);
    for (int64_t i = 0; i < t.numElements(); ++i)
      t.floats()[i] += d.floats()[i];
  }
  HostTensor prompts = promptsOf(s);
  ASSERT_OK_AND_ASSIGN(r, rollout(p, named, prompts, 0, windowStart(s, 0)));
  // Off-policy ratios, one sample clipped (A < 0, r = e^-0.5 < 0.8).
  std::vector<double> offset = {0.02, 0.5, -0.03, 0.01}, old = r.lps;
  for (int64_t j = 0; j < s.steps; ++j)
    for (int64_t b = 0; b < s.batch(); ++b)
      old[j * s.batch() + b] += offset[b];
  std::vector<double> adv = {0.9, -1.3, 0.4, -0.2};
  ASSERT_OK_AND_ASSIGN(args, lossArgs(p, named, r, old, adv, prompts));

  // The gradient function @train_step calls.
  func::FuncOp vg;
  p.expanded->walk([&](func::FuncOp f) {
    if (f.getSymName().starts_with("loss_value_and_grad"))
      vg = f;
  });
  ASSERT_TRUE(vg);
  bool called = false;
  p.fn("train_step").walk([&](func::CallOp call) {
    called |= call.getCallee() == vg.getSymName();
  });
  EXPECT_TRUE(called);
  ASSERT_OK_AND_ASSIGN(grads, evaluate(p, vg.getSymName(), args));
  ASSERT_OK_AND_ASSIGN(value, evaluate(p, "loss", args));
  size_t trainable = grads.size() - 4;
  for (int q = 0; q < 4; ++q)
    EXPECT_NEAR(grads[q].doubleAt(0), value[q].doubleAt(0),
                1e-12 * std::max(1.0, std::abs(value[q].doubleAt(0))));
  if (c.beta > 0) {
    EXPECT_GT(value[3].doubleAt(0), 1e-8) << "the KL term should be active";
  }
  EXPECT_EQ(value[2].doubleAt(0), 0.25) << "one sample of four is clipped";
  // The value itself, by the formulas.
  ASSERT_OK_AND_ASSIGN(formula, lossByFormula(p, named, r, old, adv, prompts,
                                              c.klForm == "exact"));
  const char *what[4] = {"loss", "approx_kl", "clipfrac", "kl"};
  for (int q = 0; q < 4; ++q)
    EXPECT_NEAR(value[q].doubleAt(0), formula[q],
                1e-10 * std::max(1e-3, std::abs(formula[q])))
        << what[q];

  std::vector<std::string> names = argNames(p.fn("loss"));
  double loss = value[0].doubleAt(0);
  for (const std::string &param : c.params) {
    SCOPED_TRACE(param);
    size_t k = std::find(names.begin(), names.end(), param) - names.begin();
    ASSERT_LT(k, trainable) << "not a trainable argument of @loss";
    const HostTensor &g = grads[4 + k];
    ASSERT_EQ(g.shape(), args[k].shape());
    // The three largest gradient elements, the first and a middle one.
    std::vector<int64_t> order(g.numElements());
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + 3, order.end(),
                      [&](int64_t a, int64_t b) {
                        return std::abs(g.floats()[a]) >
                               std::abs(g.floats()[b]);
                      });
    std::vector<int64_t> picks(order.begin(), order.begin() + 3);
    picks.push_back(0);
    picks.push_back(g.numElements() / 2);
    double largest = 0;
    for (int64_t e : picks) {
      std::vector<HostTensor> a = args;
      double x = a[k].floats()[e], h = 1e-4 * std::max(1.0, std::abs(x));
      a[k].floats()[e] = x + h;
      ASSERT_OK_AND_ASSIGN(up, evaluate(p, "loss", a));
      a[k].floats()[e] = x - h;
      ASSERT_OK_AND_ASSIGN(down, evaluate(p, "loss", a));
      double fd = (up[0].doubleAt(0) - down[0].doubleAt(0)) / (2 * h);
      double got = g.floats()[e];
      EXPECT_NEAR(got, fd,
                  1e-5 * std::abs(fd) + 1e-11 * std::max(1.0, std::abs(loss)))
          << "element " << e;
      largest = std::max(largest, std::abs(fd));
    }
    EXPECT_GT(largest, 1e-6) << "a vacuous check: the gradient is ~0";
  }
}

const std::string kBlock = "transformer.transformer_blocks.0.";

INSTANTIATE_TEST_SUITE_P(
    Recipe, GradientTest,
    ::testing::Values(
        GradientCase{
            "Full",
            0.0,
            0,
            {"transformer.proj_out.weight", kBlock + "attn.to_k.weight",
             "transformer.time_text_embed.text_embedder.linear_1.bias"}},
        GradientCase{"FullKl",
                     0.04,
                     0,
                     {"transformer.proj_out.weight",
                      kBlock + "attn.to_v.weight",
                      kBlock + "norm1.linear.weight"}},
        GradientCase{"FullExactKl",
                     0.04,
                     0,
                     {"transformer.proj_out.bias", kBlock + "attn.to_q.weight"},
                     "exact"},
        GradientCase{"LoraKl",
                     0.04,
                     2,
                     {kBlock + "attn.to_q.lora_A.weight",
                      kBlock + "attn.to_out.0.lora_B.weight",
                      kBlock + "attn.to_v.lora_B.weight"}}),
    [](const ::testing::TestParamInfo<GradientCase> &info) {
      return info.param.name;
    });

TEST_F(RecipeTest, LoraAtInitIsTheBaseModel) {
  Recipe base, lora;
  lora.loraRank = 2;
  ASSERT_OK_AND_ASSIGN(pb, buildProgram(base));
  ASSERT_OK_AND_ASSIGN(pl, buildProgram(lora));
  std::vector<HostTensor> state;
  Named named;
  ASSERT_NO_FATAL_FAILURE(init(pl, state, named));
  int adaptersB = 0;
  for (const auto &[name, t] : named) {
    if (name.rfind("transformer.", 0) != 0)
      continue;
    if (name.find(".lora_B.") != std::string::npos) {
      ++adaptersB;
      for (double v : t.floats())
        ASSERT_EQ(v, 0.0) << name;
    }
    if (name.find(".lora_A.") != std::string::npos) {
      EXPECT_TRUE(std::any_of(t.floats().begin(), t.floats().end(),
                              [](double v) { return v != 0.0; }))
          << name << " should be random";
    }
  }
  EXPECT_EQ(adaptersB, 4);

  Shape xs = base.latent();
  xs.insert(xs.begin(), base.batch());
  HostTensor x = randomF32(xs, 3, -2.0, 2.0);
  HostTensor t = HostTensor::fromDoubles(DType::F32, {base.batch()},
                                         {1000.0, 760.0, 310.0, 45.0});
  HostTensor pooled = repeatGroups(base, promptsOf(base));
  // The base program's @velocity takes the LoRA state's base weights by
  // name.
  ASSERT_OK_AND_ASSIGN(baseArgs,
                       argsByName(pb.fn("velocity"), {x, t, pooled}, named));
  ASSERT_OK_AND_ASSIGN(loraArgs,
                       argsByName(pl.fn("velocity"), {x, t, pooled}, named));
  ASSERT_OK_AND_ASSIGN(vb, evaluate(pb, "velocity", baseArgs));
  ASSERT_OK_AND_ASSIGN(vl, evaluate(pl, "velocity", loraArgs));
  EXPECT_TRUE(vl[0] == vb[0])
      << "max relative difference " << relativeError(vl[0], valuesOf(vb[0]));
  // The control: with B != 0 the adapters change the velocity.
  for (auto &[name, tensor] : named)
    if (name.find(".lora_B.") != std::string::npos)
      tensor = randomF32(tensor.shape(), 5, -0.5, 0.5);
  ASSERT_OK_AND_ASSIGN(moved,
                       argsByName(pl.fn("velocity"), {x, t, pooled}, named));
  ASSERT_OK_AND_ASSIGN(vm, evaluate(pl, "velocity", moved));
  EXPECT_GT(relativeError(vm[0], valuesOf(vb[0])), 1e-4);
}

//===----------------------------------------------------------------------===//
// 6. Classifier-free guidance
//===----------------------------------------------------------------------===//

TEST_F(RecipeTest, GuidanceCombinesConditionalAndUnconditional) {
  Recipe plain, cfg;
  cfg.guidance = 4.5;
  ASSERT_OK_AND_ASSIGN(pp, buildProgram(plain));
  ASSERT_OK_AND_ASSIGN(pc, buildProgram(cfg)); // buildProgram verifies
  std::vector<HostTensor> state;
  Named named;
  ASSERT_NO_FATAL_FAILURE(init(pp, state, named));
  // The guided @velocity takes the runtime guidance_scale last and the
  // unconditional branch's pooled conditioning [1, Dp] after `pooled`
  // (docs/recipes.md section 2); @train_step takes it after the prompts.
  std::vector<std::string> guided = argNames(pc.fn("velocity"));
  ASSERT_GE(guided.size(), 4u);
  EXPECT_EQ(guided.back(), "guidance_scale");
  guided.pop_back();
  EXPECT_EQ(guided[3], "negative_pooled");
  EXPECT_EQ(cast<RankedTensorType>(pc.fn("velocity").getArgumentTypes()[3])
                .getShape(),
            ArrayRef<int64_t>({1, plain.pooledDim}));
  guided.erase(guided.begin() + 3);
  EXPECT_EQ(argNames(pp.fn("velocity")), guided);
  std::vector<std::string> step = argNames(pc.fn("train_step"));
  auto pooledAt = std::find(step.begin(), step.end(), "pooled_prompt_embeds");
  ASSERT_NE(pooledAt, step.end());
  ASSERT_NE(pooledAt + 1, step.end());
  EXPECT_EQ(pooledAt[1], "negative_pooled_prompt_embeds");
  // Without CFG nothing takes a negative.
  for (const std::string &n : argNames(pp.fn("train_step")))
    EXPECT_FALSE(isNegative(n)) << n;

  Shape xs = plain.latent();
  xs.insert(xs.begin(), plain.batch());
  HostTensor x = randomF32(xs, 4, -2.0, 2.0);
  HostTensor t = HostTensor::fromDoubles(DType::F32, {plain.batch()},
                                         {1000.0, 900.0, 500.0, 100.0});
  HostTensor pooled = repeatGroups(plain, promptsOf(plain));
  HostTensor zeros(DType::F32, pooled.shape());
  ASSERT_OK_AND_ASSIGN(condArgs,
                       argsByName(pp.fn("velocity"), {x, t, pooled}, named));
  ASSERT_OK_AND_ASSIGN(uncondArgs,
                       argsByName(pp.fn("velocity"), {x, t, zeros}, named));
  ASSERT_OK_AND_ASSIGN(vc, evaluate(pp, "velocity", condArgs));
  ASSERT_OK_AND_ASSIGN(vu, evaluate(pp, "velocity", uncondArgs));
  ASSERT_OK_AND_ASSIGN(guidedArgs,
                       argsByName(pc.fn("velocity"), {x, t, pooled}, named));
  ASSERT_OK_AND_ASSIGN(vg, evaluate(pc, "velocity", guidedArgs));
  std::vector<double> want(vc[0].numElements());
  for (size_t i = 0; i < want.size(); ++i)
    want[i] = vu[0].floats()[i] + 4.5 * (vc[0].floats()[i] - vu[0].floats()[i]);
  EXPECT_LE(relativeError(vg[0], want), 1e-12);
  EXPECT_GT(relativeError(vg[0], valuesOf(vc[0])), 1e-3)
      << "guidance 4.5 should differ from one conditional forward";

  // A negative prompt: the unconditional forward is the plain model on the
  // negative broadcast over the batch.
  HostTensor negative = randomF32({1, plain.pooledDim}, 29);
  std::vector<double> wide;
  for (int64_t b = 0; b < plain.batch(); ++b)
    for (int64_t d = 0; d < plain.pooledDim; ++d)
      wide.push_back(negative.doubleAt(d));
  HostTensor broadcast = f32Exact({plain.batch(), plain.pooledDim}, wide);
  ASSERT_OK_AND_ASSIGN(negArgs,
                       argsByName(pp.fn("velocity"), {x, t, broadcast}, named));
  ASSERT_OK_AND_ASSIGN(vn, evaluate(pp, "velocity", negArgs));
  ASSERT_OK_AND_ASSIGN(
      negGuidedArgs,
      argsByName(pc.fn("velocity"), {x, t, pooled, negative}, named));
  ASSERT_OK_AND_ASSIGN(vgn, evaluate(pc, "velocity", negGuidedArgs));
  for (size_t i = 0; i < want.size(); ++i)
    want[i] = vn[0].floats()[i] + 4.5 * (vc[0].floats()[i] - vn[0].floats()[i]);
  EXPECT_LE(relativeError(vgn[0], want), 1e-12);
  EXPECT_GT(relativeError(vgn[0], valuesOf(vg[0])), 1e-3)
      << "a negative prompt should differ from zeros";

  // The guided program trains: one iteration with finite metrics.
  std::vector<HostTensor> cstate;
  Named cnamed;
  ASSERT_NO_FATAL_FAILURE(init(pc, cstate, cnamed));
  Named results;
  ASSERT_NO_FATAL_FAILURE(checkIteration(pc, cstate, cnamed, 0, results));
}

//===----------------------------------------------------------------------===//
// Qwen-Image's pipeline: the dynamic shift and true CFG (docs/recipes.md
// section 2, docs/flowgrpo-math.md section 1)
//===----------------------------------------------------------------------===//

/// A qwen_image tiny recipe at `size` x `size` latents.
Recipe qwenRecipe(int64_t size = 4) {
  Recipe r;
  r.qwen = true;
  r.channels = 16;
  r.size = size;
  return r;
}

/// The one omni.flow_schedule of @train_step's program, or null.
mlir::omni::FlowScheduleOp scheduleOf(const Program &p) {
  mlir::omni::FlowScheduleOp found;
  p.module.get().walk([&](mlir::omni::FlowScheduleOp op) { found = op; });
  return found;
}

/// The op's folded sigmas.
std::vector<double> foldedSigmas(mlir::omni::FlowScheduleOp op) {
  SmallVector<OpFoldResult> folded;
  if (failed(op->fold(folded)) || folded.size() != 2)
    return {};
  auto dense = dyn_cast<DenseElementsAttr>(cast<Attribute>(folded[0]));
  if (!dense)
    return {};
  std::vector<double> out;
  for (float v : dense.getValues<float>())
    out.push_back(v);
  return out;
}

/// QwenImagePipeline's schedule in closed form (float64): sigmas =
/// linspace(1, 1/N, N), mu = calculate_shift(seq, 256, 8192, 0.5, 0.9),
/// the exponential time shift e^mu / (e^mu + 1/s - 1), stretched so the
/// last is 0.02 (stretch_shift_to_terminal), then 0 appended.
std::vector<double> qwenSigmas(int64_t n, int64_t seq) {
  double m = (0.9 - 0.5) / (8192 - 256), b = 0.5 - m * 256;
  double mu = seq * m + b;
  std::vector<double> s;
  for (int64_t i = 0; i < n; ++i) {
    double base = 1.0 + (1.0 / n - 1.0) * i / (n - 1);
    s.push_back(std::exp(mu) / (std::exp(mu) + 1.0 / base - 1.0));
  }
  double scale = (1.0 - s.back()) / (1.0 - 0.02);
  for (double &v : s)
    v = 1.0 - (1.0 - v) / scale;
  s.push_back(0.0);
  return s;
}

TEST_F(RecipeTest, QwenImageSamplesOnTheDynamicShiftSchedule) {
  for (int64_t size : {4, 8}) {
    Recipe r = qwenRecipe(size);
    r.steps = 5;
    r.windowHi = 4;
    ASSERT_OK_AND_ASSIGN(p, buildProgram(r));
    mlir::omni::FlowScheduleOp op = scheduleOf(p);
    ASSERT_TRUE(op);
    EXPECT_EQ(op.getKind(), mlir::omni::ScheduleKind::dynamic_shift);
    int64_t seq = (size / 2) * (size / 2); // packed 2x2 tokens
    ASSERT_TRUE(op.getImageSeqLen());
    EXPECT_EQ(static_cast<int64_t>(*op.getImageSeqLen()), seq);
    std::vector<double> got = foldedSigmas(op), want = qwenSigmas(5, seq);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_NEAR(got[i], want[i], 4e-7 * std::abs(want[i]) + 1e-7)
          << "size " << size << " sigma " << i;
    EXPECT_NEAR(got[4], 0.02, 1e-7) << "shift_terminal";
  }
  // The dit (SD3's pipeline) keeps the static shift; schedule= forces
  // either kind on either model.
  Recipe dit;
  ASSERT_OK_AND_ASSIGN(pd, buildProgram(dit));
  EXPECT_EQ(scheduleOf(pd).getKind(), mlir::omni::ScheduleKind::static_shift);
  Recipe forced = qwenRecipe();
  forced.extra = {"schedule=static", "shift=2.5"};
  ASSERT_OK_AND_ASSIGN(ps, buildProgram(forced));
  EXPECT_EQ(scheduleOf(ps).getKind(), mlir::omni::ScheduleKind::static_shift);
  EXPECT_EQ(scheduleOf(ps).getShift().convertToDouble(), 2.5);
  Recipe dynamicDit;
  dynamicDit.extra = {"schedule=dynamic"};
  ASSERT_OK_AND_ASSIGN(pdd, buildProgram(dynamicDit));
  mlir::omni::FlowScheduleOp dd = scheduleOf(pdd);
  EXPECT_EQ(dd.getKind(), mlir::omni::ScheduleKind::dynamic_shift);
  EXPECT_EQ(static_cast<int64_t>(*dd.getImageSeqLen()),
            (dynamicDit.size / 2) * (dynamicDit.size / 2));

  Recipe bad;
  bad.extra = {"schedule=exponential"};
  auto built = fg::buildProgram(sharedContext(), bad.request());
  ASSERT_FALSE(static_cast<bool>(built));
  EXPECT_EQ(llvm::toString(built.takeError()),
            "flowgrpo option schedule: expected model, static or dynamic "
            "(found 'exponential')");
}

TEST_F(RecipeTest, TrueCfgOptionsAreOneLineErrors) {
  auto error = [](const Recipe &s) {
    auto built = fg::buildProgram(sharedContext(), s.request());
    return built ? std::string() : llvm::toString(built.takeError());
  };
  Recipe low = qwenRecipe();
  low.extra = {"true_cfg_scale=0.5"};
  EXPECT_EQ(error(low),
            "flowgrpo option true_cfg_scale: expected >= 1 (found 0.5)");
  Recipe both = qwenRecipe();
  both.guidance = 3.0;
  both.extra = {"true_cfg_scale=4"};
  EXPECT_EQ(error(both), "flowgrpo option true_cfg_scale/guidance_scale: "
                         "expected at most one of them != 1 (true CFG is CFG "
                         "with the norm rescale) (found true_cfg_scale 4, "
                         "guidance_scale 3)");
}

TEST_F(RecipeTest, TrueCfgRescalesTheCombinedPredictionToTheConditionalNorm) {
  Recipe plain = qwenRecipe(), cfg = qwenRecipe(), classic = qwenRecipe();
  cfg.extra = {"true_cfg_scale=4"};
  classic.guidance = 4.0;
  ASSERT_OK_AND_ASSIGN(pp, buildProgram(plain));
  ASSERT_OK_AND_ASSIGN(pc, buildProgram(cfg));
  ASSERT_OK_AND_ASSIGN(pk, buildProgram(classic));
  std::vector<HostTensor> state;
  Named named;
  ASSERT_NO_FATAL_FAILURE(init(pp, state, named));
  // True CFG takes the same arguments as CFG: the negative prompt and the
  // runtime guidance_scale (whose default is true_cfg_scale).
  EXPECT_EQ(argNames(pc.fn("velocity")), argNames(pk.fn("velocity")));
  EXPECT_EQ(hparamDefault(pc.fn("velocity"), "guidance_scale"), 4.0);

  const int64_t B = plain.batch(), C = plain.channels, S = plain.size,
                L = plain.textTokens, D = 32;
  HostTensor x = randomF32({B, C, S, S}, 4, -2.0, 2.0);
  HostTensor t =
      HostTensor::fromDoubles(DType::F32, {B}, {1000.0, 900.0, 500.0, 100.0});
  HostTensor prompt = randomF32({B, L, D}, 31);
  HostTensor negative = randomF32({1, L, D}, 29);
  std::vector<double> wide;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < L * D; ++i)
      wide.push_back(negative.doubleAt(i));
  HostTensor broadcast = f32Exact({B, L, D}, wide);
  ASSERT_OK_AND_ASSIGN(condArgs,
                       argsByName(pp.fn("velocity"), {x, t, prompt}, named));
  ASSERT_OK_AND_ASSIGN(negArgs,
                       argsByName(pp.fn("velocity"), {x, t, broadcast}, named));
  ASSERT_OK_AND_ASSIGN(vc, evaluate(pp, "velocity", condArgs));
  ASSERT_OK_AND_ASSIGN(vn, evaluate(pp, "velocity", negArgs));
  // qwen_image takes a text mask after the prompt: all tokens valid.
  HostTensor mask = HostTensor::fromDoubles(DType::F32, {B, L},
                                            std::vector<double>(B * L, 1.0));
  ASSERT_OK_AND_ASSIGN(
      guidedArgs,
      argsByName(pc.fn("velocity"), {x, t, prompt, mask, negative}, named));
  ASSERT_OK_AND_ASSIGN(vg, evaluate(pc, "velocity", guidedArgs));
  ASSERT_OK_AND_ASSIGN(
      classicArgs,
      argsByName(pk.fn("velocity"), {x, t, prompt, mask, negative}, named));
  ASSERT_OK_AND_ASSIGN(vk, evaluate(pk, "velocity", classicArgs));

  // By hand: comb = neg + 4 (cond - neg); each packed token (sample b,
  // patch (r, c)) holds the C x 2 x 2 values v[b, ch, 2r + i, 2c + j]; its
  // comb is scaled by ||cond|| / ||comb|| over them.
  std::vector<double> comb(vc[0].numElements()), want(comb.size());
  for (size_t i = 0; i < comb.size(); ++i)
    comb[i] = vn[0].floats()[i] + 4.0 * (vc[0].floats()[i] - vn[0].floats()[i]);
  auto at = [&](int64_t b, int64_t ch, int64_t y, int64_t xx) {
    return ((b * C + ch) * S + y) * S + xx;
  };
  for (int64_t b = 0; b < B; ++b)
    for (int64_t r = 0; r < S / 2; ++r)
      for (int64_t c = 0; c < S / 2; ++c) {
        double cn = 0, gn = 0;
        for (int64_t ch = 0; ch < C; ++ch)
          for (int64_t i = 0; i < 2; ++i)
            for (int64_t j = 0; j < 2; ++j) {
              int64_t k = at(b, ch, 2 * r + i, 2 * c + j);
              cn += vc[0].floats()[k] * vc[0].floats()[k];
              gn += comb[k] * comb[k];
            }
        for (int64_t ch = 0; ch < C; ++ch)
          for (int64_t i = 0; i < 2; ++i)
            for (int64_t j = 0; j < 2; ++j) {
              int64_t k = at(b, ch, 2 * r + i, 2 * c + j);
              want[k] = comb[k] * std::sqrt(cn) / std::sqrt(gn);
            }
      }
  EXPECT_LE(relativeError(vg[0], want), 1e-12);
  EXPECT_LE(relativeError(vk[0], comb), 1e-12) << "guidance_scale: no rescale";
  EXPECT_GT(relativeError(vg[0], comb), 1e-3)
      << "the rescale should change the combined prediction";

  // The runtime guidance_scale sets the true CFG scale.
  std::vector<HostTensor> atTwo = guidedArgs;
  atTwo.back() = HostTensor::fromDoubles(DType::F64, {}, {2.0});
  ASSERT_OK_AND_ASSIGN(v2, evaluate(pc, "velocity", atTwo));
  EXPECT_GT(relativeError(v2[0], valuesOf(vg[0])), 1e-3);

  // The true-CFG program trains: one iteration with finite metrics (the
  // independent rollout of checkIteration is the dit's static schedule).
  std::vector<HostTensor> cstate;
  Named cnamed;
  ASSERT_NO_FATAL_FAILURE(init(pc, cstate, cnamed));
  ASSERT_OK_AND_ASSIGN(
      out,
      evaluate(pc, "train_step",
               trainArgs(cstate, 0, randomF32({plain.prompts, L, D}, 11))));
  Named results = byName(pc.fn("train_step"), out);
  EXPECT_TRUE(std::isfinite(scalar(results, "loss")));
  EXPECT_GT(scalar(results, "grad_norm"), 0.0);
  EXPECT_TRUE(std::isfinite(scalar(results, "grad_norm")));
}

//===----------------------------------------------------------------------===//
// Mini-batches, micro-batches and inner epochs (docs/recipes.md section 3)
//===----------------------------------------------------------------------===//

TEST_F(RecipeTest, MiniBatchOptionsAreOneLineErrors) {
  auto error = [](const Recipe &s) {
    auto built = fg::buildProgram(sharedContext(), s.request());
    if (built)
      return std::string("(built)");
    return llvm::toString(built.takeError());
  };
  Recipe s; // batch 4
  s.extra = {"mini_batch_size=3"};
  EXPECT_EQ(error(s), "flowgrpo option mini_batch_size: expected 0 (the "
                      "batch) or a divisor of prompts_per_iteration * "
                      "group_size (found 3, batch 4)");
  s.extra = {"mini_batch_size=-2"};
  EXPECT_EQ(error(s), "flowgrpo option mini_batch_size: expected 0 (the "
                      "batch) or a divisor of prompts_per_iteration * "
                      "group_size (found -2, batch 4)");
  s.extra = {"mini_batch_size=2", "micro_batch_size=4"};
  EXPECT_EQ(error(s), "flowgrpo option micro_batch_size: expected 0 (the "
                      "mini-batch) or a divisor of mini_batch_size (found 4, "
                      "mini-batch 2)");
  s.extra = {"micro_batch_size=3"}; // the mini-batch is the batch, 4
  EXPECT_EQ(error(s), "flowgrpo option micro_batch_size: expected 0 (the "
                      "mini-batch) or a divisor of mini_batch_size (found 3, "
                      "mini-batch 4)");
  s.extra = {"inner_epochs=0"};
  EXPECT_EQ(error(s), "flowgrpo option inner_epochs: expected >= 1");
  s.extra = {"inner_epochs=two"};
  EXPECT_NE(error(s).find("inner_epochs"), std::string::npos) << error(s);
  // A mesh splits the batch over ranks; mini-batches of it are rejected.
  s.extra = {"mini_batch_size=2"};
  s.mesh = "dp=2";
  EXPECT_EQ(error(s), "--mesh=dp=2: mini_batch_size and micro_batch_size "
                      "must be the whole batch with a mesh (found mini-batch "
                      "2, micro-batch 2, batch 4); splitting the sharded "
                      "batch is not supported yet");
  s.extra = {"micro_batch_size=1"};
  EXPECT_NE(error(s).find("micro-batch 1, batch 4"), std::string::npos)
      << error(s);
  // Inner epochs over the whole batch need no split.
  s.extra = {"inner_epochs=2"};
  EXPECT_EQ(error(s), "(built)");
}

/// max |got - want| / max |want| <= tolerance, or both below `noise`: a
/// gradient that is 0 in exact arithmetic (attention's key bias: softmax
/// ignores a shift shared by a query's logits) is rounding noise whose
/// relative error means nothing.
bool closeOrNoise(const HostTensor &got, const std::vector<double> &want,
                  double tolerance, double noise) {
  double top = 0, gotTop = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    top = std::max(top, std::abs(want[i]));
    gotTop = std::max(gotTop, std::abs(got.doubleAt(i)));
  }
  if (top < noise && gotTop < noise)
    return true;
  return relativeError(got, want) <= tolerance;
}

/// The ops of type OpT in `f`'s body, loops included.
template <typename OpT> int64_t countOps(func::FuncOp f) {
  int64_t n = 0;
  f.walk([&](OpT) { ++n; });
  return n;
}

TEST_F(RecipeTest, MiniBatchesUnrollAndMicroBatchesLoop) {
  struct Case {
    int64_t mini, micro, epochs, wantCalls, wantSteps, lossBatch;
  };
  // batch 4; lossBatch: the samples @loss takes. One value_and_grad per
  // optimizer step: with micro-batches it is in an scf.for over them.
  for (Case c : std::vector<Case>{{0, 0, 1, 1, 1, 4},
                                  {2, 0, 2, 4, 4, 2},
                                  {0, 1, 1, 1, 1, 1},
                                  {4, 2, 3, 3, 3, 2},
                                  {2, 1, 2, 4, 4, 1}}) {
    SCOPED_TRACE("mini " + std::to_string(c.mini) + ", micro " +
                 std::to_string(c.micro) + ", epochs " +
                 std::to_string(c.epochs));
    Recipe s;
    s.extra = {"mini_batch_size=" + std::to_string(c.mini),
               "micro_batch_size=" + std::to_string(c.micro),
               "inner_epochs=" + std::to_string(c.epochs)};
    ASSERT_OK_AND_ASSIGN(p, buildProgram(s));
    func::FuncOp step = p.emitted("train_step"), loss = p.emitted("loss");
    EXPECT_EQ(countOps<mlir::omni::ValueAndGradOp>(step), c.wantCalls);
    int64_t inLoops = 0;
    step.walk([&](mlir::omni::ValueAndGradOp op) {
      if (auto loop = op->getParentOfType<scf::ForOp>()) {
        ++inLoops;
        EXPECT_EQ(loop.getStaticTripCount()->getSExtValue(),
                  (c.mini ? c.mini : s.batch()) / c.lossBatch);
      }
    });
    EXPECT_EQ(inLoops,
              c.lossBatch == (c.mini ? c.mini : s.batch()) ? 0 : c.wantCalls);
    // One global-norm square root per optimizer step (the AdamW update's
    // square roots are elementwise, on tensors of rank >= 1).
    int64_t norms = 0;
    step.walk([&](mlir::omni::SqrtOp op) {
      norms += cast<RankedTensorType>(op.getType()).getRank() == 0 &&
               cast<RankedTensorType>(op.getType()).getElementType().isF64();
    });
    EXPECT_EQ(norms, c.wantSteps);
    // @loss and the velocity it calls take the micro-batch.
    std::vector<std::string> names = argNames(loss);
    auto typeOf = [&](const std::string &name) {
      size_t i = std::find(names.begin(), names.end(), name) - names.begin();
      return i < names.size()
                 ? cast<RankedTensorType>(loss.getArgumentTypes()[i])
                       .getShape()
                       .vec()
                 : std::vector<int64_t>{-1};
    };
    EXPECT_EQ(typeOf("xs"), (std::vector<int64_t>{s.steps + 1, c.lossBatch,
                                                  s.channels, s.size, s.size}));
    EXPECT_EQ(typeOf("old_log_probs"),
              (std::vector<int64_t>{s.steps, c.lossBatch}));
    EXPECT_EQ(typeOf("advantages"), (std::vector<int64_t>{c.lossBatch}));
    EXPECT_EQ(typeOf("pooled"),
              (std::vector<int64_t>{c.lossBatch, s.pooledDim}));
    EXPECT_EQ(static_cast<bool>(p.emitted("velocity_micro")),
              c.lossBatch != s.batch());
    // The rollout still samples the whole batch with @velocity.
    EXPECT_EQ(
        cast<RankedTensorType>(p.emitted("velocity").getArgumentTypes()[0])
            .getDimSize(0),
        s.batch());
  }
}

TEST_F(RecipeTest, ExplicitWholeBatchOptionsEmitTheDefaultProgram) {
  Recipe plain, spelled;
  spelled.extra = {"mini_batch_size=4", "micro_batch_size=4", "inner_epochs=1"};
  ASSERT_OK_AND_ASSIGN(a, buildProgram(plain));
  ASSERT_OK_AND_ASSIGN(b, buildProgram(spelled));
  std::string ta, tb;
  llvm::raw_string_ostream sa(ta), sb(tb);
  a.module->print(sa);
  b.module->print(sb);
  EXPECT_EQ(ta, tb);
}

TEST_F(RecipeTest, MicroBatchesAccumulateTheWholeBatchGradient) {
  // One optimizer step over the batch, its gradient accumulated over 4
  // micro-batches of 1 sample or 2 of 2: the same update as one
  // value_and_grad over the batch, up to float64 summation order.
  Recipe whole;
  ASSERT_OK_AND_ASSIGN(pw, buildProgram(whole));
  std::vector<HostTensor> state;
  Named named;
  ASSERT_NO_FATAL_FAILURE(init(pw, state, named));
  HostTensor prompts = promptsOf(whole);
  ASSERT_OK_AND_ASSIGN(
      ow, evaluate(pw, "train_step", trainArgs(state, 0, prompts)));
  Named want = byName(pw.fn("train_step"), ow);
  ASSERT_GT(scalar(want, "grad_norm"), 0.0);
  for (const char *micro : {"micro_batch_size=1", "micro_batch_size=2"}) {
    SCOPED_TRACE(micro);
    Recipe s;
    s.extra = {micro};
    ASSERT_OK_AND_ASSIGN(p, buildProgram(s));
    ASSERT_OK_AND_ASSIGN(
        out, evaluate(p, "train_step", trainArgs(state, 0, prompts)));
    Named got = byName(p.fn("train_step"), out);
    for (const std::string &m : kMetrics)
      EXPECT_NEAR(scalar(got, m), scalar(want, m),
                  1e-12 * std::max(1.0, std::abs(scalar(want, m))))
          << m;
    size_t compared = 0;
    for (const auto &[name, t] : want) {
      if (name.rfind("adamw.m.", 0) != 0 && name.rfind("transformer.", 0) != 0)
        continue;
      // adamw.m is 0.1 g, adamw.v 0.001 g^2.
      double noise = name.rfind("adamw.v.", 0) == 0 ? 1e-24 : 1e-12;
      EXPECT_TRUE(closeOrNoise(got.at(name), valuesOf(t), 1e-10, noise))
          << name << ": " << relativeError(got.at(name), valuesOf(t));
      ++compared;
    }
    EXPECT_GT(compared, 4u);
    EXPECT_EQ(got.at("adamw.step").ints()[0], 1);
  }
}

TEST_F(RecipeTest, InnerEpochsTakeOffPolicyStepsFromOneRollout) {
  // mini-batch 2 of 4, 2 inner epochs: 4 optimizer steps per iteration; from
  // the second on the ratio uses the rollout's old log-probs with moved
  // weights, so approx_kl and clipfrac (clip range 1e-4) are no longer 0.
  Recipe s;
  s.extra = {"mini_batch_size=2", "inner_epochs=2"};
  ASSERT_OK_AND_ASSIGN(p, buildProgram(s));
  std::vector<HostTensor> state;
  Named named;
  ASSERT_NO_FATAL_FAILURE(init(p, state, named));
  ASSERT_OK_AND_ASSIGN(
      out, evaluate(p, "train_step", trainArgs(state, 0, promptsOf(s))));
  Named got = byName(p.fn("train_step"), out);
  EXPECT_EQ(got.at("adamw.step").ints()[0], 4);
  EXPECT_GT(scalar(got, "approx_kl"), 0.0);
  EXPECT_GT(scalar(got, "clipfrac"), 0.0);
  EXPECT_LE(scalar(got, "clipfrac"), 1.0);
  EXPECT_EQ(scalar(got, "skipped"), 0.0);
  EXPECT_GT(scalar(got, "grad_norm"), 0.0);
}

TEST_F(RecipeTest, MiniBatchScheduleEqualsHandWrittenSteps) {
  // mini-batch 2 of 4 in micro-batches of 1, 2 inner epochs: @train_step
  // (float64) against the schedule written out here on the rebuilt
  // rollout: per mini-batch [0, 2) then [2, 4), twice, the gradient
  // function of @loss on each 1-sample micro-batch with the current
  // weights and the rollout's old log-probs, summed, then the clip and
  // AdamW of docs/flowgrpo-math.md section 7 by hand.
  Recipe s;
  s.extra = {"mini_batch_size=2", "micro_batch_size=1", "inner_epochs=2"};
  ASSERT_OK_AND_ASSIGN(p, buildProgram(s));
  std::vector<HostTensor> state;
  Named named;
  ASSERT_NO_FATAL_FAILURE(init(p, state, named));
  HostTensor prompts = promptsOf(s);
  ASSERT_OK_AND_ASSIGN(out,
                       evaluate(p, "train_step", trainArgs(state, 0, prompts)));
  Named got = byName(p.fn("train_step"), out);
  ASSERT_OK_AND_ASSIGN(r, rollout(p, named, prompts, 0, windowStart(s, 0)));
  EXPECT_LE(relativeError(got.at("images"), r.images), 1e-12);
  const HostTensor &images = got.at("images");
  std::vector<float> pixels(images.floats().begin(), images.floats().end());
  ::omni::rewards::ImageBatch batch{pixels.data(), images.shape()};
  ASSERT_OK_AND_ASSIGN(rewards,
                       ::omni::rewards::computeReward(s.reward, batch));
  fgr::AdvantageOptions ao;
  ao.groupSize = s.group;
  ASSERT_OK_AND_ASSIGN(
      adv, fgr::groupAdvantages<double>(
               std::vector<double>(rewards.begin(), rewards.end()), ao));

  func::FuncOp vg;
  p.expanded->walk([&](func::FuncOp f) {
    if (f.getSymName().starts_with("loss_value_and_grad"))
      vg = f;
  });
  ASSERT_TRUE(vg);
  std::vector<std::string> lossNames = argNames(p.fn("loss"));
  std::vector<std::string> trainable;
  for (const std::string &n : lossNames)
    if (n.rfind("transformer.", 0) == 0)
      trainable.push_back(n);
  ASSERT_EQ(vg.getNumResults(), 4 + trainable.size());

  int64_t B = s.batch(), N = s.steps, n = s.sampleElements();
  Named current = named;
  std::map<std::string, std::vector<double>> m, v;
  for (const std::string &t : trainable) {
    m[t].assign(named.at(t).numElements(), 0.0);
    v[t].assign(named.at(t).numElements(), 0.0);
  }
  const double lr = 1e-3, wd = 1e-4, b1 = 0.9, b2 = 0.999, eps = 1e-8;
  int step = 0;
  double klSum = 0, clipSum = 0;
  for (int epoch = 0; epoch < 2; ++epoch)
    for (int64_t first = 0; first < B; first += 2) {
      std::map<std::string, std::vector<double>> g;
      for (int64_t b = first; b < first + 2; ++b) {
        Named args = current;
        Shape xs = s.latent();
        xs.insert(xs.begin(), {N + 1, 1});
        std::vector<double> x, old;
        for (int64_t i = 0; i <= N; ++i)
          x.insert(x.end(), r.xs.begin() + (i * B + b) * n,
                   r.xs.begin() + (i * B + b + 1) * n);
        for (int64_t i = 0; i < N; ++i)
          old.push_back(r.lps[i * B + b]);
        args["xs"] = f32Exact(xs, x);
        args["old_log_probs"] = f32Exact({N, 1}, old);
        args["advantages"] = f32Exact({1}, {adv[b]});
        args["window_start"] = i64(r.start);
        HostTensor pooled = repeatGroups(s, prompts);
        std::vector<double> row(pooled.floats().begin() + b * s.pooledDim,
                                pooled.floats().begin() +
                                    (b + 1) * s.pooledDim);
        args["pooled"] = f32Exact({1, s.pooledDim}, row);
        ASSERT_OK_AND_ASSIGN(list, argsByName(p.fn("loss"), {}, args));
        ASSERT_OK_AND_ASSIGN(res, evaluate(p, vg.getSymName(), list));
        klSum += res[1].doubleAt(0);
        clipSum += res[2].doubleAt(0);
        for (size_t k = 0; k < trainable.size(); ++k) {
          std::vector<double> gk = valuesOf(res[4 + k]);
          std::vector<double> &acc = g[trainable[k]];
          acc.resize(gk.size(), 0.0);
          for (size_t e = 0; e < gk.size(); ++e)
            acc[e] += gk[e];
        }
      }
      double sq = 0;
      for (const auto &[name, gk] : g)
        for (double x : gk)
          sq += x * x;
      double norm = std::sqrt(sq), coef = std::min(1.0 / (norm + 1e-6), 1.0);
      ++step;
      double bc1 = 1 - std::pow(b1, step), bc2 = 1 - std::pow(b2, step);
      for (const std::string &t : trainable) {
        HostTensor &param = current[t];
        for (int64_t e = 0; e < param.numElements(); ++e) {
          double ge = g[t][e] * coef;
          double &me = m[t][e], &ve = v[t][e];
          me = b1 * me + (1 - b1) * ge;
          ve = b2 * ve + (1 - b2) * ge * ge;
          param.floats()[e] =
              param.floats()[e] * (1 - lr * wd) -
              lr / bc1 * me / (std::sqrt(ve) / std::sqrt(bc2) + eps);
        }
      }
    }
  EXPECT_EQ(got.at("adamw.step").ints()[0], 4);
  for (const std::string &t : trainable) {
    EXPECT_LE(relativeError(got.at(t), valuesOf(current.at(t))), 1e-9) << t;
    EXPECT_TRUE(closeOrNoise(got.at("adamw.m." + t), m[t], 1e-9, 1e-12))
        << t << ": " << relativeError(got.at("adamw.m." + t), m[t]);
    EXPECT_TRUE(closeOrNoise(got.at("adamw.v." + t), v[t], 1e-9, 1e-24))
        << t << ": " << relativeError(got.at("adamw.v." + t), v[t]);
  }
  // The metrics: means over the 4 steps of the mini-batch sums.
  EXPECT_NEAR(scalar(got, "approx_kl"), klSum / 4, 1e-9 * klSum);
  EXPECT_NEAR(scalar(got, "clipfrac"), clipSum / 4, 1e-12);
  EXPECT_GT(klSum, 0.0);
}

} // namespace
