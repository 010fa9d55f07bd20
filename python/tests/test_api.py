"""Every call of the Python API on the host backend: programs, runtimes, runs, launches, memory,
streams, tracing, and what each says when it fails."""

import json
import os
import re
import tempfile
import unittest

from helpers import COPY, MLP, REPO, backend_runtime, gathered, hirnode, mlp_inputs, np, rng


class ProgramTest(unittest.TestCase):
    def test_version_is_the_library_and_the_header(self):
        with open(os.path.join(REPO, "include", "hirnode", "hirnode.h")) as f:
            header = ".".join(re.findall(r"#define HN_VERSION_(?:MAJOR|MINOR|PATCH) (\d+)", f.read()))
        self.assertEqual(hirnode.__version__, hirnode._lib.hn_version().decode())
        self.assertEqual(hirnode.__version__, header)
        self.assertTrue(os.path.isfile(hirnode.library_path))

    def test_parse_print_round_trip(self):
        p = hirnode.Program.parse(MLP, "mlp.hir")
        self.assertEqual(p.filename, "mlp.hir")
        text = p.text
        self.assertIn("reduce_scatter Y <- P", text)
        self.assertEqual(hirnode.Program.parse(text, "again.hir").text, text)
        self.assertEqual(str(p), text)
        self.assertIn("mlp.hir", repr(p))
        p.close()

    def test_parse_error_names_file_line_col(self):
        with self.assertRaises(hirnode.ParseError) as cm:
            hirnode.Program.parse("param N = 4\ninput X : f32[N] replicated\ncopy X <- \n", "bad.hir")
        self.assertRegex(str(cm.exception), r"^bad\.hir:3:\d+: error: ")
        self.assertEqual(cm.exception.status, -3)
        self.assertEqual(cm.exception.status_string, hirnode._lib.status_string(-3))

    def test_verify_error_names_file_line_col(self):
        with self.assertRaises(hirnode.VerifyError) as cm:
            hirnode.Program.parse("input X : f32[4] replicated\n\n  copy Y <- X\n", "v.hir")
        self.assertRegex(str(cm.exception), r"^v\.hir:3:\d+: error: .*'Y'")
        self.assertIsInstance(cm.exception, hirnode.Error)

    def test_parse_bytes_and_garbage(self):
        p = hirnode.Program.parse(COPY.encode(), "b.hir")
        self.assertEqual(p.io()[0].name, "X")
        with self.assertRaises(hirnode.ParseError):
            hirnode.Program.parse(b"\x00\xff\xfe{{{", "junk.hir")

    def test_load(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "copy.hir")
            with open(path, "w") as f:
                f.write(COPY)
            p = hirnode.Program.load(path)
            self.assertEqual(p.filename, path)
            self.assertEqual([io.name for io in p.io()], ["X", "Y"])
            with self.assertRaises(hirnode.FileError) as cm:
                hirnode.Program.load(os.path.join(d, "missing.hir"))
            self.assertIn("missing.hir", str(cm.exception))
            self.assertIsInstance(cm.exception, OSError)
            with self.assertRaises(hirnode.FileError):
                hirnode.Program.load(d)  # a directory
            bad = os.path.join(d, "bad.hir")
            with open(bad, "w") as f:
                f.write("input X : f32[4] replicated\nfoo X\n")
            with self.assertRaises(hirnode.ParseError) as cm:
                hirnode.Program.load(bad)
            self.assertTrue(str(cm.exception).startswith(bad + ":2:"))

    def test_load_example(self):
        p = hirnode.Program.load(os.path.join(REPO, "examples", "tp_mlp.hir"))
        names = [io.name for io in p.io(world=4, params={"M": 128})]
        self.assertEqual(names, ["X", "W1", "b1", "W2", "b2", "Y"])

    def test_io(self):
        p = hirnode.Program.parse(MLP, "mlp.hir")
        io = p.io(world=4, nstreams=2, params={"M": 32}, rank=3)
        self.assertEqual([i.name for i in io], ["X", "W1", "W2", "Y"])
        x, w1, w2, y = io
        self.assertEqual((x.is_output, x.dtype, x.shape, x.nbytes, x.shard_axis), (False, "f32", (8, 8), 256, 0))
        self.assertEqual((w2.shape, w2.shard_axis), ((8, 4), 1))
        self.assertTrue(y.is_output)
        self.assertEqual(p.io(world=1)[0].shape, (16, 8))
        self.assertEqual(p.io(2, params={"M": np.int64(64)})[0].shape, (32, 8))

    def test_io_errors(self):
        p = hirnode.Program.parse(MLP, "mlp.hir")
        with self.assertRaises(hirnode.InvalidArgumentError) as cm:
            p.io(world=0)
        self.assertIn("mlp.hir: error:", str(cm.exception))
        with self.assertRaises(hirnode.InvalidArgumentError):
            p.io(world=2, rank=2)
        with self.assertRaises(hirnode.InvalidArgumentError):
            p.io(world=2, nstreams=17)
        with self.assertRaises(hirnode.InvalidArgumentError) as cm:
            p.io(params={"Q": 1})
        self.assertIn("Q", str(cm.exception))
        with self.assertRaises(hirnode.InvalidArgumentError):
            p.io(params={"M": 1.5})
        with self.assertRaises(hirnode.InvalidArgumentError):
            p.io(params={"M": True})
        with self.assertRaises(hirnode.InvalidArgumentError):
            p.io(params={"M": 2 ** 64})
        with self.assertRaises(hirnode.InvalidArgumentError):
            p.io(params=[("M", 4)])
        with self.assertRaises(hirnode.VerifyError):
            p.io(params={"M": -4})  # a negative dimension does not evaluate

    def test_closed_program(self):
        p = hirnode.Program.parse(COPY, "c.hir")
        with p:
            pass
        self.assertTrue(p.closed)
        p.close()  # idempotent
        for call in (lambda: p.text, lambda: p.io()):
            with self.assertRaises(hirnode.ClosedError):
                call()
        with backend_runtime(1) as rt:
            with self.assertRaises(hirnode.ClosedError):
                rt.run(p, {"X": np.zeros(64, np.float32), "Y": np.zeros(64, np.float32)})
            with self.assertRaises(hirnode.ClosedError):
                rt.launch(p, {"X": np.zeros(64, np.float32), "Y": np.zeros(64, np.float32)})

    def test_close_after_runs_forgets_it_in_the_runtime(self):
        with backend_runtime(2) as rt:
            p = hirnode.Program.parse(COPY, "c.hir")
            x = [rng(r).random(64, dtype=np.float32) for r in range(2)]
            y = [np.zeros(64, np.float32) for _ in range(2)]
            rt.run(p, {"X": x, "Y": y})
            self.assertTrue(any(k[0] is p for k in rt._s.configs))
            p.close()
            self.assertFalse(any(k[0] is p for k in rt._s.configs))
            q = hirnode.Program.parse(COPY, "c2.hir")
            rt.run(q, {"X": x, "Y": y})
            np.testing.assert_array_equal(y[1], x[1])


class RuntimeTest(unittest.TestCase):
    def test_create_and_describe(self):
        with hirnode.Runtime(ranks=3, backend="host") as rt:
            self.assertEqual(rt.size, 3)
            self.assertEqual(rt.backend, "host")
            self.assertEqual(rt.device_type, "cpu")
            self.assertEqual(rt.devices, [0, 1, 2])
            self.assertEqual(rt.device(2), 2)
            self.assertEqual(rt.error, "")
            self.assertIn("3 ranks on host", repr(rt))
            self.assertGreaterEqual(rt.nstreams, 1)
        self.assertTrue(rt.closed)
        self.assertIn("closed", repr(rt))

    def test_device_mapping(self):
        with hirnode.Runtime(devices=[1, 1, 0], backend="host", nstreams=2, timeout=5, seed=3,
                             host_delay_us=0, graphs=False) as rt:
            self.assertEqual(rt.size, 3)
            self.assertEqual(rt.devices, [1, 1, 0])
            self.assertEqual(rt.device(1), 1)
            self.assertEqual(rt.nstreams, 2)
            b, ref = mlp_inputs(3, M=24, F=24)
            p = hirnode.Program.parse(MLP, "mlp.hir")
            rt.run(p, b, params={"M": 24, "F": 24})
            np.testing.assert_allclose(gathered(b["Y"]), ref, rtol=1e-4, atol=1e-4)

    def test_create_errors(self):
        with self.assertRaises(hirnode.InvalidArgumentError) as cm:
            hirnode.Runtime(ranks=2, backend="nonesuch")
        self.assertIn("nonesuch", str(cm.exception))
        with self.assertRaises(hirnode.InvalidArgumentError) as cm:
            hirnode.Runtime(ranks=0, backend="host")
        self.assertIn("rank count 0", str(cm.exception))
        with self.assertRaises(hirnode.InvalidArgumentError) as cm:
            hirnode.Runtime(devices=[0, -1], backend="host")
        self.assertIn("rank 1: device ordinal -1", str(cm.exception))
        with self.assertRaises(hirnode.InvalidArgumentError):
            hirnode.Runtime(ranks=3, devices=[0, 1], backend="host")
        with self.assertRaises(hirnode.InvalidArgumentError):
            hirnode.Runtime(ranks=1, backend="host", nstreams=0)
        with self.assertRaises(TypeError):
            hirnode.Runtime(devices=["a"], backend="host")

    def test_run_mlp_against_numpy(self):
        p = hirnode.Program.parse(MLP, "mlp.hir")
        for world in (1, 2, 4):
            with self.subTest(world=world), backend_runtime(world, host_delay_us=20) as rt:
                for seed in range(3):
                    b, ref = mlp_inputs(world, seed)
                    rt.run(p, b)
                    np.testing.assert_allclose(gathered(b["Y"]), ref, rtol=1e-4, atol=1e-4)

    def test_one_rank_takes_a_tensor_alone(self):
        p = hirnode.Program.parse(COPY, "c.hir")
        with backend_runtime(1) as rt:
            x = rng(1).random(64, dtype=np.float32)
            y = np.full(64, np.nan, np.float32)
            rt.run(p, {"X": x, "Y": y})
            np.testing.assert_array_equal(x, y)
            y2 = np.full(64, np.nan, np.float32)
            rt.run(p, {"X": (x,), "Y": [y2]})
            np.testing.assert_array_equal(x, y2)

    def test_params(self):
        p = hirnode.Program.parse(COPY, "c.hir")
        with backend_runtime(2) as rt:
            for n in (64, 8, 100):
                x = [rng(n + r).random(n, dtype=np.float32) for r in range(2)]
                y = [np.full(n, np.nan, np.float32) for _ in range(2)]
                rt.run(p, {"X": x, "Y": y}, params={"N": n})
                for r in range(2):
                    np.testing.assert_array_equal(x[r], y[r])
            with self.assertRaises(hirnode.BindingError):  # the default N is 64
                rt.run(p, {"X": x, "Y": y}, params={})
            with self.assertRaises(hirnode.InvalidArgumentError) as cm:
                rt.run(p, {"X": x, "Y": y}, params={"Nope": 3})
            self.assertIn("Nope", str(cm.exception))

    def test_launch_sync_query(self):
        p = hirnode.Program.parse(MLP, "mlp.hir")
        with backend_runtime(2, host_delay_us=200) as rt:
            steps = [mlp_inputs(2, seed) for seed in range(5)]
            for b, _ in steps:
                rt.launch(p, b)
            done = rt.query()
            self.assertIn(done, (True, False))
            rt.sync()
            self.assertTrue(rt.query())
            for b, ref in steps:
                np.testing.assert_allclose(gathered(b["Y"]), ref, rtol=1e-4, atol=1e-4)
            rt.sync()  # nothing in flight

    def test_launch_on_streams(self):
        p = hirnode.Program.parse(MLP, "mlp.hir")
        with backend_runtime(2, host_delay_us=50) as rt:
            s = [rt.stream_create(r) for r in range(2)]
            t = [rt.stream_create(r) for r in range(2)]
            self.assertIn("rank 1", repr(s[1]))
            self.assertEqual(s[0].cuda_stream, s[0].handle)
            steps = [mlp_inputs(2, seed) for seed in range(6)]
            for i, (b, _) in enumerate(steps):
                rt.launch(p, b, streams=s if i % 2 else [x.handle for x in t])
            rt.sync()
            for b, ref in steps:
                np.testing.assert_allclose(gathered(b["Y"]), ref, rtol=1e-4, atol=1e-4)
            b, _ = mlp_inputs(2)
            with self.assertRaises(hirnode.InvalidArgumentError) as cm:
                rt.launch(p, b, streams=[s[1], s[0]])  # ranks swapped
            self.assertIn("streams[0]", str(cm.exception))
            with self.assertRaises(hirnode.InvalidArgumentError) as cm:
                rt.launch(p, b, streams=[12345, None])  # a handle the host backend did not make
            self.assertIn("stream_create", str(cm.exception))
            with self.assertRaises(hirnode.InvalidArgumentError):
                rt.launch(p, b, streams=[s[0]])
            with self.assertRaises(hirnode.InvalidArgumentError):
                rt.launch(p, b, streams=["s"] * 2)
            with self.assertRaises(hirnode.InvalidArgumentError):
                rt.launch(p, b, streams=s[0])  # two ranks need a list

            class TorchLike:
                cuda_stream = 0
            with self.assertRaises(hirnode.InvalidArgumentError) as cm:
                rt.launch(p, b, streams=[TorchLike(), TorchLike()])
            self.assertIn("CUDA stream", str(cm.exception))
            s[0].destroy()
            s[0].destroy()
            with self.assertRaises(hirnode.InvalidArgumentError):
                rt.launch(p, b, streams=s)
            rt.stream_destroy(s[1])
            rt.launch(p, b, streams=[None, t[1]])
            rt.sync()
            with backend_runtime(2) as other:
                with self.assertRaises(hirnode.InvalidArgumentError):
                    other.launch(p, b, streams=t)
            self.assertIsNone(hirnode.current_streams(rt))

    def test_run_failure_carries_rank_and_line(self):
        # the first failure names the rank and the instruction's line: a recv whose partner
        # never sends is refused by the dry run, so a failure at run time comes from a deadline
        prog = hirnode.Program.parse("param N = 4\ninput X : f32[N] replicated\noutput Y : f32[N] replicated\n"
                                     "if rank == 0 {\n  recv Y from 1\n}\n", "hang.hir")
        with backend_runtime(2, timeout=1) as rt:
            x = [np.zeros(4, np.float32)] * 2
            y = [np.zeros(4, np.float32) for _ in range(2)]
            with self.assertRaises(hirnode.VerifyError) as cm:
                rt.run(prog, {"X": x, "Y": y})
            self.assertRegex(str(cm.exception), r"hang\.hir:5:\d+: error: ")
            self.assertIn("hang.hir:5:", rt.error)
            rt.run(hirnode.Program.parse(COPY, "c.hir"), {"X": [np.zeros(64, np.float32)] * 2,
                                                          "Y": [np.zeros(64, np.float32) for _ in range(2)]})
            self.assertEqual(rt.error, "")

    def test_failures_name_rank_and_line(self):
        """Injected faults (HIRNODE_FAULT, read when a runtime is made): a failure while running
        comes back as the library says it, from run, or from the sync after a launch."""
        p = hirnode.Program.parse(COPY, "c.hir")
        b = {"X": [np.zeros(64, np.float32)] * 2, "Y": [np.zeros(64, np.float32) for _ in range(2)]}
        for kind in ("issue", "async"):
            os.environ["HIRNODE_FAULT"] = "1:4:" + kind
            try:
                rt = backend_runtime(2)
            finally:
                del os.environ["HIRNODE_FAULT"]
            with rt:
                with self.subTest(kind=kind), self.assertRaises(hirnode.DeviceError) as cm:
                    rt.run(p, b)
                self.assertRegex(str(cm.exception), r"^c\.hir:4:1: error: rank 1: copy Y <- X: ")
                self.assertEqual(str(cm.exception), rt.error)
                with self.assertRaises(hirnode.DeviceError):
                    rt.launch(p, b)
                    rt.sync()
                with self.assertRaises(hirnode.UnsupportedError) as cm:
                    rt.capture(p, b)
                self.assertIn("injected faults", str(cm.exception))

    def test_closed_runtime(self):
        p = hirnode.Program.parse(COPY, "c.hir")
        rt = backend_runtime(2)
        buf = rt.alloc(0, 64)
        s = rt.stream_create(1)
        b = {"X": [np.zeros(64, np.float32)] * 2, "Y": [np.zeros(64, np.float32) for _ in range(2)]}
        g = rt.capture(p, b)
        rt.close()
        rt.close()
        calls = [lambda: rt.size, lambda: rt.backend, lambda: rt.device_type, lambda: rt.devices,
                 lambda: rt.device(0), lambda: rt.error, lambda: rt.run(p, b), lambda: rt.launch(p, b), rt.sync, rt.query, lambda: rt.forget(p),
                 lambda: rt.capture(p, b), lambda: rt.alloc(0, 8), lambda: rt.upload(buf, np.zeros(2)),
                 lambda: rt.download(buf), lambda: rt.mem_info(0), lambda: rt.stream_create(0),
                 lambda: rt.trace_start("/dev/null"), rt.trace_stop, lambda: rt.io(p), g.replay,
                 lambda: g.rebind(b)]
        for i, call in enumerate(calls):
            with self.subTest(call=i), self.assertRaises(hirnode.ClosedError) as cm:
                call()
            self.assertIn("closed", str(cm.exception))
        # what the runtime owned went with it: giving it back again does nothing
        self.assertTrue(g.destroyed)
        g.destroy()
        buf.free()
        s.destroy()
        self.assertIsNone(buf.ptr)

    def test_forget(self):
        p = hirnode.Program.parse(MLP, "mlp.hir")
        with backend_runtime(2) as rt:
            b, ref = mlp_inputs(2)
            rt.run(p, b)
            rt.forget(p)
            self.assertFalse(rt._s.configs)
            b, ref = mlp_inputs(2, 9)
            rt.run(p, b)
            np.testing.assert_allclose(gathered(b["Y"]), ref, rtol=1e-4, atol=1e-4)

    def test_trace(self):
        p = hirnode.Program.parse(MLP, "mlp.hir")
        with tempfile.TemporaryDirectory() as d, backend_runtime(2) as rt:
            path = os.path.join(d, "t.json")
            rt.trace_start(path)
            with self.assertRaises(hirnode.InvalidArgumentError):
                rt.trace_start(path)  # one at a time
            b, ref = mlp_inputs(2)
            rt.run(p, b)
            rt.launch(p, b)
            rt.sync()
            rt.trace_stop()
            with open(path) as f:
                trace = json.load(f)
            events = trace["traceEvents"] if isinstance(trace, dict) else trace
            self.assertTrue(any("reduce_scatter" in json.dumps(e) for e in events))
            with self.assertRaises(hirnode.InvalidArgumentError):
                rt.trace_stop()
            with self.assertRaises(hirnode.FileError):
                rt.trace_start(os.path.join(d, "no", "such", "dir.json"))

    def test_memory(self):
        with backend_runtime(2) as rt:
            free_b, total_b = rt.mem_info(1)
            self.assertGreater(total_b, 0)
            self.assertLessEqual(free_b, total_b)
            x = rng(5).standard_normal((3, 5)).astype(np.float32)
            buf = rt.alloc(1, x.nbytes)
            self.assertEqual((buf.rank, buf.nbytes, buf.dtype), (1, 60, None))
            rt.upload(buf, x)
            raw = rt.download(buf)
            self.assertEqual(raw.dtype, np.uint8)
            np.testing.assert_array_equal(raw.view(np.float32).reshape(3, 5), x)
            out = np.zeros((3, 5), np.float32)
            self.assertIs(rt.download(buf, out), out)
            np.testing.assert_array_equal(out, x)
            typed = rt.alloc(0, dtype="i64", shape=(4,))
            self.assertEqual(typed.nbytes, 32)
            rt.upload(typed, np.arange(4, dtype=np.int64) * 7)
            got = rt.download(typed)
            self.assertEqual(got.dtype, np.int64)
            np.testing.assert_array_equal(got, np.arange(4) * 7)
            rt.upload(typed, np.arange(8, dtype=np.int64)[::2])  # made contiguous on the host
            np.testing.assert_array_equal(rt.download(typed), np.arange(0, 8, 2))
            self.assertIn("i64[4]", repr(typed))
            with self.assertRaises(hirnode.InvalidArgumentError):
                rt.upload(buf, np.zeros(100, np.float32))  # too big
            with self.assertRaises(hirnode.InvalidArgumentError):
                rt.download(buf, np.zeros((5, 3), np.float32).T)  # not contiguous
            ro = np.zeros(15, np.float32)
            ro.flags.writeable = False
            with self.assertRaises(hirnode.InvalidArgumentError):
                rt.download(buf, ro)
            # in one process registering only checks (every rank's memory is reached as it is)
            rt.register(buf, rank=1)
            rt.register(x)  # host memory, as the host backend's devices are
            rt.register((x.__array_interface__["data"][0], x.nbytes), rank=1)
            with self.assertRaises(hirnode.InvalidArgumentError):
                rt.register(buf, rank=2)  # no rank 2
            with self.assertRaisesRegex(hirnode.InvalidArgumentError, "a NULL pointer or no bytes"):
                rt.register((0, 8))
            with self.assertRaisesRegex(hirnode.InvalidArgumentError, "register: a torch tensor"):
                rt.register("x")
            with self.assertRaises(hirnode.InvalidArgumentError):
                rt.alloc(2, 8)  # no rank 2
            with self.assertRaises(hirnode.InvalidArgumentError):
                rt.alloc(0, -1)
            with self.assertRaises(hirnode.InvalidArgumentError):
                rt.alloc(0, dtype="f64", shape=(2,))
            with self.assertRaises(hirnode.InvalidArgumentError):
                rt.alloc(0, 3, dtype="f32", shape=(2,))
            with self.assertRaises(hirnode.OutOfMemoryError) as cm:
                rt.alloc(0, 1 << 50)
            self.assertIn("cannot allocate", str(cm.exception))
            with self.assertRaises(hirnode.InvalidArgumentError):
                rt.mem_info(5)
            rt.free(buf)
            buf.free()
            self.assertIn("freed", repr(buf))
            for call in (lambda: rt.upload(buf, x), lambda: rt.download(buf)):
                with self.assertRaises(hirnode.ClosedError):
                    call()
            with backend_runtime(1) as other:
                with self.assertRaises(hirnode.InvalidArgumentError):
                    other.upload(typed, np.zeros(4, np.int64))

    def test_buffers_collected_are_given_back(self):
        with backend_runtime(1) as rt:
            free0, _ = rt.mem_info(0)
            for _ in range(50):
                rt.alloc(0, 1 << 20)  # dropped at once: queued, freed by the next call that may free
            rt.sync()
            free1, _ = rt.mem_info(0)
            self.assertEqual(free0, free1)
            s = rt.stream_create(0)
            h = s.handle
            del s
            rt.sync()
            self.assertNotIn(h, rt._s.streams[0])


if __name__ == "__main__":
    unittest.main()
