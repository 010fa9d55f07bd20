"""Binding tensors without copies: NumPy arrays, Buffers, DLPack capsules (legacy and versioned),
__cuda_array_interface__ and __array_interface__ objects; every refusal (dtype, shape, device,
contiguity, read-only outputs, names, counts) names the tensor, the rank and what was expected,
and comes before the C call."""

import unittest

from helpers import (COPY, DTYPES, MLP, ArrayInterface, FakeCAI, FakeCAIWithDevice, FakeDLPack, OnlyDLPack,
                     backend_runtime, bf16_bits, bf16_value, gathered, hirnode, mlp_inputs, np, rng)


def copy_bindings(world, n=64, seed=0):
    x = [rng(seed + r).standard_normal(n).astype(np.float32) for r in range(world)]
    y = [np.full(n, np.nan, np.float32) for _ in range(world)]
    return x, y


class RefusalTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.rt = backend_runtime(2)
        cls.p = hirnode.Program.parse(MLP, "mlp.hir")

    @classmethod
    def tearDownClass(cls):
        cls.rt.close()

    def refused(self, bindings, pattern, name=None, rank=None, call="run"):
        """Every entry point refuses the same way, and nothing ran (Y still poisoned)."""
        for how in ("run", "launch", "capture"):
            with self.subTest(how=how), self.assertRaises(hirnode.BindingError) as cm:
                getattr(self.rt, how)(self.p, bindings)
            self.assertRegex(str(cm.exception), pattern)
            self.assertTrue(str(cm.exception).startswith("mlp.hir: error: "), str(cm.exception))
            self.assertIsInstance(cm.exception, ValueError)
            self.assertEqual(cm.exception.status, -2)
            if name is not None:
                self.assertEqual(cm.exception.name, name)
            if rank is not None:
                self.assertEqual(cm.exception.rank, rank)
        ys = bindings.get("Y")
        if isinstance(ys, list) and all(isinstance(y, np.ndarray) for y in ys):
            self.assertTrue(all(np.isnan(y).all() for y in ys))
        self.rt.sync()

    def test_wrong_dtype(self):
        b, _ = mlp_inputs(2)
        b["W1"][1] = b["W1"][1].astype(np.float64)
        self.refused(b, r"binding 'W1' on rank 1: expected f32\[8, 8\], got a NumPy array of float64\[8, 8\]: "
                        r"wrong dtype", "W1", 1)
        b, _ = mlp_inputs(2)
        b["X"][0] = b["X"][0].astype(np.float16)
        self.refused(b, r"'X' on rank 0: expected f32\[8, 8\], got a NumPy array of f16\[8, 8\]")
        b, _ = mlp_inputs(2)
        b["X"][0] = b["X"][0].astype(">f4")  # the right type, the wrong byte order
        self.refused(b, r"'X' on rank 0: expected f32\[8, 8\], got a NumPy array of >f4\[8, 8\]")

    def test_wrong_shape(self):
        b, _ = mlp_inputs(2)
        b["X"][1] = np.zeros((16, 8), np.float32)  # the global tensor, not the rank's shard
        self.refused(b, r"binding 'X' on rank 1: expected f32\[8, 8\] \(the rank's shard\), got a NumPy array of "
                        r"f32\[16, 8\]: wrong shape", "X", 1)
        b, _ = mlp_inputs(2)
        b["Y"][0] = np.full(64, np.nan, np.float32)  # the same bytes, flat
        self.refused(b, r"'Y' on rank 0: expected f32\[8, 8\].*f32\[64\]: wrong shape")

    def test_not_contiguous(self):
        b, _ = mlp_inputs(2)
        b["W2"][0] = np.asfortranarray(b["W2"][0])
        self.refused(b, r"binding 'W2' on rank 0: a NumPy array of f32\[8, 8\] is not contiguous", "W2", 0)
        b, _ = mlp_inputs(2)
        big = np.zeros((8, 16), np.float32)
        b["X"][1] = big[:, ::2]  # every other column: the right shape, with gaps
        self.refused(b, r"'X' on rank 1: .* is not contiguous")

    def test_read_only_output(self):
        b, _ = mlp_inputs(2)
        b["Y"][1].flags.writeable = False
        self.refused(b, r"binding 'Y' on rank 1: a NumPy array of f32\[8, 8\] is read-only, and 'Y' is an output")
        b, _ = mlp_inputs(2)
        for x in b["X"]:
            x.flags.writeable = False  # inputs may be read-only
        self.rt.run(self.p, b)

    def test_wrong_device(self):
        b, _ = mlp_inputs(2)
        b["X"][1] = FakeDLPack(b["X"][1], device=(2, 1))
        self.refused(b, r"binding 'X' on rank 1: a DLPack tensor \(FakeDLPack\) of f32\[8, 8\] on cuda:1, but the "
                        r"host backend takes host memory", "X", 1)
        b, _ = mlp_inputs(2)
        b["X"][0] = FakeCAIWithDevice(b["X"][0], (2, 0))
        self.refused(b, r"'X' on rank 0: a FakeCAIWithDevice \(__cuda_array_interface__\) of f32\[8, 8\] on cuda:0, "
                        r"but the host backend")

    def test_names_and_counts(self):
        b, _ = mlp_inputs(2)
        del b["W2"]
        self.refused(b, r"no binding for input 'W2' \(every input and output is bound: X, W1, W2, Y\)", "W2")
        b, _ = mlp_inputs(2)
        b["Z"] = b["X"]
        self.refused(b, r"'Z' is no input or output of the program", "Z")
        b, _ = mlp_inputs(2)
        b["Y"] = None
        self.refused(b, r"no binding for output 'Y'")
        b, _ = mlp_inputs(2)
        b["X"] = b["X"][:1]
        self.refused(b, r"binding 'X': a list of 2 tensors \(one per rank\), got 1")
        b, _ = mlp_inputs(2)
        b["X"] = b["X"][0]
        self.refused(b, r"binding 'X': a list of 2 tensors \(one per rank\), got a ndarray")
        b, _ = mlp_inputs(2)
        b["W1"][0] = [[1.0] * 8] * 8
        self.refused(b, r"binding 'W1' on rank 0: a builtins.list is no tensor hirnode can bind")
        with self.assertRaises(hirnode.BindingError):
            self.rt.run(self.p, [("X", 1)])
        with self.assertRaises(hirnode.BindingError):
            self.rt.run(self.p, None)

    def test_numpy_loaded_after_the_configuration(self):
        b, ref = mlp_inputs(2, 11)
        self.rt.run(self.p, b)
        for cfg in self.rt._s.configs.values():
            for slot in cfg.slots:
                slot.np_dtype = None  # as if NumPy had come later
        self.rt.run(self.p, b)
        np.testing.assert_allclose(gathered(b["Y"]), ref, rtol=1e-4, atol=1e-4)
        b["X"][0] = b["X"][0].astype(np.float64)
        for cfg in self.rt._s.configs.values():
            for slot in cfg.slots:
                slot.np_dtype = None
        with self.assertRaises(hirnode.BindingError) as cm:
            self.rt.run(self.p, b)
        self.assertIn("got a NumPy array of float64[8, 8]: wrong dtype", str(cm.exception))

    def test_refusal_then_success(self):
        b, ref = mlp_inputs(2, 4)
        good = b["W1"][1]
        b["W1"][1] = good.astype(np.float64)
        with self.assertRaises(hirnode.BindingError):
            self.rt.launch(self.p, b)
        b["W1"][1] = good
        self.rt.launch(self.p, b)
        self.rt.sync()
        np.testing.assert_allclose(gathered(b["Y"]), ref, rtol=1e-4, atol=1e-4)


class BufferTest(unittest.TestCase):
    def test_buffers_bound_and_checked(self):
        p = hirnode.Program.parse(COPY, "c.hir")
        with backend_runtime(2) as rt:
            x, _ = copy_bindings(2)
            xb = [rt.alloc(r, dtype="f32", shape=(64,)) for r in range(2)]
            yb = [rt.alloc(r, 64 * 4) for r in range(2)]  # untyped: the library checks the size
            for r in range(2):
                rt.upload(xb[r], x[r])
                rt.upload(yb[r], np.full(64, np.nan, np.float32))
            rt.run(p, {"X": xb, "Y": yb})
            for r in range(2):
                np.testing.assert_array_equal(rt.download(yb[r]).view(np.float32), x[r])
            # a numpy output next to a buffer output on the other rank: each its own size
            y0 = np.full(64, np.nan, np.float32)
            rt.run(p, {"X": xb, "Y": [y0, yb[1]]})
            np.testing.assert_array_equal(y0, x[0])
            with self.assertRaises(hirnode.BindingError) as cm:
                rt.run(p, {"X": [xb[1], xb[0]], "Y": yb})
            self.assertIn("binding 'X' on rank 0: a Buffer of rank 1", str(cm.exception))
            small = rt.alloc(1, 16)
            with self.assertRaises(hirnode.InvalidArgumentError) as cm:
                rt.run(p, {"X": xb, "Y": [yb[0], small]})
            self.assertNotIsInstance(cm.exception, hirnode.BindingError)  # the library's check
            self.assertIn("binding 'Y' on rank 1: 256 bytes needed (f32[64]), 16 given", str(cm.exception))
            wrong = rt.alloc(0, dtype="i32", shape=(64,))
            with self.assertRaises(hirnode.BindingError) as cm:
                rt.run(p, {"X": [wrong, xb[1]], "Y": yb})
            self.assertIn("expected f32[64], got a Buffer of i32[64]", str(cm.exception))
            yb[1].free()
            with self.assertRaises(hirnode.BindingError) as cm:
                rt.run(p, {"X": xb, "Y": yb})
            self.assertIn("'Y' on rank 1: the Buffer was freed", str(cm.exception))
            with backend_runtime(2) as other:
                with self.assertRaises(hirnode.BindingError) as cm:
                    other.run(p, {"X": xb, "Y": [yb[0], yb[0]]})
                self.assertIn("another runtime", str(cm.exception))


class InteropTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.rt = backend_runtime(2)
        cls.copy = hirnode.Program.parse(COPY, "c.hir")
        cls.dtypes = hirnode.Program.parse(DTYPES, "dtypes.hir")

    @classmethod
    def tearDownClass(cls):
        cls.rt.close()

    def test_dlpack_of_numpy(self):
        x, y = copy_bindings(2, seed=3)
        self.rt.run(self.copy, {"X": [OnlyDLPack(a) for a in x], "Y": [OnlyDLPack(a) for a in y]})
        for r in range(2):
            np.testing.assert_array_equal(x[r], y[r])
        with self.assertRaises(hirnode.BindingError) as cm:
            self.rt.run(self.copy, {"X": [OnlyDLPack(np.zeros((64, 2), np.float32)[:, 0])] * 2, "Y": y})
        self.assertIn("a DLPack tensor (OnlyDLPack) of f32[64] is not contiguous", str(cm.exception))

    def test_fake_dlpack(self):
        for versioned in (False, True):
            with self.subTest(versioned=versioned):
                x, y = copy_bindings(2, seed=4)
                fx = [FakeDLPack(a, versioned=versioned) for a in x]
                fy = [FakeDLPack(a, versioned=versioned) for a in y]
                self.rt.run(self.copy, {"X": fx, "Y": fy})
                for r in range(2):
                    np.testing.assert_array_equal(x[r], y[r])
                self.assertEqual(fx[0].calls, [None])  # a host tensor: __dlpack__() without a stream
        # a byte offset into a larger block, strides that say row-major, a size-1 axis with any stride
        base = rng(6).standard_normal(80).astype(np.float32)
        x = [FakeDLPack(base[16:], shape=(64,), byte_offset=64)] * 2
        _, y = copy_bindings(2)
        self.rt.run(self.copy, {"X": x, "Y": [FakeDLPack(a, strides=(1,)) for a in y]})
        np.testing.assert_array_equal(y[1], base[16:])
        # refusals: dtype, shape, strides, read-only output, a capsule used already
        _, y = copy_bindings(2)
        cases = [(FakeDLPack(y[0], dtype="f64"), r"expected f32\[64\], got a DLPack tensor \(FakeDLPack\) of dlpack\(code 2, bits 64, "
                                                  r"lanes 1\)\[64\]: wrong dtype"),
                 (FakeDLPack(y[0], shape=(8, 8)), r"expected f32\[64\] .*f32\[8, 8\]: wrong shape"),
                 (FakeDLPack(y[0], strides=(2,), shape=(64,)), r"is not contiguous"),
                 (FakeDLPack(y[0], versioned=True, read_only=True), r"is read-only, and 'Y' is an output"),
                 (FakeDLPack(y[0], device=(13, 0)), r"on cuda_managed:0, but the host backend")]
        for t, pattern in cases:
            with self.subTest(pattern=pattern), self.assertRaises(hirnode.BindingError) as cm:
                self.rt.run(self.copy, {"X": x, "Y": [t, y[1]]})
            self.assertRegex(str(cm.exception), "binding 'Y' on rank 0: .*" + pattern)
        self.assertTrue(np.isnan(y[1]).all())

        class Used:
            def __dlpack__(self, stream=None):
                cap = FakeDLPack(y[0]).__dlpack__()
                import ctypes
                ctypes.pythonapi.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
                ctypes.pythonapi.PyCapsule_SetName(cap, b"used_dltensor")
                return cap
        with self.assertRaises(hirnode.BindingError) as cm:
            self.rt.run(self.copy, {"X": x, "Y": [Used(), y[1]]})
        self.assertIn("no unconsumed DLPack capsule", str(cm.exception))

    def test_bf16_through_dlpack_only(self):
        """bf16 in: DLPack says it; NumPy arrays of uint16 bits or __cuda_array_interface__ do not."""
        g = rng(8)
        vals = g.standard_normal(6).astype(np.float32)
        bits = bf16_bits(vals)
        h = g.standard_normal(6).astype(np.float16)
        i = g.integers(-1000, 1000, 6).astype(np.int32)
        l64 = g.integers(-2 ** 40, 2 ** 40, 6).astype(np.int64)
        outs = {"C": np.full(6, np.nan, np.float32), "H2": np.full(6, np.nan, np.float16),
                "I2": np.zeros(6, np.int32), "L2": np.zeros(6, np.int64)}
        b = {"A": [FakeDLPack(bits, dtype="bf16")] * 2, "H": [h] * 2, "I": [i] * 2, "L": [l64] * 2}
        per_rank = {k: [v, v.copy()] for k, v in outs.items()}
        self.rt.run(self.dtypes, {**b, **per_rank})
        for r in range(2):
            np.testing.assert_array_equal(per_rank["C"][r], bf16_value(bits))
            np.testing.assert_array_equal(per_rank["H2"][r], h + h)
            np.testing.assert_array_equal(per_rank["I2"][r], i + i)
            np.testing.assert_array_equal(per_rank["L2"][r], l64 + l64)
        with self.assertRaises(hirnode.BindingError) as cm:
            self.rt.run(self.dtypes, {**b, **per_rank, "A": [bits] * 2})
        self.assertIn("expected bf16[6], got a NumPy array of uint16[6]: wrong dtype (NumPy has no bfloat16",
                      str(cm.exception))
        with self.assertRaises(hirnode.BindingError) as cm:
            self.rt.run(self.dtypes, {**b, **per_rank, "A": [FakeCAI(bits, typestr="<V2")] * 2})
        self.assertIn("'A' is bf16, which __cuda_array_interface__ cannot say", str(cm.exception))
        with self.assertRaises(hirnode.BindingError) as cm:
            self.rt.run(self.dtypes, {**b, **per_rank, "A": [FakeDLPack(bits, dtype="f16")] * 2})
        self.assertIn("expected bf16[6], got a DLPack tensor (FakeDLPack) of f16[6]", str(cm.exception))

    def test_cuda_array_interface(self):
        x, y = copy_bindings(2)
        cases = [(FakeCAIWithDevice(y[0], (2, 0)), r"on cuda:0, but the host backend"),
                 (FakeCAIWithDevice(y[0], (2, 0), typestr="<f8"), r"of <f8\[64\]: wrong dtype"),
                 (FakeCAIWithDevice(y[0], (2, 0), strides=(8,)), r"is not contiguous"),
                 (FakeCAIWithDevice(y[0], (2, 0), readonly=True), r"is read-only")]
        for t, pattern in cases:
            with self.subTest(pattern=pattern), self.assertRaises(hirnode.BindingError) as cm:
                self.rt.run(self.copy, {"X": x, "Y": [t, y[1]]})
            self.assertRegex(str(cm.exception), pattern)
        # no device said: the CUDA runtime is asked. Without a GPU it cannot answer (refused); with
        # one it says host memory, which the host backend takes
        try:
            self.rt.run(self.copy, {"X": [FakeCAI(a) for a in x], "Y": y})
        except hirnode.BindingError as e:
            self.assertRegex(str(e), r"binding 'X' on rank 0: a FakeCAI \(__cuda_array_interface__\) of f32\[64\] on "
                                     r"an unknown device, but the host backend")
        else:
            for r in range(2):
                np.testing.assert_array_equal(x[r], y[r])

    def test_array_interface(self):
        x, y = copy_bindings(2, seed=9)
        self.rt.run(self.copy, {"X": [ArrayInterface(a, readonly=True) for a in x],
                                "Y": [ArrayInterface(a) for a in y]})
        for r in range(2):
            np.testing.assert_array_equal(x[r], y[r])
        with self.assertRaises(hirnode.BindingError) as cm:
            self.rt.run(self.copy, {"X": x, "Y": [ArrayInterface(y[0], readonly=True), y[1]]})
        self.assertIn("'Y' on rank 0: a ArrayInterface (__array_interface__) of f32[64] is read-only", str(cm.exception))
        with self.assertRaises(hirnode.BindingError) as cm:
            self.rt.run(self.copy, {"X": [ArrayInterface(np.zeros((64, 2), np.float32)[:, 1])] * 2, "Y": y})
        self.assertIn("is not contiguous", str(cm.exception))


if __name__ == "__main__":
    unittest.main()
