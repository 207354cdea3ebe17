//===- omni-opt.cpp - the omni optimizer driver ---------------------------===//
//
// mlir-opt for omni programs: parses, verifies, runs passes and pipelines and
// prints. It registers the omni dialect with the upstream dialects omni
// programs use, the omni passes and named pipelines, and the upstream passes
// the pipeline is built from. Like omnic and omni-eval it refuses sources
// nested deeper than kMaxSourceNesting and works on a large stack
// (dialects/omni/OmniTools.h); --help hides LLVM's code generation options
// and --version prints omni's version.
//
//===----------------------------------------------------------------------===//

#include "dialects/omni/OmniOps.h"
#include "dialects/omni/OmniTools.h"
#include "passes/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  // LLVM's own options (linked in, registered before main); MLIR's, which
  // registerAndParseCLIOptions adds below, stay.
  mlir::omni::hideLlvmOptions();
  mlir::DialectRegistry registry;
  mlir::omni::registerOmniDialects(registry);
  mlir::registerTransformsPasses();
  mlir::omni::registerOmniPasses();
  mlir::omni::setOmniVersionPrinter("omni-opt");
  // What MlirOptMain(argc, argv, ...) does, with the nesting check between
  // reading the input and parsing it.
  auto [inputFile, outputFile] = mlir::registerAndParseCLIOptions(
      argc, argv, "omni optimizer driver\n", registry);
  mlir::MlirOptMainConfig config =
      mlir::MlirOptMainConfig::createFromCLOptions();
  if (config.shouldShowDialects()) {
    llvm::outs() << "Available Dialects: ";
    llvm::interleave(registry.getDialectNames(), llvm::outs(), ",");
    llvm::outs() << "\n";
    return 0;
  }
  if (config.shouldListPasses()) {
    mlir::printRegisteredPasses();
    return 0;
  }
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input =
      mlir::openInputFile(inputFile, &error);
  if (!input) {
    llvm::errs() << "omni-opt: " << error << "\n";
    return 1;
  }
  if (mlir::failed(mlir::omni::checkSourceNesting(input->getMemBufferRef(),
                                                  llvm::errs())))
    return 1;
  std::unique_ptr<llvm::ToolOutputFile> output =
      mlir::openOutputFile(outputFile, &error);
  if (!output) {
    llvm::errs() << "omni-opt: " << error << "\n";
    return 1;
  }
  return mlir::omni::runOnLargeStack([&] {
    if (mlir::failed(mlir::MlirOptMain(output->os(), std::move(input), registry,
                                       config)))
      return 1;
    output->keep();
    return 0;
  });
}
