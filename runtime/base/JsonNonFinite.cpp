//===- JsonNonFinite.cpp - Python's NaN/Infinity in JSON bodies -----------===//

#include "runtime/base/JsonNonFinite.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace omni {

std::optional<std::string> quoteNonFinite(absl::string_view body) {
  // -Infinity before Infinity, so that the sign stays in the word.
  constexpr absl::string_view kWords[] = {"NaN", "-Infinity", "Infinity"};
  std::string out;
  bool inString = false, changed = false;
  for (size_t i = 0; i < body.size(); ++i) {
    char c = body[i];
    if (inString) {
      out += c;
      if (c == '\\' && i + 1 < body.size())
        out += body[++i];
      else if (c == '"')
        inString = false;
      continue;
    }
    if (c == '"')
      inString = true;
    bool replaced = false;
    for (absl::string_view word : kWords)
      if (absl::StartsWith(body.substr(i), word)) {
        absl::StrAppend(&out, "\"\\u0001non-finite:", word, "\"");
        i += word.size() - 1;
        replaced = changed = true;
        break;
      }
    if (!replaced)
      out += c;
  }
  if (!changed)
    return std::nullopt;
  return out;
}

} // namespace omni
