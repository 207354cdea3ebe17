//===- Profile.cpp - Where a run's time goes, per command kind --*- C++ -*-===//
//
// The rows and their reports (Profile.h). JSON is nlohmann-json.
//
//===----------------------------------------------------------------------===//

#include "runtime/executor/Profile.h"

#include "absl/strings/str_format.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <utility>

namespace omni::executor {

void Profile::add(absl::string_view phase, absl::string_view kind,
                  absl::string_view symbol, absl::string_view where,
                  double seconds, int64_t bytes, int64_t flops) {
  Key key{std::string(phase), std::string(kind), std::string(symbol)};
  auto [it, inserted] = rows_.try_emplace(std::move(key));
  ProfileRow &row = it->second;
  if (inserted) {
    row.phase = std::string(phase);
    row.kind = std::string(kind);
    row.symbol = std::string(symbol);
    row.where = std::string(where.substr(0, 160));
  }
  ++row.count;
  row.seconds += seconds;
  row.bytes += bytes;
  row.flops += flops;
}

void Profile::addPhase(absl::string_view phase, double seconds) {
  auto it =
      std::find_if(phases_.begin(), phases_.end(),
                   [&](const ProfilePhase &p) { return p.phase == phase; });
  if (it == phases_.end())
    phases_.push_back({std::string(phase), seconds});
  else
    it->seconds += seconds;
}

namespace {

/// Phases in order: those with top-level time, then the others the rows
/// name, in name order.
std::vector<ProfilePhase> allPhases(const std::vector<ProfilePhase> &timed,
                                    const std::vector<ProfileRow> &rows) {
  std::vector<ProfilePhase> phases = timed;
  for (const ProfileRow &row : rows)
    if (std::none_of(phases.begin(), phases.end(), [&](const ProfilePhase &p) {
          return p.phase == row.phase;
        }))
      phases.push_back({row.phase, 0});
  return phases;
}

double share(double seconds, double total) {
  return total > 0 ? seconds / total : 0;
}

struct KindTotal {
  std::string kind;
  int64_t count = 0;
  double seconds = 0;
  int64_t bytes = 0;
  int64_t flops = 0;
};

/// The rows of `phase` summed per kind, longest first.
std::vector<KindTotal> kindTotals(const std::vector<ProfileRow> &rows,
                                  const std::string &phase) {
  std::vector<KindTotal> kinds;
  for (const ProfileRow &row : rows) {
    if (row.phase != phase)
      continue;
    auto it = std::find_if(kinds.begin(), kinds.end(), [&](const KindTotal &k) {
      return k.kind == row.kind;
    });
    if (it == kinds.end())
      it = kinds.insert(kinds.end(), KindTotal{row.kind});
    it->count += row.count;
    it->seconds += row.seconds;
    it->bytes += row.bytes;
    it->flops += row.flops;
  }
  std::stable_sort(kinds.begin(), kinds.end(),
                   [](const KindTotal &a, const KindTotal &b) {
                     return a.seconds > b.seconds;
                   });
  return kinds;
}

} // namespace

std::vector<ProfileRow> Profile::rows() const {
  std::vector<ProfileRow> rows;
  rows.reserve(rows_.size());
  for (const auto &[key, row] : rows_)
    rows.push_back(row);
  std::vector<ProfilePhase> phases = allPhases(phases_, rows);
  auto rank = [&](const std::string &phase) {
    return std::find_if(
               phases.begin(), phases.end(),
               [&](const ProfilePhase &p) { return p.phase == phase; }) -
           phases.begin();
  };
  std::stable_sort(rows.begin(), rows.end(),
                   [&](const ProfileRow &a, const ProfileRow &b) {
                     auto ra = rank(a.phase), rb = rank(b.phase);
                     if (ra != rb)
                       return ra < rb;
                     return a.seconds > b.seconds;
                   });
  return rows;
}

std::string Profile::json() const {
  using Json = nlohmann::ordered_json;
  std::vector<ProfileRow> all = rows();
  Json phases = Json::array();
  for (const ProfilePhase &phase : allPhases(phases_, all)) {
    double profiled = 0;
    Json symbols = Json::array();
    for (const ProfileRow &row : all) {
      if (row.phase != phase.phase)
        continue;
      profiled += row.seconds;
      symbols.push_back(Json{{"kind", row.kind},
                             {"symbol", row.symbol},
                             {"where", row.where},
                             {"count", row.count},
                             {"seconds", row.seconds},
                             {"share", share(row.seconds, phase.seconds)},
                             {"bytes", row.bytes},
                             {"flops", row.flops}});
    }
    Json kinds = Json::array();
    for (const KindTotal &k : kindTotals(all, phase.phase))
      kinds.push_back(Json{{"kind", k.kind},
                           {"count", k.count},
                           {"seconds", k.seconds},
                           {"share", share(k.seconds, phase.seconds)},
                           {"bytes", k.bytes},
                           {"flops", k.flops}});
    phases.push_back(Json{{"phase", phase.phase},
                          {"seconds", phase.seconds},
                          {"profiled_seconds", profiled},
                          {"kinds", std::move(kinds)},
                          {"symbols", std::move(symbols)}});
  }
  Json out{{"iterations", iterations_}, {"phases", std::move(phases)}};
  return out.dump(1) + "\n";
}

std::string Profile::table() const {
  std::vector<ProfileRow> all = rows();
  std::string out = absl::StrFormat(
      "profile of %d iteration(s), seconds per phase and kind:\n", iterations_);
  for (const ProfilePhase &phase : allPhases(phases_, all)) {
    absl::StrAppendFormat(&out, "  %-10s %10.4f s\n",
                          phase.phase.empty() ? "(none)" : phase.phase,
                          phase.seconds);
    for (const KindTotal &k : kindTotals(all, phase.phase))
      absl::StrAppendFormat(&out, "    %-16s %8d x %10.4f s %5.1f%%\n", k.kind,
                            k.count, k.seconds,
                            100 * share(k.seconds, phase.seconds));
  }
  return out;
}

} // namespace omni::executor
