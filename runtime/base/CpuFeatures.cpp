//===- CpuFeatures.cpp - What the host CPU can execute ----------*- C++ -*-===//

#include "runtime/base/CpuFeatures.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

#include <fstream>
#include <map>
#include <sstream>

namespace omni {
namespace {

/// LLVM x86 feature name -> /proc/cpuinfo flag. Names that are spelled the
/// same in both appear too, so that the table is also the list of features
/// that are checked at all.
const std::map<std::string, std::string, std::less<>> &featureTable() {
  static const auto *table =
      new std::map<std::string, std::string, std::less<>>{
          {"x87", "fpu"},
          {"cmov", "cmov"},
          {"cx8", "cx8"},
          {"cx16", "cx16"},
          {"mmx", "mmx"},
          {"fxsr", "fxsr"},
          {"sse", "sse"},
          {"sse2", "sse2"},
          {"sse3", "pni"},
          {"ssse3", "ssse3"},
          {"sse4.1", "sse4_1"},
          {"sse4.2", "sse4_2"},
          {"crc32", "sse4_2"},
          {"sse4a", "sse4a"},
          {"popcnt", "popcnt"},
          {"64bit", "lm"},
          {"sahf", "lahf_lm"},
          {"lzcnt", "abm"},
          {"movbe", "movbe"},
          {"aes", "aes"},
          {"pclmul", "pclmulqdq"},
          {"vpclmulqdq", "vpclmulqdq"},
          {"vaes", "vaes"},
          {"gfni", "gfni"},
          {"sha", "sha_ni"},
          {"rdrnd", "rdrand"},
          {"rdseed", "rdseed"},
          {"adx", "adx"},
          {"bmi", "bmi1"},
          {"bmi2", "bmi2"},
          {"f16c", "f16c"},
          {"fma", "fma"},
          {"fma4", "fma4"},
          {"xop", "xop"},
          {"avx", "avx"},
          {"avx2", "avx2"},
          {"avx512f", "avx512f"},
          {"avx512cd", "avx512cd"},
          {"avx512dq", "avx512dq"},
          {"avx512bw", "avx512bw"},
          {"avx512vl", "avx512vl"},
          {"avx512ifma", "avx512ifma"},
          {"avx512vbmi", "avx512vbmi"},
          {"avx512vbmi2", "avx512_vbmi2"},
          {"avx512vnni", "avx512_vnni"},
          {"avx512bitalg", "avx512_bitalg"},
          {"avx512vpopcntdq", "avx512_vpopcntdq"},
          {"avx512bf16", "avx512_bf16"},
          {"avx512fp16", "avx512_fp16"},
          {"avx512vp2intersect", "avx512_vp2intersect"},
          {"avxvnni", "avx_vnni"},
          {"avxifma", "avx_ifma"},
          {"avxvnniint8", "avx_vnni_int8"},
          {"avxneconvert", "avx_ne_convert"},
          {"amx-tile", "amx_tile"},
          {"amx-int8", "amx_int8"},
          {"amx-bf16", "amx_bf16"},
          {"amx-fp16", "amx_fp16"},
          {"xsave", "xsave"},
          {"xsaveopt", "xsaveopt"},
          {"xsavec", "xsavec"},
          {"xsaves", "xsaves"},
          {"fsgsbase", "fsgsbase"},
          {"clflushopt", "clflushopt"},
          {"clwb", "clwb"},
          {"movdiri", "movdiri"},
          {"movdir64b", "movdir64b"},
          {"prfchw", "3dnowprefetch"},
          {"rdpid", "rdpid"},
          {"clzero", "clzero"},
          {"mwaitx", "mwaitx"},
          {"tbm", "tbm"},
          {"invpcid", "invpcid"},
          {"serialize", "serialize"},
          {"waitpkg", "waitpkg"},
      };
  return *table;
}

CpuFeatures readHost() {
  std::ifstream in("/proc/cpuinfo");
  if (!in)
    return CpuFeatures({}, /*available=*/false);
  std::string line;
  while (std::getline(in, line)) {
    absl::string_view view(line);
    if (!absl::ConsumePrefix(&view, "flags"))
      continue;
    size_t colon = view.find(':');
    if (colon == absl::string_view::npos)
      continue;
    std::vector<std::string> flags =
        absl::StrSplit(view.substr(colon + 1), ' ', absl::SkipEmpty());
    return CpuFeatures(std::move(flags));
  }
  return CpuFeatures({}, /*available=*/false);
}

} // namespace

const CpuFeatures &CpuFeatures::host() {
  static const CpuFeatures *host = new CpuFeatures(readHost());
  return *host;
}

CpuFeatures::CpuFeatures(std::vector<std::string> flags, bool available)
    : flags_(flags.begin(), flags.end()), available_(available) {}

std::optional<std::string> cpuinfoFlagForLlvmFeature(absl::string_view name) {
  auto it = featureTable().find(name);
  if (it == featureTable().end())
    return std::nullopt;
  return it->second;
}

absl::Status checkLlvmFeatures(absl::string_view features,
                               const CpuFeatures &cpu) {
  for (absl::string_view entry :
       absl::StrSplit(features, ',', absl::SkipWhitespace())) {
    entry = absl::StripAsciiWhitespace(entry);
    if (!absl::ConsumePrefix(&entry, "+"))
      continue;
    std::optional<std::string> flag = cpuinfoFlagForLlvmFeature(entry);
    if (!flag || cpu.has(*flag))
      continue;
    if (!cpu.available())
      return absl::FailedPreconditionError(absl::StrCat(
          "needs ", entry,
          " but this CPU's features are unknown (/proc/cpuinfo has no flags)"));
    return absl::FailedPreconditionError(absl::StrCat(
        "needs ", entry, " (cpuinfo flag ", *flag, "), which this CPU lacks"));
  }
  return absl::OkStatus();
}

} // namespace omni
