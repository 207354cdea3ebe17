//===- omni-opt.cpp - the omni optimizer driver ---------------------------===//
//
// mlir-opt for omni programs: parses, verifies, runs passes and pipelines and
// prints. It registers the omni dialect with the upstream dialects omni
// programs use, the omni passes and named pipelines, and the upstream passes
// the pipeline is built from.
//
//===----------------------------------------------------------------------===//

#include "dialects/omni/OmniOps.h"
#include "passes/Passes.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "mlir/Transforms/Passes.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::omni::registerOmniDialects(registry);
  mlir::registerTransformsPasses();
  mlir::omni::registerOmniPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "omni optimizer driver\n", registry));
}
