//===- omnic.cpp - the omni ahead-of-time compiler ------------------------===//
//
//   omnic train.mlir -o step.bin [-O0..3] [--target-cpu=host|x86-64|<cpu>]
//   omnic train.mlir --emit=<input|cleanup|autodiff|decompose|fuse|
//                           plan-memory|kernels|llvm|json>
//
// --help lists omnic's options only (LLVM's code generation options are
// hidden; --help-hidden still lists them); --version prints omni's version.
//
//===----------------------------------------------------------------------===//

#include "compiler/codegen/CpuCodegen.h"
#include "compiler/driver/Compiler.h"
#include "dialects/omni/OmniTools.h"

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
  cl::opt<std::string> emit(
      "emit",
      cl::desc("print a stage instead of writing step.bin: input, "
               "cleanup, autodiff, decompose, fuse, plan-memory, "
               "kernels, llvm, json"),
      cl::cat(category));
  cl::opt<unsigned> opt("O", cl::desc("kernel optimization level (0-3)"),
                        cl::Prefix, cl::init(2), cl::cat(category));
  cl::opt<std::string> cpu("target-cpu",
                           cl::desc("host (default), x86-64 (portable) or an "
                                    "LLVM CPU name (haswell, x86-64-v3, "
                                    "skylake-avx512, ...)"),
                           cl::init("host"), cl::cat(category));
  cl::opt<bool> report("report-arena",
                       cl::desc("print each function's arena size"),
                       cl::cat(category));
  mlir::omni::hideLlvmOptions(&category);
  mlir::omni::setOmniVersionPrinter("omnic");
  cl::ParseCommandLineOptions(argc, argv, "omni ahead-of-time compiler\n");
  if (std::string bad = mlir::omni::checkTargetCpu(cpu); !bad.empty()) {
    llvm::errs() << "omnic: " << bad << "\n";
    return 1;
  }
  mlir::omni::CompileOptions options;
  options.input = input;
  options.output = output;
  options.emit = emit;
  options.optLevel = opt;
  options.targetCpu = cpu;
  options.reportArena = report;
  // The parser and the passes recurse per nesting level.
  return mlir::omni::runOnLargeStack([&] {
    return mlir::omni::runCompiler(options, llvm::outs(), llvm::errs());
  });
}
