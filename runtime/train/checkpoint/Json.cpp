//===- Json.cpp - Strict JSON for safetensors headers ----------*- C++ -*-===//
//
// A recursive-descent reader over the header bytes; see Json.h for the
// accepted subset and why duplicates and negative numbers survive parsing.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/checkpoint/Json.h"

#include "absl/strings/str_cat.h"

#include <limits>

namespace omni::checkpoint::json {
namespace {

/// Length of the valid UTF-8 sequence starting at text[i], or 0 when it is
/// not one (overlong forms, surrogates and code points past U+10FFFF are
/// invalid).
size_t utf8SequenceLength(absl::string_view text, size_t i) {
  auto byte = [&](size_t k) -> unsigned {
    return k < text.size() ? static_cast<unsigned char>(text[k]) : 0x100;
  };
  unsigned c = byte(i);
  if (c < 0x80)
    return 1;
  size_t n;
  unsigned lo = 0x80, hi = 0xbf;
  if (c >= 0xc2 && c <= 0xdf) {
    n = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    n = 3;
    if (c == 0xe0)
      lo = 0xa0;
    else if (c == 0xed)
      hi = 0x9f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    n = 4;
    if (c == 0xf0)
      lo = 0x90;
    else if (c == 0xf4)
      hi = 0x8f;
  } else {
    return 0;
  }
  unsigned second = byte(i + 1);
  if (second < lo || second > hi)
    return 0;
  for (size_t k = 2; k < n; ++k) {
    unsigned b = byte(i + k);
    if (b < 0x80 || b > 0xbf)
      return 0;
  }
  return n;
}

void appendUtf8(std::string &out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

/// Recursive-descent reader. Nesting is bounded so hostile input cannot
/// exhaust the stack.
class JsonReader {
public:
  explicit JsonReader(absl::string_view text) : text(text) {}

  /// Parses the whole text as one value followed only by whitespace.
  bool parseDocument(JsonValue &out) {
    if (!parseValue(out, 0))
      return false;
    skipSpace();
    if (pos != text.size())
      return fail("expected the end of the header");
    return true;
  }

  const std::string &error() const { return error_; }

private:
  static constexpr int kMaxDepth = 16;

  absl::string_view text;
  size_t pos = 0;
  std::string error_;

  bool fail(absl::string_view expected) {
    std::string found;
    if (pos >= text.size())
      found = "the end of the header";
    else
      found = quoted(text.substr(pos, 1));
    error_ = absl::StrCat("invalid JSON at header byte ", pos, ": ", expected,
                          ", found ", found);
    return false;
  }

  void skipSpace() {
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t' ||
                                 text[pos] == '\n' || text[pos] == '\r'))
      ++pos;
  }

  bool consume(char c) {
    skipSpace();
    if (pos < text.size() && text[pos] == c) {
      ++pos;
      return true;
    }
    return false;
  }

  bool parseValue(JsonValue &out, int depth) {
    skipSpace();
    if (pos >= text.size())
      return fail("expected a value");
    char c = text[pos];
    if (c == '{' || c == '[') {
      if (depth >= kMaxDepth)
        return fail(
            absl::StrCat("expected at most ", kMaxDepth, " levels of nesting"));
      return c == '{' ? parseObject(out, depth) : parseArray(out, depth);
    }
    if (c == '"') {
      out.kind = JsonValue::Kind::String;
      return parseString(out.text);
    }
    if (c == '-' || (c >= '0' && c <= '9'))
      return parseInteger(out);
    return fail("expected an object, array, string or integer");
  }

  bool parseObject(JsonValue &out, int depth) {
    out.kind = JsonValue::Kind::Object;
    ++pos; // '{'
    if (consume('}'))
      return true;
    while (true) {
      skipSpace();
      if (pos >= text.size() || text[pos] != '"')
        return fail("expected a string key");
      JsonMember member;
      if (!parseString(member.key))
        return false;
      if (!consume(':'))
        return fail("expected ':'");
      if (!parseValue(member.value, depth + 1))
        return false;
      out.members.push_back(std::move(member));
      if (consume('}'))
        return true;
      if (!consume(','))
        return fail("expected ',' or '}'");
    }
  }

  bool parseArray(JsonValue &out, int depth) {
    out.kind = JsonValue::Kind::Array;
    ++pos; // '['
    if (consume(']'))
      return true;
    while (true) {
      JsonValue element;
      if (!parseValue(element, depth + 1))
        return false;
      out.elements.push_back(std::move(element));
      if (consume(']'))
        return true;
      if (!consume(','))
        return fail("expected ',' or ']'");
    }
  }

  bool parseHex4(uint32_t &out) {
    out = 0;
    for (int i = 0; i < 4; ++i, ++pos) {
      if (pos >= text.size())
        return fail("expected 4 hex digits after \\u");
      char c = text[pos];
      uint32_t digit;
      if (c >= '0' && c <= '9')
        digit = c - '0';
      else if (c >= 'a' && c <= 'f')
        digit = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F')
        digit = c - 'A' + 10;
      else
        return fail("expected 4 hex digits after \\u");
      out = out * 16 + digit;
    }
    return true;
  }

  bool parseString(std::string &out) {
    ++pos; // '"'
    while (true) {
      if (pos >= text.size())
        return fail("expected '\"' to close the string");
      unsigned char c = static_cast<unsigned char>(text[pos]);
      if (c == '"') {
        ++pos;
        return true;
      }
      if (c < 0x20)
        return fail("expected no control characters in a string");
      if (c >= 0x80) {
        size_t n = utf8SequenceLength(text, pos);
        if (n == 0)
          return fail("expected valid UTF-8");
        out.append(text.data() + pos, n);
        pos += n;
        continue;
      }
      if (c != '\\') {
        out += static_cast<char>(c);
        ++pos;
        continue;
      }
      ++pos; // '\\'
      if (pos >= text.size())
        return fail("expected an escape character");
      char e = text[pos];
      static constexpr absl::string_view kFrom = "\"\\/bfnrt";
      static constexpr absl::string_view kTo = "\"\\/\b\f\n\r\t";
      size_t k = kFrom.find(e);
      if (k != absl::string_view::npos) {
        out += kTo[k];
        ++pos;
        continue;
      }
      if (e != 'u')
        return fail("expected one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u");
      ++pos;
      uint32_t cp;
      if (!parseHex4(cp))
        return false;
      if (cp >= 0xdc00 && cp <= 0xdfff)
        return fail("expected a high surrogate before a low one");
      if (cp >= 0xd800 && cp <= 0xdbff) {
        if (text.substr(pos, 2) != "\\u")
          return fail("expected a \\u low surrogate after a high one");
        pos += 2;
        uint32_t low;
        if (!parseHex4(low))
          return false;
        if (low < 0xdc00 || low > 0xdfff) {
          pos -= 4;
          return fail("expected a low surrogate (\\udc00-\\udfff)");
        }
        cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
      }
      appendUtf8(out, cp);
    }
  }

  bool parseInteger(JsonValue &out) {
    out.kind = JsonValue::Kind::Integer;
    if (text[pos] == '-') {
      out.negative = true;
      ++pos;
    }
    if (pos >= text.size() || text[pos] < '0' || text[pos] > '9')
      return fail("expected a digit");
    if (text[pos] == '0' && pos + 1 < text.size() && text[pos + 1] >= '0' &&
        text[pos + 1] <= '9')
      return fail("expected no leading zeros");
    uint64_t value = 0;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      uint64_t digit = static_cast<uint64_t>(text[pos] - '0');
      if (value > (std::numeric_limits<uint64_t>::max() - digit) / 10)
        return fail("expected an integer below 2^64");
      value = value * 10 + digit;
      ++pos;
    }
    if (pos < text.size() &&
        (text[pos] == '.' || text[pos] == 'e' || text[pos] == 'E'))
      return fail("expected an integer without fraction or exponent");
    out.magnitude = value;
    if (value == 0)
      out.negative = false;
    return true;
  }
};

} // namespace

bool isValidUtf8(absl::string_view text) {
  for (size_t i = 0; i < text.size();) {
    size_t n = utf8SequenceLength(text, i);
    if (n == 0)
      return false;
    i += n;
  }
  return true;
}

/// A JSON string literal the way serde_json writes it.
void appendJsonString(std::string &out, absl::string_view s) {
  out += '"';
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\b':
      out += "\\b";
      break;
    case '\f':
      out += "\\f";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\r':
      out += "\\r";
      break;
    case '\t':
      out += "\\t";
      break;
    default:
      if (c < 0x20)
        absl::StrAppend(&out, "\\u00", absl::Hex(c, absl::kZeroPad2));
      else
        out += ch;
    }
  }
  out += '"';
}

/// A printable rendering of a name or value from the file for messages.
std::string quoted(absl::string_view s) {
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < 64; ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'')
      out += static_cast<char>(c);
    else
      absl::StrAppend(&out, "\\x", absl::Hex(c, absl::kZeroPad2));
  }
  if (s.size() > 64)
    out += "...";
  return out + "'";
}

absl::string_view kindName(JsonValue::Kind kind) {
  switch (kind) {
  case JsonValue::Kind::Object:
    return "an object";
  case JsonValue::Kind::Array:
    return "an array";
  case JsonValue::Kind::String:
    return "a string";
  case JsonValue::Kind::Integer:
    return "an integer";
  }
  return "a value";
}

bool parseJson(absl::string_view text, JsonValue &out, std::string &error) {
  JsonReader reader(text);
  if (reader.parseDocument(out))
    return true;
  error = reader.error();
  return false;
}

} // namespace omni::checkpoint::json
