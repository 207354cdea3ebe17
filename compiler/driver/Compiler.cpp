//===- Compiler.cpp - omnic: .mlir to step.bin ----------------------------===//
//
// 1. Parse and verify the input (diagnostics carry file:line:col).
// 2. Run the omni pipeline (passes/Pipelines.cpp) up to the requested stage;
//    `--emit=<stage>` prints the IR there and stops.
// 3. Compile every omni.fusion to native code for the target
//    (compiler/codegen, its CodegenResult).
// 4. Write step.bin (compiler/stepbin), or print it as JSON.
// Each step is a phase of CompileOptions::phases: a slow one is named on
// stderr while it runs (runtime/base/PhaseTimer.h).
//
//===----------------------------------------------------------------------===//

#include "compiler/driver/Compiler.h"

#include "compiler/codegen/Codegen.h"
#include "compiler/driver/RuntimeChecks.h"
#include "compiler/driver/StepJson.h"
#include "compiler/stepbin/StepWriter.h"
#include "dialects/omni/OmniOps.h"
#include "dialects/omni/OmniTools.h"
#include "passes/FlopCount.h"
#include "passes/Passes.h"
#include "runtime/base/PhaseTimer.h"

#include "mlir/IR/AttrTypeSubElements.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

#include <optional>

using namespace mlir;
using namespace mlir::omni;

namespace {

/// What --emit accepts besides the pipeline stages.
constexpr llvm::StringLiteral kEmitBefore[] = {"input"};
constexpr llvm::StringLiteral kEmitAfter[] = {"kernels", "llvm", "ptx", "json"};

std::vector<llvm::StringRef> emitValues() {
  std::vector<llvm::StringRef> values(std::begin(kEmitBefore),
                                      std::end(kEmitBefore));
  llvm::append_range(values, pipelineStageNames());
  values.insert(values.end(), std::begin(kEmitAfter), std::end(kEmitAfter));
  return values;
}

/// The source name step.bin's locations carry, whatever the input's path.
constexpr llvm::StringLiteral kSourceName = "<input>";

AttrTypeReplacer sourceNameReplacer(MLIRContext *ctx, llvm::StringRef from,
                                    llvm::StringRef to) {
  AttrTypeReplacer replacer;
  StringAttr toAttr = StringAttr::get(ctx, to);
  replacer.addReplacement(
      [from = from.str(),
       toAttr](FileLineColRange loc) -> std::optional<Attribute> {
        if (loc.getFilename() != from)
          return std::nullopt;
        return FileLineColRange::get(toAttr, loc.getStartLine(),
                                     loc.getStartColumn(), loc.getEndLine(),
                                     loc.getEndColumn());
      });
  return replacer;
}

/// Renames the source file `from` to `to` in every location of `module`.
void replaceSourceName(ModuleOp module, llvm::StringRef from,
                       llvm::StringRef to) {
  sourceNameReplacer(module.getContext(), from, to)
      .recursivelyReplaceElementsIn(module, /*replaceAttrs=*/true,
                                    /*replaceLocs=*/true);
}

Location replaceSourceName(Location loc, llvm::StringRef from,
                           llvm::StringRef to) {
  return cast<LocationAttr>(
      sourceNameReplacer(loc.getContext(), from, to).replace(loc));
}

} // namespace

std::string mlir::omni::emitChoices() { return llvm::join(emitValues(), ", "); }

int mlir::omni::runCompiler(const CompileOptions &options,
                            llvm::raw_ostream &outs, llvm::raw_ostream &errs) {
  auto fail = [&](const llvm::Twine &message) {
    errs << "omnic: " << message << "\n";
    return 1;
  };
  std::optional<PipelineStage> stage;
  bool emitKernels = options.emit == "kernels";
  bool emitLLVM = options.emit == "llvm";
  bool emitPtx = options.emit == "ptx";
  bool emitJson = options.emit == "json";
  if (!options.emit.empty() && options.emit != "input" && !emitKernels &&
      !emitLLVM && !emitPtx && !emitJson) {
    stage = parsePipelineStage(options.emit);
    if (!stage) {
      std::vector<llvm::StringRef> values = emitValues();
      llvm::StringRef last = values.back();
      values.pop_back();
      return fail("--emit=" + options.emit + ": expected " +
                  llvm::join(values, ", ") + " or " + last);
    }
  }
  if (options.emit.empty() && options.output.empty())
    return fail("no output file: pass -o <file>.bin (or --emit=<stage>)");
  CodegenOptions codegenOptions;
  codegenOptions.target = options.target;
  codegenOptions.optLevel = options.optLevel;
  codegenOptions.cpu.cpu = options.targetCpu;
  codegenOptions.cuda.arch = options.cudaArch;
  codegenOptions.cuda.emulate = options.cudaEmulate;
  codegenOptions.cuda.hostKernels = options.cudaHostKernels;
  codegenOptions.cuda.rowLaunches = options.cudaRowLaunches;
  codegenOptions.cuda.mergeLaunches = options.cudaMergeLaunches;
  if (options.cudaEmulate && options.target != "cuda")
    return fail("--cuda-emulate: needs --target=cuda (it runs that target's "
                "kernels on this CPU)");
  if (options.cudaHostKernels && options.target != "cuda")
    return fail("--cuda-host-kernels: needs --target=cuda (it compiles that "
                "target's launches for the host model of libcuda)");
  if (options.cudaHostKernels && options.cudaEmulate)
    return fail("--cuda-host-kernels: not with --cuda-emulate (one makes a "
                "cuda step.bin, the other a cpu one)");
  if (options.target != "cuda")
    for (auto [flag, on] :
         {std::pair("--cuda-row-launches", options.cudaRowLaunches),
          std::pair("--cuda-merge-launches", options.cudaMergeLaunches)})
      if (!on)
        return fail(std::string(flag) + "=false: needs --target=cuda (the " +
                    options.target + " target has no launches)");
  if (std::string bad = checkCodegenOptions(codegenOptions); !bad.empty())
    return fail(bad);
  // The target's own IR: LLVM IR for the cpu, PTX for cuda.
  if (emitLLVM && options.target == "cuda" && !options.cudaEmulate &&
      !options.cudaHostKernels)
    return fail("--emit=llvm: the cuda target's kernels are PTX; use "
                "--emit=ptx");
  if (emitPtx && (options.cudaEmulate || options.cudaHostKernels))
    return fail(
        std::string("--emit=ptx: ") +
        (options.cudaEmulate ? "--cuda-emulate" : "--cuda-host-kernels") +
        " compiles no PTX (--emit=llvm prints its LLVM IR)");
  if (emitPtx && options.target != "cuda")
    return fail("--emit=ptx: needs --target=cuda (the " + options.target +
                " target's IR is --emit=llvm)");

  DialectRegistry registry;
  registerOmniDialects(registry);
  registerCodegenDialects(registry);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  // Errors are one line at a source location; the op's generic form after
  // the pipeline would only bury it.
  context.printOpOnDiagnostic(false);

  using Phase = ::omni::PhaseTimer::Scope;
  Phase parsing;
  parsing.start(options.phases, "parsing " + options.input);
  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> input =
      openInputFile(options.input, &error);
  if (!input)
    return fail(error);
  if (failed(checkSourceNesting(input->getMemBufferRef(), errs)))
    return 1;
  auto sourceMgr = std::make_shared<llvm::SourceMgr>();
  sourceMgr->AddNewSourceBuffer(std::move(input), llvm::SMLoc());
  SourceMgrDiagnosticHandler diagnostics(*sourceMgr, &context, errs);
  OwningOpRef<ModuleOp> module =
      parseSourceFile<ModuleOp>(sourceMgr, ParserConfig(&context));
  bool needsEntry = options.emit.empty() || emitJson;
  if (!module || failed(verify(*module)) ||
      failed(checkProgramForRuntime(*module, needsEntry)))
    return 1;
  parsing.stop();
  if (options.emit == "input") {
    module->print(outs);
    return 0;
  }

  PassManager pm(&context, ModuleOp::getOperationName());
  buildOmniPipeline(pm, stage.value_or(PipelineStage::PlanMemory),
                    options.reportArena);
  {
    Phase passes(options.phases, "running the omni pipeline");
    if (failed(pm.run(*module)))
      return 1;
  }
  if (options.reportFlops)
    printFlops(countFlops(*module), errs);
  if (stage) {
    module->print(outs);
    return 0;
  }

  std::string kernelIR, llvmIR;
  CodegenDumps dumps;
  dumps.kernels = emitKernels ? &kernelIR : nullptr;
  dumps.targetIR = emitLLVM || emitPtx ? &llvmIR : nullptr;
  Phase kernels;
  kernels.start(options.phases,
                "compiling the kernels for the " + options.target + " target");
  FailureOr<CodegenResult> codegen =
      compileFusions(*module, codegenOptions, dumps);
  kernels.stop();
  if (failed(codegen))
    return 1;
  if (emitKernels || emitLLVM || emitPtx) {
    outs << (emitKernels ? kernelIR : llvmIR);
    return 0;
  }
  // step.bin depends only on the program and the options: its command
  // locations name the source as kSourceName, not by the path it was read
  // from. Diagnostics from here on still print the real path.
  std::string sourcePath =
      sourceMgr->getMemoryBuffer(sourceMgr->getMainFileID())
          ->getBufferIdentifier()
          .str();
  replaceSourceName(*module, sourcePath, kSourceName);
  ScopedDiagnosticHandler realPath(&context, [&](Diagnostic &diag) {
    diagnostics.emitDiagnostic(
        replaceSourceName(diag.getLocation(), kSourceName, sourcePath),
        diag.str(), diag.getSeverity());
    return success();
  });
  Phase writing(options.phases, emitJson ? "writing step.bin as JSON"
                                         : "writing " + options.output);
  FailureOr<std::vector<uint8_t>> bytes =
      writeStepBin(*module, *codegen, "omnic (omni 0.1)",
                   StepWriterOptions{options.matmulEpilogues});
  if (failed(bytes) ||
      failed(checkStepBinLoads(*bytes, emitJson ? "step.bin" : options.output,
                               errs)))
    return 1;
  if (emitJson) {
    FailureOr<std::string> json = stepBinToJson(*bytes, error);
    if (failed(json))
      return fail(error);
    outs << *json;
    return 0;
  }
  auto output = openOutputFile(options.output, &error);
  if (!output)
    return fail(error);
  output->os().write(reinterpret_cast<const char *>(bytes->data()),
                     bytes->size());
  output->keep();
  return 0;
}
