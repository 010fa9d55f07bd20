"""No leaks from Python: 10,000 runs, launches, replays and refused bindings each, with the
process's resident memory and Python's allocated blocks stable (after a warm-up, which lets the
allocators and the runtime's caches reach their size)."""

import gc
import sys
import time
import unittest

from helpers import COPY, MLP, FakeDLPack, backend_runtime, hirnode, mlp_inputs, np, rss_bytes

ROUNDS = 10000
# Resident memory moves with what malloc's arenas keep; on a loaded 2-core machine a few
# hundred KiB come and go. A leak of 400 bytes per call would add 4 MiB here.
RSS_SLACK = 3 << 20
BLOCKS_SLACK = 300  # Python objects: one leaked per call would add 10,000


class LeakTest(unittest.TestCase):
    def test_ten_thousand_calls(self):
        rt = backend_runtime(2)
        copy = hirnode.Program.parse(COPY, "c.hir")
        mlp = hirnode.Program.parse(MLP, "mlp.hir")
        x = [np.arange(64, dtype=np.float32) + r for r in range(2)]
        y = [np.zeros(64, np.float32) for _ in range(2)]
        b = {"X": x, "Y": y}
        dl = {"X": [FakeDLPack(a) for a in x], "Y": y}
        bad = {"X": [x[0], x[1].astype(np.float64)], "Y": y}
        mb, _ = mlp_inputs(2)
        graph = rt.capture(mlp, mb)

        def phase(n):
            for i in range(n):
                rt.run(copy, b)
                rt.launch(copy, dl if i % 4 == 0 else b)
                if i % 64 == 63:
                    rt.sync()
                graph.replay()
                try:
                    rt.launch(copy, bad)
                except hirnode.BindingError:
                    pass
                if i % 64 == 63:
                    rt.sync()
                if i % 500 == 0:
                    rt.alloc(i % 2, 4096).free()
            rt.sync()

        phase(1000)  # warm-up
        gc.collect()
        rss0, blocks0 = rss_bytes(), sys.getallocatedblocks()
        t0 = time.time()
        phase(ROUNDS)
        took = time.time() - t0
        gc.collect()
        rss1, blocks1 = rss_bytes(), sys.getallocatedblocks()
        np.testing.assert_array_equal(y[1], x[1])
        graph.destroy()
        rt.close()
        msg = "%d rounds of run, launch, replay and a refused launch in %.1f s: RSS %+d KiB, Python blocks %+d" % (
            ROUNDS, took, (rss1 - rss0) >> 10, blocks1 - blocks0)
        print("\n  " + msg, file=sys.stderr)
        self.assertLess(rss1 - rss0, RSS_SLACK, msg)
        self.assertLess(blocks1 - blocks0, BLOCKS_SLACK, msg)

    def test_runtimes_and_programs(self):
        """Runtimes, programs and graphs made and dropped: their handles go back."""
        def cycle():
            with backend_runtime(2) as rt:
                p = hirnode.Program.parse(MLP, "mlp.hir")
                b, _ = mlp_inputs(2)
                rt.run(p, b)
                rt.capture(p, b)
                rt.alloc(0, 1024)
                rt.stream_create(1)
                try:
                    hirnode.Program.parse("input X : f32[4] replicated\ncopy Y <- X\n", "bad.hir")
                except hirnode.VerifyError:
                    pass
        for _ in range(20):
            cycle()
        gc.collect()  # a program and the runtimes that ran it refer to each other: cycles
        rss0, blocks0 = rss_bytes(), sys.getallocatedblocks()
        for _ in range(200):
            cycle()
        gc.collect()
        rss1, blocks1 = rss_bytes(), sys.getallocatedblocks()
        msg = "200 runtimes: RSS %+d KiB, Python blocks %+d" % ((rss1 - rss0) >> 10, blocks1 - blocks0)
        print("\n  " + msg, file=sys.stderr)
        self.assertLess(rss1 - rss0, RSS_SLACK, msg)
        self.assertLess(blocks1 - blocks0, BLOCKS_SLACK, msg)


if __name__ == "__main__":
    unittest.main()
