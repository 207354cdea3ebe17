//===- CpuFeatures.h - What the host CPU can execute ------------*- C++ -*-===//
//
// step.bin executables carry the LLVM feature string they were compiled for
// ("+avx2,+fma,..."); running them on a CPU without one of those features
// would die with SIGILL in the middle of a run. The cpu driver therefore
// checks every required feature against the host when it loads an
// executable (CpuExecutable::load), before anything executes, using the
// flags Linux reports in /proc/cpuinfo (which also reflect what the OS
// enabled, e.g. AVX-512 state saving). LLVM and the kernel spell features
// differently ("sse4.2" vs "sse4_2", "sse3" vs "pni"); the table in the .cpp
// translates. LLVM features that are not instruction-set extensions (tuning
// flags such as "fast-gather" or "prefer-256-bit") are not checked.
//
// Thread safety: CpuFeatures is immutable after construction; host() is
// computed once, thread-safely.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_BASE_CPUFEATURES_H
#define OMNI_RUNTIME_BASE_CPUFEATURES_H

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

#include <optional>
#include <set>
#include <string>
#include <vector>

namespace omni {

/// A set of /proc/cpuinfo flags ("avx2", "fma", "sse4_2", ...).
class CpuFeatures {
public:
  /// The flags of this machine's first processor in /proc/cpuinfo (empty,
  /// with available() false, when the file cannot be read).
  static const CpuFeatures &host();

  /// A given set of flags (tests simulate other CPUs with it).
  explicit CpuFeatures(std::vector<std::string> flags, bool available = true);

  bool has(absl::string_view flag) const {
    return flags_.count(std::string(flag)) != 0;
  }
  /// False when the host's flags could not be determined.
  bool available() const { return available_; }

private:
  std::set<std::string> flags_;
  bool available_;
};

/// The /proc/cpuinfo flag for an LLVM x86 feature name ("sse4.2" ->
/// "sse4_2"), or nullopt for names that are not instruction-set extensions
/// or that omni does not know.
std::optional<std::string> cpuinfoFlagForLlvmFeature(absl::string_view name);

/// Checks a comma-separated LLVM feature string: every "+feature" that names
/// an instruction-set extension must be present in `cpu`. "-feature"
/// entries and unknown names are ignored. Fails with FailedPrecondition
/// "needs <feature> (cpuinfo flag <flag>), which this CPU lacks" for the
/// first missing one.
absl::Status checkLlvmFeatures(absl::string_view features,
                               const CpuFeatures &cpu);

} // namespace omni

#endif // OMNI_RUNTIME_BASE_CPUFEATURES_H
