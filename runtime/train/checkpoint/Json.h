//===- Json.h - Strict JSON for safetensors headers ------------*- C++ -*-===//
//
// The subset of JSON a safetensors header uses (objects, arrays, strings
// with escapes, integers) read strictly: booleans, null and non-integer
// numbers are rejected, strings must be valid UTF-8, nesting is bounded so
// hostile input cannot exhaust the stack. Duplicate keys and negative
// integers are kept rather than rejected so the header checks can name
// them. Also the writer-side helpers. Internal to OmniCheckpoint.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_TRAIN_CHECKPOINT_JSON_H
#define OMNI_RUNTIME_TRAIN_CHECKPOINT_JSON_H

#include "absl/strings/string_view.h"

#include <cstdint>
#include <string>
#include <vector>

namespace omni::checkpoint::json {

struct JsonMember;

/// A parsed JSON value of the subset safetensors headers use.
struct JsonValue {
  enum class Kind { Object, Array, String, Integer };
  Kind kind = Kind::Integer;
  std::vector<JsonMember> members; // Object, in file order, duplicates kept
  std::vector<JsonValue> elements; // Array
  std::string text;                // String
  bool negative = false;           // Integer: sign and magnitude
  uint64_t magnitude = 0;
};

/// One key of an object and its value.
struct JsonMember {
  std::string key;
  JsonValue value;
};

/// "an object", "an array", "a string" or "an integer", for messages.
absl::string_view kindName(JsonValue::Kind kind);

/// Parses `text` as one value followed only by whitespace. On failure
/// returns false and sets `error` to one line naming the header byte, what
/// was expected and what was found.
bool parseJson(absl::string_view text, JsonValue &out, std::string &error);

/// True when `text` is valid UTF-8 (no overlong forms or surrogates).
bool isValidUtf8(absl::string_view text);

/// Appends `s` as a JSON string literal, escaped the way serde_json does.
void appendJsonString(std::string &out, absl::string_view s);

/// A printable, single-quoted rendering of a name from a file for messages
/// (non-printable bytes as \xNN, long names cut at 64 bytes).
std::string quoted(absl::string_view s);

} // namespace omni::checkpoint::json

#endif // OMNI_RUNTIME_TRAIN_CHECKPOINT_JSON_H
