#!/usr/bin/env python3
"""check-links.py - every relative Markdown link resolves inside the repository.

Checks the links of README.md and docs/**/*.md (or the files and folders
given): each relative link must name a file or folder that exists and lies
inside the repository root (no ../shared/..., no absolute paths), and a
`#anchor` must name a heading (or an explicit id/name anchor) of the target
Markdown file, with anchors computed the way GitHub renders them. Links with
a scheme (https:, mailto:, ...) are not followed. Links inside fenced code
blocks and `code spans` are not links and are skipped.

Each problem is one line, `<file>:<line>: link '<target>': <what is wrong>`,
on stderr; the exit status is 1 when there is any, 0 otherwise. Run by ctest
(test `check-links`); tools/check-links/check_links_test.py tests it on the
fixtures under tools/check-links/testdata.

Usage: check-links.py [--root DIR] [PATH...]
  --root DIR  the repository root (default: two folders above this script)
  PATH        Markdown files or folders to check, relative to the root or
              absolute (default: README.md docs)

Standard library only; no network.
"""

import argparse
import os
import re
import sys
import urllib.parse

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
ATX_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
SETEXT_UNDERLINE = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
# [text](dest) and ![alt](dest); dest may be <...> and may carry a "title".
INLINE_LINK = re.compile(r"!?\[((?:[^\[\]\\]|\\.|\[[^\[\]]*\])*)\]\(\s*(<[^>]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^)]*\)))?\s*\)")
REFERENCE_DEFINITION = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
HTML_ANCHOR = re.compile(r"<[a-zA-Z][^>]*\s(?:id|name)\s*=\s*[\"']([^\"']+)[\"']")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def strip_code_spans(line):
    """The line with `code spans` blanked (same length, so columns hold)."""
    return CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line)


def markdown_lines(text):
    """(line number, line) for each line outside fenced code blocks."""
    fence = None
    for number, line in enumerate(text.splitlines(), start=1):
        match = FENCE.match(line)
        if fence is None:
            if match:
                fence = match.group(1)
                continue
            yield number, line
        elif match and match.group(1)[0] == fence[0] and \
                len(match.group(1)) >= len(fence) and \
                line.strip() == match.group(1):
            fence = None


def github_slug(heading):
    """GitHub's anchor for a heading's text: inline markup rendered to text,
    lower case, punctuation other than '-' and '_' dropped, spaces to '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.replace("`", "").replace("*", "")
    text = text.strip().lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors_of(text):
    """Every anchor a Markdown document defines (headings, then id/name)."""
    anchors = set()
    counts = {}

    def add_heading(title):
        slug = github_slug(title)
        n = counts.get(slug, 0)
        counts[slug] = n + 1
        anchors.add(slug if n == 0 else f"{slug}-{n}")

    previous = None
    for _, line in markdown_lines(text):
        match = ATX_HEADING.match(line)
        if match:
            add_heading(match.group(2) or "")
            previous = None
            continue
        if previous is not None and previous.strip() and \
                SETEXT_UNDERLINE.match(line) and \
                not ATX_HEADING.match(previous) and \
                not previous.startswith((" " * 4, "\t")):
            add_heading(previous.strip())
            previous = None
            continue
        for match in HTML_ANCHOR.finditer(line):
            anchors.add(match.group(1))
        previous = line
    return anchors


def links_of(text):
    """(line number, destination) for each link of a Markdown document."""
    for number, line in markdown_lines(text):
        visible = strip_code_spans(line)
        match = REFERENCE_DEFINITION.match(visible)
        if match:
            yield number, match.group(1)
            continue
        for match in INLINE_LINK.finditer(visible):
            yield number, match.group(2)


class Checker:
    def __init__(self, root):
        self.root = os.path.realpath(root)
        self.anchor_cache = {}
        self.problems = []
        self.links = 0

    def display(self, path):
        return os.path.relpath(path, self.root)

    def anchors(self, path):
        if path not in self.anchor_cache:
            with open(path, encoding="utf-8") as f:
                self.anchor_cache[path] = anchors_of(f.read())
        return self.anchor_cache[path]

    def problem(self, source, number, target, what):
        self.problems.append(
            f"{self.display(source)}:{number}: link '{target}': {what}")

    def inside_root(self, path):
        return os.path.commonpath([self.root, path]) == self.root

    def check_link(self, source, number, raw):
        target = raw[1:-1] if raw.startswith("<") and raw.endswith(">") else raw
        if SCHEME.match(target):
            return  # https:, mailto:, ...: not a file of the repository
        self.links += 1
        if not target:
            self.problem(source, number, target, "empty link")
            return
        path_part, _, anchor = target.partition("#")
        path_part = urllib.parse.unquote(path_part.partition("?")[0])
        anchor = urllib.parse.unquote(anchor)
        if path_part.startswith("/"):
            self.problem(source, number, target,
                         "absolute path; links must be relative to the file")
            return
        if path_part:
            resolved = os.path.realpath(
                os.path.join(os.path.dirname(source), path_part))
            if not self.inside_root(resolved):
                self.problem(source, number, target,
                             "points outside the repository")
                return
            if not os.path.exists(resolved):
                self.problem(source, number, target,
                             f"no such file {self.display(resolved)}")
                return
        else:
            resolved = source
        if anchor and resolved.endswith(".md") and os.path.isfile(resolved):
            if anchor not in self.anchors(resolved):
                self.problem(source, number, target,
                             f"{self.display(resolved)} has no heading "
                             f"with anchor '#{anchor}'")

    def check_file(self, path):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for number, raw in links_of(text):
            self.check_link(path, number, raw)


def markdown_files(root, paths):
    files = []
    for given in paths:
        path = os.path.realpath(os.path.join(root, given))
        if os.path.isdir(path):
            for folder, subfolders, names in os.walk(path):
                subfolders.sort()
                files += [os.path.join(folder, n) for n in sorted(names)
                          if n.endswith(".md")]
        elif os.path.isfile(path):
            files.append(path)
        else:
            raise FileNotFoundError(f"check-links: no such file or folder "
                                    f"'{given}' under {root}")
    return files


def main(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    parser = argparse.ArgumentParser(
        description="Check that relative Markdown links resolve inside the "
                    "repository.")
    parser.add_argument("--root", default=os.path.join(here, "..", ".."),
                        help="the repository root")
    parser.add_argument("paths", nargs="*", default=["README.md", "docs"],
                        help="Markdown files or folders (default: README.md "
                             "docs)")
    args = parser.parse_args(argv)
    checker = Checker(args.root)
    try:
        files = markdown_files(checker.root, args.paths)
    except FileNotFoundError as e:
        print(e, file=sys.stderr)
        return 2
    for path in files:
        checker.check_file(path)
    for line in checker.problems:
        print(line, file=sys.stderr)
    if checker.problems:
        print(f"check-links: {len(checker.problems)} broken link(s) in "
              f"{len(files)} file(s)", file=sys.stderr)
        return 1
    print(f"check-links: {checker.links} relative link(s) in {len(files)} "
          f"file(s) resolve")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
