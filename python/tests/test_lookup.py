"""Where the package finds libhirnode.so, in order: $HIRNODE_LIBRARY, next to the package, the
repository's build/, the system's; and what it says when there is none. Each case in a fresh
interpreter, on copies of the package in a temporary folder."""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from helpers import REPO, hirnode

PROBE = "import hirnode, hirnode._lib as l; print(hirnode.library_path); print(l.found_through); print(hirnode.__version__)"


def probe(pythonpath, **env):
    e = {k: v for k, v in os.environ.items() if k not in ("HIRNODE_LIBRARY", "PYTHONPATH", "LD_LIBRARY_PATH")}
    e.update(env)
    e["PYTHONPATH"] = pythonpath
    return subprocess.run([sys.executable, "-c", PROBE], env=e, capture_output=True, text=True,
                          cwd=tempfile.gettempdir())


class LookupTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.lib = hirnode.library_path
        self.bare = os.path.join(self.tmp, "bare")  # the package alone, in no repository
        shutil.copytree(os.path.join(REPO, "python", "hirnode"), os.path.join(self.bare, "hirnode"),
                        ignore=shutil.ignore_patterns("__pycache__", "*.so"))

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def found(self, out, path, through):
        self.assertEqual(out.returncode, 0, out.stderr)
        lines = out.stdout.split("\n")
        self.assertEqual(lines[0], path)
        self.assertEqual(lines[1], through)
        self.assertEqual(lines[2], hirnode.__version__)

    def test_repository_build(self):
        self.found(probe(os.path.join(REPO, "python")), os.path.join(REPO, "build", "libhirnode.so"),
                   "the repository's build/")

    def test_next_to_the_package_first(self):
        shutil.copy(self.lib, os.path.join(self.bare, "hirnode", "libhirnode.so"))
        self.found(probe(self.bare), os.path.join(self.bare, "hirnode", "libhirnode.so"), "next to the package")

    def test_environment_first(self):
        other = os.path.join(self.tmp, "elsewhere.so")
        shutil.copy(self.lib, other)
        shutil.copy(self.lib, os.path.join(self.bare, "hirnode", "libhirnode.so"))
        self.found(probe(self.bare, HIRNODE_LIBRARY=other), other, "HIRNODE_LIBRARY")
        out = probe(self.bare, HIRNODE_LIBRARY=os.path.join(self.tmp, "missing.so"))
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("ImportError: hirnode: cannot load %s (found through HIRNODE_LIBRARY)" %
                      os.path.join(self.tmp, "missing.so"), out.stderr)

    def test_system(self):
        libdir = os.path.join(self.tmp, "lib")
        os.mkdir(libdir)
        shutil.copy(self.lib, os.path.join(libdir, "libhirnode.so.0.2"))  # as make install lays it out
        os.symlink("libhirnode.so.0.2", os.path.join(libdir, "libhirnode.so"))
        out = probe(self.bare, LD_LIBRARY_PATH=libdir)  # ctypes.util.find_library reads it through ld
        if "libhirnode.so" not in out.stdout and "not found" in out.stderr:
            self.skipTest("ctypes.util.find_library does not search LD_LIBRARY_PATH here (no ld?)")
        self.found(out, out.stdout.split("\n")[0], "the system's")
        self.assertTrue(out.stdout.startswith("libhirnode.so"))

    def test_none(self):
        out = probe(self.bare, LD_LIBRARY_PATH=self.tmp)
        if out.returncode == 0:
            self.assertIn("the system's", out.stdout)  # an installed copy (make install) is found
            return
        self.assertIn("libhirnode.so not found: set HIRNODE_LIBRARY", out.stderr)
        self.assertIn("make python", out.stderr)

    def test_make_python_layout(self):
        built = os.path.join(REPO, "build", "python")
        if not os.path.isdir(os.path.join(built, "hirnode")):
            self.skipTest("make python has not run")
        self.found(probe(built), os.path.join(built, "hirnode", "libhirnode.so"), "next to the package")


if __name__ == "__main__":
    unittest.main()
