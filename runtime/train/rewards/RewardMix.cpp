//===- RewardMix.cpp - A weighted sum of rewards ----------------*- C++ -*-===//

#include "runtime/train/rewards/RewardMix.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

#include <algorithm>
#include <cmath>

namespace omni::rewards {
namespace {

bool isReward(absl::string_view name) {
  std::vector<std::string> known = registeredRewards();
  return std::find(known.begin(), known.end(), name) != known.end();
}

/// A weight: a decimal number, finite.
std::optional<double> parseWeight(absl::string_view text) {
  double w = 0;
  if (text.empty() ||
      text.find_first_not_of("0123456789.eE+-") != absl::string_view::npos ||
      !absl::SimpleAtod(text, &w) || !std::isfinite(w))
    return std::nullopt;
  return w;
}

bool isUrl(absl::string_view s) {
  return s.substr(0, 7) == "http://" || s.substr(0, 5) == "unix:";
}

} // namespace

absl::StatusOr<RewardComponent> parseRewardComponent(absl::string_view spec) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("--reward ", spec, ": ", why));
  };
  if (spec.empty())
    return absl::InvalidArgumentError(
        "--reward: empty, expected NAME[:WEIGHT] or "
        "http://HOST:PORT[/PATH][:WEIGHT]");
  RewardComponent c;
  absl::string_view source = spec;
  size_t colon = spec.rfind(':');
  if (colon != absl::string_view::npos) {
    absl::string_view head = spec.substr(0, colon),
                      tail = spec.substr(colon + 1);
    // A URL's last ':<number>' is its port unless what is before it is a
    // whole URL with a port.
    bool headIsSource =
        isUrl(head) ? parseHttpEndpoint(head).ok() : !isUrl(spec);
    if (headIsSource) {
      std::optional<double> w = parseWeight(tail);
      if (!w)
        return bad(absl::StrCat("weight '", tail,
                                "' is not a finite number, expected "
                                "NAME[:WEIGHT] or "
                                "http://HOST:PORT[/PATH][:WEIGHT]"));
      c.weight = *w;
      source = head;
    }
  }
  c.source = std::string(source);
  if (isUrl(source)) {
    absl::StatusOr<HttpEndpoint> endpoint = parseHttpEndpoint(source);
    if (!endpoint.ok())
      return bad(endpoint.status().message());
    c.http = *endpoint;
    return c;
  }
  if (!isReward(source))
    return absl::InvalidArgumentError(absl::StrCat(
        "--reward: unknown reward '", source,
        "' (known rewards: ", absl::StrJoin(registeredRewards(), ", "),
        "; or a server: http://HOST:PORT[/PATH] or unix:SOCKET)"));
  return c;
}

absl::StatusOr<std::shared_ptr<RewardMix>>
RewardMix::create(const std::vector<std::string> &specs,
                  const HttpRewardOptions &httpOptions) {
  if (specs.empty())
    return absl::InvalidArgumentError("--reward: no reward given");
  auto mix = std::make_shared<RewardMix>();
  for (const std::string &spec : specs) {
    absl::StatusOr<RewardComponent> c = parseRewardComponent(spec);
    if (!c.ok())
      return c.status();
    for (const RewardComponent &seen : mix->components_)
      if (seen.source == c->source)
        return absl::InvalidArgumentError(
            absl::StrCat("--reward ", spec, ": ", c->source,
                         " is already in the mix (give each reward once, "
                         "with the sum of its weights)"));
    mix->servers_.push_back(
        c->http ? std::make_unique<HttpReward>(*c->http, httpOptions)
                : nullptr);
    mix->components_.push_back(std::move(*c));
  }
  return mix;
}

void RewardMix::setContext(ScoreContext context) {
  std::lock_guard<std::mutex> lock(mutex_);
  context_ = std::move(context);
  scored_ = 0;
}

void RewardMix::add(const std::string &key, const std::vector<float> &values) {
  auto [it, inserted] = means_.try_emplace(key);
  if (inserted)
    order_.push_back(key);
  for (float v : values)
    it->second.sum += v;
  it->second.count += static_cast<int64_t>(values.size());
}

absl::StatusOr<std::vector<float>> RewardMix::score(const ImageBatch &batch) {
  if (absl::Status s = validateImageBatch(batch); !s.ok())
    return s;
  ScoreContext context;
  const size_t n = static_cast<size_t>(batch.shape[0]);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    context = context_;
    if (context.batchSize > 0 && static_cast<int64_t>(n) < context.batchSize) {
      context.first = scored_ % context.batchSize;
      scored_ += static_cast<int64_t>(n);
    } else {
      context.batchSize = 0; // the whole batch
      context.first = 0;
    }
  }
  std::vector<double> sum(n, 0.0);
  // Logged: the components' values (a mix of several), then the servers'
  // sub-scores.
  std::vector<std::pair<std::string, std::vector<float>>> logged, subs;
  for (size_t i = 0; i < components_.size(); ++i) {
    const RewardComponent &c = components_[i];
    std::vector<float> values;
    if (servers_[i]) {
      absl::StatusOr<Scores> scores = servers_[i]->score(batch, context);
      if (!scores.ok())
        return scores.status();
      values = std::move(scores->scores);
      for (auto &[name, sub] : scores->subScores)
        subs.emplace_back(absl::StrCat("reward/", name), std::move(sub));
    } else {
      absl::StatusOr<std::vector<float>> computed =
          computeReward(c.source, batch);
      if (!computed.ok())
        return computed.status();
      values = std::move(*computed);
    }
    if (values.size() != n)
      return absl::InternalError(absl::StrCat("reward ", c.source, " gave ",
                                              values.size(), " values for ", n,
                                              " images"));
    for (size_t b = 0; b < n; ++b)
      sum[b] += c.weight * static_cast<double>(values[b]);
    if (components_.size() > 1)
      logged.emplace_back(absl::StrCat("reward/", c.source), values);
  }
  std::vector<float> mixed(n);
  for (size_t b = 0; b < n; ++b) {
    mixed[b] = static_cast<float>(sum[b]);
    if (!std::isfinite(mixed[b]))
      return absl::InvalidArgumentError(absl::StrCat(
          "the mix ", describe(), " of image ", b, " is not a finite float32 (",
          absl::StrFormat("%g", sum[b]), ")"));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto &[key, values] : logged)
    add(key, values);
  for (const auto &[key, values] : subs)
    add(key, values);
  return mixed;
}

std::vector<std::pair<std::string, double>> RewardMix::takeMeans() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<std::pair<std::string, double>> out;
  for (const std::string &key : order_) {
    Mean &m = means_[key];
    if (m.count)
      out.emplace_back(key, m.sum / static_cast<double>(m.count));
    m = Mean();
  }
  return out;
}

std::string RewardMix::describe() const {
  if (components_.size() == 1 && components_[0].weight == 1)
    return components_[0].source;
  std::string out;
  for (const RewardComponent &c : components_)
    absl::StrAppend(&out, out.empty() ? "" : " + ",
                    absl::StrFormat("%g", c.weight), " * ", c.source);
  return out;
}

} // namespace omni::rewards
