//===- omni-eval.cpp - run an omni function on the reference evaluator ---===//
//
// iree-run-module for the reference evaluator: evaluates one function of a
// verified module on --input tensors (`@a.npy` or `2x3xf32=1,2,...`) and
// writes results to --output `@file.npy` or prints them with 9 (float32) or
// 17 (float64) digits for FileCheck. omni.host_call can name the rewards
// (rewards::registerRewards). Exits 1 with one line on user errors.
//===----------------------------------------------------------------------===//

#include "compiler/reference/Evaluator.h"
#include "dialects/omni/OmniOps.h"
#include "dialects/omni/OmniTools.h"
#include "runtime/io/Npy.h"
#include "runtime/io/TensorText.h"
#include "runtime/train/rewards/RewardFunctions.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

namespace cl = llvm::cl;
using omni::reference::Precision;

static cl::OptionCategory category("omni-eval options");
static cl::opt<std::string> inputFile(cl::Positional, cl::Required,
                                      cl::desc("<input .mlir file>"),
                                      cl::cat(category));
static cl::opt<std::string> function("function", cl::Required,
                                     cl::desc("Function to evaluate"),
                                     cl::cat(category));
static cl::list<std::string>
    inputs("input", cl::desc("An argument: @file.npy or 2x3xf32=1,2,..."),
           cl::cat(category));
static cl::list<std::string>
    outputs("output", cl::desc("Where result i goes: @file.npy or - (print)"),
            cl::cat(category));
static cl::opt<Precision>
    precision("precision", cl::desc("Arithmetic of the evaluation"),
              cl::init(Precision::F32),
              cl::values(clEnumValN(Precision::F32, "f32", "float32 semantics"),
                         clEnumValN(Precision::F64, "f64", "float64 oracle")),
              cl::cat(category));

static int fail(const llvm::Twine &message) {
  llvm::errs() << "omni-eval: " << message << "\n";
  return 1;
}

static int run();

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  mlir::omni::hideLlvmOptions(&category);
  mlir::omni::setOmniVersionPrinter("omni-eval");
  cl::ParseCommandLineOptions(argc, argv, "omni reference evaluator\n");
  // The parser and the evaluator recurse per nesting level.
  return mlir::omni::runOnLargeStack(run);
}

static int run() {
  mlir::DialectRegistry registry;
  mlir::omni::registerOmniDialects(registry);
  mlir::MLIRContext context(registry);
  llvm::SourceMgr sourceMgr;
  mlir::SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  std::string error;
  if (auto file = mlir::openInputFile(inputFile, &error))
    sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  else
    return fail(error);
  if (mlir::failed(mlir::omni::checkSourceNesting(
          *sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID()), llvm::errs())))
    return 1;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(sourceMgr, &context);
  if (!module) // the diagnostic handler has printed file:line:col: error
    return 1;

  std::vector<omni::HostTensor> args;
  for (auto [i, text] : llvm::enumerate(inputs)) {
    absl::StatusOr<omni::HostTensor> arg = omni::parseTensorArgument(text);
    if (!arg.ok())
      return fail("--input #" + llvm::Twine(i) + ": " +
                  std::string(arg.status().message()));
    args.push_back(std::move(*arg));
  }
  // The training side's host functions: omni.host_call can name a reward.
  omni::HostFunctionRegistry hostFunctions =
      omni::rewards::rewardHostFunctions();
  omni::reference::EvalOptions options;
  options.precision = precision;
  options.hostFunctions = &hostFunctions;
  absl::StatusOr<std::vector<omni::HostTensor>> results =
      omni::reference::evaluateFunction(*module, function, args, options);
  if (!results.ok())
    return fail(std::string(results.status().message()));
  if (!outputs.empty() && outputs.size() != results->size())
    return fail("@" + function + " returns " + llvm::Twine(results->size()) +
                " results but " + llvm::Twine(outputs.size()) +
                " --output were given");

  for (auto [i, result] : llvm::enumerate(*results)) {
    std::string target = outputs.empty() ? "-" : outputs[i];
    if (target == "-") {
      bool f64 =
          precision == Precision::F64 || result.dtype() == omni::DType::F64;
      llvm::outs() << "result[" << i
                   << "]: " << omni::formatTensor(result, f64 ? 17 : 9) << "\n";
    } else if (target.size() > 1 && target[0] == '@') {
      absl::Status status = omni::writeNpyFile(target.substr(1), result);
      if (!status.ok())
        return fail(std::string(status.message()));
    } else {
      return fail("--output #" + llvm::Twine(i) +
                  " must be @file.npy or -, found '" + target + "'");
    }
  }
  return 0;
}
