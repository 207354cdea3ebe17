#!/usr/bin/env bash
# check-format.sh - the C and C++ files omni owns are clang-format clean.
#
# Runs clang-format-22 with the repository's .clang-format over every file
# `git ls-files '*.cpp' '*.h' '*.c'` lists, minus generated and third-party
# files (EXCLUDES below), and fails with the list of files whose formatting
# differs. Reads the working tree (tracked files, as edited); changes nothing
# unless --fix is given, which formats those files in place.
#
# Usage: tools/format/check-format.sh [--fix]
#   CLANG_FORMAT=/path/to/clang-format-22 overrides the binary (it must be
#   version 22: other versions format differently).
# Exit status: 0 clean (or fixed), 1 files differ, 2 usage or tool error.
set -euo pipefail

# Generated and third-party files (git pathspecs, relative to the root).
EXCLUDES=(
  ':(exclude,glob)**/*_generated.h'
  ':(exclude,glob)**/generated/**'
  ':(exclude,glob)third_party/**'
  ':(exclude,glob)**/testdata/**'
)

fix=0
case "${1:-}" in
  "") ;;
  --fix) fix=1 ;;
  *) echo "check-format: unknown argument '$1' (usage: $0 [--fix])" >&2
     exit 2 ;;
esac

CLANG_FORMAT=${CLANG_FORMAT:-clang-format-22}
if ! command -v "$CLANG_FORMAT" >/dev/null 2>&1; then
  echo "check-format: $CLANG_FORMAT not found; install the Debian package" \
       "clang-format-22 (tools/setup/install-deps.sh)" >&2
  exit 2
fi
version=$("$CLANG_FORMAT" --version)
if ! [[ "$version" =~ version\ 22\. ]]; then
  echo "check-format: $CLANG_FORMAT is not clang-format 22 (found:" \
       "$version)" >&2
  exit 2
fi

root=$(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse --show-toplevel)
cd "$root"
if [ ! -f .clang-format ]; then
  echo "check-format: no .clang-format in $root" >&2
  exit 2
fi

files=()
while IFS= read -r -d '' f; do
  [ -f "$f" ] && files+=("$f") # skip files deleted in the working tree
done < <(git ls-files -z -- '*.cpp' '*.h' '*.c' "${EXCLUDES[@]}")
if [ ${#files[@]} -eq 0 ]; then
  echo "check-format: no files to check" >&2
  exit 2
fi

if [ $fix -eq 1 ]; then
  printf '%s\0' "${files[@]}" |
    xargs -0 -n 16 -P "$(nproc)" "$CLANG_FORMAT" --style=file -i
  echo "check-format: formatted ${#files[@]} files with $CLANG_FORMAT"
  exit 0
fi

# One clang-format per file, in parallel; each prints one short line (atomic
# on a pipe) when its file differs ("differ <file>") or clang-format fails
# on it ("error <file>").
check_one='
  out=$(mktemp)
  if ! "$0" --style=file "$1" >"$out" 2>/dev/null; then echo "error $1"
  elif ! cmp -s "$out" "$1"; then echo "differ $1"; fi
  rm -f "$out"'
results=$(printf '%s\0' "${files[@]}" |
  xargs -0 -n 1 -P "$(nproc)" bash -c "$check_one" "$CLANG_FORMAT" | sort)
errors=$(printf '%s\n' "$results" | sed -n 's/^error //p')
differ=$(printf '%s\n' "$results" | sed -n 's/^differ //p')

if [ -n "$errors" ]; then
  echo "check-format: $CLANG_FORMAT failed on:" >&2
  while IFS= read -r f; do
    echo "  $f: $("$CLANG_FORMAT" --style=file "$f" 2>&1 >/dev/null | head -1)" >&2
  done <<<"$errors"
  exit 2
fi
if [ -n "$differ" ]; then
  count=$(printf '%s\n' "$differ" | wc -l)
  echo "check-format: $count of ${#files[@]} files differ from" \
       "$CLANG_FORMAT's formatting (.clang-format):" >&2
  printf '%s\n' "$differ" | sed 's/^/  /' >&2
  echo "check-format: run tools/format/check-format.sh --fix to format them" >&2
  exit 1
fi
echo "check-format: ${#files[@]} files are formatted"
