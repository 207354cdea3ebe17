//===- omnigen.cpp - writes a training program for a registered model -----===//
//
//   omnigen --model=sd3 --config=tiny [--set=key=value]...
//           [--decoder=NAME|none] [--decoder-config=tiny]
//           [--decoder-set=key=value]... [--opt=key=value]...
//           [--mesh=dp=2,fsdp=2] -o train.mlir
//   omnigen --from-diffusers=DIR [--set=key=value]... [flags]
//           (the model of a diffusers SD3/SD3.5 folder, docs/diffusers.md)
//   omnigen --list     (models, their configs and the recipe's options)
//   omnigen --config=omni.toml [flags]   (docs/config.md; flags override
//                                          the file)
//
// --config is the model's preset (`tiny`) or, when its value ends in
// .toml, a config file: its [model], [decoder], [recipe] and `mesh` become
// flags before the command line's (runtime/base/ConfigFile.h).
//
// The recipe is FlowGRPO (frontends/recipes/flowgrpo); the output is the
// omni-dialect program `omnic` compiles and `omnirun` trains.
//
//===----------------------------------------------------------------------===//

#include "frontends/builder/Model.h"
#include "frontends/models/DiffusersConfig.h"
#include "frontends/recipes/flowgrpo/FlowGrpo.h"
#include "runtime/base/ConfigFile.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OperationSupport.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace cl = llvm::cl;
using namespace omni::fe;

static void list(llvm::raw_ostream &os) {
  for (const ModelEntry &e : Registry::builtin().entries()) {
    os << e.name << " ("
       << (e.kind == ModelKind::Velocity ? "velocity model" : "decoder")
       << "): " << e.description << "\n";
    if (e.kind == ModelKind::Velocity)
      os << "  decoder (default of --decoder): " << e.pipelineDecoder << "\n";
    for (const auto &[name, cfg] : e.presets)
      os << "  config " << name << ": " << cfg.str() << "\n";
  }
  os << "recipe flowgrpo options (--opt=key=value): "
     << flowgrpo::defaultOptions().str() << "\n";
  std::string runtime;
  for (const std::string &key : flowgrpo::runtimeOptions())
    runtime += (runtime.empty() ? "" : " ") + key;
  os << "  runtime (step.bin records the default; omnirun --set key=value "
        "overrides it without recompiling): "
     << runtime << "\n";
  os << "  compile-time (shapes and program structure; change them with "
        "--opt and recompile): every other option\n";
  os << "mesh (--mesh=axis=size,...): axes dp and fsdp, in mesh order "
        "(docs/sharding.md)\n";
}

/// A --config value that names a config file rather than a preset.
static bool isConfigFile(llvm::StringRef value) {
  return value.ends_with(".toml");
}

/// Takes `--config FILE.toml` (or -config, or =FILE.toml) out of `args`
/// (argv without the program name); returns the file, "" for none, or an
/// error line.
static llvm::Expected<std::string>
takeConfigFile(std::vector<std::string> &args) {
  std::string file;
  std::vector<std::string> rest;
  for (size_t i = 0; i < args.size(); ++i) {
    llvm::StringRef arg = args[i];
    llvm::StringRef name = arg.ltrim('-');
    std::optional<std::string> value;
    if (arg.starts_with("-") && name == "config" && i + 1 < args.size() &&
        isConfigFile(args[i + 1]))
      value = args[++i];
    else if (arg.starts_with("-") && name.starts_with("config=") &&
             isConfigFile(name.drop_front(7)))
      value = name.drop_front(7).str();
    if (!value) {
      rest.push_back(args[i]);
      continue;
    }
    if (!file.empty())
      return llvm::createStringError("--config is given two config files, " +
                                     file + " and " + *value +
                                     ": expected one");
    file = *value;
  }
  args = std::move(rest);
  return file;
}

/// Checks the names and types the reader leaves to omnigen: [recipe]'s keys
/// are the recipe's options, with their value types, and the overrides'
/// keys are the preset's (when the model and preset exist; buildProgram
/// names them otherwise). Errors are "FILE:LINE:COL: ...".
static llvm::Error checkConfig(const std::vector<omni::config::ConfigArg> &file,
                               const std::string &model,
                               const std::string &modelPreset,
                               const std::string &decoder,
                               const std::string &decoderPreset) {
  auto fail = [](const omni::config::ConfigArg &a, const llvm::Twine &what) {
    return llvm::createStringError(a.where + ": " + what.str());
  };
  for (const omni::config::ConfigArg &a : file) {
    std::string name = a.value ? a.value->substr(0, a.value->find('=')) : "";
    if (a.flag == "--opt") {
      std::string kind = flowgrpo::optionKind(name);
      if (kind.empty())
        return fail(a, "unknown key '" + a.key +
                           "': the flowgrpo recipe has no option '" + name +
                           "' (omnigen --list shows them)");
      bool ok = kind == "number"
                    ? a.type == "an integer" || a.type == "a number"
                    : a.type == (kind == "integer" ? "an " : "a ") + kind;
      if (!ok)
        return fail(a, a.key + ": expected " +
                           (kind == "integer" ? "an " : "a ") + kind +
                           ", found " + a.type);
      continue;
    }
    bool isModel = a.flag == "--set";
    if (!isModel && a.flag != "--decoder-set")
      continue;
    const std::string &which = isModel ? model : decoder;
    const std::string &preset = isModel ? modelPreset : decoderPreset;
    llvm::Expected<Config> config =
        Registry::builtin().config(which, preset, {});
    if (!config) {
      llvm::consumeError(config.takeError());
      continue;
    }
    if (!config->has(name)) {
      std::string known;
      for (const auto &[key, value] : config->values())
        known += (known.empty() ? "" : ", ") + key;
      return fail(a, "unknown key '" + a.key + "': " + which + " (" + preset +
                         ") has no config key '" + name + "' (known: " + known +
                         ")");
    }
  }
  return llvm::Error::success();
}

/// --from-diffusers: model sd3 and decoder autoencoder_kl with every key
/// from the folder's configs, then the command line's --set and
/// --decoder-set (a later key=value wins). The decoder's latent_size
/// follows the transformer's (after --set).
static llvm::Error fromDiffusers(flowgrpo::RecipeRequest &request,
                                 const std::string &dir, bool modelGiven,
                                 bool decoderConfigGiven) {
  if (modelGiven)
    return llvm::createStringError(
        "--from-diffusers " + dir +
        " sets the model and its config: drop --model and --config "
        "(--set overrides a key)");
  if (!request.decoder.empty() && request.decoder != "autoencoder_kl")
    return llvm::createStringError(
        "--from-diffusers " + dir + ": --decoder=" + request.decoder +
        ", expected autoencoder_kl (the folder's vae) or none");
  if (decoderConfigGiven)
    return llvm::createStringError(
        "--from-diffusers " + dir +
        " sets the decoder's config: drop --decoder-config "
        "(--decoder-set overrides a key)");
  llvm::Expected<diffusers::FolderConfigs> folder = diffusers::readFolder(dir);
  if (!folder)
    return folder.takeError();
  std::vector<std::string> model = diffusers::assignments(folder->transformer);
  model.insert(model.end(), request.modelOverrides.begin(),
               request.modelOverrides.end());
  request.model = "sd3";
  request.modelConfig = "tiny";
  request.modelOverrides = std::move(model);
  if (request.decoder.empty())
    return llvm::Error::success();
  llvm::Expected<Config> transformer =
      Registry::builtin().config("sd3", "tiny", request.modelOverrides);
  if (!transformer)
    return transformer.takeError();
  folder->vae.set("latent_size", transformer->getString("latent_size"));
  std::vector<std::string> vae = diffusers::assignments(folder->vae);
  vae.insert(vae.end(), request.decoderOverrides.begin(),
             request.decoderOverrides.end());
  request.decoderConfig = "tiny";
  request.decoderOverrides = std::move(vae);
  return llvm::Error::success();
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  // A config file's arguments go before the command line's, so that a flag
  // overrides the file (llvm::cl keeps an option's last value; --set,
  // --decoder-set and --opt add up, and a later key=value wins).
  std::vector<std::string> args(argv + 1, argv + argc);
  llvm::Expected<std::string> configFile = takeConfigFile(args);
  if (!configFile) {
    llvm::errs() << "omnigen: " << llvm::toString(configFile.takeError())
                 << "\n";
    return 1;
  }
  std::vector<omni::config::ConfigArg> fileArgs;
  if (!configFile->empty()) {
    auto read =
        omni::config::readConfigFile(*configFile, omni::config::Tool::Omnigen);
    if (!read.ok()) {
      llvm::errs() << "omnigen: " << std::string(read.status().message())
                   << "\n";
      return 1;
    }
    fileArgs = std::move(*read);
  }
  std::vector<std::string> allArgs;
  for (const omni::config::ConfigArg &a : fileArgs)
    allArgs.push_back(a.arg());
  allArgs.insert(allArgs.end(), args.begin(), args.end());
  std::vector<const char *> argvAll = {argv[0]};
  for (const std::string &a : allArgs)
    argvAll.push_back(a.c_str());

  cl::OptionCategory category("omnigen options");
  cl::opt<std::string> model("model", cl::desc("velocity model"),
                             cl::init("sd3"), cl::cat(category));
  cl::opt<std::string> config("config",
                              cl::desc("model config (preset), or a config "
                                       "file FILE.toml (docs/config.md)"),
                              cl::init("tiny"), cl::cat(category));
  cl::list<std::string> set("set", cl::desc("model config override key=value"),
                            cl::cat(category));
  cl::opt<std::string> decoder(
      "decoder",
      cl::desc("image decoder, or none (the latent squashed to [0, 1] is the "
               "image); default: the model's pipeline VAE (autoencoder_kl, "
               "autoencoder_kl_qwenimage for qwen_image)"),
      cl::init("autoencoder_kl"), cl::cat(category));
  cl::opt<std::string> decoderConfig("decoder-config",
                                     cl::desc("decoder config"),
                                     cl::init("tiny"), cl::cat(category));
  cl::list<std::string> decoderSet(
      "decoder-set", cl::desc("decoder config override key=value"),
      cl::cat(category));
  cl::list<std::string> opt("opt", cl::desc("recipe option key=value"),
                            cl::cat(category));
  cl::opt<std::string> program(
      "program",
      cl::desc("train (default): the FlowGRPO training program; velocity or "
               "decode: only that public function (inference, parity); "
               "sample: the sampling program @sample (docs/sampling.md)"),
      cl::init("train"), cl::cat(category));
  cl::opt<std::string> mesh(
      "mesh",
      cl::desc("device mesh axis=size,... over the axes dp and fsdp in mesh "
               "order, e.g. dp=2,fsdp=2 (docs/sharding.md); fsdp > 1 shards "
               "the state"),
      cl::value_desc("axes"), cl::cat(category));
  cl::opt<std::string> output("o", cl::desc("train.mlir to write (- : stdout)"),
                              cl::value_desc("file"), cl::init("-"),
                              cl::cat(category));
  cl::opt<std::string> diffusersDir(
      "from-diffusers",
      cl::desc("the model of a diffusers StableDiffusion3Pipeline folder: "
               "sd3 and autoencoder_kl configured from its model_index.json, "
               "transformer/config.json and vae/config.json (--set and "
               "--decoder-set override a key; docs/diffusers.md)"),
      cl::value_desc("dir"), cl::cat(category));
  cl::opt<bool> listModels("list", cl::desc("list models and options"),
                           cl::cat(category));
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(static_cast<int>(argvAll.size()), argvAll.data(),
                              "omnigen: writes the FlowGRPO training program "
                              "of a registered model\n");
  if (listModels) {
    list(llvm::outs());
    return 0;
  }
  // A config file named without .toml would be taken for a preset.
  if (const ModelEntry *entry = Registry::builtin().find(model)) {
    bool preset = llvm::any_of(entry->presets, [&](const auto &p) {
      return p.first == config.getValue();
    });
    if (!preset && llvm::sys::fs::is_regular_file(config.getValue())) {
      llvm::errs() << "omnigen: --config=" << config
                   << ": a config file's name must end in .toml (without it, "
                      "--config is the model's preset)\n";
      return 1;
    }
  }
  if (!decoder.getNumOccurrences())
    if (const ModelEntry *entry = Registry::builtin().find(model))
      decoder = entry->pipelineDecoder;
  if (llvm::Error e =
          checkConfig(fileArgs, model, config, decoder, decoderConfig)) {
    llvm::errs() << "omnigen: " << llvm::toString(std::move(e)) << "\n";
    return 1;
  }
  flowgrpo::RecipeRequest request;
  request.model = model;
  request.modelConfig = config;
  request.modelOverrides.assign(set.begin(), set.end());
  request.decoder = decoder == "none" ? "" : std::string(decoder);
  request.decoderConfig = decoderConfig;
  request.decoderOverrides.assign(decoderSet.begin(), decoderSet.end());
  request.options.assign(opt.begin(), opt.end());
  request.program = program;
  if (mesh.getNumOccurrences())
    request.mesh = mesh;
  if (diffusersDir.getNumOccurrences())
    if (llvm::Error e = fromDiffusers(request, diffusersDir,
                                      model.getNumOccurrences() ||
                                          config.getNumOccurrences(),
                                      decoderConfig.getNumOccurrences() != 0)) {
      llvm::errs() << "omnigen: " << llvm::toString(std::move(e)) << "\n";
      return 1;
    }

  mlir::MLIRContext context;
  auto module = flowgrpo::buildProgram(context, request);
  if (!module) {
    llvm::errs() << "omnigen: " << llvm::toString(module.takeError()) << "\n";
    return 1;
  }
  std::error_code ec;
  llvm::ToolOutputFile out(output, ec, llvm::sys::fs::OF_None);
  if (ec) {
    llvm::errs() << "omnigen: cannot write " << output << ": " << ec.message()
                 << "\n";
    return 1;
  }
  if (diffusersDir.getNumOccurrences())
    out.os() << "// From the diffusers folder " << diffusersDir
             << " (omnigen --from-diffusers; the --set values below are its "
                "configs').\n";
  out.os() << flowgrpo::describe(request);
  // Locations name each op's phase (rollout, reward, loss, update) and
  // model layer; omnic keeps them for errors and the runtime's time per
  // phase.
  (*module)->print(out.os(), mlir::OpPrintingFlags()
                                 .elideLargeElementsAttrs(
                                     std::numeric_limits<int64_t>::max())
                                 .enableDebugInfo());
  out.os() << "\n";
  out.keep();
  return 0;
}
