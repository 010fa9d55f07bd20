"""Graphs from Python: capture, replay (bit for bit what launches compute), rebind, destroy, and
every way a graph stops being usable."""

import gc
import weakref
import os
import tempfile
import unittest

from helpers import COPY, MLP, backend_runtime, gathered, hirnode, mlp_inputs, np, rng


class GraphTest(unittest.TestCase):
    def setUp(self):
        self.rt = backend_runtime(2, host_delay_us=30)
        self.p = hirnode.Program.parse(MLP, "mlp.hir")

    def tearDown(self):
        self.rt.close()

    def test_replay_equals_launch_bit_for_bit(self):
        b, ref = mlp_inputs(2, 1)
        self.rt.launch(self.p, b)
        self.rt.sync()
        eager = [y.copy() for y in b["Y"]]
        for y in b["Y"]:
            y[...] = np.nan
        g = self.rt.capture(self.p, b)
        self.assertTrue(all(np.isnan(y).all() for y in b["Y"]))  # captured, not run
        g.replay()
        self.rt.sync()
        for r in range(2):
            np.testing.assert_array_equal(b["Y"][r], eager[r])
        # new contents in the same buffers between replays
        for seed in range(2, 6):
            nb, ref = mlp_inputs(2, seed)
            for k in ("X", "W1", "W2"):
                for r in range(2):
                    b[k][r][...] = nb[k][r]
            g.replay()
            g.replay()  # back to back
            self.rt.sync()
            np.testing.assert_allclose(gathered(b["Y"]), ref, rtol=1e-4, atol=1e-4)
        self.assertIs(g.program, self.p)
        self.assertIsNone(g.params)
        g.destroy()

    def test_replay_on_streams_and_params(self):
        p = hirnode.Program.parse(COPY, "c.hir")
        s = [self.rt.stream_create(r) for r in range(2)]
        x = [rng(r).random(32, dtype=np.float32) for r in range(2)]
        y = [np.full(32, np.nan, np.float32) for _ in range(2)]
        with self.rt.capture(p, {"X": x, "Y": y}, params={"N": 32}, streams=s) as g:
            self.assertEqual(g.params, {"N": 32})
            g.replay(s)
            g.replay([None, s[1]])
            self.rt.sync()
            for r in range(2):
                np.testing.assert_array_equal(x[r], y[r])
            with self.assertRaises(hirnode.InvalidArgumentError):
                g.replay(s[::-1])
        self.assertTrue(g.destroyed)

    def test_rebind(self):
        b, ref = mlp_inputs(2, 1)
        g = self.rt.capture(self.p, b)
        nb, nref = mlp_inputs(2, 7)
        g.rebind(nb)
        g.replay()
        self.rt.sync()
        np.testing.assert_allclose(gathered(nb["Y"]), nref, rtol=1e-4, atol=1e-4)
        self.assertTrue(all(np.isnan(y).all() for y in b["Y"]))  # the old outputs are not written
        bad, _ = mlp_inputs(2)
        bad["X"][0] = bad["X"][0][:4]
        with self.assertRaises(hirnode.BindingError) as cm:
            g.rebind(bad)
        self.assertIn("binding 'X' on rank 0", str(cm.exception))
        g.replay()  # still bound to nb
        self.rt.sync()
        g.destroy()

    def test_rebind_in_place(self):
        # the first rebind captures again and learns; later ones move the pointers in place
        p = hirnode.Program.parse("param N = 64\ninput X : f32[N] replicated\noutput Y : f32[2 * N] replicated\n"
                                  "allgather Y <- X via p2p\n", "ag.hir")
        sets = []
        for s in range(3):
            xs = [rng(40 + 2 * s + r).standard_normal(64).astype(np.float32) for r in range(2)]
            b = {"X": [self.rt.alloc(r, dtype="f32", shape=(64,)) for r in range(2)],
                 "Y": [self.rt.alloc(r, dtype="f32", shape=(128,)) for r in range(2)]}
            for r in range(2):
                self.rt.upload(b["X"][r], xs[r])
            sets.append((b, np.concatenate(xs)))
        g = self.rt.capture(p, sets[0][0])
        self.assertFalse(g.in_place)
        for k, s in enumerate((1, 2, 0, 1)):
            b, want = sets[s]
            for r in range(2):
                self.rt.upload(b["Y"][r], np.full(128, np.nan, np.float32))
            g.rebind(b)
            self.assertEqual(g.in_place, k > 0)
            g.replay()
            self.rt.sync()
            for r in range(2):
                np.testing.assert_array_equal(self.rt.download(b["Y"][r]), want)
        g.destroy()

    def test_graph_keeps_its_tensors_alive(self):
        def capture():
            b, _ = mlp_inputs(2, 3)
            return self.rt.capture(self.p, b), b["Y"][0].__array_interface__["data"][0]
        g, y0 = capture()
        gc.collect()
        junk = [np.full((8, 8), 7.0, np.float32) for _ in range(100)]  # would reuse freed memory
        g.replay()
        self.rt.sync()
        kept_y = g._kept[0]["Y"]
        self.assertEqual(kept_y[0].__array_interface__["data"][0], y0)
        self.assertFalse(np.isnan(gathered(kept_y)).any())
        del junk
        g.destroy()
        self.assertIsNone(g._kept[0])

    def test_destroyed_graph(self):
        b, _ = mlp_inputs(2)
        g = self.rt.capture(self.p, b)
        g.destroy()
        g.destroy()
        self.assertTrue(g.destroyed)
        for call in (g.replay, lambda: g.rebind(b)):
            with self.assertRaises(hirnode.ClosedError) as cm:
                call()
            self.assertIn("the graph was destroyed", str(cm.exception))

    def test_closed_program_or_runtime(self):
        b, _ = mlp_inputs(2)
        p = hirnode.Program.parse(MLP, "mlp2.hir")
        g = self.rt.capture(p, b)
        p.close()
        with self.assertRaises(hirnode.ClosedError) as cm:
            g.replay()
        self.assertIn("mlp2.hir was closed", str(cm.exception))
        g.destroy()
        g2 = self.rt.capture(self.p, b)
        self.rt.close()
        with self.assertRaises(hirnode.ClosedError) as cm:
            g2.replay()
        self.assertIn("runtime is closed", str(cm.exception))
        g2.destroy()

    def test_forget_makes_it_unusable(self):
        b, _ = mlp_inputs(2)
        g = self.rt.capture(self.p, b)
        self.rt.forget(self.p)
        with self.assertRaises(hirnode.InvalidArgumentError) as cm:
            g.replay()
        self.assertIn("the graph cannot be replayed", str(cm.exception))
        with self.assertRaises(hirnode.InvalidArgumentError):
            g.rebind(b)
        g.destroy()
        g = self.rt.capture(self.p, b)  # capture again
        g.replay()
        self.rt.sync()
        g.destroy()

    def test_what_cannot_be_captured(self):
        p = hirnode.Program.parse(COPY + "host_sync\n", "sync.hir")
        x = [np.zeros(64, np.float32)] * 2
        y = [np.zeros(64, np.float32) for _ in range(2)]
        with self.assertRaises(hirnode.UnsupportedError) as cm:
            self.rt.capture(p, {"X": x, "Y": y})
        self.assertIn("host_sync", str(cm.exception))
        with tempfile.TemporaryDirectory() as d:
            self.rt.trace_start(os.path.join(d, "t.json"))
            with self.assertRaises(hirnode.UnsupportedError) as cm:
                self.rt.capture(self.p, mlp_inputs(2)[0])
            self.assertIn("while tracing", str(cm.exception))
            self.rt.trace_stop()

    def test_collected_graph_keeps_its_tensors_until_given_back(self):
        b, _ = mlp_inputs(2)
        y = weakref.ref(b["Y"][0])
        g = self.rt.capture(self.p, b)
        g.replay()  # may still run when g is collected
        del g, b, _
        gc.collect()
        self.assertIsNotNone(y())  # held by the queued graph
        self.rt.sync()  # the graph destroyed (after its replays), then its tensors let go
        gc.collect()
        self.assertIsNone(y())

    def test_collected_graphs_are_given_back(self):
        b, _ = mlp_inputs(2)
        for _ in range(20):
            self.rt.capture(self.p, b)  # dropped at once
        gc.collect()
        self.assertTrue(self.rt._s.pending)
        self.rt.sync()
        self.assertFalse(self.rt._s.pending)


if __name__ == "__main__":
    unittest.main()
