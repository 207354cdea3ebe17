//===- omni-eval.cpp - run an omni function on the reference evaluator ---===//
//
// iree-run-module for the reference evaluator: evaluates one function of a
// verified module on --input tensors (`@a.npy` or `2x3xf32=1,2,...`) and
// writes results to --output `@file.npy` or prints them with 9 (float32) or
// 17 (float64) digits for FileCheck. omni.host_call can name the rewards
// (rewards::registerRewards). Exits 1 with one line on user errors.
//
// SPMD programs: --ranks N evaluates the function on N simulated ranks
// (evaluateSpmd): the inputs are global, arguments with omni.sharding are
// split per rank (shardArguments), and every rank's results are printed as
// "rank <r> result[<i>]: ...". --compare-sharded=<sharded.mlir> --ranks N
// evaluates the positional (unsharded) program and the sharded one on N
// ranks and compares every traced op (compareSharded): it prints "N traced
// values agree" and exits 0, or one line naming the first wrong op and
// exits 1.
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

static cl::opt<int64_t> ranks(
    "ranks",
    cl::desc("Evaluate on N simulated ranks (an SPMD program whose meshes "
             "have N ranks); --input are global, arguments with "
             "omni.sharding are split per rank; prints 'rank <r> "
             "result[<i>]: ...' for every rank (--output @file.npy needs "
             "--ranks 1)"),
    cl::init(1), cl::cat(category));
static cl::opt<std::string> compareWith(
    "compare-sharded",
    cl::desc("Compare the sharded program in this file, run on --ranks "
             "ranks, op by op (omni.trace / omni.result_shardings) with the "
             "positional unsharded one; exits 1 naming the first op that "
             "differs"),
    cl::value_desc("sharded.mlir"), cl::cat(category));
static cl::opt<double>
    tolerance("tolerance",
              cl::desc("--compare-sharded: largest accepted |sharded - "
                       "unsharded| / max(|unsharded|, 1)"),
              cl::init(1e-5), cl::cat(category));

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

/// Parses and verifies `path`; null after printing the error.
static mlir::OwningOpRef<mlir::ModuleOp> load(const std::string &path,
                                              mlir::MLIRContext &context) {
  llvm::SourceMgr sourceMgr;
  mlir::SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  std::string error;
  if (auto file = mlir::openInputFile(path, &error)) {
    sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  } else {
    fail(error);
    return nullptr;
  }
  if (mlir::failed(mlir::omni::checkSourceNesting(
          *sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID()), llvm::errs())))
    return nullptr;
  // On failure the diagnostic handler has printed file:line:col: error.
  return mlir::parseSourceFile<mlir::ModuleOp>(sourceMgr, &context);
}

static int run() {
  mlir::DialectRegistry registry;
  mlir::omni::registerOmniDialects(registry);
  mlir::MLIRContext context(registry);
  if (ranks < 1)
    return fail("--ranks must be at least 1, found " + llvm::Twine(ranks));
  mlir::OwningOpRef<mlir::ModuleOp> module = load(inputFile, context);
  if (!module)
    return 1;
  mlir::OwningOpRef<mlir::ModuleOp> sharded;
  if (!compareWith.empty()) {
    sharded = load(compareWith, context);
    if (!sharded)
      return 1;
  }

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
  if (sharded) {
    if (!outputs.empty())
      return fail("--output cannot be combined with --compare-sharded");
    absl::StatusOr<omni::reference::ShardedComparison> comparison =
        omni::reference::compareSharded(*module, *sharded, function, ranks,
                                        args, tolerance, options);
    if (!comparison.ok())
      return fail(std::string(comparison.status().message()));
    if (comparison->mismatch)
      return fail("the sharded program differs: " + comparison->summary());
    llvm::outs() << comparison->summary() << "\n";
    return 0;
  }
  if (ranks > 1) {
    if (!outputs.empty())
      return fail("--output needs --ranks 1 (with --ranks " +
                  llvm::Twine(ranks) + " every rank's results are printed)");
    absl::StatusOr<std::vector<std::vector<omni::HostTensor>>> perRankArgs =
        omni::reference::shardArguments(*module, function, ranks, args);
    if (!perRankArgs.ok())
      return fail(std::string(perRankArgs.status().message()));
    absl::StatusOr<std::vector<std::vector<omni::HostTensor>>> perRank =
        omni::reference::evaluateSpmd(*module, function, ranks, *perRankArgs,
                                      options);
    if (!perRank.ok())
      return fail(std::string(perRank.status().message()));
    for (auto [r, results] : llvm::enumerate(*perRank))
      for (auto [i, result] : llvm::enumerate(results)) {
        bool f64 =
            precision == Precision::F64 || result.dtype() == omni::DType::F64;
        llvm::outs() << "rank " << r << " result[" << i
                     << "]: " << omni::formatTensor(result, f64 ? 17 : 9)
                     << "\n";
      }
    return 0;
  }
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
