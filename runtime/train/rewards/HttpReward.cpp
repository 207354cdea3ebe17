//===- HttpReward.cpp - Rewards computed by a server over HTTP --*- C++ -*-===//
//
// The protocol is docs/rewards.md. cpp-httplib (Debian libcpp-httplib-dev)
// does the HTTP and nlohmann-json (Debian nlohmann-json3-dev) the JSON; the
// errors are one line naming the byte, with a hint for Python's NaN and
// Infinity, which are not JSON.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/rewards/HttpReward.h"
#include "runtime/base/JsonNonFinite.h"

#include "runtime/train/image/Png.h"

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <sys/socket.h>

#include <chrono>
#include <cmath>
#include <optional>
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

/// Appends `s` as a JSON string; invalid UTF-8 becomes U+FFFD.
void appendString(std::string &out, absl::string_view s) {
  out += nlohmann::json(std::string(s))
             .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
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
// The answer, read by nlohmann-json
//===----------------------------------------------------------------------===//

namespace {

// ordered_json: sub_scores are logged in the order the server wrote them.
using Json = nlohmann::ordered_json;

absl::string_view kindName(const Json &v) {
  switch (v.type()) {
  case Json::value_t::null:
    return "null";
  case Json::value_t::boolean:
    return "a boolean";
  case Json::value_t::number_integer:
  case Json::value_t::number_unsigned:
  case Json::value_t::number_float:
    return "a number";
  case Json::value_t::string:
    return "a string";
  case Json::value_t::array:
    return "an array";
  case Json::value_t::object:
    return "an object";
  default:
    return "a value";
  }
}

/// The part of nlohmann-json's message after its "[json.exception...]
/// parse error at line L, column C: " prefix (we name the byte instead).
std::string detailOf(const Json::exception &e) {
  // "[json.exception.<kind>.<id>] [parse error at line L, column C: ]".
  absl::string_view what = e.what();
  if (size_t bracket = what.find("] "); bracket != absl::string_view::npos)
    what.remove_prefix(bracket + 2);
  if (absl::ConsumePrefix(&what, "parse error"))
    if (size_t colon = what.find(": "); colon != absl::string_view::npos)
      what.remove_prefix(colon + 2);
  // "syntax error while parsing value - <what went wrong>".
  if (absl::ConsumePrefix(&what, "syntax error while parsing "))
    if (size_t dash = what.find(" - "); dash != absl::string_view::npos)
      what.remove_prefix(dash + 3);
  return std::string(what);
}

/// Parses `body` as one JSON document, with one-line errors naming the byte.
absl::StatusOr<Json> parseDocument(absl::string_view body) {
  try {
    return Json::parse(body.begin(), body.end());
  } catch (const Json::parse_error &e) {
    if (std::optional<std::string> quoted = quoteNonFinite(body))
      if (absl::StatusOr<Json> doc = parseDocument(*quoted); doc.ok())
        return doc;
    // e.byte is 1-based: the byte the reader stopped at.
    return absl::InvalidArgumentError(absl::StrCat("malformed JSON at byte ",
                                                   e.byte > 0 ? e.byte - 1 : 0,
                                                   ": ", detailOf(e)));
  } catch (const Json::exception &e) {
    // out_of_range.406: a number beyond double's range.
    return absl::InvalidArgumentError(
        absl::StrCat("malformed JSON: ", detailOf(e)));
  }
}

/// Reads `list` (named `what`, e.g. "scores" or "sub_scores 'clip'") as
/// `count` finite floats.
absl::StatusOr<std::vector<float>> readScores(const Json &list,
                                              absl::string_view what,
                                              absl::string_view each,
                                              size_t count) {
  if (!list.is_array())
    return absl::InvalidArgumentError(absl::StrCat(what, " is ", kindName(list),
                                                   ", expected an array of ",
                                                   count, " numbers"));
  if (list.size() != count)
    return absl::InvalidArgumentError(
        absl::StrCat(list.size(), " ", each, " for ", count, " image",
                     count == 1 ? "" : "s", " in ", what));
  std::vector<float> values;
  values.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    const Json &v = list[i];
    if (v.is_string() &&
        absl::StartsWith(v.get_ref<const std::string &>(), kNonFinite))
      return absl::InvalidArgumentError(absl::StrCat(
          what, "[", i, "] is ",
          v.get_ref<const std::string &>().substr(kNonFinite.size()),
          ", expected a finite number (float32)"));
    if (!v.is_number())
      return absl::InvalidArgumentError(absl::StrCat(
          what, "[", i, "] is ", kindName(v), ", expected a finite number"));
    double d = v.get<double>();
    float f = static_cast<float>(d);
    if (!std::isfinite(d) || !std::isfinite(f))
      return absl::InvalidArgumentError(
          absl::StrCat(what, "[", i, "] is ", v.dump(),
                       ", expected a finite number (float32)"));
    values.push_back(f);
  }
  return values;
}

} // namespace

absl::StatusOr<Scores> parseScoreResponse(absl::string_view body,
                                          size_t count) {
  absl::StatusOr<Json> parsed = parseDocument(body);
  if (!parsed.ok())
    return parsed.status();
  const Json &doc = *parsed;
  if (!doc.is_object())
    return absl::InvalidArgumentError(
        absl::StrCat("the answer is ", kindName(doc),
                     ", expected an object {\"scores\": [...]}"));
  // Duplicate keys: the last one wins, as in Python's json.
  auto scores = doc.find("scores");
  if (scores == doc.end())
    return absl::InvalidArgumentError(
        "the answer has no \"scores\", expected {\"scores\": [...]}");
  Scores out;
  absl::StatusOr<std::vector<float>> main =
      readScores(*scores, "scores", "scores", count);
  if (!main.ok())
    return main.status();
  out.scores = std::move(*main);
  if (auto subs = doc.find("sub_scores");
      subs != doc.end() && !subs->is_null()) {
    if (!subs->is_object())
      return absl::InvalidArgumentError(
          absl::StrCat("sub_scores is ", kindName(*subs),
                       ", expected an object {\"name\": [...]}"));
    // A name given twice keeps its last list, as in Python's json.
    for (const auto &[name, list] : subs->items()) {
      if (name.empty())
        return absl::InvalidArgumentError(
            "sub_scores has an empty name, expected a name per list");
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
