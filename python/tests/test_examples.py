"""The Python examples and the launch benchmark on the CPU backend: tp_mlp.py's check passes in
each mode, eager and replayed (run in this process: one start of torch, not one per case);
tp_decode.py's across processes it starts as a launcher would; the benchmark runs as a person runs
it and prints its table."""

import contextlib
import importlib.util
import io
import os
import subprocess
import sys
import unittest

from helpers import REPO

EXAMPLE = os.path.join(REPO, "examples", "python", "tp_mlp.py")
BENCH = os.path.join(REPO, "python", "bench_launch.py")
DECODE = os.path.join(REPO, "examples", "python", "tp_decode.py")


def example(*argv):
    """tp_mlp.py's main() with these arguments: (exit code, stdout, stderr)."""
    spec = importlib.util.spec_from_file_location("tp_mlp", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out, err = io.StringIO(), io.StringIO()
    saved = sys.argv
    sys.argv = [EXAMPLE] + list(argv)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = mod.main()
            except SystemExit as e:
                rc = e.code if isinstance(e.code, int) else 1
                err.write(str(e.code))
    finally:
        sys.argv = saved
    return rc, out.getvalue(), err.getvalue()


def run(*argv):
    env = dict(os.environ, HIRNODE_BACKEND="host")
    env.pop("PYTHONPATH", None)  # the scripts find the package themselves
    return subprocess.run([sys.executable] + list(argv), capture_output=True, text=True, env=env, timeout=120)


class ExampleTest(unittest.TestCase):
    def test_tp_mlp(self):
        for args in (["--numpy"], ["--numpy", "--graph", "--ranks", "4"], ["--numpy", "--mode", "block"],
                     ["--numpy", "--mode", "block", "--graph", "--ranks", "1"]):
            with self.subTest(args=args):
                rc, out, err = example("--steps", "2", *args)
                self.assertEqual(rc, 0, out + err)
                self.assertEqual(out.count("): ok\n"), 2, out)
                self.assertTrue(out.endswith("tp_mlp: ok\n"), out)

    @unittest.skipIf(importlib.util.find_spec("torch") is None, "torch is not installed")
    def test_tp_mlp_torch(self):
        for args in (["--cpu", "--dtype", "bf16", "--graph"], ["--cpu", "--mode", "block", "--dtype", "bf16"]):
            with self.subTest(args=args):
                rc, out, err = example("--steps", "2", *args)
                self.assertEqual(rc, 0, out + err)
                self.assertIn(", torch, ", out)
                self.assertEqual(out.count("): ok\n"), 2, out)

    def test_tp_mlp_refuses(self):
        rc, out, err = example("--numpy", "--ranks", "3")
        self.assertNotEqual(rc, 0)
        self.assertIn("must divide by the ranks", err)

    def test_tp_decode_across_processes(self):
        """tp_decode.py starts its processes as torchrun would (RANK, WORLD_SIZE, LOCAL_RANK,
        MASTER_ADDR, MASTER_PORT); each joins hirnode's world from them and binds NumPy arrays as
        they are; every step is checked against the layers on one device."""
        for args in (["--nproc", "2"], ["--nproc", "3", "--graph", "--tokens", "2", "--hidden", "96", "--ffn", "384"]):
            with self.subTest(args=args):
                out = run(DECODE, "--numpy", "--layers", "3", "--steps", "2", *args)
                self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
                self.assertEqual(out.stdout.count("max rel err"), 2, out.stdout)
                self.assertIn("%s processes, rank 0 on the host backend" % args[1], out.stdout)
                self.assertTrue(out.stdout.endswith("tp_decode: ok\n"), out.stdout)
        # the peer copies reach a process's tensors only where it registered them, which the CPU
        # backend cannot; unregistered, the library names the tensor and the statement
        out = run(DECODE, "--numpy", "--layers", "1", "--steps", "1", "--via", "p2p")
        self.assertEqual(out.returncode, 2, out.stdout + out.stderr)
        # (collective: both processes name the first rank that could not, alike)
        self.assertEqual(out.stderr.count("hn_runtime_register: rank 0: the host backend cannot hand its memory to "
                                          "other processes"), 2, out.stderr)
        out = run(DECODE, "--numpy", "--layers", "1", "--steps", "1", "--via", "p2p", "--no-register")
        self.assertEqual(out.returncode, 2, out.stdout + out.stderr)
        self.assertIn("binding 'P' on rank 0: ", out.stderr)
        self.assertIn("at tp_decode.hir:7:1: `allreduce_rmsnorm Y, Rn <- P, R, G", out.stderr)

    def test_bench_launch(self):
        out = run(BENCH, "--backend", "host", "--rounds", "20", "--ranks", "2", "--tensors", "2", "--streams", "own")
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        lines = out.stdout.split("\n")
        self.assertTrue(any(line.startswith("launch ") for line in lines), out.stdout)
        self.assertTrue(any(line.startswith("replay ") for line in lines), out.stdout)


if __name__ == "__main__":
    unittest.main()
