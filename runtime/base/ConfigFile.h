//===- ConfigFile.h - omni.toml, the config file of omnigen and omnirun -===//
//
// One TOML file (docs/config.md) holds what omnigen takes ([model],
// [decoder], [recipe], the top-level `mesh`) and what omnirun takes
// ([run]). readConfigFile() parses it (toml++), checks every section, key
// and value type of both tools' parts, and returns the part of one tool as
// the command-line arguments it stands for (`--steps=120`,
// `--opt=group_size=8`), in the file's order. Each tool parses them with
// its own flag parser before its command line, so a flag overrides the
// file (docs/config.md, "Flags and the file").
//
// Every error is one line that starts with FILE:LINE:COL (the key, or the
// parse error, toml++'s source region): a parse error, an unknown section
// or key (named), a value of the wrong type ("run.steps: expected an
// integer, found a string"). Names inside [recipe] and the overrides
// tables are the tool's to check (omnigen knows the recipe's options and
// the models' keys); ConfigArg::where lets it say where.
//
// Pure functions, no shared state: thread-safe. MLIR- and LLVM-free.
//
//===----------------------------------------------------------------------===//

#ifndef OMNI_RUNTIME_BASE_CONFIGFILE_H
#define OMNI_RUNTIME_BASE_CONFIGFILE_H

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include <optional>
#include <string>
#include <vector>

namespace omni::config {

/// The tool a config file is read for.
enum class Tool { Omnigen, Omnirun };

/// One command-line argument of the file.
struct ConfigArg {
  /// The key's path: "run.steps", "recipe.group_size",
  /// "model.overrides.depth", "run.reward[1]".
  std::string key;
  /// The flag, "--steps"; "--opt", "--set", ... for one entry of a table.
  std::string flag;
  /// Its value as the flag takes it ("120", "group_size=8"); none for a
  /// switch (`stats = true` is `--stats`).
  std::optional<std::string> value;
  /// The TOML type of the value: "an integer", "a number", "a boolean",
  /// "a string" (an array of integers is "an array").
  std::string type;
  /// "FILE:LINE:COL" of the key.
  std::string where;
  /// One item of a list flag (--reward, --init, --init-skip): a tool
  /// whose command line gives that flag drops the file's items.
  bool listItem = false;

  /// `--flag=value`, or `--flag` for a switch.
  std::string arg() const { return value ? flag + "=" + *value : flag; }
};

/// Parses `text` (the contents of `path`, which only names it in errors)
/// and returns the arguments of `tool`, in the file's order. The other
/// tool's sections are checked the same way and left out.
absl::StatusOr<std::vector<ConfigArg>>
parseConfig(absl::string_view text, const std::string &path, Tool tool);

/// Reads `path` and parses it (a file that cannot be read is one line
/// naming it and why).
absl::StatusOr<std::vector<ConfigArg>> readConfigFile(const std::string &path,
                                                      Tool tool);

/// The keys of [run] (omnirun's flags without `--`), for the test that
/// checks them against omnirun's flag table.
std::vector<std::string> runKeys();

} // namespace omni::config

#endif // OMNI_RUNTIME_BASE_CONFIGFILE_H
