//===- TensorText.cpp - Tensors as command-line text ------------*- C++ -*-===//
//
// Inline tensor literals are parsed with std::from_chars, which is exact for
// integers (an i64 seed of 2^53 + 1 survives) and correctly rounded for
// doubles; float values are then rounded once to the declared dtype.
//
//===----------------------------------------------------------------------===//

#include "runtime/io/TensorText.h"

#include "runtime/io/Npy.h"

#include "absl/strings/str_cat.h"

#include <charconv>
#include <cstdio>
#include <limits>

namespace omni {
namespace {

/// The literal as it appears in error messages (shortened when long).
std::string quoted(absl::string_view text) {
  constexpr size_t kLimit = 48;
  if (text.size() <= kLimit)
    return absl::StrCat("'", text, "'");
  return absl::StrCat("'", text.substr(0, kLimit), "...'");
}

absl::Status literalError(absl::string_view text, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("inline tensor ", quoted(text), ": ", what));
}

bool isSeparator(char c) {
  return c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '[' || c == ']';
}

/// Parses a whole token as T with std::from_chars (a leading '+' allowed).
template <typename T> bool parseWhole(absl::string_view token, T &value) {
  if (!token.empty() && token[0] == '+')
    token.remove_prefix(1);
  if (token.empty())
    return false;
  const char *end = token.data() + token.size();
  std::from_chars_result r = std::from_chars(token.data(), end, value);
  return r.ec == std::errc() && r.ptr == end;
}

} // namespace

absl::StatusOr<HostTensor> parseInlineTensor(absl::string_view text) {
  size_t eq = text.find('=');
  if (eq == absl::string_view::npos)
    return literalError(text, "expected DIMSxDTYPE=VALUES such as "
                              "2x3xf32=1,2,3,4,5,6 or f32=1.5, found no '='");
  absl::string_view type = text.substr(0, eq);
  absl::string_view values = text.substr(eq + 1);

  // The type: dimensions then the element type, separated by 'x'.
  std::vector<int64_t> shape;
  std::optional<DType> dtype;
  while (true) {
    size_t x = type.find('x');
    absl::string_view token = type.substr(0, x);
    if (x == absl::string_view::npos) {
      dtype = parseDType(token);
      if (!dtype)
        return literalError(
            text, absl::StrCat("expected an element type (f32, f64, f16, "
                               "bf16, i1, i32 or i64), found '",
                               token, "'"));
      break;
    }
    int64_t dim = -1;
    if (!parseWhole(token, dim) || dim < 0 || (token[0] == '+'))
      return literalError(
          text, absl::StrCat("expected a non-negative dimension, found '",
                             token, "'"));
    shape.push_back(dim);
    type.remove_prefix(x + 1);
  }
  int64_t count = 1;
  for (int64_t d : shape) {
    if (d != 0 && count > (int64_t{1} << 40) / d)
      return literalError(text, "shape is too large");
    count *= d;
  }

  // The values.
  std::vector<absl::string_view> tokens;
  for (size_t i = 0; i < values.size();) {
    if (isSeparator(values[i])) {
      ++i;
      continue;
    }
    size_t start = i;
    while (i < values.size() && !isSeparator(values[i]))
      ++i;
    tokens.push_back(values.substr(start, i - start));
  }
  if (static_cast<int64_t>(tokens.size()) != count)
    return literalError(
        text, absl::StrCat("expected ", count, " value", count == 1 ? "" : "s",
                           " for ", shape.empty() ? "a scalar" : "shape ",
                           shapeString(shape), ", found ", tokens.size()));

  HostTensor tensor(*dtype, shape);
  for (int64_t i = 0; i < count; ++i) {
    absl::string_view token = tokens[i];
    if (isFloatDType(*dtype)) {
      double v = 0;
      if (!parseWhole(token, v))
        return literalError(
            text, absl::StrCat("value #", i, " '", token, "' is not a number"));
      tensor.floats()[i] = roundToDType(v, *dtype);
      continue;
    }
    int64_t v = 0;
    if (*dtype == DType::I1 && (token == "true" || token == "false")) {
      v = token == "true";
    } else if (!parseWhole(token, v)) {
      return literalError(text,
                          absl::StrCat("value #", i, " '", token,
                                       "' is not an integer in the range of ",
                                       dtypeName(*dtype)));
    }
    bool inRange = *dtype == DType::I1 ? (v == 0 || v == 1)
                   : *dtype == DType::I32
                       ? (v >= std::numeric_limits<int32_t>::min() &&
                          v <= std::numeric_limits<int32_t>::max())
                       : true;
    if (!inRange)
      return literalError(
          text,
          absl::StrCat("value #", i, " '", token, "' is out of range for ",
                       dtypeName(*dtype),
                       *dtype == DType::I1 ? " (expected 0, 1, true or false)"
                                           : ""));
    tensor.ints()[i] = v;
  }
  return tensor;
}

absl::StatusOr<HostTensor> parseTensorArgument(absl::string_view text) {
  if (!text.empty() && text[0] == '@')
    return readNpyFile(std::string(text.substr(1)));
  return parseInlineTensor(text);
}

namespace {
void appendElement(std::string &out, const HostTensor &t, int64_t i,
                   int digits) {
  if (!t.isFloat()) {
    out += std::to_string(t.ints()[i]);
    return;
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*g", digits, t.floats()[i]);
  out += buf;
}

void appendNested(std::string &out, const HostTensor &t, size_t dim,
                  int64_t &next, int digits) {
  out += '[';
  int64_t extent = t.shape()[dim];
  for (int64_t i = 0; i < extent; ++i) {
    if (dim + 1 == t.shape().size()) {
      if (i)
        out += ' ';
      appendElement(out, t, next++, digits);
    } else {
      appendNested(out, t, dim + 1, next, digits);
    }
  }
  out += ']';
}
} // namespace

std::string formatValues(const HostTensor &tensor, int digits) {
  std::string out;
  if (tensor.rank() == 0) {
    appendElement(out, tensor, 0, digits);
    return out;
  }
  int64_t next = 0;
  appendNested(out, tensor, 0, next, digits);
  return out;
}

std::string formatTensor(const HostTensor &tensor, int digits) {
  return absl::StrCat(tensor.typeString(), "=", formatValues(tensor, digits));
}

} // namespace omni
