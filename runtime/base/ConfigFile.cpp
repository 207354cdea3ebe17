//===- ConfigFile.cpp - omni.toml, the config file of omnigen and omnirun -===//
//
// The schema (docs/config.md) is the tables below: kSections names every
// section, its tool and its keys with their kinds; [recipe] is open (its
// names are the recipe's options, which omnigen checks). toml++ is used
// header-only here, without exceptions, so that nothing else sees it and
// omnirun needs no TOML library at run time.
//
//===----------------------------------------------------------------------===//

#include "runtime/base/ConfigFile.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"

#define TOML_HEADER_ONLY 1
#define TOML_EXCEPTIONS 0
#define TOML_ENABLE_FORMATTERS 0
#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <sys/stat.h>

namespace omni::config {
namespace {

/// What a key's value may be, and how it becomes arguments.
enum class Kind {
  String,  // a string: --flag=value
  Integer, // an integer
  Number,  // an integer or a float
  Switch,  // a boolean: true is --flag, false nothing
  Folder,  // a string (--flag=DIR) or a boolean (true: --flag)
  List,    // a string or an array of strings: --flag=item for each
  /// A table name = number: --flag=name=value for each (omnirun --set).
  NumberTable,
  /// A table name = string, number, boolean or array of them (joined with
  /// ','): --flag=name=value for each (the model overrides).
  ValueTable,
  /// [recipe]: any key, a string, number or boolean: --opt=key=value.
  Scalar,
};

struct KeySpec {
  const char *key;
  Kind kind;
  /// The flag; nullptr: `--<key>`.
  const char *flag = nullptr;
};

struct SectionSpec {
  /// The table's name; "" for the top level.
  const char *name;
  Tool tool;
  std::vector<KeySpec> keys;
  /// An open section: every key is Kind::Scalar of `openFlag`.
  const char *openFlag = nullptr;
};

/// The sections and their keys (docs/config.md). [run]'s keys are
/// omnirun's flags without `--` (runtime/omnirun/OmniRun.cpp, kFlags;
/// OmniRunTest checks that every training flag has one).
const std::vector<SectionSpec> &sections() {
  static const std::vector<SectionSpec> kSections = {
      {"", Tool::Omnigen, {{"mesh", Kind::String}}},
      {"model",
       Tool::Omnigen,
       {{"name", Kind::String, "--model"},
        {"config", Kind::String, "--config"},
        {"from_diffusers", Kind::String, "--from-diffusers"},
        {"overrides", Kind::ValueTable, "--set"}}},
      {"decoder",
       Tool::Omnigen,
       {{"name", Kind::String, "--decoder"},
        {"config", Kind::String, "--decoder-config"},
        {"overrides", Kind::ValueTable, "--decoder-set"}}},
      {"recipe", Tool::Omnigen, {}, "--opt"},
      {"run",
       Tool::Omnirun,
       {
           {"steps", Kind::Integer},
           {"seed", Kind::Integer},
           {"out", Kind::String},
           {"save-every", Kind::Integer},
           {"keep-last", Kind::Integer},
           {"sample-every", Kind::Integer},
           {"resume", Kind::Folder},
           {"resume-if-present", Kind::Folder},
           {"allow-program-change", Kind::Switch},
           {"set", Kind::NumberTable},
           {"lr-schedule", Kind::String},
           {"warmup", Kind::Integer},
           {"lr-min", Kind::Number},
           {"allow-hparam-change", Kind::Switch},
           {"stats", Kind::Switch},
           {"profile", Kind::String},
           {"prompts", Kind::String},
           {"init", Kind::List},
           {"init-from-ema", Kind::List},
           {"init-skip", Kind::List},
           {"init-diffusers", Kind::String},
           {"reward", Kind::List},
           {"reward-timeout", Kind::Number},
           {"reward-images", Kind::String},
           {"metrics", Kind::String},
           {"ranks", Kind::Integer},
           {"collective-timeout", Kind::Number},
           {"threads", Kind::Integer},
           {"device", Kind::String},
           {"gpus", Kind::Integer},
       }},
  };
  return kSections;
}

const SectionSpec *findSection(const std::string &name) {
  for (const SectionSpec &s : sections())
    if (name == s.name)
      return &s;
  return nullptr;
}

const KeySpec *findKey(const SectionSpec &section, const std::string &key) {
  for (const KeySpec &k : section.keys)
    if (key == k.key)
      return &k;
  return nullptr;
}

/// "a string", "an integer", ... as errors name a TOML value's type.
std::string typeName(const toml::node &node) {
  switch (node.type()) {
  case toml::node_type::string:
    return "a string";
  case toml::node_type::integer:
    return "an integer";
  case toml::node_type::floating_point:
    return "a number";
  case toml::node_type::boolean:
    return "a boolean";
  case toml::node_type::array:
    return "an array";
  case toml::node_type::table:
    return "a table";
  case toml::node_type::date:
  case toml::node_type::time:
  case toml::node_type::date_time:
    return "a date or time";
  case toml::node_type::none:
    break;
  }
  return "nothing";
}

/// A double as the shortest text that reads back as it.
/// (`%g`: 0.0003, 1e-05, 2).
std::string formatNumber(double value) {
  char buffer[40];
  for (int digits = 1; digits <= 17; ++digits) {
    std::snprintf(buffer, sizeof buffer, "%.*g", digits, value);
    if (std::strtod(buffer, nullptr) == value)
      break;
  }
  return buffer;
}

/// The text of a string, integer, float or boolean; nullopt otherwise.
std::optional<std::string> scalarText(const toml::node &node) {
  if (const auto *s = node.as_string())
    return s->get();
  if (const auto *i = node.as_integer())
    return std::to_string(i->get());
  if (const auto *f = node.as_floating_point())
    return formatNumber(f->get());
  if (const auto *b = node.as_boolean())
    return std::string(b->get() ? "true" : "false");
  return std::nullopt;
}

/// Collects the arguments of one file, in its order.
class Reader {
public:
  Reader(const std::string &path, Tool tool) : path_(path), tool_(tool) {}

  absl::Status readTop(const toml::table &top) {
    for (auto &&[key, node] : top) {
      const std::string name(key.str());
      const SectionSpec &root = *findSection("");
      if (const KeySpec *spec = findKey(root, name)) {
        if (absl::Status s = readKey(root, *spec, name, key.source(), node);
            !s.ok())
          return s;
        continue;
      }
      if (const toml::table *table = node.as_table()) {
        const SectionSpec *section = name.empty() ? nullptr : findSection(name);
        if (!section)
          return error(key.source(),
                       absl::StrCat("unknown section [", name,
                                    "] (known: [model], [decoder], [recipe], "
                                    "[run] and the key mesh)"));
        if (absl::Status s = readSection(*section, *table); !s.ok())
          return s;
        continue;
      }
      return error(key.source(),
                   absl::StrCat("unknown key '", name,
                                "' (known at the top: mesh, and the "
                                "sections [model], [decoder], [recipe], "
                                "[run])"));
    }
    return absl::OkStatus();
  }

  /// The arguments in the order of their keys in the file.
  std::vector<ConfigArg> take() {
    std::stable_sort(
        args_.begin(), args_.end(), [](const Placed &a, const Placed &b) {
          return std::tie(a.line, a.column) < std::tie(b.line, b.column);
        });
    std::vector<ConfigArg> out;
    for (Placed &p : args_)
      out.push_back(std::move(p.arg));
    return out;
  }

private:
  struct Placed {
    uint32_t line, column;
    ConfigArg arg;
  };

  std::string where(const toml::source_region &at) const {
    return absl::StrCat(path_, ":", at.begin.line, ":", at.begin.column);
  }

  absl::Status error(const toml::source_region &at,
                     const std::string &message) const {
    return absl::InvalidArgumentError(absl::StrCat(where(at), ": ", message));
  }

  absl::Status wrongType(const toml::source_region &at, const std::string &key,
                         const char *expected, const toml::node &found) const {
    return error(at, absl::StrCat(key, ": expected ", expected, ", found ",
                                  typeName(found)));
  }

  void add(const SectionSpec &section, const toml::source_region &at,
           std::string key, std::string flag, std::optional<std::string> value,
           const toml::node &node, bool listItem = false) {
    if (section.tool != tool_)
      return;
    ConfigArg arg;
    arg.key = std::move(key);
    arg.flag = std::move(flag);
    arg.value = std::move(value);
    arg.type = typeName(node);
    arg.where = where(at);
    arg.listItem = listItem;
    args_.push_back({at.begin.line, at.begin.column, std::move(arg)});
  }

  std::string path(const SectionSpec &section, const std::string &key) const {
    return *section.name ? absl::StrCat(section.name, ".", key) : key;
  }

  absl::Status readSection(const SectionSpec &section,
                           const toml::table &table) {
    for (auto &&[key, node] : table) {
      const std::string name(key.str());
      if (section.openFlag) {
        std::optional<std::string> text = scalarText(node);
        const std::string full = path(section, name);
        if (!text)
          return wrongType(key.source(), full,
                           "a string, a number or a boolean", node);
        add(section, key.source(), full, section.openFlag,
            absl::StrCat(name, "=", *text), node);
        continue;
      }
      const KeySpec *spec = findKey(section, name);
      if (!spec) {
        std::vector<std::string> known;
        for (const KeySpec &k : section.keys)
          known.push_back(k.key);
        return error(key.source(),
                     absl::StrCat("unknown key '", path(section, name),
                                  "' (known in [", section.name,
                                  "]: ", absl::StrJoin(known, ", "), ")"));
      }
      if (absl::Status s = readKey(section, *spec, name, key.source(), node);
          !s.ok())
        return s;
    }
    return absl::OkStatus();
  }

  absl::Status readKey(const SectionSpec &section, const KeySpec &spec,
                       const std::string &name, const toml::source_region &at,
                       const toml::node &node) {
    const std::string full = path(section, name);
    const std::string flag =
        spec.flag ? std::string(spec.flag) : absl::StrCat("--", spec.key);
    switch (spec.kind) {
    case Kind::String:
      if (!node.is_string())
        return wrongType(at, full, "a string", node);
      add(section, at, full, flag, *scalarText(node), node);
      return absl::OkStatus();
    case Kind::Integer:
      if (!node.is_integer())
        return wrongType(at, full, "an integer", node);
      add(section, at, full, flag, *scalarText(node), node);
      return absl::OkStatus();
    case Kind::Number:
      if (!node.is_number())
        return wrongType(at, full, "a number", node);
      add(section, at, full, flag, *scalarText(node), node);
      return absl::OkStatus();
    case Kind::Switch:
      if (!node.is_boolean())
        return wrongType(at, full, "a boolean", node);
      if (node.as_boolean()->get())
        add(section, at, full, flag, std::nullopt, node);
      return absl::OkStatus();
    case Kind::Folder:
      if (node.is_string()) {
        add(section, at, full, flag, *scalarText(node), node);
        return absl::OkStatus();
      }
      if (!node.is_boolean())
        return wrongType(at, full, "a folder (a string) or a boolean", node);
      if (node.as_boolean()->get())
        add(section, at, full, flag, std::nullopt, node);
      return absl::OkStatus();
    case Kind::List: {
      if (node.is_string()) {
        add(section, at, full, flag, *scalarText(node), node, true);
        return absl::OkStatus();
      }
      const toml::array *array = node.as_array();
      if (!array)
        return wrongType(at, full, "a string or an array of strings", node);
      for (size_t i = 0; i < array->size(); ++i) {
        const toml::node &item = *array->get(i);
        const std::string itemKey = absl::StrCat(full, "[", i, "]");
        if (!item.is_string())
          return wrongType(item.source(), itemKey, "a string", item);
        add(section, item.source(), itemKey, flag, *scalarText(item), item,
            true);
      }
      return absl::OkStatus();
    }
    case Kind::NumberTable:
    case Kind::ValueTable: {
      const toml::table *table = node.as_table();
      if (!table)
        return wrongType(at, full, "a table", node);
      for (auto &&[key, value] : *table) {
        const std::string entry =
            absl::StrCat(full, ".", std::string(key.str()));
        std::optional<std::string> text;
        if (spec.kind == Kind::NumberTable) {
          if (!value.is_number())
            return wrongType(key.source(), entry, "a number", value);
          text = scalarText(value);
        } else if (const toml::array *array = value.as_array()) {
          std::vector<std::string> items;
          for (const toml::node &item : *array) {
            std::optional<std::string> t = scalarText(item);
            if (!t)
              return wrongType(item.source(), entry,
                               "an array of strings, numbers or booleans",
                               item);
            items.push_back(*t);
          }
          text = absl::StrJoin(items, ",");
        } else {
          text = scalarText(value);
          if (!text)
            return wrongType(key.source(), entry,
                             "a string, a number, a boolean or an array",
                             value);
        }
        add(section, key.source(), entry, flag,
            absl::StrCat(std::string(key.str()), "=", *text), value);
      }
      return absl::OkStatus();
    }
    case Kind::Scalar:
      break;
    }
    return absl::InternalError("unreachable config key kind");
  }

  const std::string &path_;
  Tool tool_;
  std::vector<Placed> args_;
};

} // namespace

absl::StatusOr<std::vector<ConfigArg>>
parseConfig(absl::string_view text, const std::string &path, Tool tool) {
  toml::parse_result parsed = toml::parse(
      std::string_view(text.data(), text.size()), std::string_view(path));
  if (!parsed) {
    const toml::parse_error &e = parsed.error();
    std::string description(e.description());
    // One line, whatever toml++ says.
    absl::StrReplaceAll({{"\n", " "}}, &description);
    return absl::InvalidArgumentError(
        absl::StrCat(path, ":", e.source().begin.line, ":",
                     e.source().begin.column, ": ", description));
  }
  Reader reader(path, tool);
  if (absl::Status s = reader.readTop(parsed.table()); !s.ok())
    return s;
  return reader.take();
}

absl::StatusOr<std::vector<ConfigArg>> readConfigFile(const std::string &path,
                                                      Tool tool) {
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot read config file ", path, ": it is a folder, expected a file"));
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return absl::NotFoundError(absl::StrCat("cannot read config file ", path,
                                            ": ", std::strerror(errno)));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad())
    return absl::DataLossError(absl::StrCat("cannot read config file ", path,
                                            ": ", std::strerror(errno)));
  return parseConfig(text.str(), path, tool);
}

std::vector<std::string> runKeys() {
  std::vector<std::string> keys;
  for (const KeySpec &k : findSection("run")->keys)
    keys.push_back(k.key);
  return keys;
}

} // namespace omni::config
