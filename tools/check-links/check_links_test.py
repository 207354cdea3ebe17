#!/usr/bin/env python3
"""check_links_test.py - tests check-links.py on the fixtures in testdata/.

testdata/repo is a small repository: README.md and docs/ hold only good
links (the default paths), good.md every kind of link that must pass,
broken.md one link of each kind that must fail; testdata/outside.md exists
but lies outside the fixture repository. Run by ctest (check-links-selftest).
"""

import os
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "check-links.py")
FIXTURE = os.path.join(HERE, "testdata", "repo")


def run(*args):
    result = subprocess.run(
        [sys.executable, SCRIPT, "--root", FIXTURE, *args],
        capture_output=True, text=True)
    return result.returncode, result.stdout, result.stderr


class CheckLinksTest(unittest.TestCase):
    def test_default_paths_pass(self):
        code, out, err = run()
        self.assertEqual(err, "")
        self.assertEqual(code, 0)
        self.assertEqual(out, "check-links: 5 relative link(s) in 2 file(s) "
                              "resolve\n")

    def test_good_links_pass(self):
        code, out, err = run("good.md")
        self.assertEqual(err, "")
        self.assertEqual(code, 0)
        # Links in fences and code spans and links with a scheme do not count.
        self.assertEqual(out, "check-links: 10 relative link(s) in 1 file(s) "
                              "resolve\n")

    def test_every_broken_link_fails_on_its_own_line(self):
        code, out, err = run("broken.md")
        self.assertEqual(code, 1)
        self.assertEqual(out, "")
        self.assertEqual(err.splitlines(), [
            "broken.md:3: link 'docs/missing.md': no such file "
            "docs/missing.md",
            "broken.md:4: link '../outside.md': points outside the "
            "repository",
            "broken.md:5: link 'docs/guide.md#no-such-heading': docs/guide.md "
            "has no heading with anchor '#no-such-heading'",
            "broken.md:6: link '#nowhere': broken.md has no heading with "
            "anchor '#nowhere'",
            "broken.md:7: link '/etc/hostname': absolute path; links must be "
            "relative to the file",
            "broken.md:8: link 'images/missing.png': no such file "
            "images/missing.png",
            "broken.md:9: link '': empty link",
            "broken.md:11: link 'missing-reference.md': no such file "
            "missing-reference.md",
            "check-links: 8 broken link(s) in 1 file(s)",
        ])

    def test_outside_target_exists(self):
        # The outside check must not be a missing-file check in disguise.
        self.assertTrue(os.path.isfile(
            os.path.join(FIXTURE, "..", "outside.md")))

    def test_one_broken_file_fails_the_whole_run(self):
        code, _, err = run("good.md", "broken.md", "docs")
        self.assertEqual(code, 1)
        self.assertIn("check-links: 8 broken link(s) in 3 file(s)", err)

    def test_missing_path_is_a_usage_error(self):
        code, out, err = run("nothere.md")
        self.assertEqual(code, 2)
        self.assertEqual(out, "")
        self.assertEqual(len(err.splitlines()), 1)
        self.assertIn("no such file or folder 'nothere.md'", err)


if __name__ == "__main__":
    unittest.main()
