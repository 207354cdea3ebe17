//===- OmniTools.h - What omnic, omni-opt and omni-eval share ---*- C++ -*-===//
//
// The three MLIR-based tools read untrusted text with MLIR's parser, which
// (like the verifier, the printer and many passes) recurses once per level
// of nesting: 4000 nested scf.for or 100000 nested parentheses overflow an
// 8 MiB stack. Every tool therefore
//   1. refuses a source whose brackets nest deeper than kMaxSourceNesting
//      (one line, file:line:col, before anything recurses), and
//   2. does its work on a thread with a kToolStackBytes stack, so that what
//      is accepted has ample room in every recursive pass.
// It also holds omni's version and the --version printer of the tools.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_DIALECTS_OMNI_OMNITOOLS_H
#define OMNI_DIALECTS_OMNI_OMNITOOLS_H

#include "mlir/Support/LLVM.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/MemoryBufferRef.h"
#include "llvm/Support/raw_ostream.h"

namespace mlir::omni {

/// omni's version, printed by every tool's --version.
inline constexpr const char *kOmniVersion = "0.1";

/// Makes `--version` print "<tool> (omni <version>)" instead of LLVM's
/// version. Call before cl::ParseCommandLineOptions.
void setOmniVersionPrinter(llvm::StringRef tool);

/// Hides (cl::Hidden: --help-hidden still lists them) every command-line
/// option registered so far except --help, --version and those in `keep`:
/// the hundreds of LLVM code generation options linked into the tools are
/// not theirs. Call before cl::ParseCommandLineOptions, after the tool's own
/// options exist (or before they are registered, with `keep` null).
void hideLlvmOptions(const llvm::cl::OptionCategory *keep = nullptr);

/// Deepest nesting of brackets ( ( [ { < ) a source may have. Real omni
/// programs nest about ten levels (module, func, loops, types, dense
/// literals); the runtime runs at most 16 nested loops.
inline constexpr unsigned kMaxSourceNesting = 256;

/// Scans `source` as MLIR's lexer sees it (string literals and // comments
/// skipped; `->`, `<=` and `>=` are not brackets) and fails with one line
///   <file>:<line>:<col>: error: brackets nest deeper than 256 levels ...
/// on `errs` at the first bracket past `maxDepth`.
LogicalResult checkSourceNesting(llvm::MemoryBufferRef source,
                                 llvm::raw_ostream &errs,
                                 unsigned maxDepth = kMaxSourceNesting);

/// Stack size of the thread runOnLargeStack runs its body on.
inline constexpr size_t kToolStackBytes = size_t(512) << 20;

/// Runs `body` on a thread with a kToolStackBytes stack (reserved, and
/// committed only as it is used) and returns its result; runs it on the
/// calling thread if no such thread can be created.
int runOnLargeStack(llvm::function_ref<int()> body);

} // namespace mlir::omni

#endif // OMNI_DIALECTS_OMNI_OMNITOOLS_H
