//===- omnigen.cpp - writes a training program for a registered model -----===//
//
//   omnigen --model=sd3 --config=tiny [--set=key=value]...
//           [--decoder=autoencoder_kl|none] [--decoder-config=tiny]
//           [--decoder-set=key=value]... [--opt=key=value]...
//           [--mesh=dp=2,fsdp=2] -o train.mlir
//   omnigen --list     (models, their configs and the recipe's options)
//
// The recipe is FlowGRPO (frontends/recipes/flowgrpo); the output is the
// omni-dialect program `omnic` compiles and `omnirun` trains.
//
//===----------------------------------------------------------------------===//

#include "frontends/builder/Model.h"
#include "frontends/recipes/flowgrpo/FlowGrpo.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OperationSupport.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <limits>

namespace cl = llvm::cl;
using namespace omni::fe;

static void list(llvm::raw_ostream &os) {
  for (const ModelEntry &e : Registry::builtin().entries()) {
    os << e.name << " ("
       << (e.kind == ModelKind::Velocity ? "velocity model" : "decoder")
       << "): " << e.description << "\n";
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

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::OptionCategory category("omnigen options");
  cl::opt<std::string> model("model", cl::desc("velocity model"),
                             cl::init("sd3"), cl::cat(category));
  cl::opt<std::string> config("config", cl::desc("model config"),
                              cl::init("tiny"), cl::cat(category));
  cl::list<std::string> set("set", cl::desc("model config override key=value"),
                            cl::cat(category));
  cl::opt<std::string> decoder("decoder",
                               cl::desc("image decoder, or none (the latent "
                                        "squashed to [0, 1] is the image)"),
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
               "decode: only that public function (inference, parity)"),
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
  cl::opt<bool> listModels("list", cl::desc("list models and options"),
                           cl::cat(category));
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(argc, argv,
                              "omnigen: writes the FlowGRPO training program "
                              "of a registered model\n");
  if (listModels) {
    list(llvm::outs());
    return 0;
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
