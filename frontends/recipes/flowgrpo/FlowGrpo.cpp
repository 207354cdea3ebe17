//===- FlowGrpo.cpp - the FlowGRPO training recipe ------------------------===//
//
// The program layout is documented in FlowGrpo.h and docs/recipes.md.
//
//===----------------------------------------------------------------------===//

#include "frontends/recipes/flowgrpo/FlowGrpo.h"

#include "dialects/omni/OmniEmitter.h"
#include "dialects/omni/OmniOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"

#include <array>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <map>
#include <variant>

using namespace mlir;
namespace od = mlir::omni;

namespace omni::fe::flowgrpo {

std::string describe(const RecipeRequest &r) {
  std::string cmd = "omnigen --model=" + r.model + " --config=" + r.modelConfig;
  for (const std::string &o : r.modelOverrides)
    cmd += " --set=" + o;
  if (r.decoder.empty()) {
    cmd += " --decoder=none";
  } else {
    cmd += " --decoder=" + r.decoder + " --decoder-config=" + r.decoderConfig;
    for (const std::string &o : r.decoderOverrides)
      cmd += " --decoder-set=" + o;
  }
  for (const std::string &o : r.options)
    cmd += " --opt=" + o;
  if (r.program != "train")
    cmd += " --program=" + r.program;
  if (r.mesh)
    cmd += " --mesh=" + *r.mesh;
  std::string what =
      r.program == "train"
          ? "The FlowGRPO training program (frontends/recipes/flowgrpo, "
            "docs/recipes.md)"
          : "The @" + r.program +
                " function of the FlowGRPO recipe "
                "(frontends/recipes/flowgrpo)";
  return "// " + what + "\n// of model " + r.model + " (" + r.modelConfig +
         ")" +
         (r.decoder.empty()
              ? ""
              : " with decoder " + r.decoder + " (" + r.decoderConfig + ")") +
         ". Generated; do not edit. Regenerate with:\n//   " + cmd + "\n";
}

namespace {

/// The recipe's options, parsed (kOptions says what each one is).
struct Options {
  int64_t prompts, group, steps, window, windowLo, windowHi, ddof, loraRank,
      rolloutChunks;
  int64_t miniBatch, microBatch, innerEpochs; // 0: the batch, the mini-batch
  double shift, noiseLevel, guidance, advEps, clipRange, advClipMax, beta, lr,
      beta1, beta2, adamEps, weightDecay, maxGradNorm, loraAlpha;
  double emaDecay; // 0: no EMA of the weights
  int64_t emaEvery;
  od::SdeType sdeType;
  od::KlForm klForm;
  bool globalStd, normByStd;
  bool gatherPerStep;   // omni.shard_gather "per-step" (else "once")
  bool bf16;            // the model's contractions in bf16 (docs/precision.md)
  bool recomputeBlocks; // the backward recomputes each block's activations
  bool sdeSampler;      // --program=sample: SDE steps (else the ODE's Euler)
  int64_t sampleBatch;  // --program=sample: images per call (0: P*G)
  std::string reward;
  std::string schedule; // model, static or dynamic (the shift's kind)
  double trueCfg;       // true_cfg_scale (1: off)
  /// CFG is Qwen-Image's true CFG: guidance (= true_cfg_scale) and the norm
  /// rescale of the combined prediction (set by parseOptions).
  bool cfgRescale = false;
  int64_t batch() const { return prompts * group; }
  /// Samples per rollout chunk (rollout_chunks).
  int64_t chunk() const { return batch() / rolloutChunks; }
  /// Trained steps per iteration.
  int64_t trained() const { return window > 0 ? window : steps - 1; }
  /// Samples per optimizer step and per value_and_grad call
  /// (docs/recipes.md section 3).
  int64_t mini() const { return miniBatch > 0 ? miniBatch : batch(); }
  int64_t micro() const { return microBatch > 0 ? microBatch : mini(); }
  /// Optimizer steps per iteration.
  int64_t optimizerSteps() const { return innerEpochs * (batch() / mini()); }
};

/// An option whose value is one of two names, stored as an enum.
struct Choice {
  std::array<const char *, 2> names;
  void (*set)(Options &, size_t index);
};

/// One recipe option: its key, its default (the CPU demo's,
/// docs/flowgrpo-math.md section 9) and the field its value goes to; the
/// field's type says how the value is read (integer, number, true/false, text,
/// or a Choice).
struct OptionDesc {
  const char *key;
  const char *defaultValue;
  std::variant<int64_t Options::*, double Options::*, bool Options::*,
               std::string Options::*, Choice>
      field;
};

/// Every option of docs/flowgrpo-math.md sections 1-7. Adding an option is a
/// row here (and a field in Options); its checks go to kChecks.
const OptionDesc kOptions[] = {
    // Sampling.
    {"prompts_per_iteration", "4", &Options::prompts}, // P: distinct prompts
    {"group_size", "8", &Options::group},              // G: samples per prompt
    {"steps", "10", &Options::steps},                  // N: sampler steps
    {"shift", "3.0", &Options::shift}, // static schedule shift (SD3)
    // The schedule's shift (docs/flowgrpo-math.md section 1): the model's
    // pipeline's (SD3 static `shift`, Qwen-Image dynamic from the image
    // token count), or forced static or dynamic.
    {"schedule", "model", &Options::schedule},
    {"sde_type", "sde",
     Choice{{"sde", "cps"},
            [](Options &o, size_t i) {
              o.sdeType = i == 0 ? od::SdeType::sde : od::SdeType::cps;
            }}},
    {"noise_level", "0.7", &Options::noiseLevel}, // a
    {"window", "2", &Options::window}, // W: trained SDE steps (0: all but last)
    {"window_lo", "0", &Options::windowLo}, // window start range [lo, hi - W]
    {"window_hi", "5", &Options::windowHi},
    {"guidance_scale", "1.0", &Options::guidance}, // CFG (1: one forward)
    // Qwen-Image's true CFG (docs/recipes.md section 2): CFG with this scale
    // and the combined prediction rescaled to the conditional one's norm
    // per token; the runtime guidance_scale then sets this scale.
    {"true_cfg_scale", "1.0", &Options::trueCfg},
    // C: the batch is sampled in C chunks, each decoded and sent to the
    // reward right after its rollout, so that the (asynchronous) reward of
    // chunk k overlaps the rollout of chunk k+1 (docs/rewards.md section 5).
    {"rollout_chunks", "1", &Options::rolloutChunks},
    // Reward and advantages.
    {"reward", "jpeg_compressibility", &Options::reward},
    {"global_std", "true", &Options::globalStd},
    {"ddof", "0", &Options::ddof},
    {"norm_by_std", "true", &Options::normByStd},
    {"adv_eps", "1e-4", &Options::advEps},
    // Loss.
    {"clip_range", "1e-4", &Options::clipRange},
    {"adv_clip_max", "5.0", &Options::advClipMax},
    {"beta", "0.0", &Options::beta}, // KL weight
    {"kl_form", "reference",
     Choice{{"reference", "exact"},
            [](Options &o, size_t i) {
              o.klForm = i == 0 ? od::KlForm::reference : od::KlForm::exact;
            }}},
    // Optimizer.
    {"lr", "1e-3", &Options::lr},
    {"beta1", "0.9", &Options::beta1},
    {"beta2", "0.999", &Options::beta2},
    {"adam_eps", "1e-8", &Options::adamEps},
    {"weight_decay", "1e-4", &Options::weightDecay},
    {"max_grad_norm", "1.0", &Options::maxGradNorm},
    // Mini-batches (docs/recipes.md section 3): the rollout's batch is cut
    // into contiguous mini-batches of mini_batch_size samples, one optimizer
    // step each, inner_epochs passes over it; each mini-batch's gradient is
    // accumulated over value_and_grad calls on micro_batch_size samples.
    {"mini_batch_size", "0", &Options::miniBatch},   // 0: the batch P*G
    {"micro_batch_size", "0", &Options::microBatch}, // 0: the mini-batch
    {"inner_epochs", "1", &Options::innerEpochs},
    // EMA of the trained weights (docs/flowgrpo-math.md section 7): the
    // decay (0: off, the program has no EMA state) and the update interval
    // in optimizer steps (flow_grpo's EMAModuleWrapper, interval 8).
    {"ema_decay", "0", &Options::emaDecay},
    {"ema_every", "8", &Options::emaEvery},
    // LoRA.
    {"lora_rank", "0", &Options::loraRank},   // 0: full fine-tuning
    {"lora_alpha", "0", &Options::loraAlpha}, // 0: the rank
    // Sharding (only with --mesh; docs/sharding.md section 1): gather the
    // sharded parameters once per rollout or before every use in the loop.
    {"gather", "once",
     Choice{{"once", "per-step"},
            [](Options &o, size_t i) { o.gatherPerStep = i == 1; }}},
    // Precision (docs/precision.md): bf16 rounds the operands of the
    // velocity model's matmuls, convolutions and attention to bf16; every
    // other op, the decoder and the training state stay f32.
    {"precision", "f32",
     Choice{{"f32", "bf16"}, [](Options &o, size_t i) { o.bf16 = i == 1; }}},
    // Activation checkpointing (docs/recipes.md, docs/autodiff.md
    // "Rematerialization"): blocks saves only each transformer block's
    // results for the backward program and recomputes the rest there (one
    // more forward of the trained steps' blocks); none saves every
    // activation. Both give the same bits (test/train/recompute.test);
    // blocks is the default: the small recipe's peak 6.6 -> 1.7 GB for
    // about 8% more loss time (docs/performance.md, issue 15).
    {"recompute", "blocks",
     Choice{{"none", "blocks"},
            [](Options &o, size_t i) { o.recomputeBlocks = i == 1; }}},
    // The sampling program (--program=sample, docs/sampling.md): the
    // sampler of its N steps (ode: the Euler steps of diffusers'
    // FlowMatchEulerDiscreteScheduler; sde: the rollout's SDE step with
    // noise_level and its log-probabilities) and the images per call.
    {"sampler", "ode",
     Choice{{"ode", "sde"},
            [](Options &o, size_t i) { o.sdeSampler = i == 1; }}},
    {"sample_batch", "0", &Options::sampleBatch}, // 0: the batch P*G
};

/// `v` as %g prints it (a check's "found").
std::string shortNumber(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", v);
  return text;
}

/// A check on the parsed options; failing, the error is "flowgrpo option
/// <what>: expected <expected>", with " (found <found>)" when given.
struct Check {
  bool (*ok)(const Options &);
  const char *what;
  const char *expected;
  std::string (*found)(const Options &) = nullptr;
};

/// The checks, in the order they run (the first that fails is reported).
const Check kChecks[] = {
    {[](const Options &o) { return o.prompts >= 1; }, "prompts_per_iteration",
     ">= 1"},
    {[](const Options &o) { return o.group >= 1; }, "group_size", ">= 1"},
    {[](const Options &o) { return o.steps >= 2; }, "steps", ">= 2"},
    {[](const Options &o) { return o.window >= 0 && o.window <= o.steps - 1; },
     "window", "0 (all but the last step) or 1..steps-1"},
    {[](const Options &o) {
       return o.window == 0 ||
              (o.windowLo >= 0 && o.windowLo + o.window <= o.windowHi &&
               o.windowHi <= o.steps - 1);
     },
     "window_lo/window_hi",
     "0 <= window_lo, window_lo + window <= window_hi <= steps - 1",
     [](const Options &o) {
       return "lo " + std::to_string(o.windowLo) + ", hi " +
              std::to_string(o.windowHi) + ", window " +
              std::to_string(o.window) + ", steps " + std::to_string(o.steps);
     }},
    {[](const Options &o) { return o.ddof == 0 || o.ddof == 1; }, "ddof",
     "0 or 1"},
    {[](const Options &o) { return o.noiseLevel >= 0; }, "noise_level", ">= 0"},
    {[](const Options &o) { return o.shift > 0; }, "shift", "> 0"},
    {[](const Options &o) { return o.guidance >= 1; }, "guidance_scale",
     ">= 1"},
    {[](const Options &o) { return o.trueCfg >= 1; }, "true_cfg_scale", ">= 1",
     [](const Options &o) { return shortNumber(o.trueCfg); }},
    {[](const Options &o) { return o.trueCfg == 1 || o.guidance == 1; },
     "true_cfg_scale/guidance_scale",
     "at most one of them != 1 (true CFG is CFG with the norm rescale)",
     [](const Options &o) {
       return "true_cfg_scale " + shortNumber(o.trueCfg) + ", guidance_scale " +
              shortNumber(o.guidance);
     }},
    {[](const Options &o) {
       return o.schedule == "model" || o.schedule == "static" ||
              o.schedule == "dynamic";
     },
     "schedule", "model, static or dynamic",
     [](const Options &o) { return "'" + o.schedule + "'"; }},
    {[](const Options &o) {
       return o.lr > 0 && o.adamEps > 0 && o.weightDecay >= 0;
     },
     "lr/adam_eps/weight_decay", "lr > 0, adam_eps > 0, weight_decay >= 0"},
    {[](const Options &o) {
       return o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1;
     },
     "beta1/beta2", "in [0, 1)"},
    {[](const Options &o) { return o.maxGradNorm > 0; }, "max_grad_norm",
     "> 0"},
    {[](const Options &o) {
       return o.clipRange >= 0 && o.advClipMax > 0 && o.beta >= 0;
     },
     "clip_range/adv_clip_max/beta",
     "clip_range >= 0, adv_clip_max > 0, beta >= 0"},
    {[](const Options &o) {
       return o.miniBatch == 0 ||
              (o.miniBatch >= 1 && o.batch() % o.miniBatch == 0);
     },
     "mini_batch_size",
     "0 (the batch) or a divisor of prompts_per_iteration * group_size",
     [](const Options &o) {
       return std::to_string(o.miniBatch) + ", batch " +
              std::to_string(o.batch());
     }},
    {[](const Options &o) {
       return o.microBatch == 0 ||
              (o.microBatch >= 1 && o.mini() % o.microBatch == 0);
     },
     "micro_batch_size", "0 (the mini-batch) or a divisor of mini_batch_size",
     [](const Options &o) {
       return std::to_string(o.microBatch) + ", mini-batch " +
              std::to_string(o.mini());
     }},
    {[](const Options &o) { return o.innerEpochs >= 1; }, "inner_epochs",
     ">= 1"},
    {[](const Options &o) { return o.loraRank >= 0; }, "lora_rank", ">= 0"},
    {[](const Options &o) { return o.emaDecay >= 0 && o.emaDecay < 1; },
     "ema_decay", "in [0, 1) (0: no EMA)",
     [](const Options &o) { return shortNumber(o.emaDecay); }},
    {[](const Options &o) { return o.emaEvery >= 1; }, "ema_every",
     ">= 1 (optimizer steps)",
     [](const Options &o) { return std::to_string(o.emaEvery); }},
    {[](const Options &o) {
       return o.rolloutChunks >= 1 && o.batch() % o.rolloutChunks == 0;
     },
     "rollout_chunks",
     "an integer >= 1 that divides prompts_per_iteration * group_size",
     [](const Options &o) {
       return std::to_string(o.rolloutChunks) + " for a batch of " +
              std::to_string(o.batch());
     }},
    {[](const Options &o) { return !o.reward.empty(); }, "reward",
     "a reward name"},
    {[](const Options &o) { return o.sampleBatch >= 0; }, "sample_batch",
     ">= 1 (0: prompts_per_iteration * group_size)",
     [](const Options &o) { return std::to_string(o.sampleBatch); }},
};

llvm::Error fail(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

/// Reads every option of `given` (key=value over the defaults) into
/// Options: first the values by their fields' types (a malformed number is
/// reported first), then the choices, then kChecks.
llvm::Expected<Options> parseOptions(const std::vector<std::string> &given) {
  Config c = defaultOptions();
  for (const std::string &o : given)
    if (llvm::Error e = c.override(o))
      return fail("flowgrpo option: " + llvm::toString(std::move(e)));
  Options o;
  for (const OptionDesc &d : kOptions) {
    if (auto *f = std::get_if<int64_t Options::*>(&d.field))
      o.*(*f) = c.getInt(d.key);
    else if (auto *f = std::get_if<double Options::*>(&d.field))
      o.*(*f) = c.getDouble(d.key);
    else if (auto *f = std::get_if<bool Options::*>(&d.field))
      o.*(*f) = c.getBool(d.key);
    else if (auto *f = std::get_if<std::string Options::*>(&d.field))
      o.*(*f) = c.getString(d.key);
  }
  if (llvm::Error e = c.takeError())
    return fail("flowgrpo option: " + llvm::toString(std::move(e)));
  for (const OptionDesc &d : kOptions) {
    const Choice *choice = std::get_if<Choice>(&d.field);
    if (!choice)
      continue;
    std::string value = c.getString(d.key);
    auto it = llvm::find(choice->names, value);
    if (it == choice->names.end())
      return fail("flowgrpo option " + llvm::Twine(d.key) + ": expected " +
                  choice->names[0] + " or " + choice->names[1] + ", found '" +
                  value + "'");
    choice->set(o, static_cast<size_t>(it - choice->names.begin()));
  }
  for (const Check &check : kChecks)
    if (!check.ok(o))
      return fail("flowgrpo option " + llvm::Twine(check.what) + ": expected " +
                  check.expected +
                  (check.found ? " (found " + check.found(o) + ")" : ""));
  if (o.trueCfg != 1) {
    o.guidance = o.trueCfg;
    o.cfgRescale = true;
  }
  return o;
}

/// The mesh of `--mesh=dp=2,fsdp=2`: its axes and sizes in the given order.
struct MeshSpec {
  std::vector<std::pair<std::string, int64_t>> axes;
  /// The size of `axis`; 1 when the mesh does not have it.
  int64_t size(llvm::StringRef axis) const {
    for (const auto &[name, n] : axes)
      if (name == axis)
        return n;
    return 1;
  }
  int64_t ranks() const {
    int64_t n = 1;
    for (const auto &axis : axes)
      n *= axis.second;
    return n;
  }
  /// FSDP: the state is split over fsdp (docs/sharding.md section 1).
  bool fsdp() const { return size("fsdp") > 1; }
};

/// The mesh axes omnigen knows (docs/sharding.md section 1).
constexpr std::array<llvm::StringLiteral, 2> kMeshAxes = {"dp", "fsdp"};

/// Parses `axis=size[,axis=size]`; errors name the flag, the bad part and
/// what is expected.
llvm::Expected<MeshSpec> parseMesh(const std::string &spec) {
  std::string flag = "--mesh=" + spec;
  MeshSpec mesh;
  llvm::SmallVector<llvm::StringRef> parts;
  llvm::StringRef(spec).split(parts, ',');
  for (llvm::StringRef part : parts) {
    auto [axis, size] = part.split('=');
    if (axis.empty() || size.empty() || !part.contains('='))
      return fail(flag + ": malformed part '" + part +
                  "': expected axis=size, comma-separated (e.g. "
                  "--mesh=dp=2,fsdp=2)");
    if (!llvm::is_contained(kMeshAxes, axis))
      return fail(flag + ": unknown axis '" + axis + "': expected dp or fsdp");
    int64_t n = 0;
    if (size.getAsInteger(10, n) || n < 1)
      return fail(flag + ": axis " + axis + " has size '" + size +
                  "': expected an integer >= 1");
    for (const auto &given : mesh.axes)
      if (given.first == axis)
        return fail(flag + ": axis " + axis +
                    " is given twice: expected each axis at most once");
    mesh.axes.emplace_back(axis.str(), n);
  }
  return mesh;
}

} // namespace

Config defaultOptions() {
  Config c;
  for (const OptionDesc &d : kOptions)
    c.set(d.key, d.defaultValue);
  return c;
}

std::string optionKind(const std::string &key) {
  for (const OptionDesc &d : kOptions) {
    if (key != d.key)
      continue;
    if (std::holds_alternative<int64_t Options::*>(d.field))
      return "integer";
    if (std::holds_alternative<double Options::*>(d.field))
      return "number";
    if (std::holds_alternative<bool Options::*>(d.field))
      return "boolean";
    return "string";
  }
  return "";
}

namespace {

/// The options that are runtime hyper-parameters (docs/recipes.md,
/// "Runtime hyper-parameters"): 0-D f64 inputs of @train_step, in this
/// order after the data inputs, with the range `omnirun --set` accepts
/// (wider than kChecks' where the value is harmless at run time: lr = 0 is
/// a learning-rate schedule's first warmup step). `fixed`, when given and
/// true for the compiled options, pins the value to its default (range
/// "[d, d]"): the default shapes the program (beta = 0 has no KL reference,
/// guidance_scale = 1 no CFG forward, noise_level = 0 only Euler steps), so
/// another value needs omnigen again.
struct RuntimeOption {
  const char *key;
  double Options::*field;
  const char *range;
  bool (*fixed)(const Options &) = nullptr;
};
const RuntimeOption kRuntime[] = {
    {"lr", &Options::lr, "[0, inf)"},
    {"weight_decay", &Options::weightDecay, "[0, inf)"},
    {"beta1", &Options::beta1, "[0, 1)"},
    {"beta2", &Options::beta2, "[0, 1)"},
    {"adam_eps", &Options::adamEps, "(0, inf)"},
    {"max_grad_norm", &Options::maxGradNorm, "(0, inf)"},
    {"beta", &Options::beta, "[0, inf)",
     [](const Options &o) { return o.beta == 0; }},
    {"clip_range", &Options::clipRange, "[0, inf)"},
    {"adv_clip_max", &Options::advClipMax, "(0, inf)"},
    {"noise_level", &Options::noiseLevel, "(0, inf)",
     [](const Options &o) { return o.noiseLevel == 0; }},
    {"guidance_scale", &Options::guidance, "[1, inf)",
     [](const Options &o) { return o.guidance == 1; }},
};

} // namespace

std::vector<std::string> runtimeOptions() {
  std::vector<std::string> keys;
  for (const RuntimeOption &r : kRuntime)
    keys.push_back(r.key);
  return keys;
}

namespace {

/// Emits the recipe's functions into one Graph.
class Emitter {
public:
  /// `mesh`: null without --mesh.
  Emitter(Graph &g, const Options &o, VelocityModel &model,
          ImageDecoder *decoder, const LoraOptions &lora, const MeshSpec *mesh)
      : g_(g), b_(g.builder()), o_(o), model_(model), decoder_(decoder),
        lora_(lora), mesh_(mesh) {}

  /// `program`: train, velocity or decode (RecipeRequest::program).
  llvm::Error emit(const std::string &program);

private:
  Location loc() { return g_.loc(); }
  Tensor wrap(Value v) { return Tensor(&g_, v); }
  Tensor i64(int64_t v) { return g_.scalar(static_cast<double>(v), g_.i64()); }
  Value indexConst(int64_t v) {
    return arith::ConstantIndexOp::create(b_, loc(), v);
  }
  Shape batched(int64_t batch) {
    Shape s = model_.latentShape();
    s.insert(s.begin(), batch);
    return s;
  }
  Tensor random(bool normal, const Shape &shape, Tensor key, Tensor counter,
                int64_t offset = 0) {
    auto type = g_.tensorType(shape, g_.f32());
    Tensor zero = i64(offset);
    if (normal)
      return wrap(od::RandomNormalOp::create(b_, loc(), type, key.value(),
                                             counter.value(), zero.value()));
    return wrap(od::RandomUniformOp::create(b_, loc(), type, key.value(),
                                            counter.value(), zero.value()));
  }
  /// `t` (a 0-d tensor) as an index value.
  Value toIndex(Tensor t) {
    Value e = tensor::ExtractOp::create(b_, loc(), t.value(), ValueRange{});
    return arith::IndexCastOp::create(b_, loc(), b_.getIndexType(), e);
  }
  Tensor fromIndex(Value i) {
    Value v = arith::IndexCastOp::create(b_, loc(), b_.getI64Type(), i);
    return wrap(tensor::FromElementsOp::create(
        b_, loc(), g_.tensorType({}, g_.i64()), ValueRange{v}));
  }
  /// `stack[i]` of a [K, ...] tensor, dropping the leading dimension.
  Tensor extractAt(Tensor stack, Value i) {
    Shape s = stack.shape();
    Shape inner(s.begin() + 1, s.end());
    SmallVector<OpFoldResult> offsets{i}, sizes{b_.getIndexAttr(1)},
        strides(s.size(), b_.getIndexAttr(1));
    for (int64_t d : inner) {
      offsets.push_back(b_.getIndexAttr(0));
      sizes.push_back(b_.getIndexAttr(d));
    }
    return wrap(tensor::ExtractSliceOp::create(
        b_, loc(), g_.tensorType(inner, stack.elementType()), stack.value(),
        offsets, sizes, strides));
  }
  /// `stack[i] = value` for a [K, ...] stack and a value of shape [...].
  Tensor insertAt(Tensor stack, Tensor value, Value i) {
    Shape s = stack.shape();
    Shape one = value.shape();
    one.insert(one.begin(), 1);
    value = value.reshape(one);
    SmallVector<OpFoldResult> offsets{i}, sizes{b_.getIndexAttr(1)},
        strides(s.size(), b_.getIndexAttr(1));
    for (size_t d = 1; d < s.size(); ++d) {
      offsets.push_back(b_.getIndexAttr(0));
      sizes.push_back(b_.getIndexAttr(s[d]));
    }
    return wrap(tensor::InsertSliceOp::create(
        b_, loc(), value.value(), stack.value(), offsets, sizes, strides));
  }
  /// The timestep of step `i` for every sample: [B].
  Tensor timestepAt(Tensor timesteps, Value i, int64_t batch) {
    Value t =
        tensor::ExtractOp::create(b_, loc(), timesteps.value(), ValueRange{i});
    Tensor s = wrap(tensor::FromElementsOp::create(
        b_, loc(), g_.tensorType({}, g_.f32()), ValueRange{t}));
    return s.broadcastInDim({batch}, {});
  }
  std::pair<Tensor, Tensor> schedule() {
    od::FlowScheduleOp op = scheduleOp();
    return {wrap(op.getSigmas()), wrap(op.getTimesteps())};
  }
  /// The flow_schedule of option `schedule`: the model's shift (its
  /// pipeline's), or forced static (`shift`) or dynamic (the model's
  /// dynamic parameters; image_seq_len defaults to the 2x2-patch tokens).
  od::FlowScheduleOp scheduleOp() {
    ScheduleShift s = model_.scheduleShift();
    bool dynamic =
        o_.schedule == "dynamic" || (o_.schedule == "model" && s.dynamic);
    if (!dynamic)
      return od::FlowScheduleOp::create(
          b_, loc(), od::ScheduleKind::static_shift,
          static_cast<uint64_t>(o_.steps), llvm::APFloat(o_.shift),
          IntegerAttr(), llvm::APFloat(0.5), llvm::APFloat(0.9), 256, 8192,
          FloatAttr());
    Shape latent = model_.latentShape();
    int64_t tokens =
        s.imageSeqLen > 0 ? s.imageSeqLen : (latent[1] / 2) * (latent[2] / 2);
    return od::FlowScheduleOp::create(
        b_, loc(), od::ScheduleKind::dynamic_shift,
        static_cast<uint64_t>(o_.steps), llvm::APFloat(o_.shift),
        b_.getI64IntegerAttr(std::max<int64_t>(tokens, 1)),
        llvm::APFloat(s.baseShift), llvm::APFloat(s.maxShift),
        static_cast<uint64_t>(s.baseSeqLen), static_cast<uint64_t>(s.maxSeqLen),
        s.shiftTerminal ? b_.getF64FloatAttr(*s.shiftTerminal) : FloatAttr());
  }
  /// True CFG's norm rescale (QwenImagePipeline): `comb` * ||cond|| /
  /// ||comb|| per sample and token, the norms over the model's token
  /// channels (VelocityModel::toTokens; diffusers' dim=-1 of the packed
  /// prediction). `comb` and `cond` are [B, C, H, W].
  Tensor normRescale(const Tensor &comb, const Tensor &cond) {
    Tensor tc = model_.toTokens(comb), tn = model_.toTokens(cond);
    Tensor combNorm = sqrt((tc * tc).sum({2}));
    Tensor condNorm = sqrt((tn * tn).sum({2}));
    Tensor ratio = (condNorm / combNorm).broadcastInDim(tc.shape(), {0, 1});
    return model_.fromTokens(tc * ratio, model_.latentShape());
  }
  /// Repeats per-prompt conditioning [P, ...] to the batch [P*G, ...].
  Tensor repeatGroups(Tensor c) {
    if (!c)
      return c;
    Shape s = c.shape(), wide = s;
    wide.insert(wide.begin() + 1, o_.group);
    std::vector<int64_t> dims{0};
    for (size_t d = 1; d < s.size(); ++d)
      dims.push_back(static_cast<int64_t>(d) + 1);
    Shape out = s;
    out[0] = s[0] * o_.group;
    return c.broadcastInDim(wide, dims).reshape(out);
  }
  Tensor select(Tensor pred, Tensor a, Tensor b) {
    Tensor p =
        pred.shape() == a.shape() ? pred : pred.broadcastInDim(a.shape(), {});
    return wrap(
        od::SelectOp::create(b_, loc(), p.value(), a.value(), b.value()));
  }
  Tensor compare(od::CompareDirection d, Tensor a, Tensor b) {
    return wrap(od::CompareOp::create(b_, loc(), d, a.value(), b.value()));
  }
  /// With a mesh, a per-sample batch tensor [B, ...] marked with dimension 0
  /// split over every mesh axis in mesh order (docs/sharding.md section 1);
  /// without one, `t` itself.
  Tensor shardBatch(Tensor t) {
    if (!mesh_ || !t)
      return t;
    MLIRContext *ctx = &g_.context();
    SmallVector<Attribute> all, dims;
    for (const auto &axis : mesh_->axes)
      all.push_back(StringAttr::get(ctx, axis.first));
    dims.push_back(ArrayAttr::get(ctx, all));
    for (int64_t d = 1; d < t.rank(); ++d)
      dims.push_back(ArrayAttr::get(ctx, {}));
    auto sharding = od::ShardingAttr::get(
        ctx, FlatSymbolRefAttr::get(ctx, "mesh"), ArrayAttr::get(ctx, dims));
    return wrap(od::ShardOp::create(b_, loc(), t.value(), sharding));
  }

  // The random numbers of iteration n (FlowGrpo.h): counters n*(N+2) for
  // x_0, n*(N+2)+1+i for step i's noise, n*(N+2)+N+1 for the window start.
  Tensor counterBase(Tensor iteration) { return iteration * i64(o_.steps + 2); }
  // A chunk of `count` samples from sample `first` draws the elements of
  // those samples (docs/rng.md section 1: the offset is the position of the
  // first element), so its noise is the whole batch's, sliced.
  Tensor initialNoise(Tensor seed, Tensor base, int64_t first = 0,
                      int64_t count = 0) {
    return random(true, batched(count ? count : o_.batch()), seed, base,
                  first * sampleElements());
  }
  Tensor stepNoise(Tensor seed, Tensor base, Tensor step, int64_t first = 0,
                   int64_t count = 0) {
    return random(true, batched(count ? count : o_.batch()), seed,
                  base + step + i64(1), first * sampleElements());
  }
  /// The elements of one sample's latent.
  int64_t sampleElements() {
    int64_t n = 1;
    for (int64_t d : model_.latentShape())
      n *= d;
    return n;
  }
  /// start = lo + floor(u * (hi - W - lo + 1)), u ~ U[0, 1); 0 for W = 0.
  Tensor windowStart(Tensor seed, Tensor base) {
    if (o_.window == 0)
      return i64(0);
    Tensor u = random(false, {}, seed, base + i64(o_.steps + 1));
    Tensor choices = g_.scalar(
        static_cast<double>(o_.windowHi - o_.window - o_.windowLo + 1));
    Tensor pick = wrap(od::FloorOp::create(b_, loc(), (u * choices).value()));
    pick = minimum(pick, choices - 1.0);
    return pick.cast(g_.i64()) + i64(o_.windowLo);
  }

  void emitVelocity();
  /// The velocity model as function `name` for `batch` samples.
  std::unique_ptr<Function> emitVelocityAt(const std::string &name,
                                           int64_t batch, bool isPublic);
  /// `chunkBatch` > 0: @decode_chunk at that batch, for the rollout chunks
  /// (rollout_chunks).
  void emitDecoder(int64_t chunkBatch = 0);
  void emitRolloutNoise();
  /// `weightsOnly`: only the model's and the decoder's parameters, their
  /// results marked as state slots (the sampling program's initializer).
  void emitInitState(bool weightsOnly = false);
  /// The sampling program's @sample and @sample_noise (docs/sampling.md).
  void emitSample();
  /// @sample_steps() -> steps: the compiled step count N, which a sampling
  /// server reports (docs/serving.md) and the ODE sampler's results do not
  /// show.
  void emitSampleSteps();
  /// Standard normal noise [B, ...latent] whose row b is drawn with key
  /// seeds[b], `counter` and offset 0: it depends on seeds[b] only, not on
  /// b's position in the batch (docs/sampling.md section 2).
  Tensor perSampleNoise(Tensor seeds, Tensor counter);
  void emitLoss();
  void emitTrainStep();

  /// @train_step's state arguments, in @init_state's order.
  struct TrainState {
    std::vector<Tensor> params; // every model parameter (modelParams_)
    std::vector<Tensor> vaeParams, refs, ms, vs; // refs, ms, vs: trainable
    Tensor step;
    std::vector<Tensor> emas; // trainable, only with ema_decay > 0
  };
  /// The per-prompt conditioning repeated to the batch (null when the
  /// model takes none; `mask`: the text mask [B, L], hasMask_), and the
  /// unconditional CFG branch's [1, ...] (negativePrompt, negativePooled,
  /// negativeMask; null unless negativeInput_).
  struct Conditioning {
    Tensor prompt, pooled, mask;
    Tensor negativePrompt, negativePooled, negativeMask;
  };
  /// What the rollout records for the loss: every x_i ([N+1, B, ...]), the
  /// old log-probs ([N, B], 0 outside the window), the window [start, end).
  struct Rollout {
    Tensor final, xs, oldLogProbs, start, end;
    /// The samples [first, first + count) of the batch (a rollout chunk).
    int64_t first = 0, count = 0;
  };
  struct Rewards {
    Tensor images, rewards, advantages;
  };
  struct LossAndGrad {
    Tensor loss, approxKl, clipfrac, kl;
    SmallVector<Value> grads; // one per trainable parameter
  };
  /// The runtime hyper-parameters (kRuntime), 0-D f64, by key.
  struct HyperParams {
    std::map<std::string, Value> byKey;
    Value operator[](const char *key) const { return byKey.at(key); }
  };
  /// The state after the update (unchanged when `finite` is false).
  struct Update {
    std::vector<Tensor> params, ms, vs;
    Tensor step, gradNorm, finite;
    /// With several optimizer steps: the number skipped (f32; null: one
    /// step, skipped when `finite` is false).
    Tensor skipped;
    std::vector<Tensor> emas; // emaUpdate's, after the optimizer
  };
  TrainState stateArguments(Function &f);
  Conditioning conditioningArguments(Function &f);
  HyperParams hyperParamArguments(Function &f);
  /// `count` > 0: the chunk of samples [first, first + count).
  Rollout rollout(Tensor seed, Tensor iteration, const Conditioning &c,
                  const std::vector<Tensor> &params, const HyperParams &hp,
                  int64_t first = 0, int64_t count = 0);
  /// One sampler step inside the rollout loop: (x_{i+1}, old log-prob).
  std::pair<Tensor, Tensor> rolloutStep(Tensor x, Value i, const Rollout &r,
                                        Tensor seed, Tensor base, Tensor sigmas,
                                        Tensor timesteps, const Conditioning &c,
                                        const std::vector<Tensor> &params,
                                        const HyperParams &hp);
  Rewards rewardAndAdvantages(Tensor final,
                              const std::vector<Tensor> &vaeParams);
  /// @loss and its gradient over the micro-batch starting at sample
  /// `first`.
  /// The decoded images of `final` and their rewards (no advantages).
  Rewards decodeAndReward(Tensor final, const std::vector<Tensor> &vaeParams);
  /// The rollout and the rewards: rollout and rewardAndAdvantages, or, with
  /// rollout_chunks = C > 1, C rollouts of batch/C samples each decoded and
  /// rewarded right after it, concatenated, then the advantages.
  std::pair<Rollout, Rewards> rolloutAndRewards(Tensor seed, Tensor iteration,
                                                const Conditioning &c,
                                                const TrainState &s,
                                                const HyperParams &hp);
  /// With `micro` set (the loop over micro-batches), the samples are
  /// micro-batch `k` (an index) of `micro`'s micro-batch-major copies.
  LossAndGrad lossAndGrad(const TrainState &s, const Rollout &r,
                          Tensor advantages, const Conditioning &c,
                          const HyperParams &hp, int64_t first,
                          const DenseMap<Value, Tensor> *micro = nullptr,
                          Value k = Value());
  /// The sum of lossAndGrad over the micro-batches of the mini-batch
  /// starting at sample `first`: its mean loss and gradient (@loss divides
  /// by the number of micro-batches). Two or more micro-batches are an
  /// scf.for, so that one micro-batch's forward and backward intermediates
  /// die before the next one runs (docs/performance.md, "Mini-batches and
  /// micro-batches").
  LossAndGrad miniBatchLossAndGrad(const TrainState &s, const Rollout &r,
                                   Tensor advantages, const Conditioning &c,
                                   const HyperParams &hp, int64_t first);
  /// The state `u` leaves for the next optimizer step.
  TrainState updatedState(const TrainState &s, const Update &u);
  /// The runtime hyper-parameters @loss takes after its data inputs, in
  /// this order: those its ops read (the others are the optimizer's).
  std::vector<const char *> lossHyperParams() const;
  Update optimizerStep(const TrainState &s, ArrayRef<Value> grads,
                       const HyperParams &hp);
  /// The EMA after one optimizer step: `emas` (one per trainable parameter)
  /// moved towards `params` (every model parameter, as updated) when the
  /// step counter after the update `step` is due and the update was
  /// `finite`; empty without EMA (docs/flowgrpo-math.md section 7).
  std::vector<Tensor> emaUpdate(const std::vector<Tensor> &emas,
                                const std::vector<Tensor> &params, Tensor step,
                                Tensor finite);
  /// The metrics and @train_step's results.
  void returnTrainStep(Function &f, const TrainState &s, const Rewards &rw,
                       const LossAndGrad &lg, const Update &u);
  /// @velocity's arguments: `c`'s prompt, pooled and mask (at the
  /// velocity's batch), then, when negativeInput_, its unconditional
  /// conditioning ([1, ...]), the parameters and, when guidanceInput_, the
  /// runtime guidance_scale `guidance`.
  std::vector<Tensor> velocityArgs(Tensor x, Tensor t, const Conditioning &c,
                                   const std::vector<Tensor> &params,
                                   Value guidance = Value());

  Graph &g_;
  OpBuilder &b_;
  const Options &o_;
  VelocityModel &model_;
  ImageDecoder *decoder_;
  const LoraOptions &lora_;
  const MeshSpec *mesh_;

  ParamSet modelParams_, decoderParams_;
  std::unique_ptr<Function> velocity_, decode_, loss_;
  /// @velocity_micro: @velocity at the micro-batch size, for @loss (null
  /// when the micro-batch is the batch; then @loss calls @velocity).
  std::unique_ptr<Function> velocityMicro_;
  /// At the chunk batch (rollout_chunks > 1), else null.
  std::unique_ptr<Function> velocityChunk_, decodeChunk_;
  bool hasPrompt_ = false, hasPooled_ = false;
  /// The model takes a text mask (ConditioningShapes::promptMask): every
  /// function that takes prompt embeddings takes their mask [., L] too.
  bool hasMask_ = false;
  /// Indices (into modelParams_) of trainable and frozen parameters.
  std::vector<size_t> trainable_, frozen_;
  bool refCopy_ = false;
  /// @velocity takes the runtime guidance_scale (CFG in a train program; a
  /// public velocity program keeps the compiled-in attribute).
  bool guidanceInput_ = false;
  /// With CFG in a train program, @velocity takes the unconditional
  /// branch's conditioning (negative_prompt [1, L, D], negative_pooled
  /// [1, Dp], broadcast over the batch); a public velocity program keeps
  /// zeros (docs/recipes.md section 4).
  bool negativeInput_ = false;
  /// @velocity and @decode are public (a velocity or decode program).
  bool publicModels_ = false;
};

void Emitter::emitVelocity() {
  ConditioningShapes cs = model_.conditioning();
  hasPrompt_ = !cs.promptEmbeds.empty();
  hasPooled_ = !cs.pooled.empty();
  hasMask_ = hasPrompt_ && cs.promptMask;
  velocity_ = emitVelocityAt("velocity", o_.batch(), publicModels_);
  for (size_t i = 0; i < modelParams_.specs().size(); ++i)
    (modelParams_.specs()[i].trainable ? trainable_ : frozen_).push_back(i);
  refCopy_ = o_.beta > 0 && !lora_.enabled();
}

std::unique_ptr<Function>
Emitter::emitVelocityAt(const std::string &name, int64_t batch, bool isPublic) {
  // @velocity(x [B], t [B], prompt [B], pooled [B], [prompt_mask [B]],
  // [negative_prompt [1], negative_pooled [1], [negative_prompt_mask [1]]],
  // params..., [guidance_scale]) with CFG inside: the batch is doubled as
  // [uncond; cond], the unconditional half conditioned on the negative
  // prompt broadcast over the batch (negativeInput_), else on zeros (with
  // an all-ones mask). The same model at another batch size uses the same
  // parameters (ParamSet::add checks their shapes).
  ConditioningShapes cs = model_.conditioning();
  auto velocity = std::make_unique<Function>(g_, name, isPublic);
  Function &f = *velocity;
  Tensor x = f.argument(batched(batch), "x");
  Tensor t = f.argument(Shape{batch}, "timestep");
  auto withBatch = [&](Shape s, int64_t n) {
    s.insert(s.begin(), n);
    return s;
  };
  Tensor prompt = hasPrompt_
                      ? f.argument(withBatch(cs.promptEmbeds, batch), "prompt")
                      : Tensor();
  Tensor pooled =
      hasPooled_ ? f.argument(withBatch(cs.pooled, batch), "pooled") : Tensor();
  Tensor mask =
      hasMask_ ? f.argument(Shape{batch, cs.promptEmbeds[0]}, "prompt_mask")
               : Tensor();
  bool cfg = o_.guidance != 1.0;
  guidanceInput_ = cfg && !publicModels_;
  negativeInput_ = cfg && !publicModels_;
  Tensor negativePrompt, negativePooled;
  if (negativeInput_ && hasPrompt_)
    negativePrompt =
        f.argument(withBatch(cs.promptEmbeds, 1), "negative_prompt");
  if (negativeInput_ && hasPooled_)
    negativePooled = f.argument(withBatch(cs.pooled, 1), "negative_pooled");
  Tensor negativeMask =
      negativeInput_ && hasMask_
          ? f.argument(Shape{1, cs.promptEmbeds[0]}, "negative_prompt_mask")
          : Tensor();
  Module m(f, modelParams_, "transformer", &lora_);
  if (cfg) {
    auto doubled = [&](Tensor c, Tensor negative, double fill) {
      if (!c)
        return c;
      Tensor uncond =
          negative ? negative.broadcastTo(c.shape()) : g_.full(c.shape(), fill);
      return concat({uncond, c}, 0);
    };
    x = concat({x, x}, 0);
    t = concat({t, t}, 0);
    prompt = doubled(prompt, negativePrompt, 0.0);
    pooled = doubled(pooled, negativePooled, 0.0);
    mask = doubled(mask, negativeMask, 1.0);
  }
  Tensor v;
  {
    ContractionScope precision(g_, o_.bf16 ? g_.bf16() : Type());
    v = model_.forward(m, x, t, prompt, pooled, mask);
  }
  g_.setLocation("");
  // The runtime guidance_scale: @velocity's last argument, after the
  // parameters the forward declared (velocityArgs' order).
  Tensor guidance =
      guidanceInput_
          ? f.argument(g_.tensorType({}, b_.getF64Type()), "guidance_scale")
          : Tensor();
  if (cfg) {
    Tensor cond = o_.cfgRescale ? v.slice(0, batch, 2 * batch) : Tensor();
    v = wrap(od::CfgCombineOp::create(b_, loc(), v.value(),
                                      guidance ? guidance.value() : Value(),
                                      llvm::APFloat(o_.guidance)));
    if (o_.cfgRescale)
      v = normRescale(v, cond);
  }
  f.returns({v});
  return velocity;
}

void Emitter::emitDecoder(int64_t chunkBatch) {
  int64_t batch = chunkBatch ? chunkBatch : o_.batch();
  (chunkBatch ? decodeChunk_ : decode_) = std::make_unique<Function>(
      g_, chunkBatch ? "decode_chunk" : "decode", publicModels_);
  Function &f = chunkBatch ? *decodeChunk_ : *decode_;
  Tensor z = f.argument(batched(batch), "latents");
  if (!decoder_) {
    // No decoder: the first three latent channels squashed to [0, 1] are
    // the image.
    f.returns({logistic(z.slice(1, 0, 3))});
    return;
  }
  g_.setLocation("vae");
  Module m(f, decoderParams_, "vae");
  Tensor img = decoder_->decode(m, decoder_->unscale(z));
  g_.setLocation("vae");
  f.returns({clamp(img * 0.5 + 0.5, 0.0, 1.0)});
  g_.setLocation("");
}

void Emitter::emitRolloutNoise() {
  // @rollout_noise(seed, iteration) -> (x0, noise [N, B, ...], window_start):
  // exactly the random numbers @train_step draws, for replaying an
  // iteration elsewhere (bench/torch's PyTorch implementation).
  Function f(g_, "rollout_noise", /*isPublic=*/true);
  Tensor seed = f.argument(g_.tensorType({}, g_.i64()), "seed");
  Tensor iteration = f.argument(g_.tensorType({}, g_.i64()), "iteration");
  g_.setLocation("rollout");
  Tensor base = counterBase(iteration);
  std::vector<Tensor> steps;
  for (int64_t i = 0; i < o_.steps; ++i) {
    Shape one = batched(o_.batch());
    one.insert(one.begin(), 1);
    steps.push_back(stepNoise(seed, base, i64(i)).reshape(one));
  }
  Tensor noise = concat(steps, 0);
  f.returns({initialNoise(seed, base), noise, windowStart(seed, base)},
            {"x0", "noise", "window_start"});
  g_.setLocation("");
}

void Emitter::emitInitState(bool weightsOnly) {
  Function f(g_, "init_state", /*isPublic=*/true);
  Tensor seed = f.argument(g_.tensorType({}, g_.i64()), "seed");
  g_.setLocation("init");
  int64_t counter = int64_t(1) << 40;
  auto draw = [&](const ParamSpec &p) {
    Tensor c = i64(counter++);
    switch (p.init.kind) {
    case Init::Kind::Zeros:
      return g_.full(p.shape, 0.0);
    case Init::Kind::Ones:
      return g_.full(p.shape, 1.0);
    case Init::Kind::Normal:
      return random(true, p.shape, seed, c) * p.init.scale;
    case Init::Kind::Uniform:
      return (random(false, p.shape, seed, c) * 2.0 - 1.0) * p.init.scale;
    }
    return Tensor();
  };
  std::vector<Tensor> out;
  std::vector<std::string> names;
  std::vector<Tensor> model;
  for (const ParamSpec &p : modelParams_.specs()) {
    model.push_back(draw(p));
    out.push_back(model.back());
    names.push_back(p.name);
  }
  // The decoder's parameters use counters after the model's (2^40 + 2^20
  // + j) so adding a model parameter does not change the decoder's.
  counter = (int64_t(1) << 40) + (int64_t(1) << 20);
  for (const ParamSpec &p : decoderParams_.specs()) {
    out.push_back(draw(p));
    names.push_back(p.name);
  }
  if (weightsOnly) {
    g_.setLocation("");
    f.returns(out, names);
    // Explicit slots: omni-resident-state infers them only next to a
    // training step (docs/backend.md, "Resident state").
    for (size_t i = 0; i < names.size(); ++i)
      f.op().setResultAttr(static_cast<unsigned>(i), "omni.state",
                           b_.getStringAttr(names[i]));
    return;
  }
  if (refCopy_)
    for (size_t i : trainable_) {
      out.push_back(model[i]);
      names.push_back("ref." + modelParams_.specs()[i].name);
    }
  for (const char *moment : {"adamw.m.", "adamw.v."})
    for (size_t i : trainable_) {
      out.push_back(g_.full(modelParams_.specs()[i].shape, 0.0));
      names.push_back(moment + modelParams_.specs()[i].name);
    }
  out.push_back(i64(0));
  names.push_back("adamw.step");
  // The EMA starts at the initial weights (omnirun --init sets it too).
  if (o_.emaDecay > 0)
    for (size_t i : trainable_) {
      out.push_back(model[i]);
      names.push_back("ema." + modelParams_.specs()[i].name);
    }
  g_.setLocation("");
  f.returns(out, names);
}

Tensor Emitter::perSampleNoise(Tensor seeds, Tensor counter) {
  // One draw per sample, each from element 0 of its own key's stream
  // (docs/rng.md section 1): a server that batches requests gives each the
  // noise it would get alone. Sample b with seed s draws what iteration 0,
  // sample 0 of a training run with seed s draws (FlowGrpo.h).
  std::vector<Tensor> rows;
  for (int64_t b = 0; b < seeds.dim(0); ++b)
    rows.push_back(random(true, batched(1),
                          seeds.slice(0, b, b + 1).reshape({}), counter));
  return rows.size() == 1 ? rows[0] : concat(rows, 0);
}

void Emitter::emitSample() {
  // @sample(transformer.*, vae.* (state), seeds [B], [prompt_embeds],
  //         [pooled_prompt_embeds], [prompt_embeds_mask],
  //         [negative_prompt_embeds [1]],
  //         [negative_pooled_prompt_embeds [1]],
  //         [negative_prompt_embeds_mask [1]], [guidance_scale])
  //   -> (images [B, 3, H, W], [log_probs [B, N]] (sampler sde))
  // @sample_noise(seeds [B]) -> latents: the initial noise @sample starts
  // from (counter 0; step i's SDE noise uses counter 1 + i).
  const int64_t batch = o_.batch();
  ConditioningShapes cs = model_.conditioning();
  auto withBatch = [&](Shape s) {
    s.insert(s.begin(), batch);
    return s;
  };
  {
    Function noise(g_, "sample_noise", /*isPublic=*/true);
    Tensor seeds = noise.argument(g_.tensorType({batch}, g_.i64()), "seeds");
    g_.setLocation("sample");
    noise.returns({perSampleNoise(seeds, i64(0))}, {"latents"});
    g_.setLocation("");
  }
  Function f(g_, "sample", /*isPublic=*/true);
  std::vector<Tensor> params, vaeParams;
  for (const ParamSpec &p : modelParams_.specs())
    params.push_back(f.argument(p.shape, p.name));
  for (const ParamSpec &p : decoderParams_.specs())
    vaeParams.push_back(f.argument(p.shape, p.name));
  unsigned numState = static_cast<unsigned>(params.size() + vaeParams.size());
  for (unsigned i = 0; i < numState; ++i)
    f.op().setArgAttr(i, "omni.state",
                      f.op().getArgAttrOfType<StringAttr>(i, "omni.name"));
  Tensor seeds = f.argument(g_.tensorType({batch}, g_.i64()), "seeds");
  Conditioning c;
  if (hasPrompt_)
    c.prompt = f.argument(withBatch(cs.promptEmbeds), "prompt_embeds");
  if (hasPooled_)
    c.pooled = f.argument(withBatch(cs.pooled), "pooled_prompt_embeds");
  if (hasMask_)
    c.mask = f.argument(Shape{batch, cs.promptEmbeds[0]}, "prompt_embeds_mask");
  // CFG's unconditional conditioning, as @train_step's (docs/prompts.md).
  auto single = [](Shape s) {
    s.insert(s.begin(), 1);
    return s;
  };
  if (negativeInput_ && hasPrompt_)
    c.negativePrompt =
        f.argument(single(cs.promptEmbeds), "negative_prompt_embeds");
  if (negativeInput_ && hasPooled_)
    c.negativePooled =
        f.argument(single(cs.pooled), "negative_pooled_prompt_embeds");
  if (negativeInput_ && hasMask_)
    c.negativeMask =
        f.argument(Shape{1, cs.promptEmbeds[0]}, "negative_prompt_embeds_mask");
  Value guidance;
  if (guidanceInput_) {
    // The runtime CFG scale, as @train_step's (docs/recipes.md section 11).
    Tensor g = f.argument(g_.tensorType({}, b_.getF64Type()), "guidance_scale");
    NamedAttribute entries[] = {
        b_.getNamedAttr("default", b_.getF64FloatAttr(o_.guidance)),
        b_.getNamedAttr("range", b_.getStringAttr("[1, inf)"))};
    f.op().setArgAttr(cast<BlockArgument>(g.value()).getArgNumber(),
                      "omni.hparam", b_.getDictionaryAttr(entries));
    guidance = g.value();
  }
  g_.setLocation("sample");
  auto [sigmas, timesteps] = schedule();
  Tensor x0 = perSampleNoise(seeds, i64(0));
  Tensor lps0 = g_.full({o_.steps, batch}, 0.0);
  SmallVector<Value> carried{x0.value()};
  if (o_.sdeSampler)
    carried.push_back(lps0.value());
  auto loop = scf::ForOp::create(b_, loc(), indexConst(0), indexConst(o_.steps),
                                 indexConst(1), carried);
  {
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPointToStart(loop.getBody());
    Value i = loop.getInductionVar();
    Tensor x = wrap(loop.getRegionIterArgs()[0]);
    Tensor t = timestepAt(timesteps, i, batch);
    Tensor v = g_.call(*velocity_, velocityArgs(x, t, c, params, guidance))[0];
    SmallVector<Value> next;
    if (o_.sdeSampler) {
      Tensor noise = perSampleNoise(seeds, fromIndex(i) + i64(1));
      auto step = od::SdeStepOp::create(
          b_, loc(), o_.sdeType, x.value(), v.value(), sigmas.value(), i,
          noise.value(), Value(), Value(), llvm::APFloat(o_.noiseLevel));
      Tensor lps = wrap(loop.getRegionIterArgs()[1]);
      next = {step.getNextSample(),
              insertAt(lps, wrap(step.getLogProb()), i).value()};
    } else {
      // The Euler step x + (sigma_{i+1} - sigma_i) v; the op needs a noise
      // operand, which type ode does not read.
      auto step = od::SdeStepOp::create(b_, loc(), od::SdeType::ode, x.value(),
                                        v.value(), sigmas.value(), i,
                                        g_.full(x.shape(), 0.0).value(),
                                        Value(), Value(), llvm::APFloat(0.0));
      next = {step.getNextSample()};
    }
    scf::YieldOp::create(b_, loc(), next);
  }
  std::vector<Tensor> decodeArgs{wrap(loop.getResult(0))};
  decodeArgs.insert(decodeArgs.end(), vaeParams.begin(), vaeParams.end());
  g_.setLocation("decode");
  Tensor images = g_.call(*decode_, decodeArgs)[0];
  g_.setLocation("");
  if (!o_.sdeSampler) {
    f.returns({images}, {"images"});
    return;
  }
  f.returns({images, wrap(loop.getResult(1)).transpose({1, 0})},
            {"images", "log_probs"});
}

std::vector<Tensor> Emitter::velocityArgs(Tensor x, Tensor t,
                                          const Conditioning &c,
                                          const std::vector<Tensor> &params,
                                          Value guidance) {
  std::vector<Tensor> args{x, t};
  if (hasPrompt_)
    args.push_back(c.prompt);
  if (hasPooled_)
    args.push_back(c.pooled);
  if (hasMask_)
    args.push_back(c.mask);
  if (negativeInput_) {
    if (hasPrompt_)
      args.push_back(c.negativePrompt);
    if (hasPooled_)
      args.push_back(c.negativePooled);
    if (hasMask_)
      args.push_back(c.negativeMask);
  }
  for (const Tensor &a : args)
    assert(a && "a conditioning argument @velocity takes");
  args.insert(args.end(), params.begin(), params.end());
  if (guidanceInput_)
    args.push_back(wrap(guidance));
  return args;
}

std::vector<const char *> Emitter::lossHyperParams() const {
  // beta and noise_level only where they are no compile-time 0 (kRuntime's
  // `fixed`): a beta = 0 loss has no KL term to weigh, a noise_level = 0
  // step is the Euler step.
  std::vector<const char *> keys{"clip_range", "adv_clip_max"};
  if (o_.beta > 0)
    keys.push_back("beta");
  if (o_.noiseLevel > 0)
    keys.push_back("noise_level");
  if (guidanceInput_)
    keys.push_back("guidance_scale");
  return keys;
}

void Emitter::emitLoss() {
  // @loss(trainable..., frozen..., [ref...], xs, old_lps, adv, start,
  //       [prompt], [pooled], [prompt_mask], [negative_prompt],
  //       [negative_pooled], [negative_prompt_mask],
  //       clip_range, adv_clip_max, [beta], [noise_level], [guidance_scale])
  //   -> (loss, approx_kl, clipfrac, kl),
  // over one micro-batch (docs/recipes.md section 6).
  int64_t batch = o_.micro();
  if (batch != o_.batch())
    velocityMicro_ = emitVelocityAt("velocity_micro", batch, false);
  Function &velocity = velocityMicro_ ? *velocityMicro_ : *velocity_;
  loss_ = std::make_unique<Function>(g_, "loss");
  Function &f = *loss_;
  const auto &specs = modelParams_.specs();
  std::vector<Tensor> params(specs.size()), ref(specs.size());
  for (size_t i : trainable_)
    params[i] = f.argument(specs[i].shape, specs[i].name);
  for (size_t i : frozen_)
    params[i] = f.argument(specs[i].shape, specs[i].name);
  if (refCopy_) {
    ref = params;
    for (size_t i : trainable_)
      ref[i] = f.argument(specs[i].shape, "ref." + specs[i].name);
  } else if (o_.beta > 0) {
    // LoRA: the reference is the base model, i.e. the adapters' B = 0.
    ref = params;
    for (size_t i = 0; i < specs.size(); ++i)
      if (specs[i].name.find(".lora_B.") != std::string::npos)
        ref[i] = g_.full(specs[i].shape, 0.0);
  }
  Shape xs = batched(batch);
  xs.insert(xs.begin(), o_.steps + 1);
  Tensor stack = f.argument(xs, "xs");
  Tensor oldLps = f.argument(Shape{o_.steps, batch}, "old_log_probs");
  Tensor adv = f.argument(Shape{batch}, "advantages");
  Tensor start = f.argument(g_.tensorType({}, g_.i64()), "window_start");
  ConditioningShapes cs = model_.conditioning();
  auto withBatch = [&](Shape s) {
    s.insert(s.begin(), batch);
    return s;
  };
  Conditioning c;
  if (hasPrompt_)
    c.prompt = f.argument(withBatch(cs.promptEmbeds), "prompt");
  if (hasPooled_)
    c.pooled = f.argument(withBatch(cs.pooled), "pooled");
  if (hasMask_)
    c.mask = f.argument(Shape{batch, cs.promptEmbeds[0]}, "prompt_mask");
  // CFG's unconditional conditioning ([1, ...], negativeInput_).
  auto single = [&](Shape s) {
    s.insert(s.begin(), 1);
    return s;
  };
  if (negativeInput_ && hasPrompt_)
    c.negativePrompt = f.argument(single(cs.promptEmbeds), "negative_prompt");
  if (negativeInput_ && hasPooled_)
    c.negativePooled = f.argument(single(cs.pooled), "negative_pooled");
  if (negativeInput_ && hasMask_)
    c.negativeMask =
        f.argument(Shape{1, cs.promptEmbeds[0]}, "negative_prompt_mask");
  // The runtime hyper-parameters the loss's ops read (0-D f64).
  std::map<std::string, Value> hp;
  for (const char *key : lossHyperParams())
    hp[key] = f.argument(g_.tensorType({}, b_.getF64Type()), key).value();
  auto hpOr = [&](const char *key) {
    auto it = hp.find(key);
    return it == hp.end() ? Value() : it->second;
  };
  Value guidance = hpOr("guidance_scale"), noiseLevel = hpOr("noise_level");

  g_.setLocation("loss");
  auto [sigmas, timesteps] = schedule();
  Value startIndex = toIndex(start);
  Tensor sum[4];
  for (int64_t k = 0; k < o_.trained(); ++k) {
    Value j = arith::AddIOp::create(b_, loc(), startIndex, indexConst(k));
    Value j1 = arith::AddIOp::create(b_, loc(), j, indexConst(1));
    Tensor x = extractAt(stack, j), next = extractAt(stack, j1);
    Tensor old = extractAt(oldLps, j);
    Tensor t = timestepAt(timesteps, j, batch);
    Tensor v = g_.call(velocity, velocityArgs(x, t, c, params, guidance))[0];
    auto step = od::SdeStepOp::create(
        b_, loc(), o_.sdeType, x.value(), v.value(), sigmas.value(), j, Value(),
        next.value(), noiseLevel, llvm::APFloat(o_.noiseLevel));
    Value mean, refMean, stdv, dt;
    if (o_.beta > 0) {
      Tensor vr = g_.call(velocity, velocityArgs(x, t, c, ref, guidance))[0];
      auto refStep = od::SdeStepOp::create(
          b_, loc(), o_.sdeType, x.value(), vr.value(), sigmas.value(), j,
          Value(), next.value(), noiseLevel, llvm::APFloat(o_.noiseLevel));
      mean = step.getMean();
      refMean = refStep.getMean();
      stdv = step.getStd();
      if (o_.klForm == od::KlForm::exact && o_.sdeType == od::SdeType::sde) {
        // dt = sigma_{j+1} - sigma_j (negative); a cps step's std already is
        // its transition std and takes no dt.
        Value s0 =
            tensor::ExtractOp::create(b_, loc(), sigmas.value(), ValueRange{j});
        Value s1 = tensor::ExtractOp::create(b_, loc(), sigmas.value(),
                                             ValueRange{j1});
        Value d = arith::SubFOp::create(b_, loc(), s1, s0);
        dt = tensor::FromElementsOp::create(
            b_, loc(), g_.tensorType({}, g_.f32()), ValueRange{d});
      }
    }
    auto l = od::GrpoLossOp::create(
        b_, loc(), step.getLogProb(), old.value(), adv.value(), mean, refMean,
        stdv, dt, hpOr("clip_range"), hpOr("adv_clip_max"), hpOr("beta"),
        llvm::APFloat(o_.clipRange), llvm::APFloat(o_.advClipMax),
        llvm::APFloat(o_.beta), o_.klForm, o_.sdeType);
    Value parts[4] = {l.getLoss(), l.getApproxKl(), l.getClipfrac(), l.getKl()};
    for (int q = 0; q < 4; ++q)
      sum[q] = k == 0 ? wrap(parts[q]) : sum[q] + wrap(parts[q]);
  }
  // The mean over the trained steps and, summed over the mini-batch's
  // micro-batches, over its samples: the accumulated gradient is the
  // gradient of the mini-batch's mean (docs/flowgrpo-math.md section 7).
  double inv = 1.0 / static_cast<double>(o_.trained() * (o_.mini() / batch));
  f.returns({sum[0] * inv, sum[1] * inv, sum[2] * inv, sum[3] * inv});
  g_.setLocation("");
}

// @train_step, phase by phase. Each piece creates its ops in the order the
// program text shows them: rollout, decode and reward, loss and gradient,
// optimizer, metrics.

Emitter::TrainState Emitter::stateArguments(Function &f) {
  const auto &specs = modelParams_.specs();
  TrainState s;
  s.params.resize(specs.size());
  for (size_t i = 0; i < specs.size(); ++i)
    s.params[i] = f.argument(specs[i].shape, specs[i].name);
  for (const ParamSpec &p : decoderParams_.specs())
    s.vaeParams.push_back(f.argument(p.shape, p.name));
  if (refCopy_)
    for (size_t i : trainable_)
      s.refs.push_back(f.argument(specs[i].shape, "ref." + specs[i].name));
  for (size_t i : trainable_)
    s.ms.push_back(f.argument(specs[i].shape, "adamw.m." + specs[i].name));
  for (size_t i : trainable_)
    s.vs.push_back(f.argument(specs[i].shape, "adamw.v." + specs[i].name));
  s.step = f.argument(g_.tensorType({}, g_.i64()), "adamw.step");
  if (o_.emaDecay > 0)
    for (size_t i : trainable_)
      s.emas.push_back(f.argument(specs[i].shape, "ema." + specs[i].name));
  return s;
}

Emitter::Conditioning Emitter::conditioningArguments(Function &f) {
  ConditioningShapes cs = model_.conditioning();
  auto withPrompts = [&](Shape s) {
    s.insert(s.begin(), o_.prompts);
    return s;
  };
  Conditioning c;
  if (hasPrompt_)
    c.prompt = shardBatch(repeatGroups(
        f.argument(withPrompts(cs.promptEmbeds), "prompt_embeds")));
  if (hasPooled_)
    c.pooled = shardBatch(repeatGroups(
        f.argument(withPrompts(cs.pooled), "pooled_prompt_embeds")));
  if (hasMask_)
    c.mask = shardBatch(repeatGroups(f.argument(
        Shape{o_.prompts, cs.promptEmbeds[0]}, "prompt_embeds_mask")));
  // CFG's unconditional branch: the negative (by default the empty)
  // prompt's embeddings, one for the whole batch (docs/prompts.md).
  auto single = [&](Shape s) {
    s.insert(s.begin(), 1);
    return s;
  };
  if (negativeInput_ && hasPrompt_)
    c.negativePrompt =
        f.argument(single(cs.promptEmbeds), "negative_prompt_embeds");
  if (negativeInput_ && hasPooled_)
    c.negativePooled =
        f.argument(single(cs.pooled), "negative_pooled_prompt_embeds");
  if (negativeInput_ && hasMask_)
    c.negativeMask =
        f.argument(Shape{1, cs.promptEmbeds[0]}, "negative_prompt_embeds_mask");
  return c;
}

Emitter::HyperParams Emitter::hyperParamArguments(Function &f) {
  // tensor<f64> {omni.name = "<key>", omni.hparam = {default, range}}: the
  // table omnic writes to step.bin (step.fbs HyperParam).
  HyperParams hp;
  for (const RuntimeOption &r : kRuntime) {
    Tensor t = f.argument(g_.tensorType({}, b_.getF64Type()), r.key);
    double value = o_.*r.field;
    std::string range = r.range;
    if (r.fixed && r.fixed(o_)) {
      // Fixed at the compiled value: "[d, d]" (%.17g reads back exactly).
      char text[32];
      std::snprintf(text, sizeof text, "%.17g", value);
      range = std::string("[") + text + ", " + text + "]";
    }
    NamedAttribute entries[] = {
        b_.getNamedAttr("default", b_.getF64FloatAttr(value)),
        b_.getNamedAttr("range", b_.getStringAttr(range))};
    f.op().setArgAttr(cast<BlockArgument>(t.value()).getArgNumber(),
                      "omni.hparam", b_.getDictionaryAttr(entries));
    hp.byKey[r.key] = t.value();
  }
  return hp;
}

std::pair<Tensor, Tensor>
Emitter::rolloutStep(Tensor x, Value i, const Rollout &r, Tensor seed,
                     Tensor base, Tensor sigmas, Tensor timesteps,
                     const Conditioning &c, const std::vector<Tensor> &params,
                     const HyperParams &hp) {
  int64_t batch = r.count ? r.count : o_.batch();
  Tensor t = timestepAt(timesteps, i, batch);
  Value guidance = guidanceInput_ ? hp["guidance_scale"] : Value();
  Tensor v = g_.call(r.count ? *velocityChunk_ : *velocity_,
                     velocityArgs(x, t, c, params, guidance))[0];
  Tensor ii = fromIndex(i);
  Tensor noise = stepNoise(seed, base, ii, r.first, r.count);
  // In the SDE window: the runtime noise_level (a compile-time 0 keeps the
  // attribute: the Euler step).
  Value noiseLevel = o_.noiseLevel > 0 ? hp["noise_level"] : Value();
  auto sde = od::SdeStepOp::create(b_, loc(), o_.sdeType, x.value(), v.value(),
                                   sigmas.value(), i, noise.value(), Value(),
                                   noiseLevel, llvm::APFloat(o_.noiseLevel));
  // Outside the SDE window: the deterministic Euler step.
  auto euler = od::SdeStepOp::create(
      b_, loc(), o_.sdeType, x.value(), v.value(), sigmas.value(), i,
      noise.value(), Value(), Value(), llvm::APFloat(0.0));
  Tensor inWindow = wrap(od::AndOp::create(
      b_, loc(), compare(od::CompareDirection::ge, ii, r.start).value(),
      compare(od::CompareDirection::lt, ii, r.end).value()));
  Tensor next =
      select(inWindow, wrap(sde.getNextSample()), wrap(euler.getNextSample()));
  // The old log-prob: the sampling policy's, recorded where it is drawn
  // (in the window only; the loss reads exactly these steps).
  Tensor logProb =
      select(inWindow, wrap(sde.getLogProb()), g_.full({batch}, 0.0));
  return {next, logProb};
}

Emitter::Rollout Emitter::rollout(Tensor seed, Tensor iteration,
                                  const Conditioning &c,
                                  const std::vector<Tensor> &params,
                                  const HyperParams &hp, int64_t first,
                                  int64_t count) {
  // N sampler steps as an scf.for; x, the stack of every x_i and the
  // log-probs are carried.
  g_.setLocation("rollout");
  int64_t batch = count ? count : o_.batch();
  auto [sigmas, timesteps] = schedule();
  Tensor base = counterBase(iteration);
  Tensor x0 = shardBatch(initialNoise(seed, base, first, count));
  Rollout r;
  r.first = first;
  r.count = count;
  r.start = windowStart(seed, base);
  r.end = o_.window > 0 ? r.start + i64(o_.window) : i64(o_.steps - 1);
  Shape stackShape = batched(batch);
  stackShape.insert(stackShape.begin(), o_.steps + 1);
  // Every entry is written before it is read: no need to zero the stack.
  Tensor stack0 =
      wrap(tensor::EmptyOp::create(b_, loc(), stackShape, g_.f32()));
  Tensor lps0 = g_.full({o_.steps, batch}, 0.0);
  auto loop = scf::ForOp::create(
      b_, loc(), indexConst(0), indexConst(o_.steps), indexConst(1),
      ValueRange{x0.value(), stack0.value(), lps0.value()});
  {
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPointToStart(loop.getBody());
    Value i = loop.getInductionVar();
    Tensor x = wrap(loop.getRegionIterArgs()[0]);
    Tensor stack = wrap(loop.getRegionIterArgs()[1]);
    Tensor lps = wrap(loop.getRegionIterArgs()[2]);
    auto [next, logProb] =
        rolloutStep(x, i, r, seed, base, sigmas, timesteps, c, params, hp);
    Tensor stack2 = insertAt(stack, x, i);
    Tensor lps2 = insertAt(lps, logProb, i);
    scf::YieldOp::create(
        b_, loc(), ValueRange{next.value(), stack2.value(), lps2.value()});
  }
  r.final = wrap(loop.getResult(0));
  r.xs = insertAt(wrap(loop.getResult(1)), r.final, indexConst(o_.steps));
  r.oldLogProbs = wrap(loop.getResult(2));
  return r;
}

Emitter::Rewards
Emitter::rewardAndAdvantages(Tensor final,
                             const std::vector<Tensor> &vaeParams) {
  // Reward on the decoded images, advantages over the global batch.
  Rewards rw = decodeAndReward(final, vaeParams);
  rw.advantages = wrap(od::GroupAdvantagesOp::create(
      b_, loc(), rw.rewards.value(), static_cast<uint64_t>(o_.group),
      o_.globalStd, static_cast<uint64_t>(o_.ddof), llvm::APFloat(o_.advEps),
      o_.normByStd));
  return rw;
}

Emitter::Rewards
Emitter::decodeAndReward(Tensor final, const std::vector<Tensor> &vaeParams) {
  g_.setLocation("decode");
  std::vector<Tensor> decodeArgs{final};
  decodeArgs.insert(decodeArgs.end(), vaeParams.begin(), vaeParams.end());
  int64_t batch = final.dim(0);
  Rewards rw;
  rw.images =
      g_.call(batch == o_.batch() ? *decode_ : *decodeChunk_, decodeArgs)[0];
  g_.setLocation("reward");
  // Non-finite weights give non-finite pixels, which a reward rejects:
  // they become 0 so the iteration completes, and the non-finite loss and
  // gradient norm skip the update (docs/recipes.md section 8).
  rw.images = select(wrap(od::IsFiniteOp::create(b_, loc(), rw.images.value())),
                     rw.images, g_.full(rw.images.shape(), 0.0));
  auto rewardCall = od::HostCallOp::create(
      b_, loc(), TypeRange{g_.tensorType({batch}, g_.f32())}, o_.reward,
      ValueRange{rw.images.value()});
  rw.rewards = wrap(rewardCall.getResult(0));
  return rw;
}

std::pair<Emitter::Rollout, Emitter::Rewards>
Emitter::rolloutAndRewards(Tensor seed, Tensor iteration, const Conditioning &c,
                           const TrainState &s, const HyperParams &hp) {
  if (o_.rolloutChunks == 1) {
    Rollout r = rollout(seed, iteration, c, s.params, hp);
    return {r, rewardAndAdvantages(r.final, s.vaeParams)};
  }
  // Chunk k: its rollout, then its decode and reward host call, which the
  // executor runs on a worker thread while chunk k+1 is sampled
  // (docs/backend.md, "Asynchronous host calls").
  std::vector<Tensor> finals, xs, lps, images, rewards;
  Rollout whole;
  const int64_t n = o_.chunk();
  for (int64_t k = 0; k < o_.rolloutChunks; ++k) {
    Conditioning ck = c; // the negatives are the same for every chunk
    if (c.prompt)
      ck.prompt = c.prompt.slice(0, k * n, (k + 1) * n);
    if (c.pooled)
      ck.pooled = c.pooled.slice(0, k * n, (k + 1) * n);
    if (c.mask)
      ck.mask = c.mask.slice(0, k * n, (k + 1) * n);
    Rollout r = rollout(seed, iteration, ck, s.params, hp, k * n, n);
    Rewards rw = decodeAndReward(r.final, s.vaeParams);
    if (k == 0)
      whole = r; // the window is the same for every chunk
    finals.push_back(r.final);
    xs.push_back(r.xs);
    lps.push_back(r.oldLogProbs);
    images.push_back(rw.images);
    rewards.push_back(rw.rewards);
  }
  g_.setLocation("rollout");
  whole.final = concat(finals, 0);
  whole.xs = concat(xs, 1);
  whole.oldLogProbs = concat(lps, 1);
  whole.first = 0;
  whole.count = 0;
  g_.setLocation("reward");
  Rewards rw;
  rw.images = concat(images, 0);
  rw.rewards = concat(rewards, 0);
  rw.advantages = wrap(od::GroupAdvantagesOp::create(
      b_, loc(), rw.rewards.value(), static_cast<uint64_t>(o_.group),
      o_.globalStd, static_cast<uint64_t>(o_.ddof), llvm::APFloat(o_.advEps),
      o_.normByStd));
  return {whole, rw};
}

Emitter::LossAndGrad Emitter::lossAndGrad(const TrainState &s, const Rollout &r,
                                          Tensor advantages,
                                          const Conditioning &c,
                                          const HyperParams &hp, int64_t first,
                                          const DenseMap<Value, Tensor> *micro,
                                          Value k) {
  // @loss's value and its gradient with respect to the trainable
  // parameters, in @loss's argument order, over the micro-batch of samples
  // [first, first + micro_batch_size) (the whole batch by default).
  g_.setLocation("loss");
  int64_t n = o_.micro();
  auto samples = [&](Tensor t, int64_t dim) {
    if (!t || n == o_.batch())
      return t;
    if (!micro)
      return t.slice(dim, first, first + n);
    // Micro-batch k of the [count, ...] copy: one contiguous range, which
    // a slice at a dynamic offset must be (the step.bin writer's rule).
    Tensor major = micro->lookup(t.value());
    Shape shape = major.shape();
    shape[0] = 1;
    SmallVector<OpFoldResult> offsets, sizes, strides;
    for (size_t d = 0; d < shape.size(); ++d) {
      offsets.push_back(d == 0 ? OpFoldResult(k) : b_.getIndexAttr(0));
      sizes.push_back(b_.getIndexAttr(shape[d]));
      strides.push_back(b_.getIndexAttr(1));
    }
    Tensor one = wrap(tensor::ExtractSliceOp::create(
        b_, loc(), g_.tensorType(shape, major.elementType()), major.value(),
        offsets, sizes, strides));
    Shape inner = t.shape();
    inner[dim] = n;
    return one.reshape(inner);
  };
  SmallVector<Value> args;
  for (size_t i : trainable_)
    args.push_back(s.params[i].value());
  for (size_t i : frozen_)
    args.push_back(s.params[i].value());
  for (const Tensor &ref : s.refs)
    args.push_back(ref.value());
  for (Tensor a : {samples(r.xs, 1), samples(r.oldLogProbs, 1),
                   samples(advantages, 0), r.start})
    args.push_back(a.value());
  if (hasPrompt_)
    args.push_back(samples(c.prompt, 0).value());
  if (hasPooled_)
    args.push_back(samples(c.pooled, 0).value());
  if (hasMask_)
    args.push_back(samples(c.mask, 0).value());
  for (Tensor negative : {c.negativePrompt, c.negativePooled, c.negativeMask})
    if (negative)
      args.push_back(negative.value());
  for (const char *key : lossHyperParams())
    args.push_back(hp[key]);
  SmallVector<Type> resultTypes(4, g_.tensorType({}, g_.f32()));
  SmallVector<int64_t> wrt;
  for (size_t k = 0; k < trainable_.size(); ++k) {
    wrt.push_back(static_cast<int64_t>(k));
    resultTypes.push_back(s.params[trainable_[k]].type());
  }
  auto vg = od::ValueAndGradOp::create(
      b_, loc(), resultTypes, SymbolRefAttr::get(&g_.context(), "loss"), args,
      b_.getDenseI64ArrayAttr(wrt));
  LossAndGrad lg;
  lg.loss = wrap(vg.getResult(0));
  lg.approxKl = wrap(vg.getResult(1));
  lg.clipfrac = wrap(vg.getResult(2));
  lg.kl = wrap(vg.getResult(3));
  lg.grads.assign(vg.getResults().begin() + 4, vg.getResults().end());
  return lg;
}

Emitter::Update Emitter::optimizerStep(const TrainState &s,
                                       ArrayRef<Value> grads,
                                       const HyperParams &hp) {
  // Global grad-norm clip, then AdamW; a non-finite norm skips the update
  // (every state tensor keeps its value). Written out in primitives: the
  // omni-decompose patterns of omni.clip_grad_norm and omni.adamw
  // (passes/DecomposeRL.cpp, docs/flowgrpo-math.md sections 6 and 7) op for
  // op, with their attributes replaced by the runtime hyper-parameter
  // inputs. The scalar coefficients are computed in f64 and rounded once to
  // the gradients' type, as the patterns fold their attributes, so the
  // default values give the same bits as the compiled-in constants did.
  g_.setLocation("update");
  od::Emitter e(b_, loc());
  Type f64 = b_.getF64Type();
  auto scalarOf = [&](Type elt) { return RankedTensorType::get({}, elt); };
  auto to = [&](Value x, Type elt) {
    return b_.createOrFold<od::CastOp>(loc(), scalarOf(elt), x);
  };
  Value one64 = e.scalar(f64, 1.0);
  // clip_grad_norm: the sum of squares in f64; coef = min(max_norm /
  // (norm + 1e-6), 1) in each gradient's element type.
  Value total = e.scalar(f64, 0.0);
  for (Value g : grads) {
    RankedTensorType gt = od::Emitter::typeOf(g);
    Value g64 = b_.createOrFold<od::CastOp>(loc(), gt.clone(f64), g);
    total = e.add(total, e.sumAll(e.mul(g64, g64)));
  }
  Value norm64 = od::SqrtOp::create(b_, loc(), total);
  Value norm = to(norm64, b_.getF32Type());
  Value finite = od::IsFiniteOp::create(b_, loc(), norm);
  llvm::SmallDenseMap<Type, Value> coefs;
  auto coefFor = [&](Type elt) {
    Value &coef = coefs[elt];
    if (!coef)
      coef =
          od::MinOp::create(b_, loc(),
                            e.div(to(hp["max_grad_norm"], elt),
                                  e.add(to(norm64, elt), e.scalar(elt, 1e-6))),
                            e.scalar(elt, 1.0));
    return coef;
  };
  SmallVector<Value> clipped;
  for (Value g : grads) {
    RankedTensorType gt = od::Emitter::typeOf(g);
    Value scaled = e.mul(g, e.fill(coefFor(gt.getElementType()), gt));
    Value ok = e.fill(finite, gt.clone(b_.getI1Type()));
    clipped.push_back(
        od::SelectOp::create(b_, loc(), ok, scaled, e.splat(gt, 0.0)));
  }
  Update u;
  u.gradNorm = wrap(norm);
  u.finite = wrap(od::IsFiniteOp::create(b_, loc(), u.gradNorm.value()));
  Tensor step1 = s.step + i64(1);
  // adamw (torch semantics): p *= 1 - lr * wd; m = b1 m + (1 - b1) g;
  // v = b2 v + (1 - b2) g^2; p -= (lr / bc1) m / (sqrt(v) / sqrt(bc2) + eps).
  Value lr = hp["lr"], b1 = hp["beta1"], b2 = hp["beta2"];
  Value decay64 = e.sub(one64, e.mul(lr, hp["weight_decay"]));
  Value oneMinusB1 = e.sub(one64, b1), oneMinusB2 = e.sub(one64, b2);
  u.params = s.params;
  for (size_t k = 0; k < trainable_.size(); ++k) {
    size_t i = trainable_[k];
    Value p = s.params[i].value(), g = clipped[k];
    RankedTensorType t = od::Emitter::typeOf(p);
    Type elt = t.getElementType();
    Value decayed = e.mul(p, e.fill(to(decay64, elt), t));
    Value m = e.add(e.mul(s.ms[k].value(), e.fill(to(b1, elt), t)),
                    e.mul(g, e.fill(to(oneMinusB1, elt), t)));
    Value v = e.add(e.mul(s.vs[k].value(), e.fill(to(b2, elt), t)),
                    e.mul(e.mul(g, g), e.fill(to(oneMinusB2, elt), t)));
    Value step = od::CastOp::create(b_, loc(), scalarOf(elt), step1.value());
    Value bc1 = e.sub(e.scalar(elt, 1.0),
                      od::PowOp::create(b_, loc(), to(b1, elt), step));
    Value bc2 = e.sub(e.scalar(elt, 1.0),
                      od::PowOp::create(b_, loc(), to(b2, elt), step));
    Value denom = e.add(e.div(od::SqrtOp::create(b_, loc(), v),
                              e.fill(od::SqrtOp::create(b_, loc(), bc2), t)),
                        e.fill(to(hp["adam_eps"], elt), t));
    Value stepSize = e.div(to(lr, elt), bc1);
    Value update = e.div(e.mul(e.fill(stepSize, t), m), denom);
    u.params[i] = select(u.finite, wrap(e.sub(decayed, update)), s.params[i]);
    u.ms.push_back(select(u.finite, wrap(m), s.ms[k]));
    u.vs.push_back(select(u.finite, wrap(v), s.vs[k]));
  }
  u.step = select(u.finite, step1, s.step);
  return u;
}

std::vector<Tensor> Emitter::emaUpdate(const std::vector<Tensor> &emas,
                                       const std::vector<Tensor> &params,
                                       Tensor step, Tensor finite) {
  // flow_grpo's EMAModuleWrapper.step(parameters, n), called with n = the
  // optimizer steps taken so far (its global_step after the increment):
  // when (n + 1) % ema_every == 0, with d = min(ema_decay, (1 + n) /
  // (10 + n)), ema += (1 - d) (param - ema). The coefficient is computed
  // in f64 and rounded once to the parameters' type (as Python's float is
  // by torch); a skipped update (not `finite`, `step` not advanced) leaves
  // the EMA as it was (docs/flowgrpo-math.md section 7).
  if (emas.empty())
    return {};
  g_.setLocation("update");
  od::Emitter e(b_, loc());
  Type f64 = b_.getF64Type();
  Value n = od::CastOp::create(b_, loc(), RankedTensorType::get({}, f64),
                               step.value());
  Value n1 = e.add(n, e.scalar(f64, 1.0));
  Tensor due = finite;
  if (o_.emaEvery > 1) {
    // (n + 1) / every is an integer exactly when every divides n + 1 (for
    // n + 1 < 2^53 its rounding cannot reach the nearest integer).
    Value q = e.div(n1, e.scalar(f64, static_cast<double>(o_.emaEvery)));
    Value whole = od::FloorOp::create(b_, loc(), q);
    Tensor divides = compare(od::CompareDirection::eq, wrap(whole), wrap(q));
    due = wrap(od::AndOp::create(b_, loc(), finite.value(), divides.value()));
  }
  Value decay = od::MinOp::create(b_, loc(), e.scalar(f64, o_.emaDecay),
                                  e.div(n1, e.add(n, e.scalar(f64, 10.0))));
  Value oneMinus64 = e.sub(e.scalar(f64, 1.0), decay);
  std::vector<Tensor> out;
  for (size_t k = 0; k < trainable_.size(); ++k) {
    Tensor ema = emas[k], p = params[trainable_[k]];
    RankedTensorType t = od::Emitter::typeOf(ema.value());
    Value oneMinus = b_.createOrFold<od::CastOp>(
        loc(), RankedTensorType::get({}, t.getElementType()), oneMinus64);
    Value moved = e.add(
        ema.value(), e.mul(e.fill(oneMinus, t), e.sub(p.value(), ema.value())));
    out.push_back(select(due, wrap(moved), ema));
  }
  return out;
}

void Emitter::returnTrainStep(Function &f, const TrainState &s,
                              const Rewards &rw, const LossAndGrad &lg,
                              const Update &u) {
  // The metrics, then @train_step's results: the new state in
  // @init_state's order, the metrics, the images.
  g_.setLocation("metrics");
  Tensor rewardMean = rw.rewards.mean({0});
  Tensor centered = rw.rewards - rewardMean;
  Tensor rewardStd = sqrt((centered * centered).mean({0}));
  Tensor skipped =
      u.skipped ? u.skipped : select(u.finite, g_.scalar(0.0), g_.scalar(1.0));
  Tensor advantageMean = rw.advantages.mean({0});

  const auto &specs = modelParams_.specs();
  std::vector<Tensor> out;
  std::vector<std::string> names;
  auto result = [&](Tensor t, const std::string &name) {
    out.push_back(t);
    names.push_back(name);
  };
  for (size_t i = 0; i < specs.size(); ++i)
    result(u.params[i], specs[i].name);
  for (size_t i = 0; i < s.vaeParams.size(); ++i)
    result(s.vaeParams[i], decoderParams_.specs()[i].name);
  for (size_t k = 0; k < s.refs.size(); ++k)
    result(s.refs[k], "ref." + specs[trainable_[k]].name);
  for (size_t k = 0; k < u.ms.size(); ++k)
    result(u.ms[k], "adamw.m." + specs[trainable_[k]].name);
  for (size_t k = 0; k < u.vs.size(); ++k)
    result(u.vs[k], "adamw.v." + specs[trainable_[k]].name);
  result(u.step, "adamw.step");
  for (size_t k = 0; k < u.emas.size(); ++k)
    result(u.emas[k], "ema." + specs[trainable_[k]].name);
  result(lg.loss, "loss");
  result(lg.approxKl, "approx_kl");
  result(lg.clipfrac, "clipfrac");
  result(lg.kl, "kl");
  result(rewardMean, "reward_mean");
  result(rewardStd, "reward_std");
  result(advantageMean, "advantage_mean");
  result(u.gradNorm, "grad_norm");
  result(skipped, "skipped");
  result(rw.images, "images");
  g_.setLocation("");
  f.returns(out, names);
}

Emitter::LossAndGrad
Emitter::miniBatchLossAndGrad(const TrainState &s, const Rollout &r,
                              Tensor advantages, const Conditioning &c,
                              const HyperParams &hp, int64_t first) {
  if (o_.micro() == o_.mini())
    return lossAndGrad(s, r, advantages, c, hp, first);
  // for k in [0, mini / micro): sum += lossAndGrad(first + k * micro),
  // from zeros. As an scf.for, not unrolled: omni-fuse never merges across
  // a loop body, and an unrolled chain of sums let it fuse micro-batch k's
  // gradient with the sum after micro-batch k + 1, which put all their
  // forwards before all their backwards; the body's values die at the end
  // of each iteration (omni-plan-memory). Every micro-batch adds in the
  // same order as before; 0 + g is g except that -0 becomes +0.
  g_.setLocation("loss");
  // The mini-batch's samples micro-batch-major: [count, ...] with micro-
  // batch k at k, so the loop body reads it as one contiguous range.
  int64_t count = o_.mini() / o_.micro();
  DenseMap<Value, Tensor> major;
  auto arrange = [&](Tensor t, int64_t dim) {
    if (!t || major.count(t.value()))
      return;
    Tensor mini =
        o_.mini() == o_.batch() ? t : t.slice(dim, first, first + o_.mini());
    Shape split = mini.shape();
    split[dim] = o_.micro();
    split.insert(split.begin() + dim, count);
    Tensor m = mini.reshape(split);
    if (dim > 0) {
      std::vector<int64_t> perm{dim};
      for (int64_t d = 0; d < static_cast<int64_t>(split.size()); ++d)
        if (d != dim)
          perm.push_back(d);
      m = m.transpose(perm);
    }
    major[t.value()] = m;
  };
  arrange(r.xs, 1);
  arrange(r.oldLogProbs, 1);
  arrange(advantages, 0);
  if (hasPrompt_)
    arrange(c.prompt, 0);
  if (hasPooled_)
    arrange(c.pooled, 0);
  if (hasMask_)
    arrange(c.mask, 0);
  SmallVector<Value> inits;
  for (int i = 0; i < 4; ++i)
    inits.push_back(g_.scalar(0.0).value());
  for (size_t i : trainable_) {
    Tensor p = s.params[i];
    inits.push_back(g_.full(p.shape(), 0.0, p.elementType()).value());
  }
  auto loop = scf::ForOp::create(b_, loc(), indexConst(0), indexConst(count),
                                 indexConst(1), inits);
  {
    OpBuilder::InsertionGuard guard(b_);
    b_.setInsertionPointToStart(loop.getBody());
    LossAndGrad lg = lossAndGrad(s, r, advantages, c, hp, first, &major,
                                 loop.getInductionVar());
    g_.setLocation("loss");
    auto carried = loop.getRegionIterArgs();
    SmallVector<Value> next{(wrap(carried[0]) + lg.loss).value(),
                            (wrap(carried[1]) + lg.approxKl).value(),
                            (wrap(carried[2]) + lg.clipfrac).value(),
                            (wrap(carried[3]) + lg.kl).value()};
    for (size_t q = 0; q < lg.grads.size(); ++q)
      next.push_back((wrap(carried[4 + q]) + wrap(lg.grads[q])).value());
    scf::YieldOp::create(b_, loc(), next);
  }
  LossAndGrad sum;
  sum.loss = wrap(loop.getResult(0));
  sum.approxKl = wrap(loop.getResult(1));
  sum.clipfrac = wrap(loop.getResult(2));
  sum.kl = wrap(loop.getResult(3));
  for (size_t q = 0; q < trainable_.size(); ++q)
    sum.grads.push_back(loop.getResult(4 + q));
  return sum;
}

Emitter::TrainState Emitter::updatedState(const TrainState &s,
                                          const Update &u) {
  TrainState next = s;
  next.params = u.params;
  next.ms = u.ms;
  next.vs = u.vs;
  next.step = u.step;
  next.emas = u.emas;
  return next;
}

void Emitter::emitTrainStep() {
  // @train_step(state..., seed, iteration, [prompt_embeds],
  //             [pooled_prompt_embeds], [negative_prompt_embeds],
  //             [negative_pooled_prompt_embeds] (CFG), lr, weight_decay,
  //             beta1, beta2,
  //             adam_eps, max_grad_norm, beta, clip_range, adv_clip_max,
  //             noise_level, guidance_scale)
  //   -> (state'..., metrics..., images)
  Function f(g_, "train_step", /*isPublic=*/true);
  TrainState state = stateArguments(f);
  Tensor seed = f.argument(g_.tensorType({}, g_.i64()), "seed");
  Tensor iteration = f.argument(g_.tensorType({}, g_.i64()), "iteration");
  Conditioning c = conditioningArguments(f);
  HyperParams hp = hyperParamArguments(f);
  auto [r, rw] = rolloutAndRewards(seed, iteration, c, state, hp);
  // inner_epochs passes over the batch in contiguous mini-batches, one
  // optimizer step each; the ratio of every step uses the rollout's
  // old_log_probs (docs/recipes.md section 3).
  std::vector<LossAndGrad> lgs;
  std::vector<Update> us;
  TrainState current = state;
  for (int64_t epoch = 0; epoch < o_.innerEpochs; ++epoch)
    for (int64_t first = 0; first < o_.batch(); first += o_.mini()) {
      lgs.push_back(
          miniBatchLossAndGrad(current, r, rw.advantages, c, hp, first));
      us.push_back(optimizerStep(current, lgs.back().grads, hp));
      us.back().emas = emaUpdate(current.emas, us.back().params, us.back().step,
                                 us.back().finite);
      current = updatedState(current, us.back());
    }
  if (lgs.size() == 1) {
    returnTrainStep(f, state, rw, lgs[0], us[0]);
    return;
  }
  // The metrics over the optimizer steps: loss, approx_kl, clipfrac, kl and
  // grad_norm their mean, skipped the number of skipped steps.
  g_.setLocation("metrics");
  LossAndGrad mean = lgs[0];
  Update last = us.back();
  Tensor gradNorm = us[0].gradNorm;
  auto skippedAt = [&](size_t k) {
    return select(us[k].finite, g_.scalar(0.0), g_.scalar(1.0));
  };
  last.skipped = skippedAt(0);
  for (size_t k = 1; k < lgs.size(); ++k) {
    mean.loss = mean.loss + lgs[k].loss;
    mean.approxKl = mean.approxKl + lgs[k].approxKl;
    mean.clipfrac = mean.clipfrac + lgs[k].clipfrac;
    mean.kl = mean.kl + lgs[k].kl;
    gradNorm = gradNorm + us[k].gradNorm;
    last.skipped = last.skipped + skippedAt(k);
  }
  double inv = 1.0 / static_cast<double>(lgs.size());
  mean.loss = mean.loss * inv;
  mean.approxKl = mean.approxKl * inv;
  mean.clipfrac = mean.clipfrac * inv;
  mean.kl = mean.kl * inv;
  last.gradNorm = gradNorm * inv;
  returnTrainStep(f, state, rw, mean, last);
}

void Emitter::emitSampleSteps() {
  Function f(g_, "sample_steps", /*isPublic=*/true);
  f.returns({i64(o_.steps)}, {"steps"});
}

llvm::Error Emitter::emit(const std::string &program) {
  publicModels_ = program != "train" && program != "sample";
  if (program == "sample") {
    emitVelocity();
    emitDecoder();
    emitInitState(/*weightsOnly=*/true);
    emitSample();
    emitSampleSteps();
    return llvm::Error::success();
  }
  if (program == "decode") {
    emitDecoder();
    return llvm::Error::success();
  }
  // Only a train program has a backward program to recompute in.
  model_.setRecomputeBlocks(o_.recomputeBlocks && program == "train");
  emitVelocity();
  if (program == "velocity")
    return llvm::Error::success();
  if (trainable_.empty())
    return fail("flowgrpo: the model has no trainable parameters");
  emitDecoder();
  if (o_.rolloutChunks > 1) {
    velocityChunk_ =
        emitVelocityAt("velocity_chunk", o_.chunk(), publicModels_);
    emitDecoder(o_.chunk());
  }
  emitInitState();
  emitRolloutNoise();
  emitLoss();
  emitTrainStep();
  return llvm::Error::success();
}

} // namespace

namespace {

/// Declares the mesh and the gather mode in the module and, for FSDP, splits
/// dimension 0 of every state tensor of rank >= 1 over fsdp: @init_state's
/// results, @train_step's first as many arguments and results (the state
/// comes first, in @init_state's order; FlowGrpo.h). 0-D state (adamw.step)
/// stays replicated (docs/sharding.md section 1).
void annotateMesh(ModuleOp module, const MeshSpec &mesh, const Options &o) {
  MLIRContext *ctx = module.getContext();
  OpBuilder b(ctx);
  b.setInsertionPointToStart(module.getBody());
  SmallVector<StringRef> axes;
  SmallVector<int64_t> shape;
  for (const auto &[axis, n] : mesh.axes) {
    axes.push_back(axis);
    shape.push_back(n);
  }
  od::MeshOp::create(b, module.getLoc(), "mesh", b.getStrArrayAttr(axes),
                     b.getDenseI64ArrayAttr(shape));
  module->setAttr("omni.shard_gather",
                  b.getStringAttr(o.gatherPerStep ? "per-step" : "once"));
  if (!mesh.fsdp())
    return;
  auto init = module.lookupSymbol<func::FuncOp>("init_state");
  auto step = module.lookupSymbol<func::FuncOp>("train_step");
  auto sharding = [&](Type type) -> Attribute {
    auto t = cast<RankedTensorType>(type);
    if (t.getRank() == 0)
      return {};
    SmallVector<Attribute> dims{b.getStrArrayAttr({"fsdp"})};
    for (int64_t d = 1; d < t.getRank(); ++d)
      dims.push_back(b.getArrayAttr({}));
    return od::ShardingAttr::get(ctx, FlatSymbolRefAttr::get(ctx, "mesh"),
                                 b.getArrayAttr(dims));
  };
  constexpr llvm::StringLiteral kAttr = "omni.sharding";
  for (unsigned i = 0, e = init.getNumResults(); i < e; ++i) {
    Attribute a = sharding(init.getResultTypes()[i]);
    if (!a)
      continue;
    init.setResultAttr(i, kAttr, a);
    step.setArgAttr(i, kAttr, a);
    step.setResultAttr(i, kAttr, a);
  }
}

} // namespace

namespace {

/// The shortest text that reads back as `v` (lora_alpha's scale alpha / r
/// must be exact in an exported adapter).
std::string exactNumber(double v) {
  char text[32];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(text, sizeof text, "%.*g", digits, v);
    if (std::strtod(text, nullptr) == v)
      break;
  }
  return text;
}

/// A config value as diffusers' config.json holds it: `lists` keys as
/// arrays of integers ("0,1" -> [0, 1], "" -> []), "none" as null,
/// "true"/"false" as booleans, numbers as numbers, anything else a string.
llvm::json::Value configValue(llvm::StringRef key, llvm::StringRef value,
                              llvm::ArrayRef<llvm::StringRef> lists) {
  if (llvm::is_contained(lists, key)) {
    llvm::json::Array out;
    llvm::SmallVector<llvm::StringRef> parts;
    if (!value.empty())
      value.split(parts, ',');
    for (llvm::StringRef part : parts) {
      int64_t i = 0;
      if (part.trim().getAsInteger(10, i))
        return value; // not a list of integers: kept as written
      out.push_back(i);
    }
    return out;
  }
  if (value == "none")
    return nullptr;
  if (value == "true" || value == "false")
    return value == "true";
  int64_t i = 0;
  if (!value.getAsInteger(10, i))
    return i;
  double d = 0;
  if (!value.getAsDouble(d))
    return d;
  return value;
}

/// diffusers' config.json text of `entries`, on one line (omnirun --list
/// prints it as one).
std::string configJson(llvm::json::Object entries) {
  return llvm::formatv("{0}", llvm::json::Value(std::move(entries))).str();
}

/// What the program was made from, as the module's `omni.metadata`
/// (step.bin's metadata table, docs/backend.md "Metadata"; `omnirun
/// --export` reads the diffusers configs from it, docs/export.md): the
/// recipe, program, model and decoder with their resolved configs, LoRA
/// and EMA settings, and the diffusers config.json of the transformer
/// (SD3Transformer2DModel: our sd3 config keys but latent_size and
/// text_tokens) and of the VAE (AutoencoderKL, whose encoder omni does not
/// have: the config says so).
void annotateMetadata(ModuleOp module, const RecipeRequest &request,
                      const Config &modelConfig,
                      const std::optional<Config> &decoderConfig,
                      const LoraOptions &lora, const Options &o) {
  Builder b(module.getContext());
  llvm::SmallVector<NamedAttribute> entries;
  auto add = [&](llvm::StringRef key, const std::string &value) {
    entries.push_back(b.getNamedAttr(key, b.getStringAttr(value)));
  };
  add("recipe", "flowgrpo");
  add("program", request.program);
  add("model", request.model);
  add("model_preset", request.modelConfig);
  add("model_config", modelConfig.str());
  add("decoder", request.decoder.empty() ? "none" : request.decoder);
  if (decoderConfig) {
    add("decoder_preset", request.decoderConfig);
    add("decoder_config", decoderConfig->str());
  }
  if (lora.enabled()) {
    add("lora_rank", std::to_string(lora.rank));
    add("lora_alpha", exactNumber(lora.alpha));
    std::string targets;
    for (const std::string &t : lora.targets)
      targets += (targets.empty() ? "" : ",") + t;
    add("lora_targets", targets);
  }
  add("ema_decay", exactNumber(o.emaDecay));
  if (o.emaDecay > 0)
    add("ema_every", std::to_string(o.emaEvery));
  if (request.model == "sd3") {
    llvm::json::Object config{{"_class_name", "SD3Transformer2DModel"}};
    for (const auto &[key, value] : modelConfig.values())
      if (key != "latent_size" && key != "text_tokens")
        config[key] = configValue(key, value, {"dual_attention_layers"});
    add("diffusers_transformer_config", configJson(std::move(config)));
  }
  if (decoderConfig && request.decoder == "autoencoder_kl") {
    const Config &d = *decoderConfig;
    llvm::json::Object config{
        {"_class_name", "AutoencoderKL"},
        {"_omni_decoder_only",
         "omni has only the decoder of this VAE: the encoder's weights "
         "(encoder.*, quant_conv.*) are missing"},
        {"in_channels", 3},
        {"act_fn", "silu"}};
    for (const auto &[key, value] : d.values())
      if (key != "latent_size")
        config[key] = configValue(key, value, {"block_out_channels"});
    size_t blocks = d.getInts("block_out_channels").size();
    llvm::consumeError(d.takeError());
    llvm::json::Array down, up;
    for (size_t i = 0; i < blocks; ++i) {
      down.push_back("DownEncoderBlock2D");
      up.push_back("UpDecoderBlock2D");
    }
    config["down_block_types"] = std::move(down);
    config["up_block_types"] = std::move(up);
    config["use_quant_conv"] =
        configValue("", d.getString("use_post_quant_conv"), {});
    llvm::consumeError(d.takeError());
    // The image size the latents decode to (diffusers' sample_size).
    if (d.has("latent_size") && blocks > 0)
      config["sample_size"] = d.getInt("latent_size") << (blocks - 1);
    llvm::consumeError(d.takeError());
    add("diffusers_vae_config", configJson(std::move(config)));
  }
  module->setAttr("omni.metadata", b.getDictionaryAttr(entries));
}

} // namespace

llvm::Expected<OwningOpRef<ModuleOp>> buildProgram(MLIRContext &context,
                                                   const RecipeRequest &request,
                                                   const Registry &registry) {
  if (request.program != "train" && request.program != "velocity" &&
      request.program != "decode" && request.program != "sample")
    return fail("flowgrpo: program '" + request.program +
                "': expected train, velocity, decode or sample");
  if (request.program == "decode" && request.decoder.empty())
    return fail("flowgrpo: program 'decode' needs a decoder");
  std::optional<MeshSpec> mesh;
  if (request.mesh) {
    auto parsed = parseMesh(*request.mesh);
    if (!parsed)
      return parsed.takeError();
    mesh = std::move(*parsed);
    if (request.program != "train")
      return fail("--mesh=" + *request.mesh +
                  ": only the training program is sharded (found --program=" +
                  request.program + ")");
  }
  // The SDE window is the training's: the sampling program has none, so
  // its default (2 steps) does not constrain `steps` there.
  std::vector<std::string> given = request.options;
  if (request.program == "sample")
    given.insert(given.begin(), "window=0");
  auto options = parseOptions(given);
  if (!options)
    return options.takeError();
  if (request.program == "sample") {
    // The sampling program's batch is sample_batch images, one prompt
    // each (docs/sampling.md): the emitter's batch P*G becomes B*1.
    if (options->sampleBatch > 0)
      options->prompts = options->sampleBatch;
    else
      options->prompts = options->batch();
    options->group = 1;
    options->rolloutChunks = 1;
  }
  if (mesh && options->rolloutChunks > 1)
    return fail("--mesh=" + *request.mesh +
                ": rollout_chunks = " + std::to_string(options->rolloutChunks) +
                " is not supported with a mesh yet: expected rollout_chunks "
                "= 1");
  if (mesh && options->batch() % mesh->ranks() != 0)
    return fail("--mesh=" + *request.mesh +
                ": the rollout batch prompts_per_iteration * group_size = " +
                std::to_string(options->batch()) +
                " must be divisible by the mesh's " +
                std::to_string(mesh->ranks()) + " ranks");
  if (mesh && options->micro() != options->batch())
    return fail("--mesh=" + *request.mesh +
                ": mini_batch_size and micro_batch_size must be the whole "
                "batch with a mesh (found mini-batch " +
                std::to_string(options->mini()) + ", micro-batch " +
                std::to_string(options->micro()) + ", batch " +
                std::to_string(options->batch()) +
                "); splitting the sharded batch is not supported yet");
  auto modelConfig = registry.config(request.model, request.modelConfig,
                                     request.modelOverrides);
  if (!modelConfig)
    return modelConfig.takeError();
  auto model = registry.makeVelocity(request.model, *modelConfig);
  if (!model)
    return model.takeError();
  std::unique_ptr<ImageDecoder> decoder;
  std::optional<Config> decoderConfigUsed; // for annotateMetadata
  if (!request.decoder.empty()) {
    // The decoder's latent size follows the model's (a VAE decoder is
    // convolutional: any latent size is the same weights), unless the
    // request sets it: `--model=sd3 --config=small` (32x32 latents) with
    // the tiny decoder preset (16) would otherwise not fit.
    std::vector<std::string> decoderOverrides;
    Shape latent = (*model)->latentShape();
    bool sizeGiven = false;
    for (const std::string &o : request.decoderOverrides)
      sizeGiven |= llvm::StringRef(o).starts_with("latent_size=");
    if (!sizeGiven && latent.size() == 3 && latent[1] == latent[2]) {
      auto preset = registry.config(request.decoder, request.decoderConfig, {});
      if (preset && preset->has("latent_size"))
        decoderOverrides.push_back("latent_size=" + std::to_string(latent[1]));
      else if (!preset)
        llvm::consumeError(preset.takeError()); // reported just below
    }
    decoderOverrides.insert(decoderOverrides.end(),
                            request.decoderOverrides.begin(),
                            request.decoderOverrides.end());
    auto decoderConfig = registry.config(request.decoder, request.decoderConfig,
                                         decoderOverrides);
    if (!decoderConfig)
      return decoderConfig.takeError();
    decoderConfigUsed = *decoderConfig;
    auto made = registry.makeDecoder(request.decoder, *decoderConfig);
    if (!made)
      return made.takeError();
    decoder = std::move(*made);
    Shape want = decoder->latentShape();
    if (latent != want) {
      auto str = [](const Shape &s) {
        std::string out;
        for (int64_t d : s)
          out += (out.empty() ? "" : "x") + std::to_string(d);
        return out;
      };
      std::string fix =
          latent.size() == 3 && latent[1] == latent[2] && latent[0] == want[0]
              ? "; leave out --decoder-set=latent_size (it follows the "
                "model) or set it to " +
                    std::to_string(latent[1])
              : "";
      return fail("flowgrpo: model " + request.model + " makes latents " +
                  str(latent) + " but decoder " + request.decoder +
                  " expects " + str(want) + fix);
    }
  }
  if (!decoder && (*model)->latentShape()[0] < 3)
    return fail("flowgrpo: without a decoder the image is the latent's first "
                "3 channels, but model " +
                request.model + " has " +
                std::to_string((*model)->latentShape()[0]));
  context.loadDialect<od::OmniDialect, func::FuncDialect, scf::SCFDialect,
                      tensor::TensorDialect, arith::ArithDialect>();
  LoraOptions lora;
  lora.rank = options->loraRank;
  lora.alpha = options->loraAlpha > 0 ? options->loraAlpha
                                      : static_cast<double>(options->loraRank);
  lora.targets = (*model)->loraTargets();
  if (lora.enabled() && lora.targets.empty())
    return fail("flowgrpo: lora_rank > 0 but model " + request.model +
                " names no LoRA target layers");
  Graph graph(context);
  Emitter emitter(graph, *options, **model, decoder.get(), lora,
                  mesh ? &*mesh : nullptr);
  if (llvm::Error e = emitter.emit(request.program))
    return std::move(e);
  OwningOpRef<ModuleOp> module = graph.release();
  if (mesh)
    annotateMesh(*module, *mesh, *options);
  annotateMetadata(*module, request, *modelConfig, decoderConfigUsed, lora,
                   *options);
  if (failed(verify(*module)))
    return fail("flowgrpo: the emitted program does not verify (a recipe or "
                "model bug; run with --mlir-print-ir-after-failure)");
  return module;
}

} // namespace omni::fe::flowgrpo
