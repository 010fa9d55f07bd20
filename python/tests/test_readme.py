"""README's Python section as it is written there: its commands run from the repository's root
(python3 being the Python that runs this suite), and its example prints what its comment says."""

import os
import re
import subprocess
import sys
import tempfile
import unittest

from helpers import REPO


def block(marker):
    with open(os.path.join(REPO, "README.md")) as f:
        text = f.read()
    m = re.search(r"^<!-- %s -->\n```\w*\n(.*?)^```$" % re.escape(marker), text, re.M | re.S)
    if m is None:
        raise AssertionError("README.md has no block after <!-- %s -->" % marker)
    return m.group(1)


def environment(tmp):
    """python3 on PATH is this interpreter; no PYTHONPATH of ours."""
    os.symlink(sys.executable, os.path.join(tmp, "python3"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "HIRNODE_LIBRARY", "MAKEFLAGS",
                                                             "MAKELEVEL", "MFLAGS")}
    env["PATH"] = tmp + os.pathsep + env.get("PATH", "")
    env["HIRNODE_BACKEND"] = "host"
    return env


class ReadmeTest(unittest.TestCase):
    def test_commands(self):
        cmds = block("python commands")
        self.assertEqual(len([c for c in cmds.split("\n") if c.strip()]), 3, cmds)
        with tempfile.TemporaryDirectory() as tmp:
            out = subprocess.run(["bash", "-euo", "pipefail", "-c", cmds + "\npython3 -c 'import hirnode; "
                                  "print(hirnode.library_path)'\n"], cwd=REPO, env=environment(tmp),
                                 capture_output=True, text=True, timeout=600)
        self.assertEqual(out.returncode, 0, out.stdout[-3000:] + out.stderr[-3000:])
        self.assertIn("tp_mlp: ok", out.stdout)
        self.assertTrue(out.stdout.rstrip().endswith(os.path.join(REPO, "build", "python", "hirnode",
                                                                  "libhirnode.so")), out.stdout[-500:])

    def test_example(self):
        code = block("python example")
        want = re.search(r"print\(.*\)\s*# (.*)$", code, re.M).group(1)
        with tempfile.TemporaryDirectory() as tmp:
            env = environment(tmp)
            env["PYTHONPATH"] = os.path.join(REPO, "python")
            out = subprocess.run(["python3", "-c", code], env=env, capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(out.stdout.strip(), want)


if __name__ == "__main__":
    unittest.main()
