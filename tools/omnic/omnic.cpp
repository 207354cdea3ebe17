//===- omnic.cpp - the omni ahead-of-time compiler ------------------------===//
//
//   omnic train.mlir -o step.bin [-O0..3] [--target=cpu|cuda]
//                                [--target-cpu=host|x86-64|<cpu>]
//                                [--cuda-arch=sm_90a|sm_90|sm_89|sm_86|sm_80]
//   omnic train.mlir --emit=<input|cleanup|autodiff|decompose|fuse|
//                           plan-memory|kernels|llvm|ptx|json>
// (the stages and targets come from their tables: pipelineStageNames(),
// codegenTargets()).
//
// --help lists omnic's options only (LLVM's code generation options are
// hidden; --help-hidden still lists them); --version prints omni's version.
// A phase (parsing, the pipeline, the kernels, writing) that runs longer
// than 2 s (OMNI_PROGRESS_AFTER_MS) is named on stderr; --verbose names
// every one (runtime/base/PhaseTimer.h).
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/Codegen.h"
#include "compiler/driver/Compiler.h"
#include "dialects/omni/OmniTools.h"
#include "runtime/base/PhaseTimer.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"

namespace cl = llvm::cl;

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::OptionCategory category("omnic options");
  cl::opt<std::string> input(cl::Positional, cl::desc("<input .mlir>"),
                             cl::init("-"), cl::cat(category));
  cl::opt<std::string> output("o", cl::desc("step.bin to write"),
                              cl::value_desc("file"), cl::cat(category));
  const std::string emitDesc =
      "print a stage instead of writing step.bin: " + mlir::omni::emitChoices();
  cl::opt<std::string> emit("emit", cl::desc(emitDesc), cl::cat(category));
  const std::string targetDesc =
      "the target kind the kernels are compiled for: " +
      llvm::join(mlir::omni::codegenTargets(), ", ") + " (default cpu)";
  cl::opt<std::string> target("target", cl::desc(targetDesc), cl::init("cpu"),
                              cl::cat(category));
  cl::opt<unsigned> opt("O", cl::desc("kernel optimization level (0-3)"),
                        cl::Prefix, cl::init(2), cl::cat(category));
  cl::opt<std::string> cpu(
      "target-cpu",
      cl::desc("the cpu target's CPU: host (default), "
               "x86-64 (portable) or an LLVM CPU name "
               "(haswell, x86-64-v3, skylake-avx512, ...)"),
      cl::init("host"), cl::cat(category));
  cl::opt<std::string> cudaArch(
      "cuda-arch",
      cl::desc("the cuda target's SM architecture: sm_90a (default), sm_90, "
               "sm_89, sm_86 or sm_80"),
      cl::init("sm_90a"), cl::cat(category));
  cl::opt<bool> cudaEmulate(
      "cuda-emulate",
      cl::desc("with --target=cuda: compile the kernels as the cuda target "
               "launches them for this CPU instead of PTX, each launch a "
               "loop over its blocks and threads; the step.bin runs on the "
               "cpu driver, to check the cuda lowering without a GPU "
               "(slow; docs/backend-cuda.md)"),
      cl::cat(category));
  cl::opt<bool> cudaHostKernels(
      "cuda-host-kernels",
      cl::desc("with --target=cuda: compile each launch for this CPU in "
               "place of the cubin; the step.bin runs on the cuda driver "
               "only against its host model of libcuda, to test the driver "
               "on whole programs without a GPU (docs/backend-cuda.md)"),
      cl::cat(category));
  cl::opt<bool> cudaRowLaunches(
      "cuda-row-launches",
      cl::desc("with --target=cuda: run a norm or a softmax as one launch of "
               "a few rows a block, its reductions folded in shared memory "
               "(default true; false only to compare, docs/backend-cuda.md)"),
      cl::init(true), cl::cat(category));
  cl::opt<bool> cudaMergeLaunches(
      "cuda-merge-launches",
      cl::desc("with --target=cuda: make adjacent launches that touch "
               "nothing the other writes one launch (default true; false "
               "only to compare)"),
      cl::init(true), cl::cat(category));
  cl::opt<bool> report("report-arena",
                       cl::desc("print each function's arena size"),
                       cl::cat(category));
  cl::opt<bool> matmulEpilogues(
      "matmul-epilogues",
      cl::desc("let the runtime run the kernel after a matmul that reads its "
               "result by rows on each block of rows as soon as it is "
               "computed (default true; the results are the same either "
               "way)"),
      cl::init(true), cl::cat(category));
  cl::opt<bool> reportFlops(
      "report-flops",
      cl::desc("print each public function's FLOPs (matmul 2MNK, attention, "
               "conv2d, 1 per element of each elementwise or reduce op), per "
               "phase and outermost loop, after the pipeline (stderr; "
               "docs/performance.md)"),
      cl::cat(category));
  cl::opt<bool> verbose(
      "verbose",
      cl::desc("name every phase and its time on stderr (default: only "
               "phases longer than 2 s, or OMNI_PROGRESS_AFTER_MS)"),
      cl::cat(category));
  mlir::omni::hideLlvmOptions(&category);
  mlir::omni::setOmniVersionPrinter("omnic");
  cl::ParseCommandLineOptions(argc, argv, "omni ahead-of-time compiler\n");
  mlir::omni::CompileOptions options;
  options.input = input;
  options.output = output;
  options.emit = emit;
  options.target = target;
  options.optLevel = opt;
  options.targetCpu = cpu;
  options.cudaArch = cudaArch;
  options.cudaEmulate = cudaEmulate;
  options.cudaHostKernels = cudaHostKernels;
  options.cudaRowLaunches = cudaRowLaunches;
  options.cudaMergeLaunches = cudaMergeLaunches;
  options.reportArena = report;
  options.reportFlops = reportFlops;
  options.matmulEpilogues = matmulEpilogues;
  absl::StatusOr<std::optional<int64_t>> afterMs =
      omni::progressAfterMsFromEnvironment();
  if (!afterMs.ok()) {
    llvm::errs() << "omnic: " << std::string(afterMs.status().message())
                 << "\n";
    return 1;
  }
  omni::PhaseTimerOptions phaseOptions;
  phaseOptions.tool = "omnic";
  phaseOptions.afterMs = afterMs->value_or(2000);
  phaseOptions.always = verbose;
  omni::PhaseTimer phases(std::move(phaseOptions));
  options.phases = &phases;
  // The parser and the passes recurse per nesting level.
  return mlir::omni::runOnLargeStack([&] {
    return mlir::omni::runCompiler(options, llvm::outs(), llvm::errs());
  });
}
