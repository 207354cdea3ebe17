//===- HttpReward.cpp - Rewards computed by a server over HTTP --*- C++ -*-===//
//
// The protocol is docs/rewards.md. cpp-httplib (Debian libcpp-httplib-dev)
// does the HTTP; the answer is read by the small strict JSON reader below
// (numbers as double, plus Python's NaN/Infinity so that they can be named
// in the error instead of reported as a syntax error).
//
//===----------------------------------------------------------------------===//

#include "runtime/train/rewards/HttpReward.h"

#include "runtime/train/image/Png.h"

#include "absl/strings/charconv.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include <httplib.h>

#include <sys/socket.h>

#include <chrono>
#include <cmath>
#include <thread>

namespace omni::rewards {

//===----------------------------------------------------------------------===//
// The endpoint
//===----------------------------------------------------------------------===//

std::string HttpEndpoint::url() const {
  if (!socket.empty())
    return absl::StrCat("unix:", socket);
  return absl::StrCat("http://", host, ":", port, path);
}

absl::StatusOr<HttpEndpoint> parseHttpEndpoint(absl::string_view url) {
  if (url.substr(0, 5) == "unix:") {
    HttpEndpoint endpoint;
    endpoint.socket = std::string(url.substr(5));
    // sockaddr_un's sun_path holds 107 bytes and a NUL.
    if (endpoint.socket.empty() || endpoint.socket.size() > 107)
      return absl::InvalidArgumentError(absl::StrCat(
          "reward socket '", url,
          "': ", endpoint.socket.empty() ? "no file" : "a path over 107 bytes",
          ", expected unix:SOCKET_FILE"));
    return endpoint;
  }
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "reward URL '", url, "': ", why, ", expected http://HOST:PORT[/PATH]"));
  };
  constexpr absl::string_view kScheme = "http://";
  if (url.substr(0, kScheme.size()) != kScheme)
    return bad("not an http:// URL (https is not supported: the server is "
               "on loopback)");
  absl::string_view rest = url.substr(kScheme.size());
  size_t slash = rest.find('/');
  absl::string_view authority = rest.substr(0, slash);
  HttpEndpoint endpoint;
  if (slash != absl::string_view::npos)
    endpoint.path = std::string(rest.substr(slash));
  size_t colon = authority.rfind(':');
  if (colon == absl::string_view::npos)
    return bad("no port");
  endpoint.host = std::string(authority.substr(0, colon));
  if (endpoint.host.empty())
    return bad("no host");
  if (endpoint.host.find_first_of("@[]:?#") != std::string::npos)
    return bad(absl::StrCat("host '", endpoint.host,
                            "' is not a name or an "
                            "IPv4 address"));
  absl::string_view port = authority.substr(colon + 1);
  if (port.empty() || !absl::SimpleAtoi(port, &endpoint.port) ||
      endpoint.port < 1 || endpoint.port > 65535 ||
      port.find_first_not_of("0123456789") != absl::string_view::npos)
    return bad(absl::StrCat("port '", port,
                            "' is not a number from 1 to "
                            "65535"));
  if (endpoint.path.find_first_of(" ?#") != std::string::npos)
    return bad(absl::StrCat("path '", endpoint.path,
                            "' has a space, a query or a fragment"));
  return endpoint;
}

//===----------------------------------------------------------------------===//
// The request
//===----------------------------------------------------------------------===//

namespace {

void appendString(std::string &out, absl::string_view s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
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
        absl::StrAppendFormat(&out, "\\u%04x", c);
      else
        out += static_cast<char>(c);
    }
  }
  out += '"';
}

void appendIndex(std::string &out, int64_t v) {
  if (v < 0)
    out += "null";
  else
    absl::StrAppend(&out, v);
}

} // namespace

absl::StatusOr<std::string> scoreRequestBody(const ImageBatch &batch,
                                             const ScoreContext &context,
                                             ImageEncoding encoding) {
  if (absl::Status s = validateImageBatch(batch); !s.ok())
    return s;
  const int64_t n = batch.shape[0], h = batch.shape[2], w = batch.shape[3];
  std::string body = "{\"protocol\": 1, \"count\": ";
  absl::StrAppend(&body, n, ", \"height\": ", h, ", \"width\": ", w,
                  ", \"channels\": 3, \"format\": \"",
                  encoding == ImageEncoding::Png ? "png" : "raw",
                  "\", \"iteration\": ");
  appendIndex(body, context.iteration);
  body += ", \"seed\": ";
  appendIndex(body, context.seed);
  const int64_t p = context.promptsPerIteration;
  const int64_t whole = context.batchSize > 0 ? context.batchSize : n;
  const int64_t first = context.batchSize > 0 ? context.first : 0;
  const bool perImage = p > 0 && context.promptCount > 0 && whole % p == 0 &&
                        first >= 0 && first + n <= whole &&
                        context.iteration >= 0;
  const int64_t group = perImage ? whole / p : 0;
  body += ", \"metadata\": [";
  for (int64_t b = 0; b < n; ++b) {
    int64_t prompt = -1, sample = -1;
    if (perImage) {
      prompt =
          (context.iteration % context.promptCount * (p % context.promptCount) +
           (first + b) / group) %
          context.promptCount;
      sample = (first + b) % group;
    }
    absl::StrAppend(&body, b ? ", " : "", "{\"prompt_index\": ");
    appendIndex(body, prompt);
    body += ", \"sample_index\": ";
    appendIndex(body, sample);
    body += ", \"prompt\": ";
    if (prompt >= 0 && static_cast<size_t>(prompt) < context.promptTexts.size())
      appendString(body, context.promptTexts[prompt]);
    else
      body += "null";
    body += "}";
  }
  body += "], \"images\": [";
  for (int64_t b = 0; b < n; ++b) {
    absl::StatusOr<std::vector<uint8_t>> hwc = imageToHwcU8(batch, b);
    if (!hwc.ok())
      return hwc.status();
    std::string bytes;
    if (encoding == ImageEncoding::Png) {
      image::RgbImage rgb;
      rgb.width = w;
      rgb.height = h;
      rgb.pixels = std::move(*hwc);
      absl::StatusOr<std::string> png = image::encodePng(rgb);
      if (!png.ok())
        return png.status();
      bytes = std::move(*png);
    } else {
      bytes.assign(hwc->begin(), hwc->end());
    }
    absl::StrAppend(&body, b ? ", \"" : "\"", absl::Base64Escape(bytes), "\"");
  }
  body += "]}";
  return body;
}

//===----------------------------------------------------------------------===//
// The answer: a strict JSON reader
//===----------------------------------------------------------------------===//

namespace {

struct Json {
  enum class Kind { Null, Bool, Number, String, Array, Object };
  Kind kind = Kind::Null;
  bool boolean = false;
  double number = 0;
  std::string text; // String; Number: how it was written
  std::vector<Json> elements;
  std::vector<std::pair<std::string, Json>> members;
};

absl::string_view kindName(Json::Kind kind) {
  switch (kind) {
  case Json::Kind::Null:
    return "null";
  case Json::Kind::Bool:
    return "a boolean";
  case Json::Kind::Number:
    return "a number";
  case Json::Kind::String:
    return "a string";
  case Json::Kind::Array:
    return "an array";
  case Json::Kind::Object:
    return "an object";
  }
  return "a value";
}

class Reader {
public:
  explicit Reader(absl::string_view text) : text_(text) {}

  bool parseDocument(Json &out) {
    skipSpace();
    if (!parseValue(out, 0))
      return false;
    skipSpace();
    if (pos_ != text_.size())
      return fail("the end of the answer after its value");
    return true;
  }

  const std::string &error() const { return error_; }

private:
  static constexpr int kMaxDepth = 64;

  bool fail(absl::string_view expected) {
    if (!error_.empty())
      return false;
    std::string found =
        pos_ >= text_.size()
            ? std::string("the end of the answer")
            : absl::StrCat("'", absl::CHexEscape(text_.substr(pos_, 10)), "'");
    error_ = absl::StrCat("malformed JSON at byte ", pos_, ": expected ",
                          expected, ", found ", found);
    return false;
  }

  void skipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r'))
      ++pos_;
  }

  bool literal(absl::string_view word) {
    if (text_.substr(pos_, word.size()) != word)
      return false;
    pos_ += word.size();
    return true;
  }

  bool parseValue(Json &out, int depth) {
    if (depth > kMaxDepth)
      return fail(absl::StrCat("at most ", kMaxDepth, " nested levels"));
    if (pos_ >= text_.size())
      return fail("a value");
    char c = text_[pos_];
    if (c == '{')
      return parseObject(out, depth);
    if (c == '[')
      return parseArray(out, depth);
    if (c == '"') {
      out.kind = Json::Kind::String;
      return parseString(out.text);
    }
    if (literal("null")) {
      out.kind = Json::Kind::Null;
      return true;
    }
    if (literal("true") || literal("false")) {
      out.kind = Json::Kind::Bool;
      out.boolean = c == 't';
      return true;
    }
    // Python's json.dumps writes these for non-finite floats.
    for (auto [word, value] :
         {std::pair<absl::string_view, double>{"NaN", std::nan("")},
          {"Infinity", HUGE_VAL},
          {"-Infinity", -HUGE_VAL}}) {
      if (literal(word)) {
        out.kind = Json::Kind::Number;
        out.number = value;
        out.text = std::string(word);
        return true;
      }
    }
    if (c == '-' || (c >= '0' && c <= '9'))
      return parseNumber(out);
    return fail("a value");
  }

  bool parseNumber(Json &out) {
    size_t start = pos_;
    auto digits = [&] {
      size_t from = pos_;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9')
        ++pos_;
      return pos_ > from;
    };
    if (text_[pos_] == '-')
      ++pos_;
    if (pos_ < text_.size() && text_[pos_] == '0')
      ++pos_;
    else if (!digits())
      return fail("a digit");
    if (pos_ < text_.size() && text_[pos_] == '.') {
      ++pos_;
      if (!digits())
        return fail("a digit after the decimal point");
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-'))
        ++pos_;
      if (!digits())
        return fail("a digit in the exponent");
    }
    out.kind = Json::Kind::Number;
    out.text = std::string(text_.substr(start, pos_ - start));
    // from_chars gives +-HUGE_VAL-like results on overflow in absl: a
    // number too large for a double is read as infinite (and refused as a
    // score later, with its text).
    absl::from_chars_result r = absl::from_chars(
        out.text.data(), out.text.data() + out.text.size(), out.number);
    if (r.ec == std::errc::result_out_of_range) {
      bool tiny = out.text.find_first_of("eE") != std::string::npos &&
                  out.text.find("e-") != std::string::npos;
      out.number = tiny ? 0.0 : (out.text[0] == '-' ? -HUGE_VAL : HUGE_VAL);
    } else if (r.ec != std::errc()) {
      pos_ = start;
      return fail("a number");
    }
    return true;
  }

  bool hex4(uint32_t &v) {
    if (pos_ + 4 > text_.size())
      return fail("4 hex digits after \\u");
    v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = text_[pos_ + i];
      int d = c >= '0' && c <= '9'   ? c - '0'
              : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                     : -1;
      if (d < 0)
        return fail("4 hex digits after \\u");
      v = v * 16 + static_cast<uint32_t>(d);
    }
    pos_ += 4;
    return true;
  }

  static void appendUtf8(std::string &out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  bool parseString(std::string &out) {
    ++pos_; // "
    while (true) {
      if (pos_ >= text_.size())
        return fail("'\"' closing the string");
      unsigned char c = static_cast<unsigned char>(text_[pos_]);
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (c < 0x20)
        return fail("an escaped control character in the string");
      if (c != '\\') {
        out += static_cast<char>(c);
        ++pos_;
        continue;
      }
      ++pos_;
      if (pos_ >= text_.size())
        return fail("an escape after '\\'");
      char e = text_[pos_++];
      switch (e) {
      case '"':
      case '\\':
      case '/':
        out += e;
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'u': {
        uint32_t cp = 0;
        if (!hex4(cp))
          return false;
        if (cp >= 0xD800 && cp < 0xDC00) {
          uint32_t low = 0;
          if (!literal("\\u") || !hex4(low) || low < 0xDC00 || low >= 0xE000)
            return fail("a low surrogate after a high one");
          cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        } else if (cp >= 0xDC00 && cp < 0xE000) {
          return fail("a high surrogate before a low one");
        }
        appendUtf8(out, cp);
        break;
      }
      default:
        --pos_;
        return fail("one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u");
      }
    }
  }

  bool parseArray(Json &out, int depth) {
    out.kind = Json::Kind::Array;
    ++pos_; // [
    skipSpace();
    if (pos_ < text_.size() && text_[pos_] == ']') {
      ++pos_;
      return true;
    }
    while (true) {
      skipSpace();
      out.elements.emplace_back();
      if (!parseValue(out.elements.back(), depth + 1))
        return false;
      skipSpace();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < text_.size() && text_[pos_] == ']') {
        ++pos_;
        return true;
      }
      return fail("',' or ']'");
    }
  }

  bool parseObject(Json &out, int depth) {
    out.kind = Json::Kind::Object;
    ++pos_; // {
    skipSpace();
    if (pos_ < text_.size() && text_[pos_] == '}') {
      ++pos_;
      return true;
    }
    while (true) {
      skipSpace();
      if (pos_ >= text_.size() || text_[pos_] != '"')
        return fail("a key in quotes");
      std::string key;
      if (!parseString(key))
        return false;
      skipSpace();
      if (pos_ >= text_.size() || text_[pos_] != ':')
        return fail("':' after the key");
      ++pos_;
      skipSpace();
      out.members.emplace_back(std::move(key), Json());
      if (!parseValue(out.members.back().second, depth + 1))
        return false;
      skipSpace();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < text_.size() && text_[pos_] == '}') {
        ++pos_;
        return true;
      }
      return fail("',' or '}'");
    }
  }

  absl::string_view text_;
  size_t pos_ = 0;
  std::string error_;
};

const Json *member(const Json &object, absl::string_view key) {
  const Json *found = nullptr;
  for (const auto &[k, v] : object.members)
    if (k == key)
      found = &v; // the last one wins, as in Python's json
  return found;
}

/// Reads `list` (named `what`, e.g. "scores" or "sub_scores 'clip'") as
/// `count` finite floats.
absl::StatusOr<std::vector<float>> readScores(const Json &list,
                                              absl::string_view what,
                                              absl::string_view each,
                                              size_t count) {
  if (list.kind != Json::Kind::Array)
    return absl::InvalidArgumentError(
        absl::StrCat(what, " is ", kindName(list.kind),
                     ", expected an array of ", count, " numbers"));
  if (list.elements.size() != count)
    return absl::InvalidArgumentError(
        absl::StrCat(list.elements.size(), " ", each, " for ", count, " image",
                     count == 1 ? "" : "s", " in ", what));
  std::vector<float> values;
  values.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    const Json &v = list.elements[i];
    if (v.kind != Json::Kind::Number)
      return absl::InvalidArgumentError(
          absl::StrCat(what, "[", i, "] is ", kindName(v.kind),
                       ", expected a finite number"));
    float f = static_cast<float>(v.number);
    if (!std::isfinite(v.number) || !std::isfinite(f))
      return absl::InvalidArgumentError(
          absl::StrCat(what, "[", i, "] is ", v.text,
                       ", expected a finite number (float32)"));
    values.push_back(f);
  }
  return values;
}

} // namespace

absl::StatusOr<Scores> parseScoreResponse(absl::string_view body,
                                          size_t count) {
  Json doc;
  Reader reader(body);
  if (!reader.parseDocument(doc))
    return absl::InvalidArgumentError(reader.error());
  if (doc.kind != Json::Kind::Object)
    return absl::InvalidArgumentError(
        absl::StrCat("the answer is ", kindName(doc.kind),
                     ", expected an object {\"scores\": [...]}"));
  const Json *scores = member(doc, "scores");
  if (!scores)
    return absl::InvalidArgumentError(
        "the answer has no \"scores\", expected {\"scores\": [...]}");
  Scores out;
  absl::StatusOr<std::vector<float>> main =
      readScores(*scores, "scores", "scores", count);
  if (!main.ok())
    return main.status();
  out.scores = std::move(*main);
  if (const Json *subs = member(doc, "sub_scores");
      subs && subs->kind != Json::Kind::Null) {
    if (subs->kind != Json::Kind::Object)
      return absl::InvalidArgumentError(
          absl::StrCat("sub_scores is ", kindName(subs->kind),
                       ", expected an object {\"name\": [...]}"));
    for (const auto &[name, list] : subs->members) {
      if (name.empty())
        return absl::InvalidArgumentError(
            "sub_scores has an empty name, expected a name per list");
      for (const auto &[seen, unused] : out.subScores)
        if (seen == name)
          return absl::InvalidArgumentError(absl::StrCat(
              "sub_scores names '", absl::CHexEscape(name), "' twice"));
      absl::StatusOr<std::vector<float>> values = readScores(
          list, absl::StrCat("sub_scores '", absl::CHexEscape(name), "'"),
          "values", count);
      if (!values.ok())
        return values.status();
      out.subScores.emplace_back(name, std::move(*values));
    }
  }
  return out;
}

//===----------------------------------------------------------------------===//
// The client
//===----------------------------------------------------------------------===//

HttpReward::HttpReward(HttpEndpoint endpoint, HttpRewardOptions options)
    : endpoint_(std::move(endpoint)), options_(options) {}

namespace {

/// The first line of `body`, cut at 200 bytes, printable.
std::string firstLine(absl::string_view body) {
  absl::string_view line = body.substr(0, body.find_first_of("\r\n"));
  bool cut = line.size() > 200;
  line = line.substr(0, 200);
  if (line.empty())
    return "an empty body";
  return absl::StrCat("'", absl::CHexEscape(line), cut ? "...'" : "'");
}

} // namespace

absl::StatusOr<Scores> HttpReward::score(const ImageBatch &batch,
                                         const ScoreContext &context) const {
  const std::string url = endpoint_.url();
  auto error = [&](absl::StatusCode code, absl::string_view what) {
    return absl::Status(code, absl::StrCat("reward server ", url, ": ", what));
  };
  absl::StatusOr<std::string> body =
      scoreRequestBody(batch, context, options_.encoding);
  if (!body.ok())
    return body.status();
  const size_t count = static_cast<size_t>(batch.shape[0]);

  // A Unix socket: cpp-httplib takes the file as the host.
  httplib::Client client(endpoint_.socket.empty() ? endpoint_.host
                                                  : endpoint_.socket,
                         endpoint_.port);
  if (!endpoint_.socket.empty())
    client.set_address_family(AF_UNIX);
  auto timeout = std::chrono::duration<double>(options_.timeoutSeconds);
  auto micros = std::chrono::duration_cast<std::chrono::microseconds>(timeout);
  client.set_connection_timeout(micros);
  client.set_read_timeout(micros);
  client.set_write_timeout(micros);
  client.set_keep_alive(false);

  double backoff = options_.backoffSeconds;
  const int attempts = std::max(1, options_.attempts);
  for (int attempt = 1;; ++attempt) {
    httplib::Result result =
        client.Post(endpoint_.path, *body, "application/json");
    if (!result) {
      httplib::Error e = result.error();
      // Only a connection that could not be made is retried (the server is
      // starting or restarting). A request that was sent but not answered
      // is not: the server may be busy with it, or died of it.
      bool retry = e == httplib::Error::Connection;
      if (!retry || attempt >= attempts) {
        if (e == httplib::Error::Connection)
          return error(absl::StatusCode::kUnavailable,
                       absl::StrCat("cannot connect (", attempt,
                                    attempt == 1 ? " try" : " tries",
                                    "): is the server running?"));
        if (e == httplib::Error::ConnectionTimeout)
          return error(absl::StatusCode::kDeadlineExceeded,
                       absl::StrFormat("no connection within %g s "
                                       "(--reward-timeout)",
                                       options_.timeoutSeconds));
        if (e == httplib::Error::Read)
          return error(absl::StatusCode::kUnavailable,
                       absl::StrFormat("no answer (the connection closed or "
                                       "%g s passed, --reward-timeout)",
                                       options_.timeoutSeconds));
        if (e == httplib::Error::Write)
          return error(absl::StatusCode::kUnavailable,
                       "the connection closed while the batch was sent");
        return error(absl::StatusCode::kUnavailable,
                     absl::StrCat("request failed: ", httplib::to_string(e)));
      }
      std::this_thread::sleep_for(std::chrono::duration<double>(backoff));
      backoff *= 2;
      continue;
    }
    if (result->status != 200)
      return error(absl::StatusCode::kFailedPrecondition,
                   absl::StrCat("HTTP status ", result->status,
                                ", expected 200: ", firstLine(result->body)));
    absl::StatusOr<Scores> scores = parseScoreResponse(result->body, count);
    if (!scores.ok())
      return error(absl::StatusCode::kFailedPrecondition,
                   scores.status().message());
    return scores;
  }
}

} // namespace omni::rewards
